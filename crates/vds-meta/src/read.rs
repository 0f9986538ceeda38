//! Reading a box of a layer into an [`ArraySink`]: only the bricks the box meets are decoded,
//! in parallel, and memory stays within [`Limits::working_set`] whatever the array's size.
//!
//! The box is cut into *groups* of bricks: at level `k`, a group is every brick sharing the
//! chunk coordinates of dims `k..6` (so it spans the whole box in dims `0..k`). In the output
//! (dim 0 fastest, the `.npy` C order reversed) a group's voxels are runs of
//! `extent(k) * stride(k)` bytes, one per position in the dims above `k`; at `k = s`, the
//! slowest dim the box spans, a group (a *slab*) is one contiguous range. Each group is
//! decoded into a buffer of its own (its bricks in parallel), then written as those runs:
//! - a sequential sink gets slabs, in order, each written once complete (a slab that cannot
//!   fit in the working set is refused with `limit.working_set` before anything is decoded);
//! - a random-access sink (the CLI's temporary `.npy`, memory) gets groups in any order, at
//!   the highest level that fits (longest runs, fewest writes).
//!
//! Decoding runs on the rayon pool while the calling thread writes finished groups, so the
//! writes overlap the decoding of the next groups; at most `in_flight` group buffers exist.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Condvar, Mutex};

use rasterpack_common::{ArraySink, BlockSink, Error, Limits, ParallelFile, Result};
use rayon::prelude::*;

use crate::chunk::{self, VdsChunkStatus};

/// Chunk names a read announces to its store before it starts (a remote store fetches them
/// a window at a time; local stores ignore announcements).
const ANNOUNCE_AHEAD: usize = 1024;
use crate::dataset::{Brick, Bufs, Owned, VdsDataset, VdsLayer, VdsValues};
use crate::geometry::{ChunkExtent, DimKind, LayerGeometry};
use crate::layout::{VdsChannel, VdsCompression, VdsSampleFormat};

/// Runs (contiguous output ranges) of at least this many bytes make writes few and large.
const LONG_RUN: u64 = 64 << 10;

/// Group buffers up to this size are preferred for random-access sinks (see `choose_level`).
const GROUP_TARGET: u64 = 16 << 20;

/// The same when the decoding threads write a local file themselves: a 4 MiB group is still
/// in the cache when its thread copies it to the page cache, and the last group, whose write
/// has no decoding beside it, is short (256x256x512 R32 Zip to `.npy`: 0.77x the wall time
/// of 16 MiB groups, half the peak memory; docs/performance.md).
const PARALLEL_GROUP_TARGET: u64 = 4 << 20;

/// What to read: a box of one layer (or of a channel with no stored layer, whose bricks are
/// all unwritten), in `values` form, with components `comps`.
pub(crate) struct BoxRequest<'a> {
    pub ds: &'a VdsDataset,
    /// The stored layer, `None` for a channel that has none.
    pub layer_index: Option<usize>,
    pub geometry: &'a LayerGeometry,
    pub channel: &'a VdsChannel,
    pub values: VdsValues,
    /// The box in the layer's voxels, `[min, max)` per dim.
    pub min: [u64; 6],
    pub max: [u64; 6],
    /// Components to deliver (the whole element when it is `0..components`).
    pub comps: Range<u32>,
}

/// A planned read: the box, its groups and its memory.
pub(crate) struct Plan<'a> {
    req: BoxRequest<'a>,
    layer: Option<&'a VdsLayer>,
    /// Bytes of a whole decoded element, and of a delivered one (selected components).
    elem: usize,
    out_elem: usize,
    /// Output strides per dim (bytes, delivered elements).
    out_stride: [u64; 6],
    /// Chunk coordinates meeting the box, per dim.
    coords: [Range<u64>; 6],
    /// The group level and how many groups it makes.
    level: usize,
    groups: u64,
    /// Group buffers that may exist at once.
    in_flight: usize,
    /// Bricks that may be decoding at once (fewer than the threads when the budget is small).
    decoders: usize,
    limits: Limits,
}

/// A decoded group, ready to be written.
struct GroupOut {
    sub_min: [u64; 6],
    sub_max: [u64; 6],
    body: GroupBody,
}

enum GroupBody {
    /// Whole elements, the group's sub-box in output order.
    Data(Vec<u8>),
    /// Every voxel of the group holds this element.
    Fill(Vec<u8>),
}

