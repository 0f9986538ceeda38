//! One brick serialized as OpenVDS stores it: the 24-byte DataBlockDescriptor, then the payload
//! (None: the values; RLE: a 12-byte header and runs; Zip: a zlib stream), or no bytes at all
//! for a brick of one value, which OpenVDS records in the chunk hash instead (constant or
//! no-value). The inverse of [`crate::chunk`]'s decoding.

use std::io::Write;

use crate::chunk::{constant_native, novalue_native, ChunkSpec};
use crate::layout::{VdsChannel, VdsCompression, VdsSampleFormat};
use crate::raw::{HASH_CONSTANT_TAG, HASH_NOVALUE};

/// zlib level of Zip bricks. OpenVDS calls zlib's `compress` (level 6); level 1 spends about a
/// third of its CPU time for a 14% larger file on a noisy float32 volume (docs/performance.md),
/// and any zlib reader inflates both the same.
pub const ZIP_LEVEL: u32 = 1;

/// A serialized brick.
pub struct Encoded {
    /// Its chunk hash (a constant / no-value tag, or an identifier of the stored bytes).
    pub hash: u64,
    /// The object (empty for a constant or no-value brick).
    pub bytes: Vec<u8>,
    /// Decoded payload bytes the object holds (0 when empty): LayerStatus's uncompressedSize.
    pub payload: u64,
}

/// The chunk hash a brick whose every element is `elem` (native bytes) gets, when OpenVDS's
/// constant encoding gives back exactly `elem` on reading: the no-value tag when `elem` is the
/// channel's no-value, else `0x01010101` with the value as f32 (OpenVDS converts the value to
/// float for the hash, so a u32 above 2^24 or an f64 with more precision is stored as data).
pub fn constant_hash(ch: &VdsChannel, elem: &[u8]) -> Option<u64> {
    if ch.use_no_value && elem == novalue_native(ch).as_slice() {
        return Some(HASH_NOVALUE);
    }
    let v: f32 = match ch.format {
        // OpenVDS 3.4.9 reads a constant 1-bit brick as 255 in U8 (its data bricks as 0/1):
        // 1-bit bricks are always stored as data so both of its reads agree with ours.
        VdsSampleFormat::Bit1 => return None,
        VdsSampleFormat::U8 => (elem[0] as f32) * ch.integer_scale as f32 + ch.integer_offset as f32,
        VdsSampleFormat::U16 => {
            u16::from_le_bytes([elem[0], elem[1]]) as f32 * ch.integer_scale as f32 + ch.integer_offset as f32
        }
        VdsSampleFormat::R32 => f32::from_le_bytes(elem.try_into().ok()?),
        VdsSampleFormat::U32 => u32::from_le_bytes(elem.try_into().ok()?) as f32,
        VdsSampleFormat::R64 => f64::from_le_bytes(elem.try_into().ok()?) as f32,
        VdsSampleFormat::U64 => u64::from_le_bytes(elem.try_into().ok()?) as f32,
    };
    // NaN payloads and -0.0 are kept as data: a reader normalizing the hash's float would
    // change them.
    if v.is_nan() || v.to_bits() == (-0.0f32).to_bits() {
        return None;
    }
    (constant_native(ch, v) == elem).then_some(((HASH_CONSTANT_TAG as u64) << 32) | v.to_bits() as u64)
}

/// A hash for stored bytes: OpenVDS's are random per write, only the reserved values mean
/// something (0 unwritten, all ones no-value, the constant tag), so any other value will do.
/// This one mixes the layer, the chunk index and the object's length and ends, so files are
/// reproducible.
fn data_hash(lod: u32, index: u64, obj: &[u8]) -> u64 {
    let mut x = (lod as u64) << 56 ^ index ^ (obj.len() as u64).rotate_left(32);
    let tail = &obj[obj.len().saturating_sub(8)..];
    let mut last = [0u8; 8];
    last[..tail.len()].copy_from_slice(tail);
    x ^= u64::from_le_bytes(last).rotate_left(17);
    // splitmix64's finalizer.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    if x == 0 || x == u64::MAX || (x >> 32) as u32 == HASH_CONSTANT_TAG {
        x ^= 0x5555_0000_0000_0000;
    }
    x
}

