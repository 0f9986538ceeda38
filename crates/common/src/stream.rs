//! Arrays that stream: a source pushes an array's bytes into an [`ArraySink`] as it decodes them
//! (frames, tiles, bricks, chunks), so converting or reading a region never has to hold more than
//! a working set, whatever size the file declares.
//!
//! The protocol, for a source (`Format::stream_array`):
//! 1. call [`ArraySink::begin`] once with the [`ArrayInfo`] (dtype and shape are known before any
//!    value is decoded; a sink refuses here what it cannot take, before any work);
//! 2. deliver every byte of the C-order array exactly once with [`ArraySink::write_at`]: in any
//!    order when [`ArraySink::random_access`] says so, otherwise in ascending, gapless order;
//! 3. return. The caller (who owns the sink) calls [`ArraySink::finish`].
//!
//! Every piece is made of whole values: each `write_at` and `fill_at` starts at a multiple of
//! the dtype's size and covers a whole number of values (every source of rasterpack keeps to
//! this; `cli/tests/library.rs` checks each format, whole, by region, in and out of order), so a
//! sink may convert values piece by piece. For typed values without writing a sink, use
//! [`crate::Blocks`] (`file.blocks::<f32>(&req)`).
//!
//! A sink that is not random-access needs C order; a blocked source (tiles, bricks) then decodes a
//! band of blocks at a time into a buffer of at most [`Limits::working_set`] bytes, or refuses with
//! `limit.working_set` before decoding anything when one band cannot fit.

use std::ops::Range;

use serde_json::{Map, Value};

use crate::array::{byte_len, DType, NdArray};
use crate::error::{Error, Result};
use crate::format::Progress;
use crate::limits::Limits;
use crate::source::Input;

/// What a source is about to deliver: known before any value is decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrayInfo {
    /// Element type of the delivered values (little-endian bytes).
    pub dtype: DType,
    /// Shape in C order (last axis fastest), the axis order `.npy` output uses.
    pub shape: Vec<u64>,
    /// Name of the element/table/channel/array it comes from, when the source names it.
    pub name: Option<String>,
    /// Source metadata (scale, offset, units...), carried into formats that can keep it.
    pub attrs: Map<String, Value>,
}

impl ArrayInfo {
    /// An unnamed array without attributes.
    pub fn new(dtype: DType, shape: Vec<u64>) -> ArrayInfo {
        ArrayInfo {
            dtype,
            shape,
            name: None,
            attrs: Map::new(),
        }
    }

    /// The info of an array already in memory.
    pub fn of(array: &NdArray) -> ArrayInfo {
        ArrayInfo {
            dtype: array.dtype,
            shape: array.shape.clone(),
            name: array.name.clone(),
            attrs: array.attrs.clone(),
        }
    }

    /// Number of values (product of the shape; saturates rather than wrapping).
    pub fn len(&self) -> u64 {
        self.shape.iter().fold(1u64, |acc, &d| acc.saturating_mul(d))
    }

    /// True when the array holds no value.
    pub fn is_empty(&self) -> bool {
        self.shape.contains(&0)
    }

    /// Size of the data in bytes; a usage error when the shape overflows u64.
    pub fn byte_len(&self) -> Result<u64> {
        byte_len(self.dtype, &self.shape)
            .ok_or_else(|| Error::limit("limit.array", None, format!("array shape {:?} overflows", self.shape)))
    }

    /// Size in bytes of the whole array held in memory, refused past `limits.max_array_bytes`
    /// (`limit.array`) and `limits.max_alloc`: the check of every sink that collects an array
    /// whole (the library's [`MemorySink`], the Python package's numpy buffer).
    pub fn in_memory_len(&self, limits: &Limits) -> Result<usize> {
        let bytes = self.byte_len()?;
        if bytes > limits.max_array_bytes {
            return Err(Error::limit(
                "limit.array",
                None,
                format!(
                    "the array needs {bytes} bytes in memory, above the limit of {} bytes (stream it, or read a region)",
                    limits.max_array_bytes
                ),
            ));
        }
        limits.check_alloc(bytes, "array", None)
    }
}

/// Receives one array as little-endian bytes in C order (see the module docs for the protocol).
///
/// A sink that passes the array on to another one implements [`crate::SinkWrapper`] instead,
/// which forwards every hook it does not override.
pub trait ArraySink {
    /// The array about to arrive. Refuse here (a limit, a dtype the target cannot hold) so that no
    /// work is done for an array that cannot be written.
    fn begin(&mut self, info: &ArrayInfo) -> Result<()>;

    /// Whether [`ArraySink::write_at`] accepts offsets in any order (a seekable file, memory).
    /// When false, bytes must come in ascending order without gaps.
    fn random_access(&self) -> bool {
        false
    }

    /// `data` is the array's bytes starting at byte `offset` of the C-order data.
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()>;

    /// `len` bytes starting at `offset`, all repetitions of one value `pattern` (a fill value):
    /// sinks may do this without a buffer of `len` bytes.
    fn fill_at(&mut self, offset: u64, len: u64, pattern: &[u8]) -> Result<()> {
        fill_by_chunks(self, offset, len, pattern)
    }

    /// The whole array as one writable buffer, when the sink holds it in memory (a
    /// [`MemorySink`]), after `begin`: a source may decode straight into it instead of calling
    /// `write_at` (one copy less), and must then fill every byte before it returns `Ok`. `None`
    /// (the default) for sinks that write elsewhere.
    fn direct_buffer(&mut self) -> Option<&mut [u8]> {
        None
    }

    /// A handle through which a source's decoding threads may write data bytes themselves, at
    /// their offsets, instead of handing them to this thread's `write_at` (the copy into the
    /// page cache then runs on every core). Only a sink that writes the bytes unchanged to a
    /// local file offers one; a sink that must see the bytes (a view, stats, a stream, an
    /// upload) keeps the default `None`, and so disables it for everything it wraps. A wrapper
    /// that only checks at `begin`, counts or polls passes its inner sink's handle on.
    ///
    /// A source that writes through it reports each finished piece with
    /// [`ArraySink::written_elsewhere`], on the thread that owns the sink.
    fn parallel_file(&mut self) -> Option<ParallelFile> {
        None
    }

    /// A handle through which a source's decoding threads hand over decoded blocks (tiles,
    /// bricks, chunks) as they finish, in any order, instead of assembling C order for
    /// `write_at`: what a sink that only folds the values (statistics) offers, so the source
    /// decodes the way `validate` does. After `begin`; a source that takes it delivers every
    /// cell through it (see [`BlockSink`]) and reports the bytes with
    /// [`ArraySink::written_elsewhere`], on the thread that owns the sink. `None` (the default)
    /// for every sink that needs the bytes in place; a wrapper that only forwards passes its
    /// inner sink's handle on.
    ///
    /// Each call gives a fresh handle: what was handed through an earlier one is dropped (a
    /// source that must start an array again, FOLD after an ECC repair, asks again after its
    /// new `begin`).
    fn parallel_blocks(&mut self) -> Option<ParallelBlocks> {
        None
    }

    /// Whether the sink takes blocks of an array it has not begun yet
    /// ([`ArraySink::blocks_before_begin`]): asked first by a source that must choose its read
    /// path before it knows the array (FOLD's one-pass read, which decodes a member before its
    /// chunk's checks pass, serves a sequential sink only through blocks held aside, see
    /// [`HeldBlocks`]). A wrapper that forwards `parallel_blocks` forwards this too.
    fn takes_blocks(&self) -> bool {
        false
    }

    /// A handle for the blocks of array `info` before `begin` (what [`HeldBlocks`] hands a
    /// sink that [`ArraySink::takes_blocks`]): what the sink makes of them is held in the
    /// handle and counts only once the source calls `begin` with the same `info` and then
    /// [`ArraySink::written_elsewhere`]; a new call drops it. So a read that fails its checks
    /// leaves no trace, not even the array's announcement. `None` by default.
    fn blocks_before_begin(&mut self, _info: &ArrayInfo) -> Option<ParallelBlocks> {
        None
    }

    /// `len` data bytes were written through [`ArraySink::parallel_file`]: account for them as
    /// `write_at` would (byte counts, progress, an interrupt check between pieces).
    fn written_elsewhere(&mut self, len: u64) -> Result<()> {
        written_without_handle(len)
    }

    /// [`ArraySink::direct_buffer`] for a source that calls [`ArraySink::interrupt`]'s check
    /// between pieces of its work (at least every ~100 ms): a sink that otherwise gives only
    /// small buffers directly (so that no uninterruptible stretch is long) may give any.
    fn direct_buffer_polled(&mut self) -> Option<&mut [u8]> {
        self.direct_buffer()
    }

    /// A check that a source writing into [`ArraySink::direct_buffer_polled`] (which borrows
    /// the sink) calls between pieces: `Err` stops the read (Ctrl-C in the Python package).
    /// Take it before the buffer. `None` (the default): nothing to check.
    fn interrupt(&self) -> Option<Interrupt> {
        None
    }

    /// Every byte has arrived: complete the output (trailers, checksums, renames are the caller's).
    fn finish(&mut self) -> Result<()>;
}

/// See [`ArraySink::interrupt`].
pub type Interrupt = std::sync::Arc<dyn Fn() -> Result<()> + Send + Sync>;

