//! Content rules (text, INDEX / RANGE values, JSON, compressed streams), checked on a table's
//! bytes as they stream: [`ContentCheck`] takes the data in pieces of any size, so `validate`
//! and the read path hold a few MiB whatever the table's size.

use rasterpack_common::{Error, ErrorKind, Findings, Input, Limits, Result};

use super::json::{check_json_slice, check_json_stored};
use super::text::TextCheck;
use super::{budget, push};
use crate::codes::{self, *};
use crate::compress::{self, SimpleU32Decoder};
use crate::document::{UdfCompression, UdfDocument, UdfTable};
use crate::raw::{Hint, Prim};

/// Size of the pieces table data is read in.
pub(crate) const CHUNK: usize = 4 << 20;

/// Size of the compressed-stream pieces read, and of the decoded pieces handed on.
const STREAM_CHUNK: usize = 1 << 20;
const DECODED_PIECE: usize = 4 << 20;

/// Read `len` bytes at `offset` in chunks of a multiple of `record` bytes (at least one record)
/// and hand each to `f(absolute_offset, bytes)`; `f` returns false to stop early.
pub fn for_each_chunk(
    input: &Input,
    offset: u64,
    len: u64,
    record: usize,
    mut f: impl FnMut(u64, &[u8]) -> bool,
) -> Result<()> {
    let record = record.max(1);
    let step = ((CHUNK / record).max(1) * record) as u64;
    if let Some(all) = input.as_bytes() {
        let data = rasterpack_common::slice_at(all, offset, len, "table data")?;
        for (k, c) in data.chunks(step as usize).enumerate() {
            if !f(offset + k as u64 * step, c) {
                break;
            }
        }
        return Ok(());
    }
    let mut buf = vec![0u8; step.min(len) as usize];
    let mut pos = 0u64;
    while pos < len {
        let n = step.min(len - pos) as usize;
        input.read_at(offset + pos, &mut buf[..n], "table data")?;
        if !f(offset + pos, &buf[..n]) {
            break;
        }
        pos += n as u64;
    }
    Ok(())
}

/// Where the findings about a table's data point: at the byte (stored data), or at the start
/// of the compressed stream (decoded bytes have no file position).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Position {
    base: u64,
    exact: bool,
}

impl Position {
    /// Stored data starting at `base`.
    pub(crate) fn stored(base: u64) -> Position {
        Position { base, exact: true }
    }

    /// Data decoded from the stream at `base`.
    pub(crate) fn decoded(base: u64) -> Position {
        Position { base, exact: false }
    }

    /// Absolute offset of the byte `rel` bytes into the data.
    pub(crate) fn at(self, rel: u64) -> u64 {
        if self.exact {
            self.base + rel
        } else {
            self.base
        }
    }
}

/// The content rules of one table, on its (decoded) data fed in order: strict text (per row of
/// a list, or the whole scalar), INDEX values below the target's length, RANGE pairs ordered
/// and within it. Pieces may be of any size as long as text comes in whole code units.
pub(crate) struct ContentCheck {
    rule: Rule,
    /// Bytes per unit the rule judges (a value; a pair for ranges); pieces are regrouped.
    unit: usize,
    carry: Vec<u8>,
    /// Offset, relative to the table's data, of the next byte fed.
    pos: u64,
}

enum Rule {
    Nothing,
    ScalarText {
        text: TextCheck,
        error: Option<(u64, String)>,
    },
    TextRows {
        prim: Prim,
        width: u64,
        row: TextCheck,
        row_start: u64,
        error: Option<(u64, String)>,
    },
    Index {
        prim: Prim,
        target_len: u64,
        bad: u64,
        first: Option<(u64, u64)>,
    },
    Range {
        prim: Prim,
        target_len: u64,
        inverted: u64,
        first_inverted: Option<(u64, u64, u64)>,
        beyond: u64,
        first_beyond: Option<(u64, u64, u64)>,
    },
}

