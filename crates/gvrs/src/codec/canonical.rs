//! GvrsCanonicalHuffman (Gridfour 2026): a canonical Huffman code over integer "symbols", used
//! by the tile codec of that name and for LSOP12 residuals (revised LSOP header, type 2).
//! Facts from Gridfour's source (`compress/canonicalHuffman`), described in
//! `docs/formats/gvrs-codecs.md`; the code here is rasterpack's own.
//!
//! One "text" (a sequence of i32 values) is coded as, in one LSB-first bit stream:
//! 1. one reserved bit (0);
//! 2. the code lengths of a 20-symbol "length alphabet" (0..=15 a length, 16 = repeat the
//!    previous length 3..=6 times (2 extra bits), 17 = 3..=10 zeros (3 bits), 18 = 11..=138
//!    zeros (7 bits), 19 = a slot Gridfour gives a count of one and never writes), each length
//!    written as 5 plain bits, with the same run symbols;
//! 3. the code lengths of the 260 text symbols, each written with the canonical code built from
//!    (2), runs as in (2);
//! 4. the values: symbols 0..=255 are the values -128..=127; 256 is `i32::MIN` (Gridfour's null);
//!    258 is followed by 2 plain bits and 257 by 8 plain bits, both shifting them into the last
//!    value (`last = last << k | bits`), which is how larger values are made; 259 ends the text.
//!
//! Codes are canonical (ordered by length, then symbol; the first code is all zeros) and are
//! written most-significant bit first into the LSB-first stream, as in RFC 1951.

pub use super::bits::Bits;
use super::huffman::BitWriter;

/// Text alphabet: 256 literals, null, 8-bit escape, 2-bit escape, end of text.
pub const TEXT_SYMBOLS: usize = 260;
const SYM_NULL: u16 = 256;
const SYM_ESC8: u16 = 257;
const SYM_ESC2: u16 = 258;
const SYM_END: u16 = 259;
/// Length alphabet: 0..=15, three run symbols and Gridfour's unused slot 19.
const LEN_SYMBOLS: usize = 20;
const REPEAT_PREV: u8 = 16;
const REPEAT_ZERO_3: u8 = 17;
const REPEAT_ZERO_7: u8 = 18;
/// Longest code Gridfour writes (its length alphabet has no symbol for more).
pub const MAX_LEN: u32 = 15;

/// Why a canonical Huffman text could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CanonError {
    /// The bit stream ends inside the tables or before the end-of-text symbol.
    Truncated,
    /// A code-length sequence holds an undefined symbol or a run past the end of its table.
    BadLengths,
    /// A code whose lengths do not form a complete prefix code (Kraft sum != 1).
    Incomplete,
    /// The text holds more or fewer values than the tile needs.
    Count {
        /// Values the tile needs.
        expected: usize,
        /// Values the text holds.
        got: usize,
    },
    /// An escape symbol before any value.
    Escape,
    /// The reserved bit is set (a later revision of the format).
    Reserved,
}

impl CanonError {
    /// The finding code (`gvrs.codec.canonical_*`).
    pub fn code(self) -> &'static str {
        match self {
            CanonError::Truncated => "gvrs.codec.canonical_truncated",
            CanonError::BadLengths => "gvrs.codec.canonical_lengths",
            CanonError::Incomplete => "gvrs.codec.canonical_incomplete",
            CanonError::Count { .. } => "gvrs.codec.canonical_count",
            CanonError::Escape => "gvrs.codec.canonical_escape",
            CanonError::Reserved => "gvrs.codec.canonical_reserved",
        }
    }

    /// Whether this is "not supported" (a flag of a later revision) rather than damage.
    pub fn is_unsupported(self) -> bool {
        self == CanonError::Reserved
    }

    /// What went wrong, in words.
    pub fn message(self) -> String {
        match self {
            CanonError::Truncated => "canonical Huffman data ends before its end-of-text code".into(),
            CanonError::BadLengths => {
                "canonical Huffman code lengths: undefined length symbol or a run past the table".into()
            }
            CanonError::Incomplete => "canonical Huffman code lengths do not form a complete prefix code".into(),
            CanonError::Count { expected, got } => {
                format!("canonical Huffman text holds {got} value(s), the tile needs {expected}")
            }
            CanonError::Escape => "canonical Huffman escape code before any value".into(),
            CanonError::Reserved => {
                "canonical Huffman reserved bit is set (a later revision of the coding is not supported)".into()
            }
        }
    }
}

