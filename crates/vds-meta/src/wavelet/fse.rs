//! Finite State Entropy (tANS) decoding of the byte planes OpenVDS's wavelet codec stores for
//! its side channels (zero-run counts, lossless residual planes).
//!
//! The stream is the "standalone" FSE layout of the FiniteStateEntropy library (the same table
//! description and bit order as zstd, RFC 8878 section 4.1, but without zstd's framing):
//! a normalized-count header read least-significant bit first, then a backward bitstream ending
//! with a marker bit, decoded with two interleaved states until the bits run out. There is no
//! symbol count in the stream: the caller knows how many bytes it needs, and anything else is
//! an error here (OpenVDS ignores the decoder's status; see docs/formats/vds-wavelet.md).

/// Why an FSE block did not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FseError {
    /// The normalized-count header is malformed (bad accuracy, counts that do not sum up).
    Header(&'static str),
    /// The bitstream is empty, lacks its end marker, or yields a different number of symbols.
    Stream(&'static str),
}

impl std::fmt::Display for FseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FseError::Header(m) => write!(f, "FSE table description: {m}"),
            FseError::Stream(m) => write!(f, "FSE bitstream: {m}"),
        }
    }
}

/// Largest table log the decoder accepts (the library is built with 14-bit memory usage).
const MAX_TABLE_LOG: u32 = 12;
const MIN_TABLE_LOG: u32 = 5;
/// Largest accuracy log the header format can state before the decoder rejects the table.
const HEADER_MAX_LOG: u32 = 15;
const MAX_SYMBOL: usize = 255;

#[derive(Debug, Clone, Copy, Default)]
struct Cell {
    symbol: u8,
    bits: u8,
    base: u16,
}

/// Reusable decoding table (4096 cells at most).
#[derive(Default)]
pub struct FseTable {
    cells: Vec<Cell>,
    log: u32,
}

/// Forward (LSB-first) bit reader over the header; past the end it reads zeros, and the
/// caller rejects a header that ends beyond the input.
struct HeaderBits<'a> {
    src: &'a [u8],
    bit: usize,
}

impl HeaderBits<'_> {
    fn peek(&self, n: u32) -> u32 {
        // n <= 16; gather up to 3 bytes around the position.
        let byte = self.bit / 8;
        let shift = self.bit % 8;
        let mut w = 0u32;
        for k in 0..3 {
            w |= u32::from(self.src.get(byte + k).copied().unwrap_or(0)) << (8 * k);
        }
        (w >> shift) & ((1u32 << n) - 1)
    }
    fn skip(&mut self, n: u32) {
        self.bit += n as usize;
    }
}

/// Read the normalized counts; returns `(counts, max symbol, table log, header bytes)`.
fn read_counts(src: &[u8], counts: &mut [i16; MAX_SYMBOL + 1]) -> Result<(usize, u32, usize), FseError> {
    if src.len() < 4 {
        return Err(FseError::Header("shorter than 4 bytes"));
    }
    let mut r = HeaderBits { src, bit: 0 };
    let log = r.peek(4) + MIN_TABLE_LOG;
    r.skip(4);
    if log > HEADER_MAX_LOG {
        return Err(FseError::Header("accuracy log above 15"));
    }
    let mut remaining: i32 = (1 << log) + 1;
    let mut threshold: i32 = 1 << log;
    let mut nbits: u32 = log + 1;
    let mut symbol = 0usize;
    let mut previous_zero = false;
    while remaining > 1 && symbol <= MAX_SYMBOL {
        if previous_zero {
            // Runs of zero-probability symbols: 2-bit repeat fields, 3 meaning "3 and more".
            let mut n0 = symbol;
            loop {
                let v = r.peek(2) as usize;
                r.skip(2);
                n0 += v;
                if v != 3 {
                    break;
                }
                if n0 > MAX_SYMBOL + 3 {
                    return Err(FseError::Header("zero run past symbol 255"));
                }
            }
            if n0 > MAX_SYMBOL {
                return Err(FseError::Header("zero run past symbol 255"));
            }
            while symbol < n0 {
                counts[symbol] = 0;
                symbol += 1;
            }
        }
        let max = (2 * threshold - 1) - remaining;
        let low = r.peek(nbits - 1) as i32;
        let mut count;
        if low < max {
            count = low;
            r.skip(nbits - 1);
        } else {
            count = r.peek(nbits) as i32;
            if count >= threshold {
                count -= max;
            }
            r.skip(nbits);
        }
        count -= 1; // stored with +1 so that "less than one" (-1) is representable
        remaining -= count.abs();
        if remaining < 1 {
            return Err(FseError::Header("counts exceed the table size"));
        }
        counts[symbol] = count as i16;
        symbol += 1;
        previous_zero = count == 0;
        while remaining < threshold {
            nbits -= 1;
            threshold >>= 1;
        }
    }
    if remaining != 1 {
        return Err(FseError::Header("counts do not fill the table"));
    }
    let len = r.bit.div_ceil(8);
    if len > src.len() {
        return Err(FseError::Header("header runs past the block"));
    }
    Ok((symbol - 1, log, len))
}

