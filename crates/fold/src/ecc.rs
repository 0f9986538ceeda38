//! Reed-Solomon over GF(2^8) with the parameters pyfolds gets from `reedsolo.RSCodec(N)`:
//! primitive polynomial 0x11d, generator 2, first consecutive root 0, 255-byte codewords of
//! `k = 255 - N` message bytes followed by `N` parity bytes (the last block shortened).
//!
//! Decoding: syndromes, Berlekamp-Massey, Chien search, Forney. Up to `N / 2` byte errors per
//! codeword are corrected; anything the locator cannot explain exactly is reported as
//! uncorrectable, and callers re-verify CRC32C/SHA-256 afterwards so a mis-correction beyond
//! the code's capacity is never accepted silently.

/// Codeword length of RS over GF(2^8).
pub const NSIZE: usize = 255;

struct Gf {
    exp: [u8; 512],
    log: [u8; 256],
}

const fn build_gf() -> Gf {
    let mut exp = [0u8; 512];
    let mut log = [0u8; 256];
    let mut x: u16 = 1;
    let mut i = 0;
    while i < 255 {
        exp[i] = x as u8;
        log[x as usize] = i as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= 0x11d;
        }
        i += 1;
    }
    while i < 512 {
        exp[i] = exp[i - 255];
        i += 1;
    }
    Gf { exp, log }
}

static GF: Gf = build_gf();

#[inline]
fn mul(a: u8, b: u8) -> u8 {
    if a == 0 || b == 0 {
        0
    } else {
        GF.exp[GF.log[a as usize] as usize + GF.log[b as usize] as usize]
    }
}

#[inline]
fn div(a: u8, b: u8) -> u8 {
    // b != 0 is guaranteed by callers (divisors come from non-zero discrepancies/derivatives).
    if a == 0 || b == 0 {
        0
    } else {
        GF.exp[(GF.log[a as usize] as usize + 255 - GF.log[b as usize] as usize) % 255]
    }
}

/// alpha^e for any integer exponent.
#[inline]
fn pow_alpha(e: i64) -> u8 {
    GF.exp[e.rem_euclid(255) as usize]
}

/// Evaluate a polynomial given highest degree first (reedsolo's order) at `x`.
fn eval_hi_first(p: &[u8], x: u8) -> u8 {
    p.iter().fold(0u8, |acc, &c| mul(acc, x) ^ c)
}

/// Evaluate a polynomial given lowest degree first at `x`.
fn eval_lo_first(p: &[u8], x: u8) -> u8 {
    p.iter().rev().fold(0u8, |acc, &c| mul(acc, x) ^ c)
}

/// Why a codeword could not be corrected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EccError {
    /// More errors than the code can locate (or an inconsistent locator).
    TooManyErrors,
    /// Codeword longer than 255 bytes or not longer than the parity.
    BadLength,
}

/// An RS(255, 255 - nsym) code.
#[derive(Debug, Clone)]
pub struct Rs {
    nsym: usize,
    /// Generator polynomial, highest degree first, monic.
    #[cfg_attr(not(test), allow(dead_code))]
    gen: Vec<u8>,
    /// `products[f * nsym + j] = gen[j + 1] * f`: one encoder step is a table row XORed in.
    products: Vec<u8>,
}

impl Rs {
    /// `nsym` parity bytes per codeword, 1..=254.
    pub fn new(nsym: usize) -> Option<Rs> {
        if nsym == 0 || nsym >= NSIZE {
            return None;
        }
        // g(x) = prod_{i < nsym} (x - alpha^i)
        let mut g = vec![1u8];
        for i in 0..nsym {
            let root = pow_alpha(i as i64);
            let mut next = vec![0u8; g.len() + 1];
            for (j, &c) in g.iter().enumerate() {
                next[j] ^= c;
                next[j + 1] ^= mul(c, root);
            }
            g = next;
        }
        let mut products = vec![0u8; 256 * nsym];
        for f in 0..256usize {
            for (j, &c) in g[1..].iter().enumerate() {
                products[f * nsym + j] = mul(c, f as u8);
            }
        }
        Some(Rs { nsym, gen: g, products })
    }

