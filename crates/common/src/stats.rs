//! Value statistics of an array (`rasterpack stats`): counts of fill/NoValue, NaN and infinite
//! cells, min, max, mean, population standard deviation, sum and a numpy-compatible histogram
//! over the valid cells, computed while the array streams through an [`ArraySink`], so any
//! front (CLI, Python) gets the same figures from the same code.
//!
//! Determinism: the sink takes the array in C order ([`ArraySink::random_access`] is false),
//! whatever order or thread count the source decodes with, and groups the valid values into
//! fixed chunks of [`CHUNK`] values in that order. Each chunk's mean and squared deviations are
//! computed in two passes over the chunk; chunks merge in order with Chan's formula (the
//! variance) and a Neumaier-compensated sum (the sum and the mean). The same input therefore
//! gives the same bits on 1 or N threads, and the figures agree with numpy's pairwise sums to
//! about 1e-15 relative.
//!
//! A source that can decode out of order (GVRS tiles, VDS bricks) hands its blocks over
//! through [`ArraySink::parallel_blocks`] instead: each numbered block's figures are computed
//! on its decoding thread ([`CHUNK`]-cell pieces combined in the block's cell order) and the
//! blocks merge in number order, so the result is again the same on 1 or N threads (grouped
//! by the source's blocks rather than by C-order chunks: it may differ from the C-order
//! path's in the last bits of mean and std, never in counts, min, max or the histogram).
//!
//! Valid cells: finite and not equal to the array's fill value ([`fill_value`]). The histogram
//! follows `numpy.histogram(cells.astype(float64), bins, (min, max))` bin for bin: the same
//! `linspace` edges, the same index arithmetic and its corrections, the last bin closed on the
//! right, and `(min - 0.5, max + 0.5)` when every valid cell holds one value.

use serde_json::{Map, Value};

use crate::array::DType;
use crate::error::{Error, Result};
use crate::json::f64_value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::stream::{ArrayInfo, ArraySink, BlockSink, ParallelBlocks};

/// Cells per block of the stable mean/variance: block k is cells `k*CHUNK..(k+1)*CHUNK` of the
/// array in C order, a fixed grouping, so that the rounding never depends on how the source
/// delivers the bytes or on how many threads compute the blocks.
pub const CHUNK: usize = 4096;

/// The most histogram bins `stats` computes (the counts are held in memory).
pub const MAX_BINS: u64 = 1 << 20;

/// The figures of one array (see the module docs for which cells are valid).
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// Cells read (the product of the shape).
    pub count: u64,
    /// Finite cells that are not the fill value: the cells the figures below are over.
    pub valid_count: u64,
    /// Cells equal to the fill value (NaN matches a NaN fill); `0` without a fill value.
    pub fill_count: u64,
    /// NaN cells (fill or not).
    pub nan_count: u64,
    /// Infinite cells (fill or not).
    pub inf_count: u64,
    /// The fill value the array declares, when it declares one.
    pub fill: Option<f64>,
    /// Smallest valid value (`None` without valid cells).
    pub min: Option<f64>,
    /// Largest valid value.
    pub max: Option<f64>,
    /// Mean of the valid values.
    pub mean: Option<f64>,
    /// Population standard deviation (numpy's `std`, `ddof=0`) of the valid values.
    pub std: Option<f64>,
    /// Sum of the valid values (`0.0` without valid cells, as numpy's `sum` of nothing).
    pub sum: f64,
    /// The histogram, when asked for.
    pub histogram: Option<Histogram>,
}

/// Counts of equal bins over `[min, max]` (numpy's `histogram`).
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    /// The first edge.
    pub min: f64,
    /// The last edge (the last bin includes it).
    pub max: f64,
    /// Count per bin.
    pub counts: Vec<u64>,
}

impl Histogram {
    /// Equal bins over `[min, max]`, widened to `[min - 0.5, max + 0.5]` when `min == max`,
    /// as numpy does.
    pub fn new(bins: u64, min: f64, max: f64) -> Result<Histogram> {
        if bins == 0 || bins > MAX_BINS {
            return Err(Error::usage(format!(
                "--histogram takes 1 to {MAX_BINS} bins, not {bins}"
            )));
        }
        if !(min.is_finite() && max.is_finite()) || min > max {
            return Err(Error::usage(format!(
                "histogram range [{min}, {max}] is not a finite range"
            )));
        }
        let (min, max) = if min == max { (min - 0.5, max + 0.5) } else { (min, max) };
        Ok(Histogram {
            min,
            max,
            counts: vec![0; bins as usize],
        })
    }

    /// Edge `i` of `bins + 1`, as `numpy.linspace(min, max, bins + 1)` computes it: `i * step +
    /// min` with `step = (max - min) / bins` (or `i / bins * delta + min` when the step
    /// underflows to 0), and exactly `max` last.
    pub fn edge(&self, i: usize) -> f64 {
        let bins = self.counts.len();
        if i >= bins {
            return self.max;
        }
        let delta = self.max - self.min;
        let step = delta / bins as f64;
        if step == 0.0 {
            (i as f64 / bins as f64) * delta + self.min
        } else {
            i as f64 * step + self.min
        }
    }

    /// The bin of `x` (within `[min, max]`), with numpy's arithmetic and corrections.
    pub fn bin(&self, x: f64) -> usize {
        let edges: Vec<f64> = (0..=self.counts.len()).map(|i| self.edge(i)).collect();
        self.bin_among(&edges, x)
    }

    /// [`Histogram::bin`] with the edges computed once (`edges[i] = self.edge(i)`, `bins + 1`
    /// of them): what a pass over many cells uses.
    fn bin_among(&self, edges: &[f64], x: f64) -> usize {
        bin_of(self.min, self.max, edges, x)
    }

    #[cfg(test)]
    fn add(&mut self, edges: &[f64], x: f64) {
        if x >= self.min && x <= self.max {
            let i = self.bin_among(edges, x);
            self.counts[i] += 1;
        }
    }

    /// `{"bins", "min", "max", "counts"}`.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("bins".into(), Value::from(self.counts.len() as u64));
        m.insert("min".into(), f64_value(self.min));
        m.insert("max".into(), f64_value(self.max));
        m.insert("counts".into(), Value::from(self.counts.clone()));
        Value::Object(m)
    }
}

/// The bin of `x` (within `[min, max]`) among `edges` (`bins + 1` of them), with numpy's
/// arithmetic and corrections.
fn bin_of(min: f64, max: f64, edges: &[f64], x: f64) -> usize {
    let bins = edges.len() - 1;
    let f = ((x - min) / (max - min)) * bins as f64;
    // numpy casts to intp (truncation); x >= min so f >= 0.
    let mut i = if f.is_finite() && f >= 0.0 {
        (f as u64).min(bins as u64) as usize
    } else {
        0
    };
    if i == bins {
        i -= 1;
    }
    if x < edges[i] && i > 0 {
        i -= 1;
    }
    if i != bins - 1 && x >= edges[i + 1] {
        i += 1;
    }
    i
}

impl Stats {
    /// The figures as the report's JSON object: `count`, `valid_count`, `fill_count`,
    /// `nan_count`, `inf_count`, `min`, `max`, `mean`, `std`, `sum`, `histogram` (`null` when
    /// not asked for or without valid cells), and `fill` (the fill value, or `null`).
    pub fn to_json(&self) -> Value {
        let opt = |v: Option<f64>| v.map(f64_value).unwrap_or(Value::Null);
        let mut m = Map::new();
        m.insert("count".into(), Value::from(self.count));
        m.insert("valid_count".into(), Value::from(self.valid_count));
        m.insert("fill_count".into(), Value::from(self.fill_count));
        m.insert("nan_count".into(), Value::from(self.nan_count));
        m.insert("inf_count".into(), Value::from(self.inf_count));
        m.insert("fill".into(), opt(self.fill));
        m.insert("min".into(), opt(self.min));
        m.insert("max".into(), opt(self.max));
        m.insert("mean".into(), opt(self.mean));
        m.insert("std".into(), opt(self.std));
        m.insert("sum".into(), f64_value(self.sum));
        m.insert(
            "histogram".into(),
            self.histogram.as_ref().map(Histogram::to_json).unwrap_or(Value::Null),
        );
        Value::Object(m)
    }
}

/// The fill (no-data) value an array declares in its [`ArrayInfo::attrs`], as each format
/// defines it (`docs/formats/<format>.md`, "stats"):
/// - GVRS: the element's `fill` (`fill_int` for the int32 codes of an integer-coded float
///   element read with `--codes`); NaN for float elements by default;
/// - VDS: with `useNoValue`, the channel's `noValue` (as f32 for float channels; stored U8/U16
///   codes use the NoValue code 255 / 65535, physical values the dequantized `noValue`);
/// - VOLP, UDF, FOLD, `.npy`: none (those formats declare no fill value).
pub fn fill_value(info: &ArrayInfo) -> Option<f64> {
    let num = crate::json::value_f64;
    let a = &info.attrs;
    // GVRS: the element's attributes sit at the top level (one element).
    if a.contains_key("type_code") {
        let int_coded = a.get("type").and_then(Value::as_str) == Some("int_coded_float") || a.contains_key("fill_int");
        if int_coded && info.dtype == DType::I32 {
            return a.get("fill_int").and_then(num);
        }
        return a.get("fill").and_then(num);
    }
    if let Some(Value::Object(ch)) = a.get("channel") {
        if ch.get("use_no_value").and_then(Value::as_bool) != Some(true) {
            return None;
        }
        let nv = ch.get("no_value").and_then(num)?;
        return match info.dtype {
            DType::U8 => Some(255.0),
            DType::U16 => Some(65535.0),
            DType::F32 => Some(nv as f32 as f64),
            _ => Some(nv),
        };
    }
    None
}

