//! Reads agree with OpenVDS on unwritten and constant chunks and never hand out data that
//! validation rejects: every structure protecting the bytes read is corrupted in turn and the
//! read must fail (issue 11, VDS items). Datasets come from the test-support writer; the
//! wavelet-specific structures use the corpus dataset `p12_objdir_3d_wavelet` when
//! `RASTERPACK_CORPUS` is set.

use std::path::{Path, PathBuf};

use rasterpack_common::{ArrayRequest, ErrorKind, Format, Input, Limits, Severity, ValidateOptions};
use rasterpack_vds_meta::layout::{VdsCompression, VdsSampleFormat};
use rasterpack_vds_meta::testsupport::{sample_data, write_container, write_dir, Spec};
use rasterpack_vds_meta::{VdsDataset, VdsFormat};
use serde_json::Value;

mod util;
use util::read_channel;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rasterpack-vds-read-checks-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn open_dir(dir: &Path) -> VdsDataset {
    VdsDataset::from_input(
        Input::Dir {
            path: dir.to_path_buf(),
        },
        Limits::default(),
    )
    .unwrap()
}

fn read(input: &Input, physical: bool, element: Option<&str>) -> rasterpack_common::Result<rasterpack_common::NdArray> {
    VdsFormat.read_array(
        input,
        &ArrayRequest {
            physical,
            element: element.map(str::to_string),
            ..Default::default()
        },
    )
}

fn dir_input(dir: &Path) -> Input {
    Input::Dir {
        path: dir.to_path_buf(),
    }
}

fn validate(input: &Input) -> rasterpack_common::Report {
    VdsFormat.validate(input, &ValidateOptions::default())
}

/// Unwritten bricks of quantized channels without NoValue read as the code of 0.0.
#[test]
fn unwritten_quantized_bricks_read_the_code_of_zero() {
    for (format, offset, scale, code) in [
        (VdsSampleFormat::U8, -1.0, 5.0 / 255.0, 51u32),
        (VdsSampleFormat::U8, -1.25, 2.5 / 255.0, 128),
        // f32 arithmetic: 1 / f32(2/255) = 127.49999, so 0.0 quantizes to 127 here.
        (VdsSampleFormat::U8, -1.0, 2.0 / 255.0, 127),
        (VdsSampleFormat::U16, -1.0, 2.0 / 65535.0, 32768),
        (VdsSampleFormat::U8, 0.5, 0.01, 0), // 0.0 below the range: code 0
    ] {
        let spec = Spec {
            format,
            integer_offset: offset,
            integer_scale: scale,
            unwritten: vec![1],
            ..Default::default()
        };
        let data = sample_data(&spec, 3);
        let input = Input::from_bytes("u.vds", write_container(&spec, &data));
        let ds = VdsDataset::from_input(input.clone(), Limits::default()).unwrap();
        let li = ds.lod0_layer(0).unwrap();
        let g = ds.layers()[li].geometry.clone().unwrap();
        let e = g.chunk_extent(1);
        let native = read_channel(&ds, None, false).unwrap();
        let phys = read_channel(&ds, None, true).unwrap();
        let nb = format.native_bytes();
        // First voxel owned by chunk 1.
        let [x, y, z] = [e.owned_min[0], e.owned_min[1], e.owned_min[2]];
        let k = (x + y * spec.dims[0] + z * spec.dims[0] * spec.dims[1]) as usize;
        let got = if nb == 1 {
            native.data[k] as u32
        } else {
            u16::from_le_bytes([native.data[2 * k], native.data[2 * k + 1]]) as u32
        };
        assert_eq!(got, code, "{format:?} offset {offset} scale {scale}");
        assert_eq!(f32::from_le_bytes(phys.data[4 * k..4 * k + 4].try_into().unwrap()), 0.0);
    }
}

