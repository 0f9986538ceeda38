//! Crafted files: valid samples of every element type decode exactly; each kind of damage gives
//! its finding (never a panic); truncation and byte-flip sweeps over small files.

mod util;
use util::*;
mod craft;

use craft::{reseal, sample, text, Craft, El, Meta};
use rasterpack_common::{
    ArrayRequest, DType, ErrorKind, Format, Input, InspectOptions, Limits, Report, Severity, ValidateOptions,
};
use rasterpack_gvrs::{GvrsCellValue, GvrsFile, GvrsFormat};

fn validate(bytes: &[u8]) -> Report {
    GvrsFormat.validate(
        &Input::from_bytes("t.gvrs", bytes.to_vec()),
        &ValidateOptions::default(),
    )
}

fn codes(r: &Report, sev: Severity) -> Vec<String> {
    r.findings
        .iter()
        .filter(|f| f.severity == sev)
        .map(|f| f.code.clone())
        .collect()
}

fn assert_clean(r: &Report) {
    let bad: Vec<_> = r.findings.iter().filter(|f| f.severity != Severity::Info).collect();
    assert!(bad.is_empty() && !r.unsupported, "unexpected findings: {bad:#?}");
}

fn has_error(r: &Report, code: &str) -> bool {
    r.findings
        .iter()
        .any(|f| f.severity == Severity::Error && f.code == code)
}

