//! Writing rasterpack arrays as Zarr v3 arrays and groups.
//!
//! [`ZarrArrayWriter`] is an [`ArraySink`]: any source streams into it as into a `.npy` writer,
//! and it cuts the pieces into the Zarr chunk grid as they arrive. A chunk is handed to encoder
//! threads of the writer's own (zstd here, or zarrs' codecs) as soon as every value of it has
//! arrived, and its buffer freed once stored, so memory holds only the chunks the source has
//! started and not finished, and those being encoded: with the default grid (the source's own
//! tiles or bricks) that is the few blocks a source decodes at a time, never the whole array. Chunks still open are capped by
//! [`Limits::working_set`] (`limit.working_set` past it, naming `--chunks`).
//!
//! The metadata written is documented in `docs/formats/zarr.md`: `fill_value` from the source's
//! fill/NoValue ([`rasterpack_common::stats::fill_value`], the call `stats` uses), else 0 (NaN for
//! floats, as zarr-python); `dimension_names` from the source's axes where it names them; the
//! source's metadata under the `rasterpack` attribute.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use rasterpack_common::stats::fill_value;
use rasterpack_common::{ArrayInfo, ArraySink, DType, Error, ErrorKind, Limits, Result};
use serde_json::{Map, Value};
use zarrs::array::codec::{
    BloscCodec, BloscCompressionLevel, BloscCompressor, BloscShuffleMode, BytesCodec, GzipCodec, ShardingCodecBuilder,
    ZstdCodec,
};
use zarrs::array::{Array, ArrayBuilder, DataType, Endianness, FillValue};
use zarrs::storage::{Bytes, OffsetBytesIterator, StorageError, StoreKey, StorePrefix, WritableStorageTraits};

/// Chunk compression of the written arrays (`--compress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// The `bytes` codec alone.
    None,
    /// The `zstd` codec at this level (the default, level 3 as zarr-python's default).
    Zstd(i32),
    /// The `gzip` codec at this level (0..=9).
    Gzip(u32),
    /// The `blosc` codec (c-blosc, built by zarrs): compressor, level 0..=9, shuffle.
    Blosc(BloscCompressor, u8, BloscShuffleMode),
}

impl Default for Compression {
    fn default() -> Self {
        Compression::Zstd(3)
    }
}

impl Compression {
    /// Parse `--compress`: `zstd`, `zstd:LEVEL` (-7..=22), `gzip`, `gzip:LEVEL` (0..=9),
    /// `blosc[:CNAME[:LEVEL[:SHUFFLE]]]` (CNAME `blosclz`, `lz4`, `lz4hc`, `snappy`, `zlib`,
    /// `zstd`; LEVEL 0..=9; SHUFFLE `noshuffle`, `shuffle`, `bitshuffle`; zarr-python's default
    /// `zstd:5:shuffle`), `none`; `None` is the default (zstd level 3).
    pub fn parse(spec: Option<&str>) -> Result<Compression> {
        let Some(spec) = spec else {
            return Ok(Compression::default());
        };
        if let Some(rest) = spec
            .split_once(':')
            .map_or((spec.eq_ignore_ascii_case("blosc")).then_some(""), |(n, r)| {
                n.eq_ignore_ascii_case("blosc").then_some(r)
            })
        {
            return Self::parse_blosc(spec, rest);
        }
        let (name, level) = match spec.split_once(':') {
            Some((n, l)) => (n, Some(l)),
            None => (spec, None),
        };
        let bad = |why: &str| Error::usage(format!("--compress {spec:?} for Zarr: {why}"));
        let level_of = |l: &str| l.trim().parse::<i64>().map_err(|_| bad("the level is not an integer"));
        match name.to_ascii_lowercase().as_str() {
            "none" if level.is_none() => Ok(Compression::None),
            "zstd" => match level.map(level_of).transpose()? {
                None => Ok(Compression::Zstd(3)),
                Some(l @ -7..=22) => Ok(Compression::Zstd(l as i32)),
                Some(_) => Err(bad("zstd levels run from -7 to 22")),
            },
            "gzip" => match level.map(level_of).transpose()? {
                None => Ok(Compression::Gzip(6)),
                Some(l @ 0..=9) => Ok(Compression::Gzip(l as u32)),
                Some(_) => Err(bad("gzip levels run from 0 to 9")),
            },
            _ => Err(bad(
                "Zarr output takes zstd[:LEVEL], gzip[:LEVEL], blosc[:CNAME[:LEVEL[:SHUFFLE]]] or none",
            )),
        }
    }

    fn parse_blosc(spec: &str, rest: &str) -> Result<Compression> {
        let bad = |why: &str| Error::usage(format!("--compress {spec:?} for Zarr: {why}"));
        let mut parts = rest.split(':').map(str::trim);
        let cname = match parts
            .next()
            .filter(|p| !p.is_empty())
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            None | Some("zstd") => BloscCompressor::Zstd,
            Some("blosclz") => BloscCompressor::BloscLZ,
            Some("lz4") => BloscCompressor::LZ4,
            Some("lz4hc") => BloscCompressor::LZ4HC,
            Some("snappy") => BloscCompressor::Snappy,
            Some("zlib") => BloscCompressor::Zlib,
            Some(_) => return Err(bad("blosc compressors are blosclz, lz4, lz4hc, snappy, zlib and zstd")),
        };
        let level = match parts.next() {
            None => 5,
            Some(l) => match l.parse::<u8>() {
                Ok(l @ 0..=9) => l,
                _ => return Err(bad("blosc levels run from 0 to 9")),
            },
        };
        let shuffle = match parts.next().map(str::to_ascii_lowercase).as_deref() {
            None | Some("shuffle") => BloscShuffleMode::Shuffle,
            Some("noshuffle") => BloscShuffleMode::NoShuffle,
            Some("bitshuffle") => BloscShuffleMode::BitShuffle,
            Some(_) => return Err(bad("blosc shuffles are noshuffle, shuffle and bitshuffle")),
        };
        if parts.next().is_some() {
            return Err(bad("blosc takes at most CNAME:LEVEL:SHUFFLE"));
        }
        Ok(Compression::Blosc(cname, level, shuffle))
    }
}

/// How to lay out the written arrays.
#[derive(Debug, Clone, Default)]
pub struct ZarrOptions {
    /// Chunk shape in the array's axis order (`--chunks`); `None`: the source's own blocks
    /// (see [`ZarrArrayWriter::new`]).
    pub chunks: Option<Vec<u64>>,
    /// Shard shape (`--shard`): the sharding codec with the chunks inside shards of this shape
    /// (a whole number of chunks along each axis).
    pub shard: Option<Vec<u64>>,
    /// Chunk compression.
    pub compress: Compression,
    /// [`Limits::working_set`] caps the chunks held open.
    pub limits: Limits,
}

/// Parse a shape such as `64x64x64` (or `64,64,64`): every extent at least 1.
pub fn parse_shape(spec: &str) -> std::result::Result<Vec<u64>, String> {
    spec.split(['x', 'X', ','])
        .map(|p| match p.trim().parse::<u64>() {
            Ok(0) => Err(format!("{spec:?}: every extent must be at least 1")),
            Ok(v) => Ok(v),
            Err(_) => Err(format!("{spec:?}: expected extents such as 64x64x64")),
        })
        .collect()
}

