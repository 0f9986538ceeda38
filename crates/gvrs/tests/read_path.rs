//! Reading never hands out data that validation rejects (issue 11, items 14 and 16): each
//! protected structure of a checksummed file is damaged in turn (one byte of its content, CRC
//! left as it was), then the file is validated and read through every entry point. The read must
//! fail with the finding validate reports (an invalid error, exit 1), or, for what the read does
//! not touch, succeed with the right values.

mod util;
use util::*;
mod craft;

use craft::{sample, Craft, El};
use rasterpack_common::{
    ArrayRequest, ErrorKind, Format, Input, InspectOptions, Limits, Report, Severity, ValidateOptions,
};
use rasterpack_gvrs::{GvrsFile, GvrsFormat};

fn input(b: &[u8]) -> Input {
    Input::from_bytes("t.gvrs", b.to_vec())
}

fn validate(b: &[u8]) -> Report {
    GvrsFormat.validate(&input(b), &ValidateOptions::default())
}

fn has_error(r: &Report, code: &str) -> bool {
    r.findings
        .iter()
        .any(|f| f.severity == Severity::Error && f.code == code)
}

fn u64_at(b: &[u8], at: usize) -> usize {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize
}

fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize
}

fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// Record start of the tile directory (header offset 80 holds its content offset).
fn tile_dir(b: &[u8]) -> usize {
    u64_at(b, 80) - 8
}

/// Record start of stored tile `t` (compact references: content offset / 8).
fn tile_record(b: &[u8], t: usize) -> usize {
    u32_at(b, tile_dir(b) + 32 + 4 * t) * 8 - 8
}

/// Record start of the first metadata record (first entry of the metadata directory).
fn first_metadata(b: &[u8]) -> usize {
    u64_at(b, u64_at(b, 64) + 4) - 8
}

/// Flip one bit of the byte at `at`.
fn damage(b: &[u8], at: usize) -> Vec<u8> {
    let mut d = b.to_vec();
    d[at] ^= 0x10;
    d
}

/// The error of a failed read: its code, and that it is an invalid-file error (exit 1).
fn invalid_code<T: std::fmt::Debug>(r: rasterpack_common::Result<T>) -> String {
    let e = r.expect_err("the read must fail");
    assert_eq!(e.kind, ErrorKind::Invalid, "{e:?}");
    e.code.to_string()
}

/// Every way of reading data fails with `code`.
fn reads_fail(b: &[u8], code: &str) {
    let inp = input(b);
    for e in 0..4 {
        let req = ArrayRequest {
            element: Some(["a", "b", "c", "d"][e].into()),
            ..Default::default()
        };
        assert_eq!(
            invalid_code(GvrsFormat.read_array(&inp, &req)),
            code,
            "read_array element {e}"
        );
    }
    match GvrsFile::from_input(inp.clone(), Limits::default()) {
        Err(e) => assert_eq!(e.code, code),
        Ok(f) => {
            for e in 0..4 {
                assert_eq!(invalid_code(read_el(&f, e, false)), code);
            }
        }
    }
    // A lenient open (what inspect and validate use) must not hand out values either.
    match GvrsFile::from_input(inp, Limits::default()) {
        Err(e) => assert_eq!(e.code, code),
        Ok(f) => {
            assert_eq!(invalid_code(read_el(&f, 0, false)), code);
            assert_eq!(invalid_code(read_window(&f, 0, 0, 0, 7, 9, false)), code);
        }
    }
}

/// `inspect` reports `code` (as a finding, or as its error when nothing can be shown).
fn inspect_reports(b: &[u8], code: &str) {
    match GvrsFormat.inspect(&input(b), &InspectOptions::default()) {
        Err(e) => assert_eq!(e.code, code),
        Ok(rep) => assert!(rep.findings.iter().any(|f| f.code == code), "{:#?}", rep.findings),
    }
}

#[test]
fn damaged_header_is_refused() {
    let (_, good) = sample(true);
    // Fields that index data (tile columns, rows), the first element's name, and the element
    // count (the header then no longer parses: the CRC still names the cause).
    for at in [116, 104, 294, 282] {
        let b = damage(&good, at);
        assert!(has_error(&validate(&b), "gvrs.header.crc_mismatch"), "byte {at}");
        reads_fail(&b, "gvrs.header.crc_mismatch");
        inspect_reports(&b, "gvrs.header.crc_mismatch");
    }
}

