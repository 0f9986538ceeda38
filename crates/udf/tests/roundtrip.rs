//! Write -> read -> compare for every primitive, dimension and hint; the writer's output
//! validates without a single finding; the writer refuses what would not validate.

use rasterpack_common::{DType, Format, Input, Limits, NdArray, WriteOptions};
use rasterpack_udf::Element;
use rasterpack_udf::{validate, Hint, Prim, TableSpec, UdfEncoding, UdfFile, UdfFormat, UdfText, UdfValues, UdfWriter};
use serde_json::json;

fn open(bytes: Vec<u8>) -> UdfFile {
    let input = Input::from_bytes("rt", bytes);
    let doc = validate::validate(&input, &Limits::default());
    assert!(
        doc.findings.is_empty(),
        "writer output has findings: {:?}",
        doc.findings
    );
    UdfFile::open_strict(&input, &Limits::default()).unwrap()
}

fn round<T: Element + std::fmt::Debug>(vals: &[T], bits: impl Fn(&T) -> u64) {
    let shapes: [&[u32]; 4] = [
        &[],
        &[vals.len() as u32],
        &[1, vals.len() as u32],
        &[1, 1, vals.len() as u32],
    ];
    for shape in shapes {
        let data: &[T] = if shape.is_empty() { &vals[..1] } else { vals };
        let mut w = UdfWriter::new("RT").unwrap();
        let r = w.add_dataset("ROOT").unwrap();
        w.set_root(r);
        w.add(r, TableSpec::array("v", shape, data)).unwrap();
        let f = open(w.to_bytes().unwrap());
        let ds = f.root().unwrap();
        let t = ds.table("v").unwrap();
        assert_eq!(t.dtype(), Some(T::DTYPE));
        assert_eq!(t.shape.real(), shape);
        let got: Vec<T> = f.values(t).unwrap();
        assert_eq!(
            got.iter().map(&bits).collect::<Vec<_>>(),
            data.iter().map(&bits).collect::<Vec<_>>()
        );
        let arr = f.array(ds, t).unwrap();
        assert_eq!(arr.shape, shape.iter().map(|&a| a as u64).collect::<Vec<_>>());
    }
}

#[test]
fn every_primitive_and_dimension() {
    round(&[0u8, 1, 127, 128, 255], |v| *v as u64);
    round(&[i8::MIN, -1, 0, 1, i8::MAX], |v| *v as u64);
    round(&[0u16, 1, u16::MAX], |v| *v as u64);
    round(&[i16::MIN, 0, i16::MAX], |v| *v as u64);
    round(&[0u32, 7, u32::MAX], |v| *v as u64);
    round(&[i32::MIN, -1, i32::MAX], |v| *v as u64);
    round(&[0u64, 1, u64::MAX], |v| *v);
    round(&[i64::MIN, -1, i64::MAX], |v| *v as u64);
    let nan_payload = f32::from_bits(0x7fc0_1234);
    round(
        &[
            0.0f32,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            nan_payload,
            f32::MIN_POSITIVE,
            f32::MAX,
            1e-45,
        ],
        |v| v.to_bits() as u64,
    );
    let nan64 = f64::from_bits(0xfff8_0000_dead_beef);
    round(
        &[0.0f64, -0.0, f64::INFINITY, f64::NEG_INFINITY, nan64, 5e-324, f64::MAX],
        |v| v.to_bits(),
    );
}

