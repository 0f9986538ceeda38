//! Command-line faults on Unix (the end of `corpus/hostile/README.md`): signals and file-size
//! limits during `convert` leave no temporary file; `--force` writes into devices and FIFOs and
//! through symlinks instead of replacing them; FIFOs and character devices are read as streams.
#![cfg(unix)]

use std::io::{Read, Write};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rasterpack"));
    c.env("NO_COLOR", "1");
    c
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rasterpack-faults-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A .npy of `values` float32 values from a small PRNG: they do not compress, so zstd at a
/// high level takes seconds over a few MiB.
fn noisy_npy(path: &Path, shape: &[u64]) -> Vec<u8> {
    let n: u64 = shape.iter().product();
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let data: Vec<u8> = (0..n)
        .flat_map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / 16_777_216.0).to_le_bytes()
        })
        .collect();
    let arr = rasterpack_common::NdArray::new(rasterpack_common::DType::F32, shape.to_vec(), data).unwrap();
    let mut buf = Vec::new();
    rasterpack_common::npy::write(&mut buf, &arr).unwrap();
    std::fs::write(path, &buf).unwrap();
    buf
}

fn testdata(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("testdata")
        .join(rel)
}

/// Files in `dir` whose name marks them as rasterpack's temporary output.
fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".rasterpack-") && n.ends_with(".tmp"))
        .collect()
}

/// Wait for `child`, killing it (and failing) after `limit`.
fn wait_within(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn output_within(mut child: Child, limit: Duration, what: &str) -> Output {
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(s) = stdout.as_mut() {
            let _ = s.read_to_end(&mut buf);
        }
        buf
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(s) = stderr.as_mut() {
            let _ = s.read_to_end(&mut buf);
        }
        buf
    });
    let status = wait_within(&mut child, limit, what);
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo").arg(path).status().unwrap().success();
    assert!(ok, "mkfifo {}", path.display());
}

