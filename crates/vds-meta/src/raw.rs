//! On-disk structures of OpenVDS storage, mirroring the bytes: the container
//! header, file table, page directories and index pages, and chunk headers.
//! These are "dumb": the parse module fills them with checked reads, validate judges them.
//! All integers are little-endian.

/// `"HueDataStore"`, the first 12 bytes of a `.vds` container (no NUL).
pub const CONTAINER_MAGIC: &[u8; 12] = b"HueDataStore";
/// Size of the container header.
pub const HEADER_LEN: u64 = 32;
/// The version OpenVDS writes (`major << 16 | minor`); OpenVDS itself checks only the magic.
pub const CONTAINER_VERSION: i32 = 0x0001_0000;
/// Fixed part of a file table entry (the name follows).
pub const FILE_ENTRY_FIXED: u64 = 32;
/// Fixed part of a page directory (previous-revision link) before the file metadata.
pub const PAGE_DIR_FIXED: u64 = 16;
/// Fixed part of an index page entry before the chunk metadata.
pub const INDEX_ENTRY_FIXED: u64 = 16;

/// FourCC file types, as the 4 bytes appear in the file.
pub const FILE_TYPE_JSON: [u8; 4] = *b"JSON";
/// A layer file (chunks of one layer).
pub const FILE_TYPE_VDS: [u8; 4] = *b"VDS ";
/// A plain object (e.g. `LayerStatus`).
pub const FILE_TYPE_OBJ: [u8; 4] = *b"OBJ ";

/// Container header at offset 0 (32 bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerHeader {
    /// @0, 12 bytes: `HueDataStore`.
    pub magic: [u8; 12],
    /// @12 i32: `0x00010000`.
    pub version: i32,
    /// @16 i64: where the file table starts.
    pub file_table_offset: i64,
    /// @24 i32: number of file table entries.
    pub file_count: i32,
    /// @28 i32: width of the name field of every entry (a multiple of 8).
    pub file_name_length: i32,
}

/// One file table entry (`32 + fileNameLength` bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// Absolute offset of the entry itself (for findings).
    pub entry_offset: u64,
    /// @0 i64: head page directory; 0 = the file cannot be opened.
    pub head_page_directory_offset: i64,
    /// @8 i32: chunks in the head revision.
    pub head_chunk_count: i32,
    /// @12 i32: head revision number.
    pub head_revision: i32,
    /// @16 i32: entries per index page.
    pub index_page_entry_count: i32,
    /// @20: FourCC, bytes in reading order (`JSON`, `VDS `, `OBJ `).
    pub file_type: [u8; 4],
    /// @24 i32: bytes of per-chunk metadata in each index entry.
    pub chunk_metadata_length: i32,
    /// @28 i32: bytes of per-file metadata in each page directory.
    pub file_metadata_length: i32,
    /// @32: the name, up to the first NUL or the field end.
    pub name: Vec<u8>,
}

impl FileEntry {
    /// The file name, with invalid UTF-8 replaced.
    pub fn name_lossy(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }
}

/// A page directory: the head (or an older revision) of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageDirectory {
    /// Absolute offset of the directory.
    pub offset: u64,
    /// @0 i64: previous revision's page directory (0 = none).
    pub prev_page_dir_offset: i64,
    /// @8 i32: previous revision's chunk count.
    pub prev_chunk_count: i32,
    /// @12 i32: previous revision number.
    pub prev_revision: i32,
    /// @16: `fileMetadataLength` bytes of file metadata.
    pub file_metadata: Vec<u8>,
    /// Then `ceil(chunkCount / indexPageEntryCount)` i64 index page offsets (0 = never written).
    pub index_page_offsets: Vec<i64>,
    /// Absolute offset of the index page offset array.
    pub index_offsets_at: u64,
}

/// One index entry: where a chunk's bytes are and its metadata.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IndexEntry {
    /// @0 i64: absolute offset of the chunk bytes (0 with length 0: nothing stored).
    pub offset: i64,
    /// @8 i32: number of bytes.
    pub length: i32,
    /// @12 i32: reserved, 0.
    pub reserved: i32,
    /// @16: `chunkMetadataLength` bytes (u64 hash, then 16 wavelet level bytes when 24 long).
    pub metadata: Vec<u8>,
    /// Absolute offset of the entry (0 when its index page was never written).
    pub entry_offset: u64,
}

/// Layer file metadata (12 bytes, or 152 for wavelet-adaptive layers).
#[derive(Debug, Clone, PartialEq)]
pub struct LayerFileMetadata {
    /// @0 i32: 0 None, 1 Wavelet, 2 RLE, 3 Zip, 4 WaveletNormalizeBlock, 5 WaveletLossless,
    /// 6 WaveletNormalizeBlockLossless.
    pub compression_method: i32,
    /// @4 f32.
    pub tolerance: f32,
    /// @8 i32: chunks with a non-zero hash (constants included).
    pub valid_chunk_count: i32,
    /// 152-byte form only: @16 i64.
    pub uncompressed_size: Option<i64>,
    /// 152-byte form only: @24 16 x i64.
    pub adaptive_level_sizes: Option<[i64; 16]>,
}

/// The 24-byte DataBlockDescriptor at the start of every non-wavelet chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataBlockDescriptor {
    /// @0: 1..3.
    pub dimensionality: i32,
    /// @4, @8, @12: voxels along the chunk dims (margins included), unused = 1.
    pub size: [i32; 3],
    /// @16: 0 1Bit, 1 U8, 2 U16, 3 R32, 4 U32, 5 R64, 6 U64.
    pub format: i32,
    /// @20: 1, 2 or 4.
    pub components: i32,
}

/// The 12-byte RLE header after the descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RleHeader {
    /// @0: bytes from the start of this header.
    pub compressed_size: i32,
    /// @4: decoded bytes.
    pub original_size: i32,
    /// @8: bytes per run unit (1, 2, 4 or 8).
    pub unit_size: i32,
}

/// The 24-byte header of a wavelet chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaveletHeader {
    /// @0: 671..673.
    pub version: i32,
    /// @4: the object's size.
    pub compressed_size: i32,
    /// @8, @12, @16: each <= 512.
    pub size: [i32; 3],
    /// @20 low byte.
    pub dimensions: i32,
    /// @20 bits 8..: 1 integer, 2 lossless-optimised, 4 diff-pass, 8 16-bit.
    pub integer_info: i32,
}

/// Special chunk hashes: 0 for a chunk never written (it reads as the unwritten element).
pub const HASH_UNWRITTEN: u64 = 0;
/// Hash of a chunk whose voxels are all the channel's no-value.
pub const HASH_NOVALUE: u64 = u64::MAX;
/// High 32 bits of the hash of a constant chunk (the low 32 bits are the f32 value).
pub const HASH_CONSTANT_TAG: u32 = 0x0101_0101;
