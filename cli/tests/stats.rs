//! `rasterpack stats` against numpy: every array of every testdata file and public corpus file
//! that reads, converted to `.npy` with the same flags, and numpy's figures over
//! `a[np.isfinite(a)]` less the fill value (exact counts, min, max and histogram, 1e-12 relative
//! mean, std and sum). numpy runs from `$RASTERPACK_PYTHON` (the venv of `.ci/venv.sh`); without
//! it the test says it skips, and fails under CI=true.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rasterpack_common::json::value_f64;
use serde_json::{json, Value};
use support::{check, run, run_env, s, scratch};

const BINS: u64 = 16;

/// numpy's figures for each job `{"npy", "fill", "bins"}` read from stdin, as one JSON list.
const NUMPY_FIGURES: &str = r#"
import json, sys
import numpy as np
out = []
for job in json.load(sys.stdin):
    a = np.load(job["npy"]).ravel()
    fill = job["fill"]
    fill = None if fill is None else float(fill) if not isinstance(fill, str) else float(fill.replace("Infinity", "inf"))
    if fill is None:
        is_fill = np.zeros(a.shape, bool)
    elif np.isnan(fill):
        is_fill = np.isnan(a)
    else:
        is_fill = a == fill
    finite = np.isfinite(a)
    cells = a[finite & ~is_fill].astype(np.float64)
    r = {"count": int(a.size), "valid_count": int(cells.size), "fill_count": int(is_fill.sum()),
         "nan_count": int(np.isnan(a).sum()), "inf_count": int(np.isinf(a).sum()),
         "sum": float(cells.sum())}
    if cells.size:
        lo, hi = float(cells.min()), float(cells.max())
        r.update(min=lo, max=hi, mean=float(cells.mean()), std=float(cells.std()))
    else:
        lo, hi = 0.0, 1.0
        r.update(min=None, max=None, mean=None, std=None)
    counts, edges = np.histogram(cells, job["bins"], (lo, hi))
    r["histogram"] = {"min": float(edges[0]), "max": float(edges[-1]), "counts": [int(c) for c in counts]}
    out.append(r)
def plain(v):
    # the CLI contract's strings for non-finite floats
    if isinstance(v, float) and not np.isfinite(v):
        return "NaN" if np.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v
json.dump(plain(out), sys.stdout, allow_nan=False)
"#;

fn python() -> Option<PathBuf> {
    match std::env::var_os("RASTERPACK_PYTHON") {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => {
            if std::env::var_os("CI").is_some_and(|v| v == "true") {
                panic!(
                    "the numpy comparison needs RASTERPACK_PYTHON (.ci/venv.sh), and CI=true does not allow the skip"
                );
            }
            rasterpack_common::testkit::skip("needs numpy: RASTERPACK_PYTHON is not set (source .ci/venv.sh)");
            None
        }
    }
}

fn numpy_figures(python: &Path, jobs: &[Value]) -> Vec<Value> {
    use std::io::Write;
    let mut child = Command::new(python)
        .args(["-c", NUMPY_FIGURES])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run python");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(jobs).unwrap().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "numpy failed");
    serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap()
}

fn close(ours: f64, theirs: f64, scale: f64) -> bool {
    ours == theirs || (ours - theirs).abs() <= 1e-12 * theirs.abs().max(scale)
}

