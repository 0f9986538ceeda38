//! URLs as inputs (issue 19): a real S3 server (moto, from the test venv) and a static HTTP
//! server with Range support, both on loopback and started here. Every file of `testdata/` and
//! of the public corpus is uploaded and read back through `s3://`; each verdict, report and
//! converted array must equal the local read of the same file.
//!
//! Without `$RASTERPACK_PYTHON` (the venv `.ci/venv.sh` makes, with `moto[server]`) the S3
//! tests skip visibly; under `CI=true` they fail instead of skipping.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use support::s3::{self, Moto};
use support::{check_bound, s, scratch};

/// Every regular file under `dir` but the READMEs, as (key, path).
fn files_under(dir: &Path, prefix: &str) -> Vec<(String, PathBuf)> {
    let mut files = s3::files_under(dir, prefix);
    files.retain(|(_, p)| p.extension().is_none_or(|x| x != "md"));
    files
}

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata")
}

/// A report with the input's name taken out, to compare a local read with a remote one.
fn without_name(text: &str, name: &str) -> String {
    text.replace(name, "<input>")
}

/// The local and the s3:// read of `key` give the same exit code and the same report.
fn same_verdict(moto: &Moto, cmd: &str, key: &str, local: &Path) {
    let url = format!("s3://rasterpack/{key}");
    let a = support::run(&[cmd, "--json", s(local)]);
    let b = moto.run(&[cmd, "--json", &url]);
    assert_eq!(
        a.code(),
        b.code(),
        "{cmd} {key}: local exit {:?}, s3 exit {:?}\n{}",
        a.code(),
        b.code(),
        b.stderr()
    );
    assert_eq!(
        without_name(&a.stdout(), s(local)),
        without_name(&b.stdout(), &url),
        "{cmd} {key}: reports differ"
    );
    // The remote read stays within the memory bound wherever the local read does (a few
    // hostile corpus files exceed it locally too: that is the format crate's to fix, not a
    // cost of reading by ranges).
    match (a.peak_kib, b.peak_kib) {
        (Some(local), Some(remote)) if local > support::RSS_LIMIT_KIB => eprintln!(
            "{cmd} {key}: local peak {} MiB already over the bound; s3 peak {} MiB",
            local / 1024,
            remote / 1024
        ),
        _ => check_bound(&[cmd, &url], &b),
    }
}

#[test]
fn s3_reads_equal_local_reads() {
    let Some(py) = s3::python("moto[server]") else { return };
    let moto = Moto::start(&py, None);
    let mut files = files_under(&testdata(), "testdata/");
    if let Some(corpus) = rasterpack_common::testkit::corpus_dir("") {
        files.extend(files_under(&corpus, "corpus/"));
    }
    moto.upload("rasterpack", &files);
    let dir = scratch("store", "s3_reads_equal_local_reads");
    let mut compared = 0;
    for (key, path) in &files {
        same_verdict(&moto, "validate", key, path);
        // inspect on the repository's own samples; the corpus's hostile files are covered by
        // validate, which reads more of each file (and the run stays within CI's budget).
        if key.starts_with("testdata/") {
            same_verdict(&moto, "inspect", key, path);
        }
        // The whole array, converted from the local file and from the object: same bytes.
        // (testdata/ and the corpus's small files; the big hostile ones are covered by
        // validate, and converting them too would double CI's time for this test.)
        let small = std::fs::metadata(path).map(|m| m.len() < (1 << 20)).unwrap_or(false);
        if !key.starts_with("testdata/") && !small {
            continue;
        }
        let a_out = dir.join("a.npy");
        let b_out = dir.join("b.npy");
        let url = format!("s3://rasterpack/{key}");
        let a = support::run(&["convert", "--force", s(path), s(&a_out)]);
        let b = moto.run(&["convert", "--force", &url, s(&b_out)]);
        assert_eq!(a.code(), b.code(), "convert {key}: {}", b.stderr());
        if a.code() == Some(0) {
            assert_eq!(
                std::fs::read(&a_out).unwrap(),
                std::fs::read(&b_out).unwrap(),
                "convert {key}"
            );
            compared += 1;
        }
    }
    assert!(compared > 10, "only {compared} conversions compared");
    eprintln!(
        "{} objects read from s3:// equal to local reads ({compared} arrays)",
        files.len()
    );
}

