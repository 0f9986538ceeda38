//! FOLD / `.mind` containers, as pyfolds 1.0.2 writes them: reading (arrays streamed into any
//! [`ArraySink`], whole or a region), six-layer validation, Reed-Solomon repair, and writing
//! files pyfolds reads back.
//!
//! A FOLD file is a 28-byte header, chunks (a 32-byte chunk header, the stored payload, ECC
//! bytes) and a JSON index listing every chunk with its offset, lengths, CRC32C and SHA-256.
//! Chunks are `JSON` documents, `NPZ0` numpy `.npz` archives (the arrays), or opaque (`TSAV`
//! torch archives, anything else); payloads are stored as is or zstd-compressed, optionally
//! protected by Reed-Solomon parity (`rs(16)`, `rs(32)`, `rs(64)`).
//!
//! # Example
//!
//! Write a file in memory, open it, validate it, read an array and a region of it:
//!
//! ```
//! use rasterpack_fold::{ArrayFile, ArrayRequest, FoldBuilder, FoldChunkOptions, FoldFile, NdArray, Region};
//!
//! # fn main() -> rasterpack_fold::Result<()> {
//! let grid = NdArray::from_vec(vec![2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
//! let mut builder = FoldBuilder::new();
//! builder.add_npz("fields", &[("grid", &grid)], FoldChunkOptions::default())?;
//! let bytes = builder.to_bytes()?;
//!
//! let file = FoldFile::from_bytes(bytes)?; // or FoldFile::open("survey.fold")
//! assert!(file.validate().is_valid(true));
//!
//! let arrays = file.arrays()?; // named as `--element` takes them
//! assert_eq!(arrays[0].name.as_deref(), Some("fields/grid"));
//! assert_eq!(arrays[0].shape, vec![2, 3]);
//!
//! let all = file.read(&ArrayRequest::for_element("fields/grid"))?;
//! assert_eq!(all.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
//!
//! let corner = Region::from_start_size(&[1, 1], &[1, 2])?;
//! let part = file.read(&ArrayRequest::for_element("fields/grid").with_region(corner))?;
//! assert_eq!(part.to_vec::<f32>()?, vec![5.0, 6.0]);
//! # Ok(())
//! # }
//! ```
//!
//! # Reading
//!
//! Every read runs the checks that protect the bytes it returns: the chunk's index entry
//! against its header, bounds, CRC32C, SHA-256, `metadata.chunk_hashes`, Reed-Solomon repair
//! (a repaired payload must verify again), the decoded length, and the `.npz` member's local
//! header, extent, size and CRC-32. The chunk's checks pass before any byte reaches the sink;
//! then the member is decoded again, delivering only what the region covers but always to the
//! member's end, so its own CRC-32 is checked on every read, a region read included (numpy
//! refuses a member whose CRC-32 is wrong). A failure there comes after bytes went to the sink:
//! [`ArrayFile::read`] then returns nothing, [`ArrayFile::stream`] may have delivered data
//! before the error. Memory is a working set of a few MiB
//! whatever the array's size (plus the stored payload while ECC repairs a damaged chunk).
//!
//! # Validation
//!
//! [`FoldFile::validate`] (and [`analyze`]) check the six layers of the FOLD spec in order,
//! collecting every finding: structure, limits (index at most 100 MiB, chunks at most 1 GiB),
//! bounds, integrity (with repair), the manifest hash (SHA-256 of the metadata as Python's
//! `json.dumps(sort_keys=True)` writes it), and payload semantics (zstd decodes to exactly
//! `uncomp_len` bytes, JSON chunks parse as Python's `json` module reads them, NPZ0 chunks are
//! readable archives whose members' names, extents, sizes and CRC-32 agree). Chunks stream
//! through the checks; time is linear in the file and memory a fixed working set.
//!
//! # Layers
//!
//! [`raw`] (on-disk structs) -> [`parse`] (header and index, checked) -> [`validate`] (every
//! finding, chunk by chunk) -> [`FoldFile`] and [`FoldFormat`] (reading) and [`mod@write`] /
//! [`FoldBuilder`] (writing).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod ecc;
pub mod element;
mod file;
pub mod jsonstream;
pub mod npz;
pub mod parse;
pub mod pjson;
pub mod raw;
mod read;
mod report;
mod scan;
pub mod validate;
mod work;
pub mod write;
mod writer;

