//! The read path runs every check that protects the bytes it hands out (issue 11, items 10 and
//! 16): each protected structure is damaged in turn and read; the read fails with the finding
//! `validate` reports (exit 1), never with values, and the intact tables still read.

use rasterpack_common::{ArrayRequest, ErrorKind, Format, Input, Limits, NdArray, Result, Severity};
use rasterpack_udf::compress::word_hash;
use rasterpack_udf::raw::name_hash;
use rasterpack_udf::{codes, parse, validate, Hint, Prim, TableSpec, UdfEncoding, UdfFile, UdfFormat, UdfWriter};
use serde_json::json;

/// The values of the SimpleU32 table `cz`, and its stream assembled by hand from the opcode
/// table in `compress.rs`: +5, +1, +1, repeat 2, +99992 (20-bit delta), table slot of 5.
const CZ_VALUES: [u32; 7] = [5, 6, 7, 7, 7, 100_000, 5];

fn cz_stream() -> Vec<u8> {
    let slot = |v: u32| (word_hash(v) % 64) as u8;
    for other in [6, 7, 100_000] {
        assert_ne!(slot(other), slot(5), "the hand-made stream assumes no slot collision");
    }
    vec![0x04, 0x00, 0x00, 0xE1, 0xC1, 0x86, 0x97, 0x80 | slot(5)]
}

/// root: good f32 [3], title text, meta JSON, jarr JSON [2], pts coord f32 [3]+[2], idx u16 INDEX
/// into pts, rng u32 RANGE into pts, colors rgb u8 related to pts, cz (patched to SimpleU32),
/// child -> child dataset with v u8 [2].
fn base() -> Vec<u8> {
    let mut w = UdfWriter::new("READ").unwrap();
    let root = w.add_dataset("ROOT").unwrap();
    let child = w.add_dataset("CHLD").unwrap();
    w.set_root(root);
    w.add(root, TableSpec::array("good", &[3], &[1.5f32, 2.5, -3.0]))
        .unwrap();
    w.add(root, TableSpec::text("title", "hello", UdfEncoding::Utf8))
        .unwrap();
    w.add(root, TableSpec::json("meta", &json!({"a": 1}))).unwrap();
    w.add(root, TableSpec::json_shaped("jarr", &json!([1, 2]), &[2]))
        .unwrap();
    w.add(
        root,
        TableSpec::array("pts", &[3], &[0f32, 0., 1., 0., 1., 1.]).with_hint(Hint::Coord, &[2]),
    )
    .unwrap();
    w.add(
        root,
        TableSpec::array("idx", &[4], &[0u16, 1, 2, 0])
            .with_hint(Hint::Index, &[])
            .index_into("pts"),
    )
    .unwrap();
    w.add(
        root,
        TableSpec::array("rng", &[2], &[0u32, 1, 1, 3])
            .with_hint(Hint::Range, &[2])
            .index_into("pts"),
    )
    .unwrap();
    w.add(
        root,
        TableSpec::array("colors", &[3], &[255u8, 0, 0, 0, 255, 0, 0, 0, 255])
            .with_hint(Hint::Rgb, &[3])
            .related("pts"),
    )
    .unwrap();
    w.add(root, TableSpec::array("cz", &[8], &cz_stream())).unwrap();
    w.add(root, TableSpec::link("child", Some(child))).unwrap();
    w.add(child, TableSpec::array("v", &[2], &[7u8, 9])).unwrap();
    let mut b = w.to_bytes().unwrap();
    // cz: u32 1-D of 7 values, compression 17, the 8 stream bytes as data.
    let d = desc(&b, "root/cz");
    set_u16(&mut b, d + 4, parse::encode_type_info(Prim::U32, 1, Hint::None));
    set_u16(&mut b, d + 6, 17);
    set_u32(&mut b, d + 0x14, CZ_VALUES.len() as u32);
    b
}

