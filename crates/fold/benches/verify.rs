//! Read and fully verify (CRC32C + SHA-256 + zstd + payload checks) a FOLD file holding a
//! 64 MiB float32 chunk, as `rasterpack validate` does.
//!
//! `cargo bench -p rasterpack-fold --bench verify`
//!
//! Reports MB/s of uncompressed payload (1 MB = 10^6 bytes), best of several runs, for a
//! stored-raw float32 chunk and for the same array in an NPZ0 chunk, both zstd level 3, plus
//! the single-thread cost of each stage for comparison; then what Python's
//! `np.asarray(rasterpack.open(p)[name])` does (open, `arrays()`, read), with the read checking
//! its chunk in its one decoding pass, beside a read that verifies first (as before).

use std::time::{Duration, Instant};

use rasterpack_common::{DType, Format, Input, NdArray, ValidateOptions};
use rasterpack_fold::{FoldBuilder, FoldChunkOptions, FoldFormat};
use sha2::{Digest, Sha256};

const MIB: usize = 1 << 20;

/// 64 MiB of float32. `noisy`: a smooth field plus noise in the low mantissa bits (zstd -3
/// ratio ~1.13, literal-heavy: the slow case). Otherwise the field rounded to 1/64 (ratio
/// ~3, match-heavy), like quantized rasters.
fn data(noisy: bool) -> Vec<u8> {
    let n = 64 * MIB / 4;
    let mut seed = 42u64;
    let mut out = Vec::with_capacity(n * 4);
    for i in 0..n {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let x = (i % 4096) as f32 / 4096.0;
        let y = (i / 4096) as f32 / 4096.0;
        let smooth = (x * 6.0).sin() * (y * 4.0).cos() * 100.0;
        let v = if noisy {
            smooth + ((seed >> 40) as f32) * 1e-6
        } else {
            (smooth * 64.0).round() / 64.0
        };
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

/// CPU time of the calling thread (ns resolution, Linux `/proc/thread-self/schedstat`), so
/// stage costs can be read even when other processes load the machine.
fn thread_cpu() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(Duration::from_nanos(s.split_whitespace().next()?.parse().ok()?))
}

/// CPU time of the whole process (all threads), in clock ticks of 10 ms.
fn process_cpu() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = s.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// Least thread CPU time over `runs` runs of a single-threaded stage.
fn best_cpu<F: FnMut()>(runs: usize, mut f: F) -> Duration {
    (0..runs)
        .filter_map(|_| {
            let a = thread_cpu()?;
            f();
            Some(thread_cpu()? - a)
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
    for noisy in [true, false] {
        println!("== {} float32 data ==", if noisy { "noisy" } else { "quantized" });
        run(&data(noisy));
    }
}

fn run(raw: &[u8]) {
    let raw = raw.to_vec();
    let dir = std::env::temp_dir();
    let mut b = FoldBuilder::new();
    b.add_chunk("field", "F32R", &raw, FoldChunkOptions::default()).unwrap();
    let raw_file = dir.join(format!("rp-fold-bench-raw-{}.fold", std::process::id()));
    std::fs::write(&raw_file, b.to_bytes().unwrap()).unwrap();
    let arr = NdArray::new(DType::F32, vec![4096, (raw.len() / 4 / 4096) as u64], raw.clone()).unwrap();
    let mut b = FoldBuilder::new();
    b.add_npz("nuclear_arrays", &[("field", &arr)], FoldChunkOptions::default())
        .unwrap();
    let npz_file = dir.join(format!("rp-fold-bench-npz-{}.fold", std::process::id()));
    std::fs::write(&npz_file, b.to_bytes().unwrap()).unwrap();

    for (label, path) in [("raw F32R chunk", &raw_file), ("NPZ0 chunk", &npz_file)] {
        let input = Input::open(path).unwrap();
        let stored = input.len() as usize;
        let runs = 5;
        let cpu0 = process_cpu();
        let d = best(runs, || {
            let r = FoldFormat.validate(&input, &ValidateOptions::default());
            assert!(r.is_valid(true), "{:?}", r.findings);
        });
        let cpu = process_cpu()
            .zip(cpu0)
            .map(|(b, a)| (b - a) / runs as u32)
            .unwrap_or_default();
        println!(
            "validate {label}: wall {:.1} ms best of {runs} = {:.0} MB/s uncompressed; CPU {:.0} ms per run (both threads) ({} MiB stored as {:.1} MiB)",
            d.as_secs_f64() * 1e3,
            mbps(raw.len(), d),
            cpu.as_secs_f64() * 1e3,
            raw.len() / MIB,
            stored as f64 / MIB as f64
        );
    }

    // What Python's `np.asarray(rasterpack.open(p)[name])` does: open, list the arrays (every
    // NPZ0 chunk verified), read one into memory. The read after `arrays()` checks the chunk
    // in the pass that decodes it; a read on a freshly opened file (what every read did
    // before) verifies the chunk first, then decodes it again.
    let req = rasterpack_common::ArrayRequest::for_element("nuclear_arrays/field");
    let runs = 5;
    let timed = |label: &str, fresh_read: bool| {
        let cpu0 = process_cpu();
        let d = best(runs, || {
            let f = rasterpack_fold::FoldFile::open(&npz_file).unwrap();
            assert_eq!(f.arrays().unwrap().len(), 1);
            let got = if fresh_read {
                rasterpack_fold::FoldFile::open(&npz_file).unwrap().read(&req)
            } else {
                f.read(&req)
            };
            assert_eq!(got.unwrap().data.len(), raw.len());
        });
        let cpu = process_cpu()
            .zip(cpu0)
            .map(|(b, a)| (b - a) / runs as u32)
            .unwrap_or_default();
        println!(
            "open + arrays + read, {label}: wall {:.1} ms best of {runs} = {:.0} MB/s; CPU {:.0} ms per run",
            d.as_secs_f64() * 1e3,
            mbps(raw.len(), d),
            cpu.as_secs_f64() * 1e3
        );
    };
    timed("the read checks its chunk in its one pass (now)", false);
    timed("the read verifies first, then decodes (before)", true);

    // Stage costs on one thread (thread CPU time, best of 3), over the same stored payload.
    let comp = zstd::bulk::compress(&raw, 3).unwrap();
    let read = best_cpu(3, || {
        let input = Input::open(&raw_file).unwrap();
        std::hint::black_box(input.read_vec(0, input.len(), "all", &Default::default()).unwrap());
    });
    let pieces = best_cpu(3, || {
        let input = Input::open(&raw_file).unwrap();
        let mut buf = vec![0u8; 2 << 20];
        let mut pos = 0u64;
        while pos < input.len() {
            let n = (input.len() - pos).min(buf.len() as u64) as usize;
            input.read_at(pos, &mut buf[..n], "piece").unwrap();
            pos += n as u64;
        }
    });
    let sha = best_cpu(3, || {
        std::hint::black_box(Sha256::digest(&comp));
    });
    let crc = best_cpu(3, || {
        std::hint::black_box(crc32c::crc32c(&comp));
    });
    let zstd_t = best_cpu(3, || {
        let mut out = Vec::with_capacity(raw.len());
        zstd::bulk::Decompressor::new()
            .unwrap()
            .decompress_to_buffer(&comp, &mut out)
            .unwrap();
        std::hint::black_box(out);
    });
    let mut warm: Vec<u8> = vec![1u8; raw.len()];
    let zstd_warm = best_cpu(3, || {
        warm.clear();
        zstd::bulk::Decompressor::new()
            .unwrap()
            .decompress_to_buffer(&comp, &mut warm)
            .unwrap();
    });
    let zstd_stream = best_cpu(3, || {
        use std::io::Read;
        let mut d = zstd::stream::read::Decoder::with_buffer(&comp[..]).unwrap();
        let mut buf = vec![0u8; 256 << 10];
        let mut n = 0usize;
        loop {
            let k = d.read(&mut buf).unwrap();
            if k == 0 {
                break;
            }
            n += k;
        }
        assert_eq!(n, raw.len());
    });
    let zip_crc = best_cpu(3, || {
        std::hint::black_box(rasterpack_fold::npz::crc32(&raw));
    });
    // The streaming `.npz` check of validate (CRC-32, headers) fed the archive in 256 KiB
    // pieces, as the zstd thread does.
    let archive = rasterpack_fold::npz::write(&[("field", &arr)]);
    let npz_stream = best_cpu(3, || {
        let mut c = rasterpack_fold::npz::StreamCheck::new(&Default::default());
        for p in archive.chunks(256 << 10) {
            c.feed(p);
        }
        assert!(c.finish().is_some());
    });
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("  stage CPU times (one thread):");
    println!(
        "    read file (pread):        {:6.1} ms ({:.0} MB/s)",
        ms(read),
        mbps(comp.len(), read)
    );
    println!(
        "    read in 2 MiB pieces:     {:6.1} ms ({:.0} MB/s)",
        ms(pieces),
        mbps(comp.len(), pieces)
    );
    println!(
        "    SHA-256 of stored payload:{:6.1} ms ({:.0} MB/s)",
        ms(sha),
        mbps(comp.len(), sha)
    );
    println!(
        "    CRC32C of stored payload: {:6.1} ms ({:.0} MB/s)",
        ms(crc),
        mbps(comp.len(), crc)
    );
    println!(
        "    zstd decompress:          {:6.1} ms ({:.0} MB/s uncompressed)",
        ms(zstd_t),
        mbps(raw.len(), zstd_t)
    );
    println!(
        "    zstd into a reused buffer:{:6.1} ms ({:.0} MB/s uncompressed)",
        ms(zstd_warm),
        mbps(raw.len(), zstd_warm)
    );
    println!(
        "    zstd streamed, 256 KiB:   {:6.1} ms ({:.0} MB/s uncompressed)",
        ms(zstd_stream),
        mbps(raw.len(), zstd_stream)
    );
    println!(
        "    CRC-32 of an npz member:  {:6.1} ms ({:.0} MB/s)",
        ms(zip_crc),
        mbps(raw.len(), zip_crc)
    );
    println!(
        "    streaming npz check:      {:6.1} ms ({:.0} MB/s)",
        ms(npz_stream),
        mbps(raw.len(), npz_stream)
    );
    // Raw chunk: streamed (pieces + SHA-256 + CRC32C on one thread, zstd on the other).
    let est = (pieces + sha + crc).max(zstd_stream);
    println!(
        "  raw chunk, two idle cores (pieces+SHA-256+CRC32C || streamed zstd): {:.1} ms = {:.0} MB/s uncompressed",
        ms(est),
        mbps(raw.len(), est)
    );
    // NPZ0 chunk: streamed too, zstd through 256 KiB followed on the same thread by the
    // streaming `.npz` check (zip walk, member CRC-32, .npy header).
    let est_npz = (pieces + sha + crc).max(zstd_stream + npz_stream);
    println!(
        "  NPZ0 chunk, two idle cores (pieces+SHA+CRC || streamed zstd + streaming npz check): {:.1} ms = {:.0} MB/s",
        ms(est_npz),
        mbps(raw.len(), est_npz)
    );
    let _ = std::fs::remove_file(&raw_file);
    let _ = std::fs::remove_file(&npz_file);
}