/// Entry flag of the one-symbol table: the code is longer than the table's width.
const LONG: u32 = 1 << 31;

/// A canonical code ready for decoding: a table indexed by the next `width` bits (one symbol
/// per entry, or LONG), a table of up to three literal values per entry for long texts, and the
/// per-length counts for codes longer than the table.
struct Decoder {
    width: u32,
    /// `symbol | length << 16`, or LONG.
    single: Vec<u32>,
    /// Up to three literal symbols (bytes 0..3), bits used (bits 24..28), count (bits 28..30);
    /// 0 when the first code is not a literal or is long. Empty when not built.
    multi: Vec<u32>,
    count: [u16; 16],
    /// Symbols ordered by (length, symbol).
    sorted: Vec<u16>,
}

/// Build the decoder for `lens`, checking that they form a complete prefix code.
fn build(lens: &[u8], width: u32, with_multi: bool) -> Result<Decoder, CanonError> {
    let mut count = [0u16; 16];
    for &l in lens {
        count[l as usize] += 1;
    }
    count[0] = 0;
    // Kraft sum in units of 2^-15: complete exactly when it is 2^15.
    let kraft: u32 = (1..=15).map(|l| u32::from(count[l]) << (15 - l)).sum();
    if kraft != 1 << 15 {
        return Err(CanonError::Incomplete);
    }
    let mut next_code = [0u32; 16];
    let mut code = 0u32;
    for l in 1..=15 {
        code = (code + u32::from(count[l - 1])) << 1;
        next_code[l] = code;
    }
    let mut offsets = [0usize; 16];
    for l in 1..15 {
        offsets[l + 1] = offsets[l] + count[l] as usize;
    }
    let n_used = offsets[15] + count[15] as usize;
    let mut sorted = vec![0u16; n_used];
    let size = 1usize << width;
    let mut single = vec![0u32; size];
    for (sym, &l) in lens.iter().enumerate() {
        if l == 0 {
            continue;
        }
        let l = u32::from(l);
        sorted[offsets[l as usize]] = sym as u16;
        offsets[l as usize] += 1;
        let c = next_code[l as usize];
        next_code[l as usize] += 1;
        if l <= width {
            let rev = (c.reverse_bits() >> (32 - l)) as usize;
            let step = 1usize << l;
            let mut i = rev;
            while i < size {
                single[i] = sym as u32 | (l << 16);
                i += step;
            }
        } else {
            // The first `width` bits of the code select the entry.
            let prefix = c >> (l - width);
            let rev = (prefix.reverse_bits() >> (32 - width)) as usize;
            single[rev] = LONG;
        }
    }
    let mut multi = Vec::new();
    if with_multi {
        multi = vec![0u32; size];
        let literal = |e: u32| e & LONG == 0 && (e & 0xFFFF) < 256;
        for (i, m) in multi.iter_mut().enumerate() {
            let e1 = single[i];
            if !literal(e1) {
                continue;
            }
            let l1 = e1 >> 16;
            let mut v = (e1 & 0xFF) | (l1 << 24) | (1 << 28);
            let e2 = single[i >> l1];
            let l2 = e2 >> 16;
            if literal(e2) && l1 + l2 <= width {
                v = (e1 & 0xFF) | ((e2 & 0xFF) << 8) | ((l1 + l2) << 24) | (2 << 28);
                let e3 = single[i >> (l1 + l2)];
                let l3 = e3 >> 16;
                if literal(e3) && l1 + l2 + l3 <= width {
                    v = (e1 & 0xFF) | ((e2 & 0xFF) << 8) | ((e3 & 0xFF) << 16) | ((l1 + l2 + l3) << 24) | (3 << 28);
                }
            }
            *m = v;
        }
    }
    Ok(Decoder {
        width,
        single,
        multi,
        count,
        sorted,
    })
}

impl Decoder {
    /// Decode one symbol (any length).
    #[inline(always)]
    fn symbol(&self, b: &mut Bits) -> u16 {
        b.refill();
        let e = self.single[(b.buf & ((1u64 << self.width) - 1)) as usize];
        if e & LONG == 0 {
            b.consume(e >> 16);
            return e as u16;
        }
        self.long_symbol(b)
    }

