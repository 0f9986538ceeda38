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
                        .map(|a| json!({"name": a.name, "dtype": a.dtype, "shape": a.shape, "unsupported": a.unsupported, "damaged": a.damaged}))
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
                            a.damaged
                                .as_ref()
                                .map(|d| format!("DAMAGED: {d}"))
                                .or_else(|| a.unsupported.clone())
                                .unwrap_or_default(),
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
    r
}

fn truncate(s: &str, all: bool) -> String {
    if all || s.chars().count() <= JSON_PREVIEW_CHARS {
        return s.to_string();
    }
    let cut: String = s.chars().take(JSON_PREVIEW_CHARS).collect();
    format!("{cut}\n... (truncated; --all shows everything)")
}

/// What `--element` can name in a file: its NPZ0 chunks (by index entry) and their arrays.
/// `arrays` is `None` for a chunk that could not be read (its errors say why).
pub struct NpzChunk<'a> {
    pub status: &'a ChunkStatus,
    pub arrays: Option<&'a [npz::ArrayInfo]>,
}

impl NpzChunk<'_> {
    fn name(&self) -> &str {
        &self.status.entry.name
    }
}

fn npz_chunks(a: &Analysis) -> Vec<NpzChunk<'_>> {
    a.chunks
        .iter()
        .filter(|st| st.entry.ctype == "NPZ0")
        .map(|st| NpzChunk {
            status: st,
            arrays: match &st.content {
                Content::Npz(arrays) if st.errors.is_empty() => Some(arrays.as_slice()),
                _ => None,
            },
        })
        .collect()
}

/// The ways an `--element` value can be read, most explicit first:
/// - `["CHUNK","ARRAY"]`, a JSON array of two strings: exactly that chunk and array (any
///   names, `/` included);
/// - `CHUNK/ARRAY`: split at any `/` (chunk names may hold `/`, e.g. `a/b/v` is array `v` of
///   chunk `a/b`, or array `b/v` of chunk `a`);
/// - `ARRAY`: an array name alone.
///
/// Returns every (chunk, array) pair the value can mean in this file; a readable chunk is
/// named only with an array it holds, an unreadable chunk with whatever array was asked.
pub fn element_meanings<'a>(chunks: &'a [NpzChunk<'a>], element: &str) -> Vec<(&'a NpzChunk<'a>, String)> {
    if element.starts_with('[') {
        if let Ok([chunk, array]) = serde_json::from_str::<[String; 2]>(element) {
            return chunks
                .iter()
                .filter(|c| c.name() == chunk)
                .filter(|c| c.arrays.is_none_or(|arrs| arrs.iter().any(|x| x.name == array)))
                .map(|c| (c, array.clone()))
                .collect();
        }
    }
    let mut out: Vec<(&NpzChunk, String)> = Vec::new();
    for (i, _) in element.match_indices('/') {
        let (chunk, array) = (&element[..i], &element[i + 1..]);
        for c in chunks.iter().filter(|c| c.name() == chunk) {
            if c.arrays.is_none_or(|arrs| arrs.iter().any(|x| x.name == array)) {
                out.push((c, array.to_string()));
            }
        }
    }
    for c in chunks {
        if c.arrays.is_some_and(|arrs| arrs.iter().any(|x| x.name == element)) {
            out.push((c, element.to_string()));
        }
    }
    out
}

/// How to name `array` of `chunk` with `--element` in this file: `CHUNK/ARRAY` when that
/// means only this pair, else the explicit `["CHUNK","ARRAY"]`.
fn element_label(chunks: &[NpzChunk], chunk: &str, array: &str) -> String {
    let plain = format!("{chunk}/{array}");
    let m = element_meanings(chunks, &plain);
    if m.len() == 1 && m[0].0.name() == chunk && m[0].1 == array {
        plain
    } else {
        serde_json::to_string(&[chunk, array]).unwrap_or(plain)
    }
}

