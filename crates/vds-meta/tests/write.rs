//! The VDS writer (`rasterpack_vds_meta::write`): arrays of every dtype it takes, 1-D to 4-D,
//! written with every compression, brick size, margins and LODs to both storage kinds, read
//! back by the crate's reader (every LOD: LOD k is voxel `v << k` of the input along each brick
//! axis), checked by `validate` (no warning or error); the requests it refuses before
//! anything is written. `write_oracle.rs` has OpenVDS read the same kind of datasets.

use rasterpack_common::{
    ArrayInfo, ArrayRequest, ArraySink, DType, ErrorKind, Format, Input, NdArray, Output, Severity, ValidateOptions,
    WriteOptions,
};
use rasterpack_vds_meta::layout::VdsCompression;
use rasterpack_vds_meta::write::{ChannelSpec, VdsWriteOptions, VdsWriter};
use rasterpack_vds_meta::VdsChunkStatus;
use rasterpack_vds_meta::{VdsDataset, VdsFormat};

mod writeutil;
use writeutil::{decimate, sample};

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("rasterpack-vds-write-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// Write `data` through the sink in uneven pieces (so rows arrive split), to a file.
fn write_file(path: &std::path::Path, info: &ArrayInfo, data: &[u8], opts: VdsWriteOptions) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = VdsWriter::container(Output::File(&file), opts);
    feed(&mut w, info, data);
}

fn feed(w: &mut dyn ArraySink, info: &ArrayInfo, data: &[u8]) {
    w.begin(info).unwrap();
    let mut at = 0usize;
    let mut step = 1usize;
    while at < data.len() {
        let n = step.min(data.len() - at);
        w.write_at(at as u64, &data[at..at + n]).unwrap();
        at += n;
        step = step * 3 + 7;
    }
    w.finish().unwrap();
}

/// Every LOD reads back as the decimated input, and validate is clean.
fn check(input: &Input, info: &ArrayInfo, data: &[u8], lods: u32, what: &str) {
    let r = VdsFormat.validate(input, &ValidateOptions::default());
    let bad: Vec<_> = r.findings.iter().filter(|f| f.severity != Severity::Info).collect();
    assert!(bad.is_empty(), "{what}: {bad:?}");
    for lod in 0..=lods {
        let req = ArrayRequest {
            lod,
            ..Default::default()
        };
        let got = VdsFormat.read_array(input, &req).unwrap();
        let (shape, want) = decimate(info, data, lod);
        assert_eq!(got.shape, shape, "{what} LOD {lod}");
        // The reader gives 1-bit channels as uint8 0/1 (the values of a bool array).
        let dtype = if info.dtype == DType::Bool {
            DType::U8
        } else {
            info.dtype
        };
        assert_eq!(got.dtype, dtype, "{what} LOD {lod}");
        assert!(got.data == want, "{what}: LOD {lod} differs");
    }
}

fn opts(compression: VdsCompression, brick: u32, margin: u32, lods: u32) -> VdsWriteOptions {
    VdsWriteOptions {
        compression,
        brick_size: brick,
        margin,
        lods,
        ..Default::default()
    }
}

#[test]
fn every_dtype_and_compression_round_trips_in_both_storage_kinds() {
    let dtypes = [
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F32,
        DType::F64,
        DType::Bool,
    ];
    for (k, dtype) in dtypes.into_iter().enumerate() {
        for comp in [VdsCompression::None, VdsCompression::RLE, VdsCompression::Zip] {
            let info = ArrayInfo::new(dtype, vec![9, 37, 70]);
            let data = sample(&info, k as u64);
            let what = format!("{} {comp:?}", dtype.name());
            let path = tmp(&format!("{}_{comp:?}.vds", dtype.name()));
            write_file(&path, &info, &data, opts(comp, 32, 0, 1));
            check(&Input::open(&path).unwrap(), &info, &data, 1, &what);
            let dir = tmp(&format!("{}_{comp:?}_dir", dtype.name()));
            let mut w = VdsWriter::directory(&dir, true, opts(comp, 32, 0, 1)).unwrap();
            feed(&mut w, &info, &data);
            check(&Input::open(&dir).unwrap(), &info, &data, 1, &format!("{what} dir"));
        }
    }
}