/// What a pass over the cells does with them.
#[derive(Debug)]
enum Pass {
    /// Counts, min, max, sum, mean and variance.
    Figures,
    /// The histogram over the valid cells (the range known from the first pass).
    Histogram(Histogram),
}

/// The figures of one block of cells ([`CHUNK`] cells of the array in C order, the last one
/// shorter): what blocks computed on any thread merge from, in block order.
#[derive(Debug, Clone, Copy)]
struct Block {
    valid: u64,
    fill: u64,
    nan: u64,
    inf: u64,
    min: f64,
    max: f64,
    sum: f64,
    m2: f64,
}

/// A cell type the figures kernel reads straight from little-endian bytes, widening each
/// value to f64 where it is used (no f64 buffer of the block).
trait Cell {
    /// Bytes per value.
    const SIZE: usize;
    /// Whether a value can be NaN or infinite (integers cannot: their tests are skipped).
    const FLOAT: bool;
    /// The value in `b` (exactly `SIZE` bytes), as [`decode_f64`] widens it.
    fn at(b: &[u8]) -> f64;
    /// The 8 values in `c` (exactly `8 * SIZE` bytes).
    #[inline(always)]
    fn at8(c: &[u8]) -> [f64; 8] {
        std::array::from_fn(|l| Self::at(&c[l * Self::SIZE..(l + 1) * Self::SIZE]))
    }
}

macro_rules! cell {
    ($name:ident, $t:ty, $n:expr, $float:expr) => {
        struct $name;
        impl Cell for $name {
            const SIZE: usize = $n;
            const FLOAT: bool = $float;
            #[inline(always)]
            fn at(b: &[u8]) -> f64 {
                let mut a = [0u8; $n];
                a.copy_from_slice(b);
                <$t>::from_le_bytes(a) as f64
            }
        }
    };
}
cell!(CU8, u8, 1, false);
cell!(CI8, i8, 1, false);
cell!(CU16, u16, 2, false);
cell!(CI16, i16, 2, false);
cell!(CU32, u32, 4, false);
cell!(CI32, i32, 4, false);
cell!(CU64, u64, 8, false);
cell!(CI64, i64, 8, false);
cell!(CF32, f32, 4, true);
cell!(CF64, f64, 8, true);

struct CF16;
impl Cell for CF16 {
    const SIZE: usize = 2;
    const FLOAT: bool = true;
    #[inline(always)]
    fn at(b: &[u8]) -> f64 {
        crate::array::f16_to_f64(u16::from_le_bytes([b[0], b[1]]))
    }
}

/// Complex values never reach the kernel (`require_real` refuses them at `begin`); NaN, as
/// [`decode_f64`] gives, should that ever change.
struct CNan<const N: usize>;
impl<const N: usize> Cell for CNan<N> {
    const SIZE: usize = N;
    const FLOAT: bool = true;
    #[inline(always)]
    fn at(_: &[u8]) -> f64 {
        f64::NAN
    }
}

/// The pairwise-summation tree over `len` cells from cell `start`: halves cut at a multiple
/// of 8 cells, leaves of at most 128 cells summed by `leaf(start, len)`, left before right.
/// Only the last leaf can have a length that is not a multiple of 8, so lanes of a leaf are
/// the lanes of the whole block.
fn pairwise_tree(start: usize, len: usize, leaf: &mut impl FnMut(usize, usize) -> f64) -> f64 {
    if len <= 128 {
        return leaf(start, len);
    }
    let half = len / 2 / 8 * 8;
    let a = pairwise_tree(start, half, leaf);
    a + pairwise_tree(start + half, len - half, leaf)
}

/// `((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))`: how a leaf's 8 lane sums combine.
#[inline(always)]
fn lane_sum(a: &[f64; 8]) -> f64 {
    ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
}

/// The block's figures from its little-endian bytes (whole values of `C`, at most
/// [`CHUNK`]): bit for bit what widening the block to f64 and taking its counts, min and
/// max, pairwise sum and pairwise squared deviations in three masked passes gives (the
/// reference in the tests), without the f64 buffer and, leaf by leaf of the summation tree,
/// without the validity masks where they select nothing.
///
/// A leaf (at most 128 cells) is first taken unmasked: min, max and sum into copies of the
/// block's 8 lanes. It is kept when every cell was valid: its sum is finite (a NaN or
/// infinite cell makes it NaN or infinite for good; a sum that overflows is redone,
/// harmlessly) and no cell equals a finite fill value (looked for only when the fill lies
/// within the lanes' range). With every cell valid the masked forms select `x` itself, so
/// the bits are the same. Otherwise the leaf is redone with masks. Counts of NaN, infinite
/// and fill cells (which need no order) are taken in a separate pass when some cell was not
/// valid; the squared deviations skip the masks on the leaves that were clean.
fn block_figures_of<C: Cell>(d: &[u8], fill_eq: f64, fill_nan: bool) -> Block {
    let len = d.len() / C::SIZE;
    let d = &d[..len * C::SIZE];
    let valid = |x: f64| (!C::FLOAT || x.is_finite()) & (x != fill_eq);
    // Per lane: min and max (the lanes matter only when 0.0 and -0.0 tie: the first one a
    // lane meets stays).
    let mut lo = [f64::INFINITY; 8];
    let mut hi = [f64::NEG_INFINITY; 8];
    let mut valid_n = 0u64;
    // Leaves taken unmasked, by their number in the tree (a block of at most CHUNK cells has
    // at most 64 leaves; any beyond are taken masked).
    let mut clean = 0u64;
    let mut leaf = 0u32;
    let sum = pairwise_tree(0, len, &mut |start, n| {
        let part = &d[start * C::SIZE..(start + n) * C::SIZE];
        let this = leaf;
        leaf += 1;
        if this < 64 {
            let (mut l8, mut h8) = (lo, hi);
            let mut acc = [0.0f64; 8];
            let mut it = part.chunks_exact(8 * C::SIZE);
            for c in &mut it {
                let x = C::at8(c);
                for l in 0..8 {
                    l8[l] = if x[l] < l8[l] { x[l] } else { l8[l] };
                    h8[l] = if x[l] > h8[l] { x[l] } else { h8[l] };
                    acc[l] += x[l];
                }
            }
            let mut s = lane_sum(&acc);
            for c in it.remainder().chunks_exact(C::SIZE) {
                let x = C::at(c);
                l8[0] = l8[0].min(x);
                h8[0] = h8[0].max(x);
                s += x;
            }
            let finite = !C::FLOAT || s.is_finite();
            let in_range = l8.iter().any(|&m| fill_eq >= m) && h8.iter().any(|&m| fill_eq <= m);
            if finite && !(in_range && part.chunks_exact(C::SIZE).any(|c| C::at(c) == fill_eq)) {
                (lo, hi) = (l8, h8);
                valid_n += n as u64;
                clean |= 1 << this;
                return s;
            }
        }
        let (mut kn, mut l8, mut h8) = ([0u64; 8], lo, hi);
        let mut acc = [0.0f64; 8];
        let mut it = part.chunks_exact(8 * C::SIZE);
        for c in &mut it {
            let x = C::at8(c);
            for l in 0..8 {
                let x = x[l];
                let ok = valid(x);
                kn[l] += ok as u64;
                let (a, b) = if ok { (x, x) } else { (f64::INFINITY, f64::NEG_INFINITY) };
                l8[l] = if a < l8[l] { a } else { l8[l] };
                h8[l] = if b > h8[l] { b } else { h8[l] };
                acc[l] += if ok { x } else { 0.0 };
            }
        }
        let mut s = lane_sum(&acc);
        for c in it.remainder().chunks_exact(C::SIZE) {
            let x = C::at(c);
            let ok = valid(x);
            kn[0] += ok as u64;
            if ok {
                l8[0] = l8[0].min(x);
                h8[0] = h8[0].max(x);
            }
            s += if ok { x } else { 0.0 };
        }
        (lo, hi) = (l8, h8);
        valid_n += kn.iter().sum::<u64>();
        s
    });
    let mut b = Block {
        valid: valid_n,
        fill: 0,
        nan: 0,
        inf: 0,
        min: lo.iter().fold(f64::INFINITY, |m, &x| m.min(x)),
        max: hi.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x)),
        sum: 0.0,
        m2: 0.0,
    };
    if valid_n < len as u64 {
        // Some cell is not valid: count what it is (a valid cell is never NaN, infinite or
        // the fill value, so blocks of valid cells skip this pass).
        let (mut nan, mut inf, mut fill) = (0u64, 0u64, 0u64);
        for c in d.chunks_exact(C::SIZE) {
            let x = C::at(c);
            nan += x.is_nan() as u64;
            inf += x.is_infinite() as u64;
            fill += (x == fill_eq) as u64;
        }
        b.nan = nan;
        b.inf = inf;
        b.fill = fill + if fill_nan { nan } else { 0 };
    }
    if valid_n == 0 {
        return b;
    }
    b.sum = sum;
    let mean = sum / valid_n as f64;
    // The pairwise sum of `(x - mean)^2` over the valid cells (`0` for the others), in the
    // same tree; masks only on the leaves that were not clean.
    let mut leaf = 0u32;
    b.m2 = pairwise_tree(0, len, &mut |start, n| {
        let part = &d[start * C::SIZE..(start + n) * C::SIZE];
        let this = leaf;
        leaf += 1;
        if this < 64 && clean & (1 << this) != 0 {
            squares_leaf::<C>(part, mean, |_| true)
        } else {
            squares_leaf::<C>(part, mean, valid)
        }
    });
    b
}

