//! Write -> read -> compare with the test-support writer: every format, component count and
//! codec (None/RLE/Zip), margins, LODs, 4-D, extreme floats (NaN payloads, -0.0, infinities),
//! both storage kinds; physical values of U8/U16 channels.

use rasterpack_common::{Format, Input, Limits, Severity, ValidateOptions};
use rasterpack_vds_meta::layout::{VdsCompression, VdsSampleFormat};
use rasterpack_vds_meta::testsupport::{sample_data, write_container, write_dir, Spec};
use rasterpack_vds_meta::{VdsDataset, VdsFormat, VdsValues};

mod util;
use util::{read_box, read_channel};

fn check_container(spec: &Spec, data: &[u8]) {
    let bytes = write_container(spec, data);
    let input = Input::from_bytes("rt.vds", bytes);
    assert!(VdsFormat.detect(&input.head(64)));
    let r = VdsFormat.validate(&input, &ValidateOptions::default());
    let bad: Vec<_> = r.findings.iter().filter(|f| f.severity != Severity::Info).collect();
    assert!(bad.is_empty(), "{spec:?}: {bad:?}");
    let ds = VdsDataset::from_input(input.clone(), Limits::default()).unwrap();
    let li = ds.lod0_layer(0).unwrap();
    let got = ds.read_layer(li, VdsValues::Native).unwrap().data;
    assert!(
        got == data,
        "{:?} {:?} {:?} comps {}: LOD0 differs",
        spec.format,
        spec.compression,
        spec.dims,
        spec.components
    );
    // LODs: voxel v of LOD n is LOD0 voxel v << n (the writer subsamples).
    for l in ds.layers() {
        let g = l.geometry.as_ref().unwrap();
        if g.lod == 0 {
            continue;
        }
        let li = ds.layers().iter().position(|x| x.name() == l.name()).unwrap();
        let got = ds.read_layer(li, VdsValues::Native).unwrap().data;
        let elem = spec.format.native_bytes() * spec.components as usize;
        let mut full = [1u64; 6];
        full[..spec.dims.len()].copy_from_slice(&spec.dims);
        let mut k = 0;
        for z in 0..g.shape[2] {
            for y in 0..g.shape[1] {
                for x in 0..g.shape[0] {
                    let src = (((z << g.lod).min(full[2] - 1) * full[1] + (y << g.lod).min(full[1] - 1)) * full[0]
                        + (x << g.lod).min(full[0] - 1)) as usize;
                    assert_eq!(
                        &got[k * elem..(k + 1) * elem],
                        &data[src * elem..(src + 1) * elem],
                        "{} voxel {x},{y},{z}",
                        l.name()
                    );
                    k += 1;
                }
            }
        }
    }
}

#[test]
fn every_format_and_codec() {
    let formats = [
        (VdsSampleFormat::Bit1, 1),
        (VdsSampleFormat::U8, 1),
        (VdsSampleFormat::U8, 4),
        (VdsSampleFormat::U16, 1),
        (VdsSampleFormat::U16, 2),
        (VdsSampleFormat::R32, 1),
        (VdsSampleFormat::R32, 4),
        (VdsSampleFormat::U32, 1),
        (VdsSampleFormat::R64, 1),
        (VdsSampleFormat::R64, 2),
        (VdsSampleFormat::U64, 1),
    ];
    for (format, components) in formats {
        for compression in [VdsCompression::None, VdsCompression::RLE, VdsCompression::Zip] {
            let spec = Spec {
                dims: vec![37, 20, 9],
                format,
                components,
                compression,
                ..Default::default()
            };
            let data = sample_data(&spec, 7);
            check_container(&spec, &data);
        }
    }
}

