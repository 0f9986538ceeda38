//! Regenerate `testdata/udf/` (run from the workspace root):
//! `cargo run -p rasterpack-udf --example make_udf_testdata`
fn main() {
    let bytes = rasterpack_udf::samples::sample()
        .and_then(|w| w.to_bytes())
        .expect("sample");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/udf");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("sample.udf"), bytes).expect("write");
}
