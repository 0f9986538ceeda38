//! The inverse wavelet transform: a 4-tap lifting scheme (update the coarse half, then predict
//! the detail half) applied per transform step along Z, then Y, then X, coarsest step first.
//!
//! Bit-exactness: every output sample is computed with the same f32 operations, operands and
//! order as OpenVDS 3.4.9 (whose SSE and scalar paths agree with each other); only IEEE
//! add/sub/mul and round-to-nearest-even are involved, so this plain Rust matches it on every
//! platform. Rust never contracts `a * b + c` into a fused multiply-add, and OpenVDS's x86-64
//! build uses none either. Integer rounding (`rint`, `floor`, `ceil`) is done with the exact
//! add-2^23 trick below, which needs no SSE4.1 and vectorizes with SSE2.

use super::tree::Plan;

/// 1/sqrt(2) as f32: the coarse band's scale unless the stream is lossless-optimized.
const INV_SQRT2: f32 = std::f64::consts::FRAC_1_SQRT_2 as f32;
const UPDATE_SIGN: f32 = -1.0 / 32.0;
const PREDICT_SIGN: f32 = -1.0 / 16.0;

/// Round to nearest, ties to even (what `rintf` / `roundps` with the default MXCSR mode do).
#[inline(always)]
fn rint(x: f32) -> f32 {
    const TWO23: f32 = 8_388_608.0;
    let a = x.abs();
    if a < TWO23 {
        ((a + TWO23) - TWO23).copysign(x)
    } else {
        x
    }
}

/// `floor` for negative values, `ceil` otherwise (the integer lifting rounds away from zero).
#[inline(always)]
fn away(x: f32) -> f32 {
    let r = rint(x);
    if x < 0.0 {
        if r > x {
            r - 1.0
        } else {
            r
        }
    } else if r < x {
        r + 1.0
    } else {
        r
    }
}

#[inline(always)]
fn taps(a0: f32, a1: f32, a2: f32, a3: f32) -> f32 {
    9.0 * (a1 + a2) - (a0 + a3)
}

#[inline(always)]
fn update<const INT: bool>(l: f32, h0: f32, h1: f32, h2: f32, h3: f32, scale: f32) -> f32 {
    let v = UPDATE_SIGN * taps(h0, h1, h2, h3);
    if INT {
        away(l * scale) + rint(v)
    } else {
        scale * l + v
    }
}

#[inline(always)]
fn predict<const INT: bool>(h: f32, l0: f32, l1: f32, l2: f32, l3: f32) -> f32 {
    let v = PREDICT_SIGN * taps(l0, l1, l2, l3);
    if INT {
        h - rint(v)
    } else {
        h - v
    }
}

/// Mirror of a detail-band index (the detail half has `nh` samples).
#[inline(always)]
fn mirror_high(j: isize, nh: usize, odd: bool) -> usize {
    let nh = nh as isize;
    (if j < 0 {
        -1 - j
    } else if j >= nh {
        if odd {
            2 * nh - 1 - j
        } else {
            2 * nh - 2 - j
        }
    } else {
        j
    }) as usize
}

/// Mirror of a coarse-band index (the coarse half has `nl` samples).
#[inline(always)]
fn mirror_low(j: isize, nl: usize, odd: bool) -> usize {
    let nl = nl as isize;
    (if j < 0 {
        -1 - j
    } else if j >= nl {
        if odd {
            2 * nl - 2 - j
        } else {
            2 * nl - 1 - j
        }
    } else {
        j
    }) as usize
}

/// Reusable buffers.
#[derive(Default)]
pub struct TransformScratch {
    rows: Vec<f32>,
    low: Vec<f32>,
    line: LineScratch,
}

/// Invert the transform in place on `pic` (allocated pitch `plan.alloc`).
///
/// Bricks whose coefficients may produce a NaN (a NaN or infinite coefficient, or one so large
/// that the lifting could overflow) take the NaN-exact path (`nan`), which also reproduces
/// which NaN OpenVDS's x86 code returns; the others take the fast path, where no NaN can occur.
pub fn inverse(plan: &Plan, pic: &mut [f32], integer_info: i32, s: &mut TransformScratch) {
    let integer = integer_info & 1 != 0;
    let scale = if integer_info & 2 != 0 { 1.0 } else { INV_SQRT2 };
    if may_make_nan(pic) {
        nan::run(plan, pic, scale, integer);
    } else if integer {
        run::<true>(plan, pic, scale, s);
    } else {
        run::<false>(plan, pic, scale, s);
    }
}

