//! UDF files whose declared sizes are large, run through every command as a user would (issue
//! 12): each command's verdict, and its peak RSS (measured by GNU time; the bound is skipped,
//! with a message, where /usr/bin/time is missing) at most 256 MiB whatever the file declares:
//! a 512 MiB table (a sparse file), a SimpleU32 stream of 8 MiB that decodes to 512 MiB, a
//! 64 MiB JSON document, and a 4 MiB file whose overlapping datasets declare 65535 descriptors
//! each.

use std::path::Path;

use rasterpack_common::{ArrayInfo, ArraySink, DType, Input, Limits, Output as Out};
use rasterpack_udf::{parse, Hint, Prim, TableSpec, UdfArrayWriter, UdfFile, UdfWriter};

mod support;
use support::{check, run, s, RSS_LIMIT_KIB};

const MIB: u64 = 1 << 20;
/// A 512 MiB float32 table [131072, 1024], all zeros but the first value: a sparse file.
fn big_table(path: &Path) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = UdfArrayWriter::new(Out::File(&f));
    let values = 128 * MIB;
    w.begin(&ArrayInfo::new(DType::F32, vec![values / 1024, 1024])).unwrap();
    w.write_at(0, &1.5f32.to_le_bytes()).unwrap();
    w.fill_at(4, values * 4 - 4, &[0; 4]).unwrap();
    w.finish().unwrap();
}

/// Patch descriptor `path` of `bytes` to a u32 table of `shape` compressed with SimpleU32.
fn make_simple_u32(bytes: &mut [u8], path: &str, shape: [u32; 2]) {
    let d = UdfFile::from_bytes(bytes.to_vec())
        .unwrap()
        .find(path)
        .unwrap()
        .1
        .desc_offset as usize;
    bytes[d + 4..d + 6].copy_from_slice(&parse::encode_type_info(Prim::U32, 2, Hint::None).to_le_bytes());
    bytes[d + 6..d + 8].copy_from_slice(&17u16.to_le_bytes());
    bytes[d + 0x14..d + 0x18].copy_from_slice(&shape[0].to_le_bytes());
    bytes[d + 0x18..d + 0x1C].copy_from_slice(&shape[1].to_le_bytes());
}

/// 8 MiB of SimpleU32 "repeat 16" opcodes: 128 Mi words (512 MiB) of zeros.
fn bomb(path: &Path) {
    let stream = vec![0xEFu8; 8 << 20];
    let mut w = UdfWriter::new("BOMB").unwrap();
    let root = w.add_dataset("ROOT").unwrap();
    w.set_root(root);
    w.add(root, TableSpec::array("cz", &[stream.len() as u32], &stream))
        .unwrap();
    let mut b = w.to_bytes().unwrap();
    make_simple_u32(&mut b, "root/cz", [131_072, 1024]);
    std::fs::write(path, b).unwrap();
}

/// A JSON table holding an array of 32 Mi zeros (64 MiB).
fn json(path: &Path) {
    let n = 32 << 20;
    let doc = format!("[{}0]", "0,".repeat(n - 1));
    let mut w = UdfWriter::new("JSON").unwrap();
    let root = w.add_dataset("ROOT").unwrap();
    w.set_root(root);
    let spec = TableSpec::raw("doc", Prim::Custom, Hint::Json, &[n as u32], &[], doc.into_bytes());
    w.add(root, spec).unwrap();
    std::fs::write(path, w.to_bytes().unwrap()).unwrap();
}

