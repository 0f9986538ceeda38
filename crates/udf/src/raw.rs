//! On-disk structures of UDF revision 0, as plain values mirroring the bytes (little-endian).
//! No checking happens here; [`crate::parse`] decodes them and [`crate::validate`] judges them.

/// `"UDF0"`: the only revision this crate reads.
pub const MAGIC: [u8; 4] = *b"UDF0";
/// Size of the file header.
pub const FILE_HEADER_SIZE: usize = 0x40;
/// Size of the static part of a dataset header.
pub const DATASET_STATIC_SIZE: usize = 0x18;
/// Size of one datatable descriptor.
pub const DESCRIPTOR_SIZE: usize = 0x30;
/// Size of one string lookup entry.
pub const LOOKUP_SIZE: usize = 0x8;
/// The dataset `check` value.
pub const DATASET_CHECK: u32 = 0x7fce_a59b;
/// Seed of the DJB2-xor name hash the reference crate uses.
pub const HASH_SEED: u32 = 3581;

/// File header, offset 0, `0x40` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileHeader {
    /// `0x00`: `"UDF0"`.
    pub magic: [u8; 4],
    /// `0x04`: printable ASCII, NUL padded.
    pub id: [u8; 4],
    /// `0x08`: reserved for future use (not "must be zero").
    pub next: u64,
    /// `0x10`: location of the root dataset, or null.
    pub root: FileOffset,
    /// `0x20`: reserved, must be zero.
    pub reserved: [u64; 4],
}

/// A dataset location: `offset` then `size`, both `u64`, both multiples of 16; `(0, 0)` is null.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct FileOffset {
    /// Absolute offset of the dataset.
    pub offset: u64,
    /// Size of the dataset in bytes.
    pub size: u64,
}

impl FileOffset {
    /// `(0, 0)`: no dataset.
    pub fn is_null(&self) -> bool {
        self.offset == 0 && self.size == 0
    }
}

/// Static dataset header, `0x18` bytes at the dataset's offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DatasetHeader {
    /// `0x00`: must be [`DATASET_CHECK`].
    pub check: u32,
    /// `0x04`: optional checksum (algorithm unspecified).
    pub checksum: u32,
    /// `0x08`: identifier.
    pub id: [u8; 4],
    /// `0x0C`: header size in bytes, multiple of 8; table data starts after it.
    pub header_size: u16,
    /// `0x0E`: number of descriptors after the static header.
    pub descs_len: u16,
    /// `0x10`: number of lookup entries after the descriptors.
    pub lookup_len: u16,
    /// `0x12`: byte length of the string block after the lookups, multiple of 8.
    pub string_len: u16,
    /// `0x14`: reserved.
    pub reserved: [u16; 2],
}

/// Datatable descriptor, `0x30` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Descriptor {
    /// `0x00`: lookup key of the table's name (0 is null, invalid here).
    pub key_name: u32,
    /// `0x04`: primitive, dimension count and hint, see [`crate::parse::TypeInfo`].
    pub type_info: u16,
    /// `0x06`: compression scheme, 0 = none.
    pub compress_info: u16,
    /// `0x08`: start of the data in 8-byte blocks after the dataset header.
    pub mem_start: u32,
    /// `0x0C`: end of the data in 8-byte blocks (exclusive).
    pub mem_end: u32,
    /// `0x10`: bytes of data.
    pub data_size: u32,
    /// `0x14`: packed shape: `x = [0]`, `y = [1] & 0xFFFFFF`, `z = [1] >> 24`.
    pub data_shape: [u32; 2],
    /// `0x1C`: lookup key of the indexed table (INDEX / RANGE only).
    pub index_name: u32,
    /// `0x20`: lookup key of a struct-of-arrays sibling.
    pub related_name: u32,
    /// `0x24`: lookup key of a free-form type name.
    pub type_name: u32,
    /// `0x28`: optional checksum (algorithm unspecified).
    pub checksum: u32,
    /// `0x2C`: reserved.
    pub reserved: u32,
}

