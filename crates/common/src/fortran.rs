//! Fortran-order (column-major, first axis fastest) arrays turned into C order, the order every
//! [`ArraySink`] takes, as their stored bytes stream by.
//!
//! The stored bytes of a Fortran-order array of shape `(s0, .., sn-1)` are the C-order bytes of
//! its transpose, shape `(sn-1, .., s0)`. A region of the array is the reversed region of that
//! transpose, so a source streams the stored region exactly as it streams a C-order one (with
//! [`fortran_stored_region`]) and hands the bytes to a [`FortranSink`], which reorders them.
//!
//! Reordering needs, for each value of the last C axis, a slab of the stored data (one row of
//! the transpose, `s0 * .. * sn-2` values). The sink holds slabs of up to
//! [`Limits::working_set`] bytes: the whole array when it fits (then any sink takes it, in
//! order); otherwise several rows at a time, written as runs to a random-access sink (a file,
//! memory). A sequential sink (a pipe, a compressing writer) needs its bytes in order: a source
//! that can be read at any offset (a `.npy` file) then goes in bands of the first C axis, each
//! reordered whole ([`stream_fortran_stored`]); a source read once from start to end (a
//! deflated NPZ member) cannot, and a Fortran-order array above the working set is refused
//! there with `limit.working_set` before any byte is written, as is one whose slab or band of
//! a single index is above it.

use crate::array::{byte_len, DType};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::source::Input;
use crate::stream::{stream_stored_c_order, ArrayInfo, ArraySink, Region, SequentialCursor};

/// The region of the stored (transposed) array that holds `region` of a Fortran-order array.
pub fn fortran_stored_region(region: &Region) -> Region {
    Region {
        ranges: region.ranges.iter().rev().cloned().collect(),
    }
}

/// The shape of the stored (transposed) array of a Fortran-order array of `shape`.
pub fn fortran_stored_shape(shape: &[u64]) -> Vec<u64> {
    shape.iter().rev().copied().collect()
}

/// Whether Fortran and C order lay out an array of `shape` identically (at most one axis
/// longer than 1): then the stored bytes pass through unchanged.
pub fn same_in_both_orders(shape: &[u64]) -> bool {
    shape.iter().filter(|&&d| d > 1).count() <= 1
}

/// The C-order bytes of a Fortran-order array held whole in memory (`data` holds exactly the
/// array's values of `elem` bytes each).
pub fn fortran_to_c(data: &[u8], elem: usize, shape: &[u64]) -> Result<Vec<u8>> {
    if same_in_both_orders(shape) {
        return Ok(data.to_vec());
    }
    let mut out = Vec::with_capacity(data.len());
    let rows = *shape.last().unwrap_or(&1);
    let mut t = Reorder::new(elem, shape)?;
    t.slab_runs(data, 0, rows, &mut |_, run| {
        out.extend_from_slice(run);
        Ok(())
    })?;
    Ok(out)
}

/// The geometry of one reordering: C-order shape, value size, row size of the transpose.
#[derive(Debug, Clone)]
struct Reorder {
    elem: usize,
    /// The C-order shape.
    shape: Vec<u64>,
    /// Bytes of one row of the transpose (one index of the last C axis).
    row_bytes: u64,
    /// Reused buffer of one chunk of output runs.
    run: Vec<u8>,
    /// Output bytes gathered per chunk ([`GATHER`]; smaller in tests, to cross chunks).
    gather: usize,
}

impl Reorder {
    fn new(elem: usize, shape: &[u64]) -> Result<Reorder> {
        let inner = shape.len().saturating_sub(1);
        let row_bytes = shape[..inner]
            .iter()
            .try_fold(elem as u64, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| Error::limit("limit.array", None, format!("array shape {shape:?} overflows")))?;
        Ok(Reorder {
            elem,
            shape: shape.to_vec(),
            row_bytes,
            run: Vec::new(),
            gather: GATHER,
        })
    }

