//! The friendly API: open a GVRS file, look at its header, elements and metadata, and read cells,
//! rectangles or whole elements. Tiles are read with positioned reads (the file is never loaded
//! whole) and decoded through [`crate::codec`]; a small LRU cache bounded in bytes keeps recently
//! used tiles for cell and rectangle access, so memory depends on the cache, not on the grid.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use rasterpack_common::{
    ArrayFile, ArrayInfo, ArrayRequest, ArraySink, DType, Error, ErrorKind, Input, Limits, MemorySink, NdArray, Report,
    Result, ValidateOptions,
};
use serde_json::{json, Map, Value};

use crate::codec::{self, Codec};
use crate::parse;
use crate::raw::*;

/// Default size of the decoded-tile cache.
pub const DEFAULT_CACHE_BYTES: usize = 16 << 20;

/// Grid and tile geometry, all positive (checked at open).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GvrsGeometry {
    /// Rows of the grid.
    pub rows: u32,
    /// Columns of the grid.
    pub cols: u32,
    /// Rows of a tile.
    pub tile_rows: u32,
    /// Columns of a tile.
    pub tile_cols: u32,
    /// Rows of the tile grid: ceil(rows / tile_rows).
    pub grid_rows: u32,
    /// Columns of the tile grid: ceil(cols / tile_cols).
    pub grid_cols: u32,
}

impl GvrsGeometry {
    /// The geometry a header declares; an error when a size is below 1.
    pub fn from_header(h: &Header) -> Result<GvrsGeometry> {
        let dims = [
            (h.rows, "rows", 104),
            (h.cols, "columns", 108),
            (h.tile_rows, "tile rows", 112),
            (h.tile_cols, "tile columns", 116),
        ];
        for (v, what, at) in dims {
            if v < 1 {
                return Err(Error::invalid(
                    "gvrs.header.grid_size",
                    at,
                    format!("number of {what} is {v}; it must be at least 1"),
                ));
            }
        }
        let (rows, cols, tr, tc) = (h.rows as u32, h.cols as u32, h.tile_rows as u32, h.tile_cols as u32);
        Ok(GvrsGeometry {
            rows,
            cols,
            tile_rows: tr,
            tile_cols: tc,
            grid_rows: rows.div_ceil(tr),
            grid_cols: cols.div_ceil(tc),
        })
    }
    /// Cells of one tile (edge tiles are stored full size too).
    pub fn cells_per_tile(&self) -> u64 {
        self.tile_rows as u64 * self.tile_cols as u64
    }
    /// The rows and columns of tile `tile` (row-major index in the tile grid) that lie in the
    /// grid: the full tile but at the last tile row and column; `(0, 0)` past the tile grid.
    pub fn tile_cells_in_grid(&self, tile: u64) -> (u32, u32) {
        let gc = u64::from(self.grid_cols.max(1));
        let (row, col) = (tile / gc, tile % gc);
        let part = |index: u64, tile_len: u32, len: u32| {
            let start = index.saturating_mul(u64::from(tile_len));
            u64::from(len).saturating_sub(start).min(u64::from(tile_len)) as u32
        };
        (
            part(row, self.tile_rows, self.rows),
            part(col, self.tile_cols, self.cols),
        )
    }
    /// Tiles of the tile grid.
    pub fn tile_count(&self) -> u64 {
        self.grid_rows as u64 * self.grid_cols as u64
    }
    /// Cells of the grid.
    pub fn cells(&self) -> u64 {
        self.rows as u64 * self.cols as u64
    }
}

/// What a decoded element of one tile holds: i32 for Integer, Short (sign-extended) and the
/// codes of integer-coded floats; f32 for Float.
#[derive(Debug, Clone, PartialEq)]
pub enum GvrsPlane {
    /// Integer, Short (sign-extended) and integer-coded float (codes) cells.
    Int(Vec<i32>),
    /// Float cells.
    Float(Vec<f32>),
}

impl GvrsPlane {
    fn bytes(&self) -> usize {
        self.len() * 4
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        match self {
            GvrsPlane::Int(v) => v.len(),
            GvrsPlane::Float(v) => v.len(),
        }
    }

    /// True when the plane holds no cell.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One cell value, typed as the element is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GvrsCellValue {
    /// A cell of an Integer element.
    Integer(i32),
    /// A cell of a Short element.
    Short(i16),
    /// A cell of a Float element.
    Float(f32),
    /// A cell of an integer-coded float element.
    IntCodedFloat {
        /// The value: the fill value for the fill code, else `code / scale + offset` in f32.
        value: f32,
        /// The stored code.
        code: i32,
    },
}

/// One element of a grid (a named variable with a value per cell), as its header entry
/// declares it.
#[derive(Debug, Clone, PartialEq)]
pub struct GvrsElement {
    /// The specification as stored.
    pub spec: ElementSpec,
}