use std::io::Write;

use rasterpack_common::{Format, InspectOptions, Interrupt, Output, ValidateOptions, WriteOptions};

pub use file::FoldFile;
pub use npz::{NpzFile, NpzFormat};
pub use parse::{FoldContainer, FoldEntry, FoldIndex};
pub use rasterpack_common::{
    ArrayFile, ArrayInfo, ArrayRequest, ArraySink, DType, Element, Error, ErrorKind, Finding, Findings, Input, Limits,
    NdArray, Region, Report, Result, Severity,
};
pub use report::ARRAYS_LISTED;
pub use validate::{analyze, FoldAnalysis, FoldAnalyzeOptions, FoldChunkStatus, FoldContent, NPZ_MEMBERS_HELD_MAX};
pub use write::{FoldBuilder, FoldChunkOptions, FoldCompression};
pub use writer::FoldArrayWriter;

// Former names (before the crate-root names became unique across rasterpack's crates).
#[doc(hidden)]
pub use validate::{
    FoldAnalysis as Analysis, FoldAnalyzeOptions as AnalyzeOptions, FoldChunkStatus as ChunkStatus,
    FoldContent as Content,
};
#[doc(hidden)]
pub use write::{FoldChunkOptions as ChunkOptions, FoldCompression as Compression};

/// The FOLD format (`.fold`, `.mind`) behind rasterpack's [`Format`] trait: what the CLI and
/// [`rasterpack_common::open_any`] use. Library users usually want [`FoldFile`].
#[derive(Debug, Clone, Copy, Default)]
pub struct FoldFormat;

impl FoldFormat {
    /// `validate` of an input (what [`FoldFile::validate`] runs).
    pub(crate) fn validate_input(&self, input: &Input, opts: &ValidateOptions) -> Report {
        match analyze(
            input,
            &FoldAnalyzeOptions {
                limits: opts.limits,
                progress: opts.progress.clone(),
                ..Default::default()
            },
        ) {
            Ok(a) => report::build_report(&a, input, false),
            Err(e) => {
                let mut r = Report::new("fold");
                r.fail(&e.in_format("fold"));
                r
            }
        }
    }
}

