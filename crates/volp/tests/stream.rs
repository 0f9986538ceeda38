//! Streamed reads and writes: regions equal the cut of the whole read, decoding stops after the
//! region and skips frames wholly before it (damage outside a region does not stop it, the
//! whole read fails), sequential and random-access sinks get the same bytes, and the writer
//! streams and refuses before writing what VOLP cannot hold.

mod common;

use common::{file, validate};
use rasterpack_common::npy::NpyWriter;
use rasterpack_common::{Format, MemorySink};
use rasterpack_volp::{
    ArrayInfo, ArrayRequest, ArraySink, DType, ErrorKind, Input, Limits, NdArray, Output, Region, VolpFile, VolpFormat,
    VolpWriteOptions, VolpWriter,
};

const SHAPE: [u64; 3] = [4, 5, 6];

/// int16 values `level * 100 + row * 10 + col`.
fn volume() -> NdArray {
    let mut v = Vec::new();
    for l in 0..SHAPE[0] {
        for y in 0..SHAPE[1] {
            for x in 0..SHAPE[2] {
                v.push((l * 100 + y * 10 + x) as i16);
            }
        }
    }
    NdArray::from_vec(SHAPE.to_vec(), v).unwrap()
}

fn header() -> String {
    r#"{"version":1,"shape":[4,5,6],"dtype":"int16","compression":"zstd","scale":0.5,"offset":-3.0}"#.into()
}

/// One zstd frame with a content size and a checksum.
fn frame(data: &[u8]) -> Vec<u8> {
    let mut c = zstd::bulk::Compressor::new(3).unwrap();
    c.include_checksum(true).unwrap();
    c.compress(data).unwrap()
}

/// A frame without a content size (what a streaming encoder of unknown input writes), with a
/// checksum.
fn frame_without_size(data: &[u8]) -> Vec<u8> {
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    enc.include_contentsize(false).unwrap();
    enc.include_checksum(true).unwrap();
    std::io::Write::write_all(&mut enc, data).unwrap();
    enc.finish().unwrap()
}

/// The volume as one frame per level, returned with each frame's offset in the file.
fn per_level_file(sized: bool) -> (Vec<u8>, Vec<usize>) {
    let data = volume().data;
    let level = data.len() / SHAPE[0] as usize;
    let h = header();
    let mut body = Vec::new();
    let mut at = Vec::new();
    for chunk in data.chunks(level) {
        at.push(8 + h.len() + body.len());
        body.extend(if sized { frame(chunk) } else { frame_without_size(chunk) });
    }
    (file(h.as_bytes(), &body), at)
}

fn regions() -> Vec<Region> {
    let mut out = Vec::new();
    for spec in [
        "",
        "1",
        "2:4",
        "3",
        "0,0,0",
        "1:3,2:4,1:5",
        ":,4,:",
        "3,4,5",
        ":,:,2",
        "0:4,0:5,0:6",
        "2,1:2",
    ] {
        out.push(if spec.is_empty() {
            Region::full(&SHAPE)
        } else {
            Region::parse(spec, &SHAPE).unwrap()
        });
    }
    out
}

#[test]
fn regions_equal_the_cut_of_the_whole() {
    let whole = volume();
    let one_frame = common::encode(DType::I16, SHAPE, &whole.data, 0.5, -3.0, &Default::default(), 3).unwrap();
    for bytes in [one_frame, per_level_file(true).0, per_level_file(false).0] {
        let file = VolpFile::from_bytes(bytes).unwrap();
        let read = file.read(&ArrayRequest::default()).unwrap();
        assert_eq!(read.data, whole.data);
        for region in regions() {
            let want = whole.region(&region).unwrap();
            let got = file.read(&ArrayRequest::default().with_region(region.clone())).unwrap();
            assert_eq!(
                (got.shape.clone(), got.data.clone()),
                (want.shape.clone(), want.data.clone()),
                "{region:?}"
            );
            // Physical values of the region.
            let phys = file
                .read(&ArrayRequest::default().with_region(region.clone()).with_physical(true))
                .unwrap();
            let expect: Vec<f64> = want.to_f64().iter().map(|v| v * 0.5 - 3.0).collect();
            assert_eq!(phys.to_vec::<f64>().unwrap(), expect, "{region:?}");
        }
    }
}

