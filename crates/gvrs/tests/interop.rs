//! Interop with the Gridfour-written corpus (`$RASTERPACK_CORPUS/gvrs`): verdicts and codes,
//! header fields, elements, codecs, metadata, tile directory facts, and bit-exact decoded grids
//! (compared by SHA-256 with the sidecars and byte for byte with the `.raw` dumps).

mod util;
use std::path::{Path, PathBuf};
use util::*;

use rasterpack_common::{ArrayRequest, Format, Input, Limits, ValidateOptions};
use rasterpack_gvrs::{tile_stats, validate::sidecar_code, GvrsCellValue, GvrsFile, GvrsFormat};
use serde_json::Value;

fn corpus() -> Option<PathBuf> {
    rasterpack_common::testkit::corpus_dir("gvrs")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn bits32(v: &Value) -> u32 {
    u32::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

fn bits64(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

fn name_of(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn verdicts_and_codes() {
    let Some(dir) = corpus() else { return };
    for (path, truth) in sidecars(&dir) {
        let input = Input::open(&path).unwrap();
        let report = GvrsFormat.validate(&input, &ValidateOptions::default());
        let name = name_of(&path);
        match truth["expected_verdict"].as_str().unwrap() {
            "valid" => {
                let problems: Vec<_> = report
                    .findings
                    .iter()
                    .filter(|f| f.severity != rasterpack_common::Severity::Info)
                    .collect();
                assert!(report.is_valid(false), "{name}: expected valid, findings {problems:#?}");
                assert!(
                    !report.unsupported,
                    "{name}: reported unsupported: {:#?}",
                    report.findings
                );
            }
            "invalid" => {
                assert!(!report.is_valid(false), "{name}: expected invalid");
                let code = truth["error_code"].as_str().unwrap();
                assert!(
                    report
                        .findings
                        .iter()
                        .any(|f| f.severity == rasterpack_common::Severity::Error && sidecar_code(&f.code) == code),
                    "{name}: no error finding maps to {code}: {:#?}",
                    report.findings
                );
            }
            v => panic!("{name}: unexpected verdict {v}"),
        }
    }
}

#[test]
fn opened_for_writing_is_refused_for_reading() {
    let Some(dir) = corpus() else { return };
    let input = Input::open(dir.join("neg_opened_for_writing.gvrs")).unwrap();
    // Opening shows the header (and validate() reports); every read of values refuses.
    let f = GvrsFile::from_input(input.clone(), Limits::default()).unwrap();
    let err = f.read_element("v").unwrap_err();
    assert_eq!(sidecar_code(&err.code), "OPENED_FOR_WRITING");
    assert_eq!(sidecar_code(&f.read_error().unwrap_err().code), "OPENED_FOR_WRITING");
    assert!(f
        .validate()
        .findings
        .iter()
        .any(|x| x.code == "gvrs.header.opened_for_writing"));
    // inspect still shows what it can, with the finding.
    let rep = GvrsFormat.inspect(&input, &Default::default()).unwrap();
    assert!(rep.findings.iter().any(|f| f.code == "gvrs.header.opened_for_writing"));
    assert!(GvrsFormat.read_array(&input, &ArrayRequest::default()).is_err());
}

fn check_header(name: &str, f: &GvrsFile, t: &Value) {
    let h = &f.header;
    let raw = &t["header_raw"];
    assert_eq!(h.version_major as u64, raw["version_major"].as_u64().unwrap(), "{name}");
    assert_eq!(h.version_minor as u64, raw["version_minor"].as_u64().unwrap(), "{name}");
    assert_eq!(
        h.record.length as i64,
        raw["header_record_length"].as_i64().unwrap(),
        "{name}"
    );
    assert_eq!(
        h.record.record_type as i64,
        raw["header_record_type"].as_i64().unwrap(),
        "{name}"
    );
    assert_eq!(hex(&h.uuid_bytes), raw["uuid_bytes_hex"].as_str().unwrap(), "{name}");
    assert_eq!(h.time_modified, raw["time_modified_ms"].as_i64().unwrap(), "{name}");
    assert_eq!(
        h.time_opened_for_writing,
        raw["time_opened_for_writing_ms"].as_i64().unwrap(),
        "{name}"
    );
    assert_eq!(
        h.offset_file_space_directory,
        raw["offset_file_space_directory"].as_i64().unwrap(),
        "{name}"
    );
    assert_eq!(
        h.offset_metadata_directory,
        raw["offset_metadata_directory"].as_i64().unwrap(),
        "{name}"
    );
    assert_eq!(h.levels as i64, raw["number_of_levels"].as_i64().unwrap(), "{name}");
    assert_eq!(
        h.offset_tile_directory,
        raw["offset_tile_directory"].as_i64().unwrap(),
        "{name}"
    );
    assert_eq!(f.uuid(), t["uuid"].as_str().unwrap(), "{name}");
    assert_eq!(h.product_label.lossy(), t["product_label"].as_str().unwrap(), "{name}");
    let g = f.geometry;
    for (v, k) in [
        (g.rows, "rows"),
        (g.cols, "cols"),
        (g.tile_rows, "tile_rows"),
        (g.tile_cols, "tile_cols"),
        (g.grid_rows, "tile_grid_rows"),
        (g.grid_cols, "tile_grid_cols"),
    ] {
        assert_eq!(v as u64, t[k].as_u64().unwrap(), "{name} {k}");
    }
    assert_eq!(h.checksums != 0, t["checksums_enabled"].as_bool().unwrap(), "{name}");
    assert_eq!(
        !h.codecs.is_empty(),
        t["compression_enabled"].as_bool().unwrap(),
        "{name}"
    );
    assert_eq!(
        h.raster_space as u64,
        t["raster_space"]["code"].as_u64().unwrap(),
        "{name}"
    );
    let cs = &t["coordinate_system"];
    assert_eq!(h.coordinate_system as u64, cs["code"].as_u64().unwrap(), "{name}");
    for (v, k) in [
        (h.x0, "x0"),
        (h.y0, "y0"),
        (h.x1, "x1"),
        (h.y1, "y1"),
        (h.cell_size_x, "cell_size_x"),
        (h.cell_size_y, "cell_size_y"),
    ] {
        assert_eq!(v.to_bits(), bits64(&cs[format!("{k}_bits")]), "{name} {k}");
    }
    for (i, v) in h.m2r.iter().enumerate() {
        assert_eq!(v.to_bits(), bits64(&cs["m2r_bits"][i]), "{name} m2r[{i}]");
    }
    for (i, v) in h.r2m.iter().enumerate() {
        assert_eq!(v.to_bits(), bits64(&cs["r2m_bits"][i]), "{name} r2m[{i}]");
    }
    // The transforms map cell (0,0) to (x0, y0) and back.
    let (x, y) = f.grid_to_model(0.0, 0.0);
    assert!(
        (x - h.x0).abs() <= 1e-6 * h.x0.abs().max(1.0) && (y - h.y0).abs() <= 1e-6 * h.y0.abs().max(1.0),
        "{name}: r2m"
    );
    let codecs: Vec<String> = h.codecs.iter().map(|c| c.lossy()).collect();
    let want: Vec<String> = t["codecs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    assert_eq!(codecs, want, "{name} codecs");
}

fn check_elements(name: &str, f: &GvrsFile, t: &Value) {
    let els = t["elements"].as_array().unwrap();
    assert_eq!(f.elements.len(), els.len(), "{name}");
    for (i, te) in els.iter().enumerate() {
        let e = f.elements[i].to_json(i);
        for k in [
            "name",
            "type",
            "type_code",
            "continuous",
            "label",
            "description",
            "unit",
        ] {
            assert_eq!(e[k], te[k], "{name} element {i} {k}");
        }
        match te["type"].as_str().unwrap() {
            "INTEGER" | "SHORT" => {
                for k in ["min", "max", "fill"] {
                    assert_eq!(e[k], te[k], "{name} element {i} {k}");
                }
            }
            t => {
                let mut keys = vec!["min", "max", "fill"];
                if t == "INT_CODED_FLOAT" {
                    keys.extend(["scale", "offset"]);
                    for k in ["min_int", "max_int", "fill_int"] {
                        assert_eq!(e[k], te[k], "{name} element {i} {k}");
                    }
                }
                for k in keys {
                    let kb = format!("{k}_bits");
                    assert_eq!(bits32(&e[&kb]), bits32(&te[&kb]), "{name} element {i} {k}");
                }
            }
        }
    }
}

fn check_metadata(name: &str, f: &GvrsFile, t: &Value) {
    let want = t["metadata"].as_array().unwrap();
    let mut got: Vec<_> = f.metadata().unwrap().into_iter().map(|r| r.unwrap()).collect();
    got.sort_by_key(|a| (a.name.bytes.clone(), a.record_id));
    assert_eq!(got.len(), want.len(), "{name} metadata count");
    for (g, w) in got.iter().zip(want) {
        let label = format!("{name} metadata {}", w["name"]);
        assert_eq!(g.name.lossy(), w["name"].as_str().unwrap(), "{label}");
        assert_eq!(g.record_id as i64, w["record_id"].as_i64().unwrap(), "{label}");
        assert_eq!(g.data_type as u64, w["type_code"].as_u64().unwrap(), "{label}");
        assert_eq!(
            rasterpack_gvrs::raw::metadata_type_name(g.data_type),
            w["type"].as_str().unwrap(),
            "{label}"
        );
        assert_eq!(g.description.lossy(), w["description"].as_str().unwrap(), "{label}");
        assert_eq!(
            g.content_length as i64,
            w["content_length"].as_i64().unwrap(),
            "{label}"
        );
        assert_eq!(hex(&g.content), w["content_hex"].as_str().unwrap(), "{label}");
        let v = rasterpack_gvrs::model::metadata_value(g.data_type, &g.content);
        let wv = &w["value"];
        if g.data_type == 6 && g.content.is_empty() {
            // Gridfour's API returns null for an empty FLOAT record; rasterpack an empty list.
            assert!(wv.is_null() && v.as_array().is_some_and(|a| a.is_empty()), "{label}");
        } else if g.data_type == 0 {
            assert!(wv.is_null(), "{label}");
        } else {
            assert_eq!(&v, wv, "{label} value");
        }
    }
}

fn check_tiles(name: &str, f: &GvrsFile, t: &Value) {
    let tiles = f.stored_tiles();
    assert_eq!(
        tiles.len() as u64,
        t["populated_tiles"].as_u64().unwrap(),
        "{name} populated tiles"
    );
    let want: Vec<(u64, i64)> = t["tile_content_offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_u64().unwrap(), p[1].as_i64().unwrap()))
        .collect();
    let mut want = want;
    want.sort();
    assert_eq!(tiles, want, "{name} tile content offsets");
    let ext = f.tile_directory.as_ref().is_some_and(|d| d.standard_references != 0);
    assert_eq!(
        ext,
        t["tile_directory_uses_extended_offsets"].as_bool().unwrap(),
        "{name}"
    );
    let st = tile_stats(f, usize::MAX);
    for (i, e) in f.elements.iter().enumerate() {
        let want = &t["tile_encoding_counts"][e.name()];
        let got = serde_json::to_value(&st.encodings[i]).unwrap();
        if want.is_null() {
            assert!(st.encodings[i].is_empty(), "{name}");
        } else {
            assert_eq!(&got, want, "{name} encodings of {}", e.name());
        }
    }
}

/// The raw dump form: Integer/Short as int32le, Float/ICF as float32le (ICF codes as int32le).
fn dump(f: &GvrsFile, i: usize, codes: bool) -> Vec<u8> {
    let a = read_el(f, i, codes).unwrap();
    if a.dtype == rasterpack_common::DType::I16 {
        a.data
            .chunks_exact(2)
            .flat_map(|c| (i16::from_le_bytes([c[0], c[1]]) as i32).to_le_bytes())
            .collect()
    } else {
        a.data
    }
}

fn check_values(name: &str, dir: &Path, f: &GvrsFile, t: &Value) {
    for (i, te) in t["elements"].as_array().unwrap().iter().enumerate() {
        let data = dump(f, i, false);
        assert_eq!(
            sha(&data),
            te["raw_sha256"].as_str().unwrap(),
            "{name} element {i} values"
        );
        if let Some(raw) = te["raw_file"].as_str() {
            assert!(
                data == std::fs::read(dir.join(raw)).unwrap(),
                "{name} element {i} differs from {raw}"
            );
        }
        if te["type"] == "INT_CODED_FLOAT" {
            let codes = dump(f, i, true);
            assert_eq!(
                sha(&codes),
                te["icode_raw_sha256"].as_str().unwrap(),
                "{name} element {i} codes"
            );
        }
        check_stats(name, i, &data, te);
        if let Some(samples) = te["samples"].as_array() {
            for s in samples {
                let (r, c) = (s[0].as_u64().unwrap() as u32, s[1].as_u64().unwrap() as u32);
                match cell(f, i, r, c).unwrap() {
                    GvrsCellValue::IntCodedFloat { value, code } => {
                        assert_eq!(value.to_bits(), bits32(&s[3]), "{name} sample ({r},{c})");
                        assert_eq!(code as i64, s[4].as_i64().unwrap(), "{name} sample ({r},{c}) code");
                    }
                    v => panic!("{name}: unexpected sample value {v:?}"),
                }
            }
        }
    }
}

fn check_stats(name: &str, i: usize, data: &[u8], te: &Value) {
    let st = &te["stats"];
    let float = matches!(te["type"].as_str().unwrap(), "FLOAT" | "INT_CODED_FLOAT");
    let fill_bits = te.get("fill_bits").map(bits32);
    let fill_i = te["fill"].as_i64();
    let (mut n_fill, mut n_nan, mut sum, mut min, mut max) = (0u64, 0u64, 0f64, f64::INFINITY, f64::NEG_INFINITY);
    for c in data.chunks_exact(4) {
        let b = [c[0], c[1], c[2], c[3]];
        let v = if float {
            let v = f32::from_le_bytes(b);
            let is_fill = match fill_bits {
                Some(fb) => v.to_bits() == fb || (f32::from_bits(fb).is_nan() && v.is_nan()),
                None => false,
            };
            if is_fill {
                n_fill += 1;
                continue;
            }
            if v.is_nan() {
                n_nan += 1;
                continue;
            }
            v as f64
        } else {
            let v = i32::from_le_bytes(b);
            if Some(v as i64) == fill_i {
                n_fill += 1;
                continue;
            }
            v as f64
        };
        sum += v;
        min = min.min(v);
        max = max.max(v);
    }
    assert_eq!(n_fill, st["n_fill"].as_u64().unwrap(), "{name} element {i} n_fill");
    if let Some(n) = st["n_nan_not_fill"].as_u64() {
        assert_eq!(n_nan, n, "{name} element {i} n_nan_not_fill");
    }
    let num = |v: &Value| match v {
        Value::String(s) if s == "NaN" => f64::NAN,
        Value::String(s) if s == "Infinity" => f64::INFINITY,
        Value::String(s) if s == "-Infinity" => f64::NEG_INFINITY,
        v => v.as_f64().unwrap(),
    };
    let same = |a: f64, b: f64| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
    if n_fill + n_nan < data.len() as u64 / 4 {
        assert!(same(min, num(&st["min"])), "{name} element {i} min {min}");
        assert!(same(max, num(&st["max"])), "{name} element {i} max {max}");
        assert!(same(sum, num(&st["sum_float64"])), "{name} element {i} sum {sum}");
    }
}

#[test]
fn valid_files_match_their_sidecars() {
    let Some(dir) = corpus() else { return };
    for (path, truth) in sidecars(&dir) {
        if truth["expected_verdict"] != "valid" {
            continue;
        }
        let name = name_of(&path);
        let f = GvrsFile::from_input(Input::open(&path).unwrap(), Limits::default()).unwrap();
        check_header(&name, &f, &truth);
        check_elements(&name, &f, &truth);
        check_metadata(&name, &f, &truth);
        check_tiles(&name, &f, &truth);
    }
}

#[test]
fn valid_files_decode_bit_exactly() {
    let Some(dir) = corpus() else { return };
    let mut failures = Vec::new();
    for (path, truth) in sidecars(&dir) {
        if truth["expected_verdict"] != "valid" {
            continue;
        }
        let name = name_of(&path);
        let f = GvrsFile::from_input(Input::open(&path).unwrap(), Limits::default()).unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check_values(&name, &dir, &f, &truth)));
        if let Err(e) = r {
            let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
            failures.push(format!("{name}: {}", msg.lines().next().unwrap_or("")));
        }
    }
    assert!(
        failures.is_empty(),
        "{} file(s) did not decode exactly:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn read_array_follows_the_cli_contract() {
    let Some(dir) = corpus() else { return };
    let two = Input::open(dir.join("two_elements.gvrs")).unwrap();
    let err = GvrsFormat.read_array(&two, &ArrayRequest::default()).unwrap_err();
    assert_eq!(err.kind, rasterpack_common::ErrorKind::Usage);
    assert!(
        err.message.contains("band_a") && err.message.contains("band_b"),
        "{}",
        err.message
    );
    // Different output types: VOLP stacking is refused.
    let req = ArrayRequest {
        target: Some("volp"),
        ..Default::default()
    };
    assert_eq!(
        GvrsFormat.read_array(&two, &req).unwrap_err().kind,
        rasterpack_common::ErrorKind::Usage
    );
    let icf = Input::open(dir.join("icf_geographic.gvrs")).unwrap();
    let a = GvrsFormat.read_array(&icf, &ArrayRequest::default()).unwrap();
    assert_eq!(
        (a.dtype, a.shape.clone()),
        (rasterpack_common::DType::F32, vec![90, 180])
    );
    let c = GvrsFormat
        .read_array(
            &icf,
            &ArrayRequest {
                codes: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(c.dtype, rasterpack_common::DType::I32);
    assert_eq!(
        c.data,
        std::fs::read(dir.join("icf_geographic.gvrs.elevation.icode.raw")).unwrap()
    );
    let v = GvrsFormat
        .read_array(
            &icf,
            &ArrayRequest {
                target: Some("volp"),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(v.shape, vec![1, 90, 180]);
    assert_eq!(v.data, a.data);
    let short = Input::open(dir.join("real_gridfour_Sample00_ShortNoComp.gvrs")).unwrap();
    let s = GvrsFormat
        .read_array(
            &short,
            &ArrayRequest {
                element: Some("zSrt".into()),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(s.dtype, rasterpack_common::DType::I16);
    let bad = GvrsFormat.read_array(
        &short,
        &ArrayRequest {
            element: Some("nope".into()),
            ..Default::default()
        },
    );
    assert_eq!(bad.unwrap_err().kind, rasterpack_common::ErrorKind::Usage);
}

#[test]
fn rectangles_and_cells_agree_with_whole_reads() {
    let Some(dir) = corpus() else { return };
    for file in [
        "icf_geographic.gvrs",
        "short_oddtile_checksum.gvrs",
        "real_gridfour_SamplePartialTileCover.gvrs",
        "int_plain.gvrs",
    ] {
        let f = GvrsFile::from_input(Input::open(dir.join(file)).unwrap(), Limits::default()).unwrap();
        let whole = read_el(&f, 0, false).unwrap();
        let g = f.geometry;
        let size = whole.dtype.size();
        let (r0, c0, nr, nc) = (g.rows / 3, g.cols / 4, g.rows - g.rows / 3, g.cols / 2);
        let b = read_window(&f, 0, r0, c0, nr, nc, false).unwrap();
        for r in 0..nr as usize {
            let src = ((r0 as usize + r) * g.cols as usize + c0 as usize) * size;
            assert_eq!(
                &b.data[r * nc as usize * size..(r + 1) * nc as usize * size],
                &whole.data[src..src + nc as usize * size],
                "{file}"
            );
        }
        f.set_cache_bytes(64 << 10);
        for (r, c) in [(0, 0), (g.rows - 1, g.cols - 1), (g.rows / 2, g.cols / 3)] {
            let v = cell(&f, 0, r, c).unwrap();
            let k = (r as usize * g.cols as usize + c as usize) * size;
            let bytes = &whole.data[k..k + size];
            let got: Vec<u8> = match v {
                GvrsCellValue::Integer(x) => x.to_le_bytes().to_vec(),
                GvrsCellValue::Short(x) => x.to_le_bytes().to_vec(),
                GvrsCellValue::Float(x) => x.to_le_bytes().to_vec(),
                GvrsCellValue::IntCodedFloat { value, .. } => value.to_le_bytes().to_vec(),
            };
            assert_eq!(got, bytes, "{file} cell ({r},{c})");
            assert!(f.cache_bytes() <= 64 << 10);
        }
    }
}

#[test]
fn inspect_summary_matches_sidecars() {
    let Some(dir) = corpus() else { return };
    for (path, t) in sidecars(&dir) {
        if t["expected_verdict"] != "valid" {
            continue;
        }
        let name = name_of(&path);
        let rep = GvrsFormat
            .inspect(&Input::open(&path).unwrap(), &Default::default())
            .unwrap();
        assert!(!rep.findings.has_errors(), "{name}: {:#?}", rep.findings);
        let s = &rep.summary;
        for k in [
            "uuid",
            "product_label",
            "rows",
            "cols",
            "tile_rows",
            "tile_cols",
            "tile_grid_rows",
            "tile_grid_cols",
            "checksums_enabled",
            "compression_enabled",
            "codecs",
            "raster_space",
            "populated_tiles",
        ] {
            assert_eq!(s[k], t[k], "{name}: summary {k}");
        }
        for k in [
            "code",
            "name",
            "x0_bits",
            "y0_bits",
            "x1_bits",
            "y1_bits",
            "cell_size_x_bits",
            "cell_size_y_bits",
            "m2r_bits",
            "r2m_bits",
        ] {
            assert_eq!(
                s["coordinate_system"][k], t["coordinate_system"][k],
                "{name}: coordinate_system {k}"
            );
        }
        assert_eq!(
            s["tiles"]["tile_encoding_counts"], t["tile_encoding_counts"],
            "{name}: encodings"
        );
        let md = s["metadata"].as_array().unwrap();
        assert_eq!(md.len(), t["metadata"].as_array().unwrap().len(), "{name}: metadata");
        assert!(rep.sections.len() >= 4, "{name}: sections");
    }
}
