//! The progress bar of one long job (issue 12 item 6), through the built binary: drawn on a
//! terminal's stderr (a pseudo-terminal made by `script`), never when stderr is piped, and
//! cleared at the end. `RASTERPACK_PROGRESS_DELAY_MS=0` shows it at once instead of after a
//! second, so a small file is enough.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rasterpack_common::{npy, Format, Input, NdArray, Progress, ValidateOptions};

const EXE: &str = env!("CARGO_BIN_EXE_rasterpack");

fn testdata(rel: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    root.join("testdata").join(rel).to_str().unwrap().to_string()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rasterpack-progress-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A 4 MiB float32 .npy.
fn big_npy(dir: &Path) -> String {
    let path = dir.join("big.npy");
    let array = NdArray::from_vec(vec![1024, 1024], (0..1 << 20).map(|v| v as f32).collect()).unwrap();
    let mut bytes = Vec::new();
    npy::write(&mut bytes, &array).unwrap();
    std::fs::write(&path, bytes).unwrap();
    path.to_str().unwrap().to_string()
}

/// What a terminal shows while `command` runs (stdout and stderr both go to the terminal), or
/// `None` when `script` is not available.
fn on_a_terminal(command: &str) -> Option<String> {
    let o = Command::new("script")
        .args(["-q", "-e", "-c", command, "/dev/null"])
        .stdin(Stdio::null())
        .env("TERM", "xterm")
        .env("NO_COLOR", "1")
        .output()
        .ok()?;
    o.status.code()?;
    Some(String::from_utf8_lossy(&o.stdout).into_owned())
}

fn skipped(what: &str) {
    // Straight to stderr, so the note shows in a plain `cargo test` run.
    let _ = writeln!(std::io::stderr(), "skipped: {what}");
}

/// The bar lines drawn: each redraw starts with `\r` + erase-line (the first one needs none)
/// and is padded with spaces to the terminal's width, removed here.
fn bars(screen: &str) -> Vec<&str> {
    screen
        .split("\r\x1b[2K")
        .filter(|l| l.contains("%"))
        .map(str::trim_end)
        .collect()
}

#[test]
fn nothing_is_drawn_when_stderr_is_piped() {
    let dir = scratch("piped");
    let src = big_npy(&dir);
    let out = dir.join("out.npy");
    for args in [
        vec!["convert", src.as_str(), out.to_str().unwrap()],
        vec!["validate", src.as_str()],
        vec!["validate", &testdata("volp/temperature_4x32x32_int16.volp")],
    ] {
        let o = Command::new(EXE)
            .args(&args)
            .env("RASTERPACK_PROGRESS_DELAY_MS", "0")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        assert!(o.stderr.is_empty(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
}

#[test]
fn convert_draws_a_bar_on_a_terminal_and_clears_it() {
    let dir = scratch("tty");
    let src = big_npy(&dir);
    let out = dir.join("out.npy");
    let command = format!(
        "RASTERPACK_PROGRESS_DELAY_MS=0 {EXE} convert {src} {} --region 0:512; echo \"exit=$?\"",
        out.display()
    );
    let Some(screen) = on_a_terminal(&command) else {
        return skipped("progress on a terminal (`script` is not available)");
    };
    assert!(screen.contains("exit=0"), "{screen:?}");
    let drawn = bars(&screen);
    assert!(!drawn.is_empty(), "no bar: {screen:?}");
    for line in &drawn {
        assert!(
            line.starts_with(&format!("{src} [")) || line.starts_with("…"),
            "{line:?}"
        );
        assert!(line.chars().count() <= 80, "{line:?}");
    }
    // The region's 2 MiB, not the file's 4 MiB, is the whole: the last bar is full.
    assert!(
        drawn.last().unwrap().contains("[########################] 100%"),
        "{screen:?}"
    );
    // Cleared before the shell prints: the line is erased right after the last bar.
    let mut pieces = screen.rsplit("\r\x1b[2K");
    assert!(pieces.next().unwrap().starts_with("exit=0"), "{screen:?}");
    assert!(pieces.next().unwrap().contains("100%"), "{screen:?}");
    assert_eq!(
        npy::read(&std::fs::read(&out).unwrap(), &Default::default())
            .unwrap()
            .shape,
        vec![512, 1024]
    );

    // Without the override, a job this short (well under a second) draws nothing.
    let command = format!("{EXE} convert --force {src} {}; echo \"exit=$?\"", out.display());
    let screen = on_a_terminal(&command).unwrap();
    assert!(screen.contains("exit=0") && bars(&screen).is_empty(), "{screen:?}");
}

/// `validate` draws what the format reports through `ValidateOptions::report_progress` (VOLP's
/// streaming validator reports the input position after each window).
#[test]
fn validate_draws_what_the_format_reports() {
    let file = testdata("volp/temperature_4x32x32_int16.volp");
    let reports = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = std::sync::Arc::clone(&reports);
    let opts = ValidateOptions {
        progress: Some(Progress::new(move |_, _| {
            seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })),
        ..Default::default()
    };
    let input = Input::open(Path::new(&file)).unwrap();
    assert!(rasterpack_volp::VolpFormat.validate(&input, &opts).is_valid(true));
    let reported = reports.load(std::sync::atomic::Ordering::Relaxed) > 0;

    let command = format!("RASTERPACK_PROGRESS_DELAY_MS=0 {EXE} validate {file}");
    let Some(screen) = on_a_terminal(&command) else {
        return skipped("validate progress on a terminal (`script` is not available)");
    };
    assert!(screen.contains("VALID"), "{screen:?}");
    let drawn = bars(&screen);
    assert!(reported, "the VOLP validator reports its progress");
    assert!(
        !drawn.is_empty(),
        "the format reports progress but no bar was drawn: {screen:?}"
    );
    // Labelled with the file, its start cut to "…" when the bar would not fit 80 columns.
    let labelled = |line: &str| {
        let label = line.split(" [").next().unwrap_or_default();
        label == file || label.strip_prefix('…').is_some_and(|tail| file.ends_with(tail))
    };
    assert!(drawn.iter().all(|l| labelled(l)), "{screen:?}");
    // The bar is gone before the report is printed.
    let report_at = screen.find(&format!("{file}: VALID")).unwrap();
    assert!(screen[..report_at].ends_with("\r\x1b[2K"), "{screen:?}");
}

/// `--json` output stays a JSON document on a terminal: the bar is drawn on stderr only.
#[test]
fn json_on_stdout_carries_no_bar() {
    let dir = scratch("json");
    let src = big_npy(&dir);
    let json = dir.join("report.json");
    let command = format!(
        "RASTERPACK_PROGRESS_DELAY_MS=0 {EXE} validate --json {src} > {}; echo \"exit=$?\"",
        json.display()
    );
    let Some(screen) = on_a_terminal(&command) else {
        return skipped("--json on a terminal (`script` is not available)");
    };
    assert!(screen.contains("exit=0"), "{screen:?}");
    let text = std::fs::read_to_string(&json).unwrap();
    assert!(!text.contains('\x1b') && !text.contains('\r'), "{text:?}");
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["files"][0]["exit_code"], 0, "{text}");
}
