//! Writing one object: a multipart upload that parts are sent to while the output is encoded,
//! completed only on success and aborted otherwise, so nothing half-written is ever visible
//! under the target name (the atomicity rule of local outputs: temporary file + rename).

use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, WriteMultipart};
use rasterpack_common::{Error, ErrorKind, Result};

use crate::{block_on, connect, runtime, store_error, Location, StoreOptions};

/// Part size unless `--storage-option upload_part_mib=N` says otherwise: S3's minimum is 5 MiB
/// and its maximum part count 10,000, so 16 MiB parts take objects up to 156 GiB.
pub const DEFAULT_PART_MIB: u64 = 16;
/// Parts in flight at once: with [`DEFAULT_PART_MIB`], the upload holds at most
/// `(UPLOADS_IN_FLIGHT + 1) * 16 MiB` = 80 MiB however large the object.
pub const UPLOADS_IN_FLIGHT: usize = 4;

/// Does an object exist at `loc`? (One HEAD request.)
fn exists(loc: &Location) -> Result<bool> {
    let store = Arc::clone(&loc.store);
    let path = loc.path.clone();
    match block_on(async move { store.head(&path).await })? {
        Ok(_) => Ok(true),
        Err(object_store::Error::NotFound { .. }) => Ok(false),
        Err(e) => Err(store_error(&loc.url, e)),
    }
}

fn exists_error(url: &str) -> Error {
    Error::new(
        ErrorKind::Usage,
        "output.exists",
        None,
        format!("{url} exists; pass --force to overwrite it"),
    )
}

/// Where an output URL is written, checked before anything is read: the store is reachable, the
/// URL names an object (not a prefix), and nothing is there unless `force`.
#[derive(Debug, Clone)]
pub struct UploadTarget {
    loc: Location,
    force: bool,
    part_size: usize,
}

impl UploadTarget {
    /// Check `url` as an output: an existing object is refused (exit 2) unless `force`.
    pub fn check(url: &str, opts: &StoreOptions, force: bool) -> Result<UploadTarget> {
        if url.ends_with('/') {
            return Err(Error::usage(format!(
                "{url} ends in / (a prefix): name the object to write"
            )));
        }
        let loc = connect(url, opts)?;
        if loc.path.as_ref().is_empty() {
            return Err(Error::usage(format!("{url}: name the object to write, not the bucket")));
        }
        let part_mib = opts.number("upload_part_mib")?.unwrap_or(DEFAULT_PART_MIB);
        if !(5..=5 * 1024).contains(&part_mib) {
            return Err(Error::new(
                ErrorKind::Usage,
                "store.bad_option",
                None,
                format!("upload_part_mib={part_mib}: parts are 5 to 5120 MiB (S3's bounds)"),
            ));
        }
        if !force && exists(&loc)? {
            return Err(exists_error(url));
        }
        Ok(UploadTarget {
            loc,
            force,
            part_size: (part_mib as usize) << 20,
        })
    }

    /// The URL, for messages.
    pub fn url(&self) -> &str {
        &self.loc.url
    }

    /// The object's last path segment (`cube.npy`), to name a local spool file after.
    pub fn file_name(&self) -> String {
        self.loc.path.filename().unwrap_or("out").to_string()
    }

    /// Start the multipart upload (the object is not visible until [`Upload::finish`]).
    pub fn start(&self) -> Result<Upload> {
        let store = Arc::clone(&self.loc.store);
        let path = self.loc.path.clone();
        let upload =
            block_on(async move { store.put_multipart(&path).await })?.map_err(|e| store_error(&self.loc.url, e))?;
        Ok(Upload {
            target: self.clone(),
            writer: Arc::new(Mutex::new(Some(WriteMultipart::new_with_chunk_size(
                upload,
                self.part_size,
            )))),
            written: 0,
            error: None,
        })
    }
}

/// An upload in progress: a [`Write`] whose bytes are sent in parts as they fill, with at most
/// [`UPLOADS_IN_FLIGHT`] parts in flight (back pressure on the encoder). Dropped without
/// [`Upload::finish`], it is aborted: the parts sent are discarded and no object appears.
#[derive(Debug)]
pub struct Upload {
    target: UploadTarget,
    /// Shared with [`UploadAborter`]s (a signal's cleanup on another thread): whoever takes
    /// the writer out ends the upload, completing or aborting it under this lock.
    writer: Slot,
    written: u64,
    /// The first failure, kept so the error names the store's reason, not only "I/O error".
    error: Option<Error>,
}

