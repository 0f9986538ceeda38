//! Whole-grid decode speed and validation time of the corpus's `big_terrain_4000.gvrs`
//! (4000 x 4000 integer-coded floats, 1156 tiles of LSOP12 + GvrsDeflate, Gridfour e2e5824) and
//! `master/head_big_terrain_4000.gvrs` (the same grid from Gridfour master: LSOP12 with canonical
//! Huffman residuals): every cell decoded, on all cores and on one. `GVRS_BENCH_FILE=master`
//! (or `big_terrain`) times one of them. Without `RASTERPACK_CORPUS`, a synthetic terrain
//! written by the writer is timed instead.
//!
//! `RASTERPACK_CORPUS=/work/shared/corpus cargo bench -p rasterpack-gvrs --bench read_big`
//!
//! With `GVRS_BENCH_ONCE=1` it decodes the element once on one thread and exits (for
//! `valgrind --tool=callgrind` instruction counts).

use std::time::Instant;

use rasterpack_gvrs::{ArrayRequest, GvrsFile, Input, Limits};

/// Process CPU time (user + system) in seconds, from /proc (Linux; 0 elsewhere).
fn cpu_seconds() -> f64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
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
    let inputs: Vec<Input> = match std::env::var("RASTERPACK_CORPUS") {
        Ok(root) => {
            // The 1.4 corpus file (Gridfour e2e5824: LSOP12 with Huffman residuals) and the one
            // Gridfour master wrote (canonical Huffman LSOP12 residuals, revised header).
            let mut v = Vec::new();
            for rel in ["gvrs/big_terrain_4000.gvrs", "gvrs/master/head_big_terrain_4000.gvrs"] {
                if std::env::var("GVRS_BENCH_FILE").is_ok_and(|f| !rel.contains(&f)) {
                    continue;
                }
                let path = std::path::Path::new(&root).join(rel);
                v.push(Input::open(&path).expect("corpus file"));
            }
            v
        }
        Err(_) => {
            println!("RASTERPACK_CORPUS is not set: timing a synthetic 2000 x 2000 int32 terrain written by rasterpack's writer (compress=all)");
            vec![synthetic()]
        }
    };
    for input in inputs {
        bench_file(input);
    }
}

fn bench_file(input: Input) {
    println!("file: {}", input.name());
    let f = GvrsFile::from_input(input.clone(), Limits::default()).expect("open");
    // The public read: the element by name into memory (decoded in place, bands in parallel).
    let values = ArrayRequest::for_element(f.elements[0].name());
    let codes_req = values.clone().with_codes(true);
    let read = |req: &ArrayRequest| f.read(req).expect("decode");
    if std::env::var_os("GVRS_BENCH_ONCE").is_some() {
        // One whole-element decode on one thread and nothing else: for instruction counts
        // (`valgrind --tool=callgrind`), which do not depend on the machine's load.
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("pool");
        let a = pool.install(|| read(&values));
        println!("decoded {} bytes once on one thread", a.data.len());
        return;
    }
    let cells = f.geometry.cells() as f64;
    let mb = cells * 4.0 / 1e6;
    let threads = rayon::current_num_threads();
    let all = best_of(5, || read(&values));
    let codes = best_of(5, || read(&codes_req));
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("pool");
    let one = pool.install(|| best_of(3, || read(&values)));
    let val = best_of(5, || rasterpack_gvrs::validate::validate(&input, &Default::default()));
    let val1 = pool.install(|| best_of(3, || rasterpack_gvrs::validate::validate(&input, &Default::default())));
    println!("{cells} cells, {mb:.1} MB decoded (4 bytes per cell); wall = best run, cpu = mean CPU time per run");
    let line = |what: &str, (wall, cpu): (f64, f64)| {
        println!(
            "  {what}: wall {:.1} ms = {:.0} MB/s; cpu {:.1} ms = {:.0} MB per CPU-second",
            wall * 1e3,
            mb / wall,
            cpu * 1e3,
            if cpu > 0.0 { mb / cpu } else { 0.0 }
        )
    };
    line(&format!("read values, {threads} threads"), all);
    line(&format!("read codes,  {threads} threads"), codes);
    line("read values, 1 thread ", one);
    line(&format!("validate (all tiles), {threads} threads"), val);
    line("validate (all tiles), 1 thread ", val1);
}

/// A smooth synthetic terrain, 2000 x 2000 int32 in 100 x 100 tiles, compressed by the writer.
fn synthetic() -> Input {
    let n = 2000usize;
    let mut data = Vec::with_capacity(n * n * 4);
    for r in 0..n {
        for c in 0..n {
            let (x, y) = (c as f64 / 97.0, r as f64 / 131.0);
            let v = (x.sin() * y.cos() * 5000.0 + (x * 0.3 + y * 0.7).sin() * 900.0) as i32;
            data.extend_from_slice(&v.to_le_bytes());
        }
    }
    let array =
        rasterpack_common::NdArray::new(rasterpack_common::DType::I32, vec![n as u64, n as u64], data).expect("array");
    let opts = rasterpack_common::WriteOptions {
        tile: Some((100, 100)),
        compress: Some("all".into()),
        ..Default::default()
    };
    let mut out = Vec::new();
    rasterpack_gvrs::write::write_ndarray(&array, &opts, &mut out).expect("write");
    Input::from_bytes("synthetic.gvrs", out)
}
