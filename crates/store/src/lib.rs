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
//! reads (headers, directories, record prefixes) fetch a 4 KiB block into a small cache, large
//! ones are fetched in concurrent pieces, a whole-file read ([`RangeSource::advise_sequential`])
//! streams by windows fetched ahead, and a response shorter than the range asked for is retried
//! and then reported, never decoded. A region read announces the records it needs
//! ([`RangeSource::prefetch`]: a GVRS window's tiles, a `.vds` file's bricks); those closer
//! than [`COALESCE_GAP`] are fetched in one request (up to [`MAX_COALESCED`]), concurrently,
//! and the reads are served from them.
//!
//! Outputs: [`UploadTarget`] and [`Upload`] write one object by multipart upload, completed
//! only on success; [`PrefixTarget`] and [`PrefixUpload`] write a dataset of many objects
//! (OpenVDS's cloud layout), the objects that make it visible last, deleted on failure.
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

pub mod vds;

mod prefix;
pub use prefix::{is_vds_key, Cleanup, PrefixTarget, PrefixUpload};
pub mod zarr;
pub use zarr::{ZarrTarget, ZarrUpload};
mod upload;

/// Helpers of the in-memory store tests of the upload modules.
#[cfg(test)]
pub(crate) mod testutil {
    use std::sync::Arc;

    use futures::TryStreamExt;
    use object_store::memory::InMemory;
    use object_store::path::Path as ObjectPath;
    use object_store::ObjectStore;

    use crate::{block_on, Location};

    /// Every key in `store`, sorted.
    pub(crate) fn keys(store: &Arc<InMemory>) -> Vec<String> {
        let store = Arc::clone(store);
        let mut v: Vec<String> = block_on(async move {
            store
                .list(None)
                .map_ok(|m| m.location.to_string())
                .try_collect::<Vec<_>>()
                .await
        })
        .unwrap()
        .unwrap();
        v.sort();
        v
    }

    /// `memory:///<prefix>` on `store`, three requests in flight.
    pub(crate) fn location(store: &Arc<InMemory>, prefix: &str) -> Location {
        Location {
            url: format!("memory:///{prefix}"),
            store: Arc::clone(store) as Arc<dyn ObjectStore>,
            path: ObjectPath::from(prefix),
            max_requests: 3,
        }
    }
}
pub use upload::{Upload, UploadAborter, UploadTarget, DEFAULT_PART_MIB, UPLOADS_IN_FLIGHT};

/// A read smaller than this fetches this many bytes from its offset and keeps them in the
/// block cache: a header parsed field by field costs one request, and a record read as its
/// prefix, then whole, fetches its first bytes once. Small beside a tile or brick, so a region
/// read fetches at most this much past each record it needs.
pub const READAHEAD: u64 = 4 * 1024;
/// Blocks kept per object in the block cache (headers and directory pages read piecewise):
/// 256 KiB at most.
pub const CACHE_BLOCKS: usize = 64;
/// A read larger than this is fetched as pieces of this size, concurrently (bounded by
/// `max_requests`): a large body or directory downloads at the store's aggregate speed.
pub const PIECE: u64 = 4 * 1024 * 1024;
/// Windows of a sequential read (`validate` reads every byte; [`RangeSource::advise_sequential`]):
/// the object is fetched in windows of a quarter of its size, at least this (8 to 16 MB is the
/// range size S3's guidance gives for byte-range fetches; every request costs a round trip, and
/// some servers, moto among them, a fixed ~80 ms on top)...
pub const WINDOW: u64 = 8 * 1024 * 1024;
/// ...and at most this...
pub const MAX_WINDOW: u64 = 16 * 1024 * 1024;
/// ...this many ahead of the furthest one read, so fetching and decoding overlap. At most
/// `WINDOWS_AHEAD + 3` windows (96 MiB, and never more than the object) are held: those ahead,
/// the one being read, and two behind for readers on other threads still working there.
pub const WINDOWS_AHEAD: u64 = 3;
/// Requests in flight per object unless `--storage-option max_requests=N` says otherwise.
pub const DEFAULT_MAX_REQUESTS: usize = 16;
/// Ranges a reader announces ([`RangeSource::prefetch`]: the tiles of a window) are merged
/// into one request when the bytes between them are at most this many: a request costs a
/// round trip (more on some servers), a few KiB more cost nothing beside it, and the bytes
/// fetched stay within a few KiB per request of the bytes needed.
pub const COALESCE_GAP: u64 = 16 * 1024;
/// A merged request grows to this size at most (unless one announced range is larger): the
/// pieces of a large read still run concurrently, bounded by `max_requests`.
pub const MAX_COALESCED: u64 = PIECE;
/// Bytes of announced ranges held per object, fetched or in flight: what does not fit is left
/// to the reads themselves, and the oldest are dropped first.
pub const PREFETCH_BYTES: u64 = 64 * 1024 * 1024;
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
    match RemoteObject::open(loc) {
        Ok(object) => Ok(Input::remote(Arc::new(object))),
        // No object of that name: a prefix holding a dataset of objects (OpenVDS's cloud
        // layout) is opened as one.
        Err(e) if e.code == "store.not_found" => vds::open_dataset(url, opts)?.ok_or(e),
        Err(e) => Err(e),
    }
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

