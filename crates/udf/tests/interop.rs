//! Conformance corpus: every sample's verdict and codes, and for valid files every decoded
//! value, text, JSON document and offset, against the sidecar `*.truth.json`.

use std::path::PathBuf;

use rasterpack_common::{ArrayRequest, DType, ErrorKind, Format, Input, Limits, Severity, ValidateOptions};
use rasterpack_udf::{codes, validate, Hint, Prim, UdfFile, UdfFormat, UdfText, UdfValues};
use serde_json::Value;
use sha2::{Digest, Sha256};

fn corpus() -> Option<PathBuf> {
    rasterpack_common::testkit::corpus_dir("udf")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn values_json(v: &UdfValues) -> Vec<Value> {
    match v {
        UdfValues::U8(x) => x.iter().map(|&a| Value::from(a)).collect(),
        UdfValues::I8(x) => x.iter().map(|&a| Value::from(a)).collect(),
        UdfValues::U16(x) => x.iter().map(|&a| Value::from(a)).collect(),
        UdfValues::I16(x) => x.iter().map(|&a| Value::from(a)).collect(),
        UdfValues::U32(x) => x.iter().map(|&a| Value::from(a)).collect(),
        UdfValues::I32(x) => x.iter().map(|&a| Value::from(a)).collect(),
        UdfValues::U64(x) => x.iter().map(|&a| Value::from(a)).collect(),
        UdfValues::I64(x) => x.iter().map(|&a| Value::from(a)).collect(),
        // Floats are compared bit for bit below.
        UdfValues::F32(x) => x.iter().map(|&a| Value::from((a as f64).to_bits())).collect(),
        UdfValues::F64(x) => x.iter().map(|&a| Value::from(a.to_bits())).collect(),
        UdfValues::Custom(_) => Vec::new(),
    }
}

fn expect_values(prim: Prim, flat: &[Value]) -> Vec<Value> {
    flat.iter()
        .map(|v| match prim {
            Prim::F32 | Prim::F64 => Value::from(v.as_f64().expect("float").to_bits()),
            _ => v.clone(),
        })
        .collect()
}

#[test]
fn corpus_verdicts_codes_and_values() {
    let Some(dir) = corpus() else { return };
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".truth.json"))
        .collect();
    names.sort();
    assert!(
        names.len() >= 60,
        "expected the whole UDF corpus, found {}",
        names.len()
    );
    let mut checked_values = 0;
    for side in names {
        let truth: Value = serde_json::from_slice(&std::fs::read(&side).unwrap()).unwrap();
        let file = dir.join(truth["file"].as_str().unwrap());
        let bytes = std::fs::read(&file).unwrap();
        assert_eq!(
            hex(&Sha256::digest(&bytes)),
            truth["file_sha256"].as_str().unwrap(),
            "{}",
            file.display()
        );
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        // Validate by positioned reads and from memory: same findings.
        let doc = validate::validate(&Input::open(&file).unwrap(), &Limits::default());
        let doc_mem = validate::validate(&Input::from_bytes(&name, bytes.clone()), &Limits::default());
        assert_eq!(doc.findings, doc_mem.findings, "{name}");
        for f in doc.findings.iter() {
            assert_eq!(
                codes::severity(&f.code),
                Some(f.severity),
                "{name}: code {} not in the code table",
                f.code
            );
            assert!(f.offset.is_some(), "{name}: finding {} without offset", f.code);
        }
        let mut got: Vec<String> = doc
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .map(|f| codes::sidecar_code(&f.code).unwrap_or("?").to_string())
            .collect();
        got.sort();
        let mut want: Vec<String> = truth["spec_findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f[0].as_str().unwrap().to_string())
            .collect();
        want.sort();
        // Compatibility warnings: what the spec calls an error but ERRATA accepts with a warning.
        let mut compat: Vec<String> = doc
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Warning)
            .filter_map(|f| codes::sidecar_code(&f.code).map(str::to_string))
            .collect();
        compat.sort();
        let verdict = truth["expected_verdict"].as_str().unwrap();
        match verdict {
            "valid" => {
                assert!(got.is_empty(), "{name}: valid file got {:?}", doc.findings);
                assert!(compat.is_empty(), "{name}: valid file got {:?}", doc.findings);
                assert_eq!(got, want, "{name}: findings {:?}", doc.findings);
            }
            "invalid" => {
                let code = truth["error_code"].as_str().unwrap();
                assert!(
                    got.iter().any(|g| g == code),
                    "{name}: want {code}, got {:?}",
                    doc.findings
                );
                assert_eq!(got, want, "{name}: findings {:?}", doc.findings);
            }
            // ERRATA decides these: so far every one is valid with a compatibility warning
            // (invalid under --strict) whose spec code is the sidecar's finding.
            "implementation_defined" => {
                let decision = truth["decision"].as_str().unwrap_or_default();
                assert!(
                    decision.starts_with("valid with a compatibility warning"),
                    "{name}: {decision}"
                );
                assert!(got.is_empty(), "{name}: no error expected, got {:?}", doc.findings);
                assert_eq!(compat, want, "{name}: compatibility warnings {:?}", doc.findings);
                let report = UdfFormat.validate(&Input::open(&file).unwrap(), &ValidateOptions::default());
                assert!(
                    report.is_valid(false) && !report.is_valid(true),
                    "{name}: --strict must reject"
                );
            }
            other => panic!("{name}: unexpected verdict {other}"),
        }
        if verdict != "invalid" {
            check_values(&name, &file, &truth);
            checked_values += 1;
        }
    }
    assert!(checked_values >= 15);
}

