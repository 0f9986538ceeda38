//! Gridfour's (pre-canonical) Huffman coding of byte symbols.
//!
//! Bit stream packed least-significant bit first. Layout: 8 bits `N - 1` (N = leaf count); one
//! bit: 1 = a single symbol follows (8 bits) and every code is zero bits long; 0 = the root is a
//! branch and the rest of the tree follows in pre-order (0 = branch: left then right subtree;
//! 1 = leaf + 8-bit symbol). The codes follow in the same bit stream (0 = left).

use super::bits::Bits;

/// Why a Huffman sequence could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HuffmanError {
    /// The tree holds more leaves or branches than its declared leaf count allows, or is
    /// incomplete.
    BadTree,
    /// The bit stream ends before the tree or the last code.
    Truncated,
}

impl HuffmanError {
    /// The finding code (`gvrs.codec.huffman_*`).
    pub fn code(self) -> &'static str {
        match self {
            HuffmanError::BadTree => "gvrs.codec.huffman_tree",
            HuffmanError::Truncated => "gvrs.codec.huffman_truncated",
        }
    }
}

/// LSB-first bit reader over a byte slice; reads past the end yield zero bits and are detected
/// by comparing [`BitReader::pos`] with the bit length.
pub struct BitReader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> BitReader<'a> {
    /// A reader at the first bit of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        BitReader { data, pos: 0 }
    }

    /// Bits consumed so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    fn bit_len(&self) -> usize {
        self.data.len().saturating_mul(8)
    }

    /// At least 57 upcoming bits, least significant first (zeros beyond the end).
    #[inline(always)]
    fn peek(&self) -> u64 {
        let byte = self.pos >> 3;
        let shift = (self.pos & 7) as u32;
        if let Some(chunk) = self.data.get(byte..byte + 8) {
            let mut a = [0u8; 8];
            a.copy_from_slice(chunk);
            u64::from_le_bytes(a) >> shift
        } else {
            let mut a = [0u8; 8];
            if byte < self.data.len() {
                let tail = &self.data[byte..];
                a[..tail.len()].copy_from_slice(tail);
            }
            u64::from_le_bytes(a) >> shift
        }
    }

    fn bits(&mut self, n: u32) -> Result<u32, HuffmanError> {
        let v = (self.peek() & ((1u64 << n) - 1)) as u32;
        self.pos += n as usize;
        if self.pos > self.bit_len() {
            return Err(HuffmanError::Truncated);
        }
        Ok(v)
    }
}

const NO_CHILD: u16 = u16::MAX;

#[derive(Clone, Copy)]
struct Node {
    /// Children (node indices) for a branch; `NO_CHILD` when not yet attached.
    child: [u16; 2],
    /// Symbol for a leaf; >= 256 marks a branch.
    sym: u16,
}

/// Lookup width of the fast decoding table for long sequences (short ones use
/// `SMALL_TABLE_BITS` and no pair table: building the tables would cost more than it saves).
const TABLE_BITS: u32 = 11;
const SMALL_TABLE_BITS: u32 = 8;
const SMALL_SEQUENCE: usize = 4096;
/// Table entry flag: the code is longer than `TABLE_BITS`; low bits hold the node to continue at.
const LONG: u32 = 1 << 31;