/// `RASTERPACK_STORE_LOG=1`: every ranged GET and upload part is said on stderr (a request log).
pub(crate) fn log_requests() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("RASTERPACK_STORE_LOG").is_some_and(|v| !v.is_empty() && v != "0"))
}

/// Totals over every object opened by this process.
pub fn stats() -> &'static Stats {
    static S: OnceLock<Stats> = OnceLock::new();
    S.get_or_init(Stats::default)
}

/// A window of a sequential read: fetched (or being fetched) once, shared by every reader.
type Window = futures::future::Shared<futures::future::BoxFuture<'static, std::result::Result<Bytes, Error>>>;

/// One object, read by ranges.
#[derive(Debug)]
pub struct RemoteObject {
    loc: Location,
    len: u64,
    permits: Arc<Semaphore>,
    /// Small reads' blocks, least recently used first: (start, bytes).
    cache: Mutex<VecDeque<(u64, Bytes)>>,
    /// Set by [`RangeSource::advise_sequential`]: reads go through [`Window`]s fetched ahead.
    sequential: std::sync::atomic::AtomicBool,
    windows: Mutex<std::collections::BTreeMap<u64, Window>>,
    /// This object's window size: a quarter of it, within [`WINDOW`]..=[`MAX_WINDOW`].
    window: u64,
    /// Merged ranges fetched (or being fetched) for [`RangeSource::prefetch`], oldest first,
    /// at most [`PREFETCH_BYTES`] of them.
    prefetched: Mutex<VecDeque<(Range<u64>, Window)>>,
}

/// Announced ranges as requests: clipped to `len`, sorted, and merged where the gap between
/// them is at most [`COALESCE_GAP`] and the merged request stays within [`MAX_COALESCED`].
pub fn coalesce(ranges: &[Range<u64>], len: u64) -> Vec<Range<u64>> {
    let mut sorted: Vec<Range<u64>> = ranges
        .iter()
        .map(|r| r.start.min(len)..r.end.min(len))
        .filter(|r| r.start < r.end)
        .collect();
    sorted.sort_unstable_by_key(|r| (r.start, r.end));
    let mut out: Vec<Range<u64>> = Vec::new();
    for r in sorted {
        if let Some(last) = out.last_mut() {
            let near = r.start <= last.end.saturating_add(COALESCE_GAP);
            let end = last.end.max(r.end);
            if near && (end - last.start <= MAX_COALESCED || r.end <= last.end) {
                last.end = end;
                continue;
            }
        }
        out.push(r);
    }
    out
}

