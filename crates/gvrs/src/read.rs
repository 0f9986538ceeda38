//! Reading cell values into an [`ArraySink`]: whole elements or a window of them, one element or
//! several stacked (VOLP levels), into memory or onto a file or stream, with memory bounded by
//! [`Limits::working_set`](rasterpack_common::Limits::working_set), whatever the grid's size.
//!
//! Only the tiles a window meets are read. A window is cut into *bands* (its rows inside one
//! tile row) and, when one band is wider than the working set allows, into *stripes* of tile
//! columns (random-access sinks only; a sequential sink needs whole rows in order and is refused
//! with `limit.working_set` before anything is decoded). Consecutive bands are decoded together
//! (one rayon task per band) into a group buffer that is handed to the sink while the next
//! group decodes on another thread. Bands that no stored tile meets are never buffered: they
//! reach the sink as [`ArraySink::fill_at`] runs of the element's fill value. A sink that holds
//! the whole array in memory ([`ArraySink::direct_buffer`]) gets every band decoded straight
//! into place.

use std::cell::Cell;
use std::ops::Range;
use std::sync::mpsc;

use rasterpack_common::{ArrayInfo, ArrayRequest, ArraySink, BlockSink, DType, Error, ErrorKind, Region, Result};
use rayon::prelude::*;
use serde_json::{json, Map, Value};

use crate::model::{GvrsElement, GvrsFile, GvrsPlane, Plane0};
use crate::raw::{ElementRange, ElementType};

/// What a request selects: the elements (the levels of a stacked array), stored codes or
/// values, and the window of the grid.
#[derive(Debug, Clone)]
pub(crate) struct Selection {
    /// Element indexes in output order.
    pub(crate) elements: Vec<usize>,
    /// Stored integer codes of integer-coded floats instead of their values.
    pub(crate) codes: bool,
    /// Output dtype (the same for every selected element).
    pub(crate) dtype: DType,
    /// Grid rows of the window.
    pub(crate) rows: Range<u32>,
    /// Grid columns of the window.
    pub(crate) cols: Range<u32>,
    /// What the sink is told at `begin`.
    pub(crate) info: ArrayInfo,
}

impl Selection {
    /// Bytes of one element's window.
    fn level_bytes(&self) -> u64 {
        len(&self.rows) as u64 * len(&self.cols) as u64 * self.dtype.size() as u64
    }
}

/// How a window is cut for a sink that is not written in place.
#[derive(Debug, Clone, Copy)]
struct Plan {
    /// Tile columns per stripe (`u32::MAX`: the whole window is one stripe).
    stripe_tiles: u32,
    /// Largest group of decoded rows (bytes); two groups are in flight at once.
    group_bytes: u64,
    /// How many bands decode at once (each holds a tile record and a decoded tile).
    concurrency: usize,
}

/// A run of a stripe's rows on its way to the sink.
enum Piece {
    /// Rows holding only the fill value.
    Fill(Range<u32>),
    /// Decoded rows, `len(rows) * stripe row bytes`.
    Data(Range<u32>, Vec<u8>),
}

fn len(r: &Range<u32>) -> usize {
    (r.end - r.start) as usize
}

impl GvrsFile {
    /// What `req` asks for: the element (by name; the only one when the file has one), or with
    /// `req.target == Some("volp")` every element (or the named one) stacked into
    /// `[levels, rows, cols]`, and the window `req.region`.
    pub(crate) fn select(&self, req: &ArrayRequest) -> Result<Selection> {
        let stacked = req.target == Some("volp");
        let chosen = self.chosen_elements(req, stacked)?;
        let dtype = self.elements[chosen[0]].dtype(req.codes);
        let g = self.geometry;
        let grid = [g.rows as u64, g.cols as u64];
        // A stacked array is [levels, rows, cols]; a region of two axes (a `--window`) is a window
        // of every level, one of three axes also picks the levels.
        let (levels, window) = match &req.region {
            Some(spec) if stacked && spec.axes.len() == 3 => {
                let r = spec.resolve(&[chosen.len() as u64, grid[0], grid[1]])?;
                let levels = r.ranges[0].start as usize..r.ranges[0].end as usize;
                let window = Region {
                    ranges: r.ranges[1..].to_vec(),
                };
                (levels, window)
            }
            _ => (0..chosen.len(), req.region_of(&grid)?),
        };
        let elements = chosen[levels].to_vec();
        let rows = window.ranges[0].start as u32..window.ranges[0].end as u32;
        let cols = window.ranges[1].start as u32..window.ranges[1].end as u32;
        let info = self.selection_info(&elements, stacked, dtype, vec![len(&rows) as u64, len(&cols) as u64]);
        Ok(Selection {
            elements,
            codes: req.codes,
            dtype,
            rows,
            cols,
            info,
        })
    }

