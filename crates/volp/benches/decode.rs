//! In-process speed of the VOLP read paths on a 256 MiB float32 volume (the VOLP limit), each
//! beside a bare zstd decompression of the same body in the same run: `read` into memory,
//! `validate` (streamed, nothing kept), and the physical float64 read beside a plain memory
//! copy of the same output size.
//!
//! `cargo bench -p rasterpack-volp --bench decode` (`VOLP_BENCH_MIB=64` for a smaller volume).
//! The whole-process comparison with the `zstd` command is in docs/performance.md (files from
//! `examples/make_bench_volp.rs`).

use std::hint::black_box;
use std::time::{Duration, Instant};

use rasterpack_volp::{ArrayRequest, VolpFile, VolpWriteOptions, VolpWriter};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    let mut ts = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        black_box(f());
        ts.push(t.elapsed());
    }
    median(ts)
}

fn mbps(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e6
}

fn main() {
    let mib: u64 = std::env::var("VOLP_BENCH_MIB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256);
    let t = Instant::now();
    let volume = rasterpack_volp::samples::bench_volume(mib);
    let bytes = VolpWriter::encode(&volume, &VolpWriteOptions::default()).expect("encode");
    let out_len = volume.data.len();
    drop(volume);
    let file = VolpFile::from_bytes(bytes.clone()).expect("open");
    let body = &bytes[file.body_offset() as usize..];
    eprintln!(
        "volume {:?} float32: {out_len} bytes decoded, {} bytes compressed (ratio {:.2}); made in {:.1?}",
        file.header().shape,
        body.len(),
        out_len as f64 / body.len() as f64,
        t.elapsed()
    );

    let runs = 5;
    let mut dctx = zstd::bulk::Decompressor::new().expect("zstd");
    // Interleave so drift in machine load affects all alike.
    let (mut bare, mut read, mut validate) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        bare.push(time(1, || {
            let mut out = Vec::with_capacity(out_len);
            dctx.decompress_to_buffer(body, &mut out).expect("bare zstd");
            out
        }));
        read.push(time(1, || file.read(&ArrayRequest::default()).expect("read")));
        validate.push(time(1, || assert!(file.validate().is_valid(true))));
    }
    let (bare, read, validate) = (median(bare), median(read), median(validate));
    let line = |what: &str, d: Duration| {
        println!(
            "{what:<28}: {d:>8.1?}  {:>7.0} MB/s  ratio to bare zstd {:.3}",
            mbps(out_len, d),
            d.as_secs_f64() / bare.as_secs_f64()
        )
    };
    line("bare zstd (one shot)", bare);
    line("read into memory", read);
    line("validate (streamed)", validate);

    let phys = time(runs, || {
        file.read(&ArrayRequest::default().with_physical(true))
            .expect("physical")
    });
    let src = vec![1u8; out_len * 2];
    let copy = time(runs, || src.clone());
    println!(
        "{:<28}: {phys:>8.1?}  {:>7.0} MB/s written   memcpy of the same {} bytes: {copy:.1?}",
        "physical read (float64)",
        mbps(out_len * 2, phys),
        out_len * 2
    );
}
