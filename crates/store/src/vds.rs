//! Datasets made of many objects under one prefix: OpenVDS's cloud layout
//! (`s3://bucket/dataset/VolumeDataLayout`, `LayerStatus`, `<layer>/<chunk>`,
//! `<layer>/ChunkMetadata/<page>`), read as an [`Input::Objects`] that the VDS reader adapts to
//! its `ObjectStore` trait.
//!
//! Only the objects a read needs are fetched. A read announces the chunks of the group of bricks
//! it decodes next ([`ObjectSource::prefetch`]); those are fetched concurrently (bounded by the
//! request permits and a window of objects and bytes) and handed over when the decoder asks.
//! The small documents and chunk-metadata pages go through a small bounded cache. Each chunk's
//! `x-amz-meta-vdschunkmetadata` header comes with its GET and is kept (bounded) for the
//! checks that follow the read.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{Attribute, GetOptions, ObjectStore};
use rasterpack_common::{Error, ErrorKind, Input, Limits, ObjectSource, Result};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::{block_on, connect, runtime, stats, store_error, Location, StoreOptions};

/// The object whose presence makes a prefix a VDS dataset.
const LAYOUT_KEY: &str = "VolumeDataLayout";
/// User metadata names that are chunk-metadata headers (OpenVDS's S3 writer).
const HEADER: &str = "vdschunkmetadata";
/// The legacy name of the same header (`x-amz-meta-VDS-Chunk-Metadata`; HTTP header names
/// arrive lowercased), which OpenVDS still reads: checked the same way when the current one
/// is absent.
const LEGACY_HEADER: &str = "vds-chunk-metadata";

/// An object's chunk-metadata header: `vdschunkmetadata`, else the legacy
/// `vds-chunk-metadata`. With both, the current one, as OpenVDS (its S3 reader sees the
/// metadata in key order, and the later `vdschunkmetadata` replaces the legacy value).
fn chunk_header(attributes: &object_store::Attributes) -> Option<String> {
    [HEADER, LEGACY_HEADER]
        .iter()
        .find_map(|name| attributes.get(&Attribute::Metadata((*name).into())))
        .map(|v| v.to_string())
}
/// Small objects (layout documents, chunk-metadata pages) kept in the cache...
const CACHE_OBJECTS: usize = 32;
/// ... each at most this large (a page is 1024 entries x 8 or 28 bytes).
const CACHE_OBJECT_BYTES: u64 = 256 * 1024;
/// Headers remembered from GETs, for the checks a read or a validation makes right after it.
const HEADERS_KEPT: usize = 4096;
/// Objects fetched ahead of the reader, at most ...
const PREFETCH_OBJECTS: usize = 32;
/// Objects announced and waiting for room in that window, at most (names only).
const PREFETCH_QUEUE: usize = 4096;
/// ... and only objects this small: the window stays within 32 x 2 MiB = 64 MiB however large
/// the bricks are (larger ones are fetched when asked for, by the decoding threads).
const PREFETCH_OBJECT_BYTES: u64 = 2 * 1024 * 1024;

/// A fetched object: its body and its chunk-metadata header.
#[derive(Debug, Clone)]
struct Fetched {
    body: Bytes,
    header: Option<String>,
}

/// Headers remembered from GETs by key, and the keys in the order they came (for eviction).
type Headers = (HashMap<String, Option<String>>, VecDeque<String>);

/// A prefetched object: `None` when it was too large to hold (the reader fetches it itself).
type Pending = JoinHandle<std::result::Result<Option<Option<Fetched>>, Error>>;
/// Announced objects nobody took for this long (a read that failed, a brick served from
/// elsewhere) are dropped to make room.
const PREFETCH_STALE: std::time::Duration = std::time::Duration::from_secs(30);

/// The objects under one prefix of a store.
#[derive(Debug)]
pub struct ObjectPrefix {
    loc: Location,
    permits: Arc<Semaphore>,
    keeps_metadata: bool,
    cache: Mutex<VecDeque<(String, Option<Fetched>)>>,
    headers: Mutex<Headers>,
    prefetch: Mutex<Prefetch>,
}