/// The chunk shape a source without blocks of its own gets (`.npy`, VOLP, UDF, FOLD): trailing
/// axes whole while a chunk stays within about 4 MiB, so C-order delivery completes chunks
/// band by band.
pub fn default_chunks(dtype: DType, shape: &[u64]) -> Vec<u64> {
    const TARGET: u64 = 4 << 20;
    let mut chunks = vec![1u64; shape.len()];
    let mut acc = dtype.size() as u64;
    for d in (0..shape.len()).rev() {
        let fit = (TARGET / acc).max(1);
        chunks[d] = shape[d].clamp(1, fit.max(1));
        acc = acc.saturating_mul(chunks[d]);
    }
    chunks
}

/// Names for the axes of a `source` array (in the array's C order), where the source names
/// them: VDS axis names (dimension 0 is the last axis; `component` for a channel of several
/// components), GVRS `rows`/`columns`, VOLP `levels`/`y`/`x`; `None` otherwise.
pub fn dimension_names(source: &str, info: &ArrayInfo) -> Option<Vec<String>> {
    let n = info.shape.len();
    match source {
        "vds" => {
            let mut names = axis_names(info)?;
            if names.len() + 1 == n {
                names.push("component".into());
            }
            (names.len() == n).then_some(names)
        }
        "gvrs" if n == 2 => Some(vec!["rows".into(), "columns".into()]),
        // The names of the volume's `axes` (the VOLP reader's `levels`/`y`/`x`, the names its
        // VDS axes get too), else those.
        "volp" if n == 3 => Some(
            axis_names(info)
                .filter(|names| names.len() == n)
                .unwrap_or_else(|| vec!["levels".into(), "y".into(), "x".into()]),
        ),
        _ => None,
    }
}

/// The `name` of each of `info`'s `axes` (dimension 0 first), in C order.
fn axis_names(info: &ArrayInfo) -> Option<Vec<String>> {
    info.attrs
        .get("axes")?
        .as_array()?
        .iter()
        .rev()
        .map(|a| a.get("name").and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// The `fill_value` of an array: the source's fill/NoValue when the dtype holds it exactly,
/// else NaN for floats and 0 (false) for the rest, as zarr-python defaults. Little-endian bytes.
pub fn fill_bytes(info: &ArrayInfo) -> Vec<u8> {
    let declared = fill_value(info);
    let v = declared.unwrap_or(if info.dtype.is_float() { f64::NAN } else { 0.0 });
    let int = |lo: f64, hi: f64| (v.fract() == 0.0 && v >= lo && v <= hi).then_some(v);
    let bytes: Option<Vec<u8>> = match info.dtype {
        DType::Bool => int(0.0, 1.0).map(|v| vec![v as u8]),
        DType::U8 => int(0.0, 255.0).map(|v| vec![v as u8]),
        DType::I8 => int(-128.0, 127.0).map(|v| (v as i8).to_le_bytes().to_vec()),
        DType::U16 => int(0.0, 65535.0).map(|v| (v as u16).to_le_bytes().to_vec()),
        DType::I16 => int(-32768.0, 32767.0).map(|v| (v as i16).to_le_bytes().to_vec()),
        DType::U32 => int(0.0, u32::MAX as f64).map(|v| (v as u32).to_le_bytes().to_vec()),
        DType::I32 => int(i32::MIN as f64, i32::MAX as f64).map(|v| (v as i32).to_le_bytes().to_vec()),
        // 2^64 - 1 and 2^63 - 1 are not f64 values: stop one binade short.
        DType::U64 => int(0.0, 18_446_744_073_709_549_568.0).map(|v| (v as u64).to_le_bytes().to_vec()),
        DType::I64 => int(i64::MIN as f64, 9_223_372_036_854_774_784.0).map(|v| (v as i64).to_le_bytes().to_vec()),
        DType::F32 => ((v as f32) as f64 == v || v.is_nan()).then(|| (v as f32).to_le_bytes().to_vec()),
        DType::F64 => Some(v.to_le_bytes().to_vec()),
        // zarrs takes a float16 fill as its bits; the declared fills never are float16.
        DType::F16 => v.is_nan().then(|| 0x7e00u16.to_le_bytes().to_vec()),
        DType::C64 => Some([(v as f32).to_le_bytes(), 0f32.to_le_bytes()].concat()),
        DType::C128 => Some([v.to_le_bytes(), 0f64.to_le_bytes()].concat()),
    };
    bytes.unwrap_or_else(|| {
        if info.dtype.is_float() {
            // The declared fill is not a value of the dtype: NaN, as zarr-python defaults.
            match info.dtype {
                DType::F16 => 0x7e00u16.to_le_bytes().to_vec(),
                DType::F32 => f32::NAN.to_le_bytes().to_vec(),
                _ => f64::NAN.to_le_bytes().to_vec(),
            }
        } else {
            vec![0u8; info.dtype.size()]
        }
    })
}

fn data_type(dtype: DType) -> DataType {
    match dtype {
        DType::Bool => DataType::Bool,
        DType::U8 => DataType::UInt8,
        DType::I8 => DataType::Int8,
        DType::U16 => DataType::UInt16,
        DType::I16 => DataType::Int16,
        DType::U32 => DataType::UInt32,
        DType::I32 => DataType::Int32,
        DType::U64 => DataType::UInt64,
        DType::I64 => DataType::Int64,
        DType::F16 => DataType::Float16,
        DType::F32 => DataType::Float32,
        DType::F64 => DataType::Float64,
        DType::C64 => DataType::Complex64,
        DType::C128 => DataType::Complex128,
    }
}

fn zarr_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Io, "zarr.write", None, format!("{what}: {e}"))
}

/// A write-only Zarr store in a directory: one file per key, as zarrs' `FilesystemStore` lays
/// them out, without its `sync_all` after every file. Stores are written into a temporary
/// directory renamed into place when complete (like every output; new outputs are left to the
/// page cache as `.npy` ones are), so a sync per chunk file bought nothing: `convert` of the
/// 4000 x 4000 GVRS (1156 chunk files) took 7.9 s wall with it, 2.4 s without (medians, load ~15).
///
/// Per chunk it makes one system call where it can (issue 20, GVRS -> Zarr: 1156 chunk files):
/// each directory is created once per store, not by a `create_dir_all` (mkdir + EEXIST + stat)
/// per file, and a new file is opened with `O_CREAT | O_EXCL`, not truncated.
///
/// Files are written by `LANES` (2) threads of the store's own, each directory always by the same
/// one and directories dealt out in turn (`c/0/` to the first, `c/1/` to the second, ...): the
/// encoders hand a chunk over and go on, and two files are never created at once in one
/// directory. Creating a file holds its directory's lock in the kernel, and on an ext4 without a
/// journal the creation scans past every inode freed in the last minute (`recently_deleted`:
/// about 1 ms per file after a `--force` run freed the old store's 1156), so two encoders writing
/// into the same row of chunks took turns (strace: 0.27 s of 1.49 s in `openat` waiting for the
/// other thread in the same directory). [`DirStore::finish`] waits for the files and reports the
/// first failure; a failure also refuses every later `set`.
#[derive(Debug)]
pub struct DirStore {
    root: std::path::PathBuf,
    lanes: Arc<Lanes>,
    threads: std::sync::Mutex<Vec<std::thread::JoinHandle<()>>>,
}

