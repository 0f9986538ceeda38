//! What `inspect` shows of a GVRS file: the header, coordinates, elements and codecs, what the
//! stored tiles hold (encodings and sizes, read with the checks of a data read), and the
//! metadata, both as a JSON summary and as tables for people. One function per part.

use std::collections::BTreeMap;

use rasterpack_common::json::{f64_value, fmt_f32, fmt_f64};
use rasterpack_common::{Error, InspectOptions, Report};
use serde_json::{json, Map, Value};

use crate::codec::{self, Codec};
use crate::model::{metadata_value, GvrsElement, GvrsFile};
use crate::raw::{self, ElementRange, MetadataRecord};

/// Tiles scanned for per-tile encodings by `inspect` unless `--all`.
const INSPECT_TILE_SCAN: usize = 100_000;

/// Per-element statistics of the stored tiles, gathered from their blocks' first bytes.
#[derive(Debug, Default, Clone)]
pub struct GvrsTileStats {
    /// Tiles the directory lists as stored.
    pub populated: u64,
    /// Per element: encoding (as [`encoding_name`] spells it) -> tile count.
    pub encodings: Vec<BTreeMap<String, u64>>,
    /// Per element: stored bytes of its blocks.
    pub stored_bytes: Vec<u64>,
    /// Per element: encoding -> stored bytes of the blocks in it.
    pub encoding_bytes: Vec<BTreeMap<String, u64>>,
    /// Tiles scanned (at most the number asked for).
    pub scanned: u64,
    /// Tiles that could not be read or failed a check (CRC, tile index).
    pub errors: u64,
    /// The first of those failures.
    pub first_error: Option<Error>,
}

/// Name of a raster-space code (header byte 129).
pub(crate) fn raster_space_name(code: u8) -> &'static str {
    match code {
        0 => "Unspecified",
        1 => "Point",
        2 => "Area",
        _ => "Unknown",
    }
}

/// Name of a coordinate-system code (header byte 130).
pub(crate) fn coordinate_system_name(code: u8) -> &'static str {
    match code {
        0 => "Unspecified",
        1 => "Cartesian",
        2 => "Geographic",
        _ => "Unknown",
    }
}

fn predictor_name(p: u8) -> &'static str {
    match p {
        1 => "Differencing",
        2 => "Linear",
        3 => "Triangle",
        4 => "DifferencingWithNulls",
        _ => "Unknown",
    }
}

/// Describe one stored block of element `element`, `len` bytes long, from its first bytes
/// `head`: `uncompressed`, or `codec[INDEX]=NAME` with the predictor (`/predictor=2(Linear)`),
/// `/uniform` for a uniform canonical-Huffman tile, or the LSOP12 residual coding.
pub fn encoding_name(file: &GvrsFile, element: usize, len: u64, head: &[u8]) -> String {
    let unc = file.block_sizes().get(element).copied().unwrap_or(0);
    if len == unc {
        return "uncompressed".into();
    }
    let Some(&idx) = head.first() else {
        return "empty".into();
    };
    let name = file
        .header
        .codecs
        .get(idx as usize)
        .map(|c| c.lossy())
        .unwrap_or_else(|| "?".into());
    let p = head.get(1).copied().unwrap_or(0);
    match file.codecs.get(idx as usize).copied().flatten() {
        Some(Codec::Huffman) | Some(Codec::Deflate) => {
            format!("codec[{idx}]={name}/predictor={p}({})", predictor_name(p))
        }
        Some(Codec::CanonicalHuffman) if p == 0 => format!("codec[{idx}]={name}/uniform"),
        Some(Codec::CanonicalHuffman) => {
            format!("codec[{idx}]={name}/predictor={p}({})", predictor_name(p))
        }
        Some(Codec::Lsop12) => {
            let r = match codec::lsop::parse_header(head) {
                Ok(h) => match h.coding {
                    codec::lsop::ResidualCoding::Huffman => "Huffman",
                    codec::lsop::ResidualCoding::Deflate => "Deflate",
                    codec::lsop::ResidualCoding::Canonical => "CanonicalHuffman",
                },
                Err(_) => "Unknown",
            };
            // Gridfour 2026 writes the revised header (flag 0x40 in byte 1).
            let revised = if p & 0x40 != 0 { "/revised_header" } else { "" };
            format!("codec[{idx}]={name}/residuals={r}{revised}")
        }
        _ => format!("codec[{idx}]={name}"),
    }
}