    /// Deliver rows `k0..k1` of the transpose (`slab`, C order, `(k1 - k0) * row_bytes` bytes)
    /// as C-order runs: `emit(output byte offset, bytes)`, in ascending output order.
    ///
    /// Outer indices (all C axes but the last) go in chunks whose output fits [`GATHER`] bytes:
    /// for each slab row in turn, the chunk's values are read from that row (close together)
    /// and placed in the chunk's output, so each pass over the slab touches a few pages per row
    /// instead of one page per value.
    fn slab_runs(
        &mut self,
        slab: &[u8],
        k0: u64,
        k1: u64,
        emit: &mut dyn FnMut(u64, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let n = self.shape.len();
        let elem = self.elem;
        let last = self.shape[n - 1];
        let outer = &self.shape[..n - 1];
        let count = (k1 - k0) as usize;
        let run = count * elem;
        // Fortran strides (in values) of the outer C axes: axis a steps s0 * .. * s(a-1).
        let mut fstride = Vec::with_capacity(outer.len());
        let mut acc = 1usize;
        for &d in outer {
            fstride.push(acc);
            acc *= d as usize;
        }
        let total_outer = acc;
        let chunk = (self.gather / run.max(1)).clamp(1, total_outer.max(1));
        let row = self.row_bytes as usize;
        let whole_rows = k0 == 0 && k1 == last;
        let mut idx = vec![0usize; outer.len()];
        let mut fpos = 0usize;
        let mut starts = Vec::with_capacity(chunk);
        let mut done = 0usize;
        while done < total_outer {
            let nb = chunk.min(total_outer - done);
            // The chunk's byte offsets within a slab row, the last outer axis fastest.
            starts.clear();
            for _ in 0..nb {
                starts.push(fpos * elem);
                let mut axis = outer.len();
                while axis > 0 {
                    axis -= 1;
                    idx[axis] += 1;
                    fpos += fstride[axis];
                    if idx[axis] < outer[axis] as usize {
                        break;
                    }
                    fpos -= fstride[axis] * outer[axis] as usize;
                    idx[axis] = 0;
                }
            }
            self.run.clear();
            self.run.resize(nb * run, 0);
            match elem {
                1 => gather::<1>(slab, row, count, &starts, &mut self.run),
                2 => gather::<2>(slab, row, count, &starts, &mut self.run),
                4 => gather::<4>(slab, row, count, &starts, &mut self.run),
                8 => gather::<8>(slab, row, count, &starts, &mut self.run),
                16 => gather::<16>(slab, row, count, &starts, &mut self.run),
                _ => {
                    for k in 0..count {
                        for (j, &at) in starts.iter().enumerate() {
                            let src = k * row + at;
                            let dst = (j * count + k) * elem;
                            self.run[dst..dst + elem].copy_from_slice(&slab[src..src + elem]);
                        }
                    }
                }
            }
            if whole_rows {
                // Runs of whole output rows follow each other: one piece.
                emit(done as u64 * last * elem as u64, &self.run)?;
            } else {
                for j in 0..nb {
                    let at = ((done + j) as u64 * last + k0) * elem as u64;
                    emit(at, &self.run[j * run..(j + 1) * run])?;
                }
            }
            done += nb;
        }
        Ok(())
    }
}

/// Bytes of output gathered per chunk of outer indices (fits a core's L2 cache).
const GATHER: usize = 256 << 10;

/// `out[j][k] = slab[k][starts[j]]` for values of `N` bytes (`out` is `starts.len()` runs of
/// `count` values).
fn gather<const N: usize>(slab: &[u8], row: usize, count: usize, starts: &[usize], out: &mut [u8]) {
    for k in 0..count {
        let src_row = &slab[k * row..];
        for (j, &at) in starts.iter().enumerate() {
            let mut v = [0u8; N];
            v.copy_from_slice(&src_row[at..at + N]);
            let dst = (j * count + k) * N;
            out[dst..dst + N].copy_from_slice(&v);
        }
    }
}

/// The reordering state of one Fortran-order array: fed its stored bytes in ascending order,
/// it writes the same values in C order to the sink given with each call (so a source can keep
/// it beside a borrowed sink). [`FortranSink`] wraps it as an [`ArraySink`].
#[derive(Debug)]
pub struct FortranReorder {
    reorder: Option<Reorder>,
    cursor: SequentialCursor,
    total: u64,
    /// Rows of the transpose held per slab.
    slab_rows: u64,
    /// Row index of the first row in `buf`.
    slab_start: u64,
    buf: Vec<u8>,
    /// Output bytes combined into one write while they are contiguous.
    out: Vec<u8>,
    out_at: u64,
}

/// Combined output is written once it reaches this size.
const COMBINE: usize = 1 << 20;

fn flush_out(inner: &mut dyn ArraySink, out: &mut Vec<u8>, out_at: u64) -> Result<()> {
    if !out.is_empty() {
        inner.write_at(out_at, out)?;
        out.clear();
    }
    Ok(())
}

impl FortranReorder {
    /// Plan the reordering of the array `info` describes (its C-order shape, as `inner` will
    /// receive it) within `limits.working_set`, and call `inner.begin`. Refuses with
    /// `limit.working_set` (before `inner.begin`) what cannot be reordered within the budget.
    pub fn begin(info: &ArrayInfo, limits: &Limits, inner: &mut dyn ArraySink) -> Result<FortranReorder> {
        let total = info.byte_len()?;
        let elem = info.dtype.size();
        let passthrough = same_in_both_orders(&info.shape) || total == 0;
        let mut state = FortranReorder {
            reorder: None,
            cursor: SequentialCursor::default(),
            total,
            slab_rows: 0,
            slab_start: 0,
            buf: Vec::new(),
            out: Vec::new(),
            out_at: 0,
        };
        if !passthrough {
            let reorder = Reorder::new(elem, &info.shape)?;
            let rows = *info.shape.last().unwrap_or(&1);
            let ws = limits.working_set;
            let slab_rows = if total <= ws {
                rows
            } else if !inner.random_access() {
                return Err(Error::limit(
                    "limit.working_set",
                    None,
                    format!(
                        "the Fortran-order {} array of shape {:?} ({total} bytes) is read once from start to end and must be reordered to C order whole for a sequential output, above the working set of {ws} bytes (convert it to a .npy file first, which takes it in slabs)",
                        info.dtype.name(),
                        info.shape
                    ),
                ));
            } else if reorder.row_bytes > ws {
                return Err(Error::limit(
                    "limit.working_set",
                    None,
                    format!(
                        "reordering the Fortran-order {} array of shape {:?} to C order needs slabs of {} bytes, above the working set of {ws} bytes",
                        info.dtype.name(),
                        info.shape,
                        reorder.row_bytes
                    ),
                ));
            } else {
                (ws / reorder.row_bytes).clamp(1, rows)
            };
            let slab_bytes = slab_rows * reorder.row_bytes;
            let n = limits.check_alloc(slab_bytes, "Fortran-order slab", None)?;
            state.buf = Vec::with_capacity(n);
            state.slab_rows = slab_rows;
            state.reorder = Some(reorder);
        }
        inner.begin(info)?;
        Ok(state)
    }