/// A U64 constant chunk whose f32 is 2^64 (u64::MAX stored as a float) reads 0, like OpenVDS.
#[test]
fn u64_constant_at_two_to_the_64_reads_zero() {
    let dir = tmp("u64");
    let spec = Spec {
        format: VdsSampleFormat::U64,
        dims: vec![40, 24, 20],
        ..Default::default()
    };
    let data = sample_data(&spec, 5);
    write_dir(&spec, &data, &dir).unwrap();
    let layer = dir.join("Dimensions_012LOD0");
    let mut page = std::fs::read(layer.join("ChunkMetadata/0")).unwrap();
    let hash: u64 = 0x0101_0101_0000_0000 | (18_446_744_073_709_551_616.0f32).to_bits() as u64;
    page[0..8].copy_from_slice(&hash.to_le_bytes());
    std::fs::write(layer.join("ChunkMetadata/0"), page).unwrap();
    std::fs::write(layer.join("0"), b"").unwrap();
    // The sidecar's header for chunk 0 belongs to the old data chunk: drop it (constant
    // chunks carry none that is compared).
    let side = PathBuf::from(format!("{}.objmeta.json", dir.display()));
    let mut meta: Value = serde_json::from_slice(&std::fs::read(&side).unwrap()).unwrap();
    meta["objects"].as_object_mut().unwrap().remove("Dimensions_012LOD0/0");
    std::fs::write(&side, serde_json::to_vec(&meta).unwrap()).unwrap();
    let ds = open_dir(&dir);
    let a = read_channel(&ds, None, false).unwrap();
    assert_eq!(&a.data[..8], &[0u8; 8], "first voxel of the constant chunk");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A channel declared in the layout but never written: valid with a warning, read as
/// unwritten bricks with the warning attached to the array.
#[test]
fn declared_but_unwritten_channel_reads_as_unwritten() {
    let dir = tmp("unwritten-channel");
    let spec = Spec::default();
    write_dir(&spec, &sample_data(&spec, 7), &dir).unwrap();
    let mut layout: Value = serde_json::from_slice(&std::fs::read(dir.join("VolumeDataLayout")).unwrap()).unwrap();
    let mut extra = layout["channelDescriptors"][0].clone();
    extra["name"] = "Quality".into();
    extra["format"] = "Format_U8".into();
    extra["integerOffset"] = (-1.0).into();
    extra["integerScale"] = (5.0 / 255.0).into();
    layout["channelDescriptors"].as_array_mut().unwrap().push(extra);
    std::fs::write(dir.join("VolumeDataLayout"), serde_json::to_vec(&layout).unwrap()).unwrap();
    let input = dir_input(&dir);
    let r = validate(&input);
    assert!(r.is_valid(false), "{:?}", r.findings);
    assert!(r.findings.has_code("vds.channel.unwritten"), "{:?}", r.findings);
    let a = read(&input, false, Some("Quality")).unwrap();
    assert_eq!(a.shape, vec![20, 24, 40]);
    assert!(a.data.iter().all(|&b| b == 51), "unwritten U8 code of 0.0");
    assert!(a.attrs["warnings"].as_array().unwrap()[0]
        .as_str()
        .unwrap()
        .contains("vds.channel.unwritten"));
    let p = read(&input, true, Some("Quality")).unwrap();
    assert!(p
        .data
        .chunks_exact(4)
        .all(|c| f32::from_le_bytes(c.try_into().unwrap()) == 0.0));
    let _ = std::fs::remove_dir_all(&dir);
}

fn rle_dir(name: &str) -> PathBuf {
    let dir = tmp(name);
    let spec = Spec {
        compression: VdsCompression::RLE,
        page_entries: 4,
        ..Default::default()
    };
    write_dir(&spec, &sample_data(&spec, 11), &dir).unwrap();
    dir
}

fn assert_read_fails(input: &Input, code: &str) {
    for physical in [false, true] {
        let e = read(input, physical, None).expect_err("a read of damaged data must fail");
        assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
        assert_eq!(e.code, code, "{e}");
    }
    let r = validate(input);
    assert!(!r.is_valid(false), "validate must reject it too");
}

/// Object store: the object's metadata header disagrees with the page ("Inconsistent
/// metadata for chunk" in OpenVDS), a page truncated to 20 bytes, a missing listed page, a
/// page directory too short, a chunk object missing, a corrupt RLE body.
#[test]
fn damaged_object_store_structures_fail_reads() {
    // Header vs page.
    let dir = rle_dir("header");
    let side = PathBuf::from(format!("{}.objmeta.json", dir.display()));
    let mut meta: Value = serde_json::from_slice(&std::fs::read(&side).unwrap()).unwrap();
    let key = "Dimensions_012LOD0/1";
    let h = meta["objects"][key]["x-amz-meta-vdschunkmetadata"]
        .as_str()
        .unwrap()
        .to_string();
    let mut b = rasterpack_vds_meta::layout::base64_decode(&h).unwrap();
    b[0] ^= 1;
    meta["objects"][key]["x-amz-meta-vdschunkmetadata"] = rasterpack_vds_meta::layout::base64_encode(&b).into();
    std::fs::write(&side, serde_json::to_vec(&meta).unwrap()).unwrap();
    assert_read_fails(&dir_input(&dir), "vds.object_metadata.mismatch");
    let _ = std::fs::remove_dir_all(&dir);

    // Metadata page truncated to 20 bytes (2.5 entries of 4).
    let dir = rle_dir("page");
    let p = dir.join("Dimensions_012LOD0/ChunkMetadata/0");
    let page = std::fs::read(&p).unwrap();
    std::fs::write(&p, &page[..20]).unwrap();
    assert_read_fails(&dir_input(&dir), "vds.layer.metadata_page_size");
    let _ = std::fs::remove_dir_all(&dir);

    // A page the directory lists but the store lacks.
    let dir = rle_dir("missing-page");
    std::fs::remove_file(dir.join("Dimensions_012LOD0/ChunkMetadata/0")).unwrap();
    assert_read_fails(&dir_input(&dir), "vds.layer.metadata_page_missing");
    let _ = std::fs::remove_dir_all(&dir);

    // A page directory shorter than the pages.
    let dir = rle_dir("pagedir");
    let mut st: Value = serde_json::from_slice(&std::fs::read(dir.join("LayerStatus")).unwrap()).unwrap();
    st[0]["pageDirectory"].as_array_mut().unwrap().pop();
    std::fs::write(dir.join("LayerStatus"), serde_json::to_vec(&st).unwrap()).unwrap();
    let e = read(&dir_input(&dir), false, None).unwrap_err();
    assert_eq!(e.code, "vds.layer_status.page_directory", "{e}");
    let _ = std::fs::remove_dir_all(&dir);

    // A written chunk without its object.
    let dir = rle_dir("object");
    std::fs::remove_file(dir.join("Dimensions_012LOD0/1")).unwrap();
    assert_read_fails(&dir_input(&dir), "vds.chunk.missing");
    let _ = std::fs::remove_dir_all(&dir);

    // A chunk body whose RLE runs overrun (its header stays intact).
    let dir = rle_dir("body");
    let p = dir.join("Dimensions_012LOD0/0");
    let mut b = std::fs::read(&p).unwrap();
    b[36] = 0xFF;
    b[37] = 0xFF;
    std::fs::write(&p, &b).unwrap();
    let e = read(&dir_input(&dir), false, None).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid);
    assert!(e.message.contains("chunk 0"), "the error names the chunk: {e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Container: a descriptor that disagrees with the geometry, a chunk extent outside the file.
#[test]
fn damaged_container_structures_fail_reads() {
    let spec = Spec {
        compression: VdsCompression::Zip,
        ..Default::default()
    };
    let good = write_container(&spec, &sample_data(&spec, 13));
    let ds = VdsDataset::from_input(Input::from_bytes("g.vds", good.clone()), Limits::default()).unwrap();
    let c = ds.container().unwrap();
    let f = c.file("Dimensions_012LOD0").unwrap();
    let (off, len) = f.extent(0);
    let (off, len) = (off as u64, len as u64);
    assert!(len > 24);
    // Descriptor: sizeX + 1.
    let mut b = good.clone();
    let at = off as usize + 4;
    let v = i32::from_le_bytes(b[at..at + 4].try_into().unwrap()) + 1;
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    assert_read_fails(&Input::from_bytes("d.vds", b), "vds.chunk.descriptor_geometry");
    // zlib stream: flip a byte of the Adler-32 trailer.
    let mut b = good.clone();
    b[(off + len) as usize - 1] ^= 0x5A;
    assert_read_fails(&Input::from_bytes("z.vds", b), "vds.chunk.zip_corrupt");
}

fn corpus_p12() -> Option<PathBuf> {
    let d = rasterpack_common::testkit::corpus_dir("vds")?.join("p12_objdir_3d_wavelet");
    assert!(d.is_dir(), "the corpus lacks {}", d.display());
    Some(d)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
            let mut perm = std::fs::metadata(&t).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perm.set_readonly(false);
            std::fs::set_permissions(&t, perm).unwrap();
        }
    }
}

