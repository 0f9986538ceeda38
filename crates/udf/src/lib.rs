//! UDF ("Untitled Data Format", revision 0): reader, validator and writer.
//!
//! Layers: [`raw`] (on-disk structures), [`parse`] (bytes -> raw), [`validate`] (the structural
//! walk of the dataset graph and content checks, collecting findings with the codes in
//! [`codes`]), [`model`] (typed access: values, text, JSON, dataset links, arrays) and [`write`]
//! (a builder). [`UdfFormat`] is the CLI's entry point.
//!
//! Axis order: `data_shape` packs `x`, `y`, `z`; the axes are the real ones (the type's
//! dimension count) followed by the ghost ones, and the data is stored with the last axis
//! fastest (a 1-D text list `[n, width]` holds `n` rows of `width` code units). Arrays keep that
//! order: numpy shape `[x, y, z]` in C order.
#![forbid(unsafe_code)]

pub mod codes;
pub mod compress;
pub mod model;
pub mod parse;
pub mod raw;
pub mod validate;
pub mod write;

use std::io::Write;

use rasterpack_common::json::f64_value;
use rasterpack_common::{
    ArrayRequest, DType, Error, Format, Input, InspectOptions, NdArray, Report, Result, ValidateOptions, WriteOptions,
};
use serde_json::{json, Map, Value};

pub use model::{Compression, Dataset, Document, Table, Text, UdfFile, Values};
pub use raw::{FileOffset, Hint, Prim};
pub use write::{DatasetId, Encoding, TableSpec, UdfWriter};

/// Name of the JSON table `write_array` stores the array's `attrs` in.
pub const ATTRS_TABLE: &str = "attrs";

/// The UDF format for the CLI.
pub struct UdfFormat;

impl Format for UdfFormat {
    fn name(&self) -> &'static str {
        "udf"
    }
    fn honours(&self) -> &'static [rasterpack_common::RequestFlag] {
        use rasterpack_common::RequestFlag;
        &[RequestFlag::Element]
    }

    fn description(&self) -> &'static str {
        "Untitled Data Format (UDF0): datasets of typed datatables"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["udf"]
    }

    /// `UDF0`, and `UDF1`..`UDF9` so later revisions are reported (as unsupported revisions)
    /// instead of as an unknown format.
    fn detect(&self, head: &[u8]) -> bool {
        head.len() >= 4 && head.starts_with(b"UDF") && head[3].is_ascii_digit()
    }

    /// The structural walk, plus the content checks of the tables up to 1 MiB (all of them
    /// with `--all`): cheap, and enough to say whether small files have content errors.
    fn inspect(&self, input: &Input, opts: &InspectOptions) -> Result<Report> {
        let file = UdfFile::open_lenient(input, &opts.limits);
        let mut report = Report::new("udf");
        report.findings = file.doc.findings.clone();
        let max_table = if opts.all { u64::MAX } else { PREVIEW_TEXT_MAX };
        validate::check_contents_upto(input, &opts.limits, &file.doc, max_table, &mut report.findings);
        describe(&file, opts.all, &mut report);
        Ok(report)
    }

    fn validate(&self, input: &Input, opts: &ValidateOptions) -> Report {
        let doc = validate::validate(input, &opts.limits);
        let mut report = Report::new("udf");
        report.findings = doc.findings.clone();
        let file = model::UdfFile::from_document(input, &opts.limits, doc);
        describe(&file, false, &mut report);
        report
    }

    /// Reads one table. Errors elsewhere in the file do not stop it (ERRATA): the table's own
    /// structure and content are checked, and a table that `validate` would reject is refused
    /// with the finding. A file whose structure could not be walked at all fails with its
    /// first error.
    fn read_array(&self, input: &Input, req: &ArrayRequest) -> Result<NdArray> {
        let file = UdfFile::open_lenient(input, &req.limits);
        let first_error = || {
            file.doc
                .findings
                .iter()
                .find(|f| f.severity == rasterpack_common::Severity::Error)
                .map(|f| {
                    let kind = if f.code == codes::TRUNCATED {
                        rasterpack_common::ErrorKind::Truncated
                    } else {
                        rasterpack_common::ErrorKind::Invalid
                    };
                    Error::new(kind, f.code.clone(), f.offset, f.message.clone())
                })
        };
        if file.datasets().iter().all(|d| d.tables.is_empty()) {
            if let Some(e) = first_error() {
                return Err(e);
            }
        }
        let (ds, t) = match &req.element {
            // Not found in a file with errors: the walk may have stopped before the table.
            Some(e) => file.find(e).map_err(|err| match first_error() {
                Some(first) => Error::new(
                    first.kind,
                    first.code,
                    first.offset,
                    format!("{}; the file has errors, the first: {}", err.message, first.message),
                ),
                None => err,
            })?,
            None => {
                let arrays: Vec<(&Dataset, &Table)> = file
                    .datasets()
                    .iter()
                    .flat_map(|d| d.tables.iter().map(move |t| (d, t)))
                    .filter(|(_, t)| t.dtype().is_some() && t.hint != Hint::Dataset && t.hint != Hint::Text)
                    .collect();
                if arrays.len() == 1 {
                    arrays[0]
                } else {
                    return Err(Error::usage(format!(
                        "this UDF file holds {} datatables; choose one with --element DATASET_PATH/TABLE: {}",
                        file.table_paths().len(),
                        file.table_paths().join(", ")
                    )));
                }
            }
        };
        file.array(ds, t)
    }

    fn write_array(&self, array: &NdArray, _opts: &WriteOptions, out: &mut dyn Write) -> Result<()> {
        let w = array_writer(array)?;
        w.write_to(out)?;
        Ok(())
    }
}

