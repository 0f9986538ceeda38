//! The LSB-first bit reader shared by the Huffman decoders (GvrsHuffman and
//! GvrsCanonicalHuffman): 64 bits kept in a register, refilled 8 bytes at a time.

/// Bit buffer kept in a register, refilled 8 bytes at a time (zeros past the end; overruns are
/// detected by comparing [`Bits::consumed`] with the data length).
pub struct Bits<'a> {
    data: &'a [u8],
    /// Next byte to load into `buf`.
    next: usize,
    /// Buffered bits, the next one in bit 0.
    pub(crate) buf: u64,
    /// How many bits of `buf` are valid.
    pub(crate) nbits: u32,
}

impl<'a> Bits<'a> {
    /// A reader positioned at bit `bit_pos` of `data`.
    pub fn new(data: &'a [u8], bit_pos: usize) -> Self {
        let mut b = Bits {
            data,
            next: bit_pos >> 3,
            buf: 0,
            nbits: 0,
        };
        b.refill();
        b.consume((bit_pos & 7) as u32);
        b
    }

    /// Bits consumed from the start of `data`.
    pub fn consumed(&self) -> usize {
        self.next * 8 - self.nbits as usize
    }

    pub(crate) fn overrun(&self) -> bool {
        self.consumed() > self.data.len() * 8
    }

    #[inline(always)]
    pub(crate) fn consume(&mut self, n: u32) {
        self.buf >>= n;
        self.nbits -= n;
    }

    /// Ensure at least 56 bits are buffered.
    #[inline(always)]
    pub(crate) fn refill(&mut self) {
        if self.nbits >= 56 {
            return;
        }
        if let Some(chunk) = self.data.get(self.next..self.next + 8) {
            let mut a = [0u8; 8];
            a.copy_from_slice(chunk);
            self.buf |= u64::from_le_bytes(a) << self.nbits;
            let bytes = (63 - self.nbits) >> 3;
            self.next += bytes as usize;
            self.nbits += bytes * 8;
        } else {
            while self.nbits <= 56 {
                let b = self.data.get(self.next).copied().unwrap_or(0);
                self.buf |= u64::from(b) << self.nbits;
                self.next += 1;
                self.nbits += 8;
            }
        }
    }

    /// The next `n` (<= 32) bits, first bit in bit 0.
    #[inline(always)]
    pub(crate) fn bits(&mut self, n: u32) -> u32 {
        self.refill();
        let v = (self.buf & ((1u64 << n) - 1)) as u32;
        self.consume(n);
        v
    }
}
