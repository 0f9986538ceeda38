//! Region reads (issue 12): a region of a table equals the same region cut from the whole
//! table, for every kind of table (plain, ghost axes, `ndarray:` shapes, text rows, INDEX,
//! RANGE, SimpleU32); a region read reads only the bytes the region needs, and judges only the
//! records it meets, so damage outside the region does not stop it while the whole read fails.

use rasterpack_common::{open_any, ArrayRequest, Format, Input, Limits, NdArray, Region};
use rasterpack_udf::{codes, parse, Hint, Prim, TableSpec, UdfEncoding, UdfFile, UdfFormat, UdfWriter};

fn set_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn set_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn file(bytes: &[u8]) -> UdfFile {
    UdfFile::from_bytes(bytes.to_vec()).unwrap()
}

fn read(f: &UdfFile, element: &str, region: Option<Region>) -> rasterpack_common::Result<NdArray> {
    let mut req = ArrayRequest::for_element(element);
    if let Some(r) = region {
        req = req.with_region(r);
    }
    f.read(&req)
}

/// Every region of `shape` with starts and ends on a small grid.
fn regions(shape: &[u64]) -> Vec<Region> {
    let cuts = |d: u64| -> Vec<std::ops::Range<u64>> {
        let mut v = Vec::new();
        for s in [0, 1, d / 2] {
            for e in [s + 1, d / 2 + 1, d] {
                if s < e && e <= d {
                    v.push(s..e);
                }
            }
        }
        v.dedup();
        v
    };
    let mut out = vec![Region { ranges: Vec::new() }];
    for &d in shape {
        let mut next = Vec::new();
        for r in &out {
            for c in cuts(d) {
                let mut r = r.clone();
                r.ranges.push(c);
                next.push(r);
            }
        }
        out = next;
    }
    out
}

/// Build a file with one table per kind, plus the SimpleU32 table `cz` (patched in).
fn tables() -> Vec<u8> {
    let mut w = UdfWriter::new("REG").unwrap();
    let root = w.add_dataset("ROOT").unwrap();
    w.set_root(root);
    let cube: Vec<i16> = (0..4 * 5 * 6).map(|v| v as i16 - 50).collect();
    w.add(root, TableSpec::array("cube", &[4, 5, 6], &cube)).unwrap();
    let rgb: Vec<u8> = (0..3 * 4 * 3).map(|v| v as u8).collect();
    w.add(root, TableSpec::array("rgb", &[3, 4], &rgb).with_hint(Hint::Rgb, &[3]))
        .unwrap();
    w.add(
        root,
        TableSpec::text_list(
            "names",
            &["alpha", "beta", "", "gamma", "\u{e9}t\u{e9}"],
            UdfEncoding::Utf16,
        ),
    )
    .unwrap();
    w.add(root, TableSpec::array("pts", &[10], &[0f64; 10])).unwrap();
    let idx: Vec<u32> = (0..40).map(|v| v % 10).collect();
    w.add(
        root,
        TableSpec::array("idx", &[40], &idx)
            .with_hint(Hint::Index, &[])
            .index_into("pts"),
    )
    .unwrap();
    let rng: Vec<u16> = (0..20u16).flat_map(|v| [v % 5, v % 5 + 5]).collect();
    w.add(
        root,
        TableSpec::array("rng", &[20], &rng)
            .with_hint(Hint::Range, &[2])
            .index_into("pts"),
    )
    .unwrap();
    // cz: 64 u32 values as a SimpleU32 stream: a literal 1000, then +1 deltas.
    let mut stream = vec![0xF0u8, 0xE8, 0x03, 0, 0];
    stream.extend(std::iter::repeat_n(0x00, 63));
    w.add(root, TableSpec::array("cz", &[stream.len() as u32], &stream))
        .unwrap();
    let mut b = w.to_bytes().unwrap();
    let d = file(&b).find("root/cz").unwrap().1.desc_offset as usize;
    set_u16(&mut b, d + 4, parse::encode_type_info(Prim::U32, 2, Hint::None));
    set_u16(&mut b, d + 6, 17);
    set_u32(&mut b, d + 0x14, 8);
    set_u32(&mut b, d + 0x18, 8);
    let doc = rasterpack_udf::validate::validate(&Input::from_bytes("t", b.clone()), &Limits::default());
    assert!(!doc.findings.has_errors(), "{:?}", doc.findings);
    b
}