/// One leaf's sum of `(x - mean)^2` over the cells `ok` keeps (`0` for the others): 8 lanes,
/// combined as [`lane_sum`], then the remainder in order.
#[inline(always)]
fn squares_leaf<C: Cell>(part: &[u8], mean: f64, ok: impl Fn(f64) -> bool) -> f64 {
    let mut acc = [0.0f64; 8];
    let mut it = part.chunks_exact(8 * C::SIZE);
    for c in &mut it {
        let x = C::at8(c);
        for l in 0..8 {
            let e = if ok(x[l]) { x[l] - mean } else { 0.0 };
            acc[l] += e * e;
        }
    }
    let mut s = lane_sum(&acc);
    for c in it.remainder().chunks_exact(C::SIZE) {
        let x = C::at(c);
        let e = if ok(x) { x - mean } else { 0.0 };
        s += e * e;
    }
    s
}

/// [`block_figures_of`] for the block's dtype.
fn block_figures(dtype: DType, d: &[u8], fill_eq: f64, fill_nan: bool) -> Block {
    match dtype {
        DType::Bool | DType::U8 => block_figures_of::<CU8>(d, fill_eq, fill_nan),
        DType::I8 => block_figures_of::<CI8>(d, fill_eq, fill_nan),
        DType::U16 => block_figures_of::<CU16>(d, fill_eq, fill_nan),
        DType::I16 => block_figures_of::<CI16>(d, fill_eq, fill_nan),
        DType::U32 => block_figures_of::<CU32>(d, fill_eq, fill_nan),
        DType::I32 => block_figures_of::<CI32>(d, fill_eq, fill_nan),
        DType::U64 => block_figures_of::<CU64>(d, fill_eq, fill_nan),
        DType::I64 => block_figures_of::<CI64>(d, fill_eq, fill_nan),
        DType::F32 => block_figures_of::<CF32>(d, fill_eq, fill_nan),
        DType::F64 => block_figures_of::<CF64>(d, fill_eq, fill_nan),
        DType::F16 => block_figures_of::<CF16>(d, fill_eq, fill_nan),
        DType::C64 => block_figures_of::<CNan<8>>(d, fill_eq, fill_nan),
        DType::C128 => block_figures_of::<CNan<16>>(d, fill_eq, fill_nan),
    }
}

/// The bins of the valid cells of `d` (whole little-endian values of `C`) that lie within
/// `[min, max]`, handed to `put` in cell order, read straight from the bytes (no f64 buffer):
/// the same bins as widening to f64 and testing each value (the reference in the tests).
/// `min` and `max` are finite, so the range test also leaves out NaN and infinite cells.
#[inline(always)]
fn histogram_bins_of<C: Cell>(d: &[u8], fill_eq: f64, min: f64, max: f64, edges: &[f64], put: &mut impl FnMut(usize)) {
    for c in d.chunks_exact(C::SIZE) {
        let x = C::at(c);
        if x >= min && x <= max && x != fill_eq {
            put(bin_of(min, max, edges, x));
        }
    }
}

/// [`histogram_bins_of`] for the cells' dtype.
fn histogram_bins(
    dtype: DType,
    d: &[u8],
    fill_eq: f64,
    min: f64,
    max: f64,
    edges: &[f64],
    put: &mut impl FnMut(usize),
) {
    match dtype {
        DType::Bool | DType::U8 => histogram_bins_of::<CU8>(d, fill_eq, min, max, edges, put),
        DType::I8 => histogram_bins_of::<CI8>(d, fill_eq, min, max, edges, put),
        DType::U16 => histogram_bins_of::<CU16>(d, fill_eq, min, max, edges, put),
        DType::I16 => histogram_bins_of::<CI16>(d, fill_eq, min, max, edges, put),
        DType::U32 => histogram_bins_of::<CU32>(d, fill_eq, min, max, edges, put),
        DType::I32 => histogram_bins_of::<CI32>(d, fill_eq, min, max, edges, put),
        DType::U64 => histogram_bins_of::<CU64>(d, fill_eq, min, max, edges, put),
        DType::I64 => histogram_bins_of::<CI64>(d, fill_eq, min, max, edges, put),
        DType::F32 => histogram_bins_of::<CF32>(d, fill_eq, min, max, edges, put),
        DType::F64 => histogram_bins_of::<CF64>(d, fill_eq, min, max, edges, put),
        DType::F16 => histogram_bins_of::<CF16>(d, fill_eq, min, max, edges, put),
        DType::C64 => histogram_bins_of::<CNan<8>>(d, fill_eq, min, max, edges, put),
        DType::C128 => histogram_bins_of::<CNan<16>>(d, fill_eq, min, max, edges, put),
    }
}

/// The histogram pass before it read bytes directly (each [`CHUNK`] of cells widened into an
/// f64 buffer, then tested and binned): the reference the kernel's counts are tested against.
#[cfg(test)]
fn reference_histogram(dtype: DType, bytes: &[u8], fill_eq: f64, h: &mut Histogram, edges: &[f64]) {
    let mut values = Vec::new();
    for part in bytes.chunks(CHUNK * dtype.size()) {
        values.clear();
        decode_f64(dtype, part, &mut values);
        for &v in &values {
            if v.is_finite() && v != fill_eq {
                h.add(edges, v);
            }
        }
    }
}

/// The figures kernel before it read bytes directly (three passes over an f64 buffer): the
/// reference the kernel's results are tested against bit for bit.
#[cfg(test)]
/// The block's figures (reference). `fill_eq` is the fill value when it is not NaN (NaN otherwise: then
/// nothing compares equal to it and NaN fill cells are counted from `nan`). Three passes over
/// at most [`CHUNK`] values (in cache): counts, min and max; the pairwise sum of the valid
/// values; their pairwise squared deviations from the block's mean. Invalid cells take part
/// as zeros, so the loops have no branches and vectorise.
fn reference_figures(v: &[f64], fill_eq: f64, fill_nan: bool) -> Block {
    let valid = |x: f64| x.is_finite() & (x != fill_eq);
    let mut n = [0u64; 8];
    let mut nan = [0u64; 8];
    let mut inf = [0u64; 8];
    let mut fill = [0u64; 8];
    let mut lo = [f64::INFINITY; 8];
    let mut hi = [f64::NEG_INFINITY; 8];
    let mut it = v.chunks_exact(8);
    for c in &mut it {
        for l in 0..8 {
            let x = c[l];
            let ok = valid(x);
            n[l] += ok as u64;
            nan[l] += x.is_nan() as u64;
            inf[l] += x.is_infinite() as u64;
            fill[l] += (x == fill_eq) as u64;
            let (a, b) = if ok { (x, x) } else { (f64::INFINITY, f64::NEG_INFINITY) };
            lo[l] = if a < lo[l] { a } else { lo[l] };
            hi[l] = if b > hi[l] { b } else { hi[l] };
        }
    }
    for &x in it.remainder() {
        let ok = valid(x);
        n[0] += ok as u64;
        nan[0] += x.is_nan() as u64;
        inf[0] += x.is_infinite() as u64;
        fill[0] += (x == fill_eq) as u64;
        if ok {
            lo[0] = lo[0].min(x);
            hi[0] = hi[0].max(x);
        }
    }
    let valid_n: u64 = n.iter().sum();
    let nan_n: u64 = nan.iter().sum();
    let mut b = Block {
        valid: valid_n,
        fill: fill.iter().sum::<u64>() + if fill_nan { nan_n } else { 0 },
        nan: nan_n,
        inf: inf.iter().sum(),
        min: lo.iter().fold(f64::INFINITY, |m, &x| m.min(x)),
        max: hi.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x)),
        sum: 0.0,
        m2: 0.0,
    };
    if valid_n > 0 {
        b.sum = pairwise(v, &|x| if valid(x) { x } else { 0.0 });
        let mean = b.sum / valid_n as f64;
        b.m2 = pairwise(v, &|x| {
            let d = if valid(x) { x - mean } else { 0.0 };
            d * d
        });
    }
    b
}

