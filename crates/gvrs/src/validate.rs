//! Every rule of GVRS 1.4 (as the files Gridfour writes follow it; `docs/formats/gvrs.md`), checked
//! and reported as findings with stable codes `gvrs.<area>.<rule>` and byte offsets. Validation
//! never stops at the first problem. Tiles are streamed (read, checked, decoded, dropped) in
//! parallel batches, so peak memory stays bounded whatever the grid size.
//!
//! The corpus sidecars' `error_code` values correspond to the last code segment, upper-cased
//! (`gvrs.header.opened_for_writing` <-> `OPENED_FOR_WRITING`, `gvrs.tile.crc_mismatch` <->
//! `CRC_MISMATCH`); see [`sidecar_code`].

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use rasterpack_common::{ErrorKind, Finding, Findings, Input, Limits, Report, Severity, ValidateOptions};
use rayon::prelude::*;
use serde_json::json;

use crate::model::GvrsFile;
use crate::parse;
use crate::raw::*;

/// Tiles validated per parallel batch (bounds memory: at most this many small results pending).
const TILE_BATCH: usize = 256;

/// The corpus sidecar code a finding code corresponds to (its last segment, upper-cased).
pub fn sidecar_code(code: &str) -> String {
    code.rsplit('.').next().unwrap_or(code).to_ascii_uppercase()
}