#[test]
fn damaged_tile_directory_is_refused_and_inspect_claims_nothing() {
    let (_, good) = sample(true);
    let td = tile_dir(&good);
    // An entry, the window (row0) and the format byte.
    for at in [td + 32, td + 16, td + 8] {
        let b = damage(&good, at);
        assert!(
            has_error(&validate(&b), "gvrs.tile_directory.crc_mismatch"),
            "byte {at}"
        );
        reads_fail(&b, "gvrs.tile_directory.crc_mismatch");
        let rep = GvrsFormat.inspect(&input(&b), &InspectOptions::default()).unwrap();
        assert!(rep
            .findings
            .iter()
            .any(|f| f.code == "gvrs.tile_directory.crc_mismatch"));
        assert!(
            rep.summary["populated_tiles"].is_null(),
            "{:?}",
            rep.summary["populated_tiles"]
        );
    }
}

#[test]
fn damaged_tile_fails_its_reads_only() {
    let (c, good) = sample(true);
    let rec = tile_record(&good, 0);
    // A byte of element a's block, and the tile index itself.
    for at in [rec + 16, rec + 8] {
        let b = damage(&good, at);
        let r = validate(&b);
        assert!(has_error(&r, "gvrs.tile.crc_mismatch"), "byte {at}: {:#?}", r.findings);
        reads_fail(&b, "gvrs.tile.crc_mismatch");
        let f = GvrsFile::from_input(input(&b), Limits::default()).unwrap();
        // Tile 0 covers rows 0..4, columns 0..5: any cell there fails, every other tile reads.
        assert_eq!(invalid_code(cell(&f, 0, 1, 1)), "gvrs.tile.crc_mismatch");
        assert_eq!(
            invalid_code(read_window(&f, 1, 0, 0, 2, 9, false)),
            "gvrs.tile.crc_mismatch"
        );
        let cols = c.cols as i64;
        match cell(&f, 0, 1, 7).unwrap() {
            rasterpack_gvrs::GvrsCellValue::Integer(v) => assert_eq!(v as i64, cols + 7),
            v => panic!("{v:?}"),
        }
        let rep = GvrsFormat.inspect(&input(&b), &InspectOptions::default()).unwrap();
        assert!(rep
            .findings
            .iter()
            .any(|f| f.severity == Severity::Error && f.code == "gvrs.tile.crc_mismatch"));
    }
}

#[test]
fn damaged_metadata_is_never_shown() {
    let (_, good) = sample(true);
    let md = first_metadata(&good);
    let b = damage(&good, md + 12);
    assert!(has_error(&validate(&b), "gvrs.metadata.crc_mismatch"));
    let f = GvrsFile::from_input(input(&b), Limits::default()).unwrap();
    let recs = f.metadata().unwrap();
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].as_ref().unwrap_err().code, "gvrs.metadata.crc_mismatch");
    assert!(recs[1].is_ok());
    let rep = GvrsFormat.inspect(&input(&b), &InspectOptions::default()).unwrap();
    assert!(rep.findings.iter().any(|f| f.code == "gvrs.metadata.crc_mismatch"));
    assert_eq!(
        rep.summary["metadata"].as_array().unwrap().len(),
        1,
        "only the intact record"
    );
    // The grid does not depend on metadata: values still read.
    assert!(read_el(&f, 0, false).is_ok());

    let mdd = u64_at(&good, 64) - 8;
    let b = damage(&good, mdd + 22);
    assert!(has_error(&validate(&b), "gvrs.metadata_directory.crc_mismatch"));
    let f = GvrsFile::from_input(input(&b), Limits::default()).unwrap();
    assert_eq!(
        invalid_code(f.metadata()).as_str(),
        "gvrs.metadata_directory.crc_mismatch"
    );
}

#[test]
fn damaged_file_space_records() {
    let (_, good) = sample(true);
    let fsd = u64_at(&good, 56) - 8;
    let b = damage(&good, fsd + 12);
    assert!(has_error(&validate(&b), "gvrs.file_space_directory.crc_mismatch"));
    let f = GvrsFile::from_input(input(&b), Limits::default()).unwrap();
    assert_eq!(
        invalid_code(f.file_space_directory()),
        "gvrs.file_space_directory.crc_mismatch"
    );
    // Reading cells does not touch free space: it still works.
    assert!(read_el(&f, 0, false).is_ok());
    // A free-space record's CRC covers its first 8 bytes (its length).
    let free = u64_at(&good, fsd + 12);
    let len = i32_at(&good, free);
    let mut b = good.clone();
    b[free + 5] = 1;
    let r = validate(&b);
    assert!(
        has_error(&r, "gvrs.free_space.crc_mismatch"),
        "{len}: {:#?}",
        r.findings
    );
    assert!(read_el(&GvrsFile::from_input(input(&b), Limits::default()).unwrap(), 1, false).is_ok());
}

