//! Gridfour Virtual Raster Store (GVRS) 1.4: read, validate and (through [`write`]) write.
//!
//! Layers: [`raw`] (on-disk structs) -> [`parse`] (checked bytes -> raw) -> [`validate`]
//! (findings) and [`model`] (the friendly API: cells, rectangles, whole elements, metadata).
//! [`codec`] holds the compression codecs, [`write`] the writer. [`GvrsFormat`] is what the CLI
//! drives.
#![forbid(unsafe_code)]

pub mod codec;
pub mod model;
pub mod parse;
pub mod raw;
pub mod validate;
pub mod write;

use std::collections::BTreeMap;
use std::io::Write;

use rasterpack_common::json::{f64_value, fmt_bytes, fmt_f64};
use rasterpack_common::{
    ArrayRequest, DType, Error, Format, Input, InspectOptions, NdArray, Report, Result, ValidateOptions, WriteOptions,
};
use serde_json::{json, Map, Value};

pub use model::{CellValue, Element, Geometry, GvrsFile, Plane};

/// The GVRS format for the CLI registry.
#[derive(Debug, Clone, Copy, Default)]
pub struct GvrsFormat;

/// Tiles scanned for per-tile encodings by `inspect` unless `--all`.
const INSPECT_TILE_SCAN: usize = 100_000;

fn raster_space_name(code: u8) -> &'static str {
    match code {
        0 => "Unspecified",
        1 => "Point",
        2 => "Area",
        _ => "Unknown",
    }
}

fn coordinate_system_name(code: u8) -> &'static str {
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

/// Per-element tile statistics gathered from the stored blocks' first bytes.
#[derive(Debug, Default, Clone)]
pub struct TileStats {
    pub populated: u64,
    /// Per element: encoding string (sidecar convention) -> tile count.
    pub encodings: Vec<BTreeMap<String, u64>>,
    /// Per element: stored bytes of its blocks.
    pub stored_bytes: Vec<u64>,
    pub scanned: u64,
    /// Tiles that could not be read or failed a check (CRC, tile index).
    pub errors: u64,
    /// The first of those failures.
    pub first_error: Option<Error>,
}

/// Describe one stored block from its first bytes (sidecar encoding strings).
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
        Some(codec::Codec::Huffman) | Some(codec::Codec::Deflate) => {
            format!("codec[{idx}]={name}/predictor={p}({})", predictor_name(p))
        }
        Some(codec::Codec::CanonicalHuffman) if p == 0 => format!("codec[{idx}]={name}/uniform"),
        Some(codec::Codec::CanonicalHuffman) => {
            format!("codec[{idx}]={name}/predictor={p}({})", predictor_name(p))
        }
        Some(codec::Codec::Lsop12) => {
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
pub fn tile_stats(file: &GvrsFile, max_tiles: usize) -> TileStats {
    let n_el = file.elements.len();
    let mut st = TileStats {
        encodings: vec![BTreeMap::new(); n_el],
        stored_bytes: vec![0; n_el],
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
            *st.encodings[e]
                .entry(encoding_name(file, e, n as u64, head))
                .or_insert(0) += 1;
            st.stored_bytes[e] += n as u64;
        }
    }
    st
}

fn f64_bits(v: f64) -> Value {
    json!(format!("0x{:016x}", v.to_bits()))
}

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
    cs.insert(
        "m2r_00_01_02_10_11_12".into(),
        Value::Array(h.m2r.iter().map(|&v| f64_value(v)).collect()),
    );
    cs.insert(
        "m2r_bits".into(),
        Value::Array(h.m2r.iter().map(|&v| f64_bits(v)).collect()),
    );
    cs.insert(
        "r2m_00_01_02_10_11_12".into(),
        Value::Array(h.r2m.iter().map(|&v| f64_value(v)).collect()),
    );
    cs.insert(
        "r2m_bits".into(),
        Value::Array(h.r2m.iter().map(|&v| f64_bits(v)).collect()),
    );
    summary.insert("coordinate_system".into(), Value::Object(cs));
    summary.insert(
        "codecs".into(),
        json!(h.codecs.iter().map(|c| c.lossy()).collect::<Vec<_>>()),
    );
    summary.insert(
        "elements".into(),
        Value::Array(file.elements.iter().enumerate().map(|(i, e)| e.to_json(i)).collect()),
    );
}

fn metadata_json(rec: &raw::MetadataRecord) -> Value {
    let value = model::metadata_value(rec.data_type, &rec.content);
    let mut m = Map::new();
    m.insert("name".into(), json!(rec.name.lossy()));
    m.insert("record_id".into(), json!(rec.record_id));
    m.insert("type".into(), json!(raw::metadata_type_name(rec.data_type)));
    m.insert("type_code".into(), json!(rec.data_type));
    m.insert("description".into(), json!(rec.description.lossy()));
    m.insert("content_length".into(), json!(rec.content_length));
    m.insert("value".into(), value);
    Value::Object(m)
}