impl ContentCheck {
    /// The rules of `t` (INDEX / RANGE targets resolved in `doc`), for data fed from relative
    /// offset `start` (a record boundary: a row of a text list, a range pair).
    pub(crate) fn new(doc: &UdfDocument, t: &UdfTable, start: u64) -> ContentCheck {
        let size = t.prim.size().unwrap_or(1) as usize;
        let (rule, unit) = if !t.hint_ok {
            (Rule::Nothing, 1)
        } else {
            match t.hint {
                Hint::Text if t.shape.real().is_empty() => (
                    Rule::ScalarText {
                        text: TextCheck::new(t.prim),
                        error: None,
                    },
                    size,
                ),
                Hint::Text => {
                    let width = t.shape.ghost().first().copied().unwrap_or(0) as u64 * size as u64;
                    if width == 0 {
                        (Rule::Nothing, 1)
                    } else {
                        let rule = Rule::TextRows {
                            prim: t.prim,
                            width,
                            row: TextCheck::new(t.prim),
                            row_start: start,
                            error: None,
                        };
                        (rule, size)
                    }
                }
                Hint::Index | Hint::Range => match t.index_target {
                    Some((d, o)) => {
                        let target_len = doc
                            .datasets
                            .get(d)
                            .and_then(|ds| ds.tables.get(o))
                            .and_then(|x| x.shape.axes.first().copied())
                            .unwrap_or(0) as u64;
                        if t.hint == Hint::Index {
                            let rule = Rule::Index {
                                prim: t.prim,
                                target_len,
                                bad: 0,
                                first: None,
                            };
                            (rule, size)
                        } else {
                            let rule = Rule::Range {
                                prim: t.prim,
                                target_len,
                                inverted: 0,
                                first_inverted: None,
                                beyond: 0,
                                first_beyond: None,
                            };
                            (rule, 2 * size)
                        }
                    }
                    None => (Rule::Nothing, 1),
                },
                _ => (Rule::Nothing, 1),
            }
        };
        ContentCheck {
            rule,
            unit,
            carry: Vec::new(),
            pos: start,
        }
    }

    /// True when the table has no content rule to check.
    pub(crate) fn is_nothing(&self) -> bool {
        matches!(self.rule, Rule::Nothing)
    }

    /// Whether an error has been found so far.
    pub(crate) fn failed(&self) -> bool {
        match &self.rule {
            Rule::Nothing => false,
            Rule::ScalarText { error, .. } | Rule::TextRows { error, .. } => error.is_some(),
            Rule::Index { bad, .. } => *bad > 0,
            Rule::Range { inverted, beyond, .. } => inverted + beyond > 0,
        }
    }

    /// Whether more data can no longer change the findings (a text rule stops at its first
    /// error; value rules count every bad value).
    pub(crate) fn settled(&self) -> bool {
        match &self.rule {
            Rule::ScalarText { error, .. } | Rule::TextRows { error, .. } => error.is_some(),
            _ => false,
        }
    }

    /// The next piece of the data.
    pub(crate) fn feed(&mut self, mut bytes: &[u8]) {
        if self.is_nothing() {
            self.pos += bytes.len() as u64;
            return;
        }
        // Complete a unit split by the previous piece.
        if !self.carry.is_empty() {
            let need = (self.unit - self.carry.len()).min(bytes.len());
            self.carry.extend_from_slice(&bytes[..need]);
            bytes = &bytes[need..];
            if self.carry.len() < self.unit {
                return;
            }
            let unit = std::mem::take(&mut self.carry);
            self.judge(&unit);
        }
        let whole = bytes.len() / self.unit * self.unit;
        self.judge(&bytes[..whole]);
        self.carry.extend_from_slice(&bytes[whole..]);
    }

    /// Judge whole units starting at `self.pos`.
    fn judge(&mut self, bytes: &[u8]) {
        let pos = self.pos;
        self.pos += bytes.len() as u64;
        match &mut self.rule {
            Rule::Nothing => {}
            Rule::ScalarText { text, error } => {
                if error.is_none() {
                    if let Err((rel, m)) = text.feed(bytes) {
                        *error = Some((pos + rel, m));
                    }
                }
            }
            Rule::TextRows {
                prim,
                width,
                row,
                row_start,
                error,
            } => text_rows(*prim, *width, row, row_start, error, pos, bytes),
            Rule::Index {
                prim,
                target_len,
                bad,
                first,
            } => index_values(*prim, *target_len, bad, first, pos, bytes),
            Rule::Range {
                prim,
                target_len,
                inverted,
                first_inverted,
                beyond,
                first_beyond,
            } => {
                let size = self.unit / 2;
                for (k, c) in bytes.chunks_exact(self.unit).enumerate() {
                    let (s, e) = (read_uint(*prim, c), read_uint(*prim, &c[size..]));
                    let at = pos + (k * self.unit) as u64;
                    if s > e {
                        *inverted += 1;
                        first_inverted.get_or_insert((at, s, e));
                    }
                    if s > *target_len || e > *target_len {
                        *beyond += 1;
                        first_beyond.get_or_insert((at, s, e));
                    }
                }
            }
        }
    }