/// Whether any coefficient is NaN, infinite or at least 2^80. Each lifting step at most
/// quadruples the largest magnitude and a brick takes at most 21 (7 steps x 3 axes), so
/// smaller finite coefficients can neither overflow nor make a NaN.
fn may_make_nan(pic: &[f32]) -> bool {
    const LIMIT: u32 = (127 + 80) << 23; // the f32 bits of 2^80
                                         // Bits of |v|: NaN and infinity compare above every finite value.
    pic.chunks(64)
        .any(|c| c.iter().fold(0u32, |m, v| m.max(v.to_bits() & 0x7fff_ffff)) >= LIMIT)
}

fn run<const INT: bool>(plan: &Plan, pic: &mut [f32], scale: f32, s: &mut TransformScratch) {
    let sx = plan.alloc[0];
    let sxy = plan.alloc[0] * plan.alloc[1];
    for i in (0..plan.iterations).rev() {
        let [bx, by, bz] = plan.band[i];
        let mask = plan.mask[i];
        if mask & 4 != 0 {
            for y in 0..by {
                lift_rows::<INT>(pic, y * sx, sxy, bz, bx, scale, &mut s.rows, &mut s.low);
            }
        }
        if mask & 2 != 0 {
            for z in 0..bz {
                lift_rows::<INT>(pic, z * sxy, sx, by, bx, scale, &mut s.rows, &mut s.low);
            }
        }
        if mask & 1 != 0 {
            for z in 0..bz {
                for y in 0..by {
                    let at = y * sx + z * sxy;
                    lift_line::<INT>(&mut pic[at..at + bx], scale, &mut s.line);
                }
            }
        }
    }
}

/// Lift `n` rows of `w` samples (row `j` at `base + j * stride`): rows `0..nl` hold the coarse
/// half, the rest the detail half; the result is interleaved (coarse rows even).
#[allow(clippy::too_many_arguments)]
fn lift_rows<const INT: bool>(
    pic: &mut [f32],
    base: usize,
    stride: usize,
    n: usize,
    w: usize,
    scale: f32,
    tmp: &mut Vec<f32>,
    low2: &mut Vec<f32>,
) {
    let nl = n.div_ceil(2);
    let nh = n / 2;
    let odd = n & 1 == 1;
    tmp.clear();
    for j in 0..n {
        let at = base + j * stride;
        tmp.extend_from_slice(&pic[at..at + w]);
    }
    let (low, high) = tmp.split_at(nl * w);
    let hrow = |j: isize| {
        let r = mirror_high(j, nh, odd);
        &high[r * w..r * w + w]
    };
    low2.clear();
    low2.resize(nl * w, 0.0);
    for k in 0..nl {
        let ki = k as isize;
        let (h0, h1, h2, h3) = (hrow(ki - 2), hrow(ki - 1), hrow(ki), hrow(ki + 1));
        let l = &low[k * w..k * w + w];
        let out = &mut low2[k * w..k * w + w];
        for x in 0..w {
            out[x] = update::<INT>(l[x], h0[x], h1[x], h2[x], h3[x], scale);
        }
        let at = base + 2 * k * stride;
        pic[at..at + w].copy_from_slice(out);
    }
    // The detail rows use the updated coarse rows.
    let lrow = |j: isize| {
        let r = mirror_low(j, nl, odd);
        &low2[r * w..r * w + w]
    };
    for k in 0..nh {
        let ki = k as isize;
        let (l0, l1, l2, l3) = (lrow(ki - 1), lrow(ki), lrow(ki + 1), lrow(ki + 2));
        let h = &high[k * w..k * w + w];
        let at = base + (2 * k + 1) * stride;
        let out = &mut pic[at..at + w];
        for x in 0..w {
            out[x] = predict::<INT>(h[x], l0[x], l1[x], l2[x], l3[x]);
        }
    }
}

