//! Decode throughput of a 256 MiB float32 volume (the VOLP limit) against a bare zstd
//! decompression of the same body in the same run, plus the physical-value conversion against
//! a plain memory copy of the same output size.
//!
//! `cargo bench -p rasterpack-volp --bench decode` (VOLP_BENCH_MIB=64 for a smaller volume).

use std::hint::black_box;
use std::time::{Duration, Instant};

use rasterpack_common::DType;
use rasterpack_volp::{decode, encode, to_physical, validate};
use serde_json::Map;

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
    let (levels, lat) = (mib / 4, 1024u64);
    let lon = 1024u64;
    let n = (levels * lat * lon) as usize;
    // A smooth field (waves over lat/lon, a lapse with level) plus small noise, in float32.
    let t = Instant::now();
    let mut data = Vec::with_capacity(n * 4);
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for l in 0..levels {
        for y in 0..lat {
            for x in 0..lon {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let noise = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                let v = 280.0 - 0.5 * l as f32
                    + 10.0 * ((x as f32) * 0.01).sin() * ((y as f32) * 0.013).cos()
                    + 0.05 * noise;
                data.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    let file = encode(DType::F32, [levels, lat, lon], &data, 1.0, 0.0, &Map::new(), 3).expect("encode");
    drop(data);
    let header_len = u32::from_le_bytes([file[4], file[5], file[6], file[7]]) as usize;
    let body = &file[8 + header_len..];
    let out_len = n * 4;
    eprintln!(
        "volume [{levels}, {lat}, {lon}] float32: {out_len} bytes decoded, {} bytes compressed (ratio {:.2}); generated in {:.1?}",
        body.len(),
        out_len as f64 / body.len() as f64,
        t.elapsed()
    );

    let runs = 5;
    let mut dctx = zstd::bulk::Decompressor::new().expect("zstd");
    // Interleave the two so drift in machine load affects both alike.
    let (mut bare, mut volp) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        bare.push(time(1, || {
            let mut out = Vec::with_capacity(out_len);
            dctx.decompress_to_buffer(body, &mut out).expect("bare zstd");
            out
        }));
        volp.push(time(1, || decode(&file).expect("decode")));
    }
    let (bare, volp) = (median(bare), median(volp));
    println!(
        "bare zstd decompress : {:>8.1?}  {:>7.0} MB/s (decoded bytes)",
        bare,
        mbps(out_len, bare)
    );
    println!(
        "volp decode          : {:>8.1?}  {:>7.0} MB/s  ratio to bare zstd {:.3}",
        volp,
        mbps(out_len, volp),
        volp.as_secs_f64() / bare.as_secs_f64()
    );

    let vol = decode(&file).expect("decode");
    let phys = time(runs, || to_physical(&vol));
    let phys_bytes = n * 8;
    let src = vec![1u8; phys_bytes];
    let copy = time(runs, || src.clone());
    drop(src);
    println!(
        "to_physical (f64)    : {:>8.1?}  {:>7.0} MB/s written ({} elements)  memcpy of the same {} bytes: {:.1?} ({:.0} MB/s)",
        phys,
        mbps(phys_bytes, phys),
        n,
        phys_bytes,
        copy,
        mbps(phys_bytes, copy)
    );
    drop(vol);
    let val = time(3, || validate(&file));
    println!("validate (full)      : {:>8.1?}  {:>7.0} MB/s", val, mbps(out_len, val));
    let again = time(3, || decode(&file).expect("decode"));
    println!(
        "volp decode (again)  : {:>8.1?}  {:>7.0} MB/s",
        again,
        mbps(out_len, again)
    );
}
