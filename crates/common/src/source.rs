//! Where bytes come from: a file read with positioned reads (so large files never have to be
//! loaded whole and tiles can be read from several threads), bytes already in memory (standard
//! input, tests), a directory (object-store datasets), an object read by ranges, or a
//! dataset of objects in an object store.

use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};
use crate::limits::Limits;

/// One input to inspect, validate or convert.
#[derive(Debug, Clone)]
pub enum Input {
    /// A regular file, read with positioned reads.
    File {
        /// The path it was opened as.
        path: PathBuf,
        /// The open file, shared by clones of the input.
        file: Arc<File>,
        /// Its length when opened.
        len: u64,
    },
    /// Bytes already in memory.
    Bytes {
        /// What to call the input in messages (`standard input`, `<memory>`).
        name: String,
        /// The content, shared by clones of the input.
        data: Arc<Vec<u8>>,
    },
    /// A directory (an object-store dataset).
    Dir {
        /// The directory's path.
        path: PathBuf,
    },
    /// An object read with ranged requests (an object store or web server, see the
    /// `rasterpack-store` crate): formats read it through the same positioned reads as a file.
    Remote {
        /// The ranged source, shared by clones of the input.
        source: Arc<dyn RangeSource>,
    },
    /// A dataset of named objects under one prefix of an object store (OpenVDS's cloud layout:
    /// `VolumeDataLayout`, `LayerStatus`, `<layer>/<chunk>`), read object by object through
    /// `source` (see the `rasterpack-store` crate): the remote counterpart of [`Input::Dir`].
    Objects {
        /// The objects, shared by clones of the input.
        source: Arc<dyn ObjectSource>,
    },
}

/// Named objects under one prefix, fetched whole and on demand. Kept to this small trait for
/// the same reason as [`RangeSource`]; formats made of many objects adapt it to their own
/// access layer (the VDS reader's `ObjectStore`).
pub trait ObjectSource: std::fmt::Debug + Send + Sync {
    /// The prefix's URL, for messages.
    fn name(&self) -> String;
    /// Read object `key` into `buf` (reusing its allocation); `false` when there is no such
    /// object. The object's size is checked against `limits.max_alloc` before any byte is
    /// allocated, and a body shorter or longer than that size is an error, never used.
    fn get_into(&self, key: &str, buf: &mut Vec<u8>, limits: &Limits) -> Result<bool>;
    /// The size of object `key`, `None` when there is none.
    fn size(&self, key: &str) -> Result<Option<u64>>;
    /// Keys under `prefix` (relative to the dataset, sorted) with their sizes, at most
    /// `limits.max_entries`.
    fn list(&self, prefix: &str, limits: &Limits) -> Result<Vec<(String, u64)>>;
    /// User metadata `name` of object `key` (S3's `x-amz-meta-<name>`), `None` when the object
    /// has none of that name.
    fn object_metadata(&self, key: &str, name: &str) -> Result<Option<String>>;
    /// Whether the store keeps user metadata on objects at all (S3, GCS, Azure do; a web
    /// server does not), so that a missing entry means something.
    fn keeps_object_metadata(&self) -> bool;
    /// A hint that `keys` are about to be read with `limits`: the source may start fetching
    /// them concurrently. The default ignores it.
    fn prefetch(&self, _keys: &[String], _limits: &Limits) {}
    /// Read `len` bytes at `offset` of object `key` into `buf` (a Zarr shard's index and inner
    /// chunks); `false` when there is no such object. A range past the object's end is an
    /// error. The default fetches the object whole (within `limits`) and keeps the range.
    fn get_range_into(&self, key: &str, offset: u64, len: u64, buf: &mut Vec<u8>, limits: &Limits) -> Result<bool> {
        let mut whole = Vec::new();
        if !self.get_into(key, &mut whole, limits)? {
            return Ok(false);
        }
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= whole.len() as u64)
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Io,
                    "store.short_read",
                    None,
                    format!(
                        "{}/{key}: {len} bytes at {offset} asked of an object of {} bytes",
                        self.name(),
                        whole.len()
                    ),
                )
            })?;
        buf.clear();
        buf.extend_from_slice(&whole[offset as usize..end as usize]);
        Ok(true)
    }
    /// One level of the keys under `dir` (`""` or ending in `/`): the objects directly in it
    /// (relative to the dataset, sorted) and the sub-prefixes below it (relative, ending in
    /// `/`, sorted), at most `limits.max_entries` in all. The default derives them from
    /// [`ObjectSource::list`]; a store lists one level with a delimiter instead.
    fn list_dir(&self, dir: &str, limits: &Limits) -> Result<(Vec<String>, Vec<String>)> {
        let mut keys = Vec::new();
        let mut dirs: Vec<String> = Vec::new();
        for (key, _) in self.list(dir, limits)? {
            let Some(rest) = key.strip_prefix(dir) else { continue };
            match rest.split_once('/') {
                None => keys.push(key.clone()),
                Some((first, _)) => {
                    let sub = format!("{dir}{first}/");
                    if dirs.last() != Some(&sub) {
                        dirs.push(sub);
                    }
                }
            }
        }
        Ok((keys, dirs))
    }
}

