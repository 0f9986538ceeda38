//! GVRS 1.4 writer: files Gridfour reads, laid out as Gridfour lays them out.
//!
//! File layout written here (records reached only through the header's directory references,
//! so their order is free): identification, header record, metadata records, metadata
//! directory, tile records (in tile order), tile directory. Every record is a multiple of 8
//! bytes and starts at a multiple of 8; its CRC32C (or 0 with checksums off) is its last 4
//! bytes. A finished file's time-opened-for-writing is 0 (closed) and no file-space directory
//! is needed (the file has no free space). Tiles whose cells all equal the fill value (bitwise
//! for floats) are not stored. Each element of a tile is stored compressed only when the block
//! is strictly smaller than the uncompressed one, so a reader can tell them apart by length.
//!
//! [`GvrsWriter`] writes one array as its rows arrive, a group of tile rows at a time (tiles
//! encoded in parallel with rayon); on a file, tiles go out as they are encoded and the header
//! (marked opened for writing until then) and tile directory at the end. [`to_bytes`] and
//! [`write_gvrs`] write several elements from values held in memory, in the same layout.

use std::fs::File;
use std::io::Write;
use std::ops::Range;

use rasterpack_common::output::write_all_at;
use rasterpack_common::stream::SequentialCursor;
use rasterpack_common::{ArrayInfo, ArraySink, DType, Error, Limits, NdArray, Output, Result, WriteOptions};
use rayon::prelude::*;

use crate::codec::{self, Codec, EncodeOptions};

/// Record type codes (the type byte of every record).
const REC_METADATA: u8 = 1;
const REC_TILE: u8 = 2;
const REC_METADATA_DIRECTORY: u8 = 4;
const REC_TILE_DIRECTORY: u8 = 5;
const REC_HEADER: u8 = 6;

/// Gridfour's classic default codec list (GVRS 1.4 as Gridfour e2e5824 writes and reads it):
/// rasterpack's default, so that every Gridfour reader opens its files.
pub const DEFAULT_CODECS: [Codec; 3] = [Codec::Huffman, Codec::Deflate, Codec::Float];

/// Gridfour master's (2026) default codec list: the classic one plus GvrsCanonicalHuffman
/// (files that use it need Gridfour 2026 to be read).
pub const MASTER_DEFAULT_CODECS: [Codec; 4] = [Codec::Huffman, Codec::Deflate, Codec::Float, Codec::CanonicalHuffman];

/// Whether a file with codec list `codecs` reads correctly in Gridfour without its
/// `GvrsJavaCodecs` records: Gridfour then maps each tile's codec index through its own default
/// list, so the list must agree with it index by index (a prefix of the classic list, which
/// both Gridfour e2e5824 and 2026 start with).
pub fn readable_without_java_codecs(codecs: &[Codec]) -> bool {
    codecs.len() <= DEFAULT_CODECS.len() && codecs == &DEFAULT_CODECS[..codecs.len()]
}

/// The writer describes elements with the reader's on-disk range type, so the two cannot drift.
pub use crate::raw::ElementRange;

/// Writer defaults per element type.
impl ElementRange {
    fn type_code(&self) -> u8 {
        match self {
            ElementRange::Integer { .. } => 0,
            ElementRange::IntCodedFloat { .. } => 1,
            ElementRange::Float { .. } => 2,
            ElementRange::Short { .. } => 3,
        }
    }

    /// Gridfour's defaults for an Integer element: full range, fill = i32::MIN.
    pub fn integer() -> Self {
        ElementRange::Integer {
            min: i32::MIN + 1,
            max: i32::MAX,
            fill: i32::MIN,
        }
    }
    /// Gridfour's defaults for a Short element: full range, fill = i16::MIN.
    pub fn short() -> Self {
        ElementRange::Short {
            min: i16::MIN + 1,
            max: i16::MAX,
            fill: i16::MIN,
        }
    }
    /// Gridfour's defaults for a Float element: any value, fill = NaN.
    pub fn float() -> Self {
        ElementRange::Float {
            min: f32::NEG_INFINITY,
            max: f32::INFINITY,
            fill: f32::NAN,
        }
    }
    /// An integer-coded float with `scale` and `offset`; fill NaN coded as `i32::MIN`.
    pub fn int_coded_float(scale: f32, offset: f32) -> Self {
        let min_int = i32::MIN + 1;
        let max_int = i32::MAX;
        ElementRange::IntCodedFloat {
            min: min_int as f32 / scale + offset,
            max: max_int as f32 / scale + offset,
            fill: f32::NAN,
            scale,
            offset,
            min_int,
            max_int,
            fill_int: i32::MIN,
        }
    }
}

/// One element (a value per cell) of the raster.
#[derive(Debug, Clone, PartialEq)]
pub struct ElementSpec {
    /// Identifier: ASCII letter first, then letters, digits or `_`; at most 32 characters.
    pub name: String,
    /// Type, range and fill value (see the [`ElementRange`] constructors for Gridfour's
    /// defaults).
    pub kind: ElementRange,
    /// Values vary smoothly and may be interpolated (default true).
    pub continuous: bool,
    /// Short label for people.
    pub label: String,
    /// Longer description.
    pub description: String,
    /// Unit of measure.
    pub unit: String,
}

impl ElementSpec {
    /// An element named `name` (continuous, no texts).
    pub fn new(name: &str, kind: ElementRange) -> Self {
        ElementSpec {
            name: name.to_string(),
            kind,
            continuous: true,
            label: String::new(),
            description: String::new(),
            unit: String::new(),
        }
    }
}

/// Model coordinates of the grid: the centres of cell (0, 0) and of the last row/column.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Coordinates {
    /// Raster coordinates only (Gridfour stores x0 = y0 = 0, x1 = cols - 1, y1 = rows - 1).
    Unspecified,
    /// Cartesian coordinates of the first and last cell centres.
    Cartesian {
        /// x of cell (0, 0).
        x0: f64,
        /// y of cell (0, 0).
        y0: f64,
        /// x of the last column.
        x1: f64,
        /// y of the last row.
        y1: f64,
    },
    /// Geographic coordinates (degrees) of the first and last cell centres.
    Geographic {
        /// Longitude of cell (0, 0).
        lon0: f64,
        /// Latitude of cell (0, 0).
        lat0: f64,
        /// Longitude of the last column.
        lon1: f64,
        /// Latitude of the last row.
        lat1: f64,
    },
    /// Cartesian from the first cell centre and the cell spacing (x1 = x0 + dx * (cols - 1)).
    CartesianSpacing {
        /// x of cell (0, 0).
        x0: f64,
        /// y of cell (0, 0).
        y0: f64,
        /// Spacing along x (per column).
        dx: f64,
        /// Spacing along y (per row).
        dy: f64,
    },
    /// Geographic from the first cell centre and the cell spacing in degrees.
    GeographicSpacing {
        /// Longitude of cell (0, 0).
        lon0: f64,
        /// Latitude of cell (0, 0).
        lat0: f64,
        /// Spacing in longitude (per column).
        dlon: f64,
        /// Spacing in latitude (per row).
        dlat: f64,
    },
}

/// Raster space code (header byte 129).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RasterSpace {
    /// Not said.
    Unspecified = 0,
    /// A cell's value is the value at its centre point.
    Point = 1,
    /// A cell's value stands for its whole area.
    Area = 2,
}

/// Metadata content types (the type byte of a metadata record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataType {
    /// Bytes of no declared type.
    Unspecified = 0,
    /// Signed bytes.
    Byte = 1,
    /// i16 values, 4 bytes each as Gridfour stores them (the values, then zeros).
    Short = 2,
    /// u16 values, stored like `Short`.
    UnsignedShort = 3,
    /// i32 values.
    Integer = 4,
    /// u32 values.
    UnsignedInteger = 5,
    /// f32 values.
    Float = 6,
    /// f64 values.
    Double = 7,
    /// UTF-8 text: i32 byte count, then the bytes.
    String = 8,
    /// ASCII text, stored like `String`.
    Ascii = 9,
}

