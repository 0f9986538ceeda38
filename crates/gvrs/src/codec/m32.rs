//! M32: Gridfour's variable-length signed integer code for predictor residuals.
//!
//! -126..=126 is one signed byte; 0x80 is `i32::MIN`; otherwise a 0x7F (positive) or 0x81
//! (negative) introducer is followed by 1..=5 big-endian base-128 groups (continuation bit 0x80
//! on all but the last) holding `|v| - base(k)`.

/// Offsets added to the group value for a sequence of k = 1..=5 follow bytes.
const BASE: [i64; 5] = [127, 255, 16_639, 2_113_791, 270_549_247];

/// Why an M32 stream could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum M32Error {
    /// The stream ends inside a code, or holds fewer codes than the tile needs.
    Truncated,
    /// A sequence with more than 5 follow bytes, or a magnitude outside the i32 range.
    Malformed,
    /// Bytes are left over after the last code the tile needs.
    Trailing,
}

impl M32Error {
    /// The finding code (`gvrs.codec.*`).
    pub fn code(self) -> &'static str {
        match self {
            M32Error::Truncated => "gvrs.codec.m32_truncated",
            M32Error::Malformed => "gvrs.codec.bad_m32",
            M32Error::Trailing => "gvrs.codec.m32_trailing",
        }
    }
}

/// Sequential reader over an M32 byte stream.
pub struct M32Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> M32Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        M32Reader { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Error unless every byte was consumed (Gridfour writes exactly the codes the tile needs).
    pub fn finish(&self) -> Result<(), M32Error> {
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            Err(M32Error::Trailing)
        }
    }

    /// The next value of the stream.
    #[inline(always)]
    pub fn next_value(&mut self) -> Result<i32, M32Error> {
        let Some(&b) = self.buf.get(self.pos) else {
            return Err(M32Error::Truncated);
        };
        self.pos += 1;
        let s = b as i8;
        if s > -127 && s < 127 {
            return Ok(s as i32);
        }
        if s == -128 {
            return Ok(i32::MIN);
        }
        self.next_long(s == -127)
    }

    /// Fill `out` with the next `out.len()` values. Runs of one-byte codes (the usual case for
    /// residuals) are converted 16 at a time after one branch-free check.
    pub fn fill(&mut self, out: &mut [i32]) -> Result<(), M32Error> {
        const RUN: usize = 16;
        let mut i = 0;
        while i < out.len() {
            if i + RUN <= out.len() {
                if let Some(chunk) = self.buf.get(self.pos..self.pos + RUN) {
                    // 0x7F, 0x80 and 0x81 are the only bytes that are not a value by themselves.
                    let special = chunk.iter().fold(false, |acc, &b| acc | (b.wrapping_sub(0x7F) < 3));
                    if !special {
                        for (o, &b) in out[i..i + RUN].iter_mut().zip(chunk) {
                            *o = i32::from(b as i8);
                        }
                        i += RUN;
                        self.pos += RUN;
                        continue;
                    }
                }
            }
            out[i] = self.next_value()?;
            i += 1;
        }
        Ok(())
    }

    #[cold]
    fn next_long(&mut self, negative: bool) -> Result<i32, M32Error> {
        let mut delta: i64 = 0;
        for base in BASE {
            let Some(&g) = self.buf.get(self.pos) else {
                return Err(M32Error::Truncated);
            };
            self.pos += 1;
            delta = (delta << 7) | i64::from(g & 0x7F);
            if g & 0x80 == 0 {
                let mag = delta + base;
                let v = if negative { -mag } else { mag };
                // A magnitude of 2^31 with the negative introducer is never written (0x80 is
                // the code for i32::MIN), so only the i32 range is accepted.
                return i32::try_from(v).map_err(|_| M32Error::Malformed);
            }
        }
        Err(M32Error::Malformed)
    }
}