/// Fetch one range, exactly: a short body is asked for again, then reported.
async fn fetch_range(loc: Location, permits: Arc<Semaphore>, range: Range<u64>) -> Result<Bytes> {
    let want = range.end - range.start;
    let mut last = 0u64;
    for _ in 0..SHORT_READ_ATTEMPTS {
        let got = {
            let _permit = permits.acquire().await;
            loc.store.get_range(&loc.path, range.clone()).await
        }
        .map_err(|e| store_error(&loc.url, e))?;
        stats().requests.fetch_add(1, Ordering::Relaxed);
        stats().bytes.fetch_add(got.len() as u64, Ordering::Relaxed);
        if log_requests() {
            eprintln!(
                "rasterpack-store: GET {} bytes={}-{} ({} bytes)",
                loc.url,
                range.start,
                range.end.saturating_sub(1),
                got.len()
            );
        }
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
            loc.url, range.start
        ),
    ))
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
            sequential: std::sync::atomic::AtomicBool::new(false),
            windows: Mutex::new(Default::default()),
            prefetched: Mutex::new(VecDeque::new()),
            window: meta
                .size
                .div_ceil(4)
                .div_ceil(1 << 20)
                .saturating_mul(1 << 20)
                .clamp(WINDOW, MAX_WINDOW),
            loc,
        })
    }

    /// Fetch one range, exactly.
    fn fetch(&self, range: Range<u64>) -> Result<Bytes> {
        block_on(fetch_range(self.loc.clone(), Arc::clone(&self.permits), range))?
    }

    /// Fetch `buf.len()` bytes at `offset` straight into `buf`: in [`PIECE`]s, concurrently.
    fn fetch_into(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let n = buf.len() as u64;
        let pieces: Vec<Range<u64>> = (0..n.div_ceil(PIECE))
            .map(|i| offset + i * PIECE..offset + ((i + 1) * PIECE).min(n))
            .collect();
        let loc = self.loc.clone();
        let permits = Arc::clone(&self.permits);
        let got = block_on(futures::future::try_join_all(
            pieces
                .into_iter()
                .map(|r| fetch_range(loc.clone(), Arc::clone(&permits), r)),
        ))??;
        let mut at = 0usize;
        for b in got {
            buf[at..at + b.len()].copy_from_slice(&b);
            at += b.len();
        }
        Ok(())
    }

    /// The cached block holding byte `at`, if any (moved to the back: most recently used).
    fn cached(&self, at: u64) -> Option<(u64, Bytes)> {
        let mut cache = self.cache.lock().ok()?;
        let i = cache
            .iter()
            .position(|(start, b)| *start <= at && at < start + b.len() as u64)?;
        let hit = cache.remove(i)?;
        cache.push_back(hit.clone());
        Some(hit)
    }

    fn keep(&self, start: u64, b: Bytes) {
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= CACHE_BLOCKS {
                cache.pop_front();
            }
            cache.push_back((start, b));
        }
    }

    /// The prefetched range holding byte `at`, if any.
    fn prefetched(&self, at: u64) -> Option<(u64, Window)> {
        let held = self.prefetched.lock().ok()?;
        held.iter()
            .find(|(r, _)| r.contains(&at))
            .map(|(r, w)| (r.start, w.clone()))
    }

    /// Window `k` of a sequential read, and the [`WINDOWS_AHEAD`] after it started: each is
    /// fetched once, on the runtime, whoever asks first.
    fn window(&self, k: u64) -> Result<Window> {
        use futures::FutureExt;
        let rt = runtime()?;
        let w = self.window;
        let last = self.len.div_ceil(w);
        let mut windows = self
            .windows
            .lock()
            .map_err(|_| Error::new(ErrorKind::Io, "store.poisoned", None, "a reader thread panicked"))?;
        for j in k..(k + 1 + WINDOWS_AHEAD).min(last) {
            windows.entry(j).or_insert_with(|| {
                let range = j * w..((j + 1) * w).min(self.len);
                let w = fetch_range(self.loc.clone(), Arc::clone(&self.permits), range)
                    .boxed()
                    .shared();
                // Started now, not when first awaited: that is the read-ahead (the task runs detached).
                drop(rt.spawn(w.clone()));
                w
            });
        }
        let wanted = windows.get(&k).cloned();
        // Bounded: the windows furthest behind go first (a reader holding one keeps it).
        while windows.len() as u64 > WINDOWS_AHEAD + 3 {
            windows.pop_first();
        }
        wanted.ok_or_else(|| Error::new(ErrorKind::Io, "store.window", Some(k * w), "no such window"))
    }

    fn read_sequential(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let mut filled = 0usize;
        while filled < buf.len() {
            let at = offset + filled as u64;
            let k = at / self.window;
            let w = block_on(self.window(k)?)??;
            let from = (at - k * self.window) as usize;
            let take = (w.len() - from).min(buf.len() - filled);
            buf[filled..filled + take].copy_from_slice(&w[from..from + take]);
            filled += take;
        }
        Ok(())
    }
}