/// A metadata record. Use the constructors for Gridfour's content layouts.
#[derive(Debug, Clone, PartialEq)]
pub struct Metadata {
    /// The record's name (an identifier).
    pub name: String,
    /// The record's id (records may share a name, not a name and an id).
    pub record_id: i32,
    /// The content's type.
    pub kind: MetadataType,
    /// Content bytes exactly as stored.
    pub content: Vec<u8>,
    /// Description for people.
    pub description: String,
}

impl Metadata {
    /// STRING (UTF-8) or ASCII: i32 byte count, then the bytes (Gridfour's layout).
    pub fn text(name: &str, record_id: i32, text: &str, ascii: bool) -> Self {
        let mut content = (text.len() as i32).to_le_bytes().to_vec();
        content.extend_from_slice(text.as_bytes());
        let kind = if ascii {
            MetadataType::Ascii
        } else {
            MetadataType::String
        };
        Metadata {
            name: name.into(),
            record_id,
            kind,
            content,
            description: String::new(),
        }
    }
    /// INTEGER: i32 values.
    pub fn integers(name: &str, record_id: i32, values: &[i32]) -> Self {
        let content = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Metadata {
            name: name.into(),
            record_id,
            kind: MetadataType::Integer,
            content,
            description: String::new(),
        }
    }
    /// DOUBLE: f64 values.
    pub fn doubles(name: &str, record_id: i32, values: &[f64]) -> Self {
        let content = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Metadata {
            name: name.into(),
            record_id,
            kind: MetadataType::Double,
            content,
            description: String::new(),
        }
    }
    /// SHORT: Gridfour stores 4 bytes per value (the n shorts, then 2n zero bytes).
    pub fn shorts(name: &str, record_id: i32, values: &[i16]) -> Self {
        let mut content: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        content.resize(values.len() * 4, 0);
        Metadata {
            name: name.into(),
            record_id,
            kind: MetadataType::Short,
            content,
            description: String::new(),
        }
    }
    /// The same record with a description.
    pub fn with_description(mut self, d: &str) -> Self {
        self.description = d.into();
        self
    }
}

/// Everything about a file except the cell values.
#[derive(Debug, Clone, PartialEq)]
pub struct GvrsSpec {
    /// Rows of the grid (1 to i32::MAX).
    pub rows: u32,
    /// Columns of the grid (1 to i32::MAX).
    pub cols: u32,
    /// Rows of a tile (at most `rows`).
    pub tile_rows: u32,
    /// Columns of a tile (at most `cols`).
    pub tile_cols: u32,
    /// The elements, in order (at least one, names unique).
    pub elements: Vec<ElementSpec>,
    /// The header's codec list; empty = compression off. Block byte 0 indexes this list.
    /// With LSOP12 listed, integer tiles of at least 6 x 6 may be stored as LSOP12.
    pub codecs: Vec<Codec>,
    /// End every record with its CRC32C (default true).
    pub checksums: bool,
    /// What a cell's value stands for.
    pub raster_space: RasterSpace,
    /// Model coordinates of the grid.
    pub coordinates: Coordinates,
    /// Product label for people.
    pub product_label: String,
    /// Metadata records.
    pub metadata: Vec<Metadata>,
    /// Write Gridfour's `GvrsJavaCodecs` / `GvrsCompressionCodecs` ASCII records (for the codec
    /// list, or Gridfour's default list when compression is off), as Gridfour itself does. They
    /// may be left out only when the codec list is a prefix of [`DEFAULT_CODECS`]: without them
    /// Gridfour maps codec indexes through its own default list (`write` refuses otherwise).
    pub java_codec_records: bool,
    /// The 16 UUID bytes as stored (two LE i64, least-significant half first); `None` = random v4.
    pub uuid: Option<[u8; 16]>,
    /// Time modified, ms since 1970; `None` = now.
    pub time_modified_ms: Option<i64>,
    /// Encoder settings (default [`EncodeOptions::fast`]).
    pub encode: EncodeOptions,
}

impl GvrsSpec {
    /// A one-element raster with Gridfour's defaults (default codec list, checksums on).
    pub fn new(rows: u32, cols: u32, tile_rows: u32, tile_cols: u32, element: ElementSpec) -> Self {
        GvrsSpec {
            rows,
            cols,
            tile_rows,
            tile_cols,
            elements: vec![element],
            codecs: DEFAULT_CODECS.to_vec(),
            checksums: true,
            raster_space: RasterSpace::Unspecified,
            coordinates: Coordinates::Unspecified,
            product_label: String::new(),
            metadata: Vec::new(),
            java_codec_records: true,
            uuid: None,
            time_modified_ms: None,
            encode: EncodeOptions::fast(),
        }
    }
}

