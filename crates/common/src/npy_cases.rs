//! Support for the workspace's own tests (not part of the API): `.npy` files crafted byte by
//! byte from the format's definition, for every dtype numpy users hand rasterpack, in either
//! byte order and in C or Fortran order, with the values a read must give computed
//! independently of any reader.
//!
//! The header is the Python literal numpy writes; the data is in the declared byte order
//! (complex values as the real part then the imaginary part, each in that byte order); Fortran
//! order stores the first axis fastest. Values are bit patterns, not numbers: every pattern is
//! exact (NaN payloads and signed zeros included) and every position has its own value, so a
//! misplaced or mis-swapped value shows.

use crate::array::DType;
use crate::stream::Region;

/// The dtypes checked, with the numpy type code (after the byte-order character).
pub const KINDS: [(DType, &str); 7] = [
    (DType::F16, "f2"),
    (DType::C64, "c8"),
    (DType::C128, "c16"),
    (DType::I16, "i2"),
    (DType::F32, "f4"),
    (DType::U64, "u8"),
    (DType::F64, "f8"),
];

pub const SHAPES: [&[u64]; 6] = [&[5], &[3, 4], &[2, 3, 4], &[2, 3, 2, 3], &[3, 1, 4], &[1, 6]];

/// The value at C-order position `n`, as big-endian parts (one part, or real then imaginary).
/// Bit patterns, not numbers: every pattern is exact, NaN payloads and signed zeros included,
/// and every position has its own value, so a misplaced value shows.
pub fn parts(dtype: DType, n: u64) -> Vec<Vec<u8>> {
    let h = n.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17) ^ n;
    match dtype {
        // Odd multiplier: distinct for every n < 65536; covers NaN/inf/subnormal patterns.
        DType::F16 => vec![((n as u16).wrapping_mul(40503).wrapping_add(0x3c00))
            .to_be_bytes()
            .to_vec()],
        DType::C64 => vec![
            ((n as u32).wrapping_mul(2_654_435_761) ^ 0x3f80_0000)
                .to_be_bytes()
                .to_vec(),
            ((n as u32).wrapping_mul(2_246_822_519) ^ 0xbf00_0001)
                .to_be_bytes()
                .to_vec(),
        ],
        DType::C128 => vec![h.to_be_bytes().to_vec(), (!h ^ (n << 40)).to_be_bytes().to_vec()],
        DType::I16 => vec![((n as i16).wrapping_mul(-7919)).to_be_bytes().to_vec()],
        DType::F32 => vec![(n as f32 * -1.5 + 0.25).to_be_bytes().to_vec()],
        DType::U64 => vec![h.to_be_bytes().to_vec()],
        DType::F64 => vec![(n as f64 / 3.0 - 2.0).to_be_bytes().to_vec()],
        // Not one of KINDS: no value (callers use KINDS).
        _ => Vec::new(),
    }
}

pub fn value_bytes(dtype: DType, n: u64, big_endian: bool) -> Vec<u8> {
    parts(dtype, n)
        .into_iter()
        .flat_map(|mut p| {
            if !big_endian {
                p.reverse();
            }
            p
        })
        .collect()
}

/// C-order linear index of a multi-index.
pub fn c_linear(idx: &[u64], shape: &[u64]) -> u64 {
    idx.iter().zip(shape).fold(0, |acc, (&i, &d)| acc * d + i)
}

/// The multi-index of the `k`-th value stored with the first axis fastest (Fortran) or the last
/// (C).
pub fn unravel(mut k: u64, shape: &[u64], fastest_first: bool) -> Vec<u64> {
    let mut idx = vec![0; shape.len()];
    let axes: Vec<usize> = if fastest_first {
        (0..shape.len()).collect()
    } else {
        (0..shape.len()).rev().collect()
    };
    for a in axes {
        idx[a] = k % shape[a];
        k /= shape[a];
    }
    idx
}

/// A `.npy` file of version 1.0 as numpy writes it.
pub fn npy_file(descr: &str, fortran: bool, shape: &[u64], data: &[u8]) -> Vec<u8> {
    let shape_text = match shape {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
        ),
    };
    let order = if fortran { "True" } else { "False" };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape_text}, }}");
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.extend_from_slice(data);
    out
}

/// The stored data: values in Fortran or C order, in the given byte order.
pub fn stored(dtype: DType, shape: &[u64], fortran: bool, big_endian: bool) -> Vec<u8> {
    let count: u64 = shape.iter().product();
    (0..count)
        .flat_map(|k| value_bytes(dtype, c_linear(&unravel(k, shape, fortran), shape), big_endian))
        .collect()
}

/// What a read of `region` must give: little-endian values in C order over the region.
pub fn expected(dtype: DType, shape: &[u64], region: &Region) -> Vec<u8> {
    let rshape = region.shape();
    let count: u64 = rshape.iter().product();
    (0..count)
        .flat_map(|k| {
            let local = unravel(k, &rshape, false);
            let idx: Vec<u64> = local.iter().zip(&region.ranges).map(|(i, r)| r.start + i).collect();
            value_bytes(dtype, c_linear(&idx, shape), false)
        })
        .collect()
}

/// Regions worth reading for `shape`: whole, an inner box, one index of the first axis, the
/// last index of the last axis.
pub fn regions(shape: &[u64]) -> Vec<String> {
    let n = shape.len();
    let inner: Vec<String> = shape
        .iter()
        .map(|&d| if d > 2 { format!("1:{}", d - 1) } else { ":".into() })
        .collect();
    let mut last = vec![":".to_string(); n];
    last[n - 1] = (shape[n - 1] - 1).to_string();
    vec![":".into(), inner.join(","), "1".into(), last.join(",")]
        .into_iter()
        .filter(|s| s != "1" || shape[0] > 1)
        .collect()
}

/// A whole `.npy` file of `dtype` (type code `code`, from [`KINDS`]) and `shape`, in the given
/// byte order and layout.
pub fn npy_case(dtype: DType, code: &str, big_endian: bool, fortran: bool, shape: &[u64]) -> Vec<u8> {
    let descr = format!("{}{code}", if big_endian { '>' } else { '<' });
    npy_file(&descr, fortran, shape, &stored(dtype, shape, fortran, big_endian))
}
