//! Writer round trips: write with `rasterpack_gvrs::write`, then read back through the reader
//! (`GvrsFile`, which decodes with the codecs) and validate; every element type and codec list,
//! edge tiles, fill tiles, extreme values, NaN payloads and -0.0.

mod util;
use rasterpack_common::{DType, Format, Input, Limits, NdArray, ValidateOptions, WriteOptions};
use rasterpack_gvrs::codec::Codec;
use rasterpack_gvrs::write::{
    self, Coordinates, ElementRange, ElementSpec, ElementValues, GvrsSpec, Metadata, RasterSpace,
};
use rasterpack_gvrs::{GvrsFile, GvrsFormat};
use util::*;

const ROWS: u32 = 37;
const COLS: u32 = 53;

fn open(bytes: &[u8]) -> GvrsFile {
    GvrsFile::from_input(Input::from_bytes("mem.gvrs", bytes.to_vec()), Limits::default())
        .expect("reader opens the written file")
}

fn assert_valid(bytes: &[u8], what: &str) {
    let report = GvrsFormat.validate(
        &Input::from_bytes("mem.gvrs", bytes.to_vec()),
        &ValidateOptions::default(),
    );
    assert!(report.is_valid(true), "{what}: {:#?}", report.findings);
}

/// Values with a smooth part, extremes, and an all-fill block covering tile (1, 0) of 16x20 tiles.
fn ints(fill: i32, lo: i32, hi: i32) -> Vec<i32> {
    (0..ROWS * COLS)
        .map(|i| {
            let (r, c) = (i / COLS, i % COLS);
            if (16..32).contains(&r) && c < 20 {
                fill
            } else if i % 97 == 0 {
                lo
            } else if i % 89 == 0 {
                hi
            } else {
                (r as i32 * 31 - c as i32 * 17) + (i % 5) as i32
            }
        })
        .collect()
}

fn floats() -> Vec<f32> {
    let specials = [
        -0.0f32,
        0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::from_bits(1),
        f32::MAX,
        f32::MIN,
        f32::from_bits(0x7FC0_0001),
        f32::from_bits(0xFFBF_FFFF),
    ];
    (0..ROWS * COLS)
        .map(|i| {
            let (r, c) = (i / COLS, i % COLS);
            if (16..32).contains(&r) && c < 20 {
                f32::NAN
            } else if i % 13 == 0 {
                specials[(i / 13) as usize % specials.len()]
            } else {
                (r as f32 * 0.25).sin() * 100.0 + c as f32 * 0.5
            }
        })
        .collect()
}

fn codec_lists() -> Vec<Vec<Codec>> {
    vec![
        vec![],
        write::DEFAULT_CODECS.to_vec(),
        vec![Codec::Deflate],
        vec![Codec::Huffman],
        vec![Codec::Float],
        vec![Codec::Float, Codec::Deflate, Codec::Huffman],
        vec![Codec::Huffman, Codec::Deflate, Codec::Float, Codec::Lsop12],
        vec![Codec::CanonicalHuffman],
        write::MASTER_DEFAULT_CODECS.to_vec(),
        vec![
            Codec::Huffman,
            Codec::Deflate,
            Codec::Float,
            Codec::CanonicalHuffman,
            Codec::Lsop12,
        ],
        vec![Codec::CanonicalHuffman, Codec::Lsop12],
    ]
}

fn spec(kind: ElementRange, codecs: &[Codec], checksums: bool) -> GvrsSpec {
    let mut s = GvrsSpec::new(ROWS, COLS, 16, 20, ElementSpec::new("v", kind));
    s.codecs = codecs.to_vec();
    s.checksums = checksums;
    s
}

