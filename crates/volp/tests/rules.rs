//! The header and body rules of specs/volp.md and the ERRATA VOLP table, one case each.

mod common;

use common::{decode, file, header, validate};
use rasterpack_volp::{Findings, Severity};

fn zstd(data: &[u8]) -> Vec<u8> {
    zstd::bulk::compress(data, 3).unwrap()
}

/// A zstd frame without a content size (streaming encoder).
fn zstd_streaming(data: &[u8]) -> Vec<u8> {
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    enc.include_contentsize(false).unwrap();
    std::io::Write::write_all(&mut enc, data).unwrap();
    enc.finish().unwrap()
}

const F4: &[u8] = &[0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64]; // 1 2 3 4 as f32

fn with_header(h: &str) -> Vec<u8> {
    file(h.as_bytes(), &zstd(F4))
}

fn errors(f: &Findings) -> Vec<&str> {
    f.iter()
        .filter(|x| x.severity == Severity::Error)
        .map(|x| x.code.as_str())
        .collect()
}
fn warnings(f: &Findings) -> Vec<&str> {
    f.iter()
        .filter(|x| x.severity == Severity::Warning)
        .map(|x| x.code.as_str())
        .collect()
}

#[track_caller]
fn assert_valid(data: &[u8]) -> Findings {
    let f = validate(data);
    assert!(errors(&f).is_empty(), "{:?}", f);
    decode(data).unwrap();
    f
}

#[track_caller]
fn assert_invalid(data: &[u8], code: &str) {
    let f = validate(data);
    assert!(errors(&f).contains(&code), "expected {code}, got {:?}", f);
    let e = decode(data).unwrap_err();
    assert!(!e.code.is_empty());
}

const BASE: &str = r#""shape":[1,1,4],"dtype":"float32""#;

#[test]
fn only_shape_and_dtype_are_required() {
    let f = assert_valid(&with_header(&format!("{{{BASE}}}")));
    // Missing compression is a warning; missing version/scale/offset are at most info.
    assert_eq!(warnings(&f), vec!["volp.compression.missing"]);
    let h = header(&with_header(&format!("{{{BASE}}}"))).unwrap();
    assert_eq!((h.version, h.scale, h.offset), (1, 1.0, 0.0));
}