impl Block {
    const EMPTY: Block = Block {
        valid: 0,
        fill: 0,
        nan: 0,
        inf: 0,
        min: f64::INFINITY,
        max: f64::NEG_INFINITY,
        sum: 0.0,
        m2: 0.0,
    };

    /// `self` followed by `b` (Chan's formula): how the [`CHUNK`]-cell pieces of one block
    /// handed over by a source combine, always in the block's own cell order.
    fn then(self, b: &Block) -> Block {
        let mut out = Block {
            valid: self.valid + b.valid,
            fill: self.fill + b.fill,
            nan: self.nan + b.nan,
            inf: self.inf + b.inf,
            min: self.min.min(b.min),
            max: self.max.max(b.max),
            sum: self.sum + b.sum,
            m2: self.m2 + b.m2,
        };
        if self.valid > 0 && b.valid > 0 {
            let (na, nb) = (self.valid as f64, b.valid as f64);
            let delta = b.sum / nb - self.sum / na;
            out.m2 += delta * delta * (na * nb / (na + nb));
        }
        out
    }

    /// `cells` cells of the one value `v`.
    fn run(v: f64, cells: u64, fill_eq: f64, fill_nan: bool) -> Block {
        let mut b = Block::EMPTY;
        let is_fill = if fill_nan { v.is_nan() } else { v == fill_eq };
        if is_fill || !v.is_finite() {
            b.fill = if is_fill { cells } else { 0 };
            b.nan = if v.is_nan() { cells } else { 0 };
            b.inf = if v.is_infinite() { cells } else { 0 };
        } else if cells > 0 {
            b.valid = cells;
            b.min = v;
            b.max = v;
            b.sum = v * cells as f64;
        }
        b
    }
}

/// What [`StatsSink::parallel_blocks`] hands a source: each block's figures are computed on
/// the thread that decoded it ([`CHUNK`] cells at a time, combined in the block's cell order),
/// then merged in block-number order (blocks that finish early wait in `waiting`), so the
/// result has the same bits on 1 or N threads and for any decode order. The histogram pass
/// only counts, which needs no order.
#[derive(Debug)]
struct Par {
    dtype: DType,
    fill_eq: f64,
    fill_nan: bool,
    edges: Vec<f64>,
    hist: Option<Mutex<Histogram>>,
    state: Mutex<Frontier>,
}

#[derive(Debug)]
struct Frontier {
    /// The next block number to merge.
    next: u64,
    /// Blocks that finished before `next` (at most about one per decoding thread ahead).
    waiting: BTreeMap<u64, Block>,
    totals: Totals,
    /// Cells of every block received.
    cells: u64,
}

impl Par {
    fn lost() -> Error {
        Error::usage("internal: a stats thread panicked")
    }

    /// Merge block `seq` (and every waiting one it frees) in number order.
    fn arrive(&self, seq: u64, cells: u64, b: Block) -> Result<()> {
        let mut f = self.state.lock().map_err(|_| Par::lost())?;
        if seq < f.next || f.waiting.contains_key(&seq) {
            return Err(Error::usage(format!("internal: stats got block {seq} twice")));
        }
        f.cells = f
            .cells
            .checked_add(cells)
            .ok_or_else(|| Error::usage("internal: stats cell count overflows"))?;
        if self.hist.is_some() {
            // The histogram pass keeps no figures: only the count of blocks matters.
            f.waiting.insert(seq, Block::EMPTY);
        } else {
            f.waiting.insert(seq, b);
        }
        loop {
            let next = f.next;
            let Some(b) = f.waiting.remove(&next) else { break };
            f.totals.merge(&b);
            f.next += 1;
        }
        Ok(())
    }
}

impl BlockSink for Par {
    fn block(&self, seq: u64, data: &[u8]) -> Result<()> {
        let size = self.dtype.size();
        if !data.len().is_multiple_of(size) {
            return Err(Error::usage(format!(
                "internal: stats block {seq} of {} bytes is not whole {}-byte values",
                data.len(),
                size
            )));
        }
        let cells = (data.len() / size) as u64;
        if let Some(hist) = &self.hist {
            // Bins of the block's valid cells first, then one short lock to count them.
            let mut bins: Vec<u32> = Vec::new();
            let (lo, hi) = {
                let h = hist.lock().map_err(|_| Par::lost())?;
                (h.min, h.max)
            };
            histogram_bins(self.dtype, data, self.fill_eq, lo, hi, &self.edges, &mut |i| {
                bins.push(i as u32)
            });
            {
                let mut h = hist.lock().map_err(|_| Par::lost())?;
                for i in bins {
                    h.counts[i as usize] += 1;
                }
            }
            return self.arrive(seq, cells, Block::EMPTY);
        }
        let mut b = Block::EMPTY;
        for part in data.chunks(CHUNK * size) {
            b = b.then(&block_figures(self.dtype, part, self.fill_eq, self.fill_nan));
        }
        self.arrive(seq, cells, b)
    }

    fn fill(&self, seq: u64, cells: u64, pattern: &[u8]) -> Result<()> {
        if pattern.len() != self.dtype.size() {
            return Err(Error::usage(format!(
                "internal: stats fill pattern of {} bytes for {}-byte values",
                pattern.len(),
                self.dtype.size()
            )));
        }
        let mut one = Vec::with_capacity(1);
        decode_f64(self.dtype, pattern, &mut one);
        let v = one[0];
        if let Some(hist) = &self.hist {
            let valid = v.is_finite() && !(self.fill_nan && v.is_nan()) && v != self.fill_eq;
            let mut h = hist.lock().map_err(|_| Par::lost())?;
            if valid && v >= h.min && v <= h.max {
                let i = h.bin_among(&self.edges, v);
                h.counts[i] += cells;
            }
            drop(h);
            return self.arrive(seq, cells, Block::EMPTY);
        }
        self.arrive(seq, cells, Block::run(v, cells, self.fill_eq, self.fill_nan))
    }
}

/// The sink of one pass: takes the array in C order, cuts it into blocks of [`CHUNK`] cells
/// and merges their figures in block order.
#[derive(Debug)]
pub struct StatsSink {
    pass: Pass,
    fill: Option<f64>,
    dtype: Option<DType>,
    /// The bytes of a value split across two writes.
    carry: Vec<u8>,
    position: u64,
    /// The little-endian bytes of the block under way (fewer than [`CHUNK`] values).
    pending: Vec<u8>,
    /// The histogram pass's bin edges (computed once).
    edges: Vec<f64>,
    count: u64,
    t: Totals,
    /// The figures of blocks a source's threads hand over ([`ArraySink::parallel_blocks`]),
    /// once asked for.
    par: Option<Arc<Par>>,
}

/// The merged figures of the blocks so far.
#[derive(Debug, Clone)]
struct Totals {
    fill_count: u64,
    nan_count: u64,
    inf_count: u64,
    min: f64,
    max: f64,
    valid: u64,
    /// Neumaier sum and its compensation.
    sum: f64,
    comp: f64,
    /// Chan's running mean and sum of squared deviations over the merged blocks.
    mean: f64,
    m2: f64,
}

impl Totals {
    const EMPTY: Totals = Totals {
        fill_count: 0,
        nan_count: 0,
        inf_count: 0,
        min: f64::INFINITY,
        max: f64::NEG_INFINITY,
        valid: 0,
        sum: 0.0,
        comp: 0.0,
        mean: 0.0,
        m2: 0.0,
    };

    /// Merge one block's figures (Chan's formula for the variance, Neumaier for the sum).
    fn merge(&mut self, b: &Block) {
        self.fill_count += b.fill;
        self.nan_count += b.nan;
        self.inf_count += b.inf;
        if b.valid == 0 {
            return;
        }
        self.min = self.min.min(b.min);
        self.max = self.max.max(b.max);
        let s = b.sum;
        let t = self.sum + s;
        self.comp += if self.sum.abs() >= s.abs() {
            (self.sum - t) + s
        } else {
            (s - t) + self.sum
        };
        self.sum = t;
        let na = self.valid as f64;
        let nb = b.valid as f64;
        let total = na + nb;
        let mean_b = s / nb;
        let delta = mean_b - self.mean;
        self.mean += delta * (nb / total);
        self.m2 += b.m2 + delta * delta * (na * nb / total);
        self.valid += b.valid;
    }
}

/// Blocks of one write worth handing to a second thread.
const PARALLEL_BLOCKS: usize = 64;

impl StatsSink {
    fn new(pass: Pass, fill: Option<f64>) -> StatsSink {
        let edges = match &pass {
            Pass::Histogram(h) => (0..=h.counts.len()).map(|i| h.edge(i)).collect(),
            Pass::Figures => Vec::new(),
        };
        StatsSink {
            edges,
            pass,
            fill,
            dtype: None,
            carry: Vec::new(),
            position: 0,
            pending: Vec::new(),
            count: 0,
            t: Totals::EMPTY,
            par: None,
        }
    }

    /// `(fill_eq, fill_nan)` of [`block_figures`].
    fn fill_test(&self) -> (f64, bool) {
        match self.fill {
            Some(f) if f.is_nan() => (f64::NAN, true),
            Some(f) => (f, false),
            None => (f64::NAN, false),
        }
    }

