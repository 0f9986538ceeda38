//! Writer round trips: every chunk kind, codec and ECC setting the writer supports, every
//! dtype with extreme values, NaN payloads and -0.0; JSON with Python-only values.

use rasterpack_common::{ArrayRequest, DType, ErrorKind, Format, Input, NdArray, ValidateOptions, WriteOptions};
use rasterpack_fold::pjson::{self, Value};
use rasterpack_fold::{
    analyze, FoldAnalyzeOptions, FoldBuilder, FoldChunkOptions, FoldCompression, FoldContent, FoldFormat,
};

fn arrays() -> Vec<NdArray> {
    let mut out = Vec::new();
    let mk = |dtype: DType, shape: Vec<u64>, data: Vec<u8>| NdArray::new(dtype, shape, data).unwrap();
    out.push(mk(DType::Bool, vec![3], vec![0, 1, 1]));
    out.push(mk(DType::U8, vec![2, 2], vec![0, 255, 1, 128]));
    out.push(mk(DType::I8, vec![2], vec![0x80, 0x7f]));
    out.push(mk(
        DType::U16,
        vec![2],
        [0u16, u16::MAX].iter().flat_map(|v| v.to_le_bytes()).collect(),
    ));
    out.push(mk(
        DType::I16,
        vec![2],
        [i16::MIN, i16::MAX].iter().flat_map(|v| v.to_le_bytes()).collect(),
    ));
    out.push(mk(
        DType::U32,
        vec![2],
        [0u32, u32::MAX].iter().flat_map(|v| v.to_le_bytes()).collect(),
    ));
    out.push(mk(
        DType::I32,
        vec![2],
        [i32::MIN, i32::MAX].iter().flat_map(|v| v.to_le_bytes()).collect(),
    ));
    out.push(mk(
        DType::U64,
        vec![2],
        [0u64, u64::MAX].iter().flat_map(|v| v.to_le_bytes()).collect(),
    ));
    out.push(mk(
        DType::I64,
        vec![2],
        [i64::MIN, i64::MAX].iter().flat_map(|v| v.to_le_bytes()).collect(),
    ));
    let f32s = [
        0.0f32,
        -0.0,
        f32::MIN_POSITIVE,
        f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::from_bits(0x7fc0_1234),
        1e-45,
    ];
    out.push(mk(
        DType::F32,
        vec![2, 4],
        f32s.iter().flat_map(|v| v.to_le_bytes()).collect(),
    ));
    let f64s = [
        0.0f64,
        -0.0,
        f64::MAX,
        f64::from_bits(0xfff8_0000_dead_beef),
        5e-324,
        f64::NEG_INFINITY,
    ];
    out.push(mk(
        DType::F64,
        vec![3, 2],
        f64s.iter().flat_map(|v| v.to_le_bytes()).collect(),
    ));
    out.push(mk(DType::F32, vec![0, 3], Vec::new()));
    out
}

fn doc() -> Value {
    pjson::parse(
        "{\"name\":\"caf\u{e9} \u{1F600}\",\"nan\":NaN,\"inf\":[Infinity,-Infinity],\"neg0\":-0.0,\"big\":123456789012345678901234567890,\"tiny\":1e-07,\"ctl\":\"a\\u0001\\n\\\"\",\"nested\":{\"z\":1,\"a\":[true,false,null]}}"
            .as_bytes(),
        64,
    )
    .unwrap()
}

