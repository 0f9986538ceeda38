//! Rules the corpus does not exercise, on writer output patched byte by byte.

use rasterpack_common::{Input, Limits, Severity};
use rasterpack_udf::{codes, validate, Hint, Prim, TableSpec, UdfEncoding, UdfFile, UdfWriter};
use serde_json::json;

fn build(tables: Vec<TableSpec>) -> Vec<u8> {
    let mut w = UdfWriter::new("CRFT").unwrap();
    let r = w.add_dataset("ROOT").unwrap();
    w.set_root(r);
    for t in tables {
        w.add(r, t).unwrap();
    }
    w.to_bytes().unwrap()
}

fn desc(bytes: &[u8], name: &str) -> usize {
    let f = UdfFile::open_strict(&Input::from_bytes("x", bytes.to_vec()), &Limits::default()).unwrap();
    f.find(name).unwrap().1.desc_offset as usize
}

fn data(bytes: &[u8], name: &str) -> usize {
    let f = UdfFile::open_strict(&Input::from_bytes("x", bytes.to_vec()), &Limits::default()).unwrap();
    f.find(name).unwrap().1.data_offset.unwrap() as usize
}

fn codes_of(bytes: Vec<u8>) -> Vec<(String, Severity)> {
    let doc = validate::validate(&Input::from_bytes("x", bytes), &Limits::default());
    doc.findings.iter().map(|f| (f.code.clone(), f.severity)).collect()
}

fn set_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn set_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn hints_reserved_32_line_and_flat_transform() {
    let base = build(vec![
        TableSpec::array("m", &[], &[0f32; 6]).with_hint(Hint::Custom(40), &[6])
    ]);
    let d = desc(&base, "m");
    let ti = |hint: u16, b: &[u8]| {
        let mut b = b.to_vec();
        set_u16(&mut b, d + 4, (hint << 8) | Prim::F32.bits());
        b
    };
    assert_eq!(
        codes_of(ti(10, &base)),
        vec![(codes::TABLE_RESERVED_HINT.into(), Severity::Error)]
    );
    assert_eq!(
        codes_of(ti(32, &base)),
        vec![(codes::TABLE_HINT_32.into(), Severity::Warning)]
    );
    assert_eq!(
        codes_of(ti(7, &base)),
        vec![(codes::HINT_LINE.into(), Severity::Warning)]
    );
    // TRANSFORM with one ghost axis of 6 (the reference crate's form): a warning.
    assert_eq!(
        codes_of(ti(8, &base)),
        vec![(codes::HINT_TRANSFORM_FLAT.into(), Severity::Warning)]
    );
}

#[test]
fn json_shape_duplicates_compression_checksums() {
    let base = build(vec![
        TableSpec::json_shaped("j", &json!([1, 2]), &[2]),
        TableSpec::array("a", &[1], &[1u8]),
        TableSpec::array("b", &[1], &[2u8]),
    ]);
    // JSON: shape [3] for a 2-element array.
    let mut b = base.clone();
    set_u32(&mut b, desc(&base, "j") + 0x14, 3);
    assert_eq!(codes_of(b), vec![(codes::JSON_SHAPE.into(), Severity::Error)]);
    // Two tables named "a": b's key_name := a's key_name.
    let mut b = base.clone();
    let ka = u32::from_le_bytes(base[desc(&base, "a")..desc(&base, "a") + 4].try_into().unwrap());
    set_u32(&mut b, desc(&base, "b"), ka);
    assert_eq!(codes_of(b), vec![(codes::TABLE_DUPLICATE_NAME.into(), Severity::Error)]);
    // compress_info, checksum and reserved.
    let mut b = base.clone();
    let da = desc(&base, "a");
    set_u16(&mut b, da + 6, 1);
    set_u32(&mut b, da + 0x28, 0xdead);
    set_u32(&mut b, da + 0x2C, 1);
    let c = codes_of(b.clone());
    assert!(c.contains(&(codes::TABLE_COMPRESSED.into(), Severity::Warning)));
    assert!(c.contains(&(codes::TABLE_CHECKSUM.into(), Severity::Info)));
    assert!(c.contains(&(codes::TABLE_RESERVED.into(), Severity::Warning)));
    assert!(c.iter().all(|x| x.1 != Severity::Error), "{c:?}");
    // Reading the compressed table is unsupported.
    let input = Input::from_bytes("c", b);
    let req = rasterpack_common::ArrayRequest {
        element: Some("root/a".into()),
        ..Default::default()
    };
    let e = rasterpack_common::Format::read_array(&rasterpack_udf::UdfFormat, &input, &req).unwrap_err();
    assert_eq!(e.kind, rasterpack_common::ErrorKind::Unsupported);
    // Duplicate lookup hash.
    let mut b = base.clone();
    let lk = 0x40 + 0x18 + 3 * 0x30;
    let h0 = u32::from_le_bytes(b[lk..lk + 4].try_into().unwrap());
    set_u32(&mut b, lk + 8, h0);
    assert!(codes_of(b).iter().any(|c| c.0 == codes::LOOKUP_DUPLICATE_HASH));
}