/// Scan the stored tiles (at most `max_tiles`). Each record is read whole and checked as a data
/// read checks it (CRC when checksums are on, tile index), so what is reported about a tile
/// comes from bytes that passed those checks.
pub fn tile_stats(file: &GvrsFile, max_tiles: usize) -> GvrsTileStats {
    let n_el = file.elements.len();
    let mut st = GvrsTileStats {
        encodings: vec![BTreeMap::new(); n_el],
        stored_bytes: vec![0; n_el],
        encoding_bytes: vec![BTreeMap::new(); n_el],
        ..Default::default()
    };
    let tiles = file.stored_tiles();
    st.populated = tiles.len() as u64;
    for &(index, off) in tiles.iter().take(max_tiles) {
        st.scanned += 1;
        let (rec, bytes) = match file.read_tile_checked(off, index) {
            Ok(t) => t,
            Err(e) => {
                st.errors += 1;
                st.first_error.get_or_insert(e);
                continue;
            }
        };
        for (e, &(rel, n)) in rec.blocks.iter().enumerate() {
            let head = &bytes[rel..rel + n.min(67)];
            let name = encoding_name(file, e, n as u64, head);
            *st.encoding_bytes[e].entry(name.clone()).or_insert(0) += n as u64;
            *st.encodings[e].entry(name).or_insert(0) += 1;
            st.stored_bytes[e] += n as u64;
        }
    }
    st
}

/// Everything `inspect` shows, in order.
pub(crate) fn inspect_file(file: &GvrsFile, opts: &InspectOptions, report: &mut Report) {
    header_summary(file, &mut report.summary);
    header_section(file, report);
    coordinates_section(file, report);
    elements_section(file, report);
    codecs_section(file, report);
    // Tiles: nothing is claimed about them when the directory cannot be trusted.
    match &file.tile_directory_error {
        Some(e) => untrusted_tiles_section(file, e, report),
        None => tiles_section(file, opts, report),
    }
    metadata_section(file, opts, report);
}

fn f64_bits(v: f64) -> Value {
    json!(format!("0x{:016x}", v.to_bits()))
}

/// The arrays a GVRS file holds as `convert` writes them: one `[rows, cols]` array per element.
pub(crate) fn arrays_summary(file: &GvrsFile) -> Value {
    let shape = [file.geometry.rows as u64, file.geometry.cols as u64];
    Value::Array(
        file.elements
            .iter()
            .map(|e| json!({"name": e.name(), "dtype": e.dtype(false).name(), "shape": shape}))
            .collect(),
    )
}

/// The header's facts as JSON (snake_case keys; each f64 also as its exact bits).
fn header_summary(file: &GvrsFile, summary: &mut Map<String, Value>) {
    let h = &file.header;
    let g = file.geometry;
    summary.insert(
        "version".into(),
        json!(format!("{}.{}", h.version_major, h.version_minor)),
    );
    summary.insert("uuid".into(), json!(file.uuid()));
    summary.insert("time_modified_ms".into(), json!(h.time_modified));
    summary.insert("time_opened_for_writing_ms".into(), json!(h.time_opened_for_writing));
    summary.insert("product_label".into(), json!(h.product_label.lossy()));
    summary.insert("rows".into(), json!(g.rows));
    summary.insert("cols".into(), json!(g.cols));
    summary.insert("tile_rows".into(), json!(g.tile_rows));
    summary.insert("tile_cols".into(), json!(g.tile_cols));
    summary.insert("tile_grid_rows".into(), json!(g.grid_rows));
    summary.insert("tile_grid_cols".into(), json!(g.grid_cols));
    summary.insert("number_of_levels".into(), json!(h.levels));
    summary.insert("checksums_enabled".into(), json!(h.checksums != 0));
    summary.insert("compression_enabled".into(), json!(!h.codecs.is_empty()));
    summary.insert(
        "raster_space".into(),
        json!({"code": h.raster_space, "name": raster_space_name(h.raster_space)}),
    );
    summary.insert("coordinate_system".into(), coordinate_system_summary(file));
    summary.insert(
        "codecs".into(),
        json!(h.codecs.iter().map(|c| c.lossy()).collect::<Vec<_>>()),
    );
    summary.insert("arrays".into(), arrays_summary(file));
    summary.insert(
        "elements".into(),
        Value::Array(file.elements.iter().enumerate().map(|(i, e)| e.to_json(i)).collect()),
    );
}

