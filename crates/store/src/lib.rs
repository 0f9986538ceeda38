//! Inputs and outputs in object stores and on web servers: `s3://`, `gs://`, `az://` (and
//! `abfs://`), `http(s)://` and `file://` URLs, through the `object_store` crate.
//!
//! A remote object becomes an ordinary [`Input`] ([`Input::Remote`]): the format crates read it
//! with the same positioned reads (`read_at`, `read_vec`) as a local file, so every check that
//! protects the bytes of a file protects the bytes of an object too, and a region read fetches
//! only the ranges the format asks for.
//!
//! One tokio runtime serves every request; readers block on it (the format crates are
//! synchronous and read from rayon threads). Requests in flight are bounded per object, small
//! reads (headers, directories) go through a small page cache, and a response shorter than the
//! range asked for is retried and then reported, never decoded.
//!
//! ```no_run
//! use rasterpack_store::{open, StoreOptions};
//!
//! let input = open("s3://bucket/cube.volp", &StoreOptions::default())?;
//! println!("{}: {} bytes", input.name(), input.len());
//! # Ok::<(), rasterpack_common::Error>(())
//! ```

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{BackoffConfig, ObjectStore, RetryConfig};
use rasterpack_common::{Error, ErrorKind, Input, RangeSource, Result};
use tokio::runtime::Runtime;
use tokio::sync::Semaphore;
use url::Url;

mod upload;
pub use upload::{Upload, UploadTarget, DEFAULT_PART_MIB, UPLOADS_IN_FLIGHT};

/// Bytes per page of the small read cache: a header or directory read smaller than this
/// fetches its whole page once, so the many small reads of a header cost one request.
pub const PAGE: u64 = 64 * 1024;
/// Pages kept per object (2 MiB): enough for headers and directory pages, small beside the
/// 256 MiB budget of a hostile input.
pub const CACHE_PAGES: usize = 32;
/// Requests in flight per object unless `--storage-option max_requests=N` says otherwise.
pub const DEFAULT_MAX_REQUESTS: usize = 16;
/// Attempts at a range whose response came back short before the read fails.
const SHORT_READ_ATTEMPTS: u32 = 3;

/// How to reach a store: `object_store` configuration keys (`aws_endpoint`, `allow_http`,
/// `aws_access_key_id`, `google_service_account`, `azure_storage_account_name`, ...) on top of
/// the environment, plus rasterpack's own `max_requests`, `max_retries`, `retry_timeout_secs`
/// and `upload_part_mib`.
#[derive(Debug, Clone, Default)]
pub struct StoreOptions {
    /// `KEY=VALUE` pairs, in the order given (later ones win).
    pub options: Vec<(String, String)>,
}

impl StoreOptions {
    /// Parse `KEY=VALUE` strings (the CLI's `--storage-option`).
    pub fn parse<S: AsRef<str>>(pairs: &[S]) -> Result<StoreOptions> {
        let mut options = Vec::new();
        for p in pairs {
            let p = p.as_ref();
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| usage("store.bad_option", format!("--storage-option {p:?} is not KEY=VALUE")))?;
            options.push((k.trim().to_ascii_lowercase(), v.to_string()));
        }
        Ok(StoreOptions { options })
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.options
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn number(&self, key: &str) -> Result<Option<u64>> {
        self.get(key)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| usage("store.bad_option", format!("{key}={v:?} is not a whole number")))
            })
            .transpose()
    }

    /// The pairs meant for `object_store` (rasterpack's own keys taken out).
    fn store_pairs(&self) -> impl Iterator<Item = &(String, String)> {
        self.options.iter().filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "max_requests" | "max_retries" | "retry_timeout_secs" | "upload_part_mib"
            )
        })
    }
}

fn usage(code: &'static str, message: String) -> Error {
    Error::new(ErrorKind::Usage, code, None, message)
}

/// Does `s` name a URL this crate opens (rather than a local path)?
pub fn is_url(s: &str) -> bool {
    let Some((scheme, _)) = s.split_once("://") else {
        return false;
    };
    matches!(
        scheme.to_ascii_lowercase().as_str(),
        "s3" | "s3a" | "gs" | "az" | "adl" | "azure" | "abfs" | "abfss" | "http" | "https" | "file"
    )
}

