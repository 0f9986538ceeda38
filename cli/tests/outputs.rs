//! Output files and the names on the command line (issue 17 item 12): `--force` keeps the
//! replaced file's permission bits, names up to the filesystem's 255 bytes can be written (the
//! temporary name is shortened when it would pass that), two conversions racing to create one
//! new path end as `--force` says, names that are not UTF-8 are taken, control characters in
//! names are escaped wherever a name is echoed, and a VOLP `version` beyond u64 is shown as
//! written.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rasterpack"))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn testdata(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("testdata")
        .join(rel)
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rasterpack-outputs-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn volp() -> PathBuf {
    testdata("volp/temperature_4x32x32_int16.volp")
}

#[test]
fn force_keeps_the_permission_bits_of_the_file_it_replaces() {
    let dir = scratch("mode");
    for mode in [0o640, 0o600, 0o664, 0o755] {
        let out = dir.join("o.npy");
        std::fs::write(&out, b"old").unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(mode)).unwrap();
        let o = bin()
            .arg("convert")
            .arg(volp())
            .arg(&out)
            .arg("--force")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let meta = std::fs::metadata(&out).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, mode, "mode {mode:o}");
        assert!(meta.len() > 3, "replaced");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every name length up to 255 bytes works (236-255 failed: the temporary name added ~30 bytes),