/// Lift one contiguous line: `line[..nl]` coarse, `line[nl..]` detail; interleaved result.
/// The interior runs without index mirroring (the same operands as the mirrored form).
fn lift_line<const INT: bool>(line: &mut [f32], scale: f32, s: &mut LineScratch) {
    let n = line.len();
    let nl = n.div_ceil(2);
    let nh = n / 2;
    let odd = n & 1 == 1;
    s.src.clear();
    s.src.extend_from_slice(line);
    let (low, high) = s.src.split_at(nl);
    s.lo.clear();
    s.lo.resize(nl, 0.0);
    s.hi.clear();
    s.hi.resize(nh, 0.0);
    let lo = &mut s.lo;
    let hi = &mut s.hi;
    let h = |j: isize| high[mirror_high(j, nh, odd)];
    let up = |k: usize| {
        let ki = k as isize;
        update::<INT>(low[k], h(ki - 2), h(ki - 1), h(ki), h(ki + 1), scale)
    };
    // n >= 8, so nl >= 4 and nh >= 4.
    let (ua, ub) = (2usize, nl.saturating_sub(2).max(2));
    for k in (0..ua).chain(ub..nl) {
        lo[k] = up(k);
    }
    {
        // Equal-length slices: no bounds checks, so the loop vectorizes.
        let m = ub - ua;
        let (o, l) = (&mut lo[ua..ub], &low[ua..ub]);
        let (h0, h1, h2, h3) = (
            &high[ua - 2..][..m],
            &high[ua - 1..][..m],
            &high[ua..][..m],
            &high[ua + 1..][..m],
        );
        for i in 0..m {
            o[i] = update::<INT>(l[i], h0[i], h1[i], h2[i], h3[i], scale);
        }
    }
    let l = |j: isize, lo: &[f32]| lo[mirror_low(j, nl, odd)];
    let (pa, pb) = (1usize, nh.saturating_sub(2).max(1));
    for k in (0..pa).chain(pb..nh) {
        let ki = k as isize;
        hi[k] = predict::<INT>(high[k], l(ki - 1, lo), lo[k], l(ki + 1, lo), l(ki + 2, lo));
    }
    {
        let m = pb - pa;
        let (o, h) = (&mut hi[pa..pb], &high[pa..pb]);
        let (l0, l1, l2, l3) = (
            &lo[pa - 1..][..m],
            &lo[pa..][..m],
            &lo[pa + 1..][..m],
            &lo[pa + 2..][..m],
        );
        for i in 0..m {
            o[i] = predict::<INT>(h[i], l0[i], l1[i], l2[i], l3[i]);
        }
    }
    for (k, pair) in line.chunks_exact_mut(2).enumerate() {
        pair[0] = lo[k];
        pair[1] = hi[k];
    }
    if odd {
        line[n - 1] = lo[nl - 1];
    }
}

/// The transform with NaN results as OpenVDS 3.4.9's x86-64 build gives them.
///
/// An x86 SSE operation with NaN operands returns its first (destination) operand if that is a
/// NaN, else the other one, quieted; an invalid operation (inf - inf, 0 x inf) returns the
/// "default NaN" 0xffc00000. Which operand is first is the compiler's choice, read from the
/// wheel's machine code: the same sample goes through OpenVDS's 4-wide SSE loop or its scalar
/// loop depending on where it sits, and the two order their operands differently. Finite
/// results are the same as the fast path's (same operations on the same values).
pub(crate) mod nan {
    use super::*;

    const DEFAULT_NAN: u32 = 0xffc0_0000;

    #[inline]
    fn pick(a: f32, b: f32, r: f32) -> f32 {
        if !r.is_nan() {
            r
        } else if a.is_nan() {
            f32::from_bits(a.to_bits() | 0x0040_0000)
        } else if b.is_nan() {
            f32::from_bits(b.to_bits() | 0x0040_0000)
        } else {
            f32::from_bits(DEFAULT_NAN)
        }
    }
    /// `a + b`, `a` being the operand the x86 code holds in its destination register.
    #[inline]
    pub(crate) fn add(a: f32, b: f32) -> f32 {
        pick(a, b, a + b)
    }
    /// `a - b` (`a` first).
    #[inline]
    pub(crate) fn sub(a: f32, b: f32) -> f32 {
        pick(a, b, a - b)
    }
    /// `a * b` (`a` first).
    #[inline]
    pub(crate) fn mul(a: f32, b: f32) -> f32 {
        pick(a, b, a * b)
    }

