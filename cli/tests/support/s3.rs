//! A real S3 server for the object-store tests (issue 19): moto's server mode from the test
//! venv (`$RASTERPACK_PYTHON`, made by `.ci/venv.sh` with `moto[server]`), started on a free
//! loopback port, with buckets, uploads through boto3 (moto's own dependency), its request log
//! and the rasterpack command run against it. Stopped when dropped.
//!
//! Without `$RASTERPACK_PYTHON` a test skips visibly ([`python`]); under `CI=true` it fails.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::Run;

/// The venv's python, or a visible skip naming `needs` (a failure under CI).
pub fn python(needs: &str) -> Option<String> {
    match std::env::var("RASTERPACK_PYTHON") {
        Ok(p) if !p.is_empty() => Some(p),
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true but RASTERPACK_PYTHON is not set: .ci/run sources .ci/venv.sh"
            );
            rasterpack_common::testkit::skip(&format!("needs RASTERPACK_PYTHON (a venv with {needs})"));
            None
        }
    }
}

/// A moto S3 server on loopback, killed on drop. Its request log (werkzeug's one line per
/// request: method, path, status) goes to `log` when one is given.
pub struct Moto {
    child: Child,
    port: u16,
    python: String,
    log: Option<PathBuf>,
}

/// The preamble of every boto3 script: `s3`, a client of the server whose endpoint is argv[1].
const CLIENT: &str = "import sys, json, boto3\n\
s3 = boto3.client('s3', endpoint_url=sys.argv[1], region_name='us-east-1',\n\
                  aws_access_key_id='testing', aws_secret_access_key='testing')\n";

impl Moto {
    /// Start the server and wait (at most 30 s) until it accepts connections.
    pub fn start(python: &str, log: Option<PathBuf>) -> Moto {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let stderr = match &log {
            Some(p) => Stdio::from(std::fs::File::create(p).expect("moto log")),
            None => Stdio::null(),
        };
        let child = Command::new(python)
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start moto.server");
        let moto = Moto {
            child,
            port,
            python: python.to_string(),
            log,
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

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The venv's python, for scripts of a test's own (oracles).
    pub fn python_path(&self) -> &str {
        &self.python
    }

    /// Run `body` in Python after [`CLIENT`] (so `s3` is a client of this server), with
    /// `args` from argv[2] on and `stdin` as its input; what it prints.
    pub fn script(&self, body: &str, args: &[&str], stdin: &str) -> String {
        let mut child = Command::new(&self.python)
            .arg("-c")
            .arg(format!("{CLIENT}{body}\n"))
            .arg(self.endpoint())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run python");
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "python against moto failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Only the end trimmed: a first line may be empty (no objects, but open uploads).
        String::from_utf8_lossy(&out.stdout).trim_end().to_string()
    }

    /// Make `bucket` (again is fine).
    pub fn create_bucket(&self, bucket: &str) {
        self.script(
            "try:\n    s3.create_bucket(Bucket=sys.argv[2])\nexcept s3.exceptions.BucketAlreadyOwnedByYou:\n    pass",
            &[bucket],
            "",
        );
    }

    /// Make `bucket` and upload `files` as `(key, local path)`.
    pub fn upload(&self, bucket: &str, files: &[(String, PathBuf)]) {
        let with_meta: Vec<_> = files
            .iter()
            .map(|(k, p)| (k.clone(), p.clone(), serde_json::Map::new()))
            .collect();
        self.upload_with_metadata(bucket, &with_meta);
    }

    /// Make `bucket` and upload `files` as `(key, local path, user metadata)`: each entry of
    /// the metadata becomes an `x-amz-meta-<name>` header of the object.
    pub fn upload_with_metadata(
        &self,
        bucket: &str,
        files: &[(String, PathBuf, serde_json::Map<String, serde_json::Value>)],
    ) {
        self.create_bucket(bucket);
        let lines: String = files
            .iter()
            .map(|(k, p, m)| format!("{k}\t{}\t{}\n", p.display(), serde_json::Value::Object(m.clone())))
            .collect();
        self.script(
            "for line in sys.stdin.read().splitlines():\n    \
                 key, path, meta = line.split('\\t', 2)\n    \
                 with open(path, 'rb') as f:\n        \
                     s3.put_object(Bucket=sys.argv[2], Key=key, Body=f.read(), Metadata=json.loads(meta))",
            &[bucket],
            &lines,
        );
    }

    /// The keys under `bucket` and the keys of the multipart uploads still open there.
    pub fn objects_and_uploads(&self, bucket: &str) -> (Vec<String>, Vec<String>) {
        let listed = self.script(
            "B = sys.argv[2]\n\
             print(' '.join(o['Key'] for o in s3.list_objects_v2(Bucket=B).get('Contents', [])))\n\
             print(' '.join(u['Key'] for u in s3.list_multipart_uploads(Bucket=B).get('Uploads', [])))",
            &[bucket],
            "",
        );
        let mut lines = listed
            .lines()
            .map(|l| l.split_whitespace().map(str::to_string).collect());
        (lines.next().unwrap_or_default(), lines.next().unwrap_or_default())
    }

    /// The bytes of an object (downloaded to `to`).
    pub fn download(&self, bucket: &str, key: &str, to: &Path) -> Vec<u8> {
        self.script(
            "s3.download_file(sys.argv[2], sys.argv[3], sys.argv[4])",
            &[bucket, key, &to.display().to_string()],
            "",
        );
        std::fs::read(to).unwrap()
    }

    /// The length of the request log so far (a mark for [`Moto::gets_since`]).
    pub fn log_len(&self) -> u64 {
        let log = self.log.as_ref().expect("moto started without a log");
        std::fs::metadata(log).map(|m| m.len()).unwrap_or(0)
    }

    /// The keys of the GET requests moto logged after byte `from` of its log (werkzeug's
    /// `"GET /bucket/key HTTP/1.1" 200 -` lines), with `bucket/` and any query taken off.
    pub fn gets_since(&self, from: u64, bucket: &str) -> Vec<String> {
        let log = std::fs::read(self.log.as_ref().expect("moto started without a log")).unwrap();
        let text = String::from_utf8_lossy(&log[from as usize..]).into_owned();
        text.lines()
            .filter_map(|l| l.split_once("\"GET /").map(|(_, rest)| rest))
            .filter_map(|rest| rest.split_once(' ').map(|(path, _)| path))
            .filter_map(|path| path.strip_prefix(&format!("{bucket}/")))
            .map(|k| k.split('?').next().unwrap_or(k).to_string())
            .collect()
    }

    /// The environment a user sets to reach this server: credentials, region, endpoint.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ACCESS_KEY_ID", "testing".to_string()),
            ("AWS_SECRET_ACCESS_KEY", "testing".to_string()),
            ("AWS_REGION", "us-east-1".to_string()),
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// Run rasterpack against this server (under GNU time when it is there).
    pub fn run(&self, args: &[&str]) -> Run {
        self.run_env(args, &[])
    }

    /// [`Moto::run`] with more environment variables.
    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut all = self.env();
        all.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        super::run_env(args, &all)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every regular file under `dir` (links not followed), as (`prefix` + path relative to `dir`,
/// path), sorted.
pub fn files_under(dir: &Path, prefix: &str) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                stack.push(p);
            } else if meta.is_file() {
                let rel = p.strip_prefix(dir).unwrap().to_str().unwrap().to_string();
                out.push((format!("{prefix}{rel}"), p));
            }
        }
    }
    out.sort();
    out
}
