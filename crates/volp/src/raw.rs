//! The bytes of a VOLP file, as laid out on disk (spec section 1).
//!
//! ```text
//! offset 0  size 4   magic        ASCII "VOLP"
//! offset 4  size 4   header_len   u32 little-endian, byte length of the JSON header (1..=1 MiB)
//! offset 8  size N   header       UTF-8 JSON object (no BOM, no NUL terminator)
//! offset 8+N ...     body         one or more zstd frames (skippable frames allowed), nothing after
//! ```

/// File magic at offset 0.
pub const MAGIC: [u8; 4] = *b"VOLP";
/// Magic plus header length.
pub const PREFIX_LEN: usize = 8;
/// Largest header length allowed (inclusive), spec section 5.
pub const MAX_HEADER_LEN: u32 = 1 << 20;
/// Largest decoded body allowed (inclusive), spec section 5.
pub const MAX_BODY_LEN: u64 = 256 << 20;

/// zstd frame magic number (RFC 8878 section 3.1.1), little-endian on disk.
pub const ZSTD_FRAME_MAGIC: u32 = 0xFD2F_B528;
/// Skippable frames use the magics 0x184D2A50..=0x184D2A5F (RFC 8878 section 3.1.2), followed by
/// a u32 little-endian length and that many bytes of user data.
pub const SKIPPABLE_MAGIC_BASE: u32 = 0x184D_2A50;
/// A magic `m` is a skippable frame's when `m & SKIPPABLE_MAGIC_MASK == SKIPPABLE_MAGIC_BASE`.
pub const SKIPPABLE_MAGIC_MASK: u32 = 0xFFFF_FFF0;

/// The fixed 8-byte prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawPrefix {
    /// Offset 0: the four magic bytes as found.
    pub magic: [u8; 4],
    /// Offset 4: declared header length in bytes.
    pub header_len: u32,
}

/// Header keys with a meaning in the spec; every other key is "unknown" and ignored.
pub const KNOWN_KEYS: [&str; 10] = [
    "version",
    "shape",
    "dtype",
    "compression",
    "scale",
    "offset",
    "bbox",
    "levels",
    "variable",
    "valid_time",
];
