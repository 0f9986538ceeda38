//! GVRS compression codecs (owned by the codec work): GvrsHuffman, GvrsDeflate (with the four
//! predictors and M32), GvrsFloat and LSOP12. INTERFACE STUB: bodies are filled in by the codec
//! owner; the signatures are the contract with the reader and writer.

use rasterpack_common::{Error, Result};

/// A codec named in the header's codec list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    Huffman,
    Deflate,
    Float,
    Lsop12,
}

impl Codec {
    /// The codec for a name in the header's codec list, `None` when rasterpack does not implement it.
    pub fn from_name(name: &str) -> Option<Codec> {
        match name {
            "GvrsHuffman" => Some(Codec::Huffman),
            "GvrsDeflate" => Some(Codec::Deflate),
            "GvrsFloat" => Some(Codec::Float),
            "LSOP12" => Some(Codec::Lsop12),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Codec::Huffman => "GvrsHuffman",
            Codec::Deflate => "GvrsDeflate",
            Codec::Float => "GvrsFloat",
            Codec::Lsop12 => "LSOP12",
        }
    }
}

/// Decode a compressed integer block (`block` = the whole stored block, byte 0 being the codec
/// index the caller already resolved to `codec`) into `out` (`rows * cols` cells, row-major).
/// Error offsets are relative to the block start.
pub fn decode_int(codec: Codec, block: &[u8], rows: usize, cols: usize, out: &mut [i32]) -> Result<()> {
    let _ = (block, rows, cols, out);
    Err(Error::unsupported("gvrs.codec.unsupported", Some(0), format!("{} decoding not implemented yet", codec.name())))
}

/// Decode a compressed float block into `out` (`rows * cols` cells).
pub fn decode_float(codec: Codec, block: &[u8], rows: usize, cols: usize, out: &mut [f32]) -> Result<()> {
    let _ = (block, rows, cols, out);
    Err(Error::unsupported("gvrs.codec.unsupported", Some(0), format!("{} decoding not implemented yet", codec.name())))
}

/// Try each `(codec index in the file's list, codec)` and return the smallest block (byte 0 =
/// that index), or `None` when no block is strictly smaller than the uncompressed `cells * 4`.
pub fn encode_int(values: &[i32], rows: usize, cols: usize, codecs: &[(u8, Codec)]) -> Option<Vec<u8>> {
    let _ = (values, rows, cols, codecs);
    None
}

/// As [`encode_int`] for float elements.
pub fn encode_float(values: &[f32], rows: usize, cols: usize, codecs: &[(u8, Codec)]) -> Option<Vec<u8>> {
    let _ = (values, rows, cols, codecs);
    None
}
