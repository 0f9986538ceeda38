//! The `rasterpack` library facade: `rasterpack::open` for every format without naming it,
//! the full validation report whatever is broken (the same one the CLI prints), request
//! options a format does not honour refused by the library too, and `save` for every writer.

use std::path::{Path, PathBuf};
use std::process::Command;

use rasterpack::{ArrayRequest, DType, ErrorKind, Format as _, NdArray, WriteOptions};
use serde_json::Value;

fn testdata(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata").join(rel)
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rp-library-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn open_detects_every_format_and_reads_what_the_format_crate_reads() {
    let cases = [
        ("volp/temperature_4x32x32_int16.volp", "volp"),
        ("gvrs/crafted_all_types.gvrs", "gvrs"),
        ("udf/sample.udf", "udf"),
        ("fold/sample.fold", "fold"),
        ("vds/small_r32_zip.vds", "vds"),
        ("vds/small_objdir", "vds"),
    ];
    for (rel, format) in cases {
        let path = testdata(rel);
        // No trait import: methods of `dyn ArrayFile` need none.
        let file = rasterpack::open(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert_eq!(file.format_name(), format, "{rel}");
        let arrays = file.arrays().unwrap();
        assert!(!arrays.is_empty(), "{rel}");
        // Every listed array reads, with the dtype and shape listed, and equals what the
        // format's own entry point (detected by the caller) reads.
        let input = rasterpack::Input::open(&path).unwrap();
        let direct = rasterpack::detect(&input).unwrap();
        assert_eq!(direct.name(), format);
        for info in &arrays {
            let req = ArrayRequest {
                element: info.name.clone(),
                ..Default::default()
            };
            let a = file.read(&req).unwrap_or_else(|e| panic!("{rel} {:?}: {e}", info.name));
            assert_eq!((a.dtype, &a.shape), (info.dtype, &info.shape), "{rel} {:?}", info.name);
            assert_eq!(a, direct.read_array(&input, &req).unwrap(), "{rel} {:?}", info.name);
        }
        assert!(file.validate().is_valid(false), "{rel}");
    }
    // A known value: the temperature sample's first stored value is listed in its README
    // generator; physical values are stored * 0.01 + 250 kelvin.
    let t = rasterpack::open(testdata("volp/temperature_4x32x32_int16.volp")).unwrap();
    let stored = t.read(&ArrayRequest::default()).unwrap();
    let physical = t.read(&ArrayRequest::default().with_physical(true)).unwrap();
    let s = stored.to_vec::<i16>().unwrap();
    let p = physical.to_vec::<f64>().unwrap();
    assert_eq!(s.len(), 4 * 32 * 32);
    for (s, p) in s.iter().zip(&p) {
        assert!((f64::from(*s) * 0.01 + 250.0 - p).abs() < 1e-9);
    }
}

#[test]
fn open_of_unknown_content_and_of_a_missing_path_fail_with_their_kinds() {
    let e = rasterpack::open(testdata("volp/invalid_bad_magic.volp")).err().unwrap();
    assert_eq!((e.kind, &*e.code), (ErrorKind::Invalid, "format.unknown"));
    let e = rasterpack::open(testdata("no/such/file.volp")).err().unwrap();
    assert_eq!(e.kind, ErrorKind::Io);
    assert!(rasterpack::validate(testdata("no/such/file.volp")).is_err());
}

/// The CLI's `validate --json` findings of `path`, as (severity, code, offset, message).
fn cli_findings(path: &Path) -> (Value, Vec<(String, String, Value, String)>) {
    let out = Command::new(env!("CARGO_BIN_EXE_rasterpack"))
        .args(["validate", "--json"])
        .arg(path)
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let file = &doc["files"][0];
    let findings = file["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["severity"].as_str().unwrap().to_string(),
                f["code"].as_str().unwrap().to_string(),
                f["offset"].clone(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (file["format"].clone(), findings)
}

#[test]
fn validate_gives_the_full_report_of_a_file_that_does_not_open() {
    let dir = scratch("broken-header");
    // A VOLP file whose JSON header is broken (its first byte is no longer `{`), and one with
    // an unknown magic: neither opens, and both still get the report the CLI prints.
    let mut bytes = std::fs::read(testdata("volp/temperature_4x32x32_int16.volp")).unwrap();
    assert_eq!(bytes[8], b'{');
    bytes[8] = b'x';
    let broken = dir.join("broken_header.volp");
    std::fs::write(&broken, &bytes).unwrap();
    let e = rasterpack::volp::VolpFile::open(&broken).err().unwrap();
    assert_eq!(e.kind, ErrorKind::Invalid);

    for path in [broken.clone(), testdata("volp/invalid_bad_magic.volp")] {
        let report = rasterpack::validate(&path).unwrap();
        assert!(!report.is_valid(false), "{}", path.display());
        let (cli_format, cli) = cli_findings(&path);
        let lib: Vec<(String, String, Value, String)> = report
            .findings
            .iter()
            .map(|f| {
                (
                    f.severity.as_str().to_string(),
                    f.code.to_string(),
                    f.offset.map(Value::from).unwrap_or(Value::Null),
                    f.message.clone(),
                )
            })
            .collect();
        assert!(!lib.is_empty());
        assert_eq!(lib, cli, "{}", path.display());
        assert_eq!(
            (!report.format.is_empty()).then_some(report.format),
            cli_format.as_str(),
            "{}",
            path.display()
        );
    }
    // The same report from the format's own reader type, without the facade.
    let own = rasterpack::volp::VolpFile::validate_path(&broken).unwrap();
    assert_eq!(own.findings, rasterpack::validate(&broken).unwrap().findings);
    assert!(own.findings.iter().any(|f| f.code.starts_with("volp.header")));
}

#[test]
fn request_options_a_format_does_not_honour_are_refused_by_the_library() {
    let volp = rasterpack::open(testdata("volp/temperature_4x32x32_int16.volp")).unwrap();
    // VOLP has no integer codes to return: `codes` was silently ignored before.
    let e = volp.read(&ArrayRequest::default().with_codes(true)).err().unwrap();
    assert_eq!((e.kind, &*e.code), (ErrorKind::Usage, "request.option_not_honoured"));
    assert!(e.message.contains("ArrayRequest::codes"), "{e}");
    assert!(!e.to_string().contains("--"), "library words, not flags: {e}");
    // GVRS stores no levels of detail.
    let gvrs = rasterpack::open(testdata("gvrs/crafted_all_types.gvrs")).unwrap();
    let lod = ArrayRequest {
        element: Some("a".into()),
        lod: 1,
        ..Default::default()
    };
    let e = gvrs.read(&lod).err().unwrap();
    assert_eq!(&*e.code, "request.option_not_honoured");
    assert!(e.message.contains("ArrayRequest::lod"), "{e}");
    // The same through the format-level call, for `.npy` (which has no elements).
    let dir = scratch("options");
    let npy = dir.join("a.npy");
    let a = NdArray::from_vec(vec![2, 3], (0..6).map(|v| v as f32).collect()).unwrap();
    rasterpack::save(&a, &npy, &WriteOptions::default()).unwrap();
    let input = rasterpack::Input::open(&npy).unwrap();
    let e = rasterpack::common::NpyFormat
        .read_array(&input, &ArrayRequest::for_element("x"))
        .err()
        .unwrap();
    assert_eq!(&*e.code, "request.option_not_honoured");
    // A writer option the target does not honour.
    let opts = WriteOptions {
        tile: Some((2, 2)),
        ..Default::default()
    };
    let e = rasterpack::save(&a, dir.join("a.volp"), &opts).err().unwrap();
    assert_eq!(&*e.code, "request.option_not_honoured");
    assert!(e.message.contains("WriteOptions::tile"), "{e}");
    assert!(!dir.join("a.volp").exists());
}

#[test]
fn library_errors_name_the_element_without_cli_flags() {
    let gvrs = rasterpack::open(testdata("gvrs/crafted_all_types.gvrs")).unwrap();
    let e = gvrs.read(&ArrayRequest::default()).err().unwrap();
    assert_eq!((e.kind, &*e.code), (ErrorKind::Usage, "request.element_required"));
    assert!(!e.to_string().contains("--element"), "{e}");
    assert!(!e.to_string().contains("[usage]"), "{e}");
}

#[test]
fn save_writes_every_writable_format_and_the_file_reads_back_equal() {
    let dir = scratch("save");
    let shape = vec![2, 3, 4];
    let values: Vec<f32> = (0..24).map(|v| v as f32 * 0.25 - 1.0).collect();
    let a = NdArray::from_vec(shape.clone(), values.clone()).unwrap();
    let two_d = NdArray::from_vec(vec![6, 4], values.clone()).unwrap();
    for (ext, array) in [
        ("npy", &a),
        ("volp", &a),
        ("udf", &a),
        ("fold", &a),
        ("gvrs", &two_d),
        ("vds", &a),
    ] {
        let path = dir.join(format!("saved.{ext}"));
        rasterpack::save(array, &path, &WriteOptions::default()).unwrap_or_else(|e| panic!("{ext}: {e}"));
        let file = rasterpack::open(&path).unwrap();
        assert_eq!(file.format_name(), ext);
        let info = &file.arrays().unwrap()[0];
        let back = file.read(&ArrayRequest {
            element: info.name.clone(),
            ..Default::default()
        });
        let back = back.unwrap_or_else(|e| panic!("{ext}: {e}"));
        assert_eq!(back.dtype, DType::F32, "{ext}");
        assert_eq!(back.shape, array.shape, "{ext}");
        assert_eq!(back.to_vec::<f32>().unwrap(), values, "{ext}");
        // No temporary file is left beside it.
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }
    // The format can be named instead of implied by the extension.
    let named = dir.join("no_extension");
    rasterpack::save_as(&a, &named, "volp", &WriteOptions::default()).unwrap();
    assert_eq!(rasterpack::open(&named).unwrap().format_name(), "volp");
    let e = rasterpack::save(&a, dir.join("x.unknown"), &WriteOptions::default())
        .err()
        .unwrap();
    assert_eq!(e.kind, ErrorKind::Usage);
    // A dtype VDS has no format for is refused without writing anything.
    let ints = NdArray::from_vec(vec![2, 2], vec![1i16, 2, 3, 4]).unwrap();
    let e = rasterpack::save(&ints, dir.join("x.vds"), &WriteOptions::default())
        .err()
        .unwrap();
    assert_eq!(e.kind, ErrorKind::Usage, "{e}");
    assert!(!dir.join("x.vds").exists());
}

/// The arrays of every testdata file, with the request that reads each.
fn every_testdata_array() -> Vec<(
    String,
    Box<dyn rasterpack::ArrayFile>,
    ArrayRequest,
    rasterpack::ArrayInfo,
)> {
    let mut out = Vec::new();
    for rel in [
        "volp/temperature_4x32x32_int16.volp",
        "volp/cloud_2x8x8_float32.volp",
        "gvrs/crafted_all_types.gvrs",
        "gvrs/crafted_compressed.gvrs",
        "udf/sample.udf",
        "fold/sample.fold",
        "fold/sample_rs16.fold",
        "vds/small_r32_zip.vds",
        "vds/small_4d_r32_none_lod1.vds",
        "vds/small_u8_rle_novalue.vds",
        "vds/small_objdir",
    ] {
        for info in rasterpack::open(testdata(rel)).unwrap().arrays().unwrap() {
            let req = ArrayRequest {
                element: info.name.clone(),
                ..Default::default()
            };
            out.push((rel.to_string(), rasterpack::open(testdata(rel)).unwrap(), req, info));
        }
    }
    out
}

/// The values of `array` as f64, whatever their dtype (for comparing typed blocks).
fn as_f64(a: &NdArray) -> Vec<f64> {
    macro_rules! conv {
        ($($d:ident => $t:ty),*) => {
            match a.dtype {
                $(DType::$d => a.to_vec::<$t>().unwrap().into_iter().map(|v| v as f64).collect(),)*
                other => panic!("no conversion for {other:?}"),
            }
        };
    }
    conv!(U8 => u8, I8 => i8, U16 => u16, I16 => i16, U32 => u32, I32 => i32, U64 => u64, I64 => i64, F32 => f32, F64 => f64)
}

/// Read `req` as blocks of `T` and put them together as f64 values in C order of the region.
fn blocks_as_f64<T: rasterpack::Element + Into<f64>>(
    file: &dyn rasterpack::ArrayFile,
    req: &ArrayRequest,
    block_bytes: u64,
) -> (usize, Vec<f64>) {
    let blocks = file.blocks::<T>(req).unwrap().with_block_bytes(block_bytes);
    let region = blocks.region().clone();
    let mut n = 0;
    let mut values = Vec::new();
    let mut next_outer = region.ranges.first().map(|r| r.start);
    for block in blocks {
        let block = block.unwrap();
        n += 1;
        // Blocks tile the region along the outermost axis, in order, with whole inner axes.
        assert_eq!(block.region.ranges[1..], region.ranges[1..]);
        assert_eq!(Some(block.region.ranges[0].start), next_outer);
        next_outer = Some(block.region.ranges[0].end);
        assert_eq!(block.values.len() as u64, block.shape().iter().product::<u64>());
        values.extend(block.values.into_iter().map(Into::into));
    }
    assert_eq!(next_outer, region.ranges.first().map(|r| r.end));
    (n, values)
}

#[test]
fn typed_blocks_put_together_equal_the_whole_read_and_regions_of_it() {
    let mut checked = 0;
    for (rel, file, req, info) in every_testdata_array() {
        let whole = file.read(&req).unwrap();
        // Small blocks, so that every array comes in several (each at least one outer index).
        let block_bytes = (whole.data.len() as u64 / 3).max(1);
        let (n, values) = match info.dtype {
            DType::F32 => blocks_as_f64::<f32>(&*file, &req, block_bytes),
            DType::I16 => blocks_as_f64::<i16>(&*file, &req, block_bytes),
            DType::U8 => blocks_as_f64::<u8>(&*file, &req, block_bytes),
            DType::F64 => blocks_as_f64::<f64>(&*file, &req, block_bytes),
            DType::I32 => blocks_as_f64::<i32>(&*file, &req, block_bytes),
            DType::U16 => blocks_as_f64::<u16>(&*file, &req, block_bytes),
            _ => continue,
        };
        let expected = as_f64(&whole);
        assert_eq!(values.len(), expected.len(), "{rel} {:?}", info.name);
        assert!(
            values
                .iter()
                .zip(&expected)
                .all(|(a, b)| a == b || (a.is_nan() && b.is_nan())),
            "{rel} {:?}",
            info.name
        );
        if info.shape[0] > 1 {
            assert!(n > 1, "{rel} {:?}: {n} block(s)", info.name);
        }
        // A region: the last index of every axis and everything before it on axis 0.
        let start: Vec<u64> = info.shape.iter().map(|&d| d / 2).collect();
        let size: Vec<u64> = info.shape.iter().map(|&d| d - d / 2).collect();
        let region = rasterpack::Region::from_start_size(&start, &size).unwrap();
        let part_req = req.clone().with_region(&region);
        let part = as_f64(&file.read(&part_req).unwrap());
        let (_, got) = match info.dtype {
            DType::F32 => blocks_as_f64::<f32>(&*file, &part_req, 64),
            DType::I16 => blocks_as_f64::<i16>(&*file, &part_req, 64),
            DType::U8 => blocks_as_f64::<u8>(&*file, &part_req, 64),
            DType::F64 => blocks_as_f64::<f64>(&*file, &part_req, 64),
            DType::I32 => blocks_as_f64::<i32>(&*file, &part_req, 64),
            DType::U16 => blocks_as_f64::<u16>(&*file, &part_req, 64),
            _ => unreachable!(),
        };
        assert!(
            got.iter().zip(&part).all(|(a, b)| a == b || (a.is_nan() && b.is_nan())) && got.len() == part.len(),
            "{rel} {:?} region",
            info.name
        );
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} arrays checked");
    // The wrong type is refused before any block is read; so is an unknown element.
    let volp = rasterpack::volp::VolpFile::open(testdata("volp/temperature_4x32x32_int16.volp")).unwrap();
    let e = volp.blocks::<f32>(&ArrayRequest::default()).err().unwrap();
    assert_eq!(&*e.code, "array.dtype_mismatch");
    // Physical values are float64, and the concrete reader type offers blocks too.
    let physical = ArrayRequest::default().with_physical(true);
    let all: Vec<f64> = volp
        .blocks::<f64>(&physical)
        .unwrap()
        .flat_map(|b| b.unwrap().values)
        .collect();
    assert_eq!(all, volp.read(&physical).unwrap().to_vec::<f64>().unwrap());
    let gvrs = rasterpack::open(testdata("gvrs/crafted_all_types.gvrs")).unwrap();
    assert!(gvrs.blocks::<f32>(&ArrayRequest::for_element("no such")).is_err());
}

/// A sink that checks every piece a source delivers is made of whole values.
struct AlignedPieces {
    size: u64,
    random: bool,
    pieces: usize,
}

impl rasterpack::ArraySink for AlignedPieces {
    fn begin(&mut self, info: &rasterpack::ArrayInfo) -> rasterpack::Result<()> {
        self.size = info.dtype.size() as u64;
        Ok(())
    }
    fn random_access(&self) -> bool {
        self.random
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> rasterpack::Result<()> {
        assert_eq!(offset % self.size, 0, "piece at {offset} starts inside a value");
        assert_eq!(
            data.len() as u64 % self.size,
            0,
            "piece at {offset} of {} bytes",
            data.len()
        );
        self.pieces += 1;
        Ok(())
    }
    fn fill_at(&mut self, offset: u64, len: u64, pattern: &[u8]) -> rasterpack::Result<()> {
        assert_eq!(pattern.len() as u64, self.size);
        assert_eq!(
            (offset % self.size, len % self.size),
            (0, 0),
            "fill at {offset} of {len}"
        );
        self.pieces += 1;
        Ok(())
    }
    fn finish(&mut self) -> rasterpack::Result<()> {
        Ok(())
    }
}

#[test]
fn array_sink_pieces_are_whole_values_for_every_format() {
    for (rel, file, req, info) in every_testdata_array() {
        let start: Vec<u64> = info.shape.iter().map(|&d| d / 3).collect();
        let size: Vec<u64> = info.shape.iter().map(|&d| d - d / 3 - d / 4).collect();
        let region = rasterpack::Region::from_start_size(&start, &size).unwrap();
        for req in [
            req.clone(),
            req.clone().with_region(&region),
            req.clone().with_physical(true),
        ] {
            for random in [true, false] {
                let mut sink = AlignedPieces {
                    size: 0,
                    random,
                    pieces: 0,
                };
                match file.stream(&req, &mut sink) {
                    Ok(()) => assert!(sink.pieces > 0, "{rel} {:?}", info.name),
                    // Physical values only where the format has them.
                    Err(e) if req.physical && e.code == "request.option_not_honoured" => {}
                    Err(e) => panic!("{rel} {:?}: {e}", info.name),
                }
            }
        }
    }
}

/// The blocks `for_each_block` hands on, put together as f64 values, after checking they tile
/// the region in order.
fn one_pass_as_f64<T: rasterpack::Element + Into<f64>>(
    file: &dyn rasterpack::ArrayFile,
    req: &ArrayRequest,
    region: &rasterpack::Region,
    block_bytes: u64,
) -> (usize, Vec<f64>) {
    let mut n = 0;
    let mut values = Vec::new();
    let mut next_outer = region.ranges[0].start;
    file.for_each_block::<T>(req, block_bytes, |block| {
        n += 1;
        assert_eq!(block.region.ranges[1..], region.ranges[1..]);
        assert_eq!(block.region.ranges[0].start, next_outer);
        next_outer = block.region.ranges[0].end;
        // At most block_bytes, unless one slab alone is larger.
        let bytes = block.values.len() as u64 * std::mem::size_of::<T>() as u64;
        let slabs = block.region.ranges[0].end - block.region.ranges[0].start;
        assert!(bytes <= block_bytes || slabs == 1, "{bytes} bytes in {slabs} slabs");
        values.extend(block.values.into_iter().map(Into::into));
        Ok(())
    })
    .unwrap();
    assert_eq!(next_outer, region.ranges[0].end);
    (n, values)
}

#[test]
fn one_pass_blocks_equal_the_whole_read_and_regions_of_it() {
    let mut checked = 0;
    for (rel, file, req, info) in every_testdata_array() {
        let start: Vec<u64> = info.shape.iter().map(|&d| d / 2).collect();
        let size: Vec<u64> = info.shape.iter().map(|&d| d - d / 2).collect();
        let part = rasterpack::Region::from_start_size(&start, &size).unwrap();
        for (req, region) in [
            (req.clone(), rasterpack::Region::full(&info.shape)),
            (req.clone().with_region(&part), part.clone()),
        ] {
            let expected = as_f64(&file.read(&req).unwrap());
            let block_bytes = (expected.len() as u64 * info.dtype.size() as u64 / 3).max(1);
            let (n, got) = match info.dtype {
                DType::F32 => one_pass_as_f64::<f32>(&*file, &req, &region, block_bytes),
                DType::I16 => one_pass_as_f64::<i16>(&*file, &req, &region, block_bytes),
                DType::U8 => one_pass_as_f64::<u8>(&*file, &req, &region, block_bytes),
                DType::F64 => one_pass_as_f64::<f64>(&*file, &req, &region, block_bytes),
                DType::I32 => one_pass_as_f64::<i32>(&*file, &req, &region, block_bytes),
                DType::U16 => one_pass_as_f64::<u16>(&*file, &req, &region, block_bytes),
                _ => continue,
            };
            assert_eq!(got.len(), expected.len(), "{rel} {:?} {region:?}", info.name);
            assert!(
                got.iter()
                    .zip(&expected)
                    .all(|(a, b)| a == b || (a.is_nan() && b.is_nan())),
                "{rel} {:?} {region:?}",
                info.name
            );
            if region.shape()[0] > 2 {
                assert!(n > 1, "{rel} {:?}: {n} block(s)", info.name);
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} reads checked");
    // The concrete reader types have it too; the wrong type is refused before any value.
    let fold = rasterpack::fold::FoldFile::open(testdata("fold/sample.fold")).unwrap();
    let info = &fold.arrays().unwrap()[0];
    let req = ArrayRequest {
        element: info.name.clone(),
        ..Default::default()
    };
    let mut calls = 0;
    let r = if info.dtype == DType::U16 {
        fold.for_each_block::<u8>(&req, 1 << 20, |_| {
            calls += 1;
            Ok(())
        })
    } else {
        fold.for_each_block::<u16>(&req, 1 << 20, |_| {
            calls += 1;
            Ok(())
        })
    };
    assert_eq!(r.err().map(|e| e.code.to_string()), Some("array.dtype_mismatch".into()));
    assert_eq!(calls, 0);
}