#[test]
fn margins_lods_and_pages() {
    for compression in [VdsCompression::None, VdsCompression::RLE, VdsCompression::Zip] {
        let spec = Spec {
            dims: vec![70, 45, 33],
            negative_margin: 4,
            positive_margin: 4,
            lod_levels: 2,
            compression,
            page_entries: 3,
            unwritten: vec![1],
            ..Default::default()
        };
        let mut data = sample_data(&spec, 3);
        // Chunk 1 is left unwritten: it reads as 0 (no NoValue); zero its owned region.
        let bytes = write_container(&spec, &data);
        let ds = VdsDataset::from_input(Input::from_bytes("m.vds", bytes), Limits::default()).unwrap();
        let g = ds.layers()[ds.lod0_layer(0).unwrap()].geometry.clone().unwrap();
        let e = g.chunk_extent(1);
        for z in e.owned_min[2]..e.owned_max[2] {
            for y in e.owned_min[1]..e.owned_max[1] {
                for x in e.owned_min[0]..e.owned_max[0] {
                    let k = ((z * 45 + y) * 70 + x) as usize * 4;
                    data[k..k + 4].copy_from_slice(&0f32.to_le_bytes());
                }
            }
        }
        let li = ds.lod0_layer(0).unwrap();
        assert_eq!(ds.read_layer(li, VdsValues::Native).unwrap().data, data);
        assert_eq!(ds.layers().len(), 3);
    }
    // 4-D with a constant region.
    let spec = Spec {
        dims: vec![33, 5, 6, 4],
        compression: VdsCompression::RLE,
        ..Default::default()
    };
    let mut data = sample_data(&spec, 5);
    for v in data.chunks_exact_mut(4).take(33 * 5 * 6) {
        v.copy_from_slice(&0.5f32.to_le_bytes());
    }
    check_container(&spec, &data);
}

#[test]
fn extreme_floats() {
    let specials32 = [
        f32::NAN,
        f32::from_bits(0x7fc0_1234),
        f32::from_bits(0xffa0_0001),
        -0.0,
        0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MIN_POSITIVE,
        f32::MAX,
        f32::MIN,
        1e-45,
    ];
    let specials64 = [
        f64::NAN,
        f64::from_bits(0x7ff8_dead_beef_0001),
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::MAX,
        f64::MIN,
        5e-324,
    ];
    for compression in [VdsCompression::None, VdsCompression::RLE, VdsCompression::Zip] {
        let spec = Spec {
            dims: vec![11, 3, 2],
            compression,
            ..Default::default()
        };
        let data: Vec<u8> = (0..66)
            .flat_map(|i| specials32[i % specials32.len()].to_le_bytes())
            .collect();
        check_container(&spec, &data);
        let spec = Spec {
            dims: vec![11, 3, 2],
            compression,
            format: VdsSampleFormat::R64,
            ..Default::default()
        };
        let data: Vec<u8> = (0..66)
            .flat_map(|i| specials64[i % specials64.len()].to_le_bytes())
            .collect();
        check_container(&spec, &data);
        // -0.0 everywhere: all-equal but must not become a 0.0 constant.
        let spec = Spec {
            dims: vec![5, 4, 3],
            compression,
            ..Default::default()
        };
        let data: Vec<u8> = (0..60).flat_map(|_| (-0.0f32).to_le_bytes()).collect();
        check_container(&spec, &data);
    }
    let spec = Spec {
        dims: vec![9, 2, 2],
        format: VdsSampleFormat::U64,
        ..Default::default()
    };
    let data: Vec<u8> = (0..36u64)
        .flat_map(|i| [0, 1, u64::MAX, u64::MAX - 1][i as usize % 4].to_le_bytes())
        .collect();
    check_container(&spec, &data);
}

