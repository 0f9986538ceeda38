//! The four Gridfour predictors: residual order and wrapping 32-bit arithmetic.
//!
//! Decoders read residuals from a [`Residuals`] source (an M32 stream for GvrsHuffman and
//! GvrsDeflate, an i32 slice for GvrsCanonicalHuffman) and must consume it exactly; encoders
//! append the residuals to a [`ResidualSink`] (M32 bytes or i32 values) and return the seed.

use super::m32::{self, M32Error, M32Reader};

/// Predictor codes as stored in byte 1 of a Deflate/Huffman block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Predictor {
    /// Each cell from its left neighbour (the first column from the cell above).
    Differencing = 1,
    /// Each cell from a linear extrapolation of its two left neighbours.
    Linear = 2,
    /// Each cell from the plane through its left, upper and upper-left neighbours.
    Triangle = 3,
    /// Differencing that carries null cells (Gridfour's null code) through unchanged.
    DifferencingWithNulls = 4,
}

impl Predictor {
    /// The predictor of a code byte, `None` for an unknown one.
    pub fn from_code(code: u8) -> Option<Predictor> {
        match code {
            1 => Some(Predictor::Differencing),
            2 => Some(Predictor::Linear),
            3 => Some(Predictor::Triangle),
            4 => Some(Predictor::DifferencingWithNulls),
            _ => None,
        }
    }

    /// The predictor's name, as Gridfour spells it.
    pub fn name(self) -> &'static str {
        match self {
            Predictor::Differencing => "Differencing",
            Predictor::Linear => "Linear",
            Predictor::Triangle => "Triangle",
            Predictor::DifferencingWithNulls => "DifferencingWithNulls",
        }
    }
}

/// Why a predictor could not reconstruct a tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PredictError {
    /// The residual stream is damaged.
    M32(M32Error),
    /// The tile shape is one Gridfour cannot use with this predictor (e.g. Linear, 1 column).
    Shape,
}

impl From<M32Error> for PredictError {
    fn from(e: M32Error) -> Self {
        PredictError::M32(e)
    }
}

const NULL: i32 = i32::MIN;

/// Where a predictor decoder takes its residuals from, in order.
pub trait Residuals {
    /// The next residual.
    fn next_value(&mut self) -> Result<i32, M32Error>;
    /// Error unless every residual was consumed.
    fn finish(&self) -> Result<(), M32Error>;
}

impl Residuals for M32Reader<'_> {
    #[inline(always)]
    fn next_value(&mut self) -> Result<i32, M32Error> {
        M32Reader::next_value(self)
    }
    fn finish(&self) -> Result<(), M32Error> {
        M32Reader::finish(self)
    }
}

/// Residuals already decoded to i32 (GvrsCanonicalHuffman).
pub struct IntResiduals<'a> {
    values: &'a [i32],
    pos: usize,
}

impl<'a> IntResiduals<'a> {
    /// Residuals taken from `values`, in order.
    pub fn new(values: &'a [i32]) -> Self {
        IntResiduals { values, pos: 0 }
    }
}

impl Residuals for IntResiduals<'_> {
    #[inline(always)]
    fn next_value(&mut self) -> Result<i32, M32Error> {
        let v = *self.values.get(self.pos).ok_or(M32Error::Truncated)?;
        self.pos += 1;
        Ok(v)
    }
    fn finish(&self) -> Result<(), M32Error> {
        if self.pos == self.values.len() {
            Ok(())
        } else {
            Err(M32Error::Trailing)
        }
    }
}

/// How many residuals predictor `p` codes for a `rows x cols` tile (every cell but the seed's,
/// or every cell for DifferencingWithNulls, whose seed is not a cell).
pub fn residual_count(p: Predictor, rows: usize, cols: usize) -> usize {
    let cells = rows * cols;
    match p {
        Predictor::DifferencingWithNulls => cells,
        _ => cells.saturating_sub(1),
    }
}

/// Rebuild `out` (`rows * cols`, row-major) from `seed` and the M32 residual stream `codes`.
pub fn decode(
    p: Predictor,
    seed: i32,
    rows: usize,
    cols: usize,
    codes: &[u8],
    out: &mut [i32],
) -> Result<(), PredictError> {
    decode_from(p, seed, rows, cols, &mut M32Reader::new(codes), out)
}