    /// The data has ended: the rules that judge the end (a scalar text must not stop inside a
    /// character).
    pub(crate) fn finish(&mut self) {
        let end = self.pos;
        if let Rule::ScalarText { text, error } = &mut self.rule {
            if error.is_none() {
                if let Err((_, m)) = text.finish() {
                    *error = Some((end, m));
                }
            }
        }
    }

    /// The findings, as `validate` reports them for the table tagged `tt`.
    pub(crate) fn findings(&self, tt: &str, position: Position, f: &mut Findings) {
        match &self.rule {
            Rule::Nothing => {}
            Rule::ScalarText { error, .. } | Rule::TextRows { error, .. } => {
                if let Some((at, m)) = error {
                    push(f, TEXT_INVALID, Some(position.at(*at)), format!("{tt}: {m}"));
                }
            }
            Rule::Index {
                target_len, bad, first, ..
            } => {
                if let Some((at, v)) = first {
                    push(
                        f,
                        INDEX_OUT_OF_RANGE,
                        Some(position.at(*at)),
                        format!("{tt}: {bad} index value(s) >= target length {target_len}, first {v}"),
                    );
                }
            }
            Rule::Range {
                target_len,
                inverted,
                first_inverted,
                beyond,
                first_beyond,
                ..
            } => {
                if let Some((at, s, e)) = first_inverted {
                    push(
                        f,
                        RANGE_INVERTED,
                        Some(position.at(*at)),
                        format!("{tt}: {inverted} range(s) with start > end, first ({s},{e})"),
                    );
                }
                if let Some((at, s, e)) = first_beyond {
                    push(
                        f,
                        RANGE_OUT_OF_RANGE,
                        Some(position.at(*at)),
                        format!("{tt}: {beyond} range(s) beyond target length {target_len}, first ({s},{e})"),
                    );
                }
            }
        }
    }
}

/// Rows of a text list, each decoded strictly; rows may span pieces. Stops at the first error.
fn text_rows(
    prim: Prim,
    width: u64,
    row: &mut TextCheck,
    row_start: &mut u64,
    error: &mut Option<(u64, String)>,
    pos: u64,
    mut bytes: &[u8],
) {
    let mut at = pos;
    while !bytes.is_empty() && error.is_none() {
        let row_end = *row_start + width;
        let take = ((row_end - at) as usize).min(bytes.len());
        if let Err((rel, m)) = row.feed(&bytes[..take]) {
            *error = Some((at + rel, m));
            return;
        }
        at += take as u64;
        bytes = &bytes[take..];
        if at == row_end {
            if let Err((_, m)) = row.finish() {
                *error = Some((row_end, m));
                return;
            }
            *row = TextCheck::new(prim);
            *row_start = row_end;
        }
    }
}

/// INDEX values: the maximum of the piece first, the details only when one is out of range.
fn index_values(prim: Prim, target_len: u64, bad: &mut u64, first: &mut Option<(u64, u64)>, pos: u64, bytes: &[u8]) {
    let size = prim.size().unwrap_or(1) as usize;
    let max = match prim {
        Prim::U8 => bytes.iter().copied().max().unwrap_or(0) as u64,
        Prim::U16 => bytes
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .max()
            .unwrap_or(0) as u64,
        Prim::U32 => bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .max()
            .unwrap_or(0) as u64,
        _ => bytes
            .chunks_exact(8)
            .map(|c| read_uint(Prim::U64, c))
            .max()
            .unwrap_or(0),
    };
    if bytes.is_empty() || max < target_len {
        return;
    }
    for (k, c) in bytes.chunks_exact(size).enumerate() {
        let v = read_uint(prim, c);
        if v >= target_len {
            *bad += 1;
            first.get_or_insert((pos + (k * size) as u64, v));
        }
    }
}

fn read_uint(prim: Prim, b: &[u8]) -> u64 {
    match prim {
        Prim::U8 => b[0] as u64,
        Prim::U16 => u16::from_le_bytes([b[0], b[1]]) as u64,
        Prim::U32 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64,
        _ => b
            .get(..8)
            .and_then(|s| <[u8; 8]>::try_from(s).ok())
            .map_or(0, u64::from_le_bytes),
    }
}