/// Objects announced by reads: those being fetched (at most [`PREFETCH_OBJECTS`], oldest
/// first) and those waiting for room (at most [`PREFETCH_QUEUE`]). Each object a reader takes
/// makes room for the next, so a long announcement (a validation batch) streams through the
/// window.
#[derive(Debug, Default)]
struct Prefetch {
    started: HashMap<String, Pending>,
    order: VecDeque<(String, std::time::Instant)>,
    queued: VecDeque<(String, u64)>,
}

/// The keys whose presence makes a prefix a dataset of objects: OpenVDS's cloud layout, or a
/// Zarr store (v3, then v2 array and group) whose reader takes the same objects.
const DATASET_KEYS: [&str; 4] = [LAYOUT_KEY, "zarr.json", ".zarray", ".zgroup"];

/// The prefix URL `url` as a dataset of objects when it holds a VDS `VolumeDataLayout` or a
/// Zarr store's root metadata (a HEAD request each, until one is found); `None` otherwise.
/// Which format it is, the formats' `detect_objects` tell from the same keys.
pub fn open_dataset(url: &str, opts: &StoreOptions) -> Result<Option<Input>> {
    let trimmed = url.trim_end_matches('/');
    let loc = connect(trimmed, opts)?;
    let prefix = ObjectPrefix::new(loc);
    for key in DATASET_KEYS {
        if prefix.size(key)?.is_some() {
            return Ok(Some(Input::Objects {
                source: Arc::new(prefix),
            }));
        }
    }
    Ok(None)
}

impl ObjectPrefix {
    /// The objects under `loc` (its path is the prefix).
    pub fn new(loc: Location) -> ObjectPrefix {
        // Azure, GCS and S3 keep user metadata; a web server has none to give.
        let keeps_metadata = !loc.url.to_ascii_lowercase().starts_with("http");
        ObjectPrefix {
            permits: Arc::new(Semaphore::new(loc.max_requests)),
            keeps_metadata,
            cache: Mutex::new(VecDeque::new()),
            headers: Mutex::new((HashMap::new(), VecDeque::new())),
            prefetch: Mutex::new(Prefetch::default()),
            loc,
        }
    }