/// The writer `write_array` uses: one dataset `ROOT` holding the array as one table (named
/// after the array, else `data`) and its `attrs` as a JSON table named `attrs`.
pub fn array_writer(array: &NdArray) -> Result<UdfWriter> {
    let mut w = UdfWriter::new("RPAK")?;
    let root = w.add_dataset("ROOT")?;
    w.set_root(root);
    let prim = match array.dtype {
        DType::Bool | DType::U8 => Prim::U8,
        DType::I8 => Prim::I8,
        DType::U16 => Prim::U16,
        DType::I16 => Prim::I16,
        DType::U32 => Prim::U32,
        DType::I32 => Prim::I32,
        DType::U64 => Prim::U64,
        DType::I64 => Prim::I64,
        DType::F32 => Prim::F32,
        DType::F64 => Prim::F64,
    };
    if array.data.len() as u64 > u32::MAX as u64 {
        return Err(Error::usage(format!(
            "a UDF datatable holds at most 4 GiB; this array has {} bytes",
            array.data.len()
        )));
    }
    let name = match array.name.as_deref() {
        Some(n) if !n.is_empty() && n != ATTRS_TABLE && !n.contains('/') && n.len() < 256 => n.to_string(),
        _ => "data".to_string(),
    };
    let fits = array.shape.len() <= 3 && array.shape.iter().all(|&a| a <= u32::MAX as u64) && {
        let axes: Vec<u32> = array.shape.iter().map(|&a| a as u32).collect();
        parse::Shape::encode(&axes).is_some_and(|p| parse::Shape::decode(axes.len() as u8, p).axes == axes)
    };
    let mut spec = if fits {
        let axes: Vec<u32> = array.shape.iter().map(|&a| a as u32).collect();
        TableSpec::raw(&name, prim, Hint::None, &axes, &[], array.data.clone())
    } else {
        // The packed shape cannot hold it (z < 256, y < 2^24, <= 3 axes): store it flat and
        // keep the real shape in type_name, which read_array honours.
        let n = array.len();
        if n > u32::MAX as u64 {
            return Err(Error::usage("array has more than 2^32 elements".to_string()));
        }
        let shape: Vec<String> = array.shape.iter().map(|a| a.to_string()).collect();
        TableSpec::raw(&name, prim, Hint::None, &[n as u32], &[], array.data.clone())
            .type_name(&format!("ndarray:{}", shape.join("x")))
    };
    if array.dtype == DType::Bool && spec.type_name.is_none() {
        spec = spec.type_name("bool");
    }
    w.add(root, spec)?;
    if !array.attrs.is_empty() {
        w.add(root, TableSpec::json(ATTRS_TABLE, &Value::Object(array.attrs.clone())))?;
    }
    Ok(w)
}

const PREVIEW: usize = 8;
/// Text and JSON tables larger than this are not decoded by `inspect` unless `--all`.
const PREVIEW_TEXT_MAX: u64 = 1 << 20;