/// Parse `convert --compress` for FOLD output: `zstd` (default), `none`, optionally
/// `+rs16`/`+rs32`/`+rs64` (e.g. `zstd+rs32`).
fn chunk_options(opts: &WriteOptions) -> Result<FoldChunkOptions> {
    let mut co = FoldChunkOptions::default();
    let Some(spec) = &opts.compress else { return Ok(co) };
    for part in spec.split('+') {
        match part {
            "zstd" => co.compression = FoldCompression::Zstd(3),
            "none" => co.compression = FoldCompression::None,
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
            &FoldAnalyzeOptions {
                limits: opts.limits,
                content: true,
                decoded_sha256: true,
                ..Default::default()
            },
        )?;
        Ok(report::build_report(&a, input, opts.all))
    }

    fn validate(&self, input: &Input, opts: &ValidateOptions) -> Report {
        self.validate_input(input, opts)
    }

    fn read_array(&self, input: &Input, req: &ArrayRequest) -> Result<NdArray> {
        rasterpack_common::read_by_streaming(self, input, req)
    }

    fn stream_array(&self, input: &Input, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        let file = FoldFile::from_input(input.clone(), req.limits)?;
        file.stream(req, sink)
    }

    fn write_array(&self, array: &NdArray, opts: &WriteOptions, out: &mut dyn Write) -> Result<()> {
        let mut b = FoldBuilder::new();
        let name = array
            .name
            .clone()
            .filter(|n| write::check_array_name(n).is_ok() && !n.contains('/'))
            .unwrap_or_else(|| "arr_0".into());
        b.metadata(
            "writer",
            pjson::Value::str(concat!("rasterpack ", env!("CARGO_PKG_VERSION"))),
        )?;
        if !array.attrs.is_empty() {
            b.metadata(
                "source_attrs",
                pjson::Value::from_serde(&serde_json::Value::Object(array.attrs.clone())),
            )?;
        }
        b.add_npz(writer::ARRAY_CHUNK, &[(&name, array)], chunk_options(opts)?)?;
        b.write_to(out)?;
        for note in &b.notes {
            eprintln!("rasterpack: note: {note}");
        }
        Ok(())
    }

    /// The named arrays in one NPZ chunk (as [`Format::write_array`] writes one), each
    /// name a valid NPZ member name without `/` (readers name an array `CHUNK/ARRAY`), and
    /// `metadata` as members of the index's metadata (after rasterpack's `writer`, which a
    /// `writer` key replaces).
    fn write_arrays(
        &self,
        arrays: &[NdArray],
        metadata: &serde_json::Map<String, serde_json::Value>,
        opts: &WriteOptions,
        out: &mut dyn Write,
    ) -> Result<()> {
        if arrays.is_empty() {
            return Err(Error::usage("a FOLD file written from arrays needs at least one array"));
        }
        let mut named = Vec::with_capacity(arrays.len());
        for a in arrays {
            let name = a
                .name
                .as_deref()
                .ok_or_else(|| Error::usage("every array of a FOLD file needs a name"))?;
            write::check_array_name(name)?;
            if name.contains('/') {
                return Err(Error::usage(format!(
                    "array name {name:?} contains '/' (readers name an array CHUNK/ARRAY)"
                )));
            }
            named.push((name, a));
        }
        let mut b = FoldBuilder::new();
        b.metadata(
            "writer",
            pjson::Value::str(concat!("rasterpack ", env!("CARGO_PKG_VERSION"))),
        )?;
        for (key, value) in metadata {
            b.metadata(key, pjson::Value::from_serde(value))?;
        }
        b.add_npz(writer::ARRAY_CHUNK, &named, chunk_options(opts)?)?;
        b.write_to(out)?;
        for note in &b.notes {
            eprintln!("rasterpack: note: {note}");
        }
        Ok(())
    }

    fn array_writer<'a>(&'a self, opts: &WriteOptions, out: Output<'a>) -> Result<Box<dyn ArraySink + 'a>> {
        Ok(Box::new(FoldArrayWriter::new(out, chunk_options(opts)?, opts.limits)))
    }

    fn open(&self, input: Input, limits: Limits) -> Result<Box<dyn ArrayFile>> {
        Ok(Box::new(FoldFile::from_input(input, limits)?))
    }

    fn convert_special(
        &self,
        input: &Input,
        target: &dyn Format,
        _req: &ArrayRequest,
        opts: &WriteOptions,
        interrupt: Option<&Interrupt>,
        out: &mut dyn Write,
    ) -> Option<Result<()>> {
        if target.name() != "fold" {
            return None;
        }
        Some(repair_copy_with(input, &opts.limits, interrupt.cloned(), out))
    }
}

/// FOLD -> FOLD: copy the file with every ECC-repairable chunk repaired in place. Refuses
/// files that are invalid for any other reason.
pub fn repair_copy(input: &Input, limits: &Limits, out: &mut dyn Write) -> Result<()> {
    repair_copy_with(input, limits, None, out)
}

/// [`repair_copy`], asking `interrupt` whether to go on (Ctrl-C) between chunks and every few
/// MiB of the work on one (hashing, Reed-Solomon repair, parity) and of the copy: an `Err`
/// stops it with that error, `out` then incomplete (the caller removes it).
pub fn repair_copy_with(
    input: &Input,
    limits: &Limits,
    interrupt: Option<Interrupt>,
    out: &mut dyn Write,
) -> Result<()> {
    let opts = FoldAnalyzeOptions {
        limits: *limits,
        content: false,
        keep_repairs: true,
        interrupt,
        ..Default::default()
    };
    let a = analyze(input, &opts)?;
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
            opts.poll()?;
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

/// The README's examples, compiled as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