fn coordinate_system_summary(file: &GvrsFile) -> Value {
    let h = &file.header;
    let mut cs = Map::new();
    cs.insert("code".into(), json!(h.coordinate_system));
    cs.insert("name".into(), json!(coordinate_system_name(h.coordinate_system)));
    for (k, v) in [
        ("x0", h.x0),
        ("y0", h.y0),
        ("x1", h.x1),
        ("y1", h.y1),
        ("cell_size_x", h.cell_size_x),
        ("cell_size_y", h.cell_size_y),
    ] {
        cs.insert(k.into(), f64_value(v));
        cs.insert(format!("{k}_bits"), f64_bits(v));
    }
    for (name, m) in [("m2r", &h.m2r), ("r2m", &h.r2m)] {
        cs.insert(
            format!("{name}_00_01_02_10_11_12"),
            Value::Array(m.iter().map(|&v| f64_value(v)).collect()),
        );
        cs.insert(
            format!("{name}_bits"),
            Value::Array(m.iter().map(|&v| f64_bits(v)).collect()),
        );
    }
    Value::Object(cs)
}

fn header_section(file: &GvrsFile, report: &mut Report) {
    let h = &file.header;
    let g = file.geometry;
    report.fields(
        "GVRS header",
        vec![
            ("version".into(), format!("{}.{}", h.version_major, h.version_minor)),
            ("UUID".into(), file.uuid()),
            ("product label".into(), h.product_label.lossy()),
            ("time modified (ms)".into(), h.time_modified.to_string()),
            ("opened for writing (ms)".into(), h.time_opened_for_writing.to_string()),
            ("grid".into(), format!("{} rows x {} columns", g.rows, g.cols)),
            (
                "tiles".into(),
                format!(
                    "{} x {} cells; {} x {} tile grid",
                    g.tile_rows, g.tile_cols, g.grid_rows, g.grid_cols
                ),
            ),
            ("levels".into(), h.levels.to_string()),
            ("checksums".into(), if h.checksums != 0 { "on" } else { "off" }.into()),
            ("raster space".into(), raster_space_name(h.raster_space).into()),
        ],
    );
}

fn coordinates_section(file: &GvrsFile, report: &mut Report) {
    let h = &file.header;
    let g = file.geometry;
    let (x_last, y_last) = file.grid_to_model(g.rows as f64 - 1.0, g.cols as f64 - 1.0);
    let list = |m: &[f64; 6]| m.iter().map(|v| fmt_f64(*v)).collect::<Vec<_>>().join(" ");
    report.fields(
        "Coordinates",
        vec![
            ("system".into(), coordinate_system_name(h.coordinate_system).into()),
            (
                "x0, y0 (centre of cell 0,0)".into(),
                format!("{}, {}", fmt_f64(h.x0), fmt_f64(h.y0)),
            ),
            (
                "x1, y1 (centre of last cell)".into(),
                format!("{}, {}", fmt_f64(h.x1), fmt_f64(h.y1)),
            ),
            (
                "cell size x, y".into(),
                format!("{}, {}", fmt_f64(h.cell_size_x), fmt_f64(h.cell_size_y)),
            ),
            ("model-to-raster".into(), list(&h.m2r)),
            ("raster-to-model".into(), list(&h.r2m)),
            (
                "last cell via raster-to-model".into(),
                format!("{}, {}", fmt_f64(x_last), fmt_f64(y_last)),
            ),
        ],
    );
}