#[test]
fn s3_prefix_validates_every_object() {
    let Some(py) = s3::python("moto[server]") else { return };
    let moto = Moto::start(&py, None);
    let files = files_under(&testdata().join("volp"), "volp/");
    moto.upload("rasterpack", &files);
    let r = moto.run(&["validate", "--json", "s3://rasterpack/volp/"]);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout()).expect("one JSON document");
    let listed = doc["files"].as_array().expect("files").len();
    assert_eq!(listed, files.len(), "{}", r.stdout());
    let local: Vec<&str> = files.iter().map(|(_, p)| s(p)).collect();
    let mut args = vec!["validate", "--json"];
    args.extend(local);
    assert_eq!(
        support::run(&args).code(),
        r.code(),
        "prefix verdict differs from the local one"
    );
}

#[test]
fn s3_missing_object_is_exit_2_naming_url_and_status() {
    let Some(py) = s3::python("moto[server]") else { return };
    let moto = Moto::start(&py, None);
    moto.upload("rasterpack", &[]);
    let r = moto.run(&["validate", "s3://rasterpack/no/such.volp"]);
    assert_eq!(r.code(), Some(2), "{}", r.stderr());
    let err = r.stderr();
    assert!(err.contains("s3://rasterpack/no/such.volp"), "{err}");
    assert!(
        err.contains("404") || err.contains("not found") || err.contains("NotFound"),
        "{err}"
    );
    let r = moto.run(&[
        "validate",
        "--storage-option",
        "nonsense_key=1",
        "s3://rasterpack/x.volp",
    ]);
    assert_eq!(r.code(), Some(2), "{}", r.stderr());
}

/// A static HTTP/1.1 server with Range support (HEAD, GET, `bytes=A-B`), one thread per
/// connection, serving `root`. Python's http.server has no Range support.
///
/// With `faults`, a share of the requests fail as a flaky store fails: 503 SlowDown, 500, a
/// delay, or a body cut off after half its bytes (the connection then closes).
fn http_server(root: PathBuf, faults: bool) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let counter = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let root = root.clone();
            let counter = counter.clone();
            std::thread::spawn(move || {
                let _ = serve(conn, &root, faults.then_some(&*counter));
            });
        }
    });
    port
}

fn serve(conn: TcpStream, root: &Path, faults: Option<&std::sync::atomic::AtomicU64>) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut out = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("/").to_string();
        let mut range = None;
        loop {
            let mut h = String::new();
            reader.read_line(&mut h)?;
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("range") {
                    range = v.trim().strip_prefix("bytes=").map(str::to_string);
                }
            }
        }
        let path = root.join(target.trim_start_matches('/'));
        let Ok(data) = std::fs::read(&path) else {
            out.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")?;
            continue;
        };
        let len = data.len() as u64;
        let common = "ETag: \"v1\"\r\nLast-Modified: Thu, 26 Nov 2026 00:00:00 GMT\r\nAccept-Ranges: bytes\r\n";
        let (status, body, extra) = match range.and_then(|r| {
            let (a, b) = r.split_once('-')?;
            let a: u64 = a.parse().ok()?;
            let b: u64 = if b.is_empty() { len - 1 } else { b.parse().ok()? };
            Some((a, b.min(len - 1)))
        }) {
            Some((a, b)) if a <= b && b < len => (
                "206 Partial Content",
                &data[a as usize..=b as usize],
                format!("Content-Range: bytes {a}-{b}/{len}\r\n"),
            ),
            _ => ("200 OK", &data[..], String::new()),
        };
        let n = faults.map(|c| c.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        match n.map(|n| n % 7) {
            Some(1) => {
                let slow = "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";
                let head = format!("HTTP/1.1 503 Slow Down\r\nContent-Length: {}\r\n\r\n{slow}", slow.len());
                out.write_all(head.as_bytes())?;
                continue;
            }
            Some(3) => {
                out.write_all(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")?;
                continue;
            }
            Some(4) => std::thread::sleep(Duration::from_millis(300)),
            Some(5) if method != "HEAD" && body.len() > 1 => {
                // Cut off: the full length announced, half the bytes sent, then closed.
                let head = format!(
                    "HTTP/1.1 {status}\r\n{common}{extra}Content-Length: {}\r\n\r\n",
                    body.len()
                );
                out.write_all(head.as_bytes())?;
                out.write_all(&body[..body.len() / 2])?;
                return out.flush();
            }
            _ => {}
        }
        let head = format!(
            "HTTP/1.1 {status}\r\n{common}{extra}Content-Length: {}\r\n\r\n",
            body.len()
        );
        out.write_all(head.as_bytes())?;
        if method != "HEAD" {
            out.write_all(body)?;
        }
        out.flush()?;
    }
}