fn lenient(bytes: &[u8]) -> UdfFile {
    UdfFile::open_lenient(&Input::from_bytes("t", bytes.to_vec()), &Limits::default())
}

fn desc(bytes: &[u8], path: &str) -> usize {
    lenient(bytes).find(path).unwrap().1.desc_offset as usize
}

fn data(bytes: &[u8], path: &str) -> usize {
    lenient(bytes).find(path).unwrap().1.data_offset.unwrap() as usize
}

fn set_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn set_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn read(bytes: &[u8], element: &str) -> Result<NdArray> {
    let req = ArrayRequest {
        element: Some(element.into()),
        ..Default::default()
    };
    UdfFormat.read_array(&Input::from_bytes("t", bytes.to_vec()), &req)
}

fn errors(bytes: &[u8]) -> Vec<String> {
    let doc = validate::validate(&Input::from_bytes("t", bytes.to_vec()), &Limits::default());
    doc.findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| f.code.clone())
        .collect()
}

/// Every numeric table of the intact file with its array.
fn arrays(bytes: &[u8]) -> Vec<(String, NdArray)> {
    [
        "root/good",
        "root/pts",
        "root/idx",
        "root/rng",
        "root/colors",
        "root/cz",
        "root/child/v",
    ]
    .iter()
    .map(|p| (p.to_string(), read(bytes, p).unwrap()))
    .collect()
}

/// `damaged` is refused for each of `refused` with `code` (and `validate` reports `code`);
/// the tables in `intact` read exactly as in the undamaged file.
#[track_caller]
fn check(damaged: &[u8], code: &str, refused: &[&str], intact: &[&str]) {
    let errs = errors(damaged);
    assert!(errs.iter().any(|e| e == code), "validate: want {code}, got {errs:?}");
    for p in refused {
        let e = read(damaged, p).expect_err(p);
        assert_eq!((e.kind, e.code.as_ref()), (ErrorKind::Invalid, code), "{p}: {e}");
    }
    let good = arrays(&base());
    for p in intact {
        let want = &good.iter().find(|(n, _)| n == p).unwrap().1;
        let got = read(damaged, p).unwrap_or_else(|e| panic!("{p} is intact but: {e}"));
        assert_eq!((&got.shape, &got.data), (&want.shape, &want.data), "{p}");
    }
}

#[test]
fn the_intact_file_reads() {
    let b = base();
    assert!(errors(&b).is_empty(), "{:?}", errors(&b));
    let cz = read(&b, "root/cz").unwrap();
    assert_eq!(cz.to_f64(), CZ_VALUES.iter().map(|&v| v as f64).collect::<Vec<_>>());
    assert_eq!(read(&b, "root/idx").unwrap().to_f64(), vec![0.0, 1.0, 2.0, 0.0]);
}

#[test]
fn file_header_and_root() {
    let b = base();
    let mut m = b.clone();
    m[0] = b'X';
    check(&m, codes::BAD_MAGIC, &["root/good"], &[]);
    let mut m = b.clone();
    m[0x10] += 8; // root offset no longer 16-aligned
    check(&m, codes::OFFSET_MISALIGNED, &["root/good", "root/child/v"], &[]);
    let cut = &b[..40];
    let e = read(cut, "root/good").unwrap_err();
    assert_eq!((e.kind, e.code.as_ref()), (ErrorKind::Truncated, codes::TRUNCATED));
}

