//! float16, complex64/complex128 and the other dtypes in either byte order, in C and Fortran
//! order, 1-D to 4-D: `.npy` files crafted here byte by byte from the format's definition (a
//! Python-literal header; the data in the declared byte order, complex values as the real part
//! then the imaginary part, each in that byte order; Fortran order = first axis fastest), and
//! read back whole, by region and streamed, compared with values computed independently of the
//! reader.

use rasterpack_common::npy::{self, NpyWriter};
use rasterpack_common::npy_cases::{expected, npy_file, regions, stored, KINDS, SHAPES};
use rasterpack_common::{
    f16_to_f64, ArrayFile, ArrayRequest, ArraySink, DType, Limits, NdArray, NpyFile, Output, Region, RegionSpec,
};

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

/// A Fortran-order array above the working set goes in slabs to a random-access output, in bands
/// of its first axis to a sequential one, and is refused (before any byte is written) only when
/// one slab or band does not fit.
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
    // A sequential output gets bands of the first axis, each reordered whole, in order.
    for bands_of in [1u64, 2, 4] {
        let per_index = 5 * 7 * 8u64;
        let req = ArrayRequest {
            limits: Limits {
                working_set: bands_of * per_index + 1,
                ..Limits::default()
            },
            ..ArrayRequest::default()
        };
        let mut out = Vec::new();
        {
            let mut w = NpyWriter::new(Output::Stream(&mut out));
            npy.stream(&req, &mut w).unwrap();
            w.finish().unwrap();
        }
        let mut want = npy::header_bytes(dtype, shape);
        want.extend_from_slice(&whole);
        assert_eq!(out, want, "bands of {bands_of} to a sequential output");
        // A region in bands: rows 1..5 of the first axis, one or two per band.
        let region = Region::parse("1:5,2:4,3:7", shape).unwrap();
        let req = ArrayRequest {
            limits: Limits {
                working_set: bands_of.min(2) * 2 * 4 * 8 + 1,
                ..Limits::default()
            },
            region: Some(RegionSpec::parse("1:5,2:4,3:7").unwrap()),
            ..ArrayRequest::default()
        };
        let mut out = Vec::new();
        {
            let mut w = NpyWriter::new(Output::Stream(&mut out));
            npy.stream(&req, &mut w).unwrap();
            w.finish().unwrap();
        }
        let mut want = npy::header_bytes(dtype, &region.shape());
        want.extend_from_slice(&expected(dtype, shape, &region));
        assert_eq!(out, want, "a region in bands of {}", bands_of.min(2));
    }
    // Refused, before any byte, when one band index (5 x 7 values) is above the working set, which
    // still holds a slab of one row (6 x 5 values) for a random-access output.
    let limits = Limits {
        working_set: 250,
        ..Limits::default()
    };
    let req = ArrayRequest {
        limits,
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
    assert_eq!(npy.read(&req).unwrap().data, whole, "slabs of one row to memory");
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