    /// Parity bytes per codeword (`N` of `rs(N)`).
    pub fn nsym(&self) -> usize {
        self.nsym
    }

    /// Message bytes per full block.
    pub fn k(&self) -> usize {
        NSIZE - self.nsym
    }

    /// The `nsym` parity bytes of one block (`data.len() <= k`).
    pub fn parity(&self, data: &[u8]) -> Vec<u8> {
        let mut rem = vec![0u8; self.nsym];
        self.parity_into(data, &mut rem);
        rem
    }

    /// [`Rs::parity`] into `rem` (`nsym` bytes).
    fn parity_into(&self, data: &[u8], rem: &mut [u8]) {
        // Systematic encoding: remainder of data(x) * x^nsym divided by g(x).
        let n = self.nsym;
        if data.len() + n <= NSIZE {
            // Long division in place over one codeword-sized buffer: each step XORs a
            // precomputed row into the window ahead, a loop the compiler vectorises (the
            // shift-register form below moves the remainder by a byte per input byte).
            let mut buf = [0u8; NSIZE];
            buf[..data.len()].copy_from_slice(data);
            for i in 0..data.len() {
                let f = buf[i] as usize;
                if f != 0 {
                    let row = &self.products[f * n..f * n + n];
                    for (b, &p) in buf[i + 1..i + 1 + n].iter_mut().zip(row) {
                        *b ^= p;
                    }
                }
            }
            rem.copy_from_slice(&buf[data.len()..data.len() + n]);
            return;
        }
        // Longer than a codeword (not a block of a payload): the shift-register form.
        rem.fill(0);
        for &d in data {
            let f = (d ^ rem[0]) as usize;
            rem.copy_within(1.., 0);
            rem[n - 1] = 0;
            if f != 0 {
                for (r, &p) in rem.iter_mut().zip(&self.products[f * n..f * n + n]) {
                    *r ^= p;
                }
            }
        }
    }

    /// The parity of every `k`-byte block of `data` (the last one shortened), block after
    /// block: `ceil(len / k) * nsym` bytes. Blocks are independent, so large inputs are
    /// encoded on every core.
    pub fn block_parity(&self, data: &[u8]) -> Vec<u8> {
        use rayon::prelude::*;
        let nblocks = data.len().div_ceil(self.k());
        let mut out = vec![0u8; nblocks * self.nsym];
        let per_task = 1024;
        out.par_chunks_mut(self.nsym * per_task)
            .zip(data.par_chunks(self.k() * per_task))
            .for_each(|(par, dat)| {
                // Four whole blocks at a time, then the rest one by one.
                let whole4 = dat.len() / (4 * self.k());
                let (par4, par1) = par.split_at_mut(whole4 * 4 * self.nsym);
                let (dat4, dat1) = dat.split_at(whole4 * 4 * self.k());
                for (p, d) in par4
                    .chunks_exact_mut(4 * self.nsym)
                    .zip(dat4.chunks_exact(4 * self.k()))
                {
                    self.parity4_into(d, p);
                }
                for (p, d) in par1.chunks_mut(self.nsym).zip(dat1.chunks(self.k())) {
                    self.parity_into(d, p);
                }
            });
        out
    }

    /// [`Rs::parity_into`] of four whole blocks (`data` is `4 * k` bytes, `rem` `4 * nsym`):
    /// the four divisions interleaved step by step. One division is a chain of dependent
    /// steps (each reads the byte the previous one wrote); four independent chains keep the
    /// processor busy while each waits on its own.
    fn parity4_into(&self, data: &[u8], rem: &mut [u8]) {
        let (n, k) = (self.nsym, self.k());
        let mut buf = [[0u8; NSIZE]; 4];
        for (b, d) in buf.iter_mut().zip(data.chunks_exact(k)) {
            b[..k].copy_from_slice(d);
        }
        for i in 0..k {
            for b in buf.iter_mut() {
                let f = b[i] as usize;
                if f != 0 {
                    let row = &self.products[f * n..f * n + n];
                    for (x, &p) in b[i + 1..i + 1 + n].iter_mut().zip(row) {
                        *x ^= p;
                    }
                }
            }
        }
        for (r, b) in rem.chunks_exact_mut(n).zip(&buf) {
            r.copy_from_slice(&b[k..k + n]);
        }
    }

