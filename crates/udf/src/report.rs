//! What `inspect` and `validate` say about a file: the JSON summary (snake_case keys, numpy
//! dtype names, the `arrays` list every format gives) and the tables people read; and the
//! format-independent [`ArrayFile`] interface of [`UdfFile`].

use rasterpack_common::json::{f64_value, fmt_bytes, fmt_f32};
use rasterpack_common::{ArrayFile, ArrayInfo, ArrayRequest, ArraySink, Report, Result, ValidateOptions};
use serde_json::{json, Map, Value};

use crate::document::{id_string, UdfDataset, UdfTable, UdfText};
use crate::model::UdfFile;
use crate::raw::{Hint, Prim};
use crate::validate;

/// Values shown per numeric table (without `--all`).
const PREVIEW: usize = 8;
/// Text and JSON tables larger than this are not decoded by `inspect` unless `--all`.
pub(crate) const PREVIEW_TEXT_MAX: u64 = 1 << 20;
/// Tables described in a report (without `--all`), the first ones in walk order: each costs a
/// few KiB in the report, and a 6 MiB file can hold 130,000 of them (100 datasets of 1300).
/// The others are counted (`tables_not_listed`, and one row per dataset).
pub const TABLES_LISTED: usize = 4096;

impl UdfFile {
    /// Check every rule of the file and the content of every table: all findings, with the
    /// summary `inspect` gives. Table data streams through a working set of a few MiB.
    pub fn validate(&self) -> Report {
        self.validate_with(&ValidateOptions {
            limits: *self.limits(),
            ..ValidateOptions::default()
        })
    }

    /// [`UdfFile::validate`] with other limits for the content checks, and a progress
    /// callback told the bytes of table data checked.
    pub fn validate_with(&self, opts: &ValidateOptions) -> Report {
        self.report_with(self.doc.findings.clone(), opts)
    }

    /// [`UdfFile::validate_with`] of a file not needed afterwards (its findings move into the
    /// report instead of being copied).
    pub(crate) fn into_report(mut self, opts: &ValidateOptions) -> Report {
        let findings = std::mem::take(&mut self.doc.findings);
        self.report_with(findings, opts)
    }

    fn report_with(&self, findings: rasterpack_common::Findings, opts: &ValidateOptions) -> Report {
        let mut report = Report::new("udf");
        report.findings.extend(findings);
        let progress = |done, total| opts.report_progress(done, total);
        validate::check_contents_upto(
            self.input(),
            &opts.limits,
            &self.doc,
            u64::MAX,
            &progress,
            &mut report.findings,
        );
        describe(self, false, &mut report);
        report
    }
}

impl ArrayFile for UdfFile {
    fn format_name(&self) -> &'static str {
        "udf"
    }

    /// One array per table with a dtype, named `DATASET_PATH/TABLE`.
    fn arrays(&self) -> Result<Vec<ArrayInfo>> {
        Ok(self.array_list())
    }

    fn validate(&self) -> Report {
        UdfFile::validate(self)
    }

    /// The table `req.element` names (or the file's only numeric table), or `req.region` of it.
    fn stream(&self, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        req.check_honoured(&crate::UdfFormat)?;
        let (ds, t) = self.select(req.element.as_deref())?;
        self.stream_table(ds, t, req, sink)
    }
}

