//! FOLD / `.mind` containers as pyfolds 1.0.2 writes them: reading, six-layer validation
//! (fold.md section 6 plus ERRATA), Reed-Solomon repair, and a writer pyfolds reads back.
//!
//! Layers: [`raw`] (on-disk structs) -> [`parse`] (header and index, checked) -> [`validate`]
//! (every finding, chunk by chunk) -> [`FoldFormat`] (the CLI's trait) and [`write`].
#![forbid(unsafe_code)]

pub mod ecc;
pub mod npz;
pub mod parse;
pub mod pjson;
pub mod raw;
pub mod validate;
pub mod write;

use std::io::Write;

use rasterpack_common::json::fmt_bytes;
use rasterpack_common::{
    ArrayRequest, Error, ErrorKind, Format, Input, InspectOptions, Limits, NdArray, Report, Result, ValidateOptions,
    WriteOptions,
};
use serde_json::{json, Map, Value as J};

pub use validate::{analyze, Analysis, AnalyzeOptions, ChunkStatus, Content};
pub use write::{ChunkOptions, Compression, FoldBuilder};

/// The FOLD format (`.fold`, `.mind`).
#[derive(Debug, Clone, Copy, Default)]
pub struct FoldFormat;

const JSON_PREVIEW_CHARS: usize = 2000;

fn summary(a: &Analysis, input: &Input) -> Map<String, J> {
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
                Content::Json(v) => m["json"] = v.to_serde(),
                Content::Npz(arrays) => {
                    m["arrays"] = arrays
                        .iter()
                        .map(|a| json!({"name": a.name, "dtype": a.dtype, "shape": a.shape, "unsupported": a.unsupported}))
                        .collect();
                }
                Content::Zip(names) => m["zip_members"] = json!(names),
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

fn build_report(a: &Analysis, input: &Input, all: bool) -> Report {
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
                e.ctype.clone(),
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
    let meta = serde_json::to_string_pretty(&c.index.metadata.to_serde()).unwrap_or_default();
    r.text("Index metadata", truncate(&meta, all));
    for st in &a.chunks {
        match &st.content {
            Content::Json(v) => {
                let text = serde_json::to_string_pretty(&v.to_serde()).unwrap_or_default();
                r.text(format!("Chunk {:?} (JSON)", st.entry.name), truncate(&text, all));
            }
            Content::Npz(arrays) => {
                let rows = arrays
                    .iter()
                    .map(|a| {
                        vec![
                            a.name.clone(),
                            a.dtype.clone(),
                            format!("{:?}", a.shape),
                            a.unsupported.clone().unwrap_or_default(),
                        ]
                    })
                    .collect();
                r.table(
                    format!("Chunk {:?} (NPZ0 arrays)", st.entry.name),
                    &["array", "dtype", "shape", "note"],
                    rows,
                );
            }
            Content::Zip(names) => {
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
                    format!("Chunk {:?} ({}: zip members)", st.entry.name, st.entry.ctype),
                    format!("{}{more}", shown.join("\n")),
                );
            }
            _ => {}
        }
    }
    r
}

fn truncate(s: &str, all: bool) -> String {
    if all || s.chars().count() <= JSON_PREVIEW_CHARS {
        return s.to_string();
    }
    let cut: String = s.chars().take(JSON_PREVIEW_CHARS).collect();
    format!("{cut}\n... (truncated; --all shows everything)")
}

/// The NPZ0 arrays of a file, as `CHUNK/ARRAY` names.
fn array_choices(a: &Analysis) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for st in &a.chunks {
        if let Content::Npz(arrays) = &st.content {
            for arr in arrays {
                out.push((st.entry.name.clone(), arr.name.clone()));
            }
        }
    }
    out
}

/// Parse `convert --compress` for FOLD output: `zstd` (default), `none`, optionally
/// `+rs16`/`+rs32`/`+rs64` (e.g. `zstd+rs32`).
fn chunk_options(opts: &WriteOptions) -> Result<ChunkOptions> {
    let mut co = ChunkOptions::default();
    let Some(spec) = &opts.compress else { return Ok(co) };
    for part in spec.split('+') {
        match part {
            "zstd" => co.compression = Compression::Zstd(3),
            "none" => co.compression = Compression::None,
            p if p.starts_with("rs") => {
                let n: u8 = p[2..]
                    .trim_matches(|c| c == '(' || c == ')')
                    .parse()
                    .map_err(|_| Error::usage(format!("bad ECC {p:?}")))?;
                co.ecc = Some(n);
            }
            other => {
                return Err(Error::usage(format!(
                    "FOLD compression {other:?}: use zstd, none, optionally +rs16/+rs32/+rs64"
                )))
            }
        }
    }
    Ok(co)
}

