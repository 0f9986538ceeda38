//! Chunk metadata (hashes, wavelet adaptive levels) and chunk serialization (a 24-byte
//! header, the `DataBlockDescriptor`, then the payload): the DataBlockDescriptor, None / RLE / Zip payloads decoded into buffers of exactly
//! the size the geometry gives (never more: zlib bombs stop at the expected size), wavelet
//! chunks through [`crate::wavelet`], and value conversions (U8/U16 dequantization, NoValue,
//! constants).

use rasterpack_common::{Error, Result};

use crate::layout::{VdsChannel, VdsCompression, VdsSampleFormat};
use crate::raw::{DataBlockDescriptor, RleHeader, WaveletHeader, HASH_CONSTANT_TAG, HASH_NOVALUE, HASH_UNWRITTEN};
use crate::wavelet::{self, WaveletInfo, WaveletParams, WaveletScratch};

/// What a chunk's hash says about it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum VdsChunkStatus {
    /// Hash 0: never written.
    Unwritten,
    /// All voxels NoValue (hash all ones).
    NoValue,
    /// Every voxel equals this value (high 32 bits 0x01010101).
    Constant(f32),
    /// Stored data.
    Data,
}

impl VdsChunkStatus {
    /// The status a chunk hash stands for.
    pub fn from_hash(h: u64) -> Self {
        if h == HASH_UNWRITTEN {
            Self::Unwritten
        } else if h == HASH_NOVALUE {
            Self::NoValue
        } else if (h >> 32) as u32 == HASH_CONSTANT_TAG {
            Self::Constant(f32::from_bits(h as u32))
        } else {
            Self::Data
        }
    }
    /// The status's name in summaries and findings (`unwritten`, `no_value`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Unwritten => "unwritten",
            Self::NoValue => "novalue",
            Self::Constant(_) => "constant",
            Self::Data => "data",
        }
    }
}

/// Byte sizes of the wavelet adaptive levels: `size0 = total * L[0] / 255`,
/// `size_k = size_{k-1} * L[k] / 255`, stopping at the first 0.
pub fn adaptive_level_sizes(total: u64, levels: &[u8; 16]) -> Vec<u64> {
    let mut out = Vec::new();
    let mut prev = total;
    for &l in levels {
        if l == 0 {
            break;
        }
        prev = prev.saturating_mul(l as u64) / 255;
        out.push(prev);
    }
    out
}

/// What the geometry says a chunk must look like.
#[derive(Debug, Clone, Copy)]
pub struct ChunkSpec {
    /// Sample format of the channel.
    pub format: VdsSampleFormat,
    /// Components per voxel (1, 2 or 4).
    pub components: u32,
    /// Number of chunk dims (descriptor dimensionality).
    pub dims: usize,
    /// Voxels along each chunk dim (stored size, margins included; 1 past `dims`).
    pub size: [u64; 3],
    /// The layer's compression method.
    pub compression: VdsCompression,
}

impl ChunkSpec {
    /// Voxels in the chunk (`None` when the declared sizes overflow u64).
    pub fn voxels(&self) -> Option<u64> {
        self.size.iter().try_fold(1u64, |a, &s| a.checked_mul(s))
    }
    /// Serialized payload bytes (1-bit packed per row).
    pub fn payload_len(&self) -> Option<u64> {
        if self.format == VdsSampleFormat::Bit1 {
            self.size[0]
                .div_ceil(8)
                .checked_mul(self.size[1])?
                .checked_mul(self.size[2])
        } else {
            self.voxels()?
                .checked_mul(self.format.native_bytes() as u64)?
                .checked_mul(self.components as u64)
        }
    }
    /// RLE unit: the element size when 1, 2, 4 or 8, else the component size.
    pub fn rle_unit(&self) -> u64 {
        if self.format == VdsSampleFormat::Bit1 {
            return 1;
        }
        let e = self.format.native_bytes() as u64 * self.components as u64;
        if matches!(e, 1 | 2 | 4 | 8) {
            e
        } else {
            self.format.native_bytes() as u64
        }
    }
}

