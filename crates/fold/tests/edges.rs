//! The FOLD edges of issue 11, where rasterpack and pyfolds 1.0.2 disagreed: non-ASCII NPZ
//! member names, text the writer cannot hold, control characters in a ctype, structured
//! dtypes, chunk names with `/`, and rs(N) ECC over payloads longer than one block. The files
//! pyfolds wrote are read from `$RASTERPACK_CORPUS/edges/fold` (skipped when it is unset).

use std::path::PathBuf;

use rasterpack_common::{ArrayRequest, DType, ErrorKind, Format, Input, NdArray, Severity, ValidateOptions};
use rasterpack_fold::pjson::{self, Value};
use rasterpack_fold::{
    analyze, ecc, npz, FoldAnalyzeOptions, FoldBuilder, FoldChunkOptions, FoldCompression, FoldContent, FoldFormat,
};

fn edges() -> Option<PathBuf> {
    rasterpack_common::testkit::corpus_dir("edges/fold")
}

fn f64s(values: &[f64]) -> NdArray {
    NdArray::new(
        DType::F64,
        vec![values.len() as u64],
        values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    )
    .unwrap()
}

fn read(input: &Input, element: &str) -> rasterpack_common::Result<NdArray> {
    FoldFormat.read_array(
        input,
        &ArrayRequest {
            element: Some(element.into()),
            ..Default::default()
        },
    )
}

fn strict_valid(input: &Input) {
    let r = FoldFormat.validate(input, &ValidateOptions::default());
    assert!(r.is_valid(true) && !r.unsupported, "{:?}", r.findings);
}

const STORED: FoldChunkOptions = FoldChunkOptions {
    compression: FoldCompression::None,
    ecc: None,
};

/// Offsets of the (local header, central directory entry) of the first zip member.
fn zip_headers(z: &[u8]) -> (usize, usize) {
    let cd = (0..z.len() - 4)
        .find(|&p| z[p..p + 4] == [0x50, 0x4b, 0x01, 0x02])
        .unwrap();
    (0, cd)
}

#[test]
fn non_ascii_member_names_carry_the_utf8_flag() {
    let a = f64s(&[1.0, 2.0]);
    let z = npz::write(&[("\u{e9}", &a), ("plain", &a)]);
    let (local, cd) = zip_headers(&z);
    // General-purpose flags: local header +6, central directory entry +8. Bit 11 = UTF-8.
    assert_eq!(u16::from_le_bytes([z[local + 6], z[local + 7]]), 0x0800);
    assert_eq!(u16::from_le_bytes([z[cd + 8], z[cd + 9]]), 0x0800);
    let second_cd = cd + 46 + "\u{e9}.npy".len();
    assert_eq!(
        u16::from_le_bytes([z[second_cd + 8], z[second_cd + 9]]),
        0,
        "ASCII names stay flag 0"
    );
    let names: Vec<String> = npz::members(&z, &Default::default())
        .unwrap()
        .into_iter()
        .map(|m| m.name)
        .collect();
    assert_eq!(names, ["\u{e9}.npy", "plain.npy"]);

    // Through the builder: the array reads back under its name.
    let mut b = FoldBuilder::new();
    b.add_npz("nuclear_arrays", &[("\u{e9}", &a), ("\u{6e29}\u{1F600}", &a)], STORED)
        .unwrap();
    let input = Input::from_bytes("names.fold", b.to_bytes().unwrap());
    strict_valid(&input);
    assert_eq!(read(&input, "nuclear_arrays/\u{6e29}\u{1F600}").unwrap().data, a.data);

    // Without the flag, Python's zipfile decodes the same bytes as CP437: "é" is "├⌐".
    let mut z = npz::write(&[("\u{e9}", &a)]);
    let (local, cd) = zip_headers(&z);
    z[local + 7] = 0;
    z[cd + 9] = 0;
    let names: Vec<String> = npz::members(&z, &Default::default())
        .unwrap()
        .into_iter()
        .map(|m| m.name)
        .collect();
    assert_eq!(names, ["\u{251c}\u{2310}.npy"]);
    assert_eq!(npz::decode_name(&[0x80, 0xff, b'a'], 0).unwrap(), "\u{c7}\u{a0}a");
    // The flag on bytes that are not UTF-8 is an error, as in Python.
    let mut z = npz::write(&[("\u{e9}", &a)]);
    let (_, cd) = zip_headers(&z);
    z[cd + 46] = 0xff;
    assert!(npz::members(&z, &Default::default()).is_err());
}

