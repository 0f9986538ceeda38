//! Writing speed: a 4000x4000 synthetic terrain (integer-coded float, decimetres) written as a
//! compressed GVRS file with 120x120 tiles and Gridfour's default codec list, the shape of
//! `big_terrain_4000.gvrs` (Gridfour takes 6.3 s to write that file compressed).
//!
//! `cargo bench -p rasterpack-gvrs --bench encode_write` (plain `main`, `harness = false`).
//! Set `RAYON_NUM_THREADS=1` to time one core.

use std::time::Instant;

use rasterpack_gvrs::write::{self, ElementRange, ElementSpec, ElementValues, GvrsSpec};

fn terrain(rows: usize, cols: usize) -> Vec<f32> {
    let mut v = Vec::with_capacity(rows * cols);
    let mut s: u32 = 12345;
    for r in 0..rows {
        for c in 0..cols {
            let (x, y) = (c as f64 / 400.0, r as f64 / 400.0);
            let h = 1500.0 * (x.sin() * y.cos())
                + 300.0 * (3.1 * x + 1.7 * y).sin()
                + 40.0 * (11.0 * x).cos() * (13.0 * y).sin();
            s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
            v.push((h + f64::from((s >> 16) % 7) * 0.1) as f32);
        }
    }
    v
}

fn main() {
    let (rows, cols) = (4000u32, 4000u32);
    let values = terrain(rows as usize, cols as usize);
    let fast = GvrsSpec::new(
        rows,
        cols,
        120,
        120,
        ElementSpec::new("z", ElementRange::int_coded_float(10.0, 0.0)),
    );
    let exhaustive = GvrsSpec {
        encode: rasterpack_gvrs::codec::EncodeOptions::default(),
        ..fast.clone()
    };
    let mut lsop = fast.clone();
    lsop.codecs.push(rasterpack_gvrs::codec::Codec::Lsop12);
    for (label, spec) in [
        ("default (deflate within 3% of best Huffman)", fast),
        ("exhaustive (every predictor deflated)", exhaustive),
        ("default + LSOP12 in the list", lsop),
    ] {
        run(label, &spec, &values, rows, cols);
    }
}

/// User + system CPU time of the process in seconds (Linux, clock ticks of 10 ms).
fn process_cpu() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = s.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn run(label: &str, spec: &GvrsSpec, values: &[f32], rows: u32, cols: u32) {
    let mut best = f64::MAX;
    let mut best_cpu = f64::MAX;
    let mut size = 0;
    for _ in 0..3 {
        let t0 = Instant::now();
        let c0 = process_cpu();
        let bytes = write::to_bytes(spec, &[ElementValues::IcfValues(values)]).expect("write");
        best = best.min(t0.elapsed().as_secs_f64());
        if let (Some(a), Some(b)) = (c0, process_cpu()) {
            best_cpu = best_cpu.min(b - a);
        }
        size = bytes.len();
    }
    let threads = rayon::current_num_threads();
    println!(
        "write 4000x4000 ICF terrain, 120x120 tiles, {label}, {threads} thread(s): wall {best:.3} s, CPU {best_cpu:.2} s, {:.2} MB file ({:.1} MB of cells)",
        size as f64 / 1e6,
        (rows as f64 * cols as f64 * 4.0) / 1e6
    );
}