    /// Canonical decoding bit by bit (codes longer than the table; the buffer holds >= 56 bits).
    #[cold]
    fn long_symbol(&self, b: &mut Bits) -> u16 {
        let (mut code, mut first, mut index) = (0u32, 0u32, 0usize);
        for l in 1..=15u32 {
            code |= ((b.buf >> (l - 1)) & 1) as u32;
            let n = u32::from(self.count[l as usize]);
            if code < first + n {
                b.consume(l);
                return self.sorted[index + (code - first) as usize];
            }
            index += n as usize;
            first = (first + n) << 1;
            code <<= 1;
        }
        // Unreachable for a complete code (every 15-bit string starts with some code).
        b.consume(15);
        SYM_END
    }
}

/// Read a code-length sequence of `out.len()` lengths; `next` yields the next length symbol.
fn read_lengths(b: &mut Bits, out: &mut [u8], mut next: impl FnMut(&mut Bits) -> u16) -> Result<(), CanonError> {
    let mut k = 0;
    let mut prior = 0u8;
    while k < out.len() {
        let sym = next(b);
        let (value, run) = match sym {
            0..=15 => {
                prior = sym as u8;
                (prior, 1)
            }
            16 => (prior, b.bits(2) as usize + 3),
            17 => {
                prior = 0;
                (0, b.bits(3) as usize + 3)
            }
            18 => {
                prior = 0;
                (0, b.bits(7) as usize + 11)
            }
            _ => return Err(CanonError::BadLengths),
        };
        let end = k + run;
        if end > out.len() {
            return Err(CanonError::BadLengths);
        }
        out[k..end].fill(value);
        k = end;
        if b.overrun() {
            return Err(CanonError::Truncated);
        }
    }
    Ok(())
}