fn i32s(a: &NdArray) -> Vec<i32> {
    a.data
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

#[test]
fn every_type_and_codec_round_trips() {
    for (k, codecs) in codec_lists().iter().enumerate() {
        let checksums = k % 2 == 0;
        // Integer.
        let v = ints(i32::MIN, i32::MIN + 1, i32::MAX);
        let b = write::to_bytes(
            &spec(ElementRange::integer(), codecs, checksums),
            &[ElementValues::Int(&v)],
        )
        .unwrap();
        assert_valid(&b, &format!("int {codecs:?}"));
        let a = read_el(&open(&b), 0, false).unwrap();
        assert_eq!((a.dtype, &a.shape), (DType::I32, &vec![ROWS as u64, COLS as u64]));
        assert_eq!(i32s(&a), v, "int {codecs:?}");
        // Integer with a non-minimum fill and INT_MIN as data (DifferencingWithNulls).
        let mut v2 = ints(-9999, i32::MIN, i32::MAX);
        v2[5] = i32::MIN;
        let kind = ElementRange::Integer {
            min: i32::MIN,
            max: i32::MAX,
            fill: -9999,
        };
        let b = write::to_bytes(&spec(kind, codecs, checksums), &[ElementValues::Int(&v2)]).unwrap();
        assert_valid(&b, &format!("int fill {codecs:?}"));
        assert_eq!(i32s(&read_el(&open(&b), 0, false).unwrap()), v2);
        // Short.
        let s: Vec<i16> = ints(i16::MIN as i32, i16::MIN as i32 + 1, i16::MAX as i32)
            .iter()
            .map(|&x| x as i16)
            .collect();
        let b = write::to_bytes(
            &spec(ElementRange::short(), codecs, checksums),
            &[ElementValues::Short(&s)],
        )
        .unwrap();
        assert_valid(&b, &format!("short {codecs:?}"));
        let a = read_el(&open(&b), 0, false).unwrap();
        assert_eq!(a.dtype, DType::I16);
        let got: Vec<i16> = a
            .data
            .chunks_exact(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect();
        assert_eq!(got, s, "short {codecs:?}");
        // Float: bit patterns, NaN payloads and -0.0 included.
        let f = floats();
        let b = write::to_bytes(
            &spec(ElementRange::float(), codecs, checksums),
            &[ElementValues::Float(&f)],
        )
        .unwrap();
        assert_valid(&b, &format!("float {codecs:?}"));
        let a = read_el(&open(&b), 0, false).unwrap();
        assert_eq!(a.dtype, DType::F32);
        let got: Vec<u32> = a
            .data
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let want: Vec<u32> = f.iter().map(|x| x.to_bits()).collect();
        assert_eq!(got, want, "float {codecs:?}");
        // Integer-coded float, as codes and as values.
        let kind = ElementRange::int_coded_float(100.0, -50.0);
        let codes = ints(i32::MIN, i32::MIN + 1, i32::MAX);
        let b = write::to_bytes(&spec(kind, codecs, checksums), &[ElementValues::Codes(&codes)]).unwrap();
        assert_valid(&b, &format!("icf {codecs:?}"));
        assert_eq!(
            i32s(&read_el(&open(&b), 0, true).unwrap()),
            codes,
            "icf codes {codecs:?}"
        );
        let vals: Vec<f32> = (0..ROWS * COLS)
            .map(|i| {
                if i % 11 == 0 {
                    f32::NAN
                } else {
                    (i as f32).sqrt() - 20.0
                }
            })
            .collect();
        let b = write::to_bytes(&spec(kind, codecs, checksums), &[ElementValues::IcfValues(&vals)]).unwrap();
        let a = read_el(&open(&b), 0, true).unwrap();
        let want: Vec<i32> = vals
            .iter()
            .map(|&x| write::icf_encode(x, 100.0, -50.0, f32::NAN, i32::MIN))
            .collect();
        assert_eq!(i32s(&a), want);
        let dec = read_el(&open(&b), 0, false).unwrap();
        for (i, ch) in dec.data.chunks_exact(4).enumerate() {
            let got = f32::from_le_bytes(ch.try_into().unwrap());
            let exp = write::icf_decode(want[i], 100.0, -50.0, f32::NAN, i32::MIN);
            assert!(got.to_bits() == exp.to_bits(), "icf value {i}: {got} vs {exp}");
        }
    }
}

#[test]
fn icf_rounding_follows_gridfour() {
    // Errata 5: + 0.5 and floor in f64 (an all-f32 formula would give 1 and 8388610).
    assert_eq!(write::icf_encode(0.49999997, 1.0, 0.0, f32::NAN, i32::MIN), 0);
    assert_eq!(write::icf_encode(8388609.0, 1.0, 0.0, f32::NAN, i32::MIN), 8388609);
    assert_eq!(write::icf_encode(f32::NAN, 1.0, 0.0, f32::NAN, -7), -7);
    assert_eq!(write::icf_encode(1e30, 1.0, 0.0, f32::NAN, 0), i32::MAX);
}

#[test]
fn several_elements_metadata_and_coordinates() {
    let elements = vec![
        ElementSpec {
            label: "Depth".into(),
            description: "Tiefe über NN".into(),
            unit: "m".into(),
            ..ElementSpec::new("depth", ElementRange::integer())
        },
        ElementSpec {
            continuous: false,
            ..ElementSpec::new(
                "class_code",
                ElementRange::Short {
                    min: -5,
                    max: 5000,
                    fill: -999,
                },
            )
        },
        ElementSpec::new("temp", ElementRange::float()),
        ElementSpec::new("elev", ElementRange::int_coded_float(10.0, 0.0)),
    ];
    let mut s = GvrsSpec::new(ROWS, COLS, 16, 20, elements[0].clone());
    s.elements = elements;
    s.raster_space = RasterSpace::Area;
    s.coordinates = Coordinates::Geographic {
        lon0: 170.0,
        lat0: 45.0,
        lon1: 196.0,
        lat1: 27.0,
    };
    s.product_label = "rasterpack test ✓".into();
    s.metadata = vec![
        Metadata::text("Author", 1, "Ada", false).with_description("who"),
        Metadata::text("Author", 2, "Grace", false),
        Metadata::integers("Counts", 0, &[1, -2, 3]),
        Metadata::doubles("Weights", 0, &[0.5, f64::NAN]),
        Metadata::shorts("Codes", 0, &[7, -7]),
        Metadata::text("Empty", 0, "", true),
    ];
    let i = ints(i32::MIN, -5, 5);
    let sh: Vec<i16> = i
        .iter()
        .map(|&x| if x == i32::MIN { -999 } else { (x % 5000) as i16 })
        .collect();
    let f = floats();
    let c: Vec<i32> = i.iter().map(|&x| x.wrapping_mul(3)).collect();
    let values = [
        ElementValues::Int(&i),
        ElementValues::Short(&sh),
        ElementValues::Float(&f),
        ElementValues::Codes(&c),
    ];
    let b = write::to_bytes(&s, &values).unwrap();
    assert_valid(&b, "four elements");
    let file = open(&b);
    assert_eq!(i32s(&read_el(&file, 0, false).unwrap()), i);
    let got: Vec<i16> = read_el(&file, 1, false)
        .unwrap()
        .data
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect();
    assert_eq!(got, sh);
    let got: Vec<u32> = read_el(&file, 2, false)
        .unwrap()
        .data
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(got, f.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    assert_eq!(i32s(&read_el(&file, 3, true).unwrap()), c);
    let meta: Vec<_> = file.metadata().unwrap().into_iter().map(|m| m.unwrap()).collect();
    let names: Vec<String> = meta
        .iter()
        .map(|m| String::from_utf8_lossy(&m.name.bytes).into_owned())
        .collect();
    for n in [
        "GvrsJavaCodecs",
        "GvrsCompressionCodecs",
        "Author",
        "Counts",
        "Weights",
        "Codes",
        "Empty",
    ] {
        assert!(names.iter().any(|x| x == n), "metadata {n} missing from {names:?}");
    }
    let counts = meta.iter().find(|m| m.name.bytes == b"Counts").unwrap();
    assert_eq!(
        counts.content,
        [1i32, -2, 3].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()
    );
    let codecs = meta.iter().find(|m| m.name.bytes == b"GvrsCompressionCodecs").unwrap();
    assert_eq!(&codecs.content[4..], b"GvrsHuffman|GvrsDeflate|GvrsFloat");
    // Geographic transform: cell (0,0) centre and the last cell.
    let (x, y) = file.grid_to_model(0.0, 0.0);
    assert_eq!((x, y), (170.0, 45.0));
    let (x, y) = file.grid_to_model(f64::from(ROWS - 1), f64::from(COLS - 1));
    assert!((x - 196.0).abs() < 1e-9 && (y - 27.0).abs() < 1e-9, "{x} {y}");
}

#[test]
fn closed_file_layout() {
    let v = ints(i32::MIN, 0, 1);
    let b = write::to_bytes(
        &spec(ElementRange::integer(), &write::DEFAULT_CODECS, true),
        &[ElementValues::Int(&v)],
    )
    .unwrap();
    assert_eq!(&b[..16], b"gvrs raster\0\x01\x04\0\0");
    assert_eq!(
        i64::from_le_bytes(b[48..56].try_into().unwrap()),
        0,
        "time opened for writing"
    );
    assert_eq!(i16::from_le_bytes([b[72], b[73]]), 1, "levels");
    let len = i32::from_le_bytes(b[16..20].try_into().unwrap()) as usize;
    assert_eq!(len % 8, 0);
    let crc = u32::from_le_bytes(b[16 + len - 4..16 + len].try_into().unwrap());
    assert_eq!(crc, crc32c::crc32c(&b[16..16 + len - 4]));
    assert_eq!(b.len() % 8, 0);
    // The all-fill tile (1, 0) is not stored: 3x3 tiles, 8 stored.
    let file = open(&b);
    assert_eq!(file.stored_tiles().len(), 8);
    assert_eq!(file.tile_offset(1, 0), None);
}

#[test]
fn all_fill_grid_stores_no_tiles() {
    let v = vec![i16::MIN; (ROWS * COLS) as usize];
    let b = write::to_bytes(
        &spec(ElementRange::short(), &write::DEFAULT_CODECS, true),
        &[ElementValues::Short(&v)],
    )
    .unwrap();
    assert_valid(&b, "all fill");
    let file = open(&b);
    assert!(file.stored_tiles().is_empty());
    let a = read_el(&file, 0, false).unwrap();
    assert!(a
        .data
        .chunks_exact(2)
        .all(|x| i16::from_le_bytes([x[0], x[1]]) == i16::MIN));
}

#[test]
fn one_by_one_and_single_tile_grids() {
    for (rows, cols) in [(1u32, 1u32), (1, 9), (9, 1), (2, 2), (5, 7)] {
        let v: Vec<i32> = (0..rows * cols).map(|i| i as i32 * 1000).collect();
        for codecs in codec_lists() {
            let s = {
                let mut s = GvrsSpec::new(rows, cols, rows, cols, ElementSpec::new("z", ElementRange::integer()));
                s.codecs = codecs.clone();
                s
            };
            let b = write::to_bytes(&s, &[ElementValues::Int(&v)]).unwrap();
            assert_valid(&b, &format!("{rows}x{cols} {codecs:?}"));
            assert_eq!(i32s(&read_el(&open(&b), 0, false).unwrap()), v);
        }
    }
}

#[test]
fn write_ndarray_maps_dtypes() {
    let mk = |dtype: DType, shape: Vec<u64>, data: Vec<u8>| NdArray::new(dtype, shape, data).unwrap();
    let i: Vec<i32> = (0..300 * 200).map(|k| (k % 200) * 3 + k / 200).collect();
    let arr = mk(
        DType::I32,
        vec![300, 200],
        i.iter().flat_map(|x| x.to_le_bytes()).collect(),
    );
    for compress in [
        None,
        Some("none"),
        Some("deflate"),
        Some("huffman"),
        Some("float"),
        Some("all"),
        Some("lsop"),
    ] {
        let opts = WriteOptions {
            compress: compress.map(String::from),
            ..Default::default()
        };
        let mut out = Vec::new();
        write::write_ndarray(&arr, &opts, &mut out).unwrap();
        assert_valid(&out, &format!("{compress:?}"));
        let f = open(&out);
        assert_eq!(i32s(&read_el(&f, 0, false).unwrap()), i);
        assert_eq!(f.stored_tiles().len(), 6, "128x128 default tiles");
    }
    let opts = WriteOptions {
        tile: Some((50, 40)),
        ..Default::default()
    };
    let sh = mk(
        DType::I16,
        vec![7, 11],
        (0..77i16).flat_map(|x| x.to_le_bytes()).collect(),
    );
    let mut out = Vec::new();
    write::write_ndarray(&sh, &WriteOptions::default(), &mut out).unwrap();
    assert_eq!(read_el(&open(&out), 0, false).unwrap().data, sh.data);
    let fl = mk(
        DType::F32,
        vec![60, 50],
        (0..3000).flat_map(|x| (x as f32 * 0.5).to_le_bytes()).collect(),
    );
    let mut out = Vec::new();
    write::write_ndarray(&fl, &opts, &mut out).unwrap();
    assert_eq!(read_el(&open(&out), 0, false).unwrap().data, fl.data);
    // Refusals are usage errors.
    let bad = [
        (mk(DType::F64, vec![2, 2], vec![0; 32]), WriteOptions::default()),
        (mk(DType::I32, vec![2, 2, 2], vec![0; 32]), WriteOptions::default()),
        (
            mk(DType::I32, vec![2, 2], vec![0; 16]),
            WriteOptions {
                compress: Some("zstd".into()),
                ..Default::default()
            },
        ),
        (
            mk(DType::I32, vec![2, 2], vec![0; 16]),
            WriteOptions {
                tile: Some((3, 1)),
                ..Default::default()
            },
        ),
    ];
    for (a, o) in bad {
        let e = write::write_ndarray(&a, &o, &mut Vec::new()).unwrap_err();
        assert_eq!(e.kind, rasterpack_common::ErrorKind::Usage, "{e:?}");
    }
}

/// The header the writer produces for the parameters of the corpus file `float_cartesian.gvrs`
/// (Gridfour-written) is byte-identical from offset 104 to the header CRC.
#[test]
fn header_matches_gridfour() {
    let Some(root) = rasterpack_common::testkit::corpus_dir("") else {
        return;
    };
    let gf = std::fs::read(std::path::Path::new(&root).join("gvrs/float_cartesian.gvrs")).expect("corpus file");
    let e = ElementSpec {
        label: "Temperature".into(),
        description: "Float with special values: NaN (fill), +/-Inf, -0.0, subnormals".into(),
        unit: "degC".into(),
        ..ElementSpec::new("temperature", ElementRange::float())
    };
    let mut s = GvrsSpec::new(64, 48, 16, 16, e);
    s.codecs = vec![];
    s.coordinates = Coordinates::Cartesian {
        x0: 500000.0,
        y0: 4100000.0,
        x1: 501410.0,
        y1: 4098110.0,
    };
    let v = vec![1.0f32; 64 * 48];
    let b = write::to_bytes(&s, &[ElementValues::Float(&v)]).unwrap();
    let len = i32::from_le_bytes(gf[16..20].try_into().unwrap()) as usize;
    assert_eq!(i32::from_le_bytes(b[16..20].try_into().unwrap()) as usize, len);
    assert_eq!(&b[104..16 + len - 4], &gf[104..16 + len - 4]);
}

fn bits32(v: &serde_json::Value) -> f32 {
    f32::from_bits(u32::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap())
}

fn bits64(v: &serde_json::Value) -> f64 {
    f64::from_bits(u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap())
}

/// For every valid corpus file, a spec rebuilt from its sidecar yields a header identical to
/// Gridfour's from offset 104 (grid size) to the header CRC: element specs, codec list, product
/// label, padding, coordinates and both transforms.
#[test]
fn headers_match_every_corpus_file() {
    let Some(root) = rasterpack_common::testkit::corpus_dir("") else {
        return;
    };
    let dir = std::path::Path::new(&root).join("gvrs");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if !name.ends_with(".truth.json") {
            continue;
        }
        let t: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join(&name)).unwrap()).unwrap();
        if t["expected_verdict"] != "valid" {
            continue;
        }
        let gf = std::fs::read(dir.join(t["file"].as_str().unwrap())).unwrap();
        let elements: Vec<ElementSpec> = t["elements"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let i = |k: &str| e[k].as_i64().unwrap();
                let kind = match e["type"].as_str().unwrap() {
                    "INTEGER" => ElementRange::Integer {
                        min: i("min") as i32,
                        max: i("max") as i32,
                        fill: i("fill") as i32,
                    },
                    "SHORT" => ElementRange::Short {
                        min: i("min") as i16,
                        max: i("max") as i16,
                        fill: i("fill") as i16,
                    },
                    "FLOAT" => ElementRange::Float {
                        min: bits32(&e["min_bits"]),
                        max: bits32(&e["max_bits"]),
                        fill: bits32(&e["fill_bits"]),
                    },
                    _ => ElementRange::IntCodedFloat {
                        min: bits32(&e["min_bits"]),
                        max: bits32(&e["max_bits"]),
                        fill: bits32(&e["fill_bits"]),
                        scale: bits32(&e["scale_bits"]),
                        offset: bits32(&e["offset_bits"]),
                        min_int: i("min_int") as i32,
                        max_int: i("max_int") as i32,
                        fill_int: i("fill_int") as i32,
                    },
                };
                ElementSpec {
                    continuous: e["continuous"].as_bool().unwrap(),
                    label: e["label"].as_str().unwrap().into(),
                    description: e["description"].as_str().unwrap().into(),
                    unit: e["unit"].as_str().unwrap().into(),
                    ..ElementSpec::new(e["name"].as_str().unwrap(), kind)
                }
            })
            .collect();
        let u = |k: &str| t[k].as_u64().unwrap() as u32;
        let mut s = GvrsSpec::new(
            u("rows"),
            u("cols"),
            u("tile_rows"),
            u("tile_cols"),
            elements[0].clone(),
        );
        s.elements = elements;
        s.codecs = t["codecs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| Codec::from_name(c.as_str().unwrap()).unwrap())
            .collect();
        s.checksums = t["checksums_enabled"].as_bool().unwrap();
        s.product_label = t["product_label"].as_str().unwrap().into();
        s.raster_space = match t["raster_space"]["code"].as_u64().unwrap() {
            1 => RasterSpace::Point,
            2 => RasterSpace::Area,
            _ => RasterSpace::Unspecified,
        };
        let c = &t["coordinate_system"];
        let (x0, y0, dx, dy) = (
            bits64(&c["x0_bits"]),
            bits64(&c["y0_bits"]),
            bits64(&c["cell_size_x_bits"]),
            bits64(&c["cell_size_y_bits"]),
        );
        let (x1, y1) = (bits64(&c["x1_bits"]), bits64(&c["y1_bits"]));
        // Files were made from corners or from a spacing; rebuild them the same way.
        let corners = (x1 - x0) / f64::from(s.cols - 1) == dx && (y1 - y0) / f64::from(s.rows - 1) == dy;
        s.coordinates = match (c["code"].as_u64().unwrap(), corners) {
            (1, true) => Coordinates::Cartesian { x0, y0, x1, y1 },
            (1, false) => Coordinates::CartesianSpacing { x0, y0, dx, dy },
            (2, true) => Coordinates::Geographic {
                lon0: x0,
                lat0: y0,
                lon1: x1,
                lat1: y1,
            },
            (2, false) => Coordinates::GeographicSpacing {
                lon0: x0,
                lat0: y0,
                dlon: dx,
                dlat: dy,
            },
            _ => Coordinates::Unspecified,
        };
        let b = write::header_bytes(&s).unwrap();
        let len = i32::from_le_bytes(gf[16..20].try_into().unwrap()) as usize;
        assert_eq!(b.len(), 16 + len, "{name}: header length");
        assert_eq!(&b[104..16 + len - 4], &gf[104..16 + len - 4], "{name}: header bytes");
        checked += 1;
    }
    assert!(checked >= 25, "{checked}");
}

