//! On-disk structures of a GVRS 1.4 file, mirroring the bytes ("dumb" structs: the parser fills
//! them, `validate` judges them). Offsets follow `gvrs-errata.md`, which wins over the tables of
//! `gvrs-1.4.md` where they disagree. All integers are little-endian.

/// Bytes 0..12: `"gvrs raster"` + NUL.
pub const MAGIC: &[u8; 12] = b"gvrs raster\0";
/// The header record starts right after the 16-byte identification block.
pub const HEADER_RECORD_START: u64 = 16;
/// Fixed part of the header record: absolute bytes 16..284 (through the element count).
pub const HEADER_FIXED_END: u64 = 284;

/// Record type byte (offset 4 of every record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RecordType {
    FreeSpace = 0,
    Metadata = 1,
    Tile = 2,
    FileSpaceDirectory = 3,
    MetadataDirectory = 4,
    TileDirectory = 5,
    Header = 6,
}

impl RecordType {
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
    pub length: i32,
    pub record_type: u8,
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
    pub bytes: Vec<u8>,
}

impl RawString {
    pub fn lossy(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
    pub fn is_utf8(&self) -> bool {
        std::str::from_utf8(&self.bytes).is_ok()
    }
}

/// Element type byte of an element specification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElementType {
    Integer = 0,
    IntCodedFloat = 1,
    Float = 2,
    Short = 3,
}

impl ElementType {
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
    Integer { min: i32, max: i32, fill: i32 },
    /// 3 x f32: min, max, fill.
    Float { min: f32, max: f32, fill: f32 },
    /// f32 min, max, fill, scale, offset, then i32 min, max, fill (32 bytes).
    IntCodedFloat {
        min: f32,
        max: f32,
        fill: f32,
        scale: f32,
        offset: f32,
        min_int: i32,
        max_int: i32,
        fill_int: i32,
    },
    /// 3 x i16: min, max, fill; the label follows immediately (unaligned).
    Short { min: i16, max: i16, fill: i16 },
}

/// One element specification in the header record.
/// - +0 u8 type, +1 u8 continuous, +2..8 reserved, +8 name (u16 + bytes)
/// - zero padding to a multiple of 4 (absolute), range values ([`ElementRange`])
/// - label, description, unit (u16 + UTF-8 each), zero padding to a multiple of 4.
#[derive(Debug, Clone, PartialEq)]
pub struct ElementSpec {
    pub offset: u64,
    pub element_type: ElementType,
    pub continuous: u8,
    pub reserved: [u8; 6],
    pub name: RawString,
    /// Offset and bytes of the zero padding before the range values.
    pub pad_before_range: (u64, Vec<u8>),
    pub range_offset: u64,
    pub range: ElementRange,
    pub label: RawString,
    pub description: RawString,
    pub unit: RawString,
    pub pad_after: (u64, Vec<u8>),
}

/// The header record (absolute offsets).
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// 12, 13: version; 14..16 reserved.
    pub version_major: u8,
    pub version_minor: u8,
    pub id_reserved: [u8; 2],
    /// 16: length, 20: type (6), 21..24 reserved.
    pub record: RecordHeader,
    /// 24..40: UUID as stored (two LE i64, least significant half first).
    pub uuid_bytes: [u8; 16],
    /// 40: time modified (ms since 1970); 48: time opened for writing (0 when closed).
    pub time_modified: i64,
    pub time_opened_for_writing: i64,
    /// 56, 64: content offsets of the file-space and metadata directories (0 = none).
    pub offset_file_space_directory: i64,
    pub offset_metadata_directory: i64,
    /// 72: number of levels (i16; Gridfour writes 1). 74..80 reserved.
    pub levels: i16,
    pub reserved_74: [u8; 6],
    /// 80: content offset of the tile directory. 88..104 reserved.
    pub offset_tile_directory: i64,
    pub reserved_88: [u8; 16],
    /// 104 rows, 108 cols, 112 tile rows, 116 tile cols; 120..128 reserved.
    pub rows: i32,
    pub cols: i32,
    pub tile_rows: i32,
    pub tile_cols: i32,
    pub reserved_120: [u8; 8],
    /// 128 checksum flag, 129 raster space, 130 coordinate system, 131..136 reserved.
    pub checksums: u8,
    pub raster_space: u8,
    pub coordinate_system: u8,
    pub reserved_131: [u8; 5],
    /// 136 x0, 144 y0, 152 x1, 160 y1, 168 cell size x, 176 cell size y.
    pub x0: f64,
    pub y0: f64,
    pub x1: f64,
    pub y1: f64,
    pub cell_size_x: f64,
    pub cell_size_y: f64,
    /// 184..232: model-to-raster affine transform, order 00 01 02 10 11 12.
    pub m2r: [f64; 6],
    /// 232..280: raster-to-model affine transform.
    pub r2m: [f64; 6],
    /// 280: element count (i32), then the specifications.
    pub element_count: i32,
    pub elements: Vec<ElementSpec>,
    /// Codec count (i32) and names (u16 + bytes).
    pub codec_count_offset: u64,
    pub codec_count: i32,
    pub codecs: Vec<RawString>,
    pub product_label: RawString,
    /// The 8 reserved bytes and the padding before the CRC (offset, bytes).
    pub tail: (u64, Vec<u8>),
    /// Offset and value of the CRC (last 4 bytes of the record).
    pub crc_offset: u64,
    pub crc: u32,
}