/// What [`ArraySink::parallel_blocks`] hands a source. The source numbers its blocks 0, 1, 2,
/// ... in an order fixed by the file and the request (never by threads or by which block
/// finished first), delivers each number exactly once, and gives each block's cells in an order
/// fixed the same way; the cells of all blocks together are the array's. A sink that combines
/// the blocks in number order therefore gets the same result on 1 or N threads.
pub trait BlockSink: Send + Sync {
    /// Block `seq`: its cells as little-endian values of the announced dtype (whole values).
    fn block(&self, seq: u64, data: &[u8]) -> Result<()>;
    /// Block `seq`: `cells` repetitions of the one value `pattern` (an unstored tile).
    fn fill(&self, seq: u64, cells: u64, pattern: &[u8]) -> Result<()>;
}

/// See [`ArraySink::parallel_blocks`].
pub type ParallelBlocks = std::sync::Arc<dyn BlockSink>;

/// A sink that takes blocks ([`ArraySink::takes_blocks`]) as seen by a source that decodes
/// bytes before they are known good (FOLD's one-pass read: a chunk's CRC32C and SHA-256 are
/// known only at its end). The C-order bytes go to the sink's handle
/// ([`ArraySink::blocks_before_begin`]) in numbered blocks of [`crate::stats::CHUNK`] cells
/// (the cells the statistics group by, so their figures are the bits the sink's own C-order
/// path gives); the sink is told of the array (`begin`) and of its bytes
/// ([`ArraySink::written_elsewhere`]) only by [`HeldBlocks::commit`], once every check passed.
/// Until then what the sink made of them is held aside: a new `begin` from the source (it
/// starts again from repaired bytes) asks for a fresh handle, which drops it, and a read that
/// fails never commits.
pub struct HeldBlocks<'a> {
    sink: &'a mut dyn ArraySink,
    info: Option<ArrayInfo>,
    blocks: Option<ParallelBlocks>,
    /// Bytes per block.
    step: usize,
    /// The block under way (fewer than `step` bytes).
    pending: Vec<u8>,
    seq: u64,
    position: u64,
}

impl<'a> HeldBlocks<'a> {
    /// Hold `sink`'s blocks (a sink whose [`ArraySink::takes_blocks`] is true).
    pub fn new(sink: &'a mut dyn ArraySink) -> HeldBlocks<'a> {
        HeldBlocks {
            sink,
            info: None,
            blocks: None,
            step: 0,
            pending: Vec::new(),
            seq: 0,
            position: 0,
        }
    }

    /// Every check of the bytes passed: announce the array, hand over its last block and
    /// report its bytes.
    pub fn commit(&mut self) -> Result<()> {
        let (Some(info), Some(blocks)) = (self.info.take(), self.blocks.take()) else {
            return Err(Error::usage("internal: held blocks committed before any array began"));
        };
        if !self.pending.is_empty() {
            blocks.block(self.seq, &self.pending)?;
            self.pending.clear();
        }
        self.sink.begin(&info)?;
        self.sink.written_elsewhere(self.position)
    }
}

impl ArraySink for HeldBlocks<'_> {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        // A fresh handle: blocks of an earlier start are dropped with the old one.
        let Some(blocks) = self.sink.blocks_before_begin(info) else {
            // The sink refuses the array (a complex dtype for stats): its own `begin` says why.
            self.sink.begin(info)?;
            return Err(Error::usage("internal: a sink that takes blocks offered none"));
        };
        self.blocks = Some(blocks);
        self.info = Some(info.clone());
        self.step = crate::stats::CHUNK * info.dtype.size();
        self.pending.clear();
        self.seq = 0;
        self.position = 0;
        Ok(())
    }

    fn write_at(&mut self, offset: u64, mut data: &[u8]) -> Result<()> {
        let Some(blocks) = self.blocks.as_ref() else {
            return Err(Error::usage("internal: array bytes before begin"));
        };
        if offset != self.position {
            return Err(Error::usage(format!(
                "internal: held blocks got bytes at {offset} while at {}",
                self.position
            )));
        }
        self.position += data.len() as u64;
        if !self.pending.is_empty() {
            let n = (self.step - self.pending.len()).min(data.len());
            self.pending.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.pending.len() < self.step {
                return Ok(());
            }
            blocks.block(self.seq, &self.pending)?;
            self.seq += 1;
            self.pending.clear();
        }
        let whole = data.len() / self.step * self.step;
        for part in data[..whole].chunks(self.step) {
            blocks.block(self.seq, part)?;
            self.seq += 1;
        }
        self.pending.extend_from_slice(&data[whole..]);
        Ok(())
    }

    fn interrupt(&self) -> Option<Interrupt> {
        self.sink.interrupt()
    }

    /// The caller finishes its own sink, after [`HeldBlocks::commit`].
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// `fill_at` through `write_at`, one buffer of at most 1 MiB at a time.
pub fn fill_by_chunks<S: ArraySink + ?Sized>(sink: &mut S, offset: u64, len: u64, pattern: &[u8]) -> Result<()> {
    if pattern.is_empty() || !len.is_multiple_of(pattern.len() as u64) {
        return Err(Error::usage(format!(
            "fill of {len} bytes is not a whole number of {}-byte values",
            pattern.len()
        )));
    }
    const CHUNK: u64 = 1 << 20;
    let per = (CHUNK / pattern.len() as u64).max(1) as usize;
    let chunk: Vec<u8> = pattern.repeat(per.min((len / pattern.len() as u64) as usize).max(1));
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(chunk.len() as u64) as usize;
        sink.write_at(offset + done, &chunk[..n])?;
        done += n as u64;
    }
    Ok(())
}

/// What [`ArraySink::written_elsewhere`] answers in a sink that offered no handle (the trait's
/// default): also for a wrapper that withholds its inner sink's handles, so that a source's
/// report of bytes it could not have written is refused rather than passed on.
pub fn written_without_handle(len: u64) -> Result<()> {
    Err(Error::usage(format!(
        "internal: {len} bytes were written through a parallel file this sink did not offer"
    )))
}

/// Positioned writes of an array's data bytes into a local file, from any thread (`pwrite` is
/// thread-safe): what [`ArraySink::parallel_file`] hands a source. Every write is checked to
/// fall inside the data, so a source bug cannot write over a header or past the end.
#[derive(Debug, Clone)]
pub struct ParallelFile {
    file: std::sync::Arc<std::fs::File>,
    /// Where data byte 0 is in the file.
    base: u64,
    /// Data bytes.
    len: u64,
    /// Positioned writes made, over every clone (a count tests and benchmarks read).
    writes: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl ParallelFile {
    /// Data bytes `0..len` of the array go at `base..base + len` of `file` (the same open
    /// file description, duplicated: the output's temporary file stays the one renamed).
    pub fn new(file: &std::fs::File, base: u64, len: u64) -> Result<ParallelFile> {
        let file = file
            .try_clone()
            .map_err(|e| Error::io("duplicating the output file handle", &e))?;
        Ok(ParallelFile {
            file: std::sync::Arc::new(file),
            base,
            len,
            writes: Default::default(),
        })
    }

    /// Write `data` at data byte `offset`.
    pub fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        let at = offset
            .checked_add(data.len() as u64)
            .filter(|&end| end <= self.len)
            .and_then(|_| self.base.checked_add(offset))
            .ok_or_else(|| {
                Error::usage(format!(
                    "internal: a write of {} bytes at {offset} falls outside the {}-byte data",
                    data.len(),
                    self.len
                ))
            })?;
        crate::output::write_all_at(&self.file, data, at)?;
        self.writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Positioned writes made so far through this handle and its clones.
    pub fn writes(&self) -> u64 {
        self.writes.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Collects the array in memory: what `read_array` is built on. `begin` checks the size against
/// [`Limits::max_array_bytes`] and [`Limits::max_alloc`] before allocating.
#[derive(Debug)]
pub struct MemorySink {
    limits: Limits,
    info: Option<ArrayInfo>,
    data: Vec<u8>,
    written: u64,
}

impl MemorySink {
    /// A sink bounded by `limits`.
    pub fn new(limits: Limits) -> MemorySink {
        MemorySink {
            limits,
            info: None,
            data: Vec::new(),
            written: 0,
        }
    }

    /// The collected array. Fails when the source never called `begin` or left bytes unwritten.
    pub fn into_array(self) -> Result<NdArray> {
        let info = self.info.ok_or_else(|| Error::usage("the source delivered no array"))?;
        if self.written != self.data.len() as u64 {
            return Err(Error::usage(format!(
                "the source delivered {} of {} bytes",
                self.written,
                self.data.len()
            )));
        }
        let mut array = NdArray::new(info.dtype, info.shape, self.data)?;
        array.name = info.name;
        array.attrs = info.attrs;
        Ok(array)
    }
}

impl ArraySink for MemorySink {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        let n = info.in_memory_len(&self.limits)?;
        self.data = vec![0u8; n];
        self.written = 0;
        self.info = Some(info.clone());
        Ok(())
    }

    fn random_access(&self) -> bool {
        true
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|&e| e <= self.data.len() as u64)
            .ok_or_else(|| out_of_range(offset, data.len(), self.data.len() as u64))?;
        self.data[offset as usize..end as usize].copy_from_slice(data);
        self.written += data.len() as u64;
        Ok(())
    }

    fn fill_at(&mut self, offset: u64, len: u64, pattern: &[u8]) -> Result<()> {
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= self.data.len() as u64)
            .ok_or_else(|| out_of_range(offset, len as usize, self.data.len() as u64))?;
        if pattern.is_empty() || !len.is_multiple_of(pattern.len() as u64) {
            return fill_by_chunks(self, offset, len, pattern);
        }
        for v in self.data[offset as usize..end as usize].chunks_exact_mut(pattern.len()) {
            v.copy_from_slice(pattern);
        }
        self.written += len;
        Ok(())
    }