/// The cell values of one element, `rows * cols` in row-major order.
#[derive(Debug, Clone, Copy)]
pub enum ElementValues<'a> {
    /// Values of an Integer element.
    Int(&'a [i32]),
    /// Values of a Short element.
    Short(&'a [i16]),
    /// Values of a Float element.
    Float(&'a [f32]),
    /// Integer-coded float given as the stored integer codes.
    Codes(&'a [i32]),
    /// Integer-coded float given as values, coded with Gridfour's rounding.
    IcfValues(&'a [f32]),
}

/// Gridfour's integer coding of a float: `(v - offset) * scale` in f32, + 0.5 and floor in f64,
/// saturating cast; the fill value (NaN matches NaN) codes to `fill_int`.
pub fn icf_encode(v: f32, scale: f32, offset: f32, fill: f32, fill_int: i32) -> i32 {
    if v == fill || (v.is_nan() && fill.is_nan()) {
        return fill_int;
    }
    let s = (v - offset) * scale;
    (f64::from(s) + 0.5).floor() as i32
}

/// Gridfour's decoding of an integer code.
pub fn icf_decode(code: i32, scale: f32, offset: f32, fill: f32, fill_int: i32) -> f32 {
    if code == fill_int {
        fill
    } else {
        code as f32 / scale + offset
    }
}

fn usage(msg: impl Into<String>) -> Error {
    Error::usage(msg)
}

fn check_identifier(name: &str, what: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name.as_bytes()[0].is_ascii_alphabetic()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(usage(format!(
            "{what} {name:?} is not a GVRS identifier (ASCII letter, then letters, digits or '_', at most 32)"
        )))
    }
}

/// Little-endian byte builder with GVRS strings.
struct Buf(Vec<u8>);

impl Buf {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn i16(&mut self, v: i16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn f32(&mut self, v: f32) {
        self.0.extend_from_slice(&v.to_bits().to_le_bytes());
    }
    fn f64(&mut self, v: f64) {
        self.0.extend_from_slice(&v.to_bits().to_le_bytes());
    }
    fn zeros(&mut self, n: usize) {
        self.0.resize(self.0.len() + n, 0);
    }
    /// u16 byte count + UTF-8 bytes.
    fn string(&mut self, s: &str) -> Result<()> {
        let n =
            u16::try_from(s.len()).map_err(|_| usage(format!("string of {} bytes is longer than 65535", s.len())))?;
        self.0.extend_from_slice(&n.to_le_bytes());
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
    /// Zero padding until `base + len` is a multiple of `m` (a power of two; absolute file
    /// alignment).
    fn align(&mut self, base: usize, m: usize) {
        while (base + self.0.len()) & (m - 1) != 0 {
            self.0.push(0);
        }
    }
}

/// Frame a record: `[length][type][0 0 0] content [padding] [CRC]`, length a multiple of 8.
fn record(kind: u8, content: &[u8], checksums: bool) -> Result<Vec<u8>> {
    let len = (8 + content.len() + 4).div_ceil(8) * 8;
    let len32 =
        i32::try_from(len).map_err(|_| usage(format!("a record of {len} bytes exceeds the i32 record length")))?;
    let mut r = Vec::with_capacity(len);
    r.extend_from_slice(&len32.to_le_bytes());
    r.extend_from_slice(&[kind, 0, 0, 0]);
    r.extend_from_slice(content);
    r.resize(len - 4, 0);
    let crc = if checksums { crc32c::crc32c(&r) } else { 0 };
    r.extend_from_slice(&crc.to_le_bytes());
    Ok(r)
}

fn random_uuid() -> [u8; 16] {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut canonical = [0u8; 16];
    for (i, chunk) in canonical.chunks_mut(8).enumerate() {
        let mut h = RandomState::new().build_hasher();
        h.write_usize(i);
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    canonical[6] = (canonical[6] & 0x0F) | 0x40;
    canonical[8] = (canonical[8] & 0x3F) | 0x80;
    // Stored as two little-endian i64, least-significant half first = canonical bytes reversed.
    canonical.reverse();
    canonical
}

fn java_codec_text(codecs: &[Codec]) -> (String, String) {
    let mut java = String::new();
    for c in codecs {
        let (enc, dec) = match c {
            Codec::Huffman => (
                "org.gridfour.compress.CodecHuffman",
                "org.gridfour.compress.CodecHuffman",
            ),
            Codec::Deflate => (
                "org.gridfour.compress.CodecDeflate",
                "org.gridfour.compress.CodecDeflate",
            ),
            Codec::Float => ("org.gridfour.compress.CodecFloat", "org.gridfour.compress.CodecFloat"),
            Codec::Lsop12 => ("org.gridfour.lsop.LsEncoder12", "org.gridfour.lsop.LsDecoder12"),
            Codec::CanonicalHuffman => (
                "org.gridfour.compress.canonicalHuffman.CodecCanonHuffman",
                "org.gridfour.compress.canonicalHuffman.CodecCanonHuffman",
            ),
        };
        java.push_str(&format!("{},{enc},{dec}\n", c.name()));
    }
    let names: Vec<&str> = codecs.iter().map(|c| c.name()).collect();
    (java, names.join("|"))
}

/// The header record (starting at file offset 16) with the given directory offsets;
/// `opened_ms` is the time-opened-for-writing field (0 for a closed file).
fn header_record(
    spec: &GvrsSpec,
    uuid: &[u8; 16],
    time_ms: i64,
    opened_ms: i64,
    metadata_dir: i64,
    tile_dir: i64,
) -> Result<Vec<u8>> {
    let mut b = Buf(Vec::with_capacity(512));
    // Offsets below are absolute; the buffer starts at 16.
    b.i32(0); // 16 length, patched
    b.u8(REC_HEADER);
    b.zeros(3);
    b.0.extend_from_slice(uuid); // 24
    b.i64(time_ms); // 40
    b.i64(opened_ms); // 48 time opened for writing: 0 = closed
    b.i64(0); // 56 file-space directory: none
    b.i64(metadata_dir); // 64
    b.i16(1); // 72 number of levels
    b.zeros(6); // 74..80
    b.i64(tile_dir); // 80
    b.zeros(16); // 88..104
    b.i32(spec.rows as i32); // 104
    b.i32(spec.cols as i32);
    b.i32(spec.tile_rows as i32);
    b.i32(spec.tile_cols as i32);
    b.zeros(8); // 120..128
    b.u8(u8::from(spec.checksums)); // 128
    b.u8(spec.raster_space as u8);
    let (nc, nr) = (f64::from(spec.cols) - 1.0, f64::from(spec.rows) - 1.0);
    let span = |a: f64, b: f64, n: f64| if n > 0.0 { (b - a) / n } else { 1.0 };
    let (cs, x0, y0, x1, y1, cx, cy) = match spec.coordinates {
        Coordinates::Unspecified => (0u8, 0.0, 0.0, nc, nr, 1.0, 1.0),
        Coordinates::Cartesian { x0, y0, x1, y1 } => (1, x0, y0, x1, y1, span(x0, x1, nc), span(y0, y1, nr)),
        Coordinates::Geographic { lon0, lat0, lon1, lat1 } => {
            (2, lon0, lat0, lon1, lat1, span(lon0, lon1, nc), span(lat0, lat1, nr))
        }
        Coordinates::CartesianSpacing { x0, y0, dx, dy } => (1, x0, y0, x0 + dx * nc, y0 + dy * nr, dx, dy),
        Coordinates::GeographicSpacing { lon0, lat0, dlon, dlat } => {
            (2, lon0, lat0, lon0 + dlon * nc, lat0 + dlat * nr, dlon, dlat)
        }
    };
    b.u8(cs); // 130
    b.zeros(5); // 131..136
    for v in [x0, y0, x1, y1, cx, cy] {
        b.f64(v); // 136..184
    }
    // Model -> raster: col = (x - x0) / cx, row = (y - y0) / cy. Raster -> model is that
    // matrix inverted, as Gridfour computes it (so R2M02 may differ from x0 in the last bit).
    let m2r = [1.0 / cx, 0.0, -x0 / cx, 0.0, 1.0 / cy, -y0 / cy];
    for v in m2r {
        b.f64(v); // 184..232
    }
    for v in [cx, 0.0, -m2r[2] / m2r[0], 0.0, cy, -m2r[5] / m2r[4]] {
        b.f64(v); // 232..280
    }
    b.i32(spec.elements.len() as i32); // 280
    for e in &spec.elements {
        b.u8(e.kind.type_code());
        b.u8(u8::from(e.continuous));
        b.zeros(6);
        b.string(&e.name)?;
        match e.kind {
            ElementRange::Integer { min, max, fill } => {
                b.align(16, 4);
                b.i32(min);
                b.i32(max);
                b.i32(fill);
            }
            ElementRange::Float { min, max, fill } => {
                b.align(16, 4);
                b.f32(min);
                b.f32(max);
                b.f32(fill);
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
                b.align(16, 4);
                for v in [min, max, fill, scale, offset] {
                    b.f32(v);
                }
                b.i32(min_int);
                b.i32(max_int);
                b.i32(fill_int);
            }
            // Short ranges are aligned too, but the label follows them immediately.
            ElementRange::Short { min, max, fill } => {
                b.align(16, 4);
                b.i16(min);
                b.i16(max);
                b.i16(fill);
            }
        }
        b.string(&e.label)?;
        b.string(&e.description)?;
        b.string(&e.unit)?;
        b.align(16, 4);
    }
    b.i32(spec.codecs.len() as i32);
    for c in &spec.codecs {
        b.string(c.name())?;
    }
    b.string(&spec.product_label)?;
    b.zeros(8);
    // Pad so that the length (16 .. CRC end) is a multiple of 8.
    while (b.0.len() + 4) & 7 != 0 {
        b.u8(0);
    }
    let len = b.0.len() + 4;
    b.0[0..4].copy_from_slice(&(len as i32).to_le_bytes());
    let crc = if spec.checksums { crc32c::crc32c(&b.0) } else { 0 };
    b.0.extend_from_slice(&crc.to_le_bytes());
    Ok(b.0)
}

fn metadata_content(m: &Metadata) -> Result<Vec<u8>> {
    let mut b = Buf(Vec::new());
    b.string(&m.name)?;
    b.i32(m.record_id);
    b.u8(m.kind as u8);
    b.zeros(3);
    let n = i32::try_from(m.content.len()).map_err(|_| usage("metadata content too large"))?;
    b.i32(n);
    b.0.extend_from_slice(&m.content);
    b.string(&m.description)?;
    Ok(b.0)
}

/// Per-element storage of one tile's cells (edge tiles padded with fill).
enum TileCells {
    Int(Vec<i32>),
    Short(Vec<i16>),
    Float(Vec<f32>),
}

/// Check everything about `spec` that does not depend on the cell values; the tile's cell count.
fn validate_spec(spec: &GvrsSpec) -> Result<usize> {
    if spec.rows == 0 || spec.cols == 0 || spec.tile_rows == 0 || spec.tile_cols == 0 {
        return Err(usage("rows, columns and tile sizes must be positive"));
    }
    if spec.rows > i32::MAX as u32
        || spec.cols > i32::MAX as u32
        || spec.tile_rows > spec.rows
        || spec.tile_cols > spec.cols
    {
        return Err(usage(format!(
            "tile {}x{} must fit in the {}x{} grid",
            spec.tile_rows, spec.tile_cols, spec.rows, spec.cols
        )));
    }
    let tile_cells = (spec.tile_rows as usize)
        .checked_mul(spec.tile_cols as usize)
        .filter(|&n| n <= (i32::MAX as usize) / 4);
    let tile_cells = tile_cells.ok_or_else(|| usage("tile too large: a block's byte length must fit an i32"))?;
    if spec.elements.is_empty() {
        return Err(usage("a GVRS file needs at least one element"));
    }
    for (i, c) in spec.codecs.iter().enumerate() {
        if spec.codecs[..i].contains(c) {
            return Err(usage(format!("codec {} listed twice", c.name())));
        }
    }
    if spec.codecs.len() > 255 {
        return Err(usage("too many codecs"));
    }
    if !spec.java_codec_records && !readable_without_java_codecs(&spec.codecs) {
        let names: Vec<&str> = spec.codecs.iter().map(|c| c.name()).collect();
        return Err(usage(format!(
            "codec list [{}] without the GvrsJavaCodecs records: Gridfour would map tile codec indexes \
             through its own default list (GvrsHuffman, GvrsDeflate, GvrsFloat) and misread the file; \
             keep java_codec_records on",
            names.join(", ")
        )));
    }
    (spec.rows as usize)
        .checked_mul(spec.cols as usize)
        .ok_or_else(|| usage("grid too large"))?;
    let tiles =
        (spec.rows as usize).div_ceil(spec.tile_rows as usize) * (spec.cols as usize).div_ceil(spec.tile_cols as usize);
    if tiles > i32::MAX as usize {
        return Err(usage("more tiles than a tile index (i32) can number"));
    }
    for (i, e) in spec.elements.iter().enumerate() {
        if spec.elements[..i].iter().any(|x| x.name == e.name) {
            return Err(usage(format!("element name {} used twice", e.name)));
        }
    }
    for (i, m) in spec.metadata.iter().enumerate() {
        let reserved = spec.java_codec_records
            && m.record_id == 0
            && (m.name == "GvrsJavaCodecs" || m.name == "GvrsCompressionCodecs");
        if reserved
            || spec.metadata[..i]
                .iter()
                .any(|x| x.name == m.name && x.record_id == m.record_id)
        {
            return Err(usage(format!(
                "metadata record {} id {} given twice (or clashes with the codec records)",
                m.name, m.record_id
            )));
        }
        // Validation warns about ASCII records holding other bytes: never write one.
        if m.kind == MetadataType::Ascii && !m.content.get(4..).unwrap_or(&[]).is_ascii() {
            return Err(usage(format!(
                "metadata record {} id {} is ASCII but its text is not",
                m.name, m.record_id
            )));
        }
    }
    for e in &spec.elements {
        check_identifier(&e.name, "element name")?;
    }
    for m in &spec.metadata {
        check_identifier(&m.name, "metadata name")?;
    }
    Ok(tile_cells)
}

/// Check that `values` hold `rows` full rows of every element of `spec`, typed as the elements.
fn check_values(spec: &GvrsSpec, values: &[ElementValues], rows: usize) -> Result<()> {
    if spec.elements.len() != values.len() {
        return Err(usage(format!(
            "{} element specs but {} value arrays",
            spec.elements.len(),
            values.len()
        )));
    }
    let cells = rows
        .checked_mul(spec.cols as usize)
        .ok_or_else(|| usage("grid too large"))?;
    for (e, v) in spec.elements.iter().zip(values) {
        let (ok, len) = match (&e.kind, v) {
            (ElementRange::Integer { .. }, ElementValues::Int(x)) => (true, x.len()),
            (ElementRange::Short { .. }, ElementValues::Short(x)) => (true, x.len()),
            (ElementRange::Float { .. }, ElementValues::Float(x)) => (true, x.len()),
            (ElementRange::IntCodedFloat { .. }, ElementValues::Codes(x)) => (true, x.len()),
            (ElementRange::IntCodedFloat { .. }, ElementValues::IcfValues(x)) => (true, x.len()),
            _ => (false, 0),
        };
        if !ok {
            return Err(usage(format!("values for element {} do not match its type", e.name)));
        }
        if len != cells {
            return Err(usage(format!(
                "element {} has {len} values, the grid has {cells} cells",
                e.name
            )));
        }
    }
    Ok(())
}

/// Encode one element of one tile: compressed when strictly smaller, else uncompressed.
fn encode_tile(spec: &GvrsSpec, cells: &TileCells, codecs: &[(u8, Codec)]) -> Vec<u8> {
    let (tr, tc) = (spec.tile_rows as usize, spec.tile_cols as usize);
    match cells {
        TileCells::Int(v) => {
            let raw = v.len() * 4;
            if !codecs.is_empty() {
                if let Some(b) = codec::encode_int_with(v, tr, tc, codecs, &spec.encode).filter(|b| b.len() < raw) {
                    return b;
                }
            }
            v.iter().flat_map(|x| x.to_le_bytes()).collect()
        }
        TileCells::Short(v) => {
            let raw = (v.len() * 2 + 3) & !3;
            if !codecs.is_empty() {
                let wide: Vec<i32> = v.iter().map(|&x| i32::from(x)).collect();
                if let Some(b) = codec::encode_int_with(&wide, tr, tc, codecs, &spec.encode).filter(|b| b.len() < raw) {
                    return b;
                }
            }
            let mut b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            b.resize(raw, 0);
            b
        }
        TileCells::Float(v) => {
            if !codecs.is_empty() {
                if let Some(b) = codec::encode_float_with(v, tr, tc, codecs, &spec.encode) {
                    return b;
                }
            }
            v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect()
        }
    }
}

/// Gather tile `(trow, tcol)` of every element from `values`, which hold grid rows from
/// `first_row` on; `None` when all cells of all elements are fill.
fn gather(
    spec: &GvrsSpec,
    values: &[ElementValues],
    first_row: usize,
    trow: usize,
    tcol: usize,
) -> Option<Vec<TileCells>> {
    let (rows, cols) = (spec.rows as usize, spec.cols as usize);
    let (tr, tc) = (spec.tile_rows as usize, spec.tile_cols as usize);
    let (r0, c0) = (trow * tr, tcol * tc);
    let h = tr.min(rows - r0);
    let rel0 = r0 - first_row;
    let w = tc.min(cols - c0);
    let mut any = false;
    let mut out = Vec::with_capacity(values.len());
    #[allow(clippy::too_many_arguments)]
    fn cut<T: Copy, U: Copy>(
        src: &[T],
        fill: U,
        f: impl Fn(T) -> U,
        rows: (usize, usize),
        cols: (usize, usize),
        grid_cols: usize,
        tc: usize,
        tr: usize,
    ) -> Vec<U> {
        let mut t = vec![fill; tr * tc];
        for r in 0..rows.1 {
            let s = &src[(rows.0 + r) * grid_cols + cols.0..(rows.0 + r) * grid_cols + cols.0 + cols.1];
            for (d, &x) in t[r * tc..r * tc + cols.1].iter_mut().zip(s) {
                *d = f(x);
            }
        }
        t
    }
    for (e, v) in spec.elements.iter().zip(values) {
        let cells = match (&e.kind, v) {
            (ElementRange::Integer { fill, .. }, ElementValues::Int(x)) => {
                let t = cut(x, *fill, |a| a, (rel0, h), (c0, w), cols, tc, tr);
                any |= t.iter().any(|a| a != fill);
                TileCells::Int(t)
            }
            (ElementRange::Short { fill, .. }, ElementValues::Short(x)) => {
                let t = cut(x, *fill, |a| a, (rel0, h), (c0, w), cols, tc, tr);
                any |= t.iter().any(|a| a != fill);
                TileCells::Short(t)
            }
            (ElementRange::Float { fill, .. }, ElementValues::Float(x)) => {
                let t = cut(x, *fill, |a| a, (rel0, h), (c0, w), cols, tc, tr);
                any |= t.iter().any(|a| a.to_bits() != fill.to_bits());
                TileCells::Float(t)
            }
            (ElementRange::IntCodedFloat { fill_int, .. }, ElementValues::Codes(x)) => {
                let t = cut(x, *fill_int, |a| a, (rel0, h), (c0, w), cols, tc, tr);
                any |= t.iter().any(|a| a != fill_int);
                TileCells::Int(t)
            }
            (
                ElementRange::IntCodedFloat {
                    fill,
                    scale,
                    offset,
                    fill_int,
                    ..
                },
                ElementValues::IcfValues(x),
            ) => {
                let (fill, scale, offset, fill_int) = (*fill, *scale, *offset, *fill_int);
                let t = cut(
                    x,
                    fill_int,
                    |a| icf_encode(a, scale, offset, fill, fill_int),
                    (rel0, h),
                    (c0, w),
                    cols,
                    tc,
                    tr,
                );
                any |= t.iter().any(|&a| a != fill_int);
                TileCells::Int(t)
            }
            // validate() rejected mismatches.
            _ => return None,
        };
        out.push(cells);
    }
    any.then_some(out)
}

/// Codecs with their index in the header's list.
type IndexedCodecs = Vec<(u8, Codec)>;

/// The codecs of `spec` for integer elements and for float elements (GvrsFloat only).
fn codec_lists(spec: &GvrsSpec) -> (IndexedCodecs, IndexedCodecs) {
    let indexed = spec.codecs.iter().enumerate().map(|(i, c)| (i as u8, *c));
    let int = indexed.clone().filter(|(_, c)| c.is_integer()).collect();
    let float = indexed.filter(|(_, c)| *c == Codec::Float).collect();
    (int, float)
}

/// Encode the stored tiles of tile rows `tile_rows` (in parallel): (tile index, tile record
/// content), in tile-index order. `values` hold the grid rows from `first_row` on, at least up
/// to the end of the last tile row (or of the grid).
fn encode_band(
    spec: &GvrsSpec,
    values: &[ElementValues],
    first_row: usize,
    tile_rows: Range<usize>,
) -> Vec<(usize, Vec<u8>)> {
    let grid_cols = (spec.cols as usize).div_ceil(spec.tile_cols as usize);
    let (int_codecs, float_codecs) = codec_lists(spec);
    (tile_rows.start * grid_cols..tile_rows.end * grid_cols)
        .into_par_iter()
        .with_min_len(4)
        .filter_map(|index| {
            let cells = gather(spec, values, first_row, index / grid_cols, index % grid_cols)?;
            let mut content = Vec::new();
            content.extend_from_slice(&(index as i32).to_le_bytes());
            for c in &cells {
                let list = if matches!(c, TileCells::Float(_)) {
                    &float_codecs
                } else {
                    &int_codecs
                };
                let block = encode_tile(spec, c, list);
                content.extend_from_slice(&(block.len() as i32).to_le_bytes());
                content.extend_from_slice(&block);
            }
            Some((index, content))
        })
        .collect()
}

/// Where the records of a file being written go.
enum Records<'a> {
    /// A seekable file: records are written at their position as soon as they are known; the
    /// header is written first (marked opened for writing) and again at the end.
    File(&'a File),
    /// Memory, for a forward-only output: the file's pieces in order (the header, known last,
    /// is piece 0), at most `limit` bytes.
    Memory {
        pieces: Vec<Vec<u8>>,
        held: u64,
        limit: u64,
    },
}

impl Records<'_> {
    /// Put `bytes` at file offset `at` (in memory: after the pieces so far, which end there).
    fn put(&mut self, at: u64, bytes: Vec<u8>) -> Result<()> {
        match self {
            Records::File(file) => write_all_at(file, &bytes, at),
            Records::Memory { pieces, held, limit } => {
                *held += bytes.len() as u64;
                if *held > *limit {
                    return Err(Error::limit(
                        "limit.array",
                        None,
                        format!(
                            "a GVRS file written to a stream is held in memory until its header is known, and this \
                             one passes {limit} bytes: write to a file instead"
                        ),
                    ));
                }
                pieces.push(bytes);
                Ok(())
            }
        }
    }
}

/// A GVRS file being written: identification and header, metadata records and directory, then
/// tile records as they are encoded, then the tile directory; the header is completed last.
struct FileBuilder {
    spec: GvrsSpec,
    uuid: [u8; 16],
    time_ms: i64,
    metadata_dir_offset: u64,
    /// Where the next record starts.
    pos: u64,
    /// Stored tiles: (tile index, compact reference = content offset / 8).
    stored: Vec<(usize, u32)>,
}

impl FileBuilder {
    /// Check `spec` and lay out (and put) everything that precedes the tiles.
    fn start(spec: &GvrsSpec, out: &mut Records) -> Result<FileBuilder> {
        validate_spec(spec)?;
        let uuid = spec.uuid.unwrap_or_else(random_uuid);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        let time_ms = spec.time_modified_ms.unwrap_or(now);
        let metadata = metadata_with_codec_records(spec);
        let header_len = 16 + header_record(spec, &uuid, time_ms, 0, 0, 0)?.len() as u64;
        let mut pos = header_len;
        let mut records = Vec::with_capacity(metadata.len() + 1);
        let mut dir = Buf(Vec::new());
        dir.i32(metadata.len() as i32);
        for m in &metadata {
            let r = record(REC_METADATA, &metadata_content(m)?, spec.checksums)?;
            dir.i64((pos + 8) as i64);
            dir.string(&m.name)?;
            dir.i32(m.record_id);
            dir.u8(m.kind as u8);
            pos += r.len() as u64;
            records.push(r);
        }
        let dir = record(REC_METADATA_DIRECTORY, &dir.0, spec.checksums)?;
        let metadata_dir_offset = pos + 8;
        pos += dir.len() as u64;
        records.push(dir);
        let builder = FileBuilder {
            spec: spec.clone(),
            uuid,
            time_ms,
            metadata_dir_offset,
            pos,
            stored: Vec::new(),
        };
        // On a file, the header goes first, marked opened for writing until `finish`.
        let head = match out {
            Records::File(_) => builder.head(now.max(1), 0)?,
            Records::Memory { .. } => Vec::new(),
        };
        out.put(0, head)?;
        let mut at = header_len;
        for r in records {
            let n = r.len() as u64;
            out.put(at, r)?;
            at += n;
        }
        Ok(builder)
    }

    /// Identification block and header record.
    fn head(&self, opened_ms: i64, tile_dir: u64) -> Result<Vec<u8>> {
        let mut head = b"gvrs raster\0\x01\x04\0\0".to_vec();
        head.extend_from_slice(&header_record(
            &self.spec,
            &self.uuid,
            self.time_ms,
            opened_ms,
            self.metadata_dir_offset as i64,
            tile_dir as i64,
        )?);
        Ok(head)
    }

    /// Frame encoded tiles (in tile-index order) as records and put them, in one piece.
    fn add_tiles(&mut self, tiles: Vec<(usize, Vec<u8>)>, out: &mut Records) -> Result<()> {
        let start = self.pos;
        let mut piece = Vec::new();
        for (index, content) in tiles {
            let r = record(REC_TILE, &content, self.spec.checksums)?;
            let compact = (self.pos + 8) / 8;
            let compact = u32::try_from(compact).map_err(|_| {
                Error::unsupported(
                    "gvrs.write.too_large",
                    None,
                    "files beyond 32 GiB (standard tile references) are not written",
                )
            })?;
            self.stored.push((index, compact));
            self.pos += r.len() as u64;
            piece.extend_from_slice(&r);
        }
        if !piece.is_empty() {
            out.put(start, piece)?;
        }
        Ok(())
    }

    /// Put the tile directory (the smallest window holding every stored tile) and the final
    /// header (closed, with the directory's offset).
    fn finish(self, out: &mut Records) -> Result<()> {
        let grid_cols = (self.spec.cols as usize).div_ceil(self.spec.tile_cols as usize);
        let (mut rmin, mut rmax, mut cmin, mut cmax) = (usize::MAX, 0, usize::MAX, 0);
        for &(index, _) in &self.stored {
            let (r, c) = (index / grid_cols, index % grid_cols);
            rmin = rmin.min(r);
            rmax = rmax.max(r);
            cmin = cmin.min(c);
            cmax = cmax.max(c);
        }
        let (row0, col0, n_rows, n_cols) = if self.stored.is_empty() {
            (0, 0, 0, 0)
        } else {
            (rmin, cmin, rmax - rmin + 1, cmax - cmin + 1)
        };
        let mut entries = vec![0u32; n_rows * n_cols];
        for &(index, compact) in &self.stored {
            entries[(index / grid_cols - row0) * n_cols + index % grid_cols - col0] = compact;
        }
        let mut dir = Buf(Vec::with_capacity(24 + 4 * entries.len()));
        dir.u8(0); // format
        dir.u8(0); // compact references
        dir.zeros(6);
        dir.i32(row0 as i32);
        dir.i32(col0 as i32);
        dir.i32(n_rows as i32);
        dir.i32(n_cols as i32);
        for e in &entries {
            dir.0.extend_from_slice(&e.to_le_bytes());
        }
        drop(entries);
        let tile_dir = record(REC_TILE_DIRECTORY, &dir.0, self.spec.checksums)?;
        let tile_dir_offset = self.pos + 8;
        out.put(self.pos, tile_dir)?;
        let head = self.head(0, tile_dir_offset)?;
        match out {
            Records::File(file) => write_all_at(file, &head, 0),
            Records::Memory { pieces, .. } => {
                pieces[0] = head;
                Ok(())
            }
        }
    }
}

/// The metadata records a file gets: Gridfour's two codec records first (when asked for),
/// then the spec's.
fn metadata_with_codec_records(spec: &GvrsSpec) -> Vec<Metadata> {
    let mut metadata = spec.metadata.clone();
    if spec.java_codec_records {
        let list: &[Codec] = if spec.codecs.is_empty() {
            &DEFAULT_CODECS
        } else {
            &spec.codecs
        };
        let (java, names) = java_codec_text(list);
        metadata.insert(
            0,
            Metadata::text("GvrsJavaCodecs", 0, &java, true).with_description("Class paths for Java compressors"),
        );
        metadata.insert(
            1,
            Metadata::text("GvrsCompressionCodecs", 0, &names, true).with_description("Compession codecs"),
        );
    }
    metadata
}

/// The whole file as consecutive pieces, from values of every element held in memory.
fn assemble(spec: &GvrsSpec, values: &[ElementValues]) -> Result<Vec<Vec<u8>>> {
    validate_spec(spec)?;
    check_values(spec, values, spec.rows as usize)?;
    let mut out = Records::Memory {
        pieces: Vec::new(),
        held: 0,
        limit: u64::MAX,
    };
    let mut builder = FileBuilder::start(spec, &mut out)?;
    let grid_rows = (spec.rows as usize).div_ceil(spec.tile_rows as usize);
    builder.add_tiles(encode_band(spec, values, 0, 0..grid_rows), &mut out)?;
    builder.finish(&mut out)?;
    match out {
        Records::Memory { pieces, .. } => Ok(pieces),
        Records::File(_) => Err(usage("internal: an in-memory GVRS file went to a file")),
    }
}

/// Write a complete GVRS file with the elements of `spec`, whose values (every cell of every
/// element, row by row) are in `values`. The file is assembled in memory, then written.
pub fn write_gvrs(spec: &GvrsSpec, values: &[ElementValues], out: &mut dyn Write) -> Result<()> {
    for p in assemble(spec, values)? {
        out.write_all(&p).map_err(|e| Error::io("writing GVRS output", &e))?;
    }
    Ok(())
}

/// Build a complete GVRS file in memory (see [`write_gvrs`]).
pub fn to_bytes(spec: &GvrsSpec, values: &[ElementValues]) -> Result<Vec<u8>> {
    Ok(assemble(spec, values)?.concat())
}

/// Identification block plus header record for `spec` (directory offsets 0): what [`to_bytes`]
/// writes before the first record, useful to compare headers with other writers'.
pub fn header_bytes(spec: &GvrsSpec) -> Result<Vec<u8>> {
    let uuid = spec.uuid.unwrap_or([0; 16]);
    let mut file = b"gvrs raster\0\x01\x04\0\0".to_vec();
    file.extend_from_slice(&header_record(
        spec,
        &uuid,
        spec.time_modified_ms.unwrap_or(0),
        0,
        0,
        0,
    )?);
    Ok(file)
}

/// Most bytes of values [`GvrsWriter`] encodes in one go (a group of whole tile rows).
const GROUP_BYTES: u64 = 4 << 20;

/// Tile size used by [`write_ndarray`] when `opts.tile` is not given: 128 x 128, clipped to
/// the grid (a small grid is one tile).
pub const DEFAULT_TILE: u32 = 128;

/// The codec list for a `--compress` value: a comma-separated list of presets and codec names,
/// expanded in order (a codec named twice is kept once). Presets: `none` (alone: uncompressed),
/// `default` (GvrsHuffman, GvrsDeflate, GvrsFloat: what every Gridfour reads), `all` (that plus
/// GvrsCanonicalHuffman: Gridfour 2026's default list), `lsop` or `lsop12` (the default list plus
/// LSOP12). Codecs: `huffman`, `deflate`, `float`, `canonical` (GvrsCanonicalHuffman). With
/// `canonical` and LSOP12 both listed (e.g. `all,lsop`), LSOP12 residuals may be canonical
/// Huffman too.
pub fn codecs_for(compress: Option<&str>) -> Result<Vec<Codec>> {
    let Some(text) = compress else {
        return Ok(DEFAULT_CODECS.to_vec());
    };
    let text = text.to_ascii_lowercase();
    if text.trim() == "none" {
        return Ok(Vec::new());
    }
    let mut out: Vec<Codec> = Vec::new();
    for item in text.split(',').map(str::trim) {
        let add: &[Codec] = match item {
            "default" => &DEFAULT_CODECS,
            "all" => &MASTER_DEFAULT_CODECS,
            "lsop" | "lsop12" => &[Codec::Huffman, Codec::Deflate, Codec::Float, Codec::Lsop12],
            "huffman" => &[Codec::Huffman],
            "deflate" => &[Codec::Deflate],
            "float" => &[Codec::Float],
            "canonical" | "canonicalhuffman" => &[Codec::CanonicalHuffman],
            other => {
                return Err(usage(format!(
                    "unknown GVRS compression {other:?}: a comma-separated list of none, default, all, \
                     lsop (presets) and huffman, deflate, float, canonical (codecs)"
                )))
            }
        };
        for c in add {
            if !out.contains(c) {
                out.push(*c);
            }
        }
    }
    Ok(out)
}

/// The codec list of a file being written (the header's list; block byte 0 indexes it). An
/// empty list writes every tile uncompressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GvrsCompression {
    codecs: Vec<Codec>,
}

impl Default for GvrsCompression {
    /// [`GvrsCompression::classic`].
    fn default() -> Self {
        GvrsCompression::classic()
    }
}

impl GvrsCompression {
    /// No compression: every tile stored raw.
    pub fn none() -> Self {
        GvrsCompression { codecs: Vec::new() }
    }

    /// Gridfour's classic list (GvrsHuffman, GvrsDeflate, GvrsFloat): what every Gridfour
    /// version reads, and rasterpack's default.
    pub fn classic() -> Self {
        GvrsCompression {
            codecs: DEFAULT_CODECS.to_vec(),
        }
    }

    /// Gridfour 2026's default list: the classic one plus GvrsCanonicalHuffman (files that use
    /// it need Gridfour 2026 to be read).
    pub fn gridfour_2026() -> Self {
        GvrsCompression {
            codecs: MASTER_DEFAULT_CODECS.to_vec(),
        }
    }

    /// The classic list plus LSOP12: smaller files for smooth integer data, slower to write.
    pub fn lsop() -> Self {
        GvrsCompression {
            codecs: vec![Codec::Huffman, Codec::Deflate, Codec::Float, Codec::Lsop12],
        }
    }

    /// An explicit codec list, in header order (a codec listed twice is a usage error when
    /// the file is written).
    pub fn from_codecs(codecs: Vec<Codec>) -> Self {
        GvrsCompression { codecs }
    }

    /// A `--compress` value: presets and codec names, comma-separated (see [`codecs_for`]).
    pub fn parse(text: &str) -> Result<Self> {
        Ok(GvrsCompression {
            codecs: codecs_for(Some(text))?,
        })
    }

    /// The codecs, in header order.
    pub fn codecs(&self) -> &[Codec] {
        &self.codecs
    }
}

/// How [`GvrsWriter`] (and [`write_ndarray`]) write one 2-D array as a one-element file.
#[derive(Debug, Clone, Default)]
pub struct GvrsWriterOptions {
    /// Tile size `(rows, cols)`; `None`: [`DEFAULT_TILE`] x [`DEFAULT_TILE`], clipped to the grid.
    pub tile: Option<(u32, u32)>,
    /// The codec list (default: [`GvrsCompression::classic`]).
    pub compression: GvrsCompression,
    /// Name of the element (an identifier: ASCII letter, then letters, digits, `_`, at most 32);
    /// `None`: the array's name made an identifier, or `z`.
    pub element_name: Option<String>,
    /// Bounds: the band of rows held while encoding stays within `limits.working_set`, and a
    /// file written to a stream (held until its header is known) within
    /// `limits.max_array_bytes`.
    pub limits: Limits,
}

impl GvrsWriterOptions {
    /// The options `rasterpack convert` passes (`--tile`, `--compress`).
    pub fn from_write_options(opts: &WriteOptions) -> Result<Self> {
        Ok(GvrsWriterOptions {
            tile: opts.tile,
            compression: GvrsCompression::from_codecs(codecs_for(opts.compress.as_deref())?),
            element_name: None,
            limits: opts.limits,
        })
    }

    /// The same options with tiles of `rows x cols` cells.
    pub fn with_tile(mut self, rows: u32, cols: u32) -> Self {
        self.tile = Some((rows, cols));
        self
    }

    /// The same options with another codec list.
    pub fn with_compression(mut self, compression: GvrsCompression) -> Self {
        self.compression = compression;
        self
    }

    /// The same options with the element named `name`.
    pub fn with_element_name(mut self, name: impl Into<String>) -> Self {
        self.element_name = Some(name.into());
        self
    }

    /// The same options with other limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The spec of a one-element file holding the array `info` announces (`rows x cols` of
    /// its dtype, named after it), with the metadata of its attributes GVRS can hold
    /// ([`crate::carry`]: fill value, unit, texts, range, coordinates, raster space).
    fn spec(&self, info: &ArrayInfo) -> Result<GvrsSpec> {
        let (dtype, name) = (info.dtype, info.name.as_deref());
        let (rows, cols) = match info.shape.as_slice() {
            [r, c] => (*r, *c),
            s => return Err(usage(format!("GVRS holds 2-D grids; the array has shape {s:?}"))),
        };
        let rows = u32::try_from(rows)
            .ok()
            .filter(|&r| r > 0 && r <= i32::MAX as u32)
            .ok_or_else(|| usage(format!("{rows} rows: GVRS grids have 1 to {} rows", i32::MAX)))?;
        let cols = u32::try_from(cols)
            .ok()
            .filter(|&c| c > 0 && c <= i32::MAX as u32)
            .ok_or_else(|| usage(format!("{cols} columns: GVRS grids have 1 to {} columns", i32::MAX)))?;
        let kind = element_kind(dtype)?;
        let (tr, tc) = self.tile.unwrap_or((DEFAULT_TILE.min(rows), DEFAULT_TILE.min(cols)));
        let name = match &self.element_name {
            Some(n) => n.clone(),
            None => element_name(name),
        };
        let mut element = ElementSpec::new(&name, kind);
        crate::carry::element(&mut element, info);
        let mut spec = GvrsSpec::new(rows, cols, tr, tc, element);
        crate::carry::grid(&mut spec, info);
        spec.codecs = self.compression.codecs.clone();
        validate_spec(&spec)?;
        Ok(spec)
    }
}

/// Write `array` (2-D `[rows, cols]`, int32 / int16 / float32) as a one-element GVRS file,
/// honouring `opts.tile` and `opts.compress` (see [`codecs_for`]); the file is assembled in
/// memory (the array is there already), then written.
///
/// int32 -> Integer, int16 -> Short, float32 -> Float; the fill value, unit, texts, range
/// and grid coordinates are the array's attributes' where it has them (see `carry.rs`), else
/// Gridfour's defaults (fill i32::MIN, i16::MIN, NaN; raster coordinates). Default compression = Gridfour's classic codec list GvrsHuffman,
/// GvrsDeflate, GvrsFloat (every Gridfour reads it); `all` adds GvrsCanonicalHuffman (Gridfour
/// 2026's list); `lsop` adds LSOP12 to the classic list (smaller files for smooth data, slower
/// to write); checksums are on and the `GvrsJavaCodecs` records are always written. The
/// element is named after the array (`name`, made an identifier) or `z`.
pub fn write_ndarray(array: &NdArray, opts: &WriteOptions, out: &mut dyn Write) -> Result<()> {
    let spec = GvrsWriterOptions::from_write_options(opts)?.spec(&ArrayInfo::of(array))?;
    let expected = (spec.rows as usize)
        .checked_mul(spec.cols as usize)
        .and_then(|n| n.checked_mul(array.dtype.size()));
    if expected != Some(array.data.len()) {
        return Err(usage("array data length does not match its shape"));
    }
    let mut band = Band::new(array.dtype);
    band.push_le(&array.data);
    write_gvrs(&spec, &[band.values()], out)
}

/// The element type GVRS stores for `dtype`, with Gridfour's default range and fill.
fn element_kind(dtype: DType) -> Result<ElementRange> {
    match dtype {
        DType::I32 => Ok(ElementRange::integer()),
        DType::I16 => Ok(ElementRange::short()),
        DType::F32 => Ok(ElementRange::float()),
        d => Err(usage(format!(
            "GVRS stores int32, int16 or float32 grids, not {}",
            d.name()
        ))),
    }
}

/// Write several 2-D arrays of one shape as the elements of one GVRS file, in the order given,
/// each named after its array (`NdArray::name`, which must be a GVRS identifier: an ASCII
/// letter, then letters, digits or `_`, at most 32; unlike [`write_ndarray`], a name is never
/// changed, so that two elements cannot end up with one name). Elements may differ in type
/// (int32, int16, float32); `opts.tile` and `opts.compress` as [`write_ndarray`] takes them.
/// The file is assembled in memory (the arrays are there already), then written.
pub fn write_ndarrays(arrays: &[NdArray], opts: &WriteOptions, out: &mut dyn Write) -> Result<()> {
    let [first, ..] = arrays else {
        return Err(usage("a GVRS file needs at least one element"));
    };
    let mut spec = GvrsWriterOptions::from_write_options(opts)?.spec(&ArrayInfo {
        name: None,
        ..ArrayInfo::of(first)
    })?;
    spec.elements.clear();
    for a in arrays {
        let name = a
            .name
            .as_deref()
            .ok_or_else(|| usage("every element of a GVRS file needs a name"))?;
        check_identifier(name, "element name")?;
        if a.shape != first.shape {
            return Err(usage(format!(
                "element {name} has shape {:?}; the grid is {:?} (every element covers the same grid)",
                a.shape, first.shape
            )));
        }
        let mut element = ElementSpec::new(name, element_kind(a.dtype)?);
        crate::carry::element(&mut element, &ArrayInfo::of(a));
        spec.elements.push(element);
    }
    validate_spec(&spec)?;
    let cells = (spec.rows as usize).checked_mul(spec.cols as usize);
    let mut bands = Vec::with_capacity(arrays.len());
    for a in arrays {
        if cells.and_then(|n| n.checked_mul(a.dtype.size())) != Some(a.data.len()) {
            return Err(usage("array data length does not match its shape"));
        }
        let mut band = Band::new(a.dtype);
        band.push_le(&a.data);
        bands.push(band);
    }
    let values: Vec<ElementValues> = bands.iter().map(Band::values).collect();
    write_gvrs(&spec, &values, out)
}

/// Cell values of a band of rows, typed as the element.
enum Band {
    Int(Vec<i32>),
    Short(Vec<i16>),
    Float(Vec<f32>),
}

impl Band {
    fn new(dtype: DType) -> Band {
        match dtype {
            DType::I16 => Band::Short(Vec::new()),
            DType::F32 => Band::Float(Vec::new()),
            _ => Band::Int(Vec::new()),
        }
    }

    fn len(&self) -> usize {
        match self {
            Band::Int(v) => v.len(),
            Band::Short(v) => v.len(),
            Band::Float(v) => v.len(),
        }
    }

    fn clear(&mut self) {
        match self {
            Band::Int(v) => v.clear(),
            Band::Short(v) => v.clear(),
            Band::Float(v) => v.clear(),
        }
    }

    /// Append whole little-endian values.
    fn push_le(&mut self, bytes: &[u8]) {
        match self {
            Band::Int(v) => v.extend(
                bytes
                    .chunks_exact(4)
                    .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            ),
            Band::Short(v) => v.extend(bytes.chunks_exact(2).map(|b| i16::from_le_bytes([b[0], b[1]]))),
            Band::Float(v) => v.extend(
                bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            ),
        }
    }

    fn values(&self) -> ElementValues<'_> {
        match self {
            Band::Int(v) => ElementValues::Int(v),
            Band::Short(v) => ElementValues::Short(v),
            Band::Float(v) => ElementValues::Float(v),
        }
    }
}

/// Writes one 2-D array (int32, int16 or float32, `[rows, cols]`) as a one-element GVRS file
/// as its rows arrive: an [`ArraySink`] taking the array in C order (row by row), encoding one
/// group of tile rows at a time in parallel. On [`Output::File`] the tile records are written
/// as they are encoded and the header (marked opened for writing until then) and the tile
/// directory at [`ArraySink::finish`]; on [`Output::Stream`] the encoded file is held in memory
/// until `finish` (the header comes first and names the directory's offset). Refuses at
/// [`ArraySink::begin`], before any value arrives, an array GVRS cannot hold and a band of tile
/// rows larger than the working set.
pub struct GvrsWriter<'a> {
    out: Output<'a>,
    options: GvrsWriterOptions,
    writing: Option<Writing<'a>>,
}

/// A file between `begin` and `finish`.
struct Writing<'a> {
    records: Records<'a>,
    builder: FileBuilder,
    /// Rows received and not yet encoded, from grid row `band_row`.
    band: Band,
    band_row: usize,
    /// Rows encoded together (a multiple of the tile rows).
    group_rows: usize,
    cols: usize,
    value_size: usize,
    total_bytes: u64,
    cursor: SequentialCursor,
    /// The first bytes of a value split between two writes.
    partial: Vec<u8>,
}

impl<'a> GvrsWriter<'a> {
    /// A writer onto `out`.
    pub fn new(out: Output<'a>, options: GvrsWriterOptions) -> GvrsWriter<'a> {
        GvrsWriter {
            out,
            options,
            writing: None,
        }
    }

    /// Write a whole array held in memory: [`ArraySink::begin`], one [`ArraySink::write_at`],
    /// [`ArraySink::finish`].
    pub fn write_array(mut self, array: &NdArray) -> Result<()> {
        self.begin(&ArrayInfo::of(array))?;
        self.write_at(0, &array.data)?;
        self.finish()
    }

    fn writing(&mut self) -> Result<&mut Writing<'a>> {
        self.writing
            .as_mut()
            .ok_or_else(|| usage("internal: the GVRS writer got data before begin"))
    }
}

impl Writing<'_> {
    /// Encode the rows held (whole tile rows, or the grid's last rows) and put their tiles.
    fn encode_band(&mut self) -> Result<()> {
        let rows = self.band.len() / self.cols;
        if rows == 0 {
            return Ok(());
        }
        let tr = self.builder.spec.tile_rows as usize;
        let tiles = self.band_row / tr..(self.band_row + rows).div_ceil(tr);
        let encoded = encode_band(&self.builder.spec, &[self.band.values()], self.band_row, tiles);
        self.builder.add_tiles(encoded, &mut self.records)?;
        self.band.clear();
        self.band_row += rows;
        Ok(())
    }

    /// Take whole values from `data` into the band, encoding each full group.
    fn push(&mut self, mut data: &[u8]) -> Result<()> {
        let size = self.value_size;
        if !self.partial.is_empty() {
            let take = (size - self.partial.len()).min(data.len());
            self.partial.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.partial.len() < size {
                return Ok(());
            }
            let value = std::mem::take(&mut self.partial);
            self.band.push_le(&value);
        }
        let group = self.group_rows * self.cols;
        loop {
            if self.band.len() >= group {
                self.encode_band()?;
            }
            let take = (group - self.band.len()).min(data.len() / size);
            if take == 0 {
                break;
            }
            self.band.push_le(&data[..take * size]);
            data = &data[take * size..];
        }
        self.partial.extend_from_slice(data);
        Ok(())
    }
}

