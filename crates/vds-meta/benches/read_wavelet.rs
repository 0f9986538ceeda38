//! Wavelet decoding speed. rasterpack has no wavelet encoder, so the data comes from OpenVDS:
//!
//! 1. The chunk test vectors of `$RASTERPACK_CORPUS/vds/chunks` (100^3 lossy R32 / U8 / U16,
//!    lossless U8 / U16 and small lossless R32 bricks): each decoded repeatedly, MB/s of output.
//! 2. Optional whole datasets, `VDS_WAVELET_BENCH=a.vds,b.vds` (e.g. the 256 x 256 x 512 R32
//!    `Wavelet` / `WaveletLossless` pair made with OpenVDS 3.4.9 by
//!    `python3 crates/vds-meta/benches/openvds_wavelet.py make DIR`): the CLI's
//!    `convert X.vds X.npy` path (open, full LOD0 float32 read, `.npy` written to the temp dir).
//!
//! Parts without their data are skipped with a message.
//! `RASTERPACK_CORPUS=/work/shared/corpus VDS_WAVELET_BENCH=... cargo bench -p rasterpack-vds-meta --bench read_wavelet`

use std::path::Path;
use std::time::Instant;

use rasterpack_common::{ArrayRequest, Format, Input, WriteOptions};
use rasterpack_vds_meta::layout::VdsSampleFormat;
use rasterpack_vds_meta::wavelet::{self, WaveletParams, WaveletScratch};
use rasterpack_vds_meta::VdsFormat;

fn runs() -> usize {
    std::env::var("VDS_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
}

fn vectors(dir: &Path) {
    let m: serde_json::Value = match std::fs::read(dir.join("chunks/MANIFEST.json")) {
        Ok(b) => serde_json::from_slice(&b).expect("MANIFEST.json"),
        Err(_) => return eprintln!("no chunk vectors under {}: skipped", dir.display()),
    };
    let mut s = WaveletScratch::default();
    let mut out = Vec::new();
    for v in m["vectors"].as_array().expect("vectors") {
        if v["header"]["kind"] != "wavelet" {
            continue;
        }
        let file = v["file"].as_str().expect("file");
        let bytes = std::fs::read(dir.join("chunks").join(file)).expect("vector");
        let d = &v["decode_parameters"];
        let fmt = match d["destinationFormat"].as_str() {
            Some("U8") => VdsSampleFormat::U8,
            Some("U16") => VdsSampleFormat::U16,
            _ => VdsSampleFormat::R32,
        };
        let size: Vec<u64> = v["expected"]["size"]
            .as_array()
            .expect("size")
            .iter()
            .map(|x| x.as_u64().expect("size"))
            .collect();
        let method = d["compressionMethod"].as_str().unwrap_or("");
        let p = WaveletParams {
            format: fmt,
            destination: fmt,
            normalize: false,
            lossless: method.ends_with("Lossless"),
            value_range: [-1.0, 1.0],
            integer_scale: 1.0,
            integer_offset: 0.0,
            use_no_value: d["useNoValue"].as_bool().unwrap_or(false),
            no_value: d["replacementNoValue"].as_f64().unwrap_or(0.0) as f32,
            size: [size[0], size[1], size[2]],
            max_list_entries: usize::MAX,
        };
        let n = runs().max(3);
        let mut best = f64::INFINITY;
        for _ in 0..n {
            let t = Instant::now();
            wavelet::decode(&bytes, &p, &mut s, &mut out).expect("decode");
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "{file:<72} {:>9} B -> {:>8} B: best {:>7.2} ms = {:>6.0} MB/s out (1 thread)",
            bytes.len(),
            out.len(),
            best * 1e3,
            out.len() as f64 / best / 1e6
        );
    }
}

fn datasets(list: &str) {
    for path in list.split(',').filter(|s| !s.is_empty()) {
        let input = Input::open(Path::new(path)).expect("dataset");
        let npy = rasterpack_common::npy_format::NpyFormat;
        let out = std::env::temp_dir().join("rasterpack-vds-wavelet-bench.npy");
        let mut best = f64::INFINITY;
        let mut bytes = 0usize;
        for _ in 0..runs() {
            let t = Instant::now();
            let a = VdsFormat
                .read_array(
                    &input,
                    &ArrayRequest {
                        physical: true,
                        ..Default::default()
                    },
                )
                .expect("read");
            let f = std::fs::File::create(&out).expect("npy");
            let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
            npy.write_array(&a, &WriteOptions::default(), &mut w).expect("write");
            std::io::Write::flush(&mut w).expect("flush");
            bytes = a.data.len();
            best = best.min(t.elapsed().as_secs_f64());
        }
        let _ = std::fs::remove_file(&out);
        println!(
            "{path}: read + .npy {bytes} B: best of {} {:.3} s = {:.0} MB/s ({} threads)",
            runs(),
            best,
            bytes as f64 / best / 1e6,
            rayon::current_num_threads()
        );
    }
}

fn main() {
    match std::env::var("RASTERPACK_CORPUS") {
        Ok(c) => vectors(&Path::new(&c).join("vds")),
        Err(_) => eprintln!("RASTERPACK_CORPUS not set: chunk-vector decode bench skipped"),
    }
    match std::env::var("VDS_WAVELET_BENCH") {
        Ok(list) => datasets(&list),
        Err(_) => eprintln!("VDS_WAVELET_BENCH not set (comma-separated .vds paths): dataset bench skipped"),
    }
}