/// Tile directory record (record-relative offsets): +8 format (0), +9 standard references flag,
/// +10..16 reserved, +16 row0, +20 col0, +24 nRows, +28 nCols (tile units), +32 entries,
/// row-major, u32 compact references (content offset / 8) or i64 content offsets; 0 = absent.
#[derive(Debug, Clone, PartialEq)]
pub struct TileDirectory {
    pub record: RecordHeader,
    pub format: u8,
    pub standard_references: u8,
    pub reserved: [u8; 6],
    pub row0: i32,
    pub col0: i32,
    pub n_rows: i32,
    pub n_cols: i32,
    /// Absolute offset of the first entry.
    pub entries_offset: u64,
    /// Content offsets (already multiplied by 8 for compact references); 0 = absent. A
    /// negative standard reference is kept as is (validate flags it).
    pub entries: Vec<i64>,
    /// Bytes between the last entry and the CRC.
    pub tail: (u64, Vec<u8>),
    pub crc: u32,
}

impl TileDirectory {
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
    pub offset: u64,
    pub content_offset: i64,
    pub name: RawString,
    pub record_id: i32,
    pub data_type: u8,
}

/// Metadata directory record: +8 i32 count, then packed [`MetadataDirEntry`]s.
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataDirectory {
    pub record: RecordHeader,
    pub count: i32,
    pub entries: Vec<MetadataDirEntry>,
    pub tail: (u64, Vec<u8>),
    pub crc: u32,
}

/// Metadata record: +8 name, i32 record id, u8 type, 3 zero bytes, i32 content length, content,
/// description (u16 + UTF-8), padding, CRC.
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataRecord {
    pub record: RecordHeader,
    pub name: RawString,
    pub record_id: i32,
    pub data_type: u8,
    pub reserved: [u8; 3],
    pub content_length: i32,
    pub content_offset: u64,
    pub content: Vec<u8>,
    pub description: RawString,
    /// Set when the description runs into the CRC (Gridfour sizes empty-content records 4
    /// bytes short, errata 19): what fits is kept.
    pub description_truncated: bool,
    pub tail: (u64, Vec<u8>),
    pub crc: u32,
}

/// Metadata data type codes (spec Table 14).
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
    pub offset: u64,
    pub position: i64,
    pub size: i32,
}

/// File-space directory record: +8 i32 count, then 12-byte [`FreeSpaceEntry`]s.
#[derive(Debug, Clone, PartialEq)]
pub struct FileSpaceDirectory {
    pub record: RecordHeader,
    pub count: i32,
    pub entries: Vec<FreeSpaceEntry>,
    pub tail: (u64, Vec<u8>),
    pub crc: u32,
}

/// Tile record: +8 i32 tile index, then per element i32 length n and n bytes (no padding after
/// compressed blocks), then zero padding and the CRC.
#[derive(Debug, Clone, PartialEq)]
pub struct TileRecord {
    pub record: RecordHeader,
    pub tile_index: i32,
    /// Per element: (record-relative offset of the block bytes, block length).
    pub blocks: Vec<(usize, usize)>,
    /// Record-relative offset just past the last block.
    pub blocks_end: usize,
}