    /// The store path of `key`; a key that is not a plain relative key is refused.
    fn path(&self, key: &str) -> Result<ObjectPath> {
        if key.is_empty() || key.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
            return Err(Error::invalid_at(
                "vds.store.key",
                None,
                format!("object key {key:?} is not a plain relative key"),
            ));
        }
        let full = format!("{}/{key}", self.loc.path.as_ref().trim_end_matches('/'));
        ObjectPath::parse(full.trim_start_matches('/')).map_err(|e| {
            Error::invalid_at(
                "vds.store.key",
                None,
                format!("object key {key:?} is not a valid object path ({e})"),
            )
        })
    }

    fn url_of(&self, key: &str) -> String {
        format!("{}/{key}", self.loc.url.trim_end_matches('/'))
    }

    fn remember_header(&self, key: &str, header: Option<String>) {
        if let Ok(mut h) = self.headers.lock() {
            let (map, order) = &mut *h;
            if map.insert(key.to_string(), header).is_none() {
                order.push_back(key.to_string());
                while order.len() > HEADERS_KEPT {
                    if let Some(old) = order.pop_front() {
                        map.remove(&old);
                    }
                }
            }
        }
    }

    fn cached(&self, key: &str) -> Option<Option<Fetched>> {
        let cache = self.cache.lock().ok()?;
        cache.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    }

    fn cache_put(&self, key: &str, value: Option<Fetched>) {
        if let Ok(mut cache) = self.cache.lock() {
            if cache.iter().any(|(k, _)| k == key) {
                return;
            }
            if cache.len() >= CACHE_OBJECTS {
                cache.pop_front();
            }
            cache.push_back((key.to_string(), value));
        }
    }

    /// Small objects worth caching: the layout documents and the chunk-metadata pages (read
    /// at open and again by validation), never chunks.
    fn cacheable(key: &str) -> bool {
        !key.contains('/') || key.contains("/ChunkMetadata/")
    }

    /// The object from a prefetch, when one was started for `key` (a queued one is
    /// forgotten: the caller fetches it now); the window moves on.
    fn take_pending(&self, key: &str) -> Option<Pending> {
        let mut p = self.prefetch.lock().ok()?;
        p.queued.retain(|(k, _)| k != key);
        let handle = p.started.remove(key);
        if handle.is_some() {
            p.order.retain(|(k, _)| k != key);
        }
        self.fill(&mut p);
        handle
    }

    /// Start queued fetches while the window has room (dropping announcements nobody took
    /// for [`PREFETCH_STALE`]: their tasks are aborted, their bytes freed).
    fn fill(&self, p: &mut Prefetch) {
        let Ok(rt) = runtime() else { return };
        while !p.queued.is_empty() {
            if p.started.len() >= PREFETCH_OBJECTS {
                match p.order.front() {
                    Some((_, at)) if at.elapsed() >= PREFETCH_STALE => {
                        if let Some((old, _)) = p.order.pop_front() {
                            if let Some(h) = p.started.remove(&old) {
                                h.abort();
                            }
                        }
                        continue;
                    }
                    _ => return,
                }
            }
            let Some((key, max_alloc)) = p.queued.pop_front() else {
                return;
            };
            let Ok(path) = self.path(&key) else { continue };
            let task = fetch_task(
                Arc::clone(&self.loc.store),
                path,
                self.url_of(&key),
                Arc::clone(&self.permits),
                max_alloc,
                PREFETCH_OBJECT_BYTES,
            );
            p.started.insert(key.clone(), rt.spawn(task));
            p.order.push_back((key, std::time::Instant::now()));
        }
    }

    /// Fetch `key` whole (waiting for a prefetch of it when there is one).
    fn fetch(&self, key: &str, limits: &Limits) -> Result<Option<Fetched>> {
        if let Some(handle) = self.take_pending(key) {
            let joined = block_on(handle)?.map_err(|e| {
                Error::new(
                    ErrorKind::Io,
                    "store.request_failed",
                    None,
                    format!("{}: the fetch was lost ({e})", self.url_of(key)),
                )
            })?;
            // `Ok(None)`: too large to prefetch; fetched below.
            if let Some(got) = joined? {
                self.keep_if_small(key, &got);
                return Ok(got);
            }
        }
        let cacheable = Self::cacheable(key);
        if cacheable {
            if let Some(hit) = self.cached(key) {
                return Ok(hit);
            }
        }
        let task = fetch_task(
            Arc::clone(&self.loc.store),
            self.path(key)?,
            self.url_of(key),
            Arc::clone(&self.permits),
            limits.max_alloc,
            u64::MAX,
        );
        let got = block_on(task)??.flatten();
        self.keep_if_small(key, &got);
        Ok(got)
    }

    /// Keep a small document or page (or its absence) in the cache.
    fn keep_if_small(&self, key: &str, got: &Option<Fetched>) {
        if Self::cacheable(key) && got.as_ref().is_none_or(|f| f.body.len() as u64 <= CACHE_OBJECT_BYTES) {
            self.cache_put(key, got.clone());
        }
    }
}

/// GET one object whole: its size is checked against `max_alloc` (and, for prefetches,
/// `hold_at_most`: `Ok(None)` when larger) before the body is read, and the body must be that
/// size exactly. `Ok(Some(None))`: no such object.
async fn fetch_task(
    store: Arc<dyn ObjectStore>,
    path: ObjectPath,
    url: String,
    permits: Arc<Semaphore>,
    max_alloc: u64,
    hold_at_most: u64,
) -> std::result::Result<Option<Option<Fetched>>, Error> {
    let _permit = permits.acquire_owned().await;
    let got = match store.get_opts(&path, GetOptions::default()).await {
        Ok(g) => g,
        Err(object_store::Error::NotFound { .. }) => return Ok(Some(None)),
        Err(e) => return Err(store_error(&url, e)),
    };
    let size = got.meta.size;
    if size > hold_at_most {
        return Ok(None);
    }
    if size > max_alloc {
        return Err(Error::limit(
            "limit.alloc",
            None,
            format!("{url}: the object is {size} bytes, above the allocation limit of {max_alloc}"),
        ));
    }
    let header = chunk_header(&got.attributes);
    // Collected chunk by chunk so that a body longer than announced is caught before it grows
    // past the size that was checked.
    let mut body = Vec::with_capacity(size as usize);
    let mut stream = got.into_stream();
    while let Some(part) = stream.try_next().await.map_err(|e| store_error(&url, e))? {
        if body.len() as u64 + part.len() as u64 > size {
            return Err(short(&url, size, body.len() as u64 + part.len() as u64));
        }
        body.extend_from_slice(&part);
    }
    if body.len() as u64 != size {
        return Err(short(&url, size, body.len() as u64));
    }
    stats().requests.fetch_add(1, Ordering::Relaxed);
    stats().bytes.fetch_add(size, Ordering::Relaxed);
    Ok(Some(Some(Fetched {
        body: Bytes::from(body),
        header,
    })))
}

