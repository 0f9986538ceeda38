//! Write the VOLP sample files into `testdata/volp/` (run from the workspace root):
//! `cargo run -p rasterpack-volp --example make_volp_testdata`
fn main() -> std::io::Result<()> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/volp");
    std::fs::create_dir_all(&dir)?;
    for (name, bytes) in rasterpack_volp::samples::all() {
        std::fs::write(dir.join(name), &bytes)?;
        println!("{name}: {} bytes", bytes.len());
    }
    Ok(())
}