impl ArraySink for GvrsWriter<'_> {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        let spec = self.options.spec(info)?;
        let (cols, tile_rows) = (spec.cols as u64, spec.tile_rows as u64);
        let size = info.dtype.size() as u64;
        // Held at once: the band's values and their encoded tiles, beside each thread's tile
        // being encoded (its cells and a few candidate encodings).
        let scratch = (rayon::current_num_threads() as u64)
            .saturating_mul(spec.tile_rows as u64 * spec.tile_cols as u64)
            .saturating_mul(16);
        let budget = self.options.limits.working_set.saturating_sub(scratch) / 2;
        let band = tile_rows.saturating_mul(cols).saturating_mul(size);
        let bands = budget / band.max(1);
        if bands == 0 {
            return Err(Error::limit(
                "limit.working_set",
                None,
                format!(
                    "the GVRS writer encodes a band of {tile_rows} tile rows x {cols} columns at a time: {band} bytes, \
                     above the {budget} bytes the working set of {} bytes allows (use smaller tiles, or raise it)",
                    self.options.limits.working_set
                ),
            ));
        }
        // At most GROUP_BYTES of values per group (one band at least): encoding a group is
        // one uninterrupted stretch of work inside a write, and callers act between writes
        // (progress, Python's Ctrl-C within a second); a few tile rows keep every core busy.
        let bands = bands.min((GROUP_BYTES / band.max(1)).max(1));
        let group_rows = (bands.saturating_mul(tile_rows)).min(spec.rows as u64) as usize;
        let mut records = match &self.out {
            Output::File(file) => Records::File(file),
            Output::Stream(_) => Records::Memory {
                pieces: Vec::new(),
                held: 0,
                limit: self.options.limits.max_array_bytes,
            },
        };
        let builder = FileBuilder::start(&spec, &mut records)?;
        self.writing = Some(Writing {
            records,
            builder,
            band: Band::new(info.dtype),
            band_row: 0,
            group_rows,
            cols: cols as usize,
            value_size: size as usize,
            total_bytes: info.byte_len()?,
            cursor: SequentialCursor::default(),
            partial: Vec::new(),
        });
        Ok(())
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let w = self.writing()?;
        if offset
            .checked_add(data.len() as u64)
            .is_none_or(|end| end > w.total_bytes)
        {
            return Err(usage(format!(
                "internal: a write of {} bytes at {offset} falls outside the {}-byte array",
                data.len(),
                w.total_bytes
            )));
        }
        w.cursor.advance(offset, data.len())?;
        w.push(data)
    }

    fn finish(&mut self) -> Result<()> {
        let mut w = self
            .writing
            .take()
            .ok_or_else(|| usage("internal: the GVRS writer finished before begin"))?;
        if w.cursor.position != w.total_bytes || !w.partial.is_empty() {
            return Err(usage(format!(
                "internal: the GVRS writer got {} of {} bytes",
                w.cursor.position, w.total_bytes
            )));
        }
        w.encode_band()?;
        w.builder.finish(&mut w.records)?;
        if let (Records::Memory { pieces, .. }, Output::Stream(out)) = (&w.records, &mut self.out) {
            for p in pieces {
                out.write_all(p).map_err(|e| Error::io("writing GVRS output", &e))?;
            }
            out.flush().map_err(|e| Error::io("writing GVRS output", &e))?;
        }
        Ok(())
    }
}

fn element_name(name: Option<&str>) -> String {
    let mut s: String = name
        .unwrap_or("")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
        .take(32)
        .collect();
    if !s.as_bytes().first().is_some_and(|b| b.is_ascii_alphabetic()) {
        s = "z".to_string();
    }
    s
}