#[test]
fn http_range_reads_equal_local_reads() {
    let root = testdata();
    let port = http_server(root.clone(), false);
    let dir = scratch("store", "http_range_reads_equal_local_reads");
    let mut compared = 0;
    for sub in ["volp", "gvrs", "fold", "udf", "vds"] {
        for (key, path) in files_under(&root.join(sub), &format!("{sub}/")) {
            let url = format!("http://127.0.0.1:{port}/{key}");
            let a = support::run(&["validate", "--json", s(&path)]);
            let b = support::run(&["validate", "--json", "--storage-option", "allow_http=true", &url]);
            assert_eq!(a.code(), b.code(), "validate {url}: {}", b.stderr());
            assert_eq!(without_name(&a.stdout(), s(&path)), without_name(&b.stdout(), &url));
            let a_out = dir.join("a.npy");
            let b_out = dir.join("b.npy");
            let a = support::run(&["convert", "--force", s(&path), s(&a_out)]);
            let b = support::run(&[
                "convert",
                "--force",
                "--storage-option",
                "allow_http=true",
                &url,
                s(&b_out),
            ]);
            assert_eq!(a.code(), b.code(), "convert {url}: {}", b.stderr());
            if a.code() == Some(0) {
                assert_eq!(std::fs::read(&a_out).unwrap(), std::fs::read(&b_out).unwrap(), "{url}");
                compared += 1;
            }
        }
    }
    assert!(compared > 5, "only {compared} conversions compared");
}

/// A flaky server (503 SlowDown, 500, delays, cut-off bodies for 4 requests in 7): every read
/// equals the local read (retries with backoff) or fails with exit 2, never another verdict.
#[test]
fn faulty_server_reads_equal_local_reads_or_exit_2() {
    let root = testdata();
    let port = http_server(root.clone(), true);
    let dir = scratch("store", "faulty_server");
    let (mut equal, mut failed) = (0, 0);
    for sub in ["volp", "gvrs", "fold", "udf"] {
        for (key, path) in files_under(&root.join(sub), &format!("{sub}/")) {
            let url = format!("http://127.0.0.1:{port}/{key}");
            let a_out = dir.join("a.npy");
            let b_out = dir.join("b.npy");
            let a = support::run(&["convert", "--force", s(&path), s(&a_out)]);
            let b = support::run(&[
                "convert",
                "--force",
                "--storage-option",
                "allow_http=true",
                &url,
                s(&b_out),
            ]);
            if b.code() == Some(2) && a.code() != Some(2) {
                assert!(
                    b.stderr().contains(&url),
                    "{url}: exit 2 without naming the URL: {}",
                    b.stderr()
                );
                failed += 1;
                continue;
            }
            assert_eq!(a.code(), b.code(), "convert {url}: {}", b.stderr());
            if a.code() == Some(0) {
                assert_eq!(std::fs::read(&a_out).unwrap(), std::fs::read(&b_out).unwrap(), "{url}");
            }
            equal += 1;
        }
    }
    eprintln!("faulty server: {equal} reads equal to the local read, {failed} exit 2");
    assert!(equal > 0, "no read got through the retries");
}

/// A `.npy` of `shape` float32 values that do not compress to nothing (so its VOLP has many
/// zstd blocks and a decoder writes most of the values before it reaches the end).
fn write_npy_f32(path: &Path, shape: &[usize]) {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}",
        dims.join(", ")
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    let n: usize = shape.iter().product();
    for i in 0..n {
        out.extend_from_slice(&(((i as f32) * 1.37).sin() * 1000.0).to_le_bytes());
    }
    std::fs::write(path, out).unwrap();
}

