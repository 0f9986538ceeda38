//! Zarr stores on object stores, through zarrs' own `object_store` adapter
//! (`zarrs_object_store::AsyncObjectStore`), made synchronous on this crate's runtime by
//! zarrs_storage's `AsyncToSyncStorageAdapter`: zarrs' synchronous array API (and rasterpack's
//! Zarr writer on rayon threads) use it as they use a directory.
//!
//! Writing follows the rule of multi-object outputs (see [`crate::PrefixTarget`]): the chunks
//! first, the metadata documents (`zarr.json`, `.zarray`, `.zgroup`, `.zattrs`) held back and
//! put last, the root's last of all, since they make the store (and each array) visible; on a
//! failure, a drop before [`ZarrUpload::commit`] or a signal ([`ZarrUpload::cleanup`]) every
//! key put is deleted. An occupied prefix needs `force`, and is replaced only when it is a Zarr
//! store (its root metadata is deleted first).

use std::sync::{Arc, Mutex};

use object_store::path::Path as ObjectPath;
use object_store::prefix::PrefixStore;
use object_store::{ObjectStore, PutPayload};
use rasterpack_common::{Error, ErrorKind, Result};
use tokio::runtime::Runtime;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use zarrs_object_store::AsyncObjectStore;
use zarrs_storage::storage_adapter::async_to_sync::{AsyncToSyncBlockOn, AsyncToSyncStorageAdapter};
use zarrs_storage::{
    Bytes, ListableStorageTraits, OffsetBytesIterator, ReadableStorageTraits, StorageError, StoreKey, StorePrefix,
    WritableStorageTraits,
};

use crate::prefix::{check_prefix, delete_old, Cleanup, PrefixKind, Shared};
use crate::{block_on, connect, runtime, store_error, Location, StoreOptions};