    fn direct_buffer(&mut self) -> Option<&mut [u8]> {
        // The source fills every byte (or fails, and the array is never handed out).
        self.info.as_ref()?;
        self.written = self.data.len() as u64;
        Some(&mut self.data)
    }

    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

fn out_of_range(offset: u64, len: usize, total: u64) -> Error {
    Error::usage(format!(
        "a write of {len} bytes at {offset} falls outside the {total}-byte array"
    ))
}

/// An [`ArraySink`] adapter that passes everything to `inner` and reports `(bytes delivered,
/// bytes in the array)` to a [`Progress`] after each write: a progress bar for any conversion.
/// The callback runs on every write, so it must be cheap (count, and redraw rarely).
#[derive(Debug)]
pub struct ProgressSink<S> {
    inner: S,
    progress: Progress,
    done: u64,
    total: u64,
}

impl<S: ArraySink> ProgressSink<S> {
    /// Wrap `inner`, reporting to `progress`.
    pub fn new(inner: S, progress: Progress) -> ProgressSink<S> {
        ProgressSink {
            inner,
            progress,
            done: 0,
            total: 0,
        }
    }

    /// Bytes delivered so far.
    pub fn done(&self) -> u64 {
        self.done
    }

    /// The wrapped sink.
    pub fn into_inner(self) -> S {
        self.inner
    }

    fn advance(&mut self, len: u64) {
        self.done = self.done.saturating_add(len);
        self.progress.report(self.done, self.total);
    }
}

impl<S: ArraySink> crate::SinkWrapper for ProgressSink<S> {
    type Inner = S;
    fn inner(&mut self) -> &mut S {
        &mut self.inner
    }
    fn inner_ref(&self) -> &S {
        &self.inner
    }
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        self.inner.begin(info)?;
        self.total = info.byte_len()?;
        self.done = 0;
        self.progress.report(0, self.total);
        Ok(())
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.inner.write_at(offset, data)?;
        self.advance(data.len() as u64);
        Ok(())
    }
    fn written_elsewhere(&mut self, len: u64) -> Result<()> {
        self.inner.written_elsewhere(len)?;
        self.advance(len);
        Ok(())
    }
    fn fill_at(&mut self, offset: u64, len: u64, pattern: &[u8]) -> Result<()> {
        self.inner.fill_at(offset, len, pattern)?;
        self.advance(len);
        Ok(())
    }
    // A buffer filled in place is never reported, so the bar would stop: the bytes come
    // through `write_at` instead.
    fn direct_buffer(&mut self) -> Option<&mut [u8]> {
        None
    }
    fn direct_buffer_polled(&mut self) -> Option<&mut [u8]> {
        None
    }
}

/// Tracks the position of a sequential sink and refuses out-of-order writes (a source bug, never
/// a property of a file).
#[derive(Debug, Default, Clone, Copy)]
pub struct SequentialCursor {
    /// Bytes accepted so far.
    pub position: u64,
}

impl SequentialCursor {
    /// Accept `len` bytes at `offset`, which must be the current position.
    pub fn advance(&mut self, offset: u64, len: usize) -> Result<()> {
        if offset != self.position {
            return Err(Error::usage(format!(
                "internal: a sequential sink got bytes at {offset} while at {}",
                self.position
            )));
        }
        self.position += len as u64;
        Ok(())
    }
}

/// A box of an array: one half-open range per axis, in the array's C axis order (the order of
/// [`ArrayInfo::shape`] and of `.npy` output).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Region {
    /// `start..end` per axis.
    pub ranges: Vec<Range<u64>>,
}

impl Region {
    /// The whole of an array of `shape`.
    pub fn full(shape: &[u64]) -> Region {
        Region {
            ranges: shape.iter().map(|&d| 0..d).collect(),
        }
    }

