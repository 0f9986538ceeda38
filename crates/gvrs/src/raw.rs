//! On-disk structures of a GVRS 1.4 file, mirroring the bytes ("dumb" structs: the parser fills
//! them, `validate` judges them). Offsets are those of the files Gridfour writes, which differ
//! in places from the tables of the published format description (the repository's
//! `docs/formats/gvrs.md` lists where). All integers are little-endian.

/// Bytes 0..12: `"gvrs raster"` + NUL.
pub const MAGIC: &[u8; 12] = b"gvrs raster\0";
/// The header record starts right after the 16-byte identification block.
pub const HEADER_RECORD_START: u64 = 16;
/// Fixed part of the header record: absolute bytes 16..284 (through the element count).
pub const HEADER_FIXED_END: u64 = 284;

/// Record type byte (offset 4 of every record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RecordType {
    /// A block of free space (its body is undefined), listed by the file-space directory.
    FreeSpace = 0,
    /// One metadata record (name, record id, typed content, description).
    Metadata = 1,
    /// One tile: its index, then a block per element.
    Tile = 2,
    /// The list of free-space records.
    FileSpaceDirectory = 3,
    /// The list of metadata records.
    MetadataDirectory = 4,
    /// The content offsets of the stored tiles.
    TileDirectory = 5,
    /// The header record (at file offset 16).
    Header = 6,
}

impl RecordType {
    /// The record type of a type byte, `None` for an unknown one.
    pub fn from_u8(b: u8) -> Option<RecordType> {
        Some(match b {
            0 => RecordType::FreeSpace,
            1 => RecordType::Metadata,
            2 => RecordType::Tile,
            3 => RecordType::FileSpaceDirectory,
            4 => RecordType::MetadataDirectory,
            5 => RecordType::TileDirectory,
            6 => RecordType::Header,
            _ => return None,
        })
    }

    /// The record kind in words (`tile record`), for messages.
    pub fn name(self) -> &'static str {
        match self {
            RecordType::FreeSpace => "free-space record",
            RecordType::Metadata => "metadata record",
            RecordType::Tile => "tile record",
            RecordType::FileSpaceDirectory => "file-space directory",
            RecordType::MetadataDirectory => "metadata directory",
            RecordType::TileDirectory => "tile directory",
            RecordType::Header => "header record",
        }
    }

    /// The area segment of finding codes for this record kind (`gvrs.<area>.<rule>`).
    pub fn area(self) -> &'static str {
        match self {
            RecordType::FreeSpace => "free_space",
            RecordType::Metadata => "metadata",
            RecordType::Tile => "tile",
            RecordType::FileSpaceDirectory => "file_space_directory",
            RecordType::MetadataDirectory => "metadata_directory",
            RecordType::TileDirectory => "tile_directory",
            RecordType::Header => "header",
        }
    }
}

/// The 8-byte prefix of every record.
/// - +0 i32 record length (bytes, from the record start through the CRC; multiple of 8)
/// - +4 u8 record type, +5..8 reserved (zero)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// Absolute offset of the record start.
    pub start: u64,
    /// +0: record length in bytes, from the start through the CRC.
    pub length: i32,
    /// +4: record type byte ([`RecordType`]).
    pub record_type: u8,
    /// +5..8: reserved (zero).
    pub reserved: [u8; 3],
}

impl RecordHeader {
    /// Absolute offset of the content (start + 8): what directories point at.
    pub fn content(&self) -> u64 {
        self.start + 8
    }
    /// Record end (exclusive), when the length is usable.
    pub fn end(&self) -> Option<u64> {
        u64::try_from(self.length).ok().and_then(|l| self.start.checked_add(l))
    }
}

/// A UTF-8 string as stored: u16 byte length, then the bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RawString {
    /// Absolute offset of the u16 length.
    pub offset: u64,
    /// The bytes as stored (meant to be UTF-8; `validate` checks).
    pub bytes: Vec<u8>,
}

impl RawString {
    /// The text, with invalid UTF-8 replaced.
    pub fn lossy(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
    /// Whether the bytes are valid UTF-8.
    pub fn is_utf8(&self) -> bool {
        std::str::from_utf8(&self.bytes).is_ok()
    }
}

/// Element type byte of an element specification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElementType {
    /// 32-bit signed integers.
    Integer = 0,
    /// Floats stored as 32-bit integer codes: value = code / scale + offset.
    IntCodedFloat = 1,
    /// 32-bit IEEE floats.
    Float = 2,
    /// 16-bit signed integers.
    Short = 3,
}

