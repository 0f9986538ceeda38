//! VOLP headers through the CLI (issue 17 item 16): integers beyond 64 bits in `inspect --json`
//! are strings of their digits (as docs/cli.md says), VOLP to VOLP keeps the header keys it does
//! not interpret (in order, values as written), and negative zstd levels (`zstd:-3`, which the
//! reference packer accepts) write files that read back to the same values.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rasterpack"))
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rasterpack-volph-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn testdata(rel: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    root.join("testdata").join(rel).to_str().unwrap().to_string()
}

/// The header text of a VOLP file.
fn header(bytes: &[u8]) -> String {
    let n = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
    String::from_utf8(bytes[8..8 + n].to_vec()).unwrap()
}

/// The testdata volume with `extra` (`,"k":v...`) appended to its header object.
fn with_extra_keys(dir: &Path, extra: &str) -> String {
    let src = std::fs::read(testdata("volp/temperature_4x32x32_int16.volp")).unwrap();
    let n = u32::from_le_bytes(src[4..8].try_into().unwrap()) as usize;
    let h = header(&src);
    let h = format!("{}{extra}}}", &h[..h.len() - 1]);
    let mut out = b"VOLP".to_vec();
    out.extend_from_slice(&(h.len() as u32).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(&src[8 + n..]);
    let path = dir.join("extra.volp");
    std::fs::write(&path, out).unwrap();
    path.to_str().unwrap().to_string()
}

const EXTRA: &str = r#","zeta":123456789012345678901234567890,"alpha":{"x":[1e400,2.50,-18446744073709551617,"a\u0001"],"y":null},"mid":true"#;

#[test]
fn integers_beyond_64_bits_are_strings_in_json() {
    let dir = scratch("json");
    let src = with_extra_keys(&dir, EXTRA);
    for command in ["inspect", "validate"] {
        let o = run(&[command, "--json", &src]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let unknown = &doc["files"][0]["summary"]["metadata"]["unknown"];
        assert_eq!(unknown["zeta"], "123456789012345678901234567890", "{unknown}");
        assert_eq!(unknown["alpha"]["x"][0], "1e400", "beyond f64: the text");
        assert_eq!(unknown["alpha"]["x"][1], 2.5, "an f64 stays a number");
        assert_eq!(unknown["alpha"]["x"][2], "-18446744073709551617");
        assert_eq!(unknown["mid"], true);
        // In file order.
        let keys: Vec<&str> = unknown.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["units", "zeta", "alpha", "mid"]);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn volp_to_volp_keeps_the_keys_it_does_not_interpret() {
    let dir = scratch("carry");
    let src = with_extra_keys(&dir, EXTRA);
    let out = dir.join("copy.volp");
    let o = run(&["convert", &src, out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let h = header(&std::fs::read(&out).unwrap());
    assert!(
        h.ends_with(&format!(r#","units":"K"{EXTRA}}}"#)),
        "the unknown keys, in order and as written, end the header: {h}"
    );
    let o = run(&["validate", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
    // And again from the copy: nothing doubles.
    let again = dir.join("again.volp");
    let o = run(&["convert", out.to_str().unwrap(), again.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(header(&std::fs::read(&again).unwrap()), h);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn negative_zstd_levels_write_volp() {
    let dir = scratch("levels");
    let src = testdata("volp/temperature_4x32x32_int16.volp");
    let whole = dir.join("whole.npy");
    assert_eq!(run(&["convert", &src, whole.to_str().unwrap()]).status.code(), Some(0));
    for level in ["-1", "-3", "-131072", "1", "22"] {
        let out = dir.join(format!("l{level}.volp"));
        let o = run(&[
            "convert",
            &src,
            out.to_str().unwrap(),
            "--compress",
            &format!("zstd:{level}"),
        ]);
        assert_eq!(o.status.code(), Some(0), "zstd:{level}: {}", stderr(&o));
        let o = run(&["validate", out.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "zstd:{level}");
        let back = dir.join("back.npy");
        let o = run(&["convert", "--force", out.to_str().unwrap(), back.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(
            std::fs::read(&back).unwrap(),
            std::fs::read(&whole).unwrap(),
            "zstd:{level}"
        );
    }
    for level in ["0", "23", "-131073", "x"] {
        let out = dir.join("bad.volp");
        let o = run(&[
            "convert",
            &src,
            out.to_str().unwrap(),
            "--compress",
            &format!("zstd:{level}"),
        ]);
        assert_eq!(o.status.code(), Some(2), "zstd:{level}");
        assert!(stderr(&o).contains("-131072"), "{}", stderr(&o));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// FOLD metadata, Python ints of any size, follows the same rule in `inspect --json`.
#[test]
fn fold_metadata_integers_beyond_64_bits_are_strings_too() {
    use rasterpack_fold::pjson::Value;
    let dir = scratch("fold");
    let mut b = rasterpack_fold::FoldBuilder::new();
    b.metadata("big", Value::Int("-123456789012345678901234567890".into()))
        .unwrap();
    b.metadata("max", Value::Int("18446744073709551615".into())).unwrap();
    b.metadata("past", Value::Int("18446744073709551616".into())).unwrap();
    let path = dir.join("m.fold");
    std::fs::write(&path, b.to_bytes().unwrap()).unwrap();
    let o = run(&["inspect", "--json", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let meta = &doc["files"][0]["summary"]["metadata"];
    assert_eq!(meta["big"], "-123456789012345678901234567890", "{meta}");
    assert_eq!(meta["max"], 18446744073709551615u64, "{meta}");
    assert_eq!(meta["past"], "18446744073709551616", "{meta}");
    std::fs::remove_dir_all(&dir).unwrap();
}