/// Offsets of descriptor fields, for findings.
pub mod desc_field {
    /// Offset of `key_name` in a descriptor.
    pub const KEY_NAME: u64 = 0x00;
    /// Offset of `type_info` in a descriptor.
    pub const TYPE_INFO: u64 = 0x04;
    /// Offset of `compress_info` in a descriptor.
    pub const COMPRESS_INFO: u64 = 0x06;
    /// Offset of `mem_start` in a descriptor.
    pub const MEM_START: u64 = 0x08;
    /// Offset of `mem_end` in a descriptor.
    pub const MEM_END: u64 = 0x0C;
    /// Offset of `data_size` in a descriptor.
    pub const DATA_SIZE: u64 = 0x10;
    /// Offset of `data_shape` in a descriptor.
    pub const DATA_SHAPE: u64 = 0x14;
    /// Offset of `index_name` in a descriptor.
    pub const INDEX_NAME: u64 = 0x1C;
    /// Offset of `related_name` in a descriptor.
    pub const RELATED_NAME: u64 = 0x20;
    /// Offset of `type_name` in a descriptor.
    pub const TYPE_NAME: u64 = 0x24;
    /// Offset of `checksum` in a descriptor.
    pub const CHECKSUM: u64 = 0x28;
    /// Offset of `reserved` in a descriptor.
    pub const RESERVED: u64 = 0x2C;
}

/// String lookup entry, 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LookupEntry {
    /// `0x0`: key (usually the DJB2-xor hash of the string); never 0.
    pub hash: u32,
    /// `0x4`: byte offset in the string block.
    pub offset: u16,
    /// `0x6`: byte length (no NUL terminator).
    pub len: u16,
}

/// `type_info` bit fields: byte 0 = `x | reserved | dim(2) | prim(4)`, byte 1 = `reserved(2) | hint(6)`.
pub mod type_bits {
    /// The primitive (bits 0..3).
    pub const PRIM_MASK: u16 = 0x000F;
    /// The dimension count (bits 4..5).
    pub const DIM_MASK: u16 = 0x0030;
    /// Reserved bit 6 (must be zero).
    pub const RESERVED_BIT6: u16 = 0x0040;
    /// The primitive extension bit 7 (reserved primitives).
    pub const EXT_BIT: u16 = 0x0080;
    /// The hint (bits 8..13).
    pub const HINT_MASK: u16 = 0x3F00;
    /// Reserved bits 14..15 (must be zero).
    pub const RESERVED_HIGH: u16 = 0xC000;
}

/// Primitive element type (`type_info` bits 0..3 plus the extension bit 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Prim {
    /// `0x00`: custom interpretation (bytes; JSON tables).
    Custom,
    /// `0x02`: unsigned byte.
    U8,
    /// `0x03`: signed byte.
    I8,
    /// `0x04`: unsigned 16-bit integer.
    U16,
    /// `0x05`: signed 16-bit integer.
    I16,
    /// `0x06`: unsigned 32-bit integer.
    U32,
    /// `0x07`: signed 32-bit integer.
    I32,
    /// `0x08`: unsigned 64-bit integer.
    U64,
    /// `0x09`: signed 64-bit integer.
    I64,
    /// `0x0A`: 32-bit float.
    F32,
    /// `0x0B`: 64-bit float.
    F64,
    /// `0x01`, `0x0C..=0x0F`, or any value with the extension bit.
    Reserved(u8),
}

impl Prim {
    /// From the low byte's prim bits and extension bit.
    pub fn from_bits(prim: u8, ext: bool) -> Prim {
        if ext {
            return Prim::Reserved(prim | 0x80);
        }
        match prim {
            0x00 => Prim::Custom,
            0x02 => Prim::U8,
            0x03 => Prim::I8,
            0x04 => Prim::U16,
            0x05 => Prim::I16,
            0x06 => Prim::U32,
            0x07 => Prim::I32,
            0x08 => Prim::U64,
            0x09 => Prim::I64,
            0x0A => Prim::F32,
            0x0B => Prim::F64,
            other => Prim::Reserved(other),
        }
    }

    /// The primitive's bits in `type_info` (prim bits and extension bit).
    pub fn bits(self) -> u16 {
        match self {
            Prim::Custom => 0x00,
            Prim::U8 => 0x02,
            Prim::I8 => 0x03,
            Prim::U16 => 0x04,
            Prim::I16 => 0x05,
            Prim::U32 => 0x06,
            Prim::I32 => 0x07,
            Prim::U64 => 0x08,
            Prim::I64 => 0x09,
            Prim::F32 => 0x0A,
            Prim::F64 => 0x0B,
            Prim::Reserved(b) => (b & 0x8F) as u16,
        }
    }

    /// Element size in bytes; `None` for custom and reserved.
    pub fn size(self) -> Option<u64> {
        Some(match self {
            Prim::U8 | Prim::I8 => 1,
            Prim::U16 | Prim::I16 => 2,
            Prim::U32 | Prim::I32 | Prim::F32 => 4,
            Prim::U64 | Prim::I64 | Prim::F64 => 8,
            Prim::Custom | Prim::Reserved(_) => return None,
        })
    }