/// Pick the array `--element` names (or the only one). Errors: usage (exit 2) for names that
/// mean nothing or several things; the chunk's own finding (exit 1) when the array lies in a
/// chunk that failed its checks; unsupported (exit 3) for a dtype rasterpack cannot decode.
fn pick_array<'a>(chunks: &'a [NpzChunk<'a>], element: Option<&str>) -> Result<(&'a NpzChunk<'a>, String)> {
    let readable: Vec<(&NpzChunk, &npz::ArrayInfo)> = chunks
        .iter()
        .flat_map(|c| c.arrays.unwrap_or(&[]).iter().map(move |a| (c, a)))
        .collect();
    let damaged: Vec<&NpzChunk> = chunks.iter().filter(|c| c.arrays.is_none()).collect();
    let listing = || {
        let mut names: Vec<String> = readable
            .iter()
            .map(|(c, a)| element_label(chunks, c.name(), &a.name))
            .collect();
        for c in &damaged {
            names.push(format!("{:?} (chunk could not be read)", c.name()));
        }
        if names.is_empty() {
            "none".into()
        } else {
            names.join(", ")
        }
    };
    let chunk_failure = |c: &NpzChunk| -> Error {
        match c.status.errors.first() {
            Some(f) => Error::invalid_at(
                f.code.clone(),
                f.offset,
                format!("cannot read chunk {:?}: {}", c.name(), f.message),
            ),
            None => Error::invalid_at(
                "fold.payload.unreadable",
                Some(c.status.entry.offset),
                format!("chunk {:?} could not be decoded", c.name()),
            ),
        }
    };
    let Some(el) = element else {
        return match (readable.as_slice(), damaged.as_slice()) {
            ([(c, a)], []) => Ok((*c, a.name.clone())),
            ([], [one, ..]) => Err(chunk_failure(one)),
            ([], []) => Err(Error::usage("the file holds no NPZ0 array")),
            _ => Err(Error::usage(format!(
                "the file holds several arrays; choose one with --element CHUNK/ARRAY: {}",
                listing()
            ))),
        };
    };
    let mut meanings = element_meanings(chunks, el);
    meanings.dedup_by(|x, y| x.0.name() == y.0.name() && x.1 == y.1);
    match meanings.as_slice() {
        [(c, _)] if c.arrays.is_none() => Err(chunk_failure(c)),
        [(c, array)] => Ok((*c, array.clone())),
        [] => match damaged.first() {
            // The array may be in a chunk that cannot be read: say what failed.
            Some(one) if !el.starts_with('[') => Err(chunk_failure(one)),
            _ => Err(Error::usage(format!(
                "no NPZ0 array {el:?}; choose one of: {}",
                listing()
            ))),
        },
        several => {
            if several.iter().all(|(c, _)| c.name() == several[0].0.name()) {
                // One name shared by several index entries: the index is broken there.
                return Err(chunk_failure(several[0].0));
            }
            let options: Vec<String> = several
                .iter()
                .map(|(c, a)| serde_json::to_string(&[c.name(), a.as_str()]).unwrap_or_default())
                .collect();
            Err(Error::usage(format!(
                "--element {el:?} can mean {}; name one with --element '[\"CHUNK\",\"ARRAY\"]'",
                options.join(" or ")
            )))
        }
    }
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
        let chunks = npz_chunks(&a);
        let (chunk, name) = pick_array(&chunks, req.element.as_deref())?;
        if let Some(info) = chunk.arrays.and_then(|arrs| arrs.iter().find(|x| x.name == name)) {
            if let Some(why) = &info.damaged {
                return Err(Error::invalid_at(
                    validate::NPZ_MEMBER_DAMAGED,
                    Some(chunk.status.entry.offset + raw::CHUNK_HEADER_LEN),
                    format!("chunk {:?}: array {name:?} is not readable: {why}", chunk.name()),
                ));
            }
            if let Some(why) = &info.unsupported {
                return Err(Error::unsupported(
                    if info.zip_method_unsupported {
                        "fold.payload.npz_unsupported"
                    } else {
                        "fold.payload.npz_dtype_unsupported"
                    },
                    Some(chunk.status.entry.offset + raw::CHUNK_HEADER_LEN),
                    format!(
                        "chunk {:?}: array {name:?} cannot be decoded by rasterpack: {why}",
                        chunk.name()
                    ),
                ));
            }
        }
        // The chunk is verified again as it is read (CRC32C, SHA-256, chunk_hashes, ECC,
        // lengths), and the member's CRC-32 as it is unpacked.
        let bytes = validate::read_chunk(input, c, chunk.name(), &req.limits)?;
        npz::read_array(&bytes, &name, &req.limits)
    }

    fn write_array(&self, array: &NdArray, opts: &WriteOptions, out: &mut dyn Write) -> Result<()> {
        let mut b = FoldBuilder::new();
        let name = array
            .name
            .clone()
            .filter(|n| !n.is_empty() && n.len() <= 200 && !n.contains(['/', '\0']))
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
        b.write_to(out)?;
        for note in &b.notes {
            eprintln!("rasterpack: note: {note}");
        }
        Ok(())
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
