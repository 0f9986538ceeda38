//! What `inspect` and `validate` show: the JSON summary (snake_case keys, numpy dtype names,
//! an `arrays` list of `{name, dtype, shape}` named as `--element` takes them) and the tables.

use rasterpack_common::json::fmt_bytes;
use rasterpack_common::{Input, Report};
use serde_json::{json, Map, Value as J};

use crate::element::{element_labels_first, npz_chunks};
use crate::npz::NpzArrayInfo;
use crate::raw;
use crate::validate::{FoldAnalysis, FoldContent};

const JSON_PREVIEW_CHARS: usize = 2000;

/// Arrays `inspect` and `validate` list per NPZ0 chunk (JSON `arrays` and the text table) and
/// in the file's `arrays`; past it they are counted (`arrays_not_listed`). A central directory
/// may list 350 000 members, and a report row per member held ~5 KB (issue 17).
pub const ARRAYS_LISTED: usize = 1000;

fn dtype_name(a: &NpzArrayInfo) -> J {
    a.dtype.map_or(J::Null, |d| J::from(d.name()))
}

/// The first [`ARRAYS_LISTED`] readable arrays of the file: `{name, dtype, shape}` with names
/// as `--element` takes them; and how many more there are.
fn arrays_summary(a: &FoldAnalysis) -> (Vec<J>, usize) {
    let chunks = npz_chunks(&a.chunks);
    let (listed, total) = element_labels_first(&chunks, ARRAYS_LISTED);
    let rows: Vec<J> = listed
        .into_iter()
        .map(|(label, info)| json!({"name": label, "dtype": dtype_name(info), "shape": info.shape}))
        .collect();
    let more = total - rows.len();
    (rows, more)
}

fn summary(a: &FoldAnalysis, input: &Input) -> Map<String, J> {
    let mut s = Map::new();
    s.insert("file_size".into(), json!(input.len()));
    let Some(c) = &a.container else { return s };
    s.insert("kind".into(), json!(if c.is_mind() { "mind" } else { "fold" }));
    s.insert(
        "header".into(),
        json!({"header_len": c.header.header_len, "index_off": c.header.index_off, "index_len": c.header.index_len}),
    );
    s.insert("version".into(), json!(c.index.version));
    if let Some(t) = c.index.created_at_unix {
        s.insert("created_at_unix".into(), rasterpack_common::json::f64_value(t));
    }
    s.insert("metadata".into(), c.index.metadata.to_serde());
    s.insert("manifest_hash_ok".into(), json!(a.manifest_ok));
    s.insert("manifest_hash_recomputed".into(), json!(a.manifest_recomputed));
    let (arrays, not_listed) = arrays_summary(a);
    s.insert("arrays".into(), J::Array(arrays));
    if not_listed > 0 {
        s.insert("arrays_not_listed".into(), json!(not_listed));
    }
    let chunks: Vec<J> = a
        .chunks
        .iter()
        .map(|st| {
            let e = &st.entry;
            let mut m = json!({
                "name": e.name, "ctype": e.ctype, "flags": e.flags, "offset": e.offset,
                "comp_len": e.comp_len, "uncomp_len": e.uncomp_len, "crc32c": e.crc32c, "sha256": e.sha256,
                "ecc_algo": e.ecc_algo, "ecc_len": e.ecc_len,
                "crc_ok": st.crc_ok, "sha_ok": st.sha_ok, "ecc_status": st.ecc_status,
                "repaired_bytes": st.repaired_bytes, "decoded": st.decoded,
                "uncompressed_sha256": st.uncompressed_sha256,
            });
            match &st.content {
                FoldContent::Json(v) => m["json"] = v.to_serde(),
                FoldContent::JsonNotKept(n) => m["json_not_shown_bytes"] = json!(n),
                FoldContent::Npz(arrays) => {
                    if arrays.len() > ARRAYS_LISTED {
                        m["arrays_not_listed"] = json!(arrays.len() - ARRAYS_LISTED);
                    }
                    m["arrays"] = arrays
                        .iter()
                        .take(ARRAYS_LISTED)
                        .map(|a| {
                            json!({
                                "name": a.name, "dtype": dtype_name(a), "descr": a.descr, "shape": a.shape,
                                "unsupported": a.unsupported,
                                "damaged": a.damaged.as_ref().map(|d| &d.message),
                                "damage_code": a.damaged.as_ref().map(|d| d.code),
                            })
                        })
                        .collect();
                }
                FoldContent::Zip(names) => m["zip_members"] = json!(names),
                _ => {}
            }
            m
        })
        .collect();
    s.insert("chunks".into(), J::Array(chunks));
    s
}

fn yes_no(v: Option<bool>) -> String {
    match v {
        Some(true) => "ok".into(),
        Some(false) => "MISMATCH".into(),
        None => "-".into(),
    }
}