/// One row of the elements table: name, type, dtype, continuous, range, fill, texts, coding.
fn element_row(e: &GvrsElement) -> Vec<String> {
    let s = &e.spec;
    let (min, max, fill, coding) = match s.range {
        ElementRange::Integer { min, max, fill } => (min.to_string(), max.to_string(), fill.to_string(), String::new()),
        ElementRange::Short { min, max, fill } => (min.to_string(), max.to_string(), fill.to_string(), String::new()),
        ElementRange::Float { min, max, fill } => (fmt_f32(min), fmt_f32(max), fmt_f32(fill), String::new()),
        ElementRange::IntCodedFloat {
            min,
            max,
            fill,
            scale,
            offset,
            min_int,
            max_int,
            fill_int,
        } => (
            fmt_f32(min),
            fmt_f32(max),
            fmt_f32(fill),
            format!(
                "scale {}, offset {}, codes {min_int}..{max_int}, fill code {fill_int}",
                fmt_f32(scale),
                fmt_f32(offset)
            ),
        ),
    };
    vec![
        e.name(),
        s.element_type.name().into(),
        e.dtype(false).name().into(),
        (s.continuous != 0).to_string(),
        min,
        max,
        fill,
        s.unit.lossy(),
        s.label.lossy(),
        s.description.lossy(),
        coding,
    ]
}

fn elements_section(file: &GvrsFile, report: &mut Report) {
    let rows = file.elements.iter().map(element_row).collect();
    report.table(
        "Elements",
        &[
            "name",
            "type",
            "dtype",
            "continuous",
            "min",
            "max",
            "fill",
            "unit",
            "label",
            "description",
            "coding",
        ],
        rows,
    );
}

fn codecs_section(file: &GvrsFile, report: &mut Report) {
    if file.header.codecs.is_empty() {
        return;
    }
    let rows = file
        .header
        .codecs
        .iter()
        .zip(&file.codecs)
        .enumerate()
        .map(|(i, (name, codec))| {
            let implemented = if codec.is_some() { "yes" } else { "no (unsupported)" };
            vec![i.to_string(), name.lossy(), implemented.into()]
        })
        .collect();
    report.table("Codecs", &["index", "name", "implemented"], rows);
}

fn untrusted_tiles_section(file: &GvrsFile, e: &Error, report: &mut Report) {
    report.summary.insert("populated_tiles".into(), Value::Null);
    report.summary.insert(
        "tiles".into(),
        json!({"populated_tiles": null, "tile_count": file.geometry.tile_count(), "directory_error": e.code}),
    );
    report.fields(
        "Tiles",
        vec![(
            "populated".into(),
            format!("unknown: the tile directory cannot be trusted ({})", e.code),
        )],
    );
}

