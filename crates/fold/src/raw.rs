//! On-disk structures of a FOLD (`.fold` / `.mind`) file, as pyfolds 1.0.2 writes them.
//!
//! ```text
//! offset 0   file header (28 bytes, big-endian)
//! offset 28  chunks back to back: chunk header (32 bytes) + stored payload + ECC bytes
//! index_off  JSON index (index_len bytes), normally the end of the file
//! ```

/// `FOLDv1\0\0`.
pub const MAGIC: [u8; 8] = *b"FOLDv1\0\0";
/// Size of the file header, and the only valid `header_len`.
pub const HEADER_LEN: u64 = 28;
/// Size of a chunk header (`header_len` of every index entry).
pub const CHUNK_HEADER_LEN: u64 = 32;
/// The spec's MAX_INDEX_SIZE.
pub const MAX_INDEX_SIZE: u64 = 100 * 1024 * 1024;
/// The spec's MAX_CHUNK_SIZE (pyfolds uses 2 GiB; rasterpack follows the spec).
pub const MAX_CHUNK_SIZE: u64 = 1024 * 1024 * 1024;
/// Chunk flag: stored as is.
pub const FLAG_NONE: u32 = 0;
/// Chunk flag: zstd frame(s).
pub const FLAG_ZSTD: u32 = 1;
/// Index versions pyfolds knows.
pub const KNOWN_VERSIONS: [&str; 3] = ["1.0.0", "1.1.0", "1.2.0"];

/// File header (`>8sIQQ`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    /// Offset 0, 8 bytes: `FOLDv1\0\0`.
    pub magic: [u8; 8],
    /// Offset 8, u32: must be 28.
    pub header_len: u32,
    /// Offset 12, u64: absolute offset of the JSON index (0 = never finalized).
    pub index_off: u64,
    /// Offset 20, u64: length of the JSON index.
    pub index_len: u64,
}

/// Chunk header (`>4sIQQII`), at the entry's `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    /// +0, 4 bytes: ASCII type code (`JSON`, `NPZ0`, `TSAV`, any other is opaque).
    pub ctype: [u8; 4],
    /// +4, u32: 0 none, 1 zstd.
    pub flags: u32,
    /// +8, u64: length after decompression.
    pub uncomp_len: u64,
    /// +16, u64: length of the stored payload that follows the header.
    pub comp_len: u64,
    /// +24, u32: CRC32C of the stored payload.
    pub crc32c: u32,
    /// +28, u32: length of the ECC bytes after the payload.
    pub ecc_len: u32,
}

impl ChunkHeader {
    /// The type code for people (ASCII as is, other bytes escaped).
    pub fn ctype_str(&self) -> String {
        ctype_display(&self.ctype)
    }
}

/// A 4-byte type code for people: ASCII as is, other bytes escaped.
pub fn ctype_display(c: &[u8]) -> String {
    c.iter()
        .flat_map(|&b| std::ascii::escape_default(b))
        .map(|b| b as char)
        .collect()
}

impl FileHeader {
    /// The 28 bytes of the header.
    pub fn to_bytes(&self) -> [u8; 28] {
        let mut b = [0u8; 28];
        b[..8].copy_from_slice(&self.magic);
        b[8..12].copy_from_slice(&self.header_len.to_be_bytes());
        b[12..20].copy_from_slice(&self.index_off.to_be_bytes());
        b[20..28].copy_from_slice(&self.index_len.to_be_bytes());
        b
    }
    /// The header from its 28 bytes.
    pub fn from_bytes(b: &[u8; 28]) -> FileHeader {
        let mut magic = [0u8; 8];
        magic.copy_from_slice(&b[..8]);
        FileHeader {
            magic,
            header_len: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            index_off: u64::from_be_bytes([b[12], b[13], b[14], b[15], b[16], b[17], b[18], b[19]]),
            index_len: u64::from_be_bytes([b[20], b[21], b[22], b[23], b[24], b[25], b[26], b[27]]),
        }
    }
}

impl ChunkHeader {
    /// The 32 bytes of the chunk header.
    pub fn to_bytes(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        b[..4].copy_from_slice(&self.ctype);
        b[4..8].copy_from_slice(&self.flags.to_be_bytes());
        b[8..16].copy_from_slice(&self.uncomp_len.to_be_bytes());
        b[16..24].copy_from_slice(&self.comp_len.to_be_bytes());
        b[24..28].copy_from_slice(&self.crc32c.to_be_bytes());
        b[28..32].copy_from_slice(&self.ecc_len.to_be_bytes());
        b
    }
    /// The chunk header from its 32 bytes.
    pub fn from_bytes(b: &[u8; 32]) -> ChunkHeader {
        let u64_at = |o: usize| {
            u64::from_be_bytes([
                b[o],
                b[o + 1],
                b[o + 2],
                b[o + 3],
                b[o + 4],
                b[o + 5],
                b[o + 6],
                b[o + 7],
            ])
        };
        let u32_at = |o: usize| u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        ChunkHeader {
            ctype: [b[0], b[1], b[2], b[3]],
            flags: u32_at(4),
            uncomp_len: u64_at(8),
            comp_len: u64_at(16),
            crc32c: u32_at(24),
            ecc_len: u32_at(28),
        }
    }
}