/// GVRS identifier syntax: ASCII letter first, then letters, digits, underscores; 1..=max chars.
pub fn is_identifier(bytes: &[u8], max: usize) -> bool {
    !bytes.is_empty()
        && bytes.len() <= max
        && bytes[0].is_ascii_alphabetic()
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// One stretch of the file a record occupies, for overlap and gap checks.
#[derive(Debug, Clone)]
struct Extent {
    start: u64,
    end: u64,
    what: Cow<'static, str>,
}

struct Ctx {
    f: Findings,
    checksums: bool,
    extents: Vec<Extent>,
    unsupported: BTreeMap<String, (u64, Option<u64>, String)>,
}

impl Ctx {
    fn err(&mut self, code: impl Into<String>, at: Option<u64>, msg: impl Into<String>) {
        self.f.error(code, at, msg)
    }
    fn warn(&mut self, code: impl Into<String>, at: Option<u64>, msg: impl Into<String>) {
        self.f.warning(code, at, msg)
    }
    fn error(&mut self, e: &rasterpack_common::Error) {
        if e.kind == ErrorKind::Unsupported {
            let entry = self
                .unsupported
                .entry(e.code.to_string())
                .or_insert((0, e.offset, e.message.clone()));
            entry.0 += 1;
        } else {
            let mut e = e.clone();
            if !e.code.contains('.') {
                e = e.in_format("gvrs");
            }
            self.f.push_error(&e);
        }
    }
}

/// Generic record rules: start and length multiples of 8, reserved bytes zero, CRC.
fn check_record(ctx: &mut Ctx, rec: &RecordHeader, bytes: &[u8], area: &str, crc_len: Option<usize>) {
    if !rec.start.is_multiple_of(8) {
        ctx.err(
            format!("gvrs.{area}.misaligned"),
            Some(rec.start),
            format!("record starts at {}, not a multiple of 8", rec.start),
        );
    }
    if rec.length % 8 != 0 {
        ctx.err(
            format!("gvrs.{area}.length"),
            Some(rec.start),
            format!("record length {} is not a multiple of 8", rec.length),
        );
    }
    if rec.reserved != [0; 3] {
        ctx.warn(
            format!("gvrs.{area}.reserved_nonzero"),
            Some(rec.start + 5),
            "reserved record bytes are not zero",
        );
    }
    if bytes.len() < 12 {
        return;
    }
    let n = bytes.len();
    let stored = u32::from_le_bytes([bytes[n - 4], bytes[n - 3], bytes[n - 2], bytes[n - 1]]);
    let at = rec.start + n as u64 - 4;
    if ctx.checksums {
        let covered = crc_len.unwrap_or(n - 4).min(n - 4);
        let computed = crc32c::crc32c(&bytes[..covered]);
        if stored != computed {
            ctx.err(
                format!("gvrs.{area}.crc_mismatch"),
                Some(at),
                format!(
                    "CRC32C of the record at {} is 0x{computed:08x}, stored 0x{stored:08x}",
                    rec.start
                ),
            );
        }
    } else if stored != 0 {
        ctx.warn(
            format!("gvrs.{area}.crc_nonzero"),
            Some(at),
            "checksums are off but the CRC field is not zero",
        );
    }
}

fn check_zero(ctx: &mut Ctx, code: &str, (at, bytes): &(u64, Vec<u8>), what: &str) {
    if let Some(i) = bytes.iter().position(|&b| b != 0) {
        ctx.warn(
            code.to_string(),
            Some(at + i as u64),
            format!("{what} holds non-zero bytes"),
        );
    }
}

/// Record tail after the parsed content: zero padding only, shorter than 8 bytes (`extra`
/// tolerated bytes beyond that for records Gridfour sizes generously).
fn check_tail(ctx: &mut Ctx, area: &str, tail: &(u64, Vec<u8>), extra: usize) {
    check_zero(ctx, &format!("gvrs.{area}.padding_nonzero"), tail, "record padding");
    if tail.1.len() > 7 + extra {
        ctx.warn(
            format!("gvrs.{area}.excess_length"),
            Some(tail.0),
            format!("{} unused bytes before the CRC (padding is at most 7)", tail.1.len()),
        );
    }
}

fn check_text(ctx: &mut Ctx, area: &str, s: &RawString, what: &str) {
    if !s.is_utf8() {
        ctx.err(
            format!("gvrs.{area}.utf8"),
            Some(s.offset),
            format!("{what} is not valid UTF-8"),
        );
    }
}

fn check_ident(ctx: &mut Ctx, area: &str, s: &RawString, what: &str) {
    if !is_identifier(&s.bytes, 32) {
        ctx.err(
            format!("gvrs.{area}.identifier"),
            Some(s.offset),
            format!(
                "{what} {:?} is not a GVRS identifier (ASCII letter, then letters, digits, '_'; at most 32)",
                s.lossy()
            ),
        );
    }
}

/// Validate a GVRS input completely: every finding, never stopping at the first. Tiles are
/// read, checked and decoded as they stream, at most a working set's worth at once
/// ([`Limits::working_set`]), and `opts.report_progress` hears how many bytes of tile records
/// are checked.
pub fn validate(input: &Input, opts: &ValidateOptions) -> Report {
    let mut report = Report::new("gvrs");
    let mut ctx = Ctx {
        f: Findings::new(),
        checksums: false,
        extents: Vec::new(),
        unsupported: BTreeMap::new(),
    };
    run(input, opts, &mut ctx, &mut report);
    for (code, (count, at, msg)) in std::mem::take(&mut ctx.unsupported) {
        report.unsupported = true;
        let msg = if count > 1 {
            format!("{msg} ({count} blocks)")
        } else {
            msg
        };
        ctx.f.info(code, at, msg);
    }
    report.findings = ctx.f;
    opts.report_progress(input.len(), input.len());
    report
}

fn run(input: &Input, opts: &ValidateOptions, ctx: &mut Ctx, report: &mut Report) {
    let limits = &opts.limits;
    let header = match parse::read_header(input, limits) {
        Ok(h) => h,
        Err(e) => {
            if e.kind == ErrorKind::Unsupported {
                report.fail(&e);
            } else {
                ctx.error(&e);
            }
            return;
        }
    };
    if header.version_major != 1 || !(2..=4).contains(&header.version_minor) {
        report.fail(&rasterpack_common::Error::unsupported(
            "gvrs.id.version",
            Some(12),
            format!(
                "GVRS version {}.{} (rasterpack reads 1.2 to 1.4)",
                header.version_major, header.version_minor
            ),
        ));
        return;
    }
    if header.id_reserved != [0, 0] {
        ctx.warn(
            "gvrs.id.reserved_nonzero",
            Some(14),
            "reserved identification bytes are not zero",
        );
    }
    ctx.checksums = header.checksums != 0;
    check_header(ctx, input, &header, limits);
    // The model re-reads what it needs; opening never refuses an opened-for-writing file or a
    // damaged directory, so their structure still gets checked.
    let file = match GvrsFile::from_input(input.clone(), *limits) {
        Ok(f) => f,
        Err(e) => {
            ctx.error(&e);
            return;
        }
    };
    summarize(&file, report);
    let tiles = check_tile_directory(ctx, &file);
    report.summary.insert("populated_tiles".into(), json!(tiles.len()));
    check_tiles(ctx, &file, tiles, opts);
    let java_codecs = check_metadata(ctx, &file);
    check_codec_compat(ctx, &file, java_codecs.as_deref());
    check_file_space(ctx, &file);
    check_extents(ctx, input.len());
}

/// The facts `validate` reports besides its findings (the keys `inspect` uses for them).
fn summarize(file: &GvrsFile, report: &mut Report) {
    report.summary.insert("rows".into(), json!(file.geometry.rows));
    report.summary.insert("cols".into(), json!(file.geometry.cols));
    report
        .summary
        .insert("arrays".into(), crate::inspect::arrays_summary(file));
    report.summary.insert(
        "elements".into(),
        serde_json::Value::Array(file.elements.iter().enumerate().map(|(i, e)| e.to_json(i)).collect()),
    );
    report.summary.insert(
        "codecs".into(),
        json!(file.header.codecs.iter().map(|c| c.lossy()).collect::<Vec<_>>()),
    );
}

/// Every rule of the header record, by group.
fn check_header(ctx: &mut Ctx, input: &Input, h: &Header, limits: &Limits) {
    ctx.extents.push(Extent {
        start: 16,
        end: 16 + h.record.length as u64,
        what: "header record".into(),
    });
    check_header_record(ctx, input, h, limits);
    check_header_fields(ctx, h);
    check_grid(ctx, h);
    if h.elements.is_empty() {
        ctx.err("gvrs.header.element_count", Some(280), "the file declares no elements");
    }
    let mut names: HashMap<&[u8], u64> = HashMap::new();
    for e in &h.elements {
        if names.insert(&e.name.bytes, e.offset).is_some() {
            ctx.err(
                "gvrs.element.duplicate_name",
                Some(e.name.offset),
                format!("element name {:?} is used twice", e.name.lossy()),
            );
        }
        check_element(ctx, e);
    }
    check_codec_names(ctx, h);
    check_header_tail(ctx, h);
}

/// The record framing: type, length, reserved bytes, CRC, and the flags that say whether the
/// file was closed and carries checksums.
fn check_header_record(ctx: &mut Ctx, input: &Input, h: &Header, limits: &Limits) {
    if h.record.record_type != RecordType::Header as u8 {
        ctx.err(
            "gvrs.header.record_type",
            Some(20),
            format!("header record type is {}, expected 6", h.record.record_type),
        );
    }
    if h.record.length % 8 != 0 {
        ctx.err(
            "gvrs.header.length",
            Some(16),
            format!("header record length {} is not a multiple of 8", h.record.length),
        );
    }
    if h.record.reserved != [0; 3] {
        ctx.warn(
            "gvrs.header.reserved_nonzero",
            Some(21),
            "reserved record bytes are not zero",
        );
    }
    if h.time_opened_for_writing != 0 {
        ctx.err(
            "gvrs.header.opened_for_writing",
            Some(48),
            format!(
                "time opened for writing is {} (not 0): the writer never closed the file, so its directories and content are incomplete",
                h.time_opened_for_writing
            ),
        );
    }
    if h.checksums > 1 {
        ctx.warn(
            "gvrs.header.flag_value",
            Some(128),
            format!("checksum flag is {}, expected 0 or 1", h.checksums),
        );
    }
    // CRC over [16, 16 + length - 4). A file never closed has a zero or stale header CRC: the
    // opened-for-writing finding already says so.
    if h.time_opened_for_writing != 0 {
        return;
    }
    let Ok(bytes) = input.read_vec(16, h.record.length as u64, "header record", limits) else {
        return;
    };
    let rec = RecordHeader { start: 16, ..h.record };
    // The header's start is fixed (16) and its framing checked above: only the CRC here.
    let mut tmp = Ctx {
        f: Findings::new(),
        checksums: ctx.checksums,
        extents: Vec::new(),
        unsupported: BTreeMap::new(),
    };
    check_record(&mut tmp, &rec, &bytes, "header", None);
    for f in tmp.f.into_vec() {
        if f.code.ends_with("crc_mismatch") || f.code.ends_with("crc_nonzero") {
            ctx.f.add(f);
        }
    }
}

/// Levels, reserved fields and the raster-space and coordinate-system codes.
fn check_header_fields(ctx: &mut Ctx, h: &Header) {
    if h.levels != 1 {
        ctx.warn(
            "gvrs.header.levels",
            Some(72),
            format!("number of levels is {} (Gridfour writes 1)", h.levels),
        );
    }
    for (at, bytes) in [
        (74u64, &h.reserved_74[..]),
        (88, &h.reserved_88[..]),
        (120, &h.reserved_120[..]),
        (131, &h.reserved_131[..]),
    ] {
        check_zero(
            ctx,
            "gvrs.header.reserved_nonzero",
            &(at, bytes.to_vec()),
            "reserved header field",
        );
    }
    if h.raster_space > 2 {
        ctx.warn(
            "gvrs.header.raster_space",
            Some(129),
            format!("unknown raster space code {}", h.raster_space),
        );
    }
    if h.coordinate_system > 2 {
        ctx.warn(
            "gvrs.header.coordinate_system",
            Some(130),
            format!("unknown coordinate system code {}", h.coordinate_system),
        );
    }
}

/// Grid and tile sizes.
fn check_grid(ctx: &mut Ctx, h: &Header) {
    for (v, what, at) in [
        (h.rows, "rows", 104u64),
        (h.cols, "columns", 108),
        (h.tile_rows, "tile rows", 112),
        (h.tile_cols, "tile columns", 116),
    ] {
        if v < 1 {
            ctx.err(
                "gvrs.header.grid_size",
                Some(at),
                format!("number of {what} is {v}; it must be at least 1"),
            );
        }
    }
    if h.tile_rows > 0 && h.tile_cols > 0 && (h.tile_rows as u64 * h.tile_cols as u64) > (1 << 28) {
        ctx.err(
            "gvrs.header.grid_size",
            Some(112),
            "a tile of more than 2^28 cells is refused",
        );
    }
}

/// One element specification: its name, flags, padding, texts and value range.
fn check_element(ctx: &mut Ctx, e: &ElementSpec) {
    check_ident(ctx, "element", &e.name, "element name");
    if e.continuous > 1 {
        ctx.warn(
            "gvrs.element.flag_value",
            Some(e.offset + 1),
            format!("continuous flag is {}, expected 0 or 1", e.continuous),
        );
    }
    check_zero(
        ctx,
        "gvrs.element.reserved_nonzero",
        &(e.offset + 2, e.reserved.to_vec()),
        "reserved element bytes",
    );
    check_zero(
        ctx,
        "gvrs.element.padding_nonzero",
        &e.pad_before_range,
        "element padding",
    );
    check_zero(ctx, "gvrs.element.padding_nonzero", &e.pad_after, "element padding");
    for (s, what) in [
        (&e.label, "element label"),
        (&e.description, "element description"),
        (&e.unit, "element unit"),
    ] {
        check_text(ctx, "element", s, what);
    }
    check_element_range(ctx, e);
}

/// Minimum not above maximum; an integer-coded float's scale and offset usable.
fn check_element_range(ctx: &mut Ctx, e: &ElementSpec) {
    let bad_range = match e.range {
        ElementRange::Integer { min, max, .. } => min > max,
        ElementRange::Short { min, max, .. } => min > max,
        ElementRange::Float { min, max, .. } => min > max,
        ElementRange::IntCodedFloat {
            min,
            max,
            scale,
            offset,
            min_int,
            max_int,
            ..
        } => {
            if !(scale.is_finite() && scale != 0.0 && offset.is_finite()) {
                ctx.err(
                    "gvrs.element.scale",
                    Some(e.range_offset + 12),
                    format!("integer-coded float scale {scale} / offset {offset} must be finite, scale non-zero"),
                );
            }
            min > max || min_int > max_int
        }
    };
    if bad_range {
        ctx.warn(
            "gvrs.element.range",
            Some(e.range_offset),
            "element minimum exceeds its maximum",
        );
    }
}

/// Codec names: identifiers, and whether rasterpack implements them.
fn check_codec_names(ctx: &mut Ctx, h: &Header) {
    for c in &h.codecs {
        check_ident(ctx, "header", c, "codec name");
        if crate::codec::Codec::from_name(&c.lossy()).is_none() {
            ctx.f.info(
                "gvrs.header.codec_unknown",
                Some(c.offset),
                format!(
                    "codec {:?} is not implemented by rasterpack: tiles using it cannot be decoded",
                    c.lossy()
                ),
            );
        }
    }
}

/// The product label and what follows it: 8 reserved bytes, then padding.
fn check_header_tail(ctx: &mut Ctx, h: &Header) {
    check_text(ctx, "header", &h.product_label, "product label");
    if h.tail.1.len() < 8 {
        ctx.err(
            "gvrs.header.tail",
            Some(h.tail.0),
            format!(
                "header ends {} byte(s) after the product label; 8 reserved bytes are required",
                h.tail.1.len()
            ),
        );
    }
    check_tail(ctx, "header", &h.tail, 8);
}

/// Check the tile directory; return the stored tiles (tile index, content offset, entry offset).
fn check_tile_directory(ctx: &mut Ctx, file: &GvrsFile) -> Vec<(u64, i64, u64)> {
    let mut out = Vec::new();
    let Some(d) = &file.tile_directory else {
        // Unreadable or missing (a file opened for writing may have none yet).
        if let Some(e) = &file.tile_directory_error {
            ctx.error(e);
        }
        return out;
    };
    // A directory that parsed but failed a read check (CRC, format, window) is still examined
    // here: the checks below report those problems themselves.
    // Re-read the record bytes for CRC (bounded: it was read once already at open).
    if let Ok(bytes) = file
        .input()
        .read_vec(d.record.start, d.record.length as u64, "tile directory", file.limits())
    {
        check_record(ctx, &d.record, &bytes, "tile_directory", None);
    }
    ctx.extents.push(Extent {
        start: d.record.start,
        end: d.record.start + d.record.length as u64,
        what: "tile directory".into(),
    });
    if d.format != 0 {
        ctx.err(
            "gvrs.tile_directory.format",
            Some(d.record.start + 8),
            format!("tile directory format {} (only 0 is defined)", d.format),
        );
    }
    if d.standard_references > 1 {
        ctx.warn(
            "gvrs.tile_directory.flag_value",
            Some(d.record.start + 9),
            "standard-references flag is neither 0 nor 1",
        );
    }
    check_zero(
        ctx,
        "gvrs.tile_directory.reserved_nonzero",
        &(d.record.start + 10, d.reserved.to_vec()),
        "reserved directory bytes",
    );
    let g = file.geometry;
    let inside = d.row0 >= 0
        && d.col0 >= 0
        && d.row0 as i64 + d.n_rows as i64 <= g.grid_rows as i64
        && d.col0 as i64 + d.n_cols as i64 <= g.grid_cols as i64;
    if !inside {
        ctx.err(
            "gvrs.tile_directory.bounds",
            Some(d.record.start + 16),
            format!(
                "directory covers tile rows {}..+{} and columns {}..+{}, outside the {} x {} tile grid",
                d.row0, d.n_rows, d.col0, d.n_cols, g.grid_rows, g.grid_cols
            ),
        );
    }
    check_tail(ctx, "tile_directory", &d.tail, 0);
    let esize = d.entry_size();
    for (k, &v) in d.entries.iter().enumerate() {
        if v == 0 {
            continue;
        }
        let at = d.entries_offset + k as u64 * esize;
        if v < 8 || v as u64 > file.input().len() {
            ctx.err(
                "gvrs.tile_directory.entry_outside_file",
                Some(at),
                format!("tile reference {v} points outside the file"),
            );
            continue;
        }
        if inside {
            let tr = d.row0 as u64 + k as u64 / d.n_cols as u64;
            let tc = d.col0 as u64 + k as u64 % d.n_cols as u64;
            out.push((tr * g.grid_cols as u64 + tc, v, at));
        }
    }
    out
}

#[derive(Default)]
struct TileResult {
    findings: Vec<Finding>,
    errors: Vec<rasterpack_common::Error>,
    extent: Option<(u64, u64)>,
    /// Per element: grid cells of compressed Short blocks holding Gridfour's null (`i32::MIN`).
    short_nulls: Vec<u64>,
}

fn check_one_tile(file: &GvrsFile, checksums: bool, tile: u64, off: i64, entry_at: u64) -> TileResult {
    let mut res = TileResult::default();
    let (tr, bytes) = match file.read_tile_record(off) {
        Ok(t) => t,
        Err(e) => {
            let mut e = e;
            if e.kind != ErrorKind::Unsupported {
                e.message = format!("tile {tile} (directory entry at {entry_at}): {}", e.message);
            }
            // Still claim the bytes the prefix says, for overlap checks.
            if let Ok(rec) = parse::read_record_header(file.input(), off as u64 - 8) {
                if rec.length > 0 && rec.record_type == RecordType::Tile as u8 {
                    res.extent = Some((
                        rec.start,
                        rec.start.saturating_add(rec.length as u64).min(file.input().len()),
                    ));
                }
            }
            res.errors.push(e);
            return res;
        }
    };
    let rec = tr.record;
    res.extent = Some((rec.start, rec.start + rec.length as u64));
    let mut ctx = Ctx {
        f: Findings::new(),
        checksums,
        extents: Vec::new(),
        unsupported: BTreeMap::new(),
    };
    check_record(&mut ctx, &rec, &bytes, "tile", None);
    if tr.tile_index as i64 != tile as i64 {
        ctx.err(
            "gvrs.tile.index_mismatch",
            Some(rec.start + 8),
            format!(
                "tile record holds tile index {}, but the directory places it at tile {tile}",
                tr.tile_index
            ),
        );
    }
    let body_end = bytes.len() - 4;
    let tail = (
        rec.start + tr.blocks_end as u64,
        bytes[tr.blocks_end.min(body_end)..body_end].to_vec(),
    );
    check_tail(&mut ctx, "tile", &tail, 0);
    let cells = file.geometry.cells_per_tile();
    for (e, &(rel, n)) in tr.blocks.iter().enumerate() {
        let at = rec.start + rel as u64;
        let block = &bytes[rel..rel + n];
        let el = &file.elements[e];
        if el.spec.element_type == ElementType::Short
            && n as u64 == el.spec.element_type.uncompressed_len(cells).unwrap_or(0)
        {
            let pad = &block[(cells as usize * 2).min(n)..];
            if pad.iter().any(|&b| b != 0) {
                ctx.warn(
                    "gvrs.tile.padding_nonzero",
                    Some(at + cells * 2),
                    "padding after an odd count of Short values is not zero",
                );
            }
        }
        let mut plane = crate::GvrsPlane::Int(Vec::new());
        // Only cells of the grid count: an edge tile's cells beyond it are never read.
        let inside = file.geometry.tile_cells_in_grid(tile);
        match file.decode_block_counting_in(e, block, at, &mut plane, inside) {
            Ok(nulls) => {
                res.short_nulls.resize(tr.blocks.len(), 0);
                res.short_nulls[e] += nulls;
            }
            Err(err) => {
                let mut err = err;
                if err.kind != ErrorKind::Unsupported {
                    err.message = format!("tile {tile}, element {:?}: {}", el.name(), err.message);
                }
                ctx.error(&err);
            }
        }
    }
    for (code, (count, at, msg)) in ctx.unsupported {
        for _ in 0..count {
            res.errors
                .push(rasterpack_common::Error::unsupported(code.clone(), at, msg.clone()));
        }
    }
    res.findings = ctx.f.into_vec();
    res
}

/// How many tiles may be checked at once: each holds its record and its decoded cells, and
/// together they stay within half the working set (at least one, at most one per thread).
fn tile_decoders(file: &GvrsFile, limits: &Limits) -> usize {
    let per_tile = file
        .max_tile_record_len()
        .saturating_add(file.geometry.cells_per_tile().saturating_mul(4));
    let fit = (limits.working_set / 2 / per_tile.max(1)).max(1);
    (rayon::current_num_threads() as u64).min(fit).max(1) as usize
}

/// Check every stored tile once (two directory entries naming one record are an error), in
/// file order, in batches decoded in parallel by at most as many decoders as the working set
/// holds; progress is reported in bytes of tile records checked.
fn check_tiles(ctx: &mut Ctx, file: &GvrsFile, mut tiles: Vec<(u64, i64, u64)>, opts: &ValidateOptions) {
    tiles.sort_unstable_by_key(|&(tile, off, _)| (off, tile));
    let mut previous: Option<(u64, i64)> = None;
    tiles.retain(|&(tile, off, at)| {
        if let Some((first, prev_off)) = previous {
            if prev_off == off {
                ctx.err(
                    "gvrs.tile_directory.duplicate_reference",
                    Some(at),
                    format!("tiles {first} and {tile} point at the same record (content offset {off})"),
                );
                return false;
            }
        }
        previous = Some((tile, off));
        true
    });
    let checksums = ctx.checksums;
    let decoders = tile_decoders(file, &opts.limits);
    let total = file.input().len();
    let mut done = 0u64;
    let mut short_nulls = vec![0u64; file.elements.len()];
    for batch in tiles.chunks(TILE_BATCH) {
        let check = |&(tile, off, at): &(u64, i64, u64)| check_one_tile(file, checksums, tile, off, at);
        let results: Vec<TileResult> = if decoders >= rayon::current_num_threads() {
            batch.par_iter().map(check).collect()
        } else {
            // Large tiles: fewer decoders than threads, each taking its share of the batch.
            batch
                .par_chunks(batch.len().div_ceil(decoders))
                .flat_map_iter(|share| share.iter().map(check).collect::<Vec<_>>())
                .collect()
        };
        for r in results {
            for (n, k) in short_nulls.iter_mut().zip(&r.short_nulls) {
                *n += k;
            }
            ctx.f.extend(r.findings.into());
            for e in &r.errors {
                ctx.error(e);
            }
            if let Some((s, e)) = r.extent {
                done = done.saturating_add(e - s);
                ctx.extents.push(Extent {
                    start: s,
                    end: e,
                    what: "tile record".into(),
                });
            }
        }
        opts.report_progress(done.min(total), total);
    }
    // Gridfour 2026 codes a Short element's fill cells as its null (i32::MIN) in compressed
    // blocks and reads them back as -32768, whatever the element's fill; e2e5824 reads them as 0.
    for (e, &n) in short_nulls.iter().enumerate() {
        if n == 0 {
            continue;
        }
        let el = &file.elements[e];
        let ElementRange::Short { fill, .. } = el.spec.range else {
            continue;
        };
        if fill == i16::MIN {
            ctx.f.info(
                "gvrs.compat.short_null_code",
                None,
                format!(
                    "element {:?}: {n} grid cell(s) of compressed Short blocks hold Gridfour 2026's null code; \
                     they read as the fill -32768 (Gridfour e2e5824 reads them as 0)",
                    el.name()
                ),
            );
        } else {
            ctx.warn(
                "gvrs.compat.short_null_fill",
                Some(el.spec.range_offset + 4),
                format!(
                    "element {:?}: {n} grid cell(s) of compressed Short blocks hold Gridfour 2026's null code; \
                     they read as -32768, as Gridfour 2026 reads them, not as the element's fill {fill} \
                     (the writer probably meant the fill)",
                    el.name()
                ),
            );
        }
    }
}

/// Check the metadata directory and records; returns the content of Gridfour's
/// `GvrsJavaCodecs` record (id 0), when there is one.
fn check_metadata(ctx: &mut Ctx, file: &GvrsFile) -> Option<String> {
    let mut java_codecs = None;
    let dir = match file.metadata_directory_unverified() {
        Ok(Some(d)) => d,
        Ok(None) => return None,
        Err(e) => {
            ctx.error(&e);
            return None;
        }
    };
    if let Ok(bytes) = file.input().read_vec(
        dir.record.start,
        dir.record.length as u64,
        "metadata directory",
        file.limits(),
    ) {
        check_record(ctx, &dir.record, &bytes, "metadata_directory", None);
    }
    ctx.extents.push(Extent {
        start: dir.record.start,
        end: dir.record.start + dir.record.length as u64,
        what: "metadata directory".into(),
    });
    check_tail(ctx, "metadata_directory", &dir.tail, 0);
    let mut keys: HashMap<(Vec<u8>, i32), u64> = HashMap::new();
    for e in &dir.entries {
        check_ident(ctx, "metadata", &e.name, "metadata name");
        if e.data_type > 9 {
            ctx.err(
                "gvrs.metadata.data_type",
                Some(e.name.offset + 2 + e.name.bytes.len() as u64 + 4),
                format!("unknown metadata type {}", e.data_type),
            );
        }
        if keys.insert((e.name.bytes.clone(), e.record_id), e.offset).is_some() {
            ctx.err(
                "gvrs.metadata.duplicate_key",
                Some(e.offset),
                format!(
                    "metadata {:?} record id {} is listed twice",
                    e.name.lossy(),
                    e.record_id
                ),
            );
        }
        let rec = match file.read_metadata_record_unverified(e.content_offset, e.offset) {
            Ok(r) => r,
            Err(err) => {
                let mut err = err;
                err.message = format!("metadata {:?} id {}: {}", e.name.lossy(), e.record_id, err.message);
                ctx.error(&err);
                continue;
            }
        };
        let start = rec.record.start;
        if let Ok(bytes) = file
            .input()
            .read_vec(start, rec.record.length as u64, "metadata record", file.limits())
        {
            check_record(ctx, &rec.record, &bytes, "metadata", None);
        }
        ctx.extents.push(Extent {
            start,
            end: start + rec.record.length as u64,
            what: format!("metadata record {:?}", rec.name.lossy()).into(),
        });
        if rec.name.bytes != e.name.bytes || rec.record_id != e.record_id || rec.data_type != e.data_type {
            ctx.err(
                "gvrs.metadata.directory_mismatch",
                Some(start + 8),
                format!(
                    "metadata record ({:?}, id {}, type {}) differs from its directory entry ({:?}, id {}, type {})",
                    rec.name.lossy(),
                    rec.record_id,
                    rec.data_type,
                    e.name.lossy(),
                    e.record_id,
                    e.data_type
                ),
            );
        }
        check_zero(
            ctx,
            "gvrs.metadata.reserved_nonzero",
            &(
                rec.name.offset + 2 + rec.name.bytes.len() as u64 + 5,
                rec.reserved.to_vec(),
            ),
            "reserved metadata bytes",
        );
        if rec.description_truncated {
            ctx.warn(
                "gvrs.metadata.description_truncated",
                Some(rec.description.offset),
                "the description runs into the CRC (Gridfour sizes records with empty content 4 bytes short)",
            );
        } else {
            check_text(ctx, "metadata", &rec.description, "metadata description");
            check_tail(ctx, "metadata", &rec.tail, 0);
        }
        check_content(ctx, &rec);
        if rec.name.bytes == b"GvrsJavaCodecs" && rec.record_id == 0 {
            java_codecs = Some(crate::model::metadata_text(&rec.content).unwrap_or_default());
        }
    }
    java_codecs
}

/// Gridfour's default codec lists: e2e5824 (the 1.4 corpus) and master (2026).
const GRIDFOUR_DEFAULTS: [(&str, &[&str]); 2] = [
    ("e2e5824", &["GvrsHuffman", "GvrsDeflate", "GvrsFloat"]),
    (
        "2026",
        &["GvrsHuffman", "GvrsDeflate", "GvrsFloat", "GvrsCanonicalHuffman"],
    ),
];

/// Compatibility with Gridfour's reader (a warning, `gvrs.compat.codec_list`): Gridfour
/// resolves the header's codec names through the `GvrsJavaCodecs` record when the file has one,
/// and otherwise maps each tile's codec index through its *own* default list; a name neither
/// the record nor its defaults know is dropped, which shifts the later indexes. A file whose
/// list Gridfour would map differently is misread (or crashes) there.
fn check_codec_compat(ctx: &mut Ctx, file: &GvrsFile, java_codecs: Option<&str>) {
    let names: Vec<String> = file.header.codecs.iter().map(|c| c.lossy()).collect();
    if names.is_empty() {
        return;
    }
    // Codec names listed by the record (first field of each line).
    let listed: Option<Vec<String>> = java_codecs.map(|t| {
        t.lines()
            .filter_map(|l| l.split(',').next())
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty())
            .collect()
    });
    for (version, defaults) in GRIDFOUR_DEFAULTS {
        let effective: Vec<String> = match &listed {
            None => defaults.iter().map(|d| d.to_string()).collect(),
            Some(l) => names
                .iter()
                .filter(|n| l.contains(n) || defaults.contains(&n.as_str()))
                .cloned()
                .collect(),
        };
        let Some(i) = (0..names.len()).find(|&i| effective.get(i) != Some(&names[i])) else {
            continue;
        };
        let seen = effective
            .get(i)
            .map_or("no codec (an error)".to_string(), |n| n.clone());
        let why = if listed.is_none() {
            "the file has no GvrsJavaCodecs record, so it maps codec indexes through its own default list"
        } else {
            "the GvrsJavaCodecs record does not name every codec, so it drops the others and shifts the indexes"
        };
        ctx.warn(
            "gvrs.compat.codec_list",
            Some(file.header.codec_count_offset),
            format!(
                "Gridfour {version} would read tiles of codec index {i} ({}) as {seen}: {why} ({})",
                names[i],
                defaults.join(", ")
            ),
        );
        return;
    }
}