/// Decode one text from `b` into exactly `out.len()` values.
pub fn decode_text(b: &mut Bits, out: &mut [i32]) -> Result<(), CanonError> {
    if b.bits(1) != 0 {
        return Err(CanonError::Reserved);
    }
    let mut len_lens = [0u8; LEN_SYMBOLS];
    read_lengths(b, &mut len_lens, |b| b.bits(5) as u16)?;
    let lengths = build(&len_lens, 7, false)?;
    let mut text_lens = [0u8; TEXT_SYMBOLS];
    read_lengths(b, &mut text_lens, |b| lengths.symbol(b))?;
    let n = out.len();
    // The three-values table pays off only on long texts.
    let long_text = n >= 1024;
    let text = build(&text_lens, if long_text { 9 } else { 8 }, long_text)?;
    let mask = (1u64 << text.width) - 1;
    let mut k = 0usize;
    loop {
        // Fast path: up to four table lookups of at most `width` (<= 11) bits per refill, each
        // storing three values (the next lookups or the tail overwrite the extra ones).
        if long_text && k + 12 <= n {
            b.refill();
            let mut lookups = 0;
            while lookups < 4 {
                let m = text.multi[(b.buf & mask) as usize];
                if m == 0 {
                    break;
                }
                out[k] = (m & 0xFF) as i32 - 128;
                out[k + 1] = ((m >> 8) & 0xFF) as i32 - 128;
                out[k + 2] = ((m >> 16) & 0xFF) as i32 - 128;
                k += (m >> 28) as usize;
                b.consume((m >> 24) & 0xF);
                lookups += 1;
            }
            if lookups == 4 {
                continue;
            }
        }
        let sym = text.symbol(b);
        match sym {
            0..=255 => {
                if k >= n {
                    return Err(CanonError::Count {
                        expected: n,
                        got: n + 1,
                    });
                }
                out[k] = i32::from(sym) - 128;
                k += 1;
            }
            SYM_NULL => {
                if k >= n {
                    return Err(CanonError::Count {
                        expected: n,
                        got: n + 1,
                    });
                }
                out[k] = i32::MIN;
                k += 1;
            }
            SYM_ESC2 | SYM_ESC8 => {
                let w = if sym == SYM_ESC2 { 2 } else { 8 };
                let part = b.bits(w) as i32;
                let Some(last) = k.checked_sub(1).map(|i| &mut out[i]) else {
                    return Err(CanonError::Escape);
                };
                *last = last.wrapping_shl(w) | part;
            }
            _ => break,
        }
        if b.overrun() {
            return Err(CanonError::Truncated);
        }
    }
    if b.overrun() {
        return Err(CanonError::Truncated);
    }
    if k != n {
        return Err(CanonError::Count { expected: n, got: k });
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Encoding.

/// How a value is spelled: its first symbol, then `n_esc` escapes of `esc_bits` plain bits each.
#[inline(always)]
fn spelling(v: i32) -> (u16, u32, u32) {
    if (-128..=127).contains(&v) {
        return ((v + 128) as u16, 0, 0);
    }
    if v == i32::MIN {
        return (SYM_NULL, 0, 0);
    }
    // The shortest form: 1..3 two-bit escapes, else 1..3 eight-bit escapes (the leading part
    // must be a literal, -128..=127).
    for k in 1..=3u32 {
        let top = v >> (2 * k);
        if (-128..=127).contains(&top) {
            return ((top + 128) as u16, k, 2);
        }
    }
    for k in 1..=3u32 {
        let top = v >> (8 * k);
        if (-128..=127).contains(&top) {
            return ((top + 128) as u16, k, 8);
        }
    }
    unreachable!("v >> 24 always fits a literal")
}

/// Huffman code lengths for `freq` (zero for absent symbols), at most [`MAX_LEN`] bits, forming
/// a complete code; `freq` must have at least two non-zero entries.
fn code_lengths(freq: &[u64]) -> Vec<u8> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let n = freq.len();
    let mut lens = vec![0u8; n];
    let syms: Vec<usize> = (0..n).filter(|&s| freq[s] > 0).collect();
    if syms.len() < 2 {
        // Not produced by this encoder (every text has the end symbol and a value).
        for &s in &syms {
            lens[s] = 1;
        }
        return lens;
    }
    // Plain Huffman: parents of merged nodes, then depths.
    let mut parent = vec![usize::MAX; 2 * syms.len()];
    let mut heap = BinaryHeap::new();
    for (i, &s) in syms.iter().enumerate() {
        heap.push(Reverse((freq[s], i)));
    }
    let mut next = syms.len();
    while heap.len() > 1 {
        let (Some(Reverse((fa, a))), Some(Reverse((fb, b)))) = (heap.pop(), heap.pop()) else {
            break;
        };
        parent[a] = next;
        parent[b] = next;
        heap.push(Reverse((fa + fb, next)));
        next += 1;
    }
    let root = next - 1;
    let mut depth = vec![0u32; next];
    for i in (0..root).rev() {
        depth[i] = depth[parent[i]] + 1;
    }
    let max = depth[..syms.len()].iter().copied().max().unwrap_or(0) as usize;
    let mut bl_count = vec![0u32; max.max(MAX_LEN as usize) + 1];
    for &d in &depth[..syms.len()] {
        bl_count[d as usize] += 1;
    }
    if max > MAX_LEN as usize {
        // Move the overlong codes up (the JPEG / zlib adjustment): a pair of codes at the
        // deepest level becomes one code there and one a level below a shorter code split in
        // two, which keeps the code complete; repeat until nothing exceeds the limit.
        for i in (MAX_LEN as usize + 1..=max).rev() {
            while bl_count[i] > 0 {
                let mut j = i - 2;
                while bl_count[j] == 0 {
                    j -= 1;
                }
                bl_count[i] -= 2;
                bl_count[i - 1] += 1;
                bl_count[j + 1] += 2;
                bl_count[j] -= 1;
            }
        }
    }
    // Assign lengths: most frequent symbols get the shortest codes.
    let mut order: Vec<usize> = syms.clone();
    order.sort_by_key(|&s| (Reverse(freq[s]), s));
    let mut it = order.into_iter();
    for (l, &c) in bl_count.iter().enumerate().take(MAX_LEN as usize + 1).skip(1) {
        for _ in 0..c {
            if let Some(s) = it.next() {
                lens[s] = l as u8;
            }
        }
    }
    lens
}

/// Canonical codes for `lens`, bit-reversed for the LSB-first writer: (bits, length).
fn canonical_codes(lens: &[u8]) -> Vec<(u32, u32)> {
    let mut count = [0u32; 16];
    for &l in lens {
        count[l as usize] += 1;
    }
    count[0] = 0;
    let mut next_code = [0u32; 16];
    let mut code = 0u32;
    for l in 1..=15 {
        code = (code + count[l - 1]) << 1;
        next_code[l] = code;
    }
    lens.iter()
        .map(|&l| {
            if l == 0 {
                return (0, 0);
            }
            let l = u32::from(l);
            let c = next_code[l as usize];
            next_code[l as usize] += 1;
            (c.reverse_bits() >> (32 - l), l)
        })
        .collect()
}

/// Run-length form of a code-length sequence: (length symbol, extra bits value, extra bit count).
fn length_runs(lens: &[u8]) -> Vec<(u8, u32, u32)> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut prior = 0u8;
    while i < lens.len() {
        let v = lens[i];
        let run = lens[i..].iter().take_while(|&&x| x == v).count();
        if v == 0 && run >= 3 {
            let r = run.min(138);
            if r >= 11 {
                out.push((REPEAT_ZERO_7, (r - 11) as u32, 7));
            } else {
                out.push((REPEAT_ZERO_3, (r - 3) as u32, 3));
            }
            prior = 0;
            i += r;
        } else if v != 0 && v == prior && run >= 3 {
            let r = run.min(6);
            out.push((REPEAT_PREV, (r - 3) as u32, 2));
            i += r;
        } else {
            out.push((v, 0, 0));
            prior = v;
            i += 1;
        }
    }
    out
}

