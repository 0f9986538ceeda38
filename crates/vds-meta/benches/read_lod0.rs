//! Full LOD0 read of a 256 x 256 x 512 float32 dataset with BrickSize_64, for None, RLE and Zip
//! bricks (OpenVDS reference: ~2180 / 1910 / 384 MB/s). The dataset is made by the test-support
//! writer into the temp directory; reads go through a file `Input` like the CLI's.
//!
//! `cargo bench -p rasterpack-vds-meta --features testsupport --bench read_lod0`

use std::time::Instant;

use rasterpack_common::{Input, Limits};
use rasterpack_vds_meta::layout::Compression;
use rasterpack_vds_meta::testsupport::{sample_data, write_container, Spec};
use rasterpack_vds_meta::{read_channel, Dataset};

fn main() {
    let runs: usize = std::env::var("VDS_BENCH_RUNS").ok().and_then(|s| s.parse().ok()).unwrap_or(5);
    let base = Spec { dims: vec![256, 256, 512], brick_size: 64, ..Default::default() };
    let data = sample_data(&base, 42);
    let bytes = data.len() as f64;
    println!("threads: {}", rayon::current_num_threads());
    for compression in [Compression::None, Compression::RLE, Compression::Zip] {
        let spec = Spec { compression, ..base.clone() };
        let path = std::env::temp_dir().join(format!("rasterpack-vds-bench-{}.vds", compression.name()));
        let file = write_container(&spec, &data);
        let stored = file.len();
        std::fs::write(&path, file).expect("write bench dataset");
        let input = Input::open(&path).expect("open");
        let mut best = f64::INFINITY;
        for _ in 0..runs {
            let t = Instant::now();
            let ds = Dataset::open(&input, &Limits::default()).expect("dataset");
            let a = read_channel(&ds, None, false).expect("read");
            let dt = t.elapsed().as_secs_f64();
            assert_eq!(a.data.len(), data.len());
            best = best.min(dt);
        }
        let check = read_channel(&Dataset::open(&input, &Limits::default()).unwrap(), None, false).unwrap();
        assert!(check.data == data, "decoded data differs");
        println!(
            "{:>5}: stored {:>9} bytes ({:.2} of raw), best of {runs}: {:.1} ms = {:.0} MB/s",
            compression.name(),
            stored,
            stored as f64 / bytes,
            best * 1e3,
            bytes / best / 1e6
        );
        let _ = std::fs::remove_file(&path);
    }
}