#[test]
fn shapes_1d_to_4d_brick_sizes_margins_and_lods() {
    let cases: &[(&[u64], u32, u32, u32)] = &[
        (&[1000], 32, 0, 2),
        (&[300], 64, 4, 0),
        (&[70, 300], 32, 0, 1),
        (&[5, 130], 64, 8, 2),
        (&[3, 40, 50], 64, 2, 3),
        (&[33, 1, 65], 32, 1, 1),
        (&[3, 4, 20, 36], 32, 2, 1),
        (&[2, 70, 9, 40], 128, 0, 2),
        (&[1, 1, 1], 256, 0, 0),
    ];
    for (k, &(shape, brick, margin, lods)) in cases.iter().enumerate() {
        for comp in [VdsCompression::None, VdsCompression::Zip] {
            let info = ArrayInfo::new(DType::F32, shape.to_vec());
            let data = sample(&info, 100 + k as u64);
            let what = format!("{shape:?} brick {brick} margin {margin} lods {lods} {comp:?}");
            let path = tmp(&format!("shape{k}_{comp:?}.vds"));
            write_file(&path, &info, &data, opts(comp, brick, margin, lods));
            check(&Input::open(&path).unwrap(), &info, &data, lods, &what);
        }
    }
}

#[test]
fn a_stream_gets_the_container_whole() {
    let info = ArrayInfo::new(DType::U16, vec![4, 50, 33]);
    let data = sample(&info, 7);
    let mut out = Vec::new();
    {
        let mut w = VdsWriter::container(Output::Stream(&mut out), opts(VdsCompression::RLE, 32, 0, 0));
        feed(&mut w, &info, &data);
    }
    check(&Input::from_bytes("s.vds", out), &info, &data, 0, "stream");
}

#[test]
fn constant_bricks_are_stored_as_hashes_only_when_they_read_back_exactly() {
    // f32 0.5 (constant), u32 2^24+1 (not a float: stored as data), NaN (stored as data).
    for (dtype, value, constant) in [
        (DType::F32, 0.5f32.to_le_bytes().to_vec(), true),
        (DType::U32, (16_777_217u32).to_le_bytes().to_vec(), false),
        (DType::F32, f32::NAN.to_le_bytes().to_vec(), false),
        (DType::U8, vec![200u8], true),
        (DType::F64, 0.1f64.to_le_bytes().to_vec(), false),
        (DType::F64, 0.25f64.to_le_bytes().to_vec(), true),
    ] {
        let info = ArrayInfo::new(dtype, vec![2, 40, 40]);
        let data = value.repeat(2 * 40 * 40);
        let path = tmp(&format!("const_{}_{constant}.vds", dtype.name()));
        write_file(&path, &info, &data, opts(VdsCompression::Zip, 32, 0, 0));
        let input = Input::open(&path).unwrap();
        check(&input, &info, &data, 0, dtype.name());
        let ds = VdsDataset::open(&path).unwrap();
        let table = &ds.layers()[ds.lod0_layer(0).unwrap()].chunks;
        let statuses: Vec<_> = (0..table.len()).map(|i| table.get(i).unwrap().status()).collect();
        assert_eq!(statuses.len(), 4);
        for s in statuses {
            assert_eq!(
                matches!(s, VdsChunkStatus::Constant(_)),
                constant,
                "{} {s:?}",
                dtype.name()
            );
        }
    }
}

#[test]
fn u8_value_range_and_no_value_map_codes_as_openvds_defines() {
    let info = ArrayInfo::new(DType::U8, vec![3, 20, 30]);
    let data = sample(&info, 3);
    let path = tmp("u8_range.vds");
    let o = VdsWriteOptions {
        value_range: Some((-1.5, 2.5)),
        no_value: Some(-999.0),
        ..opts(VdsCompression::Zip, 32, 0, 0)
    };
    write_file(&path, &info, &data, o);
    let input = Input::open(&path).unwrap();
    check(&input, &info, &data, 0, "u8 range");
    let ch = VdsDataset::open(&path).unwrap().layout().channels[0].clone();
    assert!(ch.use_no_value);
    assert_eq!(ch.no_value, -999.0);
    assert_eq!(ch.integer_offset, -1.5);
    assert_eq!(ch.integer_scale, (4.0f64 / 254.0) as f32 as f64);
    assert_eq!(ch.value_range, [-1.5, 2.5]);
    let phys = VdsFormat
        .read_array(&input, &ArrayRequest::default().with_physical(true))
        .unwrap();
    for (p, &c) in phys.data.chunks_exact(4).zip(&data) {
        let v = f32::from_le_bytes(p.try_into().unwrap());
        let want = if c == 255 {
            -999.0
        } else {
            c as f32 * ch.integer_scale as f32 + ch.integer_offset as f32
        };
        assert_eq!(v.to_bits(), want.to_bits(), "code {c}");
    }
}

