//! A 4 GiB grid end to end (issue 12), ignored by default (it writes a ~1 GB file and reads
//! 4 GiB of cells):
//!
//! ```text
//! GVRS_BIG_DIR=/tmp cargo test --release -p rasterpack-gvrs --test big -- --ignored --nocapture
//! ```
//!
//! Writes a 32768 x 32768 int32 terrain (4 GiB of cells, 128 x 128 tiles, Gridfour's classic
//! codecs) with the streaming `GvrsWriter`, rows generated band by band, to
//! `$GVRS_BIG_DIR/big_32768.gvrs` (kept for `rasterpack convert` timings; written only when
//! missing), then streams it as `.npy` to the null device and checks cells against `cell()`.
//! Both steps report their time and the process's peak RSS.

use std::fs::File;
use std::time::Instant;

use rasterpack_common::npy::NpyWriter;
use rasterpack_gvrs::{
    ArrayInfo, ArrayRequest, ArraySink, DType, GvrsCellValue, GvrsFile, GvrsWriter, GvrsWriterOptions, Output,
};

const N: u64 = 32768;

/// A smooth terrain with 5 bits of noise per cell (it compresses about 4x, as real elevation
/// grids do with Gridfour's classic codecs).
fn value(r: u64, c: u64) -> i32 {
    let ramp = ((r * 7 + c * 3) % 8192) as i32 - 4096;
    let wave = ((r / 64 + c / 96) % 64) as i32 * 16;
    // A splitmix64 step over the cell's position.
    let mut z = (r << 32 | c).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    let noise = ((z ^ (z >> 31)) & 31) as i32;
    ramp + wave + noise
}

fn peak_rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kib| kib / 1024)
}

#[test]
#[ignore]
fn a_4_gib_grid_is_written_and_read_as_it_streams() {
    let dir = std::env::var_os("GVRS_BIG_DIR").map_or_else(std::env::temp_dir, Into::into);
    let path = dir.join("big_32768.gvrs");
    if !path.exists() {
        let start = Instant::now();
        let tmp = dir.join(format!("big_32768.gvrs.{}.part", std::process::id()));
        let file = File::options()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&tmp)
            .unwrap();
        let mut w = GvrsWriter::new(
            Output::File(&file),
            GvrsWriterOptions::default().with_element_name("height"),
        );
        w.begin(&ArrayInfo::new(DType::I32, vec![N, N])).unwrap();
        let mut band = Vec::with_capacity((128 * N * 4) as usize);
        for r0 in (0..N).step_by(128) {
            band.clear();
            for r in r0..r0 + 128 {
                for c in 0..N {
                    band.extend_from_slice(&value(r, c).to_le_bytes());
                }
            }
            w.write_at(r0 * N * 4, &band).unwrap();
        }
        w.finish().unwrap();
        drop(file);
        std::fs::rename(&tmp, &path).unwrap();
        eprintln!(
            "wrote {} ({} bytes) in {:.1} s, peak RSS {} MiB",
            path.display(),
            std::fs::metadata(&path).unwrap().len(),
            start.elapsed().as_secs_f64(),
            peak_rss_mib()
        );
    }
    let f = GvrsFile::open(&path).unwrap();
    assert!(f.read_error().is_ok());
    let start = Instant::now();
    let null = File::options().write(true).open("/dev/null").unwrap();
    let mut sink = NpyWriter::new(Output::File(&null));
    f.stream(&ArrayRequest::for_element("height"), &mut sink).unwrap();
    sink.finish().unwrap();
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "streamed 4 GiB of cells to .npy on /dev/null in {secs:.2} s ({:.0} MB/s), peak RSS {} MiB",
        (N * N * 4) as f64 / secs / 1e6,
        peak_rss_mib()
    );
    for (r, c) in [(0, 0), (127, 128), (5000, 31_000), (N - 1, N - 1)] {
        assert_eq!(
            f.cell("height", r as u32, c as u32).unwrap(),
            GvrsCellValue::Integer(value(r, c))
        );
    }
}
