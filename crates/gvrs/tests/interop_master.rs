//! Interop with files written by Gridfour master (2026: canonical Huffman, revised LSOP header,
//! Short fill carried as `Integer.MIN_VALUE`), `$RASTERPACK_CORPUS/gvrs/master`: verdicts, element
//! facts, populated tiles, and every element decoded bit-exactly (SHA-256 of the sidecars and
//! byte for byte with the `.raw` dumps Gridfour master's API wrote), through both the whole-element
//! read and the CLI's `read_array`.

mod util;
use std::path::{Path, PathBuf};
use util::*;

use rasterpack_common::{ArrayRequest, DType, Format, Input, Limits, Severity, ValidateOptions};
use rasterpack_gvrs::{GvrsFile, GvrsFormat};
use serde_json::Value;

fn master_dir() -> Option<PathBuf> {
    rasterpack_common::testkit::corpus_dir("gvrs/master")
}

fn name_of(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

/// The dump form of the sidecars: Integer/Short as int32le, Float/ICF as float32le.
fn as_dump(a: &rasterpack_common::NdArray) -> Vec<u8> {
    if a.dtype == DType::I16 {
        a.data
            .chunks_exact(2)
            .flat_map(|c| i32::from(i16::from_le_bytes([c[0], c[1]])).to_le_bytes())
            .collect()
    } else {
        a.data.clone()
    }
}

#[test]
fn master_files_validate_clean() {
    let Some(dir) = master_dir() else { return };
    for (path, truth) in sidecars(&dir) {
        let name = name_of(&path);
        let report = GvrsFormat.validate(&Input::open(&path).unwrap(), &ValidateOptions::default());
        assert_eq!(
            truth["expected_verdict"], "valid",
            "{name}: only valid files are expected here"
        );
        let problems: Vec<_> = report
            .findings
            .iter()
            .filter(|f| f.severity != Severity::Info)
            .collect();
        assert!(problems.is_empty(), "{name}: {problems:#?}");
        assert!(!report.unsupported, "{name}: unsupported: {:#?}", report.findings);
        assert_eq!(
            report.summary["populated_tiles"].as_u64(),
            truth["populated_tiles"].as_u64(),
            "{name}: populated tiles"
        );
    }
}

#[test]
fn master_files_decode_bit_exactly() {
    let Some(dir) = master_dir() else { return };
    let mut failures = Vec::new();
    for (path, t) in sidecars(&dir) {
        let name = name_of(&path);
        let f = GvrsFile::from_input(Input::open(&path).unwrap(), Limits::default()).unwrap();
        assert_eq!(f.geometry.rows as u64, t["rows"].as_u64().unwrap(), "{name}");
        assert_eq!(f.geometry.cols as u64, t["cols"].as_u64().unwrap(), "{name}");
        assert_eq!(f.geometry.tile_rows as u64, t["tile_rows"].as_u64().unwrap(), "{name}");
        assert_eq!(f.geometry.tile_cols as u64, t["tile_cols"].as_u64().unwrap(), "{name}");
        assert_eq!(
            f.header.checksums != 0,
            t["checksums_enabled"].as_bool().unwrap(),
            "{name}"
        );
        let codecs: Vec<String> = f.header.codecs.iter().map(|c| c.lossy()).collect();
        let configured: Vec<String> = t["codecs_configured"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        assert_eq!(codecs, configured, "{name}: codec list");
        for (i, te) in t["elements"].as_array().unwrap().iter().enumerate() {
            assert_eq!(f.elements[i].name(), te["name"].as_str().unwrap(), "{name}");
            assert_eq!(
                f.elements[i].element_type().name(),
                te["type"].as_str().unwrap(),
                "{name}"
            );
            let data = as_dump(&read_el(&f, i, false).unwrap());
            if sha(&data) != te["raw_sha256"].as_str().unwrap() {
                failures.push(format!("{name} element {i}: values differ from raw_sha256"));
            }
            if let Some(raw) = te["raw_file"].as_str() {
                let want = std::fs::read(dir.join(raw)).unwrap();
                if data != want {
                    let first = data.chunks(4).zip(want.chunks(4)).position(|(a, b)| a != b);
                    failures.push(format!(
                        "{name} element {i}: differs from {raw} first at cell {first:?}"
                    ));
                }
            }
            if te["type"] == "INT_CODED_FLOAT" {
                let codes = read_el(&f, i, true).unwrap();
                if sha(&codes.data) != te["icode_raw_sha256"].as_str().unwrap() {
                    failures.push(format!("{name} element {i}: codes differ from icode_raw_sha256"));
                }
            }
            check_stats(&name, i, &data, te);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The sidecar statistics: over every cell that is not NaN, summed in f64 in row-major order.
fn check_stats(name: &str, i: usize, data: &[u8], te: &Value) {
    let st = &te["stats"];
    let float = te["raw_dtype"] == "float32le";
    let (mut n_nan, mut sum, mut min, mut max) = (0u64, 0f64, f64::INFINITY, f64::NEG_INFINITY);
    for c in data.chunks_exact(4) {
        let b = [c[0], c[1], c[2], c[3]];
        let v = if float {
            f64::from(f32::from_le_bytes(b))
        } else {
            f64::from(i32::from_le_bytes(b))
        };
        if v.is_nan() {
            n_nan += 1;
            continue;
        }
        sum += v;
        min = min.min(v);
        max = max.max(v);
    }
    assert_eq!(
        data.len() as u64 / 4,
        st["n_cells"].as_u64().unwrap(),
        "{name} element {i} n_cells"
    );
    assert_eq!(n_nan, st["n_nan"].as_u64().unwrap(), "{name} element {i} n_nan");
    assert_eq!(min, st["min"].as_f64().unwrap(), "{name} element {i} min");
    assert_eq!(max, st["max"].as_f64().unwrap(), "{name} element {i} max");
    assert_eq!(sum, st["sum_float64"].as_f64().unwrap(), "{name} element {i} sum");
}

/// What `rasterpack convert` hands out is what Gridfour master reads (the Short holes file is
/// the case that once came back as 0 instead of -32768).
#[test]
fn master_files_convert_like_gridfour() {
    let Some(dir) = master_dir() else { return };
    for (path, t) in sidecars(&dir) {
        let name = name_of(&path);
        let input = Input::open(&path).unwrap();
        for te in t["elements"].as_array().unwrap() {
            let req = ArrayRequest {
                element: Some(te["name"].as_str().unwrap().to_string()),
                ..Default::default()
            };
            let a = GvrsFormat.read_array(&input, &req).unwrap();
            assert_eq!(
                sha(&as_dump(&a)),
                te["raw_sha256"].as_str().unwrap(),
                "{name} {}",
                te["name"]
            );
        }
    }
    let short = Input::open(dir.join("head_short_holes.gvrs")).unwrap();
    let a = GvrsFormat.read_array(&short, &ArrayRequest::default()).unwrap();
    let fill = a
        .data
        .chunks_exact(2)
        .filter(|c| i16::from_le_bytes([c[0], c[1]]) == i16::MIN)
        .count();
    assert!(
        fill > 10_000,
        "Gridfour master reads the unwritten cells as -32768 ({fill})"
    );
}
