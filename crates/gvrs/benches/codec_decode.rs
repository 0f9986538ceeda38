//! Decode throughput of the GVRS codecs (plain `main`, `harness = false`).
//!
//! Always: a synthetic 4000x4000 terrain, cut into 120x120 tiles, encoded with GvrsDeflate and
//! GvrsHuffman (best predictor) and GvrsFloat, then decoded. With `RASTERPACK_CORPUS` set: every
//! tile of `gvrs/big_terrain_4000.gvrs` (1089 LSOP12 + 67 GvrsDeflate tiles) located through its
//! sidecar and decoded. Figures are MB/s of decoded cells (4 bytes per cell), one core.
//!
//! `cargo bench -p rasterpack-gvrs --bench codec_decode`

use std::time::Instant;

use rasterpack_gvrs::codec::{self, Codec};

fn terrain(rows: usize, cols: usize) -> Vec<i32> {
    // Smooth multi-frequency surface plus a little deterministic noise, in decimetres.
    let mut v = Vec::with_capacity(rows * cols);
    let mut s: u32 = 12345;
    for r in 0..rows {
        for c in 0..cols {
            let (x, y) = (c as f64 / 400.0, r as f64 / 400.0);
            let h = 1500.0 * (x.sin() * y.cos())
                + 300.0 * (3.1 * x + 1.7 * y).sin()
                + 40.0 * (11.0 * x).cos() * (13.0 * y).sin();
            s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
            v.push((h * 10.0) as i32 + ((s >> 16) % 7) as i32 - 3);
        }
    }
    v
}

fn tiles(grid: &[i32], rows: usize, cols: usize, t: usize) -> Vec<Vec<i32>> {
    let mut out = Vec::new();
    for tr in (0..rows).step_by(t) {
        for tc in (0..cols).step_by(t) {
            let mut tile = vec![grid[tr * cols + tc]; t * t];
            for r in 0..t.min(rows - tr) {
                for c in 0..t.min(cols - tc) {
                    tile[r * t + c] = grid[(tr + r) * cols + tc + c];
                }
            }
            out.push(tile);
        }
    }
    out
}

/// CPU time of this thread in seconds (Linux `schedstat`), so figures stay meaningful on a
/// shared, loaded machine; `None` elsewhere.
fn thread_cpu() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(s.split_whitespace().next()?.parse::<f64>().ok()? / 1e9)
}

fn run_int(name: &str, blocks: &[(Codec, Vec<u8>)], t: usize, reps: usize) {
    let mut out = vec![0i32; t * t];
    let mut best = f64::MAX;
    let mut best_cpu = f64::MAX;
    for _ in 0..reps {
        let t0 = Instant::now();
        let c0 = thread_cpu();
        for (c, b) in blocks {
            codec::decode_int(*c, b, t, t, &mut out).expect("decode");
        }
        best = best.min(t0.elapsed().as_secs_f64());
        if let (Some(a), Some(b)) = (c0, thread_cpu()) {
            best_cpu = best_cpu.min(b - a);
        }
    }
    let mb = (blocks.len() * t * t * 4) as f64 / 1e6;
    let stored: usize = blocks.iter().map(|b| b.1.len()).sum();
    println!(
        "{name:<44} {:>5} tiles  {:>6.1} MB cells  wall {:>6.3} s {:>5.0} MB/s  cpu {:>6.3} s {:>5.0} MB/s  (stored {:.1} MB)",
        blocks.len(),
        mb,
        best,
        mb / best,
        best_cpu,
        mb / best_cpu,
        stored as f64 / 1e6
    );
}

fn main() {
    let (rows, cols, t) = (4000, 4000, 120);
    // GVRS_BENCH_CORPUS_ONLY=1 skips the synthetic part (handy under `perf stat`).
    if std::env::var_os("GVRS_BENCH_CORPUS_ONLY").is_some() {
        return corpus();
    }
    let grid = terrain(rows, cols);
    let ts = tiles(&grid, rows, cols, t);
    for (label, list) in [
        ("GvrsDeflate (best predictor)", vec![(0u8, Codec::Deflate)]),
        ("GvrsHuffman (best predictor)", vec![(0u8, Codec::Huffman)]),
    ] {
        let t0 = Instant::now();
        let blocks: Vec<(Codec, Vec<u8>)> = ts
            .iter()
            .map(|tile| (list[0].1, codec::encode_int(tile, t, t, &list).expect("compressible")))
            .collect();
        println!("encode {label:<37} {:>7.3} s", t0.elapsed().as_secs_f64());
        run_int(&format!("synthetic 4000x4000 {label}"), &blocks, t, 3);
    }
    let floats: Vec<Vec<f32>> = ts
        .iter()
        .map(|tile| tile.iter().map(|&v| v as f32 * 0.1).collect())
        .collect();
    let blocks: Vec<Vec<u8>> = floats
        .iter()
        .map(|f| codec::encode_float(f, t, t, &[(0, Codec::Float)]).expect("compressible"))
        .collect();
    let mut out = vec![0f32; t * t];
    let t0 = Instant::now();
    for b in &blocks {
        codec::decode_float(Codec::Float, b, t, t, &mut out).expect("decode");
    }
    let s = t0.elapsed().as_secs_f64();
    let mb = (blocks.len() * t * t * 4) as f64 / 1e6;
    println!(
        "{:<44} {:>5} tiles  {mb:>8.1} MB cells  {s:>7.3} s  {:>7.0} MB/s",
        "synthetic 4000x4000 GvrsFloat",
        blocks.len(),
        mb / s
    );

    corpus();
}

fn corpus() {
    if let Ok(root) = std::env::var("RASTERPACK_CORPUS") {
        let dir = std::path::Path::new(&root).join("gvrs");
        let bytes = std::fs::read(dir.join("big_terrain_4000.gvrs")).expect("big_terrain_4000.gvrs");
        let truth: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("big_terrain_4000.gvrs.truth.json")).unwrap()).unwrap();
        let codecs: Vec<Codec> = truth["codecs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| Codec::from_name(c.as_str().unwrap()).unwrap())
            .collect();
        let tr = truth["tile_rows"].as_u64().unwrap() as usize;
        let le = |at: usize| i32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let blocks: Vec<(Codec, Vec<u8>)> = truth["tile_content_offsets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let at = e[1].as_u64().unwrap() as usize + 4;
                let b = bytes[at + 4..at + 4 + le(at)].to_vec();
                (codecs[b[0] as usize], b)
            })
            .collect();
        let lsop: Vec<_> = blocks.iter().filter(|b| b.0 == Codec::Lsop12).cloned().collect();
        run_int("big_terrain_4000.gvrs all tiles", &blocks, tr, 5);
        run_int("big_terrain_4000.gvrs LSOP12 tiles only", &lsop, tr, 5);
    } else {
        println!("(set RASTERPACK_CORPUS to also time big_terrain_4000.gvrs)");
    }
}