#[test]
fn quantized_physical_values() {
    let spec = Spec {
        dims: vec![20, 10, 6],
        format: VdsSampleFormat::U8,
        integer_scale: 0.01,
        integer_offset: -1.25,
        use_no_value: true,
        no_value: -999.25,
        compression: VdsCompression::RLE,
        ..Default::default()
    };
    let data = sample_data(&spec, 11);
    let bytes = write_container(&spec, &data);
    let ds = VdsDataset::from_input(Input::from_bytes("q.vds", bytes), Limits::default()).unwrap();
    let a = read_channel(&ds, None, true).unwrap();
    assert_eq!(a.shape, vec![6, 10, 20]);
    for (k, c) in a.data.chunks_exact(4).enumerate() {
        let v = f32::from_le_bytes(c.try_into().unwrap());
        let want = if data[k] == 255 {
            -999.25f32
        } else {
            -1.25f32 + 0.01f32 * data[k] as f32
        };
        assert_eq!(v.to_bits(), want.to_bits());
    }
    let spec = Spec {
        dims: vec![20, 10, 6],
        format: VdsSampleFormat::U16,
        integer_scale: 0.5,
        integer_offset: 1500.0,
        ..Default::default()
    };
    let data = sample_data(&spec, 12);
    let ds = VdsDataset::from_input(
        Input::from_bytes("q.vds", write_container(&spec, &data)),
        Limits::default(),
    )
    .unwrap();
    let a = read_channel(&ds, None, true).unwrap();
    for (k, c) in a.data.chunks_exact(4).enumerate() {
        let code = u16::from_le_bytes([data[2 * k], data[2 * k + 1]]);
        assert_eq!(
            f32::from_le_bytes(c.try_into().unwrap()),
            1500.0f32 + 0.5f32 * code as f32
        );
    }
}