/// Decode one Huffman sequence (tree + `out.len()` symbols) starting at the reader's position.
pub fn decode_sequence(r: &mut BitReader, out: &mut [u8]) -> Result<(), HuffmanError> {
    let n_leaves = r.bits(8)? as usize + 1;
    if r.bits(1)? == 1 {
        let sym = r.bits(8)? as u8;
        out.fill(sym);
        return Ok(());
    }
    // Pre-order tree: a full binary tree with L leaves has L - 1 branches, so at most 2N - 1
    // nodes are ever read.
    let mut nodes: Vec<Node> = Vec::with_capacity(2 * n_leaves);
    nodes.push(Node {
        child: [NO_CHILD; 2],
        sym: 256,
    });
    let mut stack: Vec<u16> = Vec::with_capacity(n_leaves + 1);
    stack.push(0);
    let (mut leaves, mut branches) = (0usize, 1usize);
    while let Some(&top) = stack.last() {
        let idx = nodes.len() as u16;
        let is_leaf = r.bits(1)? == 1;
        let node = if is_leaf {
            leaves += 1;
            if leaves > n_leaves {
                return Err(HuffmanError::BadTree);
            }
            Node {
                child: [NO_CHILD; 2],
                sym: r.bits(8)? as u16,
            }
        } else {
            branches += 1;
            if branches >= n_leaves {
                return Err(HuffmanError::BadTree);
            }
            Node {
                child: [NO_CHILD; 2],
                sym: 256,
            }
        };
        nodes.push(node);
        let t = &mut nodes[top as usize];
        if t.child[0] == NO_CHILD {
            t.child[0] = idx;
        } else {
            t.child[1] = idx;
            stack.pop();
        }
        if !is_leaf {
            stack.push(idx);
        }
    }
    if leaves != n_leaves {
        return Err(HuffmanError::BadTree);
    }

    // Fast table: every code of at most `bits` bits fills all entries sharing its low bits.
    let small = out.len() < SMALL_SEQUENCE;
    let bits = if small { SMALL_TABLE_BITS } else { TABLE_BITS };
    let size = 1usize << bits;
    let mut table = vec![0u32; size];
    // (node, code, depth) walk.
    let mut work: Vec<(u16, u32, u32)> = Vec::with_capacity(64);
    work.push((0, 0, 0));
    while let Some((ni, code, depth)) = work.pop() {
        let node = nodes[ni as usize];
        if node.sym < 256 {
            // depth >= 1 here since the root is a branch.
            let step = 1usize << depth;
            let mut i = code as usize;
            while i < size {
                table[i] = (depth << 16) | u32::from(node.sym);
                i += step;
            }
        } else if depth == bits {
            table[code as usize] = LONG | u32::from(ni);
        } else {
            work.push((node.child[0], code, depth + 1));
            work.push((node.child[1], code | (1 << depth), depth + 1));
        }
    }

    // Multi-symbol table: when the first codes leave room for whole further codes within the
    // table width, one lookup yields up to three symbols (residual codes of smooth data are
    // mostly short). Entry: sym1 | sym2 << 8 | sym3 << 16 | bits used (<= 11) << 24 | symbols
    // (1..=3) << 28; 0 = long code.
    let mut pairs = vec![0u32; size];
    for (i, p) in pairs.iter_mut().enumerate() {
        let e = table[i];
        if e & LONG != 0 {
            continue;
        }
        let l1 = e >> 16;
        *p = (e & 0xFF) | (l1 << 24) | (1 << 28);
        if !small {
            let e2 = table[i >> l1];
            let l2 = e2 >> 16;
            if e2 & LONG == 0 && l1 + l2 <= bits {
                *p = (e & 0xFF) | ((e2 & 0xFF) << 8) | ((l1 + l2) << 24) | (2 << 28);
                let e3 = table[i >> (l1 + l2)];
                let l3 = e3 >> 16;
                if e3 & LONG == 0 && l1 + l2 + l3 <= bits {
                    *p = (e & 0xFF) | ((e2 & 0xFF) << 8) | ((e3 & 0xFF) << 16) | ((l1 + l2 + l3) << 24) | (3 << 28);
                }
            }
        }
    }

    let mask = (size - 1) as u64;
    let data = r.data;
    let mut fr = Bits::new(data, r.pos);
    let n = out.len();
    let bit_len = r.bit_len();
    // A code longer than the table: walk the tree from the table's node, one bit at a time.
    let long = |fr: &mut Bits, idx: usize| -> Result<u8, HuffmanError> {
        fr.consume(bits);
        let mut ni = (table[idx] & !LONG) as usize;
        loop {
            if fr.nbits == 0 {
                fr.refill();
            }
            let b = (fr.buf & 1) as usize;
            fr.consume(1);
            ni = nodes[ni].child[b] as usize;
            let node = nodes[ni];
            if node.sym < 256 {
                return Ok(node.sym as u8);
            }
            if fr.consumed() > bit_len {
                return Err(HuffmanError::Truncated);
            }
        }
    };
    let mut k = 0;
    // Main loop: one refill (>= 56 bits) serves four lookups of at most `bits` (<= 11) bits
    // each; every lookup stores four bytes (its symbols, then bytes the next lookups or the
    // tail loop overwrite) and advances by the entry's symbol count, so there is no branch on
    // the entry kind. Stops 16 symbols before the end so the stores stay inside `out`.
    while k + 16 <= n {
        fr.refill();
        for _ in 0..4 {
            let idx = (fr.buf & mask) as usize;
            let p = pairs[idx];
            if p == 0 {
                out[k] = long(&mut fr, idx)?;
                k += 1;
                break; // the walk may have used the buffered bits: refill
            }
            out[k..k + 4].copy_from_slice(&p.to_le_bytes());
            k += (p >> 28) as usize;
            fr.consume((p >> 24) & 0xF);
        }
    }
    while k < n {
        fr.refill();
        let idx = (fr.buf & mask) as usize;
        let p = pairs[idx];
        if p == 0 {
            out[k] = long(&mut fr, idx)?;
            k += 1;
        } else {
            // One symbol at a time here (several may not fit before the end).
            out[k] = p as u8;
            k += 1;
            fr.consume(table[idx] >> 16);
        }
    }
    r.pos = fr.consumed();
    if r.pos > r.bit_len() {
        return Err(HuffmanError::Truncated);
    }
    Ok(())
}