/// Where a dataset made of many named objects is written (OpenVDS's object-store layout): a
/// local directory or a prefix of an object store. The writer of the layout puts objects
/// through this trait only, so the layout is written once for every kind of destination; the
/// implementation lives with the destination (the VDS crate's directory, `rasterpack-store`'s
/// prefix upload). Objects may be stored asynchronously: an error of an earlier `put` comes
/// back from a later call. Dropped before [`ObjectSink::commit`], a sink removes what it wrote
/// (nothing half-written stays visible).
pub trait ObjectSink: Send {
    /// The destination, for messages.
    fn name(&self) -> String;
    /// Called once before the first object: a sink that replaces an existing dataset (with
    /// `--force`) removes it here, when the source has been read far enough to be writable.
    fn begin(&mut self) -> Result<()>;
    /// Store `bytes` as object `key` (relative, `/`-separated), with user metadata `metadata`
    /// as (name, value) pairs (S3's `x-amz-meta-<name>`; a local directory has nowhere to keep
    /// it and drops it).
    fn put(&mut self, key: &str, bytes: Vec<u8>, metadata: &[(&str, String)]) -> Result<()>;
    /// Wait until every object put so far is stored: an object that makes the dataset visible
    /// is put only once everything it refers to exists.
    fn barrier(&mut self) -> Result<()>;
    /// Every object is put: wait for them and put the dataset in place (a directory: the rename
    /// of its temporary sibling; a prefix: nothing more, its last object made it visible).
    fn commit(&mut self) -> Result<()>;
    /// The local directory being written into before it is put in place, if the sink has one
    /// (a signal handler removes it).
    fn local_temp(&self) -> Option<&std::path::Path> {
        None
    }
}

/// Bytes fetched by range from somewhere other than the local file system. Kept to this
/// small trait so `common` (and every format crate) stays free of async runtimes and HTTP
/// clients: the implementation lives in `rasterpack-store`.
pub trait RangeSource: std::fmt::Debug + Send + Sync {
    /// The URL, for messages.
    fn name(&self) -> String;
    /// The object's length, known when it was opened.
    fn len(&self) -> u64;
    /// True for an empty object.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fill `buf` from `offset` (the caller has checked the range against `len`). A response
    /// shorter than asked is an error, never partly used.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// The reader is about to read (nearly) every byte, front to back (`validate`): a source
    /// may fetch ahead of the reads. The default does nothing.
    fn advise_sequential(&self) {}
    /// The reader is about to read `ranges` (in any order; each within `len`): a source may
    /// start fetching them now, adjacent ones merged into one request, and serve the reads
    /// that fall inside them from what it fetched. Only a hint: every byte is still read
    /// through `read_at`, with the reader's checks. The default does nothing.
    fn prefetch(&self, _ranges: &[Range<u64>]) {}
}

