//! encode -> decode -> compare, for every dtype, extreme values, NaN payloads, -0.0 and
//! infinities, through the plain API and through the `Format` trait.

mod common;

use common::{encode, header, read, validate};
use rasterpack_common::{Format, WriteOptions};
use rasterpack_volp::{ArrayRequest, DType, Input, NdArray, VolpFormat};
use serde_json::{json, Map, Value};

fn le<T: Copy, const N: usize>(vals: &[T], f: fn(T) -> [u8; N]) -> Vec<u8> {
    vals.iter().flat_map(|&v| f(v)).collect()
}

fn cases() -> Vec<(DType, Vec<u8>)> {
    let f32s = [
        0.0f32,
        -0.0,
        1.0,
        f32::MIN,
        f32::MAX,
        f32::MIN_POSITIVE,
        f32::from_bits(1), // smallest subnormal
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::from_bits(0x7FC0_0001), // quiet NaN with payload
        f32::from_bits(0x7F80_0001), // signalling NaN
        f32::from_bits(0xFFBF_FFFF), // negative signalling NaN, full payload
    ];
    let f64s = [
        0.0f64,
        -0.0,
        f64::MIN,
        f64::MAX,
        f64::MIN_POSITIVE,
        f64::from_bits(1),
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::from_bits(0x7FF8_0000_0000_0001),
        f64::from_bits(0x7FF0_0000_0000_0001),
        f64::from_bits(0xFFF7_FFFF_FFFF_FFFF),
        std::f64::consts::PI,
    ];
    vec![
        (DType::U8, vec![0, 1, 2, 127, 128, 254, 255, 42, 0, 255, 7, 9]),
        (
            DType::I16,
            le(
                &[i16::MIN, -1, 0, 1, i16::MAX, -300, 300, 12345, -12345, 2, 3, 4],
                i16::to_le_bytes,
            ),
        ),
        (
            DType::I32,
            le(
                &[i32::MIN, -1, 0, 1, i32::MAX, -70000, 70000, 5, 6, 7, 8, 9],
                i32::to_le_bytes,
            ),
        ),
        (DType::F32, le(&f32s, f32::to_le_bytes)),
        (DType::F64, le(&f64s, f64::to_le_bytes)),
    ]
}

#[test]
fn every_dtype_round_trips_bit_exactly() {
    let mut meta = Map::new();
    meta.insert(
        "bbox".into(),
        json!({"west": -10, "south": 40, "east": 5, "north": 52, "bottom": 1000, "top": 100}),
    );
    meta.insert("levels".into(), json!([1000, 850, 500]));
    meta.insert("variable".into(), json!("t"));
    meta.insert("valid_time".into(), json!("2026-01-01T00:00:00Z"));
    meta.insert("x_custom".into(), json!({"nested": [1, null, "é"]}));
    for (dtype, data) in cases() {
        for level in [1, 3, 19] {
            let file = encode(dtype, [3, 2, 2], &data, 0.25, -1.5, &meta, level).unwrap();
            assert!(
                validate(&file)
                    .iter()
                    .all(|f| f.severity == rasterpack_common::Severity::Info),
                "{dtype:?}"
            );
            let v = read(&file, &ArrayRequest::default()).unwrap();
            assert_eq!(v.data, data, "{dtype:?} level {level}");
            let h = header(&file).unwrap();
            assert_eq!(h.dtype, dtype);
            assert_eq!(h.shape, [3, 2, 2]);
            assert_eq!((h.scale, h.offset), (0.25, -1.5));
            assert_eq!(h.metadata.variable, Some(json!("t")));
            assert_eq!(h.unknown["x_custom"], meta["x_custom"]);
            let phys = read(&file, &ArrayRequest::default().with_physical(true))
                .unwrap()
                .to_vec::<f64>()
                .unwrap();
            let stored = NdArray::new(dtype, vec![3, 2, 2], data.clone()).unwrap().to_f64();
            for (p, s) in phys.iter().zip(&stored) {
                let want = s * 0.25 + -1.5;
                assert!(
                    p.to_bits() == want.to_bits() || (p.is_nan() && want.is_nan()),
                    "{dtype:?}"
                );
            }
        }
    }
}

#[test]
fn scale_offset_extremes_round_trip() {
    for (s, o) in [
        (-0.0, -0.0),
        (f64::MAX, f64::MIN),
        (f64::from_bits(1), 1e300),
        (0.1, 0.2),
        (1.0 / 3.0, -2.0 / 7.0),
    ] {
        let file = encode(DType::U8, [1, 1, 1], &[9], s, o, &Map::new(), 3).unwrap();
        let h = header(&file).unwrap();
        assert_eq!((h.scale.to_bits(), h.offset.to_bits()), (s.to_bits(), o.to_bits()));
    }
}