type Slot = Arc<Mutex<Option<WriteMultipart>>>;

fn lock(slot: &Mutex<Option<WriteMultipart>>) -> MutexGuard<'_, Option<WriteMultipart>> {
    // A panic while holding the lock leaves the writer as it was, which is still right.
    slot.lock().unwrap_or_else(|e| e.into_inner())
}

/// Aborts an [`Upload`] from another thread: a terminating signal's cleanup (SIGINT, SIGTERM),
/// which ends the process without unwinding, so the upload's own drop never runs. A multipart
/// upload left open keeps its parts (billed) until a lifecycle rule removes them.
#[derive(Debug, Clone)]
pub struct UploadAborter {
    writer: Weak<Mutex<Option<WriteMultipart>>>,
    url: String,
}

impl UploadAborter {
    /// Abort the upload unless it already ended: the parts sent are discarded and no object
    /// appears. An upload completing meanwhile finishes first (it holds the lock), and then
    /// there is nothing left to abort.
    pub fn abort(&self) -> Result<()> {
        let Some(slot) = self.writer.upgrade() else {
            return Ok(());
        };
        let taken = lock(&slot).take();
        match taken {
            Some(writer) => block_on(writer.abort())?.map_err(|e| store_error(&self.url, e)),
            None => Ok(()),
        }
    }

    /// Whether the upload is still going (not ended, not dropped).
    pub fn is_live(&self) -> bool {
        self.writer.upgrade().is_some_and(|slot| lock(&slot).is_some())
    }
}

impl Upload {
    /// A handle that aborts this upload from another thread (see [`UploadAborter`]).
    pub fn aborter(&self) -> UploadAborter {
        UploadAborter {
            writer: Arc::downgrade(&self.writer),
            url: self.target.loc.url.clone(),
        }
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The first failure a write met, if any.
    pub fn error(&self) -> Option<&Error> {
        self.error.as_ref()
    }

    fn fail(&mut self, e: object_store::Error) -> std::io::Error {
        let err = store_error(&self.target.loc.url, e);
        let io = std::io::Error::other(err.message.clone());
        self.error.get_or_insert(err);
        io
    }

    /// Send the last part and complete the object. Without `--force`, an object that appeared
    /// under the name while this one was written is left as it is and this upload is aborted.
    pub fn finish(mut self) -> Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        // Held to the end: an abort from another thread waits until the object is complete
        // (then finds nothing to abort) or comes first (and this finds no writer).
        let slot = Arc::clone(&self.writer);
        let mut held = lock(&slot);
        let Some(mut writer) = held.take() else {
            return Err(Error::new(
                ErrorKind::Io,
                "store.upload_failed",
                None,
                format!("{}: the upload was aborted", self.target.loc.url),
            ));
        };
        if self.written == 0 {
            // A multipart upload needs one part; an empty object is an empty part.
            let _rt = runtime()?.enter();
            writer.put(bytes::Bytes::new());
        }
        if !self.target.force && exists(&self.target.loc)? {
            let _ = block_on(writer.abort());
            return Err(Error::new(
                ErrorKind::Usage,
                "output.exists",
                None,
                format!(
                    "{} appeared while converting (another process created it) and was left as it is; \
                     pass --force to overwrite it",
                    self.target.loc.url
                ),
            ));
        }
        // `finish` aborts the upload itself when completing fails.
        block_on(writer.finish())?.map_err(|e| store_error(&self.target.loc.url, e))?;
        Ok(())
    }

    /// Abort now: the parts sent are discarded and no object appears.
    pub fn abort(mut self) -> Result<()> {
        self.abort_inner()
    }

    fn abort_inner(&mut self) -> Result<()> {
        let taken = lock(&self.writer).take();
        match taken {
            Some(writer) => block_on(writer.abort())?.map_err(|e| store_error(&self.target.loc.url, e)),
            None => Ok(()),
        }
    }
}