impl FseTable {
    /// Build the decoding table from normalized counts (symbols spread with the FSE step).
    fn build(&mut self, counts: &[i16], max_symbol: usize, log: u32) -> Result<(), FseError> {
        if log > MAX_TABLE_LOG {
            return Err(FseError::Header("table log above 12"));
        }
        let size = 1usize << log;
        self.log = log;
        self.cells.clear();
        self.cells.resize(size, Cell::default());
        let mut next = [0u32; MAX_SYMBOL + 1];
        // Symbols of probability "less than one" take one cell each from the top.
        let mut high = size as i64 - 1;
        for s in 0..=max_symbol {
            if counts[s] == -1 {
                if high < 0 {
                    return Err(FseError::Header("too many low-probability symbols"));
                }
                self.cells[high as usize].symbol = s as u8;
                high -= 1;
                next[s] = 1;
            } else {
                next[s] = counts[s].max(0) as u32;
            }
        }
        let mask = size - 1;
        let step = (size >> 1) + (size >> 3) + 3;
        let mut pos = 0usize;
        for s in 0..=max_symbol {
            for _ in 0..counts[s].max(0) {
                if high < 0 {
                    return Err(FseError::Header("no cell left for a symbol"));
                }
                self.cells[pos].symbol = s as u8;
                pos = (pos + step) & mask;
                // The step is odd, so this visits every cell: it ends within `size` steps.
                while pos as i64 > high {
                    pos = (pos + step) & mask;
                }
            }
        }
        if pos != 0 {
            return Err(FseError::Header("symbols do not fill the table"));
        }
        for c in self.cells.iter_mut() {
            let s = c.symbol as usize;
            let n = next[s];
            next[s] = n + 1;
            let bits = log - (31 - n.leading_zeros());
            c.bits = bits as u8;
            c.base = ((n << bits) - size as u32) as u16;
        }
        Ok(())
    }
}

/// Backward bit reader: bits are taken from the end of the block towards its start, below
/// the end marker; reading past the start yields zeros and marks the stream as overrun.
struct BackBits<'a> {
    src: &'a [u8],
    /// Data bits not yet read (may go negative: overrun).
    left: i64,
}

impl<'a> BackBits<'a> {
    fn new(src: &'a [u8]) -> Result<Self, FseError> {
        let Some(&last) = src.last() else {
            return Err(FseError::Stream("empty"));
        };
        if last == 0 {
            return Err(FseError::Stream("no end marker"));
        }
        let marker = 7 - last.leading_zeros() as i64;
        Ok(BackBits {
            src,
            left: (src.len() as i64 - 1) * 8 + marker,
        })
    }

    #[inline(always)]
    fn read(&mut self, n: u32) -> u32 {
        if n == 0 {
            return 0;
        }
        let start = self.left - n as i64;
        self.left = start;
        if start >= 0 {
            let start = start as usize;
            let byte = start / 8;
            let w = match self.src.get(byte..byte + 4) {
                Some(b) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                None => {
                    let mut w = 0u32;
                    for k in 0..3 {
                        w |= u32::from(self.src.get(byte + k).copied().unwrap_or(0)) << (8 * k);
                    }
                    w
                }
            };
            (w >> (start % 8)) & ((1u32 << n) - 1)
        } else {
            // Only the top `n + start` bits exist; the rest reads as zeros.
            let have = n as i64 + start;
            if have <= 0 {
                return 0;
            }
            let w = u32::from(self.src.first().copied().unwrap_or(0))
                | (u32::from(self.src.get(1).copied().unwrap_or(0)) << 8);
            (w & ((1u32 << have) - 1)) << (-start)
        }
    }

    fn overrun(&self) -> bool {
        self.left < 0
    }
}