    /// `reedsolo`'s encode: blocks of `k` data bytes, each followed by its parity.
    pub fn encode_stream(&self, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(data.len() + data.len().div_ceil(self.k()) * self.nsym);
        for block in data.chunks(self.k()) {
            out.extend_from_slice(block);
            out.extend_from_slice(&self.parity(block));
        }
        out
    }

    fn syndromes(&self, cw: &[u8]) -> Vec<u8> {
        (0..self.nsym).map(|i| eval_hi_first(cw, pow_alpha(i as i64))).collect()
    }

    /// Correct a codeword (data then parity, at most 255 bytes) in place; returns the number
    /// of bytes changed.
    pub fn correct(&self, cw: &mut [u8]) -> Result<usize, EccError> {
        let n = cw.len();
        if n > NSIZE || n <= self.nsym {
            return Err(EccError::BadLength);
        }
        let synd = self.syndromes(cw);
        if synd.iter().all(|&s| s == 0) {
            return Ok(0);
        }
        // Berlekamp-Massey: error locator lambda (lowest degree first, lambda[0] = 1).
        let mut lambda = vec![1u8];
        let mut prev = vec![1u8];
        let mut l = 0usize;
        let mut m = 1usize;
        let mut b = 1u8;
        for step in 0..self.nsym {
            let mut d = synd[step];
            for i in 1..=l.min(lambda.len() - 1) {
                d ^= mul(lambda[i], synd[step - i]);
            }
            if d == 0 {
                m += 1;
                continue;
            }
            let coef = div(d, b);
            let mut next = lambda.clone();
            if next.len() < prev.len() + m {
                next.resize(prev.len() + m, 0);
            }
            for (i, &p) in prev.iter().enumerate() {
                next[i + m] ^= mul(coef, p);
            }
            if 2 * l <= step {
                l = step + 1 - l;
                prev = std::mem::replace(&mut lambda, next);
                b = d;
                m = 1;
            } else {
                lambda = next;
                m += 1;
            }
        }
        while lambda.len() > 1 && lambda[lambda.len() - 1] == 0 {
            lambda.pop();
        }
        let nerr = lambda.len() - 1;
        if nerr != l || 2 * nerr > self.nsym {
            return Err(EccError::TooManyErrors);
        }
        // Chien search over the (possibly shortened) codeword: byte j has locator
        // X = alpha^(n-1-j); it is in error when lambda(X^-1) == 0.
        let mut positions = Vec::with_capacity(nerr);
        for j in 0..n {
            let power = (n - 1 - j) as i64;
            if eval_lo_first(&lambda, pow_alpha(-power)) == 0 {
                positions.push(j);
            }
        }
        if positions.len() != nerr {
            return Err(EccError::TooManyErrors);
        }
        // Forney (first consecutive root 0): e = X * omega(X^-1) / lambda'(X^-1),
        // omega = S(x) * lambda(x) mod x^nsym.
        let mut omega = vec![0u8; self.nsym];
        for (i, &s) in synd.iter().enumerate() {
            for (j, &lc) in lambda.iter().enumerate() {
                if i + j < self.nsym {
                    omega[i + j] ^= mul(s, lc);
                }
            }
        }
        // Formal derivative in characteristic 2: only odd powers survive.
        let deriv: Vec<u8> = lambda
            .iter()
            .enumerate()
            .skip(1)
            .map(|(i, &c)| if i % 2 == 1 { c } else { 0 })
            .collect();
        // Work on a copy: a failed correction leaves the caller's bytes untouched.
        let mut fixed = cw.to_vec();
        for &j in &positions {
            let power = (n - 1 - j) as i64;
            let x = pow_alpha(power);
            let xinv = pow_alpha(-power);
            let den = eval_lo_first(&deriv, xinv);
            if den == 0 {
                return Err(EccError::TooManyErrors);
            }
            let mag = mul(x, div(eval_lo_first(&omega, xinv), den));
            if mag == 0 {
                return Err(EccError::TooManyErrors);
            }
            fixed[j] ^= mag;
        }
        if self.syndromes(&fixed).iter().any(|&s| s != 0) {
            return Err(EccError::TooManyErrors);
        }
        cw.copy_from_slice(&fixed);
        Ok(nerr)
    }
}