/// Everything needed to write one text, and its exact size.
pub struct TextPlan {
    /// Bit-reversed canonical codes of the 20 length symbols and the 260 text symbols.
    len_codes: Vec<(u32, u32)>,
    len_lens: [u8; LEN_SYMBOLS],
    text_runs: Vec<(u8, u32, u32)>,
    text_codes: Vec<(u32, u32)>,
    /// Exact size in bits.
    pub bits: u64,
}

/// Plan the coding of `values` (histogram, lengths, tables) without writing it.
pub fn plan(values: &[i32]) -> TextPlan {
    let mut freq = vec![0u64; TEXT_SYMBOLS];
    let mut extra = 0u64;
    for &v in values {
        let (s, k, w) = spelling(v);
        freq[s as usize] += 1;
        if k > 0 {
            freq[if w == 2 { SYM_ESC2 } else { SYM_ESC8 } as usize] += u64::from(k);
            extra += u64::from(k * w);
        }
    }
    freq[SYM_END as usize] += 1;
    let text_lens = code_lengths(&freq);
    let text_codes = canonical_codes(&text_lens);
    let text_runs = length_runs(&text_lens);
    let mut len_freq = vec![0u64; LEN_SYMBOLS];
    for r in &text_runs {
        len_freq[r.0 as usize] += 1;
    }
    // Gridfour's slot 19 gets a count of one: it guarantees a code of at least two symbols.
    len_freq[19] = 1;
    let len_lens_v = code_lengths(&len_freq);
    let mut len_lens = [0u8; LEN_SYMBOLS];
    len_lens.copy_from_slice(&len_lens_v);
    let len_codes = canonical_codes(&len_lens);
    let mut bits = 1u64;
    for (s, _, w) in length_runs(&len_lens) {
        bits += 5 + u64::from(w);
        let _ = s;
    }
    for &(s, _, w) in &text_runs {
        bits += u64::from(len_codes[s as usize].1 + w);
    }
    for (s, &f) in freq.iter().enumerate() {
        bits += f * u64::from(text_codes[s].1);
    }
    bits += extra;
    TextPlan {
        len_codes,
        len_lens,
        text_runs,
        text_codes,
        bits,
    }
}