/// A smooth integer grid written with LSOP12 as the only codec: tiles are LSOP12 blocks (the
/// first block byte is index 0) and read back exactly through the reader.
#[test]
fn lsop12_tiles_round_trip_through_the_reader() {
    let (rows, cols) = (90u32, 70u32);
    let v: Vec<i32> = (0..rows * cols)
        .map(|i| {
            let (r, c) = (f64::from(i / cols), f64::from(i % cols));
            (2000.0 * (r * 0.05).sin() * (c * 0.04).cos() + 10.0 * r) as i32 + (i % 3) as i32
        })
        .collect();
    let mut s = GvrsSpec::new(rows, cols, 30, 35, ElementSpec::new("z", ElementRange::integer()));
    s.codecs = vec![Codec::Lsop12];
    let b = write::to_bytes(&s, &[ElementValues::Int(&v)]).unwrap();
    assert_valid(&b, "lsop");
    let f = open(&b);
    assert_eq!(i32s(&read_el(&f, 0, false).unwrap()), v);
    let tiles = f.stored_tiles();
    assert_eq!(tiles.len(), 6);
    for (_, off) in tiles {
        let at = off as usize + 4;
        let n = i32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
        assert!(n < 30 * 35 * 4, "tile stored compressed");
        assert_eq!((b[at + 4], b[at + 5]), (0, 12), "LSOP12 block header");
    }
}