    /// A region from per-axis starts and sizes.
    pub fn from_start_size(start: &[u64], size: &[u64]) -> Result<Region> {
        if start.len() != size.len() {
            return Err(region_error(format!(
                "region start has {} axes but its size has {}",
                start.len(),
                size.len()
            )));
        }
        let ranges = start
            .iter()
            .zip(size)
            .map(|(&s, &n)| {
                s.checked_add(n)
                    .map(|e| s..e)
                    .ok_or_else(|| region_error(format!("region {s}+{n} overflows")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Region { ranges })
    }

    /// Parse numpy slices and check them against `shape` (see [`RegionSpec::parse`]): the box
    /// that holds them (an integer index is an axis of extent 1 here; the view drops it).
    pub fn parse(spec: &str, shape: &[u64]) -> Result<Region> {
        let mut spec = RegionSpec::parse(spec)?;
        spec.viewed = true;
        spec.resolve(shape)
    }

    /// Number of axes.
    pub fn ndim(&self) -> usize {
        self.ranges.len()
    }

    /// Extent per axis.
    pub fn shape(&self) -> Vec<u64> {
        self.ranges.iter().map(|r| r.end.saturating_sub(r.start)).collect()
    }

    /// True when the region covers the whole of `shape`.
    pub fn is_full(&self, shape: &[u64]) -> bool {
        self.ranges.len() == shape.len() && self.ranges.iter().zip(shape).all(|(r, &d)| r.start == 0 && r.end == d)
    }

    /// Usage error unless the region has one non-empty range per axis of `shape`, inside it.
    pub fn check_within(&self, shape: &[u64]) -> Result<()> {
        if self.ranges.len() != shape.len() {
            return Err(region_error(format!(
                "region has {} axes, the array has {} (shape {shape:?})",
                self.ranges.len(),
                shape.len()
            )));
        }
        for (axis, (r, &d)) in self.ranges.iter().zip(shape).enumerate() {
            // An empty range is a mistake, except the whole of an empty axis.
            let empty_axis = d == 0 && r.start == 0 && r.end == 0;
            if (r.start >= r.end && !empty_axis) || r.end > d {
                return Err(region_error(format!(
                    "region axis {axis}: {}..{} is empty or outside 0..{d} (shape {shape:?})",
                    r.start, r.end
                )));
            }
        }
        Ok(())
    }

    /// The part of this region inside `other`, or `None` when they do not meet.
    pub fn intersect(&self, other: &Region) -> Option<Region> {
        if self.ranges.len() != other.ranges.len() {
            return None;
        }
        let ranges: Vec<Range<u64>> = self
            .ranges
            .iter()
            .zip(&other.ranges)
            .map(|(a, b)| a.start.max(b.start)..a.end.min(b.end))
            .collect();
        ranges.iter().all(|r| r.start < r.end).then_some(Region { ranges })
    }
}

/// A region as a user writes it, before the array's shape is known: numpy's basic indexing,
/// per leading axis a start and a stop (`None` = the axis's start or end; negative counts from
/// the end), a step, or one integer index that drops the axis. Resolve it against a shape with
/// [`RegionSpec::resolve`]; its errors are usage errors with the code [`REGION_ERROR_CODE`].
///
/// Readers deliver boxes: [`RegionSpec::resolve`] gives the box from the first to the last
/// index taken on each axis. The steps and dropped axes are applied to that box by
/// [`ViewSink`] (through [`stream_view`], which `ArrayFile::read`, `convert`, `stats`, `diff`
/// and the Python package use); a spec with steps or integer indices that has not passed
/// through it is refused by `resolve`, so no path can hand out the box as if it were the view.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct RegionSpec {
    /// `(start, stop)` per leading axis; axes beyond the list are whole (unless `every_axis`).
    /// For an integer index, `(Some(i), None)` with `index` set for the axis.
    pub axes: Vec<(Option<i64>, Option<i64>)>,
    /// Step per listed axis (empty: all 1).
    pub steps: Vec<u64>,
    /// Per listed axis, whether it was an integer index (the axis is dropped from the view).
    pub index: Vec<bool>,
    /// The spec gives one range for every axis of the array: an array with more axes than
    /// `axes` is an error instead of having its trailing axes taken whole. Set for boxes whose
    /// axes are counted from the other end (`--box` lists VDS dimensions fastest first) or that
    /// presume a rank (`--window` on a 2-D grid), where a rank mismatch would cut the wrong
    /// axes.
    pub every_axis: bool,
    /// The steps and dropped axes are applied by a [`ViewSink`] after the reader: `resolve`
    /// gives the box for them (set by [`stream_view`]).
    pub viewed: bool,
}

/// The [`Error::code`] of every error [`RegionSpec::parse`], [`RegionSpec::resolve`],
/// [`Region::from_start_size`] and [`Region::check_within`] return (all
/// [`crate::ErrorKind::Usage`]), so a caller can say which of its options the region came from.
pub const REGION_ERROR_CODE: &str = "usage.region";

fn region_error(message: String) -> Error {
    Error::new(crate::ErrorKind::Usage, REGION_ERROR_CODE, None, message)
}

impl RegionSpec {
    /// Parse numpy slices, one per axis, separated by commas: `START:STOP`, `START:`, `:STOP`,
    /// `:`, each with an optional `:STEP` (`::2`, `10:-10:3`), or `INDEX` (one position; the
    /// axis is dropped, as numpy does). Negative starts, stops and indices count from the end;
    /// steps are positive. Fewer slices than axes leave the trailing axes whole.
    pub fn parse(spec: &str) -> Result<RegionSpec> {
        let mut out = RegionSpec::default();
        for (axis, part) in spec.split(',').map(str::trim).enumerate() {
            let num = |s: &str| -> Result<Option<i64>> {
                let s = s.trim();
                if s.is_empty() {
                    return Ok(None);
                }
                s.parse::<i64>()
                    .map(Some)
                    .map_err(|_| region_error(format!("region axis {axis}: {s:?} is not an integer")))
            };
            let pieces: Vec<&str> = part.split(':').collect();
            let (bounds, step, index) = match pieces[..] {
                [i] => {
                    let i = num(i)?.ok_or_else(|| region_error(format!("region axis {axis} is empty")))?;
                    ((Some(i), None), 1, true)
                }
                [a, b] => ((num(a)?, num(b)?), 1, false),
                [a, b, st] => {
                    let step = match num(st)? {
                        None => 1,
                        Some(v) if v > 0 => v as u64,
                        Some(v) => {
                            return Err(region_error(format!(
                                "region axis {axis}: step {v} is not supported (steps are 1 or more)"
                            )))
                        }
                    };
                    ((num(a)?, num(b)?), step, false)
                }
                _ => {
                    return Err(region_error(format!(
                        "region axis {axis}: {part:?} has more than two ':'"
                    )))
                }
            };
            out.axes.push(bounds);
            out.steps.push(step);
            out.index.push(index);
        }
        Ok(out)
    }

    /// The same spec, required to give a range for every axis of the array (see
    /// [`RegionSpec::every_axis`]).
    pub fn for_every_axis(mut self) -> RegionSpec {
        self.every_axis = true;
        self
    }

    /// From per-axis starts and sizes (e.g. `--window ROW,COL,ROWS,COLS`).
    pub fn from_start_size(start: &[u64], size: &[u64]) -> Result<RegionSpec> {
        Ok(RegionSpec::from(Region::from_start_size(start, size)?))
    }

    /// True when the spec is a plain box (no step above 1, no integer index): what readers take
    /// without a [`ViewSink`].
    pub fn is_box(&self) -> bool {
        self.steps.iter().all(|&s| s == 1) && !self.index.contains(&true)
    }

    fn step(&self, axis: usize) -> u64 {
        self.steps.get(axis).copied().unwrap_or(1).max(1)
    }

    fn is_index(&self, axis: usize) -> bool {
        self.index.get(axis).copied().unwrap_or(false)
    }

    /// The box of an array of `shape` that holds the view (from the first to the last index
    /// taken on each axis): a usage error when the spec has more axes than the array (or fewer,
    /// when `every_axis`), or a range that is empty or outside it. Refused for a spec with steps
    /// or integer indices that no [`ViewSink`] applies (see the type's docs).
    pub fn resolve(&self, shape: &[u64]) -> Result<Region> {
        if !self.is_box() && !self.viewed {
            return Err(Error::unsupported(
                "request.region_view",
                None,
                "this read path takes boxes only: steps and integer indices of a region are applied by \
                 rasterpack_common::stream_view (which ArrayFile::read uses)",
            ));
        }
        if self.axes.len() > shape.len() || (self.every_axis && self.axes.len() != shape.len()) {
            return Err(region_error(format!(
                "the region gives {} range{} but the array has {} ax{} (shape {shape:?})",
                self.axes.len(),
                if self.axes.len() == 1 { "" } else { "s" },
                shape.len(),
                if shape.len() == 1 { "is" } else { "es" },
            )));
        }
        let mut ranges = Vec::with_capacity(shape.len());
        for (axis, &extent) in shape.iter().enumerate() {
            let (a, b) = self.axes.get(axis).copied().unwrap_or((None, None));
            // Negative positions count from the end, as numpy's; past the start is an error.
            let at = |v: i64| -> Result<u64> {
                if v >= 0 {
                    return Ok(v as u64);
                }
                let back = v.unsigned_abs();
                extent.checked_sub(back).ok_or_else(|| {
                    region_error(format!(
                        "region axis {axis}: {v} is before the start of an axis of {extent} (shape {shape:?})"
                    ))
                })
            };
            let start = a.map(at).transpose()?.unwrap_or(0);
            let range = if self.is_index(axis) {
                if start >= extent {
                    return Err(region_error(format!(
                        "region axis {axis}: index {} is outside 0..{extent} (shape {shape:?})",
                        a.unwrap_or(0)
                    )));
                }
                start..start + 1
            } else {
                let stop = b.map(at).transpose()?.unwrap_or(extent);
                let step = self.step(axis);
                // The last index taken, + 1: the box ends there, not at a stop between steps.
                let end = if stop > start {
                    start + (stop - start - 1) / step * step + 1
                } else {
                    stop
                };
                start..end
            };
            ranges.push(range);
        }
        let region = Region { ranges };
        region.check_within(shape)?;
        Ok(region)
    }
}

impl RegionSpec {
    /// Can a source honouring this spec have delivered an array of `shape` (the box of
    /// [`RegionSpec::resolve`])? Axes with both ends given (and not negative) must have exactly
    /// the box's extent, `:END` axes that of `0:END`, integer indices 1; a `START:` axis or a
    /// negative end depends on the full shape, which only the source knows: any extent above
    /// 0, and 0 too when START is 0 (`0:` of an axis of length 0 is that whole empty axis, as
    /// [`RegionSpec::resolve`] takes it). Callers check a delivered array with it before
    /// writing anything, so a reader that ignored the region is caught instead of writing the
    /// whole array as the box.
    pub fn could_deliver(&self, shape: &[u64]) -> bool {
        if self.axes.len() > shape.len() || (self.every_axis && self.axes.len() != shape.len()) {
            return false;
        }
        self.axes
            .iter()
            .zip(shape)
            .enumerate()
            .all(|(axis, (&bounds, &extent))| {
                if self.is_index(axis) {
                    return extent == 1;
                }
                let step = self.step(axis);
                let boxed = |start: i64, end: i64| {
                    let (start, end) = (start as u64, end as u64);
                    if end > start {
                        (end - start - 1) / step * step + 1
                    } else {
                        0
                    }
                };
                match bounds {
                    (Some(start), Some(end)) if start >= 0 && end >= 0 => extent == boxed(start, end),
                    (None, Some(end)) if end >= 0 => extent == boxed(0, end),
                    (Some(start), None) if start >= 0 => extent > 0 || start == 0,
                    _ => true,
                }
            })
    }
}

impl From<Region> for RegionSpec {
    fn from(region: Region) -> RegionSpec {
        let n = region.ranges.len();
        // Shapes beyond i64::MAX cannot be allocated or addressed: saturate.
        let pos = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        RegionSpec {
            axes: region
                .ranges
                .into_iter()
                .map(|r| (Some(pos(r.start)), Some(pos(r.end))))
                .collect(),
            steps: vec![1; n],
            index: vec![false; n],
            every_axis: false,
            viewed: false,
        }
    }
}

impl From<&Region> for RegionSpec {
    fn from(region: &Region) -> RegionSpec {
        RegionSpec::from(region.clone())
    }
}

/// What a numpy view makes of the box a reader delivers: every `steps[a]`-th index of axis
/// `a`, the integer-indexed axes dropped, then (asked for by `convert --squeeze` /
/// `--expand-dims`) every axis of length 1 dropped, and `expand_dims` axes of length 1 put in
/// front.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// Step per leading axis (missing: 1).
    pub steps: Vec<u64>,
    /// Per leading axis, dropped (an integer index: its box extent is 1).
    pub drop: Vec<bool>,
    /// Drop every axis of length 1.
    pub squeeze: bool,
    /// Leading axes of length 1 to add.
    pub expand_dims: usize,
}

impl View {
    /// The view of a region spec (no squeeze, no added axes).
    pub fn of(spec: Option<&RegionSpec>) -> View {
        match spec {
            Some(s) => View {
                steps: s.steps.clone(),
                drop: s.index.clone(),
                ..View::default()
            },
            None => View::default(),
        }
    }

    /// True when the view is the box itself.
    pub fn is_identity(&self) -> bool {
        self.steps.iter().all(|&s| s <= 1) && !self.drop.contains(&true) && !self.squeeze && self.expand_dims == 0
    }

    fn has_steps(&self) -> bool {
        self.steps.iter().any(|&s| s > 1)
    }

    /// The shape of the view of a box of `box_shape`.
    pub fn shape(&self, box_shape: &[u64]) -> Vec<u64> {
        let mut out: Vec<u64> = vec![1; self.expand_dims];
        for (axis, &d) in box_shape.iter().enumerate() {
            if self.drop.get(axis).copied().unwrap_or(false) {
                continue;
            }
            let step = self.steps.get(axis).copied().unwrap_or(1).max(1);
            let n = d.div_ceil(step);
            if self.squeeze && n == 1 {
                continue;
            }
            out.push(n);
        }
        out
    }
}

/// Gives `inner` the [`View`] of the box a reader streams into it. Without steps only the
/// announced shape changes (dropping or adding axes of length 1 keeps the C order of the
/// bytes) and everything passes straight through; with steps, the cells taken are picked out of
/// each run as it arrives, in the order it arrives, so a sequential `inner` still gets
/// ascending offsets.
#[derive(Debug)]
pub struct ViewSink<S> {
    view: View,
    inner: S,
    box_shape: Vec<u64>,
    view_strides: Vec<u64>,
    elem: u64,
    buf: Vec<u8>,
}

impl<S: ArraySink> ViewSink<S> {
    /// `view` applied in front of `inner`.
    pub fn new(inner: S, view: View) -> ViewSink<S> {
        ViewSink {
            view,
            inner,
            box_shape: Vec::new(),
            view_strides: Vec::new(),
            elem: 1,
            buf: Vec::new(),
        }
    }