impl<'a> Plan<'a> {
    /// Plan the read of `req` into a sink that is (or is not) random-access, within `limits`:
    /// fails with `limit.working_set` when even the smallest group it may use cannot fit.
    pub fn new(req: BoxRequest<'a>, random_access: bool, limits: &Limits) -> Result<Plan<'a>> {
        let g = req.geometry;
        let layer = req.layer_index.and_then(|i| req.ds.layers().get(i));
        if let Some(l) = layer {
            if l.chunks.len() != g.chunk_count {
                return Err(Error::invalid_at(
                    "vds.layer.chunk_count",
                    None,
                    format!(
                        "layer {} stores {} chunks, its geometry has {}",
                        l.name(),
                        l.chunks.len(),
                        g.chunk_count
                    ),
                ));
            }
        }
        for d in 0..6 {
            if req.min[d] >= req.max[d] || req.max[d] > g.shape[d] {
                return Err(Error::usage(format!(
                    "box [{:?}, {:?}) is not inside the layer shape {:?}",
                    req.min, req.max, g.shape
                )));
            }
        }
        let elem = req.ds.element_size(req.channel, req.values);
        let comp_size = elem / req.channel.components.max(1) as usize;
        let out_elem = comp_size * (req.comps.end - req.comps.start) as usize;
        let mut out_stride = [0u64; 6];
        let mut acc = out_elem as u64;
        for d in 0..6 {
            out_stride[d] = acc;
            acc = acc
                .checked_mul(req.max[d] - req.min[d])
                .ok_or_else(|| Error::limit("limit.array", None, "the box's size overflows"))?;
        }
        let mut coords: [Range<u64>; 6] = Default::default();
        for d in 0..6 {
            coords[d] = chunk_range(g, d, req.min[d], req.max[d])?;
        }
        let mut plan = Plan {
            req,
            layer,
            elem,
            out_elem,
            out_stride,
            coords,
            level: 0,
            groups: 0,
            in_flight: 1,
            decoders: 1,
            limits: *limits,
        };
        plan.choose_level(random_access, GROUP_TARGET)?;
        Ok(plan)
    }

    /// Largest extent along `d` a group's sub-box can have (first, second and last chunks
    /// cover every case: interior chunks all own the same extent).
    fn max_sub_extent(&self, d: usize) -> u64 {
        let r = &self.coords[d];
        [r.start, r.start + 1, r.end - 1]
            .into_iter()
            .filter(|c| r.contains(c))
            .map(|c| {
                let (lo, hi) = self.owned(d, c);
                hi.min(self.req.max[d]).saturating_sub(lo.max(self.req.min[d]))
            })
            .max()
            .unwrap_or(1)
    }

    /// The owned range of chunk coordinate `c` along `d`, in layer voxels.
    fn owned(&self, d: usize, c: u64) -> (u64, u64) {
        let e = extent_at(self.req.geometry, d, c);
        (e.owned_min[d], e.owned_max[d])
    }

    /// Bytes a decoding worker holds for one brick at most (object, decoded payload, value
    /// conversion, wavelet picture).
    fn brick_working_bytes(&self) -> u64 {
        let g = self.req.geometry;
        let mut voxels = 1u64;
        for &d in &g.chunk_dims {
            let r = &self.coords[d];
            let stored = [r.start, r.end - 1]
                .into_iter()
                .map(|c| extent_at(g, d, c).stored_size[d])
                .max()
                .unwrap_or(1);
            voxels = voxels.saturating_mul(stored);
        }
        let native = (self.req.channel.format.native_bytes() * self.req.channel.components as usize) as u64;
        // The object (at most the payload), the decoded payload, the converted values; wavelet
        // bricks add their f32 picture and coefficient lists.
        let wavelet = self.layer.is_some_and(|l| l.is_wavelet());
        voxels.saturating_mul(2 * native + self.elem as u64 + if wavelet { 12 } else { 0 })
    }

    /// Pick the group level. A sequential sink needs slabs (`k = s`, the slowest dim the box
    /// spans). A random-access one takes the highest level whose groups are at most
    /// `GROUP_TARGET` bytes (large contiguous writes are what the page cache takes fastest,
    /// while every fresh 4 KiB of buffer costs a page fault), going higher when that level's
    /// runs are shorter than `LONG_RUN`, lower when its groups do not fit the budget. Bricks
    /// decode on every thread if the budget allows, else one at a time.
    fn choose_level(&mut self, random_access: bool, target: u64) -> Result<()> {
        let slowest = (0..6)
            .rev()
            .find(|&d| self.req.max[d] - self.req.min[d] > 1)
            .unwrap_or(0);
        let threads = rayon::current_num_threads().max(1) as u64;
        let per_brick = self.brick_working_bytes();
        let budget = self.limits.working_set;
        let mut refused = (0, 0, 0);
        for decoders in [threads, 1] {
            let decoding = per_brick.saturating_mul(decoders);
            // Levels whose groups fit with two in flight (one written while the next decodes),
            // or one for a sequential sink.
            let fits = |k: usize, n: u64| {
                self.group_bytes(k)
                    .saturating_mul(n.min(self.group_count(k)).max(1))
                    .saturating_add(decoding)
                    <= budget
            };
            let chosen = if random_access {
                let ok: Vec<usize> = (0..=slowest).filter(|&k| fits(k, 2)).collect();
                let small = ok.iter().copied().filter(|&k| self.group_bytes(k) <= target).max();
                match small.filter(|&k| self.run_bytes(k) >= LONG_RUN) {
                    Some(k) => Some(k),
                    None => ok
                        .iter()
                        .copied()
                        .find(|&k| self.run_bytes(k) >= LONG_RUN)
                        .or(small)
                        .or(ok.last().copied())
                        .or_else(|| fits(0, 1).then_some(0)),
                }
            } else {
                fits(slowest, 1).then_some(slowest)
            };
            if let Some(k) = chosen {
                let bytes = self.group_bytes(k).max(1);
                let groups = self.group_count(k);
                let room = (budget - decoding) / bytes;
                let want = if bytes >= target / 4 { 2 } else { threads + 1 };
                self.level = k;
                self.groups = groups;
                self.in_flight = room.min(want).min(groups).max(1) as usize;
                self.decoders = decoders as usize;
                return Ok(());
            }
            let k = if random_access { 0 } else { slowest };
            refused = (k, self.group_bytes(k), decoding);
        }
        let (k, bytes, decoding) = refused;
        let what = if random_access {
            "one brick"
        } else {
            "one slab of bricks"
        };
        Err(Error::limit(
            "limit.working_set",
            None,
            format!(
                "{what} (the bricks sharing chunk coordinates of dims {k}..) needs {bytes} bytes, plus {decoding} to \
                 decode a brick, above the working set of {budget} bytes{}",
                if random_access {
                    ""
                } else {
                    ": write to a file instead of a stream, read a smaller region, or raise the working set"
                }
            ),
        ))
    }

    /// Bytes of one run (contiguous output) of a group at level `k`.
    fn run_bytes(&self, k: usize) -> u64 {
        let mut bytes = self.out_elem as u64;
        for d in 0..k {
            bytes = bytes.saturating_mul(self.req.max[d] - self.req.min[d]);
        }
        bytes.saturating_mul(self.max_sub_extent(k))
    }

    /// Largest decoded group at level `k` (whole elements).
    fn group_bytes(&self, k: usize) -> u64 {
        let mut bytes = self.elem as u64;
        for d in 0..6 {
            let ext = if d < k {
                self.req.max[d] - self.req.min[d]
            } else {
                self.max_sub_extent(d)
            };
            bytes = bytes.saturating_mul(ext);
        }
        bytes
    }

    fn group_count(&self, k: usize) -> u64 {
        self.coords[k..]
            .iter()
            .fold(1u64, |a, r| a.saturating_mul(r.end - r.start))
    }

    /// The chunk coordinates of group `index` in dims `level..6` (dim `level` fastest).
    fn group_coords(&self, mut index: u64) -> [u64; 6] {
        let mut c = [0u64; 6];
        for d in self.level..6 {
            let r = &self.coords[d];
            let n = (r.end - r.start).max(1);
            c[d] = r.start + index % n;
            index /= n;
        }
        c
    }

    /// The part of the box group `index` covers.
    fn sub_box(&self, index: u64) -> ([u64; 6], [u64; 6], [u64; 6]) {
        let c = self.group_coords(index);
        let mut lo = self.req.min;
        let mut hi = self.req.max;
        for d in self.level..6 {
            let (a, b) = self.owned(d, c[d]);
            lo[d] = a.max(self.req.min[d]);
            hi[d] = b.min(self.req.max[d]).max(lo[d]);
        }
        (c, lo, hi)
    }

    /// Chunk indices of the bricks of group `index`.
    fn group_bricks(&self, fixed: &[u64; 6]) -> Vec<u64> {
        let g = self.req.geometry;
        let mut out = Vec::new();
        let mut c = *fixed;
        for d in 0..self.level {
            c[d] = self.coords[d].start;
        }
        loop {
            out.push(g.chunk_index(&c));
            let mut d = 0;
            loop {
                if d == self.level {
                    return out;
                }
                c[d] += 1;
                if c[d] < self.coords[d].end {
                    break;
                }
                c[d] = self.coords[d].start;
                d += 1;
            }
        }
    }

    /// Decode the bricks of group `index` into `buf` (reused) or find them all one fill value.
    fn decode_group(&self, index: u64, mut buf: Vec<u8>, pool: &BrickPool) -> Result<GroupOut> {
        let (fixed, sub_min, sub_max) = self.sub_box(index);
        let bricks = self.group_bricks(&fixed);
        if let Some(fill) = self.common_fill(&bricks)? {
            return Ok(GroupOut {
                sub_min,
                sub_max,
                body: GroupBody::Fill(fill),
            });
        }
        self.prefetch(&bricks);
        let mut gstride = [0u64; 6];
        let mut acc = self.elem as u64;
        for d in 0..6 {
            gstride[d] = acc;
            acc *= sub_max[d] - sub_min[d];
        }
        // Every byte is written by exactly one brick (owned ranges tile the box, checked when
        // the chunk ranges were made), so a reused buffer needs no clearing.
        buf.resize(acc as usize, 0);
        {
            let target = Mutex::new(&mut buf[..]);
            let into = GroupTarget {
                sub_min,
                sub_max,
                stride: gstride,
            };
            bricks
                .par_iter()
                .try_for_each(|&i| self.decode_brick_into(i, &into, &target, pool))?;
        }
        Ok(GroupOut {
            sub_min,
            sub_max,
            body: GroupBody::Data(buf),
        })
    }

    /// Tell the store which data chunks the first groups read, in reading order (at most
    /// [`ANNOUNCE_AHEAD`] names): a remote store streams them through its fetch window while
    /// the groups decode, instead of waiting for each group's bricks when it starts.
    fn announce_ahead(&self) {
        let (Some(layer), false) = (self.layer, self.req.ds.has_cache()) else {
            return;
        };
        let mut keys = Vec::new();
        'groups: for index in 0..self.groups {
            let (fixed, _, _) = self.sub_box(index);
            for i in self.group_bricks(&fixed) {
                if layer.chunks.get(i).map(|m| m.status()) == Some(VdsChunkStatus::Data) {
                    keys.push(format!("{}/{i}", layer.name()));
                    if keys.len() >= ANNOUNCE_AHEAD {
                        break 'groups;
                    }
                }
            }
        }
        if !keys.is_empty() {
            self.req.ds.store().prefetch(&keys);
        }
    }