#[test]
fn every_codec_and_ecc_round_trips() {
    let arrs = arrays();
    for compression in [FoldCompression::None, FoldCompression::Zstd(3)] {
        for ecc in [None, Some(16u8), Some(32), Some(64)] {
            let opts = FoldChunkOptions { compression, ecc };
            let mut b = FoldBuilder::new();
            b.created_at_unix = 1767225600.5;
            b.metadata("model_type", Value::str("Test\u{e9}")).unwrap();
            b.metadata("scale", Value::Float(0.1)).unwrap();
            b.metadata("odd", doc()).unwrap();
            b.add_json("llm_manifest", &doc(), opts).unwrap();
            let named: Vec<(String, &NdArray)> = arrs.iter().enumerate().map(|(i, a)| (format!("a{i}"), a)).collect();
            let refs: Vec<(&str, &NdArray)> = named.iter().map(|(n, a)| (n.as_str(), *a)).collect();
            b.add_npz("nuclear_arrays", &refs, opts).unwrap();
            b.add_chunk("blob", "BLOB", &[1, 2, 3, 0, 255], opts).unwrap();
            b.add_chunk("empty", "RAW0", &[], opts).unwrap();
            let bytes = b.to_bytes().unwrap();
            let input = Input::from_bytes("rt.fold", bytes);
            let r = FoldFormat.validate(&input, &ValidateOptions::default());
            assert!(r.is_valid(true), "{compression:?}/{ecc:?}: {:?}", r.findings);
            let a = analyze(
                &input,
                &FoldAnalyzeOptions {
                    content: true,
                    ..Default::default()
                },
            )
            .unwrap();
            assert_eq!(a.manifest_ok, Some(true));
            let json = a.chunks.iter().find(|c| c.entry.name == "llm_manifest").unwrap();
            match &json.content {
                FoldContent::Json(v) => assert_eq!(
                    pjson::dumps(v, true, pjson::Ascii::Escape),
                    pjson::dumps(&doc(), true, pjson::Ascii::Escape)
                ),
                other => panic!("{other:?}"),
            }
            for (i, want) in arrs.iter().enumerate() {
                let req = ArrayRequest {
                    element: Some(format!("nuclear_arrays/a{i}")),
                    ..Default::default()
                };
                let got = FoldFormat.read_array(&input, &req).unwrap();
                assert_eq!(
                    (got.dtype, &got.shape, &got.data),
                    (want.dtype, &want.shape, &want.data),
                    "a{i}"
                );
            }
            // ECC is always written: the parity of each block; a chunk spanning several blocks
            // gets a note (pyfolds cannot read it) and an info finding, never a warning.
            let mut multi = 0;
            for st in &a.chunks {
                match ecc {
                    Some(n) => {
                        assert_eq!(st.entry.ecc_algo, format!("rs({n})"), "{}", st.entry.name);
                        assert_eq!(st.ecc_status, format!("rs({n}) ok"), "{}", st.entry.name);
                        multi += usize::from(st.entry.comp_len > 255 - n as u64);
                    }
                    None => assert_eq!(st.entry.ecc_algo, "none"),
                }
            }
            assert_eq!(b.notes.len(), multi);
            assert_eq!(
                r.findings
                    .iter()
                    .filter(|f| f.code == "fold.ecc.multi_block_parity")
                    .count(),
                multi
            );
            if ecc.is_some() {
                assert!(multi > 0, "the sample must hold a multi-block chunk");
            }
        }
    }
}

#[test]
fn ecc_repairs_what_it_can_and_detects_the_rest() {
    for n in [16u8, 32, 64] {
        let mut b = FoldBuilder::new();
        let payload: Vec<u8> = (0..(255 - n as usize)).map(|i| (i * 7) as u8).collect();
        b.add_chunk(
            "data",
            "BLOB",
            &payload,
            FoldChunkOptions {
                compression: FoldCompression::None,
                ecc: Some(n),
            },
        )
        .unwrap();
        let good = b.to_bytes().unwrap();
        let start = 28 + 32;
        let mut seed = n as u64;
        let mut rnd = |m: usize| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) as usize) % m
        };
        for nerr in 1..=(n as usize / 2 + 1) {
            for _trial in 0..3 {
                let mut bad = good.clone();
                let mut pos = Vec::new();
                while pos.len() < nerr {
                    let p = start + rnd(payload.len());
                    if !pos.contains(&p) {
                        pos.push(p);
                    }
                }
                for &p in &pos {
                    bad[p] ^= 1 + rnd(255) as u8;
                }
                let input = Input::from_bytes("bad", bad);
                let r = FoldFormat.validate(&input, &ValidateOptions::default());
                if nerr <= n as usize / 2 {
                    assert!(
                        r.is_valid(false) && r.findings.has_code("fold.ecc.repaired"),
                        "{n}/{nerr}: {:?}",
                        r.findings
                    );
                    let mut out = Vec::new();
                    FoldFormat
                        .convert_special(
                            &input,
                            &FoldFormat,
                            &ArrayRequest::default(),
                            &WriteOptions::default(),
                            None,
                            &mut out,
                        )
                        .unwrap()
                        .unwrap();
                    assert_eq!(out, good);
                } else {
                    assert!(!r.is_valid(false), "{n}/{nerr}: must be detected");
                    assert!(r.findings.has_code("fold.ecc.ecc_uncorrectable"));
                    let mut out = Vec::new();
                    let res = FoldFormat
                        .convert_special(
                            &input,
                            &FoldFormat,
                            &ArrayRequest::default(),
                            &WriteOptions::default(),
                            None,
                            &mut out,
                        )
                        .unwrap();
                    assert!(res.is_err());
                }
            }
        }
    }
}

