//! The streaming writer (issue 12): `GvrsWriter` takes rows in C order and encodes one group of
//! tile rows at a time; on a file it writes tiles as they are encoded and the header and tile
//! directory at the end, on a stream it holds the encoded file until then. Both give the same
//! file, valid and read back exactly, however the rows arrive; a band larger than the working
//! set is refused at `begin`.

use std::fs::File;

use rasterpack_common::{
    ArrayInfo, ArrayRequest, ArraySink, DType, ErrorKind, Format, Input, Limits, NdArray, Output, ValidateOptions,
    WriteOptions,
};
use rasterpack_gvrs::{GvrsCompression, GvrsFile, GvrsFormat, GvrsWriter, GvrsWriterOptions};

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("rasterpack-gvrs-ws-{}-{name}", std::process::id()))
}

fn grid(rows: u64, cols: u64) -> NdArray {
    let v: Vec<i32> = (0..rows * cols)
        .map(|i| {
            let (r, c) = ((i / cols) as i32, (i % cols) as i32);
            // A block of fill (unstored tiles) and a smooth surface elsewhere.
            if (16..48).contains(&r) && c < 32 {
                i32::MIN
            } else {
                r * 37 - c * 11 + (i % 3) as i32
            }
        })
        .collect();
    NdArray::from_vec(vec![rows, cols], v).unwrap()
}

fn strictly_valid(bytes: &[u8]) {
    let report = GvrsFormat.validate(
        &Input::from_bytes("w.gvrs", bytes.to_vec()),
        &ValidateOptions::default(),
    );
    assert!(report.is_valid(true), "{:#?}", report.findings);
}

/// Feed `array` to `sink` in pieces of `piece` bytes (values split between writes).
fn feed(sink: &mut dyn ArraySink, array: &NdArray, piece: usize) {
    sink.begin(&ArrayInfo::of(array)).unwrap();
    for (k, chunk) in array.data.chunks(piece).enumerate() {
        sink.write_at((k * piece) as u64, chunk).unwrap();
    }
    sink.finish().unwrap();
}

fn header_len(bytes: &[u8]) -> usize {
    16 + i32::from_le_bytes(bytes[16..20].try_into().unwrap()) as usize
}

#[test]
fn file_and_stream_outputs_write_the_same_valid_file() {
    let array = grid(70, 45);
    // Small working sets force one band per group; pieces of 7 bytes split values.
    for (working_set, piece) in [(20_000u64, 7usize), (96 << 20, 4096), (60_000, 1 << 20)] {
        let options = GvrsWriterOptions::default()
            .with_tile(16, 16)
            .with_element_name("height")
            .with_limits(Limits {
                working_set,
                ..Limits::default()
            });
        let mut streamed = Vec::new();
        feed(
            &mut GvrsWriter::new(Output::Stream(&mut streamed), options.clone()),
            &array,
            piece,
        );
        let path = temp(&format!("file-{working_set}.gvrs"));
        let file = File::options()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        feed(&mut GvrsWriter::new(Output::File(&file), options), &array, piece);
        drop(file);
        let on_file = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).ok();
        // The same layout; only the header differs (a random UUID).
        assert_eq!(streamed.len(), on_file.len());
        assert_eq!(streamed[header_len(&streamed)..], on_file[header_len(&on_file)..]);
        for bytes in [streamed, on_file] {
            strictly_valid(&bytes);
            let f = GvrsFile::from_bytes(bytes).unwrap();
            assert_eq!(f.geometry.tile_rows, 16);
            assert_eq!(f.read_element("height").unwrap().data, array.data);
            // The fill block (rows 16..48, cols 0..32) is four unstored tiles.
            assert!(f.tile_offset(2, 0).is_none());
        }
    }
}

#[test]
fn every_dtype_and_compression_round_trips() {
    let rows = 33u64;
    let cols = 29u64;
    let shorts = NdArray::from_vec(
        vec![rows, cols],
        (0..rows * cols).map(|i| (i as i16).wrapping_mul(7)).collect(),
    )
    .unwrap();
    let floats = NdArray::from_vec(
        vec![rows, cols],
        (0..rows * cols)
            .map(|i| if i % 11 == 0 { f32::NAN } else { i as f32 * 0.25 })
            .collect(),
    )
    .unwrap();
    let ints = grid(rows, cols);
    for array in [&shorts, &floats, &ints] {
        for compression in [
            GvrsCompression::none(),
            GvrsCompression::classic(),
            GvrsCompression::gridfour_2026(),
            GvrsCompression::lsop(),
        ] {
            let mut bytes = Vec::new();
            let options = GvrsWriterOptions::default()
                .with_tile(8, 8)
                .with_compression(compression.clone());
            GvrsWriter::new(Output::Stream(&mut bytes), options)
                .write_array(array)
                .unwrap();
            strictly_valid(&bytes);
            let f = GvrsFile::from_bytes(bytes).unwrap();
            let back = f.read(&ArrayRequest::default()).unwrap();
            assert_eq!(back.dtype, array.dtype);
            assert_eq!(back.data, array.data, "{:?} {compression:?}", array.dtype);
            assert_eq!(
                f.header.codecs.iter().map(|c| c.lossy()).collect::<Vec<_>>(),
                compression.codecs().iter().map(|c| c.name()).collect::<Vec<_>>()
            );
        }
    }
}