    /// Tell the store which data chunks the group reads: a remote store fetches them
    /// concurrently instead of one per decoding thread at a time.
    fn prefetch(&self, bricks: &[u64]) {
        let (Some(layer), false) = (self.layer, self.req.ds.has_cache()) else {
            return;
        };
        let keys: Vec<String> = bricks
            .iter()
            .filter(|&&i| layer.chunks.get(i).map(|m| m.status()) == Some(VdsChunkStatus::Data))
            .map(|i| format!("{}/{i}", layer.name()))
            .collect();
        if !keys.is_empty() {
            self.req.ds.store().prefetch(&keys);
        }
    }

    /// The element every brick of the group holds, when they are all unwritten / NoValue /
    /// the same constant.
    fn common_fill(&self, bricks: &[u64]) -> Result<Option<Vec<u8>>> {
        let mut common: Option<Vec<u8>> = None;
        for &i in bricks {
            let Some(fill) = self.fill_of(i)? else { return Ok(None) };
            match &common {
                Some(c) if *c != fill => return Ok(None),
                Some(_) => {}
                None => common = Some(fill),
            }
        }
        Ok(common)
    }

    /// The fill element of brick `i` when its status makes it one value, `None` for data.
    fn fill_of(&self, i: u64) -> Result<Option<Vec<u8>>> {
        let ch = self.req.channel;
        let physical = self.req.values == VdsValues::Physical;
        let Some(layer) = self.layer else {
            return Ok(Some(chunk::unwritten_element(ch, physical)));
        };
        let meta = layer.chunks.get(i).unwrap_or_default();
        if let Some(code) = meta.page_damaged {
            return Err(Error::invalid_at(
                code,
                None,
                format!(
                    "{} chunk {i}: its chunk-metadata page is damaged, the chunk's status is unknown",
                    layer.name()
                ),
            ));
        }
        let phys_fill = |v: f32| v.to_le_bytes().repeat(ch.components as usize);
        Ok(match meta.status() {
            VdsChunkStatus::Data => None,
            VdsChunkStatus::Unwritten => Some(chunk::unwritten_element(ch, physical)),
            VdsChunkStatus::NoValue if physical => Some(phys_fill(ch.no_value as f32)),
            VdsChunkStatus::NoValue => Some(chunk::novalue_native(ch)),
            VdsChunkStatus::Constant(v) if physical => Some(phys_fill(v)),
            VdsChunkStatus::Constant(v) => Some(chunk::constant_native(ch, v)),
        })
    }