#[test]
fn version_rules() {
    for (v, eff) in [
        ("1", 1),
        ("null", 1),
        ("0", 1),
        ("-5", 1),
        ("2", 2),
        ("3.0", 3),
        ("1e1", 10),
        ("-1e400", 1),
    ] {
        let d = with_header(&format!(r#"{{"version":{v},{BASE},"compression":"zstd"}}"#));
        let f = assert_valid(&d);
        assert!(warnings(&f).is_empty(), "{v}: {f:?}");
        assert_eq!(header(&d).unwrap().version, eff, "{v}");
    }
    for v in [r#""nope""#, r#""1""#, "true", "1.5", "[1]", "{}"] {
        assert_invalid(
            &with_header(&format!(r#"{{"version":{v},{BASE},"compression":"zstd"}}"#)),
            "volp.version.invalid",
        );
    }
}

/// A version larger than any u64 is reported as written (it was `18446744073709551615`), in the
/// note, the inspect rows and the JSON summary; it still decodes with the version 1 layout.
#[test]
fn a_version_beyond_u64_is_reported_as_itself() {
    for (v, json) in [
        ("1e400", serde_json::json!("1e400")),
        ("18446744073709551616", serde_json::json!("18446744073709551616")),
        ("18446744073709551615", serde_json::json!(18446744073709551615u64)),
        ("2", serde_json::json!(2)),
    ] {
        let d = with_header(&format!(r#"{{"version":{v},{BASE},"compression":"zstd"}}"#));
        let f = assert_valid(&d);
        let note = f.iter().find(|x| x.code == "volp.version.newer").expect("a note");
        assert_eq!(
            note.message,
            format!("version {v} is newer than 1: decoded with the version 1 layout")
        );
        let h = header(&d).unwrap();
        assert_eq!(h.version_text, v);
        assert_eq!(h.version_json(), json, "{v}");
        let input = rasterpack_common::Input::from_bytes("mem", d.clone());
        let report = rasterpack_common::Format::inspect(
            &rasterpack_volp::VolpFormat,
            &input,
            &rasterpack_common::InspectOptions::default(),
        )
        .unwrap();
        assert_eq!(report.summary["version"], json, "{v}");
        assert!(
            !format!("{:?}", report.sections).contains("18446744073709551615") || v.starts_with("18446744073709551615")
        );
    }
}

#[test]
fn scale_offset_defaults_with_warnings() {
    for (s, o) in [
        (r#""0.5""#, "null"),
        ("null", r#""abc""#),
        ("true", "[]"),
        ("1e400", "-1e999"),
    ] {
        let d = with_header(&format!(r#"{{{BASE},"compression":"zstd","scale":{s},"offset":{o}}}"#));
        let f = assert_valid(&d);
        assert_eq!(
            warnings(&f),
            vec!["volp.scale.invalid", "volp.offset.invalid"],
            "{s} {o}"
        );
        let h = header(&d).unwrap();
        assert_eq!((h.scale, h.offset), (1.0, 0.0));
    }
    let d = with_header(&format!(
        r#"{{{BASE},"compression":"zstd","scale":-0.0,"offset":1e-320}}"#
    ));
    let h = header(&d).unwrap();
    assert!(h.scale == 0.0 && h.scale.is_sign_negative() && h.offset == 1e-320);
}

#[test]
fn compression_is_case_insensitive_zstd_only() {
    for c in ["zstd", "ZSTD", "Zstd"] {
        let f = assert_valid(&with_header(&format!(r#"{{{BASE},"compression":"{c}"}}"#)));
        assert!(warnings(&f).is_empty());
    }
    for c in [
        r#""lz4""#,
        r#""none""#,
        r#""zstd ""#,
        r#""""#,
        "null",
        "1",
        r#"["zstd"]"#,
    ] {
        assert_invalid(
            &with_header(&format!(r#"{{{BASE},"compression":{c}}}"#)),
            "volp.compression.unknown",
        );
    }
}

#[test]
fn shape_rules() {
    for s in ["[1,1,4]", "[1.0,1,4.0]", "[1e0,10e-1,0.4e1]"] {
        assert_valid(&with_header(&format!(
            r#"{{"shape":{s},"dtype":"float32","compression":"zstd"}}"#
        )));
    }
    for s in [
        "[1,1,4.5]",
        r#"[1,"1",4]"#,
        "[1,true,4]",
        "[1,null,4]",
        "[0,1,4]",
        "[1,-1,4]",
        "[1,4]",
        "[1,1,1,4]",
        "[]",
        "4",
        r#""1,1,4""#,
        "{}",
        "[1,1,-0]",
        "[1,1,1e-400]",
    ] {
        assert_invalid(
            &with_header(&format!(r#"{{"shape":{s},"dtype":"float32","compression":"zstd"}}"#)),
            "volp.shape.invalid",
        );
    }
    // Products never wrap: 2^32 * 2^32 overflows u64.
    assert_invalid(
        &with_header(r#"{"shape":[4294967296,4294967296,1],"dtype":"uint8","compression":"zstd"}"#),
        "volp.shape.overflow",
    );
    assert_invalid(
        &with_header(r#"{"shape":[1,1,18446744073709551616],"dtype":"uint8","compression":"zstd"}"#),
        "volp.shape.invalid",
    );
    assert_invalid(
        &with_header(r#"{"dtype":"float32","compression":"zstd"}"#),
        "volp.shape.missing",
    );
}

#[test]
fn dtype_rules() {
    for d in ["f4", ">f4", "<f4", "Float32", "float16", "uint16", "int8", "bool", ""] {
        assert_invalid(
            &with_header(&format!(r#"{{"shape":[1,1,4],"dtype":"{d}","compression":"zstd"}}"#)),
            "volp.dtype.unsupported",
        );
    }
    assert_invalid(
        &with_header(r#"{"shape":[1,1,4],"dtype":4,"compression":"zstd"}"#),
        "volp.dtype.invalid",
    );
    assert_invalid(
        &with_header(r#"{"shape":[1,1,4],"compression":"zstd"}"#),
        "volp.dtype.missing",
    );
}

#[test]
fn header_bytes_rules() {
    let good = format!(r#"{{{BASE},"compression":"zstd"}}"#);
    // BOM, invalid UTF-8, NaN token, trailing NUL or garbage, duplicates (also nested).
    let mut bom = vec![0xEF, 0xBB, 0xBF];
    bom.extend_from_slice(good.as_bytes());
    assert_invalid(&file(&bom, &zstd(F4)), "volp.header.bom");
    let mut bad_utf8 = good.clone().into_bytes();
    bad_utf8.insert(good.len() - 2, 0xFF);
    assert_invalid(&file(&bad_utf8, &zstd(F4)), "volp.header.utf8");
    assert_invalid(
        &with_header(&format!(r#"{{{BASE},"compression":"zstd","scale":NaN}}"#)),
        "volp.header.json",
    );
    assert_invalid(&with_header(&format!("{good}\0")), "volp.header.json");
    assert_invalid(&with_header(&format!("{good}{{}}")), "volp.header.json");
    assert_invalid(&with_header(&format!("{good}\u{a0}")), "volp.header.json");
    assert_invalid(
        &with_header(&format!(r#"{{{BASE},"compression":"zstd","dtype":"float32"}}"#)),
        "volp.header.duplicate_key",
    );
    assert_invalid(
        &with_header(&format!(
            r#"{{{BASE},"compression":"zstd","bbox":{{"west":1,"west":2}}}}"#
        )),
        "volp.header.duplicate_key",
    );
    assert_invalid(&with_header("[1,1,4]"), "volp.header.not_object");
    assert_invalid(
        &with_header(&format!("{}{{}}{}", "[".repeat(200), "]".repeat(200))),
        "volp.header.depth",
    );
    // JSON whitespace around the object is fine.
    assert_valid(&with_header(&format!(" \r\n\t{good}\n\n ")));
}

#[test]
fn header_length_limits_are_inclusive() {
    // Exactly 1 MiB of header (padded with JSON whitespace) is accepted; one more byte is not.
    let good = format!(r#"{{{BASE},"compression":"zstd"}}"#);
    let mut h = good.clone().into_bytes();
    h.resize(1 << 20, b' ');
    assert_valid(&file(&h, &zstd(F4)));
    h.push(b' ');
    assert_invalid(&file(&h, &zstd(F4)), "volp.header.len_out_of_range");
    assert_invalid(&file(b"", &zstd(F4)), "volp.header.len_out_of_range");
}

#[test]
fn body_limit_is_checked_before_decompressing() {
    // 256 MiB exactly is allowed by the header rules (the body here is wrong, so the failure
    // comes from decoding, not from the limit); one byte more is refused up front.
    let at_limit = with_header(r#"{"shape":[256,1024,1024],"dtype":"uint8","compression":"zstd"}"#);
    let f = validate(&at_limit);
    assert!(!errors(&f).contains(&"volp.limit.body"), "{f:?}");
    assert!(errors(&f).contains(&"volp.body.size_mismatch"), "{f:?}");
    let over = with_header(r#"{"shape":[1,1,268435457],"dtype":"uint8","compression":"zstd"}"#);
    assert_invalid(&over, "volp.limit.body");
    assert_invalid(
        &with_header(r#"{"shape":[1,1,67108865],"dtype":"float32","compression":"zstd"}"#),
        "volp.limit.body",
    );
}

#[test]
fn body_frames() {
    let h = format!(r#"{{{BASE},"compression":"zstd"}}"#);
    let h = h.as_bytes();
    // Several frames, with and without content size, and skippable frames anywhere.
    let mut skip = vec![0x5A, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 9, 9, 9];
    let mut body = skip.clone();
    body.extend(zstd(&F4[..6]));
    body.extend(zstd_streaming(&F4[6..]));
    body.append(&mut skip);
    let v = decode(&file(h, &body)).unwrap();
    assert_eq!(v.data, F4);
    // Empty frames are fine.
    let mut body = zstd(b"");
    body.extend(zstd(F4));
    body.extend(zstd_streaming(b""));
    assert_eq!(decode(&file(h, &body)).unwrap().data, F4);
    // Trailing bytes after the last frame (zeros, a partial magic, junk).
    for tail in [&[0u8][..], &[0, 0, 0, 0], &[0x28, 0xB5], b"junk!"] {
        let mut body = zstd(F4);
        body.extend_from_slice(tail);
        assert_invalid(&file(h, &body), "volp.body.trailing_bytes");
    }
    // A truncated skippable frame, only skippable frames, an empty body, too short, too long.
    let mut body = zstd(F4);
    body.extend_from_slice(&[0x50, 0x2A, 0x4D, 0x18, 10, 0, 0, 0, 1]);
    assert_invalid(&file(h, &body), "volp.body.decompress");
    assert_invalid(&file(h, &[0x50, 0x2A, 0x4D, 0x18, 0, 0, 0, 0]), "volp.body.decompress");
    assert_invalid(&file(h, b""), "volp.body.empty");
    assert_invalid(&file(h, &zstd(&F4[..15])), "volp.body.size_mismatch");
    assert_invalid(&file(h, &zstd_streaming(&[F4, F4].concat())), "volp.body.size_mismatch");
    let mut two = zstd(F4);
    two.extend(zstd(F4));
    assert_invalid(&file(h, &two), "volp.body.size_mismatch");
    // A corrupted checksum is a decompression failure.
    let mut enc = zstd::bulk::Compressor::new(3).unwrap();
    enc.include_checksum(true).unwrap();
    let mut c = enc.compress(F4).unwrap();
    let n = c.len();
    c[n - 1] ^= 0xFF;
    assert_invalid(&file(h, &c), "volp.body.decompress");
}

#[test]
fn prefix_rules() {
    assert_invalid(b"", "volp.prefix.truncated");
    assert_invalid(b"VO", "volp.prefix.truncated");
    assert_invalid(b"VOLP\x01\x00", "volp.prefix.truncated");
    assert_invalid(b"VOLX\x01\x00\x00\x00{", "volp.magic");
    assert_invalid(b"X", "volp.magic");
    assert_invalid(b"VOLP\xff\x00\x00\x00{}", "volp.header.truncated");
}

#[test]
fn metadata_is_shown_never_enforced() {
    let d = with_header(
        r#"{"shape":[1,1,4],"dtype":"float32","compression":"zstd","levels":[1,2,3],"bbox":"x","variable":7,"valid_time":null,"extra":{"a":[1,2]}}"#,
    );
    let f = assert_valid(&d);
    assert!(f.iter().all(|x| x.severity == Severity::Info), "{f:?}");
    assert!(f.has_code("volp.metadata.levels_len"));
    let h = header(&d).unwrap();
    assert_eq!(h.metadata.levels, Some(serde_json::json!([1, 2, 3])));
    assert_eq!(h.unknown["extra"], serde_json::json!({"a": [1, 2]}));
}

#[test]
fn all_findings_are_collected() {
    let d = with_header(r#"{"version":"x","shape":[0,1],"dtype":"f4","compression":"gzip","scale":"1"}"#);
    let f = validate(&d);
    let e = errors(&f);
    for c in [
        "volp.version.invalid",
        "volp.shape.invalid",
        "volp.dtype.unsupported",
        "volp.compression.unknown",
    ] {
        assert!(e.contains(&c), "{c} missing from {f:?}");
    }
    assert!(warnings(&f).contains(&"volp.scale.invalid"));
    // With a broken header the body structure is still checked.
    let mut d = with_header(r#"{"shape":[0,1,1],"dtype":"uint8"}"#);
    d.extend_from_slice(b"xx");
    assert!(validate(&d).has_code("volp.body.trailing_bytes"));
}

#[test]
fn a_body_of_exactly_256_mib_decodes() {
    let data = vec![7u8; 256 << 20];
    let file = common::encode(
        rasterpack_volp::DType::U8,
        [256, 1024, 1024],
        &data,
        1.0,
        0.0,
        &serde_json::Map::new(),
        1,
    )
    .unwrap();
    drop(data);
    let v = decode(&file).unwrap();
    assert_eq!(v.data.len(), 256 << 20);
    assert!(v.data.iter().all(|&b| b == 7));
}

#[test]
fn caller_limits_are_honoured() {
    use rasterpack_volp::{ArrayRequest, ErrorKind, Limits};
    let d = with_header(&format!(r#"{{{BASE},"compression":"zstd"}}"#));
    // The array limit and the allocation limit of an in-memory read are checked before the
    // array is allocated.
    let req = ArrayRequest::default().with_limits(Limits {
        max_array_bytes: 8,
        ..Limits::default()
    });
    let e = common::read(&d, &req).unwrap_err();
    assert_eq!((e.kind, e.code.as_ref()), (ErrorKind::LimitExceeded, "limit.array"));
    let req = ArrayRequest::default().with_limits(Limits {
        max_alloc: 8,
        ..Limits::default()
    });
    let e = common::read(&d, &req).unwrap_err();
    assert_eq!((e.kind, e.code.as_ref()), (ErrorKind::LimitExceeded, "limit.alloc"));
    // A region within the limits reads.
    let region = rasterpack_volp::Region::from_start_size(&[0, 0, 1], &[1, 1, 2]).unwrap();
    let part = common::read(&d, &req.clone().with_region(region)).unwrap();
    assert_eq!(part.to_vec::<f32>().unwrap(), [2.0, 3.0]);
    // The header text limit.
    let tiny_text = Limits {
        max_text: 4,
        ..Limits::default()
    };
    let e = common::read(&d, &ArrayRequest::default().with_limits(tiny_text)).unwrap_err();
    assert_eq!(e.code, "volp.limit.header");
    assert!(common::validate_with(&d, &tiny_text).has_code("volp.limit.header"));
    // Validation holds no decoded body, so a small allocation limit does not stop it.
    let small = Limits {
        max_alloc: 8,
        ..Limits::default()
    };
    assert!(!common::validate_with(&d, &small).has_errors());
}
