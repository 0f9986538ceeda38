//! Writing a dataset of many objects under one prefix (OpenVDS's cloud layout): an
//! [`ObjectSink`] whose `put`s run concurrently on the store, bounded by `max_requests`.
//!
//! An object store has no rename, so a multi-object output cannot appear all at once. The rule
//! instead (the writer keeps to it): every chunk object first, the objects that make the
//! dataset visible (`LayerStatus`, then `VolumeDataLayout`) last, each after a barrier; on any
//! failure, a drop before `commit` or a signal ([`PrefixUpload::cleanup`]), every object this
//! upload put is deleted. A prefix that already holds objects is refused unless `--force`;
//! with `--force` the old dataset is deleted (its `VolumeDataLayout` first, so it stops being
//! a dataset before any of its objects go) when writing starts, and only a prefix whose
//! objects all have the shape of a VDS dataset's keys is replaced: other objects are never
//! deleted.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{Attribute, Attributes, ObjectStore, PutOptions, PutPayload};
use rasterpack_common::{Error, ErrorKind, ObjectSink, Result};
use tokio::task::JoinHandle;

use crate::{block_on, connect, runtime, store_error, Location, StoreOptions};

/// The object whose presence makes a prefix a VDS dataset: deleted first, written last.
const LAYOUT_KEY: &str = "VolumeDataLayout";
/// How long a signal's cleanup waits for the PUTs in flight to end before deleting.
const CLEANUP_WAIT: Duration = Duration::from_secs(30);

/// Is `key` (relative to a dataset's prefix) one of the keys of OpenVDS's layout:
/// `VolumeDataLayout`, `LayerStatus`, `<layer>/<n>`, `<layer>/ChunkMetadata/<n>`?
pub fn is_vds_key(key: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let parts: Vec<&str> = key.split('/').collect();
    match parts[..] {
        [one] => one == LAYOUT_KEY || one == "LayerStatus",
        [layer, n] => !layer.is_empty() && digits(n),
        [layer, "ChunkMetadata", n] => !layer.is_empty() && digits(n),
        _ => false,
    }
}

/// What the PUTs share with the cleanup: every key attempted, PUTs in flight, and whether the
/// upload has been stopped (no PUT starts after that).
#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub(crate) attempted: Vec<ObjectPath>,
    pub(crate) in_flight: usize,
    pub(crate) stopped: bool,
    pub(crate) committed: bool,
}

/// The error of a PUT or commit after the upload was stopped.
pub(crate) fn interrupted() -> Error {
    Error::new(ErrorKind::Io, "output.interrupted", None, "the upload was stopped")
}

impl Shared {
    /// Start a PUT of `path` (recorded for the cleanup first), unless the upload was stopped.
    pub(crate) fn begin_put(&mut self, path: ObjectPath) -> Result<()> {
        if self.stopped {
            return Err(interrupted());
        }
        self.attempted.push(path);
        self.in_flight += 1;
        Ok(())
    }

    /// Keep what was written, unless the upload was stopped.
    pub(crate) fn commit(&mut self) -> Result<()> {
        if self.stopped {
            return Err(interrupted());
        }
        self.committed = true;
        Ok(())
    }
}

/// What kind of multi-object output a prefix holds, for the checks and deletions that VDS
/// datasets and Zarr stores share.
#[derive(Debug)]
pub(crate) struct PrefixKind {
    /// "dataset" or "store", in messages.
    pub(crate) noun: &'static str,
    /// An example URL naming a prefix, for the "not the bucket" message.
    pub(crate) example: &'static str,
    /// The keys whose presence makes the prefix one of these: deleted first, written last.
    pub(crate) is_root: fn(&str) -> bool,
    /// With `--force`: why the old keys are not replaced (they are not all of this kind), or
    /// `None` when they are.
    pub(crate) refuse: fn(&[String]) -> Option<String>,
}

/// OpenVDS's cloud layout: replaced only when every key has the shape of a dataset's.
pub(crate) const VDS_KIND: PrefixKind = PrefixKind {
    noun: "dataset",
    example: "s3://bucket/name",
    is_root: |k| k == LAYOUT_KEY,
    refuse: |old| {
        old.iter()
            .find(|k| !is_vds_key(k))
            .map(|other| format!("holds {other}, which is not part of a VDS dataset"))
    },
};