    /// Decode brick `i` and copy its owned part inside the group's sub-box into the group
    /// buffer (RLE bricks that lie wholly inside are decoded straight into it).
    fn decode_brick_into(&self, i: u64, into: &GroupTarget, target: &Mutex<&mut [u8]>, pool: &BrickPool) -> Result<()> {
        let g = self.req.geometry;
        let e = g.chunk_extent(i);
        let Some(layer) = self.layer else {
            let fill = chunk::unwritten_element(self.req.channel, self.req.values == VdsValues::Physical);
            copy_brick(g, &e, None, Some(&fill), self.elem, &mut lock(target)?, into);
            return Ok(());
        };
        let mut bufs = pool.take()?;
        let result = self.decode_brick_with(layer, i, &e, into, target, &mut bufs);
        pool.give(bufs);
        result
    }

    fn decode_brick_with(
        &self,
        layer: &VdsLayer,
        i: u64,
        e: &ChunkExtent,
        into: &GroupTarget,
        target: &Mutex<&mut [u8]>,
        bufs: &mut Bufs,
    ) -> Result<()> {
        let ds = self.req.ds;
        let g = self.req.geometry;
        let elem = self.elem;
        let layer_index = self.req.layer_index.unwrap_or(0);
        if ds.has_cache() {
            if let Some(o) = ds.cached_brick(layer_index, i, self.req.values, bufs)? {
                let mut out = lock(target)?;
                match o {
                    Owned::Fill(v) => copy_brick(g, e, None, Some(&v), elem, &mut out, into),
                    Owned::Data(v) => copy_brick(g, e, Some(&v), None, elem, &mut out, into),
                }
                return Ok(());
            }
        }
        if self.direct_rle(layer, i, e, into, target, bufs)? {
            return Ok(());
        }
        match ds.brick(layer, i, self.req.values, bufs)? {
            Brick::Fill(v) => copy_brick(g, e, None, Some(&v), elem, &mut lock(target)?, into),
            other => copy_brick(g, e, Some(bufs.slice(&other)), None, elem, &mut lock(target)?, into),
        }
        Ok(())
    }

    /// Decode an RLE brick whose whole stored box lies inside the sub-box straight into the
    /// group buffer's rows (no intermediate buffer). `Ok(false)`: not applicable.
    fn direct_rle(
        &self,
        layer: &VdsLayer,
        i: u64,
        e: &ChunkExtent,
        into: &GroupTarget,
        target: &Mutex<&mut [u8]>,
        bufs: &mut Bufs,
    ) -> Result<bool> {
        let g = self.req.geometry;
        let ch = self.req.channel;
        if self.req.values != VdsValues::Native
            || layer.status.compression != VdsCompression::RLE
            || ch.format == VdsSampleFormat::Bit1
            || layer.chunks.get(i).map(|m| m.status()) != Some(VdsChunkStatus::Data)
        {
            return Ok(false);
        }
        for d in 0..6 {
            let end = e.stored_origin[d] + e.stored_size[d];
            if e.owned_min[d].max(into.sub_min[d]) != e.stored_origin[d] || e.owned_max[d].min(into.sub_max[d]) != end {
                return Ok(false);
            }
        }
        let Some(&x) = g.chunk_dims.first() else {
            return Ok(false);
        };
        if into.stride[x] != self.elem as u64 {
            return Ok(false);
        }
        let size = |k: usize| g.chunk_dims.get(k).map_or(1, |&d| e.stored_size[d]);
        let (sx, sy, sz) = (size(0), size(1), size(2));
        let mut origin = 0u64;
        for d in 0..6 {
            origin += (e.stored_origin[d] - into.sub_min[d]) * into.stride[d];
        }
        let sy_stride = g.chunk_dims.get(1).map_or(0, |&d| into.stride[d]);
        let sz_stride = g.chunk_dims.get(2).map_or(0, |&d| into.stride[d]);
        let mut starts = Vec::with_capacity((sy * sz) as usize);
        for z in 0..sz {
            for y in 0..sy {
                starts.push((origin + y * sy_stride + z * sz_stride) as usize);
            }
        }
        let spec = self.req.ds.fetch_chunk(layer, i, &mut bufs.io)?;
        if spec.compression.is_wavelet() {
            return Ok(false);
        }
        let mut out = lock(target)?;
        chunk::decode_rle_rows(&bufs.io, &spec, &mut out, sx as usize * self.elem, &starts).map_err(|err| Error {
            message: format!("{} chunk {i}: {}", layer.name(), err.message),
            offset: None,
            ..err
        })?;
        Ok(true)
    }

    /// Write a decoded group as its runs: for every position in the dims above the level, one
    /// contiguous range of the output.
    fn write_group(&self, out: &mut GroupOut, sink: &mut dyn ArraySink) -> Result<()> {
        self.write_runs(out, &mut RunTarget::Sink(sink))
    }

    /// Write a decoded group's data runs through `file` on the calling (decoding) thread:
    /// `Some(bytes written)`, or `None` when the group is one fill value (left to the sink).
    fn write_group_parallel(&self, out: &mut GroupOut, file: &ParallelFile) -> Result<Option<u64>> {
        if matches!(out.body, GroupBody::Fill(_)) {
            return Ok(None);
        }
        let mut written = 0u64;
        self.write_runs(out, &mut RunTarget::File(file, &mut written))?;
        Ok(Some(written))
    }