    /// Stored (Fortran-order) bytes at `offset`, which must follow the previous ones.
    pub fn write_at(&mut self, inner: &mut dyn ArraySink, offset: u64, data: &[u8]) -> Result<()> {
        if offset.checked_add(data.len() as u64).is_none_or(|e| e > self.total) {
            return Err(Error::usage(format!(
                "internal: a write of {} bytes at {offset} falls outside the {}-byte array",
                data.len(),
                self.total
            )));
        }
        self.cursor.advance(offset, data.len())?;
        let Some(reorder) = self.reorder.as_mut() else {
            return inner.write_at(offset, data);
        };
        let slab_bytes = (self.slab_rows * reorder.row_bytes) as usize;
        let rows = *reorder.shape.last().unwrap_or(&1);
        let mut data = data;
        while !data.is_empty() {
            let take = (slab_bytes - self.buf.len()).min(data.len());
            self.buf.extend_from_slice(&data[..take]);
            data = &data[take..];
            let k0 = self.slab_start;
            let k1 = (k0 + self.slab_rows).min(rows);
            if self.buf.len() as u64 != (k1 - k0) * reorder.row_bytes {
                continue;
            }
            let (out, out_at) = (&mut self.out, &mut self.out_at);
            reorder.slab_runs(&self.buf, k0, k1, &mut |at, run| {
                if out.is_empty() || *out_at + out.len() as u64 != at {
                    flush_out(inner, out, *out_at)?;
                    *out_at = at;
                }
                out.extend_from_slice(run);
                if out.len() >= COMBINE {
                    flush_out(inner, out, *out_at)?;
                }
                Ok(())
            })?;
            flush_out(inner, &mut self.out, self.out_at)?;
            self.buf.clear();
            self.slab_start = k1;
        }
        Ok(())
    }