#[test]
fn write_array_and_element_selection() {
    let mut arr = NdArray::new(DType::F32, vec![2, 3], (0..24).collect()).unwrap();
    arr.name = Some("temperature".into());
    let mut out = Vec::new();
    FoldFormat
        .write_array(&arr, &WriteOptions::default(), &mut out)
        .unwrap();
    assert!(FoldFormat.detect(&out[..64.min(out.len())]));
    let input = Input::from_bytes("w.fold", out);
    assert!(FoldFormat.validate(&input, &ValidateOptions::default()).is_valid(true));
    let back = FoldFormat.read_array(&input, &ArrayRequest::default()).unwrap();
    assert_eq!(back.data, arr.data);
    assert_eq!(back.name.as_deref(), Some("temperature"));

    // Two NPZ0 chunks holding the same array name: ambiguous without CHUNK/ARRAY.
    let mut b = FoldBuilder::new();
    b.add_npz("one", &[("x", &arr)], FoldChunkOptions::default()).unwrap();
    b.add_npz("two", &[("x", &arr), ("y", &arr)], FoldChunkOptions::default())
        .unwrap();
    let input = Input::from_bytes("two.fold", b.to_bytes().unwrap());
    let err = FoldFormat.read_array(&input, &ArrayRequest::default()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Usage);
    assert!(
        err.message.contains("one/x") && err.message.contains("two/y"),
        "{}",
        err.message
    );
    let err = FoldFormat
        .read_array(
            &input,
            &ArrayRequest {
                element: Some("x".into()),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Usage);
    let y = FoldFormat
        .read_array(
            &input,
            &ArrayRequest {
                element: Some("y".into()),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(y.data, arr.data);
    let x = FoldFormat
        .read_array(
            &input,
            &ArrayRequest {
                element: Some("two/x".into()),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(x.data, arr.data);
}

#[test]
fn manifest_hash_is_python_exact() {
    // Values checked with CPython 3.11:
    // hashlib.sha256(json.dumps({"chunk_hashes":{},"b":1.0,"a":"\u00e9","c":[1e-07,1e+16,-0.0]},
    //     sort_keys=True, separators=(",",":")).encode()).hexdigest()
    let meta = pjson::parse(
        r#"{"chunk_hashes":{},"b":1.0,"a":"é","c":[1e-07,1e16,-0.0]}"#.as_bytes(),
        64,
    )
    .unwrap();
    assert_eq!(
        rasterpack_fold::validate::manifest_source(&meta),
        r#"{"a":"\u00e9","b":1.0,"c":[1e-07,1e+16,-0.0],"chunk_hashes":{}}"#
    );
}

#[test]
fn hand_edited_files_are_flagged() {
    let mut b = FoldBuilder::new();
    b.add_json("m", &doc(), FoldChunkOptions::default()).unwrap();
    let good = b.to_bytes().unwrap();
    // Trailing bytes: warning only.
    let mut t = good.clone();
    t.extend_from_slice(b"junk");
    let r = FoldFormat.validate(&Input::from_bytes("t", t), &ValidateOptions::default());
    assert!(r.is_valid(false) && r.findings.has_code("fold.bounds.trailing_bytes"));
    // Unknown flags: invalid.
    let mut t = good.clone();
    t[28 + 7] = 5;
    let r = FoldFormat.validate(&Input::from_bytes("t", t), &ValidateOptions::default());
    assert!(r.findings.has_code("fold.chunk.bad_flags"));
    // Never finalized header.
    let mut t = good.clone();
    t[12..28].fill(0);
    let r = FoldFormat.validate(&Input::from_bytes("t", t), &ValidateOptions::default());
    assert!(r.findings.has_code("fold.header.index_off_lt_header"));
}

#[test]
fn large_chunks_stream_and_agree_with_the_full_path() {
    // 9 MiB chunks take the streamed path in validate (no content) and the full path in
    // inspect (content): both must agree, for zstd and stored, intact and damaged.
    let mut seed = 1u64;
    let payload: Vec<u8> = (0..9 << 20)
        .map(|_| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as u8 & 0x3f
        })
        .collect();
    for compression in [FoldCompression::Zstd(1), FoldCompression::None] {
        let mut b = FoldBuilder::new();
        b.add_chunk("big", "F32R", &payload, FoldChunkOptions { compression, ecc: None })
            .unwrap();
        let good = b.to_bytes().unwrap();
        assert!(good.len() > 5 << 20);
        let input = Input::from_bytes("big", good.clone());
        let r = FoldFormat.validate(&input, &ValidateOptions::default());
        assert!(r.is_valid(true), "{:?}", r.findings);
        // Damage: a flipped payload byte, a wrong uncomp_len, a truncated zstd frame.
        let mut flip = good.clone();
        flip[28 + 32 + 5_000_000] ^= 0x10;
        let mut short = good.clone();
        short[28 + 8..28 + 16].copy_from_slice(&((9u64 << 20) - 1).to_be_bytes());
        for (bad, code) in [
            (flip, "fold.integrity.crc_mismatch"),
            (short, "fold.payload.uncomp_len_mismatch"),
        ] {
            let input = Input::from_bytes("bad", bad);
            let v = FoldFormat.validate(&input, &ValidateOptions::default());
            assert!(v.findings.has_code(code), "{compression:?} {code}: {:?}", v.findings);
            let i = FoldFormat.inspect(&input, &Default::default()).unwrap();
            let codes = |r: &rasterpack_common::Report| r.findings.iter().map(|f| f.code.clone()).collect::<Vec<_>>();
            assert_eq!(codes(&v), codes(&i));
        }
    }
    // A zstd frame cut short, stored with valid CRC/SHA, flags patched to zstd.
    let frame = zstd::bulk::compress(&payload, 1).unwrap();
    let mut b = FoldBuilder::new();
    b.add_chunk(
        "cut",
        "F32R",
        &frame[..frame.len() - 1000],
        FoldChunkOptions {
            compression: FoldCompression::None,
            ecc: None,
        },
    )
    .unwrap();
    let mut bad = b.to_bytes().unwrap();
    bad[28 + 7] = 1;
    bad[28 + 8..28 + 16].copy_from_slice(&(payload.len() as u64).to_be_bytes());
    let input = Input::from_bytes("cut", bad);
    let v = FoldFormat.validate(&input, &ValidateOptions::default());
    let i = FoldFormat.inspect(&input, &Default::default()).unwrap();
    assert!(
        v.findings.has_code("fold.payload.decompress_failed"),
        "{:?}",
        v.findings
    );
    assert!(
        i.findings.has_code("fold.payload.decompress_failed"),
        "{:?}",
        i.findings
    );
}

#[test]
fn damaged_parity_is_reported_and_rewritten() {
    let mut b = FoldBuilder::new();
    b.add_chunk(
        "d",
        "BLOB",
        b"some payload bytes",
        FoldChunkOptions {
            compression: FoldCompression::None,
            ecc: Some(16),
        },
    )
    .unwrap();
    let good = b.to_bytes().unwrap();
    let ecc_off = 28 + 32 + 18;
    // Parity only damaged: payload verifies, warning, convert restores the parity.
    let mut bad = good.clone();
    bad[ecc_off + 3] ^= 0xA5;
    let input = Input::from_bytes("p", bad.clone());
    let r = FoldFormat.validate(&input, &ValidateOptions::default());
    assert!(
        r.is_valid(false) && r.findings.has_code("fold.ecc.parity_mismatch"),
        "{:?}",
        r.findings
    );
    let mut out = Vec::new();
    rasterpack_fold::repair_copy(&input, &Default::default(), &mut out).unwrap();
    assert_eq!(out, good);
    // Payload and parity both damaged (within capacity): both restored.
    bad[28 + 32 + 2] ^= 0x11;
    let input = Input::from_bytes("p2", bad);
    let r = FoldFormat.validate(&input, &ValidateOptions::default());
    assert!(
        r.is_valid(false) && r.findings.has_code("fold.ecc.repaired"),
        "{:?}",
        r.findings
    );
    let mut out = Vec::new();
    rasterpack_fold::repair_copy(&input, &Default::default(), &mut out).unwrap();
    assert_eq!(out, good);
}

#[test]
fn large_json_and_npz_chunks_validate_streamed() {
    // Stored >= 4 MiB: validate decodes them on the streamed path (collecting), inspect whole.
    let mut seed = 5u64;
    let mut next = || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        seed >> 11
    };
    let mut text = String::from("[");
    while text.len() < 10 << 20 {
        text.push_str(&format!("\"{:013x}\",", next()));
    }
    text.push_str("NaN]");
    let floats: Vec<u8> = (0..(6 << 20) / 4)
        .flat_map(|_| f32::from_bits(next() as u32 & 0x3f7f_ffff).to_le_bytes())
        .collect();
    let arr = NdArray::new(DType::F32, vec![(6 << 20) / 4], floats).unwrap();
    let mut b = FoldBuilder::new();
    b.add_chunk("big_json", "JSON", text.as_bytes(), FoldChunkOptions::default())
        .unwrap();
    b.add_npz("big_npz", &[("f", &arr)], FoldChunkOptions::default())
        .unwrap();
    let bytes = b.to_bytes().unwrap();
    let input = Input::from_bytes("big", bytes.clone());
    let a = analyze(&input, &FoldAnalyzeOptions::default()).unwrap();
    assert!(
        a.chunks.iter().all(|c| c.entry.comp_len >= 4 << 20),
        "chunks too small to stream"
    );
    let v = FoldFormat.validate(&input, &ValidateOptions::default());
    assert!(v.is_valid(true), "{:?}", v.findings);
    let back = FoldFormat
        .read_array(
            &input,
            &ArrayRequest {
                element: Some("big_npz/f".into()),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(back.data, arr.data);
    // uncomp_len one short or one long in the chunk header (the NPZ0 chunk decodes into a
    // fixed huge-page buffer of uncomp_len): streamed path must say so, like the whole path.
    for (chunk, delta) in [(0, -1i64), (1, -1), (0, 1), (1, 1)] {
        let st = &a.chunks[chunk];
        let mut bad = bytes.clone();
        let at = st.entry.offset as usize + 8;
        bad[at..at + 8].copy_from_slice(&st.entry.uncomp_len.wrapping_add_signed(delta).to_be_bytes());
        let input = Input::from_bytes("bad", bad);
        let v = FoldFormat.validate(&input, &ValidateOptions::default());
        let i = FoldFormat.inspect(&input, &Default::default()).unwrap();
        assert!(
            v.findings.has_code("fold.payload.uncomp_len_mismatch"),
            "{:?}",
            v.findings
        );
        assert!(
            i.findings.has_code("fold.payload.uncomp_len_mismatch"),
            "{:?}",
            i.findings
        );
    }
}

#[test]
fn write_arrays_writes_named_arrays_and_metadata() {
    let mut named = arrays();
    for (i, a) in named.iter_mut().enumerate() {
        a.name = Some(format!("a{i}"));
    }
    let mut meta = serde_json::Map::new();
    meta.insert("units".into(), "m".into());
    meta.insert("epoch".into(), 12.into());
    let opts = WriteOptions {
        compress: Some("zstd+rs16".into()),
        ..Default::default()
    };
    let mut out = Vec::new();
    FoldFormat.write_arrays(&named, &meta, &opts, &mut out).unwrap();
    // The index (its offset and length are the header's big-endian u64s at 12 and 20) holds
    // the metadata members.
    let at = |i: usize| u64::from_be_bytes(out[i..i + 8].try_into().unwrap()) as usize;
    let index: serde_json::Value = serde_json::from_slice(&out[at(12)..at(12) + at(20)]).unwrap();
    assert_eq!(index["metadata"]["units"], "m");
    assert_eq!(index["metadata"]["epoch"], 12);
    let input = Input::from_bytes("m.fold", out);
    let report = FoldFormat.validate(&input, &ValidateOptions::default());
    assert!(report.is_valid(true), "{:#?}", report.findings);
    for a in &named {
        let req = ArrayRequest {
            element: Some(format!("nuclear_arrays/{}", a.name.as_deref().unwrap())),
            ..Default::default()
        };
        let back = FoldFormat.read_array(&input, &req).unwrap();
        assert_eq!((back.dtype, &back.shape, &back.data), (a.dtype, &a.shape, &a.data));
    }

    // Refused: an unnamed array, a name with '/', a key the writer computes.
    let refuse = |arrays: &[NdArray], meta: &serde_json::Map<String, serde_json::Value>| {
        let e = FoldFormat
            .write_arrays(arrays, meta, &WriteOptions::default(), &mut Vec::new())
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Usage, "{e}");
    };
    let mut unnamed = named[0].clone();
    unnamed.name = None;
    refuse(&[unnamed], &serde_json::Map::new());
    let mut slash = named[0].clone();
    slash.name = Some("a/b".into());
    refuse(&[slash], &serde_json::Map::new());
    let mut computed = serde_json::Map::new();
    computed.insert("manifest_hash".into(), "x".into());
    refuse(&named, &computed);
    refuse(&[], &serde_json::Map::new());
}