    fn write_runs(&self, out: &mut GroupOut, target: &mut RunTarget<'_>) -> Result<()> {
        let k = self.level;
        let (lo, hi) = (out.sub_min, out.sub_max);
        let full_elem = self.req.comps.start == 0 && self.req.comps.end == self.req.channel.components;
        let mut gstride = [0u64; 6];
        let mut acc = self.elem as u64;
        for d in 0..6 {
            gstride[d] = acc;
            acc *= hi[d] - lo[d];
        }
        let run_voxels = (hi[k] - lo[k]) * (gstride[k] / self.elem as u64);
        let run_bytes = run_voxels * self.elem as u64;
        let fill = match &out.body {
            GroupBody::Fill(v) => Some(self.select_components(v)),
            GroupBody::Data(_) => None,
        };
        let mut p = lo;
        loop {
            let mut dst = 0u64;
            let mut src = 0u64;
            for d in 0..6 {
                dst += (p[d] - self.req.min[d]) * self.out_stride[d];
                src += (p[d] - lo[d]) * gstride[d];
            }
            match (&mut out.body, &fill) {
                (_, Some(v)) => match target {
                    RunTarget::Sink(sink) => sink.fill_at(dst, run_voxels * self.out_elem as u64, v)?,
                    RunTarget::File(..) => {
                        return Err(Error::usage("internal: a fill group was sent to the parallel file"))
                    }
                },
                (GroupBody::Data(buf), None) => {
                    let run = &mut buf[src as usize..(src + run_bytes) as usize];
                    let n = if full_elem {
                        run.len()
                    } else {
                        let skip =
                            self.req.comps.start as usize * (self.elem / self.req.channel.components.max(1) as usize);
                        compact_components(run, self.elem, self.out_elem, skip)
                    };
                    match target {
                        RunTarget::Sink(sink) => sink.write_at(dst, &run[..n])?,
                        RunTarget::File(file, written) => {
                            file.write_at(dst, &run[..n])?;
                            **written += n as u64;
                        }
                    }
                }
                (GroupBody::Fill(_), None) => {}
            }
            // Next run: dims above the level, the lowest fastest.
            let mut d = k + 1;
            loop {
                if d >= 6 {
                    return Ok(());
                }
                p[d] += 1;
                if p[d] < hi[d] {
                    break;
                }
                p[d] = lo[d];
                d += 1;
            }
        }
    }

    /// The delivered part (selected components) of a whole element.
    fn select_components(&self, element: &[u8]) -> Vec<u8> {
        let comp = self.elem / self.req.channel.components.max(1) as usize;
        let a = self.req.comps.start as usize * comp;
        element.get(a..a + self.out_elem).unwrap_or(element).to_vec()
    }

    /// Check that the chunks meeting the box tile it along every dim (linear in the chunks along
    /// each dim: called once the sink has accepted the output's size).
    pub fn check_coverage(&self) -> Result<()> {
        for d in 0..6 {
            check_coverage(self.req.geometry, d, self.req.min[d], self.req.max[d], &self.coords[d])?;
        }
        Ok(())
    }

    /// Decode every group and deliver it to `sink` (whose `begin` was called).
    pub fn run(&mut self, sink: &mut dyn ArraySink) -> Result<()> {
        if self.elem == self.out_elem {
            let total = self.out_stride[5].saturating_mul(self.req.max[5] - self.req.min[5]);
            // Any size into a sink that can be interrupted between groups (a numpy array).
            let interrupt = sink.interrupt();
            if let Some(out) = sink.direct_buffer_polled().filter(|b| b.len() as u64 == total) {
                self.announce_ahead();
                return self.run_direct(out, &BrickPool::new(self.decoders), interrupt);
            }
        }
        if let Some(blocks) = sink.parallel_blocks() {
            // A sink that only folds the values (stats): bricks handed over as they decode, as
            // `validate` decodes them, with no slab assembled in C order.
            self.announce_ahead();
            return self.run_blocks(sink, blocks.as_ref(), &BrickPool::new(self.decoders));
        }
        let on_pool = rayon::current_thread_index().is_some();
        if !on_pool && self.in_flight > 1 && sink.random_access() {
            // A local file that takes the bytes unchanged: the decoding tasks write their own
            // groups, smaller ones (a smaller target only lowers the level: it still fits).
            if let Some(file) = sink.parallel_file() {
                self.choose_level(true, PARALLEL_GROUP_TARGET)?;
                self.announce_ahead();
                let pool = BrickPool::new(self.decoders);
                if self.in_flight > 1 {
                    return self.run_parallel_file(sink, &pool, &file);
                }
                return self.run_serial(sink, &pool);
            }
        }
        self.announce_ahead();
        let pool = BrickPool::new(self.decoders);
        if on_pool || self.in_flight <= 1 {
            return self.run_serial(sink, &pool);
        }
        self.run_pipelined(sink, &pool)
    }

    /// Hand every brick's part of the box to `blocks` ([`ArraySink::parallel_blocks`]): one
    /// block per brick, numbered in the order of the bricks' chunk coordinates (dim 0 fastest:
    /// the groups in order, the bricks of each in order, whatever the group level), with a run
    /// of bricks that are all one fill element merged into one fill block. Bricks decode on
    /// the pool a batch at a time, each into a buffer of its owned part only, so the memory is
    /// the decoders' whatever the box; each batch's bytes are reported to `sink` when done.
    fn run_blocks(&self, sink: &mut dyn ArraySink, blocks: &dyn BlockSink, pool: &BrickPool) -> Result<()> {
        let threads = rayon::current_num_threads().max(1);
        // Some bricks per decoder in each batch, so that a slow brick does not idle the others.
        let batch = threads * 8;
        let comp = self.elem / self.req.channel.components.max(1) as usize;
        let comps = (self.req.comps.end - self.req.comps.start) as u64;
        let mut seq = 0u64;
        // A run of fill bricks not yet numbered: (one value's bytes, cells).
        let mut pending: Option<(Vec<u8>, u64)> = None;
        let mut jobs: Vec<(u64, u64)> = Vec::new();
        let mut fills: Vec<(u64, u64, Vec<u8>)> = Vec::new();
        let mut batch_bytes = 0u64;
        let flush = |pending: &mut Option<(Vec<u8>, u64)>, fills: &mut Vec<(u64, u64, Vec<u8>)>, seq: &mut u64| {
            if let Some((value, cells)) = pending.take() {
                fills.push((*seq, cells, value));
                *seq += 1;
            }
        };
        for index in 0..self.groups {
            let bricks = self.group_bricks(&self.group_coords(index));
            for &i in &bricks {
                let voxels = self.owned_in_box(i).map_or(0, |(_, _, v)| v);
                if voxels == 0 {
                    continue;
                }
                // One value repeated: the selected components of the fill element, when they
                // are all the same value (a multi-component element of differing values is
                // decoded as data).
                let value = self
                    .fill_of(i)?
                    .map(|f| self.select_components(&f))
                    .filter(|v| v.chunks_exact(comp.max(1)).all(|c| c == &v[..comp]))
                    .map(|v| v[..comp].to_vec());
                let cells = voxels * comps;
                batch_bytes += cells * comp as u64;
                match value {
                    Some(v) => match &mut pending {
                        Some((p, n)) if *p == v => *n += cells,
                        _ => {
                            flush(&mut pending, &mut fills, &mut seq);
                            pending = Some((v, cells));
                        }
                    },
                    None => {
                        flush(&mut pending, &mut fills, &mut seq);
                        jobs.push((seq, i));
                        seq += 1;
                    }
                }
                if jobs.len() >= batch || fills.len() >= batch {
                    self.blocks_batch(&jobs, &fills, blocks, pool)?;
                    sink.written_elsewhere(batch_bytes)?;
                    (batch_bytes, jobs, fills) = (0, Vec::new(), Vec::new());
                }
            }
        }
        flush(&mut pending, &mut fills, &mut seq);
        self.blocks_batch(&jobs, &fills, blocks, pool)?;
        sink.written_elsewhere(batch_bytes)
    }

