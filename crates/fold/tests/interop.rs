//! Interoperability with pyfolds 1.0.2 over `$RASTERPACK_CORPUS/fold`: verdicts and codes as
//! the sidecars and ERRATA say, decoded JSON / NPZ arrays / hashes equal to the sidecars, and
//! the manifest hash source recomputed byte for byte.
//!
//! Finding codes map to sidecar `error_code`s by their last segment:
//! `CRC_MISMATCH` <-> `fold.integrity.crc_mismatch`.

use std::path::{Path, PathBuf};

use rasterpack_common::{ArrayRequest, DType, Format, Input, Severity, ValidateOptions};
use rasterpack_fold::{analyze, validate::manifest_source, FoldAnalyzeOptions, FoldContent, FoldFormat};
use serde_json::Value as J;
use sha2::{Digest, Sha256};

fn corpus() -> Option<PathBuf> {
    rasterpack_common::testkit::corpus_dir("fold")
}

fn samples(dir: &Path) -> Vec<(PathBuf, J)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if let Some(base) = name.strip_suffix(".truth.json") {
            let truth: J = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            out.push((dir.join(base), truth));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(out.len() >= 30, "expected the FOLD corpus, found {} samples", out.len());
    out
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Sidecar JSON: non-finite floats are `{"$nonfinite": "nan"}`; ours are the CLI strings.
fn normalize_sidecar(v: &J) -> J {
    match v {
        J::Object(m) if m.len() == 1 && m.contains_key("$nonfinite") => {
            let s = m["$nonfinite"].as_str().unwrap_or("");
            J::String(
                match s {
                    "nan" => "NaN",
                    "inf" | "infinity" => "Infinity",
                    _ => "-Infinity",
                }
                .into(),
            )
        }
        J::Object(m) => J::Object(m.iter().map(|(k, v)| (k.clone(), normalize_sidecar(v))).collect()),
        J::Array(a) => J::Array(a.iter().map(normalize_sidecar).collect()),
        other => other.clone(),
    }
}

fn flatten(v: &J, out: &mut Vec<J>) {
    match v {
        J::Array(a) => a.iter().for_each(|x| flatten(x, out)),
        other => out.push(other.clone()),
    }
}

#[test]
fn corpus_verdicts_codes_and_values() {
    let Some(dir) = corpus() else { return };
    let mut checked = 0;
    for (path, truth) in samples(&dir) {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(
            hex(&Sha256::digest(&bytes)),
            truth["file_sha256"].as_str().unwrap(),
            "{name}: corpus file changed"
        );
        let input = Input::open(&path).unwrap();
        let report = FoldFormat.validate(&input, &ValidateOptions::default());
        let verdict = truth["expected_verdict"].as_str().unwrap();
        let codes: Vec<String> = report.findings.iter().map(|f| f.code.clone()).collect();
        let has_code = |c: &str| {
            let want = c.to_ascii_lowercase();
            report
                .findings
                .iter()
                .any(|f| f.code.rsplit('.').next() == Some(want.as_str()))
        };
        let warnings = report
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Warning)
            .count();
        match verdict {
            "valid" => {
                assert!(
                    report.is_valid(false),
                    "{name}: expected valid, got {:?}",
                    report.findings
                );
                assert_eq!(warnings, 0, "{name}: unexpected warnings {:?}", report.findings);
            }
            "valid_with_warning" | "implementation_defined" => {
                assert!(
                    report.is_valid(false),
                    "{name}: expected valid, got {:?}",
                    report.findings
                );
                assert!(
                    !report.is_valid(true),
                    "{name}: expected a warning, got {:?}",
                    report.findings
                );
            }
            "invalid" => assert!(!report.is_valid(false), "{name}: expected invalid, got {codes:?}"),
            other => panic!("{name}: unknown verdict {other}"),
        }
        if let Some(code) = truth["error_code"].as_str() {
            assert!(has_code(code), "{name}: expected code {code}, got {codes:?}");
        }
        // Values: decoded content against the sidecar.
        let a = analyze(
            &input,
            &FoldAnalyzeOptions {
                content: true,
                decoded_sha256: true,
                ..Default::default()
            },
        )
        .unwrap();
        if let Some(c) = &a.container {
            if truth["manifest_source_utf8"].is_string() {
                assert_eq!(
                    manifest_source(&c.index.metadata),
                    truth["manifest_source_utf8"].as_str().unwrap(),
                    "{name}: manifest source differs"
                );
                assert_eq!(
                    a.manifest_recomputed.as_deref(),
                    truth["manifest_hash_recomputed"].as_str(),
                    "{name}"
                );
                assert_eq!(a.manifest_ok, truth["manifest_hash_matches"].as_bool(), "{name}");
            }
            assert_eq!(
                c.index.value.to_serde(),
                normalize_sidecar(&truth["index"]),
                "{name}: index differs"
            );
        }
        for tc in truth["chunks"].as_array().into_iter().flatten() {
            let Some(p) = tc.get("payload") else { continue };
            let cname = tc["index_entry"]["name"].as_str().unwrap();
            let Some(st) = a.chunks.iter().find(|s| s.entry.name == cname) else {
                panic!("{name}: chunk {cname} missing")
            };
            if verdict != "valid" && st.uncompressed_sha256.is_none() {
                continue; // an invalid file's chunk we refused to decode
            }
            assert_eq!(
                st.uncompressed_sha256.as_deref(),
                p["uncompressed_sha256"].as_str(),
                "{name}/{cname}: sha"
            );
            if let Some(j) = p.get("json") {
                match &st.content {
                    FoldContent::Json(v) => assert_eq!(v.to_serde(), normalize_sidecar(j), "{name}/{cname}: JSON"),
                    other => panic!("{name}/{cname}: expected JSON, got {other:?}"),
                }
            }
            if let Some(members) = p.get("zip_members") {
                match &st.content {
                    FoldContent::Zip(names) => assert_eq!(&J::from(names.clone()), members, "{name}/{cname}"),
                    other => panic!("{name}/{cname}: expected zip, got {other:?}"),
                }
            }
            if let Some(arrays) = p.get("npz_arrays").and_then(|v| v.as_object()) {
                let FoldContent::Npz(info) = &st.content else {
                    panic!("{name}/{cname}: expected NPZ")
                };
                assert_eq!(info.len(), arrays.len(), "{name}/{cname}");
                for (an, av) in arrays {
                    let i = info
                        .iter()
                        .find(|x| &x.name == an)
                        .unwrap_or_else(|| panic!("{name}: array {an}"));
                    assert_eq!(i.descr, av["dtype"].as_str().unwrap(), "{name}/{an}");
                    assert_eq!(J::from(i.shape.clone()), av["shape"], "{name}/{an}");
                    let Some(values) = av.get("values") else { continue };
                    if st.entry.ctype != "NPZ0" || !report.is_valid(false) {
                        continue;
                    }
                    let arr = FoldFormat
                        .read_array(
                            &input,
                            &ArrayRequest {
                                element: Some(format!("{cname}/{an}")),
                                ..Default::default()
                            },
                        )
                        .unwrap_or_else(|e| panic!("{name}/{an}: {e}"));
                    let mut want = Vec::new();
                    flatten(&normalize_sidecar(values), &mut want);
                    let got = arr.to_f64();
                    assert_eq!(got.len(), want.len(), "{name}/{an}");
                    for (g, w) in got.iter().zip(&want) {
                        match (arr.dtype, w) {
                            (DType::F32 | DType::F64, J::String(s)) => {
                                assert_eq!(rasterpack_common::json::fmt_f64(*g), *s)
                            }
                            (DType::F32 | DType::F64, w) => {
                                assert_eq!(g.to_bits(), w.as_f64().unwrap().to_bits(), "{name}/{an}")
                            }
                            (DType::Bool, J::Bool(b)) => assert_eq!(*g != 0.0, *b),
                            (_, w) => assert_eq!(*g, w.as_f64().unwrap(), "{name}/{an}"),
                        }
                    }
                }
            }
            if let Some(b64) = p.get("raw_b64").and_then(|v| v.as_str()) {
                assert!(b64.is_empty() || st.decoded, "{name}/{cname}");
            }
        }
        checked += 1;
    }
    eprintln!("checked {checked} FOLD corpus samples");
}