/// Writer threads of a [`DirStore`].
const LANES: usize = 2;

/// Bytes handed to the writer threads and not yet written, at most (one value larger than this
/// goes alone): the encoders wait past it, so memory stays bounded when the disk is slower.
const QUEUED_MAX: u64 = 16 << 20;

/// The files a [`DirStore`]'s threads have still to write, under one lock.
#[derive(Debug, Default)]
struct Lanes {
    state: std::sync::Mutex<Queued>,
    changed: std::sync::Condvar,
}

#[derive(Debug, Default)]
struct Queued {
    /// Per thread, the files to write in order.
    lanes: Vec<std::collections::VecDeque<(std::path::PathBuf, Bytes)>>,
    /// The thread that writes each directory met so far.
    lane_of: HashMap<std::path::PathBuf, usize>,
    /// Directories known to exist (made by this store, or found there).
    made: std::collections::HashSet<std::path::PathBuf>,
    /// Bytes queued or being written.
    bytes: u64,
    /// Files being written now.
    writing: usize,
    /// The first failure, named by its path.
    error: Option<Arc<std::io::Error>>,
    /// No more files: the threads end once their lanes are empty.
    closed: bool,
}

impl Lanes {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queued> {
        // A poisoned lock only means a writer panicked: the queue is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait<'a>(&self, guard: std::sync::MutexGuard<'a, Queued>) -> std::sync::MutexGuard<'a, Queued> {
        self.changed.wait(guard).unwrap_or_else(|p| p.into_inner())
    }

    /// The loop of writer thread `lane`.
    fn run(&self, lane: usize) {
        let mut q = self.lock();
        loop {
            let Some((path, value)) = q.lanes[lane].pop_front() else {
                if q.closed {
                    return;
                }
                q = self.wait(q);
                continue;
            };
            if q.error.is_some() {
                // The store has failed: what is left is not written.
                q.bytes -= value.len() as u64;
                self.changed.notify_all();
                continue;
            }
            q.writing += 1;
            let dir = path.parent().map(Path::to_path_buf);
            // Only this thread writes into `dir`, but parents (`c/`) are shared: create_dir_all
            // takes a concurrent creation of them as success.
            let make = dir.as_ref().filter(|d| !q.made.contains(*d)).cloned();
            drop(q);
            let made = make.as_ref().map(std::fs::create_dir_all).transpose();
            let result = made.and_then(|_| write_new(&path, &value));
            q = self.lock();
            if let (Some(d), Ok(())) = (make, &result) {
                q.made.insert(d);
            }
            q.writing -= 1;
            q.bytes -= value.len() as u64;
            if let Err(e) = result {
                if q.error.is_none() {
                    q.error = Some(Arc::new(std::io::Error::new(
                        e.kind(),
                        format!("{}: {e}", path.display()),
                    )));
                }
            }
            self.changed.notify_all();
        }
    }

    /// Wait until every file handed over is written; the first failure.
    fn drain(&self) -> std::result::Result<(), StorageError> {
        let mut q = self.lock();
        while q.error.is_none() && (q.writing > 0 || q.lanes.iter().any(|l| !l.is_empty())) {
            q = self.wait(q);
        }
        match &q.error {
            Some(e) => Err(StorageError::IOError(e.clone())),
            None => Ok(()),
        }
    }
}

/// Write `value` as the new file `path` (a key set again replaces its file).
fn write_new(path: &Path, value: &[u8]) -> std::io::Result<()> {
    // Almost every key is new (the store is a fresh directory): no truncation to ask for.
    match std::fs::OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(mut f) => std::io::Write::write_all(&mut f, value),
        // A key set again (a metadata document rewritten) replaces the file.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => std::fs::write(path, value),
        Err(e) => Err(e),
    }
}

impl DirStore {
    fn path(&self, key: &str) -> std::path::PathBuf {
        self.root.join(key)
    }

    /// Wait for every file set so far to be written; the first failure.
    pub fn flush(&self) -> Result<()> {
        self.lanes.drain().map_err(|e| zarr_error("writing the Zarr store", e))
    }

    /// Wait for every file set so far to be written, stop the writer threads, and report the
    /// first failure. Call it before renaming the store into place; `set` fails after it.
    pub fn finish(&self) -> Result<()> {
        let drained = self.lanes.drain();
        self.stop();
        drained.map_err(|e| zarr_error("writing the Zarr store", e))
    }

    fn stop(&self) {
        self.lanes.lock().closed = true;
        self.lanes.changed.notify_all();
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for DirStore {
    /// The threads end (the files handed over written) before the store's owner goes on,
    /// e.g. to remove a temporary directory after a failure.
    fn drop(&mut self) {
        self.stop();
    }
}

fn io(e: std::io::Error) -> StorageError {
    StorageError::IOError(Arc::new(e))
}

impl WritableStorageTraits for DirStore {
    fn set(&self, key: &StoreKey, value: Bytes) -> std::result::Result<(), StorageError> {
        let path = self.path(key.as_str());
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| self.root.clone());
        let len = value.len() as u64;
        let mut q = self.lanes.lock();
        while q.error.is_none() && !q.closed && q.bytes > 0 && q.bytes.saturating_add(len) > QUEUED_MAX {
            q = self.lanes.wait(q);
        }
        if let Some(e) = &q.error {
            return Err(StorageError::IOError(e.clone()));
        }
        if q.closed {
            return Err(StorageError::Other("the Zarr store was finished".into()));
        }
        let next = q.lane_of.len() % LANES;
        let lane = *q.lane_of.entry(dir).or_insert(next);
        q.lanes[lane].push_back((path, value));
        q.bytes += len;
        drop(q);
        self.lanes.changed.notify_all();
        Ok(())
    }

    fn set_partial_many(&self, _key: &StoreKey, _values: OffsetBytesIterator) -> std::result::Result<(), StorageError> {
        Err(StorageError::Unsupported("partial writes".into()))
    }

    fn erase(&self, key: &StoreKey) -> std::result::Result<(), StorageError> {
        self.lanes.drain()?;
        match std::fs::remove_file(self.path(key.as_str())) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(e)),
            _ => Ok(()),
        }
    }

    fn erase_prefix(&self, prefix: &StorePrefix) -> std::result::Result<(), StorageError> {
        self.lanes.drain()?;
        let path = self.path(prefix.as_str());
        // The directories under it are gone: make them again when a key needs them.
        self.lanes.lock().made.retain(|d| !d.starts_with(&path));
        match std::fs::remove_dir_all(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(e)),
            _ => Ok(()),
        }
    }

    fn supports_set_partial(&self) -> bool {
        false
    }
}

/// Where a Zarr output is written: a [`DirStore`] (a local directory), or any other writable
/// store (`rasterpack-store`'s object-store upload, which keeps the metadata documents for last).
pub type OutStore = dyn WritableStorageTraits;

