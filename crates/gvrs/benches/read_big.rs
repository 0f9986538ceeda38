//! Whole-grid decode speed and validation time of the corpus's `big_terrain_4000.gvrs`
//! (4000 x 4000 integer-coded floats, 1156 tiles of LSOP12 + GvrsDeflate): every cell decoded,
//! on all cores and on one. Skips when `RASTERPACK_CORPUS` is unset.
//!
//! `RASTERPACK_CORPUS=/work/shared/corpus cargo bench -p rasterpack-gvrs --bench read_big`

use std::time::Instant;

use rasterpack_common::{Input, Limits};
use rasterpack_gvrs::GvrsFile;

fn best_of<T>(n: usize, mut f: impl FnMut() -> T) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..n {
        let t = Instant::now();
        std::hint::black_box(f());
        best = best.min(t.elapsed().as_secs_f64());
    }
    best
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
    println!("big_terrain_4000.gvrs: {cells} cells, {mb:.1} MB decoded (f32)");
    println!("  read_element (values), {threads} threads: {:.1} ms = {:.0} MB/s", all * 1e3, mb / all);
    println!("  read_element (codes),  {threads} threads: {:.1} ms = {:.0} MB/s", codes * 1e3, mb / codes);
    println!("  read_element (values), 1 thread:  {:.1} ms = {:.0} MB/s", one * 1e3, mb / one);
    println!("  validate (every tile decoded, {threads} threads): {:.1} ms = {:.0} MB/s", val * 1e3, mb / val);
}
