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
    /// Offset of the opcode at fault from the start of the stream.
    pub offset: u64,
    /// What went wrong.
    pub message: String,
}

/// Total length in bytes of the opcode whose first byte is `op` (1 to 65).
pub fn opcode_len(op: u8) -> usize {
    match op >> 4 {
        0b1100 => 3,
        0b1101 => 4,
        0b1111 => 1 + 4 * ((op & 0x0F) as usize + 1),
        _ if op >> 6 == 0b01 => 2,
        _ => 1,
    }
}

/// A scheme-17 decoder that takes the stream in pieces of any size and produces the words in
/// pieces, so neither the stream nor its output has to be held whole. Its state is the
/// previous word and the 64-word table: a few hundred bytes.
#[derive(Debug, Clone)]
pub struct SimpleU32Decoder {
    table: [u32; 64],
    last: u32,
    produced: u64,
    want: u64,
    consumed: u64,
}

impl SimpleU32Decoder {
    /// A decoder for a stream that must produce exactly `want` words (`u64::MAX`: no bound,
    /// for prefix decodes).
    pub fn new(want: u64) -> SimpleU32Decoder {
        SimpleU32Decoder {
            table: [0; 64],
            last: 0,
            produced: 0,
            want,
            consumed: 0,
        }
    }

    /// Words produced so far.
    pub fn produced(&self) -> u64 {
        self.produced
    }

    /// Stream bytes consumed so far (the offset of the next opcode).
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Decode the whole opcodes at the start of `input`, appending their words (little-endian)
    /// to `out`, until `out` holds at least `out_limit` bytes or no whole opcode is left.
    /// Returns how many bytes of `input` were consumed: the caller passes the rest again, with
    /// more of the stream after it (an opcode is at most 65 bytes).
    pub fn decode(&mut self, input: &[u8], out: &mut Vec<u8>, out_limit: usize) -> Result<usize, DecodeError> {
        let mut pos = 0usize;
        let mut words = [0u32; 16];
        while out.len() < out_limit {
            let Some(&op) = input.get(pos) else { break };
            let Some(opcode) = input.get(pos..pos + opcode_len(op)) else {
                break;
            };
            let count = self.opcode(opcode, &mut words);
            for &w in &words[..count] {
                if self.produced >= self.want {
                    return Err(DecodeError {
                        offset: self.consumed + pos as u64,
                        message: format!("the stream holds more than the {} values of the shape", self.want),
                    });
                }
                out.extend_from_slice(&w.to_le_bytes());
                self.produced += 1;
            }
            pos += opcode.len();
        }
        self.consumed += pos as u64;
        Ok(pos)
    }

    /// The words of one whole opcode into `words`; returns how many.
    fn opcode(&mut self, opcode: &[u8], words: &mut [u32; 16]) -> usize {
        let op = opcode[0];
        let be = |bytes: &[u8]| bytes.iter().fold(0u32, |acc, &b| (acc << 8) | b as u32);
        let delta = match op >> 6 {
            0b00 => sign_extend((op & 0x3F) as u32, 6),
            0b01 => sign_extend(((op & 0x3F) as u32) << 8 | be(&opcode[1..]), 14),
            0b10 => {
                // An index only sets `last`; the table is not updated.
                let v = self.table[(op & 0x3F) as usize];
                self.last = v;
                words[0] = v;
                return 1;
            }
            _ => match op >> 4 {
                0b1100 => sign_extend(((op & 0x0F) as u32) << 16 | be(&opcode[1..]), 20),
                0b1101 => sign_extend(((op & 0x0F) as u32) << 24 | be(&opcode[1..]), 28),
                0b1110 => {
                    let count = (op & 0x0F) as usize + 1;
                    words[..count].fill(self.last);
                    if count != 16 {
                        self.last = self.last.wrapping_add(1);
                    }
                    return count;
                }
                _ => {
                    let count = (op & 0x0F) as usize + 1;
                    for (k, word) in opcode[1..].chunks_exact(4).enumerate() {
                        let v = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
                        self.remember(v);
                        words[k] = v;
                    }
                    return count;
                }
            },
        };
        let d = if delta >= 0 { delta + 1 } else { delta };
        let v = self.last.wrapping_add(d as u32);
        self.remember(v);
        words[0] = v;
        1
    }

    fn remember(&mut self, v: u32) {
        self.last = v;
        self.table[(word_hash(v) % 64) as usize] = v;
    }

    /// The stream ended with `rest` (the bytes [`SimpleU32Decoder::decode`] left, which do not
    /// make a whole opcode): an error unless it is empty and exactly the words wanted came out.
    pub fn finish(&self, rest: &[u8]) -> Result<(), DecodeError> {
        if let Some(&op) = rest.first() {
            return Err(DecodeError {
                offset: self.consumed,
                message: format!(
                    "opcode {op:#04x} needs {} more byte(s); the stream ends",
                    opcode_len(op) - rest.len()
                ),
            });
        }
        if self.produced != self.want {
            return Err(DecodeError {
                offset: self.consumed,
                message: format!(
                    "the stream ends after {} of the {} values of the shape",
                    self.produced, self.want
                ),
            });
        }
        Ok(())
    }
}

/// Decode a scheme-17 stream into `out` (4 bytes per word, little-endian).
///
/// `whole`: the stream must produce exactly `out.len() / 4` words and end there (the read
/// path and `validate`). Otherwise decoding stops once `out` is full (previews).
pub fn decode_simple_u32(stream: &[u8], out: &mut [u8], whole: bool) -> Result<(), DecodeError> {
    let want = (out.len() / 4) as u64;
    let mut decoder = SimpleU32Decoder::new(if whole { want } else { u64::MAX });
    let mut words = Vec::with_capacity(out.len().min(1 << 20));
    let mut pos = 0usize;
    let mut filled = 0usize;
    loop {
        words.clear();
        let n = decoder.decode(&stream[pos..], &mut words, 1 << 20)?;
        pos += n;
        let take = words.len().min(out.len() - filled);
        out[filled..filled + take].copy_from_slice(&words[..take]);
        filled += take;
        if !whole && filled == out.len() {
            return Ok(());
        }
        if n == 0 {
            break;
        }
    }
    decoder.finish(&stream[pos..])
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