    /// Stored bytes received so far.
    pub fn received(&self) -> u64 {
        self.cursor.position
    }

    /// Every stored byte arrived (and so every value went out).
    pub fn is_complete(&self) -> bool {
        self.cursor.position == self.total
    }
}

/// An [`ArraySink`] adapter that takes a Fortran-order array's stored bytes, in ascending order,
/// and hands `inner` the same values in C order (see the module docs for memory).
///
/// [`ArraySink::begin`] takes the info of the array as `inner` receives it (its C-order shape);
/// [`ArraySink::write_at`] takes offsets into the stored (Fortran-order) bytes.
pub struct FortranSink<'a> {
    inner: &'a mut dyn ArraySink,
    limits: Limits,
    state: Option<FortranReorder>,
}

impl<'a> FortranSink<'a> {
    /// Reorder into `inner`, holding at most `limits.working_set` bytes of the array.
    pub fn new(inner: &'a mut dyn ArraySink, limits: Limits) -> FortranSink<'a> {
        FortranSink {
            inner,
            limits,
            state: None,
        }
    }
}

impl ArraySink for FortranSink<'_> {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        self.state = Some(FortranReorder::begin(info, &self.limits, self.inner)?);
        Ok(())
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let st = self
            .state
            .as_mut()
            .ok_or_else(|| Error::usage("internal: Fortran-order data before begin"))?;
        st.write_at(self.inner, offset, data)
    }

    fn finish(&mut self) -> Result<()> {
        if let Some(st) = &self.state {
            if !st.is_complete() {
                return Err(Error::usage(format!(
                    "internal: the source delivered {} of {} Fortran-order bytes",
                    st.received(),
                    st.total
                )));
            }
        }
        self.inner.finish()
    }
}

/// Passes writes on at `base` bytes further, and does not pass `begin` on: one band of a
/// larger array.
struct Band<'a> {
    inner: &'a mut dyn ArraySink,
    base: u64,
}