impl Input {
    /// Open a path: a regular file or a directory.
    ///
    /// ```no_run
    /// use rasterpack_common::Input;
    ///
    /// let input = Input::open("cube.volp")?;
    /// println!("{}: {} bytes", input.name(), input.len());
    /// # Ok::<(), rasterpack_common::Error>(())
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Input> {
        let path = path.as_ref();
        let meta = std::fs::metadata(path).map_err(|e| Error::io_path(path, &e))?;
        if meta.is_dir() {
            return Ok(Input::Dir {
                path: path.to_path_buf(),
            });
        }
        let file = File::open(path).map_err(|e| Error::io_path(path, &e))?;
        Ok(Input::File {
            path: path.to_path_buf(),
            len: meta.len(),
            file: Arc::new(file),
        })
    }

    /// An open file, read by position and called `name` in messages: standard input when it
    /// is a regular file, or a stream spooled into a temporary file.
    pub fn from_file(name: impl Into<PathBuf>, file: File) -> Result<Input> {
        let path = name.into();
        let len = file
            .metadata()
            .map_err(|e| Error::io(&crate::names::shown(&path), &e))?
            .len();
        Ok(Input::File {
            path,
            file: Arc::new(file),
            len,
        })
    }

    /// Bytes held in memory, called `name` in messages.
    pub fn from_bytes(name: impl Into<String>, data: Vec<u8>) -> Input {
        Input::Bytes {
            name: name.into(),
            data: Arc::new(data),
        }
    }

    /// An object read by ranges through `source`.
    pub fn remote(source: Arc<dyn RangeSource>) -> Input {
        Input::Remote { source }
    }

    /// The path or name of the input, for messages.
    pub fn name(&self) -> String {
        match self {
            Input::File { path, .. } | Input::Dir { path } => crate::names::shown(path),
            Input::Bytes { name, .. } => name.clone(),
            Input::Remote { source } => source.name(),
            Input::Objects { source } => source.name(),
        }
    }

    /// The directory, for inputs that are one.
    pub fn dir(&self) -> Option<&Path> {
        match self {
            Input::Dir { path } => Some(path),
            _ => None,
        }
    }

    /// The dataset of objects, for inputs that are one.
    pub fn objects(&self) -> Option<&dyn ObjectSource> {
        match self {
            Input::Objects { source } => Some(source.as_ref()),
            _ => None,
        }
    }

    /// Length in bytes (0 for a directory or a dataset of objects).
    pub fn len(&self) -> u64 {
        match self {
            Input::File { len, .. } => *len,
            Input::Bytes { data, .. } => data.len() as u64,
            Input::Dir { .. } | Input::Objects { .. } => 0,
            Input::Remote { source } => source.len(),
        }
    }

    /// True when the input holds no byte (or is a directory).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Say that (nearly) every byte is about to be read, front to back, as `validate` does: a
    /// remote object then fetches ahead of the reads, so fetching and checking overlap. Local
    /// inputs need no hint.
    pub fn advise_sequential(&self) {
        if let Input::Remote { source } = self {
            source.advise_sequential();
        }
    }

    /// Say that `ranges` are about to be read (a region read knows the records it needs): a
    /// remote object fetches them now, adjacent ones in one request (see
    /// [`RangeSource::prefetch`]). Local inputs need no hint.
    pub fn prefetch(&self, ranges: &[Range<u64>]) {
        if let Input::Remote { source } = self {
            source.prefetch(ranges);
        }
    }

    /// Whether reads cost requests (an object read by ranges): worth a [`Input::prefetch`].
    pub fn is_remote(&self) -> bool {
        matches!(self, Input::Remote { .. })
    }