fn metadata_display(rec: &raw::MetadataRecord, all: bool) -> String {
    let v = model::metadata_value(rec.data_type, &rec.content);
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

impl GvrsFormat {
    fn inspect_file(&self, file: &GvrsFile, opts: &InspectOptions, report: &mut Report) {
        let h = &file.header;
        let g = file.geometry;
        header_summary(file, &mut report.summary);
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
        let (x_last, y_last) = file.grid_to_model(g.rows as f64 - 1.0, g.cols as f64 - 1.0);
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
                (
                    "model-to-raster".into(),
                    h.m2r.iter().map(|v| fmt_f64(*v)).collect::<Vec<_>>().join(" "),
                ),
                (
                    "raster-to-model".into(),
                    h.r2m.iter().map(|v| fmt_f64(*v)).collect::<Vec<_>>().join(" "),
                ),
                (
                    "last cell via raster-to-model".into(),
                    format!("{}, {}", fmt_f64(x_last), fmt_f64(y_last)),
                ),
            ],
        );
        let rows = file
            .elements
            .iter()
            .map(|e| {
                let s = &e.spec;
                let (min, max, fill, extra) = match s.range {
                    raw::ElementRange::Integer { min, max, fill } => {
                        (min.to_string(), max.to_string(), fill.to_string(), String::new())
                    }
                    raw::ElementRange::Short { min, max, fill } => {
                        (min.to_string(), max.to_string(), fill.to_string(), String::new())
                    }
                    raw::ElementRange::Float { min, max, fill } => (
                        fmt_f64(min as f64),
                        fmt_f64(max as f64),
                        fmt_f64(fill as f64),
                        String::new(),
                    ),
                    raw::ElementRange::IntCodedFloat {
                        min,
                        max,
                        fill,
                        scale,
                        offset,
                        min_int,
                        max_int,
                        fill_int,
                    } => (
                        fmt_f64(min as f64),
                        fmt_f64(max as f64),
                        fmt_f64(fill as f64),
                        format!(
                            "scale {}, offset {}, codes {min_int}..{max_int}, fill code {fill_int}",
                            fmt_f64(scale as f64),
                            fmt_f64(offset as f64)
                        ),
                    ),
                };
                vec![
                    e.name(),
                    s.element_type.name().into(),
                    (s.continuous != 0).to_string(),
                    min,
                    max,
                    fill,
                    s.unit.lossy(),
                    s.label.lossy(),
                    s.description.lossy(),
                    extra,
                ]
            })
            .collect();
        report.table(
            "Elements",
            &[
                "name",
                "type",
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
        if !h.codecs.is_empty() {
            let rows = h
                .codecs
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    vec![
                        i.to_string(),
                        c.lossy(),
                        if file.codecs[i].is_some() {
                            "yes"
                        } else {
                            "no (unsupported)"
                        }
                        .into(),
                    ]
                })
                .collect();
            report.table("Codecs", &["index", "name", "implemented"], rows);
        }
        // Tiles: nothing is claimed about them when the directory cannot be trusted.
        if let Some(e) = &file.tile_directory_error {
            report.summary.insert("populated_tiles".into(), Value::Null);
            report.summary.insert(
                "tiles".into(),
                json!({"populated_tiles": null, "tile_count": g.tile_count(), "directory_error": e.code}),
            );
            report.fields(
                "Tiles",
                vec![(
                    "populated".into(),
                    format!("unknown: the tile directory cannot be trusted ({})", e.code),
                )],
            );
        } else {
            self.inspect_tiles(file, opts, report);
        }
        self.inspect_metadata(file, opts, report);
    }

    fn inspect_tiles(&self, file: &GvrsFile, opts: &InspectOptions, report: &mut Report) {
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
        let mut trows = Vec::new();
        for (i, e) in file.elements.iter().enumerate() {
            enc.insert(e.name(), json!(st.encodings[i]));
            let unc = st.scanned.saturating_mul(file.block_sizes()[i]);
            let ratio = if st.stored_bytes[i] > 0 {
                unc as f64 / st.stored_bytes[i] as f64
            } else {
                0.0
            };
            for (k, n) in &st.encodings[i] {
                trows.push(vec![e.name(), k.clone(), n.to_string()]);
            }
            trows.push(vec![
                e.name(),
                "stored / uncompressed".into(),
                format!(
                    "{} / {} (ratio {ratio:.2})",
                    fmt_bytes(st.stored_bytes[i]),
                    fmt_bytes(unc)
                ),
            ]);
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
        report.table("Tile encodings", &["element", "encoding", "tiles"], trows);
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

    fn inspect_metadata(&self, file: &GvrsFile, opts: &InspectOptions, report: &mut Report) {
        // Metadata.
        match file.metadata() {
            Ok(records) => {
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
            Err(e) => report.findings.push_error(&e),
        }
    }
}

impl Format for GvrsFormat {
    fn name(&self) -> &'static str {
        "gvrs"
    }
    fn honours(&self) -> &'static [rasterpack_common::RequestFlag] {
        use rasterpack_common::RequestFlag;
        &[
            RequestFlag::Element,
            RequestFlag::Codes,
            RequestFlag::Tile,
            RequestFlag::Compress,
        ]
    }

    fn description(&self) -> &'static str {
        "Gridfour Virtual Raster Store 1.4 (tiled raster, compressed with Gridfour's codecs)"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["gvrs"]
    }

    fn detect(&self, head: &[u8]) -> bool {
        head.starts_with(raw::MAGIC)
    }

    fn inspect(&self, input: &Input, opts: &InspectOptions) -> Result<Report> {
        let mut report = Report::new("gvrs");
        let file = GvrsFile::open_lenient(input.clone(), opts.limits)?;
        if file.header.time_opened_for_writing != 0 {
            report.findings.error(
                "gvrs.header.opened_for_writing",
                Some(48),
                "the file is still opened for writing (or was not closed properly): what is shown may be incomplete",
            );
        }
        if let Some(e) = &file.header_error {
            report.findings.push_error(e);
        }
        if let Some(e) = &file.tile_directory_error {
            report.findings.push_error(e);
        }
        self.inspect_file(&file, opts, &mut report);
        Ok(report)
    }

    fn validate(&self, input: &Input, opts: &ValidateOptions) -> Report {
        validate::validate(input, &opts.limits)
    }

    fn read_array(&self, input: &Input, req: &ArrayRequest) -> Result<NdArray> {
        let file = GvrsFile::open(input.clone(), req.limits)?;
        let names: Vec<String> = file.elements.iter().map(|e| e.name()).collect();
        let volp = req.target == Some("volp");
        let selected = match &req.element {
            Some(name) => vec![file.element_index(name).ok_or_else(|| {
                Error::usage(format!(
                    "no element {name:?} in this GVRS file; its elements are: {}",
                    names.join(", ")
                ))
            })?],
            None if names.len() == 1 => vec![0],
            None if volp => (0..names.len()).collect(),
            None => {
                return Err(Error::usage(format!(
                    "this GVRS file has {} elements; choose one with --element ({})",
                    names.len(),
                    names.join(", ")
                )))
            }
        };
        if selected.len() == 1 && !volp {
            return file.read_element(selected[0], req.codes);
        }
        // VOLP target: elements become levels, [n, rows, cols], when they share one dtype.
        let dtypes: Vec<DType> = selected.iter().map(|&i| file.elements[i].dtype(req.codes)).collect();
        if dtypes.iter().any(|d| *d != dtypes[0]) {
            let list: Vec<String> = selected
                .iter()
                .map(|&i| format!("{} ({})", names[i], dtypes[i].name()))
                .collect();
            return Err(Error::usage(format!(
                "cannot stack GVRS elements of different types into one VOLP volume: {}; choose one with --element",
                list.join(", ")
            )));
        }
        let g = file.geometry;
        let total = g
            .cells()
            .saturating_mul(dtypes[0].size() as u64)
            .saturating_mul(selected.len() as u64);
        if total > req.limits.max_array_bytes {
            return Err(Error::limit(
                "limit.array",
                None,
                format!("stacked elements need {total} bytes"),
            ));
        }
        let mut data = Vec::new();
        let mut attrs = Map::new();
        let mut els = Vec::new();
        for &i in &selected {
            let a = file.read_element(i, req.codes)?;
            data.extend_from_slice(&a.data);
            els.push(Value::Object(a.attrs));
        }
        let mut a = NdArray::new(
            dtypes[0],
            vec![selected.len() as u64, g.rows as u64, g.cols as u64],
            data,
        )?;
        attrs.insert("source_format".into(), json!("gvrs"));
        attrs.insert("elements".into(), Value::Array(els));
        a.attrs = attrs;
        a.name = Some(selected.iter().map(|&i| names[i].clone()).collect::<Vec<_>>().join("+"));
        Ok(a)
    }

    fn write_array(&self, array: &NdArray, opts: &WriteOptions, out: &mut dyn Write) -> Result<()> {
        write::write_ndarray(array, opts, out)
    }
}