#[test]
fn sequential_and_random_access_sinks_get_the_same_bytes() {
    let (bytes, _) = per_level_file(true);
    let file = VolpFile::from_bytes(bytes).unwrap();
    for region in regions() {
        for physical in [false, true] {
            let req = ArrayRequest::default()
                .with_region(region.clone())
                .with_physical(physical);
            let want = file.read(&req).unwrap();
            // A forward-only .npy stream refuses any out-of-order write.
            let mut streamed = Vec::new();
            {
                let mut w = NpyWriter::new(Output::Stream(&mut streamed));
                file.stream(&req, &mut w).unwrap();
                w.finish().unwrap();
            }
            let mut expected = Vec::new();
            rasterpack_common::npy::write(&mut expected, &want).unwrap();
            assert_eq!(streamed, expected, "{region:?} physical {physical}");
        }
    }
}

#[test]
fn a_region_reads_only_its_frames() {
    let (bytes, at) = per_level_file(true);
    let whole = volume();
    let level = |l: u64| Region::from_start_size(&[l, 0, 0], &[1, 5, 6]).unwrap();
    let read = |b: &[u8], r: Option<Region>| {
        let f = VolpFile::from_bytes(b.to_vec())?;
        let req = match r {
            Some(r) => ArrayRequest::default().with_region(r),
            None => ArrayRequest::default(),
        };
        f.read(&req)
    };
    // Damage level 2's frame (its checksum): the whole read and validate fail, every other
    // level reads (those before stop early, level 3 skips the sized frames before it).
    let mut m = bytes.clone();
    m[at[3] - 1] ^= 0x55;
    let e = read(&m, None).unwrap_err();
    assert_eq!(e.code, "volp.body.decompress");
    assert!(validate(&m).has_code("volp.body.decompress"));
    for l in [0, 1, 3] {
        let got = read(&m, Some(level(l))).unwrap();
        assert_eq!(got.data, whole.region(&level(l)).unwrap().data, "level {l}");
    }
    assert_eq!(read(&m, Some(level(2))).unwrap_err().code, "volp.body.decompress");
    // Cut the file after level 1: levels 0 and 1 read, the rest is a truncated body.
    let cut = &bytes[..at[2]];
    assert!(read(cut, Some(level(1))).is_ok());
    assert!(read(cut, Some(Region::parse("0:2", &SHAPE).unwrap())).is_ok());
    assert_eq!(read(cut, None).unwrap_err().code, "volp.body.size_mismatch");
    assert_eq!(read(cut, Some(level(2))).unwrap_err().code, "volp.body.size_mismatch");
    // Garbage after the last frame is seen by the whole read, not by a region before it.
    let mut tail = bytes.clone();
    tail.extend_from_slice(b"junk");
    assert_eq!(read(&tail, None).unwrap_err().code, "volp.body.trailing_bytes");
    assert!(read(&tail, Some(level(3))).is_ok());
}

#[test]
fn frames_without_a_size_are_decoded_to_reach_a_region() {
    // Without declared sizes nothing can be skipped: damage before the region is found.
    let (bytes, at) = per_level_file(false);
    let mut m = bytes.clone();
    let mid = (at[0] + at[1]) / 2;
    m[mid] ^= 0x40;
    let region = Region::from_start_size(&[3, 0, 0], &[1, 5, 6]).unwrap();
    let file = VolpFile::from_bytes(m).unwrap();
    assert!(file.read(&ArrayRequest::default().with_region(region)).is_err());
}

#[test]
fn frame_content_size_fields_are_sizes_that_must_match() {
    // A frame of 8 RLE bytes whose 8-byte content-size field says 2^64 - 1 (libzstd's "unknown"
    // sentinel) or 2^63: both declare more than the header's 8 bytes, refused alike.
    let h = br#"{"shape":[1,1,8],"dtype":"uint8","compression":"zstd"}"#;
    for fcs in [u64::MAX, 1 << 63, 9, 7] {
        let mut body = vec![0x28, 0xB5, 0x2F, 0xFD, 0xC0, 0x38];
        body.extend_from_slice(&fcs.to_le_bytes());
        body.extend_from_slice(&[0x43, 0, 0, 0]);
        let bytes = file(h, &body);
        let code = "volp.body.size_mismatch";
        assert!(validate(&bytes).has_code(code), "{fcs}: {:?}", validate(&bytes));
        assert_eq!(common::decode(&bytes).unwrap_err().code, code, "{fcs}");
        let inspected = VolpFormat
            .inspect(&Input::from_bytes("x", bytes.clone()), &Default::default())
            .unwrap();
        assert!(inspected.findings.has_errors(), "{fcs}");
        // The same frame declaring 8 bytes is valid.
        let mut ok = body.clone();
        ok[6..14].copy_from_slice(&8u64.to_le_bytes());
        assert_eq!(common::decode(&file(h, &ok)).unwrap().data, [0; 8]);
    }
}

