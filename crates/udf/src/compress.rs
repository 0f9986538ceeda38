//! Compression schemes of the reference crate (CasualX/UntitledDataFormat). The spec reserves
//! `compress_info` without defining any scheme; the reference writer defines a family of
//! "simple" schemes (`16 + n`). rasterpack decodes scheme 17 (`SimpleU32`), lossless, for
//! tables of 4-byte primitives; every other scheme stays unsupported.
//!
//! Scheme 17 is a byte stream of opcodes that produces 32-bit words. The decoder keeps the
//! previous word (`last`, initially 0) and a table of 64 recently seen words (initially 0).
//! The two high bits of an opcode, or the four high bits when the first two are `11`, select:
//!
//! | opcode bits | extra bytes | produces |
//! |---|---|---|
//! | `00dddddd` | 0 | `last + delta`, delta from 6 bits |
//! | `01dddddd` | 1 | `last + delta`, delta from 6 + 8 bits |
//! | `10iiiiii` | 0 | the table's word `i` (the table is not updated) |
//! | `1100dddd` | 2 | `last + delta`, delta from 4 + 16 bits |
//! | `1101dddd` | 3 | `last + delta`, delta from 4 + 24 bits |
//! | `1110nnnn` | 0 | `last`, `n + 1` times; then `last += 1` unless `n + 1 == 16` |
//! | `1111nnnn` | `4 (n + 1)` | `n + 1` little-endian words |
//!
//! Delta bits are big-endian (opcode bits first), two's complement; a delta that is >= 0 is
//! incremented by one (a zero delta is what the repeat opcode is for). Arithmetic wraps. Every
//! word a delta or literal opcode produces becomes `last` and is stored in the table at
//! `hash(word) % 64` (`hash`: Bob Jenkins' 32-bit integer hash, see [`word_hash`]); an index
//! opcode only sets `last`. A stream is correct when it produces exactly the table's element
//! count and ends there.

/// The `compress_info` of the reference's `SimpleU32` scheme.
pub const SIMPLE_U32: u16 = 17;

/// One opcode byte yields at most 16 words (a repeat), so a stream of `n` bytes decodes to at
/// most `16 n` words: the bound checked before allocating the output.
pub const MAX_WORDS_PER_BYTE: u64 = 16;

/// The table slot hash of scheme 17 (Bob Jenkins' "4-shift" integer hash, wrapping).
pub fn word_hash(v: u32) -> u32 {
    let mut a = (v ^ 61) ^ (v >> 16);
    a = a.wrapping_add(a << 3);
    a ^= a >> 4;
    a = a.wrapping_mul(0x27d4_eb2d);
    a ^ (a >> 15)
}

fn sign_extend(v: u32, bits: u32) -> i32 {
    let shift = 32 - bits;
    ((v << shift) as i32) >> shift
}

/// A decode failure: the stream offset of the opcode at fault and what went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    pub offset: u64,
    pub message: String,
}