/// The store of the directory `dir` (which must exist).
pub fn open_store(dir: &Path) -> Result<Arc<DirStore>> {
    if !dir.is_dir() {
        return Err(Error::usage(format!("{} is not a directory", dir.display())));
    }
    let lanes = Arc::new(Lanes::default());
    lanes.lock().lanes = vec![Default::default(); LANES];
    let store = DirStore {
        root: dir.to_path_buf(),
        lanes,
        threads: Default::default(),
    };
    for lane in 0..LANES {
        let lanes = store.lanes.clone();
        let thread = std::thread::Builder::new()
            .name(format!("zarr-write-{lane}"))
            .spawn(move || lanes.run(lane))
            // Dropping `store` ends the threads already started.
            .map_err(|e| Error::io("starting the Zarr store's writer threads", &e))?;
        store.threads.lock().unwrap_or_else(|p| p.into_inner()).push(thread);
    }
    Ok(Arc::new(store))
}

/// Write a Zarr v3 group's metadata at `path` (`/` for the root) with `attributes`.
pub fn write_group(store: &Arc<OutStore>, path: &str, attributes: Map<String, Value>) -> Result<()> {
    let mut group = zarrs::group::GroupBuilder::new()
        .build(store.clone(), path)
        .map_err(|e| zarr_error(&format!("the Zarr group {path}"), e))?;
    *group.attributes_mut() = attributes;
    group
        .store_metadata()
        .map_err(|e| zarr_error(&format!("writing the metadata of the Zarr group {path}"), e))
}

/// An [`ArraySink`] that writes the array it receives as a Zarr v3 array at `path` of a store.
pub struct ZarrArrayWriter {
    store: Arc<OutStore>,
    path: String,
    opts: ZarrOptions,
    source: &'static str,
    source_chunks: Option<Vec<u64>>,
    name: Option<String>,
    state: Option<State>,
}

/// The array being written: its geometry and the chunks under way.
struct State {
    shape: Vec<u64>,
    /// The shape of one stored chunk of the grid (a shard with `--shard`).
    grid: Vec<u64>,
    /// Chunks along each axis.
    counts: Vec<u64>,
    elem: u64,
    fill: Vec<u8>,
    /// Chunks started, by linear chunk number.
    open: HashMap<u64, Open>,
    /// Complete chunks waiting to be encoded, with their indices.
    ready: Vec<(Vec<u64>, Vec<u8>)>,
    /// Bytes held by `open` and `ready`.
    held: u64,
    /// Bytes of the array delivered so far.
    delivered: u64,
    /// Whether `grid` is the shard shape.
    sharded: bool,
    total: u64,
    /// The threads that encode and store complete chunks while the source goes on.
    encoders: Encoders,
}

/// A chunk some of whose values have arrived.
struct Open {
    data: Vec<u8>,
    /// Bytes of values of the array (not edge padding) still missing.
    missing: u64,
}

impl ZarrArrayWriter {
    /// A writer of one array at `path` (`/` for the store's root, `/name` inside a group) of
    /// `store`. `source` is the source format's name (for `dimension_names` and attributes);
    /// `source_chunks` its block shape for this array (`ArrayFile::chunk_shape`), the default
    /// chunk grid when `opts.chunks` is `None` (else [`default_chunks`]).
    pub fn new(
        store: Arc<OutStore>,
        path: &str,
        opts: ZarrOptions,
        source: &'static str,
        source_chunks: Option<Vec<u64>>,
    ) -> ZarrArrayWriter {
        ZarrArrayWriter {
            store,
            path: path.to_string(),
            opts,
            source,
            source_chunks,
            name: None,
            state: None,
        }
    }

    /// Record `name` as the array's name in its attributes (the name the source's array list
    /// gives, e.g. UDF `DATASET_PATH/TABLE`) instead of the one the stream announces.
    pub fn with_name(mut self, name: Option<String>) -> ZarrArrayWriter {
        self.name = name;
        self
    }

    /// The chunk shape for `info`, checked against its rank.
    fn chunk_shape(&self, info: &ArrayInfo) -> Result<Vec<u64>> {
        let n = info.shape.len();
        let chunks = match (&self.opts.chunks, &self.source_chunks) {
            (Some(c), _) => {
                if c.len() != n {
                    return Err(Error::usage(format!(
                        "--chunks gives {} extents but the array has {n} axes (shape {:?})",
                        c.len(),
                        info.shape
                    )));
                }
                c.clone()
            }
            (None, Some(c)) if c.len() == n && c.iter().all(|&e| e > 0) => c.clone(),
            _ => default_chunks(info.dtype, &info.shape),
        };
        // A chunk larger than the array along an axis holds only padding there.
        Ok(chunks
            .iter()
            .zip(&info.shape)
            .map(|(&c, &s)| c.min(s.max(1)).max(1))
            .collect())
    }