fn preview_values(file: &UdfFile, t: &Table, max: usize) -> (Value, String) {
    let Some(sz) = t.prim.size() else {
        return (Value::Null, format!("{} bytes", t.data_size));
    };
    let n = (t.data_size / sz) as usize;
    let take = n.min(max);
    let bytes = match file.bytes_prefix(t, take as u64 * sz) {
        Ok(b) => b,
        Err(e) => return (Value::Null, format!("({e})")),
    };
    let c = sz as usize;
    let vals: Vec<Value> = bytes
        .chunks_exact(c)
        .map(|b| match t.prim {
            Prim::U8 => json!(b[0]),
            Prim::I8 => json!(b[0] as i8),
            Prim::U16 => json!(u16::from_le_bytes([b[0], b[1]])),
            Prim::I16 => json!(i16::from_le_bytes([b[0], b[1]])),
            Prim::U32 => json!(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            Prim::I32 => json!(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            Prim::F32 => f64_value(f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64),
            Prim::U64 => json!(u64::from_le_bytes(b.try_into().unwrap_or_default())),
            Prim::I64 => json!(i64::from_le_bytes(b.try_into().unwrap_or_default())),
            Prim::F64 => f64_value(f64::from_le_bytes(b.try_into().unwrap_or_default())),
            _ => Value::Null,
        })
        .collect();
    let text = vals
        .iter()
        .map(|v| match v {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ");
    let more = if n > take { ", ..." } else { "" };
    (Value::from(vals), format!("[{text}{more}]"))
}

fn shorten(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}...", s.chars().take(n).collect::<String>())
    }
}

fn describe(file: &UdfFile, all: bool, report: &mut Report) {
    let mut summary = Map::new();
    let max = if all { 1 << 16 } else { PREVIEW };
    if let Some(h) = file.header() {
        summary.insert("file_id".into(), Value::from(model::id_string(&h.id)));
        summary.insert("next".into(), Value::from(h.next));
        summary.insert(
            "root".into(),
            if h.root.is_null() {
                Value::Null
            } else {
                json!({"offset": h.root.offset, "size": h.root.size})
            },
        );
        report.fields(
            "UDF file",
            vec![
                ("magic".into(), String::from_utf8_lossy(&h.magic).into_owned()),
                ("id".into(), model::id_string(&h.id)),
                ("size".into(), rasterpack_common::json::fmt_bytes(file.doc.file_len)),
                (
                    "root".into(),
                    if h.root.is_null() {
                        "null".into()
                    } else {
                        format!("{:#x} ({} bytes)", h.root.offset, h.root.size)
                    },
                ),
                ("datasets".into(), file.datasets().len().to_string()),
            ],
        );
    }
    summary.insert("file_size".into(), Value::from(file.doc.file_len));
    let mut dsets = Vec::new();
    for ds in file.datasets() {
        let mut rows = Vec::new();
        let mut tables = Vec::new();
        for t in &ds.tables {
            let mut tj = Map::new();
            tj.insert("name".into(), t.name.clone().map_or(Value::Null, Value::from));
            tj.insert("prim".into(), Value::from(t.prim.name()));
            tj.insert("dims".into(), Value::from(t.shape.dims));
            tj.insert("hint".into(), Value::from(t.hint.name()));
            tj.insert("shape".into(), Value::from(t.shape.axes.clone()));
            tj.insert("real_shape".into(), Value::from(t.shape.real().to_vec()));
            tj.insert("ghost_shape".into(), Value::from(t.shape.ghost().to_vec()));
            tj.insert("data_offset".into(), t.data_offset.map_or(Value::Null, Value::from));
            tj.insert("data_size".into(), Value::from(t.data_size));
            for (k, v) in [
                ("index_name", &t.index_name),
                ("related_name", &t.related_name),
                ("type_name", &t.type_name),
            ] {
                if let Some(v) = v {
                    tj.insert(k.into(), Value::from(v.as_str()));
                }
            }
            if t.compressed {
                tj.insert("compress_info".into(), Value::from(t.desc.compress_info));
            }
            let preview = if !t.readable() {
                if t.compressed {
                    "(compressed)".to_string()
                } else {
                    "(unreadable)".to_string()
                }
            } else if let Some(f) = file.doc.datasets[t.dataset].faults.iter().chain(&t.faults).next() {
                format!("(unreadable: {})", f.code)
            } else if matches!(t.hint, Hint::Text | Hint::Json) && t.data_size > PREVIEW_TEXT_MAX && !all {
                // Large documents are shown with --all only.
                format!("({} bytes; --all shows it)", t.data_size)
            } else {
                match t.hint {
                    Hint::Text if t.hint_ok => match file.text(t) {
                        Ok(x) => {
                            let s = match &x {
                                Text::Scalar(s) => format!("{s:?}"),
                                Text::List(v) => format!("{v:?}"),
                            };
                            tj.insert("text".into(), x.to_json());
                            if all {
                                s
                            } else {
                                shorten(&s, 60)
                            }
                        }
                        Err(e) => format!("({})", e.message),
                    },
                    Hint::Json if t.hint_ok => match file.json(t) {
                        Ok(v) => {
                            let s = v.to_string();
                            tj.insert("json".into(), v);
                            if all {
                                s
                            } else {
                                shorten(&s, 60)
                            }
                        }
                        Err(e) => format!("({})", e.message),
                    },
                    Hint::Dataset if t.hint_ok => {
                        let links: Vec<Value> = ds
                            .children
                            .iter()
                            .filter(|c| c.table == t.index)
                            .map(|c| {
                                json!({"offset": c.location.offset, "size": c.location.size,
                                       "dataset": c.target.map(|i| file.datasets()[i].path.clone())})
                            })
                            .collect();
                        let s = ds
                            .children
                            .iter()
                            .filter(|c| c.table == t.index)
                            .map(|c| match c.target {
                                Some(i) => file.datasets()[i].path.clone(),
                                None => "null".into(),
                            })
                            .collect::<Vec<_>>()
                            .join(", ");
                        tj.insert("file_offsets".into(), Value::from(links));
                        format!("-> {}", shorten(&s, 60))
                    }
                    _ => {
                        let (v, s) = preview_values(file, t, max);
                        if !v.is_null() {
                            tj.insert("values".into(), v);
                        }
                        s
                    }
                }
            };
            let shape = if t.shape.ghost().is_empty() {
                format!("{:?}", t.shape.real())
            } else {
                format!("{:?} + ghost {:?}", t.shape.real(), t.shape.ghost())
            };
            let mut hint = t.hint.name();
            if let Some(i) = &t.index_name {
                hint.push_str(&format!(" -> {i}"));
            }
            if let Some(r) = &t.related_name {
                hint.push_str(&format!(" ~ {r}"));
            }
            let ty = match &t.type_name {
                Some(n) => format!("{} {}D ({n})", t.prim.name(), t.shape.dims),
                None => format!("{} {}D", t.prim.name(), t.shape.dims),
            };
            rows.push(vec![t.display_name(), ty, hint, shape, preview]);
            tables.push(Value::Object(tj));
        }
        report.table(
            format!(
                "dataset {} (id {:?}, {:#x}, {} bytes)",
                ds.path,
                ds.id(),
                ds.location.offset,
                ds.location.size
            ),
            &["table", "type", "hint", "shape", "preview"],
            rows,
        );
        dsets.push(json!({
            "path": ds.path,
            "offset": ds.location.offset,
            "size": ds.location.size,
            "id": ds.id(),
            "header_size": ds.header.header_size,
            "tables": tables,
        }));
    }
    summary.insert("datasets".into(), Value::from(dsets));
    report.summary = summary;
}

/// Small crafted files (the ones in `testdata/udf/`, regenerated by `examples/make_udf_testdata.rs`).
pub mod samples {
    use super::*;

    /// A dataset tree with text, JSON, a 2-D table and mesh-like tables:
    /// `root/{title, meta, grid, child}` and `root/child/{temps, names, vertices, indices, colors}`.
    pub fn sample() -> Result<UdfWriter> {
        let mut w = UdfWriter::new("DEMO")?;
        let root = w.add_dataset("ROOT")?;
        let child = w.add_dataset("CHLD")?;
        w.set_root(root);
        w.add(
            root,
            TableSpec::text("title", "rasterpack UDF sample \u{2713}", Encoding::Utf8),
        )?;
        w.add(
            root,
            TableSpec::json(
                "meta",
                &json!({"source": "rasterpack", "version": 1, "tags": ["demo", "udf"]}),
            ),
        )?;
        let grid: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 1.0).collect();
        w.add(root, TableSpec::array("grid", &[3, 4], &grid))?;
        w.add(root, TableSpec::link("child", Some(child)))?;
        w.add(
            child,
            TableSpec::array("temps", &[5], &[12.5f64, 13.0, -2.25, 0.0, 40.125]),
        )?;
        w.add(
            child,
            TableSpec::text_list("names", &["alpha", "beta", "", "gamma"], Encoding::Utf16),
        )?;
        let verts: [f32; 12] = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0];
        w.add(
            child,
            TableSpec::array("vertices", &[4], &verts).with_hint(Hint::Coord, &[3]),
        )?;
        w.add(
            child,
            TableSpec::array("indices", &[6], &[0u16, 1, 2, 2, 3, 0])
                .with_hint(Hint::Index, &[])
                .index_into("vertices"),
        )?;
        let rgb: [u8; 12] = [255, 0, 0, 0, 255, 0, 0, 0, 255, 9, 9, 9];
        w.add(
            child,
            TableSpec::array("colors", &[4], &rgb)
                .with_hint(Hint::Rgb, &[3])
                .related("vertices"),
        )?;
        Ok(w)
    }
}