/// Content layout per type (Gridfour's).
fn check_content(ctx: &mut Ctx, rec: &MetadataRecord) {
    let n = rec.content.len();
    let at = Some(rec.content_offset);
    let unit = match rec.data_type {
        2..=6 => 4,
        7 => 8,
        _ => 1,
    };
    if !n.is_multiple_of(unit) {
        ctx.warn(
            "gvrs.metadata.content_layout",
            at,
            format!(
                "{} content of {n} bytes is not a multiple of {unit}",
                metadata_type_name(rec.data_type)
            ),
        );
    }
    if matches!(rec.data_type, 8 | 9) && n > 0 {
        match crate::model::metadata_text(&rec.content) {
            None => ctx.warn(
                "gvrs.metadata.content_layout",
                at,
                "text content does not start with a byte count that fits",
            ),
            Some(_) => {
                let k = i32::from_le_bytes([rec.content[0], rec.content[1], rec.content[2], rec.content[3]]) as usize;
                let text = &rec.content[4..4 + k];
                if rec.data_type == 8 && std::str::from_utf8(text).is_err() {
                    ctx.err("gvrs.metadata.utf8", at, "STRING content is not valid UTF-8");
                }
                if rec.data_type == 9 && !text.is_ascii() {
                    ctx.warn("gvrs.metadata.ascii", at, "ASCII content holds non-ASCII bytes");
                }
            }
        }
    }
}