/// Fill `report` with the summary and the tables of `file` (`all`: whole documents and up to
/// 65536 values per table instead of previews).
pub(crate) fn describe(file: &UdfFile, all: bool, report: &mut Report) {
    let mut summary = Map::new();
    describe_header(file, &mut summary, report);
    summary.insert("file_size".into(), Value::from(file.doc.file_len));
    let arrays: Vec<Value> = file
        .array_list()
        .into_iter()
        .map(|a| json!({"name": a.name, "dtype": a.dtype.name(), "shape": a.shape}))
        .collect();
    summary.insert("arrays".into(), Value::from(arrays));
    let mut datasets = Vec::new();
    let mut left = if all { usize::MAX } else { TABLES_LISTED };
    let mut not_listed = 0u64;
    for ds in file.datasets() {
        let mut rows = Vec::new();
        let mut tables = Vec::new();
        let shown = ds.tables.len().min(left);
        left -= shown;
        not_listed += (ds.tables.len() - shown) as u64;
        for t in &ds.tables[..shown] {
            let mut tj = table_facts(t);
            let preview = preview(file, ds, t, all, &mut tj);
            rows.push(table_row(t, preview));
            tables.push(Value::Object(tj));
        }
        if shown < ds.tables.len() {
            let more = format!("({} more tables; --all shows them)", ds.tables.len() - shown);
            rows.push(vec!["...".into(), String::new(), String::new(), String::new(), more]);
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
        datasets.push(json!({
            "path": ds.path,
            "offset": ds.location.offset,
            "size": ds.location.size,
            "id": ds.id(),
            "header_size": ds.header.header_size,
            "table_count": ds.tables.len(),
            "tables": tables,
        }));
    }
    summary.insert("datasets".into(), Value::from(datasets));
    summary.insert("tables_not_listed".into(), Value::from(not_listed));
    report.summary = summary;
}

/// The file header's facts.
fn describe_header(file: &UdfFile, summary: &mut Map<String, Value>, report: &mut Report) {
    let Some(h) = file.header() else {
        return;
    };
    summary.insert("file_id".into(), Value::from(id_string(&h.id)));
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
            ("id".into(), id_string(&h.id)),
            ("size".into(), fmt_bytes(file.doc.file_len)),
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

/// The descriptor facts of a table, for the JSON summary.
fn table_facts(t: &UdfTable) -> Map<String, Value> {
    let mut tj = Map::new();
    tj.insert("name".into(), t.name.clone().map_or(Value::Null, Value::from));
    tj.insert("prim".into(), Value::from(t.prim.name()));
    tj.insert("dtype".into(), t.dtype().map_or(Value::Null, |d| Value::from(d.name())));
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
    tj
}

/// The row of a table in the human tables: name, type, hint, shape, preview.
fn table_row(t: &UdfTable, preview: String) -> Vec<String> {
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
    let kind = t.dtype().map_or_else(|| t.prim.name(), |d| d.name().to_string());
    let ty = match &t.type_name {
        Some(n) => format!("{kind} {}D ({n})", t.shape.dims),
        None => format!("{kind} {}D", t.shape.dims),
    };
    vec![t.display_name(), ty, hint, shape, preview]
}

/// A short view of a table's content for people; the decoded content also goes into the
/// table's JSON facts (`text`, `json`, `file_offsets`, `values`).
fn preview(file: &UdfFile, ds: &UdfDataset, t: &UdfTable, all: bool, tj: &mut Map<String, Value>) -> String {
    if !t.readable() {
        return if t.compressed { "(compressed)" } else { "(unreadable)" }.to_string();
    }
    if let Some(f) = file.doc.datasets[t.dataset].faults.iter().chain(&t.faults).next() {
        return format!("(unreadable: {})", f.code);
    }
    // A text list costs a String per row even when its rows are empty.
    let decoded = match t.hint {
        Hint::Text => t
            .data_size
            .max(t.shape.records().saturating_mul(crate::model::TEXT_ROW_COST)),
        _ => t.data_size,
    };
    if matches!(t.hint, Hint::Text | Hint::Json) && decoded > PREVIEW_TEXT_MAX && !all {
        // Large documents are shown with --all only.
        return format!("({} bytes; --all shows it)", t.data_size);
    }
    let cut = |s: String| if all { s } else { shorten(&s, 60) };
    match t.hint {
        Hint::Text if t.hint_ok => match file.text(t) {
            Ok(x) => {
                let s = match &x {
                    UdfText::Scalar(s) => format!("{s:?}"),
                    UdfText::List(v) => format!("{v:?}"),
                };
                tj.insert("text".into(), x.to_json());
                cut(s)
            }
            Err(e) => format!("({})", e.message),
        },
        Hint::Json if t.hint_ok => match file.json(t) {
            Ok(v) => {
                let s = v.to_string();
                tj.insert("json".into(), v);
                cut(s)
            }
            Err(e) => format!("({})", e.message),
        },
        Hint::Dataset if t.hint_ok => {
            let links = ds.links_of(t.index);
            let shown = links.iter().take(if all { usize::MAX } else { 64 });
            let json: Vec<Value> = shown
                .clone()
                .map(|c| {
                    json!({"offset": c.location.offset, "size": c.location.size,
                           "dataset": c.target.map(|i| file.datasets()[i].path.clone())})
                })
                .collect();
            let s = shown
                .map(|c| match c.target {
                    Some(i) => file.datasets()[i].path.clone(),
                    None => "null".into(),
                })
                .collect::<Vec<_>>()
                .join(", ");
            tj.insert("file_offsets".into(), Value::from(json));
            tj.insert("link_count".into(), Value::from(links.len()));
            format!("-> {}", shorten(&s, 60))
        }
        _ => {
            let (v, s) = preview_values(file, t, if all { 1 << 16 } else { PREVIEW });
            if !v.is_null() {
                tj.insert("values".into(), v);
            }
            s
        }
    }
}

/// The first `max` values of a table, as JSON and as text.
fn preview_values(file: &UdfFile, t: &UdfTable, max: usize) -> (Value, String) {
    let Some(sz) = t.prim.size() else {
        return (Value::Null, format!("{} bytes", t.data_size));
    };
    let n = t.decoded_len() / sz;
    let take = n.min(max as u64);
    let bytes = match file.bytes_prefix(t, take * sz) {
        Ok(b) => b,
        Err(e) => return (Value::Null, format!("({e})")),
    };
    let vals: Vec<Value> = bytes.chunks_exact(sz as usize).map(|b| value_json(t.prim, b)).collect();
    // The text at the table's own precision: an f32 table's values as the shortest f32
    // (`-0.00325`, not `-0.0032500000670552254`); the JSON keeps f64.
    let text = vals
        .iter()
        .map(|v| match v {
            Value::String(s) => s.clone(),
            Value::Number(x) if t.prim == Prim::F32 => fmt_f32(x.as_f64().unwrap_or(f64::NAN) as f32),
            v => v.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ");
    let more = if n > take { ", ..." } else { "" };
    (Value::from(vals), format!("[{text}{more}]"))
}

/// One little-endian value as JSON (non-finite floats as the CLI contract's strings).
fn value_json(prim: Prim, b: &[u8]) -> Value {
    let a8 = |b: &[u8]| <[u8; 8]>::try_from(b).unwrap_or_default();
    match prim {
        Prim::U8 => json!(b[0]),
        Prim::I8 => json!(b[0] as i8),
        Prim::U16 => json!(u16::from_le_bytes([b[0], b[1]])),
        Prim::I16 => json!(i16::from_le_bytes([b[0], b[1]])),
        Prim::U32 => json!(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        Prim::I32 => json!(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        Prim::F32 => f64_value(f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64),
        Prim::U64 => json!(u64::from_le_bytes(a8(b))),
        Prim::I64 => json!(i64::from_le_bytes(a8(b))),
        Prim::F64 => f64_value(f64::from_le_bytes(a8(b))),
        Prim::Custom | Prim::Reserved(_) => Value::Null,
    }
}

fn shorten(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}...", s.chars().take(n).collect::<String>())
    }
}

// The reader API every format shares (no trait import needed).
rasterpack_common::reader_api!(UdfFile, crate::UdfFormat, delegate);