fn rd_i32(b: &[u8], at: usize) -> i32 {
    i32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Parse the 24-byte DataBlockDescriptor.
pub fn parse_descriptor(b: &[u8]) -> Result<DataBlockDescriptor> {
    if b.len() < 24 {
        return Err(Error::new(
            rasterpack_common::ErrorKind::Invalid,
            "vds.chunk.truncated",
            Some(0),
            format!("chunk of {} bytes is shorter than its 24-byte descriptor", b.len()),
        ));
    }
    Ok(DataBlockDescriptor {
        dimensionality: rd_i32(b, 0),
        size: [rd_i32(b, 4), rd_i32(b, 8), rd_i32(b, 12)],
        format: rd_i32(b, 16),
        components: rd_i32(b, 20),
    })
}

/// Check a descriptor against the geometry and the channel.
pub fn check_descriptor(d: &DataBlockDescriptor, spec: &ChunkSpec) -> Result<()> {
    let want_size = spec.size.map(|s| s as i64);
    let got_size = d.size.map(|s| s as i64);
    if d.dimensionality as i64 != spec.dims as i64 || got_size != want_size {
        return Err(Error::invalid(
            "vds.chunk.descriptor_geometry",
            0,
            format!(
                "chunk descriptor says {}-D {:?}, the layer's geometry needs {}-D {:?}",
                d.dimensionality, d.size, spec.dims, spec.size
            ),
        ));
    }
    if d.format != spec.format.code() || d.components as i64 != spec.components as i64 {
        return Err(Error::invalid(
            "vds.chunk.descriptor_format",
            16,
            format!(
                "chunk descriptor says format {} x{} components, the channel is {} x{}",
                d.format,
                d.components,
                spec.format.name(),
                spec.components
            ),
        ));
    }
    Ok(())
}

/// How a chunk of a wavelet layer decodes: the channel's format, value conversion and NoValue,
/// the method's normalization / lossless flags, and the brick from the geometry.
pub fn wavelet_params(
    ch: &VdsChannel,
    spec: &ChunkSpec,
    destination: VdsSampleFormat,
    max_alloc: u64,
) -> WaveletParams {
    WaveletParams {
        // Four lists of at most 16 bytes per entry stay within the allocation limit.
        max_list_entries: usize::try_from(max_alloc / 64).unwrap_or(usize::MAX),
        format: ch.format,
        destination,
        normalize: matches!(
            spec.compression,
            VdsCompression::WaveletNormalizeBlock | VdsCompression::WaveletNormalizeBlockLossless
        ),
        lossless: matches!(
            spec.compression,
            VdsCompression::WaveletLossless | VdsCompression::WaveletNormalizeBlockLossless
        ),
        value_range: [ch.value_range[0] as f32, ch.value_range[1] as f32],
        integer_scale: ch.integer_scale as f32,
        integer_offset: ch.integer_offset as f32,
        use_no_value: ch.use_no_value,
        no_value: ch.no_value as f32,
        size: spec.size,
    }
}

/// Decode a wavelet chunk at full quality into `out` (X fastest; `physical` asks for R32,
/// which integer streams answer with their codes: see [`WaveletInfo::format`]) and, when
/// `levels` is given, check the chunk's adaptive-level table against the body.
#[allow(clippy::too_many_arguments)]
pub fn decode_wavelet(
    bytes: &[u8],
    spec: &ChunkSpec,
    ch: &VdsChannel,
    physical: bool,
    levels: Option<&[u8; 16]>,
    max_alloc: u64,
    scratch: &mut WaveletScratch,
    out: &mut Vec<u8>,
) -> Result<WaveletInfo> {
    if spec.components != 1 {
        return Err(Error::invalid(
            "vds.chunk.wavelet_components",
            0,
            format!(
                "wavelet data in a channel of {} components (OpenVDS needs 1)",
                spec.components
            ),
        ));
    }
    // The decoder's working picture: f32 at a pitch rounded up to 8 (sizes are capped at 512).
    let picture = spec
        .size
        .iter()
        .map(|&s| if s <= 1 { s } else { (s + 7) & !7 })
        .try_fold(4u64, |a, s| a.checked_mul(s))
        .unwrap_or(u64::MAX);
    if picture > max_alloc {
        return Err(Error::limit(
            "limit.alloc",
            None,
            format!("wavelet brick of {picture} bytes exceeds the limit"),
        ));
    }
    let destination = if physical { VdsSampleFormat::R32 } else { ch.format };
    let info = wavelet::decode(bytes, &wavelet_params(ch, spec, destination, max_alloc), scratch, out)?;
    if let Some(levels) = levels.filter(|l| l[0] != 0) {
        if let Some(msg) = wavelet::check_levels(&info, bytes.len() as u64, levels) {
            return Err(Error::invalid_at("vds.chunk.levels_mismatch", None, msg));
        }
    }
    Ok(info)
}

/// Decode a non-wavelet chunk into its serialized payload (1-bit still packed), written into
/// `out` (resized to exactly the payload size). Returns the payload's start in `bytes` instead
/// (without copying) for uncompressed chunks.
pub fn decode_payload(bytes: &[u8], spec: &ChunkSpec, max_alloc: u64, out: &mut Vec<u8>) -> Result<Option<usize>> {
    if spec.compression.is_wavelet() {
        return Err(Error::usage("wavelet chunks are decoded with decode_wavelet"));
    }
    let d = parse_descriptor(bytes)?;
    check_descriptor(&d, spec)?;
    let want = spec
        .payload_len()
        .ok_or_else(|| Error::invalid_at("vds.chunk.size", None, "chunk payload size overflows"))?;
    if want > max_alloc {
        return Err(Error::limit(
            "limit.alloc",
            None,
            format!("chunk payload of {want} bytes exceeds the limit"),
        ));
    }
    let body = &bytes[24..];
    match spec.compression {
        VdsCompression::None => {
            if body.len() as u64 != want {
                return Err(Error::invalid(
                    "vds.chunk.size",
                    24,
                    format!(
                        "uncompressed chunk holds {} payload bytes, the descriptor needs {want}",
                        body.len()
                    ),
                ));
            }
            Ok(Some(24))
        }
        VdsCompression::Zip => {
            // Every byte is overwritten by a successful decode: keep old contents, no memset.
            out.resize(want as usize, 0);
            zip_decode(body, out).map_err(|e| e.shifted(24))?;
            Ok(None)
        }
        VdsCompression::RLE => {
            let unit = check_rle_header(body, want, spec)?;
            out.resize(want as usize, 0);
            rle_decode(&body[12..], unit, out).map_err(|e| e.shifted(36))?;
            Ok(None)
        }
        _ => Err(Error::usage("wavelet chunks are decoded with decode_wavelet")),
    }
}

/// Check the 12-byte RLE header after the descriptor; returns the unit size.
fn check_rle_header(body: &[u8], want: u64, spec: &ChunkSpec) -> Result<usize> {
    if body.len() < 12 {
        return Err(Error::invalid(
            "vds.chunk.rle_header",
            24,
            "RLE chunk shorter than its 12-byte header",
        ));
    }
    let h = RleHeader {
        compressed_size: rd_i32(body, 0),
        original_size: rd_i32(body, 4),
        unit_size: rd_i32(body, 8),
    };
    if h.compressed_size < 12 || h.compressed_size as u64 != body.len() as u64 {
        return Err(Error::invalid(
            "vds.chunk.rle_header",
            24,
            format!(
                "RLE compressedSize {} does not match the {} bytes after the descriptor",
                h.compressed_size,
                body.len()
            ),
        ));
    }
    if h.original_size as i64 != want as i64 {
        return Err(Error::invalid(
            "vds.chunk.rle_header",
            28,
            format!(
                "RLE originalSize {} differs from the descriptor's {want} bytes",
                h.original_size
            ),
        ));
    }
    if h.unit_size as i64 != spec.rle_unit() as i64 {
        return Err(Error::invalid(
            "vds.chunk.rle_header",
            32,
            format!(
                "RLE unit size {} (expected {} for this format)",
                h.unit_size,
                spec.rle_unit()
            ),
        ));
    }
    Ok(h.unit_size as usize)
}

/// Decode an RLE chunk (descriptor and header checked as in [`decode_payload`]) straight into
/// rows of a larger buffer: the payload's bytes `[k * row_len, (k + 1) * row_len)` go to
/// `out[starts[k]..]`. Saves a copy when a whole brick lands in the output.
pub fn decode_rle_rows(bytes: &[u8], spec: &ChunkSpec, out: &mut [u8], row_len: usize, starts: &[usize]) -> Result<()> {
    let d = parse_descriptor(bytes)?;
    check_descriptor(&d, spec)?;
    let want = spec
        .payload_len()
        .ok_or_else(|| Error::invalid_at("vds.chunk.size", None, "chunk payload size overflows"))?;
    if spec.format == VdsSampleFormat::Bit1
        || spec.compression != VdsCompression::RLE
        || want != (row_len * starts.len()) as u64
    {
        return Err(Error::usage("decode_rle_rows: rows do not cover the payload"));
    }
    let unit = check_rle_header(&bytes[24..], want, spec)?;
    rle_decode_rows(&bytes[36..], unit, out, row_len, starts).map_err(|e| e.shifted(36))
}

/// Inflate a zlib stream (Adler-32 checked) into exactly `out.len()` bytes: an error if it
/// holds more (never written past the buffer: zlib bombs stop here) or fewer.
pub fn zip_decode(src: &[u8], out: &mut [u8]) -> Result<()> {
    use flate2::{Decompress, FlushDecompress, Status};
    let mut d = Decompress::new(true);
    let corrupt = |d: &Decompress, e: flate2::DecompressError| {
        Error::invalid(
            "vds.chunk.zip_corrupt",
            d.total_in(),
            format!("zlib stream is corrupt ({e})"),
        )
    };
    let st = d
        .decompress(src, out, FlushDecompress::Finish)
        .map_err(|e| corrupt(&d, e))?;
    let mut ended = st == Status::StreamEnd;
    if !ended && d.total_out() == out.len() as u64 {
        // The buffer is full: the stream must end here without producing anything more.
        let mut probe = [0u8; 1];
        let at = d.total_in() as usize;
        let st = d
            .decompress(&src[at.min(src.len())..], &mut probe, FlushDecompress::Finish)
            .map_err(|e| corrupt(&d, e))?;
        if d.total_out() > out.len() as u64 {
            return Err(Error::invalid(
                "vds.chunk.zip_size",
                0,
                format!("zlib stream inflates to more than the descriptor's {} bytes", out.len()),
            ));
        }
        ended = st == Status::StreamEnd;
    }
    if !ended {
        return Err(Error::invalid(
            "vds.chunk.zip_truncated",
            d.total_in(),
            "zlib stream ends early",
        ));
    }
    if d.total_out() != out.len() as u64 {
        return Err(Error::invalid(
            "vds.chunk.zip_size",
            0,
            format!(
                "zlib stream inflates to {} bytes, the descriptor needs {}",
                d.total_out(),
                out.len()
            ),
        ));
    }
    if d.total_in() != src.len() as u64 {
        return Err(Error::invalid(
            "vds.chunk.zip_trailing",
            d.total_in(),
            format!(
                "{} bytes after the end of the zlib stream",
                src.len() as u64 - d.total_in()
            ),
        ));
    }
    Ok(())
}

/// Decode RLE runs until `out` is full; a run past the end, a short input or left-over input
/// is an error.
pub fn rle_decode(src: &[u8], unit: usize, out: &mut [u8]) -> Result<()> {
    let n = out.len();
    rle_decode_rows(src, unit, out, n, &[0])
}

/// [`rle_decode`] into rows: logical byte `k * row_len + j` goes to `out[starts[k] + j]`.
/// `row_len` must be a multiple of `unit` (it is a whole number of elements).
pub fn rle_decode_rows(src: &[u8], unit: usize, out: &mut [u8], row_len: usize, starts: &[usize]) -> Result<()> {
    if unit == 0 || (!row_len.is_multiple_of(unit) && starts.len() > 1) {
        return Err(Error::invalid(
            "vds.chunk.rle_run",
            0,
            format!("RLE unit size {unit} does not divide the rows"),
        ));
    }
    if starts
        .iter()
        .any(|&s| s.checked_add(row_len).is_none_or(|e| e > out.len()))
    {
        return Err(Error::usage("RLE rows outside the output"));
    }
    let n = row_len * starts.len();
    let mut i = 0usize;
    let mut o = 0usize;
    // The output position `o` as (row, offset in the row), advanced without divisions.
    let (mut row, mut col) = (0usize, 0usize);
    while o < n {
        let Some(&u0) = src.get(i) else {
            return Err(Error::invalid(
                "vds.chunk.rle_truncated",
                i as u64,
                format!("RLE data ends after {o} of {n} bytes"),
            ));
        };
        i += 1;
        let mut run = (u0 & 0x3F) as usize;
        if u0 & 0x80 != 0 {
            let Some(&u1) = src.get(i) else {
                return Err(Error::invalid(
                    "vds.chunk.rle_truncated",
                    i as u64,
                    "RLE run length cut short",
                ));
            };
            i += 1;
            run |= (u1 as usize) << 6;
        }
        run += 1;
        let bytes = run * unit;
        if bytes > n - o {
            return Err(Error::invalid(
                "vds.chunk.rle_run",
                (i - 1) as u64,
                format!("RLE run of {run} units overruns the {n}-byte chunk at {o}"),
            ));
        }
        let literal = u0 & 0x40 != 0;
        let take = if literal { bytes } else { unit };
        let Some(data) = src.get(i..i + take) else {
            return Err(Error::invalid("vds.chunk.rle_truncated", i as u64, "RLE run cut short"));
        };
        i += take;
        // Write the run, split at row ends (rows hold whole units, so patterns stay in phase).
        let mut done = 0;
        while done < bytes {
            let len = (row_len - col).min(bytes - done);
            let at = starts[row] + col;
            let dst = &mut out[at..at + len];
            if literal {
                dst.copy_from_slice(&data[done..done + len]);
            } else if unit == 1 {
                dst.fill(data[0]);
            } else {
                for c in dst.chunks_exact_mut(unit) {
                    c.copy_from_slice(data);
                }
            }
            done += len;
            col += len;
            if col == row_len {
                col = 0;
                row += 1;
            }
        }
        o += bytes;
    }
    if i != src.len() {
        return Err(Error::invalid(
            "vds.chunk.rle_trailing",
            i as u64,
            format!("{} bytes after the last RLE run", src.len() - i),
        ));
    }
    Ok(())
}

/// Parse the 24-byte wavelet header (for reports; [`decode_wavelet`] checks it).
pub fn parse_wavelet_header(b: &[u8]) -> Result<WaveletHeader> {
    if b.len() < 24 {
        return Err(Error::invalid(
            "vds.chunk.wavelet_header",
            0,
            format!("wavelet chunk of {} bytes is shorter than its header", b.len()),
        ));
    }
    let w = rd_i32(b, 20);
    Ok(WaveletHeader {
        version: rd_i32(b, 0),
        compressed_size: rd_i32(b, 4),
        size: [rd_i32(b, 8), rd_i32(b, 12), rd_i32(b, 16)],
        dimensions: w & 0xFF,
        integer_info: w >> 8,
    })
}

/// The native value of a constant chunk (its hash is `0x01010101` in the high 32 bits, the f32 value in the low 32), little-endian bytes.
pub fn constant_native(ch: &VdsChannel, v: f32) -> Vec<u8> {
    let one = match ch.format {
        VdsSampleFormat::Bit1 => vec![u8::from(v >= 0.5)],
        VdsSampleFormat::U8 => vec![quantize(ch, v) as u8],
        VdsSampleFormat::U16 => (quantize(ch, v) as u16).to_le_bytes().to_vec(),
        VdsSampleFormat::R32 => v.to_le_bytes().to_vec(),
        VdsSampleFormat::R64 => (v as f64).to_le_bytes().to_vec(),
        VdsSampleFormat::U32 => {
            let x = v + 0.5;
            // OpenVDS converts through a float-to-int cast: values at or past 2^32 wrap to 0.
            let u = if x.is_nan() || x <= 0.0 || x >= 4_294_967_296.0 {
                0
            } else {
                x as u32
            };
            u.to_le_bytes().to_vec()
        }
        VdsSampleFormat::U64 => {
            let x = v + 0.5;
            // As for U32: at or past 2^64 (e.g. a stored f32 of all ones) OpenVDS reads 0.
            let u = if x.is_nan() || x <= 0.0 || x >= 18_446_744_073_709_551_616.0 {
                0
            } else {
                x as u64
            };
            u.to_le_bytes().to_vec()
        }
    };
    one.repeat(ch.components as usize)
}

/// The element an unwritten chunk reads as: the NoValue code/value in `useNoValue` channels,
/// else the code that quantizes 0.0 in U8/U16 channels (what OpenVDS 3.4.9 returns) and 0 in other
/// formats; physical values read 0.0 (`noValue` with NoValue).
pub fn unwritten_element(ch: &VdsChannel, physical: bool) -> Vec<u8> {
    match (physical, ch.use_no_value) {
        (true, true) => (ch.no_value as f32).to_le_bytes().repeat(ch.components as usize),
        (true, false) => 0f32.to_le_bytes().repeat(ch.components as usize),
        (false, true) => novalue_native(ch),
        (false, false) => match ch.format {
            VdsSampleFormat::U8 | VdsSampleFormat::U16 => constant_native(ch, 0.0),
            _ => vec![0u8; ch.format.native_bytes() * ch.components as usize],
        },
    }
}

/// The native value of NoValue voxels (NoValue chunks; unwritten chunks of useNoValue channels).
pub fn novalue_native(ch: &VdsChannel) -> Vec<u8> {
    match ch.format {
        VdsSampleFormat::U8 => vec![0xFF; ch.components as usize],
        VdsSampleFormat::U16 => [0xFFu8, 0xFF].repeat(ch.components as usize),
        _ => constant_native(
            &VdsChannel {
                format: ch.format,
                ..ch.clone()
            },
            ch.no_value as f32,
        ),
    }
}

/// U8/U16 code of a float value: `q = (v - offset) * (1 / scale)` in f32, clamped to the buckets
/// (one fewer with useNoValue), rounded half up.
pub fn quantize(ch: &VdsChannel, v: f32) -> u32 {
    let buckets: u32 = match ch.format {
        VdsSampleFormat::U16 => 65536,
        _ => 256,
    } - u32::from(ch.use_no_value);
    let q = (v - ch.integer_offset as f32) * (1.0f32 / ch.integer_scale as f32);
    let top = (buckets - 1) as f32;
    if q.is_nan() || q <= 0.0 {
        0
    } else if q >= top {
        buckets - 1
    } else {
        (q + 0.5) as u32
    }
}

/// The U8/U16 codes of a float wavelet stream of a U8/U16 channel: OpenVDS 3.4.9 stores some
/// such layers as floats holding the written codes (not physical values). Each value becomes
/// its nearest integer (halves away from zero), clamped to the code range; NaN becomes 0.
pub fn float_codes_to_native(ch: &VdsChannel, src: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let top = if ch.format == VdsSampleFormat::U16 {
        65535.0f32
    } else {
        255.0
    };
    // `as` saturates and maps NaN to 0; the clamp says so explicitly.
    let code = |c: &[u8]| {
        let v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        if v.is_nan() {
            0u16
        } else {
            v.round().clamp(0.0, top) as u16
        }
    };
    if ch.format == VdsSampleFormat::U16 {
        out.extend(src.chunks_exact(4).flat_map(|c| code(c).to_le_bytes()));
    } else {
        out.extend(src.chunks_exact(4).map(|c| code(c) as u8));
    }
}

/// Convert a decoded native payload (1-bit already unpacked to 0/1 bytes) to f32 values.
pub fn native_to_f32(ch: &VdsChannel, src: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let scale = ch.integer_scale as f32;
    let offset = ch.integer_offset as f32;
    let nv = ch.no_value as f32;
    let unv = ch.use_no_value;
    // Product rounded, then sum: two f32 roundings, never a fused multiply-add.
    let deq = |c: u32, max: u32| -> f32 {
        if unv && c == max {
            nv
        } else {
            offset + scale * c as f32
        }
    };
    match ch.format {
        VdsSampleFormat::Bit1 => out.extend(src.iter().flat_map(|&b| (b as f32).to_le_bytes())),
        VdsSampleFormat::U8 => out.extend(src.iter().flat_map(|&b| deq(b as u32, 255).to_le_bytes())),
        VdsSampleFormat::U16 => out.extend(
            src.chunks_exact(2)
                .flat_map(|c| deq(u16::from_le_bytes([c[0], c[1]]) as u32, 65535).to_le_bytes()),
        ),
        VdsSampleFormat::R32 => out.extend_from_slice(src),
        VdsSampleFormat::U32 => out.extend(
            src.chunks_exact(4)
                .flat_map(|c| (u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f32).to_le_bytes()),
        ),
        VdsSampleFormat::R64 => out.extend(
            src.chunks_exact(8)
                .flat_map(|c| (f64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f32).to_le_bytes()),
        ),
        VdsSampleFormat::U64 => out.extend(
            src.chunks_exact(8)
                .flat_map(|c| (u64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f32).to_le_bytes()),
        ),
    }
}

/// Unpack 1-bit rows (`ceil(sx/8)` bytes each, LSB first) into one 0/1 byte per voxel.
pub fn unpack_bits(src: &[u8], size: [u64; 3], out: &mut Vec<u8>) {
    let sx = size[0] as usize;
    let row = sx.div_ceil(8);
    let rows = (size[1] * size[2]) as usize;
    out.clear();
    out.reserve(sx * rows);
    for r in 0..rows {
        let base = r * row;
        for x in 0..sx {
            let byte = src.get(base + x / 8).copied().unwrap_or(0);
            out.push((byte >> (x % 8)) & 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A per-trace channel's mapped values multiply the chunk's voxels: sizes whose product
    /// passes u64 give no size (a panic with overflow checks, a wrapped size without them).
    #[test]
    fn chunk_sizes_past_u64_have_no_length() {
        let spec = ChunkSpec {
            format: VdsSampleFormat::R32,
            components: 1,
            dims: 3,
            size: [i64::MAX as u64, 4096, 4096],
            compression: VdsCompression::None,
        };
        assert_eq!(spec.voxels(), None);
        assert_eq!(spec.payload_len(), None);
        let fits = ChunkSpec {
            size: [1 << 31, 4096, 1],
            ..spec
        };
        assert_eq!(fits.voxels(), Some(1 << 43));
        assert_eq!(fits.payload_len(), Some(1 << 45));
    }

    #[test]
    fn rle_runs() {
        // repeat 3 x [1,2], literal 2 x [3,4],[5,6]
        let src = [0x02, 1, 2, 0x41, 3, 4, 5, 6];
        let mut out = vec![0u8; 10];
        rle_decode(&src, 2, &mut out).unwrap();
        assert_eq!(out, [1, 2, 1, 2, 1, 2, 3, 4, 5, 6]);
        let mut short = vec![0u8; 8];
        assert_eq!(rle_decode(&src, 2, &mut short).unwrap_err().code, "vds.chunk.rle_run");
        let mut long = vec![0u8; 12];
        assert_eq!(
            rle_decode(&src, 2, &mut long).unwrap_err().code,
            "vds.chunk.rle_truncated"
        );
        // two-byte run length: (0x3F | 1 << 6) + 1 = 128 units
        let mut big = vec![0u8; 128];
        rle_decode(&[0xBF, 1, 7], 1, &mut big).unwrap();
        assert!(big.iter().all(|&b| b == 7));
        // The same runs into scattered rows of 4 bytes.
        let mut rows = vec![0u8; 16];
        rle_decode_rows(&src, 2, &mut rows, 4, &[12, 0, 6]).unwrap_err(); // 10 bytes != 12
        let src12 = [0x02, 1, 2, 0x42, 3, 4, 5, 6, 7, 8];
        rle_decode_rows(&src12, 2, &mut rows, 4, &[12, 0, 6]).unwrap();
        assert_eq!(rows, [1, 2, 3, 4, 0, 0, 5, 6, 7, 8, 0, 0, 1, 2, 1, 2]);
        assert!(rle_decode_rows(&src12, 2, &mut rows, 4, &[14, 0, 6]).is_err());
    }

    #[test]
    fn zip_is_exact_and_bounded() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
        let z = miniz_oxide::deflate::compress_to_vec_zlib(&data, 6);
        let mut out = vec![0u8; 5000];
        zip_decode(&z, &mut out).unwrap();
        assert_eq!(out, data);
        assert_eq!(zip_decode(&z, &mut [0u8; 4999]).unwrap_err().code, "vds.chunk.zip_size");
        assert_eq!(zip_decode(&z, &mut [0u8; 5001]).unwrap_err().code, "vds.chunk.zip_size");
        assert_eq!(
            zip_decode(&z[..z.len() - 9], &mut out).unwrap_err().code,
            "vds.chunk.zip_truncated"
        );
        let mut t = z.clone();
        t.push(0);
        assert_eq!(zip_decode(&t, &mut out).unwrap_err().code, "vds.chunk.zip_trailing");
        let mut c = z.clone();
        let n = c.len();
        c[n - 1] ^= 1;
        assert_eq!(zip_decode(&c, &mut out).unwrap_err().code, "vds.chunk.zip_corrupt");
    }

    /// Deflate bits for hand-made streams: fields LSB first, Huffman codes MSB first.
    struct Bits {
        out: Vec<u8>,
        acc: u64,
        n: u32,
    }

    impl Bits {
        fn new() -> Bits {
            Bits {
                out: vec![0x78, 0x01],
                acc: 0,
                n: 0,
            }
        }
        fn put(&mut self, v: u32, n: u32) {
            self.acc |= (v as u64) << self.n;
            self.n += n;
            while self.n >= 8 {
                self.out.push(self.acc as u8);
                self.acc >>= 8;
                self.n -= 8;
            }
        }
        fn code(&mut self, c: u32, n: u32) {
            for i in (0..n).rev() {
                self.put((c >> i) & 1, 1);
            }
        }
        /// A symbol of the fixed literal/length code (RFC 1951 3.2.6).
        fn fixed(&mut self, s: u32) {
            match s {
                0..=143 => self.code(0x30 + s, 8),
                144..=255 => self.code(0x190 + s - 144, 9),
                256..=279 => self.code(s - 256, 7),
                _ => self.code(0xc0 + s - 280, 8),
            }
        }
        /// The zlib stream: these bits, then the Adler-32 of `plain`.
        fn zlib(mut self, plain: &[u8]) -> Vec<u8> {
            if self.n > 0 {
                self.out.push(self.acc as u8);
            }
            let (mut a, mut b) = (1u32, 0u32);
            for &x in plain {
                a = (a + x as u32) % 65521;
                b = (b + a) % 65521;
            }
            self.out.extend(((b << 16) | a).to_be_bytes());
            self.out
        }
    }

    /// A dynamic block of 'A' x `n` whose header lists `hlit` literal/length code lengths
    /// (only 'A' and end-of-block used, one bit each) and one (unused) distance length.
    fn dynamic_a(hlit: u32, n: usize) -> Vec<u8> {
        let mut b = Bits::new();
        b.put(1, 1);
        b.put(2, 2);
        b.put(hlit - 257, 5);
        b.put(0, 5);
        b.put(14, 4);
        // Code-length code: 18 -> '0', 0 -> '10', 1 -> '11', in the RFC's order 16, 17, 18, 0,
        // 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1.
        for len in [0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2] {
            b.put(len, 3);
        }
        let zeros = |b: &mut Bits, mut k: u32| {
            while k >= 11 {
                let r = k.min(138);
                b.code(0, 1);
                b.put(r - 11, 7);
                k -= r;
            }
            for _ in 0..k {
                b.code(2, 2);
            }
        };
        // Lengths: 0..64 none, 'A' 1, 66..255 none, end-of-block 1, the rest and the distance none.
        zeros(&mut b, 65);
        b.code(3, 2);
        zeros(&mut b, 190);
        b.code(3, 2);
        zeros(&mut b, hlit - 257 + 1);
        for _ in 0..n {
            b.code(0, 1);
        }
        b.code(1, 1);
        b.zlib(&vec![b'A'; n])
    }

    /// Streams zlib (so OpenVDS) refuses but a more tolerant inflater (libdeflate 1.26) decodes
    /// to values, each beside the nearest valid stream: `zip_decode` takes zlib's verdict. An
    /// inflater swapped in for speed must keep these (docs/performance.md, Zip read).
    #[test]
    fn zip_refuses_what_zlib_refuses() {
        // Fixed block: 'A', then length symbol 285 (258) at distance 1: valid.
        let fixed = |len_sym: u32, dist_code: u32, dist_extra: u32, lits: usize| {
            let mut b = Bits::new();
            b.put(1, 1);
            b.put(1, 2);
            let mut plain: Vec<u8> = (0..lits as u32).map(|i| (i * 7 % 251) as u8).collect();
            for &v in &plain {
                b.fixed(v as u32);
            }
            b.fixed(len_sym);
            b.code(dist_code, 5);
            b.put(0, dist_extra);
            // What a decoder that reads symbols 286/287 as 258 and distance codes 30/31 as
            // 24577 makes of it.
            let len = if len_sym >= 285 { 258 } else { 3 };
            let dist = if dist_code >= 29 { 24577 } else { 1 };
            for _ in 0..len {
                plain.push(plain[plain.len() - dist]);
            }
            b.fixed(256);
            (b.zlib(&plain), plain)
        };
        let (ok, plain) = fixed(285, 0, 0, 1);
        let mut out = vec![0u8; plain.len()];
        zip_decode(&ok, &mut out).unwrap();
        assert_eq!(out, plain);
        // Length symbol 286 (zlib: invalid literal/length code).
        let (bad, plain) = fixed(286, 0, 0, 1);
        let e = zip_decode(&bad, &mut vec![0u8; plain.len()]).unwrap_err();
        assert_eq!(e.code, "vds.chunk.zip_corrupt", "{}", e.message);
        // Distance code 29 (24577 + 13 bits) is valid; 30 is not (zlib: invalid distance code).
        let (ok, plain) = fixed(257, 29, 13, 30000);
        let mut out = vec![0u8; plain.len()];
        zip_decode(&ok, &mut out).unwrap();
        assert_eq!(out, plain);
        let (bad, plain) = fixed(257, 30, 13, 30000);
        let e = zip_decode(&bad, &mut vec![0u8; plain.len()]).unwrap_err();
        assert_eq!(e.code, "vds.chunk.zip_corrupt", "{}", e.message);
        // 286 literal/length code lengths are the most a dynamic header may list; 287 is too
        // many (zlib: too many length or distance symbols).
        let mut out = vec![0u8; 1000];
        zip_decode(&dynamic_a(286, 1000), &mut out).unwrap();
        assert!(out.iter().all(|&v| v == b'A'));
        let e = zip_decode(&dynamic_a(287, 1000), &mut out).unwrap_err();
        assert_eq!(e.code, "vds.chunk.zip_corrupt", "{}", e.message);
    }

    #[test]
    fn hashes_classify() {
        assert_eq!(VdsChunkStatus::from_hash(0), VdsChunkStatus::Unwritten);
        assert_eq!(VdsChunkStatus::from_hash(u64::MAX), VdsChunkStatus::NoValue);
        assert_eq!(
            VdsChunkStatus::from_hash(0x0101_0101_3f80_0000),
            VdsChunkStatus::Constant(1.0)
        );
        assert_eq!(VdsChunkStatus::from_hash(0x1234), VdsChunkStatus::Data);
        assert_eq!(
            adaptive_level_sizes(1000, &[128, 128, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            vec![501, 251]
        );
    }
}