    /// The block under way is complete (or the array ended): its figures, merged.
    fn close_block(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let Some(dtype) = self.dtype else { return };
        let (eq, nan) = self.fill_test();
        let b = block_figures(dtype, &self.pending, eq, nan);
        self.t.merge(&b);
        self.pending.clear();
    }

    /// Whole blocks of little-endian bytes: their figures (on several threads when there are
    /// many), merged in order.
    fn whole_blocks(&mut self, dtype: DType, bytes: &[u8]) {
        let (eq, nan) = self.fill_test();
        let step = CHUNK * dtype.size();
        let blocks = bytes.len() / step;
        let figures =
            |part: &[u8]| -> Vec<Block> { part.chunks(step).map(|c| block_figures(dtype, c, eq, nan)).collect() };
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(blocks / PARALLEL_BLOCKS);
        let all: Vec<Block> = if threads <= 1 {
            figures(bytes)
        } else {
            // Whole blocks per thread, so every block is the same cells whatever the split.
            let per = blocks.div_ceil(threads) * step;
            std::thread::scope(|scope| {
                let mut parts = bytes.chunks(per);
                let first = parts.next().unwrap_or(&[]);
                let handles: Vec<_> = parts.map(|p| scope.spawn(move || figures(p))).collect();
                let mut all = figures(first);
                for h in handles {
                    // A panic on the helper thread is a bug; re-raised here as one.
                    all.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
                }
                all
            })
        };
        for b in &all {
            self.t.merge(b);
        }
    }

    /// Decode whole values from `data` and account for each.
    fn take(&mut self, mut data: &[u8]) -> Result<()> {
        let dtype = self
            .dtype
            .ok_or_else(|| Error::usage("internal: stats got data before begin"))?;
        let size = dtype.size();
        if !self.carry.is_empty() {
            let need = size - self.carry.len();
            let n = need.min(data.len());
            self.carry.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.carry.len() < size {
                return Ok(());
            }
            let carry = std::mem::take(&mut self.carry);
            self.values_in(dtype, &carry);
        }
        let whole = data.len() / size * size;
        self.values_in(dtype, &data[..whole]);
        self.carry.extend_from_slice(&data[whole..]);
        Ok(())
    }

    /// Whole values, in order.
    fn values_in(&mut self, dtype: DType, mut bytes: &[u8]) {
        let size = dtype.size();
        self.count += (bytes.len() / size) as u64;
        if let Pass::Histogram(h) = &mut self.pass {
            let eq = match self.fill {
                Some(f) if !f.is_nan() => f,
                _ => f64::NAN,
            };
            let (lo, hi, counts) = (h.min, h.max, &mut h.counts);
            histogram_bins(dtype, bytes, eq, lo, hi, &self.edges, &mut |i| counts[i] += 1);
            return;
        }
        // Complete the block under way, then whole blocks, then start the next.
        if !self.pending.is_empty() {
            let n = (CHUNK * size - self.pending.len()).min(bytes.len());
            self.pending.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.pending.len() < CHUNK * size {
                return;
            }
            self.close_block();
        }
        let whole = bytes.len() / (CHUNK * size) * (CHUNK * size);
        if whole > 0 {
            self.whole_blocks(dtype, &bytes[..whole]);
        }
        self.pending.extend_from_slice(&bytes[whole..]);
    }

    /// The blocks handed over through [`ArraySink::parallel_blocks`], all merged: their
    /// totals and cell count, or `None` when the source did not use the handle.
    fn parallel_totals(&mut self) -> Result<Option<(Totals, u64)>> {
        let Some(par) = self.par.take() else {
            return Ok(None);
        };
        let f = par
            .state
            .lock()
            .map_err(|_| Error::usage("internal: a stats thread panicked"))?;
        if f.next == 0 && f.waiting.is_empty() {
            return Ok(None);
        }
        if !f.waiting.is_empty() {
            return Err(Error::usage(format!(
                "internal: stats got block {} but not block {}",
                f.waiting.keys().next().copied().unwrap_or_default(),
                f.next
            )));
        }
        let size = par.dtype.size() as u64;
        if self.count != 0 || f.cells.checked_mul(size) != Some(self.position) {
            return Err(Error::usage(format!(
                "internal: stats got {} cells in blocks, {} bytes reported and {} cells in order",
                f.cells, self.position, self.count
            )));
        }
        Ok(Some((f.totals.clone(), f.cells)))
    }

    /// The histogram pass's counts (from the blocks handed over when the source took them).
    fn into_histogram(mut self) -> Result<Option<Histogram>> {
        if let Some(par) = &self.par {
            if let Some(hist) = &par.hist {
                let h = hist.lock().map_err(|_| Par::lost())?.clone();
                if self.parallel_totals()?.is_some() {
                    return Ok(Some(h));
                }
            }
        }
        Ok(match self.pass {
            Pass::Histogram(h) => Some(h),
            Pass::Figures => None,
        })
    }

    /// The first pass's figures (the histogram is added by [`compute`]).
    fn into_stats(mut self) -> Result<Stats> {
        if !self.carry.is_empty() {
            return Err(Error::usage("internal: the source delivered a partial value"));
        }
        self.close_block();
        if let Some((t, cells)) = self.parallel_totals()? {
            self.t = t;
            self.count = cells;
        }
        let any = self.t.valid > 0;
        let n = self.t.valid as f64;
        Ok(Stats {
            count: self.count,
            valid_count: self.t.valid,
            fill_count: self.t.fill_count,
            nan_count: self.t.nan_count,
            inf_count: self.t.inf_count,
            fill: self.fill,
            min: any.then_some(self.t.min),
            max: any.then_some(self.t.max),
            mean: any.then(|| (self.t.sum + self.t.comp) / n),
            std: any.then(|| (self.t.m2 / n).max(0.0).sqrt()),
            sum: self.t.sum + self.t.comp,
            histogram: None,
        })
    }
}

impl StatsSink {
    /// A fresh block handle for `dtype` (the fill test is the sink's): what an earlier one
    /// got is dropped.
    fn new_par(&mut self, dtype: DType) -> ParallelBlocks {
        let (fill_eq, fill_nan) = self.fill_test();
        let hist = match &self.pass {
            Pass::Histogram(h) => Some(Mutex::new(h.clone())),
            Pass::Figures => None,
        };
        let par = Arc::new(Par {
            dtype,
            fill_eq,
            fill_nan,
            edges: self.edges.clone(),
            hist,
            state: Mutex::new(Frontier {
                next: 0,
                waiting: BTreeMap::new(),
                totals: Totals::EMPTY,
                cells: 0,
            }),
        });
        self.par = Some(par.clone());
        par
    }
}

