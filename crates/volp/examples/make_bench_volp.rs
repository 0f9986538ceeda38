//! Write the files of the VOLP speed comparison (docs/performance.md, VOLP): a float32 VOLP file
//! of `MIB` MiB of values (default 64) and its body alone, for `zstd -d`:
//! `cargo run --release -p rasterpack-volp --example make_bench_volp -- DIR [MIB]`
//! writes `DIR/bench_MIBmib_f32.volp` and `DIR/bench_MIBmib_f32.body.zst`.
use rasterpack_volp::{VolpFile, VolpWriteOptions, VolpWriter};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().ok_or("usage: make_bench_volp DIR [MIB]")?);
    let mib: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(64);
    let volume = rasterpack_volp::samples::bench_volume(mib);
    let bytes = VolpWriter::encode(&volume, &VolpWriteOptions::default())?;
    let body_at = VolpFile::from_bytes(bytes.clone())?.body_offset() as usize;
    std::fs::create_dir_all(&dir)?;
    let stem = dir.join(format!("bench_{mib}mib_f32"));
    std::fs::write(stem.with_extension("volp"), &bytes)?;
    std::fs::write(stem.with_extension("body.zst"), &bytes[body_at..])?;
    println!(
        "{}: shape {:?}, {} bytes of values, {} bytes of body",
        stem.with_extension("volp").display(),
        volume.shape,
        volume.data.len(),
        bytes.len() - body_at
    );
    Ok(())
}