/// Parse an index `ecc_algo` of the form `rs(N)`.
pub fn parse_algo(algo: &str) -> Option<usize> {
    let n = algo.strip_prefix("rs(")?.strip_suffix(')')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) || n.len() > 3 {
        return None;
    }
    n.parse().ok()
}

/// The ECC bytes pyfolds stores for `data`: the last `ceil(len/k) * N` bytes of reedsolo's
/// encoded stream. True parity only when `data.len() <= k`.
pub fn pyfolds_ecc(rs: &Rs, data: &[u8]) -> Vec<u8> {
    let ecc_len = data.len().div_ceil(rs.k()) * rs.nsym();
    if ecc_len == 0 {
        return Vec::new();
    }
    // Only the tail is needed: encode just the blocks that reach into it.
    let k = rs.k();
    let nblocks = data.len().div_ceil(k);
    let stream_len = data.len() + ecc_len;
    let tail_start = stream_len - ecc_len;
    let mut out = Vec::with_capacity(ecc_len);
    for b in 0..nblocks {
        let d0 = b * k;
        let d1 = (d0 + k).min(data.len());
        let s0 = d0 + b * rs.nsym(); // stream offset of this block
        let s1 = s0 + (d1 - d0) + rs.nsym();
        if s1 <= tail_start {
            continue;
        }
        let block = &data[d0..d1];
        let mut cw = block.to_vec();
        cw.extend_from_slice(&rs.parity(block));
        let from = tail_start.saturating_sub(s0);
        out.extend_from_slice(&cw[from..]);
    }
    out
}

/// How a chunk's ECC bytes are laid out. Both hold `ceil(len / k) * N` bytes, and both are
/// the block's parity when the payload fits one block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// The parity of each block, block after block ([`Rs::block_parity`]): what rasterpack
    /// writes; every block can be repaired.
    BlockParity,
    /// pyfolds 1.0.2's: the last `ecc_len` bytes of reedsolo's codeword stream
    /// ([`pyfolds_ecc`]); only the blocks whose parity lies in that tail can be repaired.
    PyfoldsTail,
}

/// [`Rs::block_parity`] in batches of [`POLL_BLOCKS`] blocks, asking `poll` before each.
pub(crate) fn block_parity_polled(
    rs: &Rs,
    data: &[u8],
    poll: &dyn Fn() -> Result<(), rasterpack_common::Error>,
) -> Result<Vec<u8>, rasterpack_common::Error> {
    let mut out = Vec::with_capacity(data.len().div_ceil(rs.k()) * rs.nsym());
    for batch in data.chunks(rs.k() * POLL_BLOCKS) {
        poll()?;
        out.extend_from_slice(&rs.block_parity(batch));
    }
    Ok(out)
}

/// [`layout_of`], asking `poll` between batches of blocks (a whole payload's parity is
/// seconds of work for a large chunk).
pub(crate) fn layout_of_polled(
    rs: &Rs,
    data: &[u8],
    ecc: &[u8],
    poll: &dyn Fn() -> Result<(), rasterpack_common::Error>,
) -> Result<Option<Layout>, rasterpack_common::Error> {
    if ecc.len() != data.len().div_ceil(rs.k()) * rs.nsym() {
        return Ok(None);
    }
    if data.is_empty() {
        return Ok(ecc.is_empty().then_some(Layout::BlockParity));
    }
    let first = &data[..data.len().min(rs.k())];
    if ecc.starts_with(&rs.parity(first)) {
        let per = rs.nsym() * POLL_BLOCKS;
        let mut same = true;
        for (batch, want) in data.chunks(rs.k() * POLL_BLOCKS).zip(ecc.chunks(per)) {
            poll()?;
            if rs.block_parity(batch) != want {
                same = false;
                break;
            }
        }
        if same {
            return Ok(Some(Layout::BlockParity));
        }
    }
    poll()?;
    Ok((pyfolds_ecc(rs, data) == ecc).then_some(Layout::PyfoldsTail))
}