#[test]
fn dataset_headers() {
    let b = base();
    let f = lenient(&b);
    let (root, child) = (
        f.datasets()[0].location.offset as usize,
        f.datasets()[1].location.offset as usize,
    );
    // The check value: nothing of that dataset is read.
    let mut m = b.clone();
    m[child] ^= 1;
    check(
        &m,
        codes::DATASET_BAD_CHECK,
        &["root/child/v"],
        &["root/good", "root/cz"],
    );
    // header_size not a multiple of 8, or smaller than what it holds: where the data starts is
    // unknown, so every table of that dataset is refused.
    let mut m = b.clone();
    m[child + 0xC] += 1;
    check(&m, codes::DATASET_HEADER_SIZE_ALIGN, &["root/child/v"], &["root/good"]);
    let mut m = b.clone();
    set_u16(&mut m, child + 0xC, 0x18);
    check(&m, codes::DATASET_HEADER_SIZE_SMALL, &["root/child/v"], &["root/good"]);
    let mut m = b.clone();
    set_u16(&mut m, root + 0xC, 0x18);
    check(&m, codes::DATASET_HEADER_SIZE_SMALL, &["root/good", "root/pts"], &[]);
}

#[test]
fn descriptors_memory_ranges_and_shapes() {
    let b = base();
    let d = desc(&b, "root/good");
    let intact = ["root/pts", "root/idx", "root/cz", "root/child/v"];
    let mut m = b.clone();
    set_u32(&mut m, d + 0x08, 5); // mem_end < mem_start
    set_u32(&mut m, d + 0x0C, 2);
    check(&m, codes::TABLE_MEM_RANGE, &["root/good"], &intact);
    let mut m = b.clone();
    set_u32(&mut m, d + 0x10, 17); // data_size past the 16 bytes of mem
    check(&m, codes::TABLE_DATA_EXCEEDS_MEM, &["root/good"], &intact);
    let mut m = b.clone();
    set_u32(&mut m, d + 0x0C, 1 << 20); // mem_end past the dataset
    set_u32(&mut m, d + 0x08, (1 << 20) - 2);
    check(&m, codes::TABLE_OUT_OF_BOUNDS, &["root/good"], &intact);
    let mut m = b.clone();
    set_u32(&mut m, d + 0x14, 4); // shape [4] for 12 bytes of f32
    check(&m, codes::TABLE_SHAPE_SIZE, &["root/good"], &intact);
    let mut m = b.clone();
    set_u32(&mut m, d + 0x18, 5 << 24); // ghost axes [0, 5]: a gap
    check(&m, codes::SHAPE_GHOST_GAP, &["root/good"], &intact);
    let mut m = b.clone();
    m[d + 4] |= 0x40; // reserved type bit
    check(&m, codes::TABLE_RESERVED_BITS, &["root/good"], &intact);
    // A compression scheme rasterpack does not decode: unsupported, not invalid.
    let mut m = b.clone();
    set_u16(&mut m, d + 6, 5);
    let e = read(&m, "root/good").unwrap_err();
    assert_eq!(
        (e.kind, e.code.as_ref()),
        (ErrorKind::Unsupported, codes::TABLE_COMPRESSED)
    );
    assert!(errors(&m).is_empty(), "only a warning");
}

#[test]
fn names_and_lookups() {
    let b = base();
    let d = desc(&b, "root/good");
    let intact = ["root/pts", "root/cz", "root/child/v"];
    // A name key not in the lookup: the table is addressed by its index and refused.
    let mut m = b.clone();
    set_u32(&mut m, d, 0xDEAD_BEEF);
    check(&m, codes::TABLE_NAME_NOT_FOUND, &["root/#0"], &intact);
    // Its lookup entry past the string block.
    let f = lenient(&b);
    let entry = f.datasets()[0]
        .lookups
        .iter()
        .find(|l| l.hash == name_hash("good"))
        .unwrap()
        .entry_offset as usize;
    let mut m = b.clone();
    set_u16(&mut m, entry + 6, 0xFFFF);
    check(&m, codes::LOOKUP_OUT_OF_BOUNDS, &["root/#0"], &intact);
    // Two tables named `good`: both are ambiguous.
    let mut m = b.clone();
    set_u32(&mut m, desc(&b, "root/title"), name_hash("good"));
    check(&m, codes::TABLE_DUPLICATE_NAME, &["root/good"], &intact);
}