/// A root linking 64 times to one 4 MiB dataset with 64 different sizes, whose header
/// declares 65535 descriptors: without a budget, each size is a dataset of its own and each
/// decodes 65535 broken descriptors.
fn overlapping_headers(path: &Path) {
    let n = 64usize;
    let mut w = UdfWriter::new("DOS").unwrap();
    let root = w.add_dataset("ROOT").unwrap();
    let x = w.add_dataset("X").unwrap();
    w.set_root(root);
    w.add(root, TableSpec::links("l", &vec![Some(x); n])).unwrap();
    w.add(x, TableSpec::array("big", &[4 << 20], &vec![0u8; 4 << 20]))
        .unwrap();
    let mut bytes = w.to_bytes().unwrap();
    let f = UdfFile::open_strict(&Input::from_bytes("d", bytes.clone()), &Limits::default()).unwrap();
    let loc = f.datasets()[1].location;
    let base = f.find("l").unwrap().1.data_offset.unwrap() as usize;
    for k in 0..n {
        let e = base + 16 * k + 8;
        bytes[e..e + 8].copy_from_slice(&(loc.size - 16 * k as u64).to_le_bytes());
    }
    let d = loc.offset as usize;
    bytes[d + 0xE..d + 0x10].copy_from_slice(&65535u16.to_le_bytes());
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_512_mib_table_validates_and_converts_in_bounded_memory() {
    let dir = support::scratch("hostile-udf", "big");
    let big = dir.join("big.udf");
    big_table(&big);
    check(&["validate", s(&big)], 0);
    check(&["inspect", s(&big)], 0);
    let npy = dir.join("big.npy");
    check(&["convert", s(&big), s(&npy)], 0);
    let data = std::fs::read(&npy).unwrap_or_default();
    assert_eq!(data.len() as u64, 128 + 512 * MIB);
    assert_eq!(data[128..132], 1.5f32.to_le_bytes());
    assert!(data[132..].iter().all(|&b| b == 0));
    drop(data);
    std::fs::remove_file(&npy).unwrap();
    // UDF to UDF through the streaming writer: the same table (plus the source's facts as
    // an `attrs` table).
    let copy = dir.join("copy.udf");
    check(&["convert", s(&big), s(&copy)], 0);
    check(&["validate", s(&copy)], 0);
    let copied = UdfFile::open(&copy).unwrap();
    let (_, t) = copied.find("root/data").unwrap();
    assert_eq!((t.data_size, t.shape.axes.clone()), (512 * MIB, vec![131_072, 1024]));
    assert_eq!(copied.bytes_prefix(t, 4).unwrap(), 1.5f32.to_le_bytes());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_compressed_stream_that_decodes_to_512_mib_streams() {
    let dir = support::scratch("hostile-udf", "bomb");
    let path = dir.join("bomb.udf");
    bomb(&path);
    check(&["validate", s(&path)], 0);
    check(&["inspect", s(&path)], 0);
    let npy = dir.join("bomb.npy");
    check(&["convert", s(&path), s(&npy)], 0);
    assert_eq!(std::fs::metadata(&npy).unwrap().len(), 128 + 512 * MIB);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn big_json_and_overlapping_headers_stay_bounded() {
    let dir = support::scratch("hostile-udf", "meta");
    let doc = dir.join("json.udf");
    json(&doc);
    check(&["validate", s(&doc)], 0);
    check(&["inspect", s(&doc)], 0);
    let headers = dir.join("headers.udf");
    overlapping_headers(&headers);
    let r = check(&["validate", "--json", s(&headers)], 1);
    let report: serde_json::Value = serde_json::from_slice(&r.out.stdout).unwrap();
    let codes: Vec<&str> = report["files"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["code"].as_str())
        .collect();
    assert!(codes.contains(&"udf.limit.work"), "the entry budget stops the walk");
    let r = run(&["inspect", s(&headers)]);
    assert!(matches!(r.out.status.code(), Some(0 | 1)), "{:?}", r.out.status);
    if let Some(kib) = r.peak_kib {
        assert!(kib <= RSS_LIMIT_KIB, "inspect: {} MiB", kib / 1024);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 17 item 8: `hostile/more/udf_100_datasets_x_1300_bad_tables.udf` (6 MiB) holds 100
/// datasets of 1300 tables, each with a reserved primitive and all named `t`: 130,000
/// `udf.table.reserved_prim` and 100 x 1299 `udf.table.duplicate_name` errors. Every report
/// lists 256 findings of each code and counts the rest, so every command stays bounded (they
/// took 425-795 MiB when every finding and every table row was kept), and the counts still
/// add up to those numbers.
#[test]
fn a_flood_of_130000_bad_tables_is_counted_not_listed() {
    let Some(dir) = rasterpack_common::testkit::corpus_dir("hostile/more") else {
        return;
    };
    let file = dir.join("udf_100_datasets_x_1300_bad_tables.udf");
    let f = s(&file);
    let r = check(&["validate", f], 1);
    let text = r.stdout();
    assert!(
        text.lines()
            .next()
            .unwrap_or("")
            .ends_with("INVALID [udf] (259900 errors)"),
        "{}",
        text.lines().next().unwrap_or("")
    );
    assert!(text.contains("129744 more error udf.table.reserved_prim findings not listed"));
    assert!(text.contains("129644 more error udf.table.duplicate_name findings not listed"));
    check(&["validate", "--strict", f], 1);
    check(&["inspect", f], 1);
    for command in ["validate", "inspect"] {
        let r = check(&[command, "--json", f], 1);
        let v: serde_json::Value = serde_json::from_slice(&r.out.stdout).unwrap();
        let report = &v["files"][0];
        let listed = |code: &str| {
            report["findings"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|x| x["code"] == code)
                .count() as u64
        };
        let omitted = |code: &str| {
            let o = report["findings_omitted"].as_array().unwrap();
            let o: Vec<_> = o.iter().filter(|x| x["code"] == code).collect();
            assert_eq!(o.len(), 1, "{command}: {o:?}");
            assert_eq!(o[0]["severity"], "error");
            o[0]["count"].as_u64().unwrap()
        };
        for (code, total) in [
            ("udf.table.reserved_prim", 130_000),
            ("udf.table.duplicate_name", 129_900),
        ] {
            assert_eq!(listed(code), 256, "{command} {code}");
            assert_eq!(listed(code) + omitted(code), total, "{command} {code}");
        }
        // 4096 table rows are described, the other 125,905 (of 130,001 with the root's
        // DATASET table) counted.
        let summary = &report["summary"];
        let rows: usize = summary["datasets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["tables"].as_array().unwrap().len())
            .sum();
        let counted: u64 = summary["datasets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["table_count"].as_u64().unwrap())
            .sum();
        assert_eq!((rows, counted), (4096, 130_001), "{command}");
        assert_eq!(summary["tables_not_listed"], 130_001 - 4096, "{command}");
    }
}