    /// Short name (`u8`, `f32`, `custom`, `reserved(0x1)`), as the spec's `TYPE_PRIM_*` names.
    pub fn name(self) -> String {
        match self {
            Prim::Custom => "custom".into(),
            Prim::U8 => "u8".into(),
            Prim::I8 => "i8".into(),
            Prim::U16 => "u16".into(),
            Prim::I16 => "i16".into(),
            Prim::U32 => "u32".into(),
            Prim::I32 => "i32".into(),
            Prim::U64 => "u64".into(),
            Prim::I64 => "i64".into(),
            Prim::F32 => "f32".into(),
            Prim::F64 => "f64".into(),
            Prim::Reserved(b) => format!("reserved(0x{b:x})"),
        }
    }

    /// Every defined primitive.
    pub const ALL: [Prim; 11] = [
        Prim::Custom,
        Prim::U8,
        Prim::I8,
        Prim::U16,
        Prim::I16,
        Prim::U32,
        Prim::I32,
        Prim::U64,
        Prim::I64,
        Prim::F32,
        Prim::F64,
    ];
}

/// Type hint (`type_info` bits 8..13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hint {
    /// 0: plain values.
    None,
    /// 1: text (UTF-8, UTF-16LE or UTF-32LE by primitive).
    Text,
    /// 2: a JSON document (custom primitive).
    Json,
    /// 3: links to datasets (`u64` offset and size pairs).
    Dataset,
    /// 4: indices into a 1-D table (`index_name`).
    Index,
    /// 5: start and end pairs into a 1-D table (`index_name`).
    Range,
    /// 6: coordinates (one ghost axis: the components).
    Coord,
    /// 7: lines (the spec leaves it TODO).
    Line,
    /// 8: transformation matrices (two ghost axes).
    Transform,
    /// 9: colours (ghost axis of 3 or 4).
    Rgb,
    /// 10..=31: reserved for future revisions.
    Reserved(u8),
    /// 32..=63: free for custom use (32 itself is ambiguous: the spec says "above 32").
    Custom(u8),
}

impl Hint {
    /// The hint of `type_info` bits 8..13.
    pub fn from_value(v: u8) -> Hint {
        match v {
            0 => Hint::None,
            1 => Hint::Text,
            2 => Hint::Json,
            3 => Hint::Dataset,
            4 => Hint::Index,
            5 => Hint::Range,
            6 => Hint::Coord,
            7 => Hint::Line,
            8 => Hint::Transform,
            9 => Hint::Rgb,
            10..=31 => Hint::Reserved(v),
            _ => Hint::Custom(v),
        }
    }

    /// The hint's value in `type_info` bits 8..13.
    pub fn value(self) -> u8 {
        match self {
            Hint::None => 0,
            Hint::Text => 1,
            Hint::Json => 2,
            Hint::Dataset => 3,
            Hint::Index => 4,
            Hint::Range => 5,
            Hint::Coord => 6,
            Hint::Line => 7,
            Hint::Transform => 8,
            Hint::Rgb => 9,
            Hint::Reserved(v) | Hint::Custom(v) => v,
        }
    }

    /// Short name (`none`, `text`, ..., `reserved(12)`, `custom(40)`).
    pub fn name(self) -> String {
        match self {
            Hint::None => "none".into(),
            Hint::Text => "text".into(),
            Hint::Json => "json".into(),
            Hint::Dataset => "dataset".into(),
            Hint::Index => "index".into(),
            Hint::Range => "range".into(),
            Hint::Coord => "coord".into(),
            Hint::Line => "line".into(),
            Hint::Transform => "transform".into(),
            Hint::Rgb => "rgb".into(),
            Hint::Reserved(v) => format!("reserved({v})"),
            Hint::Custom(v) => format!("custom({v})"),
        }
    }
}

/// DJB2-xor (`h = h * 33 ^ byte`, wrapping, seed 3581): the reference crate's name hash.
pub fn name_hash(s: &str) -> u32 {
    s.bytes().fold(HASH_SEED, |h, b| h.wrapping_mul(33) ^ b as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_matches_corpus() {
        // Values from the corpus sidecars (u01_primitives, u16_next_nonzero).
        assert_eq!(name_hash("values"), 2076833349);
        assert_eq!(name_hash("u8_1d"), 2792899194);
        assert_eq!(name_hash("custom_blob"), 2865445874);
    }

    #[test]
    fn prim_bits_round_trip() {
        for p in Prim::ALL {
            assert_eq!(Prim::from_bits(p.bits() as u8, false), p);
        }
    }
}