    /// The whole content when it is already in memory.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Input::Bytes { data, .. } => Some(data),
            _ => None,
        }
    }

    /// Fill `buf` from `offset`. Reading past the end is a truncation error naming `field`.
    pub fn read_at(&self, offset: u64, buf: &mut [u8], field: &str) -> Result<()> {
        let len = self.len();
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|e| e > len) {
            return Err(Error::truncated(
                field,
                offset,
                buf.len() as u64,
                len.saturating_sub(offset),
            ));
        }
        match self {
            Input::File { file, path, .. } => read_exact_at(file, buf, offset)
                .map_err(|e| Error::io(&format!("reading {} at offset {offset}", crate::names::shown(path)), &e)),
            Input::Bytes { data, .. } => {
                buf.copy_from_slice(&data[offset as usize..offset as usize + buf.len()]);
                Ok(())
            }
            Input::Remote { source } => source.read_at(offset, buf),
            Input::Dir { path } => Err(Error::new(
                ErrorKind::Usage,
                "input.is_directory",
                None,
                format!("{} is a directory", crate::names::shown(path)),
            )),
            Input::Objects { source } => Err(Error::new(
                ErrorKind::Usage,
                "input.is_dataset",
                None,
                format!("{} is a dataset of objects, not one object", source.name()),
            )),
        }
    }

    /// Read `len` bytes at `offset` into a new buffer, after checking `len` against the input
    /// size and `limits.max_alloc` (so a hostile length never reaches the allocator).
    pub fn read_vec(&self, offset: u64, len: u64, field: &str, limits: &Limits) -> Result<Vec<u8>> {
        let available = self.len().saturating_sub(offset);
        if len > available {
            return Err(Error::truncated(field, offset, len, available));
        }
        let n = limits.check_alloc(len, field, Some(offset))?;
        let mut buf = vec![0u8; n];
        self.read_at(offset, &mut buf, field)?;
        Ok(buf)
    }

    /// Up to `n` bytes from the start (fewer when the input is shorter): for format detection.
    pub fn head(&self, n: usize) -> Vec<u8> {
        let n = (n as u64).min(self.len()) as usize;
        let mut buf = vec![0u8; n];
        match self.read_at(0, &mut buf, "head") {
            Ok(()) => buf,
            Err(_) => Vec::new(),
        }
    }

    /// The whole input in memory, bounded by `limits.max_alloc`.
    pub fn read_all(&self, limits: &Limits) -> Result<Arc<Vec<u8>>> {
        match self {
            Input::Bytes { data, .. } => Ok(Arc::clone(data)),
            _ => Ok(Arc::new(self.read_vec(0, self.len(), "file", limits)?)),
        }
    }
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_read(buf, offset)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounded() {
        let input = Input::from_bytes("mem", vec![1, 2, 3, 4]);
        let mut b = [0u8; 2];
        input.read_at(2, &mut b, "x").unwrap();
        assert_eq!(b, [3, 4]);
        assert_eq!(input.read_at(3, &mut b, "x").unwrap_err().kind, ErrorKind::Truncated);
        assert_eq!(
            input.read_at(u64::MAX, &mut b, "x").unwrap_err().kind,
            ErrorKind::Truncated
        );
        assert!(input.read_vec(0, 1 << 40, "huge", &Limits::default()).is_err());
        assert_eq!(input.head(64), vec![1, 2, 3, 4]);
    }

    #[test]
    fn files_read_by_position() {
        let dir = std::env::temp_dir().join(format!("rp-src-{}", std::process::id()));
        std::fs::write(&dir, b"hello world").unwrap();
        let input = Input::open(&dir).unwrap();
        assert_eq!(input.len(), 11);
        assert_eq!(input.read_vec(6, 5, "w", &Limits::default()).unwrap(), b"world");
        std::fs::remove_file(&dir).unwrap();
    }
}