#[test]
fn terminating_signals_remove_the_temporary_file() {
    let dir = scratch("signals");
    let src = dir.join("big.npy");
    // 16 MiB of noise at zstd level 19: several seconds of work, ended early by the signal.
    noisy_npy(&src, &[4, 1024, 1024]);
    for (name, signo) in [("INT", 2), ("TERM", 15), ("HUP", 1)] {
        let out = dir.join(format!("out-{name}.volp"));
        let mut child = bin()
            .args(["convert", s(&src), s(&out), "--compress", "zstd:19"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // The temporary file exists from before the input is read until the rename.
        let start = Instant::now();
        while temp_files(&dir).is_empty() {
            assert!(
                child.try_wait().unwrap().is_none(),
                "SIG{name}: convert ended before its temporary file was seen"
            );
            assert!(start.elapsed() < Duration::from_secs(30), "no temporary file appeared");
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(100));
        let sent = Command::new("kill")
            .args([format!("-{name}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let status = wait_within(&mut child, Duration::from_secs(30), "signalled convert");
        assert_eq!(
            status.signal(),
            Some(signo),
            "SIG{name}: the process ends by the signal it got (status {status:?})"
        );
        assert_eq!(
            temp_files(&dir),
            Vec::<String>::new(),
            "SIG{name} left a temporary file"
        );
        assert!(!out.exists(), "SIG{name}: no partial output");
    }
}

#[test]
fn a_file_size_limit_is_an_io_error_and_leaves_nothing() {
    let dir = scratch("fsize");
    let src = dir.join("src.npy");
    noisy_npy(&src, &[256, 1024]); // 1 MiB
    let out = dir.join("out.npy");
    // `ulimit -f` counts blocks of 512 or 1024 bytes: either way far below 1 MiB.
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -f 64 && exec '{}' convert '{}' '{}'",
            env!("CARGO_BIN_EXE_rasterpack"),
            s(&src),
            s(&out)
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(2),
        "EFBIG is an I/O error, not a SIGXFSZ death: {err}"
    );
    assert!(err.contains("too large"), "the OS error is named: {err}");
    assert!(!out.exists());
    assert_eq!(temp_files(&dir), Vec::<String>::new());
}

#[test]
fn force_writes_into_fifos_and_devices_instead_of_replacing_them() {
    let dir = scratch("devices");
    let src = dir.join("src.npy");
    let expected = noisy_npy(&src, &[8, 8]);

    // A FIFO: the data comes out of it, and it stays a FIFO.
    let fifo = dir.join("out.fifo");
    mkfifo(&fifo);
    let o = bin()
        .args(["convert", s(&src), s(&fifo), "--to", "npy"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "an existing FIFO needs --force");
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let child = bin()
        .args(["convert", s(&src), s(&fifo), "--force", "--to", "npy"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = output_within(child, Duration::from_secs(30), "convert into a FIFO");
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(reader.join().unwrap(), expected);
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());

    // A character device (a private copy of /dev/null, so a regression cannot replace the
    // machine's own): written to, and still a device afterwards.
    let null = dir.join("null");
    if Command::new("mknod")
        .arg(&null)
        .args(["c", "1", "3"])
        .status()
        .is_ok_and(|s| s.success())
    {
        let o = bin()
            .args(["convert", s(&src), s(&null), "--force", "--to", "npy"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(std::fs::symlink_metadata(&null).unwrap().file_type().is_char_device());
    } else {
        let _ = writeln!(std::io::stderr(), "skipped: the device half (mknod not permitted here)");
    }
    assert_eq!(temp_files(&dir), Vec::<String>::new());
}

#[test]
fn force_through_a_symlink_replaces_the_target_and_keeps_the_link() {
    let dir = scratch("symlink");
    let src = dir.join("src.npy");
    let expected = noisy_npy(&src, &[4, 4]);
    let elsewhere = dir.join("data");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let target = elsewhere.join("real.npy");
    std::fs::write(&target, b"old content").unwrap();
    let link = dir.join("link.npy");
    std::os::unix::fs::symlink("data/real.npy", &link).unwrap();

    let o = bin().args(["convert", s(&src), s(&link)]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "an existing link needs --force");
    assert_eq!(std::fs::read(&target).unwrap(), b"old content");

    let o = bin().args(["convert", s(&src), s(&link), "--force"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(),
        "the link stays"
    );
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("data/real.npy"));
    assert_eq!(
        std::fs::read(&target).unwrap(),
        expected,
        "written where the link points"
    );
    assert_eq!(temp_files(&dir), Vec::<String>::new());
    assert_eq!(temp_files(&elsewhere), Vec::<String>::new());

    // A dangling link: --force creates the file it names.
    let dangling = dir.join("dangling.npy");
    std::os::unix::fs::symlink("data/new.npy", &dangling).unwrap();
    let o = bin()
        .args(["convert", s(&src), s(&dangling), "--force"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::symlink_metadata(&dangling).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read(elsewhere.join("new.npy")).unwrap(), expected);
}

#[test]
fn a_fifo_is_read_like_standard_input() {
    let dir = scratch("fifo-in");
    let volp = testdata("volp/temperature_4x32x32_int16.volp");
    let bytes = std::fs::read(&volp).unwrap();
    let fifo = dir.join("in.fifo");
    mkfifo(&fifo);

    for args in [vec!["validate"], vec!["inspect", "--json"]] {
        let writer = {
            let (fifo, bytes) = (fifo.clone(), bytes.clone());
            std::thread::spawn(move || std::fs::write(fifo, bytes).unwrap())
        };
        let child = bin().args(&args).arg(&fifo).stdout(Stdio::piped()).spawn().unwrap();
        let o = output_within(child, Duration::from_secs(30), "validate a FIFO");
        writer.join().unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {text}");
        assert!(text.contains("volp"), "{args:?}: detected as VOLP: {text}");
    }

    // The same bytes through a FIFO convert like the file itself.
    let writer = {
        let (fifo, bytes) = (fifo.clone(), bytes.clone());
        std::thread::spawn(move || std::fs::write(fifo, bytes).unwrap())
    };
    let (from_fifo, from_file) = (dir.join("fifo.npy"), dir.join("file.npy"));
    let o = bin().args(["convert", s(&fifo), s(&from_fifo)]).output().unwrap();
    writer.join().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let o = bin().args(["convert", s(&volp), s(&from_file)]).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(std::fs::read(from_fifo).unwrap(), std::fs::read(from_file).unwrap());
}

#[test]
fn endless_devices_are_refused_quickly() {
    for dev in ["/dev/zero", "/dev/urandom"] {
        if !Path::new(dev).exists() {
            continue;
        }
        let child = bin().args(["validate", dev]).stdout(Stdio::piped()).spawn().unwrap();
        let o = output_within(child, Duration::from_secs(20), dev);
        let text = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(1), "{dev}: {text}");
        assert!(text.contains("format.unknown"), "{dev}: {text}");
        assert!(!text.contains("empty input"), "{dev} is not empty: {text}");
    }
}

#[test]
fn an_endless_stream_of_a_known_format_stops_at_the_limit() {
    let dir = scratch("endless");
    let fifo = dir.join("endless.fifo");
    mkfifo(&fifo);
    // A .npy header, then zeros for ever (until the reader goes away).
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
            let mut head = b"\x93NUMPY\x01\x00".to_vec();
            head.resize(64, b' ');
            let zeros = vec![0u8; 1 << 20];
            if f.write_all(&head).is_ok() {
                while f.write_all(&zeros).is_ok() {}
            }
        })
    };
    let child = bin()
        .args(["validate", s(&fifo)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = output_within(child, Duration::from_secs(120), "an endless FIFO");
    writer.join().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("past 1073741824 bytes"), "the limit is named: {err}");
}

/// Every reference-written VOLP, UDF and FOLD file of the corpus gets the same verdict and the
/// same finding codes when it arrives through a FIFO as when it is read from disk.
#[test]
fn corpus_files_through_a_fifo_get_the_files_verdicts() {
    let dir = scratch("corpus-fifo");
    let mut checked = 0;
    for format in ["volp", "udf", "fold"] {
        let Some(corpus) = rasterpack_common::testkit::corpus_dir(format) else {
            return;
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(&corpus)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == format))
            .collect();
        files.sort();
        for file in files {
            let verdict = |o: &Output| {
                let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
                let f = &doc["files"][0];
                let codes: Vec<String> = f["findings"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x["code"].as_str().unwrap().to_string())
                    .collect();
                (o.status.code(), f["format"].clone(), codes)
            };
            let from_disk = verdict(&bin().args(["validate", "--json", s(&file)]).output().unwrap());
            let fifo = dir.join(format!("{checked}.fifo"));
            mkfifo(&fifo);
            let writer = {
                let (fifo, file) = (fifo.clone(), file.clone());
                // The reader may stop early (an unknown format): a broken pipe is fine.
                std::thread::spawn(move || {
                    let bytes = std::fs::read(file).unwrap();
                    let _ = std::fs::OpenOptions::new()
                        .write(true)
                        .open(fifo)
                        .and_then(|mut f| f.write_all(&bytes));
                })
            };
            let child = bin()
                .args(["validate", "--json", s(&fifo)])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let from_fifo = verdict(&output_within(child, Duration::from_secs(60), s(&file)));
            writer.join().unwrap();
            assert_eq!(from_fifo, from_disk, "{}", file.display());
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} corpus files checked");
}