/// As [`decode`] with residuals already decoded to i32; `residuals` must hold exactly
/// [`residual_count`] values.
pub fn decode_ints(
    p: Predictor,
    seed: i32,
    rows: usize,
    cols: usize,
    residuals: &[i32],
    out: &mut [i32],
) -> Result<(), PredictError> {
    decode_from(p, seed, rows, cols, &mut IntResiduals::new(residuals), out)
}

fn decode_from<R: Residuals>(
    p: Predictor,
    seed: i32,
    rows: usize,
    cols: usize,
    m: &mut R,
    out: &mut [i32],
) -> Result<(), PredictError> {
    if rows == 0 || cols == 0 || out.len() != rows * cols {
        return Err(PredictError::Shape);
    }
    match p {
        Predictor::Differencing => decode_differencing(seed, rows, cols, m, out)?,
        Predictor::Linear => decode_linear(seed, rows, cols, m, out)?,
        Predictor::Triangle => decode_triangle(seed, rows, cols, m, out)?,
        Predictor::DifferencingWithNulls => decode_nulls(seed, rows, cols, m, out)?,
    }
    m.finish()?;
    Ok(())
}

fn decode_differencing<R: Residuals>(
    seed: i32,
    rows: usize,
    cols: usize,
    m: &mut R,
    out: &mut [i32],
) -> Result<(), M32Error> {
    let mut above = seed;
    for (r, row) in out.chunks_exact_mut(cols).enumerate() {
        let mut prior = if r == 0 {
            seed
        } else {
            above.wrapping_add(m.next_value()?)
        };
        row[0] = prior;
        above = prior;
        for cell in &mut row[1..] {
            prior = prior.wrapping_add(m.next_value()?);
            *cell = prior;
        }
    }
    let _ = rows;
    Ok(())
}

fn decode_linear<R: Residuals>(
    seed: i32,
    rows: usize,
    cols: usize,
    m: &mut R,
    out: &mut [i32],
) -> Result<(), PredictError> {
    if cols < 2 {
        return Err(PredictError::Shape);
    }
    out[0] = seed;
    out[1] = seed.wrapping_add(m.next_value()?);
    let mut prior = seed;
    for r in 1..rows {
        let i = r * cols;
        prior = prior.wrapping_add(m.next_value()?);
        out[i] = prior;
        out[i + 1] = prior.wrapping_add(m.next_value()?);
    }
    for row in out.chunks_exact_mut(cols) {
        let (mut a, mut b) = (row[0], row[1]);
        for cell in &mut row[2..] {
            let c = b.wrapping_mul(2).wrapping_sub(a).wrapping_add(m.next_value()?);
            *cell = c;
            a = b;
            b = c;
        }
    }
    Ok(())
}

fn decode_triangle<R: Residuals>(
    seed: i32,
    rows: usize,
    cols: usize,
    m: &mut R,
    out: &mut [i32],
) -> Result<(), M32Error> {
    out[0] = seed;
    let mut prior = seed;
    for cell in &mut out[1..cols] {
        prior = prior.wrapping_add(m.next_value()?);
        *cell = prior;
    }
    prior = seed;
    for r in 1..rows {
        prior = prior.wrapping_add(m.next_value()?);
        out[r * cols] = prior;
    }
    for r in 1..rows {
        let (top, bottom) = out.split_at_mut(r * cols);
        let up = &top[(r - 1) * cols..];
        let cur = &mut bottom[..cols];
        let mut left = cur[0];
        for c in 1..cols {
            let v = left
                .wrapping_add(up[c])
                .wrapping_sub(up[c - 1])
                .wrapping_add(m.next_value()?);
            cur[c] = v;
            left = v;
        }
    }
    Ok(())
}

fn decode_nulls<R: Residuals>(seed: i32, rows: usize, cols: usize, m: &mut R, out: &mut [i32]) -> Result<(), M32Error> {
    let mut prior = seed;
    let mut null_flag = true;
    for r in 0..rows {
        let row = &mut out[r * cols..(r + 1) * cols];
        for cell in row.iter_mut() {
            let t = m.next_value()?;
            if t == NULL {
                null_flag = true;
                *cell = NULL;
            } else {
                if null_flag {
                    null_flag = false;
                    prior = seed;
                }
                prior = prior.wrapping_add(t);
                *cell = prior;
            }
        }
        prior = row[0];
        null_flag = prior == NULL;
    }
    Ok(())
}