#[test]
fn three_d_with_full_z_and_empty_tables() {
    let vals: Vec<u8> = (0..2 * 3 * 255).map(|i| i as u8).collect();
    let mut w = UdfWriter::new("RT").unwrap();
    let r = w.add_dataset("ROOT").unwrap();
    w.set_root(r);
    w.add(r, TableSpec::array("cube", &[2, 3, 255], &vals)).unwrap();
    w.add(r, TableSpec::array::<f64>("empty", &[0], &[])).unwrap();
    w.add(r, TableSpec::array::<i16>("empty2d", &[3, 0], &[])).unwrap();
    w.add(
        r,
        TableSpec::raw("blob", Prim::Custom, Hint::None, &[5], &[], vec![1, 2, 3, 4, 5]),
    )
    .unwrap();
    w.add(
        r,
        TableSpec::array("custom_hint", &[2], &[7u16, 8]).with_hint(Hint::Custom(40), &[]),
    )
    .unwrap();
    w.add(r, TableSpec::array("typed", &[2], &[1u8, 2]).type_name("my.Type<u8>"))
        .unwrap();
    let f = open(w.to_bytes().unwrap());
    let ds = f.root().unwrap();
    let cube = ds.table("cube").unwrap();
    assert_eq!(cube.shape.axes, vec![2, 3, 255]);
    assert_eq!(f.values::<u8>(cube).unwrap(), vals);
    let e = ds.table("empty").unwrap();
    assert_eq!(
        (e.desc.mem_start, e.desc.mem_end, e.shape.axes.clone()),
        (0, 0, vec![0])
    );
    assert!(f.values::<f64>(e).unwrap().is_empty());
    assert_eq!(ds.table("empty2d").unwrap().shape.axes, vec![3, 0]);
    assert_eq!(
        f.typed_values(ds.table("blob").unwrap()).unwrap(),
        UdfValues::Custom(vec![1, 2, 3, 4, 5])
    );
    assert_eq!(ds.table("custom_hint").unwrap().hint, Hint::Custom(40));
    assert_eq!(ds.table("typed").unwrap().type_name.as_deref(), Some("my.Type<u8>"));
}

