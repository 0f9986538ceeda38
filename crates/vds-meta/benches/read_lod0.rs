//! Full LOD0 read of a 256 x 256 x 512 float32 dataset with BrickSize_64, for None, RLE and Zip
//! bricks (OpenVDS reference: ~2180 / 1910 / 384 MB/s). The dataset is made by the test-support
//! writer into the temp directory (kept for later runs); reads go through a file `Input` like the CLI's.
//!
//! `cargo bench -p rasterpack-vds-meta --features testsupport --bench read_lod0`

use std::time::Instant;

use rasterpack_common::{ArrayInfo, ArrayRequest, ArraySink, Input, Limits, Result};
use rasterpack_vds_meta::layout::VdsCompression;
use rasterpack_vds_meta::testsupport::{sample_data, write_container, Spec};
use rasterpack_vds_meta::VdsDataset;

/// A random-access sink into a caller's buffer, reused between reads (as OpenVDS requests fill
/// a caller's buffer).
struct Reused<'a>(&'a mut Vec<u8>);

impl ArraySink for Reused<'_> {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        self.0.resize(info.byte_len()? as usize, 0);
        Ok(())
    }
    fn random_access(&self) -> bool {
        true
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.0[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Process CPU time (user + system, all threads) in seconds, from /proc (Linux; 0 elsewhere).
/// The machine is shared: wall time under load says little, CPU time per byte says more.
fn cpu_seconds() -> f64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let Some(rest) = s.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of the full line (utime, stime) are 12 and 13 after the command name.
    let t = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (t(11) + t(12)) / 100.0
}

fn main() {
    let runs: usize = std::env::var("VDS_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let base = Spec {
        dims: vec![256, 256, 512],
        brick_size: 64,
        ..Default::default()
    };
    let data = sample_data(&base, 42);
    let bytes = data.len() as f64;
    println!("threads: {}", rayon::current_num_threads());
    let only = std::env::var("VDS_BENCH_ONLY").ok();
    for compression in [VdsCompression::None, VdsCompression::RLE, VdsCompression::Zip] {
        if only.as_deref().is_some_and(|o| o != compression.name()) {
            continue;
        }
        let spec = Spec {
            compression,
            ..base.clone()
        };
        let path = std::env::temp_dir().join(format!("rasterpack-vds-bench-{}.vds", compression.name()));
        // Kept between runs (written once; delete to regenerate).
        if !path.exists() {
            std::fs::write(&path, write_container(&spec, &data)).expect("write bench dataset");
        }
        let stored = std::fs::metadata(&path).expect("dataset").len();
        let input = Input::open(&path).expect("open");
        let mut best = f64::INFINITY;
        let cpu0 = cpu_seconds();
        for _ in 0..runs {
            let t = Instant::now();
            let ds = VdsDataset::from_input(input.clone(), Limits::default()).expect("dataset");
            let a = ds.read(&ArrayRequest::default()).expect("read");
            let dt = t.elapsed().as_secs_f64();
            assert_eq!(a.data.len(), data.len());
            best = best.min(dt);
        }
        let cpu = (cpu_seconds() - cpu0) / runs as f64;
        // Into a reused caller buffer (as OpenVDS requests fill a caller's buffer).
        let ds = VdsDataset::from_input(input.clone(), Limits::default()).expect("dataset");
        let mut buf = vec![0u8; data.len()];
        let mut best_into = f64::INFINITY;
        let cpu1 = cpu_seconds();
        for _ in 0..runs {
            let t = Instant::now();
            ds.stream(&ArrayRequest::default(), &mut Reused(&mut buf))
                .expect("read");
            best_into = best_into.min(t.elapsed().as_secs_f64());
        }
        let cpu_into = (cpu_seconds() - cpu1) / runs as f64;
        assert!(buf == data);
        let check = VdsDataset::from_input(input.clone(), Limits::default())
            .unwrap()
            .read(&ArrayRequest::default())
            .unwrap();
        assert!(check.data == data, "decoded data differs");
        let threads = rayon::current_num_threads() as f64;
        println!(
            "{:>5}: stored {:>9} bytes ({:.2} of raw), best of {runs}: {:.1} ms = {:.0} MB/s wall; \
             {:.0} ms CPU per read = {:.0} MB/s per core, {:.0} MB/s on {threads} idle cores",
            compression.name(),
            stored,
            stored as f64 / bytes,
            best * 1e3,
            bytes / best / 1e6,
            cpu * 1e3,
            bytes / cpu / 1e6,
            bytes / cpu * threads / 1e6
        );
        println!(
            "       into a reused buffer: best {:.1} ms = {:.0} MB/s wall; {:.0} ms CPU = {:.0} MB/s on {threads} idle cores",
            best_into * 1e3,
            bytes / best_into / 1e6,
            cpu_into * 1e3,
            bytes / cpu_into * threads / 1e6
        );
    }
}