#[test]
fn text_encodings_are_strict() {
    let base = build(vec![
        TableSpec::text("u16", "ab", UdfEncoding::Utf16),
        TableSpec::text("u32", "ab", UdfEncoding::Utf32),
        TableSpec::text_list("l8", &["ab", "c"], UdfEncoding::Utf8),
    ]);
    let mut b = base.clone();
    set_u16(&mut b, data(&base, "u16"), 0xD800); // unpaired high surrogate
    assert_eq!(codes_of(b), vec![(codes::TEXT_INVALID.into(), Severity::Error)]);
    let mut b = base.clone();
    set_u32(&mut b, data(&base, "u32") + 4, 0xDC00); // a surrogate is not a scalar value
    assert_eq!(codes_of(b), vec![(codes::TEXT_INVALID.into(), Severity::Error)]);
    let mut b = base.clone();
    set_u32(&mut b, data(&base, "u32"), 0x11_0000);
    assert_eq!(codes_of(b), vec![(codes::TEXT_INVALID.into(), Severity::Error)]);
    // A multi-byte sequence split across two list rows is invalid (rows decode separately).
    let mut b = base.clone();
    let d = data(&base, "l8");
    b[d + 1] = 0xC3;
    b[d + 2] = 0xA9;
    assert_eq!(codes_of(b), vec![(codes::TEXT_INVALID.into(), Severity::Error)]);
}

