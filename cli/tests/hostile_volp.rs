//! The hostile VOLP files of `$RASTERPACK_CORPUS/hostile/` through the real commands (inspect,
//! validate, convert to .npy and to another format), each with its verdict and a bound on the
//! child's peak RSS (256 MiB), measured with `wait4` (the child's own maximum resident set).
//! Skipped, with a message, when `RASTERPACK_CORPUS` is unset.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rasterpack_common::{ArrayFile, ArrayRequest, Region};
use rasterpack_volp::VolpFile;

/// Peak RSS every command must stay under.
const RSS_BOUND_KIB: u64 = 256 * 1024;

/// One command at a time: Linux counts the spawning process's resident set at `exec` into the
/// child's maximum, so children spawned while another test thread works would be overstated.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn hostile(name: &str) -> Option<PathBuf> {
    rasterpack_common::testkit::corpus_dir("hostile").map(|dir| dir.join(name))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rasterpack-hostile-volp-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// What a finished command did.
struct Run {
    code: i32,
    peak_rss_kib: Option<u64>,
    elapsed: Duration,
    stdout: String,
    stderr: String,
}

/// Run `rasterpack ARGS` (output to files, so a chatty child never blocks on a pipe), wait for
/// it and measure its peak RSS.
fn run(dir: &Path, args: &[&str]) -> Run {
    let (out_path, err_path) = (dir.join("stdout.txt"), dir.join("stderr.txt"));
    let t = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_rasterpack"))
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("run rasterpack");
    let (code, peak_rss_kib) = wait_measured(child);
    Run {
        code,
        peak_rss_kib,
        elapsed: t.elapsed(),
        stdout: std::fs::read_to_string(out_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(err_path).unwrap_or_default(),
    }
}

/// Run and check the exit code and the memory bound.
#[track_caller]
fn check(dir: &Path, args: &[&str], want_code: i32) -> Run {
    let r = run(dir, args);
    assert_eq!(
        r.code, want_code,
        "{args:?}: exit {} (stdout {:?}, stderr {:?})",
        r.code, r.stdout, r.stderr
    );
    if let Some(kib) = r.peak_rss_kib {
        assert!(
            kib <= RSS_BOUND_KIB,
            "{args:?}: peak RSS {} MiB is above 256 MiB",
            kib / 1024
        );
    }
    eprintln!(
        "{args:?}: exit {}, {:.2?}, peak RSS {}",
        r.code,
        r.elapsed,
        r.peak_rss_kib
            .map(|k| format!("{:.1} MiB", k as f64 / 1024.0))
            .unwrap_or_else(|| "not measured".into())
    );
    r
}

#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn wait_measured(child: std::process::Child) -> (i32, Option<u64>) {
    // `struct rusage` on 64-bit Linux: two `struct timeval` (two longs each), then 14 longs of
    // which `ru_maxrss` (KiB) is the first.
    #[repr(C)]
    struct Rusage {
        times: [i64; 4],
        maxrss: i64,
        rest: [i64; 13],
    }
    extern "C" {
        fn wait4(pid: i32, status: *mut i32, options: i32, rusage: *mut Rusage) -> i32;
    }
    let pid = child.id() as i32;
    let mut status = 0i32;
    let mut usage = Rusage {
        times: [0; 4],
        maxrss: 0,
        rest: [0; 13],
    };
    // SAFETY: `status` and `usage` are valid for writes and laid out as wait4 expects; the
    // child is ours and not waited for elsewhere.
    let got = unsafe { wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(got, pid, "wait4 failed");
    drop(child);
    let code = if status & 0x7f == 0 {
        (status >> 8) & 0xff
    } else {
        128 + (status & 0x7f)
    };
    (code, Some(usage.maxrss as u64))
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
fn wait_measured(mut child: std::process::Child) -> (i32, Option<u64>) {
    let status = child.wait().expect("wait");
    (status.code().unwrap_or(128), None)
}

fn npy_data_len(path: &Path) -> u64 {
    let mut head = vec![0u8; 128];
    std::io::Read::read_exact(&mut std::fs::File::open(path).unwrap(), &mut head).unwrap();
    let h = rasterpack_common::npy::parse_header(&head).unwrap();
    assert_eq!(std::fs::metadata(path).unwrap().len(), h.data_offset + h.data_len);
    h.data_len
}

/// A valid 8 KB file whose RLE blocks decode to 256 MiB of uint8 (scale 2.0): every command
/// streams; `--physical` (2 GiB of float64) converts to .npy within the bound, and into VOLP is
/// refused before decoding (above VOLP's 256 MiB limit).
#[test]
fn rle_bloat_256_mib_streams_within_the_bound() {
    let Some(src) = hostile("volp_256MiB_u8_rle_physical_bloat.volp") else {
        return;
    };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let src = src.to_str().unwrap();
    let dir = scratch("rle");
    let out = |n: &str| dir.join(n).to_str().unwrap().to_string();

    let r = check(&dir, &["inspect", src], 0);
    assert!(r.stdout.contains("[256, 1024, 1024]"), "{}", r.stdout);
    let r = check(&dir, &["validate", src], 0);
    assert!(r.stdout.contains("VALID"), "{}", r.stdout);

    // Stored values to .npy (256 MiB), then physical float64 (2 GiB).
    check(&dir, &["convert", src, &out("stored.npy")], 0);
    assert_eq!(npy_data_len(Path::new(&out("stored.npy"))), 256 << 20);
    std::fs::remove_file(out("stored.npy")).unwrap();
    // 2 GiB from 8 KB: more than 4096 times the source, refused without --allow-expansion.
    let r = check(&dir, &["convert", "--physical", src, &out("physical.npy")], 2);
    assert!(r.stderr.contains("--allow-expansion"), "{}", r.stderr);
    check(
        &dir,
        &["convert", "--allow-expansion", "--physical", src, &out("physical.npy")],
        0,
    );
    let physical = out("physical.npy");
    assert_eq!(npy_data_len(Path::new(&physical)), 2 << 30);
    // Spot-check the last level against the library's region read (stored * 2.0).
    let file = VolpFile::open(src).unwrap();
    let last = Region::from_start_size(&[255, 1023, 1016], &[1, 1, 8]).unwrap();
    let want = file
        .read(&ArrayRequest::default().with_region(last).with_physical(true))
        .unwrap()
        .data;
    let mut tail = vec![0u8; 64];
    {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = std::fs::File::open(&physical).unwrap();
        f.seek(SeekFrom::End(-64)).unwrap();
        f.read_exact(&mut tail).unwrap();
    }
    assert_eq!(tail, want);
    std::fs::remove_file(&physical).unwrap();

    // Another format: VOLP (streams through zstd), and the physical values refused up front.
    check(&dir, &["convert", src, &out("copy.volp")], 0);
    check(&dir, &["validate", &out("copy.volp")], 0);
    let t = Instant::now();
    // --allow-expansion: past the expansion rule, to VOLP's own 256 MiB body limit.
    let r = check(
        &dir,
        &["convert", "--allow-expansion", "--physical", src, &out("physical.volp")],
        2,
    );
    assert!(r.stderr.contains("volp.limit.body"), "{}", r.stderr);
    assert!(t.elapsed() < Duration::from_secs(5), "refused before decoding");
    assert!(!Path::new(&out("physical.volp")).exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The same file into UDF, whose writer streams: the stored 256 MiB array and the physical
/// 2 GiB (with --allow-expansion) stay within the bound.
#[test]
fn rle_bloat_256_mib_into_udf_streams_within_the_bound() {
    let Some(src) = hostile("volp_256MiB_u8_rle_physical_bloat.volp") else {
        return;
    };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let src = src.to_str().unwrap();
    let dir = scratch("udf");
    let out = dir.join("o.udf");
    check(&dir, &["convert", src, out.to_str().unwrap()], 0);
    check(&dir, &["validate", out.to_str().unwrap()], 0);
    std::fs::remove_file(&out).unwrap();
    check(
        &dir,
        &["convert", "--allow-expansion", "--physical", src, out.to_str().unwrap()],
        0,
    );
    assert!(std::fs::metadata(&out).unwrap().len() > 2 << 30);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A frame whose content-size field says 2^64 - 1 (libzstd's "unknown" sentinel) and its
/// 2^63 twin: both declare more than the header's 8 bytes and are refused alike
/// (`volp.body.size_mismatch`) by every command, without decompressing.
#[test]
fn content_size_fields_are_refused_alike() {
    for name in [
        "volp_zstd_fcs_u64max_accepted.volp",
        "volp_zstd_fcs_2p63_rejected_for_comparison.volp",
    ] {
        let Some(src) = hostile(name) else { return };
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let src = src.to_str().unwrap();
        let dir = scratch(name);
        let out = |n: &str| dir.join(n).to_str().unwrap().to_string();
        // inspect finds it too (its frame walk reads the declared size; exit 1 for an error).
        let r = check(&dir, &["inspect", src], 1);
        assert!(r.stdout.contains("volp.body.size_mismatch"), "{name}: {}", r.stdout);
        let r = check(&dir, &["validate", "--json", src], 1);
        let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        let codes: Vec<&str> = doc["files"][0]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["severity"] == "error")
            .map(|f| f["code"].as_str().unwrap())
            .collect();
        assert_eq!(codes, ["volp.body.size_mismatch"], "{name}");
        for target in ["o.npy", "o.volp"] {
            let r = check(&dir, &["convert", src, &out(target)], 1);
            assert!(r.stderr.contains("volp.body.size_mismatch"), "{name}: {}", r.stderr);
            assert!(!Path::new(&out(target)).exists(), "{name}: no output left");
        }
        let r = check(&dir, &["convert", "--physical", src, &out("p.npy")], 1);
        assert!(r.stderr.contains("volp.body.size_mismatch"), "{name}: {}", r.stderr);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