/// The one runtime every request runs on. Two workers: the work is waiting on sockets, and
/// the CPU belongs to decoding.
fn runtime() -> Result<&'static Runtime> {
    static RT: OnceLock<std::result::Result<Runtime, String>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("rasterpack-store")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| {
        Error::new(
            ErrorKind::Io,
            "store.runtime",
            None,
            format!("cannot start the I/O runtime: {e}"),
        )
    })
}

/// Run a future to completion from synchronous code.
fn block_on<F: std::future::Future>(f: F) -> Result<F::Output> {
    Ok(runtime()?.block_on(f))
}

/// A connected store and the object (or prefix) path the URL names in it.
#[derive(Debug, Clone)]
pub struct Location {
    /// The URL as given, for messages.
    pub url: String,
    /// The store (bucket, container or web origin).
    pub store: Arc<dyn ObjectStore>,
    /// The path inside the store.
    pub path: ObjectPath,
    /// Requests in flight allowed at once.
    pub max_requests: usize,
}

fn retry_config(opts: &StoreOptions) -> Result<RetryConfig> {
    Ok(RetryConfig {
        // 5xx, 429/503 SlowDown, timeouts and cut-off connections are retried with
        // exponential backoff; the total time is bounded so a dead endpoint fails (exit 2).
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            base: 2.0,
        },
        max_retries: opts.number("max_retries")?.unwrap_or(8) as usize,
        retry_timeout: Duration::from_secs(opts.number("retry_timeout_secs")?.unwrap_or(60)),
    })
}

/// Connect to the store a URL names. Credentials and endpoints come from the environment
/// (`AWS_*`, `GOOGLE_*`, `AZURE_*`) and then `opts`, which win.
pub fn connect(url: &str, opts: &StoreOptions) -> Result<Location> {
    let parsed = Url::parse(url).map_err(|e| usage("store.bad_url", format!("{url}: not a URL ({e})")))?;
    let bad_key = |k: &str, e: object_store::Error| usage("store.bad_option", format!("--storage-option {k}: {e}"));
    let built = |e: object_store::Error| store_error(url, e);
    let retry = retry_config(opts)?;
    let scheme = parsed.scheme().to_ascii_lowercase();
    let store: Arc<dyn ObjectStore> = match scheme.as_str() {
        "s3" | "s3a" => {
            let mut b = object_store::aws::AmazonS3Builder::from_env().with_url(url);
            for (k, v) in opts.store_pairs() {
                b = b.with_config(k.parse().map_err(|e| bad_key(k, e))?, v);
            }
            Arc::new(b.with_retry(retry).build().map_err(built)?)
        }
        "gs" => {
            let mut b = object_store::gcp::GoogleCloudStorageBuilder::from_env().with_url(url);
            for (k, v) in opts.store_pairs() {
                b = b.with_config(k.parse().map_err(|e| bad_key(k, e))?, v);
            }
            Arc::new(b.with_retry(retry).build().map_err(built)?)
        }
        "az" | "adl" | "azure" | "abfs" | "abfss" => {
            let mut b = object_store::azure::MicrosoftAzureBuilder::from_env().with_url(url);
            for (k, v) in opts.store_pairs() {
                b = b.with_config(k.parse().map_err(|e| bad_key(k, e))?, v);
            }
            Arc::new(b.with_retry(retry).build().map_err(built)?)
        }
        "http" | "https" => {
            // The store is the origin; the object is the URL's path under it.
            let origin = parsed.origin().ascii_serialization();
            let mut b = object_store::http::HttpBuilder::new().with_url(origin);
            for (k, v) in opts.store_pairs() {
                b = b.with_config(k.parse().map_err(|e| bad_key(k, e))?, v);
            }
            Arc::new(b.with_retry(retry).build().map_err(built)?)
        }
        other => {
            return Err(usage(
                "store.bad_url",
                format!("{url}: scheme {other}:// is not an object store"),
            ))
        }
    };
    let raw = parsed.path();
    let path = ObjectPath::from_url_path(raw.trim_start_matches('/'))
        .map_err(|e| usage("store.bad_url", format!("{url}: bad object path ({e})")))?;
    let max_requests = match opts.number("max_requests")? {
        Some(0) => return Err(usage("store.bad_option", "max_requests must be at least 1".into())),
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX).min(1024),
        None => DEFAULT_MAX_REQUESTS,
    };
    Ok(Location {
        url: url.to_string(),
        store,
        path,
        max_requests,
    })
}