#[test]
fn bad_specs_are_usage_errors() {
    let v = vec![0i32; 16];
    let base = || GvrsSpec::new(4, 4, 2, 2, ElementSpec::new("z", ElementRange::integer()));
    let mut bad = Vec::new();
    let mut s = base();
    s.elements.push(ElementSpec::new("z", ElementRange::integer()));
    bad.push((s, 2));
    let mut s = base();
    s.elements[0].name = "1abc".into();
    bad.push((s, 1));
    let mut s = base();
    s.metadata = vec![Metadata::integers("A", 1, &[1]), Metadata::integers("A", 1, &[2])];
    bad.push((s, 1));
    let mut s = base();
    s.metadata = vec![Metadata::text("GvrsJavaCodecs", 0, "x", true)];
    bad.push((s, 1));
    let mut s = base();
    s.codecs = vec![Codec::Deflate, Codec::Deflate];
    bad.push((s, 1));
    let mut s = base();
    s.tile_rows = 0;
    bad.push((s, 1));
    for (s, n) in bad {
        let values = vec![ElementValues::Int(&v); n];
        let e = write::to_bytes(&s, &values).unwrap_err();
        assert_eq!(e.kind, rasterpack_common::ErrorKind::Usage, "{e:?}");
    }
    // Wrong value count and wrong value type.
    assert!(write::to_bytes(&base(), &[ElementValues::Int(&v[..15])]).is_err());
    assert!(write::to_bytes(&base(), &[ElementValues::Float(&[0.0; 16])]).is_err());
}