#[test]
fn axes_metadata_and_the_default_value_range_are_in_the_layout() {
    let info = ArrayInfo::new(DType::F32, vec![4, 5, 6]);
    let data = sample(&info, 9);
    let path = tmp("axes.vds");
    let w = WriteOptions {
        axes: vec!["Time:ms:0:20".into(), "Crossline::100:104".into(), "Inline::1:4".into()],
        metadata: vec![
            "Survey/Name=North Sea".into(),
            "Survey/Lines=4".into(),
            "Survey/Spacing=12.5".into(),
        ],
        ..Default::default()
    };
    write_file(&path, &info, &data, VdsWriteOptions::from_write_options(&w).unwrap());
    check(&Input::open(&path).unwrap(), &info, &data, 0, "axes");
    let ds = VdsDataset::open(&path).unwrap();
    let l = ds.layout();
    assert_eq!(l.axes[0].name, "Time");
    assert_eq!(l.axes[0].unit, "ms");
    assert_eq!((l.axes[0].coordinate_min, l.axes[0].coordinate_max), (0.0, 20.0));
    assert_eq!((l.axes[1].coordinate_min, l.axes[1].coordinate_max), (100.0, 104.0));
    assert_eq!(l.axes[2].num_samples, 4);
    let find = |n: &str| l.metadata.iter().find(|m| m.name == n).unwrap().value_json(true);
    assert_eq!(find("Name"), serde_json::json!("North Sea"));
    assert_eq!(find("Lines"), serde_json::json!(4));
    assert_eq!(find("Spacing"), serde_json::json!(12.5));
    let vals: Vec<f32> = data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .filter(|v| v.is_finite())
        .collect();
    let lo = vals.iter().cloned().fold(f32::INFINITY, f32::min) as f64;
    let hi = vals.iter().cloned().fold(f32::NEG_INFINITY, f32::max) as f64;
    assert_eq!(l.channels[0].value_range, [lo, hi]);
}

#[test]
fn a_1d_array_takes_one_axis() {
    let info = ArrayInfo::new(DType::F32, vec![500]);
    let data = sample(&info, 5);
    let path = tmp("one_axis.vds");
    let w = WriteOptions {
        axes: vec!["Time:ms:0:998".into()],
        ..Default::default()
    };
    write_file(&path, &info, &data, VdsWriteOptions::from_write_options(&w).unwrap());
    check(&Input::open(&path).unwrap(), &info, &data, 0, "1-D");
    let ds = VdsDataset::open(&path).unwrap();
    let axes = &ds.layout().axes;
    assert_eq!(
        (axes[0].name.as_str(), axes[0].num_samples, axes[0].coordinate_max),
        ("Time", 500, 998.0)
    );
    assert_eq!((axes[1].name.as_str(), axes[1].num_samples), ("Crossline", 1));
}

#[test]
fn bad_requests_are_usage_errors_before_anything_is_written() {
    let usage =
        |r: rasterpack_common::Result<VdsWriteOptions>| assert_eq!(r.err().map(|e| e.kind), Some(ErrorKind::Usage));
    let w = |f: fn(&mut WriteOptions)| {
        let mut o = WriteOptions::default();
        f(&mut o);
        VdsWriteOptions::from_write_options(&o)
    };
    usage(w(|o| o.brick_size = Some(48)));
    usage(w(|o| o.brick_size = Some(512)));
    usage(w(|o| o.margin = Some(17)));
    usage(w(|o| o.lods = Some(13)));
    usage(w(|o| o.compress = Some("wavelet".into())));
    usage(w(|o| o.value_range = Some((2.0, 1.0))));
    usage(w(|o| o.axes = vec!["a:b:c".into()]));
    usage(w(|o| o.metadata = vec!["noslash=1".into()]));
    assert!(w(|o| o.margin = Some(16)).is_ok());
    for (dtype, shape) in [
        (DType::I16, vec![4, 4]),
        (DType::F16, vec![4, 4]),
        (DType::F32, vec![2, 2, 2, 2, 2]),
        (DType::F32, vec![4, 0]),
    ] {
        let path = tmp("refused.vds");
        let file = std::fs::File::create(&path).unwrap();
        let mut w = VdsWriter::container(Output::File(&file), VdsWriteOptions::default());
        let e = w.begin(&ArrayInfo::new(dtype, shape.clone())).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Usage, "{dtype:?} {shape:?}: {e}");
        assert_eq!(
            file.metadata().unwrap().len(),
            0,
            "{dtype:?} {shape:?}: something was written"
        );
    }
    // Axes must be one per dimension.
    let o = VdsWriteOptions::from_write_options(&WriteOptions {
        axes: vec!["A::0:1".into()],
        ..Default::default()
    })
    .unwrap();
    let dir = tmp("refused_dir");
    let mut w = VdsWriter::directory(&dir, false, o).unwrap();
    assert_eq!(
        w.begin(&ArrayInfo::new(DType::U8, vec![2, 2])).unwrap_err().kind,
        ErrorKind::Usage
    );
    drop(w);
    assert!(!dir.exists());
}