    /// The wrapped sink.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// Box values `start..start + count` (C order of the box), the `k`-th from `data`'s
    /// `k`-th value (or all `pattern` when `data` is `None`), passed on as the view's values.
    fn pick(&mut self, start: u64, count: u64, data: Option<&[u8]>, pattern: &[u8]) -> Result<()> {
        let ndim = self.box_shape.len();
        let last = self.box_shape[ndim - 1];
        let step_of = |a: usize| self.view.steps.get(a).copied().unwrap_or(1).max(1);
        let s_last = step_of(ndim - 1);
        let elem = self.elem as usize;
        let end = start + count;
        let mut i = start;
        while i < end {
            let row = i / last;
            let c0 = i % last;
            let c1 = (c0 + (end - i)).min(last);
            // The row's index on each outer axis: taken only when every one is on its step.
            let mut rest = row;
            let mut out_row = 0u64;
            let mut taken = true;
            for a in (0..ndim - 1).rev() {
                let idx = rest % self.box_shape[a];
                rest /= self.box_shape[a];
                let st = step_of(a);
                if !idx.is_multiple_of(st) {
                    taken = false;
                    break;
                }
                out_row += (idx / st) * self.view_strides[a];
            }
            if taken {
                let first = c0.div_ceil(s_last) * s_last;
                if first < c1 {
                    let n = (c1 - 1 - first) / s_last + 1;
                    let at = (out_row + first / s_last) * self.elem;
                    match data {
                        None => self.inner.fill_at(at, n * self.elem, pattern)?,
                        Some(d) => {
                            let base = (row * last + first - start) as usize;
                            if s_last == 1 {
                                self.inner.write_at(at, &d[base * elem..(base + n as usize) * elem])?;
                            } else {
                                self.buf.clear();
                                for k in 0..n as usize {
                                    let v = base + k * s_last as usize;
                                    self.buf.extend_from_slice(&d[v * elem..(v + 1) * elem]);
                                }
                                let buf = std::mem::take(&mut self.buf);
                                let r = self.inner.write_at(at, &buf);
                                self.buf = buf;
                                r?;
                            }
                        }
                    }
                }
            }
            i = row * last + c1;
        }
        Ok(())
    }

    fn whole(&self, offset: u64, len: u64) -> Result<(u64, u64)> {
        if !offset.is_multiple_of(self.elem) || !len.is_multiple_of(self.elem) {
            return Err(Error::usage(format!(
                "internal: {len} bytes at {offset} are not whole {}-byte values",
                self.elem
            )));
        }
        Ok((offset / self.elem, len / self.elem))
    }
}

impl<S: ArraySink> crate::SinkWrapper for ViewSink<S> {
    type Inner = S;
    fn inner(&mut self) -> &mut S {
        &mut self.inner
    }
    fn inner_ref(&self) -> &S {
        &self.inner
    }
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        self.box_shape = info.shape.clone();
        self.elem = info.dtype.size() as u64;
        // Strides of the stepped box (before dropping axes, which are of extent 1).
        let stepped: Vec<u64> = info
            .shape
            .iter()
            .enumerate()
            .map(|(a, &d)| d.div_ceil(self.view.steps.get(a).copied().unwrap_or(1).max(1)))
            .collect();
        self.view_strides = vec![1; stepped.len()];
        for a in (0..stepped.len().saturating_sub(1)).rev() {
            self.view_strides[a] = self.view_strides[a + 1].saturating_mul(stepped[a + 1]);
        }
        let mut view = info.clone();
        view.shape = self.view.shape(&info.shape);
        self.inner.begin(&view)
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        if !self.view.has_steps() || self.box_shape.is_empty() {
            return self.inner.write_at(offset, data);
        }
        let (start, count) = self.whole(offset, data.len() as u64)?;
        self.pick(start, count, Some(data), &[])
    }
    fn fill_at(&mut self, offset: u64, len: u64, pattern: &[u8]) -> Result<()> {
        if !self.view.has_steps() || self.box_shape.is_empty() {
            return self.inner.fill_at(offset, len, pattern);
        }
        if pattern.len() as u64 != self.elem {
            return fill_by_chunks(self, offset, len, pattern);
        }
        let (start, count) = self.whole(offset, len)?;
        self.pick(start, count, None, pattern)
    }
    fn direct_buffer(&mut self) -> Option<&mut [u8]> {
        if self.view.has_steps() {
            None
        } else {
            self.inner.direct_buffer()
        }
    }
    fn direct_buffer_polled(&mut self) -> Option<&mut [u8]> {
        if self.view.has_steps() {
            None
        } else {
            self.inner.direct_buffer_polled()
        }
    }
    // With steps the bytes are picked in `write_at`; no handle that would bypass it is handed on.
    fn parallel_file(&mut self) -> Option<ParallelFile> {
        None
    }
    fn parallel_blocks(&mut self) -> Option<ParallelBlocks> {
        None
    }
    fn takes_blocks(&self) -> bool {
        false
    }
    fn blocks_before_begin(&mut self, _info: &ArrayInfo) -> Option<ParallelBlocks> {
        None
    }
    fn written_elsewhere(&mut self, len: u64) -> Result<()> {
        written_without_handle(len)
    }
}

/// Stream the array `req` asks for through `stream` (a reader's `stream`) into `sink`, with
/// the numpy parts of `req.region` (steps, integer indices) and `view`'s squeeze / added axes
/// applied: the reader reads the box, a [`ViewSink`] makes the view. The caller calls
/// `finish` on `sink`, as after any stream.
pub fn stream_view(
    req: &crate::format::ArrayRequest,
    squeeze: bool,
    expand_dims: usize,
    sink: &mut dyn ArraySink,
    stream: impl FnOnce(&crate::format::ArrayRequest, &mut dyn ArraySink) -> Result<()>,
) -> Result<()> {
    let mut view = View::of(req.region.as_ref());
    view.squeeze = squeeze;
    view.expand_dims = expand_dims;
    let mut boxed = req.clone();
    if let Some(spec) = &mut boxed.region {
        spec.viewed = true;
    }
    if view.is_identity() {
        return stream(&boxed, sink);
    }
    let mut v = ViewSink::new(sink, view);
    stream(&boxed, &mut v)
}

/// The runs of a region of C-order data: `(byte offset in the full data, length)`, contiguous
/// byte ranges in ascending order, each following the previous one in the region's own C-order
/// output. Trailing axes the region covers whole merge into one run, so a region of whole rows
/// is one run per slab, and the whole array one run.
///
/// ```
/// use rasterpack_common::stream::{Region, RegionRuns};
///
/// // Rows 1..3, columns 2..4 of a 4 x 5 array of 2-byte values.
/// let region = Region::from_start_size(&[1, 2], &[2, 2])?;
/// let runs: Vec<(u64, u64)> = RegionRuns::new(&[4, 5], &region, 2).collect();
/// assert_eq!(runs, [(14, 4), (24, 4)]);
/// # Ok::<(), rasterpack_common::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct RegionRuns {
    shape: Vec<u64>,
    region: Region,
    /// Bytes per step of the run axis (the axes after it, covered whole).
    inner: u64,
    run_axis: usize,
    run_len: u64,
    /// Position on the axes before the run axis.
    idx: Vec<u64>,
    done: bool,
}

impl RegionRuns {
    /// The runs of `region` (within `shape`, as [`Region::check_within`] ensures) of data with
    /// `elem`-byte values. A 0-D array is one run of one value; an empty region has none.
    pub fn new(shape: &[u64], region: &Region, elem: u64) -> RegionRuns {
        let ndim = shape.len();
        if ndim == 0 {
            return RegionRuns {
                shape: Vec::new(),
                region: region.clone(),
                inner: elem,
                run_axis: 0,
                run_len: elem,
                idx: Vec::new(),
                done: false,
            };
        }
        let mut split = ndim;
        while split > 1 && region.ranges[split - 1].start == 0 && region.ranges[split - 1].end == shape[split - 1] {
            split -= 1;
        }
        let inner = shape[split..].iter().product::<u64>() * elem;
        let run_axis = split - 1;
        let run_len = (region.ranges[run_axis].end - region.ranges[run_axis].start) * inner;
        let empty = run_len == 0 || region.ranges.iter().any(|r| r.is_empty());
        RegionRuns {
            shape: shape.to_vec(),
            region: region.clone(),
            inner,
            run_axis,
            run_len,
            idx: region.ranges[..run_axis].iter().map(|r| r.start).collect(),
            done: empty,
        }
    }

    /// The length of every run, in bytes.
    pub fn run_len(&self) -> u64 {
        self.run_len
    }
}

