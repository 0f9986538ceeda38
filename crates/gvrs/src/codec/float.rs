//! GvrsFloat: `[codec index][0]`, then five sections (i32 length + zlib stream):
//! sign bits (LSB first), exponent bytes, and the three mantissa bytes (bits 16..22, 8..15,
//! 0..7), the mantissa bytes differenced mod 256 (first cell from 0, each row's first cell from
//! the previous row's first cell).

use super::zlib;

/// Why a GvrsFloat block does not decode.
#[derive(Debug, Clone, PartialEq)]
pub struct FloatError {
    /// The finding code (`gvrs.codec.*`).
    pub code: &'static str,
    /// Offset in the block.
    pub offset: usize,
    /// What went wrong, in words.
    pub message: String,
}

fn section(block: &[u8], at: usize, out: &mut [u8], what: &str) -> Result<usize, FloatError> {
    let Some(len_bytes) = block.get(at..at + 4) else {
        return Err(FloatError {
            code: "gvrs.codec.truncated",
            offset: at,
            message: format!("GvrsFloat block ends before the {what} section length"),
        });
    };
    let n = i32::from_le_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]);
    let start = at + 4;
    let end = usize::try_from(n)
        .ok()
        .and_then(|n| start.checked_add(n))
        .filter(|&e| e <= block.len());
    let Some(end) = end else {
        return Err(FloatError {
            code: "gvrs.codec.bad_section_length",
            offset: at,
            message: format!("GvrsFloat {what} section length {n} exceeds the block"),
        });
    };
    let expected = out.len();
    match zlib::inflate_exact(&block[start..end], out) {
        Ok(used) if used == end - start => Ok(end),
        Ok(used) => Err(FloatError {
            code: "gvrs.codec.trailing_data",
            offset: start + used,
            message: format!("{} byte(s) after the {what} zlib stream", end - start - used),
        }),
        Err(e) => Err(FloatError {
            code: e.code(),
            offset: start,
            message: format!("GvrsFloat {what}: {}", e.message(expected)),
        }),
    }
}

fn undifference(s: &mut [u8], cols: usize) {
    let mut prior = 0u8;
    for row in s.chunks_exact_mut(cols) {
        for b in row.iter_mut() {
            prior = prior.wrapping_add(*b);
            *b = prior;
        }
        prior = row[0];
    }
}

fn difference(s: &mut [u8], cols: usize) {
    let mut prior0 = 0u8;
    for row in s.chunks_exact_mut(cols) {
        let mut prior = prior0;
        prior0 = row[0];
        for b in row.iter_mut() {
            let t = *b;
            *b = t.wrapping_sub(prior);
            prior = t;
        }
    }
}

/// Decode a GvrsFloat block into `out` (`rows * cols` cells, already checked by the caller).
pub fn decode(block: &[u8], cols: usize, out: &mut [f32]) -> Result<(), FloatError> {
    let cells = out.len();
    if block.len() < 2 {
        return Err(FloatError {
            code: "gvrs.codec.truncated",
            offset: 0,
            message: "GvrsFloat block shorter than its 2-byte header".into(),
        });
    }
    let mut scratch = vec![0u8; cells];
    let mut bits = vec![0u32; cells];
    let mut at = 2;
    let mut signs = vec![0u8; cells.div_ceil(8)];
    at = section(block, at, &mut signs, "sign bit")?;
    for (i, w) in bits.iter_mut().enumerate() {
        *w = u32::from((signs[i >> 3] >> (i & 7)) & 1) << 31;
    }
    at = section(block, at, &mut scratch, "exponent")?;
    for (w, &b) in bits.iter_mut().zip(&scratch) {
        *w |= u32::from(b) << 23;
    }
    for (shift, mask, what) in [
        (16u32, 0x7Fu8, "mantissa 1"),
        (8, 0xFF, "mantissa 2"),
        (0, 0xFF, "mantissa 3"),
    ] {
        at = section(block, at, &mut scratch, what)?;
        undifference(&mut scratch, cols);
        for (w, &b) in bits.iter_mut().zip(&scratch) {
            *w |= u32::from(b & mask) << shift;
        }
    }
    if at != block.len() {
        return Err(FloatError {
            code: "gvrs.codec.trailing_data",
            offset: at,
            message: format!("{} byte(s) after the last GvrsFloat section", block.len() - at),
        });
    }
    for (o, &w) in out.iter_mut().zip(&bits) {
        *o = f32::from_bits(w);
    }
    Ok(())
}

/// Encode `values` (`rows * cols`) as a GvrsFloat block with codec index `index`.
pub fn encode(index: u8, cols: usize, values: &[f32], level: u8) -> Vec<u8> {
    let cells = values.len();
    let mut out = Vec::with_capacity(cells * 2 + 32);
    out.push(index);
    out.push(0);
    let put = |data: &[u8], out: &mut Vec<u8>| {
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        zlib::deflate_into(data, level, out);
        let n = (out.len() - at - 4) as i32;
        out[at..at + 4].copy_from_slice(&n.to_le_bytes());
    };
    let mut signs = vec![0u8; cells.div_ceil(8)];
    for (i, v) in values.iter().enumerate() {
        signs[i >> 3] |= ((v.to_bits() >> 31) as u8) << (i & 7);
    }
    put(&signs, &mut out);
    let mut scratch: Vec<u8> = values.iter().map(|v| (v.to_bits() >> 23) as u8).collect();
    put(&scratch, &mut out);
    for (shift, mask) in [(16u32, 0x7Fu32), (8, 0xFF), (0, 0xFF)] {
        for (s, v) in scratch.iter_mut().zip(values) {
            *s = ((v.to_bits() >> shift) & mask) as u8;
        }
        difference(&mut scratch, cols);
        put(&scratch, &mut out);
    }
    out
}