/// Which layout `ecc` holds for the (verified) payload `data`, if either.
pub fn layout_of(rs: &Rs, data: &[u8], ecc: &[u8]) -> Option<Layout> {
    if ecc.len() != data.len().div_ceil(rs.k()) * rs.nsym() {
        return None;
    }
    if data.is_empty() {
        return ecc.is_empty().then_some(Layout::BlockParity);
    }
    // Per-block parity starts with the first block's; pyfolds' multi-block bytes start with
    // payload bytes: a cheap test before the whole encode.
    let first = &data[..data.len().min(rs.k())];
    if ecc.starts_with(&rs.parity(first)) && rs.block_parity(data) == ecc {
        return Some(Layout::BlockParity);
    }
    if pyfolds_ecc(rs, data) == ecc {
        return Some(Layout::PyfoldsTail);
    }
    None
}

/// Outcome of trying to repair a stored payload with its ECC bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// Bytes changed in the payload.
    pub payload_bytes: usize,
    /// Blocks that had usable parity / blocks in the payload.
    pub usable_blocks: usize,
    /// Blocks in the payload.
    pub blocks: usize,
    /// Some block with usable parity could not be corrected.
    pub failed: bool,
}

/// Repair `data` in place using `ecc` bytes laid out as `layout`. With
/// [`Layout::BlockParity`] every block has its parity. With [`Layout::PyfoldsTail`] the stored
/// bytes of a multi-block payload are the tail of the codeword stream: only blocks whose parity
/// lies entirely inside that tail can be used. Callers re-verify the payload's hashes.
pub fn repair(rs: &Rs, data: &mut [u8], ecc: &[u8], layout: Layout) -> Repair {
    match repair_polled(rs, data, ecc, layout, &|| Ok(())) {
        Ok(rep) => rep,
        // The poll above never stops the repair.
        Err(_) => Repair {
            payload_bytes: 0,
            usable_blocks: 0,
            blocks: 0,
            failed: true,
        },
    }
}

/// Blocks corrected between two polls of the caller's interrupt hook: ~0.9 MiB of payload
/// with rs(32), well under a second of work.
pub(crate) const POLL_BLOCKS: usize = 4 << 10;