#[test]
fn the_writer_refuses_text_it_cannot_hold() {
    let lone = pjson::parse(br#"{"a":["ok","\ud800"]}"#, 8).unwrap();
    let lone_key = pjson::parse(br#"{"\udc00":1}"#, 8).unwrap();
    let mut b = FoldBuilder::new();
    for v in [&lone, &lone_key] {
        let e = b.metadata("k", v.clone()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Usage);
        assert!(e.message.contains("surrogate"), "{}", e.message);
        let e = b.add_json("j", v, FoldChunkOptions::default()).unwrap_err();
        assert!(e.message.contains("surrogate"), "{}", e.message);
    }
    // A repeated key (a Python dict keeps one), a malformed int, nesting past the readers.
    let dup = Value::Object(vec![
        (pjson::JStr::new("x"), Value::int(1)),
        (pjson::JStr::new("x"), Value::int(2)),
    ]);
    assert!(b.add_json("j", &dup, STORED).unwrap_err().message.contains("twice"));
    for digits in ["", "01", "-0", "1e5", "12a", "--1"] {
        let e = b.metadata("k", Value::Int(digits.into())).unwrap_err();
        assert!(e.message.contains("decimal integer"), "{digits}: {}", e.message);
    }
    let mut deep = Value::int(0);
    for _ in 0..600 {
        deep = Value::Array(vec![deep]);
    }
    assert!(b.add_json("j", &deep, STORED).unwrap_err().message.contains("deeper"));
    // Raw payloads of the checked types must be what the validator accepts.
    assert!(b.add_chunk("j", "JSON", b"{\"a\":", STORED).is_err());
    assert!(b.add_chunk("z", "NPZ0", b"PK not a zip", STORED).is_err());
    let a = f64s(&[1.0]);
    assert!(b.add_npz("z", &[("a", &a), ("a", &a)], STORED).is_err());
    assert!(b.add_npz("z", &[("a\0b", &a)], STORED).is_err());
    b.version = "9.9.9".into();
    assert!(b.to_bytes().is_err());
    b.version = "1.2.0".into();
    // Nothing refused was added: what is left writes a strictly valid, empty file.
    let input = Input::from_bytes("e", b.to_bytes().unwrap());
    strict_valid(&input);
    assert!(analyze(&input, &FoldAnalyzeOptions::default())
        .unwrap()
        .chunks
        .is_empty());

    // What Python can hold is written and read back exactly (manifest hash included).
    let fine = pjson::parse(
        "{\"s\":\"\\u0000\\u001f\\u007f\u{e9}\u{1F600}\\ud83d\\ude00\",\"n\":[NaN,-Infinity,-0.0,1e-07,123456789012345678901234567890]}"
            .as_bytes(),
        8,
    )
    .unwrap();
    let mut b = FoldBuilder::new();
    b.metadata("m", fine.clone()).unwrap();
    b.add_json("j", &fine, FoldChunkOptions::default()).unwrap();
    let input = Input::from_bytes("fine", b.to_bytes().unwrap());
    strict_valid(&input);
    let a = analyze(
        &input,
        &FoldAnalyzeOptions {
            content: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(a.manifest_ok, Some(true));
    let back = a.container.unwrap().index.metadata.get("m").cloned().unwrap();
    let same = |x: &Value| pjson::dumps(x, true, pjson::Ascii::Escape);
    assert_eq!(same(&back), same(&fine));
    match &a.chunks[0].content {
        FoldContent::Json(v) => assert_eq!(same(v), same(&fine)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn control_characters_in_a_ctype_are_the_same_four_characters_in_header_and_index() {
    let mut b = FoldBuilder::new();
    b.add_chunk("c", "A\u{0}\u{1}B", b"x", STORED).unwrap();
    let bytes = b.to_bytes().unwrap();
    assert_eq!(&bytes[28..32], b"A\x00\x01B");
    let text = String::from_utf8_lossy(&bytes[28 + 33..]).into_owned();
    assert!(text.contains(r#""ctype":"A\u0000\u0001B""#), "{text}");
    let input = Input::from_bytes("c", bytes.clone());
    strict_valid(&input);
    // Header and index disagreeing in one control character is still a mismatch.
    let mut bad = bytes;
    bad[30] = 2;
    let r = FoldFormat.validate(&Input::from_bytes("bad", bad), &ValidateOptions::default());
    assert!(r.findings.has_code("fold.chunk.header_mismatch"), "{:?}", r.findings);
}

#[test]
fn pyfolds_edge_files() {
    let Some(dir) = edges() else { return };
    // r2: ctype A\0\1B in both places: valid.
    let input = Input::open(dir.join("r2_ctype_ctl_pyfolds.fold")).unwrap();
    strict_valid(&input);

    // r1: a structured-dtype member beside a float64 one.
    let input = Input::open(dir.join("r1_npz_structured.fold")).unwrap();
    let r = FoldFormat.validate(&input, &ValidateOptions::default());
    assert!(r.is_valid(true) && r.unsupported, "{:?}", r.findings);
    let info: Vec<_> = r.findings.iter().map(|f| (f.severity, f.code.as_str())).collect();
    assert_eq!(info, [(Severity::Info, "fold.payload.npz_dtype_unsupported")]);
    let ok = read(&input, "nuclear_arrays/ok").unwrap();
    assert_eq!((ok.dtype, ok.to_f64()), (DType::F64, vec![1.5]));
    assert_eq!(read(&input, "ok").unwrap().to_f64(), vec![1.5]);
    assert_eq!(
        read(&input, "nuclear_arrays/rec").unwrap_err().kind,
        ErrorKind::Unsupported
    );

    // r3: chunk "a/b" holding array "v".
    let input = Input::open(dir.join("r3_chunkname_slash.fold")).unwrap();
    strict_valid(&input);
    let v = read(&input, "a/b/v").unwrap();
    assert_eq!(read(&input, r#"["a/b","v"]"#).unwrap(), v);
    assert_eq!(read(&input, "v").unwrap(), v);
    assert_eq!(FoldFormat.read_array(&input, &ArrayRequest::default()).unwrap(), v);
    for wrong in ["a/v", "b/v", r#"["a","b/v"]"#, "a/b/w"] {
        assert_eq!(read(&input, wrong).unwrap_err().kind, ErrorKind::Usage, "{wrong}");
    }
}

#[test]
fn element_names_with_slashes_are_unambiguous() {
    let (one, two, three) = (f64s(&[1.0]), f64s(&[2.0]), f64s(&[3.0]));
    let mut b = FoldBuilder::new();
    b.add_npz("a", &[("b/v", &one)], STORED).unwrap();
    b.add_npz("a/b", &[("v", &two), ("w", &three)], STORED).unwrap();
    let input = Input::from_bytes("slash.fold", b.to_bytes().unwrap());
    strict_valid(&input);
    // "a/b/v" means array "b/v" of "a" or array "v" of "a/b": refused, naming both exactly.
    let e = read(&input, "a/b/v").unwrap_err();
    assert_eq!(e.kind, ErrorKind::Usage);
    assert!(
        e.message.contains(r#"["a","b/v"]"#) && e.message.contains(r#"["a/b","v"]"#),
        "{}",
        e.message
    );
    assert_eq!(read(&input, r#"["a","b/v"]"#).unwrap().to_f64(), [1.0]);
    assert_eq!(read(&input, r#"["a/b","v"]"#).unwrap().to_f64(), [2.0]);
    // Unambiguous splits and bare names still work.
    assert_eq!(read(&input, "a/b/w").unwrap().to_f64(), [3.0]);
    assert_eq!(read(&input, "w").unwrap().to_f64(), [3.0]);
    assert_eq!(read(&input, "b/v").unwrap().to_f64(), [1.0]);
    // The listing names each array in a form that selects it.
    let e = FoldFormat.read_array(&input, &ArrayRequest::default()).unwrap_err();
    assert!(
        e.message.contains(r#"["a","b/v"]"#) && e.message.contains("a/b/w"),
        "{}",
        e.message
    );
}

fn lcg(seed: &mut u64) -> usize {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (*seed >> 33) as usize
}

#[test]
fn multi_block_ecc_is_written_validated_and_repairs_every_block() {
    for n in [16u8, 32, 64] {
        let k = 255 - n as usize;
        let payload: Vec<u8> = (0..k * 4 + 17).map(|i| (i * 131 % 253) as u8).collect();
        let mut b = FoldBuilder::new();
        let opts = FoldChunkOptions {
            compression: FoldCompression::None,
            ecc: Some(n),
        };
        b.add_chunk("blob", "BLOB", &payload, opts).unwrap();
        assert_eq!(b.notes.len(), 1);
        assert!(b.notes[0].contains("pyfolds 1.0.2 cannot read"), "{}", b.notes[0]);
        let good = b.to_bytes().unwrap();
        let start = 28 + 32;
        let rs = ecc::Rs::new(n as usize).unwrap();
        // The ECC is each block's parity, block after block (not pyfolds' stream tail).
        let ecc_bytes = &good[start + payload.len()..start + payload.len() + 5 * n as usize];
        assert_eq!(ecc_bytes, rs.block_parity(&payload).as_slice());
        for (i, block) in payload.chunks(k).enumerate() {
            assert_eq!(
                &ecc_bytes[i * n as usize..(i + 1) * n as usize],
                rs.parity(block).as_slice()
            );
        }
        assert_ne!(ecc_bytes, ecc::pyfolds_ecc(&rs, &payload).as_slice());
        let input = Input::from_bytes("m", good.clone());
        let r = FoldFormat.validate(&input, &ValidateOptions::default());
        assert!(r.is_valid(true), "{:?}", r.findings);
        assert!(r.findings.has_code("fold.ecc.multi_block_parity"));

        // N/2 errors in every block (and some in the parity): repaired exactly.
        let mut seed = n as u64;
        let mut bad = good.clone();
        for blk in 0..5 {
            let len = if blk < 4 { k } else { 17 };
            let mut hit = Vec::new();
            while hit.len() < (n as usize / 2).min(len) {
                let p = blk * k + lcg(&mut seed) % len;
                if !hit.contains(&p) {
                    hit.push(p);
                }
            }
            for p in hit {
                bad[start + p] ^= 1 + (lcg(&mut seed) % 255) as u8;
            }
        }
        let input = Input::from_bytes("bad", bad.clone());
        let r = FoldFormat.validate(&input, &ValidateOptions::default());
        assert!(
            r.is_valid(false) && r.findings.has_code("fold.ecc.repaired"),
            "{:?}",
            r.findings
        );
        let mut out = Vec::new();
        rasterpack_fold::repair_copy(&input, &Default::default(), &mut out).unwrap();
        assert_eq!(out, good, "rs({n}): repair restores the file");
        // One error past the capacity of block 1: detected, never accepted.
        let mut worse = good.clone();
        for p in 0..=n as usize / 2 {
            worse[start + k + p * 3] ^= 0x77;
        }
        let r = FoldFormat.validate(&Input::from_bytes("w", worse), &ValidateOptions::default());
        assert!(r.findings.has_code("fold.ecc.ecc_uncorrectable"), "{:?}", r.findings);
        // A parity byte damaged in the middle: payload fine, warning, convert rewrites it.
        let mut par = good.clone();
        par[start + payload.len() + n as usize + 1] ^= 1;
        let input = Input::from_bytes("p", par);
        let r = FoldFormat.validate(&input, &ValidateOptions::default());
        assert!(
            r.is_valid(false) && r.findings.has_code("fold.ecc.parity_mismatch"),
            "{:?}",
            r.findings
        );
        let mut out = Vec::new();
        rasterpack_fold::repair_copy(&input, &Default::default(), &mut out).unwrap();
        assert_eq!(out, good);
    }
}

/// A chunk whose ECC bytes are replaced by pyfolds' stream-tail layout (same length).
fn with_pyfolds_tail(good: &[u8], payload_len: usize, rs: &ecc::Rs) -> Vec<u8> {
    let start = 28 + 32;
    let payload = &good[start..start + payload_len];
    let tail = ecc::pyfolds_ecc(rs, payload);
    let mut out = good.to_vec();
    out[start + payload_len..start + payload_len + tail.len()].copy_from_slice(&tail);
    out
}

#[test]
fn pyfolds_multi_block_layout_is_still_recognised_and_repaired_where_it_can_be() {
    let n = 16u8;
    let rs = ecc::Rs::new(n as usize).unwrap();
    // Two blocks with a short last one: pyfolds' tail holds the last block's parity.
    let payload: Vec<u8> = (0..300).map(|i| (i * 7) as u8).collect();
    let mut b = FoldBuilder::new();
    b.add_chunk(
        "blob",
        "BLOB",
        &payload,
        FoldChunkOptions {
            compression: FoldCompression::None,
            ecc: Some(n),
        },
    )
    .unwrap();
    let pyf = with_pyfolds_tail(&b.to_bytes().unwrap(), payload.len(), &rs);
    let r = FoldFormat.validate(&Input::from_bytes("q", pyf.clone()), &ValidateOptions::default());
    assert!(
        r.is_valid(false) && r.findings.has_code("fold.ecc.ecc_layout_quirk"),
        "{:?}",
        r.findings
    );
    // Damage in the last block: repaired through the tail layout, and the tail is kept.
    let mut bad = pyf.clone();
    bad[28 + 32 + 250] ^= 0x42;
    let input = Input::from_bytes("q2", bad);
    let r = FoldFormat.validate(&input, &ValidateOptions::default());
    assert!(r.findings.has_code("fold.ecc.repaired"), "{:?}", r.findings);
    let mut out = Vec::new();
    rasterpack_fold::repair_copy(&input, &Default::default(), &mut out).unwrap();
    assert_eq!(out, pyf);
    // Damage in the first block: its parity is not in the tail.
    let mut bad = pyf;
    bad[28 + 32 + 5] ^= 0x42;
    let r = FoldFormat.validate(&Input::from_bytes("q3", bad), &ValidateOptions::default());
    assert!(r.findings.has_code("fold.ecc.ecc_uncorrectable"), "{:?}", r.findings);
}

#[test]
fn streamed_validation_tells_the_ecc_layouts_apart() {
    // >= 4 MiB stored: validate checks the ECC bytes in batches of blocks (no whole copy);
    // inspect holds the chunk whole. Both must say the same of every layout.
    let n = 32u8;
    let rs = ecc::Rs::new(n as usize).unwrap();
    let mut seed = 3u64;
    let payload: Vec<u8> = (0..(4 << 20) + 1000).map(|_| lcg(&mut seed) as u8).collect();
    let mut b = FoldBuilder::new();
    b.add_chunk(
        "big",
        "BLOB",
        &payload,
        FoldChunkOptions {
            compression: FoldCompression::None,
            ecc: Some(n),
        },
    )
    .unwrap();
    let good = b.to_bytes().unwrap();
    let pyf = with_pyfolds_tail(&good, payload.len(), &rs);
    let mut wrong = good.clone();
    let last = wrong.len() - 2000;
    wrong[last - 300] ^= 1; // a parity byte near the end (the index is ~500 bytes)
    for (bytes, code, severity) in [
        (good, "fold.ecc.multi_block_parity", Severity::Info),
        (pyf, "fold.ecc.ecc_layout_quirk", Severity::Warning),
        (wrong, "fold.ecc.parity_mismatch", Severity::Warning),
    ] {
        let input = Input::from_bytes("big", bytes);
        let v = FoldFormat.validate(&input, &ValidateOptions::default());
        let i = FoldFormat.inspect(&input, &Default::default()).unwrap();
        for r in [&v, &i] {
            let found: Vec<_> = r.findings.iter().map(|f| (f.severity, f.code.as_str())).collect();
            assert_eq!(found, [(severity, code)]);
        }
    }
}