#[test]
fn a_directory_write_that_fails_leaves_nothing() {
    let dir = tmp("failed_dir");
    let info = ArrayInfo::new(DType::F32, vec![2, 40, 40]);
    let data = sample(&info, 1);
    {
        let mut w = VdsWriter::directory(&dir, false, VdsWriteOptions::default()).unwrap();
        w.begin(&info).unwrap();
        w.write_at(0, &data[..data.len() / 2]).unwrap();
        // Finishing early is an error, and the half-written directory goes.
        assert!(w.finish().is_err());
    }
    assert!(!dir.exists());
    let parent = dir.parent().unwrap();
    let leftovers: Vec<_> = std::fs::read_dir(parent)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("failed_dir"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// Channels beside the primary, one array each: every channel reads back (every LOD) as its
/// own array in its own format, in both storage kinds, and validate is clean.
#[test]
fn several_channels_each_in_its_own_format_round_trip() {
    let shape = vec![5, 40, 70];
    let mut arrays = Vec::new();
    for (k, (name, dtype)) in [
        ("Amplitude", DType::F32),
        ("Velocity", DType::U16),
        ("Mask", DType::Bool),
        ("Depth", DType::F64),
    ]
    .into_iter()
    .enumerate()
    {
        let mut info = ArrayInfo::new(dtype, shape.clone());
        info.name = Some(name.into());
        let data = sample(&info, 40 + k as u64);
        arrays.push((info, data));
    }
    let mut o = opts(VdsCompression::Zip, 32, 2, 2);
    o.channels = arrays[1..]
        .iter()
        .map(|(i, _)| ChannelSpec {
            name: i.name.clone().unwrap(),
            ..Default::default()
        })
        .collect();
    o.channels[0].value_range = Some((1500.0, 6000.0));
    for dir in [false, true] {
        let path = tmp(if dir { "channels_dir" } else { "channels.vds" });
        let _ = std::fs::remove_dir_all(&path);
        if dir {
            let mut w = VdsWriter::directory(&path, true, o.clone()).unwrap();
            for (info, data) in &arrays {
                feed(&mut w, info, data);
            }
        } else {
            let file = std::fs::File::create(&path).unwrap();
            let mut w = VdsWriter::container(Output::File(&file), o.clone());
            for (info, data) in &arrays {
                feed(&mut w, info, data);
            }
        }
        let input = Input::open(&path).unwrap();
        let r = VdsFormat.validate(&input, &ValidateOptions::default());
        let bad: Vec<_> = r.findings.iter().filter(|f| f.severity != Severity::Info).collect();
        assert!(bad.is_empty(), "dir {dir}: {bad:?}");
        let layout = VdsDataset::open(&path).unwrap().layout().clone();
        let names: Vec<&str> = layout.channels.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["Amplitude", "Velocity", "Mask", "Depth"]);
        // The U16 channel keeps the range it was given: codes 0..65535 over 1500..6000.
        assert_eq!(layout.channels[1].value_range, [1500.0, 6000.0]);
        assert!((layout.channels[1].integer_scale - 4500.0 / 65535.0).abs() < 1e-6);
        for (info, data) in &arrays {
            for lod in 0..=2 {
                let req = ArrayRequest {
                    lod,
                    element: info.name.clone(),
                    ..Default::default()
                };
                let got = VdsFormat.read_array(&input, &req).unwrap();
                let (shape, want) = decimate(info, data, lod);
                assert_eq!(got.shape, shape, "{:?} LOD {lod}", info.name);
                assert!(got.data == want, "dir {dir}: {:?} LOD {lod} differs", info.name);
            }
        }
    }
    // The library's one call for in-memory arrays: one channel per array.
    let nds: Vec<NdArray> = arrays
        .iter()
        .map(|(i, d)| NdArray {
            dtype: i.dtype,
            shape: i.shape.clone(),
            data: d.clone(),
            name: i.name.clone(),
            attrs: Default::default(),
        })
        .collect();
    let mut out = Vec::new();
    VdsFormat
        .write_arrays(&nds, &Default::default(), &WriteOptions::default(), &mut out)
        .unwrap();
    let path = tmp("channels_mem.vds");
    std::fs::write(&path, &out).unwrap();
    let input = Input::open(&path).unwrap();
    for (info, data) in &arrays {
        let req = ArrayRequest {
            element: info.name.clone(),
            ..Default::default()
        };
        assert!(
            VdsFormat.read_array(&input, &req).unwrap().data == *data,
            "{:?}",
            info.name
        );
    }
}

/// A channel of another shape, a name used twice, or a channel more than announced is a usage
/// error, and a directory begun is removed.
#[test]
fn channels_of_another_shape_or_a_repeated_name_are_refused() {
    let info = ArrayInfo::new(DType::F32, vec![3, 20, 30]);
    let data = sample(&info, 3);
    for (extra, name) in [
        (ArrayInfo::new(DType::F32, vec![3, 20, 31]), "Other"),
        (ArrayInfo::new(DType::U8, vec![3, 20, 30]), "Amplitude"),
        (ArrayInfo::new(DType::I16, vec![3, 20, 30]), "Codes"),
    ] {
        let dir = tmp(&format!("refused_channel_{name}"));
        let o = VdsWriteOptions {
            channels: vec![ChannelSpec {
                name: name.into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut w = VdsWriter::directory(&dir, false, o).unwrap();
        feed(&mut w, &info, &data);
        // The primary is done, the dataset not yet.
        assert!(!dir.exists());
        let e = w.begin(&extra).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Usage, "{name}: {e}");
        drop(w);
        assert!(!dir.exists(), "{name}");
    }
    let file = std::fs::File::create(tmp("one_channel.vds")).unwrap();
    let mut w = VdsWriter::container(Output::File(&file), VdsWriteOptions::default());
    feed(&mut w, &info, &data);
    assert!(w.begin(&info).is_err());
}

/// `Format::write_arrays` (what Python's `write_vds` calls with several arrays) checks every
/// channel's shape and format before it writes anything: nothing reaches the output, and the
/// error names both channels and both shapes. The writer's own check (a channel beginning
/// after the primary was written) names the primary too.
#[test]
fn write_arrays_refuses_a_channel_of_another_shape_before_writing() {
    let nd = |name: &str, dtype: DType, shape: &[u64]| {
        let info = ArrayInfo::new(dtype, shape.to_vec());
        NdArray {
            dtype,
            shape: shape.to_vec(),
            // int16 (which VDS does not store) as zeros: `sample` makes the VDS types only.
            data: match dtype {
                DType::I16 => vec![0; info.byte_len().unwrap() as usize],
                _ => sample(&info, 5),
            },
            name: Some(name.into()),
            attrs: Default::default(),
        }
    };
    let arrays = [nd("amp", DType::F32, &[3, 20, 30]), nd("vel", DType::F32, &[3, 20, 31])];
    let mut out = Vec::new();
    let e = VdsFormat
        .write_arrays(&arrays, &Default::default(), &WriteOptions::default(), &mut out)
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Usage, "{e}");
    for part in ["\"vel\"", "[3, 20, 31]", "\"amp\"", "[3, 20, 30]"] {
        assert!(e.message.contains(part), "{part} in {e}");
    }
    assert!(out.is_empty(), "{} bytes written", out.len());
    let arrays = [
        nd("amp", DType::F32, &[3, 20, 30]),
        nd("codes", DType::I16, &[3, 20, 30]),
    ];
    let e = VdsFormat
        .write_arrays(&arrays, &Default::default(), &WriteOptions::default(), &mut out)
        .unwrap_err();
    assert!(e.message.contains("\"codes\"") && e.message.contains("int16"), "{e}");
    assert!(out.is_empty());
    // The writer, fed channel by channel.
    let o = VdsWriteOptions {
        channels: vec![ChannelSpec {
            name: "vel".into(),
            ..Default::default()
        }],
        channel_name: Some("amp".into()),
        ..Default::default()
    };
    let file = std::fs::File::create(tmp("mismatch.vds")).unwrap();
    let mut w = VdsWriter::container(Output::File(&file), o);
    let info = ArrayInfo::new(DType::F32, vec![3, 20, 30]);
    feed(&mut w, &info, &sample(&info, 5));
    let e = w.begin(&ArrayInfo::new(DType::F32, vec![3, 21, 30])).unwrap_err();
    assert!(e.message.contains("\"vel\"") && e.message.contains("\"amp\""), "{e}");
}