/// Decode the SimpleU32 stream of `t` (stored at `base`) piece by piece:
/// `emit(decoded_offset, bytes)` gets the words in order, at most a few MiB at a time, and
/// returns `Ok(false)` to stop early; `read(n)` is told of each piece of the stream read.
/// Decoding stops once `until` decoded bytes are out (`u64::MAX`: the whole stream, which
/// must then decode to exactly the table's shape). The shape is first checked against what
/// the stream can hold (16 words per byte), so no work is done for a shape the stream cannot
/// fill.
pub(crate) fn for_each_decoded(
    input: &Input,
    t: &UdfTable,
    base: u64,
    until: u64,
    mut emit: impl FnMut(u64, &[u8]) -> Result<bool>,
    mut read: impl FnMut(u64),
) -> Result<()> {
    let words = t.shape.elements();
    let corrupt = |offset: u64, message: String| {
        Error::invalid(
            COMPRESS_CORRUPT,
            base + offset,
            format!("table {}: SimpleU32 stream: {message}", t.display_name()),
        )
    };
    if words > t.data_size.saturating_mul(compress::MAX_WORDS_PER_BYTE) {
        return Err(Error::invalid(
            COMPRESS_CORRUPT,
            base,
            format!(
                "table {}: shape {:?} has {words} values, more than a {}-byte SimpleU32 stream can hold",
                t.display_name(),
                t.shape.axes,
                t.data_size
            ),
        ));
    }
    let mut decoder = SimpleU32Decoder::new(words);
    // Pieces sized to what is wanted: a small region reads and holds a little.
    let wanted = until.min(words.saturating_mul(4));
    let piece = (wanted / 4).clamp(64 << 10, STREAM_CHUNK as u64).min(t.data_size) as usize;
    // A partial opcode (at most 64 bytes) is carried in front of the next piece.
    let mut buf = vec![0u8; piece + 64];
    let mut carry = 0usize;
    let mut out = Vec::with_capacity((DECODED_PIECE as u64).min(wanted) as usize + 64);
    let mut decoded = 0u64;
    let mut pos = 0u64;
    while pos < t.data_size {
        let n = (piece as u64).min(t.data_size - pos) as usize;
        input.read_at(base + pos, &mut buf[carry..carry + n], "table data")?;
        pos += n as u64;
        read(n as u64);
        let avail = carry + n;
        let mut at = 0usize;
        loop {
            if decoded >= until {
                return Ok(());
            }
            let limit = (DECODED_PIECE as u64).min(until - decoded) as usize;
            let used = decoder
                .decode(&buf[at..avail], &mut out, limit)
                .map_err(|e| corrupt(e.offset, e.message))?;
            at += used;
            if !out.is_empty() && (out.len() >= limit || used == 0) {
                if !emit(decoded, &out)? {
                    return Ok(());
                }
                decoded += out.len() as u64;
                out.clear();
            }
            if used == 0 {
                break;
            }
        }
        buf.copy_within(at..avail, 0);
        carry = avail - at;
    }
    decoder.finish(&buf[..carry]).map_err(|e| corrupt(e.offset, e.message))
}

/// Content checks of every readable table: text, JSON, INDEX and RANGE values, compressed
/// streams; the other tables are read through once so an unreadable file shows.
pub fn check_contents(input: &Input, limits: &Limits, doc: &UdfDocument, f: &mut Findings) {
    check_contents_upto(input, limits, doc, u64::MAX, &|_, _| {}, f);
}

/// [`check_contents`] of the tables whose data is at most `max_table` bytes (stored and
/// decoded); the others are counted and reported as one info finding (`inspect` checks the
/// small tables only). `progress(done, total)` is told the stored bytes checked.
pub(crate) fn check_contents_upto(
    input: &Input,
    limits: &Limits,
    doc: &UdfDocument,
    max_table: u64,
    progress: &dyn Fn(u64, u64),
    f: &mut Findings,
) {
    let mut todo = Vec::new();
    let mut skipped = 0u64;
    for ds in &doc.datasets {
        for t in &ds.tables {
            if !t.readable() || matches!(t.prim, Prim::Reserved(_)) || t.data_offset.is_none() {
                continue;
            }
            if t.data_size.max(decoded_bound(t)) > max_table {
                skipped += 1;
                continue;
            }
            todo.push((ds, t));
        }
    }
    let total: u64 = todo.iter().map(|(_, t)| t.data_size).fold(0, u64::saturating_add);
    let mut done = 0u64;
    let (mut spent, mut decoded) = (0u64, 0u64);
    for (ds, t) in todo {
        let base = t.data_offset.unwrap_or(0);
        let tt = format!(
            "dataset@{:#x}.table[{}] ({})",
            ds.location.offset,
            t.index,
            t.display_name()
        );
        // Stored bytes are held to the re-read budget (overlapping tables); decoded bytes,
        // at most 64 per stored byte, to 64 times the file plus 1 GiB, which a table that
        // does not overlap another never reaches.
        spent = spent.saturating_add(t.data_size);
        decoded = decoded.saturating_add(decoded_bound(t));
        let decoded_budget = doc
            .file_len
            .saturating_mul(4 * compress::MAX_WORDS_PER_BYTE)
            .saturating_add(1 << 30);
        if spent > budget(doc.file_len) || decoded > decoded_budget {
            push(
                f,
                LIMIT_WORK,
                Some(base),
                format!("{tt}: table contents read exceed the work budget; the rest is not checked"),
            );
            return;
        }
        let mut on_read = |n: u64| {
            done = done.saturating_add(n);
            progress(done.min(total), total);
        };
        if let Err(e) = check_table_stored(input, limits, doc, t, base, &tt, &mut on_read, f) {
            let fallback = if e.kind == ErrorKind::LimitExceeded {
                LIMIT_WORK
            } else {
                IO
            };
            let code = codes::CODES.iter().find(|c| c.0 == e.code).map_or(fallback, |c| c.0);
            push(f, code, e.offset.or(Some(base)), format!("{tt}: {}", e.message));
        }
    }
    if skipped > 0 {
        push(
            f,
            CONTENT_NOT_CHECKED,
            None,
            format!("{skipped} table(s) larger than {max_table} bytes: content not checked (validate checks it)"),
        );
    }
}