/// Serialize one brick: `payload` holds its native values (one byte 0/1 per 1-bit sample), X
/// fastest over the stored box of `size` voxels (descriptor order), `dims` chunk dims.
pub fn encode_brick(
    ch: &VdsChannel,
    compression: VdsCompression,
    lod: u32,
    index: u64,
    dims: usize,
    size: [u64; 3],
    payload: &[u8],
) -> Encoded {
    let elem = ch.format.native_bytes();
    let first = &payload[..elem];
    if payload.chunks_exact(elem).all(|c| c == first) {
        if let Some(hash) = constant_hash(ch, first) {
            return Encoded {
                hash,
                bytes: Vec::new(),
                payload: 0,
            };
        }
    }
    let packed;
    let body = if ch.format == VdsSampleFormat::Bit1 {
        packed = pack_bits(payload, size);
        &packed[..]
    } else {
        payload
    };
    let mut obj = Vec::with_capacity(
        24 + if compression == VdsCompression::None {
            body.len()
        } else {
            body.len() / 2
        },
    );
    for v in [
        dims as i32,
        size[0] as i32,
        size[1] as i32,
        size[2] as i32,
        ch.format.code(),
        1,
    ] {
        obj.extend_from_slice(&v.to_le_bytes());
    }
    match compression {
        VdsCompression::RLE => {
            let unit = ChunkSpec {
                format: ch.format,
                components: 1,
                dims,
                size,
                compression,
            }
            .rle_unit() as usize;
            let runs = rle_encode(body, unit);
            obj.extend_from_slice(&((12 + runs.len()) as i32).to_le_bytes());
            obj.extend_from_slice(&(body.len() as i32).to_le_bytes());
            obj.extend_from_slice(&(unit as i32).to_le_bytes());
            obj.extend_from_slice(&runs);
        }
        VdsCompression::Zip => {
            let mut z = flate2::write::ZlibEncoder::new(obj, flate2::Compression::new(ZIP_LEVEL));
            // Writing into a Vec cannot fail.
            let _ = z.write_all(body);
            obj = z.finish().unwrap_or_default();
        }
        _ => obj.extend_from_slice(body),
    }
    Encoded {
        hash: data_hash(lod, index, &obj),
        bytes: obj,
        payload: body.len() as u64,
    }
}

/// 1-bit samples (one byte each) packed 8 to a byte, bit 0 first, each row of X padded to
/// whole bytes (OpenVDS's 1-bit rows).
pub(crate) fn pack_bits(bytes: &[u8], size: [u64; 3]) -> Vec<u8> {
    let sx = size[0] as usize;
    let row = sx.div_ceil(8);
    let rows = (size[1] * size[2]) as usize;
    let mut out = vec![0u8; row * rows];
    for r in 0..rows {
        for x in 0..sx {
            if bytes[r * sx + x] != 0 {
                out[r * row + x / 8] |= 1 << (x % 8);
            }
        }
    }
    out
}

/// OpenVDS's RLE runs over `unit`-byte elements: a run of 3 or more equal elements is one
/// repeat run (the element once), anything else literal runs (the elements); at most 16384
/// elements a run, its length - 1 in 6 bits (bit 6 = literal) plus 8 more when bit 7 is set.
pub fn rle_encode(data: &[u8], unit: usize) -> Vec<u8> {
    const MAX_RUN: usize = 16384;
    let units = data.len() / unit;
    let at = |i: usize| &data[i * unit..i * unit + unit];
    let mut out = Vec::with_capacity(data.len() / 2);
    let emit = |out: &mut Vec<u8>, literal: bool, run: usize| {
        let r = run - 1;
        let mut u0 = (r & 0x3F) as u8;
        if literal {
            u0 |= 0x40;
        }
        if r >= 64 {
            out.push(u0 | 0x80);
            out.push((r >> 6) as u8);
        } else {
            out.push(u0);
        }
    };
    let literals = |out: &mut Vec<u8>, from: usize, to: usize| {
        let mut s = from;
        while s < to {
            let n = (to - s).min(MAX_RUN);
            emit(out, true, n);
            out.extend_from_slice(&data[s * unit..(s + n) * unit]);
            s += n;
        }
    };
    let mut i = 0;
    let mut lit_start = 0;
    while i < units {
        let mut j = i + 1;
        while j < units && j - i < MAX_RUN && at(j) == at(i) {
            j += 1;
        }
        if j - i >= 3 {
            literals(&mut out, lit_start, i);
            emit(&mut out, false, j - i);
            out.extend_from_slice(at(i));
            i = j;
            lit_start = i;
        } else {
            i += 1;
        }
    }
    literals(&mut out, lit_start, units);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rle_round_trips_through_the_reader() {
        let mut data = Vec::new();
        for k in 0..50_000u32 {
            let v = if k % 7000 < 3000 { 5u32 } else { k % 13 };
            data.extend_from_slice(&v.to_le_bytes());
        }
        let runs = rle_encode(&data, 4);
        let mut back = vec![0u8; data.len()];
        crate::chunk::rle_decode(&runs, 4, &mut back).unwrap();
        assert_eq!(back, data);
        assert!(runs.len() < data.len());
    }
}