/// The wavelet structures: 28-byte entry serialized size, the header's copy of the levels,
/// the level table itself (validation), a truncated or corrupted wavelet body.
#[test]
fn damaged_wavelet_structures_fail_reads() {
    let Some(src) = corpus_p12() else {
        eprintln!("RASTERPACK_CORPUS not set: skipping the wavelet read checks");
        return;
    };
    let fresh = |name: &str| {
        let d = tmp(name);
        copy_dir(&src, &d);
        let side = PathBuf::from(format!("{}.objmeta.json", src.display()));
        std::fs::copy(side, format!("{}.objmeta.json", d.display())).unwrap();
        d
    };
    let layer = "Dimensions_012LOD0";
    let good = fresh("w-good");
    assert!(validate(&dir_input(&good)).is_valid(true));
    let ds = open_dir(&good);
    let l = ds.layer(layer).unwrap();
    let i = l
        .chunks
        .stored()
        .find(|(_, m)| m.status() == rasterpack_vds_meta::chunk::VdsChunkStatus::Data)
        .unwrap()
        .0 as usize;
    let ps = l.status.page_size as usize;
    let (page, slot) = (i / ps, i % ps);
    drop(ds);
    let _ = std::fs::remove_dir_all(&good);

    // Serialized size of the 28-byte entry.
    let d = fresh("w-size");
    let p = d.join(format!("{layer}/ChunkMetadata/{page}"));
    let mut b = std::fs::read(&p).unwrap();
    b[slot * 28] ^= 1;
    std::fs::write(&p, &b).unwrap();
    assert_read_fails(&dir_input(&d), "vds.chunk.serialized_size");
    let _ = std::fs::remove_dir_all(&d);

    // The levels in the page (the object header keeps the written copy).
    let d = fresh("w-levels");
    let p = d.join(format!("{layer}/ChunkMetadata/{page}"));
    let mut b = std::fs::read(&p).unwrap();
    b[slot * 28 + 13] = b[slot * 28 + 13].wrapping_add(1);
    std::fs::write(&p, &b).unwrap();
    assert_read_fails(&dir_input(&d), "vds.object_metadata.mismatch");
    // Validation also checks the table against the body: a level too small to decode.
    let side = PathBuf::from(format!("{}.objmeta.json", d.display()));
    let mut meta: Value = serde_json::from_slice(&std::fs::read(&side).unwrap()).unwrap();
    b[slot * 28 + 13] = 1; // level 1 keeps 1/255 of the chunk
    std::fs::write(&p, &b).unwrap();
    let mut hv = b[slot * 28 + 4..slot * 28 + 12].to_vec();
    hv.extend_from_slice(&b[slot * 28 + 12..slot * 28 + 28]);
    meta["objects"][format!("{layer}/{i}")]["x-amz-meta-vdschunkmetadata"] =
        rasterpack_vds_meta::layout::base64_encode(&hv).into();
    std::fs::write(&side, serde_json::to_vec(&meta).unwrap()).unwrap();
    let r = validate(&dir_input(&d));
    assert!(
        r.findings
            .iter()
            .any(|f| f.code == "vds.chunk.levels_mismatch" && f.severity == Severity::Error),
        "{:?}",
        r.findings
    );
    let _ = std::fs::remove_dir_all(&d);

    // A truncated wavelet body (size fields patched to agree: the body itself is short).
    let d = fresh("w-trunc");
    let p = d.join(format!("{layer}/{i}"));
    let mut b = std::fs::read(&p).unwrap();
    let cut = b.len() - 100;
    b.truncate(cut);
    b[4..8].copy_from_slice(&(cut as i32).to_le_bytes());
    std::fs::write(&p, &b).unwrap();
    let mp = d.join(format!("{layer}/ChunkMetadata/{page}"));
    let mut m = std::fs::read(&mp).unwrap();
    m[slot * 28..slot * 28 + 4].copy_from_slice(&(cut as u32).to_le_bytes());
    std::fs::write(&mp, &m).unwrap();
    let e = read(&dir_input(&d), true, None).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    assert!(e.message.contains(&format!("chunk {i}")), "{e}");
    let r = validate(&dir_input(&d));
    assert!(!r.is_valid(false));
    let _ = std::fs::remove_dir_all(&d);

    // A corrupted coefficient stream header (the value count of bit plane 0).
    let d = fresh("w-stream");
    let p = d.join(format!("{layer}/{i}"));
    let mut b = std::fs::read(&p).unwrap();
    b[44] ^= 0x10;
    std::fs::write(&p, &b).unwrap();
    let e = read(&dir_input(&d), true, None).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    let _ = std::fs::remove_dir_all(&d);
}