#[test]
fn object_store_directory() {
    let dir = std::env::temp_dir().join(format!("rp-vds-dir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let spec = Spec {
        dims: vec![40, 40, 12],
        compression: VdsCompression::Zip,
        lod_levels: 1,
        page_entries: 2,
        unwritten: vec![2],
        ..Default::default()
    };
    let data = sample_data(&spec, 9);
    write_dir(&spec, &data, &dir).unwrap();
    assert!(VdsFormat.detect_dir(&dir));
    let input = Input::open(&dir).unwrap();
    let r = VdsFormat.validate(&input, &ValidateOptions::default());
    let bad: Vec<_> = r.findings.iter().filter(|f| f.severity != Severity::Info).collect();
    assert!(bad.is_empty(), "{bad:?}");
    let ds = VdsDataset::from_input(input.clone(), Limits::default()).unwrap();
    let cbytes = write_container(&spec, &data);
    let cds = VdsDataset::from_input(Input::from_bytes("c.vds", cbytes), Limits::default()).unwrap();
    assert_eq!(
        ds.read_layer(0, VdsValues::Native).unwrap().data,
        cds.read_layer(0, VdsValues::Native).unwrap().data
    );
    // A chunk object that disagrees with its metadata header is found.
    let side = format!("{}.objmeta.json", dir.display());
    let text = std::fs::read_to_string(&side).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["objects"]["Dimensions_012LOD0/0"]["x-amz-meta-vdschunkmetadata"] = "AAAAAAAAAAE=".into();
    std::fs::write(&side, v.to_string()).unwrap();
    let r = VdsFormat.validate(&input, &ValidateOptions::default());
    assert!(r.findings.has_code("vds.object_metadata.mismatch"), "{:?}", r.findings);
    // A missing chunk object is found.
    std::fs::remove_file(dir.join("Dimensions_012LOD0/0")).unwrap();
    let r = VdsFormat.validate(&input, &ValidateOptions::default());
    assert!(r.findings.has_code("vds.chunk.missing"), "{:?}", r.findings);
    // An object no written chunk accounts for.
    std::fs::write(dir.join("Dimensions_012LOD0/2"), b"x").unwrap();
    std::fs::write(dir.join("Dimensions_012LOD0/notachunk"), b"x").unwrap();
    let r = VdsFormat.validate(&input, &ValidateOptions::default());
    assert!(
        r.findings.has_code("vds.chunk.orphan") && r.findings.has_code("vds.store.unknown_object"),
        "{:?}",
        r.findings
    );
    // LayerStatus disagreeing with the pages and the geometry.
    let ls_path = dir.join("LayerStatus");
    let ls: serde_json::Value = serde_json::from_slice(&std::fs::read(&ls_path).unwrap()).unwrap();
    let mut bad = ls.clone();
    bad[0]["validChunkCount"] = 1.into();
    bad[0]["pageDirectory"] = serde_json::json!([0]);
    bad[0]["serializedSize"] = 5.into();
    std::fs::write(&ls_path, bad.to_string()).unwrap();
    let r = VdsFormat.validate(&input, &ValidateOptions::default());
    for code in [
        "vds.layer.valid_chunk_count",
        "vds.layer_status.page_directory",
        "vds.layer.serialized_size",
    ] {
        assert!(r.findings.has_code(code), "{code}: {:?}", r.findings);
    }
    let mut bad = ls.clone();
    bad[0]["chunkCount"] = 3.into();
    bad[0]["pageDirectory"] = serde_json::json!([0, 1]);
    std::fs::write(&ls_path, bad.to_string()).unwrap();
    let r = VdsFormat.validate(&input, &ValidateOptions::default());
    assert!(r.findings.has_code("vds.layer.chunk_count"), "{:?}", r.findings);
    let mut bad = ls.clone();
    bad[0]["layerName"] = "NoSuchDimensions_012LOD0".into();
    std::fs::write(&ls_path, bad.to_string()).unwrap();
    let r = VdsFormat.validate(&input, &ValidateOptions::default());
    assert!(r.findings.has_code("vds.layer.unknown_channel"), "{:?}", r.findings);
    std::fs::write(&ls_path, ls.to_string()).unwrap();
    // A chunk-metadata page of the wrong size.
    std::fs::write(dir.join("Dimensions_012LOD0/ChunkMetadata/0"), [0u8; 5]).unwrap();
    let r = VdsFormat.validate(&input, &ValidateOptions::default());
    assert!(r.findings.has_code("vds.layer.metadata_page_size"), "{:?}", r.findings);
    // A layout breaking the model.
    let lay_path = dir.join("VolumeDataLayout");
    let lay: serde_json::Value = serde_json::from_slice(&std::fs::read(&lay_path).unwrap()).unwrap();
    for (field, value, code) in [
        ("brickSize", serde_json::json!("BrickSize_48"), "vds.layout.brick_size"),
        ("negativeMargin", serde_json::json!(40), "vds.layout.margin"),
        ("lodLevels", serde_json::json!("LODLevels_13"), "vds.layout.lod_levels"),
    ] {
        let mut bad = lay.clone();
        bad["layoutDescriptor"][field] = value;
        std::fs::write(&lay_path, bad.to_string()).unwrap();
        let r = VdsFormat.validate(&input, &ValidateOptions::default());
        assert!(r.findings.has_code(code), "{code}: {:?}", r.findings);
    }
    let mut bad = lay.clone();
    bad["axisDescriptors"][0]["numSamples"] = 0.into();
    std::fs::write(&lay_path, bad.to_string()).unwrap();
    assert!(VdsFormat
        .validate(&input, &ValidateOptions::default())
        .findings
        .has_code("vds.layout.axis_size"));
    let mut bad = lay.clone();
    bad["channelDescriptors"][0]["format"] = "Format_U7".into();
    std::fs::write(&lay_path, bad.to_string()).unwrap();
    assert!(VdsFormat
        .validate(&input, &ValidateOptions::default())
        .findings
        .has_code("vds.layout.channel_format"));
    let mut bad = lay.clone();
    bad["metadata"][0]["type"] = "IntVector2".into();
    std::fs::write(&lay_path, bad.to_string()).unwrap();
    assert!(VdsFormat
        .validate(&input, &ValidateOptions::default())
        .findings
        .has_code("vds.layout.metadata_value"));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(side);
}

#[test]
fn box_reads_with_a_brick_cache() {
    let spec = Spec {
        dims: vec![70, 40, 20],
        negative_margin: 2,
        positive_margin: 2,
        compression: VdsCompression::RLE,
        lod_levels: 1,
        ..Default::default()
    };
    let data = sample_data(&spec, 21);
    let bytes = write_container(&spec, &data);
    let plain = VdsDataset::from_input(Input::from_bytes("c.vds", bytes.clone()), Limits::default()).unwrap();
    let mut cached = VdsDataset::from_input(Input::from_bytes("c.vds", bytes), Limits::default()).unwrap();
    cached.set_brick_cache(8 << 20);
    for li in 0..plain.layers().len() {
        let shape = plain.layers()[li].geometry.as_ref().unwrap().shape;
        // Every inline slice, then a crossline slice: neighbours share bricks.
        for z in 0..shape[2] {
            let (mut lo, mut hi) = ([0u64; 6], shape);
            lo[2] = z;
            hi[2] = z + 1;
            for values in [VdsValues::Native, VdsValues::Physical] {
                assert_eq!(
                    read_box(&plain, li, lo, hi, values).unwrap(),
                    read_box(&cached, li, lo, hi, values).unwrap()
                );
            }
        }
        let (mut lo, mut hi) = ([0u64; 6], shape);
        lo[1] = shape[1] / 2;
        hi[1] = lo[1] + 1;
        assert_eq!(
            read_box(&plain, li, lo, hi, VdsValues::Native).unwrap(),
            read_box(&cached, li, lo, hi, VdsValues::Native).unwrap()
        );
    }
    let (hits, misses) = cached.brick_cache_stats();
    assert!(hits > misses * 5, "hits {hits} misses {misses}");
}

#[test]
fn legacy_vdsobject_layout() {
    use rasterpack_vds_meta::testsupport::write_legacy_container;
    for compression in [VdsCompression::None, VdsCompression::RLE, VdsCompression::Zip] {
        let spec = Spec {
            dims: vec![40, 9, 5],
            compression,
            format: VdsSampleFormat::U16,
            integer_scale: 0.5,
            integer_offset: 10.0,
            lod_levels: 1,
            negative_margin: 1,
            positive_margin: 1,
            ..Default::default()
        };
        let data = sample_data(&spec, 13);
        let input = Input::from_bytes("legacy.vds", write_legacy_container(&spec, &data));
        let r = VdsFormat.validate(&input, &ValidateOptions::default());
        let bad: Vec<_> = r.findings.iter().filter(|f| f.severity != Severity::Info).collect();
        assert!(
            bad.is_empty() && r.findings.has_code("vds.legacy_layout.used"),
            "{:?}",
            r.findings
        );
        let ds = VdsDataset::from_input(input.clone(), Limits::default()).unwrap();
        assert_eq!(ds.layout().channels[0].integer_scale, 0.5);
        assert_eq!(ds.layout().metadata.len(), 2);
        assert_eq!(ds.layers().len(), 2);
        let a = read_channel(&ds, None, false).unwrap();
        assert_eq!(a.data, data);
        // Equal to the same dataset with a JSON layout.
        let js = VdsDataset::from_input(
            Input::from_bytes("j.vds", write_container(&spec, &data)),
            Limits::default(),
        )
        .unwrap();
        assert_eq!(
            serde_json::to_value(&js.layout().axes).unwrap(),
            serde_json::to_value(&ds.layout().axes).unwrap()
        );
        assert_eq!(
            serde_json::to_value(&js.layout().layout).unwrap(),
            serde_json::to_value(&ds.layout().layout).unwrap()
        );
    }
}

#[test]
fn object_store_without_page_directory() {
    let dir = std::env::temp_dir().join(format!("rp-vds-nopd-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let spec = Spec {
        dims: vec![70, 40, 12],
        compression: VdsCompression::RLE,
        page_entries: 2,
        unwritten: vec![1],
        ..Default::default()
    };
    let data = sample_data(&spec, 17);
    write_dir(&spec, &data, &dir).unwrap();
    let ls_path = dir.join("LayerStatus");
    let mut ls: serde_json::Value = serde_json::from_slice(&std::fs::read(&ls_path).unwrap()).unwrap();
    ls[0].as_object_mut().unwrap().remove("pageDirectory");
    std::fs::write(&ls_path, ls.to_string()).unwrap();
    let input = Input::open(&dir).unwrap();
    let r = VdsFormat.validate(&input, &ValidateOptions::default());
    assert!(r.is_valid(true), "{:?}", r.findings);
    let with = VdsDataset::from_input(
        Input::from_bytes("c.vds", write_container(&spec, &data)),
        Limits::default(),
    )
    .unwrap();
    let ds = VdsDataset::from_input(input.clone(), Limits::default()).unwrap();
    assert_eq!(ds.layers()[0].chunks, with.layers()[0].chunks);
    assert_eq!(
        ds.read_layer(0, VdsValues::Native).unwrap().data,
        with.read_layer(0, VdsValues::Native).unwrap().data
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(format!("{}.objmeta.json", dir.display()));
}