#[test]
fn the_writer_streams_and_equals_encode() {
    let whole = volume();
    let opts = VolpWriteOptions {
        scale: Some(0.5),
        offset: Some(-3.0),
        ..VolpWriteOptions::default()
    };
    let encoded = VolpWriter::encode(&whole, &opts).unwrap();
    // Values in small pieces, a run of one value through fill_at.
    let mut streamed = Vec::new();
    {
        let mut w = VolpWriter::new(Output::Stream(&mut streamed), opts.clone());
        w.begin(&ArrayInfo::of(&whole)).unwrap();
        assert!(!w.random_access());
        for (i, piece) in whole.data.chunks(7).enumerate() {
            w.write_at(i as u64 * 7, piece).unwrap();
        }
        w.finish().unwrap();
    }
    assert_eq!(streamed, encoded);
    let back = VolpFile::from_bytes(streamed).unwrap();
    assert_eq!(back.read(&ArrayRequest::default()).unwrap().data, whole.data);
    assert!(back.validate().is_valid(true));
    // Out of order, missing bytes and overruns are refused.
    let mut sink = Vec::new();
    let mut w = VolpWriter::new(Output::Stream(&mut sink), opts.clone());
    w.begin(&ArrayInfo::of(&whole)).unwrap();
    assert!(w.write_at(2, &[0, 0]).is_err());
    w.write_at(0, &whole.data[..10]).unwrap();
    assert!(w.finish().is_err());
    assert!(w.write_at(10, &vec![0; whole.data.len()]).is_err());
}

#[test]
fn the_writer_refuses_at_begin_before_writing() {
    for (dtype, shape) in [
        (DType::U16, vec![1, 1, 1]),
        (DType::U8, vec![2, 2]),
        (DType::U8, vec![1, 1, 1, 1]),
        (DType::U8, vec![0, 1, 1]),
        (DType::U8, vec![257, 1024, 1024]),
        (DType::F64, vec![1 << 30, 1 << 30, 1 << 30]),
    ] {
        let mut out = Vec::new();
        let mut w = VolpWriter::new(Output::Stream(&mut out), VolpWriteOptions::default());
        let e = w.begin(&ArrayInfo::new(dtype, shape.clone())).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Usage, "{shape:?}: {e}");
        drop(w);
        assert!(out.is_empty(), "{shape:?}: nothing written before the refusal");
    }
    let mut out = Vec::new();
    let e = VolpWriter::new(Output::Stream(&mut out), VolpWriteOptions::default())
        .begin(&ArrayInfo::new(DType::U8, vec![257, 1024, 1024]))
        .unwrap_err();
    assert_eq!(e.code, "volp.limit.body");
    // Exactly 256 MiB is accepted at begin.
    let mut w = VolpWriter::new(Output::Stream(&mut out), VolpWriteOptions::default());
    w.begin(&ArrayInfo::new(DType::U8, vec![256, 1024, 1024])).unwrap();
}

#[test]
fn the_format_writer_carries_attributes_and_levels() {
    let mut whole = volume();
    whole.attrs.insert("scale".into(), 2.0.into());
    whole
        .attrs
        .insert("levels".into(), serde_json::json!([1000, 850, 700, 500]));
    whole.name = Some("t".into());
    let opts = rasterpack_common::WriteOptions {
        compress: Some("zstd:9".into()),
        ..Default::default()
    };
    let mut out = Vec::new();
    {
        let mut w = VolpFormat.array_writer(&opts, Output::Stream(&mut out)).unwrap();
        w.begin(&ArrayInfo::of(&whole)).unwrap();
        w.write_at(0, &whole.data).unwrap();
        w.finish().unwrap();
    }
    let back = VolpFile::from_bytes(out).unwrap();
    assert_eq!(back.header().scale, 2.0);
    assert_eq!(back.header().metadata.variable_name(), Some("t"));
    assert_eq!(
        back.header().metadata.level_values(),
        Some(vec![1000.0, 850.0, 700.0, 500.0])
    );
    assert!(VolpFormat
        .array_writer(
            &rasterpack_common::WriteOptions {
                compress: Some("zstd:0".into()),
                ..Default::default()
            },
            Output::Stream(&mut Vec::new())
        )
        .is_err());
}

