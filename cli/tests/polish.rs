//! The CLI as a person meets it: help examples that run, one report per error, `-` as OUT,
//! flags that do not apply, totals over many files, and tables on a real terminal (through
//! `script`, which gives the program a pseudo-terminal).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rasterpack"));
    c.env_remove("NO_COLOR");
    c
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run rasterpack")
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn testdata(rel: &str) -> String {
    repo_root().join("testdata").join(rel).to_str().unwrap().to_string()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rasterpack-polish-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Every `testdata/...` path in `--help`'s examples exists (a `*` must match something), and
/// each example command that reads only files in testdata/ runs (from the repository root).
#[test]
fn help_examples_name_files_that_exist() {
    let help = stdout(&run(&["--help"]));
    let examples = help.split("Examples").nth(1).expect("--help has examples");
    let mut seen = 0;
    for word in examples.split_whitespace().filter(|w| w.starts_with("testdata/")) {
        let path = repo_root().join(word);
        match word.split_once('*') {
            None => assert!(path.is_file(), "--help names {word}, which does not exist"),
            Some((dir, suffix)) => {
                let dir = repo_root().join(dir);
                let hits = std::fs::read_dir(&dir)
                    .unwrap_or_else(|_| panic!("--help names {word}, but {} is missing", dir.display()))
                    .filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_string_lossy().ends_with(suffix))
                    .count();
                assert!(hits > 0, "--help's {word} matches nothing");
            }
        }
        seen += 1;
    }
    assert!(seen >= 3, "the examples use the repository's own files:\n{examples}");
    // The examples run: inspect and the element conversion succeed on those files.
    let dir = scratch("help");
    let out = dir.join("a.npy");
    for line in examples.lines().map(str::trim).filter(|l| l.starts_with("rasterpack ")) {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.iter().any(|w| w.contains(['|', '*'])) {
            continue; // pipelines and globs need a shell (their paths were checked above)
        }
        let args: Vec<String> = words[1..]
            .iter()
            .map(|w| match *w {
                w if w.starts_with("testdata/") => repo_root().join(w).to_str().unwrap().to_string(),
                w if w.ends_with(".npy") => out.to_str().unwrap().to_string(),
                w if w.ends_with(".png") => dir.join("p.png").to_str().unwrap().to_string(),
                w => w.to_string(),
            })
            .chain(if words[1] == "convert" || words[1] == "preview" {
                Some("--force".to_string())
            } else {
                None
            })
            .collect();
        let o = bin().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{line}: {}", stderr(&o));
    }
}