/// An `object_store` failure as rasterpack's I/O error (exit 2), naming the URL; the store's
/// own message carries the HTTP status and the object.
fn store_error(url: &str, e: object_store::Error) -> Error {
    let code = match &e {
        object_store::Error::NotFound { .. } => "store.not_found",
        object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. } => {
            "store.permission_denied"
        }
        _ => "store.request_failed",
    };
    Error::new(ErrorKind::Io, code, None, format!("{url}: {e}"))
}

/// Open a URL as an [`Input`]: `file://` as a local path, anything else as a remote object
/// read by ranges.
pub fn open(url: &str, opts: &StoreOptions) -> Result<Input> {
    if let Some(path) = local_path(url)? {
        return Input::open(path);
    }
    let loc = connect(url, opts)?;
    Ok(Input::remote(Arc::new(RemoteObject::open(loc)?)))
}

/// The local path a `file://` URL names (`None` for any other URL): such inputs and outputs
/// are ordinary files.
pub fn local_path(url: &str) -> Result<Option<std::path::PathBuf>> {
    if url.len() < 7 || !url[..7].eq_ignore_ascii_case("file://") {
        return Ok(None);
    }
    let parsed = Url::parse(url).map_err(|e| usage("store.bad_url", format!("{url}: not a URL ({e})")))?;
    parsed
        .to_file_path()
        .map(Some)
        .map_err(|()| usage("store.bad_url", format!("{url}: not a local file path")))
}

/// Requests and bytes fetched, for request logs and tests.
#[derive(Debug, Default)]
pub struct Stats {
    /// Ranged GET requests answered.
    pub requests: AtomicU64,
    /// Bytes received in them.
    pub bytes: AtomicU64,
}

/// Totals over every object opened by this process.
pub fn stats() -> &'static Stats {
    static S: OnceLock<Stats> = OnceLock::new();
    S.get_or_init(Stats::default)
}

/// One object, read by ranges.
#[derive(Debug)]
pub struct RemoteObject {
    loc: Location,
    len: u64,
    permits: Arc<Semaphore>,
    cache: Mutex<VecDeque<(u64, Bytes)>>,
}

impl RemoteObject {
    /// Look the object up (one HEAD request) and keep its length.
    pub fn open(loc: Location) -> Result<RemoteObject> {
        let store = Arc::clone(&loc.store);
        let path = loc.path.clone();
        let meta = block_on(async move { store.head(&path).await })?.map_err(|e| store_error(&loc.url, e))?;
        Ok(RemoteObject {
            len: meta.size,
            permits: Arc::new(Semaphore::new(loc.max_requests)),
            cache: Mutex::new(VecDeque::new()),
            loc,
        })
    }

    /// Fetch one range, exactly: a short body is asked for again, then reported.
    fn fetch(&self, range: Range<u64>) -> Result<Bytes> {
        let want = range.end - range.start;
        let mut last = 0u64;
        for _ in 0..SHORT_READ_ATTEMPTS {
            let store = Arc::clone(&self.loc.store);
            let path = self.loc.path.clone();
            let permits = Arc::clone(&self.permits);
            let r = range.clone();
            let got = block_on(async move {
                let _permit = permits.acquire_owned().await;
                store.get_range(&path, r).await
            })?
            .map_err(|e| store_error(&self.loc.url, e))?;
            stats().requests.fetch_add(1, Ordering::Relaxed);
            stats().bytes.fetch_add(got.len() as u64, Ordering::Relaxed);
            if got.len() as u64 == want {
                return Ok(got);
            }
            last = got.len() as u64;
        }
        Err(Error::new(
            ErrorKind::Io,
            "store.short_read",
            Some(range.start),
            format!(
                "{}: asked for {want} bytes at offset {}, the server sent {last} ({SHORT_READ_ATTEMPTS} attempts)",
                self.loc.url, range.start
            ),
        ))
    }

    /// One page of the cache, fetched on a miss.
    fn page(&self, index: u64) -> Result<Bytes> {
        if let Ok(cache) = self.cache.lock() {
            if let Some((_, b)) = cache.iter().find(|(i, _)| *i == index) {
                return Ok(b.clone());
            }
        }
        let start = index * PAGE;
        let end = start.saturating_add(PAGE).min(self.len);
        let b = self.fetch(start..end)?;
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= CACHE_PAGES {
                cache.pop_front();
            }
            cache.push_back((index, b.clone()));
        }
        Ok(b)
    }
}

