//! Regenerate `testdata/vds` with the test-support writer:
//! `cargo run -p rasterpack-vds-meta --features testsupport --example make_vds_testdata`.

fn main() -> std::io::Result<()> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/vds");
    rasterpack_vds_meta::testsupport::write_testdata(&dir)?;
    println!("wrote {}", dir.display());
    Ok(())
}
