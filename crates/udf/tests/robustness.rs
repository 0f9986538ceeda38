//! Hostile input: truncation at every offset, every byte flipped, cycles, deep graphs, huge
//! declared sizes. Parsing, validation, inspection and reading must return normally.

use rasterpack_common::{Format, Input, InspectOptions, Limits, ValidateOptions};
use rasterpack_udf::{codes, validate, Hint, TableSpec, UdfEncoding, UdfFile, UdfFormat, UdfWriter};
use serde_json::json;

fn rich() -> Vec<u8> {
    let mut w = UdfWriter::new("HINT").unwrap();
    let root = w.add_dataset("ROOT").unwrap();
    let a = w.add_dataset("A").unwrap();
    w.set_root(root);
    w.add(root, TableSpec::text("t8", "h\u{e9}llo \u{1F642}", UdfEncoding::Utf8))
        .unwrap();
    w.add(
        root,
        TableSpec::text_list("l16", &["ab", "\u{1F642}"], UdfEncoding::Utf16),
    )
    .unwrap();
    w.add(root, TableSpec::text("t32", "x\u{1F642}", UdfEncoding::Utf32))
        .unwrap();
    w.add(root, TableSpec::json_shaped("grid", &json!([[1, 2], [3, 4]]), &[2, 2]))
        .unwrap();
    w.add(
        root,
        TableSpec::array("v", &[3], &[0f32, 1.0, 2.0]).with_hint(Hint::Coord, &[1]),
    )
    .unwrap();
    w.add(root, TableSpec::links("kids", &[Some(a), None])).unwrap();
    w.add(
        a,
        TableSpec::array("i", &[2], &[0u8, 2])
            .with_hint(Hint::Index, &[])
            .index_into("v"),
    )
    .unwrap();
    w.add(
        a,
        TableSpec::array("r", &[1], &[0u16, 3])
            .with_hint(Hint::Range, &[2])
            .index_into("v"),
    )
    .unwrap();
    w.add(
        a,
        TableSpec::array("xf", &[], &[1f64; 4])
            .with_hint(Hint::Transform, &[2, 2])
            .related("xf"),
    )
    .unwrap();
    w.to_bytes().unwrap()
}

fn sample() -> Vec<u8> {
    rasterpack_udf::samples::sample().unwrap().to_bytes().unwrap()
}

/// Everything a user could do with a file.
fn exercise(bytes: Vec<u8>) {
    let input = Input::from_bytes("fuzz", bytes);
    let limits = Limits::default();
    let doc = validate::validate(&input, &limits);
    for f in doc.findings.iter() {
        assert!(codes::severity(&f.code).is_some(), "unlisted code {}", f.code);
    }
    let _ = UdfFormat.inspect(&input, &InspectOptions::default());
    let _ = UdfFormat.validate(&input, &ValidateOptions::default());
    let file = UdfFile::open_lenient(&input, &limits);
    for ds in file.datasets() {
        for t in &ds.tables {
            let _ = file.typed_values(t);
            let _ = file.text(t);
            let _ = file.json(t);
            let _ = file.file_offsets(t);
            let _ = file.array(ds, t);
        }
    }
    let _ = UdfFormat.read_array(&input, &Default::default());
}

#[test]
fn truncation_at_every_offset() {
    for bytes in [sample(), rich()] {
        for n in 0..bytes.len() {
            exercise(bytes[..n].to_vec());
        }
    }
}

#[test]
fn every_byte_flipped() {
    for bytes in [sample(), rich()] {
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0xFF;
            exercise(b.clone());
            b[i] ^= 0xFF ^ 0x01;
            exercise(b.clone());
            b[i] ^= 0x01 ^ 0x80;
            exercise(b);
        }
    }
}