/// Decode an FSE block into exactly `out.len()` bytes.
pub fn decompress(src: &[u8], out: &mut [u8], table: &mut FseTable) -> Result<(), FseError> {
    if src.len() < 2 {
        return Err(FseError::Stream("block shorter than 2 bytes"));
    }
    let mut counts = [0i16; MAX_SYMBOL + 1];
    let (max_symbol, log, hlen) = read_counts(src, &mut counts)?;
    if hlen >= src.len() {
        return Err(FseError::Stream("no bitstream after the table description"));
    }
    table.build(&counts, max_symbol, log)?;
    let mut bits = BackBits::new(&src[hlen..])?;
    let cells = &table.cells;
    let mut states = [bits.read(log) as usize, bits.read(log) as usize];
    let n = out.len();
    let mut produced = 0usize;
    // States stay below the table size by construction (base + read bits < size): masking
    // keeps the fast loop free of bounds checks without changing any state.
    let mask = cells.len() - 1;
    // Fast loop: two symbols per round while both state updates certainly have their bits
    // (at most 2 x 12) and room is left for the final symbols.
    while produced + 2 < n && bits.left >= 2 * MAX_TABLE_LOG as i64 {
        let c = cells[states[0] & mask];
        out[produced] = c.symbol;
        states[0] = c.base as usize + bits.read(u32::from(c.bits)) as usize;
        let c = cells[states[1] & mask];
        out[produced + 1] = c.symbol;
        states[1] = c.base as usize + bits.read(u32::from(c.bits)) as usize;
        produced += 2;
    }
    // Alternate the two states; once a state update runs out of bits, the other state's
    // symbol is the last one.
    let mut which = 0usize;
    loop {
        let Some(&c) = cells.get(states[which]) else {
            return Err(FseError::Stream("state outside the table"));
        };
        if produced >= n {
            return Err(FseError::Stream("more symbols than expected"));
        }
        out[produced] = c.symbol;
        produced += 1;
        states[which] = c.base as usize + bits.read(u32::from(c.bits)) as usize;
        if bits.overrun() {
            let other = 1 - which;
            let Some(&c) = cells.get(states[other]) else {
                return Err(FseError::Stream("state outside the table"));
            };
            if produced >= n {
                return Err(FseError::Stream("more symbols than expected"));
            }
            out[produced] = c.symbol;
            produced += 1;
            break;
        }
        // A stream of zero-bit transitions never overruns: it fails above at the expected
        // size, as the reference decoder does.
        which = 1 - which;
    }
    if produced != n {
        return Err(FseError::Stream("fewer symbols than expected"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny FSE encoder (the textbook tANS construction matching the decoder's table),
    /// used only to test the decoder on streams with known content.
    fn encode(data: &[u8], counts: &[i16], log: u32) -> Vec<u8> {
        let mut t = FseTable::default();
        let max_symbol = counts.len() - 1;
        t.build(counts, max_symbol, log).unwrap();
        let size = 1u32 << log;
        // For each symbol, the decoder states that emit it, in order: state -> (bits, base).
        let mut enc: Vec<Vec<u32>> = vec![Vec::new(); counts.len()];
        for (i, c) in t.cells.iter().enumerate() {
            enc[c.symbol as usize].push(i as u32);
        }
        // Encoding runs backwards: find a state x emitting data[k] whose transition reaches
        // the current state of its lane (the state the decoder will be in after reading).
        let mut bitsout: Vec<(u32, u32)> = Vec::new(); // (value, nbits), in decode order reversed
        let n = data.len();
        let mut st = [None::<u32>, None::<u32>];
        for k in (0..n).rev() {
            let lane = k % 2;
            let s = data[k] as usize;
            match st[lane] {
                None => {
                    st[lane] = Some(enc[s][0]);
                }
                Some(target) => {
                    let mut found = None;
                    for &x in &enc[s] {
                        let c = t.cells[x as usize];
                        let lo = c.base as u32;
                        let hi = lo + (1 << c.bits);
                        if target >= lo && target < hi {
                            found = Some((x, target - lo, c.bits as u32));
                            break;
                        }
                    }
                    let (x, v, b) = found.expect("encodable");
                    bitsout.push((v, b));
                    st[lane] = Some(x);
                }
            }
        }
        let _ = size;
        // The decoder reads state 0 (lane 0) first, then lane 1, then transitions in order.
        let mut seq: Vec<(u32, u32)> = vec![(st[0].unwrap(), log), (st[1].unwrap(), log)];
        seq.extend(bitsout.iter().rev());
        // The final symbol pair ends with an overrun read: append nothing; the decoder's last
        // update needs more bits than remain. Write bits so that the first read is topmost.
        let total: u32 = seq.iter().map(|s| s.1).sum();
        let nbytes = (total as usize + 1).div_ceil(8);
        let mut out = vec![0u8; nbytes];
        let mut pos = total as i64; // marker at bit `total`
        out[(pos / 8) as usize] |= 1 << (pos % 8);
        for (v, b) in seq {
            pos -= b as i64;
            for i in 0..b {
                if v >> i & 1 == 1 {
                    let p = pos + i as i64;
                    out[(p / 8) as usize] |= 1 << (p % 8);
                }
            }
        }
        out
    }

    fn header(counts: &[i16], log: u32) -> Vec<u8> {
        // Write the normalized counts the way the reader expects them.
        let mut bits: Vec<bool> = Vec::new();
        let put = |v: u32, n: u32, bits: &mut Vec<bool>| {
            for i in 0..n {
                bits.push(v >> i & 1 == 1);
            }
        };
        put(log - MIN_TABLE_LOG, 4, &mut bits);
        let mut remaining: i32 = (1 << log) + 1;
        let mut threshold: i32 = 1 << log;
        let mut nbits = log + 1;
        let mut s = 0;
        let mut previous_zero = false;
        while remaining > 1 {
            if previous_zero {
                let mut start = s;
                while start < counts.len() && counts[start] == 0 {
                    start += 1;
                }
                let mut run = start - s;
                while run >= 3 {
                    put(3, 2, &mut bits);
                    run -= 3;
                }
                put(run as u32, 2, &mut bits);
                s = start;
            }
            let count = counts[s] as i32 + 1;
            let max = (2 * threshold - 1) - remaining;
            if count < max {
                put(count as u32, nbits - 1, &mut bits);
            } else if count < threshold {
                put(count as u32, nbits, &mut bits);
            } else {
                put((count + max) as u32, nbits, &mut bits);
            }
            remaining -= (count - 1).abs();
            previous_zero = count == 1;
            s += 1;
            while remaining < threshold {
                nbits -= 1;
                threshold >>= 1;
            }
        }
        let mut out = vec![0u8; bits.len().div_ceil(8)];
        for (i, b) in bits.iter().enumerate() {
            if *b {
                out[i / 8] |= 1 << (i % 8);
            }
        }
        out
    }

    #[test]
    fn round_trip_and_errors() {
        // counts over 3 symbols + a zero run + a low-probability symbol; table log 5 (32).
        let mut counts = vec![0i16; 10];
        counts[0] = 20;
        counts[1] = 7;
        counts[2] = 4;
        counts[9] = -1; // "less than one"
        let data: Vec<u8> = (0..300u32)
            .map(|i| [0u8, 0, 1, 0, 2, 0, 1, 9][(i * 7 % 8) as usize])
            .collect();
        let mut block = header(&counts, 5);
        let mut got = [0i16; 256];
        let (ms, log, hl) = read_counts(&[block.clone(), vec![0; 8]].concat(), &mut got).unwrap();
        assert_eq!((ms, log, hl), (9, 5, block.len()));
        assert_eq!(&got[..10], &counts[..]);
        block.extend(encode(&data, &counts, 5));
        let mut t = FseTable::default();
        let mut out = vec![0u8; data.len()];
        decompress(&block, &mut out, &mut t).unwrap();
        assert_eq!(out, data);
        // Wrong expected sizes fail, as do truncation and a missing end marker.
        assert!(decompress(&block, &mut vec![0u8; data.len() - 1], &mut t).is_err());
        assert!(decompress(&block, &mut vec![0u8; data.len() + 1], &mut t).is_err());
        assert!(decompress(&block[..block.len() - 2], &mut out, &mut t).is_err());
        let mut nomark = block.clone();
        *nomark.last_mut().unwrap() = 0;
        assert!(decompress(&nomark, &mut out, &mut t).is_err());
        // Every truncation and every single-bit flip either fails or yields exactly n bytes.
        for cut in 0..block.len() {
            let _ = decompress(&block[..cut], &mut out, &mut t);
        }
        for i in 0..block.len() * 8 {
            let mut b = block.clone();
            b[i / 8] ^= 1 << (i % 8);
            let _ = decompress(&b, &mut out, &mut t);
        }
    }

    #[test]
    fn header_rejects_bad_counts() {
        let mut t = [0i16; 256];
        assert!(read_counts(&[0x0F, 0xFF, 0xFF, 0xFF], &mut t).is_err()); // log 20
        assert!(read_counts(&[0, 0], &mut t).is_err());
        // table log 13 parses but is refused by the table builder
        let mut counts = vec![0i16; 2];
        counts[0] = 4096;
        counts[1] = 4096;
        let h = header(&counts, 13);
        let (ms, log, _) = read_counts(&[h, vec![0; 8]].concat(), &mut t).unwrap();
        let mut tab = FseTable::default();
        assert!(tab.build(&t, ms, log).is_err());
    }
}
