//! The project's own samples in `testdata/fold/` (made by `examples/make_fold_testdata.rs`): valid
//! without warnings, and `inspect` shows what they hold.

use std::path::Path;

use rasterpack_common::{ArrayRequest, DType, Format, Input, InspectOptions, Section, ValidateOptions};
use rasterpack_fold::FoldFormat;

fn open(name: &str) -> Input {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/fold")
        .join(name);
    Input::open(&p).unwrap()
}

#[test]
fn samples_are_valid() {
    for name in ["sample.fold", "sample_rs16.fold"] {
        let input = open(name);
        assert!(FoldFormat.detect(&input.head(64)));
        let r = FoldFormat.validate(&input, &ValidateOptions::default());
        assert!(r.is_valid(true), "{name}: {:?}", r.findings);
    }
}

#[test]
fn inspect_sample() {
    let r = FoldFormat
        .inspect(&open("sample.fold"), &InspectOptions::default())
        .unwrap();
    let s = &r.summary;
    assert_eq!(s["kind"], "fold");
    assert_eq!(s["version"], "1.2.0");
    assert_eq!(s["manifest_hash_ok"], true);
    let chunks = s["chunks"].as_array().unwrap();
    let names: Vec<&str> = chunks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["llm_manifest", "metrics", "nuclear_arrays"]);
    assert_eq!(chunks[1]["json"]["loss_curve"][3], "NaN");
    assert_eq!(chunks[2]["arrays"][0]["name"], "grid");
    assert_eq!(chunks[2]["arrays"][0]["dtype"], "float32");
    assert_eq!(chunks[2]["arrays"][0]["descr"], "<f4");
    assert_eq!(
        s["arrays"],
        serde_json::json!([
            {"name": "nuclear_arrays/grid", "dtype": "float32", "shape": [3, 4]},
            {"name": "nuclear_arrays/counts", "dtype": "int32", "shape": [4]}
        ])
    );
    assert_eq!(chunks[2]["arrays"][0]["shape"], serde_json::json!([3, 4]));
    assert!(r
        .sections
        .iter()
        .any(|sec| matches!(sec, Section::Table { title, .. } if title == "Chunks")));
    let grid = FoldFormat
        .read_array(
            &open("sample.fold"),
            &ArrayRequest {
                element: Some("nuclear_arrays/grid".into()),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(grid.dtype, DType::F32);
    assert_eq!(grid.to_f64()[..4], [-1.0, -0.5, 0.0, 0.5]);
}

#[test]
fn validate_summary_lists_the_arrays() {
    let r = FoldFormat.validate(&open("sample.fold"), &Default::default());
    assert_eq!(
        r.summary["arrays"],
        serde_json::json!([
            {"name": "nuclear_arrays/grid", "dtype": "float32", "shape": [3, 4]},
            {"name": "nuclear_arrays/counts", "dtype": "int32", "shape": [4]}
        ])
    );
}