impl ArraySink for Band<'_> {
    fn begin(&mut self, _info: &ArrayInfo) -> Result<()> {
        Ok(())
    }
    fn random_access(&self) -> bool {
        self.inner.random_access()
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.inner.write_at(self.base + offset, data)
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Stream `region` of a Fortran-order array stored at `data_offset` of `input` (a `.npy`'s
/// data) into `sink` in C order, calling `sink.begin`. `fix` sees the stored bytes first (a
/// byte swap of whole values).
///
/// A source that can be read at any offset needs no output that takes writes in any order:
/// when the array is above the working set and `sink` is sequential, the region goes in bands
/// of its first axis, each within the working set, read as runs of the stored data (the first
/// axis is the stored one's fastest) and reordered whole, so the output comes in order. Only a
/// band of one index above the working set is refused.
#[allow(clippy::too_many_arguments)] // the stored array (where, what, which part), then where it goes
pub fn stream_fortran_stored(
    input: &Input,
    data_offset: u64,
    dtype: DType,
    shape: &[u64],
    region: &Region,
    fix: &mut dyn FnMut(&mut [u8]),
    limits: &Limits,
    sink: &mut dyn ArraySink,
) -> Result<()> {
    region.check_within(shape)?;
    let stored = fortran_stored_shape(shape);
    let info = ArrayInfo::new(dtype, region.shape());
    let total = info.byte_len()?;
    let rshape = region.shape();
    let per_index = byte_len(dtype, rshape.get(1..).unwrap_or(&[]));
    let banded = total > limits.working_set
        && !sink.random_access()
        && rshape.len() >= 2
        && per_index.is_some_and(|p| p > 0 && p <= limits.working_set);
    if !banded {
        let mut reorder = FortranSink::new(sink, *limits);
        reorder.begin(&info)?;
        return stream_stored_c_order(
            input,
            data_offset,
            dtype,
            &stored,
            Some(&fortran_stored_region(region)),
            fix,
            &mut reorder,
        );
    }
    let per_index = per_index.unwrap_or(1);
    let step = (limits.working_set / per_index).max(1);
    sink.begin(&info)?;
    let axis0 = region.ranges[0].clone();
    let mut a = axis0.start;
    let mut base = 0u64;
    while a < axis0.end {
        let b = a.saturating_add(step).min(axis0.end);
        let mut band = region.clone();
        band.ranges[0] = a..b;
        let band_info = ArrayInfo::new(dtype, band.shape());
        let mut shifted = Band { inner: sink, base };
        let mut reorder = FortranSink::new(&mut shifted, *limits);
        reorder.begin(&band_info)?;
        stream_stored_c_order(
            input,
            data_offset,
            dtype,
            &stored,
            Some(&fortran_stored_region(&band)),
            fix,
            &mut reorder,
        )?;
        base += band_info.byte_len()?;
        a = b;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// C-order bytes of a Fortran-order array, one value at a time from the definition.
    fn by_definition(data: &[u8], elem: usize, shape: &[u64]) -> Vec<u8> {
        let count: u64 = shape.iter().product();
        let mut out = Vec::new();
        for c in 0..count {
            let (mut rest, mut f, mut stride) = (c, 0u64, 1u64);
            let mut idx = vec![0u64; shape.len()];
            for a in (0..shape.len()).rev() {
                idx[a] = rest % shape[a];
                rest /= shape[a];
            }
            for a in 0..shape.len() {
                f += idx[a] * stride;
                stride *= shape[a];
            }
            out.extend_from_slice(&data[f as usize * elem..(f as usize + 1) * elem]);
        }
        out
    }

    #[test]
    fn chunked_gathers_and_slabs_match_the_definition() {
        let shapes: [&[u64]; 6] = [
            &[4, 3],
            &[3, 4, 5],
            &[2, 3, 4, 5],
            &[5, 1, 3],
            &[7, 2],
            &[2, 2, 2, 2, 3],
        ];
        for shape in shapes {
            for elem in [1usize, 2, 3, 8, 16] {
                let n: u64 = shape.iter().product();
                let data: Vec<u8> = (0..n as usize * elem).map(|i| (i * 7 % 251) as u8).collect();
                let want = by_definition(&data, elem, shape);
                let rows = *shape.last().unwrap();
                for gather in [1usize, elem * 2 + 1, 40, GATHER] {
                    for slab_rows in 1..=rows {
                        let mut r = Reorder::new(elem, shape).unwrap();
                        r.gather = gather;
                        let mut got = vec![0u8; data.len()];
                        let row = r.row_bytes as usize;
                        let mut k0 = 0;
                        while k0 < rows {
                            let k1 = (k0 + slab_rows).min(rows);
                            let slab = &data[k0 as usize * row..k1 as usize * row];
                            r.slab_runs(slab, k0, k1, &mut |at, b| {
                                got[at as usize..at as usize + b.len()].copy_from_slice(b);
                                Ok(())
                            })
                            .unwrap();
                            k0 = k1;
                        }
                        assert_eq!(got, want, "{shape:?} elem {elem} gather {gather} slab {slab_rows}");
                    }
                }
                assert_eq!(fortran_to_c(&data, elem, shape).unwrap(), want);
            }
        }
    }
}