#[test]
fn regions_equal_the_cut_of_the_whole() {
    let b = tables();
    let f = file(&b);
    for name in ["root/cube", "root/rgb", "root/names", "root/idx", "root/rng", "root/cz"] {
        let whole = read(&f, name, None).unwrap();
        for region in regions(&whole.shape) {
            let want = whole.region(&region).unwrap();
            let got = read(&f, name, Some(region.clone())).unwrap_or_else(|e| panic!("{name} {region:?}: {e}"));
            assert_eq!(got.shape, want.shape, "{name} {region:?}");
            assert_eq!(got.data, want.data, "{name} {region:?}");
        }
    }
    let cz = read(&f, "root/cz", None).unwrap().to_vec::<u32>().unwrap();
    assert_eq!(cz, (1000..1064).collect::<Vec<u32>>());
    // Outside the shape, or too many axes: a usage error.
    let e = read(
        &f,
        "root/cube",
        Some(Region::from_start_size(&[0, 0, 4], &[1, 1, 3]).unwrap()),
    )
    .unwrap_err();
    assert_eq!(e.kind, rasterpack_common::ErrorKind::Usage);
    assert!(read(
        &f,
        "root/rgb",
        Some(Region::from_start_size(&[0, 0, 0, 0], &[1, 1, 1, 1]).unwrap())
    )
    .is_err());
}

#[test]
fn shapes_beyond_the_packed_encoding_read_by_region() {
    // A 4-D array goes in flat with its shape in type_name; regions use the 4-D shape.
    let a = NdArray::from_vec(vec![2, 3, 4, 5], (0..120).map(|v| v as f32).collect()).unwrap();
    let mut bytes = Vec::new();
    UdfFormat.write_array(&a, &Default::default(), &mut bytes).unwrap();
    let f = file(&bytes);
    let arrays = f.arrays().unwrap();
    assert_eq!(arrays[0].shape, vec![2, 3, 4, 5]);
    let region = Region::parse("1, 0:2, 1:3, 4", &a.shape).unwrap();
    assert_eq!(
        f.read(&ArrayRequest::default().with_region(&region)).unwrap().data,
        a.region(&region).unwrap().data
    );
    // Format level: the same through read_array with a region.
    let req = ArrayRequest::default().with_region(&region);
    let got = UdfFormat.read_array(&Input::from_bytes("m", bytes), &req).unwrap();
    assert_eq!(
        got.to_vec::<f32>().unwrap(),
        a.region(&region).unwrap().to_vec::<f32>().unwrap()
    );
}

#[test]
fn damage_outside_the_region_does_not_stop_it() {
    let b = tables();
    let f = file(&b);
    let data = |name: &str| f.find(name).unwrap().1.data_offset.unwrap() as usize;
    // INDEX value 30 (of 40) out of range: the first 20 values read, the whole table does not.
    let mut m = b.clone();
    set_u32(&mut m, data("root/idx") + 4 * 30, 99);
    let g = file(&m);
    let first = Region::from_start_size(&[0], &[20]).unwrap();
    assert_eq!(
        read(&g, "root/idx", Some(first)).unwrap().to_vec::<u32>().unwrap(),
        (0..20).map(|v| v % 10).collect::<Vec<u32>>()
    );
    let e = read(&g, "root/idx", None).unwrap_err();
    assert_eq!(
        (e.code.as_ref(), e.offset),
        (codes::INDEX_OUT_OF_RANGE, Some((data("root/idx") + 120) as u64))
    );
    assert!(read(&g, "root/idx", Some(Region::from_start_size(&[25], &[10]).unwrap())).is_err());
    // RANGE pair 10 inverted: a region on its other column still judges the whole pair.
    let mut m = b.clone();
    set_u16(&mut m, data("root/rng") + 4 * 10, 9);
    let g = file(&m);
    assert!(read(&g, "root/rng", Some(Region::parse("0:10", &[20, 2]).unwrap())).is_ok());
    let e = read(&g, "root/rng", Some(Region::parse("10, 1", &[20, 2]).unwrap())).unwrap_err();
    assert_eq!(e.code, codes::RANGE_INVERTED);
    assert_eq!(read(&g, "root/rng", None).unwrap_err().code, codes::RANGE_INVERTED);
    // Text: an unpaired surrogate in row 3; rows 0..3 read, row 3 and the whole do not, and a
    // region cutting into row 3's columns judges the whole row.
    let mut m = b.clone();
    set_u16(&mut m, data("root/names") + 3 * 10 + 4, 0xD800);
    let g = file(&m);
    assert!(read(&g, "root/names", Some(Region::parse("0:3", &[5, 5]).unwrap())).is_ok());
    assert_eq!(
        read(&g, "root/names", Some(Region::parse("3, 0:1", &[5, 5]).unwrap()))
            .unwrap_err()
            .code,
        codes::TEXT_INVALID
    );
    assert_eq!(read(&g, "root/names", None).unwrap_err().code, codes::TEXT_INVALID);
    // SimpleU32: a stream with opcodes after its 64 values reads a prefix region, but the whole
    // read decodes the stream to its end and refuses it.
    let (d, cz) = {
        let (_, t) = f.find("root/cz").unwrap();
        (t.desc_offset as usize, t.data_offset.unwrap() as usize)
    };
    let mut m = b.clone();
    set_u32(&mut m, d + 0x18, 7); // shape [8, 7]: the stream holds 8 values too many
    let g = file(&m);
    let got = read(&g, "root/cz", Some(Region::parse("0:2", &[8, 7]).unwrap())).unwrap();
    assert_eq!(got.to_vec::<u32>().unwrap(), (1000..1014).collect::<Vec<u32>>());
    let e = read(&g, "root/cz", None).unwrap_err();
    assert_eq!(
        (e.code.as_ref(), e.offset),
        (codes::COMPRESS_CORRUPT, Some((cz + 5 + 55) as u64))
    );
}