impl Iterator for RegionRuns {
    /// `(byte offset in the full data, length)`.
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        if self.done {
            return None;
        }
        if self.shape.is_empty() {
            self.done = true;
            return Some((0, self.run_len));
        }
        let mut linear = 0u64;
        for axis in 0..=self.run_axis {
            let pos = if axis == self.run_axis {
                self.region.ranges[axis].start
            } else {
                self.idx[axis]
            };
            linear = linear * self.shape[axis] + pos;
        }
        let run = (linear * self.inner, self.run_len);
        // Next position: the last axis before the run axis fastest.
        let mut axis = self.run_axis;
        loop {
            if axis == 0 {
                self.done = true;
                break;
            }
            axis -= 1;
            self.idx[axis] += 1;
            if self.idx[axis] < self.region.ranges[axis].end {
                break;
            }
            self.idx[axis] = self.region.ranges[axis].start;
        }
        Some(run)
    }
}

/// Copy the part of a decoded block that falls inside `window` into a sink holding exactly
/// `window` (an array of `window.shape()`), as whole contiguous runs along the last axis.
///
/// `block` is the region of the full array that `block_data` holds, in C order with
/// `elem_size`-byte values. Works for any number of axes; the sink must be random-access unless
/// the caller guarantees the runs arrive in order (one block per band, for example).
pub fn copy_block_into_window(
    block: &Region,
    block_data: &[u8],
    elem_size: usize,
    window: &Region,
    sink: &mut dyn ArraySink,
) -> Result<()> {
    let Some(part) = block.intersect(window) else {
        return Ok(());
    };
    let ndim = part.ndim();
    let block_shape = block.shape();
    let window_shape = window.shape();
    let expected = byte_len_usize(&block_shape, elem_size)?;
    if block_data.len() != expected {
        return Err(Error::usage(format!(
            "internal: block data holds {} bytes, its region {expected}",
            block_data.len()
        )));
    }
    if ndim == 0 {
        return sink.write_at(0, block_data);
    }
    let run = (part.ranges[ndim - 1].end - part.ranges[ndim - 1].start) as usize * elem_size;
    // Odometer over every axis but the last.
    let mut idx: Vec<u64> = part.ranges[..ndim - 1].iter().map(|r| r.start).collect();
    loop {
        let mut src = 0u64;
        let mut dst = 0u64;
        for axis in 0..ndim {
            let pos = if axis + 1 == ndim {
                part.ranges[axis].start
            } else {
                idx[axis]
            };
            src = src * block_shape[axis] + (pos - block.ranges[axis].start);
            dst = dst * window_shape[axis] + (pos - window.ranges[axis].start);
        }
        let src = src as usize * elem_size;
        sink.write_at(dst * elem_size as u64, &block_data[src..src + run])?;
        // Next index, last outer axis fastest.
        let mut axis = ndim - 1;
        loop {
            if axis == 0 {
                return Ok(());
            }
            axis -= 1;
            idx[axis] += 1;
            if idx[axis] < part.ranges[axis].end {
                break;
            }
            idx[axis] = part.ranges[axis].start;
        }
    }
}

/// Stream an array stored contiguously in C order at `data_offset` of `input` (`.npy` data, raw
/// tables), or only `region` of it, into `sink` (which must already have had `begin`). Reads go
/// in pieces of at most [`STREAM_PIECE`] bytes, so memory stays small whatever the array's size;
/// `fix` sees each piece before the sink does (e.g. a byte swap of whole values).
pub fn stream_stored_c_order(
    input: &Input,
    data_offset: u64,
    dtype: DType,
    shape: &[u64],
    region: Option<&Region>,
    fix: &mut dyn FnMut(&mut [u8]),
    sink: &mut dyn ArraySink,
) -> Result<()> {
    let elem = dtype.size() as u64;
    let full = Region::full(shape);
    let region = region.unwrap_or(&full);
    region.check_within(shape)?;
    let runs = RegionRuns::new(shape, region, elem);
    let piece = STREAM_PIECE.min(runs.run_len().max(elem)) / elem * elem;
    let mut buf = vec![0u8; piece.max(elem) as usize];
    let mut out = 0u64;
    for (at, len) in runs {
        let (mut src, mut left) = (data_offset + at, len);
        while left > 0 {
            let n = left.min(buf.len() as u64) as usize;
            input.read_at(src, &mut buf[..n], "array data")?;
            fix(&mut buf[..n]);
            sink.write_at(out, &buf[..n])?;
            src += n as u64;
            out += n as u64;
            left -= n as u64;
        }
    }
    Ok(())
}

/// Largest read [`stream_stored_c_order`] makes at once.
pub const STREAM_PIECE: u64 = 4 << 20;