#[test]
fn refusals_come_at_begin() {
    let refuse = |info: ArrayInfo, options: GvrsWriterOptions| {
        let mut out = Vec::new();
        let mut w = GvrsWriter::new(Output::Stream(&mut out), options);
        let e = w.begin(&info).unwrap_err();
        drop(w);
        assert!(out.is_empty(), "nothing written");
        e
    };
    let e = refuse(ArrayInfo::new(DType::U8, vec![4, 4]), GvrsWriterOptions::default());
    assert_eq!(e.kind, ErrorKind::Usage);
    let e = refuse(ArrayInfo::new(DType::F32, vec![2, 3, 4]), GvrsWriterOptions::default());
    assert_eq!(e.kind, ErrorKind::Usage);
    let e = refuse(ArrayInfo::new(DType::I32, vec![0, 4]), GvrsWriterOptions::default());
    assert_eq!(e.kind, ErrorKind::Usage);
    // One band of 128 tile rows x 1,000,000 columns of float32 is 512 MB: above the working set.
    let e = refuse(
        ArrayInfo::new(DType::F32, vec![1000, 1_000_000]),
        GvrsWriterOptions::default(),
    );
    assert_eq!(
        (e.kind, e.code.as_ref()),
        (ErrorKind::LimitExceeded, "limit.working_set")
    );
    let e = refuse(
        ArrayInfo::new(DType::I32, vec![100, 100]),
        GvrsWriterOptions::default().with_element_name("1bad"),
    );
    assert_eq!(e.kind, ErrorKind::Usage);
}

#[test]
fn a_file_not_finished_reads_as_opened_for_writing() {
    let array = grid(70, 45);
    let path = temp("unfinished.gvrs");
    let file = File::options()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let mut w = GvrsWriter::new(Output::File(&file), GvrsWriterOptions::default().with_tile(16, 16));
    w.begin(&ArrayInfo::of(&array)).unwrap();
    w.write_at(0, &array.data[..array.data.len() / 2]).unwrap();
    // The writer stops here (a crash, an interrupted conversion): the file says so.
    drop(w);
    let f = GvrsFile::open(&path).unwrap();
    assert_eq!(f.read_error().unwrap_err().code, "gvrs.header.opened_for_writing");
    let report = f.validate();
    assert!(report
        .findings
        .iter()
        .any(|x| x.code == "gvrs.header.opened_for_writing"));
    std::fs::remove_file(&path).ok();
}

#[test]
fn convert_writes_through_the_streaming_writer() {
    // Format::array_writer on a file, fed by another GVRS file's stream (a window of it).
    let array = grid(70, 45);
    let mut source = Vec::new();
    GvrsWriter::new(
        Output::Stream(&mut source),
        GvrsWriterOptions::default().with_tile(16, 16),
    )
    .write_array(&array)
    .unwrap();
    let src = GvrsFile::from_bytes(source).unwrap();
    let window = rasterpack_common::Region::from_start_size(&[5, 3], &[50, 40]).unwrap();
    let path = temp("converted.gvrs");
    let file = File::options()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let opts = WriteOptions {
        tile: Some((10, 12)),
        compress: Some("all".into()),
        ..Default::default()
    };
    let mut sink = GvrsFormat.array_writer(&opts, Output::File(&file)).unwrap();
    src.stream(&ArrayRequest::default().with_region(&window), &mut *sink)
        .unwrap();
    sink.finish().unwrap();
    drop(sink);
    let f = GvrsFile::open(&path).unwrap();
    assert!(f.validate().is_valid(true));
    assert_eq!(f.geometry.tile_cols, 12);
    assert_eq!(f.read_element("z").unwrap().data, array.region(&window).unwrap().data);
    std::fs::remove_file(&path).ok();
}
