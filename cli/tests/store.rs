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
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{check_bound, s, scratch, Run};

/// The venv's python, or a visible skip (a failure under CI).
fn python() -> Option<String> {
    match std::env::var("RASTERPACK_PYTHON") {
        Ok(p) if !p.is_empty() => Some(p),
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true but RASTERPACK_PYTHON is not set: .ci/run sources .ci/venv.sh"
            );
            rasterpack_common::testkit::skip("needs RASTERPACK_PYTHON (a venv with moto[server])");
            None
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A moto S3 server on loopback, killed on drop.
struct Moto {
    child: Child,
    port: u16,
    python: String,
}

impl Moto {
    fn start(python: &str) -> Moto {
        let port = free_port();
        let child = Command::new(python)
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto.server");
        let moto = Moto {
            child,
            port,
            python: python.to_string(),
        };
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "moto.server did not start on {port}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        moto
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Make `bucket` and upload `files` as `(key, local path)` with boto3 (moto's dependency).
    fn upload(&self, bucket: &str, files: &[(String, PathBuf)]) {
        let list: String = files.iter().map(|(k, p)| format!("{k}\t{}\n", p.display())).collect();
        let script = r#"
import sys, boto3
s3 = boto3.client('s3', endpoint_url=sys.argv[1], region_name='us-east-1',
                  aws_access_key_id='testing', aws_secret_access_key='testing')
s3.create_bucket(Bucket=sys.argv[2])
for line in sys.stdin.read().splitlines():
    key, path = line.split('\t', 1)
    s3.upload_file(path, sys.argv[2], key)
"#;
        let mut child = Command::new(&self.python)
            .args(["-c", script, &self.endpoint(), bucket])
            .stdin(Stdio::piped())
            .spawn()
            .expect("run the upload script");
        child.stdin.take().unwrap().write_all(list.as_bytes()).unwrap();
        assert!(child.wait().unwrap().success(), "upload to moto failed");
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run rasterpack against the loopback S3 server (credentials and endpoint from the usual
/// environment, as a user would set them), under GNU time when it is there.
fn run_s3(moto: &Moto, args: &[&str]) -> Run {
    run_s3_env(moto, args, &[])
}

/// [`run_s3`] with more environment variables.
fn run_s3_env(moto: &Moto, args: &[&str], env: &[(&str, &str)]) -> Run {
    let bin = env!("CARGO_BIN_EXE_rasterpack");
    let start = Instant::now();
    let time = Path::new("/usr/bin/time");
    let mut cmd = if time.exists() {
        let mut c = Command::new(time);
        c.args(["-f", "RASTERPACK_PEAK_KIB=%M", bin]);
        c
    } else {
        Command::new(bin)
    };
    let out = cmd
        .args(args)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ENDPOINT_URL", moto.endpoint())
        .env("AWS_ALLOW_HTTP", "true")
        .envs(env.iter().copied())
        .output()
        .expect("run rasterpack");
    let peak_kib = String::from_utf8_lossy(&out.stderr)
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("RASTERPACK_PEAK_KIB=").map(str::to_string))
        .and_then(|v| v.trim().parse().ok());
    Run {
        out,
        peak_kib,
        elapsed: start.elapsed(),
    }
}

/// Every regular file under `dir`, as (key relative to `dir`, path).
fn files_under(dir: &Path, prefix: &str) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                stack.push(p);
            } else if meta.is_file() && p.extension().is_none_or(|x| x != "md") {
                let rel = p.strip_prefix(dir).unwrap().to_str().unwrap().to_string();
                out.push((format!("{prefix}{rel}"), p));
            }
        }
    }
    out.sort();
    out
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
    let b = run_s3(moto, &[cmd, "--json", &url]);
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
    let Some(py) = python() else { return };
    let moto = Moto::start(&py);
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
        let b = run_s3(&moto, &["convert", "--force", &url, s(&b_out)]);
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
    let Some(py) = python() else { return };
    let moto = Moto::start(&py);
    let files = files_under(&testdata().join("volp"), "volp/");
    moto.upload("rasterpack", &files);
    let r = run_s3(&moto, &["validate", "--json", "s3://rasterpack/volp/"]);
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
    let Some(py) = python() else { return };
    let moto = Moto::start(&py);
    moto.upload("rasterpack", &[]);
    let r = run_s3(&moto, &["validate", "s3://rasterpack/no/such.volp"]);
    assert_eq!(r.code(), Some(2), "{}", r.stderr());
    let err = r.stderr();
    assert!(err.contains("s3://rasterpack/no/such.volp"), "{err}");
    assert!(
        err.contains("404") || err.contains("not found") || err.contains("NotFound"),
        "{err}"
    );
    let r = run_s3(
        &moto,
        &[
            "validate",
            "--storage-option",
            "nonsense_key=1",
            "s3://rasterpack/x.volp",
        ],
    );
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

impl Moto {
    /// Run `body` in Python with `s3` a boto3 client of this server and `B` the bucket name;
    /// what it prints is returned.
    fn boto(&self, bucket: &str, body: &str) -> String {
        let script = format!(
            "import sys, boto3\ns3 = boto3.client('s3', endpoint_url=sys.argv[1], region_name='us-east-1', \
             aws_access_key_id='testing', aws_secret_access_key='testing')\nB = sys.argv[2]\n{body}\n"
        );
        let out = Command::new(&self.python)
            .args(["-c", &script, &self.endpoint(), bucket])
            .output()
            .expect("run boto3");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The keys under `bucket` and the multipart uploads still open there, one per line.
    fn objects_and_uploads(&self, bucket: &str) -> (Vec<String>, Vec<String>) {
        let listed = self.boto(
            bucket,
            "print(' '.join(o['Key'] for o in s3.list_objects_v2(Bucket=B).get('Contents', [])))\n\
             print(' '.join(u['Key'] for u in s3.list_multipart_uploads(Bucket=B).get('Uploads', [])))",
        );
        let mut lines = listed
            .lines()
            .map(|l| l.split_whitespace().map(str::to_string).collect());
        (lines.next().unwrap_or_default(), lines.next().unwrap_or_default())
    }

    /// The bytes of an object.
    fn download(&self, bucket: &str, key: &str, to: &Path) -> Vec<u8> {
        self.boto(
            bucket,
            &format!("s3.download_file(B, {key:?}, {:?})", to.display().to_string()),
        );
        std::fs::read(to).unwrap()
    }
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
    let Some(py) = python() else { return };
    let moto = Moto::start(&py);
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
        let b = run_s3(&moto, &b_args);
        assert_eq!(b.code(), Some(0), "convert to {url}: {}", b.stderr());
        check_bound(&b_args, &b);
        // The values, read back from the local file and from the object.
        let a_npy = dir.join("a.npy");
        let b_npy = dir.join("b.npy");
        support::check(&["convert", "--force", s(&local), s(&a_npy)], 0);
        let back = run_s3(&moto, &["convert", "--force", &url, s(&b_npy)]);
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
        let again = run_s3(&moto, &b_args);
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
    let r = run_s3(&moto, &["convert", "--force", s(&other), "s3://out/cube.npy"]);
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
    let Some(py) = python() else { return };
    let moto = Moto::start(&py);
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
    let r = run_s3_env(&moto, &args, &[("RASTERPACK_STORE_LOG", "1")]);
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
    let put = run_s3(&moto, &["convert", s(&small), "s3://out/bad.npy"]);
    assert_eq!(put.code(), Some(0), "{}", put.stderr());
    let before = moto.download("out", "bad.npy", &dir.join("before.npy"));
    let r = run_s3(
        &moto,
        &[
            "convert",
            "--force",
            "--storage-option",
            "upload_part_mib=5",
            s(&volp),
            "s3://out/bad.npy",
        ],
    );
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
    let Some(py) = python() else { return };
    let moto = Moto::start(&py);
    let mut files = Vec::new();
    for sub in ["volp", "gvrs", "fold", "udf"] {
        files.extend(files_under(&testdata().join(sub), &format!("mix/{sub}/")));
    }
    // Listing order is key order.
    files.sort();
    moto.upload("rasterpack", &files);
    let url = "s3://rasterpack/mix/";
    let one = run_s3(&moto, &["validate", "--json", "--jobs", "1", url]);
    let four = run_s3(&moto, &["validate", "--json", "--jobs", "4", url]);
    let default = run_s3(&moto, &["validate", "--json", url]);
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
    let text = run_s3(&moto, &["validate", "-j", "3", url]);
    let last = text.stdout().lines().last().unwrap_or("").to_string();
    assert!(last.starts_with(&format!("{} files: ", files.len())), "{last}");
    assert_eq!(
        run_s3(&moto, &["validate", "--jobs", "0", url]).code(),
        Some(2),
        "--jobs 0 is a usage error"
    );
}
