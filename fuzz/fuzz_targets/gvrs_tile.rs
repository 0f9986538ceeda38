#![no_main]
//! GVRS tile blocks through the codec API: the first bytes choose the codec, the element kind
//! and the tile size; the rest is the stored block (byte 0 = codec index, as in a file). Covers
//! GvrsCanonicalHuffman and both LSOP12 headers (legacy and revised, canonical residuals).
use libfuzzer_sys::fuzz_target;
use rasterpack_gvrs::codec::{self, Codec};

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let codec = [
        Codec::Huffman,
        Codec::Deflate,
        Codec::Float,
        Codec::Lsop12,
        Codec::CanonicalHuffman,
        Codec::CanonicalHuffman,
        Codec::Lsop12,
        Codec::Lsop12,
    ][(data[0] & 7) as usize];
    let rows = 1 + (data[1] % 64) as usize;
    let cols = 1 + (data[2] % 64) as usize;
    let block = &data[3..];
    if data[0] & 8 != 0 {
        let mut out = vec![0f32; rows * cols];
        let _ = codec::decode_float(codec, block, rows, cols, &mut out);
    } else {
        let mut out = vec![0i32; rows * cols];
        let _ = codec::decode_int(codec, block, rows, cols, &mut out);
    }
});