impl GvrsElement {
    /// The element's name, what reads address it by.
    pub fn name(&self) -> String {
        self.spec.name.lossy()
    }
    /// Integer, Short, Float or integer-coded float.
    pub fn element_type(&self) -> ElementType {
        self.spec.element_type
    }
    /// The dtype reads produce: int32, int16, float32; integer-coded floats as float32 values
    /// or, with `codes`, their stored int32 codes.
    pub fn dtype(&self, codes: bool) -> DType {
        match self.spec.element_type {
            ElementType::Integer => DType::I32,
            ElementType::Short => DType::I16,
            ElementType::Float => DType::F32,
            ElementType::IntCodedFloat => {
                if codes {
                    DType::I32
                } else {
                    DType::F32
                }
            }
        }
    }
    /// The plane value of a cell no tile covers.
    pub(crate) fn fill_plane(&self) -> Plane0 {
        match self.spec.range {
            ElementRange::Integer { fill, .. } => Plane0::Int(fill),
            ElementRange::Short { fill, .. } => Plane0::Int(fill as i32),
            ElementRange::IntCodedFloat { fill_int, .. } => Plane0::Int(fill_int),
            ElementRange::Float { fill, .. } => Plane0::Float(fill),
        }
    }
    /// Decode an integer-coded float: a fill code gives the fill value, else
    /// `(f32)code / scale + offset` computed in f32.
    pub fn icf_value(&self, code: i32) -> f32 {
        match self.spec.range {
            ElementRange::IntCodedFloat {
                fill,
                scale,
                offset,
                fill_int,
                ..
            } => {
                if code == fill_int {
                    fill
                } else {
                    code as f32 / scale + offset
                }
            }
            _ => code as f32,
        }
    }
    fn value_of(&self, p: Plane0) -> GvrsCellValue {
        match (self.spec.element_type, p) {
            (ElementType::Integer, Plane0::Int(v)) => GvrsCellValue::Integer(v),
            (ElementType::Short, Plane0::Int(v)) => GvrsCellValue::Short(v as i16),
            (ElementType::IntCodedFloat, Plane0::Int(v)) => GvrsCellValue::IntCodedFloat {
                value: self.icf_value(v),
                code: v,
            },
            (_, Plane0::Float(v)) => GvrsCellValue::Float(v),
            (_, Plane0::Int(v)) => GvrsCellValue::Integer(v),
        }
    }
    /// The element's facts as JSON (sidecar-like keys).
    pub fn to_json(&self, index: usize) -> Value {
        use rasterpack_common::json::f64_value;
        let s = &self.spec;
        let mut m = Map::new();
        m.insert("index".into(), json!(index));
        m.insert("name".into(), json!(s.name.lossy()));
        m.insert("type".into(), json!(s.element_type.name()));
        m.insert("type_code".into(), json!(s.element_type as u8));
        m.insert("continuous".into(), json!(s.continuous != 0));
        m.insert("label".into(), json!(s.label.lossy()));
        m.insert("description".into(), json!(s.description.lossy()));
        m.insert("unit".into(), json!(s.unit.lossy()));
        match s.range {
            ElementRange::Integer { min, max, fill } => {
                m.insert("min".into(), json!(min));
                m.insert("max".into(), json!(max));
                m.insert("fill".into(), json!(fill));
            }
            ElementRange::Short { min, max, fill } => {
                m.insert("min".into(), json!(min));
                m.insert("max".into(), json!(max));
                m.insert("fill".into(), json!(fill));
            }
            ElementRange::Float { min, max, fill } => {
                for (k, v) in [("min", min), ("max", max), ("fill", fill)] {
                    m.insert(k.into(), f64_value(v as f64));
                    m.insert(format!("{k}_bits"), json!(format!("0x{:08x}", v.to_bits())));
                }
            }
            ElementRange::IntCodedFloat {
                min,
                max,
                fill,
                scale,
                offset,
                min_int,
                max_int,
                fill_int,
            } => {
                for (k, v) in [
                    ("min", min),
                    ("max", max),
                    ("fill", fill),
                    ("scale", scale),
                    ("offset", offset),
                ] {
                    m.insert(k.into(), f64_value(v as f64));
                    m.insert(format!("{k}_bits"), json!(format!("0x{:08x}", v.to_bits())));
                }
                m.insert("min_int".into(), json!(min_int));
                m.insert("max_int".into(), json!(max_int));
                m.insert("fill_int".into(), json!(fill_int));
            }
        }
        Value::Object(m)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Plane0 {
    Int(i32),
    Float(f32),
}

/// Bounded LRU cache of decoded tile planes, keyed by (tile index, element).
#[derive(Debug)]
struct TileCache {
    capacity: usize,
    used: usize,
    clock: u64,
    map: HashMap<(u64, usize), (Arc<GvrsPlane>, u64)>,
}

impl TileCache {
    fn get(&mut self, key: (u64, usize)) -> Option<Arc<GvrsPlane>> {
        self.clock += 1;
        let clock = self.clock;
        self.map.get_mut(&key).map(|(p, stamp)| {
            *stamp = clock;
            Arc::clone(p)
        })
    }
    fn put(&mut self, key: (u64, usize), plane: Arc<GvrsPlane>) {
        let size = plane.bytes();
        if size > self.capacity {
            return;
        }
        while self.used + size > self.capacity {
            let Some((&old, _)) = self.map.iter().min_by_key(|(_, (_, s))| *s) else {
                break;
            };
            if let Some((p, _)) = self.map.remove(&old) {
                self.used -= p.bytes();
            }
        }
        self.clock += 1;
        if let Some((p, _)) = self.map.insert(key, (plane, self.clock)) {
            self.used -= p.bytes();
        }
        self.used += size;
    }
}

/// An open GVRS file: its header and tile directory parsed, its tiles read (with positioned
/// reads) only when cells are asked for. See the [crate documentation](crate) for an example.
#[derive(Debug)]
pub struct GvrsFile {
    input: Input,
    /// The header record as parsed.
    pub header: Header,
    /// Grid and tile sizes.
    pub geometry: GvrsGeometry,
    /// The elements, in header order.
    pub elements: Vec<GvrsElement>,
    /// The header's codec list mapped to implemented codecs (`None`: unknown name).
    pub codecs: Vec<Option<Codec>>,
    /// The tile directory as parsed; kept when only a check on it failed (its CRC, format or
    /// window: see `tile_directory_error`) so that `validate` can still look at the tiles.
    pub tile_directory: Option<TileDirectory>,
    /// Why the tile directory cannot be trusted (unreadable, CRC mismatch, unknown format,
    /// window outside the tile grid): every read of cell values fails with it.
    pub tile_directory_error: Option<Error>,
    /// The header's CRC mismatch (checksums on): [`GvrsFile::open`] fails with it.
    pub header_error: Option<Error>,
    limits: Limits,
    cache: Mutex<TileCache>,
    /// Where every stored tile record starts, sorted: made on the first prefetch (remote
    /// inputs only), to bound each record by the next.
    record_starts: std::sync::OnceLock<Vec<u64>>,
}

impl GvrsFile {
    /// Open the GVRS file at `path` with default [`Limits`]: the header and the tile directory
    /// are read and checked; the cells stay on disk until they are read (positioned reads, the
    /// file is never loaded whole).
    ///
    /// Opening succeeds whenever the header parses, so that [`GvrsFile::validate`] can report
    /// on a damaged file; every read of cell values then makes the checks of
    /// [`GvrsFile::read_error`] and fails with the same finding `validate` reports.
    pub fn open(path: impl AsRef<Path>) -> Result<GvrsFile> {
        GvrsFile::from_input(Input::open(path.as_ref())?, Limits::default())
    }

    /// Read a GVRS file held in memory, with default [`Limits`] (see [`GvrsFile::open`]).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GvrsFile> {
        GvrsFile::from_input(Input::from_bytes("<memory>", bytes), Limits::default())
    }

    /// Why cell values cannot be read from this file, if anything: a file still opened for
    /// writing (as Gridfour refuses it), a header whose CRC does not match (checksums on), or a
    /// tile directory that cannot be trusted (unreadable, CRC mismatch, format other than 0,
    /// window outside the tile grid, missing in a closed file). Every read of cell values makes
    /// these checks first, so a damaged file never hands out values.
    pub fn read_error(&self) -> Result<()> {
        if self.header.time_opened_for_writing != 0 {
            return Err(Error::invalid(
                "gvrs.header.opened_for_writing",
                48,
                "the file is still opened for writing (or was not closed properly): its content is incomplete",
            ));
        }
        if let Some(e) = self.header_error.as_ref().or(self.tile_directory_error.as_ref()) {
            return Err(e.clone());
        }
        Ok(())
    }

    /// Open `input` with `limits` (see [`GvrsFile::open`]). Fails only when the header cannot be
    /// parsed, declares no element, or declares a tile larger than [`Limits::max_alloc`].
    pub fn from_input(input: Input, limits: Limits) -> Result<GvrsFile> {
        let header = parse::read_header(&input, &limits)?;
        let geometry = GvrsGeometry::from_header(&header)?;
        // Decoding a tile allocates its cells: a declared tile size is checked before any read.
        let tile_bytes = geometry.cells_per_tile().saturating_mul(4);
        if tile_bytes > limits.max_alloc {
            return Err(Error::limit(
                "gvrs.header.tile_size",
                Some(112),
                format!(
                    "a {} x {} tile decodes to {tile_bytes} bytes, above the limit of {} bytes",
                    geometry.tile_rows, geometry.tile_cols, limits.max_alloc
                ),
            ));
        }
        let elements: Vec<GvrsElement> = header
            .elements
            .iter()
            .cloned()
            .map(|spec| GvrsElement { spec })
            .collect();
        if elements.is_empty() {
            return Err(Error::invalid(
                "gvrs.header.element_count",
                280,
                "the file declares no elements",
            ));
        }
        let codecs = header.codecs.iter().map(|c| Codec::from_name(&c.lossy())).collect();
        let mut f = GvrsFile {
            input,
            header,
            geometry,
            elements,
            codecs,
            tile_directory: None,
            tile_directory_error: None,
            header_error: None,
            limits,
            cache: Mutex::new(TileCache {
                capacity: DEFAULT_CACHE_BYTES,
                used: 0,
                clock: 0,
                map: HashMap::new(),
            }),
            record_starts: std::sync::OnceLock::new(),
        };
        f.header_error = f.check_header_crc().err();
        // A damaged tile directory leaves the rest of the file inspectable and checkable.
        match f.read_tile_directory() {
            Ok((d, problem)) => {
                f.tile_directory = d;
                f.tile_directory_error = problem;
            }
            Err(e) => f.tile_directory_error = Some(e),
        }
        Ok(f)
    }

    /// Whether records carry CRCs to verify (header flag at 128).
    pub fn checksums(&self) -> bool {
        self.header.checksums != 0
    }

    /// The header record's CRC (over [16, 16 + length - 4)), when checksums are on. A file
    /// never closed has a zero or stale CRC; that is reported as opened-for-writing instead.
    fn check_header_crc(&self) -> Result<()> {
        if !self.checksums() || self.header.time_opened_for_writing != 0 {
            return Ok(());
        }
        let len = self.header.record.length as u64;
        let bytes = self.input.read_vec(16, len, "header record", &self.limits)?;
        verify_crc(&bytes, 16, RecordType::Header)
    }

    /// Where the file's bytes come from.
    pub fn input(&self) -> &Input {
        &self.input
    }

    /// The limits the file was opened with.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Change the tile cache's size in bytes (0 disables caching).
    pub fn set_cache_bytes(&self, bytes: usize) {
        if let Ok(mut c) = self.cache.lock() {
            c.capacity = bytes;
            c.map.clear();
            c.used = 0;
        }
    }

    /// Bytes currently held by the tile cache.
    pub fn cache_bytes(&self) -> usize {
        self.cache.lock().map(|c| c.used).unwrap_or(0)
    }

    /// Read the tile directory (bounded by the largest record these dimensions allow), and what
    /// makes it untrustworthy for reads: a CRC mismatch (checksums on), a format other than 0,
    /// or a window outside the tile grid (its entries would map to the wrong tiles).
    fn read_tile_directory(&self) -> Result<(Option<TileDirectory>, Option<Error>)> {
        let off = self.header.offset_tile_directory;
        if off == 0 {
            if self.header.time_opened_for_writing == 0 {
                return Err(Error::invalid(
                    "gvrs.tile_directory.missing",
                    80,
                    "the header has no tile directory reference",
                ));
            }
            return Ok((None, None));
        }
        let start = parse::record_start_of(off, 80, "tile directory")?;
        let max = 40u64
            .saturating_add(self.geometry.tile_count().saturating_mul(8))
            .saturating_add(64);
        let (rec, bytes) = parse::read_record(&self.input, start, RecordType::TileDirectory, max, &self.limits)?;
        let mut problem = None;
        if self.checksums() {
            problem = verify_crc(&bytes, start, RecordType::TileDirectory).err();
        }
        // A damaged directory may not parse at all: the CRC then names the cause.
        let d = match parse::parse_tile_directory(rec, &bytes, &self.limits) {
            Ok(d) => d,
            Err(e) => return Err(problem.unwrap_or(e)),
        };
        if problem.is_none() && d.format != 0 {
            problem = Some(Error::invalid(
                "gvrs.tile_directory.format",
                start + 8,
                format!("tile directory format {} (only 0 is defined)", d.format),
            ));
        }
        let g = self.geometry;
        let inside = d.row0 >= 0
            && d.col0 >= 0
            && d.row0 as i64 + d.n_rows as i64 <= g.grid_rows as i64
            && d.col0 as i64 + d.n_cols as i64 <= g.grid_cols as i64;
        if problem.is_none() && !inside {
            problem = Some(Error::invalid(
                "gvrs.tile_directory.bounds",
                start + 16,
                format!(
                    "directory covers tile rows {}..+{} and columns {}..+{}, outside the {} x {} tile grid",
                    d.row0, d.n_rows, d.col0, d.n_cols, g.grid_rows, g.grid_cols
                ),
            ));
        }
        Ok((Some(d), problem))
    }

    /// Uncompressed block size of each element.
    pub fn block_sizes(&self) -> Vec<u64> {
        let cells = self.geometry.cells_per_tile();
        self.elements
            .iter()
            .map(|e| e.spec.element_type.uncompressed_len(cells).unwrap_or(u64::MAX))
            .collect()
    }

    /// The largest legal tile record: prefix, index, each element's length and block, CRC, pad.
    pub fn max_tile_record_len(&self) -> u64 {
        let body: u64 = self
            .block_sizes()
            .iter()
            .fold(12u64, |acc, b| acc.saturating_add(4).saturating_add(*b));
        body.saturating_add(4).saturating_add(7) & !7
    }

    /// The index of the element named `name`.
    pub fn element_index(&self, name: &str) -> Option<usize> {
        self.elements.iter().position(|e| e.spec.name.bytes == name.as_bytes())
    }

    /// Content offset of a tile (tile-grid row and column), `None` when the tile is not stored.
    pub fn tile_offset(&self, tile_row: u32, tile_col: u32) -> Option<i64> {
        let d = self.tile_directory.as_ref()?;
        let r = (tile_row as i64).checked_sub(d.row0 as i64)?;
        let c = (tile_col as i64).checked_sub(d.col0 as i64)?;
        if r < 0 || c < 0 || r >= d.n_rows as i64 || c >= d.n_cols as i64 {
            return None;
        }
        let v = *d.entries.get((r * d.n_cols as i64 + c) as usize)?;
        (v != 0).then_some(v)
    }

    /// Announce the tile records of tile rows `tile_rows` x columns `cols` to a remote input
    /// (see [`Input::prefetch`]), so they are fetched together, adjacent ones in one request,
    /// before the decoders ask for them one by one. A record's end is taken as the start of
    /// the next record in the file; one whose end that does not bound to a legal record size
    /// (the last record, or one before a gap) is left to its own read. Only a hint: each
    /// record is still read and checked as before. Local inputs: nothing.
    pub(crate) fn prefetch_tiles(&self, tile_rows: impl Iterator<Item = u32>, cols: &std::ops::Range<u32>) {
        if !self.input.is_remote() || cols.is_empty() || self.geometry.tile_cols == 0 {
            return;
        }
        let starts = self.record_starts.get_or_init(|| {
            let mut v: Vec<u64> = self
                .tile_directory
                .iter()
                .flat_map(|d| d.entries.iter())
                .filter_map(|&e| u64::try_from(e).ok()?.checked_sub(8))
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        });
        let max = self.max_tile_record_len().saturating_add(8);
        let tc = self.geometry.tile_cols;
        let mut ranges = Vec::new();
        for tr in tile_rows {
            for c in cols.start / tc..=(cols.end - 1) / tc {
                let Some(start) = self
                    .tile_offset(tr, c)
                    .and_then(|off| u64::try_from(off).ok()?.checked_sub(8))
                else {
                    continue;
                };
                let next = starts.partition_point(|&s| s <= start);
                let end = starts.get(next).copied().unwrap_or(self.input.len());
                if end > start && end - start <= max {
                    ranges.push(start..end);
                }
            }
        }
        self.input.prefetch(&ranges);
    }

    /// Every stored tile: (tile index, content offset), in tile-index order.
    pub fn stored_tiles(&self) -> Vec<(u64, i64)> {
        let mut out = Vec::new();
        let Some(d) = &self.tile_directory else { return out };
        for (k, &v) in d.entries.iter().enumerate() {
            if v == 0 || d.n_cols <= 0 {
                continue;
            }
            let tr = d.row0 as i64 + (k / d.n_cols as usize) as i64;
            let tc = d.col0 as i64 + (k % d.n_cols as usize) as i64;
            if tr < 0 || tc < 0 {
                continue;
            }
            out.push(((tr * self.geometry.grid_cols as i64 + tc) as u64, v));
        }
        out.sort_unstable_by_key(|t| t.0);
        out
    }

    /// Read a tile record (whole, bounded by the largest legal size) and parse its layout.
    pub fn read_tile_record(&self, content_offset: i64) -> Result<(TileRecord, Vec<u8>)> {
        let start = parse::record_start_of(content_offset, content_offset.max(0) as u64, "tile")?;
        let (rec, bytes) = parse::read_record(
            &self.input,
            start,
            RecordType::Tile,
            self.max_tile_record_len(),
            &self.limits,
        )?;
        let tr = parse::parse_tile_record(rec, &bytes, &self.block_sizes())?;
        Ok((tr, bytes))
    }

    /// Read tile `tile_index`'s record for its values: as [`GvrsFile::read_tile_record`], plus
    /// the checks that protect what is read: the record's CRC (checksums on) and its tile
    /// index, which must be where the directory places it.
    pub fn read_tile_checked(&self, content_offset: i64, tile_index: u64) -> Result<(TileRecord, Vec<u8>)> {
        let (tr, bytes) = self.read_tile_record(content_offset)?;
        if self.checksums() {
            verify_crc(&bytes, tr.record.start, RecordType::Tile)?;
        }
        if tr.tile_index as i64 != tile_index as i64 {
            return Err(Error::invalid(
                "gvrs.tile.index_mismatch",
                tr.record.start + 8,
                format!(
                    "tile record holds tile index {}, but the directory places it at tile {tile_index}",
                    tr.tile_index
                ),
            ));
        }
        Ok((tr, bytes))
    }

    /// Read tile `tile_index` (record at `content_offset`) checked, and decode element
    /// `element` of it into `plane`: what every read path does with a stored tile.
    pub fn decode_tile_into(
        &self,
        content_offset: i64,
        tile_index: u64,
        element: usize,
        plane: &mut GvrsPlane,
    ) -> Result<()> {
        let (rec, bytes) = self.read_tile_checked(content_offset, tile_index)?;
        let (rel, n) = rec.blocks[element];
        self.decode_block_into(element, &bytes[rel..rel + n], rec.record.start + rel as u64, plane)?;
        if plane.len() != self.geometry.cells_per_tile() as usize {
            return Err(Error::usage(format!(
                "internal: tile {tile_index} decoded to {} cells, not {}",
                plane.len(),
                self.geometry.cells_per_tile()
            )));
        }
        Ok(())
    }

    /// Decode one element's block (`block` = the stored bytes, `at` = its absolute offset).
    pub fn decode_block(&self, element: usize, block: &[u8], at: u64) -> Result<GvrsPlane> {
        let mut plane = GvrsPlane::Int(Vec::new());
        self.decode_block_into(element, block, at, &mut plane)?;
        Ok(plane)
    }

    /// As [`GvrsFile::decode_block`], into `plane`, whose buffer is reused (not re-zeroed) when
    /// it already has the element's kind: every decoder writes every cell of the tile.
    pub fn decode_block_into(&self, element: usize, block: &[u8], at: u64, plane: &mut GvrsPlane) -> Result<()> {
        self.decode_block_counting(element, block, at, plane).map(|_| ())
    }

    /// As [`GvrsFile::decode_block_into`]; returns how many cells of a compressed Short block
    /// held Gridfour's null code (`i32::MIN`, read as `i16::MIN`).
    pub fn decode_block_counting(&self, element: usize, block: &[u8], at: u64, plane: &mut GvrsPlane) -> Result<u64> {
        let all = (self.geometry.tile_rows, self.geometry.tile_cols);
        self.decode_block_counting_in(element, block, at, plane, all)
    }

    /// As [`GvrsFile::decode_block_counting`], counting only the null cells of the tile's first
    /// `inside.0` rows and `inside.1` columns: the part of an edge tile that lies in the grid
    /// (see [`GvrsGeometry::tile_cells_in_grid`]). The cells beyond it are not cells of the
    /// grid: no read returns them.
    pub fn decode_block_counting_in(
        &self,
        element: usize,
        block: &[u8],
        at: u64,
        plane: &mut GvrsPlane,
        inside: (u32, u32),
    ) -> Result<u64> {
        let mut nulls = 0u64;
        let el = self.check_element(element)?;
        let cells = self.geometry.cells_per_tile() as usize;
        let unc = el.spec.element_type.uncompressed_len(cells as u64).unwrap_or(u64::MAX);
        let (tr, tc) = (self.geometry.tile_rows as usize, self.geometry.tile_cols as usize);
        if block.len() as u64 == unc {
            *plane = match el.spec.element_type {
                ElementType::Float => GvrsPlane::Float(
                    block
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect(),
                ),
                ElementType::Short => GvrsPlane::Int(
                    block
                        .chunks_exact(2)
                        .take(cells)
                        .map(|c| i16::from_le_bytes([c[0], c[1]]) as i32)
                        .collect(),
                ),
                _ => GvrsPlane::Int(
                    block
                        .chunks_exact(4)
                        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect(),
                ),
            };
            return Ok(0);
        }
        let idx = *block
            .first()
            .ok_or_else(|| Error::invalid("gvrs.tile.block_length", at, "empty tile block"))?;
        let codec = match self.codecs.get(idx as usize) {
            None => {
                return Err(Error::invalid(
                    "gvrs.tile.codec_index",
                    at,
                    format!(
                        "compressed block names codec index {idx}, but the header lists {} codec(s)",
                        self.codecs.len()
                    ),
                ))
            }
            Some(None) => {
                return Err(Error::unsupported(
                    "gvrs.tile.codec_unsupported",
                    Some(at),
                    format!(
                        "codec {:?} (index {idx}) is not implemented",
                        self.header.codecs[idx as usize].lossy()
                    ),
                ))
            }
            Some(Some(c)) => *c,
        };
        let shift = |e: Error| {
            let e = e.shifted(at);
            if e.code.contains('.') || e.kind == ErrorKind::Unsupported {
                e
            } else {
                e.in_format("gvrs.tile")
            }
        };
        match el.spec.element_type {
            ElementType::Float => {
                let mut out = match std::mem::replace(plane, GvrsPlane::Int(Vec::new())) {
                    GvrsPlane::Float(v) => v,
                    GvrsPlane::Int(_) => Vec::new(),
                };
                out.resize(cells, 0.0);
                let r = codec::decode_float(codec, block, tr, tc, &mut out).map_err(shift);
                *plane = GvrsPlane::Float(out);
                r.map(|_| 0)
            }
            t => {
                let mut out = match std::mem::replace(plane, GvrsPlane::Int(Vec::new())) {
                    GvrsPlane::Int(v) => v,
                    GvrsPlane::Float(_) => Vec::new(),
                };
                out.resize(cells, 0);
                let r = codec::decode_int(codec, block, tr, tc, &mut out).map_err(shift);
                if r.is_ok() && t == ElementType::Short {
                    // Compressed Short blocks decode to i32 and are truncated to i16, except
                    // Gridfour's null (i32::MIN, what Gridfour 2026 codes a fill cell as), which
                    // reads as i16::MIN (its SHORT_NULL_CODE) whatever the element's fill.
                    for (i, v) in out.iter_mut().enumerate() {
                        *v = if *v == i32::MIN {
                            // tc >= 1 (the geometry checks it).
                            let (r, c) = (i / tc.max(1), i % tc.max(1));
                            if r < inside.0 as usize && c < inside.1 as usize {
                                nulls += 1;
                            }
                            i32::from(i16::MIN)
                        } else {
                            *v as i16 as i32
                        };
                    }
                }
                *plane = GvrsPlane::Int(out);
                r.map(|_| nulls)
            }
        }
    }

    /// Decode one element of stored tile `tile_index` (no cache), with the checks of
    /// [`GvrsFile::read_tile_checked`].
    pub fn decode_tile(&self, content_offset: i64, tile_index: u64, element: usize) -> Result<GvrsPlane> {
        self.check_element(element)?;
        let (tr, bytes) = self.read_tile_checked(content_offset, tile_index)?;
        let (rel, n) = tr.blocks[element];
        self.decode_block(element, &bytes[rel..rel + n], tr.record.start + rel as u64)
    }

    /// One element of a tile through the cache; `None` when the tile is not stored (all fill).
    pub fn tile_plane(&self, tile_row: u32, tile_col: u32, element: usize) -> Result<Option<Arc<GvrsPlane>>> {
        self.read_error()?;
        let Some(off) = self.tile_offset(tile_row, tile_col) else {
            return Ok(None);
        };
        let key = (
            tile_row as u64 * self.geometry.grid_cols as u64 + tile_col as u64,
            element,
        );
        if let Some(p) = self.cache.lock().ok().and_then(|mut c| c.get(key)) {
            return Ok(Some(p));
        }
        let plane = Arc::new(self.decode_tile(off, key.0, element)?);
        if let Ok(mut c) = self.cache.lock() {
            c.put(key, Arc::clone(&plane));
        }
        Ok(Some(plane))
    }

    pub(crate) fn check_element(&self, element: usize) -> Result<&GvrsElement> {
        self.elements
            .get(element)
            .ok_or_else(|| Error::usage(format!("element index {element} out of range")))
    }

    /// The index of the element named `name`, or a usage error listing the elements.
    pub(crate) fn element_index_or_err(&self, name: &str) -> Result<usize> {
        self.element_index(name).ok_or_else(|| {
            let names: Vec<String> = self.elements.iter().map(|e| e.name()).collect();
            Error::usage(format!(
                "no element {name:?} in this GVRS file; its elements are: {}",
                names.join(", ")
            ))
        })
    }

    /// The value of one cell of the element named `element` (through the tile cache, see
    /// [`GvrsFile::set_cache_bytes`]).
    pub fn cell(&self, element: &str, row: u32, col: u32) -> Result<GvrsCellValue> {
        let element = self.element_index_or_err(element)?;
        let el = self.check_element(element)?;
        let g = self.geometry;
        if row >= g.rows || col >= g.cols {
            return Err(Error::usage(format!(
                "cell ({row}, {col}) is outside the {} x {} grid",
                g.rows, g.cols
            )));
        }
        let (tr, tc) = (row / g.tile_rows, col / g.tile_cols);
        let k = ((row % g.tile_rows) as u64 * g.tile_cols as u64 + (col % g.tile_cols) as u64) as usize;
        let v = match self.tile_plane(tr, tc, element)? {
            None => el.fill_plane(),
            Some(p) => match &*p {
                GvrsPlane::Int(v) => Plane0::Int(v[k]),
                GvrsPlane::Float(v) => Plane0::Float(v[k]),
            },
        };
        Ok(el.value_of(v))
    }

    /// One array per element, as reads produce them: `[rows, cols]`, the element's dtype
    /// (integer-coded floats as their float32 values), its name and attributes. A `Result`
    /// like every reader's `arrays` (a GVRS file that opened lists its elements without fail).
    pub fn arrays(&self) -> Result<Vec<ArrayInfo>> {
        let shape = vec![self.geometry.rows as u64, self.geometry.cols as u64];
        Ok(self
            .elements
            .iter()
            .enumerate()
            .map(|(i, e)| ArrayInfo {
                dtype: e.dtype(false),
                shape: shape.clone(),
                name: Some(e.name()),
                attrs: self.element_attrs(i),
            })
            .collect())
    }

    /// Every finding about the file (see [`crate::validate`]): the header, the directories,
    /// every record's CRC, and every tile decoded, with memory bounded by the working set.
    pub fn validate(&self) -> Report {
        crate::validate::validate(
            &self.input,
            &ValidateOptions {
                limits: self.limits,
                ..Default::default()
            },
        )
    }

    /// What `req` asks for, in memory (bounded by `req.limits.max_array_bytes`): the element
    /// `req.element` (optional when the file has one element), whole or the window
    /// `req.region` (`[rows, cols]` in grid order), its values or, with `req.codes`, the stored
    /// codes of an integer-coded float. Only the tiles the window meets are read.
    ///
    /// With `req.target == Some("volp")` (what `rasterpack convert` sets towards VOLP) the
    /// elements become the levels of one `[levels, rows, cols]` array when they share one
    /// dtype; a region of two axes is then a window of every level, one of three axes also
    /// picks the levels.
    pub fn read(&self, req: &ArrayRequest) -> Result<NdArray> {
        let mut sink = MemorySink::new(req.limits);
        self.stream(req, &mut sink)?;
        sink.finish()?;
        sink.into_array()
    }

    /// The whole element named `name`, values decoded (as [`GvrsFile::read`]).
    pub fn read_element(&self, name: &str) -> Result<NdArray> {
        self.read(&ArrayRequest::for_element(name))
    }

    /// Stream what `req` asks for (see [`GvrsFile::read`]) into `sink`, following the protocol
    /// of [`rasterpack_common::stream`]: `begin`, then every byte once; the caller calls
    /// `finish`. Memory stays within `req.limits.working_set` (bands of tile rows decoded in
    /// parallel, two groups in flight); a sink that is not random-access is refused with
    /// `limit.working_set` before anything is decoded when one band of the window cannot fit.
    /// Untouched tiles arrive as [`ArraySink::fill_at`] runs of the fill value.
    pub fn stream(&self, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        req.check_honoured(&crate::GvrsFormat)?;
        self.stream_selection(req, sink)
    }

    /// Attributes carried with an element's array into other formats.
    pub fn element_attrs(&self, element: usize) -> Map<String, Value> {
        let mut m = Map::new();
        if let Some(Value::Object(o)) = self.elements.get(element).map(|e| e.to_json(element)) {
            m = o;
        }
        m.insert("source_format".into(), json!("gvrs"));
        m
    }

    /// Every metadata record the directory lists, in directory order (errors per record). CRCs
    /// are verified (checksums on): a damaged record is an error, never content.
    pub fn metadata(&self) -> Result<Vec<Result<MetadataRecord>>> {
        let Some(dir) = self.metadata_directory()? else {
            return Ok(Vec::new());
        };
        Ok(dir
            .entries
            .iter()
            .map(|e| self.read_metadata_record(e.content_offset, e.offset))
            .collect())
    }

    /// The metadata directory, its CRC verified (checksums on).
    pub fn metadata_directory(&self) -> Result<Option<MetadataDirectory>> {
        self.metadata_directory_with(self.checksums())
    }

    /// The metadata directory as stored, CRC not checked (`validate` reports it as a finding).
    pub fn metadata_directory_unverified(&self) -> Result<Option<MetadataDirectory>> {
        self.metadata_directory_with(false)
    }

    fn metadata_directory_with(&self, verify: bool) -> Result<Option<MetadataDirectory>> {
        let off = self.header.offset_metadata_directory;
        if off == 0 {
            return Ok(None);
        }
        let start = parse::record_start_of(off, 64, "metadata directory")?;
        let (rec, bytes) = parse::read_record(
            &self.input,
            start,
            RecordType::MetadataDirectory,
            self.limits.max_text,
            &self.limits,
        )?;
        if verify {
            verify_crc(&bytes, start, RecordType::MetadataDirectory)?;
        }
        parse::parse_metadata_directory(rec, &bytes, &self.limits).map(Some)
    }

    /// A metadata record, its CRC verified (checksums on).
    pub fn read_metadata_record(&self, content_offset: i64, field: u64) -> Result<MetadataRecord> {
        self.read_metadata_record_with(content_offset, field, self.checksums())
    }

    /// A metadata record as stored, CRC not checked (`validate` reports it as a finding).
    pub fn read_metadata_record_unverified(&self, content_offset: i64, field: u64) -> Result<MetadataRecord> {
        self.read_metadata_record_with(content_offset, field, false)
    }

    fn read_metadata_record_with(&self, content_offset: i64, field: u64, verify: bool) -> Result<MetadataRecord> {
        let start = parse::record_start_of(content_offset, field, "metadata record")?;
        let (rec, bytes) = parse::read_record(
            &self.input,
            start,
            RecordType::Metadata,
            self.limits.max_text,
            &self.limits,
        )?;
        if verify {
            verify_crc(&bytes, start, RecordType::Metadata)?;
        }
        parse::parse_metadata_record(rec, &bytes)
    }

    /// The file-space directory, its CRC verified (checksums on).
    pub fn file_space_directory(&self) -> Result<Option<FileSpaceDirectory>> {
        self.file_space_directory_with(self.checksums())
    }

    /// The file-space directory as stored, CRC not checked (`validate` reports it).
    pub fn file_space_directory_unverified(&self) -> Result<Option<FileSpaceDirectory>> {
        self.file_space_directory_with(false)
    }

    fn file_space_directory_with(&self, verify: bool) -> Result<Option<FileSpaceDirectory>> {
        let off = self.header.offset_file_space_directory;
        if off == 0 {
            return Ok(None);
        }
        let start = parse::record_start_of(off, 56, "file-space directory")?;
        let (rec, bytes) = parse::read_record(
            &self.input,
            start,
            RecordType::FileSpaceDirectory,
            self.limits.max_text,
            &self.limits,
        )?;
        if verify {
            verify_crc(&bytes, start, RecordType::FileSpaceDirectory)?;
        }
        parse::parse_file_space_directory(rec, &bytes, &self.limits).map(Some)
    }

    /// The UUID in canonical text (stored as two LE i64, least-significant half first).
    pub fn uuid(&self) -> String {
        uuid_text(&self.header.uuid_bytes)
    }

    /// Model coordinates (x, y) of a grid position (row, column), through the R2M transform.
    pub fn grid_to_model(&self, row: f64, col: f64) -> (f64, f64) {
        let t = &self.header.r2m;
        (t[0] * col + t[1] * row + t[2], t[3] * col + t[4] * row + t[5])
    }

    /// Grid position (row, column) of model coordinates (x, y), through the M2R transform.
    pub fn model_to_grid(&self, x: f64, y: f64) -> (f64, f64) {
        let t = &self.header.m2r;
        (t[3] * x + t[4] * y + t[5], t[0] * x + t[1] * y + t[2])
    }
}

/// Compare a record's stored CRC32C (its last 4 bytes) with the one computed over every byte
/// before it (`bytes` = the whole record, starting at absolute offset `start`).
fn verify_crc(bytes: &[u8], start: u64, kind: RecordType) -> Result<()> {
    let (stored, computed) = parse::record_crc(bytes);
    if stored == computed {
        return Ok(());
    }
    Err(Error::invalid(
        format!("gvrs.{}.crc_mismatch", kind.area()),
        start + bytes.len().saturating_sub(4) as u64,
        format!(
            "CRC32C of the {} at {start} is 0x{computed:08x}, stored 0x{stored:08x}: the record is damaged",
            kind.name()
        ),
    ))
}

/// Canonical UUID text of the stored bytes.
pub fn uuid_text(stored: &[u8; 16]) -> String {
    let mut b = *stored;
    b.reverse();
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Decode a metadata record's content the way Gridfour's API does.
pub fn metadata_value(data_type: u8, content: &[u8]) -> Value {
    let le4 = |c: &[u8]| [c[0], c[1], c[2], c[3]];
    match data_type {
        1 => json!(content.iter().map(|&b| b as i8).collect::<Vec<_>>()),
        2 | 3 => {
            let n = content.len() / 4;
            let vals: Vec<Value> = content
                .chunks_exact(2)
                .take(n)
                .map(|c| {
                    if data_type == 2 {
                        json!(i16::from_le_bytes([c[0], c[1]]))
                    } else {
                        json!(u16::from_le_bytes([c[0], c[1]]))
                    }
                })
                .collect();
            Value::Array(vals)
        }
        4 => json!(content
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(le4(c)))
            .collect::<Vec<_>>()),
        5 => json!(content
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(le4(c)))
            .collect::<Vec<_>>()),
        6 => Value::Array(
            content
                .chunks_exact(4)
                .map(|c| rasterpack_common::json::f64_value(f32::from_le_bytes(le4(c)) as f64))
                .collect(),
        ),
        7 => Value::Array(
            content
                .chunks_exact(8)
                .map(|c| {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(c);
                    rasterpack_common::json::f64_value(f64::from_le_bytes(b))
                })
                .collect(),
        ),
        8 | 9 => match metadata_text(content) {
            Some(s) => json!(s),
            None => Value::Null,
        },
        _ => Value::Null,
    }
}