    fn build(&self, info: &ArrayInfo) -> Result<State> {
        let chunks = self.chunk_shape(info)?;
        let grid = match &self.opts.shard {
            None => chunks.clone(),
            Some(shard) => {
                if shard.len() != chunks.len() {
                    return Err(Error::usage(format!(
                        "--shard gives {} extents but the array has {} axes",
                        shard.len(),
                        chunks.len()
                    )));
                }
                if shard.iter().zip(&chunks).any(|(&s, &c)| !s.is_multiple_of(c)) {
                    return Err(Error::usage(format!(
                        "--shard {shard:?} is not a whole number of chunks {chunks:?} along every axis"
                    )));
                }
                // A shard past the array along an axis would only hold padding: cut to the
                // whole chunks that cover the array.
                shard
                    .iter()
                    .zip(&chunks)
                    .zip(&info.shape)
                    .map(|((&sh, &c), &s)| sh.min(s.max(1).div_ceil(c).saturating_mul(c)))
                    .collect()
            }
        };
        // A chunk (a shard with --shard) is assembled whole in memory and encoded whole by
        // zarrs: one that cannot fit the working set is refused before anything is written,
        // not after the source has been read up to it.
        let grid_bytes = grid
            .iter()
            .try_fold(info.dtype.size() as u64, |acc, &g| acc.checked_mul(g))
            .filter(|&b| b <= self.opts.limits.working_set);
        if grid_bytes.is_none() {
            let (what, flag) = match self.opts.shard {
                Some(_) => ("shard", "--shard"),
                None => ("chunk", "--chunks"),
            };
            return Err(Error::usage(format!(
                "a Zarr {what} of {grid:?} {} values is larger than the working set of {} bytes, and a {what} is \
                 encoded whole: choose a smaller {flag}",
                info.dtype.name(),
                self.opts.limits.working_set
            )));
        }
        let fill = fill_bytes(info);
        let mut builder = ArrayBuilder::new(
            info.shape.clone(),
            grid.clone(),
            data_type(info.dtype),
            FillValue::new(fill.clone()),
        );
        let compressors: Vec<Arc<dyn zarrs::array::codec::BytesToBytesCodecTraits>> = match self.opts.compress {
            Compression::None => vec![],
            // With its content checksum (xxhash64, 4 bytes a chunk), so that `validate` of the
            // store catches a changed byte in a chunk zstd stored raw, where the frame decodes
            // to other values without complaint; zarr-python reads and verifies it.
            Compression::Zstd(level) => vec![Arc::new(ZstdCodec::new(level, true))],
            Compression::Gzip(level) => vec![Arc::new(
                GzipCodec::new(level).map_err(|e| Error::usage(format!("gzip level {level}: {e}")))?,
            )],
            Compression::Blosc(cname, level, shuffle) => {
                let clevel = BloscCompressionLevel::try_from(level)
                    .map_err(|l| Error::usage(format!("blosc level {l}: levels run from 0 to 9")))?;
                vec![Arc::new(
                    BloscCodec::new(cname, clevel, None, shuffle, Some(info.dtype.size()))
                        .map_err(|e| Error::usage(format!("blosc: {e}")))?,
                )]
            }
        };
        let bytes = Arc::new(BytesCodec::new(Some(Endianness::Little)));
        match &self.opts.shard {
            None => {
                builder.array_to_bytes_codec(bytes);
                builder.bytes_to_bytes_codecs(compressors);
            }
            Some(_) => {
                let inner = chunks
                    .iter()
                    .map(|&c| std::num::NonZeroU64::new(c))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| Error::usage("chunk extents must be at least 1"))?;
                let mut sharding = ShardingCodecBuilder::new(inner.into());
                sharding.array_to_bytes_codec(bytes);
                sharding.bytes_to_bytes_codecs(compressors);
                builder.array_to_bytes_codec(Arc::new(sharding.build()));
            }
        }
        builder.dimension_names(dimension_names(self.source, info));
        let mut named = info.clone();
        if self.name.is_some() {
            named.name.clone_from(&self.name);
        }
        builder.attributes(attributes(self.source, &named));
        let array = builder
            .build(self.store.clone(), &self.path)
            .map_err(|e| Error::usage(format!("the Zarr array {}: {e}", self.path)))?;
        array
            .store_metadata()
            .map_err(|e| zarr_error(&format!("writing the metadata of the Zarr array {}", self.path), e))?;
        let counts = info.shape.iter().zip(&grid).map(|(&s, &g)| s.div_ceil(g)).collect();
        let array = Arc::new(array);
        let zstd_level = match (self.opts.compress, &self.opts.shard) {
            (Compression::Zstd(level), None) if cfg!(target_endian = "little") => Some(level),
            _ => None,
        };
        let encoders = Encoders::start(Arc::clone(&array), fill.clone(), zstd_level)?;
        Ok(State {
            shape: info.shape.clone(),
            grid,
            counts,
            elem: info.dtype.size() as u64,
            fill,
            open: HashMap::new(),
            ready: Vec::new(),
            held: 0,
            delivered: 0,
            sharded: self.opts.shard.is_some(),
            total: info.byte_len()?,
            encoders,
        })
    }

    fn state(&mut self) -> Result<&mut State> {
        self.state
            .as_mut()
            .ok_or_else(|| Error::usage("internal: Zarr writer used before begin"))
    }
}

/// The `rasterpack` attribute: where the array came from and the source's metadata as the
/// source reported it (`docs/formats/zarr.md`).
fn attributes(source: &str, info: &ArrayInfo) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert("source_format".into(), Value::from(source));
    meta.insert("name".into(), info.name.clone().map(Value::from).unwrap_or(Value::Null));
    meta.insert("dtype".into(), Value::from(info.dtype.name()));
    meta.insert("metadata".into(), Value::Object(info.attrs.clone()));
    let mut attrs = Map::new();
    attrs.insert("rasterpack".into(), Value::Object(meta));
    attrs
}

/// One zstd frame of `data` at `level`, with its checksum: what zarrs' `zstd` codec writes
/// after the `bytes` codec (little endian, the identity here), through one compression
/// context per thread instead of a new one per chunk (zarrs' encoder makes one for every
/// chunk: 1156 of them for the 4000 x 4000 GVRS).
fn zstd_frame(data: &[u8], level: i32) -> std::io::Result<Vec<u8>> {
    use std::cell::RefCell;
    thread_local! {
        static CONTEXT: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> = const { RefCell::new(None) };
    }
    CONTEXT.with(|cell| {
        let mut slot = cell.borrow_mut();
        let compressor = match &mut *slot {
            Some((l, c)) if *l == level => c,
            _ => {
                let mut c = zstd::bulk::Compressor::new(level)?;
                c.include_checksum(true)?;
                c.include_contentsize(true)?;
                &mut slot.insert((level, c)).1
            }
        };
        compressor.compress(data)
    })
}