/// Runs zarrs' async store calls on rasterpack-store's runtime (from any non-runtime thread).
#[derive(Debug, Clone, Copy)]
pub struct BlockOn(&'static Runtime);

impl AsyncToSyncBlockOn for BlockOn {
    fn block_on<F: core::future::Future>(&self, future: F) -> F::Output {
        self.0.block_on(future)
    }
}

/// zarrs' object_store adapter on the objects under a prefix, as a synchronous store.
pub type SyncObjectStore = AsyncToSyncStorageAdapter<AsyncObjectStore<PrefixStore<Arc<dyn ObjectStore>>>, BlockOn>;

/// The objects under `loc`'s path as a synchronous zarrs store (keys relative to the prefix).
pub fn sync_store(loc: &Location) -> Result<SyncObjectStore> {
    let prefixed = PrefixStore::new(Arc::clone(&loc.store), loc.path.clone());
    Ok(AsyncToSyncStorageAdapter::new(
        Arc::new(AsyncObjectStore::new(prefixed)),
        BlockOn(runtime()?),
    ))
}

/// A Zarr store URL opened for reading: zarrs reads its metadata and, chunk by chunk, only the
/// keys a read needs (whole chunks, or the ranges of a shard's index and inner chunks).
pub fn open_read(url: &str, opts: &StoreOptions) -> Result<Arc<SyncObjectStore>> {
    let loc = connect(url.trim_end_matches('/'), opts)?;
    Ok(Arc::new(sync_store(&loc)?))
}

/// Does the prefix URL hold a Zarr store (a root `zarr.json`, `.zgroup` or `.zarray`)?
pub fn is_store(url: &str, opts: &StoreOptions) -> Result<bool> {
    let store = open_read(url, opts)?;
    for key in ["zarr.json", ".zgroup", ".zarray"] {
        let k = StoreKey::new(key).map_err(|e| Error::usage(format!("internal: {e}")))?;
        if store.size_key(&k).map_err(|e| zarr_store_error(url, e))?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

fn zarr_store_error(url: &str, e: StorageError) -> Error {
    Error::new(ErrorKind::Io, "store.request_failed", None, format!("{url}: {e}"))
}

/// Is `key` a Zarr metadata document (put last)?
fn is_metadata(key: &str) -> bool {
    let name = key.rsplit('/').next().unwrap_or(key);
    matches!(name, "zarr.json" | ".zarray" | ".zgroup" | ".zattrs" | ".zmetadata")
}

/// Is `key` a root metadata document, whose presence makes the prefix a Zarr store?
fn is_root(key: &str) -> bool {
    matches!(key, "zarr.json" | ".zgroup" | ".zarray")
}

/// A Zarr store at a prefix: replaced by `--force` only when its root metadata is there.
const ZARR_KIND: PrefixKind = PrefixKind {
    noun: "Zarr store",
    example: "s3://bucket/name.zarr",
    is_root,
    refuse: |old| (!old.iter().any(|k| is_root(k))).then(|| "holds objects but no Zarr store".to_string()),
};

/// A Zarr store output at a prefix URL, checked before anything is read.
#[derive(Debug, Clone)]
pub struct ZarrTarget {
    loc: Location,
    /// The keys of the store `--force` replaces (relative to the prefix).
    old: Vec<String>,
}

impl ZarrTarget {
    /// Check `url` (a trailing `/` is ignored) as the prefix of a new Zarr store: a prefix
    /// holding any object is refused (exit 2) unless `force`, and with `force` unless it is a
    /// Zarr store (root `zarr.json`, `.zgroup` or `.zarray`).
    pub fn check(url: &str, opts: &StoreOptions, force: bool) -> Result<ZarrTarget> {
        let (loc, old) = check_prefix(url, opts, force, &ZARR_KIND)?;
        Ok(ZarrTarget { loc, old })
    }

    /// A target on an already connected store (tests with an in-memory store).
    pub fn on(loc: Location) -> ZarrTarget {
        ZarrTarget { loc, old: Vec::new() }
    }

    /// The prefix URL, for messages.
    pub fn url(&self) -> &str {
        &self.loc.url
    }

    /// Start writing: with `force`, the old store is deleted now (its root metadata first).
    pub fn start(&self) -> Result<ZarrUpload> {
        if !self.old.is_empty() {
            delete_old(&self.loc, &self.old, &ZARR_KIND)?;
        }
        Ok(ZarrUpload {
            inner: sync_store(&self.loc)?,
            loc: self.loc.clone(),
            held: Mutex::new(Vec::new()),
            shared: Arc::new(Mutex::new(Shared::default())),
            permits: Arc::new(Semaphore::new(self.loc.max_requests.max(1))),
            pending: Mutex::new(Vec::new()),
            failed: Arc::new(Mutex::new(None)),
        })
    }
}

/// A Zarr store being written under a prefix: a zarrs writable store (see the module's rule).
pub struct ZarrUpload {
    inner: SyncObjectStore,
    loc: Location,
    /// Metadata documents, put by [`ZarrUpload::commit`].
    held: Mutex<Vec<(StoreKey, Bytes)>>,
    shared: Arc<Mutex<Shared>>,
    /// The chunk PUTs' own pool: at most `max_requests` in flight (the writer's threads only
    /// encode and hand over; one blocks when the pool is full, which bounds the bodies held).
    permits: Arc<Semaphore>,
    /// The PUTs started, waited for by [`ZarrUpload::commit`].
    pending: Mutex<Vec<JoinHandle<()>>>,
    /// The first failed PUT (its URL and the store's answer): every later call fails with it.
    failed: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for ZarrUpload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZarrUpload").field("url", &self.loc.url).finish()
    }
}

fn stopped() -> StorageError {
    StorageError::Other("the upload was stopped".into())
}

impl ZarrUpload {
    /// A handle that deletes what this upload wrote, for a signal handler's thread.
    pub fn cleanup(&self) -> Cleanup {
        Cleanup {
            store: Arc::clone(&self.loc.store),
            shared: Arc::clone(&self.shared),
            max_requests: self.loc.max_requests,
            is_root,
        }
    }

    /// The first PUT that failed, as this call's error.
    fn check_failed(&self) -> std::result::Result<(), StorageError> {
        match &*self.failed.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(msg) => Err(StorageError::Other(msg.clone())),
            None => Ok(()),
        }
    }

    /// Start the PUT of one key in the pool (waiting for room), recorded for the cleanup
    /// first; its failure comes back from a later call or from [`ZarrUpload::commit`].
    fn put(&self, key: &StoreKey, value: Bytes) -> std::result::Result<(), StorageError> {
        self.check_failed()?;
        let path = ObjectPath::parse(format!("{}/{}", self.loc.path.as_ref(), key.as_str()))
            .map_err(|e| StorageError::Other(format!("key {key}: {e}")))?;
        let permit = block_on(Arc::clone(&self.permits).acquire_owned())
            .map_err(|e| StorageError::Other(e.message))?
            .map_err(|e| StorageError::Other(e.to_string()))?;
        self.shared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .begin_put(path.clone())
            .map_err(|e| StorageError::Other(e.message))?;
        let url = format!("{}/{key}", self.loc.url.trim_end_matches('/'));
        if crate::log_requests() {
            eprintln!("rasterpack-store: PUT {url}");
        }
        let store = Arc::clone(&self.loc.store);
        let shared = Arc::clone(&self.shared);
        let failed = Arc::clone(&self.failed);
        let rt = runtime().map_err(|e| StorageError::Other(e.message))?;
        let handle = rt.spawn(async move {
            let r = store.put(&path, PutPayload::from(value)).await;
            drop(permit);
            if let Err(e) = r {
                failed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_or_insert_with(|| store_error(&url, e).message);
            }
            shared.lock().unwrap_or_else(|e| e.into_inner()).in_flight -= 1;
        });
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.retain(|h| !h.is_finished());
        pending.push(handle);
        Ok(())
    }

    /// Wait for every PUT started; the first failure.
    fn wait_all(&self) -> Result<()> {
        let handles = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        for h in handles {
            let _ = block_on(h)?;
        }
        self.check_failed()
            .map_err(|e| Error::new(ErrorKind::Io, "store.request_failed", None, e.to_string()))
    }

    /// Every chunk is stored: put the metadata documents, deepest first (the root's last), and
    /// keep the store.
    pub fn commit(&self) -> Result<()> {
        self.wait_all()?;
        let mut held = std::mem::take(&mut *self.held.lock().unwrap_or_else(|e| e.into_inner()));
        held.sort_by_key(|(k, _)| std::cmp::Reverse(k.as_str().matches('/').count()));
        for (key, value) in held {
            self.put(&key, value)
                .map_err(|e| zarr_store_error(&format!("{}/{key}", self.loc.url), e))?;
            // One at a time: each document after what it describes is stored.
            self.wait_all()?;
        }
        self.shared.lock().unwrap_or_else(|e| e.into_inner()).commit()
    }
}

impl WritableStorageTraits for ZarrUpload {
    fn set(&self, key: &StoreKey, value: Bytes) -> std::result::Result<(), StorageError> {
        if is_metadata(key.as_str()) {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            held.retain(|(k, _)| k != key);
            held.push((key.clone(), value));
            return Ok(());
        }
        self.put(key, value)
    }

    fn set_partial_many(&self, _key: &StoreKey, _values: OffsetBytesIterator) -> std::result::Result<(), StorageError> {
        Err(StorageError::Unsupported("partial writes".into()))
    }

    fn erase(&self, key: &StoreKey) -> std::result::Result<(), StorageError> {
        // zarrs erases a chunk that is all fill value instead of storing it.
        if self.shared.lock().unwrap_or_else(|e| e.into_inner()).stopped {
            return Err(stopped());
        }
        self.inner.erase(key)
    }

    fn erase_prefix(&self, prefix: &StorePrefix) -> std::result::Result<(), StorageError> {
        let keys = self.inner.list_prefix(prefix)?;
        for k in keys {
            self.erase(&k)?;
        }
        Ok(())
    }

    fn supports_set_partial(&self) -> bool {
        false
    }
}

impl Drop for ZarrUpload {
    fn drop(&mut self) {
        if !self.shared.lock().map(|s| s.committed).unwrap_or(false) {
            self.cleanup().run();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;

    use crate::testutil::{keys, location};

    fn target(store: &Arc<InMemory>) -> ZarrTarget {
        ZarrTarget::on(location(store, "a.zarr"))
    }

    #[test]
    fn metadata_waits_for_commit_and_failure_deletes_all() {
        let store = Arc::new(InMemory::new());
        let up = target(&store).start().unwrap();
        let k = |s: &str| StoreKey::new(s).unwrap();
        up.set(&k("zarr.json"), Bytes::from_static(b"{}")).unwrap();
        up.set(&k("c/0/0"), Bytes::from_static(b"chunk")).unwrap();
        // The chunk's PUT runs in the pool (stored now or soon); the metadata waits for commit.
        assert!(
            !keys(&store).iter().any(|k| k.ends_with("zarr.json")),
            "metadata before commit"
        );
        up.commit().unwrap();
        assert_eq!(
            keys(&store),
            vec!["a.zarr/c/0/0".to_string(), "a.zarr/zarr.json".to_string()]
        );
        drop(up);
        assert_eq!(keys(&store).len(), 2, "a committed store stays");

        let store = Arc::new(InMemory::new());
        let up = target(&store).start().unwrap();
        up.set(&k("zarr.json"), Bytes::from_static(b"{}")).unwrap();
        up.set(&k("c/0/0"), Bytes::from_static(b"chunk")).unwrap();
        drop(up);
        assert!(keys(&store).is_empty(), "a dropped upload leaves nothing");
    }
}

#[cfg(test)]
mod pool_tests {
    use super::*;
    use futures::stream::BoxStream;
    use object_store::memory::InMemory;
    use object_store::{
        GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, PutMultipartOptions, PutOptions, PutResult,
    };
    use std::sync::atomic::{AtomicUsize, Ordering};

    use crate::testutil::keys;

    /// An in-memory store whose PUTs take 20 ms each, counting how many run at once.
    #[derive(Debug, Default)]
    struct Slow {
        inner: Arc<InMemory>,
        now: AtomicUsize,
        most: AtomicUsize,
    }

    impl std::fmt::Display for Slow {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "Slow")
        }
    }

    #[async_trait::async_trait]
    impl ObjectStore for Slow {
        async fn put_opts(
            &self,
            location: &ObjectPath,
            payload: PutPayload,
            opts: PutOptions,
        ) -> object_store::Result<PutResult> {
            let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(n, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            self.now.fetch_sub(1, Ordering::SeqCst);
            self.inner.put_opts(location, payload, opts).await
        }
        async fn put_multipart_opts(
            &self,
            location: &ObjectPath,
            opts: PutMultipartOptions,
        ) -> object_store::Result<Box<dyn MultipartUpload>> {
            self.inner.put_multipart_opts(location, opts).await
        }
        async fn get_opts(&self, location: &ObjectPath, options: GetOptions) -> object_store::Result<GetResult> {
            self.inner.get_opts(location, options).await
        }
        async fn delete(&self, location: &ObjectPath) -> object_store::Result<()> {
            self.inner.delete(location).await
        }
        fn list(&self, prefix: Option<&ObjectPath>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
            self.inner.list(prefix)
        }
        async fn list_with_delimiter(&self, prefix: Option<&ObjectPath>) -> object_store::Result<ListResult> {
            self.inner.list_with_delimiter(prefix).await
        }
        async fn copy(&self, from: &ObjectPath, to: &ObjectPath) -> object_store::Result<()> {
            self.inner.copy(from, to).await
        }
        async fn copy_if_not_exists(&self, from: &ObjectPath, to: &ObjectPath) -> object_store::Result<()> {
            self.inner.copy_if_not_exists(from, to).await
        }
    }

    /// The chunk PUTs run in the upload's own pool: with 8 writer threads and `max_requests`
    /// 3, never more than 3 at once, yet more than one (the writers do not wait for each PUT);
    /// every chunk is stored and the metadata after them.
    #[test]
    fn chunk_puts_run_in_a_pool_bounded_by_max_requests() {
        let slow = Arc::new(Slow::default());
        let target = ZarrTarget::on(Location {
            url: "memory:///a.zarr".into(),
            store: Arc::clone(&slow) as Arc<dyn ObjectStore>,
            path: ObjectPath::from("a.zarr"),
            max_requests: 3,
        });
        let up = target.start().unwrap();
        let k = |s: String| StoreKey::new(s).unwrap();
        std::thread::scope(|sc| {
            for t in 0..8 {
                let up = &up;
                sc.spawn(move || {
                    for i in 0..5 {
                        up.set(&k(format!("c/{t}/{i}")), Bytes::from(vec![t as u8; 1000]))
                            .unwrap();
                    }
                });
            }
        });
        up.set(&k("zarr.json".into()), Bytes::from_static(b"{}")).unwrap();
        up.commit().unwrap();
        let most = slow.most.load(Ordering::SeqCst);
        assert!(most <= 3, "{most} PUTs at once with max_requests 3");
        assert!(most >= 2, "the PUTs did not overlap ({most} at most)");
        let stored = keys(&slow.inner);
        assert_eq!(stored.len(), 41, "{stored:?}");
        assert!(stored.contains(&"a.zarr/zarr.json".to_string()));
    }
}
