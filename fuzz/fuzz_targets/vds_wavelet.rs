#![no_main]
//! VDS wavelet chunks: decode one chunk with parameters taken from the first input byte
//! (channel format, normalize / lossless method, NoValue, physical read), the brick size from
//! the chunk's own header so that decoding gets past the geometry check. Also runs the FSE
//! decoder on the raw bytes. Nothing may panic, hang or allocate past the limit.
//! Seed with the wavelet chunk vectors, each prefixed with one byte, e.g.
//! `for f in $RASTERPACK_CORPUS/vds/chunks/*Wavelet*; do (printf '\x00'; cat $f) > corpus/vds_wavelet/$(basename $f); done`.
use libfuzzer_sys::fuzz_target;
use rasterpack_vds_meta::chunk::{self, ChunkSpec};
use rasterpack_vds_meta::layout::{VdsChannel, VdsChannelMapping, VdsCompression, VdsSampleFormat};
use rasterpack_vds_meta::wavelet::{fse, WaveletScratch};

fuzz_target!(|data: &[u8]| {
    let Some((&flags, body)) = data.split_first() else { return };
    // FSE alone: expected size from the flags.
    let mut t = fse::FseTable::default();
    let mut out = vec![0u8; 1 + (flags as usize) * 17];
    let _ = fse::decompress(body, &mut out, &mut t);

    if body.len() < 24 {
        return;
    }
    let rd = |at: usize| i32::from_le_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]]);
    let dims = (rd(20) & 0xFF).clamp(1, 3) as usize;
    let mut size = [1u64; 3];
    for a in 0..dims {
        size[a] = rd(8 + 4 * a as usize).clamp(1, 512) as u64;
    }
    let format = [VdsSampleFormat::R32, VdsSampleFormat::U8, VdsSampleFormat::U16][(flags & 3) as usize % 3];
    let compression = [
        VdsCompression::Wavelet,
        VdsCompression::WaveletLossless,
        VdsCompression::WaveletNormalizeBlock,
        VdsCompression::WaveletNormalizeBlockLossless,
    ][((flags >> 2) & 3) as usize];
    let ch = VdsChannel {
        name: "A".into(),
        unit: String::new(),
        format,
        components: 1,
        value_range: [-1.0, 1.0],
        mapping: VdsChannelMapping::Direct,
        mapped_values: 1,
        discrete: false,
        renderable: true,
        allow_lossy_compression: true,
        use_no_value: flags & 16 != 0,
        no_value: 3.0,
        integer_scale: 0.01,
        integer_offset: -1.0,
    };
    let spec = ChunkSpec {
        format,
        components: 1,
        dims: 3,
        size,
        compression,
    };
    let mut ws = WaveletScratch::default();
    let mut out = Vec::new();
    let levels = [255u8, 200, 100, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let _ = chunk::decode_wavelet(body, &spec, &ch, flags & 32 != 0, Some(&levels), 16 << 20, &mut ws, &mut out);
});