/// LSB-first bit writer.
pub struct BitWriter {
    /// The whole bytes written so far (the last partial word is held back until `finish`).
    pub bytes: Vec<u8>,
    acc: u64,
    n: u32,
}

impl BitWriter {
    /// A writer appending to `bytes`.
    pub fn new(bytes: Vec<u8>) -> Self {
        BitWriter { bytes, acc: 0, n: 0 }
    }

    /// Append the low `count` (<= 32) bits of `v`.
    #[inline(always)]
    pub fn put(&mut self, v: u64, count: u32) {
        self.acc |= (v & ((1u64 << count) - 1)) << self.n;
        self.n += count;
        if self.n >= 32 {
            self.bytes.extend_from_slice(&(self.acc as u32).to_le_bytes());
            self.acc >>= 32;
            self.n -= 32;
        }
    }

    /// The bytes, the last one padded with zero bits.
    pub fn finish(mut self) -> Vec<u8> {
        while self.n > 0 {
            self.bytes.push(self.acc as u8);
            self.acc >>= 8;
            self.n = self.n.saturating_sub(8);
        }
        self.bytes
    }
}

/// A Huffman code for a histogram: per-symbol code bits (first bit in bit 0) and lengths, plus
/// the pre-order tree description.
pub struct Code {
    /// (bits, length) per symbol; length 0 for absent symbols (or the single-symbol tree).
    codes: Vec<(u128, u32)>,
    tree: Tree,
}

enum Tree {
    Single(u8),
    Nodes { n_leaves: usize, pre: Vec<Option<u8>> },
}

impl Code {
    /// Build a Huffman code; `None` when the histogram is empty.
    pub fn build(hist: &[u64; 256]) -> Option<Code> {
        let syms: Vec<usize> = (0..256).filter(|&s| hist[s] > 0).collect();
        if syms.is_empty() {
            return None;
        }
        let mut codes = vec![(0u128, 0u32); 256];
        if syms.len() == 1 {
            return Some(Code {
                codes,
                tree: Tree::Single(syms[0] as u8),
            });
        }
        // Nodes: leaves then branches; children by index.
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut kids: Vec<Option<(usize, usize)>> = Vec::with_capacity(2 * syms.len());
        let mut sym_of: Vec<u8> = Vec::with_capacity(2 * syms.len());
        let mut heap = BinaryHeap::new();
        for &s in &syms {
            heap.push(Reverse((hist[s], kids.len())));
            kids.push(None);
            sym_of.push(s as u8);
        }
        while heap.len() > 1 {
            let (Some(Reverse((fa, a))), Some(Reverse((fb, b)))) = (heap.pop(), heap.pop()) else {
                break;
            };
            heap.push(Reverse((fa + fb, kids.len())));
            kids.push(Some((a, b)));
            sym_of.push(0);
        }
        let root = kids.len() - 1;
        let mut pre = Vec::with_capacity(kids.len());
        let mut work = vec![(root, 0u128, 0u32)];
        while let Some((ni, code, depth)) = work.pop() {
            match kids[ni] {
                None => {
                    pre.push(Some(sym_of[ni]));
                    codes[sym_of[ni] as usize] = (code, depth);
                }
                Some((l, r)) => {
                    pre.push(None);
                    // Depth is bounded by ~1.44 log2(total count) < 128 for any realistic input.
                    let d = depth.min(127);
                    work.push((r, code | (1u128 << d), depth + 1));
                    work.push((l, code, depth + 1));
                }
            }
        }
        Some(Code {
            codes,
            tree: Tree::Nodes {
                n_leaves: syms.len(),
                pre,
            },
        })
    }