#[test]
fn corpus_ecc_single_block_repair_and_detection() {
    let Some(dir) = corpus() else { return };
    for base in ["v05_ecc_rs16_small.fold", "v06_ecc_rs32_zstd_small.fold"] {
        let bytes = std::fs::read(dir.join(base)).unwrap();
        let a = analyze(&Input::from_bytes(base, bytes.clone()), &FoldAnalyzeOptions::default()).unwrap();
        let mut seed = 0x1234_5678u64;
        let mut rnd = |n: usize| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) as usize) % n
        };
        for st in &a.chunks {
            let nsym = rasterpack_fold::ecc::parse_algo(&st.entry.ecc_algo).unwrap();
            let start = st.entry.offset as usize + 32;
            let len = st.entry.comp_len as usize;
            assert!(len <= 255 - nsym);
            for nerr in 1..=(nsym / 2 + 1).min(len) {
                let mut bad = bytes.clone();
                let mut pos: Vec<usize> = Vec::new();
                while pos.len() < nerr {
                    let p = start + rnd(len);
                    if !pos.contains(&p) {
                        pos.push(p);
                    }
                }
                for &p in &pos {
                    bad[p] ^= (1 + rnd(255)) as u8;
                }
                let input = Input::from_bytes("bad", bad);
                let r = FoldFormat.validate(&input, &ValidateOptions::default());
                if nerr <= nsym / 2 {
                    assert!(
                        r.is_valid(false),
                        "{base}/{}: {nerr} errors not repaired: {:?}",
                        st.entry.name,
                        r.findings
                    );
                    assert!(r.findings.has_code("fold.ecc.repaired"));
                    // convert writes the repaired file: byte-identical to the original.
                    let mut out = Vec::new();
                    rasterpack_fold::repair_copy(&input, &Default::default(), &mut out).unwrap();
                    assert_eq!(out, bytes);
                } else {
                    assert!(!r.is_valid(false), "{base}: {nerr} errors must be detected");
                    assert!(r.findings.has_code("fold.ecc.ecc_uncorrectable"), "{:?}", r.findings);
                }
            }
        }
    }
}