    /// Operand orders of one lifting loop in the wheel's code (`true`: the first term named is
    /// the destination operand).
    #[derive(Clone, Copy)]
    struct Order {
        /// `a1 + a2` (else `a2 + a1`).
        inner_first: bool,
        /// The scaled tap sum is added to the sample (else the sample to it).
        term_first: bool,
        /// The same for integer data (the rounded tap sum and the rounded sample).
        int_term_first: bool,
    }
    // Line (X) loops, from the disassembly: SSE `((a1+a2)*-9 + (a0+a3)) * c + x`; scalar
    // update `x*s + ((a1+a2)*9 - (a0+a3)) * c`, scalar predict `((a2+a1)*9 - (a0+a3)) * c + x`.
    const LINE_SSE: Order = Order {
        inner_first: true,
        term_first: true,
        int_term_first: true,
    };
    // The scalar integer update is `rint(term) + rounded sample`.
    const LINE_UPDATE: Order = Order {
        inner_first: true,
        term_first: false,
        int_term_first: true,
    };
    const LINE_PREDICT: Order = Order {
        inner_first: false,
        term_first: true,
        int_term_first: true,
    };
    // Slice (Y, Z) loops: the SSE part is the line's intrinsics; the scalar tail (X beyond the
    // last multiple of 4) follows its source order, `x*s + ...` and `x - ...`.
    const SLICE_TAIL: Order = Order {
        inner_first: true,
        term_first: false,
        int_term_first: false,
    };

    #[inline]
    fn update(o: Order, int: bool, l: f32, a: [f32; 4], scale: f32) -> f32 {
        let inner = if o.inner_first {
            add(a[1], a[2])
        } else {
            add(a[2], a[1])
        };
        let v = mul(sub(mul(inner, 9.0), add(a[0], a[3])), UPDATE_SIGN);
        if int {
            let (r, c) = (away(mul(l, scale)), rint(v));
            if o.int_term_first {
                add(c, r)
            } else {
                add(r, c)
            }
        } else if o.term_first {
            add(v, mul(l, scale))
        } else {
            add(mul(l, scale), v)
        }
    }

    #[inline]
    fn predict(o: Order, int: bool, h: f32, a: [f32; 4]) -> f32 {
        let inner = if o.inner_first {
            add(a[1], a[2])
        } else {
            add(a[2], a[1])
        };
        // h - c*v computed as h + (-c)*v: the same value, and negating the constant leaves a
        // NaN alone.
        let v = mul(sub(mul(inner, 9.0), add(a[0], a[3])), -PREDICT_SIGN);
        let (v, first) = if int {
            (rint(v), o.int_term_first)
        } else {
            (v, o.term_first)
        };
        if first {
            add(v, h)
        } else {
            add(h, v)
        }
    }

    pub(super) fn run(plan: &Plan, pic: &mut [f32], scale: f32, int: bool) {
        let sx = plan.alloc[0];
        let sxy = plan.alloc[0] * plan.alloc[1];
        let mut tmp = Vec::new();
        for i in (0..plan.iterations).rev() {
            let [bx, by, bz] = plan.band[i];
            let mask = plan.mask[i];
            if mask & 4 != 0 {
                for y in 0..by {
                    for x in 0..bx {
                        lift(pic, y * sx + x, sxy, bz, scale, int, slice_order(x, bx), &mut tmp);
                    }
                }
            }
            if mask & 2 != 0 {
                for z in 0..bz {
                    for x in 0..bx {
                        lift(pic, z * sxy + x, sx, by, scale, int, slice_order(x, bx), &mut tmp);
                    }
                }
            }
            if mask & 1 != 0 {
                for z in 0..bz {
                    for y in 0..by {
                        lift(pic, y * sx + z * sxy, 1, bx, scale, int, line_order, &mut tmp);
                    }
                }
            }
        }
    }

