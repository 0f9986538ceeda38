//! Read and fully verify (CRC32C + SHA-256 + zstd + payload checks) a FOLD file holding a
//! 64 MiB float32 chunk, as `rasterpack validate` does.
//!
//! `cargo bench -p rasterpack-fold --bench verify`
//!
//! Reports MB/s of uncompressed payload (1 MB = 10^6 bytes), best of several runs, for a
//! stored-raw float32 chunk and for the same array in an NPZ0 chunk, both zstd level 3, plus
//! the single-thread cost of each stage for comparison.

use std::time::{Duration, Instant};

use rasterpack_common::{DType, Format, Input, NdArray, ValidateOptions};
use rasterpack_fold::{ChunkOptions, FoldBuilder, FoldFormat};
use sha2::{Digest, Sha256};

const MIB: usize = 1 << 20;

fn data() -> Vec<u8> {
    // A smooth field plus noise in the low mantissa bits: compresses like real rasters (~1.3x).
    let n = 64 * MIB / 4;
    let mut seed = 42u64;
    let mut out = Vec::with_capacity(n * 4);
    for i in 0..n {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let x = (i % 4096) as f32 / 4096.0;
        let y = (i / 4096) as f32 / 4096.0;
        let v = (x * 6.0).sin() * (y * 4.0).cos() * 100.0 + ((seed >> 40) as f32) * 1e-6;
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

fn best<F: FnMut()>(runs: usize, mut f: F) -> Duration {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn mbps(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e6
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let raw = data();
    let dir = std::env::temp_dir();
    let mut b = FoldBuilder::new();
    b.add_chunk("field", "F32R", &raw, ChunkOptions::default()).unwrap();
    let raw_file = dir.join(format!("rp-fold-bench-raw-{}.fold", std::process::id()));
    std::fs::write(&raw_file, b.to_bytes().unwrap()).unwrap();
    let arr = NdArray::new(DType::F32, vec![4096, (raw.len() / 4 / 4096) as u64], raw.clone()).unwrap();
    let mut b = FoldBuilder::new();
    b.add_npz("nuclear_arrays", &[("field", &arr)], ChunkOptions::default()).unwrap();
    let npz_file = dir.join(format!("rp-fold-bench-npz-{}.fold", std::process::id()));
    std::fs::write(&npz_file, b.to_bytes().unwrap()).unwrap();

    for (label, path) in [("raw F32R chunk", &raw_file), ("NPZ0 chunk", &npz_file)] {
        let input = Input::open(path).unwrap();
        let stored = input.len() as usize;
        let d = best(5, || {
            let r = FoldFormat.validate(&input, &ValidateOptions::default());
            assert!(r.is_valid(true), "{:?}", r.findings);
        });
        println!(
            "validate {label}: {:.1} ms, {:.0} MB/s uncompressed ({} MiB stored as {:.1} MiB)",
            d.as_secs_f64() * 1e3,
            mbps(raw.len(), d),
            raw.len() / MIB,
            stored as f64 / MIB as f64
        );
    }

    // Stage costs on one thread, over the same stored payload.
    let comp = zstd::bulk::compress(&raw, 3).unwrap();
    let d = best(3, || {
        std::hint::black_box(Sha256::digest(&comp));
    });
    println!("  SHA-256 of stored payload: {:.1} ms ({:.0} MB/s)", d.as_secs_f64() * 1e3, mbps(comp.len(), d));
    let d = best(3, || {
        std::hint::black_box(crc32c::crc32c(&comp));
    });
    println!("  CRC32C of stored payload:  {:.1} ms ({:.0} MB/s)", d.as_secs_f64() * 1e3, mbps(comp.len(), d));
    let d = best(3, || {
        let mut out = Vec::with_capacity(raw.len());
        zstd::bulk::Decompressor::new().unwrap().decompress_to_buffer(&comp, &mut out).unwrap();
        std::hint::black_box(out);
    });
    println!("  zstd decompress:           {:.1} ms ({:.0} MB/s uncompressed)", d.as_secs_f64() * 1e3, mbps(raw.len(), d));
    let d = best(3, || {
        std::hint::black_box(rasterpack_fold::npz::crc32(&raw));
    });
    println!("  CRC-32 (zip) of npz member: {:.1} ms ({:.0} MB/s)", d.as_secs_f64() * 1e3, mbps(raw.len(), d));
    let _ = std::fs::remove_file(&raw_file);
    let _ = std::fs::remove_file(&npz_file);
}