/// [`repair`], asking `poll` every 4096 blocks (about 0.9 MiB of payload with rs(32)) whether to go on (Ctrl-C): an
/// `Err` stops the repair with that error, `data` then partly repaired.
///
/// A block is a codeword exactly when its data re-encodes to its stored parity (the remainder
/// of the codeword by the generator, whose roots the syndromes evaluate, is the XOR of the
/// two), so the table-driven encoder finds the blocks to correct and only those go through
/// the syndromes and Berlekamp-Massey: damage touches few blocks of a large payload. Blocks
/// are independent: each batch is checked and corrected on every core, then applied in block
/// order, so the bytes and the counts do not depend on the threads.
pub fn repair_polled(
    rs: &Rs,
    data: &mut [u8],
    ecc: &[u8],
    layout: Layout,
    poll: &dyn Fn() -> Result<(), rasterpack_common::Error>,
) -> Result<Repair, rasterpack_common::Error> {
    use rayon::prelude::*;
    let k = rs.k();
    let nsym = rs.nsym();
    let nblocks = data.len().div_ceil(k);
    let mut rep = Repair {
        payload_bytes: 0,
        usable_blocks: 0,
        blocks: nblocks,
        failed: false,
    };
    let stream_len = data.len() + nblocks * nsym;
    if ecc.len() != nblocks * nsym {
        rep.failed = true;
        return Ok(rep);
    }
    let tail_start = stream_len - ecc.len();
    let len = data.len();
    // The stored parity of block `b` when the layout has it.
    let parity_of = |b: usize| -> Option<&[u8]> {
        match layout {
            Layout::BlockParity => Some(&ecc[b * nsym..b * nsym + nsym]),
            Layout::PyfoldsTail => {
                let d0 = b * k;
                let d1 = (d0 + k).min(len);
                let p0 = d0 + b * nsym + (d1 - d0); // stream offset of this block's parity
                (p0 >= tail_start).then(|| &ecc[p0 - tail_start..p0 - tail_start + nsym])
            }
        }
    };
    for first in (0..nblocks).step_by(POLL_BLOCKS) {
        poll()?;
        let last = (first + POLL_BLOCKS).min(nblocks);
        // The blocks of the batch with usable parity, and which of them are not codewords.
        let usable: Vec<(usize, &[u8])> = (first..last).filter_map(|b| Some((b, parity_of(b)?))).collect();
        rep.usable_blocks += usable.len();
        let block = |b: usize| &data[b * k..((b + 1) * k).min(len)];
        let damaged: Vec<(usize, &[u8])> = match layout {
            // Every block has its parity: the batch re-encoded at once (four blocks
            // interleaved, on every core), compared block by block.
            Layout::BlockParity => {
                let computed = rs.block_parity(&data[first * k..(last * k).min(len)]);
                usable
                    .into_iter()
                    .filter(|&(b, parity)| computed[(b - first) * nsym..(b - first + 1) * nsym] != *parity)
                    .collect()
            }
            // Only the blocks whose parity the tail holds (a few at the end).
            Layout::PyfoldsTail => usable
                .into_iter()
                .filter(|&(b, parity)| rs.parity(block(b)) != parity)
                .collect(),
        };
        let outcomes: Vec<(usize, Result<Vec<u8>, EccError>)> = damaged
            .into_par_iter()
            .map(|(b, parity)| {
                let mut cw = block(b).to_vec();
                let n = cw.len();
                cw.extend_from_slice(parity);
                let fixed = rs.correct(&mut cw).map(|_| {
                    cw.truncate(n);
                    cw
                });
                (b, fixed)
            })
            .collect();
        for (b, outcome) in outcomes {
            match outcome {
                Ok(fixed) => {
                    let d0 = b * k;
                    let d1 = d0 + fixed.len();
                    let changed = fixed.iter().zip(&data[d0..d1]).filter(|(a, b)| a != b).count();
                    rep.payload_bytes += changed;
                    data[d0..d1].copy_from_slice(&fixed);
                }
                Err(_) => rep.failed = true,
            }
        }
    }
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *seed >> 33
    }

    /// The block-by-block repair as it was before the parity pre-check and the parallel
    /// batches (every block through `Rs::correct`): the reference the fast path must equal.
    fn repair_reference(rs: &Rs, data: &mut [u8], ecc: &[u8], layout: Layout) -> Repair {
        let k = rs.k();
        let nsym = rs.nsym();
        let nblocks = data.len().div_ceil(k);
        let mut rep = Repair {
            payload_bytes: 0,
            usable_blocks: 0,
            blocks: nblocks,
            failed: false,
        };
        let stream_len = data.len() + nblocks * nsym;
        if ecc.len() != nblocks * nsym {
            rep.failed = true;
            return rep;
        }
        let tail_start = stream_len - ecc.len();
        for b in 0..nblocks {
            let d0 = b * k;
            let d1 = (d0 + k).min(data.len());
            let parity = match layout {
                Layout::BlockParity => &ecc[b * nsym..b * nsym + nsym],
                Layout::PyfoldsTail => {
                    let p0 = d0 + b * nsym + (d1 - d0);
                    if p0 < tail_start {
                        continue;
                    }
                    &ecc[p0 - tail_start..p0 - tail_start + nsym]
                }
            };
            rep.usable_blocks += 1;
            let mut cw = data[d0..d1].to_vec();
            cw.extend_from_slice(parity);
            match rs.correct(&mut cw) {
                Ok(0) => {}
                Ok(_) => {
                    let changed = cw[..d1 - d0].iter().zip(&data[d0..d1]).filter(|(a, b)| a != b).count();
                    rep.payload_bytes += changed;
                    data[d0..d1].copy_from_slice(&cw[..d1 - d0]);
                }
                Err(_) => rep.failed = true,
            }
        }
        rep
    }

    /// Damage `cw`-sized spans at random: per block, nothing, a few errors (within the code's
    /// capacity), many (beyond it), or errors in its parity bytes.
    fn damage(seed: &mut u64, data: &mut [u8], ecc: &mut [u8], k: usize, nsym: usize) {
        let nblocks = data.len().div_ceil(k);
        for b in 0..nblocks {
            let d0 = b * k;
            let d1 = (d0 + k).min(data.len());
            let nerr = match lcg(seed) % 8 {
                0..=3 => 0,
                4 | 5 => 1 + lcg(seed) as usize % (nsym / 2).max(1),
                6 => nsym / 2 + 1 + lcg(seed) as usize % nsym,
                _ => 1 + lcg(seed) as usize % 3,
            };
            for _ in 0..nerr {
                let flip = (lcg(seed) % 255 + 1) as u8;
                // Mostly the data, sometimes the ECC bytes of the same region.
                if lcg(seed).is_multiple_of(4) && !ecc.is_empty() {
                    let at = (b * nsym + lcg(seed) as usize % nsym).min(ecc.len() - 1);
                    ecc[at] ^= flip;
                } else {
                    let at = d0 + lcg(seed) as usize % (d1 - d0);
                    data[at] ^= flip;
                }
            }
        }
    }

    #[test]
    fn fast_repair_equals_the_reference_on_random_damage() {
        let mut seed = 0xEC_C0DEu64;
        let mut cases = 0;
        for nsym in [2usize, 4, 16, 32, 64] {
            let rs = Rs::new(nsym).unwrap();
            let k = rs.k();
            // One block, a shortened one, several with a short last block, exactly whole
            // blocks, and more than a poll batch.
            // More than a poll batch for one code only: the reference is slow.
            let batches = if nsym == 32 { (POLL_BLOCKS + 3) * k + 5 } else { 2 * k };
            let lens = [1, k - 1, k, 3 * k + 7, 10 * k, batches];
            for &len in &lens {
                for round in 0..3 {
                    let clean: Vec<u8> = (0..len).map(|_| lcg(&mut seed) as u8).collect();
                    for layout in [Layout::BlockParity, Layout::PyfoldsTail] {
                        let mut ecc = match layout {
                            Layout::BlockParity => rs.block_parity(&clean),
                            Layout::PyfoldsTail => pyfolds_ecc(&rs, &clean),
                        };
                        let mut data = clean.clone();
                        if round > 0 || len > k {
                            damage(&mut seed, &mut data, &mut ecc, k, nsym);
                        }
                        let mut want = data.clone();
                        let want_rep = repair_reference(&rs, &mut want, &ecc, layout);
                        let mut got = data.clone();
                        let got_rep = repair(&rs, &mut got, &ecc, layout);
                        assert_eq!(got_rep, want_rep, "nsym {nsym} len {len} {layout:?}");
                        assert!(got == want, "nsym {nsym} len {len} {layout:?}: bytes differ");
                        cases += 1;
                    }
                }
            }
        }
        assert_eq!(cases, 5 * 6 * 3 * 2);
    }

    /// The shift-register encoder the in-place division replaced, as the reference.
    fn parity_lfsr(rs: &Rs, data: &[u8]) -> Vec<u8> {
        let n = rs.nsym;
        let mut rem = vec![0u8; n];
        for &d in data {
            let f = (d ^ rem[0]) as usize;
            rem.copy_within(1.., 0);
            rem[n - 1] = 0;
            for (r, &p) in rem.iter_mut().zip(&rs.products[f * n..f * n + n]) {
                *r ^= p;
            }
        }
        rem
    }

    #[test]
    fn parity_equals_the_shift_register_and_zeroes_the_syndromes() {
        let mut seed = 5u64;
        for nsym in [1usize, 2, 3, 16, 32, 64, 200, 254] {
            let rs = Rs::new(nsym).unwrap();
            for len in [0usize, 1, 2, 17, rs.k() - 1, rs.k(), rs.k() + 1, 600] {
                let data: Vec<u8> = (0..len).map(|_| lcg(&mut seed) as u8).collect();
                let p = rs.parity(&data);
                assert_eq!(p, parity_lfsr(&rs, &data), "nsym {nsym} len {len}");
                if len <= rs.k() {
                    let mut cw = data.clone();
                    cw.extend_from_slice(&p);
                    assert!(rs.syndromes(&cw).iter().all(|&s| s == 0), "nsym {nsym} len {len}");
                }
            }
        }
    }

    #[test]
    fn block_parity_equals_the_shift_register_block_by_block() {
        // Four-block groups, the blocks after them, and a short last block.
        let mut seed = 11u64;
        for nsym in [1usize, 2, 16, 32, 64, 254] {
            let rs = Rs::new(nsym).unwrap();
            let k = rs.k();
            for len in [0usize, 1, k, 3 * k, 4 * k, 4 * k + 1, 9 * k - 2, 4096 * k + 3 * k + 5] {
                let data: Vec<u8> = (0..len).map(|_| lcg(&mut seed) as u8).collect();
                let want: Vec<u8> = data.chunks(k).flat_map(|b| parity_lfsr(&rs, b)).collect();
                assert!(rs.block_parity(&data) == want, "nsym {nsym} len {len}");
            }
        }
    }

    #[test]
    fn fast_repair_repairs_what_it_must() {
        // The reference is not trusted blindly either: damage within capacity in every block
        // of a multi-batch payload comes back to the clean bytes, counted exactly.
        let rs = Rs::new(32).unwrap();
        let k = rs.k();
        let mut seed = 99u64;
        let clean: Vec<u8> = (0..(POLL_BLOCKS + 10) * k).map(|_| lcg(&mut seed) as u8).collect();
        let ecc = rs.block_parity(&clean);
        let mut data = clean.clone();
        let mut flipped = 0;
        for b in (0..POLL_BLOCKS + 10).step_by(97) {
            for j in 0..16 {
                data[b * k + j * 13] ^= 0x5A;
                flipped += 1;
            }
        }
        let rep = repair(&rs, &mut data, &ecc, Layout::BlockParity);
        assert!(!rep.failed);
        assert_eq!(rep.payload_bytes, flipped);
        assert_eq!(rep.usable_blocks, POLL_BLOCKS + 10);
        assert!(data == clean);
        // One more error in one block is beyond rs(32): that block fails, the rest repair.
        let mut data = clean.clone();
        for j in 0..17 {
            data[5 * k + j] ^= 1;
        }
        data[9 * k] ^= 1;
        let rep = repair(&rs, &mut data, &ecc, Layout::BlockParity);
        assert!(rep.failed);
        assert_eq!(data[9 * k], clean[9 * k]);
    }

    #[test]
    fn corrects_up_to_half_nsym() {
        let mut seed = 7u64;
        for nsym in [2usize, 16, 32, 64] {
            let rs = Rs::new(nsym).unwrap();
            for len in [1usize, 10, 100, rs.k()] {
                let data: Vec<u8> = (0..len).map(|_| lcg(&mut seed) as u8).collect();
                let mut cw = data.clone();
                cw.extend(rs.parity(&data));
                assert!(rs.syndromes(&cw).iter().all(|&s| s == 0));
                for nerr in 1..=nsym / 2 {
                    let mut bad = cw.clone();
                    let mut pos: Vec<usize> = Vec::new();
                    while pos.len() < nerr {
                        let p = lcg(&mut seed) as usize % cw.len();
                        if !pos.contains(&p) {
                            pos.push(p);
                        }
                    }
                    for &p in &pos {
                        bad[p] ^= (lcg(&mut seed) % 255 + 1) as u8;
                    }
                    assert_eq!(rs.correct(&mut bad), Ok(nerr), "nsym {nsym} len {len} nerr {nerr}");
                    assert_eq!(bad, cw);
                }
            }
        }
    }

    #[test]
    fn known_reedsolo_parity() {
        // reedsolo.RSCodec(4).encode(b"hello") == b"hello\xd8\x1e\x17\xae"... checked below by
        // self-consistency: the generator has roots alpha^0..alpha^3.
        let rs = Rs::new(4).unwrap();
        for i in 0..4 {
            assert_eq!(eval_hi_first(&rs.gen, pow_alpha(i)), 0);
        }
        assert_eq!(parse_algo("rs(16)"), Some(16));
        assert_eq!(parse_algo("rs()"), None);
        assert_eq!(parse_algo("rs(16"), None);
    }
}