impl RangeSource for RemoteObject {
    fn name(&self) -> String {
        self.loc.url.clone()
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let n = buf.len() as u64;
        let end = offset
            .checked_add(n)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| Error::truncated("object", offset, n, self.len.saturating_sub(offset)))?;
        if n == 0 {
            return Ok(());
        }
        // Small reads (headers, directory entries) go through the page cache: a header parsed
        // field by field costs one request, not one per field. Large reads (tiles, bricks,
        // bodies) go straight to the store, uncached.
        if n < PAGE {
            let first = offset / PAGE;
            let last = (end - 1) / PAGE;
            if last - first <= 1 {
                let mut filled = 0usize;
                for index in first..=last {
                    let page = self.page(index)?;
                    let page_start = index * PAGE;
                    let from = (offset + filled as u64 - page_start) as usize;
                    let take = (page.len() - from).min(buf.len() - filled);
                    buf[filled..filled + take].copy_from_slice(&page[from..from + take]);
                    filled += take;
                }
                return Ok(());
            }
        }
        let got = self.fetch(offset..end)?;
        buf.copy_from_slice(&got);
        Ok(())
    }
}

/// The objects under a prefix URL (one ending in `/`), as URLs, sorted: what `validate
/// s3://bucket/prefix/` checks one by one.
pub fn list(url: &str, opts: &StoreOptions) -> Result<Vec<String>> {
    use futures::TryStreamExt;
    let loc = connect(url, opts)?;
    let store = Arc::clone(&loc.store);
    let prefix = loc.path.clone();
    let metas = block_on(async move {
        let p = (!prefix.as_ref().is_empty()).then_some(&prefix);
        store.list(p).try_collect::<Vec<_>>().await
    })?
    .map_err(|e| store_error(url, e))?;
    // The URL up to the prefix (scheme and bucket), then each object's full path.
    let base = url.trim_end_matches('/');
    let base = base
        .strip_suffix(loc.path.as_ref())
        .unwrap_or(base)
        .trim_end_matches('/');
    let mut urls: Vec<String> = metas.iter().map(|m| format!("{base}/{}", m.location)).collect();
    urls.sort();
    Ok(urls)
}

/// Is `url` a prefix to list (a store URL ending in `/`) rather than one object?
pub fn is_prefix(url: &str) -> bool {
    is_url(url) && url.ends_with('/') && !url.to_ascii_lowercase().starts_with("file://")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_paths_are_told_apart() {
        for u in [
            "s3://b/k",
            "S3://b/k",
            "gs://b/k",
            "az://c/k",
            "abfss://c@a/k",
            "https://h/x",
            "file:///tmp/x",
        ] {
            assert!(is_url(u), "{u}");
        }
        for p in ["cube.volp", "-", "dir/s3://x", "ftp://h/x", "C:\\data\\x.gvrs"] {
            assert!(!is_url(p), "{p}");
        }
        assert!(is_prefix("s3://b/grids/"));
        assert!(!is_prefix("s3://b/grids/a.gvrs"));
        assert!(!is_prefix("file:///tmp/"));
    }

    #[test]
    fn options_parse_and_reject() {
        let o = StoreOptions::parse(&["AWS_Region=eu-west-1", "max_requests=4", "max_requests=8"]).unwrap();
        assert_eq!(o.get("aws_region"), Some("eu-west-1"));
        assert_eq!(o.number("max_requests").unwrap(), Some(8));
        assert_eq!(o.store_pairs().count(), 1);
        assert_eq!(StoreOptions::parse(&["novalue"]).unwrap_err().kind, ErrorKind::Usage);
        let bad = StoreOptions::parse(&["max_requests=many"]).unwrap();
        assert!(bad.number("max_requests").is_err());
        let zero = StoreOptions::parse(&["max_requests=0"]).unwrap();
        assert_eq!(connect("s3://bucket/key", &zero).unwrap_err().kind, ErrorKind::Usage);
        let unknown = StoreOptions::parse(&["no_such_key=1"]).unwrap();
        assert_eq!(
            connect("s3://bucket/key", &unknown).unwrap_err().code,
            "store.bad_option"
        );
    }
}