impl RangeSource for RemoteObject {
    fn name(&self) -> String {
        self.loc.url.clone()
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn advise_sequential(&self) {
        self.sequential.store(true, Ordering::Relaxed);
    }

    fn prefetch(&self, ranges: &[Range<u64>]) {
        use futures::FutureExt;
        // A sequential read fetches everything by windows already.
        if self.sequential.load(Ordering::Relaxed) {
            return;
        }
        let Ok(rt) = runtime() else { return };
        let Ok(mut held) = self.prefetched.lock() else { return };
        // What is already held (or in flight) is not asked for again.
        let wanted: Vec<Range<u64>> = ranges
            .iter()
            .filter(|r| !held.iter().any(|(h, _)| h.start <= r.start && r.end <= h.end))
            .cloned()
            .collect();
        let mut total: u64 = held.iter().map(|(r, _)| r.end - r.start).sum();
        let mut budget = PREFETCH_BYTES;
        for r in coalesce(&wanted, self.len) {
            let n = r.end - r.start;
            // Announced ranges beyond the budget are left to the reads themselves.
            if n > budget {
                break;
            }
            budget -= n;
            while total + n > PREFETCH_BYTES {
                match held.pop_front() {
                    Some((old, _)) => total -= old.end - old.start,
                    None => break,
                }
            }
            let w = fetch_range(self.loc.clone(), Arc::clone(&self.permits), r.clone())
                .boxed()
                .shared();
            // Started now, on the runtime, while the reader goes on (the task runs detached).
            drop(rt.spawn(w.clone()));
            total += n;
            held.push_back((r, w));
        }
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let n = buf.len() as u64;
        offset
            .checked_add(n)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| Error::truncated("object", offset, n, self.len.saturating_sub(offset)))?;
        if n == 0 {
            return Ok(());
        }
        if self.sequential.load(Ordering::Relaxed) {
            return self.read_sequential(offset, buf);
        }
        let mut filled = 0usize;
        while filled < buf.len() {
            let at = offset + filled as u64;
            // What an announced range or a cached block holds is copied; only the rest is
            // fetched.
            if let Some((start, w)) = self.prefetched(at) {
                let b = block_on(w)??;
                let from = (at - start) as usize;
                let take = (b.len() - from).min(buf.len() - filled);
                buf[filled..filled + take].copy_from_slice(&b[from..from + take]);
                filled += take;
                continue;
            }
            if let Some((start, b)) = self.cached(at) {
                let from = (at - start) as usize;
                let take = (b.len() - from).min(buf.len() - filled);
                buf[filled..filled + take].copy_from_slice(&b[from..from + take]);
                filled += take;
                continue;
            }
            let rest = &mut buf[filled..];
            if (rest.len() as u64) < READAHEAD {
                let end = at.saturating_add(READAHEAD).min(self.len);
                let b = self.fetch(at..end)?;
                let take = rest.len();
                rest.copy_from_slice(&b[..take]);
                self.keep(at, b);
            } else {
                // Large reads (tiles, bricks, bodies) go straight into the buffer, uncached.
                self.fetch_into(at, rest)?;
            }
            return Ok(());
        }
        Ok(())
    }
}

/// The objects under a prefix URL (one ending in `/`), as URLs, sorted: what `validate
/// s3://bucket/prefix/` checks one by one. The objects of a VDS dataset in its cloud layout
/// are one entry, the dataset's prefix.
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
    Ok(vds::group_datasets(urls))
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
    fn announced_ranges_merge_when_close() {
        let r = |a: u64, b: u64| a..b;
        // End to end, and a gap of COALESCE_GAP: one request; a gap one byte wider: two.
        assert_eq!(coalesce(&[r(100, 200), r(0, 100)], 1 << 30), [r(0, 200)]);
        let g = COALESCE_GAP;
        assert_eq!(coalesce(&[r(0, 10), r(10 + g, 20 + g)], 1 << 30), [r(0, 20 + g)]);
        assert_eq!(
            coalesce(&[r(0, 10), r(11 + g, 20 + g)], 1 << 30),
            [r(0, 10), r(11 + g, 20 + g)]
        );
        // Overlapping and contained ranges, clipped to the object, empty ones dropped.
        assert_eq!(coalesce(&[r(5, 50), r(10, 20), r(40, 90), r(7, 7)], 80), [r(5, 80)]);
        assert!(coalesce(&[r(90, 100)], 80).is_empty());
        // A merged request stops growing at MAX_COALESCED.
        let m = MAX_COALESCED;
        assert_eq!(
            coalesce(&[r(0, m / 2), r(m / 2, m), r(m, m + 1)], u64::MAX),
            [r(0, m), r(m, m + 1)]
        );
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