    /// The elements a request names (all of them when stacking without a name), sharing one
    /// output dtype.
    fn chosen_elements(&self, req: &ArrayRequest, stacked: bool) -> Result<Vec<usize>> {
        let names: Vec<String> = self.elements.iter().map(|e| e.name()).collect();
        let chosen: Vec<usize> = match &req.element {
            Some(name) => vec![self.element_index_or_err(name)?],
            None if names.len() == 1 => vec![0],
            None if stacked => (0..names.len()).collect(),
            None => {
                return Err(Error::new(
                    ErrorKind::Usage,
                    "request.element_required",
                    None,
                    format!(
                        "this GVRS file has {} elements; name the one to read ({})",
                        names.len(),
                        names.join(", ")
                    ),
                ))
            }
        };
        let dtype_of = |i: usize| self.elements[i].dtype(req.codes);
        if chosen.iter().any(|&i| dtype_of(i) != dtype_of(chosen[0])) {
            let list: Vec<String> = chosen
                .iter()
                .map(|&i| format!("{} ({})", names[i], dtype_of(i).name()))
                .collect();
            return Err(Error::new(
                ErrorKind::Usage,
                "request.element_required",
                None,
                format!(
                    "cannot stack GVRS elements of different types into one VOLP volume: {}; name the one to read",
                    list.join(", ")
                ),
            ));
        }
        Ok(chosen)
    }

    /// What the sink is told: one element's name and attributes, or a stack's (`a+b`, the
    /// source format and each element's attributes) with the levels axis first.
    fn selection_info(&self, elements: &[usize], stacked: bool, dtype: DType, mut shape: Vec<u64>) -> ArrayInfo {
        if !stacked {
            let mut attrs = self.element_attrs(elements[0]);
            if let Some(axes) = self.axes_attr() {
                attrs.insert("axes".into(), axes);
            }
            if let Some(c) = self.coordinates_attr() {
                attrs.insert("coordinates".into(), c);
            }
            return ArrayInfo {
                dtype,
                shape,
                name: Some(self.elements[elements[0]].name()),
                attrs,
            };
        }
        shape.insert(0, elements.len() as u64);
        let mut attrs = Map::new();
        attrs.insert("source_format".into(), json!("gvrs"));
        attrs.insert(
            "elements".into(),
            Value::Array(elements.iter().map(|&i| Value::Object(self.element_attrs(i))).collect()),
        );
        let names: Vec<String> = elements.iter().map(|&i| self.elements[i].name()).collect();
        ArrayInfo {
            dtype,
            shape,
            name: Some(names.join("+")),
            attrs,
        }
    }

    /// The grid's axes as coordinates, columns (x, VDS dimension 0) first then rows (y), in the
    /// form a VDS source gives them (`name`, `unit`, `num_samples`, `coordinate_min`,
    /// `coordinate_max`: the model coordinates of the first and last cell centres); `None` for a
    /// rotated or sheared transform, whose axes are not x and y.
    fn axes_attr(&self) -> Option<Value> {
        let t = &self.header.r2m;
        if t[1] != 0.0 || t[3] != 0.0 || !t.iter().all(|v| v.is_finite()) {
            return None;
        }
        let g = self.geometry;
        let (x0, y0) = self.grid_to_model(0.0, 0.0);
        let (x1, y1) = self.grid_to_model(g.rows as f64 - 1.0, g.cols as f64 - 1.0);
        let (xn, yn, unit) = match self.header.coordinate_system {
            1 => ("X", "Y", ""),
            2 => ("Longitude", "Latitude", "deg"),
            _ => ("Column", "Row", ""),
        };
        Some(json!([
            {"name": xn, "unit": unit, "num_samples": g.cols, "coordinate_min": x0, "coordinate_max": x1},
            {"name": yn, "unit": unit, "num_samples": g.rows, "coordinate_min": y0, "coordinate_max": y1},
        ]))
    }