    /// One batch of [`Plan::run_blocks`]: the fill blocks, then the bricks decoded on at most
    /// `decoders` threads.
    fn blocks_batch(
        &self,
        jobs: &[(u64, u64)],
        fills: &[(u64, u64, Vec<u8>)],
        blocks: &dyn BlockSink,
        pool: &BrickPool,
    ) -> Result<()> {
        for (seq, cells, value) in fills {
            blocks.fill(*seq, *cells, value)?;
        }
        if jobs.is_empty() {
            return Ok(());
        }
        let data: Vec<u64> = jobs.iter().map(|&(_, i)| i).collect();
        self.prefetch(&data);
        let full_elem = self.elem == self.out_elem;
        let skip = self.req.comps.start as usize * (self.elem / self.req.channel.components.max(1) as usize);
        let one = |buf: &mut Vec<u8>, &(seq, i): &(u64, u64)| -> Result<()> {
            let Some((sub_min, sub_max, voxels)) = self.owned_in_box(i) else {
                return Ok(());
            };
            let mut stride = [0u64; 6];
            let mut acc = self.elem as u64;
            for d in 0..6 {
                stride[d] = acc;
                acc *= sub_max[d] - sub_min[d];
            }
            // Every byte is written by the brick (its owned part is the whole sub-box), so a
            // reused buffer needs no clearing.
            buf.resize(voxels as usize * self.elem, 0);
            let into = GroupTarget {
                sub_min,
                sub_max,
                stride,
            };
            self.decode_brick_into(i, &into, &Mutex::new(&mut buf[..]), pool)?;
            let n = if full_elem {
                buf.len()
            } else {
                compact_components(buf, self.elem, self.out_elem, skip)
            };
            blocks.block(seq, &buf[..n])
        };
        if self.decoders >= rayon::current_num_threads() {
            jobs.par_iter().try_for_each_init(Vec::new, one)
        } else {
            // Fewer decoders than threads (the budget): one task per share of the bricks.
            let per_task = jobs.len().div_ceil(self.decoders.max(1)).max(1);
            jobs.par_chunks(per_task).try_for_each(|task| {
                let mut buf = Vec::new();
                task.iter().try_for_each(|job| one(&mut buf, job))
            })
        }
    }

    /// The part of the box brick `i` owns: its first and end voxels and its voxel count
    /// (`None` when it owns none of the box).
    fn owned_in_box(&self, i: u64) -> Option<([u64; 6], [u64; 6], u64)> {
        let e = self.req.geometry.chunk_extent(i);
        let (mut lo, mut hi) = ([0u64; 6], [0u64; 6]);
        let mut voxels = 1u64;
        for d in 0..6 {
            lo[d] = e.owned_min[d].max(self.req.min[d]);
            hi[d] = e.owned_max[d].min(self.req.max[d]);
            if lo[d] >= hi[d] {
                return None;
            }
            // Never overflows: the part is inside the box, whose byte size `Plan::new` checked.
            voxels = voxels.checked_mul(hi[d] - lo[d])?;
        }
        Some((lo, hi, voxels))
    }

    /// One group at a time on this thread (its bricks still in parallel).
    /// (On a pool thread there is no blocking wait for pool work, so no pipeline.)
    fn run_serial(&self, sink: &mut dyn ArraySink, pool: &BrickPool) -> Result<()> {
        let mut buf = Vec::new();
        for index in 0..self.groups {
            let mut out = self.decode_group(index, std::mem::take(&mut buf), pool)?;
            self.write_group(&mut out, sink)?;
            if let GroupBody::Data(b) = out.body {
                buf = b;
            }
        }
        Ok(())
    }

    /// Whole elements into a sink's own buffer (memory, a numpy array): each brick is copied
    /// from its decoding buffer straight to its place in the output, with no group buffer
    /// and no second copy. Groups only bound the list of bricks held at once.
    fn run_direct(
        &self,
        out: &mut [u8],
        pool: &BrickPool,
        interrupt: Option<rasterpack_common::Interrupt>,
    ) -> Result<()> {
        let into = GroupTarget {
            sub_min: self.req.min,
            sub_max: self.req.max,
            stride: self.out_stride,
        };
        let target = Mutex::new(out);
        for index in 0..self.groups {
            if let Some(check) = &interrupt {
                check()?;
            }
            let bricks = self.group_bricks(&self.group_coords(index));
            bricks
                .par_iter()
                .try_for_each(|&i| self.decode_brick_into(i, &into, &target, pool))?;
        }
        Ok(())
    }