/// A missing file is reported once: its message on stderr, not again in the text report.
#[test]
fn a_missing_file_is_reported_once() {
    let missing = "/nonexistent/rasterpack-missing.volp";
    for cmd in ["validate", "inspect"] {
        let o = run(&[cmd, missing]);
        assert_eq!(o.status.code(), Some(2));
        let (out, err) = (stdout(&o), stderr(&o));
        let mentions = out.matches("No such file").count() + err.matches("No such file").count();
        assert_eq!(
            mentions, 1,
            "{cmd}: reported {mentions} times:\nstdout:\n{out}\nstderr:\n{err}"
        );
        assert_eq!(err.lines().count(), 1, "{cmd}: one diagnostic line: {err}");
        // --json still lists it (the document covers every input), and stderr says it once.
        let o = run(&[cmd, "--json", missing]);
        let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(doc["files"][0]["exit_code"], 2);
        assert_eq!(stderr(&o).lines().count(), 1);
    }
    let o = run(&["convert", missing, "/tmp/rasterpack-never-written.npy"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stderr(&o).matches("No such file").count(), 1, "{}", stderr(&o));
}

/// `-` as OUT writes the converted file to stdout, needs --to, and leaves no file behind.
#[test]
fn dash_as_out_is_standard_output() {
    let dir = scratch("dash");
    let src = testdata("volp/temperature_4x32x32_int16.volp");
    let file = dir.join("t.npy");
    let o = run(&["convert", &src, file.to_str().unwrap(), "--physical"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = bin()
        .current_dir(&dir)
        .args(["convert", &src, "-", "--to", "npy", "--physical"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(o.stdout, std::fs::read(&file).unwrap(), "stdout carries the .npy");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["t.npy"], "no file named - and no temporary file");

    let o = bin().current_dir(&dir).args(["convert", &src, "-"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--to"), "{}", stderr(&o));
    assert!(o.stdout.is_empty());

    // What reaches stdout reads back like the file.
    let mut child = bin()
        .args(["inspect", "--json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&o_stdout_npy(&src)).unwrap();
    let o = child.wait_with_output().unwrap();
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["files"][0]["summary"]["shape"], serde_json::json!([4, 32, 32]));
}

/// A reader that stops early (`| head -c 100`) loses data that `convert ... -` was writing:
/// exit 2 with a message saying so (a report cut short by `| head` still ends quietly: see
/// `broken_pipe_ends_quietly` in cli.rs).
#[test]
fn a_closed_pipe_fails_convert_to_stdout() {
    use std::io::Read;
    // 4 MiB: far more than a pipe buffer holds, so the writer meets the closed pipe.
    let dir = scratch("closed-pipe");
    let src = dir.join("big.npy");
    let arr =
        rasterpack_common::NdArray::new(rasterpack_common::DType::F64, vec![512, 1024], vec![0u8; 4 << 20]).unwrap();
    let mut bytes = Vec::new();
    rasterpack_common::npy::write(&mut bytes, &arr).unwrap();
    std::fs::write(&src, bytes).unwrap();
    let mut child = bin()
        .args(["convert", src.to_str().unwrap(), "-", "--to", "npy"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 10];
    child.stdout.take().unwrap().read_exact(&mut head).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(&head[..6], b"\x93NUMPY");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("closed the pipe"), "{}", stderr(&o));
}

/// Every command that writes to stdout fails (exit 2, a message on stderr) when stdout is
/// closed (`>&-`) or cannot take the bytes (`/dev/full`), instead of exiting 0 with the output
/// lost. `validate --quiet` writes nothing to stdout, so a closed stdout does not matter to it.
#[test]
fn a_closed_or_full_stdout_is_exit_2() {
    let volp = testdata("volp/temperature_4x32x32_int16.volp");
    let commands: [&[&str]; 5] = [
        &["inspect", &volp],
        &["inspect", "--json", &volp],
        &["validate", &volp],
        &["validate", "--json", &volp],
        &["convert", &volp, "-", "--to", "npy"],
    ];
    for args in commands {
        // `>&-`: the shell closes descriptor 1 before running the program.
        let o = Command::new("sh")
            .arg("-c")
            .arg(r#"exec "$0" "$@" >&-"#)
            .arg(env!("CARGO_BIN_EXE_rasterpack"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?} >&-: {}", stderr(&o));
        assert!(
            stderr(&o).contains("standard output is closed"),
            "{args:?}: {}",
            stderr(&o)
        );
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let o = bin().args(args).stdout(full).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?} >/dev/full: {}", stderr(&o));
        assert!(
            stderr(&o).contains("No space left on device"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    let o = Command::new("sh")
        .arg("-c")
        .arg(r#"exec "$0" validate --quiet "$1" >&-"#)
        .arg(env!("CARGO_BIN_EXE_rasterpack"))
        .arg(&volp)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Writing to /dev/null is writing somewhere: success.
    let o = bin().args(["inspect", &volp]).stdout(Stdio::null()).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

fn o_stdout_npy(src: &str) -> Vec<u8> {
    run(&["convert", src, "-", "--to", "npy"]).stdout
}

/// Flags the source or target does not use are refused by name (exit 2) before anything is
/// written; the same flags where they apply still work.
#[test]
fn flags_that_do_not_apply_are_refused_by_name() {
    let dir = scratch("flags");
    let out = dir.join("out");
    let o = out.to_str().unwrap();
    let volp = testdata("volp/temperature_4x32x32_int16.volp");
    let gvrs = testdata("gvrs/crafted_all_types.gvrs");
    let npy = dir.join("grid.npy");
    let st = run(&["convert", &gvrs, npy.to_str().unwrap(), "--element", "a"]);
    assert_eq!(st.status.code(), Some(0), "{}", stderr(&st));
    let npy = npy.to_str().unwrap();
    let refused: &[(&[&str], &str)] = &[
        (&[volp.as_str(), o, "--to", "npy", "--element", "x"], "--element"),
        (
            &[gvrs.as_str(), o, "--to", "npy", "--element", "a", "--physical"],
            "--physical",
        ),
        (&[volp.as_str(), o, "--to", "npy", "--codes"], "--codes"),
        (&[npy, o, "--to", "npy", "--codes"], "--codes"),
        (&[volp.as_str(), o, "--to", "npy", "--tile", "8x8"], "--tile"),
        (&[volp.as_str(), o, "--to", "npy", "--compress", "zstd"], "--compress"),
        (&[npy, o, "--to", "udf", "--compress", "zstd"], "--compress"),
        (&[npy, o, "--to", "volp", "--tile", "8x8"], "--tile"),
        (&[npy, o, "--to", "fold", "--tile", "8x8"], "--tile"),
    ];
    for (args, flag) in refused {
        let mut all = vec!["convert"];
        all.extend_from_slice(args);
        let r = run(&all);
        assert_eq!(r.status.code(), Some(2), "{all:?}: {}", stderr(&r));
        assert!(
            stderr(&r).contains(&format!("{flag} does not apply")),
            "{all:?}: {}",
            stderr(&r)
        );
        assert!(!out.exists(), "{all:?} wrote output");
    }
    let honoured: &[&[&str]] = &[
        &[volp.as_str(), o, "--to", "npy", "--physical"],
        &[gvrs.as_str(), o, "--to", "npy", "--element", "d", "--codes"],
        &[npy, o, "--to", "gvrs", "--tile", "4x4", "--compress", "deflate"],
        &[npy, o, "--to", "fold", "--compress", "zstd"],
        &[volp.as_str(), o, "--to", "volp", "--compress", "zstd:5"],
    ];
    for args in honoured {
        let mut all = vec!["convert", "--force"];
        all.extend_from_slice(args);
        let r = run(&all);
        assert_eq!(r.status.code(), Some(0), "{all:?}: {}", stderr(&r));
    }
}

/// Several inputs end with a totals line (text) or a `totals` object (--json); --quiet prints
/// neither.
#[test]
fn many_files_get_totals() {
    let good = testdata("volp/temperature_4x32x32_int16.volp");
    let bad = testdata("volp/invalid_bad_magic.volp");
    let missing = "/nonexistent/rasterpack.npy";
    let o = bin()
        .env("NO_COLOR", "1")
        .args(["validate", &good, &good, &bad, missing])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let text = stdout(&o);
    assert_eq!(
        text.lines().last(),
        Some("4 files: 2 valid, 1 invalid, 1 unreadable"),
        "{text}"
    );
    let o = run(&["validate", &good]);
    assert!(!stdout(&o).contains("1 file"), "no totals for one file: {}", stdout(&o));
    let o = run(&["validate", "--quiet", &good, &bad]);
    assert!(o.stdout.is_empty());
    for (cmd, passed) in [("validate", "valid"), ("inspect", "structure_checked")] {
        let o = run(&[cmd, "--json", &good, &bad, missing]);
        let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
        let mut want = serde_json::json!({"files": 3, "invalid": 1, "unsupported": 0, "unreadable": 1});
        want[passed] = 1.into();
        assert_eq!(doc["totals"], want, "{cmd}");
    }
    // inspect makes no validity claim in its totals either.
    let o = bin()
        .env("NO_COLOR", "1")
        .args(["inspect", &good, &bad])
        .output()
        .unwrap();
    assert_eq!(
        stdout(&o).lines().last(),
        Some("2 files: 1 structure checked, 1 invalid")
    );
}

/// Run `command` under `script` (a pseudo-terminal), after `stty cols COLS` when given.
/// `None` when `script` is not available here.
#[cfg(unix)]
fn on_a_terminal(cols: Option<u16>, command: &str, colour: bool) -> Option<String> {
    let size = cols.map(|c| format!("stty cols {c} rows 50; ")).unwrap_or_default();
    let mut cmd = Command::new("script");
    cmd.args(["-q", "-e", "-c", &format!("{size}{command}"), "/dev/null"])
        .stdin(Stdio::null())
        .env("TERM", "xterm");
    if colour {
        cmd.env_remove("NO_COLOR");
    } else {
        cmd.env("NO_COLOR", "1");
    }
    match cmd.output() {
        Ok(o) if o.status.code().is_some() => Some(String::from_utf8_lossy(&o.stdout).into_owned()),
        _ => None,
    }
}

/// Visible width of each table line: escape sequences removed, characters counted.
#[cfg(unix)]
fn table_line_widths(text: &str) -> Vec<usize> {
    text.lines()
        .map(|l| {
            let mut n = 0;
            let mut chars = l.trim_end_matches('\r').chars();
            while let Some(c) = chars.next() {
                if c == '\x1b' {
                    for c in chars.by_ref() {
                        if c.is_ascii_alphabetic() {
                            break;
                        }
                    }
                } else {
                    n += 1;
                }
            }
            (l.contains(['│', '┌', '└', '╞']), n)
        })
        .filter(|(table, _)| *table)
        .map(|(_, n)| n)
        .collect()
}

#[cfg(unix)]
#[test]
fn tables_on_a_terminal_fit_its_width_and_a_zero_width_means_80() {
    use std::io::Write;
    let exe = env!("CARGO_BIN_EXE_rasterpack");
    let files = [
        testdata("gvrs/crafted_all_types.gvrs"),
        testdata("volp/invalid_truncated_body.volp"),
        testdata("volp/cloud_2x8x8_float32.volp"),
    ];
    let command = format!("{exe} inspect {}", files.join(" "));
    let Some(at_80) = on_a_terminal(Some(80), &command, true) else {
        let _ = writeln!(
            std::io::stderr(),
            "skipped: terminal tables (`script` is not available)"
        );
        return;
    };
    assert!(at_80.contains('\x1b'), "a terminal gets colour");
    let w = table_line_widths(&at_80);
    assert!(!w.is_empty(), "{at_80}");
    assert!(w.iter().all(|&n| n <= 80), "a line wider than 80 columns:\n{at_80}");
    // Numbers in the files' reports come out whole.
    for n in ["-2147483647", "2147483647", "0.9990717", "1700000000000", "-2147483648"] {
        assert!(
            at_80
                .split(|c: char| c.is_whitespace() || "│┆,".contains(c))
                .any(|w| w == n),
            "{n} split at 80 columns:\n{at_80}"
        );
    }
    // Binary output is not written to a terminal.
    let src = testdata("volp/cloud_2x8x8_float32.volp");
    let refused = on_a_terminal(
        Some(80),
        &format!("{exe} convert {src} - --to npy; echo \"exit=$?\""),
        false,
    )
    .unwrap();
    assert!(
        refused.contains("refusing to write npy data to a terminal"),
        "{refused}"
    );
    assert!(refused.contains("exit=2"), "{refused}");
    // A terminal that reports 0 columns (the pty `script` makes without a size) gets 80, not
    // one-character columns.
    let Some(zero) = on_a_terminal(Some(0), &command, false) else {
        return;
    };
    let w0 = table_line_widths(&zero);
    assert!(w0.iter().all(|&n| n <= 80), "{zero}");
    assert!(w0.iter().any(|&n| n >= 60), "tables use the 80 columns: {zero}");
}