impl ElementType {
    /// The element type of a type byte, `None` for an unknown one.
    pub fn from_u8(b: u8) -> Option<ElementType> {
        Some(match b {
            0 => ElementType::Integer,
            1 => ElementType::IntCodedFloat,
            2 => ElementType::Float,
            3 => ElementType::Short,
            _ => return None,
        })
    }
    /// The name the corpus sidecars and Gridfour's API use.
    pub fn name(self) -> &'static str {
        match self {
            ElementType::Integer => "INTEGER",
            ElementType::IntCodedFloat => "INT_CODED_FLOAT",
            ElementType::Float => "FLOAT",
            ElementType::Short => "SHORT",
        }
    }
    /// Bytes of an uncompressed block of `cells` values (Short: 2 per cell, padded to 4).
    pub fn uncompressed_len(self, cells: u64) -> Option<u64> {
        match self {
            ElementType::Short => cells.checked_mul(2)?.checked_add(3).map(|n| n & !3),
            _ => cells.checked_mul(4),
        }
    }
}

/// Range and fill values, after the name and padding to a multiple of 4 (absolute position).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ElementRange {
    /// 3 x i32: min, max, fill.
    Integer {
        /// Smallest value the element holds.
        min: i32,
        /// Largest value the element holds.
        max: i32,
        /// Value of cells never written.
        fill: i32,
    },
    /// 3 x f32: min, max, fill.
    Float {
        /// Smallest value the element holds.
        min: f32,
        /// Largest value the element holds.
        max: f32,
        /// Value of cells never written (NaN by default).
        fill: f32,
    },
    /// f32 min, max, fill, scale, offset, then i32 min, max, fill (32 bytes).
    IntCodedFloat {
        /// Smallest value.
        min: f32,
        /// Largest value.
        max: f32,
        /// Value of a cell holding the fill code.
        fill: f32,
        /// Codes per unit: value = code / scale + offset.
        scale: f32,
        /// Value of code 0.
        offset: f32,
        /// Smallest code.
        min_int: i32,
        /// Largest code.
        max_int: i32,
        /// Code of cells never written.
        fill_int: i32,
    },
    /// 3 x i16: min, max, fill; the label follows immediately (unaligned).
    Short {
        /// Smallest value the element holds.
        min: i16,
        /// Largest value the element holds.
        max: i16,
        /// Value of cells never written.
        fill: i16,
    },
}

/// One element specification in the header record.
/// - +0 u8 type, +1 u8 continuous, +2..8 reserved, +8 name (u16 + bytes)
/// - zero padding to a multiple of 4 (absolute), range values ([`ElementRange`])
/// - label, description, unit (u16 + UTF-8 each), zero padding to a multiple of 4.
#[derive(Debug, Clone, PartialEq)]
pub struct ElementSpec {
    /// Absolute offset of the specification.
    pub offset: u64,
    /// +0: element type.
    pub element_type: ElementType,
    /// +1: continuous flag (1: values vary smoothly and may be interpolated).
    pub continuous: u8,
    /// +2..8: reserved (zero).
    pub reserved: [u8; 6],
    /// +8: the element's name (an identifier).
    pub name: RawString,
    /// Offset and bytes of the zero padding before the range values.
    pub pad_before_range: (u64, Vec<u8>),
    /// Absolute offset of the range values.
    pub range_offset: u64,
    /// Range and fill values.
    pub range: ElementRange,
    /// Short label for people.
    pub label: RawString,
    /// Longer description.
    pub description: RawString,
    /// Unit of measure.
    pub unit: RawString,
    /// Offset and bytes of the zero padding after the unit.
    pub pad_after: (u64, Vec<u8>),
}