#[test]
fn big_scalar_text_streams_across_chunks() {
    // 5 MiB of 3-byte characters: chunk boundaries split characters; still valid.
    let s: String = "\u{2713}".repeat((5 << 20) / 3);
    let bytes = build(vec![TableSpec::text("t", &s, UdfEncoding::Utf8)]);
    let path = std::env::temp_dir().join(format!("udf-bigtext-{}.udf", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let doc = validate::validate(&Input::open(&path).unwrap(), &Limits::default());
    assert!(doc.findings.is_empty(), "{:?}", doc.findings);
    // Break the very last character: found at its offset.
    let mut b = bytes.clone();
    let d = data(&bytes, "t") + s.len() - 1;
    b[d] = 0x41;
    std::fs::write(&path, &b).unwrap();
    let doc = validate::validate(&Input::open(&path).unwrap(), &Limits::default());
    let f: Vec<_> = doc.findings.iter().collect();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].code, codes::TEXT_INVALID);
    assert_eq!(f[0].offset, Some(d as u64 - 2));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn index_target_must_be_1d_and_found_in_parents() {
    let mut w = UdfWriter::new("IDX").unwrap();
    let r = w.add_dataset("ROOT").unwrap();
    let c = w.add_dataset("C").unwrap();
    w.set_root(r);
    w.add(r, TableSpec::array("grid", &[2, 2], &[0u8; 4])).unwrap();
    w.add(r, TableSpec::array("line", &[3], &[0u8; 3])).unwrap();
    w.add(r, TableSpec::link("c", Some(c))).unwrap();
    w.add(
        c,
        TableSpec::array("i", &[2], &[0u8, 2])
            .with_hint(Hint::Index, &[])
            .index_into("line"),
    )
    .unwrap();
    let base = w.to_bytes().unwrap();
    // Point the index at the 2-D grid: key of "grid" into index_name.
    let mut b = base.clone();
    let dg = desc(&base, "grid");
    let kg = u32::from_le_bytes(base[dg..dg + 4].try_into().unwrap());
    // The child dataset's lookup does not hold "grid": add it by reusing the "line" key's slot is
    // not possible, so patch the child's string "line" to "grid" instead.
    let pos = base.windows(4).rposition(|w| w == b"line").unwrap();
    b[pos..pos + 4].copy_from_slice(b"grid");
    // Its hash in the child lookup need not be the string hash.
    let _ = kg;
    assert_eq!(codes_of(b), vec![(codes::INDEX_TARGET_DIM.into(), Severity::Error)]);
}

#[test]
fn a_flood_of_one_finding_is_listed_up_to_a_count() {
    // 300 tables with a reserved type bit: 256 findings listed, the other 44 counted;
    // every table is still refused with the code.
    let tables = (0..300)
        .map(|i| TableSpec::array(&format!("t{i}"), &[1], &[i as u8]))
        .collect();
    let mut b = build(tables);
    let first = desc(&b, "t0");
    for k in 0..300 {
        b[first + 0x30 * k + 4] |= 0x40;
    }
    let doc = validate::validate(&Input::from_bytes("x", b.clone()), &Limits::default());
    let flood: Vec<_> = doc
        .findings
        .iter()
        .filter(|f| f.code == codes::TABLE_RESERVED_BITS)
        .collect();
    assert_eq!(flood.len(), validate::LISTED_PER_CODE);
    let omitted: Vec<_> = doc
        .findings
        .omitted()
        .iter()
        .map(|o| (o.code.as_str(), o.severity, o.count))
        .collect();
    assert_eq!(omitted, [(codes::TABLE_RESERVED_BITS, Severity::Error, 44)]);
    assert_eq!(doc.findings.count(Severity::Error), 300);
    let f = UdfFile::open_lenient(&Input::from_bytes("x", b), &Limits::default());
    for name in ["t0", "t299"] {
        let (ds, t) = f.find(name).unwrap();
        assert_eq!(f.array(ds, t).unwrap_err().code, codes::TABLE_RESERVED_BITS, "{name}");
    }
}

/// Issue 17 item 15: the reference crate's `build_string_array` of `n` empty strings writes a
/// 1-D TEXT table of shape `[n, 0]` with no data (and `mem_start == mem_end == 0`). Like its
/// empty list `[0, 0]`, it is valid with a compatibility warning (`--strict` rejects it), and
/// reads as `n` empty strings: the text list of `n` rows of width 0, the array `[n, 0]`.
#[test]
fn a_text_list_of_only_empty_strings_is_a_compatibility_warning() {
    let base = build(vec![
        TableSpec::text_list("l", &["", "", ""], UdfEncoding::Utf8),
        TableSpec::array("v", &[1], &[7u8]),
    ]);
    let d = desc(&base, "l");
    let mut b = base.clone();
    for field in [0x08, 0x0C, 0x10, 0x18] {
        // mem_start, mem_end, data_size, the packed y/z axes
        set_u32(&mut b, d + field, 0);
    }
    assert_eq!(
        codes_of(b.clone()),
        vec![(codes::TEXT_EMPTY_STRINGS_NO_GHOST.into(), Severity::Warning)]
    );
    let f = UdfFile::from_bytes(b.clone()).unwrap();
    let report = f.validate();
    assert!(
        report.is_valid(false) && !report.is_valid(true),
        "{:?}",
        report.findings
    );
    let (_, t) = f.find("root/l").unwrap();
    assert_eq!(
        f.text(t).unwrap(),
        rasterpack_udf::UdfText::List(vec![String::new(); 3])
    );
    let a = f.read(&rasterpack_udf::ArrayRequest::for_element("root/l")).unwrap();
    assert_eq!(
        (a.dtype, a.shape.clone(), a.data.len()),
        (rasterpack_udf::DType::U8, vec![3, 0], 0)
    );

    // With data bytes it is not that form: a 1-D text list of 3 bytes without a ghost axis
    // is still the hint error it always was.
    let mut with_data = base.clone();
    set_u32(&mut with_data, d + 0x18, 0);
    assert_eq!(
        codes_of(with_data),
        vec![(codes::HINT_GHOST_DIMS.into(), Severity::Error)]
    );

    // 2^32 - 1 empty strings: the same warning; decoding them is refused by the text limit
    // (a String per row), never cut short.
    set_u32(&mut b, d + 0x14, u32::MAX);
    assert_eq!(
        codes_of(b.clone()),
        vec![(codes::TEXT_EMPTY_STRINGS_NO_GHOST.into(), Severity::Warning)]
    );
    let f = UdfFile::from_bytes(b).unwrap();
    let (_, t) = f.find("root/l").unwrap();
    let e = f.text(t).unwrap_err();
    assert_eq!(e.code, "limit.text", "{e}");
}