#[test]
fn every_hint() {
    let mut w = UdfWriter::new("HINT").unwrap();
    let root = w.add_dataset("ROOT").unwrap();
    let a = w.add_dataset("A").unwrap();
    let b = w.add_dataset("B").unwrap();
    let leaf = w.add_dataset("LEAF").unwrap();
    w.set_root(root);
    let s = "Hello, UDF! \u{2713} \u{fc}n\u{ef}c\u{f6}d\u{e9} \u{1F642}";
    for (n, e) in [
        ("t8", UdfEncoding::Utf8),
        ("ti8", UdfEncoding::Utf8Signed),
        ("t16", UdfEncoding::Utf16),
        ("t32", UdfEncoding::Utf32),
    ] {
        w.add(root, TableSpec::text(n, s, e)).unwrap();
        w.add(
            root,
            TableSpec::text_list(&format!("l{n}"), &["alpha", "\u{3b2}eta", "", "gamma\u{1F642}"], e),
        )
        .unwrap();
    }
    w.add(root, TableSpec::text("nul", "a\0b\0", UdfEncoding::Utf8))
        .unwrap();
    w.add(
        root,
        TableSpec::json(
            "meta",
            &json!({"name": "udf", "n": 3, "nested": {"a": [1, 2.5, null, true]}}),
        ),
    )
    .unwrap();
    w.add(
        root,
        TableSpec::json_shaped("list", &json!([1, "two", {"three": 3}]), &[3]),
    )
    .unwrap();
    w.add(root, TableSpec::json_shaped("grid", &json!([[1, 2], [3, 4]]), &[2, 2]))
        .unwrap();
    let verts: Vec<f32> = vec![0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0];
    w.add(
        root,
        TableSpec::array("vertices", &[4], &verts).with_hint(Hint::Coord, &[3]),
    )
    .unwrap();
    w.add(
        root,
        TableSpec::array("grid_xy", &[2, 3], &(0..12).map(|i| i as i16).collect::<Vec<_>>())
            .with_hint(Hint::Coord, &[2]),
    )
    .unwrap();
    w.add(
        root,
        TableSpec::array("xform", &[], &[1f32; 12]).with_hint(Hint::Transform, &[3, 4]),
    )
    .unwrap();
    w.add(
        root,
        TableSpec::array("xforms", &[2], &[0.5f64; 32]).with_hint(Hint::Transform, &[4, 4]),
    )
    .unwrap();
    w.add(
        root,
        TableSpec::array("image", &[2, 2], &[9u8; 12]).with_hint(Hint::Rgb, &[3]),
    )
    .unwrap();
    w.add(
        root,
        TableSpec::array("palette", &[2], &[0.5f32; 8]).with_hint(Hint::Rgb, &[4]),
    )
    .unwrap();
    w.add(
        root,
        TableSpec::array("colors", &[4], &[1u8; 12])
            .with_hint(Hint::Rgb, &[3])
            .related("vertices"),
    )
    .unwrap();
    w.add(root, TableSpec::links("kids", &[Some(a), None, Some(b)]))
        .unwrap();
    w.add(root, TableSpec::link("first", Some(a))).unwrap();
    // INDEX / RANGE into the parent's vertices (looked up through the parents).
    w.add(
        a,
        TableSpec::array("indices", &[6], &[0u16, 1, 2, 2, 3, 0])
            .with_hint(Hint::Index, &[])
            .index_into("vertices"),
    )
    .unwrap();
    w.add(
        a,
        TableSpec::array("faces", &[2], &[0u32, 3, 3, 6])
            .with_hint(Hint::Range, &[2])
            .index_into("indices"),
    )
    .unwrap();
    w.add(
        a,
        TableSpec::array("edges", &[3], &[0u64, 1, 1, 2, 2, 3])
            .with_hint(Hint::Index, &[2])
            .index_into("vertices"),
    )
    .unwrap();
    w.add(a, TableSpec::link("leaf", Some(leaf))).unwrap();
    w.add(b, TableSpec::link("leaf", Some(leaf))).unwrap(); // a DAG: leaf shared
    w.add(leaf, TableSpec::scalar("depth", 2u8)).unwrap();
    let f = open(w.to_bytes().unwrap());
    assert_eq!(f.datasets().len(), 4);
    let ds = f.root().unwrap();
    for n in ["t8", "ti8", "t16", "t32"] {
        assert_eq!(f.text(ds.table(n).unwrap()).unwrap(), UdfText::Scalar(s.into()));
        assert_eq!(
            f.text(ds.table(&format!("l{n}")).unwrap()).unwrap(),
            UdfText::List(vec![
                "alpha".into(),
                "\u{3b2}eta".into(),
                "".into(),
                "gamma\u{1F642}".into()
            ])
        );
    }
    assert_eq!(
        f.text(ds.table("nul").unwrap()).unwrap(),
        UdfText::Scalar("a\0b\0".into())
    );
    assert_eq!(f.json(ds.table("meta").unwrap()).unwrap()["nested"]["a"][1], json!(2.5));
    assert_eq!(f.json(ds.table("grid").unwrap()).unwrap(), json!([[1, 2], [3, 4]]));
    assert_eq!(f.values::<f32>(ds.table("vertices").unwrap()).unwrap(), verts);
    assert_eq!(ds.table("xforms").unwrap().shape.axes, vec![2, 4, 4]);
    assert_eq!(ds.table("image").unwrap().shape.axes, vec![2, 2, 3]);
    let links = f.file_offsets(ds.table("kids").unwrap()).unwrap();
    assert!(links[1].is_null());
    assert_eq!(f.find("root/kids[0]/indices").unwrap().1.hint, Hint::Index);
    assert_eq!(f.find("root/kids[0]/leaf/depth").unwrap().1.prim, Prim::U8);
    let (_, faces) = f.find("faces").unwrap();
    assert_eq!(faces.index_target.map(|(d, _)| d), Some(1));
    // Inspect shows all of it without failing.
    let r = UdfFormat
        .inspect(&Input::from_bytes("x", w.to_bytes().unwrap()), &Default::default())
        .unwrap();
    assert!(r.findings.is_empty());
    assert_eq!(r.summary["datasets"].as_array().unwrap().len(), 4);
}

