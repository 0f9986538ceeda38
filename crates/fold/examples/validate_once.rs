//! Validate one FOLD file once (for profilers: `valgrind --tool=callgrind`, `perf`).
//! `cargo run --release -p rasterpack-fold --example validate_once -- FILE`; with `--make-npz
//! FILE` it first writes a 64 MiB noisy float32 array as an NPZ0 chunk (zstd -3) to FILE.

use rasterpack_common::{DType, Format, Input, NdArray, ValidateOptions};
use rasterpack_fold::{FoldBuilder, FoldChunkOptions, FoldFormat};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (make, path) = match args.as_slice() {
        [flag, p] if flag == "--make-npz" => (true, p.clone()),
        [p] => (false, p.clone()),
        _ => {
            eprintln!("usage: validate_once [--make-npz] FILE");
            std::process::exit(2);
        }
    };
    if make {
        let n = 16 << 20;
        let mut seed = 42u64;
        let mut raw = Vec::with_capacity(n * 4);
        for i in 0..n {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let (x, y) = ((i % 4096) as f32 / 4096.0, (i / 4096) as f32 / 4096.0);
            let v = (x * 6.0).sin() * (y * 4.0).cos() * 100.0 + ((seed >> 40) as f32) * 1e-6;
            raw.extend_from_slice(&v.to_le_bytes());
        }
        let arr = NdArray::new(DType::F32, vec![4096, (n / 4096) as u64], raw).expect("array");
        let mut b = FoldBuilder::new();
        b.add_npz("nuclear_arrays", &[("field", &arr)], FoldChunkOptions::default())
            .expect("npz");
        std::fs::write(&path, b.to_bytes().expect("fold")).expect("write");
        return;
    }
    let input = Input::open(std::path::Path::new(&path)).expect("open");
    let r = FoldFormat.validate(&input, &ValidateOptions::default());
    println!("valid: {}, {} finding(s)", r.is_valid(true), r.findings.len());
}