fn short(url: &str, want: u64, got: u64) -> Error {
    Error::new(
        ErrorKind::Io,
        "store.short_read",
        None,
        format!("{url}: the object is {want} bytes, the server sent {got}"),
    )
}

impl ObjectSource for ObjectPrefix {
    fn name(&self) -> String {
        self.loc.url.clone()
    }

    fn get_into(&self, key: &str, buf: &mut Vec<u8>, limits: &Limits) -> Result<bool> {
        let Some(got) = self.fetch(key, limits)? else {
            return Ok(false);
        };
        limits.check_alloc(got.body.len() as u64, &format!("object {key}"), None)?;
        buf.clear();
        buf.extend_from_slice(&got.body);
        if !Self::cacheable(key) {
            self.remember_header(key, got.header);
        }
        Ok(true)
    }

    fn size(&self, key: &str) -> Result<Option<u64>> {
        let store = Arc::clone(&self.loc.store);
        let path = self.path(key)?;
        match block_on(async move { store.head(&path).await })? {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(store_error(&self.url_of(key), e)),
        }
    }

    fn list(&self, prefix: &str, limits: &Limits) -> Result<Vec<(String, u64)>> {
        let base = self.loc.path.as_ref().trim_end_matches('/').to_string();
        // The folder the prefix names (`layer/ChunkMetadata/` or `layer/`); its keys are then
        // filtered by the rest of the prefix.
        let dir = match prefix.rsplit_once('/') {
            Some((d, _)) => self.path(d)?,
            None => ObjectPath::parse(&base).map_err(|e| store_error(&self.loc.url, e.into()))?,
        };
        let store = Arc::clone(&self.loc.store);
        let max = limits.max_entries;
        let url = self.loc.url.clone();
        let keys = block_on(async move {
            let mut stream = store.list(Some(&dir));
            let mut keys = Vec::new();
            while let Some(meta) = stream.try_next().await.map_err(|e| store_error(&url, e))? {
                keys.push((meta.location.to_string(), meta.size));
                if keys.len() as u64 > max {
                    return Err(Error::new(
                        ErrorKind::LimitExceeded,
                        "limit.entries",
                        None,
                        "too many objects",
                    ));
                }
            }
            Ok(keys)
        })??;
        let strip = if base.is_empty() {
            String::new()
        } else {
            format!("{base}/")
        };
        let mut out: Vec<(String, u64)> = keys
            .into_iter()
            .filter_map(|(k, n)| k.strip_prefix(&strip).map(|k| (k.to_string(), n)))
            .filter(|(k, _)| k.starts_with(prefix))
            .collect();
        out.sort();
        Ok(out)
    }

    fn object_metadata(&self, key: &str, name: &str) -> Result<Option<String>> {
        if name == HEADER {
            if let Ok(h) = self.headers.lock() {
                if let Some(v) = h.0.get(key) {
                    return Ok(v.clone());
                }
            }
        }
        // Not remembered (or another name): a HEAD request brings the object's metadata.
        let store = Arc::clone(&self.loc.store);
        let path = self.path(key)?;
        let got = block_on(async move {
            store
                .get_opts(
                    &path,
                    GetOptions {
                        head: true,
                        ..GetOptions::default()
                    },
                )
                .await
        })?;
        match got {
            Ok(g) if name == HEADER => Ok(chunk_header(&g.attributes)),
            Ok(g) => Ok(g
                .attributes
                .get(&Attribute::Metadata(name.to_string().into()))
                .map(|v| v.to_string())),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(store_error(&self.url_of(key), e)),
        }
    }