    /// The header's coordinate fields as stored (`system`, the model coordinates `x0`, `y0`,
    /// `x1`, `y1` of the first and last cell centres, `raster_space`, and the grid's `rows` and
    /// `cols` they belong to): what the GVRS writer needs to write the same header fields, which
    /// the `axes` (computed through the transform) give only up to rounding. `None` for a
    /// rotated or sheared transform, which a GVRS 1.4 header cannot say through these fields.
    fn coordinates_attr(&self) -> Option<Value> {
        use rasterpack_common::json::f64_value;
        let h = &self.header;
        let t = &h.r2m;
        if t[1] != 0.0 || t[3] != 0.0 || !t.iter().all(|v| v.is_finite()) {
            return None;
        }
        let system = match h.coordinate_system {
            0 => "Unspecified",
            1 => "Cartesian",
            2 => "Geographic",
            _ => return None,
        };
        let space = match h.raster_space {
            1 => "Point",
            2 => "Area",
            _ => "Unspecified",
        };
        Some(json!({
            "system": system,
            "x0": f64_value(h.x0), "y0": f64_value(h.y0), "x1": f64_value(h.x1), "y1": f64_value(h.y1),
            "raster_space": space,
            "rows": self.geometry.rows, "cols": self.geometry.cols,
        }))
    }

    /// Stream what `req` selects into `sink` (the protocol of [`rasterpack_common::stream`]:
    /// `begin`, every byte once; the caller calls `finish`). The file's own read checks
    /// ([`GvrsFile::read_error`]), usage errors and, for a sequential sink, the working-set
    /// check come before `begin`; nothing is decoded before the sink accepted the array.
    pub(crate) fn stream_selection(&self, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        // A damaged file is reported as such before anything is looked up in it.
        self.read_error()?;
        let sel = self.select(req)?;
        let plan = self.plan(&sel, sink.random_access(), req.limits.working_set);
        if !sink.random_access() {
            plan.as_ref().map_err(Clone::clone)?;
        }
        sink.begin(&sel.info)?;
        let level = sel.level_bytes();
        if let Some(buf) = sink.direct_buffer() {
            if buf.len() as u64 != level.saturating_mul(sel.elements.len() as u64) {
                return Err(Error::usage(format!(
                    "internal: the sink holds {} bytes, the selection {}",
                    buf.len(),
                    level.saturating_mul(sel.elements.len() as u64)
                )));
            }
            for (k, &el) in sel.elements.iter().enumerate() {
                let at = k * level as usize;
                let dst = &mut buf[at..at + level as usize];
                self.decode_window_into(el, sel.codes, sel.rows.clone(), sel.cols.clone(), dst)?;
            }
            return Ok(());
        }
        let plan = plan?;
        if let Some(blocks) = sink.parallel_blocks() {
            // A sink that only folds the values (stats): tiles decoded in any order on every
            // thread, as `validate` decodes them, and no rows assembled.
            return self.stream_tiles(&sel, &plan, blocks.as_ref(), sink);
        }
        for (k, &el) in sel.elements.iter().enumerate() {
            self.stream_window(el, &sel, &plan, k as u64 * level, sink)?;
        }
        Ok(())
    }

