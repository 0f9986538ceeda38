//! float16, complex64/complex128 and the other dtypes in either byte order, in C and Fortran
//! order, 1-D to 4-D: `.npy` files crafted here byte by byte from the format's definition (a
//! Python-literal header; the data in the declared byte order, complex values as the real part
//! then the imaginary part, each in that byte order; Fortran order = first axis fastest), and
//! read back whole, by region and streamed, compared with values computed independently of the
//! reader.

use rasterpack_common::npy::{self, NpyWriter};
use rasterpack_common::{
    f16_to_f64, ArrayFile, ArrayRequest, ArraySink, DType, Limits, NdArray, NpyFile, Output, Region, RegionSpec,
};

/// The dtypes checked, with the numpy type code (after the byte-order character).
const KINDS: [(DType, &str); 7] = [
    (DType::F16, "f2"),
    (DType::C64, "c8"),
    (DType::C128, "c16"),
    (DType::I16, "i2"),
    (DType::F32, "f4"),
    (DType::U64, "u8"),
    (DType::F64, "f8"),
];

const SHAPES: [&[u64]; 6] = [&[5], &[3, 4], &[2, 3, 4], &[2, 3, 2, 3], &[3, 1, 4], &[1, 6]];

/// The value at C-order position `n`, as big-endian parts (one part, or real then imaginary).
/// Bit patterns, not numbers: every pattern is exact, NaN payloads and signed zeros included,
/// and every position has its own value, so a misplaced value shows.
fn parts(dtype: DType, n: u64) -> Vec<Vec<u8>> {
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
        other => unreachable!("{other:?}"),
    }
}