/// The header record (absolute offsets).
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// 12: major version (1).
    pub version_major: u8,
    /// 13: minor version (4; 2 and 3 are read too).
    pub version_minor: u8,
    /// 14..16: reserved (zero).
    pub id_reserved: [u8; 2],
    /// 16: length, 20: type (6), 21..24 reserved.
    pub record: RecordHeader,
    /// 24..40: UUID as stored (two LE i64, least significant half first).
    pub uuid_bytes: [u8; 16],
    /// 40: time modified (ms since 1970).
    pub time_modified: i64,
    /// 48: time opened for writing (ms since 1970; 0 when the file was closed).
    pub time_opened_for_writing: i64,
    /// 56: content offset of the file-space directory (0 = none).
    pub offset_file_space_directory: i64,
    /// 64: content offset of the metadata directory (0 = none).
    pub offset_metadata_directory: i64,
    /// 72: number of levels (i16; Gridfour writes 1).
    pub levels: i16,
    /// 74..80: reserved (zero).
    pub reserved_74: [u8; 6],
    /// 80: content offset of the tile directory.
    pub offset_tile_directory: i64,
    /// 88..104: reserved (zero).
    pub reserved_88: [u8; 16],
    /// 104: rows of the grid.
    pub rows: i32,
    /// 108: columns of the grid.
    pub cols: i32,
    /// 112: rows of a tile.
    pub tile_rows: i32,
    /// 116: columns of a tile.
    pub tile_cols: i32,
    /// 120..128: reserved (zero).
    pub reserved_120: [u8; 8],
    /// 128: checksum flag (1: every record ends with its CRC32C).
    pub checksums: u8,
    /// 129: raster space (0 unspecified, 1 point, 2 area).
    pub raster_space: u8,
    /// 130: coordinate system (0 unspecified, 1 Cartesian, 2 geographic).
    pub coordinate_system: u8,
    /// 131..136: reserved (zero).
    pub reserved_131: [u8; 5],
    /// 136: model x of the centre of cell (0, 0).
    pub x0: f64,
    /// 144: model y of the centre of cell (0, 0).
    pub y0: f64,
    /// 152: model x of the centre of the last cell.
    pub x1: f64,
    /// 160: model y of the centre of the last cell.
    pub y1: f64,
    /// 168: cell size along x.
    pub cell_size_x: f64,
    /// 176: cell size along y.
    pub cell_size_y: f64,
    /// 184..232: model-to-raster affine transform, order 00 01 02 10 11 12.
    pub m2r: [f64; 6],
    /// 232..280: raster-to-model affine transform.
    pub r2m: [f64; 6],
    /// 280: element count (i32).
    pub element_count: i32,
    /// The element specifications, from 284.
    pub elements: Vec<ElementSpec>,
    /// Absolute offset of the codec count.
    pub codec_count_offset: u64,
    /// Codec count (i32).
    pub codec_count: i32,
    /// Codec names (u16 + bytes each); a compressed block's first byte indexes this list.
    pub codecs: Vec<RawString>,
    /// Product label for people.
    pub product_label: RawString,
    /// The 8 reserved bytes and the padding before the CRC (offset, bytes).
    pub tail: (u64, Vec<u8>),
    /// Absolute offset of the CRC (last 4 bytes of the record).
    pub crc_offset: u64,
    /// The stored CRC.
    pub crc: u32,
}

/// Tile directory record (record-relative offsets): +8 format (0), +9 standard references flag,
/// +10..16 reserved, +16 row0, +20 col0, +24 nRows, +28 nCols (tile units), +32 entries,
/// row-major, u32 compact references (content offset / 8) or i64 content offsets; 0 = absent.
#[derive(Debug, Clone, PartialEq)]
pub struct TileDirectory {
    /// The record's prefix.
    pub record: RecordHeader,
    /// +8: format (0 is the only one defined).
    pub format: u8,
    /// +9: 0 for u32 compact references (content offset / 8), otherwise i64 content offsets.
    pub standard_references: u8,
    /// +10..16: reserved (zero).
    pub reserved: [u8; 6],
    /// +16: first tile row the entries cover.
    pub row0: i32,
    /// +20: first tile column the entries cover.
    pub col0: i32,
    /// +24: tile rows covered.
    pub n_rows: i32,
    /// +28: tile columns covered.
    pub n_cols: i32,
    /// Absolute offset of the first entry.
    pub entries_offset: u64,
    /// Content offsets (already multiplied by 8 for compact references); 0 = absent. A
    /// negative standard reference is kept as is (validate flags it).
    pub entries: Vec<i64>,
    /// Bytes between the last entry and the CRC.
    pub tail: (u64, Vec<u8>),
    /// The stored CRC.
    pub crc: u32,
}