/// Decode a scheme-17 stream into `out` (4 bytes per word, little-endian).
///
/// `whole`: the stream must produce exactly `out.len() / 4` words and end there (the read
/// path and `validate`). Otherwise decoding stops once `out` is full (previews).
pub fn decode_simple_u32(stream: &[u8], out: &mut [u8], whole: bool) -> Result<(), DecodeError> {
    let want = out.len() / 4;
    let mut table = [0u32; 64];
    let mut last = 0u32;
    let mut n = 0usize;
    let mut pos = 0usize;
    let fail = |offset: usize, message: String| DecodeError {
        offset: offset as u64,
        message,
    };
    let mut emit = |n: &mut usize, v: u32, at: usize| -> Result<(), DecodeError> {
        match out.get_mut(*n * 4..*n * 4 + 4) {
            Some(slot) => {
                slot.copy_from_slice(&v.to_le_bytes());
                *n += 1;
                Ok(())
            }
            None => Err(fail(
                at,
                format!("the stream holds more than the {want} values of the shape"),
            )),
        }
    };
    while pos < stream.len() {
        if !whole && n == want {
            return Ok(());
        }
        let at = pos;
        let op = stream[pos];
        pos += 1;
        let mut extra = |count: usize| -> Result<u32, DecodeError> {
            let bytes = stream.get(pos..pos + count).ok_or_else(|| {
                fail(
                    at,
                    format!("opcode {op:#04x} needs {count} more byte(s); the stream ends"),
                )
            })?;
            pos += count;
            Ok(bytes.iter().fold(0u32, |acc, &b| (acc << 8) | b as u32))
        };
        let delta = match op >> 6 {
            0b00 => Some(sign_extend((op & 0x3F) as u32, 6)),
            0b01 => Some(sign_extend(((op & 0x3F) as u32) << 8 | extra(1)?, 14)),
            0b10 => {
                let v = table[(op & 0x3F) as usize];
                emit(&mut n, v, at)?;
                last = v;
                None
            }
            _ => match op >> 4 {
                0b1100 => Some(sign_extend(((op & 0x0F) as u32) << 16 | extra(2)?, 20)),
                0b1101 => Some(sign_extend(((op & 0x0F) as u32) << 24 | extra(3)?, 28)),
                0b1110 => {
                    let count = (op & 0x0F) as usize + 1;
                    for _ in 0..count {
                        emit(&mut n, last, at)?;
                        if !whole && n == want {
                            return Ok(());
                        }
                    }
                    if count != 16 {
                        last = last.wrapping_add(1);
                    }
                    None
                }
                _ => {
                    let count = (op & 0x0F) as usize + 1;
                    for _ in 0..count {
                        let v = extra(4)?.swap_bytes();
                        emit(&mut n, v, at)?;
                        last = v;
                        table[(word_hash(v) % 64) as usize] = v;
                        if !whole && n == want {
                            return Ok(());
                        }
                    }
                    None
                }
            },
        };
        if let Some(d) = delta {
            let d = if d >= 0 { d + 1 } else { d };
            let v = last.wrapping_add(d as u32);
            emit(&mut n, v, at)?;
            last = v;
            table[(word_hash(v) % 64) as usize] = v;
        }
    }
    if n != want {
        return Err(fail(
            stream.len(),
            format!("the stream ends after {n} of the {want} values of the shape"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(stream: &[u8], n: usize) -> Result<Vec<u32>, DecodeError> {
        let mut out = vec![0u8; n * 4];
        decode_simple_u32(stream, &mut out, true)?;
        Ok(out
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    #[test]
    fn each_opcode() {
        // delta 6 bits: 0 -> +1, 0x3F (-1) -> -1.
        assert_eq!(words(&[0x00, 0x3F], 2).unwrap(), vec![1, 0]);
        // delta 14 bits: 0x40 0x63 = +0x63 -> +100.
        assert_eq!(words(&[0x40, 0x63], 1).unwrap(), vec![100]);
        // delta 20 bits (0xC0 ...), 28 bits (0xD0 ...): big-endian payload.
        assert_eq!(words(&[0xC1, 0x00, 0x00], 1).unwrap(), vec![0x10001]);
        assert_eq!(words(&[0xD1, 0x00, 0x00, 0x00], 1).unwrap(), vec![0x0100_0001]);
        assert_eq!(words(&[0xDF, 0xFF, 0xFF, 0xFF], 1).unwrap(), vec![u32::MAX]);
        // repeat 3 of last (0) then last becomes 1: a 1-byte delta 0 gives 2.
        assert_eq!(words(&[0xE2, 0x00], 4).unwrap(), vec![0, 0, 0, 2]);
        // repeat 16 keeps last.
        assert_eq!(words(&[0xEF, 0x00], 17).unwrap()[16], 1);
        // literals, then the table holds them: index of hash(7) % 64.
        let slot = (word_hash(0xDEAD_BEEF) % 64) as u8;
        assert_eq!(
            words(&[0xF0, 0xEF, 0xBE, 0xAD, 0xDE, 0x80 | slot], 2).unwrap(),
            vec![0xDEAD_BEEF, 0xDEAD_BEEF]
        );
    }

    #[test]
    fn wrong_lengths_fail() {
        assert!(words(&[0x00], 2).is_err(), "too few values");
        assert!(words(&[0x00, 0x00], 1).is_err(), "too many values");
        assert!(words(&[0x40], 1).is_err(), "truncated opcode");
        assert!(words(&[0xF1, 1, 2, 3, 4, 5], 2).is_err(), "truncated literal");
        assert!(words(&[0xEF], 4).is_err(), "repeat past the end");
        assert_eq!(words(&[], 0).unwrap(), Vec::<u32>::new());
        // A prefix decode stops when full and ignores the rest.
        let mut out = [0u8; 4];
        decode_simple_u32(&[0x00, 0x00, 0xFF], &mut out, false).unwrap();
        assert_eq!(u32::from_le_bytes(out), 1);
    }
}