/// The codec metadata records the writer adds are byte-identical (CRC included) to Gridfour's
/// in `int_deflate.gvrs` (codec list [GvrsDeflate], checksums on) and
/// `short_compressed_default.gvrs` (default list, checksums off).
#[test]
fn codec_records_match_gridfour() {
    let Some(root) = rasterpack_common::testkit::corpus_dir("") else {
        return;
    };
    fn record<'a>(file: &'a [u8], name: &str) -> &'a [u8] {
        let mut key = (name.len() as u16).to_le_bytes().to_vec();
        key.extend_from_slice(name.as_bytes());
        // The record content starts with the name; its header is the 8 bytes before.
        let at = file
            .windows(key.len())
            .position(|w| w == key.as_slice())
            .expect("record present")
            - 8;
        let len = i32::from_le_bytes(file[at..at + 4].try_into().unwrap()) as usize;
        &file[at..at + len]
    }
    for (file, codecs, checksums) in [
        ("int_deflate.gvrs", vec![Codec::Deflate], true),
        ("short_compressed_default.gvrs", write::DEFAULT_CODECS.to_vec(), false),
    ] {
        let gf = std::fs::read(std::path::Path::new(&root).join("gvrs").join(file)).unwrap();
        let s = spec(ElementRange::integer(), &codecs, checksums);
        let v = vec![0i32; (ROWS * COLS) as usize];
        let b = write::to_bytes(&s, &[ElementValues::Int(&v)]).unwrap();
        for name in ["GvrsJavaCodecs", "GvrsCompressionCodecs"] {
            assert_eq!(record(&b, name), record(&gf, name), "{file}: {name}");
        }
    }
}

