//! Conformance corpus: every sample's verdict and codes, and for valid files every decoded
//! value, text, JSON document and offset, against the sidecar `*.truth.json`.

use std::path::PathBuf;

use rasterpack_common::{Input, Limits, Severity};
use rasterpack_udf::{codes, validate, Hint, Prim, Text, UdfFile, Values};
use serde_json::Value;
use sha2::{Digest, Sha256};

fn corpus() -> Option<PathBuf> {
    match std::env::var_os("RASTERPACK_CORPUS") {
        None => {
            eprintln!("RASTERPACK_CORPUS not set: skipping the UDF interop test");
            None
        }
        Some(c) => {
            let d = PathBuf::from(c).join("udf");
            assert!(d.is_dir(), "RASTERPACK_CORPUS is set but {} is missing", d.display());
            Some(d)
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn values_json(v: &Values) -> Vec<Value> {
    match v {
        Values::U8(x) => x.iter().map(|&a| Value::from(a)).collect(),
        Values::I8(x) => x.iter().map(|&a| Value::from(a)).collect(),
        Values::U16(x) => x.iter().map(|&a| Value::from(a)).collect(),
        Values::I16(x) => x.iter().map(|&a| Value::from(a)).collect(),
        Values::U32(x) => x.iter().map(|&a| Value::from(a)).collect(),
        Values::I32(x) => x.iter().map(|&a| Value::from(a)).collect(),
        Values::U64(x) => x.iter().map(|&a| Value::from(a)).collect(),
        Values::I64(x) => x.iter().map(|&a| Value::from(a)).collect(),
        // Floats are compared bit for bit below.
        Values::F32(x) => x.iter().map(|&a| Value::from((a as f64).to_bits())).collect(),
        Values::F64(x) => x.iter().map(|&a| Value::from(a.to_bits())).collect(),
        Values::Custom(_) => Vec::new(),
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
        let verdict = truth["expected_verdict"].as_str().unwrap();
        match verdict {
            "valid" => assert!(got.is_empty(), "{name}: valid file got {:?}", doc.findings),
            "invalid" => {
                let code = truth["error_code"].as_str().unwrap();
                assert!(
                    got.iter().any(|g| g == code),
                    "{name}: want {code}, got {:?}",
                    doc.findings
                );
            }
            other => panic!("{name}: unexpected verdict {other}"),
        }
        assert_eq!(got, want, "{name}: findings {:?}", doc.findings);
        if verdict == "valid" {
            check_values(&name, &file, &truth);
            checked_values += 1;
        }
    }
    assert!(checked_values >= 14);
}

fn check_values(name: &str, path: &std::path::Path, truth: &Value) {
    let input = Input::open(path).unwrap();
    let file = UdfFile::open(&input, &Limits::default()).unwrap();
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
                    (Text::Scalar(s), Value::String(w)) => assert_eq!(s, w, "{tn}"),
                    (Text::List(v), Value::Array(w)) => {
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
