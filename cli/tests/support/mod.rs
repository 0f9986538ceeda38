//! Running the `rasterpack` binary as a user would and measuring what it costs: shared by the
//! tests of hostile and oversized inputs (`hostile_*.rs`), which bound every command's peak
//! resident set. Each test file includes it with `mod support;` and uses what it needs.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The memory bound of issue 12: at most 256 MiB of peak RSS for any command on any file.
pub const RSS_LIMIT_KIB: u64 = 256 * 1024;

/// What one finished command did.
pub struct Run {
    /// Exit status and the captured output (GNU time's line included in `stderr`).
    pub out: Output,
    /// Peak resident set of the command in KiB, when it could be measured.
    pub peak_kib: Option<u64>,
    /// Wall time of the command.
    pub elapsed: Duration,
}

impl Run {
    /// The exit code (`None` when a signal ended the command).
    pub fn code(&self) -> Option<i32> {
        self.out.status.code()
    }
    /// Standard output as text.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }
    /// Standard error as text.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
}

pub mod s3;

/// Run rasterpack with `args`, under GNU time (`/usr/bin/time`) when it is there so that the
/// peak RSS is measured.
pub fn run(args: &[&str]) -> Run {
    run_env(args, &[])
}

/// [`run`] with more environment variables.
pub fn run_env(args: &[&str], env: &[(String, String)]) -> Run {
    let start = Instant::now();
    let out = timed()
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("run rasterpack");
    let elapsed = start.elapsed();
    let peak_kib = peak_kib(&out.stderr);
    Run { out, peak_kib, elapsed }
}

/// The rasterpack command, under GNU time when it is there.
pub fn timed() -> Command {
    let bin = env!("CARGO_BIN_EXE_rasterpack");
    if Path::new("/usr/bin/time").exists() {
        let mut c = Command::new("/usr/bin/time");
        c.args(["-f", "RASTERPACK_PEAK_KIB=%M", bin]);
        c
    } else {
        Command::new(bin)
    }
}

/// The peak RSS GNU time put in the last lines of `stderr`.
pub fn peak_kib(stderr: &[u8]) -> Option<u64> {
    String::from_utf8_lossy(stderr)
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("RASTERPACK_PEAK_KIB=").map(str::to_string))
        .and_then(|v| v.trim().parse().ok())
}

/// Run rasterpack with `args` and standard input fed by `feed` from a thread (a pipe, as
/// `producer | rasterpack ... -` gives it), under GNU time like [`run`]. A feeder stopped by a
/// closed pipe (the command needed no more) is fine.
pub fn run_fed(
    args: &[&str],
    feed: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()> + Send + 'static,
) -> Run {
    use std::process::Stdio;
    let start = Instant::now();
    let mut command = timed();
    let mut child = command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run rasterpack");
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let r = feed(&mut stdin);
        assert!(
            r.as_ref().is_ok() || r.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe),
            "feeding standard input: {r:?}"
        );
    });
    let out = child.wait_with_output().expect("wait for rasterpack");
    feeder.join().unwrap();
    let elapsed = start.elapsed();
    let peak_kib = peak_kib(&out.stderr);
    Run { out, peak_kib, elapsed }
}

/// The command exits with `code` and stays within [`RSS_LIMIT_KIB`] (the bound is skipped, with
/// a message, where GNU time is missing).
#[track_caller]
pub fn check(args: &[&str], code: i32) -> Run {
    let r = run(args);
    assert_eq!(
        r.code(),
        Some(code),
        "{args:?}: exit {:?}\nstdout: {}\nstderr: {}",
        r.code(),
        r.stdout().chars().take(2000).collect::<String>(),
        r.stderr()
    );
    check_bound(args, &r);
    r
}

/// Assert the memory bound of a finished command (when it was measured) and report it.
#[track_caller]
pub fn check_bound(args: &[&str], r: &Run) {
    match r.peak_kib {
        Some(kib) => {
            eprintln!(
                "{args:?}: exit {:?}, {:.2?}, peak RSS {} MiB",
                r.code(),
                r.elapsed,
                kib / 1024
            );
            assert!(kib <= RSS_LIMIT_KIB, "{args:?}: peak RSS {} MiB > 256 MiB", kib / 1024);
        }
        // Visible in a passing run (an `eprintln!` is captured and hidden there).
        None => rasterpack_common::testkit::skip(&format!(
            "the 256 MiB bound of {args:?} (peak RSS not measured: no /usr/bin/time)"
        )),
    }
}

/// A fresh scratch folder for one test (`kind` names the test file, `name` the test).
pub fn scratch(kind: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rasterpack-{kind}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A path as the `&str` argument of a command.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}