#[test]
fn cycles_are_found_and_walks_stop() {
    // root -> a -> (null), then patch the null entry to point back at the root.
    let mut w = UdfWriter::new("CYC").unwrap();
    let root = w.add_dataset("ROOT").unwrap();
    let a = w.add_dataset("A").unwrap();
    w.set_root(root);
    w.add(root, TableSpec::link("a", Some(a))).unwrap();
    w.add(a, TableSpec::links("back", &[None, None])).unwrap();
    let mut bytes = w.to_bytes().unwrap();
    let root_loc = (
        u64::from_le_bytes(bytes[16..24].try_into().unwrap()),
        u64::from_le_bytes(bytes[24..32].try_into().unwrap()),
    );
    let f = UdfFile::open_strict(&Input::from_bytes("c", bytes.clone()), &Limits::default()).unwrap();
    let e = f.find("back").unwrap().1.data_offset.unwrap() as usize;
    assert_eq!(&bytes[e..e + 32], &[0u8; 32]);
    bytes[e..e + 8].copy_from_slice(&root_loc.0.to_le_bytes());
    bytes[e + 8..e + 16].copy_from_slice(&root_loc.1.to_le_bytes());
    let doc = validate::validate(&Input::from_bytes("c", bytes.clone()), &Limits::default());
    let cyc: Vec<_> = doc.findings.iter().filter(|f| f.code == codes::DATASET_CYCLE).collect();
    assert_eq!(cyc.len(), 1, "{:?}", doc.findings);
    assert_eq!(cyc[0].offset, Some(e as u64));
    assert_eq!(doc.datasets.len(), 2);
    exercise(bytes);
}

#[test]
fn deep_chains_hit_the_depth_limit() {
    let mut w = UdfWriter::new("DEEP").unwrap();
    let ids: Vec<_> = (0..80).map(|_| w.add_dataset("D").unwrap()).collect();
    w.set_root(ids[0]);
    for k in 0..79 {
        w.add(ids[k], TableSpec::link("next", Some(ids[k + 1]))).unwrap();
    }
    let mut out = Vec::new();
    w.write_to(&mut out).unwrap();
    let input = Input::from_bytes("deep", out);
    let doc = validate::validate(&input, &Limits::default());
    assert!(doc.findings.has_code(codes::DATASET_TOO_DEEP));
    let doc = validate::validate(
        &input,
        &Limits {
            max_depth: 100,
            ..Limits::default()
        },
    );
    assert!(doc.findings.is_empty(), "{:?}", doc.findings);
}

#[test]
fn huge_declared_sizes_do_not_allocate() {
    let mut bytes = sample();
    // First descriptor of the root: data_size and mem_end to the maximum.
    let d = 0x40 + 0x18;
    bytes[d + 0x0C..d + 0x10].copy_from_slice(&u32::MAX.to_le_bytes());
    bytes[d + 0x10..d + 0x14].copy_from_slice(&u32::MAX.to_le_bytes());
    // Root size to the maximum aligned value.
    bytes[24..32].copy_from_slice(&(!15u64).to_le_bytes());
    let doc = validate::validate(&Input::from_bytes("h", bytes.clone()), &Limits::default());
    assert!(doc.findings.has_errors());
    exercise(bytes);
}

#[test]
fn overlapping_datasets_stay_within_the_work_budget() {
    // The root links 4096 times to itself-with-another-size: each is a distinct dataset whose
    // 1 MiB table would be re-read. The budget stops it (and the links make cycles).
    let mut w = UdfWriter::new("DOS").unwrap();
    let root = w.add_dataset("ROOT").unwrap();
    w.set_root(root);
    w.add(root, TableSpec::links("l", &vec![None; 4096])).unwrap();
    w.add(root, TableSpec::array("big", &[1 << 20], &vec![7u8; 1 << 20]))
        .unwrap();
    let mut bytes = w.to_bytes().unwrap();
    let f = UdfFile::open_strict(&Input::from_bytes("d", bytes.clone()), &Limits::default()).unwrap();
    let loc = f.root().unwrap().location;
    let base = f.find("l").unwrap().1.data_offset.unwrap() as usize;
    for k in 0..4096usize {
        let e = base + 16 * k;
        bytes[e..e + 8].copy_from_slice(&loc.offset.to_le_bytes());
        bytes[e + 8..e + 16].copy_from_slice(&(loc.size - 16 * k as u64).to_le_bytes());
    }
    let t = std::time::Instant::now();
    let doc = validate::validate(&Input::from_bytes("d", bytes), &Limits::default());
    assert!(
        doc.findings.has_code(codes::LIMIT_WORK),
        "{:?}",
        &doc.findings.as_slice()[..3]
    );
    assert!(t.elapsed().as_secs() < 20);
}