/// The files the comparison covers: testdata and the public corpus folders (not `hostile/`
/// or `edges/`, whose files are there to be refused or to read specially).
fn inputs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut dirs = vec![root.join("testdata")];
    if let Some(corpus) = rasterpack_common::testkit::corpus_dir("") {
        for sub in ["volp", "gvrs", "udf", "fold", "vds"] {
            dirs.push(corpus.join(sub));
        }
    }
    let mut files = Vec::new();
    let mut stack = dirs;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                // An object-store VDS dataset is a folder holding a layout document.
                if p.join("VolumeDataLayout").exists() || p.join("LayerStatus").exists() {
                    files.push(p);
                } else {
                    stack.push(p);
                }
            } else if !p
                .extension()
                .is_some_and(|x| x == "md" || x == "json" || x == "txt" || x == "py" || x == "raw")
            {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn stats_agree_with_numpy_on_every_testdata_and_corpus_array() {
    let Some(python) = python() else { return };
    let dir = scratch("stats", "numpy");
    let files: Vec<(PathBuf, Vec<String>)> = inputs().into_iter().map(|f| (f, Vec::new())).collect();
    let compared = agree_with_numpy(&python, &dir, &files, true);
    assert!(compared >= 20, "only {compared} arrays compared");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `stats --json --histogram BINS FLAGS` of each array of each `(file, FLAGS)` against numpy's
/// figures over the `.npy` that `convert` writes with the same FLAGS: exact counts, min, max
/// and histogram, 1e-12 relative mean, std and sum. `lenient`: files `stats` cannot read are
/// left out (else every file must give figures). Returns the number of arrays compared.
fn agree_with_numpy(python: &Path, dir: &Path, files: &[(PathBuf, Vec<String>)], lenient: bool) -> usize {
    let bins = BINS.to_string();
    let mut jobs = Vec::new();
    let mut ours = Vec::new();
    for (file, flags) in files {
        let path = s(file);
        let mut args = vec!["stats", "--json", "--histogram", &bins, path];
        args.extend(flags.iter().map(String::as_str));
        let r = run(&args);
        if !lenient {
            assert_eq!(r.code(), Some(0), "{args:?}: {}", r.stderr());
        }
        let Ok(doc) = serde_json::from_str::<Value>(&r.stdout()) else {
            continue;
        };
        let entry = &doc["files"][0];
        for a in entry["stats"].as_array().into_iter().flatten() {
            if a["stats"].is_null() {
                continue;
            }
            let npy = dir.join(format!("{}.npy", jobs.len()));
            let mut args = vec!["convert", path, s(&npy), "--force"];
            let name = a["name"].as_str().map(str::to_string);
            if let Some(n) = &name {
                args.extend(["--element", n.as_str()]);
            }
            args.extend(flags.iter().map(String::as_str));
            let c = run(&args);
            if c.code() != Some(0) {
                // An array `convert` cannot write to .npy (a UDF text table, ...) has no numpy
                // figures to compare; stats read it, so it must be a target-side refusal.
                assert!(lenient, "{args:?}: {}", c.stderr());
                assert!(!c.stderr().is_empty());
                continue;
            }
            jobs.push(json!({"npy": s(&npy), "fill": a["stats"]["fill"], "bins": BINS}));
            ours.push((format!("{path} {flags:?} {name:?}"), a["stats"].clone()));
        }
    }
    let theirs = numpy_figures(python, &jobs);
    let mut failures = Vec::new();
    for ((what, o), t) in ours.iter().zip(&theirs) {
        for k in ["count", "valid_count", "fill_count", "nan_count", "inf_count"] {
            if o[k] != t[k] {
                failures.push(format!("{what}: {k} {} vs numpy {}", o[k], t[k]));
            }
        }
        for k in ["min", "max"] {
            if value_f64(&o[k]) != value_f64(&t[k]) {
                failures.push(format!("{what}: {k} {} vs numpy {}", o[k], t[k]));
            }
        }
        let mean = value_f64(&t["mean"]).unwrap_or(0.0).abs();
        for (k, scale) in [("mean", 0.0), ("std", mean * 1e-3), ("sum", 0.0)] {
            match (value_f64(&o[k]), value_f64(&t[k])) {
                (Some(a), Some(b)) if close(a, b, scale) => {}
                (None, None) => {}
                (a, b) => failures.push(format!("{what}: {k} {a:?} vs numpy {b:?}")),
            }
        }
        let (oh, th) = (&o["histogram"], &t["histogram"]);
        if oh["counts"] != th["counts"]
            || value_f64(&oh["min"]) != value_f64(&th["min"])
            || value_f64(&oh["max"]) != value_f64(&th["max"])
        {
            failures.push(format!("{what}: histogram {oh} vs numpy {th}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} arrays differ from numpy:\n{}",
        failures.len(),
        jobs.len(),
        failures.join("\n")
    );
    eprintln!("stats agree with numpy on {} arrays", jobs.len());
    jobs.len()
}

#[test]
fn stats_json_has_every_key_and_the_schema_version() {
    let r = check(
        &[
            "stats",
            "--json",
            "--histogram",
            "3",
            "../testdata/gvrs/crafted_all_types.gvrs",
        ],
        0,
    );
    let doc: Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(doc["schema_version"], 3);
    let a = &doc["files"][0]["stats"][0];
    assert_eq!((a["name"].as_str(), a["dtype"].as_str()), (Some("a"), Some("int32")));
    for k in [
        "count",
        "valid_count",
        "fill_count",
        "nan_count",
        "inf_count",
        "min",
        "max",
        "mean",
        "std",
        "sum",
        "histogram",
    ] {
        assert!(a["stats"].get(k).is_some(), "no {k}");
    }
    // Element a of crafted_all_types: fill -9999 (its header), 15 unwritten cells of 63.
    assert_eq!(a["stats"]["fill"], -9999.0);
    assert_eq!(
        (a["stats"]["count"].as_u64(), a["stats"]["fill_count"].as_u64()),
        (Some(63), Some(15))
    );
    assert_eq!(a["stats"]["histogram"]["bins"], 3);
}

#[test]
fn stats_of_a_missing_element_and_a_bad_file_exit_like_convert() {
    let r = run(&["stats", "--element", "nope", "../testdata/gvrs/crafted_all_types.gvrs"]);
    assert_eq!(r.code(), Some(2), "{}", r.stderr());
    let r = run(&["stats", "../testdata/volp/invalid_truncated_body.volp"]);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
}

/// The hostile corpus's top folder. `hostile/more/` is left out: opening
/// `fold_zip64_330000_empty_members.fold` alone costs 285 MiB (as much under `convert`), a FOLD
/// reader matter that `stats` inherits, not adds to.
#[test]
fn stats_stays_within_the_memory_bound_on_the_hostile_corpus() {
    let Some(dir) = rasterpack_common::testkit::corpus_dir("hostile") else {
        return;
    };
    // The top of hostile/ and hostile/more/ (huge directories, a 2^31-row grid of fill).
    let mut files: Vec<PathBuf> = [dir.clone(), dir.join("more")]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_none_or(|x| x != "md"))
        .collect();
    files.sort();
    assert!(files.len() >= 15);
    for f in &files {
        let args = ["stats", s(f)];
        let r = run(&args);
        assert!(
            matches!(r.code(), Some(0..=3)),
            "{}: exit {:?} {}",
            f.display(),
            r.code(),
            r.stderr()
        );
        support::check_bound(&args, &r);
        assert!(r.elapsed.as_secs() < 60, "{}: {:?}", f.display(), r.elapsed);
    }
}

/// Text figures of a float32 array print at float32 precision (the shortest text that reads
/// back as the same f32), not as the f64 they widen to; JSON keeps the f64.
#[test]
fn float32_figures_print_as_float32() {
    let dir = scratch("stats", "f32text");
    let p = dir.join("a.npy");
    let a = rasterpack_common::NdArray::from_vec(vec![2], vec![245.76276f32, 1.1f32]).unwrap();
    let mut bytes = Vec::new();
    rasterpack_common::npy::write(&mut bytes, &a).unwrap();
    std::fs::write(&p, bytes).unwrap();
    let r = check(&["stats", s(&p)], 0);
    let text = r.stdout();
    assert!(text.contains("min 1.1  max 245.76276  "), "{text}");
    assert!(!text.contains("245.7627563"), "{text}");
    let mean = ((245.76276f32 as f64 + 1.1f32 as f64) / 2.0) as f32;
    assert!(text.contains(&format!("mean {mean:?} ")), "{text}");
    let r = check(&["stats", "--json", s(&p)], 0);
    let doc: Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(doc["files"][0]["stats"][0]["stats"]["max"], json!(245.76276f32 as f64));
}

/// The figures do not depend on the number of decoding threads: a GVRS source hands its tiles
/// to the stats sink in any order ([`rasterpack_common::ArraySink::parallel_blocks`]), and the
/// sink merges them by tile number. Same JSON, byte for byte, on 1 and 3 threads; and the tiles
/// are never assembled into rows, so the 4000 x 4000 grid (61 MiB of f32) stays far below its
/// own size in peak memory.
#[test]
fn stats_json_is_the_same_on_one_and_several_threads() {
    let mut files = vec![
        PathBuf::from("../testdata/gvrs/crafted_all_types.gvrs"),
        PathBuf::from("../testdata/gvrs/crafted_compressed.gvrs"),
    ];
    let big = rasterpack_common::testkit::corpus_dir("gvrs").map(|d| d.join("big_terrain_4000.gvrs"));
    files.extend(big.clone());
    for file in &files {
        let args = ["stats", "--json", "--histogram", "32", s(file)];
        let threads = |n: &str| run_env(&args, &[("RAYON_NUM_THREADS".into(), n.into())]);
        let (one, three) = (threads("1"), threads("3"));
        assert_eq!(one.code(), Some(0), "{}", one.stderr());
        assert_eq!(three.code(), Some(0), "{}", three.stderr());
        assert_eq!(one.stdout(), three.stdout(), "{}", file.display());
        if Some(file) == big.as_ref() {
            let doc: Value = serde_json::from_str(&one.stdout()).unwrap();
            assert_eq!(doc["files"][0]["stats"][0]["stats"]["count"], 16_000_000u64);
            let peak = one.peak_kib.expect("GNU time reports the peak");
            assert!(peak < 40 << 10, "stats peaked at {peak} KiB");
        }
    }
}

/// A FOLD array of float32 with NaN and infinities in one NPZ0 chunk with rs(32) ECC,
/// stored or zstd: the file's bytes, and the stored length of its chunk.
fn fold_with_ecc(compression: rasterpack_fold::FoldCompression) -> (Vec<u8>, usize) {
    let mut seed = 3u64;
    let values: Vec<f32> = (0..1usize << 18)
        .map(|i| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            match i % 4099 {
                5 => f32::NAN,
                9 => f32::NEG_INFINITY,
                _ => (i % 613) as f32 * 0.25 + (seed >> 45) as f32 * 1e-4,
            }
        })
        .collect();
    let array = rasterpack_common::NdArray::from_vec(vec![512, 512], values).unwrap();
    let mut b = rasterpack_fold::FoldBuilder::new();
    let opts = rasterpack_fold::FoldChunkOptions {
        compression,
        ecc: Some(32),
    };
    b.add_npz("c", &[("v", &array)], opts).unwrap();
    let bytes = b.to_bytes().unwrap();
    let stored = rasterpack_fold::FoldFile::from_bytes(bytes.clone()).unwrap().chunks()[0].comp_len as usize;
    (bytes, stored)
}

/// `count` bytes of rs(32) payload block `block` (223 data bytes each) of `bytes` changed.
fn damage_block(bytes: &mut [u8], block: usize, count: usize) {
    let start = 28 + 32 + block * 223;
    for i in 0..count {
        bytes[start + i * 5] ^= 0xa5;
    }
}

/// `stats` reads a FOLD chunk in one pass, its figures held aside until the chunk's checks
/// pass: a chunk that ECC repairs gives the figures of the repaired bytes (those of the
/// undamaged file, and of the `.npy` that `convert` writes from the damaged one); a chunk past
/// repair exits 1 like `validate`, with no figures.
#[test]
fn stats_of_a_repaired_fold_chunk_are_the_repaired_figures_and_an_unrepairable_one_has_none() {
    let dir = scratch("stats", "fold_ecc");
    for compression in [
        rasterpack_fold::FoldCompression::None,
        rasterpack_fold::FoldCompression::Zstd(3),
    ] {
        let (good, stored) = fold_with_ecc(compression);
        let blocks = stored / 223;
        let (g, b, w, npy) = (
            dir.join("good.fold"),
            dir.join("bad.fold"),
            dir.join("worse.fold"),
            dir.join("bad.npy"),
        );
        std::fs::write(&g, &good).unwrap();
        let mut bad = good.clone();
        for block in [1, blocks / 3, blocks - 2] {
            damage_block(&mut bad, block, 10);
        }
        std::fs::write(&b, &bad).unwrap();
        let mut worse = good.clone();
        damage_block(&mut worse, blocks / 2, 20);
        std::fs::write(&w, &worse).unwrap();

        let figures = |p: &Path| {
            let r = run(&["stats", "--json", "--histogram", "8", s(p)]);
            let doc: Value = serde_json::from_str(&r.stdout()).unwrap();
            (r.code(), doc["files"][0]["stats"].clone())
        };
        let (code, want) = figures(&g);
        assert_eq!(code, Some(0), "{compression:?}");
        assert!(want[0]["stats"]["nan_count"].as_u64() > Some(0), "{want}");
        // The damaged copy: validate repairs it (exit 0 with a repair finding).
        let v = run(&["validate", "--json", s(&b)]);
        assert!(
            v.stdout().contains("fold.ecc.repaired"),
            "{compression:?}: {}",
            v.stdout()
        );
        let (code, got) = figures(&b);
        assert_eq!(code, Some(0), "{compression:?}");
        assert_eq!(got, want, "{compression:?}: the repaired chunk's figures");
        // What convert writes from the damaged copy holds those values.
        check(&["convert", s(&b), s(&npy), "--force"], 0);
        let (_, from_npy) = figures(&npy);
        assert_eq!(got[0]["stats"], from_npy[0]["stats"], "{compression:?}");
        // Past repair: exit 1 as validate, and no figures, nor a dtype or shape read from
        // the damaged bytes.
        assert_eq!(run(&["validate", s(&w)]).code(), Some(1), "{compression:?}");
        let r = run(&["stats", "--json", "--element", "c/v", s(&w)]);
        assert_eq!(r.code(), Some(1), "{compression:?}: {}", r.stderr());
        let doc: Value = serde_json::from_str(&r.stdout()).unwrap();
        let a = &doc["files"][0]["stats"][0];
        assert_eq!(a["stats"], Value::Null, "{compression:?}: {a}");
        assert_eq!(
            (&a["dtype"], &a["shape"]),
            (&Value::Null, &Value::Null),
            "{compression:?}: {a}"
        );
        assert!(
            r.stderr().contains("fold.ecc.ecc_uncorrectable"),
            "{compression:?}: {}",
            r.stderr()
        );
        // Without --element, "every array" includes the chunk the listing had to leave out:
        // it is shown with its error and the exit is 1, never an empty report that exits 0.
        let r = run(&["stats", "--json", s(&w)]);
        assert_eq!(r.code(), Some(1), "{compression:?}: {}", r.stdout());
        assert!(
            !r.stdout().contains("\"valid_count\""),
            "{compression:?}: {}",
            r.stdout()
        );
        let doc: Value = serde_json::from_str(&r.stdout()).unwrap();
        let f = &doc["files"][0];
        assert_eq!(f["stats"][0]["name"], "c", "{compression:?}: {f}");
        assert_eq!(f["stats"][0]["stats"], Value::Null, "{compression:?}: {f}");
        assert!(
            f["findings"].to_string().contains("fold.ecc.ecc_uncorrectable"),
            "{compression:?}: {f}"
        );
        // Every array to one output (.npz, or a Zarr group with --all): refused with the
        // chunk's finding before anything is written, not an output that lacks its arrays.
        for (out, extra) in [("all.npz", None), ("all.zarr", Some("--all"))] {
            let o = dir.join(out);
            let mut args = vec!["convert", s(&w), s(&o)];
            args.extend(extra);
            let r = run(&args);
            assert_eq!(r.code(), Some(1), "{compression:?} {out}: {}", r.stderr());
            assert!(
                r.stderr().contains("fold.ecc.ecc_uncorrectable"),
                "{out}: {}",
                r.stderr()
            );
            assert!(!o.exists(), "{out} written");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// FOLD `stats` (one pass, blocks of the member merged in block order) gives the same JSON,
/// byte for byte, whatever the thread count, on the testdata files and a zstd chunk with ECC.
#[test]
fn fold_stats_json_is_the_same_on_one_and_several_threads() {
    let dir = scratch("stats", "fold_threads");
    let made = dir.join("made.fold");
    std::fs::write(&made, fold_with_ecc(rasterpack_fold::FoldCompression::Zstd(3)).0).unwrap();
    for file in [
        PathBuf::from("../testdata/fold/sample.fold"),
        PathBuf::from("../testdata/fold/sample_rs16.fold"),
        made,
    ] {
        let args = ["stats", "--json", "--histogram", "32", s(&file)];
        let threads = |n: &str| run_env(&args, &[("RAYON_NUM_THREADS".into(), n.into())]);
        let (one, three) = (threads("1"), threads("3"));
        assert_eq!(one.code(), Some(0), "{}", one.stderr());
        assert_eq!(one.stdout(), three.stdout(), "{}", file.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A float32 volume of `shape` (C order) with varied values, a corner of one value (constant
/// bricks), a corner of `no_value` (NoValue bricks) and a few NaN cells.
fn write_volume(path: &Path, shape: [usize; 3], no_value: f32) {
    let [nz, ny, nx] = shape;
    let mut v = Vec::with_capacity(nz * ny * nx);
    for z in 0..nz {
        for y in 0..ny {
            for x in 0..nx {
                let i = (z * ny + y) * nx + x;
                v.push(if z < 40 && y < 40 && x < 40 {
                    7.5
                } else if z >= nz - 40 && y >= ny - 40 && x >= nx - 40 {
                    no_value
                } else if i % 997 == 3 {
                    f32::NAN
                } else {
                    ((i * 7919) % 10007) as f32 * 0.37 - 1500.0 + (i % 13) as f32 * 1e-3
                });
            }
        }
    }
    let a = rasterpack_common::NdArray::from_vec(shape.iter().map(|&n| n as u64).collect(), v).unwrap();
    let mut bytes = Vec::new();
    rasterpack_common::npy::write(&mut bytes, &a).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// The sum of the numbers under `key` anywhere in `v` (brick counts of every layer).
fn sum_key(v: &Value, key: &str) -> u64 {
    match v {
        Value::Object(m) => m
            .iter()
            .map(|(k, x)| {
                if k == key {
                    x.as_u64().unwrap_or(0)
                } else {
                    sum_key(x, key)
                }
            })
            .sum(),
        Value::Array(a) => a.iter().map(|x| sum_key(x, key)).sum(),
        _ => 0,
    }
}

/// VDS bricks go to the stats sink as they decode ([`rasterpack_common::ArraySink::parallel_blocks`]):
/// the same JSON, byte for byte, on 1 and 3 threads, and numpy's figures over the `.npy` that
/// `convert` writes with the same flags; with margins, LOD 1 and 2, regions that cut bricks,
/// constant and NoValue bricks, a U8 RLE channel with NoValue and a 4-D volume (testdata), and
/// the corpus's VDS files with margins, NoValue and constant bricks.
#[test]
fn vds_stats_are_the_same_on_one_and_several_threads_and_agree_with_numpy() {
    let dir = scratch("stats", "vds_blocks");
    let npy = dir.join("v.npy");
    write_volume(&npy, [96, 80, 100], -999.0);
    let vds = dir.join("v.vds");
    check(
        &[
            "convert",
            s(&npy),
            s(&vds),
            "--brick-size",
            "32",
            "--margin",
            "4",
            "--lods",
            "2",
            "--compress",
            "zip",
            "--no-value",
            "-999",
            "--force",
        ],
        0,
    );
    // The file has the bricks the cases are about.
    let inspect: Value = serde_json::from_str(&check(&["inspect", "--json", s(&vds)], 0).stdout()).unwrap();
    let (constant, novalue) = (sum_key(&inspect, "constant"), sum_key(&inspect, "novalue"));
    assert!(
        constant > 0 && novalue > 0,
        "{constant} constant, {novalue} NoValue bricks"
    );
    let flags = |f: &[&str]| f.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    let mut cases: Vec<(PathBuf, Vec<String>)> = vec![
        (vds.clone(), flags(&[])),
        (vds.clone(), flags(&["--lod", "1"])),
        (vds.clone(), flags(&["--lod", "2"])),
        (vds.clone(), flags(&["--region", "3:90,10:65,5:97"])),
        (vds.clone(), flags(&["--region", "0:40,0:40,0:40"])),
        (vds.clone(), flags(&["--region", "56:96,40:80,60:100"])),
        (vds.clone(), flags(&["--lod", "1", "--region", "5:40,:,1:33"])),
        (PathBuf::from("../testdata/vds/small_u8_rle_novalue.vds"), flags(&[])),
        (
            PathBuf::from("../testdata/vds/small_4d_r32_none_lod1.vds"),
            flags(&["--lod", "1"]),
        ),
        (
            PathBuf::from("../testdata/vds/small_r32_zip.vds"),
            flags(&["--region", "1:5,2:"]),
        ),
    ];
    if let Some(corpus) = rasterpack_common::testkit::corpus_dir("vds") {
        let p02 = corpus.join("p02_3d_r32_zip_lod2_margin.vds");
        cases.push((p02.clone(), flags(&["--lod", "1"])));
        cases.push((p02, flags(&["--region", "7:33,3:41,11:50"])));
        cases.push((corpus.join("p03_3d_u8_rle_novalue.vds"), flags(&[])));
        cases.push((corpus.join("p01_3d_r32_none.vds"), flags(&[])));
    }
    for (file, f) in &cases {
        let mut args = vec!["stats", "--json", "--histogram", "32", s(file)];
        args.extend(f.iter().map(String::as_str));
        let threads = |n: &str| run_env(&args, &[("RAYON_NUM_THREADS".into(), n.into())]);
        let (one, three) = (threads("1"), threads("3"));
        assert_eq!(one.code(), Some(0), "{args:?}: {}", one.stderr());
        assert_eq!(three.code(), Some(0), "{args:?}: {}", three.stderr());
        assert_eq!(one.stdout(), three.stdout(), "{args:?}");
    }
    if let Some(python) = python() {
        assert!(agree_with_numpy(&python, &dir, &cases, false) >= cases.len());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `stats` of a VDS volume holds bricks, not slabs: on a 256 x 256 x 256 float32 Zip volume
/// (64 MiB of values, bricks of 64^3 = 1 MiB, slabs of 16 MiB) its peak stays within a few MiB
/// of `validate`'s, which decodes the same bricks (C-order slabs peaked at 2-3 slabs above it).
#[test]
fn vds_stats_peak_memory_is_that_of_validate() {
    let dir = scratch("stats", "vds_peak");
    let npy = dir.join("v.npy");
    let n = 256usize;
    let v: Vec<f32> = (0..n * n * n).map(|i| ((i * 7919) % 10007) as f32 * 0.25).collect();
    let a = rasterpack_common::NdArray::from_vec(vec![n as u64; 3], v).unwrap();
    let mut bytes = Vec::new();
    rasterpack_common::npy::write(&mut bytes, &a).unwrap();
    drop(a);
    std::fs::write(&npy, bytes).unwrap();
    let vds = dir.join("v.vds");
    check(&["convert", s(&npy), s(&vds), "--compress", "zip", "--force"], 0);
    let _ = std::fs::remove_file(&npy);
    let validate = check(&["validate", s(&vds)], 0);
    let stats = check(&["stats", "--histogram", "256", s(&vds)], 0);
    let (Some(v), Some(st)) = (validate.peak_kib, stats.peak_kib) else {
        rasterpack_common::testkit::skip("peak RSS not measured: no /usr/bin/time");
        return;
    };
    assert!(st <= v + (8 << 10), "stats peaked at {st} KiB, validate at {v} KiB");
    let _ = std::fs::remove_dir_all(&dir);
}