/// Without checksums, the index consistency still protects the reads: a tile directory whose
/// window moved, or a tile record holding another index, fails the read.
#[test]
fn index_consistency_without_checksums() {
    let (_, good) = sample(false);
    assert!(validate(&good).is_valid(false));
    // Swap two directory entries: each record's index no longer matches its position.
    let td = tile_dir(&good);
    let mut b = good.clone();
    for k in 0..4 {
        b.swap(td + 32 + k, td + 36 + k);
    }
    assert!(has_error(&validate(&b), "gvrs.tile.index_mismatch"));
    reads_fail(&b, "gvrs.tile.index_mismatch");
    // The directory window pushed outside the tile grid.
    let mut b = good.clone();
    b[td + 20] = 1; // col0 = 1 with a window as wide as the grid
    assert!(has_error(&validate(&b), "gvrs.tile_directory.bounds"));
    reads_fail(&b, "gvrs.tile_directory.bounds");
    // The header's tile-directory reference pointed at another record.
    let mut b = good.clone();
    let md = (u64_at(&good, 64) as u64).to_le_bytes();
    b[80..88].copy_from_slice(&md);
    assert!(has_error(&validate(&b), "gvrs.tile_directory.record_type"));
    reads_fail(&b, "gvrs.tile_directory.record_type");
}

/// A closed file without a tile directory is invalid: it is not read as all fill.
#[test]
fn missing_tile_directory_is_not_all_fill() {
    let c = Craft::new(4, 4, 4, 4, vec![El::int("a", 0)]);
    let mut b = c.build();
    b[80..88].fill(0);
    c.seal_header(&mut b);
    assert!(has_error(&validate(&b), "gvrs.tile_directory.missing"));
    let e = GvrsFormat.read_array(&input(&b), &ArrayRequest::default()).unwrap_err();
    assert_eq!(
        (e.kind, e.code.as_ref()),
        (ErrorKind::Invalid, "gvrs.tile_directory.missing")
    );
}

/// The hostile corpus file that validate rejects (`gvrs.tile.index_mismatch`) is not converted.
#[test]
fn hostile_index_mismatch_file_is_not_read() {
    let Some(root) = rasterpack_common::testkit::corpus_dir("") else {
        return;
    };
    let path = std::path::Path::new(&root).join("hostile/gvrs_30000x30000_invalid_but_convert_ok.gvrs");
    let inp = Input::open(&path).unwrap();
    assert!(has_error(
        &GvrsFormat.validate(&inp, &ValidateOptions::default()),
        "gvrs.tile.index_mismatch"
    ));
    // Streamed (as convert reads it): the first band holding a misplaced tile stops the read.
    let mut sink = Discard(0);
    let e = GvrsFormat
        .stream_array(&inp, &ArrayRequest::default(), &mut sink)
        .unwrap_err();
    assert_eq!(
        (e.kind, e.code.as_ref()),
        (ErrorKind::Invalid, "gvrs.tile.index_mismatch")
    );
    // In memory, the 3.6 GB array is refused before anything is decoded.
    let e = GvrsFormat.read_array(&inp, &ArrayRequest::default()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::LimitExceeded, "{e}");
}

/// A random-access sink that counts and drops what it gets.
struct Discard(u64);

impl rasterpack_common::ArraySink for Discard {
    fn begin(&mut self, _: &rasterpack_common::ArrayInfo) -> rasterpack_common::Result<()> {
        Ok(())
    }
    fn random_access(&self) -> bool {
        true
    }
    fn write_at(&mut self, _: u64, data: &[u8]) -> rasterpack_common::Result<()> {
        self.0 += data.len() as u64;
        Ok(())
    }
    fn fill_at(&mut self, _: u64, len: u64, _: &[u8]) -> rasterpack_common::Result<()> {
        self.0 += len;
        Ok(())
    }
    fn finish(&mut self) -> rasterpack_common::Result<()> {
        Ok(())
    }
}