/// `convert IN s3://...` for every target format: the object holds the values the local
/// convert wrote (read back through both files to .npy), an existing object is exit 2 and
/// unchanged unless --force, which replaces it.
#[test]
fn s3_convert_output_equals_local_convert() {
    let Some(py) = s3::python("moto[server]") else { return };
    let moto = Moto::start(&py, None);
    moto.upload("out", &[]);
    let dir = scratch("store", "s3_convert_output");
    let src = dir.join("src.npy");
    write_npy_f32(&src, &[3, 40, 50]);
    for target in ["npy", "volp", "udf", "gvrs", "fold"] {
        let local = dir.join(format!("local.{target}"));
        let url = format!("s3://out/cube.{target}");
        // GVRS holds 2-D grids: one of the samples' elements.
        let source = match target {
            "gvrs" => testdata().join("gvrs/crafted_compressed.gvrs"),
            _ => src.clone(),
        };
        let element: &[&str] = if target == "gvrs" { &["--element", "v"] } else { &[] };
        let mut a_args = vec!["convert", "--force"];
        a_args.extend(element);
        a_args.extend([s(&source), s(&local)]);
        let a = support::run(&a_args);
        assert_eq!(a.code(), Some(0), "local convert to {target}: {}", a.stderr());
        let mut b_args = vec!["convert"];
        b_args.extend(element);
        b_args.extend([s(&source), url.as_str()]);
        let b = moto.run(&b_args);
        assert_eq!(b.code(), Some(0), "convert to {url}: {}", b.stderr());
        check_bound(&b_args, &b);
        // The values, read back from the local file and from the object.
        let a_npy = dir.join("a.npy");
        let b_npy = dir.join("b.npy");
        support::check(&["convert", "--force", s(&local), s(&a_npy)], 0);
        let back = moto.run(&["convert", "--force", &url, s(&b_npy)]);
        assert_eq!(back.code(), Some(0), "{}", back.stderr());
        assert_eq!(std::fs::read(&a_npy).unwrap(), std::fs::read(&b_npy).unwrap(), "{url}");
        if matches!(target, "npy" | "volp") {
            // Written as the values come, with nothing that varies per run: the object is the
            // local file, byte for byte.
            assert_eq!(
                moto.download("out", &format!("cube.{target}"), &dir.join("got")),
                std::fs::read(&local).unwrap()
            );
        }
        // Without --force an existing object is exit 2 and left as it was.
        let before = moto.download("out", &format!("cube.{target}"), &dir.join("before"));
        let again = moto.run(&b_args);
        assert_eq!(again.code(), Some(2), "{}", again.stderr());
        assert!(again.stderr().contains("--force"), "{}", again.stderr());
        assert_eq!(
            moto.download("out", &format!("cube.{target}"), &dir.join("after")),
            before
        );
    }
    // --force replaces the object.
    let other = dir.join("other.npy");
    write_npy_f32(&other, &[2, 3]);
    let r = moto.run(&["convert", "--force", s(&other), "s3://out/cube.npy"]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    support::check(&["convert", "--force", s(&other), s(&dir.join("other2.npy"))], 0);
    assert_eq!(
        moto.download("out", "cube.npy", &dir.join("got.npy")),
        std::fs::read(dir.join("other2.npy")).unwrap()
    );
    let (objects, uploads) = moto.objects_and_uploads("out");
    assert_eq!(objects.len(), 5, "{objects:?}");
    assert!(uploads.is_empty(), "multipart uploads left open: {uploads:?}");
}

/// A conversion that fails after parts are uploaded (a VOLP whose zstd checksum is wrong,
/// found only at the end of the body) leaves no object and no open upload; with --force the
/// object already there stays as it was.
#[test]
fn s3_convert_failing_midway_leaves_nothing() {
    let Some(py) = s3::python("moto[server]") else { return };
    let moto = Moto::start(&py, None);
    moto.upload("out", &[]);
    let dir = scratch("store", "s3_convert_failing_midway");
    let src = dir.join("big.npy");
    write_npy_f32(&src, &[3, 3000, 1000]);
    let volp = dir.join("bad.volp");
    support::check(&["convert", "--force", s(&src), s(&volp)], 0);
    let mut bytes = std::fs::read(&volp).unwrap();
    let n = bytes.len();
    bytes[n - 2] ^= 0xff;
    std::fs::write(&volp, &bytes).unwrap();
    // Locally the same conversion writes most of the 36 MB before it fails: more than the
    // 5 MiB parts asked for below, so parts are in the store when the failure comes.
    let local = support::run(&["convert", "--force", s(&volp), s(&dir.join("bad.npy"))]);
    assert_eq!(local.code(), Some(1), "{}", local.stderr());
    let args = [
        "convert",
        "--storage-option",
        "upload_part_mib=5",
        s(&volp),
        "s3://out/bad.npy",
    ];
    let r = moto.run_env(&args, &[("RASTERPACK_STORE_LOG", "1")]);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    assert!(r.stderr().contains("volp.body.decompress"), "{}", r.stderr());
    // The request log shows parts uploading before the failure: it came midway.
    let parts = r
        .stderr()
        .matches("rasterpack-store: upload s3://out/bad.npy part ")
        .count();
    assert!(parts >= 2, "{parts} parts started before the failure:\n{}", r.stderr());
    check_bound(&args, &r);
    let (objects, uploads) = moto.objects_and_uploads("out");
    assert!(objects.is_empty(), "a failed conversion left {objects:?}");
    assert!(uploads.is_empty(), "multipart uploads left open: {uploads:?}");
    // With --force over an existing object: the failure leaves the old object whole.
    let small = dir.join("small.npy");
    write_npy_f32(&small, &[4, 5]);
    let put = moto.run(&["convert", s(&small), "s3://out/bad.npy"]);
    assert_eq!(put.code(), Some(0), "{}", put.stderr());
    let before = moto.download("out", "bad.npy", &dir.join("before.npy"));
    let r = moto.run(&[
        "convert",
        "--force",
        "--storage-option",
        "upload_part_mib=5",
        s(&volp),
        "s3://out/bad.npy",
    ]);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    assert_eq!(moto.download("out", "bad.npy", &dir.join("kept.npy")), before);
    // What was kept is the small array, read back equal to the local file's.
    support::check(&["convert", "--force", s(&small), s(&dir.join("small2.npy"))], 0);
    assert_eq!(before, std::fs::read(dir.join("small2.npy")).unwrap());
    let (_, uploads) = moto.objects_and_uploads("out");
    assert!(uploads.is_empty(), "multipart uploads left open: {uploads:?}");
}

/// `validate s3://bucket/prefix/` checks the listed objects several at a time (`--jobs`) and
/// reports them in listing order: the same document and text with 1, 4 or the default number
/// of jobs, each report equal to the local file's, and a totals line.
#[test]
fn s3_prefix_validate_is_concurrent_and_in_listing_order() {
    let Some(py) = s3::python("moto[server]") else { return };
    let moto = Moto::start(&py, None);
    let mut files = Vec::new();
    for sub in ["volp", "gvrs", "fold", "udf"] {
        files.extend(files_under(&testdata().join(sub), &format!("mix/{sub}/")));
    }
    // Listing order is key order.
    files.sort();
    moto.upload("rasterpack", &files);
    let url = "s3://rasterpack/mix/";
    let one = moto.run(&["validate", "--json", "--jobs", "1", url]);
    let four = moto.run(&["validate", "--json", "--jobs", "4", url]);
    let default = moto.run(&["validate", "--json", url]);
    assert_eq!(one.stdout(), four.stdout());
    assert_eq!(one.stdout(), default.stdout());
    assert_eq!(one.code(), four.code());
    // Each report equals the local one, the name aside.
    let doc: serde_json::Value = serde_json::from_str(&four.stdout()).expect("one JSON document");
    let reported = doc["files"].as_array().expect("files");
    assert_eq!(reported.len(), files.len());
    let mut local_args = vec!["validate", "--json"];
    local_args.extend(files.iter().map(|(_, p)| s(p)));
    let local: serde_json::Value = serde_json::from_str(&support::run(&local_args).stdout()).unwrap();
    for (i, (key, _)) in files.iter().enumerate() {
        let mut got = reported[i].clone();
        let mut want = local["files"][i].clone();
        assert_eq!(got["path"], format!("s3://rasterpack/{key}"), "report {i} out of order");
        got["path"] = serde_json::Value::Null;
        want["path"] = serde_json::Value::Null;
        assert_eq!(got, want, "{key}");
    }
    assert_eq!(doc["totals"], local["totals"]);
    // The text report ends with the totals line.
    let text = moto.run(&["validate", "-j", "3", url]);
    let last = text.stdout().lines().last().unwrap_or("").to_string();
    assert!(last.starts_with(&format!("{} files: ", files.len())), "{last}");
    assert_eq!(
        moto.run(&["validate", "--jobs", "0", url]).code(),
        Some(2),
        "--jobs 0 is a usage error"
    );
}

/// SIGTERM or SIGINT during a convert to a URL aborts its multipart upload: the process ends by
/// the signal, and the bucket holds neither the object nor an open upload (a process ended
/// without unwinding never runs the upload's own abort). SIGKILL cannot be caught: docs/cli.md
/// gives the lifecycle rule that cleans up after it.
#[cfg(unix)]
#[test]
fn s3_convert_interrupted_by_a_signal_leaves_nothing() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};

    let Some(py) = s3::python("moto[server]") else { return };
    let moto = Moto::start(&py, None);
    moto.create_bucket("out");
    let dir = scratch("store", "s3_convert_interrupted");
    let src = dir.join("big.npy");
    // 64 MB: 13 parts of 5 MiB, uploaded 4 at a time, so the signal comes mid-upload.
    write_npy_f32(&src, &[16, 1000, 1000]);
    for (signal, number) in [("TERM", 15), ("INT", 2)] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rasterpack"))
            .args([
                "convert",
                "--storage-option",
                "upload_part_mib=5",
                s(&src),
                "s3://out/big.npy",
            ])
            .envs(moto.env())
            .env("RASTERPACK_STORE_LOG", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run rasterpack");
        // Wait until the first part is on its way.
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut seen = String::new();
        loop {
            let mut line = String::new();
            if err.read_line(&mut line).unwrap() == 0 || line.contains("part 1 started") {
                seen.push_str(&line);
                break;
            }
            seen.push_str(&line);
        }
        assert!(seen.contains("part 1 started"), "no part started: {seen}");
        let killed = Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        err.read_to_string(&mut seen).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(number), "SIG{signal}: {status:?}\n{seen}");
        let (objects, uploads) = moto.objects_and_uploads("out");
        assert!(objects.is_empty(), "SIG{signal} left {objects:?}\n{seen}");
        assert!(
            uploads.is_empty(),
            "SIG{signal} left multipart uploads open: {uploads:?}\n{seen}"
        );
    }
}