/// Write `values` as one text with the tables of `plan` (made from these values).
pub fn write_text(plan: &TextPlan, values: &[i32], w: &mut BitWriter) {
    w.put(0, 1);
    for (s, x, n) in length_runs(&plan.len_lens) {
        w.put(u64::from(s), 5);
        if n > 0 {
            w.put(u64::from(x), n);
        }
    }
    for &(s, x, n) in &plan.text_runs {
        let (c, l) = plan.len_codes[s as usize];
        w.put(u64::from(c), l);
        if n > 0 {
            w.put(u64::from(x), n);
        }
    }
    let codes = &plan.text_codes;
    for &v in values {
        let (s, k, bw) = spelling(v);
        let (c, l) = codes[s as usize];
        w.put(u64::from(c), l);
        if k > 0 {
            let (ec, el) = codes[if bw == 2 { SYM_ESC2 } else { SYM_ESC8 } as usize];
            let mask = (1u32 << bw) - 1;
            for i in (0..k).rev() {
                w.put(u64::from(ec), el);
                w.put(u64::from((v >> (bw * i)) as u32 & mask), bw);
            }
        }
    }
    let (c, l) = codes[SYM_END as usize];
    w.put(u64::from(c), l);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(values: &[i32]) {
        let p = plan(values);
        let mut w = BitWriter::new(Vec::new());
        write_text(&p, values, &mut w);
        let bytes = w.finish();
        assert_eq!(bytes.len() as u64, p.bits.div_ceil(8), "planned size");
        let mut out = vec![7i32; values.len()];
        let mut b = Bits::new(&bytes, 0);
        decode_text(&mut b, &mut out).unwrap();
        assert_eq!(out, values);
        assert_eq!(b.consumed() as u64, p.bits);
    }

    #[test]
    fn round_trips() {
        round(&[0]);
        round(&[5; 100]);
        round(&[1, 2]);
        round(&(-128..=127).collect::<Vec<i32>>());
        let mut v: Vec<i32> = vec![
            i32::MIN,
            i32::MAX,
            i32::MIN + 1,
            128,
            -129,
            511,
            -512,
            512,
            2047,
            -2048,
            2048,
            8191,
            -8192,
            8192,
            32767,
            -32768,
            32768,
            8_388_607,
            -8_388_608,
            8_388_608,
            -8_388_609,
            -8_333_609,
        ];
        let mut x = 1u64;
        for i in 0..20_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let r = (x >> 33) as i32;
            v.push(match i % 5 {
                0 => r,
                1 => r % 1000,
                _ => r % 7,
            });
        }
        round(&v);
        // Skewed counts that make a plain Huffman code deeper than 15 bits.
        let mut s = Vec::new();
        let mut f = 1usize;
        let mut g = 1usize;
        for sym in 0..25 {
            for _ in 0..f {
                s.push(sym - 12);
            }
            let h = f + g;
            g = f;
            f = h.min(1 << 16);
        }
        round(&s);
    }

    #[test]
    fn lengths_are_limited_and_complete() {
        let mut freq = vec![0u64; 40];
        let (mut a, mut b) = (1u64, 1u64);
        for f in freq.iter_mut() {
            *f = a;
            let c = a + b;
            b = a;
            a = c;
        }
        let lens = code_lengths(&freq);
        assert!(lens.iter().all(|&l| (1..=15).contains(&l)));
        assert!(build(&lens, 9, false).is_ok());
    }

    fn stream(f: impl FnOnce(&mut BitWriter)) -> Vec<u8> {
        let mut w = BitWriter::new(Vec::new());
        f(&mut w);
        w.finish()
    }

    #[test]
    fn damaged_texts_are_refused() {
        // Reserved bit set.
        let b = stream(|w| w.put(1, 1));
        assert_eq!(decode_text(&mut Bits::new(&b, 0), &mut [0]), Err(CanonError::Reserved));
        // Length table: symbol 19 (undefined in a length sequence).
        let b = stream(|w| {
            w.put(0, 1);
            w.put(19, 5);
        });
        assert_eq!(
            decode_text(&mut Bits::new(&b, 0), &mut [0]),
            Err(CanonError::BadLengths)
        );
        // A zero run past the 20 lengths.
        let b = stream(|w| {
            w.put(0, 1);
            w.put(1, 5);
            w.put(18, 5);
            w.put(127, 7);
        });
        assert_eq!(
            decode_text(&mut Bits::new(&b, 0), &mut [0]),
            Err(CanonError::BadLengths)
        );
        // Incomplete length code: a single length-1 symbol.
        let b = stream(|w| {
            w.put(0, 1);
            w.put(1, 5);
            w.put(18, 5);
            w.put(8, 7);
        });
        assert_eq!(
            decode_text(&mut Bits::new(&b, 0), &mut [0]),
            Err(CanonError::Incomplete)
        );
        // Truncated: nothing after the reserved bit but zero bytes.
        assert_eq!(
            decode_text(&mut Bits::new(&[0u8; 2], 0), &mut [0]),
            Err(CanonError::Truncated)
        );
    }

    #[test]
    fn counts_must_match() {
        let values = [1, 2, 3, 4];
        let p = plan(&values);
        let mut w = BitWriter::new(Vec::new());
        write_text(&p, &values, &mut w);
        let bytes = w.finish();
        let mut three = [0; 3];
        assert_eq!(
            decode_text(&mut Bits::new(&bytes, 0), &mut three),
            Err(CanonError::Count { expected: 3, got: 4 })
        );
        let mut five = [0; 5];
        assert_eq!(
            decode_text(&mut Bits::new(&bytes, 0), &mut five),
            Err(CanonError::Count { expected: 5, got: 4 })
        );
    }
}