/// Check `url` (a trailing `/` is ignored) as the prefix of a new output of `kind`: reachable,
/// below the bucket, empty unless `force`, and with `force` holding only what `kind` replaces.
/// Returns the location and the old keys (relative to the prefix).
pub(crate) fn check_prefix(
    url: &str,
    opts: &StoreOptions,
    force: bool,
    kind: &PrefixKind,
) -> Result<(Location, Vec<String>)> {
    let trimmed = url.trim_end_matches('/');
    let loc = connect(trimmed, opts)?;
    if loc.path.as_ref().is_empty() {
        return Err(Error::usage(format!(
            "{url}: name a prefix for the {} ({}), not the bucket",
            kind.noun, kind.example
        )));
    }
    let store = Arc::clone(&loc.store);
    let prefix = loc.path.clone();
    let keys = block_on(async move {
        store
            .list(Some(&prefix))
            .map_ok(|m| m.location)
            .try_collect::<Vec<_>>()
            .await
    })?
    .map_err(|e| store_error(url, e))?;
    let base = format!("{}/", loc.path.as_ref());
    let old: Vec<String> = keys
        .iter()
        .filter_map(|k| k.as_ref().strip_prefix(&base).map(str::to_string))
        .collect();
    if let Some(first) = old.first() {
        if !force {
            return Err(Error::new(
                ErrorKind::Usage,
                "output.exists",
                None,
                format!(
                    "{trimmed}/ holds objects ({first}, ...); pass --force to replace the {} there",
                    kind.noun
                ),
            ));
        }
        if let Some(why) = (kind.refuse)(&old) {
            return Err(Error::new(
                ErrorKind::Usage,
                "output.exists",
                None,
                format!(
                    "{trimmed}/ {why}: --force replaces a {} only, never other objects; choose another prefix",
                    kind.noun
                ),
            ));
        }
    }
    Ok((loc, old))
}

/// `--force`: delete the old output's keys (relative to `loc`'s prefix), its root keys first
/// so it stops being one before its other objects go. Errors name the prefix URL.
pub(crate) fn delete_old(loc: &Location, old: &[String], kind: &PrefixKind) -> Result<()> {
    let old: Vec<ObjectPath> = old
        .iter()
        .map(|k| {
            ObjectPath::parse(format!("{}/{k}", loc.path.as_ref()))
                .map_err(|e| Error::usage(format!("internal: object key {k:?}: {e}")))
        })
        .collect::<Result<_>>()?;
    delete_all(&loc.store, old, loc.max_requests, kind.is_root)
        .map_err(|e| Error::new(e.kind, e.code.clone(), None, format!("{}: {}", loc.url, e.message)))
}

/// A dataset output at a prefix URL, checked before anything is read: the store is reachable,
/// the URL names a prefix below the bucket, and nothing is there unless `force`.
#[derive(Debug, Clone)]
pub struct PrefixTarget {
    loc: Location,
    /// The keys of the dataset `--force` replaces (relative to the prefix).
    old: Vec<String>,
}

impl PrefixTarget {
    /// Check `url` (a trailing `/` is ignored) as the prefix of a new dataset. A prefix holding
    /// any object is refused (exit 2) unless `force`; with `force`, one holding an object that
    /// is not a VDS dataset's is refused too.
    pub fn check(url: &str, opts: &StoreOptions, force: bool) -> Result<PrefixTarget> {
        let (loc, old) = check_prefix(url, opts, force, &VDS_KIND)?;
        Ok(PrefixTarget { loc, old })
    }

    /// A target on an already connected store (tests with an in-memory store).
    pub fn on(loc: Location) -> PrefixTarget {
        PrefixTarget { loc, old: Vec::new() }
    }

    /// The prefix URL, for messages.
    pub fn url(&self) -> &str {
        &self.loc.url
    }

    /// The sink that writes the dataset.
    pub fn start(&self) -> PrefixUpload {
        PrefixUpload {
            target: self.clone(),
            pending: VecDeque::new(),
            shared: Arc::new(Mutex::new(Shared::default())),
        }
    }
}

/// A dataset being written under a prefix (see the module's documentation for the rule).
#[derive(Debug)]
pub struct PrefixUpload {
    target: PrefixTarget,
    pending: VecDeque<(String, JoinHandle<std::result::Result<(), object_store::Error>>)>,
    shared: Arc<Mutex<Shared>>,
}