/// `convert IN s3://bucket/x.npz` (every array of the input in one archive, issue 22): the
/// object validates and reads back to the local `.npz` output's arrays, each equal; a
/// conversion that fails after parts went up (a VOLP whose zstd checksum is wrong at the end of
/// its body) leaves no object and no open upload.
#[test]
fn s3_convert_to_npz_equals_local_and_a_failure_leaves_no_object() {
    let Some(py) = s3::python("moto[server]") else { return };
    let moto = Moto::start(&py, None);
    moto.upload("out", &[]);
    let dir = scratch("store", "s3_convert_npz");
    let src = testdata().join("gvrs/crafted_all_types.gvrs");
    let local = dir.join("local.npz");
    support::check(&["convert", "--force", s(&src), s(&local)], 0);
    let args = ["convert", s(&src), "s3://out/all.npz"];
    let r = moto.run(&args);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    check_bound(&args, &r);
    // Not byte for byte: an upload is a stream, so its members carry data descriptors where
    // the local file's headers hold the CRCs. The object validates as an archive of its own.
    moto.download("out", "all.npz", &dir.join("got.npz"));
    support::check(&["validate", s(&dir.join("got.npz"))], 0);
    // Every array of the archive, read back through the URL, equals the local archive's.
    let listed = support::check(&["stats", "--json", s(&local)], 0);
    let doc: serde_json::Value = serde_json::from_str(&listed.stdout()).unwrap();
    let names: Vec<String> = doc["files"][0]["stats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.len() >= 2, "{names:?}");
    for name in &names {
        let (a, b) = (dir.join("a.npy"), dir.join("b.npy"));
        support::check(&["convert", "--force", "--element", name, s(&local), s(&a)], 0);
        let back = moto.run(&["convert", "--force", "--element", name, "s3://out/all.npz", s(&b)]);
        assert_eq!(back.code(), Some(0), "{name}: {}", back.stderr());
        assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap(), "{name}");
    }
    // A failure midway: 36 MB of values, 5 MiB parts, the error at the end of the body.
    let big = dir.join("big.npy");
    write_npy_f32(&big, &[3, 3000, 1000]);
    let volp = dir.join("bad.volp");
    support::check(&["convert", "--force", s(&big), s(&volp)], 0);
    let mut bytes = std::fs::read(&volp).unwrap();
    let n = bytes.len();
    bytes[n - 2] ^= 0xff;
    std::fs::write(&volp, &bytes).unwrap();
    let args = [
        "convert",
        "--storage-option",
        "upload_part_mib=5",
        s(&volp),
        "s3://out/bad.npz",
    ];
    let r = moto.run_env(&args, &[("RASTERPACK_STORE_LOG", "1")]);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    assert!(r.stderr().contains("volp.body.decompress"), "{}", r.stderr());
    check_bound(&args, &r);
    let (objects, uploads) = moto.objects_and_uploads("out");
    assert_eq!(objects, ["all.npz"], "a failed conversion left an object");
    assert!(uploads.is_empty(), "multipart uploads left open: {uploads:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
