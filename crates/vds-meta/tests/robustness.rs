//! Hostile input: crafted corruptions give clear findings, and truncating or flipping any byte
//! of small datasets never panics.

use rasterpack_common::{ErrorKind, Format, Input, InspectOptions, Limits, Report, ValidateOptions};
use rasterpack_vds_meta::container::Container;
use rasterpack_vds_meta::layout::{VdsCompression, VdsSampleFormat};
use rasterpack_vds_meta::testsupport::{sample_data, write_container, write_dir, Spec};
use rasterpack_vds_meta::VdsFormat;

fn small(compression: VdsCompression, format: VdsSampleFormat) -> Vec<u8> {
    let spec = Spec {
        dims: vec![40, 9, 5],
        format,
        compression,
        page_entries: 1,
        ..Default::default()
    };
    write_container(&spec, &sample_data(&spec, 1))
}

fn validate(bytes: Vec<u8>) -> Report {
    VdsFormat.validate(&Input::from_bytes("x.vds", bytes), &ValidateOptions::default())
}

fn assert_code(r: &Report, code: &str) {
    assert!(!r.is_valid(false), "expected invalid with {code}: {:?}", r.findings);
    assert!(
        r.findings.iter().any(|f| f.code == code),
        "expected {code}: {:?}",
        r.findings
    );
}

/// Absolute position of chunk `i` of the first layer, and the offset of its index entry.
fn chunk_at(bytes: &[u8], i: usize) -> (usize, usize, usize) {
    let c = Container::open(&Input::from_bytes("x", bytes.to_vec()), &Limits::default()).unwrap();
    let f = c.files.iter().find(|f| f.entry.file_type == *b"VDS ").unwrap();
    let e = f.entry_at(i).unwrap();
    (e.offset as usize, e.length as usize, e.entry_offset as usize)
}

fn layer_entry(bytes: &[u8]) -> (usize, usize) {
    let c = Container::open(&Input::from_bytes("x", bytes.to_vec()), &Limits::default()).unwrap();
    let f = c.files.iter().find(|f| f.entry.file_type == *b"VDS ").unwrap();
    (
        f.entry.entry_offset as usize,
        f.page_dir.as_ref().unwrap().offset as usize,
    )
}

#[test]
fn crafted_corruptions() {
    let good = small(VdsCompression::RLE, VdsSampleFormat::R32);
    assert!(validate(good.clone()).is_valid(true));

    // Truncated container: the file table (at the end) is gone.
    let r = validate(good[..good.len() / 2].to_vec());
    assert_code(&r, "vds.container.file_table");

    // Index page pointing outside the file.
    let (_, pd) = layer_entry(&good);
    let mut b = good.clone();
    let at = pd + 16 + 12; // first index page offset
    b[at..at + 8].copy_from_slice(&(good.len() as i64 + 4096).to_le_bytes());
    assert_code(&validate(b), "vds.container.index_page");

    // A chunk extent outside the file.
    let (_, _, ie) = chunk_at(&good, 0);
    let mut b = good.clone();
    b[ie..ie + 8].copy_from_slice(&(good.len() as i64 - 4).to_le_bytes());
    assert_code(&validate(b), "vds.container.chunk_extent");

    // Overlapping chunk extents.
    let (o0, _, _) = chunk_at(&good, 0);
    let (_, _, ie1) = chunk_at(&good, 1);
    let mut b = good.clone();
    b[ie1..ie1 + 8].copy_from_slice(&(o0 as i64 + 8).to_le_bytes());
    assert_code(&validate(b), "vds.container.overlap");

    // A bad RLE run: the first run claims 16384 units.
    let (o, _, _) = chunk_at(&good, 0);
    let mut b = good.clone();
    b[o + 36] = 0xBF;
    b[o + 37] = 0xFF;
    let r = validate(b.clone());
    assert!(
        r.findings.iter().any(|f| f.code.starts_with("vds.chunk.rle")),
        "{:?}",
        r.findings
    );
    let e = VdsFormat
        .read_array(&Input::from_bytes("x", b), &Default::default())
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid);
    assert!(e.code.starts_with("vds.chunk.rle"), "{e}");

    // Chunk descriptor disagreeing with the geometry / the channel format.
    let mut b = good.clone();
    b[o + 4..o + 8].copy_from_slice(&31i32.to_le_bytes());
    assert_code(&validate(b), "vds.chunk.descriptor_geometry");
    let mut b = good.clone();
    b[o + 16..o + 20].copy_from_slice(&5i32.to_le_bytes());
    assert_code(&validate(b), "vds.chunk.descriptor_format");

    // validChunkCount that does not match the written chunks.
    let mut b = good.clone();
    b[pd + 24..pd + 28].copy_from_slice(&7i32.to_le_bytes());
    assert_code(&validate(b), "vds.layer.valid_chunk_count");

    // A page directory chain that loops.
    let mut b = good.clone();
    b[pd..pd + 8].copy_from_slice(&(pd as i64).to_le_bytes());
    assert_code(&validate(b), "vds.container.revision_chain");

    // Bad magic is not VDS at all.
    let mut b = good.clone();
    b[0] = b'X';
    assert!(!VdsFormat.detect(&b[..64]));
    assert_code(&validate(b), "vds.container.magic");

    // Legacy layout: the JSON file renamed to an 'OBJ ' VDSObject: the text is not a Hue object.
    let c = Container::open(&Input::from_bytes("x", good.clone()), &Limits::default()).unwrap();
    let jf = c
        .files
        .iter()
        .find(|f| f.entry.file_type == *b"JSON")
        .unwrap()
        .entry
        .entry_offset as usize;
    let mut b = good.clone();
    b[jf + 20..jf + 24].copy_from_slice(b"OBJ ");
    b[jf + 32..jf + 48].copy_from_slice(b"VDSObject\0\0\0\0\0\0\0");
    let r = validate(b.clone());
    assert_code(&r, "vds.legacy_layout.syntax");
    // ... and structural findings are still reported beside the fatal one.
    let (_, pd2) = layer_entry(&good);
    let mut b2 = b;
    b2[pd2 + 24..pd2 + 28].copy_from_slice(&0i32.to_le_bytes());
    let (_, _, ie1) = chunk_at(&good, 1);
    b2[ie1 + 12] = 1; // reserved field
    let r = validate(b2);
    assert_code(&r, "vds.legacy_layout.syntax");
    assert!(r.findings.has_code("vds.container.reserved"), "{:?}", r.findings);

    // Bad zlib data in a Zip layer.
    let zgood = small(VdsCompression::Zip, VdsSampleFormat::R32);
    let (o, len, _) = chunk_at(&zgood, 0);
    let mut b = zgood.clone();
    b[o + len - 2] ^= 0x55; // Adler-32
    let r = validate(b);
    assert!(
        r.findings.iter().any(|f| f.code.starts_with("vds.chunk.zip")),
        "{:?}",
        r.findings
    );
}

