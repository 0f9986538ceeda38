//! Whole-grid decode speed and validation time of the corpus's `big_terrain_4000.gvrs`
//! (4000 x 4000 integer-coded floats, 1156 tiles of LSOP12 + GvrsDeflate): every cell decoded,
//! on all cores and on one. Skips when `RASTERPACK_CORPUS` is unset.
//!
//! `RASTERPACK_CORPUS=/work/shared/corpus cargo bench -p rasterpack-gvrs --bench read_big`

use std::time::Instant;

use rasterpack_common::{Input, Limits};
use rasterpack_gvrs::GvrsFile;

/// Process CPU time (user + system) in seconds, from /proc (Linux; 0 elsewhere).
fn cpu_seconds() -> f64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/stat") else { return 0.0 };
    let Some(rest) = s.rsplit(')').next() else { return 0.0 };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// Best wall-clock time of `n` runs, and the mean CPU time per run (robust on a busy machine).
fn best_of<T>(n: usize, mut f: impl FnMut() -> T) -> (f64, f64) {
    let mut best = f64::INFINITY;
    let cpu0 = cpu_seconds();
    for _ in 0..n {
        let t = Instant::now();
        std::hint::black_box(f());
        best = best.min(t.elapsed().as_secs_f64());
    }
    (best, (cpu_seconds() - cpu0) / n as f64)
}

fn main() {
    let Ok(root) = std::env::var("RASTERPACK_CORPUS") else {
        eprintln!("RASTERPACK_CORPUS is not set: skipping the GVRS big-file benchmark");
        return;
    };
    let path = std::path::Path::new(&root).join("gvrs/big_terrain_4000.gvrs");
    let input = Input::open(&path).expect("big_terrain_4000.gvrs");
    let f = GvrsFile::open(input.clone(), Limits::default()).expect("open");
    let cells = f.geometry.cells() as f64;
    let mb = cells * 4.0 / 1e6;
    let threads = rayon::current_num_threads();
    let all = best_of(5, || f.read_element(0, false).expect("decode"));
    let codes = best_of(5, || f.read_element(0, true).expect("decode"));
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("pool");
    let one = pool.install(|| best_of(3, || f.read_element(0, false).expect("decode")));
    let val = best_of(3, || rasterpack_gvrs::validate::validate(&input, &Limits::default()));
    println!("big_terrain_4000.gvrs: {cells} cells, {mb:.1} MB decoded (f32); wall = best run, cpu = mean CPU time per run");
    let line = |what: &str, (wall, cpu): (f64, f64)| {
        println!(
            "  {what}: wall {:.1} ms = {:.0} MB/s; cpu {:.1} ms = {:.0} MB per CPU-second",
            wall * 1e3,
            mb / wall,
            cpu * 1e3,
            if cpu > 0.0 { mb / cpu } else { 0.0 }
        )
    };
    line(&format!("read_element values, {threads} threads"), all);
    line(&format!("read_element codes,  {threads} threads"), codes);
    line("read_element values, 1 thread ", one);
    line(&format!("validate (all tiles), {threads} threads"), val);
}