    /// Hand every tile's part of the window to `blocks` ([`ArraySink::parallel_blocks`]):
    /// blocks numbered element by element, band by band, tile column by tile column (fixed by
    /// the file and the request), decoded by at most `plan.concurrency` threads, a batch of
    /// bands at a time (announced to a remote input together), each batch's bytes reported to
    /// `sink` when it is done.
    fn stream_tiles(
        &self,
        sel: &Selection,
        plan: &Plan,
        blocks: &dyn BlockSink,
        sink: &mut dyn ArraySink,
    ) -> Result<()> {
        if sel.rows.is_empty() || sel.cols.is_empty() {
            return Ok(());
        }
        let g = self.geometry;
        let size = sel.dtype.size();
        let tiles = sel.cols.start / g.tile_cols..(sel.cols.end - 1) / g.tile_cols + 1;
        let per_band = (tiles.end - tiles.start) as usize;
        // Some tiles per decoder in each batch, so that a slow tile does not idle the others.
        let batch_tiles = (plan.concurrency * 8).max(per_band);
        let row_cells = len(&sel.cols) as u64;
        let mut seq = 0u64;
        for &el in &sel.elements {
            let element = self.check_element(el)?;
            let pattern = fill_bytes(element, sel.codes);
            // Bands without a stored tile in the window merge into one fill block (a grid of
            // 2^31 rows of fill costs a walk of its bands, not a block each); a batch ends
            // only after a stored band, so the numbering does not depend on the batch size.
            let mut bands = self.bands(&sel.rows);
            let mut fill_rows = 0u64;
            loop {
                let mut jobs: Vec<(u64, u32, Range<u32>, u32)> = Vec::new();
                let mut fills: Vec<(u64, u64)> = Vec::new();
                let mut tile_rows: Vec<u32> = Vec::new();
                let mut batch_cells = 0u64;
                let mut ended = true;
                for (tr, rows) in bands.by_ref() {
                    let n = len(&rows) as u64;
                    if !self.band_has_tiles(tr, &sel.cols) {
                        fill_rows += n;
                        continue;
                    }
                    if fill_rows > 0 {
                        fills.push((seq, fill_rows * row_cells));
                        batch_cells += fill_rows * row_cells;
                        seq += 1;
                        fill_rows = 0;
                    }
                    for tc in tiles.clone() {
                        jobs.push((seq, tr, rows.clone(), tc));
                        seq += 1;
                    }
                    tile_rows.push(tr);
                    batch_cells += n * row_cells;
                    if jobs.len() >= batch_tiles {
                        ended = false;
                        break;
                    }
                }
                if ended && fill_rows > 0 {
                    fills.push((seq, fill_rows * row_cells));
                    batch_cells += fill_rows * row_cells;
                    seq += 1;
                    fill_rows = 0;
                }
                if jobs.is_empty() && fills.is_empty() {
                    break;
                }
                for &(k, cells) in &fills {
                    blocks.fill(k, cells, &pattern)?;
                }
                self.prefetch_tiles(tile_rows.iter().copied(), &sel.cols);
                let one =
                    |plane: &mut GvrsPlane, buf: &mut Vec<u8>, (seq, tr, rows, tc): &(u64, u32, Range<u32>, u32)| {
                        let (seq, tr, tc) = (*seq, *tr, *tc);
                        let c0 = (tc * g.tile_cols).max(sel.cols.start);
                        let c1 = ((tc as u64 + 1) * g.tile_cols as u64).min(sel.cols.end as u64) as u32;
                        let cells = len(rows) * len(&(c0..c1));
                        let Some(off) = self.tile_offset(tr, tc) else {
                            return blocks.fill(seq, cells as u64, &pattern);
                        };
                        let index = tr as u64 * g.grid_cols as u64 + tc as u64;
                        self.decode_tile_into(off, index, el, plane)?;
                        let seg = len(&(c0..c1)) * size;
                        buf.resize(cells * size, 0);
                        let first_row = (rows.start - tr * g.tile_rows) as usize;
                        let first_col = (c0 - tc * g.tile_cols) as usize;
                        for (r, dst) in buf.chunks_exact_mut(seg).enumerate() {
                            let k0 = (first_row + r) * g.tile_cols as usize + first_col;
                            put_row(element, plane, k0, dst, sel.codes);
                        }
                        blocks.block(seq, buf)
                    };
                if plan.concurrency >= rayon::current_num_threads() {
                    jobs.par_iter().try_for_each_init(
                        || (GvrsPlane::Int(Vec::new()), Vec::new()),
                        |(plane, buf), job| one(plane, buf, job),
                    )?;
                } else {
                    // Fewer decoders than threads (large tiles): one task per share of the jobs.
                    let per_task = jobs.len().div_ceil(plan.concurrency.max(1));
                    jobs.par_chunks(per_task.max(1)).try_for_each(|task| {
                        let (mut plane, mut buf) = (GvrsPlane::Int(Vec::new()), Vec::new());
                        task.iter().try_for_each(|job| one(&mut plane, &mut buf, job))
                    })?;
                }
                sink.written_elsewhere(batch_cells * size as u64)?;
                if ended {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Cut the window for the working set: decoders in flight, two groups of decoded rows, and
    /// stripes when one band does not fit (random-access sinks only).
    fn plan(&self, sel: &Selection, random_access: bool, working_set: u64) -> Result<Plan> {
        let g = self.geometry;
        let size = sel.dtype.size() as u64;
        let per_tile = self
            .max_tile_record_len()
            .saturating_add(g.cells_per_tile().saturating_mul(4));
        let threads = rayon::current_num_threads().max(1) as u64;
        let concurrency = threads.min((working_set / 2 / per_tile.max(1)).max(1));
        let group_bytes = working_set.saturating_sub(concurrency.saturating_mul(per_tile)) / 2;
        let band_rows = (g.tile_rows as u64).min(len(&sel.rows) as u64);
        let band = band_rows * len(&sel.cols) as u64 * size;
        let plan = |stripe_tiles| Plan {
            stripe_tiles,
            group_bytes,
            concurrency: concurrency as usize,
        };
        if band <= group_bytes {
            return Ok(plan(u32::MAX));
        }
        let refuse = |what: String| {
            Error::limit(
                "limit.working_set",
                None,
                format!(
                    "{what}, above the {group_bytes} bytes the working set of {working_set} bytes leaves for decoded rows \
                     beside {concurrency} tile decoder(s) of {per_tile} bytes: read a smaller window, or raise Limits::working_set"
                ),
            )
        };
        if !random_access {
            return Err(refuse(format!(
                "one band of tile rows ({band_rows} rows x {} columns of {}) needs {band} bytes in order",
                len(&sel.cols),
                sel.dtype.name()
            )));
        }
        let one_tile_column = band_rows * g.tile_cols as u64 * size;
        match group_bytes / one_tile_column.max(1) {
            0 => Err(refuse(format!(
                "one tile ({band_rows} x {} cells of {}) needs {one_tile_column} bytes",
                g.tile_cols,
                sel.dtype.name()
            ))),
            k => Ok(plan(k.min(u32::MAX as u64) as u32)),
        }
    }

    /// The bands of `rows`: (tile row, rows of the window inside it), top to bottom.
    fn bands(&self, rows: &Range<u32>) -> impl Iterator<Item = (u32, Range<u32>)> {
        let tr = self.geometry.tile_rows;
        let rows = rows.clone();
        let first = rows.start / tr;
        let last = if rows.is_empty() {
            first
        } else {
            (rows.end - 1) / tr + 1
        };
        (first..last).map(move |t| {
            let start = (t * tr).max(rows.start);
            let end = ((t as u64 + 1) * tr as u64).min(rows.end as u64) as u32;
            (t, start..end)
        })
    }

    /// Whether any stored tile of tile row `tile_row` meets columns `cols`.
    fn band_has_tiles(&self, tile_row: u32, cols: &Range<u32>) -> bool {
        let tc = self.geometry.tile_cols;
        (cols.start / tc..=(cols.end - 1) / tc).any(|c| self.tile_offset(tile_row, c).is_some())
    }

    /// Decode rows `rows` (all inside tile row `tile_row`) x columns `cols` of element `el`
    /// into `dst` (C order, `len(cols)` values per row). Unstored tiles are the fill value.
    #[allow(clippy::too_many_arguments)]
    fn decode_band(
        &self,
        el: usize,
        codes: bool,
        tile_row: u32,
        rows: &Range<u32>,
        cols: &Range<u32>,
        dst: &mut [u8],
        plane: &mut GvrsPlane,
    ) -> Result<()> {
        let g = self.geometry;
        let element = self.check_element(el)?;
        let size = element.dtype(codes).size();
        let row_bytes = len(cols) * size;
        let nrows = len(rows);
        let pattern = fill_bytes(element, codes);
        // What the window's or group's announcement left out (a full budget), in one go.
        self.prefetch_tiles(std::iter::once(tile_row), cols);
        for tc in cols.start / g.tile_cols..=(cols.end - 1) / g.tile_cols {
            let c0 = (tc * g.tile_cols).max(cols.start);
            let c1 = ((tc as u64 + 1) * g.tile_cols as u64).min(cols.end as u64) as u32;
            let at = (c0 - cols.start) as usize * size;
            let seg = (c1 - c0) as usize * size;
            let Some(off) = self.tile_offset(tile_row, tc) else {
                // The first row's segment by pattern, the others copied from it.
                fill_pattern(&mut dst[at..at + seg], &pattern);
                for r in 1..nrows {
                    dst.copy_within(at..at + seg, r * row_bytes + at);
                }
                continue;
            };
            let index = tile_row as u64 * g.grid_cols as u64 + tc as u64;
            self.decode_tile_into(off, index, el, plane)?;
            let first_row = (rows.start - tile_row * g.tile_rows) as usize;
            let first_col = (c0 - tc * g.tile_cols) as usize;
            for r in 0..nrows {
                let k0 = (first_row + r) * g.tile_cols as usize + first_col;
                let o = r * row_bytes + at;
                put_row(element, plane, k0, &mut dst[o..o + seg], codes);
            }
        }
        Ok(())
    }

    /// Decode the window of element `el` straight into `out` (the whole window, in memory):
    /// every band in parallel, one decoded tile per thread.
    fn decode_window_into(
        &self,
        el: usize,
        codes: bool,
        rows: Range<u32>,
        cols: Range<u32>,
        out: &mut [u8],
    ) -> Result<()> {
        let row_bytes = len(&cols) * self.elements[el].dtype(codes).size();
        self.prefetch_tiles(self.bands(&rows).map(|(tr, _)| tr), &cols);
        let mut slices = Vec::new();
        let mut rest = out;
        for (tr, rr) in self.bands(&rows) {
            let (dst, tail) = rest.split_at_mut(len(&rr) * row_bytes);
            slices.push((tr, rr, dst));
            rest = tail;
        }
        slices.into_par_iter().try_for_each_init(
            || GvrsPlane::Int(Vec::new()),
            |plane, (tr, rr, dst)| self.decode_band(el, codes, tr, &rr, &cols, dst, plane),
        )
    }

    /// Decode `bands` (consecutive, each inside its tile row) of columns `cols` into `buf`, at
    /// most `concurrency` bands at a time.
    fn decode_group(
        &self,
        el: usize,
        codes: bool,
        bands: &[(u32, Range<u32>)],
        cols: &Range<u32>,
        buf: &mut Vec<u8>,
        concurrency: usize,
    ) -> Result<()> {
        let row_bytes = len(cols) * self.elements[el].dtype(codes).size();
        let rows: usize = bands.iter().map(|(_, r)| len(r)).sum();
        self.prefetch_tiles(bands.iter().map(|(tr, _)| *tr), cols);
        // Every byte is decoded or filled: a reused buffer needs no clearing.
        buf.resize(rows * row_bytes, 0);
        let mut slices = Vec::with_capacity(bands.len());
        let mut rest = &mut buf[..];
        for (tr, rr) in bands {
            let (dst, tail) = rest.split_at_mut(len(rr) * row_bytes);
            slices.push((*tr, rr, dst));
            rest = tail;
        }
        if concurrency <= 1 {
            // One decoder: on this thread. A pipelined stripe decodes on a helper thread outside
            // the caller's rayon pool, so a parallel iterator here would queue in the global
            // pool, where reads from other threads queue too: with RAYON_NUM_THREADS=1 two
            // reads from two threads took turns in its one worker (issue 18).
            let mut plane = GvrsPlane::Int(Vec::new());
            return slices
                .into_iter()
                .try_for_each(|(tr, rr, dst)| self.decode_band(el, codes, tr, rr, cols, dst, &mut plane));
        }
        if concurrency >= rayon::current_num_threads() || slices.len() <= concurrency {
            return slices.into_par_iter().try_for_each_init(
                || GvrsPlane::Int(Vec::new()),
                |plane, (tr, rr, dst)| self.decode_band(el, codes, tr, rr, cols, dst, plane),
            );
        }
        // Fewer decoders than threads (large tiles): one task per share of the bands.
        let per_task = slices.len().div_ceil(concurrency);
        let mut tasks: Vec<Vec<_>> = Vec::new();
        let mut it = slices.into_iter().peekable();
        while it.peek().is_some() {
            tasks.push(it.by_ref().take(per_task).collect());
        }
        tasks.into_par_iter().try_for_each(|task| {
            let mut plane = GvrsPlane::Int(Vec::new());
            task.into_iter()
                .try_for_each(|(tr, rr, dst)| self.decode_band(el, codes, tr, rr, cols, dst, &mut plane))
        })
    }

    /// Stream the window of element `el` into `sink`, its first byte at `base`.
    fn stream_window(
        &self,
        el: usize,
        sel: &Selection,
        plan: &Plan,
        base: u64,
        sink: &mut dyn ArraySink,
    ) -> Result<()> {
        let g = self.geometry;
        let size = sel.dtype.size() as u64;
        let row_bytes = len(&sel.cols) as u64 * size;
        let pattern = fill_bytes(&self.elements[el], sel.codes);
        let last_tile = (sel.cols.end - 1) / g.tile_cols;
        let mut tc = sel.cols.start / g.tile_cols;
        while tc <= last_tile {
            let tc_end = (tc as u64 + plan.stripe_tiles as u64).min(last_tile as u64 + 1);
            let cols =
                (tc * g.tile_cols).max(sel.cols.start)..(tc_end * g.tile_cols as u64).min(sel.cols.end as u64) as u32;
            let whole_rows = cols == sel.cols;
            let stripe_row = len(&cols) as u64 * size;
            let col_at = (cols.start - sel.cols.start) as u64 * size;
            let row_at = |r: u32| base + (r - sel.rows.start) as u64 * row_bytes + col_at;
            let mut deliver = |piece: &Piece| -> Result<()> {
                match piece {
                    Piece::Fill(rows) if whole_rows => {
                        sink.fill_at(row_at(rows.start), len(rows) as u64 * row_bytes, &pattern)
                    }
                    Piece::Fill(rows) => rows
                        .clone()
                        .try_for_each(|r| sink.fill_at(row_at(r), stripe_row, &pattern)),
                    Piece::Data(rows, buf) if whole_rows => sink.write_at(row_at(rows.start), buf),
                    Piece::Data(rows, buf) => rows
                        .clone()
                        .zip(buf.chunks_exact(stripe_row as usize))
                        .try_for_each(|(r, data)| sink.write_at(row_at(r), data)),
                }
            };
            let stripe_bytes = len(&sel.rows) as u64 * stripe_row;
            if stripe_bytes <= plan.group_bytes {
                // One group at most: decode and deliver on this thread.
                let spare = Cell::new(None);
                self.produce_stripe(
                    el,
                    sel.codes,
                    &sel.rows,
                    &cols,
                    plan,
                    &mut || spare.take().unwrap_or_default(),
                    &mut |piece| {
                        let piece = piece?;
                        deliver(&piece)?;
                        if let Piece::Data(_, buf) = piece {
                            spare.set(Some(buf));
                        }
                        Ok(true)
                    },
                )?;
            } else {
                self.pipeline_stripe(el, sel.codes, &sel.rows, &cols, plan, &mut deliver)?;
            }
            tc = tc_end as u32;
        }
        Ok(())
    }

    /// Decode a stripe on a helper thread while this thread delivers the previous group: two
    /// groups in flight, buffers recycled.
    #[allow(clippy::too_many_arguments)]
    fn pipeline_stripe(
        &self,
        el: usize,
        codes: bool,
        rows: &Range<u32>,
        cols: &Range<u32>,
        plan: &Plan,
        deliver: &mut dyn FnMut(&Piece) -> Result<()>,
    ) -> Result<()> {
        std::thread::scope(|scope| {
            let (pieces_tx, pieces_rx) = mpsc::sync_channel::<Result<Piece>>(0);
            let (spare_tx, spare_rx) = mpsc::channel::<Vec<u8>>();
            let producer = scope.spawn(move || {
                // Errors travel through the channel.
                let _ = self.produce_stripe(
                    el,
                    codes,
                    rows,
                    cols,
                    plan,
                    &mut || spare_rx.try_recv().unwrap_or_default(),
                    &mut |piece| Ok(pieces_tx.send(piece).is_ok()),
                );
            });
            let mut result = Ok(());
            for piece in pieces_rx.iter() {
                match piece.and_then(|p| deliver(&p).map(|()| p)) {
                    Ok(Piece::Data(_, buf)) => {
                        let _ = spare_tx.send(buf);
                    }
                    Ok(Piece::Fill(_)) => {}
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
            // A stopped consumer drops the receiver: the producer's next send fails and it ends.
            drop(pieces_rx);
            if producer.join().is_err() {
                return Err(Error::usage("internal: the GVRS decoding thread panicked"));
            }
            result
        })
    }

    /// Walk a stripe band by band, emitting fill runs and decoded groups in row order. `emit`
    /// returns `Ok(false)` to stop early; a decoding error is emitted, then the walk stops.
    #[allow(clippy::too_many_arguments)]
    fn produce_stripe(
        &self,
        el: usize,
        codes: bool,
        rows: &Range<u32>,
        cols: &Range<u32>,
        plan: &Plan,
        take_buffer: &mut dyn FnMut() -> Vec<u8>,
        emit: &mut dyn FnMut(Result<Piece>) -> Result<bool>,
    ) -> Result<()> {
        let row_bytes = len(cols) as u64 * self.elements[el].dtype(codes).size() as u64;
        let mut fill: Option<Range<u32>> = None;
        let mut group: Vec<(u32, Range<u32>)> = Vec::new();
        let mut group_bytes = 0u64;
        for (tr, band) in self.bands(rows) {
            let stored = self.band_has_tiles(tr, cols);
            let bytes = len(&band) as u64 * row_bytes;
            // A fill band ends the group; so does a band the group has no room for.
            if !group.is_empty() && (!stored || group_bytes + bytes > plan.group_bytes) {
                if !self.emit_group(el, codes, &mut group, cols, plan, take_buffer, emit)? {
                    return Ok(());
                }
                group_bytes = 0;
            }
            if stored {
                if let Some(run) = fill.take() {
                    if !emit(Ok(Piece::Fill(run)))? {
                        return Ok(());
                    }
                }
                group.push((tr, band));
                group_bytes += bytes;
            } else {
                fill = Some(match fill {
                    Some(run) => run.start..band.end,
                    None => band,
                });
            }
        }
        if !group.is_empty() && !self.emit_group(el, codes, &mut group, cols, plan, take_buffer, emit)? {
            return Ok(());
        }
        if let Some(run) = fill {
            emit(Ok(Piece::Fill(run)))?;
        }
        Ok(())
    }

    /// Decode `group` and emit it (or the error); `Ok(false)` when the walk must stop.
    #[allow(clippy::too_many_arguments)]
    fn emit_group(
        &self,
        el: usize,
        codes: bool,
        group: &mut Vec<(u32, Range<u32>)>,
        cols: &Range<u32>,
        plan: &Plan,
        take_buffer: &mut dyn FnMut() -> Vec<u8>,
        emit: &mut dyn FnMut(Result<Piece>) -> Result<bool>,
    ) -> Result<bool> {
        let mut buf = take_buffer();
        let decoded = self.decode_group(el, codes, group, cols, &mut buf, plan.concurrency);
        let span = group[0].1.start..group[group.len() - 1].1.end;
        group.clear();
        match decoded {
            Ok(()) => emit(Ok(Piece::Data(span, buf))),
            Err(e) => {
                emit(Err(e))?;
                Ok(false)
            }
        }
    }
}

/// One value of the element's fill, as the output holds it (`codes`: the fill code of an
/// integer-coded float).
pub(crate) fn fill_bytes(el: &GvrsElement, codes: bool) -> Vec<u8> {
    match (el.spec.range, codes) {
        (ElementRange::Short { fill, .. }, _) => fill.to_le_bytes().to_vec(),
        (ElementRange::IntCodedFloat { fill_int, .. }, true) => fill_int.to_le_bytes().to_vec(),
        (ElementRange::IntCodedFloat { fill, .. }, false) => fill.to_le_bytes().to_vec(),
        _ => match el.fill_plane() {
            Plane0::Int(v) => v.to_le_bytes().to_vec(),
            Plane0::Float(v) => v.to_le_bytes().to_vec(),
        },
    }
}

/// Fill `dst` (a whole number of values) with `pattern`, by doubling copies.
pub(crate) fn fill_pattern(dst: &mut [u8], pattern: &[u8]) {
    let n = pattern.len().min(dst.len());
    dst[..n].copy_from_slice(&pattern[..n]);
    let mut done = n;
    while done > 0 && done < dst.len() {
        let step = done.min(dst.len() - done);
        dst.copy_within(..step, done);
        done += step;
    }
}

/// Write `dst.len() / size` cells of a decoded tile, starting at cell `k0`, in the output
/// dtype (integer-coded floats decoded unless `codes`).
pub(crate) fn put_row(el: &GvrsElement, plane: &GvrsPlane, k0: usize, dst: &mut [u8], codes: bool) {
    let n = dst.len() / el.dtype(codes).size();
    match (el.spec.element_type, plane) {
        (ElementType::Short, GvrsPlane::Int(p)) => {
            for (d, &v) in dst.chunks_exact_mut(2).zip(&p[k0..k0 + n]) {
                d.copy_from_slice(&(v as i16).to_le_bytes());
            }
        }
        (ElementType::IntCodedFloat, GvrsPlane::Int(p)) if !codes => {
            let ElementRange::IntCodedFloat {
                fill,
                scale,
                offset,
                fill_int,
                ..
            } = el.spec.range
            else {
                return;
            };
            // Same arithmetic as `GvrsElement::icf_value`, hoisted out of the cell loop.
            let decode = |code: i32| {
                if code == fill_int {
                    fill
                } else {
                    code as f32 / scale + offset
                }
            };
            for (d, &code) in dst.chunks_exact_mut(4).zip(&p[k0..k0 + n]) {
                d.copy_from_slice(&decode(code).to_le_bytes());
            }
        }
        (_, GvrsPlane::Int(p)) => {
            for (d, v) in dst.chunks_exact_mut(4).zip(&p[k0..k0 + n]) {
                d.copy_from_slice(&v.to_le_bytes());
            }
        }
        (_, GvrsPlane::Float(p)) => {
            for (d, v) in dst.chunks_exact_mut(4).zip(&p[k0..k0 + n]) {
                d.copy_from_slice(&v.to_le_bytes());
            }
        }
    }
}