/// The report of an analysis: findings, summary and tables (`all`: nothing truncated).
pub(crate) fn build_report(a: &FoldAnalysis, input: &Input, all: bool) -> Report {
    let mut r = Report::new("fold");
    r.findings = a.findings.clone();
    // Something valid as far as it could be checked, but not decodable here (exit code 3).
    r.unsupported = a
        .findings
        .iter()
        .any(|f| f.code == "fold.payload.npz_unsupported" || f.code == "fold.payload.npz_dtype_unsupported");
    r.summary = summary(a, input);
    let Some(c) = &a.container else { return r };
    r.fields(
        "FOLD container",
        vec![
            ("kind".into(), if c.is_mind() { "mind".into() } else { "fold".into() }),
            ("file size".into(), fmt_bytes(c.file_len)),
            ("version".into(), c.index.version.clone()),
            (
                "created_at_unix".into(),
                c.index
                    .created_at_unix
                    .map(rasterpack_common::json::fmt_f64)
                    .unwrap_or_else(|| "-".into()),
            ),
            (
                "index".into(),
                format!("offset {}, {}", c.header.index_off, fmt_bytes(c.header.index_len)),
            ),
            ("chunks".into(), c.index.declared_chunks.to_string()),
            (
                "manifest hash".into(),
                match a.manifest_ok {
                    Some(true) => "ok".into(),
                    Some(false) => "MISMATCH".into(),
                    None => "absent".into(),
                },
            ),
        ],
    );
    chunk_table(a, &mut r);
    let meta = serde_json::to_string_pretty(&c.index.metadata.to_serde()).unwrap_or_default();
    r.text("Index metadata", truncate(&meta, all));
    for st in &a.chunks {
        content_section(st, all, &mut r);
    }
    r
}

fn chunk_table(a: &FoldAnalysis, r: &mut Report) {
    let rows = a
        .chunks
        .iter()
        .map(|st| {
            let e = &st.entry;
            let ratio = if e.comp_len > 0 {
                format!("{:.2}", e.uncomp_len as f64 / e.comp_len as f64)
            } else {
                "-".into()
            };
            vec![
                e.name.clone(),
                raw::ctype_display(e.ctype.as_bytes()),
                match e.flags {
                    0 => "none".into(),
                    1 => "zstd".into(),
                    f => format!("?{f}"),
                },
                e.offset.to_string(),
                e.comp_len.to_string(),
                e.uncomp_len.to_string(),
                ratio,
                yes_no(st.crc_ok),
                yes_no(st.sha_ok),
                st.ecc_status.clone(),
            ]
        })
        .collect();
    r.table(
        "Chunks",
        &[
            "name",
            "ctype",
            "compression",
            "offset",
            "stored",
            "uncompressed",
            "ratio",
            "CRC32C",
            "SHA-256",
            "ECC",
        ],
        rows,
    );
}

fn content_section(st: &crate::validate::FoldChunkStatus, all: bool, r: &mut Report) {
    match &st.content {
        FoldContent::Json(v) => {
            let text = serde_json::to_string_pretty(&v.to_serde()).unwrap_or_default();
            r.text(format!("Chunk {:?} (JSON)", st.entry.name), truncate(&text, all));
        }
        FoldContent::JsonNotKept(n) => r.text(
            format!("Chunk {:?} (JSON)", st.entry.name),
            format!("{} of JSON: too large to show here; checked as a stream", fmt_bytes(*n)),
        ),
        FoldContent::Npz(arrays) => {
            let mut rows: Vec<Vec<String>> = arrays
                .iter()
                .take(ARRAYS_LISTED)
                .map(|a| {
                    let dtype = match a.dtype {
                        Some(d) if a.descr.starts_with('>') => format!("{} (big-endian)", d.name()),
                        Some(d) => d.name().to_string(),
                        None => a.descr.clone(),
                    };
                    vec![
                        a.name.clone(),
                        dtype,
                        format!("{:?}", a.shape),
                        a.damaged
                            .as_ref()
                            .map(|d| format!("DAMAGED: {}", d.message))
                            .or_else(|| a.unsupported.clone())
                            .unwrap_or_default(),
                    ]
                })
                .collect();
            if arrays.len() > ARRAYS_LISTED {
                rows.push(vec![
                    format!("... {} more", arrays.len() - ARRAYS_LISTED),
                    String::new(),
                    String::new(),
                    format!("{} arrays in all; the first {ARRAYS_LISTED} are listed", arrays.len()),
                ]);
            }
            r.table(
                format!("Chunk {:?} (NPZ0 arrays)", st.entry.name),
                &["array", "dtype", "shape", "note"],
                rows,
            );
        }
        FoldContent::Zip(names) => {
            let shown: Vec<&str> = names
                .iter()
                .take(if all { usize::MAX } else { 20 })
                .map(|s| s.as_str())
                .collect();
            let more = if names.len() > shown.len() {
                format!("\n... {} more", names.len() - shown.len())
            } else {
                String::new()
            };
            r.text(
                format!(
                    "Chunk {:?} ({}: zip members)",
                    st.entry.name,
                    raw::ctype_display(st.entry.ctype.as_bytes())
                ),
                format!("{}{more}", shown.join("\n")),
            );
        }
        _ => {}
    }
}

fn truncate(s: &str, all: bool) -> String {
    if all || s.chars().count() <= JSON_PREVIEW_CHARS {
        return s.to_string();
    }
    let cut: String = s.chars().take(JSON_PREVIEW_CHARS).collect();
    format!("{cut}\n... (truncated; --all shows everything)")
}