fn check_values(name: &str, path: &std::path::Path, truth: &Value) {
    let input = Input::open(path).unwrap();
    let file = UdfFile::open_strict(&input, &Limits::default()).unwrap();
    let h = file.header().unwrap();
    let fh = &truth["file_header"];
    assert_eq!(hex(&h.id), fh["id_hex"].as_str().unwrap(), "{name}");
    assert_eq!(h.next, fh["next"].as_u64().unwrap());
    assert_eq!(
        [h.root.offset, h.root.size],
        [fh["root"][0].as_u64().unwrap(), fh["root"][1].as_u64().unwrap()]
    );
    let sets = truth["datasets"].as_array().unwrap();
    assert_eq!(file.datasets().len(), sets.len(), "{name}: dataset count");
    for sd in sets {
        let off = sd["offset"].as_u64().unwrap();
        let ds = file
            .datasets()
            .iter()
            .find(|d| d.location.offset == off)
            .unwrap_or_else(|| panic!("{name}: no dataset at {off}"));
        assert_eq!(ds.location.size, sd["size"].as_u64().unwrap());
        assert_eq!(hex(&ds.header.id), sd["id_hex"].as_str().unwrap());
        assert_eq!(ds.header.header_size as u64, sd["header_size"].as_u64().unwrap());
        assert_eq!(ds.header.descs_len as u64, sd["descs_len"].as_u64().unwrap());
        assert_eq!(ds.header.lookup_len as u64, sd["lookup_len"].as_u64().unwrap());
        assert_eq!(ds.header.string_len as u64, sd["string_len"].as_u64().unwrap());
        for (l, sl) in ds.lookups.iter().zip(sd["lookup"].as_array().unwrap()) {
            assert_eq!(l.hash as u64, sl["hash"].as_u64().unwrap());
            assert_eq!(l.string.as_deref(), sl["string"].as_str());
        }
        let tables = sd["tables"].as_array().unwrap();
        assert_eq!(ds.tables.len(), tables.len());
        for (t, st) in ds.tables.iter().zip(tables) {
            let tn = format!("{name}:{}", t.display_name());
            assert_eq!(t.name.as_deref(), st["key_name"].as_str(), "{tn}");
            assert_eq!(t.index_name.as_deref(), st["index_name"].as_str(), "{tn}");
            assert_eq!(t.related_name.as_deref(), st["related_name"].as_str(), "{tn}");
            assert_eq!(t.type_name.as_deref(), st["type_name"].as_str(), "{tn}");
            assert_eq!(t.desc.type_info as u64, st["type_info"].as_u64().unwrap(), "{tn}");
            assert_eq!(t.prim.name(), st["prim"].as_str().unwrap(), "{tn}");
            assert_eq!(t.shape.dims as u64, st["dim"].as_u64().unwrap(), "{tn}");
            assert_eq!(t.hint.name(), st["hint"].as_str().unwrap(), "{tn}");
            assert_eq!(t.hint.value() as u64, st["hint_value"].as_u64().unwrap(), "{tn}");
            let axes = |k: &str| -> Vec<u32> {
                st[k]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap() as u32)
                    .collect()
            };
            assert_eq!(t.shape.axes, axes("shape"), "{tn}");
            assert_eq!(t.shape.real(), axes("real_shape"), "{tn}");
            assert_eq!(t.shape.ghost(), axes("ghost_shape"), "{tn}");
            assert_eq!(t.desc.mem_start as u64, st["mem_start"].as_u64().unwrap());
            assert_eq!(t.desc.mem_end as u64, st["mem_end"].as_u64().unwrap());
            assert_eq!(t.data_size, st["data_size"].as_u64().unwrap());
            assert_eq!(t.data_offset, st["data_file_offset"].as_u64(), "{tn}");
            let bytes = file.bytes(t).unwrap();
            assert_eq!(
                hex(&Sha256::digest(&bytes)),
                st["data_sha256"].as_str().unwrap(),
                "{tn}"
            );
            if let Some(flat) = st.get("values_flat").and_then(|v| v.as_array()) {
                let got = values_json(&file.typed_values(t).unwrap());
                assert_eq!(got, expect_values(t.prim, flat), "{tn}");
            }
            if let Some(text) = st.get("text") {
                let got = file.text(t).unwrap();
                match (&got, text) {
                    (UdfText::Scalar(s), Value::String(w)) => assert_eq!(s, w, "{tn}"),
                    (UdfText::List(v), Value::Array(w)) => {
                        assert_eq!(v.len(), w.len());
                        for (a, b) in v.iter().zip(w) {
                            assert_eq!(a, b.as_str().unwrap(), "{tn}");
                        }
                    }
                    _ => panic!("{tn}: text kind differs: {got:?} vs {text}"),
                }
            }
            if let Some(j) = st.get("json") {
                assert_eq!(&file.json(t).unwrap(), j, "{tn}");
            }
            if let Some(fo) = st.get("file_offsets").and_then(|v| v.as_array()) {
                let got = file.file_offsets(t).unwrap();
                let want: Vec<[u64; 2]> = fo
                    .iter()
                    .map(|p| [p[0].as_u64().unwrap(), p[1].as_u64().unwrap()])
                    .collect();
                assert_eq!(got.iter().map(|f| [f.offset, f.size]).collect::<Vec<_>>(), want, "{tn}");
            }
            if t.hint != Hint::Dataset && t.dtype().is_some() {
                // The array view: real then ghost axes, bytes as stored.
                let arr = file.array(ds, t).unwrap();
                assert_eq!(arr.shape, t.shape.axes.iter().map(|&a| a as u64).collect::<Vec<_>>());
                assert_eq!(arr.data, bytes.as_ref());
            }
        }
    }
}

