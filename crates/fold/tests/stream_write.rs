//! The streaming FOLD writer (`FoldFormat::array_writer`, what `convert` uses): on a file and on
//! a stream, every dtype, shape, compression and ECC it takes writes a file that validates
//! strictly and reads back as given; the array goes in pieces as a source would deliver it.

use rasterpack_common::{
    ArrayInfo, ArrayRequest, DType, Format, Input, NdArray, Output, ValidateOptions, WriteOptions,
};
use rasterpack_fold::{FoldFile, FoldFormat};

fn arrays() -> Vec<NdArray> {
    let mut out = Vec::new();
    let mut seed = 7u64;
    let mut bytes = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (seed >> 40) as u8
            })
            .collect()
    };
    for (dtype, shape) in [
        (DType::F32, vec![17u64, 31]),
        (DType::U8, vec![3, 0, 5]),
        (DType::I64, vec![]),
        (DType::U16, vec![40_000]),
        (DType::Bool, vec![9]),
        (DType::F64, vec![2, 3, 4, 5]),
    ] {
        let n = shape.iter().product::<u64>() as usize * dtype.size();
        let mut data = bytes(n);
        if dtype == DType::Bool {
            data.iter_mut().for_each(|b| *b &= 1);
        }
        let mut a = NdArray::new(dtype, shape, data).unwrap();
        a.name = Some(format!("a{}", out.len()));
        if out.len() == 1 {
            a.attrs.insert("units".into(), serde_json::json!("m"));
        }
        if out.len() == 2 {
            a.name = Some("bad/name".into());
        }
        out.push(a);
    }
    out
}

/// Deliver `a` through a sink in pieces of `piece` bytes.
fn deliver(a: &NdArray, sink: &mut dyn rasterpack_common::ArraySink, piece: usize) {
    let mut info = ArrayInfo::of(a);
    info.attrs = a.attrs.clone();
    sink.begin(&info).unwrap();
    for (i, p) in a.data.chunks(piece.max(1)).enumerate() {
        sink.write_at((i * piece) as u64, p).unwrap();
    }
    sink.finish().unwrap();
}

fn check(bytes: Vec<u8>, a: &NdArray, what: &str) {
    let input = Input::from_bytes("w", bytes.clone());
    let report = FoldFormat.validate(&input, &ValidateOptions::default());
    assert!(
        report
            .findings
            .iter()
            .all(|f| f.severity == rasterpack_common::Severity::Info),
        "{what}: {:?}",
        report.findings
    );
    let back = FoldFormat.read_array(&input, &ArrayRequest::default()).unwrap();
    assert_eq!((back.dtype, &back.shape), (a.dtype, &a.shape), "{what}");
    assert!(back.data == a.data, "{what}: values");
    let name = a
        .name
        .clone()
        .filter(|n| !n.contains('/'))
        .unwrap_or_else(|| "arr_0".into());
    assert_eq!(back.name.as_deref(), Some(name.as_str()), "{what}");
    let file = FoldFile::from_bytes(bytes).unwrap();
    if let Some(units) = a.attrs.get("units") {
        let attrs = file.metadata().get("source_attrs").unwrap().to_serde();
        assert_eq!(&attrs["units"], units, "{what}");
    }
}

#[test]
fn streamed_fold_files_validate_and_read_back() {
    let dir = std::env::temp_dir().join(format!("rp-fold-stream-write-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (i, a) in arrays().iter().enumerate() {
        for compress in [
            None,
            Some("none"),
            Some("zstd+rs16"),
            Some("none+rs64"),
            Some("zstd+rs32"),
        ] {
            let opts = WriteOptions {
                compress: compress.map(String::from),
                ..Default::default()
            };
            let what = format!("{} {:?} {compress:?}", a.dtype.name(), a.shape);
            // On a file: headers written last at their places.
            let path = dir.join(format!("a{i}.fold"));
            let file = std::fs::File::create(&path).unwrap();
            {
                let mut w = FoldFormat.array_writer(&opts, Output::File(&file)).unwrap();
                deliver(a, &mut *w, 1000 + i * 77);
            }
            check(std::fs::read(&path).unwrap(), a, &format!("{what} file"));
            // On a stream: collected, then written.
            let mut out = Vec::new();
            {
                let mut w = FoldFormat.array_writer(&opts, Output::Stream(&mut out)).unwrap();
                deliver(a, &mut *w, 4096);
            }
            check(out, a, &format!("{what} stream"));
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_writer_refuses_out_of_order_or_missing_bytes() {
    let a = NdArray::from_vec(vec![4], vec![1u32, 2, 3, 4]).unwrap();
    let mut out = Vec::new();
    let mut w = FoldFormat
        .array_writer(&WriteOptions::default(), Output::Stream(&mut out))
        .unwrap();
    assert!(!w.random_access());
    w.begin(&ArrayInfo::of(&a)).unwrap();
    assert!(w.write_at(4, &a.data[4..]).is_err(), "a gap is refused");
    w.write_at(0, &a.data[..8]).unwrap();
    assert!(w.finish().is_err(), "missing bytes are reported");
    // An array above the 1 GiB chunk limit is refused at begin, before any work.
    let mut out = Vec::new();
    let mut w = FoldFormat
        .array_writer(&WriteOptions::default(), Output::Stream(&mut out))
        .unwrap();
    let err = w.begin(&ArrayInfo::new(DType::F64, vec![1 << 28])).unwrap_err();
    assert!(err.message.contains("1 GiB"), "{err}");
}