    /// The orders a slice sample `x` of a row of `w` gets: update, predict.
    fn slice_order(x: usize, w: usize) -> impl Fn(bool, usize, usize) -> Order {
        let sse = x < w - w % 4;
        move |_, _, _| if sse { LINE_SSE } else { SLICE_TAIL }
    }

    /// The orders sample `k` of a line's coarse (`update`) or detail half gets: the SSE loop
    /// covers the first multiple of 4 samples while enough are left (the loop bounds of
    /// OpenVDS's line transform), the scalar loop the rest.
    fn line_order(update: bool, k: usize, n: usize) -> Order {
        let (nl, nh, odd) = (n.div_ceil(2), n / 2, n % 2 == 1);
        let (middle, reach) = if update {
            (nl as isize - if odd { 2 } else { 1 }, 7)
        } else {
            (nh as isize - if odd { 1 } else { 2 }, 6)
        };
        let sse_len = if middle >= 7 { ((middle - reach) / 4 + 1) * 4 } else { 0 };
        match ((k as isize) < sse_len, update) {
            (true, _) => LINE_SSE,
            (false, true) => LINE_UPDATE,
            (false, false) => LINE_PREDICT,
        }
    }

    /// Lift the `n` samples at `base + j * stride` (coarse half first) into interleaved order.
    #[allow(clippy::too_many_arguments)]
    fn lift(
        pic: &mut [f32],
        base: usize,
        stride: usize,
        n: usize,
        scale: f32,
        int: bool,
        order: impl Fn(bool, usize, usize) -> Order,
        tmp: &mut Vec<f32>,
    ) {
        let (nl, nh, odd) = (n.div_ceil(2), n / 2, n % 2 == 1);
        tmp.clear();
        tmp.extend((0..n).map(|j| pic[base + j * stride]));
        let (low, high) = tmp.split_at(nl);
        let h = |j: isize| high[mirror_high(j, nh, odd)];
        let lo: Vec<f32> = (0..nl)
            .map(|k| {
                let ki = k as isize;
                update(
                    order(true, k, n),
                    int,
                    low[k],
                    [h(ki - 2), h(ki - 1), h(ki), h(ki + 1)],
                    scale,
                )
            })
            .collect();
        let l = |j: isize| lo[mirror_low(j, nl, odd)];
        for k in 0..nh {
            let ki = k as isize;
            let v = predict(
                order(false, k, n),
                int,
                high[k],
                [l(ki - 1), l(ki), l(ki + 1), l(ki + 2)],
            );
            pic[base + (2 * k + 1) * stride] = v;
        }
        for (k, &v) in lo.iter().enumerate() {
            pic[base + 2 * k * stride] = v;
        }
    }
}

/// Buffers of [`lift_line`].
#[derive(Default)]
struct LineScratch {
    src: Vec<f32>,
    lo: Vec<f32>,
    hi: Vec<f32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_helpers_match_libm() {
        let mut x = -70000.0f32;
        while x < 70000.0 {
            for v in [x, x + 0.5, x + 0.25, -x - 0.5, x * 1e-3] {
                assert_eq!(rint(v).to_bits(), v.round_ties_even().to_bits(), "{v}");
                let want = if v < 0.0 { v.floor() } else { v.ceil() };
                assert_eq!(away(v).to_bits(), want.to_bits(), "{v}");
            }
            x += 13.37;
        }
        for v in [
            0.0f32,
            -0.0,
            0.5,
            -0.5,
            1.5,
            -1.5,
            2.5,
            8_388_607.5,
            1e30,
            -1e30,
            f32::MIN_POSITIVE,
        ] {
            assert_eq!(rint(v).to_bits(), v.round_ties_even().to_bits(), "{v}");
            let want = if v < 0.0 { v.floor() } else { v.ceil() };
            assert_eq!(away(v).to_bits(), want.to_bits(), "{v}");
        }
        assert!(rint(f32::NAN).is_nan() && away(f32::NAN).is_nan());
    }