#[test]
fn references_between_tables() {
    let b = base();
    let intact = ["root/good", "root/cz", "root/child/v"];
    // INDEX target that is not 1-D.
    let mut m = b.clone();
    set_u32(&mut m, desc(&b, "root/idx") + 0x1C, name_hash("meta"));
    check(&m, codes::INDEX_TARGET_DIM, &["root/idx"], &intact);
    // related table of another real shape.
    let mut m = b.clone();
    set_u32(&mut m, desc(&b, "root/colors") + 0x20, name_hash("jarr"));
    m[desc(&b, "root/jarr") + 0x14] = 5;
    check(&m, codes::RELATED_SHAPE, &["root/colors"], &intact);
    // A DATASET entry no longer 16-aligned: the link table is refused, the child is not reached.
    let mut m = b.clone();
    m[data(&b, "root/child")] += 8;
    check(
        &m,
        codes::OFFSET_MISALIGNED,
        &["root/child", "root/child/v"],
        &["root/good", "root/cz"],
    );
}

#[test]
fn table_contents() {
    let b = base();
    let intact = ["root/good", "root/pts", "root/cz", "root/child/v"];
    // Index and range values.
    let mut m = b.clone();
    m[data(&b, "root/idx") + 2] = 9;
    check(&m, codes::INDEX_OUT_OF_RANGE, &["root/idx"], &intact);
    let mut m = b.clone();
    set_u32(&mut m, data(&b, "root/rng"), 2); // (2, 1)
    check(&m, codes::RANGE_INVERTED, &["root/rng"], &intact);
    let mut m = b.clone();
    set_u32(&mut m, data(&b, "root/rng") + 12, 4); // (1, 4) past 3 points
    check(&m, codes::RANGE_OUT_OF_RANGE, &["root/rng"], &intact);
    // Text: the strict decode is the read.
    let mut m = b.clone();
    m[data(&b, "root/title") + 1] = 0xFF;
    check(&m, codes::TEXT_INVALID, &["root/title"], &intact);
    let f = lenient(&m);
    let e = f.text(f.find("root/title").unwrap().1).unwrap_err();
    assert_eq!(e.code, codes::TEXT_INVALID);
    // JSON (custom primitive: read through `json()`, `read_array` has no dtype for it).
    let mut m = b.clone();
    m[data(&b, "root/meta")] = b'#';
    assert!(errors(&m).contains(&codes::JSON_INVALID.to_string()));
    let f = lenient(&m);
    assert_eq!(
        f.json(f.find("root/meta").unwrap().1).unwrap_err().code,
        codes::JSON_INVALID
    );
    assert_eq!(read(&m, "root/good").unwrap().to_f64(), vec![1.5, 2.5, -3.0]);
    let mut m = b.clone();
    m[desc(&b, "root/jarr") + 0x14] = 3; // shape [3] for [1, 2]
    assert!(errors(&m).contains(&codes::JSON_SHAPE.to_string()));
    let f = lenient(&m);
    assert_eq!(
        f.json(f.find("root/jarr").unwrap().1).unwrap_err().code,
        codes::JSON_SHAPE
    );
    // A SimpleU32 stream that ends inside a literal opcode.
    let mut m = b.clone();
    m[data(&b, "root/cz")] = 0xF3;
    check(
        &m,
        codes::COMPRESS_CORRUPT,
        &["root/cz"],
        &["root/good", "root/idx", "root/child/v"],
    );
    // A stream that holds fewer values than the shape.
    let mut m = b.clone();
    set_u32(&mut m, desc(&b, "root/cz") + 0x14, 8);
    check(&m, codes::COMPRESS_CORRUPT, &["root/cz"], &["root/good"]);
}