/// and no temporary file is left.
#[test]
fn output_names_up_to_255_bytes_are_written() {
    let dir = scratch("long");
    for len in [200, 224, 236, 240, 250, 255] {
        let name = format!("{}.npy", "n".repeat(len - 4));
        let out = dir.join(&name);
        let o = bin().arg("convert").arg(volp()).arg(&out).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{len} bytes: {}", stderr(&o));
        assert!(out.is_file());
        // And over an existing one with --force.
        let o = bin()
            .arg("convert")
            .arg(volp())
            .arg(&out)
            .arg("--force")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{len} bytes, --force: {}", stderr(&o));
        std::fs::remove_file(&out).unwrap();
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "no temporary file left");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A 4 MiB source, so that conversions started together overlap.
fn big_source(dir: &Path) -> PathBuf {
    let src = dir.join("big.npy");
    let arr =
        rasterpack_common::NdArray::new(rasterpack_common::DType::F64, vec![512, 1024], vec![7u8; 4 << 20]).unwrap();
    let mut bytes = Vec::new();
    rasterpack_common::npy::write(&mut bytes, &arr).unwrap();
    std::fs::write(&src, bytes).unwrap();
    src
}

/// Several `convert X out.npy --force` to one new path at once: `--force` wins, every one
/// succeeds and the file is whole (the losers said "exists; pass --force" although it was
/// given). Without `--force`, one wins and the others say the file appeared while converting
/// (or, started later, that it exists).
#[test]
fn a_race_to_create_one_path_ends_as_force_says() {
    let dir = scratch("race");
    let src = big_source(&dir);
    let want = std::fs::read(&src).unwrap();
    for round in 0..3 {
        let out = dir.join(format!("forced{round}.npy"));
        let children: Vec<_> = (0..4)
            .map(|_| {
                bin()
                    .arg("convert")
                    .arg(&src)
                    .arg(&out)
                    .arg("--force")
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let o = c.wait_with_output().unwrap();
            assert_eq!(o.status.code(), Some(0), "round {round}: {}", stderr(&o));
        }
        assert_eq!(std::fs::read(&out).unwrap(), want);
    }
    let out = dir.join("plain.npy");
    let children: Vec<_> = (0..4)
        .map(|_| {
            bin()
                .arg("convert")
                .arg(&src)
                .arg(&out)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<Output> = children.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    assert!(outputs.iter().any(|o| o.status.code() == Some(0)));
    for o in outputs.iter().filter(|o| o.status.code() != Some(0)) {
        assert_eq!(o.status.code(), Some(2));
        let e = stderr(o);
        assert!(
            e.contains("appeared while converting") || e.contains("exists; pass --force"),
            "{e}"
        );
    }
    assert_eq!(std::fs::read(&out).unwrap(), want);
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn names_that_are_not_utf8_are_taken_and_shown_escaped() {
    let dir = scratch("bytes");
    let name = OsStr::from_bytes(b"caf\xe9.npy");
    let out = dir.join(name);
    let o = bin().arg("convert").arg(volp()).arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = bin().arg("inspect").arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("caf\\xe9.npy"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let o = bin().arg("inspect").arg("--json").arg(&out).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(doc["files"][0]["path"].as_str().unwrap().ends_with("caf\u{fffd}.npy"));
    // A missing one is named escaped in the error.
    let o = bin()
        .arg("validate")
        .arg(dir.join(OsStr::from_bytes(b"gone\xff")))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("gone\\xff: No such file"), "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A name holding an escape sequence or a newline cannot recolour the terminal or fake a line:
/// it is shown escaped on stderr and in the text report, and kept as itself in JSON.
#[test]
fn control_characters_in_names_are_escaped() {
    let dir = scratch("control");
    let out = dir.join("a\x1b[2Jb\nvalid.npy");
    let o = bin().arg("convert").arg(volp()).arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for command in ["inspect", "validate"] {
        let o = bin().arg(command).arg(&out).output().unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            !text.contains('\x1b') && text.contains("a\\u{1b}[2Jb\\nvalid.npy"),
            "{text}"
        );
    }
    let o = bin().arg("validate").arg("--json").arg(&out).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(doc["files"][0]["path"]
        .as_str()
        .unwrap()
        .ends_with("a\x1b[2Jb\nvalid.npy"));
    for args in [
        vec![OsStr::new("inspect"), dir.join("x\x07\r.volp").as_os_str()],
        vec![
            OsStr::new("convert"),
            dir.join("y\x1b.volp").as_os_str(),
            OsStr::new("o.npy"),
        ],
        vec![OsStr::new("convert"), volp().as_os_str(), out.as_os_str()],
    ] {
        let o = bin().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = stderr(&o);
        assert!(!e.contains('\x1b') && !e.contains('\x07') && !e.contains('\r'), "{e:?}");
        assert!(!e.trim_end().contains('\n'), "one line: {e:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `"version": 1e400` is reported as itself, not as 18446744073709551615.
#[test]
fn a_volp_version_beyond_u64_is_shown_as_written() {
    let dir = scratch("version");
    let src = std::fs::read(volp()).unwrap();
    let len = u32::from_le_bytes(src[4..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&src[8..8 + len]).unwrap();
    assert!(header.starts_with(r#"{"version":1,"#));
    let header = header.replacen(r#""version":1,"#, r#""version":1e400,"#, 1);
    let mut bytes = b"VOLP".to_vec();
    bytes.extend_from_slice(&(header.len() as u32).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(&src[8 + len..]);
    let file = dir.join("v.volp");
    std::fs::write(&file, bytes).unwrap();
    let o = bin().arg("inspect").arg(&file).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!text.contains("18446744073709551615"), "{text}");
    assert!(text.contains("1e400"), "{text}");
    let o = bin().arg("validate").arg("--json").arg(&file).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["files"][0]["summary"]["version"], "1e400", "{doc}");
    let note = doc["files"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "volp.version.newer")
        .unwrap();
    assert_eq!(
        note["message"],
        "version 1e400 is newer than 1: decoded with the version 1 layout"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn force_onto_a_directory_is_an_io_error_that_leaves_it() {
    let dir = scratch("isdir");
    let out = dir.join("out.npy");
    std::fs::create_dir(&out).unwrap();
    let o = bin()
        .arg("convert")
        .arg(volp())
        .arg(&out)
        .arg("--force")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // The OS's words and the io code (the library keeps the kind: Python raises IsADirectoryError).
    assert!(stderr(&o).contains("is a directory [io]"), "{}", stderr(&o));
    assert!(out.is_dir() && std::fs::read_dir(&out).unwrap().next().is_none());
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(left.len(), 1, "no temporary file left");
    std::fs::remove_dir_all(&dir).unwrap();
}