impl Format for FoldFormat {
    fn name(&self) -> &'static str {
        "fold"
    }
    fn honours(&self) -> &'static [rasterpack_common::RequestFlag] {
        use rasterpack_common::RequestFlag;
        &[RequestFlag::Element, RequestFlag::Compress]
    }

    fn description(&self) -> &'static str {
        "FOLD/.mind chunked container (pyfolds): JSON, NPZ0 and opaque chunks with CRC32C, SHA-256 and Reed-Solomon ECC"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["fold", "mind"]
    }

    fn detect(&self, head: &[u8]) -> bool {
        head.starts_with(&raw::MAGIC)
    }

    fn inspect(&self, input: &Input, opts: &InspectOptions) -> Result<Report> {
        let a = analyze(
            input,
            &AnalyzeOptions {
                limits: opts.limits,
                content: true,
                ..Default::default()
            },
        )?;
        Ok(build_report(&a, input, opts.all))
    }

    fn validate(&self, input: &Input, opts: &ValidateOptions) -> Report {
        match analyze(
            input,
            &AnalyzeOptions {
                limits: opts.limits,
                content: false,
                ..Default::default()
            },
        ) {
            Ok(a) => build_report(&a, input, false),
            Err(e) => {
                let mut r = Report::new("fold");
                r.fail(&e.in_format("fold"));
                r
            }
        }
    }

    fn read_array(&self, input: &Input, req: &ArrayRequest) -> Result<NdArray> {
        let a = analyze(
            input,
            &AnalyzeOptions {
                limits: req.limits,
                content: true,
                ..Default::default()
            },
        )?;
        let Some(c) = &a.container else {
            let f = a.findings.iter().next();
            return Err(Error::invalid_at(
                f.map(|f| f.code.clone()).unwrap_or_else(|| "fold.invalid".into()),
                f.and_then(|f| f.offset),
                f.map(|f| f.message.clone())
                    .unwrap_or_else(|| "not a readable FOLD file".into()),
            ));
        };
        let choices = array_choices(&a);
        let listing = || {
            choices
                .iter()
                .map(|(c, n)| format!("{c}/{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (chunk, name) = match &req.element {
            Some(el) => {
                let hit: Vec<&(String, String)> = match el.split_once('/') {
                    Some((ch, ar)) if choices.iter().any(|(c, n)| c == ch && n == ar) => {
                        choices.iter().filter(|(c, n)| c == ch && n == ar).collect()
                    }
                    _ => choices.iter().filter(|(_, n)| n == el).collect(),
                };
                match hit.as_slice() {
                    [one] => (*one).clone(),
                    [] => {
                        return Err(Error::usage(format!(
                            "no NPZ0 array {el:?}; choose one of: {}",
                            listing()
                        )))
                    }
                    _ => {
                        return Err(Error::usage(format!(
                            "array name {el:?} is ambiguous; use CHUNK/ARRAY: {}",
                            listing()
                        )))
                    }
                }
            }
            None => match choices.as_slice() {
                [one] => one.clone(),
                [] => return Err(Error::usage("the file holds no NPZ0 array")),
                _ => {
                    return Err(Error::usage(format!(
                        "the file holds several arrays; choose one with --element CHUNK/ARRAY: {}",
                        listing()
                    )))
                }
            },
        };
        let bytes = validate::read_chunk(input, c, &chunk, &req.limits)?;
        npz::read_array(&bytes, &name, &req.limits)
    }

    fn write_array(&self, array: &NdArray, opts: &WriteOptions, out: &mut dyn Write) -> Result<()> {
        let mut b = FoldBuilder::new();
        let name = array
            .name
            .clone()
            .filter(|n| !n.is_empty() && !n.contains('/'))
            .unwrap_or_else(|| "arr_0".into());
        b.metadata(
            "writer",
            pjson::Value::str(concat!("rasterpack ", env!("CARGO_PKG_VERSION"))),
        )?;
        if !array.attrs.is_empty() {
            b.metadata(
                "source_attrs",
                pjson::Value::from_serde(&J::Object(array.attrs.clone())),
            )?;
        }
        b.add_npz("nuclear_arrays", &[(&name, array)], chunk_options(opts)?)?;
        b.write_to(out)
    }

    fn convert_special(
        &self,
        input: &Input,
        target: &dyn Format,
        _req: &ArrayRequest,
        opts: &WriteOptions,
        out: &mut dyn Write,
    ) -> Option<Result<()>> {
        if target.name() != "fold" {
            return None;
        }
        Some(repair_copy(input, &opts.limits, out))
    }
}

/// FOLD -> FOLD: copy the file with every ECC-repairable chunk repaired in place. Refuses
/// files that are invalid for any other reason.
pub fn repair_copy(input: &Input, limits: &Limits, out: &mut dyn Write) -> Result<()> {
    let a = analyze(
        input,
        &AnalyzeOptions {
            limits: *limits,
            content: false,
            keep_repairs: true,
            keep_payload: false,
        },
    )?;
    if let Some(bad) = a
        .findings
        .iter()
        .find(|f| f.severity == rasterpack_common::Severity::Error)
    {
        return Err(Error::new(
            ErrorKind::Invalid,
            bad.code.clone(),
            bad.offset,
            format!("cannot convert an invalid FOLD file: {}", bad.message),
        ));
    }
    let mut repairs = a.repairs;
    repairs.sort_by_key(|r| r.0);
    let io = |e: std::io::Error| Error::io("writing FOLD output", &e);
    let mut pos = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    let mut copy_until = |pos: &mut u64, end: u64, out: &mut dyn Write| -> Result<()> {
        while *pos < end {
            let n = ((end - *pos) as usize).min(buf.len());
            input.read_at(*pos, &mut buf[..n], "FOLD file")?;
            out.write_all(&buf[..n]).map_err(io)?;
            *pos += n as u64;
        }
        Ok(())
    };
    for (off, bytes) in &repairs {
        copy_until(&mut pos, *off, out)?;
        out.write_all(bytes).map_err(io)?;
        pos = off + bytes.len() as u64;
    }
    copy_until(&mut pos, input.len(), out)?;
    Ok(())
}
