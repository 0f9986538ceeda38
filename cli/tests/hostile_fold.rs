//! The FOLD files of `corpus/hostile/` (issue 12): each runs through the real commands with
//! its verdict, and no command's process peaks above 256 MiB of resident memory, whatever
//! size the file claims. Reads the corpus from `RASTERPACK_CORPUS`; skipped when it is unset.
//!
//! Peak RSS is `getrusage(RUSAGE_CHILDREN).ru_maxrss`: the largest peak of any child reaped so
//! far, so checking it after each command names the first command over the bound.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BOUND_KIB: i64 = 256 * 1024;

fn corpus() -> Option<PathBuf> {
    rasterpack_common::testkit::corpus_dir("hostile")
}

/// Largest peak resident set (KiB) of any child this process has waited for.
#[cfg(target_os = "linux")]
fn children_peak_kib() -> i64 {
    // struct rusage: two timevals (4 x i64), then ru_maxrss and 13 more longs.
    extern "C" {
        fn getrusage(who: i32, usage: *mut [i64; 18]) -> i32;
    }
    const RUSAGE_CHILDREN: i32 = -1;
    let mut usage = [0i64; 18];
    // SAFETY: `usage` is a writable buffer of the size and layout of `struct rusage` on 64-bit
    // Linux; getrusage only writes into it.
    let rc = unsafe { getrusage(RUSAGE_CHILDREN, &mut usage) };
    assert_eq!(rc, 0, "getrusage failed");
    usage[4]
}

#[cfg(not(target_os = "linux"))]
fn children_peak_kib() -> i64 {
    0
}

/// Run the CLI, then check the memory bound.
fn run(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_rasterpack"))
        .args(args)
        .output()
        .expect("run rasterpack");
    let peak = children_peak_kib();
    assert!(
        peak <= BOUND_KIB,
        "`rasterpack {}` (or an earlier command) peaked at {peak} KiB of RSS, above {BOUND_KIB} KiB",
        args.join(" ")
    );
    out
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `validate --json`: exit code and the code of every finding, listed or counted.
fn validate(path: &Path) -> (i32, Vec<String>) {
    let o = run(&["validate", "--json", path.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("validate --json output");
    let mut codes: Vec<String> = v["files"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect();
    // Past 256 of one code, findings are counted, not listed: one code per counted finding.
    for o in v["files"][0]["findings_omitted"].as_array().unwrap() {
        let n = o["count"].as_u64().unwrap() as usize;
        codes.extend(std::iter::repeat_n(o["code"].as_str().unwrap().to_string(), n));
    }
    (code(&o), codes)
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rp-hostile-fold-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn hostile_fold_files_get_their_verdict_within_256_mib() {
    let Some(dir) = corpus() else { return };
    let file = |n: &str| dir.join(n);

    // 100k metadata keys, at the top and one level down: quick, valid, the manifest verifies.
    for name in [
        "fold_index_many_metadata_keys_quadratic.fold",
        "fold_meta_nested_100k_keys_quadratic.fold",
    ] {
        let start = std::time::Instant::now();
        let (c, codes) = validate(&file(name));
        assert_eq!(c, 0, "{name}: {codes:?}");
        assert_eq!(code(&run(&["inspect", file(name).to_str().unwrap()])), 0, "{name}");
        // Not a timing test (the work bound is asserted in the library), but 12 s before.
        assert!(start.elapsed().as_secs() < 30, "{name}: {:?}", start.elapsed());
    }

    // A zstd frame decoding to 1 GiB of an opaque chunk: decoded as a stream, valid.
    let blob = file("fold_blob_zstd_rle_1GiB_bloat.fold");
    let (c, codes) = validate(&blob);
    assert_eq!(
        (c, codes.iter().any(|c| c.starts_with("fold.payload"))),
        (0, false),
        "{codes:?}"
    );
    assert_eq!(code(&run(&["inspect", blob.to_str().unwrap()])), 0);
    let out = scratch("blob");
    let o = run(&["convert", blob.to_str().unwrap(), out.join("b.npy").to_str().unwrap()]);
    assert_eq!(code(&o), 2, "no array to convert: {}", stderr(&o));
    assert!(stderr(&o).contains("no NPZ0 array"), "{}", stderr(&o));

    // The same frame in a JSON chunk: 1 GiB of text checked as a stream, which ends inside
    // the document.
    let json = file("fold_json_zstd_rle_1GiB_bloat.fold");
    let (c, codes) = validate(&json);
    assert_eq!(c, 1);
    assert!(codes.contains(&"fold.payload.bad_json".to_string()), "{codes:?}");
    let o = run(&["inspect", "--json", json.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let chunk = &v["files"][0]["summary"]["chunks"][0];
    assert!(chunk["json"].is_null(), "a 1 GiB document is not held for display");

    // An NPZ0 member inflating to 1e9 bytes: validated and converted as a stream.
    let npz = file("fold_npz_member_deflate_1GB_bloat.fold");
    let (c, codes) = validate(&npz);
    assert_eq!(c, 0, "{codes:?}");
    assert_eq!(code(&run(&["inspect", npz.to_str().unwrap()])), 0);
    let npy = out.join("a.npy");
    let o = run(&["convert", npz.to_str().unwrap(), npy.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let len = std::fs::metadata(&npy).unwrap().len();
    assert_eq!(
        len,
        1_000_000_000 + 128,
        "1e9 uint8 values after a 128-byte .npy header"
    );
    std::fs::remove_file(&npy).unwrap();
    // FOLD -> FOLD (the repair copy) streams too.
    let copy = out.join("copy.fold");
    let o = run(&["convert", npz.to_str().unwrap(), copy.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(std::fs::read(&copy).unwrap(), std::fs::read(&npz).unwrap());

    // 300 directory entries pointing at one local header that names another member: every
    // member refused, as Python's zipfile refuses them.
    let overlap = file("fold_npz_overlap300_names_differ.fold");
    let (c, codes) = validate(&overlap);
    assert_eq!(c, 1);
    assert_eq!(
        codes
            .iter()
            .filter(|c| *c == "fold.payload.npz_member_name_mismatch")
            .count(),
        300,
        "{codes:?}"
    );
    // inspect finds the same (its exit code follows its findings).
    assert_eq!(code(&run(&["inspect", overlap.to_str().unwrap()])), 1);
    for element in [None, Some("m00000"), Some("n/m00299")] {
        let mut args = vec!["convert", overlap.to_str().unwrap()];
        let target = out.join("m.npy");
        args.push(target.to_str().unwrap());
        if let Some(e) = element {
            args.extend(["--element", e]);
        }
        let o = run(&args);
        assert_eq!(code(&o), 1, "{element:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("[fold.payload.npz_member_name_mismatch]"),
            "{element:?}: {}",
            stderr(&o)
        );
        assert!(!target.exists());
    }
    std::fs::remove_dir_all(&out).unwrap();
}