impl ArraySink for StatsSink {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        require_real(info.dtype, "stats")?;
        self.dtype = Some(info.dtype);
        self.fill = fill_value(info);
        Ok(())
    }

    fn parallel_blocks(&mut self) -> Option<ParallelBlocks> {
        let dtype = self.dtype?;
        Some(self.new_par(dtype))
    }

    fn takes_blocks(&self) -> bool {
        true
    }

    fn blocks_before_begin(&mut self, info: &ArrayInfo) -> Option<ParallelBlocks> {
        // The figures wait in the handle; `begin` (with the same array) keeps it.
        require_real(info.dtype, "stats").ok()?;
        self.fill = fill_value(info);
        Some(self.new_par(info.dtype))
    }

    fn written_elsewhere(&mut self, len: u64) -> Result<()> {
        if self.par.is_none() {
            return Err(Error::usage(
                "internal: stats was told of blocks it did not offer to take",
            ));
        }
        self.position = self
            .position
            .checked_add(len)
            .ok_or_else(|| Error::usage("internal: stats byte count overflows"))?;
        Ok(())
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        if offset != self.position {
            return Err(Error::usage(format!(
                "internal: stats got bytes at {offset} while at {}",
                self.position
            )));
        }
        self.position += data.len() as u64;
        self.take(data)
    }

    fn fill_at(&mut self, offset: u64, len: u64, pattern: &[u8]) -> Result<()> {
        // A run of one value that is not valid (a fill run, NaN): whole blocks of it counted
        // without a pass over their cells, so an all-fill grid of 2^30 cells costs nothing
        // per cell. The cells around them go through blocks as `write_at` would deliver them,
        // so the blocks, and the figures, are the same either way.
        let Some(dtype) = self.dtype else {
            return crate::stream::fill_by_chunks(self, offset, len, pattern);
        };
        let size = dtype.size() as u64;
        if pattern.len() as u64 != size || !self.carry.is_empty() || !len.is_multiple_of(size) {
            return crate::stream::fill_by_chunks(self, offset, len, pattern);
        }
        let mut one = Vec::with_capacity(1);
        decode_f64(dtype, pattern, &mut one);
        let v = one[0];
        let is_fill = match self.fill {
            Some(f) if f.is_nan() => v.is_nan(),
            Some(f) => v == f,
            None => false,
        };
        if !is_fill && v.is_finite() {
            return crate::stream::fill_by_chunks(self, offset, len, pattern);
        }
        if offset != self.position {
            return Err(Error::usage(format!(
                "internal: stats got bytes at {offset} while at {}",
                self.position
            )));
        }
        self.position += len;
        let mut n = len / size;
        self.count += n;
        if matches!(self.pass, Pass::Histogram(_)) {
            // The histogram is over valid cells: the run has none.
            return Ok(());
        }
        // Complete the block under way with the run's value (counted there).
        if !self.pending.is_empty() {
            let take = ((CHUNK - self.pending.len() / pattern.len()) as u64).min(n);
            for _ in 0..take {
                self.pending.extend_from_slice(pattern);
            }
            n -= take;
            if self.pending.len() < CHUNK * pattern.len() {
                return Ok(());
            }
            self.close_block();
        }
        // Whole blocks counted at once; the rest starts the next block.
        let whole = n / CHUNK as u64 * CHUNK as u64;
        self.t.fill_count += if is_fill { whole } else { 0 };
        if v.is_nan() {
            self.t.nan_count += whole;
        } else if v.is_infinite() {
            self.t.inf_count += whole;
        }
        for _ in 0..n - whole {
            self.pending.extend_from_slice(pattern);
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Pairwise sum of `f(x)` (8 lanes below 128 values; error grows with log n, not n): the
/// reference kernel's.
#[cfg(test)]
fn pairwise(v: &[f64], f: &impl Fn(f64) -> f64) -> f64 {
    if v.len() <= 128 {
        let mut acc = [0.0f64; 8];
        let mut it = v.chunks_exact(8);
        for c in &mut it {
            for l in 0..8 {
                acc[l] += f(c[l]);
            }
        }
        let mut s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        for &x in it.remainder() {
            s += f(x);
        }
        return s;
    }
    let half = v.len() / 2 / 8 * 8;
    pairwise(&v[..half], f) + pairwise(&v[half..], f)
}

/// Little-endian values of `dtype` as f64 (exact for every type but 64-bit integers beyond
/// 2^53, which round to the nearest f64 as numpy's `astype(float64)` does).
pub(crate) fn decode_f64(dtype: DType, d: &[u8], out: &mut Vec<f64>) {
    macro_rules! le {
        ($t:ty, $n:expr) => {
            out.extend(d.chunks_exact($n).map(|c| {
                let mut b = [0u8; $n];
                b.copy_from_slice(c);
                <$t>::from_le_bytes(b) as f64
            }))
        };
    }
    match dtype {
        DType::Bool | DType::U8 => out.extend(d.iter().map(|&v| v as f64)),
        DType::I8 => out.extend(d.iter().map(|&v| v as i8 as f64)),
        DType::U16 => le!(u16, 2),
        DType::I16 => le!(i16, 2),
        DType::U32 => le!(u32, 4),
        DType::I32 => le!(i32, 4),
        DType::U64 => le!(u64, 8),
        DType::I64 => le!(i64, 8),
        DType::F32 => le!(f32, 4),
        DType::F64 => le!(f64, 8),
        DType::F16 => out.extend(
            d.chunks_exact(2)
                .map(|c| crate::array::f16_to_f64(u16::from_le_bytes([c[0], c[1]]))),
        ),
        // Never reached: `require_real` refuses complex arrays at `begin`. NaN, not a part of
        // the value, should that ever change.
        DType::C64 => out.extend(d.chunks_exact(8).map(|_| f64::NAN)),
        DType::C128 => out.extend(d.chunks_exact(16).map(|_| f64::NAN)),
    }
}

/// Statistics and differences are defined here over real values only: a complex array is
/// unsupported (exit 3) rather than reduced to one of its parts.
pub(crate) fn require_real(dtype: DType, what: &str) -> Result<()> {
    if matches!(dtype, DType::C64 | DType::C128) {
        return Err(Error::unsupported(
            "request.complex_unsupported",
            None,
            format!("{what} of {} values is not supported", dtype.name()),
        ));
    }
    Ok(())
}

/// The statistics of one array. `stream` delivers the array into the sink it is given (e.g.
/// `|sink| format.stream_array(&input, &req, sink)`); it is called once, or twice with
/// `histogram` (the second pass bins the valid cells between the first pass's min and max).
pub fn compute(mut stream: impl FnMut(&mut dyn ArraySink) -> Result<()>, histogram: Option<u64>) -> Result<Stats> {
    if let Some(bins) = histogram {
        // Refuse a bad bin count before any work.
        Histogram::new(bins, 0.0, 1.0)?;
    }
    let mut first = StatsSink::new(Pass::Figures, None);
    stream(&mut first)?;
    first.finish()?;
    let mut stats = first.into_stats()?;
    if let Some(bins) = histogram {
        // numpy's range for no cells is (0, 1): every bin empty.
        let (lo, hi) = match (stats.min, stats.max) {
            (Some(lo), Some(hi)) => (lo, hi),
            _ => (0.0, 1.0),
        };
        let h = Histogram::new(bins, lo, hi)?;
        if stats.valid_count == 0 {
            stats.histogram = Some(h);
        } else {
            let mut second = StatsSink::new(Pass::Histogram(h), None);
            stream(&mut second)?;
            second.finish()?;
            stats.histogram = second.into_histogram()?;
        }
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::NdArray;

    fn stats_of(a: &NdArray, bins: Option<u64>) -> Stats {
        compute(
            |sink| {
                sink.begin(&ArrayInfo::of(a))?;
                // Odd-sized writes: values split across writes must still count once.
                let mut at = 0;
                for part in a.data.chunks(7) {
                    sink.write_at(at, part)?;
                    at += part.len() as u64;
                }
                Ok(())
            },
            bins,
        )
        .unwrap()
    }

    #[test]
    fn counts_and_figures_of_a_small_float_array() {
        let v = vec![1.0f32, f32::NAN, 3.0, f32::INFINITY, -2.0, 6.0];
        let s = stats_of(&NdArray::from_vec(vec![2, 3], v).unwrap(), Some(4));
        assert_eq!(
            (s.count, s.valid_count, s.nan_count, s.inf_count, s.fill_count),
            (6, 4, 1, 1, 0)
        );
        assert_eq!((s.min, s.max, s.sum), (Some(-2.0), Some(6.0), 8.0));
        assert_eq!(s.mean, Some(2.0));
        // population variance of 1, 3, -2, 6: (1 + 1 + 16 + 16) / 4 = 8.5
        assert_eq!(s.std, Some(8.5f64.sqrt()));
        // edges -2, 0, 2, 4, 6: -2 | 1 | 3 | 6 (last bin closed)
        assert_eq!(s.histogram.unwrap().counts, vec![1, 1, 1, 1]);
    }

    #[test]
    fn a_gvrs_fill_value_is_not_valid_and_a_fill_run_costs_no_cells() {
        let mut info = ArrayInfo::new(DType::I32, vec![1 << 30]);
        info.attrs.insert("type_code".into(), Value::from(0));
        info.attrs.insert("fill".into(), Value::from(-9));
        let s = compute(
            |sink| {
                sink.begin(&info)?;
                sink.fill_at(0, 4 << 30, &(-9i32).to_le_bytes())
            },
            Some(3),
        )
        .unwrap();
        assert_eq!((s.count, s.valid_count, s.fill_count), (1 << 30, 0, 1 << 30));
        assert_eq!((s.min, s.mean, s.sum), (None, None, 0.0));
        assert_eq!(s.histogram.unwrap().counts, vec![0, 0, 0]);
    }

    #[test]
    fn one_value_widens_the_histogram_like_numpy() {
        let s = stats_of(&NdArray::from_vec(vec![3], vec![5u8, 5, 5]).unwrap(), Some(2));
        let h = s.histogram.unwrap();
        assert_eq!((h.min, h.max, h.counts), (4.5, 5.5, vec![0, 3]));
        assert_eq!(s.std, Some(0.0));
    }

    #[test]
    fn the_result_does_not_depend_on_how_the_bytes_arrive() {
        let v: Vec<f64> = (0..20_000).map(|i| ((i * 7919) % 1000) as f64 * 0.1 + 1e6).collect();
        let a = NdArray::from_vec(vec![20_000], v).unwrap();
        let whole = compute(
            |sink| {
                sink.begin(&ArrayInfo::of(&a))?;
                sink.write_at(0, &a.data)
            },
            Some(10),
        )
        .unwrap();
        assert_eq!(whole, stats_of(&a, Some(10)));
    }

    #[test]
    fn blocks_on_several_threads_and_fill_runs_give_the_same_bits() {
        // Large enough for the threaded path (64+ whole blocks in one write), with a NaN fill
        // run that does not start or end on a block boundary.
        let n = 600_000usize;
        let run = 150_001..420_003usize;
        let v: Vec<f32> = (0..n)
            .map(|i| {
                if run.contains(&i) {
                    f32::NAN
                } else {
                    ((i * 7919) % 10007) as f32 * 0.37 - 1500.0
                }
            })
            .collect();
        let a = NdArray::from_vec(vec![n as u64], v.clone()).unwrap();
        let whole = compute(
            |sink| {
                sink.begin(&ArrayInfo::of(&a))?;
                sink.write_at(0, &a.data)
            },
            Some(7),
        )
        .unwrap();
        let pieces = stats_of(&a, Some(7));
        let filled = compute(
            |sink| {
                sink.begin(&ArrayInfo::of(&a))?;
                let (s, e) = (run.start * 4, run.end * 4);
                sink.write_at(0, &a.data[..s])?;
                sink.fill_at(s as u64, (e - s) as u64, &f32::NAN.to_le_bytes())?;
                sink.write_at(e as u64, &a.data[e..])
            },
            Some(7),
        )
        .unwrap();
        assert_eq!(whole, pieces);
        assert_eq!(whole, filled);
        // And close to a plain two-pass reference.
        let cells: Vec<f64> = v.iter().filter(|x| x.is_finite()).map(|&x| x as f64).collect();
        let mean = cells.iter().sum::<f64>() / cells.len() as f64;
        let var = cells.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / cells.len() as f64;
        assert_eq!(
            (whole.valid_count, whole.nan_count),
            (cells.len() as u64, run.len() as u64)
        );
        assert!((whole.mean.unwrap() - mean).abs() <= 1e-12 * mean.abs());
        assert!((whole.std.unwrap() - var.sqrt()).abs() <= 1e-12 * var.sqrt());
    }

    /// Hands `a` over as numbered blocks of `per` cells (a run of the fill value where the
    /// block is all fill), in the order `order` gives, on `threads` threads.
    fn by_blocks(a: &NdArray, per: usize, order: &[usize], threads: usize, bins: Option<u64>) -> Result<Stats> {
        let size = a.dtype.size();
        let blocks: Vec<&[u8]> = a.data.chunks(per * size).collect();
        compute(
            |sink| {
                sink.begin(&ArrayInfo::of(a))?;
                let par = sink.parallel_blocks().expect("stats takes blocks");
                let share = order.len().div_ceil(threads);
                std::thread::scope(|scope| {
                    let handles: Vec<_> = order
                        .chunks(share)
                        .map(|part| {
                            let par = par.clone();
                            let blocks = &blocks;
                            scope.spawn(move || {
                                part.iter().try_for_each(|&k| {
                                    let b = blocks[k];
                                    if b.chunks(size).all(|v| v == &b[..size])
                                        && f32::from_le_bytes(b[..4].try_into().unwrap()).is_nan()
                                    {
                                        par.fill(k as u64, (b.len() / size) as u64, &b[..size])
                                    } else {
                                        par.block(k as u64, b)
                                    }
                                })
                            })
                        })
                        .collect();
                    handles.into_iter().try_for_each(|h| h.join().unwrap())
                })?;
                sink.written_elsewhere(order.iter().map(|&k| blocks[k].len() as u64).sum())
            },
            bins,
        )
    }

    #[test]
    fn blocks_handed_over_in_any_order_on_any_threads_merge_to_the_same_bits() {
        // 90 blocks of 14,400 cells (a GVRS tile's worth, several CHUNKs each, the last one
        // short), two of them all NaN (handed over as fill runs), values far from 0 so that
        // a careless variance would show.
        let per = 14_400;
        let n = 89 * per + 1_234;
        let v: Vec<f32> = (0..n)
            .map(|i| {
                if (3 * per..5 * per).contains(&i) {
                    f32::NAN
                } else {
                    ((i * 7919) % 10007) as f32 * 0.37 + 1.0e5
                }
            })
            .collect();
        let a = NdArray::from_vec(vec![n as u64], v.clone()).unwrap();
        let ascending: Vec<usize> = (0..90).collect();
        let mut scrambled: Vec<usize> = (0..90).map(|k| (k * 37) % 90).collect();
        scrambled.reverse();
        let one = by_blocks(&a, per, &ascending, 1, Some(9)).unwrap();
        for threads in [2, 3, 8] {
            assert_eq!(
                by_blocks(&a, per, &scrambled, threads, Some(9)).unwrap(),
                one,
                "{threads} threads"
            );
        }
        // Counts, min, max and the histogram are exact: the same as the C-order path's; mean
        // and std agree with a plain two-pass reference.
        let ordered = stats_of(&a, Some(9));
        assert_eq!(
            (
                one.count,
                one.valid_count,
                one.nan_count,
                one.fill_count,
                one.min,
                one.max,
                one.histogram.clone()
            ),
            (
                ordered.count,
                ordered.valid_count,
                ordered.nan_count,
                ordered.fill_count,
                ordered.min,
                ordered.max,
                ordered.histogram.clone()
            )
        );
        assert_eq!(one.nan_count, 2 * per as u64);
        let cells: Vec<f64> = v.iter().filter(|x| x.is_finite()).map(|&x| x as f64).collect();
        let mean = cells.iter().sum::<f64>() / cells.len() as f64;
        let var = cells.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / cells.len() as f64;
        assert!((one.mean.unwrap() - mean).abs() <= 1e-12 * mean.abs());
        assert!((one.std.unwrap() - var.sqrt()).abs() <= 1e-12 * var.sqrt());
    }

    #[test]
    fn a_missing_or_repeated_block_is_an_error_not_a_figure() {
        let v: Vec<f64> = (0..1000).map(|i| i as f64).collect();
        let a = NdArray::from_vec(vec![1000], v).unwrap();
        // Block 3 of 10 never arrives.
        let missing: Vec<usize> = (0..10).filter(|&k| k != 3).collect();
        let e = by_blocks(&a, 100, &missing, 2, None).unwrap_err();
        assert!(e.to_string().contains("not block 3"), "{e}");
        let twice = [0, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9];
        let e = by_blocks(&a, 100, &twice, 1, None).unwrap_err();
        assert!(e.to_string().contains("block 1 twice"), "{e}");
    }
}

#[cfg(test)]
mod kernel_tests {
    use super::*;

    /// splitmix64: reproducible test data without a dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// One value of `dtype` as little-endian bytes: mostly ordinary values, with `special`
    /// per mille of NaN (two payloads), ±inf, the fill value, -0.0 and 0.0 for floats, and raw
    /// random bits (subnormals, huge values, 64-bit integers beyond 2^53) now and then.
    fn value(r: &mut Rng, dtype: DType, fill: f64, special: u64, out: &mut Vec<u8>) {
        let pick = r.below(1000);
        let raw = r.next();
        let small = (r.below(2001) as i64 - 1000) as f64 * 0.375;
        let x: f64 = if pick < special {
            match r.below(7) {
                0 => f64::NAN,
                1 => -f64::NAN,
                2 => f64::INFINITY,
                3 => f64::NEG_INFINITY,
                4 => -0.0,
                5 => 0.0,
                _ => fill,
            }
        } else if pick < special + 50 {
            // Raw bits, written below per type.
            f64::from_bits(raw)
        } else {
            small
        };
        let is_raw = pick >= special && pick < special + 50;
        match dtype {
            DType::Bool => out.push((raw & 1) as u8),
            DType::U8 => out.push(if is_raw { raw as u8 } else { x.rem_euclid(256.0) as u8 }),
            DType::I8 => out.push(if is_raw { raw as u8 } else { (x as i64 as i8) as u8 }),
            DType::U16 => out.extend((if is_raw { raw as u16 } else { x.abs() as u16 }).to_le_bytes()),
            DType::I16 => out.extend((if is_raw { raw as i16 } else { x as i16 }).to_le_bytes()),
            DType::U32 => out.extend((if is_raw { raw as u32 } else { x.abs() as u32 }).to_le_bytes()),
            DType::I32 => out.extend((if is_raw { raw as i32 } else { x as i32 }).to_le_bytes()),
            DType::U64 => out.extend((if is_raw { raw } else { x.abs() as u64 }).to_le_bytes()),
            DType::I64 => out.extend((if is_raw { raw as i64 } else { x as i64 }).to_le_bytes()),
            DType::F32 => out.extend((if is_raw { f32::from_bits(raw as u32) } else { x as f32 }).to_le_bytes()),
            DType::F64 => out.extend(x.to_le_bytes()),
            DType::F16 => {
                // Ordinary values as halves of small integers; specials by their bits.
                let h: u16 = if is_raw {
                    raw as u16
                } else if x.is_nan() {
                    0x7e00 | (raw as u16 & 0x8000) | (raw as u16 & 0x1ff)
                } else if x == f64::INFINITY {
                    0x7c00
                } else if x == f64::NEG_INFINITY {
                    0xfc00
                } else if x == 0.0 {
                    if x.is_sign_negative() {
                        0x8000
                    } else {
                        0
                    }
                } else {
                    // 1.0 .. 2.0 in steps of 1/1024, signed: every one an exact half.
                    (0x3c00 | (raw as u16 & 0x3ff)) | if x < 0.0 { 0x8000 } else { 0 }
                };
                out.extend(h.to_le_bytes())
            }
            DType::C64 | DType::C128 => unreachable!("complex values are refused at begin"),
        }
    }

    fn same(a: &Block, b: &Block) -> bool {
        (a.valid, a.fill, a.nan, a.inf) == (b.valid, b.fill, b.nan, b.inf)
            && a.min.to_bits() == b.min.to_bits()
            && a.max.to_bits() == b.max.to_bits()
            && a.sum.to_bits() == b.sum.to_bits()
            && a.m2.to_bits() == b.m2.to_bits()
    }

    #[test]
    fn the_byte_kernel_gives_the_reference_kernels_bits_for_every_dtype_and_length() {
        let dtypes = [
            DType::Bool,
            DType::U8,
            DType::I8,
            DType::U16,
            DType::I16,
            DType::U32,
            DType::I32,
            DType::U64,
            DType::I64,
            DType::F16,
            DType::F32,
            DType::F64,
        ];
        // Every length to 300 (all remainders, one to three leaves), then lengths across
        // the pairwise tree's splits up to a whole block.
        let mut lengths: Vec<usize> = (0..=300).collect();
        lengths.extend((301..CHUNK).step_by(97));
        lengths.extend([1023, 1024, 1025, 2047, 2048, 2049, 4087, 4088, 4089, 4095, CHUNK]);
        let mut r = Rng(0x5eed_0022);
        let (mut checked, mut fast, mut masked) = (0u64, 0u64, 0u64);
        let mut bytes = Vec::new();
        let mut values = Vec::new();
        for &dtype in &dtypes {
            for &len in &lengths {
                // Fill: none, NaN, or a value the data holds (-7.5 fits every signed type's
                // ordinary values as -7 after conversion; the float types keep -7.5).
                let fill_case = r.below(3);
                let fill = match fill_case {
                    0 => None,
                    1 => Some(f64::NAN),
                    _ => Some(match dtype {
                        DType::F16 => 1.5,
                        DType::F32 | DType::F64 => -7.5,
                        DType::Bool => 1.0,
                        DType::U8 | DType::U16 | DType::U32 | DType::U64 => 7.0,
                        _ => -7.0,
                    }),
                };
                let (eq, nan) = match fill {
                    Some(f) if f.is_nan() => (f64::NAN, true),
                    Some(f) => (f, false),
                    None => (f64::NAN, false),
                };
                // No specials (every leaf unmasked for integers and ordinary floats), one in
                // a thousand cells (blocks of clean and masked leaves), a few, or many.
                let special = [0, 1, 20, 300][r.below(4) as usize];
                // An odd offset: the kernel reads unaligned bytes.
                bytes.clear();
                bytes.push(0xAA);
                for _ in 0..len {
                    value(&mut r, dtype, fill.unwrap_or(0.0), special, &mut bytes);
                }
                let d = &bytes[1..];
                values.clear();
                decode_f64(dtype, d, &mut values);
                let want = reference_figures(&values, eq, nan);
                let got = block_figures(dtype, d, eq, nan);
                assert!(
                    same(&got, &want),
                    "{dtype:?} len {len} fill {fill:?} special {special}: {got:?} != {want:?}"
                );
                checked += 1;
                if got.valid == len as u64 && len > 0 {
                    fast += 1;
                } else if got.valid > 0 {
                    masked += 1;
                }
            }
        }
        // Both second-pass paths were exercised, many times.
        assert!(
            fast > 500 && masked > 500,
            "{checked} blocks: {fast} all valid, {masked} masked"
        );
    }

    #[test]
    fn the_histogram_kernel_gives_the_reference_bins_for_every_dtype_and_length() {
        let dtypes = [
            DType::Bool,
            DType::U8,
            DType::I8,
            DType::U16,
            DType::I16,
            DType::U32,
            DType::I32,
            DType::U64,
            DType::I64,
            DType::F16,
            DType::F32,
            DType::F64,
        ];
        let mut lengths: Vec<usize> = (0..=300).collect();
        lengths.extend((301..=4096).step_by(53));
        lengths.extend([4095, 4096]);
        let mut r = Rng(0x5eed_4157);
        let (mut checked, mut binned, mut edge_hits) = (0u64, 0u64, 0u64);
        let mut bytes = Vec::new();
        let mut values = Vec::new();
        for &dtype in &dtypes {
            for &len in &lengths {
                let fill = match r.below(3) {
                    0 => None,
                    1 => Some(f64::NAN),
                    _ => Some(match dtype {
                        DType::F16 => 1.5,
                        DType::F32 | DType::F64 => -7.5,
                        DType::Bool => 1.0,
                        DType::U8 | DType::U16 | DType::U32 | DType::U64 => 7.0,
                        _ => -7.0,
                    }),
                };
                let eq = match fill {
                    Some(f) if !f.is_nan() => f,
                    _ => f64::NAN,
                };
                let special = [0, 1, 20, 300][r.below(4) as usize];
                bytes.clear();
                bytes.push(0x55);
                for _ in 0..len {
                    value(&mut r, dtype, fill.unwrap_or(0.0), special, &mut bytes);
                }
                let d = &bytes[1..];
                values.clear();
                decode_f64(dtype, d, &mut values);
                let valid: Vec<f64> = values.iter().copied().filter(|v| v.is_finite() && *v != eq).collect();
                let (vmin, vmax) = valid
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
                // The range: the valid cells' (what the first pass gives), one value (numpy's
                // widened range), a part of it (cells outside are left out), or (0, 1) when
                // there is no valid cell.
                let (lo, hi) = if valid.is_empty() {
                    (0.0, 1.0)
                } else {
                    match r.below(4) {
                        0 | 1 => (vmin, vmax),
                        2 => (vmin, vmin),
                        _ => {
                            let (a, b) = (
                                valid[r.below(valid.len() as u64) as usize],
                                valid[r.below(valid.len() as u64) as usize],
                            );
                            (a.min(b), a.max(b))
                        }
                    }
                };
                let bins = 1 + r.below(300);
                let mut want = Histogram::new(bins, lo, hi).unwrap();
                let edges: Vec<f64> = (0..=want.counts.len()).map(|i| want.edge(i)).collect();
                let mut got = want.clone();
                reference_histogram(dtype, d, eq, &mut want, &edges);
                let counts = &mut got.counts;
                histogram_bins(dtype, d, eq, got.min, got.max, &edges, &mut |i| counts[i] += 1);
                assert_eq!(
                    got.counts, want.counts,
                    "{dtype:?} len {len} fill {fill:?} special {special} bins {bins} [{lo}, {hi}]"
                );
                checked += 1;
                binned += want.counts.iter().sum::<u64>();
                edge_hits += valid.iter().filter(|v| edges.contains(v)).count() as u64;
            }
        }
        // Many cells binned, many of them exactly on an edge (where numpy's corrections act).
        assert!(
            binned > 1_000_000 && edge_hits > 10_000,
            "{checked} cases: {binned} binned, {edge_hits} on edges"
        );
    }

    #[test]
    fn an_unmasked_leaf_is_redone_with_masks_exactly_when_a_cell_is_not_valid() {
        let check = |v: &[f64], eq: f64, nan: bool| {
            let d: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            let got = block_figures(DType::F64, &d, eq, nan);
            let want = reference_figures(v, eq, nan);
            assert!(same(&got, &want), "{v:?} fill {eq}: {got:?} != {want:?}");
            got
        };
        let mut v: Vec<f64> = (0..300).map(|i| (i % 17) as f64 - 8.0).collect();
        // A fill value inside [min, max] that no cell holds: every cell valid.
        assert_eq!(check(&v, 0.5, false).valid, 300);
        // The same fill held by one cell, last (the remainder of the last leaf).
        v[299] = 0.5;
        let b = check(&v, 0.5, false);
        assert_eq!((b.valid, b.fill), (299, 1));
        // Valid cells whose sum overflows: the masked leaf gives the same infinite sum.
        let big = [f64::MAX, f64::MAX, -1.0, 3.0, f64::MAX / 2.0, 7.0, 1.0, 2.0, 5.0];
        let b = check(&big, f64::NAN, false);
        assert_eq!((b.valid, b.sum), (9, f64::INFINITY));
        // One infinite cell among valid ones, and infinities that cancel to NaN in a sum.
        let b = check(&[1.0, f64::NEG_INFINITY, 2.0], f64::NAN, false);
        assert_eq!((b.valid, b.inf, b.min, b.sum), (2, 1, 1.0, 3.0));
        let b = check(&[f64::INFINITY, 4.0, f64::NEG_INFINITY, 2.0], f64::NAN, true);
        assert_eq!((b.valid, b.inf, b.fill, b.sum), (2, 2, 0, 6.0));
    }

    #[test]
    fn ties_of_zeros_keep_the_reference_kernels_sign_in_min_and_max() {
        // -0.0 and 0.0 compare equal: which one min/max reports depends on lane order only.
        for pattern in [[0.0f32, -0.0], [-0.0, 0.0]] {
            for len in [1usize, 7, 8, 9, 17, 129, 4096] {
                let v: Vec<f32> = (0..len).map(|i| pattern[(i / 3) % 2]).collect();
                let d: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                let mut values = Vec::new();
                decode_f64(DType::F32, &d, &mut values);
                let want = reference_figures(&values, f64::NAN, false);
                let got = block_figures(DType::F32, &d, f64::NAN, false);
                assert!(same(&got, &want), "len {len}: {got:?} != {want:?}");
            }
        }
    }
}