/// Append the M32 code of `v` to `out`.
#[inline(always)]
pub fn encode(v: i32, out: &mut Vec<u8>) {
    if v > -127 && v < 127 {
        out.push(v as u8);
        return;
    }
    if v == i32::MIN {
        out.push(0x80);
        return;
    }
    encode_long(v, out)
}

#[cold]
fn encode_long(v: i32, out: &mut Vec<u8>) {
    let (intro, mag) = if v < 0 {
        (0x81u8, -(v as i64))
    } else {
        (0x7Fu8, v as i64)
    };
    out.push(intro);
    let k = if mag <= 254 {
        1
    } else if mag <= 16_638 {
        2
    } else if mag <= 2_113_790 {
        3
    } else if mag <= 270_549_246 {
        4
    } else {
        5
    };
    let d = mag - BASE[k - 1];
    for i in (0..k).rev() {
        let g = ((d >> (7 * i)) & 0x7F) as u8;
        out.push(if i == 0 { g } else { g | 0x80 });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: i32) -> Vec<u8> {
        let mut o = Vec::new();
        encode(v, &mut o);
        o
    }

    #[test]
    fn errata_examples() {
        assert_eq!(enc(127), [0x7F, 0x00]);
        assert_eq!(enc(-128), [0x81, 0x01]);
        assert_eq!(enc(300), [0x7F, 0x80, 0x2D]);
        assert_eq!(enc(i32::MIN), [0x80]);
        assert_eq!(enc(126), [126]);
        assert_eq!(enc(-126), [0x82]);
    }

    #[test]
    fn round_trip_boundaries() {
        let mut vals = vec![0, 1, -1, i32::MAX, i32::MIN, i32::MIN + 1];
        for b in [
            127i64,
            254,
            255,
            16_638,
            16_639,
            2_113_790,
            2_113_791,
            270_549_246,
            270_549_247,
        ] {
            for d in [-1i64, 0, 1] {
                let x = b + d;
                vals.push(x as i32);
                vals.push(-(x as i32));
            }
        }
        for v in vals {
            let e = enc(v);
            let mut r = M32Reader::new(&e);
            assert_eq!(r.next_value(), Ok(v), "{v}");
            assert!(r.finish().is_ok());
        }
    }

    #[test]
    fn fill_matches_next_value() {
        let mut bytes = Vec::new();
        let mut vals = Vec::new();
        for i in 0..2000i64 {
            let v = match i % 37 {
                0 => i32::MIN,
                5 => (i * 1_000_003) as i32,
                9 => -(i as i32) * 77,
                _ => ((i * 7919) % 253 - 126) as i32,
            };
            encode(v, &mut bytes);
            vals.push(v);
        }
        for n in [0, 1, 15, 16, 17, 100, 2000] {
            let mut out = vec![0; n];
            let mut r = M32Reader::new(&bytes);
            r.fill(&mut out).unwrap();
            assert_eq!(out, vals[..n]);
            let mut one = M32Reader::new(&bytes);
            for _ in 0..n {
                one.next_value().unwrap();
            }
            assert_eq!(r.position(), one.position());
        }
        let mut out = vec![0; 2001];
        assert_eq!(M32Reader::new(&bytes).fill(&mut out), Err(M32Error::Truncated));
    }

    #[test]
    fn malformed() {
        assert_eq!(M32Reader::new(&[0x7F]).next_value(), Err(M32Error::Truncated));
        assert_eq!(M32Reader::new(&[0x7F, 0x80]).next_value(), Err(M32Error::Truncated));
        assert_eq!(
            M32Reader::new(&[0x7F, 0x80, 0x80, 0x80, 0x80, 0x80, 0]).next_value(),
            Err(M32Error::Malformed)
        );
        assert_eq!(
            M32Reader::new(&[0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F]).next_value(),
            Err(M32Error::Malformed)
        );
        assert_eq!(M32Reader::new(&[]).next_value(), Err(M32Error::Truncated));
    }
}