impl Write for Upload {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(e) = &self.error {
            return Err(std::io::Error::other(e.message.clone()));
        }
        let rt = runtime().map_err(|e| std::io::Error::other(e.message))?;
        let slot = Arc::clone(&self.writer);
        let mut held = lock(&slot);
        let Some(writer) = held.as_mut() else {
            return Err(std::io::Error::other("the upload was aborted"));
        };
        // At most one part's worth at a time, after waiting for a free slot: memory stays at
        // (UPLOADS_IN_FLIGHT + 1) parts whatever the writer hands over.
        let take = buf.len().min(self.target.part_size);
        let waited = rt.block_on(writer.wait_for_capacity(UPLOADS_IN_FLIGHT));
        if let Err(e) = waited {
            drop(held);
            return Err(self.fail(e));
        }
        {
            // Filling a part spawns its upload on the runtime.
            let _inside = rt.enter();
            writer.write(&buf[..take]);
        }
        drop(held);
        let part = self.target.part_size as u64;
        let before = self.written / part;
        self.written += take as u64;
        if crate::log_requests() && self.written / part > before {
            eprintln!(
                "rasterpack-store: upload {} part {} started ({} bytes so far)",
                self.target.loc.url,
                self.written / part,
                self.written / part * part
            );
        }
        Ok(take)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        // Not finished: an error or a panic. Nothing may appear under the name.
        let _ = self.abort_inner();
    }
}

/// The store and path an [`UploadTarget`] writes to (for tests and request logs).
impl UploadTarget {
    /// The store written to.
    pub fn store(&self) -> Arc<dyn ObjectStore> {
        Arc::clone(&self.loc.store)
    }
    /// The object's path in it.
    pub fn path(&self) -> &ObjectPath {
        &self.loc.path
    }

    /// A target on an already connected store (tests with an in-memory store).
    pub fn on(loc: Location, force: bool, part_size: usize) -> UploadTarget {
        UploadTarget { loc, force, part_size }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;

    fn target(store: Arc<InMemory>, force: bool) -> UploadTarget {
        let loc = Location {
            url: "memory:///out.npy".into(),
            store,
            path: ObjectPath::from("out.npy"),
            max_requests: 4,
        };
        UploadTarget::on(loc, force, 5 << 20)
    }

    fn get(store: &Arc<InMemory>) -> Option<Vec<u8>> {
        let store = Arc::clone(store);
        block_on(async move {
            match store.get(&ObjectPath::from("out.npy")).await {
                Ok(r) => Some(r.bytes().await.unwrap().to_vec()),
                Err(_) => None,
            }
        })
        .unwrap()
    }

    #[test]
    fn completed_upload_has_every_byte() {
        let store = Arc::new(InMemory::new());
        let data: Vec<u8> = (0..23u32 << 20).map(|i| (i % 251) as u8).collect();
        let mut up = target(Arc::clone(&store), false).start().unwrap();
        for chunk in data.chunks(777_777) {
            up.write_all(chunk).unwrap();
        }
        assert_eq!(get(&store), None, "visible before finish");
        up.finish().unwrap();
        assert_eq!(get(&store).as_deref(), Some(&data[..]));
    }

    #[test]
    fn dropped_upload_leaves_no_object() {
        let store = Arc::new(InMemory::new());
        let mut up = target(Arc::clone(&store), false).start().unwrap();
        up.write_all(&vec![7u8; 12 << 20]).unwrap();
        drop(up);
        assert_eq!(get(&store), None);
    }

    #[test]
    fn an_object_that_appears_meanwhile_is_kept_without_force() {
        let store = Arc::new(InMemory::new());
        let mut up = target(Arc::clone(&store), false).start().unwrap();
        up.write_all(b"new").unwrap();
        let s = Arc::clone(&store);
        block_on(async move { s.put(&ObjectPath::from("out.npy"), b"other"[..].into()).await })
            .unwrap()
            .unwrap();
        let e = up.finish().unwrap_err();
        assert_eq!(e.kind, ErrorKind::Usage);
        assert_eq!(get(&store).as_deref(), Some(&b"other"[..]));
        let mut up = target(Arc::clone(&store), true).start().unwrap();
        up.write_all(b"new").unwrap();
        up.finish().unwrap();
        assert_eq!(get(&store).as_deref(), Some(&b"new"[..]));
    }

    #[test]
    fn empty_object_completes() {
        let store = Arc::new(InMemory::new());
        target(Arc::clone(&store), false).start().unwrap().finish().unwrap();
        assert_eq!(get(&store).as_deref(), Some(&b""[..]));
    }
}