/// Bytes this thread has read through read(2)/pread(2) so far (Linux).
#[cfg(target_os = "linux")]
fn thread_read_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/thread-self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("rchar:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(target_os = "linux")]
#[test]
fn a_region_read_reads_only_what_it_needs() {
    // A 1024 x 8192 f32 table (32 MiB) in a file; one row of it is 32 KiB.
    let (rows, cols) = (1024u32, 8192u32);
    let values: Vec<f32> = (0..rows * cols).map(|v| v as f32).collect();
    let mut w = UdfWriter::new("BIG").unwrap();
    let root = w.add_dataset("ROOT").unwrap();
    w.set_root(root);
    w.add(root, TableSpec::array("grid", &[rows, cols], &values)).unwrap();
    drop(values);
    let path = std::env::temp_dir().join(format!("rasterpack-udf-region-{}.udf", std::process::id()));
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    w.write_to(&mut out).unwrap();
    drop(out);
    drop(w);
    let Some(probe) = thread_read_bytes() else {
        // Visible in a passing run (an `eprintln!` is captured and hidden there).
        rasterpack_common::testkit::skip("needs /proc/thread-self/io, which is not readable here");
        std::fs::remove_file(&path).unwrap();
        return;
    };
    // Reading the counter reads /proc: measure that once and take it off.
    let overhead = thread_read_bytes().unwrap() - probe;
    let counted = |f: &mut dyn FnMut()| {
        let start = thread_read_bytes().unwrap();
        f();
        thread_read_bytes().unwrap() - start - overhead
    };
    let mut file = None;
    let opened = counted(&mut || file = Some(UdfFile::open(&path).unwrap()));
    let f = file.unwrap();
    let region = Region::from_start_size(&[700, 100], &[2, 1000]).unwrap();
    let mut part = None;
    let read = counted(&mut || {
        part = Some(
            f.read(&ArrayRequest::for_element("root/grid").with_region(&region))
                .unwrap(),
        )
    });
    let part = part.unwrap();
    assert_eq!(
        part.to_vec::<f32>().unwrap()[..2],
        [(700 * cols + 100) as f32, (700 * cols + 101) as f32]
    );
    // (The counter's own reads vary by a few bytes with the digits it shows.)
    assert!(
        (8000..8000 + 16).contains(&read),
        "a 2 x 1000 region reads its 8000 bytes, not {read}"
    );
    assert!(opened < 4096, "opening reads the headers only ({opened} bytes)");
    // The same through the format-independent entry point.
    let any = open_any(&path, &[&UdfFormat]).unwrap();
    let column = Region::from_start_size(&[0, 5], &[rows as u64, 1]).unwrap();
    let mut col = None;
    let read = counted(&mut || col = Some(any.read(&ArrayRequest::default().with_region(&column)).unwrap()));
    assert_eq!(col.unwrap().shape, vec![rows as u64, 1]);
    assert!(
        (4096..4096 + 16).contains(&read),
        "a column reads one value per row, not {read} bytes"
    );
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn tables_read_as_ndarray_arrays_in_the_same_axis_order() {
    let b = tables();
    let f = file(&b);
    let cube = read(&f, "root/cube", None).unwrap().to_ndarray::<i16>().unwrap();
    assert_eq!(cube.shape(), [4, 5, 6]);
    assert_eq!(cube[[1, 2, 3]], (30 + 12 + 3) as i16 - 50);
    assert!(read(&f, "root/cube", None).unwrap().to_ndarray::<f32>().is_err());
}