    /// Exact encoded size in bits of the tree plus `hist`'s symbols.
    pub fn bit_size(&self, hist: &[u64; 256]) -> u64 {
        match &self.tree {
            Tree::Single(_) => 17,
            Tree::Nodes { n_leaves, pre } => {
                let tree = 8 + pre.len() as u64 + 8 * *n_leaves as u64;
                tree + (0..256).map(|s| hist[s] * u64::from(self.codes[s].1)).sum::<u64>()
            }
        }
    }

    /// Whether any code is too deep for this encoder (never in practice).
    pub fn usable(&self) -> bool {
        self.codes.iter().all(|c| c.1 <= 127)
    }

    /// Write the tree and the codes of `symbols`.
    pub fn write(&self, symbols: &[u8], w: &mut BitWriter) {
        match &self.tree {
            Tree::Single(s) => {
                w.put(0, 8);
                w.put(1, 1);
                w.put(u64::from(*s), 8);
            }
            Tree::Nodes { n_leaves, pre } => {
                w.put(*n_leaves as u64 - 1, 8);
                for n in pre {
                    match n {
                        None => w.put(0, 1),
                        Some(s) => w.put(1 | (u64::from(*s) << 1), 9),
                    }
                }
                for &s in symbols {
                    let (mut bits, mut len) = self.codes[s as usize];
                    while len > 32 {
                        w.put(bits as u64, 32);
                        bits >>= 32;
                        len -= 32;
                    }
                    w.put(bits as u64, len);
                }
            }
        }
    }
}

/// Histogram of a byte sequence.
pub fn histogram(data: &[u8]) -> [u64; 256] {
    let mut h = [0u64; 256];
    for &b in data {
        h[b as usize] += 1;
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(data: &[u8]) {
        let h = histogram(data);
        let code = Code::build(&h).unwrap();
        let mut w = BitWriter::new(Vec::new());
        code.write(data, &mut w);
        let bytes = w.finish();
        assert_eq!(bytes.len() as u64, code.bit_size(&h).div_ceil(8));
        let mut out = vec![0u8; data.len()];
        let mut r = BitReader::new(&bytes);
        decode_sequence(&mut r, &mut out).unwrap();
        assert_eq!(out, data);
        assert_eq!(r.pos() as u64, code.bit_size(&h));
    }

    #[test]
    fn round_trips() {
        round(&[5; 100]);
        round(&[1, 2]);
        round(&(0..=255).collect::<Vec<u8>>());
        // Skewed distribution: deep codes beyond the table width.
        let mut v = Vec::new();
        for i in 0..30u32 {
            for _ in 0..(1u64 << i.min(20)).min(5000) {
                v.push(i as u8);
            }
        }
        round(&v);
    }

    #[test]
    fn uniform_tile_bytes() {
        let mut out = [9u8; 4];
        decode_sequence(&mut BitReader::new(&[0x00, 0x01, 0x00]), &mut out).unwrap();
        assert_eq!(out, [0; 4]);
    }

    #[test]
    fn bad_trees() {
        // N = 2 declared but three leaves: 0 (root) 0 (branch) 1 a 1 b 1 c.
        let mut w = BitWriter::new(Vec::new());
        w.put(1, 8);
        w.put(0, 1);
        w.put(0, 1);
        for s in 0..3 {
            w.put(1 | (s << 1), 9);
        }
        let b = w.finish();
        assert_eq!(
            decode_sequence(&mut BitReader::new(&b), &mut [0u8; 4]),
            Err(HuffmanError::BadTree)
        );
        // N = 3 declared but only two leaves.
        let mut w = BitWriter::new(Vec::new());
        w.put(2, 8);
        w.put(0, 1);
        w.put(1 | (7 << 1), 9);
        w.put(1 | (8 << 1), 9);
        let b = w.finish();
        assert_eq!(
            decode_sequence(&mut BitReader::new(&b), &mut [0u8; 4]),
            Err(HuffmanError::BadTree)
        );
        // Truncated.
        assert_eq!(
            decode_sequence(&mut BitReader::new(&[0x01]), &mut [0u8; 4]),
            Err(HuffmanError::Truncated)
        );
    }
}