#[test]
fn writer_refuses_invalid() {
    let mut w = UdfWriter::new("BAD").unwrap();
    let r = w.add_dataset("ROOT").unwrap();
    let c = w.add_dataset("C").unwrap();
    w.set_root(r);
    assert!(UdfWriter::new("TOOLONG").is_err());
    assert!(w.add(r, TableSpec::array("v", &[3], &[1u8, 2])).is_err()); // size
    assert!(w
        .add(r, TableSpec::array("v", &[2], &[1u8; 4]).with_hint(Hint::None, &[2]))
        .is_err()); // ghost on NONE
    assert!(w
        .add(r, TableSpec::array("v", &[1], &[1u16; 3]).with_hint(Hint::Rgb, &[3]))
        .is_err()); // prim
    assert!(w
        .add(
            r,
            TableSpec::array("v", &[1], &[1f32; 4])
                .with_hint(Hint::Rgb, &[4])
                .index_into("x")
        )
        .is_err());
    assert!(w.add(r, TableSpec::array("v", &[2, 3, 256], &[0u8; 1536])).is_err()); // z too large
    assert!(w
        .add(
            r,
            TableSpec::raw("j", Prim::Custom, Hint::Json, &[2], &[], b"[1]".to_vec())
        )
        .is_err());
    assert!(w
        .add(
            r,
            TableSpec::raw("t", Prim::U8, Hint::Text, &[], &[2], vec![0xc3, 0x28])
        )
        .is_err());
    w.add(r, TableSpec::array("v", &[2], &[1u8, 2])).unwrap();
    assert!(w.add(r, TableSpec::array("v", &[2], &[1u8, 2])).is_err()); // duplicate name
                                                                        // Index out of range and cycles are refused when writing.
    let mut w2 = w.clone();
    w2.add(
        r,
        TableSpec::array("i", &[1], &[2u8])
            .with_hint(Hint::Index, &[])
            .index_into("v"),
    )
    .unwrap();
    assert!(w2.to_bytes().is_err());
    w.add(r, TableSpec::link("c", Some(c))).unwrap();
    w.add(c, TableSpec::link("back", Some(r))).unwrap();
    assert!(w.to_bytes().is_err());
}

fn arr(dtype: DType, shape: Vec<u64>) -> NdArray {
    let n: u64 = shape.iter().product();
    let data: Vec<u8> = (0..n * dtype.size() as u64).map(|i| (i * 7 + 3) as u8).collect();
    NdArray::new(dtype, shape, data).unwrap()
}

#[test]
fn format_write_then_read_array() {
    let cases = [
        arr(DType::F32, vec![]),
        arr(DType::U8, vec![5]),
        arr(DType::I16, vec![3, 4]),
        arr(DType::F64, vec![2, 3, 4]),
        arr(DType::U16, vec![2, 3, 300]),  // z > 255: stored flat, shape in type_name
        arr(DType::I32, vec![2, 1, 2, 3]), // 4-D
        arr(DType::U64, vec![0, 3]),
    ];
    for mut a in cases {
        a.name = Some("values".into());
        a.attrs.insert("scale".into(), json!(0.5));
        a.attrs.insert("source".into(), json!({"format": "volp", "nan": "NaN"}));
        let mut out = Vec::new();
        UdfFormat.write_array(&a, &WriteOptions::default(), &mut out).unwrap();
        let input = Input::from_bytes("w", out);
        let rep = UdfFormat.validate(&input, &Default::default());
        assert!(rep.findings.is_empty(), "{:?}", rep.findings);
        let back = UdfFormat.read_array(&input, &Default::default()).unwrap();
        assert_eq!((back.dtype, &back.shape, &back.data), (a.dtype, &a.shape, &a.data));
        assert_eq!(back.attrs["scale"], json!(0.5));
        assert_eq!(back.attrs["source"]["nan"], json!("NaN"));
        let again = UdfFormat.read_array(
            &input,
            &rasterpack_common::ArrayRequest {
                element: Some("root/values".into()),
                ..Default::default()
            },
        );
        assert_eq!(again.unwrap().data, a.data);
    }
}