#[test]
fn writer_refuses_what_readers_would_refuse() {
    let m = Map::new();
    assert!(encode(DType::U16, [1, 1, 1], &[0, 0], 1.0, 0.0, &m, 3).is_err());
    assert!(encode(DType::U8, [0, 1, 1], &[], 1.0, 0.0, &m, 3).is_err());
    assert!(encode(DType::U8, [1, 1, 2], &[0], 1.0, 0.0, &m, 3).is_err());
    assert!(encode(DType::U8, [1, 1, 1], &[0], f64::NAN, 0.0, &m, 3).is_err());
    assert!(encode(DType::U8, [1 << 20, 1 << 20, 1 << 20], &[0], 1.0, 0.0, &m, 3).is_err());
    let mut bad = Map::new();
    bad.insert("shape".into(), json!([1]));
    assert!(encode(DType::U8, [1, 1, 1], &[0], 1.0, 0.0, &bad, 3).is_err());
}

#[test]
fn format_trait_round_trip() {
    for (dtype, data) in cases() {
        let mut arr = NdArray::new(dtype, vec![2, 3, 2], data.clone()).unwrap();
        arr.attrs.insert("scale".into(), json!(0.5));
        arr.attrs.insert("offset".into(), json!(10));
        arr.attrs.insert("variable".into(), json!("q"));
        arr.attrs.insert("unrelated".into(), json!("not carried"));
        let mut out = Vec::new();
        VolpFormat
            .write_array(&arr, &WriteOptions::default(), &mut out)
            .unwrap();
        assert!(VolpFormat.detect(&out));
        let input = Input::from_bytes("mem.volp", out);
        let back = VolpFormat.read_array(&input, &ArrayRequest::default()).unwrap();
        assert_eq!((back.dtype, &back.shape, &back.data), (dtype, &arr.shape, &data));
        assert_eq!(back.attrs["scale"], json!(0.5));
        assert_eq!(back.attrs["offset"], json!(10.0));
        assert_eq!(back.name.as_deref(), Some("q"));
        assert!(!back.attrs.contains_key("unrelated"));
        let phys = VolpFormat
            .read_array(
                &input,
                &ArrayRequest {
                    physical: true,
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(phys.dtype, DType::F64);
        // Physical arrays carry no scale/offset, so writing them back does not apply them twice.
        assert!(!phys.attrs.contains_key("scale"));
        let mut again = Vec::new();
        VolpFormat
            .write_array(&phys, &WriteOptions::default(), &mut again)
            .unwrap();
        let h = header(&again).unwrap();
        assert_eq!((h.scale, h.offset), (1.0, 0.0));
        // inspect and validate on the same bytes.
        let r = VolpFormat.validate(&input, &Default::default());
        assert!(r.is_valid(true), "{:?}", r.findings);
        let i = VolpFormat.inspect(&input, &Default::default()).unwrap();
        assert_eq!(i.summary["dtype"], Value::from(dtype.name()));
        assert!(i.summary.contains_key("stats"));
    }
}

#[test]
fn format_trait_refusals_are_usage_errors() {
    let kinds =
        |arr: NdArray, opts: WriteOptions| VolpFormat.write_array(&arr, &opts, &mut Vec::new()).unwrap_err().kind;
    use rasterpack_common::ErrorKind::Usage;
    assert_eq!(
        kinds(
            NdArray::new(DType::U16, vec![1, 1, 1], vec![0, 0]).unwrap(),
            Default::default()
        ),
        Usage
    );
    assert_eq!(
        kinds(
            NdArray::new(DType::U8, vec![2, 2], vec![0; 4]).unwrap(),
            Default::default()
        ),
        Usage
    );
    assert_eq!(
        kinds(
            NdArray::new(DType::U8, vec![1, 1, 1, 4], vec![0; 4]).unwrap(),
            Default::default()
        ),
        Usage
    );
    let lz4 = WriteOptions {
        compress: Some("lz4".into()),
        ..Default::default()
    };
    assert_eq!(
        kinds(NdArray::new(DType::U8, vec![1, 1, 1], vec![0]).unwrap(), lz4),
        Usage
    );
    let lvl = WriteOptions {
        compress: Some("zstd:19".into()),
        ..Default::default()
    };
    VolpFormat
        .write_array(
            &NdArray::new(DType::U8, vec![1, 1, 1], vec![0]).unwrap(),
            &lvl,
            &mut Vec::new(),
        )
        .unwrap();
}