    fn keeps_object_metadata(&self) -> bool {
        self.keeps_metadata
    }

    fn prefetch(&self, keys: &[String], limits: &Limits) {
        let Ok(mut p) = self.prefetch.lock() else { return };
        for key in keys {
            if p.queued.len() >= PREFETCH_QUEUE {
                break;
            }
            if p.started.contains_key(key)
                || p.queued.iter().any(|(k, _)| k == key)
                || (Self::cacheable(key) && self.cached(key).is_some())
            {
                continue;
            }
            p.queued.push_back((key.clone(), limits.max_alloc));
        }
        self.fill(&mut p);
    }

    fn get_range_into(&self, key: &str, offset: u64, len: u64, buf: &mut Vec<u8>, limits: &Limits) -> Result<bool> {
        limits.check_alloc(len, &format!("{len} bytes of object {key}"), None)?;
        let end = offset
            .checked_add(len)
            .ok_or_else(|| Error::invalid_at("store.range", None, format!("object {key}: range past 2^64")))?;
        let loc = Location {
            url: self.url_of(key),
            store: Arc::clone(&self.loc.store),
            path: self.path(key)?,
            max_requests: self.loc.max_requests,
        };
        // The single-object reader's range fetch: a body of another length (a cut-off
        // response) is asked for again, then reported; it is never used.
        let body = match block_on(crate::fetch_range(loc, Arc::clone(&self.permits), offset..end))? {
            Ok(b) => b,
            Err(e) if e.code == "store.not_found" => return Ok(false),
            Err(e) => return Err(e),
        };
        buf.clear();
        buf.extend_from_slice(&body);
        Ok(true)
    }

    fn list_dir(&self, dir: &str, limits: &Limits) -> Result<(Vec<String>, Vec<String>)> {
        // One level, with a delimiter: a group's children without listing its arrays' chunks.
        let base = self.loc.path.as_ref().trim_end_matches('/').to_string();
        let at = match dir.trim_end_matches('/') {
            "" => ObjectPath::parse(&base).map_err(|e| store_error(&self.loc.url, e.into()))?,
            d => self.path(d)?,
        };
        let store = Arc::clone(&self.loc.store);
        let listed = block_on(async move { store.list_with_delimiter(Some(&at)).await })?
            .map_err(|e| store_error(&self.url_of(dir), e))?;
        if (listed.objects.len() + listed.common_prefixes.len()) as u64 > limits.max_entries {
            return Err(Error::limit(
                "limit.entries",
                None,
                format!("{}: more than {} entries", self.url_of(dir), limits.max_entries),
            ));
        }
        let strip = if base.is_empty() {
            String::new()
        } else {
            format!("{base}/")
        };
        let rel = |p: &ObjectPath| p.as_ref().strip_prefix(&strip).map(str::to_string);
        let mut keys: Vec<String> = listed.objects.iter().filter_map(|m| rel(&m.location)).collect();
        let mut dirs: Vec<String> = listed
            .common_prefixes
            .iter()
            .filter_map(|p| rel(p).map(|r| format!("{r}/")))
            .collect();
        keys.sort();
        dirs.sort();
        Ok((keys, dirs))
    }
}