fn byte_len_usize(shape: &[u64], elem_size: usize) -> Result<usize> {
    shape
        .iter()
        .try_fold(elem_size as u64, |acc, &d| acc.checked_mul(d))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| Error::usage(format!("block shape {shape:?} overflows")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hook_probe_answers_every_hook_itself() {
        use crate::testkit::{assert_forwards, call_every_hook, HookProbe};
        let mut probe = HookProbe::default();
        call_every_hook(&mut probe, &ArrayInfo::new(DType::F32, vec![2, 3]));
        assert_eq!(probe.called(), crate::testkit::SINK_HOOKS);
        assert_forwards("the probe itself", &probe, &[]);
        // A hook that reaches the probe though the wrapper says it keeps it is caught too.
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            assert_forwards("a wrapper", &probe, &["finish"])
        }));
        assert!(caught.is_err());
    }

    #[test]
    fn wrappers_pass_on_every_hook_they_do_not_answer_themselves() {
        use crate::testkit::{assert_forwards, call_every_hook, HookProbe};
        let info = ArrayInfo::new(DType::U16, vec![4, 6]);
        let through = |wrap: &dyn Fn(&mut HookProbe) -> Box<dyn ArraySink + '_>| {
            let mut probe = HookProbe::default();
            call_every_hook(&mut *wrap(&mut probe), &info);
            probe
        };
        assert_forwards("&mut S", &through(&|p| Box::new(&mut *p)), &[]);
        assert_forwards("Box<S>", &through(&|p| Box::new(Box::new(&mut *p))), &[]);
        // Progress counts the bytes: a buffer filled in place would not be counted.
        let progress = through(&|p| Box::new(ProgressSink::new(&mut *p, Progress::new(|_, _| {}))));
        assert_forwards("ProgressSink", &progress, &["direct_buffer", "direct_buffer_polled"]);
        // A view without steps passes a buffer on (the bytes are in place); a view with steps
        // picks the bytes, so it passes on nothing that bypasses `write_at`.
        let plain = through(&|p| Box::new(ViewSink::new(&mut *p, View::default())));
        let bypass = [
            "takes_blocks",
            "blocks_before_begin",
            "parallel_file",
            "parallel_blocks",
            "written_elsewhere",
        ];
        assert_forwards("ViewSink", &plain, &bypass);
        let stepped = View {
            steps: vec![2, 1],
            ..View::default()
        };
        let stepped = through(&|p| Box::new(ViewSink::new(&mut *p, stepped.clone())));
        assert_forwards(
            "ViewSink with steps",
            &stepped,
            &[bypass.as_slice(), &["direct_buffer", "direct_buffer_polled"]].concat(),
        );
    }

    #[test]
    fn a_parallel_file_writes_only_inside_the_data_and_views_turn_it_off() {
        let path = std::env::temp_dir().join(format!("rasterpack-parallel-file-{}.npy", std::process::id()));
        let file = std::fs::File::create(&path).unwrap();
        let info = ArrayInfo::new(DType::U8, vec![4, 4]);
        let mut npy = crate::npy::NpyWriter::new(crate::Output::File(&file));
        let mut counted = ProgressSink::new(&mut npy, Progress::new(|_, _| {}));
        counted.begin(&info).unwrap();
        // Progress passes the file on and counts what is reported written through it.
        let par = counted.parallel_file().expect("a local .npy offers its file");
        par.write_at(0, &[1; 8]).unwrap();
        counted.written_elsewhere(8).unwrap();
        assert_eq!(counted.done(), 8);
        // Past the data's end (over the next file bytes) or overflowing: refused, not written.
        assert!(par.write_at(9, &[2; 8]).is_err());
        assert!(par.write_at(u64::MAX, &[2; 1]).is_err());
        assert_eq!(par.writes(), 1);
        counted.write_at(8, &[3; 8]).unwrap();
        counted.finish().unwrap();
        drop(counted);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[bytes.len() - 16..], &[[1u8; 8], [3u8; 8]].concat()[..]);
        // A view with steps must see the bytes: none through it.
        let file = std::fs::File::create(&path).unwrap();
        let mut view = View::of(None);
        view.steps = vec![2, 1];
        let mut v = ViewSink::new(crate::npy::NpyWriter::new(crate::Output::File(&file)), view);
        v.begin(&info).unwrap();
        assert!(v.parallel_file().is_none());
        // A stream has no file to offer.
        let mut sink = Vec::new();
        let mut s = crate::npy::NpyWriter::new(crate::Output::Stream(&mut sink));
        s.begin(&info).unwrap();
        assert!(s.parallel_file().is_none());
        std::fs::remove_file(&path).unwrap();
    }

    /// The bytes of `region` of a C-order array, gathered one value at a time.
    fn gathered(data: &[u8], shape: &[u64], region: &Region, elem: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let count: u64 = region.shape().iter().product();
        for n in 0..count {
            // The n-th value of the region, in C order, as an index into the full array.
            let (mut rest, mut linear) = (n, 0u64);
            let mut idx = vec![0u64; shape.len()];
            for axis in (0..shape.len()).rev() {
                let len = region.ranges[axis].end - region.ranges[axis].start;
                idx[axis] = region.ranges[axis].start + rest % len;
                rest /= len;
            }
            for axis in 0..shape.len() {
                linear = linear * shape[axis] + idx[axis];
            }
            let at = linear as usize * elem;
            out.extend_from_slice(&data[at..at + elem]);
        }
        out
    }

    #[test]
    fn could_deliver_matches_what_resolve_gives() {
        let s = |v: &str| RegionSpec::parse(v).unwrap();
        assert!(s("1:3,:").could_deliver(&[2, 7]));
        assert!(!s("1:3,:").could_deliver(&[4, 7]));
        assert!(s(":5").could_deliver(&[5, 9]));
        assert!(!s(":5").could_deliver(&[9, 9]));
        assert!(s("4:").could_deliver(&[2]));
        assert!(!s("4:").could_deliver(&[0]));
        assert!(!s("1,2,3").could_deliver(&[1, 1]));
        assert!(!s("1:2").for_every_axis().could_deliver(&[1, 1]));
        // `0:` of an axis of length 0 is the empty box (it was refused as a region the reader
        // ignored), like `:0` and `:`.
        for spec in ["0:", ":0", ":", "0:,1:", "0:0"] {
            let shape = [0, 3];
            let region = s(spec).resolve(&shape).unwrap();
            assert!(s(spec).could_deliver(&region.shape()), "{spec}: {:?}", region.shape());
            assert_eq!(region.shape()[0], 0, "{spec}");
        }
    }

    #[test]
    fn region_runs_cover_exactly_the_region_in_output_order() {
        let shapes: [&[u64]; 5] = [&[7], &[4, 5], &[3, 4, 5], &[2, 3, 1, 4], &[1, 1, 6]];
        for shape in shapes {
            let elem = 2usize;
            let n: u64 = shape.iter().product();
            let data: Vec<u8> = (0..n as usize * elem).map(|i| (i % 251) as u8).collect();
            // Every start/size pair per axis of small arrays, sampled by a stride.
            let mut case = 0u64;
            let combos: u64 = shape.iter().map(|&d| d * d).product();
            for k in (0..combos).step_by(7) {
                let (mut rest, mut start, mut size) = (k, vec![], vec![]);
                for &d in shape.iter() {
                    let pick = rest % (d * d);
                    rest /= d * d;
                    let (a, b) = (pick / d, pick % d);
                    start.push(a.min(b));
                    size.push(a.max(b) - a.min(b) + 1);
                }
                let region = Region::from_start_size(&start, &size).unwrap();
                let mut got = Vec::new();
                let mut last_end = 0;
                for (at, len) in RegionRuns::new(shape, &region, elem as u64) {
                    assert!(at >= last_end, "{shape:?} {region:?}: runs out of order");
                    last_end = at + len;
                    got.extend_from_slice(&data[at as usize..(at + len) as usize]);
                }
                assert_eq!(got, gathered(&data, shape, &region, elem), "{shape:?} {region:?}");
                case += 1;
            }
            assert!(case > 0);
        }
        // A 0-D array is one value; an empty region has no run.
        assert_eq!(
            RegionRuns::new(&[], &Region { ranges: vec![] }, 4).collect::<Vec<_>>(),
            [(0, 4)]
        );
        let empty = Region {
            ranges: vec![0..2, 3..3],
        };
        assert_eq!(RegionRuns::new(&[2, 5], &empty, 4).count(), 0);
    }

    #[test]
    fn region_parse_and_checks() {
        let shape = [10, 20, 30];
        let r = Region::parse("2:5, :, 7", &shape).unwrap();
        assert_eq!(r.ranges, vec![2..5, 0..20, 7..8]);
        assert_eq!(r.shape(), vec![3, 20, 1]);
        assert_eq!(Region::parse("1:", &shape).unwrap().ranges, vec![1..10, 0..20, 0..30]);
        assert!(Region::parse("", &shape).is_err());
        assert!(Region::parse("5:2", &shape).is_err());
        assert!(Region::parse("0:11", &shape).is_err());
        assert!(Region::parse("1,2,3,4", &shape).is_err());
        assert_eq!(Region::parse("-1:", &shape).unwrap().ranges, vec![9..10, 0..20, 0..30]);
        assert!(Region::parse("-11:", &shape).is_err());
        assert!(Region::full(&shape).is_full(&shape));
        assert!(!r.is_full(&shape));
        let a = Region::from_start_size(&[0, 0], &[4, 4]).unwrap();
        let b = Region::from_start_size(&[2, 3], &[4, 4]).unwrap();
        assert_eq!(a.intersect(&b).unwrap().ranges, vec![2..4, 3..4]);
        assert!(a
            .intersect(&Region::from_start_size(&[4, 0], &[1, 1]).unwrap())
            .is_none());
        assert!(Region::from_start_size(&[u64::MAX], &[2]).is_err());
        // The whole of an array with an empty axis is a valid region; a part of it is not.
        assert_eq!(Region::parse(":", &[0]).unwrap().shape(), vec![0]);
        assert!(Region::full(&[0, 3]).check_within(&[0, 3]).is_ok());
        assert!(Region::parse("0:1", &[0]).is_err());
    }

    #[test]
    fn memory_sink_bounds_and_completeness() {
        let mut sink = MemorySink::new(Limits {
            max_array_bytes: 16,
            ..Limits::default()
        });
        assert!(sink.begin(&ArrayInfo::new(DType::F32, vec![5])).is_err());
        sink.begin(&ArrayInfo::new(DType::U16, vec![4])).unwrap();
        sink.write_at(2, &[1, 0, 2, 0]).unwrap();
        assert!(sink.write_at(7, &[0, 0]).is_err());
        sink.fill_at(6, 2, &[9, 0]).unwrap();
        let incomplete = MemorySink::new(Limits::default());
        assert!(incomplete.into_array().is_err());
        sink.write_at(0, &[7, 0]).unwrap();
        let a = sink.into_array().unwrap();
        assert_eq!(a.data, vec![7, 0, 1, 0, 2, 0, 9, 0]);
    }

    #[test]
    fn memory_sink_offers_its_buffer_after_begin() {
        let mut sink = MemorySink::new(Limits::default());
        assert!(sink.direct_buffer().is_none(), "no buffer before begin");
        sink.begin(&ArrayInfo::new(DType::U8, vec![3])).unwrap();
        sink.direct_buffer().unwrap().copy_from_slice(&[1, 2, 3]);
        assert_eq!(sink.into_array().unwrap().data, vec![1, 2, 3]);
    }

    #[test]
    fn blocks_land_in_their_window() {
        // A 6x7 array of u16 whose value is row*10+col, cut into 4x4 blocks; read window rows
        // 1..5, cols 2..7 and compare with a direct slice.
        let (rows, cols) = (6u64, 7u64);
        let value = |r: u64, c: u64| (r * 10 + c) as u16;
        let window = Region::from_start_size(&[1, 2], &[4, 5]).unwrap();
        let mut sink = MemorySink::new(Limits::default());
        sink.begin(&ArrayInfo::new(DType::U16, window.shape())).unwrap();
        for br in (0..rows).step_by(4) {
            for bc in (0..cols).step_by(4) {
                let block = Region {
                    ranges: vec![br..(br + 4).min(rows), bc..(bc + 4).min(cols)],
                };
                let mut data = Vec::new();
                for r in block.ranges[0].clone() {
                    for c in block.ranges[1].clone() {
                        data.extend_from_slice(&value(r, c).to_le_bytes());
                    }
                }
                copy_block_into_window(&block, &data, 2, &window, &mut sink).unwrap();
            }
        }
        let a = sink.into_array().unwrap();
        let mut want = Vec::new();
        for r in 1..5 {
            for c in 2..7 {
                want.extend_from_slice(&value(r, c).to_le_bytes());
            }
        }
        assert_eq!(a.data, want);
    }

    #[test]
    fn stored_arrays_stream_whole_and_by_region() {
        // u16 values 0..(3*4*5) in C order after a 10-byte prefix.
        let shape = [3u64, 4, 5];
        let mut bytes = vec![0xAA; 10];
        for v in 0..60u16 {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        let input = Input::from_bytes("mem", bytes);
        let whole = Region::full(&shape);
        let all = NdArray::new(DType::U16, shape.to_vec(), input.as_bytes().unwrap()[10..].to_vec()).unwrap();
        for spec in ["", "1", "0:2,1:3,2:5", ":,2,:", "2,3,4", "0:3,0:4,1:2"] {
            let region = if spec.is_empty() {
                whole.clone()
            } else {
                Region::parse(spec, &shape).unwrap()
            };
            let mut sink = MemorySink::new(Limits::default());
            sink.begin(&ArrayInfo::new(DType::U16, region.shape())).unwrap();
            stream_stored_c_order(&input, 10, DType::U16, &shape, Some(&region), &mut |_| {}, &mut sink).unwrap();
            assert_eq!(
                sink.into_array().unwrap(),
                all.region(&region).unwrap(),
                "region {spec:?}"
            );
        }
        // A byte swap applied on the way.
        let mut sink = MemorySink::new(Limits::default());
        sink.begin(&ArrayInfo::new(DType::U16, shape.to_vec())).unwrap();
        let mut swap = |b: &mut [u8]| b.chunks_exact_mut(2).for_each(|v| v.swap(0, 1));
        stream_stored_c_order(&input, 10, DType::U16, &shape, None, &mut swap, &mut sink).unwrap();
        assert_eq!(sink.into_array().unwrap().data[..4], [0, 0, 0, 1]);
        // Truncated input is an error.
        let short = Input::from_bytes("short", vec![0; 20]);
        let mut sink = MemorySink::new(Limits::default());
        sink.begin(&ArrayInfo::new(DType::U16, shape.to_vec())).unwrap();
        assert!(stream_stored_c_order(&short, 10, DType::U16, &shape, None, &mut |_| {}, &mut sink).is_err());
    }

    #[test]
    fn every_axis_specs_refuse_a_rank_mismatch() {
        let spec = RegionSpec::parse("1:3,2:3").unwrap();
        assert_eq!(spec.resolve(&[4, 5, 6]).unwrap().ranges, vec![1..3, 2..3, 0..6]);
        let exact = spec.clone().for_every_axis();
        let err = exact.resolve(&[4, 5, 6]).unwrap_err();
        assert_eq!(err.code, REGION_ERROR_CODE);
        assert!(
            err.message.contains("gives 2 ranges but the array has 3 axes"),
            "{}",
            err.message
        );
        assert_eq!(exact.resolve(&[4, 5]).unwrap().ranges, vec![1..3, 2..3]);
        // Every region error carries the code, whatever the mistake.
        for bad in ["x", "", "1,,2"] {
            assert_eq!(RegionSpec::parse(bad).unwrap_err().code, REGION_ERROR_CODE, "{bad:?}");
        }
        assert_eq!(Region::parse("5:9", &[4]).unwrap_err().code, REGION_ERROR_CODE);
    }

    #[test]
    fn progress_sink_counts_what_reaches_the_inner_sink() {
        use std::sync::{Arc, Mutex};
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let progress = Progress::new(move |done, total| log.lock().unwrap().push((done, total)));
        let mut sink = ProgressSink::new(MemorySink::new(Limits::default()), progress);
        sink.begin(&ArrayInfo::new(DType::U16, vec![2, 3])).unwrap();
        assert!(sink.random_access(), "random access is the inner sink's");
        sink.write_at(0, &[1, 0, 2, 0]).unwrap();
        sink.fill_at(4, 8, &[7, 0]).unwrap();
        // A failed write is not counted.
        assert!(sink.write_at(12, &[0, 0]).is_err());
        sink.finish().unwrap();
        assert_eq!(sink.done(), 12);
        assert_eq!(*seen.lock().unwrap(), vec![(0, 12), (4, 12), (12, 12)]);
        let a = sink.into_inner().into_array().unwrap();
        assert_eq!(a.to_vec::<u16>().unwrap(), vec![1, 2, 7, 7, 7, 7]);
        // A sink that refuses at begin reports nothing.
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let tiny = MemorySink::new(Limits {
            max_array_bytes: 4,
            ..Limits::default()
        });
        let mut sink = ProgressSink::new(tiny, Progress::new(move |d, t| log.lock().unwrap().push((d, t))));
        assert!(sink.begin(&ArrayInfo::new(DType::F64, vec![2])).is_err());
        assert!(seen.lock().unwrap().is_empty());
    }

    #[test]
    fn sequential_cursor_refuses_gaps() {
        let mut c = SequentialCursor::default();
        c.advance(0, 4).unwrap();
        assert!(c.advance(8, 4).is_err());
        c.advance(4, 4).unwrap();
        assert_eq!(c.position, 8);
    }

    /// numpy's basic indexing, spelled out: per axis the indices taken, and whether it stays.
    fn numpy_pick(shape: &[u64], spec: &str) -> (Vec<u64>, Vec<u64>) {
        let parts: Vec<&str> = spec.split(',').collect();
        let mut axes: Vec<(Vec<u64>, bool)> = Vec::new();
        for (a, &n) in shape.iter().enumerate() {
            let n = n as i64;
            let norm = |v: i64| if v < 0 { (v + n).max(0) } else { v.min(n) };
            let part = parts.get(a).copied().unwrap_or(":").trim();
            let f: Vec<&str> = part.split(':').collect();
            let opt = |s: &str| {
                if s.is_empty() {
                    None
                } else {
                    Some(s.parse::<i64>().unwrap())
                }
            };
            if f.len() == 1 {
                let i = opt(f[0]).unwrap();
                axes.push((vec![(if i < 0 { i + n } else { i }) as u64], false));
                continue;
            }
            let start = opt(f[0]).map_or(0, norm);
            let stop = opt(f[1]).map_or(n, norm);
            let step = f.get(2).and_then(|s| opt(s)).unwrap_or(1);
            axes.push(((start..stop).step_by(step as usize).map(|v| v as u64).collect(), true));
        }
        let out_shape: Vec<u64> = axes.iter().filter(|a| a.1).map(|a| a.0.len() as u64).collect();
        let mut values = Vec::new();
        let mut idx = vec![0usize; shape.len()];
        'outer: loop {
            if axes.iter().any(|a| a.0.is_empty()) {
                break;
            }
            let mut lin = 0u64;
            for a in 0..shape.len() {
                lin = lin * shape[a] + axes[a].0[idx[a]];
            }
            values.push(lin);
            for a in (0..shape.len()).rev() {
                idx[a] += 1;
                if idx[a] < axes[a].0.len() {
                    continue 'outer;
                }
                idx[a] = 0;
            }
            break;
        }
        (out_shape, values)
    }

    #[test]
    fn numpy_views_match_numpy_indexing() {
        use crate::format::ArrayRequest;
        use crate::npy_format::NpyFile;
        let shape = [4u64, 5, 6];
        let values: Vec<u32> = (0..120).collect();
        let mut bytes = Vec::new();
        crate::npy::write(&mut bytes, &NdArray::from_vec(shape.to_vec(), values).unwrap()).unwrap();
        let file = NpyFile::from_bytes(bytes).unwrap();
        for spec in [
            "::2",
            "1:-1:2",
            "-1",
            "2",
            ":,3",
            ":,:,-1",
            "::3,1:4:2,::4",
            "1,2,3",
            "-2:,::2,1::2",
            "0:4:5",
            ":,-5:",
            "1:3",
            ":,::2,-3",
        ] {
            let (want_shape, want) = numpy_pick(&shape, spec);
            let req = ArrayRequest::default().with_region(RegionSpec::parse(spec).unwrap());
            // In memory (random access) ...
            let got = file.read(&req).unwrap();
            assert_eq!(got.shape, want_shape, "{spec}");
            assert_eq!(
                got.to_vec::<u32>().unwrap(),
                want.iter().map(|&v| v as u32).collect::<Vec<_>>(),
                "{spec}"
            );
            // ... and into a sequential sink, in pieces of odd sizes through fills and writes.
            let mut out = Vec::new();
            {
                let mut w = crate::npy::NpyWriter::new(crate::Output::Stream(&mut out));
                stream_view(&req, false, 0, &mut w, |r, s| file.stream(r, s)).unwrap();
                w.finish().unwrap();
            }
            assert_eq!(
                NpyFile::from_bytes(out)
                    .unwrap()
                    .read(&ArrayRequest::default())
                    .unwrap(),
                got,
                "{spec}"
            );
        }
        // A reader path that does not apply the view refuses it rather than give the box.
        let req = ArrayRequest::default().with_region(RegionSpec::parse("::2").unwrap());
        let mut sink = MemorySink::new(Limits::default());
        assert_eq!(file.stream(&req, &mut sink).unwrap_err().code, "request.region_view");
        // Squeeze and added axes.
        let req = ArrayRequest::default().with_region(RegionSpec::parse("1:2,3:4").unwrap());
        let mut sink = MemorySink::new(Limits::default());
        stream_view(&req, true, 0, &mut sink, |r, s| file.stream(r, s)).unwrap();
        assert_eq!(sink.into_array().unwrap().shape, vec![6]);
        let mut sink = MemorySink::new(Limits::default());
        stream_view(&ArrayRequest::default(), false, 1, &mut sink, |r, s| file.stream(r, s)).unwrap();
        assert_eq!(sink.into_array().unwrap().shape, vec![1, 4, 5, 6]);
        // Out of range: numpy's IndexError for an index; a usage error for positions too.
        for bad in ["4", "-5", ":,:,6", "-7:"] {
            let req = ArrayRequest::default().with_region(RegionSpec::parse(bad).unwrap());
            assert_eq!(file.read(&req).unwrap_err().code, REGION_ERROR_CODE, "{bad}");
        }
    }

    #[test]
    fn stepped_fills_land_on_the_view() {
        // A sink fed through fill_at (as unwritten tiles are) gets the same view as by writes.
        let mut view = ViewSink::new(
            MemorySink::new(Limits::default()),
            View {
                steps: vec![2, 3],
                ..View::default()
            },
        );
        view.begin(&ArrayInfo::new(DType::U16, vec![5, 7])).unwrap();
        // Rows 0..2 as one fill of 7s, the rest written as row * 10 + col.
        view.fill_at(0, 2 * 7 * 2, &[7, 0]).unwrap();
        let rest: Vec<u8> = (14..35u16).flat_map(|i| ((i / 7) * 10 + i % 7).to_le_bytes()).collect();
        view.write_at(28, &rest).unwrap();
        let a = view.into_inner().into_array().unwrap();
        assert_eq!(a.shape, vec![3, 3]);
        assert_eq!(a.to_vec::<u16>().unwrap(), vec![7, 7, 7, 20, 23, 26, 40, 43, 46]);
    }
}