/// Deletes what an upload wrote, from another thread (the signal watcher): stops the upload,
/// waits (bounded) for its PUTs in flight, deletes every object it attempted.
#[derive(Debug, Clone)]
pub struct Cleanup {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) shared: Arc<Mutex<Shared>>,
    pub(crate) max_requests: usize,
    pub(crate) is_root: fn(&str) -> bool,
}

impl Cleanup {
    /// Delete every object the upload attempted, unless it has committed. Blocks.
    pub fn run(&self) {
        let start = Instant::now();
        loop {
            {
                let mut s = self.shared.lock().unwrap_or_else(|e| e.into_inner());
                if s.committed {
                    return;
                }
                s.stopped = true;
                if s.in_flight == 0 || start.elapsed() > CLEANUP_WAIT {
                    let keys = std::mem::take(&mut s.attempted);
                    drop(s);
                    let _ = delete_all(&self.store, keys, self.max_requests, self.is_root);
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Delete `keys`, the root ones (`is_root` of the file name) first, one at a time (a dataset
/// stops being one before its other objects go), the rest with `max_requests` in flight. The
/// first failure is returned.
pub(crate) fn delete_all(
    store: &Arc<dyn ObjectStore>,
    mut keys: Vec<ObjectPath>,
    max_requests: usize,
    is_root: fn(&str) -> bool,
) -> Result<()> {
    let root = |k: &ObjectPath| k.filename().is_some_and(is_root);
    keys.sort_by_key(|k| !root(k));
    let split = keys.iter().take_while(|k| root(k)).count();
    let rest = keys.split_off(split);
    let store = Arc::clone(store);
    block_on(async move {
        for k in &keys {
            match store.delete(k).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        futures::stream::iter(rest)
            .map(|k| {
                let store = Arc::clone(&store);
                async move {
                    match store.delete(&k).await {
                        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                        Err(e) => Err(e),
                    }
                }
            })
            .buffer_unordered(max_requests.max(1))
            .try_collect::<Vec<()>>()
            .await
            .map(|_| ())
    })?
    .map_err(|e| Error::new(ErrorKind::Io, "store.delete_failed", None, format!("deleting: {e}")))
}

impl PrefixUpload {
    /// A handle that deletes what this upload wrote, for a signal handler's thread.
    pub fn cleanup(&self) -> Cleanup {
        Cleanup {
            store: Arc::clone(&self.target.loc.store),
            shared: Arc::clone(&self.shared),
            max_requests: self.target.loc.max_requests,
            is_root: VDS_KIND.is_root,
        }
    }

    fn path(&self, key: &str) -> Result<ObjectPath> {
        let full = format!("{}/{key}", self.target.loc.path.as_ref());
        ObjectPath::parse(&full).map_err(|e| Error::usage(format!("internal: object key {key:?}: {e}")))
    }

    fn url_of(&self, key: &str) -> String {
        format!("{}/{key}", self.target.loc.url.trim_end_matches('/'))
    }

    /// Wait for the oldest PUT in flight.
    fn wait_one(&mut self) -> Result<()> {
        let Some((key, handle)) = self.pending.pop_front() else {
            return Ok(());
        };
        match block_on(handle)? {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(store_error(&self.url_of(&key), e)),
            Err(e) => Err(Error::new(
                ErrorKind::Io,
                "store.request_failed",
                None,
                format!("{}: the upload task ended: {e}", self.url_of(&key)),
            )),
        }
    }
}

impl ObjectSink for PrefixUpload {
    fn name(&self) -> String {
        self.target.loc.url.clone()
    }

    fn begin(&mut self) -> Result<()> {
        if self.target.old.is_empty() {
            return Ok(());
        }
        // --force: the old dataset goes before the new one is written (no rename exists).
        delete_old(&self.target.loc, &self.target.old, &VDS_KIND)
    }

    fn put(&mut self, key: &str, bytes: Vec<u8>, metadata: &[(&str, String)]) -> Result<()> {
        // Bounded: at most max_requests PUTs (and their bodies) in flight.
        while self.pending.len() >= self.target.loc.max_requests {
            self.wait_one()?;
        }
        let path = self.path(key)?;
        self.shared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .begin_put(path.clone())?;
        let mut attributes = Attributes::new();
        for (name, value) in metadata {
            attributes.insert(Attribute::Metadata(name.to_string().into()), value.clone().into());
        }
        let opts = PutOptions {
            attributes,
            ..PutOptions::default()
        };
        let store = Arc::clone(&self.target.loc.store);
        let shared = Arc::clone(&self.shared);
        let payload = PutPayload::from(bytes);
        let handle = runtime()?.spawn(async move {
            let r = store.put_opts(&path, payload, opts).await.map(|_| ());
            shared.lock().unwrap_or_else(|e| e.into_inner()).in_flight -= 1;
            r
        });
        if crate::log_requests() {
            eprintln!("rasterpack-store: PUT {}", self.url_of(key));
        }
        self.pending.push_back((key.to_string(), handle));
        Ok(())
    }

    fn barrier(&mut self) -> Result<()> {
        while !self.pending.is_empty() {
            self.wait_one()?;
        }
        Ok(())
    }

    fn commit(&mut self) -> Result<()> {
        self.barrier()?;
        self.shared.lock().unwrap_or_else(|e| e.into_inner()).commit()
    }
}

impl Drop for PrefixUpload {
    fn drop(&mut self) {
        if self.shared.lock().map(|s| s.committed).unwrap_or(false) {
            return;
        }
        // Failed or dropped: no PUT starts any more; those in flight end, then all go.
        self.shared.lock().unwrap_or_else(|e| e.into_inner()).stopped = true;
        while !self.pending.is_empty() {
            let _ = self.wait_one();
        }
        self.cleanup().run();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;

    use crate::testutil::{keys, location};

    fn target(store: &Arc<InMemory>) -> PrefixTarget {
        PrefixTarget::on(location(store, "ds"))
    }

    #[test]
    fn vds_keys() {
        for k in [
            "VolumeDataLayout",
            "LayerStatus",
            "Dimensions_012LOD0/17",
            "L/ChunkMetadata/0",
        ] {
            assert!(is_vds_key(k), "{k}");
        }
        for k in ["notes.txt", "L/x", "L/ChunkMetadata/x", "a/b/c", "/1", "L/"] {
            assert!(!is_vds_key(k), "{k}");
        }
    }

    #[test]
    fn committed_upload_keeps_every_object_with_its_metadata() {
        let store = Arc::new(InMemory::new());
        let mut up = target(&store).start();
        up.begin().unwrap();
        for i in 0..10 {
            up.put(
                &format!("L/{i}"),
                vec![i as u8; 100],
                &[("vdschunkmetadata", "AAAA".into())],
            )
            .unwrap();
        }
        up.barrier().unwrap();
        up.put("VolumeDataLayout", b"{}".to_vec(), &[]).unwrap();
        up.commit().unwrap();
        drop(up);
        assert_eq!(keys(&store).len(), 11);
        let s = Arc::clone(&store);
        let got = block_on(async move { s.get(&ObjectPath::from("ds/L/3")).await.unwrap() }).unwrap();
        assert_eq!(
            got.attributes
                .get(&Attribute::Metadata("vdschunkmetadata".into()))
                .map(|v| v.as_ref()),
            Some("AAAA")
        );
    }

    #[test]
    fn dropped_upload_deletes_what_it_wrote() {
        let store = Arc::new(InMemory::new());
        let s = Arc::clone(&store);
        block_on(async move { s.put(&ObjectPath::from("other/1"), b"x"[..].into()).await })
            .unwrap()
            .unwrap();
        let mut up = target(&store).start();
        up.begin().unwrap();
        for i in 0..10 {
            up.put(&format!("L/{i}"), vec![1; 10], &[]).unwrap();
        }
        drop(up);
        assert_eq!(keys(&store), vec!["other/1".to_string()]);
    }

    #[test]
    fn cleanup_stops_further_puts() {
        let store = Arc::new(InMemory::new());
        let mut up = target(&store).start();
        up.put("L/0", vec![1; 10], &[]).unwrap();
        up.cleanup().run();
        assert!(up.put("L/1", vec![1; 10], &[]).is_err());
        assert!(up.commit().is_err());
        drop(up);
        assert!(keys(&store).is_empty());
    }
}
