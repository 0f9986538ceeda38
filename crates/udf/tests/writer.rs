//! The streaming array writer (issue 12): a UDF file of one table written as the data arrives
//! is byte for byte the file `write_array` writes, on a stream (in order) and on a file (any
//! order, zero runs left as holes); it refuses what cannot be written before writing anything.

use rasterpack_common::{ArrayInfo, ArrayRequest, ArraySink, DType, Format, Input, NdArray, Output};
use rasterpack_udf::{writer_for_array, UdfArrayWriter, UdfFile, UdfFormat};
use serde_json::json;

fn arrays() -> Vec<NdArray> {
    let mut v = Vec::new();
    let mut a = NdArray::from_vec(vec![3, 5], (0..15).map(|x| x as f32 * 0.5).collect()).unwrap();
    a.name = Some("grid".into());
    a.attrs.insert("units".into(), json!("m"));
    a.attrs.insert("scale".into(), json!(0.25));
    v.push(a);
    v.push(NdArray::from_vec(vec![], vec![7i64]).unwrap());
    v.push(NdArray::from_vec(vec![2, 3, 4, 5], (0..120).map(|x| x as u16).collect()).unwrap());
    v.push(NdArray::from_vec(vec![2, 300], (0..600).map(|x| x as i8).collect()).unwrap());
    v.push(NdArray::new(DType::Bool, vec![4], vec![1, 0, 0, 1]).unwrap());
    v.push(NdArray::from_vec(vec![0], Vec::<f64>::new()).unwrap());
    v.push(NdArray::from_vec(vec![7], (0..7).map(|x| x as u8).collect()).unwrap());
    v
}

fn scratch(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("rasterpack-udf-writer-{}-{name}", std::process::id()))
}

#[test]
fn streamed_files_equal_the_whole_writer() {
    for (k, a) in arrays().into_iter().enumerate() {
        let whole = writer_for_array(&a).unwrap().to_bytes().unwrap();
        let mut via_format = Vec::new();
        UdfFormat.write_array(&a, &Default::default(), &mut via_format).unwrap();
        assert_eq!(via_format, whole, "array {k}: write_array");

        // A stream, in pieces of 7 bytes.
        let mut streamed = Vec::new();
        {
            let mut w = UdfFormat
                .array_writer(&Default::default(), Output::Stream(&mut streamed))
                .unwrap();
            w.begin(&ArrayInfo::of(&a)).unwrap();
            assert!(!w.random_access());
            for (i, piece) in a.data.chunks(7).enumerate() {
                w.write_at(i as u64 * 7, piece).unwrap();
            }
            w.finish().unwrap();
        }
        assert_eq!(streamed, whole, "array {k}: stream");

        // A file, pieces in reverse order, the first half of the values as a zero fill.
        let path = scratch(&format!("{k}.udf"));
        let file = std::fs::File::create(&path).unwrap();
        let mut zeroed = a.clone();
        let half = (a.data.len() / 2) / a.dtype.size() * a.dtype.size();
        zeroed.data[..half].fill(0);
        {
            let mut w = UdfFormat
                .array_writer(&Default::default(), Output::File(&file))
                .unwrap();
            w.begin(&ArrayInfo::of(&zeroed)).unwrap();
            assert!(w.random_access());
            let pieces: Vec<(usize, &[u8])> = zeroed.data[half..].chunks(5).enumerate().collect();
            for (i, piece) in pieces.into_iter().rev() {
                w.write_at((half + i * 5) as u64, piece).unwrap();
            }
            if half > 0 {
                w.fill_at(0, half as u64, &vec![0u8; a.dtype.size()]).unwrap();
            }
            w.finish().unwrap();
        }
        let on_disk = std::fs::read(&path).unwrap();
        assert_eq!(
            on_disk,
            writer_for_array(&zeroed).unwrap().to_bytes().unwrap(),
            "array {k}: file"
        );
        std::fs::remove_file(&path).unwrap();

        // What is written reads back: values, shape, name and attributes.
        let f = UdfFile::from_bytes(whole).unwrap();
        assert!(
            f.validate().findings.is_empty(),
            "array {k}: {:?}",
            f.validate().findings
        );
        let back = f.read(&ArrayRequest::default()).unwrap();
        assert_eq!(
            (back.dtype, &back.shape, &back.data),
            (
                if a.dtype == DType::Bool { DType::U8 } else { a.dtype },
                &a.shape,
                &a.data
            ),
            "array {k}"
        );
        for (key, value) in &a.attrs {
            assert_eq!(back.attrs.get(key), Some(value), "array {k}: attrs");
        }
    }
}

#[test]
fn refusals_come_before_any_byte() {
    // More than a UDF table holds: refused at begin, nothing written.
    let mut out = Vec::new();
    {
        let mut w = UdfArrayWriter::new(Output::Stream(&mut out));
        let e = w.begin(&ArrayInfo::new(DType::U8, vec![5 << 30])).unwrap_err();
        assert!(e.message.contains("4 GiB"), "{e}");
    }
    assert!(out.is_empty());
    // Out of order on a stream, past the end, short of the end: errors, not files.
    let mut out = Vec::new();
    let mut w = UdfArrayWriter::new(Output::Stream(&mut out));
    w.begin(&ArrayInfo::new(DType::U16, vec![4])).unwrap();
    assert!(w.write_at(2, &[1, 2]).is_err(), "a gap on a stream");
    w.write_at(0, &[1, 0]).unwrap();
    assert!(w.write_at(2, &[0; 8]).is_err(), "past the end");
    assert!(w.finish().is_err(), "6 bytes missing");
}

#[test]
fn a_table_streams_from_one_udf_file_into_another() {
    let source = NdArray::from_vec(vec![64, 1000], (0..64_000).map(|x| x as f64).collect()).unwrap();
    let bytes = writer_for_array(&source).unwrap().to_bytes().unwrap();
    let file = UdfFile::from_bytes(bytes).unwrap();
    let path = scratch("copy.udf");
    let out = std::fs::File::create(&path).unwrap();
    let region = rasterpack_common::Region::from_start_size(&[10, 0], &[20, 1000]).unwrap();
    {
        let mut w = UdfFormat.array_writer(&Default::default(), Output::File(&out)).unwrap();
        file.stream(&ArrayRequest::default().with_region(&region), &mut w)
            .unwrap();
        w.finish().unwrap();
    }
    let copy = UdfFormat
        .read_array(&Input::open(&path).unwrap(), &ArrayRequest::default())
        .unwrap();
    assert_eq!(copy.data, source.region(&region).unwrap().data);
    assert!(UdfFile::open(&path).unwrap().validate().is_valid(true));
    std::fs::remove_file(&path).unwrap();
}