/// Where a predictor encoder puts its residuals.
pub trait ResidualSink {
    /// Append one residual.
    fn push(&mut self, v: i32);
}

/// M32 bytes (GvrsHuffman, GvrsDeflate).
impl ResidualSink for Vec<u8> {
    #[inline(always)]
    fn push(&mut self, v: i32) {
        m32::encode(v, self)
    }
}

/// Plain values (GvrsCanonicalHuffman).
impl ResidualSink for Vec<i32> {
    #[inline(always)]
    fn push(&mut self, v: i32) {
        Vec::push(self, v)
    }
}

/// Append the residuals of `values` under predictor `p` to `codes`; returns the seed, or `None`
/// when Gridfour's encoder for `p` cannot handle this tile (shape, or nulls for the others).
pub fn encode<S: ResidualSink>(p: Predictor, rows: usize, cols: usize, values: &[i32], codes: &mut S) -> Option<i32> {
    if rows == 0 || cols == 0 || values.len() != rows * cols {
        return None;
    }
    match p {
        Predictor::Differencing => {
            let seed = values[0];
            let mut above = seed;
            for (r, row) in values.chunks_exact(cols).enumerate() {
                if r > 0 {
                    codes.push(row[0].wrapping_sub(above));
                }
                above = row[0];
                for w in row.windows(2) {
                    codes.push(w[1].wrapping_sub(w[0]));
                }
            }
            Some(seed)
        }
        Predictor::Linear => {
            if cols < 2 {
                return None;
            }
            let seed = values[0];
            codes.push(values[1].wrapping_sub(seed));
            let mut prior = seed;
            for r in 1..rows {
                let i = r * cols;
                codes.push(values[i].wrapping_sub(prior));
                prior = values[i];
                codes.push(values[i + 1].wrapping_sub(prior));
            }
            for row in values.chunks_exact(cols) {
                for w in row.windows(3) {
                    codes.push(w[2].wrapping_sub(w[1].wrapping_mul(2).wrapping_sub(w[0])));
                }
            }
            Some(seed)
        }
        Predictor::Triangle => {
            if rows < 2 || cols < 2 {
                return None;
            }
            let seed = values[0];
            for w in values[..cols].windows(2) {
                codes.push(w[1].wrapping_sub(w[0]));
            }
            for r in 1..rows {
                codes.push(values[r * cols].wrapping_sub(values[(r - 1) * cols]));
            }
            for r in 1..rows {
                let up = &values[(r - 1) * cols..r * cols];
                let cur = &values[r * cols..(r + 1) * cols];
                for c in 1..cols {
                    let pred = cur[c - 1].wrapping_add(up[c]).wrapping_sub(up[c - 1]);
                    codes.push(cur[c].wrapping_sub(pred));
                }
            }
            Some(seed)
        }
        Predictor::DifferencingWithNulls => {
            // Seed: the rounded mean of the values that restart a chain, as Gridfour chooses it
            // (any seed decodes correctly; this one keeps the restart residuals small).
            let (mut sum, mut n) = (0i64, 0i64);
            let mut null_flag = true;
            for row in values.chunks_exact(cols) {
                for &v in row {
                    if v == NULL {
                        null_flag = true;
                    } else {
                        if null_flag {
                            sum += i64::from(v);
                            n += 1;
                        }
                        null_flag = false;
                    }
                }
                null_flag = row[0] == NULL;
            }
            if n == 0 {
                return None;
            }
            let seed = (sum as f64 / n as f64 + 0.5).floor() as i32;
            let mut prior = seed;
            let mut null_flag = false;
            for row in values.chunks_exact(cols) {
                for &v in row {
                    if v == NULL {
                        null_flag = true;
                        codes.push(NULL);
                    } else {
                        if null_flag {
                            prior = seed;
                            null_flag = false;
                        }
                        let d = v.wrapping_sub(prior);
                        if d == NULL {
                            // The decoder would read this residual as a null cell.
                            return None;
                        }
                        codes.push(d);
                        prior = v;
                    }
                }
                prior = row[0];
                null_flag = prior == NULL;
            }
            Some(seed)
        }
    }
}