#[test]
fn reads_check_what_they_allocate_before_decoding() {
    // A header asking for 256 MiB over a body that can produce 8 bytes: refused before the
    // in-memory sink allocates anything.
    let h = br#"{"shape":[256,1024,1024],"dtype":"uint8","compression":"zstd"}"#;
    let bytes = file(h, &frame(&[1; 8]));
    let mut sink = MemorySink::new(Limits::default());
    let e = VolpFile::from_bytes(bytes)
        .unwrap()
        .stream(&ArrayRequest::default(), &mut sink)
        .unwrap_err();
    assert_eq!(e.code, "volp.body.size_mismatch");
    assert!(sink.into_array().is_err(), "begin was never called");
}

#[test]
fn open_any_and_the_array_file_interface() {
    let bytes = per_level_file(true).0;
    let path = std::env::temp_dir().join(format!("rp-volp-open-any-{}.volp", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let file = rasterpack_common::open_any(&path, &[&VolpFormat]).unwrap();
    assert_eq!(file.format_name(), "volp");
    let arrays = file.arrays().unwrap();
    assert_eq!((arrays[0].dtype, arrays[0].shape.clone()), (DType::I16, SHAPE.to_vec()));
    assert!(file.validate().is_valid(true));
    assert_eq!(file.read(&ArrayRequest::default()).unwrap().data, volume().data);
    assert_eq!(
        file.read(&ArrayRequest::for_element("x")).unwrap_err().kind,
        ErrorKind::Usage
    );
    let opened = VolpFile::open(&path).unwrap();
    assert_eq!(opened.stats().unwrap().max, Some(345.0));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn regions_across_windows_and_frames_that_end_inside_values() {
    // 1.6 MB of int16 (more than one decode window) in frames cut at odd byte offsets, so frame
    // ends fall inside values; some sized, some not.
    let shape = [4u64, 400, 500];
    let values: Vec<i16> = (0..shape.iter().product::<u64>())
        .map(|i| (i % 65_521) as i16)
        .collect();
    let whole = NdArray::from_vec(shape.to_vec(), values).unwrap();
    let h = r#"{"shape":[4,400,500],"dtype":"int16","compression":"zstd"}"#;
    let cuts = [0usize, 333_333, 700_001, 1_048_577, 1_200_003, whole.data.len()];
    let mut body = Vec::new();
    for (i, w) in cuts.windows(2).enumerate() {
        let piece = &whole.data[w[0]..w[1]];
        body.extend(if i % 2 == 0 {
            frame(piece)
        } else {
            frame_without_size(piece)
        });
        if i == 1 {
            body.extend_from_slice(&[0x50, 0x2A, 0x4D, 0x18, 1, 0, 0, 0, 7]);
        }
    }
    let file = VolpFile::from_bytes(file(h.as_bytes(), &body)).unwrap();
    assert!(file.validate().is_valid(true));
    assert_eq!(file.read(&ArrayRequest::default()).unwrap().data, whole.data);
    for spec in ["3", "2:4,100:300,7:11", "1,399,499", ":,200,:", "0,0,0", "2:3", "3,0:1"] {
        let region = Region::parse(spec, &shape).unwrap();
        let got = file.read(&ArrayRequest::default().with_region(region.clone())).unwrap();
        assert_eq!(got.data, whole.region(&region).unwrap().data, "{spec}");
        let phys = file
            .read(&ArrayRequest::default().with_region(region.clone()).with_physical(true))
            .unwrap();
        let want: Vec<f64> = whole.region(&region).unwrap().to_f64();
        assert_eq!(phys.to_vec::<f64>().unwrap(), want, "{spec}");
    }
    assert_eq!(file.stats().unwrap().count, whole.len());
}