fn check_file_space(ctx: &mut Ctx, file: &GvrsFile) {
    let dir = match file.file_space_directory_unverified() {
        Ok(Some(d)) => d,
        Ok(None) => return,
        Err(e) => {
            ctx.error(&e);
            return;
        }
    };
    if let Ok(bytes) = file.input().read_vec(
        dir.record.start,
        dir.record.length as u64,
        "file-space directory",
        file.limits(),
    ) {
        check_record(ctx, &dir.record, &bytes, "file_space_directory", None);
    }
    ctx.extents.push(Extent {
        start: dir.record.start,
        end: dir.record.start + dir.record.length as u64,
        what: "file-space directory".into(),
    });
    // Gridfour may leave 12 unused bytes (one entry's worth) in this record.
    check_tail(ctx, "file_space_directory", &dir.tail, 12);
    for e in &dir.entries {
        if e.position < 16 || e.position as u64 >= file.input().len() {
            ctx.err(
                "gvrs.free_space.outside_file",
                Some(e.offset),
                format!("free-space reference {} points outside the file", e.position),
            );
            continue;
        }
        let start = e.position as u64;
        let rec = match parse::read_record_prefix(file.input(), start, RecordType::FreeSpace, u64::MAX) {
            Ok((r, _)) => r,
            Err(err) => {
                ctx.error(&err);
                continue;
            }
        };
        // Free-space records: only the 8-byte prefix is covered by the CRC; read just that and
        // the CRC (the body is undefined and may be large).
        let mut b = [0u8; 12];
        let _ = file.input().read_at(start, &mut b[..8], "free-space record");
        let _ = file
            .input()
            .read_at(start + rec.length as u64 - 4, &mut b[8..], "free-space record CRC");
        check_record(ctx, &rec, &b, "free_space", Some(8));
        if rec.length != e.size {
            ctx.err(
                "gvrs.free_space.size_mismatch",
                Some(e.offset + 8),
                format!(
                    "directory gives free block size {}, the record at {start} is {} bytes",
                    e.size, rec.length
                ),
            );
        }
        ctx.extents.push(Extent {
            start,
            end: start + rec.length as u64,
            what: "free-space record".into(),
        });
    }
}