/// STRING / ASCII content: i32 byte count, then the bytes (lossy UTF-8). `None` when the count
/// does not fit the content.
pub fn metadata_text(content: &[u8]) -> Option<String> {
    if content.len() < 4 {
        return None;
    }
    let n = i32::from_le_bytes([content[0], content[1], content[2], content[3]]);
    if n < 0 || n as usize > content.len() - 4 {
        return None;
    }
    Some(String::from_utf8_lossy(&content[4..4 + n as usize]).into_owned())
}

impl ArrayFile for GvrsFile {
    fn format_name(&self) -> &'static str {
        "gvrs"
    }

    fn arrays(&self) -> Result<Vec<ArrayInfo>> {
        GvrsFile::arrays(self)
    }

    fn validate(&self) -> Report {
        GvrsFile::validate(self)
    }

    /// Every element is cut into the same tiles.
    fn chunk_shape(&self, element: Option<&str>) -> Option<Vec<u64>> {
        element.and_then(|e| self.element_index(e))?;
        let g = &self.geometry;
        Some(vec![u64::from(g.tile_rows), u64::from(g.tile_cols)])
    }

    fn stream(&self, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        GvrsFile::stream(self, req, sink)
    }
}

// The reader API every format shares (no trait import needed).
rasterpack_common::reader_api!(GvrsFile, crate::GvrsFormat);