/// Sorted object URLs with the objects of each VDS dataset (the prefix of a
/// `.../VolumeDataLayout` object) replaced by the dataset's prefix URL, in order.
pub fn group_datasets(urls: Vec<String>) -> Vec<String> {
    let suffix = format!("/{LAYOUT_KEY}");
    let datasets: Vec<String> = urls
        .iter()
        .filter_map(|u| u.strip_suffix(&suffix).map(str::to_string))
        .collect();
    if datasets.is_empty() {
        return urls;
    }
    let inside = |u: &str| {
        datasets
            .iter()
            .any(|d| u.len() > d.len() && u.starts_with(d.as_str()) && u.as_bytes()[d.len()] == b'/')
    };
    let mut out: Vec<String> = urls.into_iter().filter(|u| !inside(u)).collect();
    out.extend(datasets);
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dataset in an in-memory store: chunk `L/0` with a header, `L/1` without, a page.
    fn memory_prefix() -> ObjectPrefix {
        use object_store::{Attributes, PutOptions, PutPayload};
        let store = Arc::new(object_store::memory::InMemory::new());
        let put = |key: &str, body: Vec<u8>, headers: &[(&'static str, &str)]| {
            let mut attributes = Attributes::new();
            for (name, h) in headers {
                attributes.insert(Attribute::Metadata((*name).into()), h.to_string().into());
            }
            let opts = PutOptions {
                attributes,
                ..PutOptions::default()
            };
            let store = Arc::clone(&store);
            let path = ObjectPath::parse(key).unwrap();
            block_on(async move { store.put_opts(&path, PutPayload::from(body), opts).await })
                .unwrap()
                .unwrap();
        };
        put("ds/VolumeDataLayout", b"{}".to_vec(), &[]);
        put("ds/L/0", vec![7; 1000], &[(HEADER, "AAECAwQFBgc=")]);
        put("ds/L/1", vec![8; 3000], &[]);
        put("ds/M/2", vec![8; 30], &[(LEGACY_HEADER, "BwYFBAMCAQA=")]);
        put(
            "ds/M/3",
            vec![8; 30],
            &[(LEGACY_HEADER, "BwYFBAMCAQA="), (HEADER, "AAECAwQFBgc=")],
        );
        put("ds/L/ChunkMetadata/0", vec![0; 64], &[]);
        put("other/L/0", vec![9; 10], &[]);
        ObjectPrefix::new(Location {
            url: "s3://bucket/ds".into(),
            store,
            path: ObjectPath::parse("ds").unwrap(),
            max_requests: 4,
        })
    }

    /// The legacy header name is read as the current one, by a GET and by a HEAD; with both,
    /// the current one counts (as in OpenVDS).
    #[test]
    fn legacy_chunk_metadata_header() {
        for fetch_first in [true, false] {
            let p = memory_prefix();
            if fetch_first {
                let mut buf = Vec::new();
                for k in ["M/2", "M/3"] {
                    assert!(p.get_into(k, &mut buf, &Limits::default()).unwrap());
                }
            }
            assert_eq!(
                p.object_metadata("M/2", HEADER).unwrap().as_deref(),
                Some("BwYFBAMCAQA=")
            );
            assert_eq!(
                p.object_metadata("M/3", HEADER).unwrap().as_deref(),
                Some("AAECAwQFBgc=")
            );
        }
    }

    #[test]
    fn objects_headers_sizes_and_listings() {
        let p = memory_prefix();
        let limits = Limits::default();
        let mut buf = Vec::new();
        assert!(p.get_into("L/0", &mut buf, &limits).unwrap());
        assert_eq!(buf, vec![7; 1000]);
        assert_eq!(
            p.object_metadata("L/0", HEADER).unwrap().as_deref(),
            Some("AAECAwQFBgc=")
        );
        assert!(p.get_into("L/1", &mut buf, &limits).unwrap());
        assert_eq!(p.object_metadata("L/1", HEADER).unwrap(), None);
        assert!(!p.get_into("L/2", &mut buf, &limits).unwrap());
        assert_eq!(p.size("L/1").unwrap(), Some(3000));
        assert_eq!(p.size("L/9").unwrap(), None);
        assert_eq!(
            p.list("L/", &limits).unwrap(),
            vec![
                ("L/0".to_string(), 1000),
                ("L/1".to_string(), 3000),
                ("L/ChunkMetadata/0".to_string(), 64)
            ]
        );
        assert_eq!(p.list("L/ChunkMetadata/", &limits).unwrap().len(), 1);
        // The size is checked before the body is held.
        let small = Limits {
            max_alloc: 2000,
            ..Limits::default()
        };
        assert_eq!(p.get_into("L/1", &mut buf, &small).unwrap_err().code, "limit.alloc");
        let few = Limits {
            max_entries: 2,
            ..Limits::default()
        };
        assert_eq!(p.list("L/", &few).unwrap_err().code, "limit.entries");
    }

    /// A store whose first ranged GET of each object sends half the range: a cut-off response.
    #[derive(Debug, Default)]
    struct CutOnce {
        inner: object_store::memory::InMemory,
        cut: Mutex<std::collections::HashSet<ObjectPath>>,
        /// Cut every ranged response, not only the first.
        always: bool,
    }

    impl std::fmt::Display for CutOnce {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "CutOnce")
        }
    }

    #[async_trait::async_trait]
    impl ObjectStore for CutOnce {
        async fn put_opts(
            &self,
            location: &ObjectPath,
            payload: object_store::PutPayload,
            opts: object_store::PutOptions,
        ) -> object_store::Result<object_store::PutResult> {
            self.inner.put_opts(location, payload, opts).await
        }
        async fn put_multipart_opts(
            &self,
            location: &ObjectPath,
            opts: object_store::PutMultipartOptions,
        ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
            self.inner.put_multipart_opts(location, opts).await
        }
        async fn get_opts(
            &self,
            location: &ObjectPath,
            options: GetOptions,
        ) -> object_store::Result<object_store::GetResult> {
            let ranged = options.range.is_some();
            let got = self.inner.get_opts(location, options).await?;
            let first = self.cut.lock().unwrap().insert(location.clone());
            if !ranged || !(first || self.always) {
                return Ok(got);
            }
            let (meta, range, attributes) = (got.meta.clone(), got.range.clone(), got.attributes.clone());
            let mut body = got.bytes().await?;
            body.truncate(body.len() / 2);
            let stream = futures::stream::once(async move { Ok(body) });
            Ok(object_store::GetResult {
                payload: object_store::GetResultPayload::Stream(Box::pin(stream)),
                meta,
                range,
                attributes,
            })
        }
        async fn delete(&self, location: &ObjectPath) -> object_store::Result<()> {
            self.inner.delete(location).await
        }
        fn list(
            &self,
            prefix: Option<&ObjectPath>,
        ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
            self.inner.list(prefix)
        }
        async fn list_with_delimiter(
            &self,
            prefix: Option<&ObjectPath>,
        ) -> object_store::Result<object_store::ListResult> {
            self.inner.list_with_delimiter(prefix).await
        }
        async fn copy(&self, from: &ObjectPath, to: &ObjectPath) -> object_store::Result<()> {
            self.inner.copy(from, to).await
        }
        async fn copy_if_not_exists(&self, from: &ObjectPath, to: &ObjectPath) -> object_store::Result<()> {
            self.inner.copy_if_not_exists(from, to).await
        }
    }

    /// A ranged read (a Zarr shard's index or inner chunk) whose response comes back short is
    /// asked for again, as the single-object reader does, and the full range is used; a range
    /// that keeps coming back short is `store.short_read`, never short bytes.
    #[test]
    fn a_cut_off_range_is_asked_for_again() {
        for always in [false, true] {
            let store = Arc::new(CutOnce {
                always,
                ..CutOnce::default()
            });
            let body: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
            let s = Arc::clone(&store);
            let b = body.clone();
            block_on(async move { s.put(&ObjectPath::from("ds/shard"), b.into()).await })
                .unwrap()
                .unwrap();
            let p = ObjectPrefix::new(Location {
                url: "s3://bucket/ds".into(),
                store,
                path: ObjectPath::parse("ds").unwrap(),
                max_requests: 4,
            });
            let mut buf = Vec::new();
            let got = p.get_range_into("shard", 1000, 3000, &mut buf, &Limits::default());
            if always {
                assert_eq!(got.unwrap_err().code, "store.short_read");
            } else {
                assert!(got.unwrap());
                assert_eq!(buf, body[1000..4000]);
            }
            assert!(!p.get_range_into("absent", 0, 10, &mut buf, &Limits::default()).unwrap());
        }
    }

    #[test]
    fn prefetched_objects_are_the_objects() {
        let p = memory_prefix();
        let limits = Limits::default();
        let keys: Vec<String> = ["L/0", "L/1", "L/2", "L/ChunkMetadata/0"]
            .iter()
            .map(|k| k.to_string())
            .collect();
        p.prefetch(&keys, &limits);
        let mut buf = Vec::new();
        assert!(p.get_into("L/1", &mut buf, &limits).unwrap());
        assert_eq!(buf, vec![8; 3000]);
        assert!(p.get_into("L/0", &mut buf, &limits).unwrap());
        assert_eq!(buf, vec![7; 1000]);
        assert_eq!(
            p.object_metadata("L/0", HEADER).unwrap().as_deref(),
            Some("AAECAwQFBgc=")
        );
        assert!(!p.get_into("L/2", &mut buf, &limits).unwrap());
        assert!(p.get_into("L/ChunkMetadata/0", &mut buf, &limits).unwrap());
        assert_eq!(buf.len(), 64);
        // Everything announced was taken.
        let state = p.prefetch.lock().unwrap();
        assert!(state.started.is_empty() && state.queued.is_empty());
        drop(state);
        // A prefetch respects the allocation limit too.
        let small = Limits {
            max_alloc: 2000,
            ..Limits::default()
        };
        p.prefetch(&["L/1".to_string()], &small);
        assert_eq!(p.get_into("L/1", &mut buf, &small).unwrap_err().code, "limit.alloc");
    }

    #[test]
    fn a_long_announcement_streams_through_the_window() {
        let p = memory_prefix();
        let limits = Limits::default();
        let keys: Vec<String> = (0..PREFETCH_OBJECTS * 3).map(|i| format!("L/{}", i % 2)).collect();
        // Duplicates are announced once.
        p.prefetch(&keys, &limits);
        assert_eq!(p.prefetch.lock().unwrap().started.len(), 2);
        let many: Vec<String> = (0..PREFETCH_OBJECTS * 3).map(|i| format!("L/x{i}")).collect();
        p.prefetch(&many, &limits);
        {
            let state = p.prefetch.lock().unwrap();
            assert_eq!(state.started.len(), PREFETCH_OBJECTS);
            assert_eq!(state.queued.len(), PREFETCH_OBJECTS * 3 - (PREFETCH_OBJECTS - 2));
        }
        let mut buf = Vec::new();
        for k in &many {
            assert!(!p.get_into(k, &mut buf, &limits).unwrap());
        }
        let state = p.prefetch.lock().unwrap();
        assert_eq!(state.started.len(), 2);
        assert!(state.queued.is_empty());
    }

    #[test]
    fn datasets_are_one_entry_of_a_listing() {
        let urls = [
            "s3://b/p/a.gvrs",
            "s3://b/p/cube/Dimensions_012LOD0/0",
            "s3://b/p/cube/Dimensions_012LOD0/ChunkMetadata/0",
            "s3://b/p/cube/LayerStatus",
            "s3://b/p/cube/VolumeDataLayout",
            "s3://b/p/cube2.volp",
        ];
        let got = group_datasets(urls.iter().map(|s| s.to_string()).collect());
        assert_eq!(got, ["s3://b/p/a.gvrs", "s3://b/p/cube", "s3://b/p/cube2.volp"]);
        let plain = vec!["s3://b/x".to_string()];
        assert_eq!(group_datasets(plain.clone()), plain);
    }

    #[test]
    fn keys_stay_under_the_prefix() {
        let loc = connect("s3://bucket/data/cube", &StoreOptions::default()).unwrap();
        let p = ObjectPrefix::new(loc);
        assert_eq!(p.path("LayerStatus").unwrap().as_ref(), "data/cube/LayerStatus");
        assert_eq!(
            p.path("Dimensions_012LOD0/ChunkMetadata/0").unwrap().as_ref(),
            "data/cube/Dimensions_012LOD0/ChunkMetadata/0"
        );
        for bad in ["", "../x", "a//b", "/abs", "a/./b"] {
            assert_eq!(p.path(bad).unwrap_err().code, "vds.store.key", "{bad:?}");
        }
        assert!(ObjectPrefix::cacheable("VolumeDataLayout"));
        assert!(ObjectPrefix::cacheable("L/ChunkMetadata/3"));
        assert!(!ObjectPrefix::cacheable("L/3"));
    }
}
