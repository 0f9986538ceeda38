//! Regenerates the small sample files in `testdata/fold/` with rasterpack's own writer:
//! `cargo run -p rasterpack-fold --example make_fold_testdata`.

use rasterpack_common::{DType, NdArray};
use rasterpack_fold::pjson::{self, Value};
use rasterpack_fold::{FoldBuilder, FoldChunkOptions, FoldCompression};

fn main() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/fold");
    std::fs::create_dir_all(&dir).expect("create testdata/fold");

    // sample.fold: a JSON manifest, JSON metrics and an NPZ0 chunk with two arrays, zstd.
    let mut b = FoldBuilder::new();
    b.created_at_unix = 1767225600.0;
    b.metadata("model_type", Value::str("RasterpackSample")).unwrap();
    b.metadata("protection", Value::str("off")).unwrap();
    b.metadata(
        "tags",
        Value::object(vec![("run", Value::str("sample")), ("note", Value::str("café"))]),
    )
    .unwrap();
    let manifest = pjson::parse(
        br#"{"format":"fold","version":"1.2.0","model_type":"RasterpackSample","routing":{"arrays":"nuclear_arrays"}}"#,
        64,
    )
    .unwrap();
    let opts = FoldChunkOptions::default();
    b.add_json("llm_manifest", &manifest, opts).unwrap();
    let metrics = pjson::parse(
        br#"{"spike_rate":0.25,"theta":0.5,"steps":42,"loss_curve":[1.0,0.5,0.25,NaN]}"#,
        64,
    )
    .unwrap();
    b.add_json("metrics", &metrics, opts).unwrap();
    let grid: Vec<u8> = (0..12).flat_map(|i| (i as f32 * 0.5 - 1.0).to_le_bytes()).collect();
    let grid = NdArray::new(DType::F32, vec![3, 4], grid).unwrap();
    let counts = NdArray::new(
        DType::I32,
        vec![4],
        [3i32, 1, 4, 1].iter().flat_map(|v| v.to_le_bytes()).collect(),
    )
    .unwrap();
    b.add_npz("nuclear_arrays", &[("grid", &grid), ("counts", &counts)], opts)
        .unwrap();
    std::fs::write(dir.join("sample.fold"), b.to_bytes().unwrap()).unwrap();

    // sample_rs16.fold: uncompressed small chunks protected by rs(16) (one RS block each).
    let mut b = FoldBuilder::new();
    b.created_at_unix = 1767225600.0;
    b.metadata("protection", Value::str("low")).unwrap();
    let opts = FoldChunkOptions {
        compression: FoldCompression::None,
        ecc: Some(16),
    };
    b.add_json("metrics", &metrics, opts).unwrap();
    b.add_chunk(
        "blob",
        "BLOB",
        b"rasterpack sample payload protected by Reed-Solomon rs(16)",
        opts,
    )
    .unwrap();
    assert!(b.notes.is_empty());
    std::fs::write(dir.join("sample_rs16.fold"), b.to_bytes().unwrap()).unwrap();
    println!("wrote {}", dir.display());
}