    /// x86 SSE NaN rules (Intel SDM vol. 1, 4.8.3.5): the first (destination) operand's NaN,
    /// else the other's, quieted; the default NaN 0xffc00000 for an invalid operation.
    #[test]
    fn nan_operands_pick_like_x86() {
        let bits = |v: f32| v.to_bits();
        let (p, n) = (f32::from_bits(0x7fc0_0000), f32::from_bits(0xffc0_0000));
        assert_eq!(bits(nan::add(p, n)), 0x7fc0_0000);
        assert_eq!(bits(nan::add(n, p)), 0xffc0_0000);
        assert_eq!(bits(nan::sub(2.0, n)), 0xffc0_0000);
        assert_eq!(bits(nan::mul(p, -3.0)), 0x7fc0_0000);
        assert_eq!(bits(nan::mul(f32::from_bits(0x7f80_0001), p)), 0x7fc0_0001);
        assert_eq!(bits(nan::sub(f32::INFINITY, f32::INFINITY)), 0xffc0_0000);
        assert_eq!(bits(nan::add(f32::NEG_INFINITY, f32::INFINITY)), 0xffc0_0000);
        assert_eq!(bits(nan::mul(0.0, f32::INFINITY)), 0xffc0_0000);
        assert_eq!(bits(nan::add(1.5, 2.25)), bits(3.75));
    }

    /// The NaN-exact path computes the same finite values as the fast one.
    #[test]
    fn nan_exact_path_equals_fast_path_on_finite_data() {
        for (dims, size) in [
            (1, [37, 1, 1]),
            (1, [64, 1, 1]),
            (2, [45, 13, 1]),
            (2, [32, 64, 1]),
            (3, [23, 17, 9]),
            (3, [16, 16, 16]),
        ] {
            let plan = Plan::new(dims, size);
            let data: Vec<f32> = (0..plan.picture_len())
                .map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 0.013)
                .collect();
            for integer_info in [0, 2, 1, 3] {
                let mut fast = data.clone();
                if integer_info & 1 != 0 {
                    fast.iter_mut().for_each(|v| *v = v.round());
                }
                let mut exact = fast.clone();
                let scale = if integer_info & 2 != 0 { 1.0 } else { INV_SQRT2 };
                inverse(&plan, &mut fast, integer_info, &mut TransformScratch::default());
                nan::run(&plan, &mut exact, scale, integer_info & 1 != 0);
                assert!(
                    fast.iter().zip(&exact).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{size:?} integer_info {integer_info}"
                );
            }
        }
    }

    #[test]
    fn mirrors() {
        // even length 8: nl = nh = 4
        assert_eq!(
            (-2..=4).map(|j| mirror_high(j, 4, false)).collect::<Vec<_>>(),
            [1, 0, 0, 1, 2, 3, 2]
        );
        assert_eq!(
            (-1..=5).map(|j| mirror_low(j, 4, false)).collect::<Vec<_>>(),
            [0, 0, 1, 2, 3, 3, 2]
        );
        // odd length 9: nl = 5, nh = 4
        assert_eq!(
            (-2..=5).map(|j| mirror_high(j, 4, true)).collect::<Vec<_>>(),
            [1, 0, 0, 1, 2, 3, 3, 2]
        );
        assert_eq!(
            (-1..=5).map(|j| mirror_low(j, 5, true)).collect::<Vec<_>>(),
            [0, 0, 1, 2, 3, 4, 3]
        );
    }

    #[test]
    fn rows_equal_lines() {
        // Lifting rows of width 1 must equal lifting the same samples as a line.
        for n in 8..20usize {
            let data: Vec<f32> = (0..n).map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.37).collect();
            for int in [false, true] {
                let mut a = data.clone();
                let mut b = data.clone();
                let (mut t, mut u, mut ls) = (Vec::new(), Vec::new(), LineScratch::default());
                if int {
                    lift_line::<true>(&mut a, 1.0, &mut ls);
                    lift_rows::<true>(&mut b, 0, 1, n, 1, 1.0, &mut t, &mut u);
                } else {
                    lift_line::<false>(&mut a, INV_SQRT2, &mut ls);
                    lift_rows::<false>(&mut b, 0, 1, n, 1, INV_SQRT2, &mut t, &mut u);
                }
                assert_eq!(
                    a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    b.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                );
            }
        }
    }
}