fn tiles_section(file: &GvrsFile, opts: &InspectOptions, report: &mut Report) {
    let g = file.geometry;
    let max = if opts.all { usize::MAX } else { INSPECT_TILE_SCAN };
    let st = tile_stats(file, max);
    let mut tiles = Map::new();
    tiles.insert("populated_tiles".into(), json!(st.populated));
    tiles.insert("tile_count".into(), json!(g.tile_count()));
    if let Some(d) = &file.tile_directory {
        tiles.insert(
            "directory".into(),
            json!({"row0": d.row0, "col0": d.col0, "rows": d.n_rows, "cols": d.n_cols,
                   "extended_offsets": d.standard_references != 0}),
        );
    }
    tiles.insert("scanned_tiles".into(), json!(st.scanned));
    let mut enc = Map::new();
    let mut rows = Vec::new();
    // Counts and bytes in columns of their own, one row per element and encoding: the tiles,
    // their stored bytes, what they decode to, and the ratio of the two.
    let ratio = |unc: u64, stored: u64| {
        if stored > 0 {
            format!("{:.2}", unc as f64 / stored as f64)
        } else {
            "-".to_string()
        }
    };
    for (i, e) in file.elements.iter().enumerate() {
        enc.insert(e.name(), json!(st.encodings[i]));
        let block = file.block_sizes()[i];
        for (k, n) in &st.encodings[i] {
            let stored = st.encoding_bytes[i].get(k).copied().unwrap_or(0);
            let unc = n.saturating_mul(block);
            rows.push(vec![
                e.name(),
                k.clone(),
                n.to_string(),
                stored.to_string(),
                unc.to_string(),
                ratio(unc, stored),
            ]);
        }
        if st.encodings[i].len() > 1 {
            let tiles: u64 = st.encodings[i].values().sum();
            let unc = tiles.saturating_mul(block);
            rows.push(vec![
                e.name(),
                "(all)".into(),
                tiles.to_string(),
                st.stored_bytes[i].to_string(),
                unc.to_string(),
                ratio(unc, st.stored_bytes[i]),
            ]);
        }
    }
    tiles.insert("tile_encoding_counts".into(), Value::Object(enc));
    tiles.insert("stored_bytes".into(), json!(st.stored_bytes));
    report.summary.insert("populated_tiles".into(), json!(st.populated));
    report.summary.insert("tiles".into(), Value::Object(tiles));
    report.fields(
        "Tiles",
        vec![
            ("populated".into(), format!("{} of {}", st.populated, g.tile_count())),
            ("scanned".into(), st.scanned.to_string()),
        ],
    );
    report.table(
        "Tile encodings",
        &[
            "element",
            "encoding",
            "tiles",
            "stored bytes",
            "uncompressed bytes",
            "ratio",
        ],
        rows,
    );
    if let Some(e) = &st.first_error {
        // A tile that fails the read checks: its data cannot be read, say so as the error it is.
        report.findings.push_error(e);
        report.findings.warning(
            "gvrs.tile.unreadable",
            None,
            format!(
                "{} stored tile(s) could not be read or failed their checks (the first is reported above); run validate",
                st.errors
            ),
        );
    }
}

fn metadata_json(rec: &MetadataRecord) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(rec.name.lossy()));
    m.insert("record_id".into(), json!(rec.record_id));
    m.insert("type".into(), json!(raw::metadata_type_name(rec.data_type)));
    m.insert("type_code".into(), json!(rec.data_type));
    m.insert("description".into(), json!(rec.description.lossy()));
    m.insert("content_length".into(), json!(rec.content_length));
    m.insert("value".into(), metadata_value(rec.data_type, &rec.content));
    Value::Object(m)
}

fn metadata_display(rec: &MetadataRecord, all: bool) -> String {
    let v = metadata_value(rec.data_type, &rec.content);
    let s = match (&v, rec.data_type) {
        (Value::String(s), _) => s.clone(),
        (Value::Null, _) | (_, 0) => format!("<{} bytes of binary content>", rec.content.len()),
        _ => v.to_string(),
    };
    if !all && s.chars().count() > 200 {
        format!("{}... ({} bytes)", s.chars().take(200).collect::<String>(), s.len())
    } else {
        s
    }
}

fn metadata_section(file: &GvrsFile, opts: &InspectOptions, report: &mut Report) {
    let records = match file.metadata() {
        Ok(records) => records,
        Err(e) => return report.findings.push_error(&e),
    };
    let mut list = Vec::new();
    let mut rows = Vec::new();
    for r in records {
        match r {
            Ok(rec) => {
                list.push(metadata_json(&rec));
                rows.push(vec![
                    rec.name.lossy(),
                    rec.record_id.to_string(),
                    raw::metadata_type_name(rec.data_type).into(),
                    metadata_display(&rec, opts.all),
                    rec.description.lossy(),
                ]);
            }
            Err(e) => report.findings.push_error(&e),
        }
    }
    if !rows.is_empty() {
        report.table("Metadata", &["name", "id", "type", "value", "description"], rows);
    }
    report.summary.insert("metadata".into(), Value::Array(list));
}
