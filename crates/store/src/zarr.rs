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
use object_store::ObjectStore;
use rasterpack_common::{Error, ErrorKind, Result};
use tokio::runtime::Runtime;
use zarrs_object_store::AsyncObjectStore;
use zarrs_storage::storage_adapter::async_to_sync::{AsyncToSyncBlockOn, AsyncToSyncStorageAdapter};
use zarrs_storage::{
    Bytes, ListableStorageTraits, OffsetBytesIterator, ReadableStorageTraits, StorageError, StoreKey, StorePrefix,
    WritableStorageTraits,
};

use crate::prefix::{check_prefix, delete_old, Cleanup, PrefixKind, Shared};
use crate::{connect, runtime, Location, StoreOptions};

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

    /// Put one key now, recorded for the cleanup first.
    fn put(&self, key: &StoreKey, value: Bytes) -> std::result::Result<(), StorageError> {
        let path = ObjectPath::parse(format!("{}/{}", self.loc.path.as_ref(), key.as_str()))
            .map_err(|e| StorageError::Other(format!("key {key}: {e}")))?;
        self.shared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .begin_put(path)
            .map_err(|e| StorageError::Other(e.message))?;
        let r = self.inner.set(key, value);
        self.shared.lock().unwrap_or_else(|e| e.into_inner()).in_flight -= 1;
        r
    }

    /// Every chunk is stored: put the metadata documents, deepest first (the root's last), and
    /// keep the store.
    pub fn commit(&self) -> Result<()> {
        let mut held = std::mem::take(&mut *self.held.lock().unwrap_or_else(|e| e.into_inner()));
        held.sort_by_key(|(k, _)| std::cmp::Reverse(k.as_str().matches('/').count()));
        for (key, value) in held {
            self.put(&key, value)
                .map_err(|e| zarr_store_error(&format!("{}/{key}", self.loc.url), e))?;
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
        assert_eq!(keys(&store), vec!["a.zarr/c/0/0".to_string()], "metadata before commit");
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