#[test]
fn read_array_requires_element_when_ambiguous() {
    let bytes = rasterpack_udf::samples::sample().unwrap().to_bytes().unwrap();
    let input = Input::from_bytes("s", bytes);
    let e = UdfFormat.read_array(&input, &Default::default()).unwrap_err();
    assert_eq!(e.kind, rasterpack_common::ErrorKind::Usage);
    assert!(e.message.contains("root/child/temps"));
    let req = rasterpack_common::ArrayRequest {
        element: Some("root/child/colors".into()),
        ..Default::default()
    };
    let a = UdfFormat.read_array(&input, &req).unwrap();
    assert_eq!((a.dtype, a.shape.clone()), (DType::U8, vec![4, 3]));
    assert!(UdfFormat
        .read_array(
            &input,
            &rasterpack_common::ArrayRequest {
                element: Some("nope".into()),
                ..Default::default()
            }
        )
        .is_err());
}

#[test]
fn committed_sample_is_current() {
    let bytes = rasterpack_udf::samples::sample().unwrap().to_bytes().unwrap();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/udf/sample.udf");
    assert_eq!(
        std::fs::read(path).unwrap(),
        bytes,
        "run `cargo run -p rasterpack-udf --example make_udf_testdata`"
    );
}

#[test]
fn inspect_of_the_sample() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/udf/sample.udf");
    let input = Input::open(&path).unwrap();
    assert!(UdfFormat.detect(&input.head(64)));
    assert!(UdfFormat.detect(b"UDF1....") && !UdfFormat.detect(b"UDFX...."));
    let r = UdfFormat.inspect(&input, &Default::default()).unwrap();
    assert!(r.findings.is_empty());
    let s = serde_json::Value::Object(r.summary.clone());
    assert_eq!(s["file_id"], json!("DEMO"));
    let root = &s["datasets"][0];
    assert_eq!(root["path"], json!("root"));
    assert_eq!(root["tables"][0]["text"], json!("rasterpack UDF sample \u{2713}"));
    assert_eq!(root["tables"][1]["json"]["tags"], json!(["demo", "udf"]));
    assert_eq!(root["tables"][2]["shape"], json!([3, 4]));
    let child = &s["datasets"][1];
    assert_eq!(child["path"], json!("root/child"));
    assert_eq!(child["tables"][0]["values"], json!([12.5, 13.0, -2.25, 0.0, 40.125]));
    assert_eq!(child["tables"][1]["text"], json!(["alpha", "beta", "", "gamma"]));
    assert_eq!(r.sections.len(), 3);
    let v = UdfFormat.validate(&input, &Default::default());
    assert!(v.is_valid(true));
}

#[test]
fn validate_tells_its_progress() {
    use std::sync::{Arc, Mutex};
    // A table of 10 MiB: checked in 4 MiB pieces, each told.
    let mut w = UdfWriter::new("PROG").unwrap();
    let r = w.add_dataset("ROOT").unwrap();
    w.set_root(r);
    w.add(r, TableSpec::array("v", &[10 << 20], &vec![3u8; 10 << 20]))
        .unwrap();
    w.add(r, TableSpec::text("t", "small", UdfEncoding::Utf8)).unwrap();
    let input = Input::from_bytes("p", w.to_bytes().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let opts = rasterpack_common::ValidateOptions {
        progress: Some(rasterpack_common::Progress(Arc::new(move |done, total| {
            log.lock().unwrap().push((done, total))
        }))),
        ..Default::default()
    };
    let report = UdfFormat.validate(&input, &opts);
    assert!(report.is_valid(true));
    let seen = seen.lock().unwrap();
    let total = (10 << 20) + 5;
    assert!(seen.len() >= 4, "{seen:?}");
    assert!(seen.iter().all(|&(_, t)| t == total));
    assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0), "{seen:?}");
    assert_eq!(seen.last().unwrap().0, total);
}