    /// Groups decode on the pool while this thread writes the finished ones (in order for a
    /// sequential sink), with at most `in_flight` group buffers alive.
    fn run_pipelined(&self, sink: &mut dyn ArraySink, pool: &BrickPool) -> Result<()> {
        let in_order = !sink.random_access();
        let (tx, rx) = std::sync::mpsc::channel::<(u64, Result<GroupOut>)>();
        rayon::in_place_scope(|scope| {
            let mut next = 0u64;
            let mut running = 0usize;
            let mut ready: BTreeMap<u64, GroupOut> = BTreeMap::new();
            let mut next_write = 0u64;
            let mut free: Vec<Vec<u8>> = Vec::new();
            let mut failed: Option<(u64, Error)> = None;
            loop {
                while failed.is_none() && next < self.groups && running + ready.len() < self.in_flight {
                    let tx = tx.clone();
                    let buf = free.pop().unwrap_or_default();
                    let index = next;
                    scope.spawn(move |_| {
                        let _ = tx.send((index, self.decode_group(index, buf, pool)));
                    });
                    next += 1;
                    running += 1;
                }
                if running == 0 {
                    break;
                }
                let Ok((index, result)) = rx.recv() else {
                    failed.get_or_insert((u64::MAX, Error::usage("internal: a decoding task was lost")));
                    break;
                };
                running -= 1;
                let out = match result {
                    Ok(out) => out,
                    Err(e) => {
                        // Report the failure of the earliest group, whatever finished first.
                        if failed.as_ref().is_none_or(|(i, _)| index < *i) {
                            failed = Some((index, e));
                        }
                        continue;
                    }
                };
                if failed.is_some() {
                    continue;
                }
                ready.insert(index, out);
                // A random-access sink takes any finished group; a sequential one the next.
                while let Some(key) = if in_order {
                    ready.contains_key(&next_write).then_some(next_write)
                } else {
                    ready.keys().next().copied()
                } {
                    let Some(mut out) = ready.remove(&key) else {
                        break;
                    };
                    if let Err(e) = self.write_group(&mut out, sink) {
                        failed = Some((key, e));
                        break;
                    }
                    if let GroupBody::Data(b) = out.body {
                        free.push(b);
                    }
                    next_write += 1;
                }
            }
            match failed {
                Some((_, e)) => Err(e),
                None => Ok(()),
            }
        })
    }

    /// Every group into a local file that takes the bytes unchanged ([`ParallelFile`]): the
    /// page-cache copy then runs on every core, not only this thread. `in_flight` tasks (one
    /// group buffer each) take the next group from a shared counter, decode it (its bricks
    /// in parallel, so the last groups keep every thread busy) and write it, with no round
    /// trip through this thread between groups. This thread reports each group to the sink
    /// (byte count, progress, interrupt poll) and writes the fill groups; a failure or an
    /// interrupt stops the tasks from taking more groups.
    fn run_parallel_file(&self, sink: &mut dyn ArraySink, pool: &BrickPool, file: &ParallelFile) -> Result<()> {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        let next = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        // Groups this thread has reported to the sink. A task takes group `index` only once
        // `index < reported + ahead`, so an interrupt or a failure seen here stops the writes
        // within `ahead` groups however the threads are scheduled (a starved reporting thread
        // would otherwise let the tasks write on to the end).
        let reported = AtomicU64::new(0);
        let ahead = 2 * self.in_flight.max(1) as u64;
        let (tx, rx) = std::sync::mpsc::channel::<(u64, Result<Done>)>();
        rayon::in_place_scope(|scope| {
            for _ in 0..self.in_flight.max(1) {
                let tx = tx.clone();
                let (next, stop, reported) = (&next, &stop, &reported);
                scope.spawn(move |_| {
                    let mut buf = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        if index >= self.groups {
                            break;
                        }
                        // The groups below `index` are taken by tasks that are not waiting,
                        // and this thread reports every group sent, so the wait ends.
                        while index >= reported.load(Ordering::Acquire) + ahead && !stop.load(Ordering::Relaxed) {
                            std::thread::yield_now();
                        }
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let result = self
                            .decode_group(index, std::mem::take(&mut buf), pool)
                            .and_then(|mut out| match self.write_group_parallel(&mut out, file)? {
                                Some(len) => {
                                    if let GroupBody::Data(b) = out.body {
                                        buf = b;
                                    }
                                    Ok(Done::Written(len))
                                }
                                None => Ok(Done::Fill(out)),
                            });
                        let failed = result.is_err();
                        if tx.send((index, result)).is_err() || failed {
                            stop.store(true, Ordering::Relaxed);
                            break;
                        }
                    }
                });
            }
            drop(tx);
            // Until every task has ended (each holds a sender).
            let mut failed: Option<(u64, Error)> = None;
            for (index, result) in rx {
                let done = result.and_then(|d| match d {
                    Done::Written(len) => sink.written_elsewhere(len),
                    Done::Fill(mut out) => self.write_group(&mut out, sink),
                });
                if let Err(e) = done {
                    stop.store(true, Ordering::Relaxed);
                    // Report the failure of the earliest group, whatever finished first.
                    if failed.as_ref().is_none_or(|(i, _)| index < *i) {
                        failed = Some((index, e));
                    }
                }
                reported.fetch_add(1, Ordering::Release);
            }
            match failed {
                Some((_, e)) => Err(e),
                None => Ok(()),
            }
        })
    }
}

/// What a decoding task of [`Plan::run_parallel_file`] hands back for a group.
enum Done {
    /// The group's bytes are in the file: how many.
    Written(u64),
    /// A group of one fill value, for the sink to write.
    Fill(GroupOut),
}

/// Where a group's runs go: the sink (on the thread that owns it), or a parallel file (on a
/// decoding thread), counting the bytes written.
enum RunTarget<'a> {
    Sink(&'a mut dyn ArraySink),
    File(&'a ParallelFile, &'a mut u64),
}

/// The decoding buffers of the bricks being decoded, at most `max` at a time: a thread that
/// finds none free waits (the budget allows fewer decoders than threads).
struct BrickPool {
    max: usize,
    state: Mutex<(Vec<Bufs>, usize)>,
    freed: Condvar,
}

impl BrickPool {
    fn new(max: usize) -> BrickPool {
        BrickPool {
            max: max.max(1),
            state: Mutex::new((Vec::new(), 0)),
            freed: Condvar::new(),
        }
    }

    /// A set of buffers, waiting while `max` are in use.
    fn take(&self) -> Result<Bufs> {
        let poisoned = || Error::usage("internal: a decoding thread panicked");
        let mut st = self.state.lock().map_err(|_| poisoned())?;
        while st.1 >= self.max {
            st = self.freed.wait(st).map_err(|_| poisoned())?;
        }
        st.1 += 1;
        Ok(st.0.pop().unwrap_or_default())
    }

