//! `.pre-commit-hooks.yaml` runs what docs/ci.md says: its entry, run as pre-commit runs it
//! (entry, then the staged file names), passes valid testdata files and fails on invalid ones,
//! and its `files` pattern names every extension of the formats.

use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The value of `key:` in the hook file (one hook, one line per key).
fn field(text: &str, key: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .unwrap_or_else(|| panic!("no {key}: in .pre-commit-hooks.yaml"));
    line.trim().trim_matches('\'').to_string()
}

#[test]
fn the_pre_commit_hook_validates_the_files_it_is_given() {
    let text = std::fs::read_to_string(root().join(".pre-commit-hooks.yaml")).unwrap();
    assert_eq!(field(&text, "- id"), "rasterpack-validate");
    assert_eq!(field(&text, "language"), "system");
    let entry = field(&text, "entry");
    let mut words = entry.split_whitespace();
    assert_eq!(words.next(), Some("rasterpack"));
    let args: Vec<&str> = words.collect();
    assert_eq!(args, ["validate"]);
    let files = field(&text, "files");
    for ext in ["volp", "gvrs", "udf", "fold", "mind", "vds", "npy"] {
        assert!(files.contains(ext), "{files} misses .{ext}");
    }
    let run = |extra: &[&str], names: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_rasterpack"))
            .args(&args)
            .args(extra)
            .args(names.iter().map(|n| root().join("testdata").join(n)))
            .output()
            .unwrap()
    };
    let good = [
        "volp/cloud_2x8x8_float32.volp",
        "gvrs/crafted_all_types.gvrs",
        "fold/sample.fold",
    ];
    let o = run(&["--strict"], &good);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
    let mut bad = good.to_vec();
    bad.push("volp/invalid_truncated_body.volp");
    let o = run(&[], &bad);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(String::from_utf8_lossy(&o.stdout).contains("invalid_truncated_body.volp"));
}