/// Where the bytes of a piece go: copied from the source, or one repeated value.
#[derive(Clone, Copy)]
enum Piece<'a> {
    Data(&'a [u8]),
    Fill(&'a [u8]),
}

/// Complete chunks encoded (zstd here, or zarrs' codec chain) and stored by threads of the
/// writer's own (one per core, at most 8), so the source's thread hands a chunk over and goes on
/// delivering values: before, it waited for each batch of chunks to be encoded, and the
/// decoding of the next tiles with it (GVRS -> Zarr kept 1.58 of 2 cores busy).
struct Encoders {
    shared: Arc<EncodeQueue>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

#[derive(Default)]
struct EncodeQueue {
    state: std::sync::Mutex<Encoding>,
    changed: std::sync::Condvar,
}

#[derive(Default)]
struct Encoding {
    jobs: std::collections::VecDeque<(Vec<u64>, Vec<u8>)>,
    /// Bytes of chunks queued or being encoded.
    bytes: u64,
    /// The first failure: later chunks are dropped, and the writer reports it.
    error: Option<Error>,
    closed: bool,
}

impl EncodeQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, Encoding> {
        // A poisoned lock only means an encoder panicked: the queue is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait<'a>(&self, guard: std::sync::MutexGuard<'a, Encoding>) -> std::sync::MutexGuard<'a, Encoding> {
        self.changed.wait(guard).unwrap_or_else(|p| p.into_inner())
    }
}

impl Encoders {
    fn start(array: Arc<Array<OutStore>>, fill: Vec<u8>, zstd_level: Option<i32>) -> Result<Encoders> {
        let count = std::thread::available_parallelism().map_or(2, |n| n.get()).min(8);
        let mut encoders = Encoders {
            shared: Arc::new(EncodeQueue::default()),
            threads: Vec::new(),
        };
        let fill = Arc::new(fill);
        for k in 0..count {
            let (shared, array, fill) = (Arc::clone(&encoders.shared), Arc::clone(&array), Arc::clone(&fill));
            let thread = std::thread::Builder::new()
                .name(format!("zarr-encode-{k}"))
                .spawn(move || encode_loop(&shared, &array, &fill, zstd_level))
                // Dropping `encoders` ends the threads already started.
                .map_err(|e| Error::io("starting the Zarr encoder threads", &e))?;
            encoders.threads.push(thread);
        }
        Ok(encoders)
    }

    /// Queue `chunks`; the first failure of an earlier chunk, if any.
    fn queue(&self, chunks: Vec<(Vec<u64>, Vec<u8>)>) -> Result<()> {
        let mut q = self.shared.lock();
        if let Some(e) = &q.error {
            return Err(e.clone());
        }
        for (indices, data) in chunks {
            q.bytes += data.len() as u64;
            q.jobs.push_back((indices, data));
        }
        drop(q);
        self.shared.changed.notify_all();
        Ok(())
    }

    /// Wait until the encoders hold at most `room - need` bytes (or nothing); the first failure.
    fn wait_for_room(&self, room: u64, need: u64) -> Result<()> {
        let mut q = self.shared.lock();
        while q.error.is_none() && q.bytes > 0 && q.bytes.saturating_add(need) > room {
            q = self.shared.wait(q);
        }
        match &q.error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Wait for every chunk queued; the first failure.
    fn finish(&self) -> Result<()> {
        self.wait_for_room(0, 0)
    }
}

impl Drop for Encoders {
    /// The threads end (what is queued is dropped) before the writer's owner goes on, e.g. to
    /// remove a temporary store after a failure.
    fn drop(&mut self) {
        {
            let mut q = self.shared.lock();
            q.closed = true;
            let dropped: u64 = q.jobs.drain(..).map(|(_, d)| d.len() as u64).sum();
            q.bytes -= dropped;
        }
        self.shared.changed.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One encoder thread: encode and store queued chunks until the queue is closed.
fn encode_loop(shared: &EncodeQueue, array: &Array<OutStore>, fill: &[u8], zstd_level: Option<i32>) {
    let mut q = shared.lock();
    loop {
        let Some((indices, data)) = q.jobs.pop_front() else {
            if q.closed {
                return;
            }
            q = shared.wait(q);
            continue;
        };
        let len = data.len() as u64;
        let failed = q.error.is_some();
        drop(q);
        let result = if failed {
            Ok(())
        } else {
            store_encoded(array, fill, zstd_level, &indices, data)
        };
        q = shared.lock();
        q.bytes -= len;
        if let Err(e) = result {
            q.error.get_or_insert(e);
        }
        shared.changed.notify_all();
    }
}

/// Encode chunk `indices` and store it (a chunk of nothing but the fill is not stored).
fn store_encoded(
    array: &Array<OutStore>,
    fill: &[u8],
    zstd_level: Option<i32>,
    indices: &[u64],
    data: Vec<u8>,
) -> Result<()> {
    let what = || format!("writing Zarr chunk {indices:?}");
    match zstd_level {
        Some(level) => {
            // As zarrs' store_chunk: a chunk of nothing but the fill is not stored.
            if data.chunks_exact(fill.len()).all(|v| v == fill) {
                return Ok(());
            }
            let frame = zstd_frame(&data, level).map_err(|e| zarr_error(&what(), e))?;
            array
                .storage()
                .set(&array.chunk_key(indices), Bytes::from(frame))
                .map_err(|e| zarr_error(&what(), e))
        }
        None => array.store_chunk(indices, data).map_err(|e| zarr_error(&what(), e)),
    }
}

impl State {
    fn chunk_bytes(&self) -> u64 {
        self.grid.iter().product::<u64>() * self.elem
    }

    /// Put `len` bytes of the C-order array at byte `offset` into their chunks.
    fn scatter(&mut self, offset: u64, len: u64, piece: Piece, limits: &Limits) -> Result<()> {
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= self.total)
            .ok_or_else(|| Error::usage(format!("internal: a write of {len} bytes at {offset} past the array")))?;
        if !offset.is_multiple_of(self.elem) || !len.is_multiple_of(self.elem) {
            return Err(Error::usage("internal: a write of part of a value"));
        }
        let n = self.shape.len();
        let mut at = offset / self.elem;
        let stop = end / self.elem;
        let mut idx = vec![0u64; n];
        while at < stop {
            // The position of value `at`, and the run along the last axis within one chunk.
            let mut rest = at;
            for d in (0..n).rev() {
                idx[d] = rest % self.shape[d];
                rest /= self.shape[d];
            }
            let run = match n {
                0 => 1,
                _ => {
                    let last = n - 1;
                    let g = self.grid[last];
                    (stop - at).min(self.shape[last] - idx[last]).min(g - idx[last] % g)
                }
            };
            let mut chunk_no = 0u64;
            let mut within = 0u64;
            for ((&i, &g), &count) in idx.iter().zip(&self.grid).zip(&self.counts) {
                chunk_no = chunk_no * count + i / g;
                within = within * g + i % g;
            }
            let from = (at * self.elem - offset) as usize;
            let bytes = (run * self.elem) as usize;
            self.put(chunk_no, &idx, within * self.elem, bytes, from, piece, limits)?;
            at += run;
        }
        self.delivered += len;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn put(
        &mut self,
        chunk_no: u64,
        idx: &[u64],
        at: u64,
        bytes: usize,
        from: usize,
        piece: Piece,
        limits: &Limits,
    ) -> Result<()> {
        if !self.open.contains_key(&chunk_no) {
            let size = self.chunk_bytes();
            if self.held.saturating_add(size) > limits.working_set {
                self.flush()?;
                // Room for this chunk beside what the encoders still hold.
                self.encoders
                    .wait_for_room(limits.working_set.saturating_sub(self.held), size)?;
            }
            if self.held.saturating_add(size) > limits.working_set {
                return Err(Error::limit(
                    "limit.working_set",
                    None,
                    format!(
                        "Zarr chunks{} of {:?} ({size} bytes each) that the source fills at once need more than the \
                         working set of {} bytes: choose smaller --chunks (or --shard), or chunks aligned to the \
                         source's blocks (the default)",
                        if self.sharded { " (shards)" } else { "" },
                        self.grid,
                        limits.working_set
                    ),
                ));
            }
            // Values of the array inside the chunk (edge chunks are padded with the fill).
            let mut missing = self.elem;
            for (d, &i) in idx.iter().enumerate() {
                let start = i / self.grid[d] * self.grid[d];
                missing *= self.grid[d].min(self.shape[d] - start);
            }
            // A chunk inside the array gets every byte from the source: zeroed pages, not a
            // pass writing the fill first; only edge chunks are padded with it.
            let data = if missing == size {
                vec![0u8; size as usize]
            } else {
                self.fill.repeat((size / self.elem) as usize)
            };
            self.open.insert(chunk_no, Open { data, missing });
            self.held += size;
        }
        let Some(open) = self.open.get_mut(&chunk_no) else {
            return Err(Error::usage("internal: chunk not open"));
        };
        let dst = &mut open.data[at as usize..at as usize + bytes];
        match piece {
            Piece::Data(d) => dst.copy_from_slice(&d[from..from + bytes]),
            Piece::Fill(p) => dst.chunks_exact_mut(p.len()).for_each(|v| v.copy_from_slice(p)),
        }
        open.missing = open.missing.checked_sub(bytes as u64).ok_or_else(|| {
            Error::usage(format!(
                "internal: the source delivered values of chunk {chunk_no} twice"
            ))
        })?;
        if open.missing == 0 {
            if let Some(done) = self.open.remove(&chunk_no) {
                let indices: Vec<u64> = idx.iter().zip(&self.grid).map(|(&i, &g)| i / g).collect();
                self.ready.push((indices, done.data));
                // Handed to the encoders a few at a time.
                if self.ready.len() >= self.encoders.threads.len().max(1) * 2 {
                    self.flush()?;
                    self.encoders
                        .wait_for_room(limits.working_set.saturating_sub(self.held), 0)?;
                }
            }
        }
        Ok(())
    }

    /// Hand the complete chunks to the encoders (they are no longer this thread's to hold).
    fn flush(&mut self) -> Result<()> {
        let ready = std::mem::take(&mut self.ready);
        let freed = ready.len() as u64 * self.chunk_bytes();
        self.encoders.queue(ready)?;
        self.held -= freed;
        Ok(())
    }

    /// Every chunk handed over is encoded and stored: the first failure, if any.
    fn drain(&mut self) -> Result<()> {
        self.flush()?;
        self.encoders.finish()
    }
}

impl ArraySink for ZarrArrayWriter {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        self.state = Some(self.build(info)?);
        Ok(())
    }

    /// Chunks are assembled wherever their values come from, so a blocked source may deliver
    /// block by block.
    fn random_access(&self) -> bool {
        true
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let limits = self.opts.limits;
        self.state()?
            .scatter(offset, data.len() as u64, Piece::Data(data), &limits)
    }

    fn fill_at(&mut self, offset: u64, len: u64, pattern: &[u8]) -> Result<()> {
        let limits = self.opts.limits;
        let state = self.state()?;
        if pattern.len() as u64 != state.elem {
            return rasterpack_common::stream::fill_by_chunks(self, offset, len, pattern);
        }
        state.scatter(offset, len, Piece::Fill(pattern), &limits)
    }

    fn finish(&mut self) -> Result<()> {
        let state = self.state()?;
        state.drain()?;
        if state.delivered != state.total || !state.open.is_empty() {
            return Err(Error::usage(format!(
                "internal: the source delivered {} of {} bytes ({} Zarr chunks incomplete)",
                state.delivered,
                state.total,
                state.open.len()
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rasterpack_common::NdArray;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("rasterpack-zarr-write-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn read_back(dir: &Path) -> Vec<u8> {
        let store = Arc::new(zarrs::filesystem::FilesystemStore::new(dir).unwrap());
        let array = Array::open(store, "/").unwrap();
        let bytes = array.retrieve_array_subset(&array.subset_all()).unwrap();
        bytes.into_fixed().unwrap().into_owned()
    }

    /// 5 x 7 int16 values 0..35, delivered as `pieces` (offset in values, count), in that order.
    fn write(dir: &Path, opts: ZarrOptions, pieces: &[(u64, u64)]) -> Result<()> {
        let a = NdArray::from_vec(vec![5, 7], (0..35).map(|v| v as i16).collect()).unwrap();
        let mut w = ZarrArrayWriter::new(open_store(dir).unwrap(), "/", opts, "npy", Some(vec![2, 3]));
        w.begin(&ArrayInfo::of(&a))?;
        for &(at, n) in pieces {
            w.write_at(at * 2, &a.data[(at * 2) as usize..((at + n) * 2) as usize])?;
        }
        w.finish()
    }

    /// A store whose chunk writes fail after the first `ok` of them.
    struct FailingStore {
        ok: std::sync::atomic::AtomicUsize,
    }

    impl WritableStorageTraits for FailingStore {
        fn set(&self, key: &StoreKey, _value: Bytes) -> std::result::Result<(), StorageError> {
            let chunk = key.as_str().starts_with("c/");
            if chunk && self.ok.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)).is_err() {
                return Err(StorageError::Other(format!("{key}: the disk is full")));
            }
            Ok(())
        }
        fn set_partial_many(
            &self,
            _key: &StoreKey,
            _values: OffsetBytesIterator,
        ) -> std::result::Result<(), StorageError> {
            Err(StorageError::Other("not here".into()))
        }
        fn erase(&self, _key: &StoreKey) -> std::result::Result<(), StorageError> {
            Ok(())
        }
        fn erase_prefix(&self, _prefix: &StorePrefix) -> std::result::Result<(), StorageError> {
            Ok(())
        }
        fn supports_set_partial(&self) -> bool {
            false
        }
    }
    use std::sync::atomic::Ordering::SeqCst;

    /// Chunks are encoded and stored by the writer's threads while values keep arriving: a
    /// chunk that cannot be stored fails the write (at a later piece, or at `finish`) with the
    /// store's words and the chunk, never a hang and never a silent success; with every chunk
    /// stored, `finish` returns only once all of them are.
    #[test]
    fn a_chunk_the_encoders_cannot_store_fails_the_write() {
        let values: Vec<f32> = (0..96 * 96).map(|v| v as f32).collect();
        let a = NdArray::from_vec(vec![96, 96], values).unwrap();
        for ok in [0usize, 5, 20] {
            let store: Arc<OutStore> = Arc::new(FailingStore {
                ok: std::sync::atomic::AtomicUsize::new(ok),
            });
            let mut w = ZarrArrayWriter::new(store, "/", ZarrOptions::default(), "npy", Some(vec![8, 8]));
            w.begin(&ArrayInfo::of(&a)).unwrap();
            // Row by row, so chunks complete (and are handed over) all along the write.
            let row = 96 * 4;
            let written = (0..96)
                .try_for_each(|r| w.write_at((r * row) as u64, &a.data[r * row..(r + 1) * row]))
                .and_then(|()| w.finish());
            let e = written.expect_err("144 chunks into a store that takes fewer");
            assert!(e.message.contains("the disk is full"), "{e}");
            assert!(e.message.contains("Zarr chunk"), "{e}");
        }
        let dir = scratch("encoders");
        let store = open_store(&dir).unwrap();
        let mut w = ZarrArrayWriter::new(store.clone(), "/", ZarrOptions::default(), "npy", Some(vec![8, 8]));
        w.begin(&ArrayInfo::of(&a)).unwrap();
        let row = 96 * 4;
        for r in 0..96 {
            w.write_at((r * row) as u64, &a.data[r * row..(r + 1) * row]).unwrap();
        }
        w.finish().unwrap();
        store.finish().unwrap();
        assert_eq!(read_back(&dir), a.data);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn pieces_in_any_order_fill_edge_chunks_exactly() {
        let want: Vec<u8> = (0..35i16).flat_map(|v| v.to_le_bytes()).collect();
        for (k, pieces) in [
            vec![(0, 35)],
            vec![(28, 7), (0, 3), (3, 25)],
            (0..35).rev().map(|v| (v, 1)).collect::<Vec<_>>(),
        ]
        .into_iter()
        .enumerate()
        {
            let dir = scratch(&format!("order{k}"));
            write(&dir, ZarrOptions::default(), &pieces).unwrap();
            assert_eq!(read_back(&dir), want, "{pieces:?}");
        }
        // Sharded, gzip: the same values.
        let dir = scratch("shard");
        let opts = ZarrOptions {
            shard: Some(vec![4, 6]),
            compress: Compression::Gzip(1),
            ..ZarrOptions::default()
        };
        write(&dir, opts, &[(0, 35)]).unwrap();
        assert_eq!(read_back(&dir), want);
    }

    #[test]
    fn a_source_that_leaves_values_out_or_repeats_them_is_an_error() {
        let dir = scratch("short");
        let e = write(&dir, ZarrOptions::default(), &[(0, 34)]).unwrap_err();
        assert!(e.message.contains("delivered 68 of 70 bytes"), "{}", e.message);
        let dir = scratch("twice");
        assert!(write(&dir, ZarrOptions::default(), &[(0, 35), (3, 1)]).is_err());
    }

    #[test]
    fn open_chunks_are_capped_by_the_working_set() {
        let dir = scratch("cap");
        // One 2 x 3 int16 chunk is 12 bytes: room for two.
        let limits = Limits {
            working_set: 24,
            ..Limits::default()
        };
        let opts = ZarrOptions {
            limits,
            ..ZarrOptions::default()
        };
        // Row by row: the first row opens three chunks.
        let e = write(&dir, opts.clone(), &[(0, 35)]).unwrap_err();
        assert_eq!(e.code, "limit.working_set");
        // Chunk by chunk, each completes before the next opens.
        let dir = scratch("cap_ok");
        let mut pieces = vec![];
        for r0 in (0..5).step_by(2) {
            for c0 in (0..7).step_by(3) {
                for r in r0..(r0 + 2).min(5) {
                    pieces.push((r * 7 + c0, 3.min(7 - c0)));
                }
            }
        }
        write(&dir, opts, &pieces).unwrap();
        assert_eq!(
            read_back(&dir),
            (0..35i16).flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>()
        );
    }

    /// The store's directory cache never hides a directory that is gone: a key set again
    /// replaces the file, and keys under an erased prefix are written again (their directory
    /// made anew).
    #[test]
    fn dir_store_rewrites_and_remakes_erased_directories() {
        let dir = scratch("dirstore");
        let store = open_store(&dir).unwrap();
        let key = |k: &str| StoreKey::new(k).unwrap();
        store.set(&key("a/c/0/1"), Bytes::from_static(b"one")).unwrap();
        store.set(&key("a/c/0/1"), Bytes::from_static(b"2")).unwrap();
        store.flush().unwrap();
        assert_eq!(std::fs::read(dir.join("a/c/0/1")).unwrap(), b"2");
        store.erase_prefix(&StorePrefix::new("a/").unwrap()).unwrap();
        assert!(!dir.join("a").exists());
        store.set(&key("a/c/0/2"), Bytes::from_static(b"three")).unwrap();
        store.finish().unwrap();
        assert!(store.set(&key("a/c/0/3"), Bytes::from_static(b"late")).is_err());
        assert_eq!(std::fs::read(dir.join("a/c/0/2")).unwrap(), b"three");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Directories are dealt to the writer threads in turn (so neighbouring rows of chunks are
    /// created at once by two threads, never two files of one directory), every file set is
    /// written by `finish`, and a file that cannot be written fails `finish` naming its path and
    /// refuses every later `set`.
    #[test]
    fn dir_store_deals_directories_to_its_threads_and_reports_a_failed_file() {
        let dir = scratch("lanes");
        let store = open_store(&dir).unwrap();
        let key = |k: &str| StoreKey::new(k).unwrap();
        for r in 0..4 {
            for c in 0..3 {
                store
                    .set(&key(&format!("c/{r}/{c}")), Bytes::from(vec![r as u8, c as u8]))
                    .unwrap();
            }
        }
        {
            let q = store.lanes.lock();
            let lane = |d: &str| q.lane_of[&dir.join(d)];
            assert_ne!(lane("c/0"), lane("c/1"));
            assert_ne!(lane("c/1"), lane("c/2"));
            assert_eq!(lane("c/0"), lane("c/2"));
        }
        store.finish().unwrap();
        for r in 0..4u8 {
            for c in 0..3u8 {
                assert_eq!(std::fs::read(dir.join(format!("c/{r}/{c}"))).unwrap(), [r, c]);
            }
        }

        // A file where a directory has to be.
        let dir = scratch("lanes_fail");
        std::fs::write(dir.join("d"), b"in the way").unwrap();
        let store = open_store(&dir).unwrap();
        store.set(&key("ok/0"), Bytes::from_static(b"fine")).unwrap();
        store.flush().unwrap();
        // Handed over, or refused once the first failure is known.
        let _ = store.set(&key("d/0/1"), Bytes::from_static(b"lost"));
        let e = store.finish().unwrap_err();
        assert!(e.message.contains("d/0"), "{}", e.message);
        assert!(store.set(&key("ok/1"), Bytes::from_static(b"late")).is_err());
        assert_eq!(std::fs::read(dir.join("ok/0")).unwrap(), b"fine");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn fill_values_and_names() {
        let mut info = ArrayInfo::new(DType::I32, vec![2, 2]);
        assert_eq!(fill_bytes(&info), vec![0; 4]);
        info.attrs.insert("type_code".into(), Value::from(1));
        info.attrs.insert("fill".into(), Value::from(-9));
        assert_eq!(fill_bytes(&info), (-9i32).to_le_bytes());
        info.attrs.insert("fill".into(), Value::from(0.5));
        assert_eq!(fill_bytes(&info), vec![0; 4], "not an int32: the default");
        info.dtype = DType::F32;
        assert!(f32::from_le_bytes(fill_bytes(&info).try_into().unwrap()) == 0.5);
        assert_eq!(dimension_names("gvrs", &info).unwrap(), ["rows", "columns"]);
        assert_eq!(dimension_names("npy", &info), None);
        // A VOLP volume's names are its `axes` (dimension 0 first), as its VDS axes.
        let mut volp = ArrayInfo::new(DType::F32, vec![3, 2, 4]);
        assert_eq!(dimension_names("volp", &volp).unwrap(), ["levels", "y", "x"]);
        volp.attrs.insert(
            "axes".into(),
            serde_json::json!([{"name": "lon"}, {"name": "lat"}, {"name": "pressure"}]),
        );
        assert_eq!(dimension_names("volp", &volp).unwrap(), ["pressure", "lat", "lon"]);
        assert_eq!(Compression::parse(Some("zstd:-3")).unwrap(), Compression::Zstd(-3));
        assert_eq!(Compression::parse(Some("GZIP")).unwrap(), Compression::Gzip(6));
        assert!(Compression::parse(Some("none:1")).is_err());
        assert_eq!(
            Compression::parse(Some("blosc")).unwrap(),
            Compression::Blosc(BloscCompressor::Zstd, 5, BloscShuffleMode::Shuffle)
        );
        assert_eq!(
            Compression::parse(Some("BLOSC:lz4:1:bitshuffle")).unwrap(),
            Compression::Blosc(BloscCompressor::LZ4, 1, BloscShuffleMode::BitShuffle)
        );
        for bad in [
            "blosc:lz5",
            "blosc:lz4:10",
            "blosc:lz4:1:twice",
            "blosc:lz4:1:shuffle:x",
        ] {
            assert!(Compression::parse(Some(bad)).is_err(), "{bad}");
        }
        assert_eq!(parse_shape("64x32,1").unwrap(), [64, 32, 1]);
        assert!(parse_shape("64x0").is_err());
        // Trailing axes whole while a chunk stays within 4 MiB.
        assert_eq!(default_chunks(DType::F32, &[1000, 1000, 1000]), [1, 1000, 1000]);
        assert_eq!(default_chunks(DType::U8, &[3, 5]), [3, 5]);
        assert_eq!(default_chunks(DType::F64, &[2, 4 << 20]), [1, 1 << 19]);
    }
}