/// Every byte of the file flipped in turn: a read that fails names a finding `validate` makes
/// (or is unsupported, or the name is gone); a read that succeeds concerns a table `validate`
/// finds nothing wrong with in its descriptor; a file `validate` accepts reads entirely.
#[test]
fn every_byte_flipped_reads_only_what_validates() {
    let b = base();
    let paths = [
        "root/good",
        "root/title",
        "root/pts",
        "root/idx",
        "root/rng",
        "root/colors",
        "root/cz",
        "root/child/v",
    ];
    for at in 0..b.len() {
        let mut m = b.clone();
        m[at] ^= 0xFF;
        let input = Input::from_bytes("t", m.clone());
        let doc = validate::validate(&input, &Limits::default());
        let errs: Vec<&rasterpack_common::Finding> =
            doc.findings.iter().filter(|f| f.severity == Severity::Error).collect();
        let file = lenient(&m);
        for p in paths {
            match read(&m, p) {
                Err(e)
                    if matches!(
                        e.kind,
                        ErrorKind::Usage | ErrorKind::Unsupported | ErrorKind::LimitExceeded
                    ) => {}
                Err(e) if errs.is_empty() => panic!("byte {at}: validate accepts the file but {p} is refused: {e}"),
                Err(e) => assert!(
                    errs.iter().any(|f| f.code == e.code),
                    "byte {at}: {p} refused with {} that validate does not report ({errs:?})",
                    e.code
                ),
                Ok(_) => {
                    let (_, t) = file.find(p).unwrap();
                    let own = t.desc_offset..t.desc_offset + 0x30;
                    let data = t.data_offset.unwrap()..t.data_offset.unwrap() + t.data_size;
                    for f in &errs {
                        let o = f.offset.unwrap_or(u64::MAX);
                        assert!(
                            !own.contains(&o) && !data.contains(&o),
                            "byte {at}: {p} read although validate reports {} at {o} in it",
                            f.code
                        );
                    }
                }
            }
        }
    }
}

/// The library's open is lenient like the CLI's reads: it fails only when nothing can be
/// walked; a file with errors elsewhere opens, its intact tables read, the damaged one is
/// refused, and `validate` reports the errors. `open_strict` refuses any structural error.
#[test]
fn the_library_opens_leniently() {
    let b = base();
    let mut junk = b"not a UDF file".to_vec();
    junk.resize(100, b'.');
    assert_eq!(UdfFile::from_bytes(junk).unwrap_err().code, codes::BAD_MAGIC);
    assert_eq!(
        UdfFile::from_bytes(b[..40].to_vec()).unwrap_err().code,
        codes::TRUNCATED
    );
    let mut m = b.clone();
    m[0x10] += 8;
    assert_eq!(UdfFile::from_bytes(m).unwrap_err().code, codes::OFFSET_MISALIGNED);
    // An INDEX value out of range (content) and a broken descriptor (structure).
    let mut m = b.clone();
    m[data(&b, "root/idx") + 2] = 9;
    set_u32(&mut m, desc(&b, "root/good") + 0x14, 4);
    let f = UdfFile::from_bytes(m.clone()).unwrap();
    let names: Vec<String> = f.arrays().unwrap().into_iter().filter_map(|a| a.name).collect();
    assert!(names.contains(&"root/child/v".to_string()), "{names:?}");
    assert_eq!(f.read(&ArrayRequest::for_element("root/child/v")).unwrap().data, [7, 9]);
    assert_eq!(
        f.read(&ArrayRequest::for_element("root/idx")).unwrap_err().code,
        codes::INDEX_OUT_OF_RANGE
    );
    assert_eq!(
        f.read(&ArrayRequest::for_element("root/good")).unwrap_err().code,
        codes::TABLE_SHAPE_SIZE
    );
    let report = f.validate();
    assert!(report.findings.has_code(codes::INDEX_OUT_OF_RANGE) && report.findings.has_code(codes::TABLE_SHAPE_SIZE));
    assert!(!report.is_valid(false));
    let e = UdfFile::open_strict(&Input::from_bytes("t", m), &Limits::default()).unwrap_err();
    assert_eq!(e.code, codes::TABLE_SHAPE_SIZE);
}