fn check_extents(ctx: &mut Ctx, file_len: u64) {
    let mut ex = std::mem::take(&mut ctx.extents);
    ex.sort_by_key(|e| (e.start, e.end));
    let mut pos = 16u64;
    let mut gaps = 0u64;
    let mut gap_bytes = 0u64;
    let mut first_gap = None;
    let mut prev: Option<&Extent> = None;
    for e in &ex {
        if let Some(p) = prev {
            if e.start < p.end {
                let code = if e.start == p.start {
                    "gvrs.record.duplicate_reference"
                } else {
                    "gvrs.record.overlap"
                };
                ctx.err(
                    code,
                    Some(e.start),
                    format!(
                        "{} at {}..{} overlaps {} at {}..{}",
                        e.what, e.start, e.end, p.what, p.start, p.end
                    ),
                );
            }
        }
        if e.start > pos {
            gaps += 1;
            gap_bytes += e.start - pos;
            first_gap.get_or_insert(pos);
        }
        pos = pos.max(e.end);
        if prev.is_none_or(|p| e.end > p.end) {
            prev = Some(e);
        }
    }
    if file_len > pos {
        gaps += 1;
        gap_bytes += file_len - pos;
        first_gap.get_or_insert(pos);
    }
    if gaps > 0 {
        ctx.f.push(
            Severity::Info,
            "gvrs.file.gap",
            first_gap,
            format!("{gap_bytes} byte(s) in {gaps} stretch(es) belong to no record reachable from the directories"),
        );
    }
}