fn open(bytes: &[u8]) -> GvrsFile {
    GvrsFile::from_input(Input::from_bytes("t.gvrs", bytes.to_vec()), Limits::default()).unwrap()
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Content offset of tile `t` in a crafted file (compact directory at the file's end).
fn tile_content(b: &[u8], t: usize) -> usize {
    let td = u64::from_le_bytes(b[80..88].try_into().unwrap()) as usize;
    u32_at(b, td + 24 + 4 * t) as usize * 8
}

#[test]
fn crafted_sample_is_valid_and_decodes_exactly() {
    for checksums in [false, true] {
        let (c, bytes) = sample(checksums);
        let r = validate(&bytes);
        assert_clean(&r);
        let f = open(&bytes);
        assert_eq!(f.elements.len(), 4);
        assert_eq!(f.metadata().unwrap().len(), 2);
        let cols = c.cols as u32;
        for e in 0..4 {
            let a = read_el(&f, e, false).unwrap();
            assert_eq!(a.shape, vec![7, 9]);
            for r in 0..7u32 {
                for col in 0..9u32 {
                    let v = (e as u32 * 1000 + r * cols + col) as i64;
                    // Tile 2 (tile row 1, tile col 0: rows 4.., columns ..5) is absent: fill.
                    let absent = r >= 4 && col < 5;
                    let k = (r * 9 + col) as usize;
                    match (e, a.dtype) {
                        (0, DType::I32) => {
                            let got = i32::from_le_bytes(a.data[k * 4..k * 4 + 4].try_into().unwrap());
                            assert_eq!(got as i64, if absent { -9999 } else { v });
                        }
                        (1, DType::I16) => {
                            let got = i16::from_le_bytes(a.data[k * 2..k * 2 + 2].try_into().unwrap());
                            assert_eq!(got as i64, if absent { -1 } else { v });
                        }
                        (2, DType::F32) => {
                            let got = f32::from_le_bytes(a.data[k * 4..k * 4 + 4].try_into().unwrap());
                            assert!(if absent { got.is_nan() } else { got == v as f32 });
                        }
                        (3, DType::F32) => {
                            let got = f32::from_le_bytes(a.data[k * 4..k * 4 + 4].try_into().unwrap());
                            let want = v as i32 as f32 / 100.0 + -2.0;
                            assert!(if absent {
                                got.is_nan()
                            } else {
                                got.to_bits() == want.to_bits()
                            });
                            if !absent {
                                assert_eq!(
                                    cell(&f, 3, r, col).unwrap(),
                                    GvrsCellValue::IntCodedFloat {
                                        value: want,
                                        code: v as i32
                                    }
                                );
                            }
                        }
                        x => panic!("unexpected {x:?}"),
                    }
                }
            }
        }
        // Model <-> grid coordinates round trip.
        let (x, y) = f.grid_to_model(6.0, 8.0);
        assert_eq!((x, y), (104.0, 47.0));
        assert_eq!(f.model_to_grid(x, y), (6.0, 8.0));
    }
}

#[test]
fn element_selection_and_volp_stacking() {
    let (_, bytes) = sample(true);
    let input = Input::from_bytes("t.gvrs", bytes);
    let e = GvrsFormat.read_array(&input, &ArrayRequest::default()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Usage);
    assert!(e.message.contains("a, b, c, d"), "{}", e.message);
    let volp = ArrayRequest {
        target: Some("volp"),
        ..Default::default()
    };
    assert_eq!(GvrsFormat.read_array(&input, &volp).unwrap_err().kind, ErrorKind::Usage);
    // Two float elements stack.
    let mut c = Craft::new(3, 4, 2, 2, vec![El::float("x", f32::NAN), El::float("y", -1.0)]);
    c.fill_tiles(|e, r, col| ((e * 100) as f32 + (r * 4 + col) as f32).to_bits() as i64);
    let input = Input::from_bytes("t.gvrs", c.build());
    let a = GvrsFormat.read_array(&input, &volp).unwrap();
    assert_eq!(a.shape, vec![2, 3, 4]);
    assert_eq!(f32::from_le_bytes(a.data[12 * 4..13 * 4].try_into().unwrap()), 100.0);
}

#[test]
fn truncated_files_are_invalid() {
    let (_, bytes) = sample(true);
    for cut in [0, 10, 16, 100, 300, bytes.len() / 2, bytes.len() - 1] {
        let r = validate(&bytes[..cut]);
        assert!(!r.is_valid(false), "cut at {cut}: {:#?}", r.findings);
    }
}

#[test]
fn bad_crcs_are_reported_per_record() {
    let (_, bytes) = sample(true);
    // A tile value byte.
    let mut b = bytes.clone();
    let t0 = tile_content(&b, 0);
    b[t0 + 10] ^= 0x01;
    let r = validate(&b);
    assert!(has_error(&r, "gvrs.tile.crc_mismatch"), "{:#?}", r.findings);
    assert_eq!(
        rasterpack_gvrs::validate::sidecar_code("gvrs.tile.crc_mismatch"),
        "CRC_MISMATCH"
    );
    // The header's product label.
    let mut b = bytes.clone();
    let at = b.windows(7).position(|w| w == b"crafted").unwrap();
    b[at] = b'C';
    assert!(has_error(&validate(&b), "gvrs.header.crc_mismatch"));
    // A metadata record.
    let mut b = bytes.clone();
    let at = b.windows(10).position(|w| w == b"rasterpack").unwrap();
    b[at] = b'R';
    assert!(has_error(&validate(&b), "gvrs.metadata.crc_mismatch"));
    // Checksums off but a CRC is set: warning only.
    let (_, mut b) = sample(false);
    let t0 = tile_content(&b, 0);
    let len = u32_at(&b, t0 - 8) as usize;
    b[t0 - 8 + len - 1] = 1;
    let r = validate(&b);
    assert!(r.is_valid(false) && codes(&r, Severity::Warning).contains(&"gvrs.tile.crc_nonzero".to_string()));
}

#[test]
fn tile_index_mismatch_wrong_type_outside_and_duplicates() {
    let (_, bytes) = sample(true);
    // Tile index in the record differs from its directory position.
    let mut b = bytes.clone();
    let t1 = tile_content(&b, 1);
    b[t1] = 7;
    reseal(&mut b, t1 - 8);
    assert!(has_error(&validate(&b), "gvrs.tile.index_mismatch"));
    // Directory entry pointing at a metadata record: wrong record type.
    let mut b = bytes.clone();
    let md = u64::from_le_bytes(b[64..72].try_into().unwrap()) as usize;
    let first_md = u64::from_le_bytes(b[md + 4..md + 12].try_into().unwrap()) as u32;
    let td = u64::from_le_bytes(b[80..88].try_into().unwrap()) as usize;
    b[td + 24..td + 28].copy_from_slice(&(first_md / 8).to_le_bytes());
    reseal(&mut b, td - 8);
    let r = validate(&b);
    assert!(has_error(&r, "gvrs.tile.record_type"), "{:#?}", r.findings);
    // Directory entry pointing outside the file.
    let mut b = bytes.clone();
    b[td + 24..td + 28].copy_from_slice(&u32::MAX.to_le_bytes());
    reseal(&mut b, td - 8);
    assert!(has_error(&validate(&b), "gvrs.tile_directory.entry_outside_file"));
    // Two entries pointing at the same tile record.
    let mut b = bytes.clone();
    let e0 = b[td + 24..td + 28].to_vec();
    b[td + 28..td + 32].copy_from_slice(&e0);
    reseal(&mut b, td - 8);
    let r = validate(&b);
    assert!(
        has_error(&r, "gvrs.tile_directory.duplicate_reference"),
        "{:#?}",
        r.findings
    );
    // Header directory offset beyond the file.
    let mut b = bytes.clone();
    b[80..88].copy_from_slice(&(1u64 << 40).to_le_bytes());
    Craft::new(1, 1, 1, 1, vec![]).seal_header(&mut b);
    let r = validate(&b);
    assert!(!r.is_valid(false), "{:#?}", r.findings);
}

#[test]
fn overlapping_records_are_invalid() {
    let (_, mut b) = sample(false);
    // Grow tile 0's record over the next record (checksums off, so only the overlap shows).
    let t0 = tile_content(&b, 0);
    let len = u32_at(&b, t0 - 8);
    let crc_at = t0 - 8 + len as usize - 4;
    b[t0 - 8..t0 - 4].copy_from_slice(&(len + 16).to_le_bytes());
    // The old CRC position now lies inside the record's padding: keep it zero.
    b[crc_at..crc_at + 4].copy_from_slice(&[0; 4]);
    let next_len = u32_at(&b, t0 - 8 + len as usize) as usize;
    let _ = next_len;
    let r = validate(&b);
    assert!(has_error(&r, "gvrs.record.overlap"), "{:#?}", r.findings);
}

#[test]
fn block_rules() {
    let el = El::int("v", 0);
    // Codec index outside the list, and an unknown codec name (unsupported, not invalid).
    let mut c = Craft::new(4, 4, 4, 4, vec![el.clone()]);
    c.codecs = vec!["MyCodec".into()];
    c.tiles.push((0, vec![vec![0, 1, 2, 3, 4]]));
    let r = validate(&c.build());
    assert!(r.is_valid(false) && r.unsupported, "{:#?}", r.findings);
    assert!(r.findings.iter().any(|f| f.code == "gvrs.header.codec_unknown"));
    let input = Input::from_bytes("t", c.build());
    let err = GvrsFormat.read_array(&input, &ArrayRequest::default()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unsupported);
    c.tiles[0].1[0][0] = 3;
    assert!(has_error(&validate(&c.build()), "gvrs.tile.codec_index"));
    // Block longer than the uncompressed size.
    let mut c = Craft::new(2, 2, 2, 2, vec![el.clone()]);
    c.tiles.push((0, vec![vec![0; 20]]));
    assert!(has_error(&validate(&c.build()), "gvrs.tile.block_length"));
    // A compressed block that does not decode.
    let mut c = Craft::new(4, 4, 4, 4, vec![el.clone()]);
    c.codecs = vec!["GvrsDeflate".into()];
    c.tiles
        .push((0, vec![vec![0, 1, 0, 0, 0, 0, 4, 0, 0, 0, 0x78, 0x9c, 1, 2]]));
    let r = validate(&c.build());
    assert!(!r.is_valid(false), "{:#?}", r.findings);
    // Short with an odd cell count: padded block; non-zero pad is a warning.
    let mut c = Craft::new(3, 3, 3, 3, vec![El::short("s", 0)]);
    c.fill_tiles(|_, r, col| (r * 3 + col) as i64);
    assert_eq!(c.tiles[0].1[0].len(), 20);
    assert_clean(&validate(&c.build()));
    c.tiles[0].1[0][19] = 9;
    let r = validate(&c.build());
    assert!(r.is_valid(false) && codes(&r, Severity::Warning).contains(&"gvrs.tile.padding_nonzero".into()));
}

#[test]
fn header_rules() {
    let el = El::int("v", 0);
    let mut c = Craft::new(2, 2, 2, 2, vec![el.clone()]);
    c.levels = 0;
    let r = validate(&c.build());
    assert!(r.is_valid(false) && codes(&r, Severity::Warning).contains(&"gvrs.header.levels".into()));
    let mut c = Craft::new(2, 2, 2, 2, vec![el.clone()]);
    c.opened_for_writing = 12345;
    let r = validate(&c.build());
    assert!(has_error(&r, "gvrs.header.opened_for_writing"));
    let mut c = Craft::new(2, 2, 2, 2, vec![El::int("1bad", 0), El::int("1bad", 0)]);
    c.checksums = false;
    let r = validate(&c.build());
    assert!(has_error(&r, "gvrs.element.identifier") && has_error(&r, "gvrs.element.duplicate_name"));
    let c = Craft::new(0, 2, 2, 2, vec![el.clone()]);
    assert!(has_error(&validate(&c.build()), "gvrs.header.grid_size"));
    let c = Craft::new(2, 2, 2, 2, vec![El::icf("z", 0.0, 0.0)]);
    assert!(has_error(&validate(&c.build()), "gvrs.element.scale"));
    // Standard (i64) references read the same.
    let mut c = Craft::new(3, 3, 2, 2, vec![el]);
    c.standard_references = true;
    c.fill_tiles(|_, r, col| (r * 3 + col) as i64);
    let b = c.build();
    assert_clean(&validate(&b));
    assert_eq!(cell(&open(&b), 0, 2, 2).unwrap(), GvrsCellValue::Integer(8));
}

#[test]
fn metadata_and_free_space_rules() {
    let (_, bytes) = sample(true);
    let f = open(&bytes);
    assert!(f.file_space_directory().unwrap().is_some());
    // Free-space size in the directory differs from the record.
    let mut b = bytes.clone();
    let fs = u64::from_le_bytes(b[56..64].try_into().unwrap()) as usize;
    b[fs + 12..fs + 16].copy_from_slice(&48i32.to_le_bytes());
    reseal(&mut b, fs - 8);
    assert!(has_error(&validate(&b), "gvrs.free_space.size_mismatch"));
    // Duplicate metadata key, bad identifier.
    let mut c = Craft::new(2, 2, 2, 2, vec![El::int("v", 0)]);
    for _ in 0..2 {
        c.metadata.push(Meta {
            name: "_x".into(),
            id: 3,
            ty: 9,
            content: text("a"),
            description: String::new(),
        });
    }
    let r = validate(&c.build());
    assert!(
        has_error(&r, "gvrs.metadata.duplicate_key") && has_error(&r, "gvrs.metadata.identifier"),
        "{:#?}",
        r.findings
    );
    // Every metadata type decodes.
    let mut c = Craft::new(2, 2, 2, 2, vec![El::int("v", 0)]);
    let payloads: Vec<(u8, Vec<u8>)> = vec![
        (0, vec![1, 2, 3]),
        (1, vec![0xff, 1]),
        (2, vec![0xff, 0xff, 2, 0, 0, 0, 0, 0]),
        (3, vec![0xff, 0xff, 2, 0, 0, 0, 0, 0]),
        (4, (-5i32).to_le_bytes().to_vec()),
        (5, u32::MAX.to_le_bytes().to_vec()),
        (6, 1.5f32.to_le_bytes().to_vec()),
        (7, f64::NAN.to_le_bytes().to_vec()),
        (8, text("Zoë")),
        (9, text("plain")),
        (6, vec![]),
    ];
    for (i, (ty, content)) in payloads.iter().enumerate() {
        c.metadata.push(Meta {
            name: format!("M{i}"),
            id: i as i32,
            ty: *ty,
            content: content.clone(),
            description: "d".into(),
        });
    }
    let b = c.build();
    assert_clean(&validate(&b));
    let rep = GvrsFormat
        .inspect(&Input::from_bytes("t", b), &InspectOptions::default())
        .unwrap();
    let md = rep.summary["metadata"].as_array().unwrap();
    let vals: Vec<String> = md.iter().map(|m| m["value"].to_string()).collect();
    assert_eq!(
        vals,
        [
            "null",
            "[-1,1]",
            "[-1,2]",
            "[65535,2]",
            "[-5]",
            "[4294967295]",
            "[1.5]",
            "[\"NaN\"]",
            "\"Zoë\"",
            "\"plain\"",
            "[]"
        ]
    );
}

/// parse + validate + inspect + read_array never panic on a damaged file.
fn exercise(bytes: &[u8]) {
    // Small limits keep damaged grid sizes from making the sweep slow (they are refused).
    let limits = Limits {
        max_array_bytes: 1 << 20,
        max_alloc: 16 << 20,
        ..Limits::default()
    };
    let input = Input::from_bytes("t.gvrs", bytes.to_vec());
    let _ = GvrsFormat.validate(
        &input,
        &ValidateOptions {
            limits,
            ..Default::default()
        },
    );
    let _ = GvrsFormat.inspect(&input, &InspectOptions { all: false, limits });
    if let Ok(f) = GvrsFile::from_input(input.clone(), limits) {
        for e in 0..f.elements.len() {
            let _ = read_el(&f, e, e % 2 == 0);
            let _ = cell(&f, e, 0, 0);
            let _ = read_window(&f, e, 0, 0, 1, 1, false);
        }
        let _ = f.metadata();
        let _ = f.file_space_directory();
    }
}

fn compressed_sample() -> Vec<u8> {
    use rasterpack_gvrs::codec::{self, Codec};
    let mut c = Craft::new(8, 8, 8, 8, vec![El::int("v", i32::MIN), El::float("f", f32::NAN)]);
    c.codecs = vec!["GvrsHuffman".into(), "GvrsDeflate".into(), "GvrsFloat".into()];
    let ints: Vec<i32> = (0..64).map(|i| (i / 8) * 3 + (i % 8) * 2).collect();
    let floats: Vec<f32> = (0..64).map(|i| i as f32 * 0.25).collect();
    let ib = codec::encode_int(&ints, 8, 8, &[(0, Codec::Huffman), (1, Codec::Deflate)]);
    let fb = codec::encode_float(&floats, 8, 8, &[(2, Codec::Float)]);
    let ib = ib.unwrap_or_else(|| ints.iter().flat_map(|v| v.to_le_bytes()).collect());
    let fb = fb.unwrap_or_else(|| floats.iter().flat_map(|v| v.to_le_bytes()).collect());
    c.tiles.push((0, vec![ib, fb]));
    let b = c.build();
    let f = open(&b);
    let a = read_el(&f, 0, false).unwrap();
    let want: Vec<u8> = ints.iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(a.data, want, "compressed crafted sample decodes");
    b
}

#[test]
fn truncation_and_flip_sweeps_never_panic() {
    let mut files = vec![sample(true).1, compressed_sample()];
    let mut small = Craft::new(3, 3, 2, 2, vec![El::short("s", 0)]);
    small.fill_tiles(|_, r, c| (r * 3 + c) as i64);
    files.push(small.build());
    for bytes in &files {
        for cut in 0..bytes.len() {
            exercise(&bytes[..cut]);
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0xff;
            exercise(&b);
            b[i] ^= 0xfe; // original ^ 0x01
            exercise(&b);
        }
    }
}

#[test]
fn hostile_sizes_are_refused_before_allocating() {
    let mut c = Craft::new(2, 2, 2, 2, vec![El::int("v", 0)]);
    c.checksums = false;
    let mut b = c.build();
    // Giant grid: whole-element read refused by the limit, cell reads fine (all fill).
    b[104..108].copy_from_slice(&i32::MAX.to_le_bytes());
    b[108..112].copy_from_slice(&i32::MAX.to_le_bytes());
    let f = open(&b);
    let lim = Limits {
        max_array_bytes: 1 << 20,
        ..Limits::default()
    };
    let f2 = GvrsFile::from_input(f.input().clone(), lim).unwrap();
    assert_eq!(read_el(&f2, 0, false).unwrap_err().kind, ErrorKind::LimitExceeded);
    assert_eq!(cell(&f, 0, 1 << 30, 1 << 30).unwrap(), GvrsCellValue::Integer(0));
    let r = validate(&b);
    assert!(!r.is_valid(false) || r.findings.iter().all(|f| f.severity != Severity::Error));
    // Header length beyond the file.
    let mut b = c.build();
    b[16..20].copy_from_slice(&i32::MAX.to_le_bytes());
    assert!(!validate(&b).is_valid(false));
    // Tile directory claiming 2^31 x 2^31 entries.
    let mut b = c.build();
    let td = u64::from_le_bytes(b[80..88].try_into().unwrap()) as usize;
    b[td + 16..td + 24].copy_from_slice(&[0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0x7f]);
    assert!(!validate(&b).is_valid(false));
}

/// Fuzz finding (gvrs_parse): a tile declared far larger than the grid, with a stored tile,
/// made a whole-element read allocate the tile's cells (tens of GB). Tile sizes are now checked
/// against `Limits::max_alloc` when the file is opened.
#[test]
fn regression_huge_tile_with_small_grid() {
    let mut c = Craft::new(2, 2, 2, 2, vec![El::int("v", 0)]);
    c.fill_tiles(|_, r, col| (r * 2 + col) as i64);
    let mut b = c.build();
    b[112..116].copy_from_slice(&50i32.to_le_bytes());
    b[116..120].copy_from_slice(&0x004d_26d7i32.to_le_bytes());
    c.seal_header(&mut b);
    let limits = Limits {
        max_alloc: 64 << 20,
        max_array_bytes: 16 << 20,
        ..Limits::default()
    };
    let input = Input::from_bytes("t", b.clone());
    let err = GvrsFile::from_input(input.clone(), limits).unwrap_err();
    assert_eq!(err.kind, ErrorKind::LimitExceeded);
    assert!(!GvrsFormat
        .validate(
            &input,
            &ValidateOptions {
                limits,
                ..Default::default()
            }
        )
        .is_valid(false));
    exercise(&b);
}

/// The crafted samples in `testdata/gvrs/` are these bytes (regenerate with
/// `GVRS_REGEN_TESTDATA=1 cargo test -p rasterpack-gvrs --test robustness testdata`).
#[test]
fn testdata_samples_are_current() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/gvrs");
    let samples = [
        ("crafted_all_types.gvrs", sample(true).1),
        ("crafted_compressed.gvrs", compressed_sample()),
    ];
    for (name, bytes) in samples {
        let path = dir.join(name);
        if std::env::var_os("GVRS_REGEN_TESTDATA").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        }
        let stored = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // The compressed sample's blocks come from the codec encoders, which may legitimately
        // change; it must still validate and decode.
        if !name.contains("compressed") {
            assert!(stored == bytes, "{name} is stale: regenerate it");
        }
        assert_clean(&validate(&stored));
    }
}

#[test]
fn damaged_tile_directory_does_not_hide_other_findings() {
    let (c, mut b) = sample(true);
    // Point the header's tile directory at the metadata directory, and damage a metadata record.
    let md = b[64..72].to_vec();
    b[80..88].copy_from_slice(&md);
    c.seal_header(&mut b);
    let at = b.windows(10).position(|w| w == b"rasterpack").unwrap();
    b[at] = b'R';
    let r = validate(&b);
    assert!(has_error(&r, "gvrs.tile_directory.record_type"), "{:#?}", r.findings);
    assert!(has_error(&r, "gvrs.metadata.crc_mismatch"), "{:#?}", r.findings);
    // Opening shows the header; reads refuse with the directory's finding.
    let f = GvrsFile::from_input(Input::from_bytes("t", b), Limits::default()).unwrap();
    assert_eq!(f.read_error().unwrap_err().code, "gvrs.tile_directory.record_type");
    assert_eq!(
        read_el(&f, 0, false).unwrap_err().code,
        "gvrs.tile_directory.record_type"
    );
}