impl TileDirectory {
    /// Bytes per entry: 4 (compact references) or 8.
    pub fn entry_size(&self) -> u64 {
        if self.standard_references != 0 {
            8
        } else {
            4
        }
    }
}

/// One metadata directory entry: i64 content offset, name, i32 record id, u8 type (packed).
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataDirEntry {
    /// Absolute offset of the entry.
    pub offset: u64,
    /// Content offset of the metadata record.
    pub content_offset: i64,
    /// The record's name.
    pub name: RawString,
    /// The record's id (several records may share a name).
    pub record_id: i32,
    /// The content's type code ([`metadata_type_name`]).
    pub data_type: u8,
}

/// Metadata directory record: +8 i32 count, then packed [`MetadataDirEntry`]s.
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataDirectory {
    /// The record's prefix.
    pub record: RecordHeader,
    /// +8: number of entries.
    pub count: i32,
    /// The entries.
    pub entries: Vec<MetadataDirEntry>,
    /// Bytes between the last entry and the CRC.
    pub tail: (u64, Vec<u8>),
    /// The stored CRC.
    pub crc: u32,
}

/// Metadata record: +8 name, i32 record id, u8 type, 3 zero bytes, i32 content length, content,
/// description (u16 + UTF-8), padding, CRC.
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataRecord {
    /// The record's prefix.
    pub record: RecordHeader,
    /// The record's name.
    pub name: RawString,
    /// The record's id.
    pub record_id: i32,
    /// The content's type code ([`metadata_type_name`]).
    pub data_type: u8,
    /// Reserved (zero).
    pub reserved: [u8; 3],
    /// Content length in bytes.
    pub content_length: i32,
    /// Absolute offset of the content.
    pub content_offset: u64,
    /// The content as stored.
    pub content: Vec<u8>,
    /// Description for people.
    pub description: RawString,
    /// Set when the description runs into the CRC (Gridfour sizes records with empty content
    /// 4 bytes short): what fits is kept.
    pub description_truncated: bool,
    /// Bytes between the description and the CRC.
    pub tail: (u64, Vec<u8>),
    /// The stored CRC.
    pub crc: u32,
}

/// The name of a metadata type code, as Gridfour's API spells it (`STRING`, `DOUBLE`, ...).
pub fn metadata_type_name(code: u8) -> &'static str {
    match code {
        0 => "UNSPECIFIED",
        1 => "BYTE",
        2 => "SHORT",
        3 => "UNSIGNED_SHORT",
        4 => "INTEGER",
        5 => "UNSIGNED_INTEGER",
        6 => "FLOAT",
        7 => "DOUBLE",
        8 => "STRING",
        9 => "ASCII",
        _ => "UNKNOWN",
    }
}

/// One file-space directory entry: i64 free-space record *start*, i32 size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FreeSpaceEntry {
    /// Absolute offset of the entry.
    pub offset: u64,
    /// Start of the free-space record.
    pub position: i64,
    /// Its size in bytes.
    pub size: i32,
}

/// File-space directory record: +8 i32 count, then 12-byte [`FreeSpaceEntry`]s.
#[derive(Debug, Clone, PartialEq)]
pub struct FileSpaceDirectory {
    /// The record's prefix.
    pub record: RecordHeader,
    /// +8: number of entries.
    pub count: i32,
    /// The entries.
    pub entries: Vec<FreeSpaceEntry>,
    /// Bytes between the last entry and the CRC.
    pub tail: (u64, Vec<u8>),
    /// The stored CRC.
    pub crc: u32,
}

/// Tile record: +8 i32 tile index, then per element i32 length n and n bytes (no padding after
/// compressed blocks), then zero padding and the CRC.
#[derive(Debug, Clone, PartialEq)]
pub struct TileRecord {
    /// The record's prefix.
    pub record: RecordHeader,
    /// +8: the tile's index (tile row x tile-grid columns + tile column).
    pub tile_index: i32,
    /// Per element: (record-relative offset of the block bytes, block length).
    pub blocks: Vec<(usize, usize)>,
    /// Record-relative offset just past the last block.
    pub blocks_end: usize,
}