    fn give(&self, bufs: Bufs) {
        if let Ok(mut st) = self.state.lock() {
            st.0.push(bufs);
            st.1 -= 1;
        }
        self.freed.notify_one();
    }
}

/// Where bricks of a group go: its sub-box and the strides of its buffer.
struct GroupTarget {
    sub_min: [u64; 6],
    sub_max: [u64; 6],
    stride: [u64; 6],
}

fn lock<'m, 'b>(target: &'m Mutex<&'b mut [u8]>) -> Result<std::sync::MutexGuard<'m, &'b mut [u8]>> {
    target
        .lock()
        .map_err(|_| Error::usage("internal: a decoding thread panicked"))
}

/// The extents of the chunk at coordinate `c` along `d` (coordinate 0 elsewhere): what it owns
/// and stores along `d` does not depend on the other coordinates.
fn extent_at(g: &LayerGeometry, d: usize, c: u64) -> ChunkExtent {
    let mut coords = [0u64; 6];
    coords[d] = c;
    g.chunk_extent(g.chunk_index(&coords))
}

/// The chunk coordinates along `d` whose owned ranges meet `[min, max)`, checking that those
/// ranges tile the interval (every voxel owned by exactly one chunk).
fn chunk_range(g: &LayerGeometry, d: usize, min: u64, max: u64) -> Result<Range<u64>> {
    let r = match g.kinds[d] {
        DimKind::PerIndex => return Ok(min..max),
        DimKind::Bricked => {
            let n = g.chunks[d];
            // Owned ranges ascend with the coordinate: binary searches for both ends.
            let first = partition(n, |c| extent_at(g, d, c).owned_max[d] <= min);
            let end = partition(n, |c| extent_at(g, d, c).owned_min[d] < max);
            first..end.max(first)
        }
        _ => 0..1,
    };
    // The ends here (the plan relies on a non-empty range); the chunks between are walked by
    // `check_coverage`, after the sink has sized the output: a declared 2^53-sample axis has
    // ~10^14 chunks along it.
    let covered = !r.is_empty() && {
        let (first, last) = (extent_at(g, d, r.start), extent_at(g, d, r.end - 1));
        first.owned_min[d] <= min && last.owned_max[d] >= max
    };
    if !covered {
        return Err(uncovered(g, d, min, max));
    }
    Ok(r)
}

fn uncovered(g: &LayerGeometry, d: usize, min: u64, max: u64) -> Error {
    Error::invalid_at(
        "vds.layer.geometry",
        None,
        format!(
            "the bricks of layer {} do not cover voxels {min}..{max} of dimension {d}",
            g.name
        ),
    )
}

/// Check that the owned ranges of the chunks `r` along `d` tile `[min, max)` (every voxel
/// owned by exactly one chunk): linear in the chunks along `d`.
fn check_coverage(g: &LayerGeometry, d: usize, min: u64, max: u64, r: &Range<u64>) -> Result<()> {
    let mut reach = min;
    for c in r.clone() {
        let e = extent_at(g, d, c);
        let (lo, hi) = (e.owned_min[d], e.owned_max[d]);
        if lo > reach || hi < lo {
            break;
        }
        reach = reach.max(hi);
    }
    if reach < max {
        return Err(uncovered(g, d, min, max));
    }
    Ok(())
}

/// The first `c` in `0..n` for which `pred` is false (`pred` true then false along `0..n`).
fn partition(n: u64, pred: impl Fn(u64) -> bool) -> u64 {
    let (mut lo, mut hi) = (0u64, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Copy the owned part of a brick inside the group's sub-box into the group buffer, one row
/// along dim 0 at a time (`src`: the decoded brick, X fastest over the chunk dims; or `fill`).
fn copy_brick(
    g: &LayerGeometry,
    e: &ChunkExtent,
    src: Option<&[u8]>,
    fill: Option<&[u8]>,
    elem: usize,
    out: &mut [u8],
    into: &GroupTarget,
) {
    let mut rmin = [0u64; 6];
    let mut rmax = [0u64; 6];
    for d in 0..6 {
        rmin[d] = e.owned_min[d].max(into.sub_min[d]);
        rmax[d] = e.owned_max[d].min(into.sub_max[d]);
        if rmin[d] >= rmax[d] {
            return;
        }
    }
    // Brick strides: chunk dims in order X, Y, Z; other dims have extent 1.
    let mut bstride = [0u64; 6];
    let mut acc = elem as u64;
    for &d in &g.chunk_dims {
        bstride[d] = acc;
        acc *= e.stored_size[d];
    }
    let row = (rmax[0] - rmin[0]) as usize * elem;
    let mut p = rmin;
    loop {
        let mut dst = 0u64;
        let mut from = 0u64;
        for d in 0..6 {
            dst += (p[d] - into.sub_min[d]) * into.stride[d];
            from += (p[d] - e.stored_origin[d]) * bstride[d];
        }
        let dst_row = &mut out[dst as usize..dst as usize + row];
        if let Some(v) = fill {
            for c in dst_row.chunks_exact_mut(elem) {
                c.copy_from_slice(v);
            }
        } else if let Some(buf) = src {
            let from = from as usize;
            if bstride[0] as usize == elem {
                dst_row.copy_from_slice(&buf[from..from + row]);
            } else {
                // dim 0 is not a chunk dim: its extent is 1.
                dst_row.copy_from_slice(&buf[from..from + elem]);
            }
        }
        // Next row.
        let mut d = 1;
        loop {
            if d == 6 {
                return;
            }
            p[d] += 1;
            if p[d] < rmax[d] {
                break;
            }
            p[d] = rmin[d];
            d += 1;
        }
    }
}

/// Keep bytes `skip..skip + out_elem` of each `elem`-byte element of `run` (the selected
/// components), packed to its front; returns the packed length.
fn compact_components(run: &mut [u8], elem: usize, out_elem: usize, skip: usize) -> usize {
    let n = run.len() / elem;
    for v in 0..n {
        let from = v * elem + skip;
        run.copy_within(from..from + out_elem, v * out_elem);
    }
    n * out_elem
}