/// GvrsCanonicalHuffman in every form the writer makes: uniform tiles, each predictor (nulls
/// included), values that need each escape length, and LSOP12 with canonical residuals (revised
/// header); everything reads back exactly and validates.
#[test]
fn canonical_blocks_in_every_form_round_trip() {
    let (rows, cols) = (96u32, 120u32);
    let (tr, tc) = (24usize, 30usize);
    let mut v = vec![0i32; (rows * cols) as usize];
    for r in 0..rows as usize {
        for c in 0..cols as usize {
            let t = (r / tr) * 4 + c / tc;
            let (fr, fc) = (r as f64, c as f64);
            v[r * cols as usize + c] = match t % 8 {
                0 => 42,                                                  // uniform
                1 => (r * 3 + c * 7) as i32,                              // a ramp (Linear / Triangle)
                2 => (fr * 0.3).sin().mul_add(900.0, fc * 11.0) as i32,   // smooth
                3 => ((r * 7919 + c * 104_729) % 65_536) as i32 - 32_768, // noise: escapes
                4 => {
                    // Nulls among data: DifferencingWithNulls.
                    if (r + c) % 5 == 0 {
                        i32::MIN
                    } else {
                        (r * c) as i32
                    }
                }
                5 => ((r as i64 * 40_000_003 + c as i64 * 7_000_001) % 2_000_000_000) as i32, // 24-bit escapes
                6 => {
                    // Smooth terrain plus a little noise: LSOP12 territory.
                    let h = ((r * 7919 + c * 6151) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60;
                    (2000.0 * (fr * 0.05).sin() * (fc * 0.04).cos() + 10.0 * fr) as i32 + h as i32
                }
                _ => -((r as i32) << 20) + c as i32,
            };
        }
    }
    let lists = [
        vec![Codec::CanonicalHuffman],
        vec![Codec::CanonicalHuffman, Codec::Lsop12],
        write::MASTER_DEFAULT_CODECS.to_vec(),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for codecs in lists {
        let mut s = GvrsSpec::new(
            rows,
            cols,
            tr as u32,
            tc as u32,
            ElementSpec::new("z", ElementRange::integer()),
        );
        s.codecs = codecs.clone();
        let b = write::to_bytes(&s, &[ElementValues::Int(&v)]).unwrap();
        assert_valid(&b, &format!("{codecs:?}"));
        let f = open(&b);
        assert_eq!(i32s(&read_el(&f, 0, false).unwrap()), v, "{codecs:?}");
        let st = rasterpack_gvrs::tile_stats(&f, usize::MAX);
        seen.extend(st.encodings[0].keys().cloned());
        // Short elements through the same codec (values fit i16 after truncation of the noise).
        let sv: Vec<i16> = v
            .iter()
            .map(|&x| if x == i32::MIN { i16::MIN } else { x as i16 })
            .collect();
        let mut s2 = GvrsSpec::new(
            rows,
            cols,
            tr as u32,
            tc as u32,
            ElementSpec::new("s", ElementRange::short()),
        );
        s2.codecs = codecs.clone();
        let b = write::to_bytes(&s2, &[ElementValues::Short(&sv)]).unwrap();
        assert_valid(&b, &format!("short {codecs:?}"));
        let a = read_el(&open(&b), 0, false).unwrap();
        let got: Vec<i16> = a
            .data
            .chunks_exact(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(got, sv, "short {codecs:?}");
    }
    // A noisy terrain in 120 x 120 tiles (like the corpus's big file): LSOP12 with canonical
    // Huffman residuals.
    let n = 240u32;
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let t: Vec<i32> = (0..n * n)
        .map(|i| {
            let (r, c) = (f64::from(i / n), f64::from(i % n));
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let noise = (x % 5) as f64 - 2.0;
            (3000.0 * (r * 0.021).sin() * (c * 0.017).cos() + 7.0 * r + noise) as i32
        })
        .collect();
    let mut s = GvrsSpec::new(n, n, 120, 120, ElementSpec::new("z", ElementRange::integer()));
    s.codecs = vec![Codec::CanonicalHuffman, Codec::Lsop12];
    let b = write::to_bytes(&s, &[ElementValues::Int(&t)]).unwrap();
    assert_valid(&b, "terrain");
    let f = open(&b);
    assert_eq!(i32s(&read_el(&f, 0, false).unwrap()), t);
    seen.extend(rasterpack_gvrs::tile_stats(&f, usize::MAX).encodings[0].keys().cloned());
    for want in [
        "GvrsCanonicalHuffman/uniform",
        "GvrsCanonicalHuffman/predictor=4(DifferencingWithNulls)",
        "LSOP12/residuals=CanonicalHuffman/revised_header",
    ] {
        assert!(seen.iter().any(|e| e.contains(want)), "{want} not among {seen:#?}");
    }
    assert!(
        seen.iter()
            .filter(|e| e.contains("GvrsCanonicalHuffman/predictor="))
            .count()
            >= 3,
        "{seen:#?}"
    );
}

/// The `GvrsJavaCodecs` records may be left out only for a prefix of Gridfour's classic list:
/// without them Gridfour maps codec indexes through its own default list.
#[test]
fn codec_records_are_required_for_other_lists() {
    let v = vec![5i32; 64];
    for (codecs, ok) in [
        (vec![], true),
        (vec![Codec::Huffman], true),
        (write::DEFAULT_CODECS.to_vec(), true),
        (vec![Codec::Deflate], false),
        (vec![Codec::Float, Codec::Deflate, Codec::Huffman], false),
        (write::MASTER_DEFAULT_CODECS.to_vec(), false),
        (vec![Codec::Huffman, Codec::Deflate, Codec::Float, Codec::Lsop12], false),
    ] {
        let mut s = GvrsSpec::new(8, 8, 4, 4, ElementSpec::new("z", ElementRange::integer()));
        s.codecs = codecs.clone();
        s.java_codec_records = false;
        let r = write::to_bytes(&s, &[ElementValues::Int(&v)]);
        assert_eq!(r.is_ok(), ok, "{codecs:?}: {r:?}");
        if let Err(e) = r {
            assert_eq!(e.kind, rasterpack_common::ErrorKind::Usage);
            assert!(e.message.contains("GvrsJavaCodecs"), "{}", e.message);
        }
    }
}

#[test]
fn compress_option_lists() {
    use Codec::*;
    for (text, want) in [
        (None, vec![Huffman, Deflate, Float]),
        (Some("default"), vec![Huffman, Deflate, Float]),
        (Some("all"), vec![Huffman, Deflate, Float, CanonicalHuffman]),
        (Some("none"), vec![]),
        (Some("canonical"), vec![CanonicalHuffman]),
        (Some("lsop"), vec![Huffman, Deflate, Float, Lsop12]),
        (
            Some("all,lsop"),
            vec![Huffman, Deflate, Float, CanonicalHuffman, Lsop12],
        ),
        (Some("canonical, deflate,float"), vec![CanonicalHuffman, Deflate, Float]),
    ] {
        assert_eq!(write::codecs_for(text).unwrap(), want, "{text:?}");
    }
    for bad in ["zstd", "all,zstd", ""] {
        assert_eq!(
            write::codecs_for(Some(bad)).unwrap_err().kind,
            rasterpack_common::ErrorKind::Usage
        );
    }
}

#[test]
fn write_arrays_writes_one_element_per_array() {
    let named = |name: &str, dtype: DType, data: Vec<u8>| {
        let mut a = NdArray::new(dtype, vec![ROWS as u64, COLS as u64], data).unwrap();
        a.name = Some(name.into());
        a
    };
    let i = ints(i32::MIN, -5, 5);
    let f = floats();
    let arrays = [
        named("elev", DType::F32, f.iter().flat_map(|x| x.to_le_bytes()).collect()),
        named("class_id", DType::I32, i.iter().flat_map(|x| x.to_le_bytes()).collect()),
    ];
    let opts = WriteOptions {
        tile: Some((16, 20)),
        compress: Some("all".into()),
        ..Default::default()
    };
    let mut out = Vec::new();
    GvrsFormat
        .write_arrays(&arrays, &Default::default(), &opts, &mut out)
        .unwrap();
    assert_valid(&out, "two elements");
    let file = open(&out);
    assert_eq!(read_el(&file, 0, false).unwrap().data, arrays[0].data);
    assert_eq!(i32s(&read_el(&file, 1, false).unwrap()), i);

    // Refused: a name GVRS cannot hold (never changed), two grids, metadata, no array.
    let mut bad = arrays.clone();
    bad[1].name = Some("class-id".into());
    let refuse = |arrays: &[NdArray], meta: &serde_json::Map<String, serde_json::Value>| {
        let e = GvrsFormat
            .write_arrays(arrays, meta, &WriteOptions::default(), &mut Vec::new())
            .unwrap_err();
        assert_eq!(e.kind, rasterpack_common::ErrorKind::Usage, "{e}");
        e.message
    };
    assert!(refuse(&bad, &Default::default()).contains("identifier"));
    let mut small = arrays[0].clone();
    small.shape = vec![COLS as u64, ROWS as u64];
    assert!(refuse(
        &[arrays[0].clone(), {
            small.name = Some("t".into());
            small
        }],
        &Default::default()
    )
    .contains("same grid"));
    let mut meta = serde_json::Map::new();
    meta.insert("a".into(), 1.into());
    assert!(refuse(&arrays, &meta).contains("metadata"));
    assert!(refuse(&[], &Default::default()).contains("at least one"));
}