#[test]
fn zlib_bomb_is_bounded() {
    let dir = std::env::temp_dir().join(format!("rp-vds-bomb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let spec = Spec {
        dims: vec![32, 32, 32],
        compression: VdsCompression::Zip,
        ..Default::default()
    };
    write_dir(&spec, &sample_data(&spec, 2), &dir).unwrap();
    // 64 MiB of zeros behind a descriptor that announces 128 KiB.
    let obj = dir.join("Dimensions_012LOD0/0");
    let mut b = std::fs::read(&obj).unwrap()[..24].to_vec();
    b.extend_from_slice(&miniz_oxide::deflate::compress_to_vec_zlib(&vec![0u8; 64 << 20], 1));
    std::fs::write(&obj, b).unwrap();
    let input = Input::open(&dir).unwrap();
    let r = VdsFormat.validate(&input, &ValidateOptions::default());
    assert_code(&r, "vds.chunk.zip_size");
    let e = VdsFormat.read_array(&input, &Default::default()).unwrap_err();
    assert_eq!(e.code, "vds.chunk.zip_size");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(format!("{}.objmeta.json", dir.display()));
}

fn exercise(bytes: Vec<u8>) {
    let input = Input::from_bytes("sweep.vds", bytes);
    let _ = VdsFormat.validate(&input, &ValidateOptions::default());
    let _ = VdsFormat.inspect(&input, &InspectOptions::default());
    let _ = VdsFormat.read_array(&input, &Default::default());
}

#[test]
fn truncation_and_flip_sweep() {
    for (c, f) in [
        (VdsCompression::None, VdsSampleFormat::R32),
        (VdsCompression::RLE, VdsSampleFormat::U8),
        (VdsCompression::Zip, VdsSampleFormat::U16),
    ] {
        let spec = Spec {
            dims: vec![20, 6, 4],
            format: f,
            compression: c,
            page_entries: 1,
            ..Default::default()
        };
        let good = write_container(&spec, &sample_data(&spec, 4));
        for cut in 0..good.len() {
            exercise(good[..cut].to_vec());
        }
        for i in 0..good.len() {
            let mut b = good.clone();
            b[i] ^= 0xFF;
            exercise(b);
            let mut b = good.clone();
            b[i] ^= 0x01;
            exercise(b);
        }
    }
}

#[test]
fn object_store_flip_sweep() {
    let dir = std::env::temp_dir().join(format!("rp-vds-flip-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let spec = Spec {
        dims: vec![20, 6, 4],
        compression: VdsCompression::RLE,
        page_entries: 2,
        lod_levels: 1,
        ..Default::default()
    };
    write_dir(&spec, &sample_data(&spec, 8), &dir).unwrap();
    let input = Input::open(&dir).unwrap();
    let mut files = vec![dir.join("VolumeDataLayout"), dir.join("LayerStatus")];
    for l in ["Dimensions_012LOD0", "Dimensions_012LOD1"] {
        for e in std::fs::read_dir(dir.join(l)).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                files.push(p);
            }
        }
        files.push(dir.join(l).join("ChunkMetadata/0"));
    }
    for f in files {
        let good = std::fs::read(&f).unwrap();
        // JSON documents: every byte; binary objects: every byte too (they are small).
        for i in 0..good.len() {
            let mut b = good.clone();
            b[i] ^= if i % 2 == 0 { 0xFF } else { 0x01 };
            std::fs::write(&f, &b).unwrap();
            let _ = VdsFormat.validate(&input, &ValidateOptions::default());
            let _ = VdsFormat.read_array(&input, &Default::default());
        }
        for cut in (0..good.len()).step_by(7) {
            std::fs::write(&f, &good[..cut]).unwrap();
            let _ = VdsFormat.validate(&input, &ValidateOptions::default());
        }
        std::fs::write(&f, &good).unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(format!("{}.objmeta.json", dir.display()));
}