fn value_bytes(dtype: DType, n: u64, big_endian: bool) -> Vec<u8> {
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
fn c_linear(idx: &[u64], shape: &[u64]) -> u64 {
    idx.iter().zip(shape).fold(0, |acc, (&i, &d)| acc * d + i)
}

/// The multi-index of the `k`-th value when axis `order[0]` is the fastest.
fn unravel(mut k: u64, shape: &[u64], fastest_first: bool) -> Vec<u64> {
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
fn npy_file(descr: &str, fortran: bool, shape: &[u64], data: &[u8]) -> Vec<u8> {
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
fn stored(dtype: DType, shape: &[u64], fortran: bool, big_endian: bool) -> Vec<u8> {
    let count: u64 = shape.iter().product();
    (0..count)
        .flat_map(|k| value_bytes(dtype, c_linear(&unravel(k, shape, fortran), shape), big_endian))
        .collect()
}

/// What a read of `region` must give: little-endian values in C order over the region.
fn expected(dtype: DType, shape: &[u64], region: &Region) -> Vec<u8> {
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
fn regions(shape: &[u64]) -> Vec<String> {
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

#[test]
fn every_kind_byte_order_and_layout_reads_exactly() {
    let mut cases = 0;
    for (dtype, code) in KINDS {
        for big_endian in [false, true] {
            for fortran in [false, true] {
                for shape in SHAPES {
                    let descr = format!("{}{code}", if big_endian { '>' } else { '<' });
                    let file = npy_file(&descr, fortran, shape, &stored(dtype, shape, fortran, big_endian));
                    let what = format!("{descr} fortran={fortran} {shape:?}");
                    let whole = expected(dtype, shape, &Region::full(shape));

                    let a = npy::read(&file, &Limits::default()).unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!((a.dtype, a.shape.as_slice()), (dtype, shape), "{what}");
                    assert_eq!(a.data, whole, "{what}: npy::read");

                    let f = NpyFile::from_bytes(file.clone()).unwrap();
                    assert_eq!(f.arrays().unwrap()[0].dtype, dtype);
                    for spec in regions(shape) {
                        let region = Region::parse(&spec, shape).unwrap();
                        let req = ArrayRequest::default().with_region(&region);
                        let got = f.read(&req).unwrap_or_else(|e| panic!("{what} [{spec}]: {e}"));
                        assert_eq!(got.shape, region.shape(), "{what} [{spec}]");
                        assert_eq!(got.data, expected(dtype, shape, &region), "{what} [{spec}]");
                    }

                    // Streamed to a sequential output: a little-endian C-order .npy.
                    let mut out = Vec::new();
                    {
                        let mut w = NpyWriter::new(Output::Stream(&mut out));
                        f.stream(&ArrayRequest::default(), &mut w).unwrap();
                        w.finish().unwrap();
                    }
                    let mut want = npy::header_bytes(dtype, shape);
                    want.extend_from_slice(&whole);
                    assert_eq!(out, want, "{what}: streamed");
                    cases += 1;
                }
            }
        }
    }
    assert_eq!(cases, KINDS.len() * 2 * 2 * SHAPES.len());
}

/// A Fortran-order array above the working set goes in slabs to a random-access output, and is
/// refused (before any byte is written) for a sequential one.
#[test]
fn fortran_order_beyond_the_working_set() {
    let shape: &[u64] = &[6, 5, 7];
    let dtype = DType::C64;
    let file = npy_file(">c8", true, shape, &stored(dtype, shape, true, true));
    let row = 6 * 5 * 8u64;
    let whole = expected(dtype, shape, &Region::full(shape));
    let npy = NpyFile::from_bytes(file).unwrap();
    for rows in [1u64, 2, 3, 6, 7] {
        let limits = Limits {
            working_set: rows * row + 3,
            ..Limits::default()
        };
        let req = ArrayRequest {
            limits,
            ..ArrayRequest::default()
        };
        // Memory is random access.
        assert_eq!(npy.read(&req).unwrap().data, whole, "{rows} rows per slab");
        // So is a file.
        let path = std::env::temp_dir().join(format!("rp-fortran-slabs-{}-{rows}.npy", std::process::id()));
        let out = std::fs::File::create(&path).unwrap();
        {
            let mut w = NpyWriter::new(Output::File(&out));
            npy.stream(&req, &mut w).unwrap();
            w.finish().unwrap();
        }
        let mut want = npy::header_bytes(dtype, shape);
        want.extend_from_slice(&whole);
        assert_eq!(std::fs::read(&path).unwrap(), want, "{rows} rows per slab to a file");
        std::fs::remove_file(&path).unwrap();
        // A region through slabs too.
        let region = Region::parse("1:5,2,3:7", shape).unwrap();
        let req = ArrayRequest {
            limits,
            region: Some(RegionSpec::parse("1:5,2,3:7").unwrap()),
            ..ArrayRequest::default()
        };
        assert_eq!(npy.read(&req).unwrap().data, expected(dtype, shape, &region));
    }
    // A sequential output needs the whole array at once.
    let req = ArrayRequest {
        limits: Limits {
            working_set: 3 * row,
            ..Limits::default()
        },
        ..ArrayRequest::default()
    };
    let mut out = Vec::new();
    let err = {
        let mut w = NpyWriter::new(Output::Stream(&mut out));
        npy.stream(&req, &mut w).unwrap_err()
    };
    assert_eq!(err.code, "limit.working_set", "{err}");
    assert!(err.message.contains("Fortran-order complex64"), "{err}");
    assert!(out.is_empty(), "nothing is written before the refusal");
    // A random-access output whose one slab is above the working set.
    let req = ArrayRequest {
        limits: Limits {
            working_set: row - 1,
            ..Limits::default()
        },
        ..ArrayRequest::default()
    };
    assert_eq!(npy.read(&req).unwrap_err().code, "limit.working_set");
}

#[test]
fn float16_values_are_exact() {
    // (bits, value) pairs from IEEE 754 binary16's definition.
    let known: [(u16, f64); 12] = [
        (0x0000, 0.0),
        (0x3c00, 1.0),
        (0xc000, -2.0),
        (0x3555, 0.333_251_953_125),
        (0x7bff, 65504.0),
        (0x0400, 6.103_515_625e-5),
        (0x0001, 5.960_464_477_539_063e-8),
        (0x03ff, 6.097_555_160_522_461e-5),
        (0x8001, -5.960_464_477_539_063e-8),
        (0x7c00, f64::INFINITY),
        (0xfc00, f64::NEG_INFINITY),
        (0x4248, 3.140_625),
    ];
    for (bits, v) in known {
        assert_eq!(f16_to_f64(bits), v, "{bits:#06x}");
    }
    assert!(f16_to_f64(0x8000).is_sign_negative() && f16_to_f64(0x8000) == 0.0);
    assert_eq!(f16_to_f64(0x7e00).to_bits(), 0x7ff8_0000_0000_0000, "quiet NaN");
    assert_eq!(
        f16_to_f64(0xfd01).to_bits(),
        0xfff4_0400_0000_0000,
        "payload kept, shifted up"
    );
    let a = NdArray::new(DType::F16, vec![2], vec![0x00, 0x3c, 0x55, 0x35]).unwrap();
    assert_eq!(a.to_f64(), vec![1.0, 0.333_251_953_125]);
    let c = NdArray::new(
        DType::C64,
        vec![1],
        [1.5f32.to_le_bytes(), (-2.0f32).to_le_bytes()].concat(),
    )
    .unwrap();
    assert_eq!(c.to_f64(), vec![1.5, -2.0], "complex: real, imaginary");
}

#[test]
fn names_and_descrs_of_the_new_dtypes() {
    for (d, name, descr, size) in [
        (DType::F16, "float16", "<f2", 2),
        (DType::C64, "complex64", "<c8", 8),
        (DType::C128, "complex128", "<c16", 16),
    ] {
        assert_eq!((d.name(), d.npy_descr(), d.size()), (name, descr, size));
        assert_eq!(DType::from_name(name), Some(d));
    }
    assert!(DType::C64.is_complex() && !DType::C64.is_float());
    assert!(DType::F16.is_float() && !DType::F16.is_complex());
}