/// What a compressed table decodes to at most (a larger shape is refused before any work).
fn decoded_bound(t: &UdfTable) -> u64 {
    match t.compression() {
        UdfCompression::SimpleU32 => t
            .decoded_len()
            .min(t.data_size.saturating_mul(4 * compress::MAX_WORDS_PER_BYTE)),
        _ => 0,
    }
}

/// The content rules of one table whose data is at `base` of `input`, read in pieces.
#[allow(clippy::too_many_arguments)]
fn check_table_stored(
    input: &Input,
    limits: &Limits,
    doc: &UdfDocument,
    t: &UdfTable,
    base: u64,
    tt: &str,
    on_read: &mut dyn FnMut(u64),
    f: &mut Findings,
) -> Result<()> {
    if t.compression() == UdfCompression::SimpleU32 {
        let mut check = ContentCheck::new(doc, t, 0);
        for_each_decoded(
            input,
            t,
            base,
            u64::MAX,
            |_, words| {
                check.feed(words);
                Ok(true)
            },
            on_read,
        )?;
        check.finish();
        check.findings(tt, Position::decoded(base), f);
        return Ok(());
    }
    if t.hint == Hint::Json && t.hint_ok {
        check_json_table(limits, t, base, tt, f, |shape| {
            check_json_stored(input, base, t.data_size, shape)
        });
        on_read(t.data_size);
        return Ok(());
    }
    if t.hint == Hint::Dataset && t.hint_ok {
        // The walk read the links.
        on_read(t.data_size);
        return Ok(());
    }
    // Tables without content rules are read through once so an unreadable file shows.
    let mut check = ContentCheck::new(doc, t, 0);
    let record = t.prim.size().unwrap_or(1) as usize * if t.hint == Hint::Range { 2 } else { 1 };
    for_each_chunk(input, base, t.data_size, record, |_, chunk| {
        check.feed(chunk);
        on_read(chunk.len() as u64);
        true
    })?;
    check.finish();
    check.findings(tt, Position::stored(base), f);
    Ok(())
}

/// The JSON rules of table `t` through `check` (on stored or in-memory bytes), within the text
/// limit.
fn check_json_table(
    limits: &Limits,
    t: &UdfTable,
    base: u64,
    tt: &str,
    f: &mut Findings,
    check: impl FnOnce(&[u32]) -> std::result::Result<(), super::json::JsonFault>,
) {
    if t.data_size > limits.max_text {
        push(
            f,
            JSON_TOO_LARGE,
            Some(base),
            format!("{tt}: JSON of {} bytes exceeds the text limit", t.data_size),
        );
        return;
    }
    if let Err((code, m)) = check(t.shape.real()) {
        push(f, code, Some(base), format!("{tt}: {m}"));
    }
}

/// The content rules of one table on its (decoded) bytes already in memory: what the
/// in-memory accessors check before handing the bytes out.
pub(crate) fn check_table_bytes(
    doc: &UdfDocument,
    t: &UdfTable,
    bytes: &[u8],
    position: Position,
    limits: &Limits,
    tt: &str,
    f: &mut Findings,
) {
    if t.hint == Hint::Json && t.hint_ok {
        check_json_table(limits, t, position.at(0), tt, f, |shape| check_json_slice(bytes, shape));
        return;
    }
    let mut check = ContentCheck::new(doc, t, 0);
    check.feed(bytes);
    check.finish();
    check.findings(tt, position, f);
}