fn edges() -> Option<PathBuf> {
    rasterpack_common::testkit::corpus_dir("edges/udf")
}

/// Verdict (error and warning codes), and the `--strict` verdict.
fn verdict(path: &std::path::Path) -> (Vec<String>, Vec<String>, bool) {
    let input = Input::open(path).unwrap();
    let report = UdfFormat.validate(&input, &ValidateOptions::default());
    let by = |s: Severity| -> Vec<String> {
        report
            .findings
            .iter()
            .filter(|f| f.severity == s)
            .map(|f| f.code.clone())
            .collect()
    };
    (by(Severity::Error), by(Severity::Warning), report.is_valid(true))
}

fn read(path: &std::path::Path, element: &str) -> rasterpack_common::Result<rasterpack_common::NdArray> {
    let req = ArrayRequest {
        element: Some(element.to_string()),
        ..Default::default()
    };
    UdfFormat.read_array(&Input::open(path).unwrap(), &req)
}

fn floats(a: &rasterpack_common::NdArray) -> Vec<f64> {
    a.to_f64()
}

/// `corpus/edges/udf` (files the reference crate wrote, see its README): the expected
/// verdicts, and the values the reference's own `export` gives (checked with the reference
/// CLI built from CasualX/UntitledDataFormat f9b8a53).
#[test]
fn reference_written_edge_cases() {
    let Some(dir) = edges() else { return };
    let p = |n: &str| dir.join(n);

    // A single value and an array of [u8; 2]: ghost axes under NONE, a compatibility warning.
    for (file, shape, values) in [
        ("ref_value_u8_ghost.udf", vec![1u64], vec![0.0]),
        ("ref_slicearr_u8_ghost.udf", vec![2, 2], vec![0.0, 1.0, 128.0, 255.0]),
    ] {
        let (errors, warnings, strict_ok) = verdict(&p(file));
        assert!(errors.is_empty(), "{file}: {errors:?}");
        assert_eq!(warnings, vec![codes::HINT_GHOST_ON_NONE.to_string()], "{file}");
        assert!(!strict_ok, "{file}: --strict rejects the ghost axes");
        let a = read(&p(file), "root/v").unwrap();
        assert_eq!((a.dtype, a.shape.clone()), (DType::U8, shape), "{file}");
        assert_eq!(floats(&a), values, "{file}");
    }

    // A clean table beside a ghost-axis scalar: both read.
    let f = p("ref_import_good_and_ghost.udf");
    let (errors, warnings, _) = verdict(&f);
    assert!(errors.is_empty());
    assert_eq!(warnings, vec![codes::HINT_GHOST_ON_NONE.to_string()]);
    let good = read(&f, "root/good").unwrap();
    assert_eq!((good.dtype, good.shape.clone()), (DType::F32, vec![3]));
    assert_eq!(floats(&good), vec![1.5, 2.5, -3.0]);
    let height = read(&f, "root/height").unwrap();
    assert_eq!((height.shape.clone(), floats(&height)), (vec![1], vec![42.25]));

    // The empty text list as [0, 0]: a compatibility warning, an empty list.
    let f = p("ref_text_list_empty.udf");
    let (errors, warnings, strict_ok) = verdict(&f);
    assert!(errors.is_empty());
    assert_eq!(warnings, vec![codes::TEXT_EMPTY_LIST_NO_GHOST.to_string()]);
    assert!(!strict_ok);
    let file = UdfFile::open_strict(&Input::open(&f).unwrap(), &Limits::default()).unwrap();
    let (_, t) = file.find("root/l").unwrap();
    assert_eq!(file.text(t).unwrap(), UdfText::List(Vec::new()));
    assert_eq!(read(&f, "root/l").unwrap().shape, vec![0]);

    // An INDEX value out of range: invalid; the index table is refused with that code, the
    // table beside it reads.
    let f = p("ref_index_out_of_range.udf");
    let (errors, _, _) = verdict(&f);
    assert_eq!(errors, vec![codes::INDEX_OUT_OF_RANGE.to_string()]);
    let e = read(&f, "root/Idx").unwrap_err();
    assert_eq!(
        (e.kind, e.code.as_ref()),
        (ErrorKind::Invalid, codes::INDEX_OUT_OF_RANGE)
    );
    let points = read(&f, "root/Points").unwrap();
    assert_eq!(
        (points.shape.clone(), floats(&points)),
        (vec![2, 2], vec![0.0, 0.0, 1.0, 1.0])
    );
    let report = UdfFormat
        .inspect(&Input::open(&f).unwrap(), &Default::default())
        .unwrap();
    assert!(
        report.findings.has_code(codes::INDEX_OUT_OF_RANGE),
        "inspect checks the content of small tables"
    );

    // A cycle: invalid; the walk stops and the tables read.
    let f = p("ref_cycle.udf");
    let (errors, _, _) = verdict(&f);
    assert_eq!(errors, vec![codes::DATASET_CYCLE.to_string()]);
    assert_eq!(floats(&read(&f, "root/v").unwrap()), vec![1.0]);

    // Scheme 17 (SimpleU32): valid with a warning, decoded. The reference exports the 100
    // values (3 i) mod 17.
    let f = p("ref_compressed_simple_u32.udf");
    let (errors, warnings, _) = verdict(&f);
    assert!(errors.is_empty());
    assert_eq!(warnings, vec![codes::TABLE_COMPRESSED.to_string()]);
    let c = read(&f, "root/c").unwrap();
    assert_eq!((c.dtype, c.shape.clone()), (DType::U32, vec![100]));
    let want: Vec<f64> = (0..100u32).map(|i| ((3 * i) % 17) as f64).collect();
    assert_eq!(floats(&c), want);
}
