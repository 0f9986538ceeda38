//! Validation: the structural walk (file header, dataset graph, descriptors, lookups, hints,
//! cross-table references) and the content checks (text, JSON, indices, ranges), collecting
//! every finding with a stable code (see [`crate::codes`]) and the offset of the field at fault.
//!
//! Memory stays bounded: dataset headers are bounded by their u16 counts (< 4 MiB), table data
//! is streamed in chunks, JSON is read whole only up to `Limits::max_text`.

use std::collections::{HashMap, VecDeque};

use std::borrow::Cow;

use rasterpack_common::{Error, Finding, Findings, Input, Limits, Severity};
use serde_json::Value;

use crate::codes::{self, *};
use crate::compress;
use crate::model::{ChildLink, Compression, Dataset, Document, Lookup, Table, Text};
use crate::parse::{self, Shape};
use crate::raw::{
    desc_field as F, FileOffset, Hint, Prim, DATASET_CHECK, DATASET_STATIC_SIZE, DESCRIPTOR_SIZE, FILE_HEADER_SIZE,
    LOOKUP_SIZE, MAGIC,
};

/// Chunk size for streamed table reads.
const CHUNK: usize = 4 << 20;

fn push(f: &mut Findings, code: &'static str, offset: Option<u64>, msg: String) {
    let sev = codes::severity(code).unwrap_or(Severity::Error);
    f.push(sev, code, offset, msg);
}

/// Full validation: structure plus every table's content.
pub fn validate(input: &Input, limits: &Limits) -> Document {
    let mut doc = walk(input, limits);
    let mut f = std::mem::take(&mut doc.findings);
    check_contents(input, limits, &doc, &mut f);
    doc.findings = f;
    doc
}

/// The structural walk: everything but the content of non-DATASET tables.
pub fn walk(input: &Input, limits: &Limits) -> Document {
    let mut w = Walker {
        input,
        limits,
        file_len: input.len(),
        doc: Document::default(),
        by_loc: HashMap::new(),
        edges: 0,
        header_bytes: 0,
    };
    w.doc.file_len = w.file_len;
    w.run();
    w.doc
}

struct Walker<'a> {
    input: &'a Input,
    limits: &'a Limits,
    file_len: u64,
    doc: Document,
    by_loc: HashMap<FileOffset, usize>,
    edges: u64,
    header_bytes: u64,
}

/// The file id: printable ASCII, NUL padded (no printable byte after a NUL).
fn id_ok(id: &[u8; 4]) -> bool {
    let mut nul = false;
    for &b in id {
        if b == 0 {
            nul = true;
        } else if nul || !(0x20..=0x7e).contains(&b) {
            return false;
        }
    }
    true
}

impl Walker<'_> {
    fn err(&mut self, code: &'static str, offset: Option<u64>, msg: String) {
        push(&mut self.doc.findings, code, offset, msg);
    }

    /// The error findings made since `mark` (a length of `doc.findings`), minus the limit
    /// ones (a limit stops the walk; it says nothing about the bytes already read).
    fn errors_since(&self, mark: usize) -> Vec<Finding> {
        self.doc
            .findings
            .0
            .get(mark..)
            .unwrap_or(&[])
            .iter()
            .filter(|f| {
                f.severity == Severity::Error
                    && !matches!(f.code.as_str(), LIMIT_WORK | DATASET_TOO_MANY | DATASET_TOO_DEEP)
            })
            .cloned()
            .collect()
    }

    fn run(&mut self) {
        let head = self.input.head(FILE_HEADER_SIZE);
        if head.len() >= 4 && !head.starts_with(&MAGIC) {
            if head.starts_with(b"UDF") {
                self.err(
                    UNSUPPORTED_REVISION,
                    Some(0),
                    format!(
                        "magic {:?}: a later UDF revision; rasterpack reads UDF0 only",
                        String::from_utf8_lossy(&head[..4])
                    ),
                );
            } else {
                self.err(BAD_MAGIC, Some(0), format!("magic {:02x?} is not \"UDF0\"", &head[..4]));
            }
            return;
        }
        let Ok(hb) = <[u8; FILE_HEADER_SIZE]>::try_from(head.as_slice()) else {
            self.err(
                TRUNCATED,
                Some(0),
                format!("file is {} bytes, the UDF header needs 64", self.file_len),
            );
            return;
        };
        let h = parse::file_header(&hb);
        self.doc.header = Some(h);
        if !id_ok(&h.id) {
            self.err(
                HEADER_BAD_ID,
                Some(4),
                format!("file id {:02x?} is not printable ASCII padded with NULs", h.id),
            );
        }
        if h.next != 0 {
            self.err(
                HEADER_NEXT,
                Some(8),
                format!("reserved field next = {:#x} (not marked must-be-zero)", h.next),
            );
        }
        if let Some(i) = h.reserved.iter().position(|&r| r != 0) {
            self.err(
                HEADER_RESERVED,
                Some(0x20 + 8 * i as u64),
                format!("file header reserved {:?} must be zero", h.reserved),
            );
        }
        if self.check_offset(h.root, 0x10, || "root".to_string()) {
            self.bfs(h.root);
        }
        self.find_cycles();
        self.cross_checks();
    }

    /// Rules of a file offset; true when it points at a dataset worth reading.
    fn check_offset(&mut self, fo: FileOffset, at: u64, what: impl Fn() -> String) -> bool {
        if fo.is_null() {
            return false;
        }
        let what = what();
        if fo.offset == 0 {
            self.err(
                OFFSET_NULL_WITH_SIZE,
                Some(at),
                format!("{what}: offset 0 with size {}", fo.size),
            );
            return false;
        }
        if fo.offset & 15 != 0 || fo.size & 15 != 0 {
            self.err(
                OFFSET_MISALIGNED,
                Some(at),
                format!("{what}: {:#x}:{:#x} not 16-aligned", fo.offset, fo.size),
            );
            return false;
        }
        let end = fo.offset.checked_add(fo.size);
        if fo.offset < FILE_HEADER_SIZE as u64
            || end.is_none_or(|e| e > self.file_len)
            || fo.size < DATASET_STATIC_SIZE as u64
        {
            self.err(
                OFFSET_OUT_OF_BOUNDS,
                Some(at),
                format!(
                    "{what}: {:#x}:{:#x} outside the file (len {:#x}), inside its header, or smaller than a dataset header",
                    fo.offset, fo.size, self.file_len
                ),
            );
            return false;
        }
        true
    }

    fn bfs(&mut self, root: FileOffset) {
        let mut queue = VecDeque::new();
        self.by_loc.insert(root, 0);
        self.doc.datasets.push(blank_dataset(root, "root".into(), None, 0));
        queue.push_back(0usize);
        while let Some(i) = queue.pop_front() {
            self.load_dataset(i);
            // Follow the DATASET links found.
            let links: Vec<(usize, FileOffset, String)> = {
                let ds = &self.doc.datasets[i];
                ds.children
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.target.is_none() && c.valid)
                    .map(|(k, c)| {
                        let t = &ds.tables[c.table];
                        let seg = if t.shape.real().is_empty() {
                            t.display_name()
                        } else {
                            format!("{}[{}]", t.display_name(), c.entry)
                        };
                        (k, c.location, format!("{}/{}", ds.path, seg))
                    })
                    .collect()
            };
            let depth = self.doc.datasets[i].depth + 1;
            for (k, loc, path) in links {
                let target = match self.by_loc.get(&loc) {
                    Some(&t) => t,
                    None => {
                        if depth > self.limits.max_depth {
                            let at = self.doc.datasets[i].children[k].entry_offset;
                            self.err(
                                DATASET_TOO_DEEP,
                                Some(at),
                                format!("{path}: dataset graph deeper than {}", self.limits.max_depth),
                            );
                            continue;
                        }
                        if self.doc.datasets.len() as u64 >= self.limits.max_entries {
                            let at = self.doc.datasets[i].children[k].entry_offset;
                            self.err(
                                DATASET_TOO_MANY,
                                Some(at),
                                format!("more than {} datasets", self.limits.max_entries),
                            );
                            return;
                        }
                        let t = self.doc.datasets.len();
                        self.by_loc.insert(loc, t);
                        self.doc.datasets.push(blank_dataset(loc, path, Some(i), depth));
                        queue.push_back(t);
                        t
                    }
                };
                self.doc.datasets[i].children[k].target = Some(target);
            }
        }
    }

    fn load_dataset(&mut self, i: usize) {
        let loc = self.doc.datasets[i].location;
        let tag = format!("dataset@{:#x}", loc.offset);
        let mut sb = [0u8; DATASET_STATIC_SIZE];
        if let Err(e) = self.input.read_at(loc.offset, &mut sb, "dataset header") {
            self.err(IO, Some(loc.offset), format!("{tag}: {e}"));
            return;
        }
        let h = parse::dataset_header(&sb);
        self.doc.datasets[i].header = h;
        if h.check != DATASET_CHECK {
            self.err(
                DATASET_BAD_CHECK,
                Some(loc.offset),
                format!("{tag}: check {:#010x}, expected {DATASET_CHECK:#010x}", h.check),
            );
            return;
        }
        self.doc.datasets[i].check_ok = true;
        if h.checksum != 0 {
            self.err(
                DATASET_CHECKSUM,
                Some(loc.offset + 4),
                format!(
                    "{tag}: header checksum {:#x} not verified (algorithm unspecified)",
                    h.checksum
                ),
            );
        }
        if !id_ok(&h.id) {
            self.err(
                DATASET_BAD_ID,
                Some(loc.offset + 8),
                format!("{tag}: id {:02x?} is not printable ASCII", h.id),
            );
        }
        if h.reserved != [0, 0] {
            self.err(
                DATASET_RESERVED,
                Some(loc.offset + 0x14),
                format!("{tag}: reserved {:?} non-zero", h.reserved),
            );
        }
        let hs = h.header_size as u64;
        let header_mark = self.doc.findings.len();
        let needed = DATASET_STATIC_SIZE as u64
            + DESCRIPTOR_SIZE as u64 * h.descs_len as u64
            + LOOKUP_SIZE as u64 * h.lookup_len as u64
            + h.string_len as u64;
        let mut data_ok = true;
        if hs & 7 != 0 {
            self.err(
                DATASET_HEADER_SIZE_ALIGN,
                Some(loc.offset + 0xC),
                format!("{tag}: header_size {hs} is not a multiple of 8"),
            );
            data_ok = false;
        }
        if hs > loc.size {
            self.err(
                DATASET_HEADER_OUT_OF_BOUNDS,
                Some(loc.offset + 0xC),
                format!("{tag}: header_size {hs} > size {}", loc.size),
            );
            data_ok = false;
        } else if needed > loc.size {
            self.err(
                DATASET_HEADER_OUT_OF_BOUNDS,
                Some(loc.offset + 0xE),
                format!(
                    "{tag}: descriptors, lookups and strings need {needed} bytes > size {}",
                    loc.size
                ),
            );
        }
        if hs < needed {
            self.err(
                DATASET_HEADER_SIZE_SMALL,
                Some(loc.offset + 0xC),
                format!("{tag}: header_size {hs} < {needed}"),
            );
            data_ok = false;
        } else if hs > needed.div_ceil(8) * 8 && hs & 7 == 0 {
            self.err(
                DATASET_HEADER_SLACK,
                Some(loc.offset + 0xC),
                format!("{tag}: header_size {hs} larger than the {needed} bytes used"),
            );
        }
        // Where the data starts depends on header_size: its errors concern every table.
        self.doc.datasets[i].faults = self.errors_since(header_mark);
        if h.string_len & 7 != 0 {
            self.err(
                DATASET_STRING_LEN_ALIGN,
                Some(loc.offset + 0x12),
                format!("{tag}: string_len {} is not a multiple of 8", h.string_len),
            );
        }
        if data_ok {
            self.doc.datasets[i].data_base = Some(loc.offset + hs);
        }
        if needed > loc.size {
            return;
        }
        self.header_bytes = self.header_bytes.saturating_add(needed);
        if self.header_bytes > budget(self.file_len) {
            self.err(
                LIMIT_WORK,
                Some(loc.offset),
                format!("{tag}: dataset headers read exceed the work budget; not read"),
            );
            return;
        }
        // Bounded by the u16 counts: at most ~3.7 MiB.
        let body = match self.input.read_vec(
            loc.offset + DATASET_STATIC_SIZE as u64,
            needed - DATASET_STATIC_SIZE as u64,
            "dataset header",
            self.limits,
        ) {
            Ok(b) => b,
            Err(e) => {
                self.err(IO, Some(loc.offset), format!("{tag}: {e}"));
                return;
            }
        };
        let descs_end = DESCRIPTOR_SIZE * h.descs_len as usize;
        let lookups_end = descs_end + LOOKUP_SIZE * h.lookup_len as usize;
        let strings = body.get(lookups_end..).unwrap_or(&[]);
        let lookup_base = loc.offset + (DATASET_STATIC_SIZE + descs_end) as u64;
        // Lookups.
        let mut lookups = Vec::with_capacity(h.lookup_len as usize);
        let mut seen: HashMap<u32, usize> = HashMap::new();
        // Errors of a lookup entry concern the tables whose names use its hash.
        let mut lookup_faults: Vec<(u32, Finding)> = Vec::new();
        for k in 0..h.lookup_len as usize {
            let at = lookup_base + (k * LOOKUP_SIZE) as u64;
            let e = parse::lookup(body.get(descs_end + k * LOOKUP_SIZE..).unwrap_or(&[]));
            let entry_mark = self.doc.findings.len();
            if e.hash == 0 {
                self.err(LOOKUP_HASH_ZERO, Some(at), format!("{tag}: lookup[{k}] hash 0"));
            } else if let Some(&prev) = seen.get(&e.hash) {
                self.err(
                    LOOKUP_DUPLICATE_HASH,
                    Some(at),
                    format!("{tag}: lookup[{k}] hash {:#x} repeats lookup[{prev}]", e.hash),
                );
            } else {
                seen.insert(e.hash, k);
            }
            let end = e.offset as usize + e.len as usize;
            let string = if end > h.string_len as usize {
                self.err(
                    LOOKUP_OUT_OF_BOUNDS,
                    Some(at + 4),
                    format!(
                        "{tag}: lookup[{k}] {}+{} > string_len {}",
                        e.offset, e.len, h.string_len
                    ),
                );
                None
            } else {
                match strings.get(e.offset as usize..end).map(std::str::from_utf8) {
                    Some(Ok(s)) => Some(s.to_string()),
                    _ => {
                        self.err(
                            LOOKUP_BAD_UTF8,
                            Some(at + 4),
                            format!("{tag}: lookup[{k}] string is not UTF-8"),
                        );
                        None
                    }
                }
            };
            lookups.push(Lookup {
                hash: e.hash,
                offset: e.offset,
                len: e.len,
                string,
                entry_offset: at,
            });
            if e.hash != 0 {
                lookup_faults.extend(self.errors_since(entry_mark).into_iter().map(|f| (e.hash, f)));
            }
        }
        // First entry wins for duplicate hashes (already an error).
        let mut names: HashMap<u32, Option<String>> = HashMap::new();
        for l in &lookups {
            if l.hash != 0 {
                names.entry(l.hash).or_insert_with(|| l.string.clone());
            }
        }
        self.doc.datasets[i].lookups = lookups;
        // Descriptors.
        let mut tables = Vec::with_capacity(h.descs_len as usize);
        for k in 0..h.descs_len as usize {
            let at = loc.offset + (DATASET_STATIC_SIZE + k * DESCRIPTOR_SIZE) as u64;
            let d = parse::descriptor(body.get(k * DESCRIPTOR_SIZE..).unwrap_or(&[]));
            let mut t = self.table(&tag, i, k, at, d, &names, loc, self.doc.datasets[i].data_base);
            let keys = [d.key_name, d.index_name, d.related_name, d.type_name];
            for (hash, f) in &lookup_faults {
                if keys.contains(hash) {
                    t.faults.push(f.clone());
                }
            }
            tables.push(t);
        }
        // Duplicate key names.
        let mut by_name: HashMap<&str, usize> = HashMap::new();
        let mut dups = Vec::new();
        for t in &tables {
            if let Some(n) = &t.name {
                if let Some(&prev) = by_name.get(n.as_str()) {
                    dups.push((
                        prev,
                        t.index,
                        t.desc_offset,
                        format!("{tag}.table[{}]: name {n:?} repeats table[{prev}]", t.index),
                    ));
                } else {
                    by_name.insert(n, t.index);
                }
            }
        }
        // Both tables of a repeated name are ambiguous.
        for (prev, k, at, m) in dups {
            let mark = self.doc.findings.len();
            self.err(TABLE_DUPLICATE_NAME, Some(at), m);
            for f in self.errors_since(mark) {
                tables[prev].faults.push(f.clone());
                tables[k].faults.push(f);
            }
        }
        // DATASET links.
        let mut children = Vec::new();
        for t in tables.iter_mut() {
            if t.hint == Hint::Dataset && t.hint_ok && t.readable() && t.compression() == Compression::None {
                let mark = self.doc.findings.len();
                self.read_links(&tag, t, &mut children);
                let faults = self.errors_since(mark);
                t.faults.extend(faults);
            }
        }
        self.doc.datasets[i].tables = tables;
        self.doc.datasets[i].children = children;
    }

    fn read_links(&mut self, tag: &str, t: &Table, out: &mut Vec<ChildLink>) {
        let Some(base) = t.data_offset else { return };
        self.header_bytes = self.header_bytes.saturating_add(t.data_size);
        if self.header_bytes > budget(self.file_len) {
            self.err(
                LIMIT_WORK,
                Some(base),
                format!(
                    "{tag}.table[{}]: DATASET tables read exceed the work budget; not followed",
                    t.index
                ),
            );
            return;
        }
        let mut entry = 0u64;
        let mut links = Vec::new();
        let cap = self.limits.max_entries.min(MAX_LINKS);
        if t.data_size / 16 > cap {
            self.err(
                DATASET_TOO_MANY,
                Some(base),
                format!(
                    "{tag}.table[{}]: more than {cap} dataset links; the rest are not followed",
                    t.index
                ),
            );
        }
        let res = for_each_chunk(self.input, base, t.data_size, 16, |_, chunk| {
            for c in chunk.chunks_exact(16) {
                links.push((entry, parse::file_offset(c, 0)));
                entry += 1;
                // Bounded: stop collecting beyond the link limit.
                if links.len() as u64 >= cap {
                    return false;
                }
            }
            true
        });
        if let Err(e) = res {
            self.err(IO, Some(base), format!("{tag}.table[{}]: {e}", t.index));
        }
        for (entry, fo) in links {
            let at = entry_offset(base, entry).unwrap_or(base);
            self.edges += 1;
            if self.edges > self.limits.max_entries.min(MAX_LINKS) {
                self.err(
                    DATASET_TOO_MANY,
                    Some(at),
                    format!(
                        "more than {} dataset links in the file",
                        self.limits.max_entries.min(MAX_LINKS)
                    ),
                );
                return;
            }
            let ok = self.check_offset(fo, at, || format!("{tag}.table[{}][{entry}]", t.index));
            out.push(ChildLink {
                table: t.index,
                entry,
                location: fo,
                entry_offset: at,
                target: None,
                valid: ok,
            });
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn table(
        &mut self,
        tag: &str,
        ds: usize,
        k: usize,
        at: u64,
        d: crate::raw::Descriptor,
        names: &HashMap<u32, Option<String>>,
        loc: FileOffset,
        data_base: Option<u64>,
    ) -> Table {
        let mark = self.doc.findings.len();
        let tt = format!("{tag}.table[{k}]");
        let resolve = |w: &mut Self, key: u32, field: u64, what: &str| -> Option<String> {
            if key == 0 {
                return None;
            }
            match names.get(&key) {
                Some(s) => s.clone(),
                None => {
                    w.err(
                        TABLE_NAME_NOT_FOUND,
                        Some(at + field),
                        format!("{tt}: {what} {key:#x} not in the string lookup"),
                    );
                    None
                }
            }
        };
        if d.key_name == 0 {
            self.err(
                TABLE_NULL_KEY,
                Some(at + F::KEY_NAME),
                format!("{tt}: key_name is null"),
            );
        }
        let name = resolve(self, d.key_name, F::KEY_NAME, "key_name");
        let index_name = resolve(self, d.index_name, F::INDEX_NAME, "index_name");
        let related_name = resolve(self, d.related_name, F::RELATED_NAME, "related_name");
        let type_name = resolve(self, d.type_name, F::TYPE_NAME, "type_name");
        let tt = match &name {
            Some(n) => format!("{tt} ({n})"),
            None => tt,
        };
        let ti = parse::type_info(d.type_info);
        if ti.reserved_bits != 0 {
            self.err(
                TABLE_RESERVED_BITS,
                Some(at + F::TYPE_INFO),
                format!("{tt}: type_info {:#06x} sets reserved bits", d.type_info),
            );
        }
        if let Prim::Reserved(p) = ti.prim {
            self.err(
                TABLE_RESERVED_PRIM,
                Some(at + F::TYPE_INFO),
                format!("{tt}: primitive {p:#x} is reserved"),
            );
        }
        match ti.hint {
            Hint::Reserved(v) => self.err(
                TABLE_RESERVED_HINT,
                Some(at + F::TYPE_INFO + 1),
                format!("{tt}: hint {v} is reserved"),
            ),
            Hint::Custom(32) => self.err(
                TABLE_HINT_32,
                Some(at + F::TYPE_INFO + 1),
                format!("{tt}: hint 32 (custom hints are those above 32)"),
            ),
            Hint::Line => self.err(
                HINT_LINE,
                Some(at + F::TYPE_INFO + 1),
                format!("{tt}: LINE hint is unspecified (TODO in the spec)"),
            ),
            _ => {}
        }
        let compressed = d.compress_info != 0;
        if compressed {
            let what = if d.compress_info == compress::SIMPLE_U32 && ti.prim.size() == Some(4) {
                "the reference crate's SimpleU32 scheme, which rasterpack decodes".to_string()
            } else if d.compress_info == compress::SIMPLE_U32 {
                format!(
                    "the reference crate's SimpleU32 scheme on {}, not decodable",
                    ti.prim.name()
                )
            } else {
                "an unknown scheme; data not decodable".to_string()
            };
            self.err(
                TABLE_COMPRESSED,
                Some(at + F::COMPRESS_INFO),
                format!(
                    "{tt}: compress_info {} (the spec defines no compression): {what}",
                    d.compress_info
                ),
            );
        }
        if d.checksum != 0 {
            self.err(
                TABLE_CHECKSUM,
                Some(at + F::CHECKSUM),
                format!("{tt}: checksum {:#x} not verified (algorithm unspecified)", d.checksum),
            );
        }
        if d.reserved != 0 {
            self.err(
                TABLE_RESERVED,
                Some(at + F::RESERVED),
                format!("{tt}: reserved {:#x} non-zero", d.reserved),
            );
        }
        let shape = Shape::decode(ti.dims, d.data_shape);
        if shape.gap {
            self.err(
                SHAPE_GHOST_GAP,
                Some(at + F::DATA_SHAPE),
                format!("{tt}: ghost axes {:?} contain 0", shape.ghost()),
            );
        }
        // Memory range and bounds.
        let mut layout_ok = true;
        let span = (d.mem_end as u64).checked_sub(d.mem_start as u64);
        match span {
            None => {
                self.err(
                    TABLE_MEM_RANGE,
                    Some(at + F::MEM_START),
                    format!(
                        "{tt}: mem {}..{} ends before it starts (data_size {})",
                        d.mem_start, d.mem_end, d.data_size
                    ),
                );
                layout_ok = false;
            }
            Some(s) if d.data_size as u64 > s * 8 => {
                self.err(
                    TABLE_DATA_EXCEEDS_MEM,
                    Some(at + F::DATA_SIZE),
                    format!(
                        "{tt}: data_size {} > {} bytes of mem {}..{}",
                        d.data_size,
                        s * 8,
                        d.mem_start,
                        d.mem_end
                    ),
                );
                layout_ok = false;
            }
            _ => {}
        }
        let mut data_offset = None;
        match data_base {
            Some(b) => {
                let hs = b - loc.offset;
                let end = hs + d.mem_end as u64 * 8;
                if layout_ok && end > loc.size {
                    self.err(
                        TABLE_OUT_OF_BOUNDS,
                        Some(at + F::MEM_END),
                        format!("{tt}: data end {end} > dataset size {}", loc.size),
                    );
                    layout_ok = false;
                }
                data_offset = Some(b + d.mem_start as u64 * 8);
            }
            None => layout_ok = false,
        }
        // data_size against the shape.
        let mut size_ok = true;
        if let (false, Some(sz)) = (compressed, ti.prim.size()) {
            let want = (shape.elements() as u128) * sz as u128;
            if want != d.data_size as u128 {
                self.err(
                    TABLE_SHAPE_SIZE,
                    Some(at + F::DATA_SIZE),
                    format!("{tt}: shape {:?} x {sz} != data_size {}", shape.axes, d.data_size),
                );
                size_ok = false;
            }
        }
        let hint_ok = self.hint_rules(&tt, at, &d, ti.prim, ti.hint, &shape);
        Table {
            dataset: ds,
            index: k,
            desc_offset: at,
            desc: d,
            name,
            index_name,
            related_name,
            type_name,
            prim: ti.prim,
            hint: ti.hint,
            shape,
            compressed,
            data_offset,
            data_size: d.data_size as u64,
            layout_ok,
            size_ok,
            hint_ok,
            index_target: None,
            faults: self.errors_since(mark),
        }
    }

    /// Primitive, ghost-axis and index_name rules of the hint; true when they all hold.
    fn hint_rules(
        &mut self,
        tt: &str,
        at: u64,
        d: &crate::raw::Descriptor,
        prim: Prim,
        hint: Hint,
        shape: &Shape,
    ) -> bool {
        let mut ok = true;
        let indexing = matches!(hint, Hint::Index | Hint::Range);
        if indexing && d.index_name == 0 {
            self.err(
                INDEX_NAME_REQUIRED,
                Some(at + F::INDEX_NAME),
                format!("{tt}: {} needs index_name", hint.name()),
            );
            ok = false;
        } else if !indexing && d.index_name != 0 {
            self.err(
                INDEX_NAME_NOT_ALLOWED,
                Some(at + F::INDEX_NAME),
                format!("{tt}: index_name on hint {}", hint.value()),
            );
        }
        let (prim_ok, mut ghost_ok) = hint_allows(hint, prim, shape.ghost());
        if !prim_ok {
            self.err(
                HINT_BAD_PRIM,
                Some(at + F::TYPE_INFO),
                format!("{tt}: {} with primitive {}", hint.name(), prim.name()),
            );
            // The ghost-axis rules assume the hint's primitive: judge them only then.
            return false;
        }
        if shape.gap {
            return false;
        }
        let g = shape.ghost();
        if hint == Hint::Transform && (g == [6] || g == [12]) {
            self.err(
                HINT_TRANSFORM_FLAT,
                Some(at + F::DATA_SHAPE),
                format!("{tt}: transform with one ghost axis {g:?} (the reference crate's form; the spec wants two)"),
            );
            ghost_ok = true;
        }
        if !ghost_ok && hint == Hint::None {
            self.err(
                HINT_GHOST_ON_NONE,
                Some(at + F::DATA_SHAPE),
                format!(
                    "{tt}: NONE with ghost axes {g:?}, which the spec forbids (the reference writer's form of \
                     single values and arrays of arrays); read as shape {:?}",
                    shape.axes
                ),
            );
            ghost_ok = true;
        }
        if !ghost_ok && hint == Hint::Text && shape.dims == 1 && shape.axes == [0] {
            self.err(
                TEXT_EMPTY_LIST_NO_GHOST,
                Some(at + F::DATA_SHAPE),
                format!(
                    "{tt}: empty text list stored as shape [0, 0] without a ghost axis (the reference writer's form)"
                ),
            );
            ghost_ok = true;
        }
        if !ghost_ok {
            self.err(
                HINT_GHOST_DIMS,
                Some(at + F::DATA_SHAPE),
                format!("{tt}: {} with ghost axes {g:?}", hint.name()),
            );
            ok = false;
        }
        ok
    }

    /// Cycles in the dataset graph (DAGs are fine): iterative DFS from the root.
    fn find_cycles(&mut self) {
        let n = self.doc.datasets.len();
        if n == 0 {
            return;
        }
        // 0 = unvisited, 1 = on the stack, 2 = done.
        let mut state = vec![0u8; n];
        let mut stack: Vec<(usize, usize)> = vec![(0, 0)];
        state[0] = 1;
        let mut found = Vec::new();
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            let children = &self.doc.datasets[node].children;
            if *next < children.len() {
                let c = &children[*next];
                *next += 1;
                if let Some(t) = c.target {
                    match state[t] {
                        0 => {
                            state[t] = 1;
                            stack.push((t, 0));
                        }
                        1 => found.push((
                            c.entry_offset,
                            self.doc.datasets[node].path.clone(),
                            self.doc.datasets[t].path.clone(),
                        )),
                        _ => {}
                    }
                }
            } else {
                state[node] = 2;
                stack.pop();
            }
        }
        for (at, from, to) in found {
            self.err(
                DATASET_CYCLE,
                Some(at),
                format!("{from}: DATASET link back to {to} makes a cycle"),
            );
        }
    }

    /// related_name and index_name targets.
    fn cross_checks(&mut self) {
        let mut errs = Vec::new();
        let mut targets = Vec::new();
        for (di, ds) in self.doc.datasets.iter().enumerate() {
            let tag = format!("dataset@{:#x}", ds.location.offset);
            for t in &ds.tables {
                let tt = format!("{tag}.table[{}]", t.index);
                if let Some(r) = &t.related_name {
                    match ds.table(r) {
                        None => errs.push((
                            di,
                            t.index,
                            RELATED_MISSING,
                            t.desc_offset + F::RELATED_NAME,
                            format!("{tt}: related table {r:?} not found"),
                        )),
                        Some(o) => {
                            if o.shape.dims != t.shape.dims || o.shape.real() != t.shape.real() {
                                errs.push((
                                    di,
                                    t.index,
                                    RELATED_SHAPE,
                                    t.desc_offset + F::RELATED_NAME,
                                    format!(
                                        "{tt}: related {r:?} has real shape {:?}, this table {:?}",
                                        o.shape.real(),
                                        t.shape.real()
                                    ),
                                ));
                            }
                        }
                    }
                }
                if matches!(t.hint, Hint::Index | Hint::Range) && t.hint_ok {
                    let Some(target) = &t.index_name else {
                        continue;
                    };
                    // The same dataset first, then the parents on the path from the root.
                    let mut cur = Some(di);
                    let mut hit = None;
                    let mut guard = 0u32;
                    while let Some(c) = cur {
                        if let Some(o) = self.doc.datasets[c].table(target) {
                            hit = Some((c, o.index));
                            break;
                        }
                        cur = self.doc.datasets[c].parent;
                        guard += 1;
                        if guard > self.limits.max_depth.saturating_add(1) {
                            break;
                        }
                    }
                    match hit {
                        None => errs.push((
                            di,
                            t.index,
                            INDEX_TARGET_MISSING,
                            t.desc_offset + F::INDEX_NAME,
                            format!("{tt}: target {target:?} not found"),
                        )),
                        Some((c, o)) => {
                            let ot = &self.doc.datasets[c].tables[o];
                            if ot.shape.dims != 1 {
                                errs.push((
                                    di,
                                    t.index,
                                    INDEX_TARGET_DIM,
                                    t.desc_offset + F::INDEX_NAME,
                                    format!("{tt}: target {target:?} is {}-D, must be 1-D", ot.shape.dims),
                                ));
                            } else {
                                targets.push((di, t.index, (c, o)));
                            }
                        }
                    }
                }
            }
        }
        for (di, ti, code, at, m) in errs {
            let mark = self.doc.findings.len();
            self.err(code, Some(at), m);
            let faults = self.errors_since(mark);
            self.doc.datasets[di].tables[ti].faults.extend(faults);
        }
        for (di, ti, tg) in targets {
            self.doc.datasets[di].tables[ti].index_target = Some(tg);
        }
    }
}

const MAX_LINKS: u64 = 1 << 20;

/// Work budget for reads (dataset headers; table contents): overlapping datasets could make
/// a small file demand quadratic work, so reads beyond 4x the file size plus 64 MiB stop.
fn budget(file_len: u64) -> u64 {
    file_len.saturating_mul(4).saturating_add(64 << 20)
}

/// Does `hint` allow primitive `prim` and these ghost axes? `(prim ok, ghost axes ok)`.
/// (TRANSFORM's single 6 / 12 axis, a warning, is left to the caller.)
pub(crate) fn hint_allows(hint: Hint, prim: Prim, g: &[u32]) -> (bool, bool) {
    use Prim::*;
    let prims: &[Prim] = match hint {
        Hint::Text => &[U8, I8, U16, U32],
        Hint::Json => &[Custom],
        Hint::Dataset => &[U64],
        Hint::Index | Hint::Range => &[U8, U16, U32, U64],
        Hint::Coord => &[I8, I16, I32, I64, F32, F64],
        Hint::Line | Hint::Transform => &[F32, F64],
        Hint::Rgb => &[U8, F32],
        _ => &[],
    };
    let prim_ok = prims.is_empty() || prims.contains(&prim);
    let ghost_ok = match hint {
        Hint::None | Hint::Json => g.is_empty(),
        Hint::Text | Hint::Coord => g.len() == 1,
        Hint::Dataset | Hint::Range => g == [2],
        Hint::Rgb => g == [3] || g == [4],
        Hint::Transform => g.len() == 2,
        _ => true,
    };
    (prim_ok, ghost_ok)
}

fn entry_offset(base: u64, entry: u64) -> Option<u64> {
    base.checked_add(entry.checked_mul(16)?)
}

fn blank_dataset(location: FileOffset, path: String, parent: Option<usize>, depth: u32) -> Dataset {
    Dataset {
        location,
        path,
        parent,
        depth,
        header: Default::default(),
        check_ok: false,
        data_base: None,
        lookups: Vec::new(),
        tables: Vec::new(),
        children: Vec::new(),
        faults: Vec::new(),
    }
}

/// Read `len` bytes at `offset` in chunks of a multiple of `record` bytes (at least one record)
/// and hand each to `f(absolute_offset, bytes)`; `f` returns false to stop early.
pub fn for_each_chunk(
    input: &Input,
    offset: u64,
    len: u64,
    record: usize,
    mut f: impl FnMut(u64, &[u8]) -> bool,
) -> rasterpack_common::Result<()> {
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

/// A table's data as the content checks see it: the stored bytes in the input, or bytes
/// already in memory (read by the model, or decoded from a compressed stream).
pub(crate) enum TableData<'a> {
    Stored {
        input: &'a Input,
        offset: u64,
        len: u64,
    },
    /// `at`: absolute offset of byte 0 when `exact`; for decoded data every finding points at
    /// `at` (the start of the compressed stream), since decoded bytes have no file position.
    Mem {
        bytes: &'a [u8],
        at: u64,
        exact: bool,
    },
}

impl TableData<'_> {
    fn len(&self) -> u64 {
        match self {
            TableData::Stored { len, .. } => *len,
            TableData::Mem { bytes, .. } => bytes.len() as u64,
        }
    }

    /// Absolute offset of the byte `rel` bytes into the data.
    fn at(&self, rel: u64) -> u64 {
        match *self {
            TableData::Stored { offset, .. } => offset + rel,
            TableData::Mem { at, exact: true, .. } => at + rel,
            TableData::Mem { at, .. } => at,
        }
    }

    /// Chunks of whole records: `f(relative offset, bytes)`, false to stop.
    fn chunks(&self, record: usize, mut f: impl FnMut(u64, &[u8]) -> bool) -> rasterpack_common::Result<()> {
        match *self {
            TableData::Stored { input, offset, len } => {
                for_each_chunk(input, offset, len, record, |o, c| f(o - offset, c))
            }
            TableData::Mem { bytes, .. } => {
                let step = (CHUNK / record.max(1)).max(1) * record.max(1);
                for (k, c) in bytes.chunks(step).enumerate() {
                    if !f((k * step) as u64, c) {
                        break;
                    }
                }
                Ok(())
            }
        }
    }

    fn whole(&self, limits: &Limits) -> rasterpack_common::Result<Cow<'_, [u8]>> {
        match *self {
            TableData::Stored { input, offset, len } => match input.as_bytes() {
                Some(all) => rasterpack_common::slice_at(all, offset, len, "table data").map(Cow::Borrowed),
                None => input.read_vec(offset, len, "table data", limits).map(Cow::Owned),
            },
            TableData::Mem { bytes, .. } => Ok(Cow::Borrowed(bytes)),
        }
    }
}

/// Decode a SimpleU32-compressed table (scheme 17) whose stream starts at `base`: the output
/// is bounded by the stream (at most 16 words per byte) and by `limits` before it is allocated.
pub(crate) fn decompress(input: &Input, t: &Table, base: u64, limits: &Limits) -> rasterpack_common::Result<Vec<u8>> {
    let words = t.shape.elements();
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
    let out_len = words * 4;
    if out_len > limits.max_array_bytes {
        return Err(Error::limit(
            "limit.array",
            Some(base),
            format!("decoded table of {out_len} bytes"),
        ));
    }
    let n = limits.check_alloc(out_len, "decoded table", Some(base))?;
    let stream = TableData::Stored {
        input,
        offset: base,
        len: t.data_size,
    };
    let stream = stream.whole(limits)?;
    let mut out = vec![0u8; n];
    compress::decode_simple_u32(&stream, &mut out, true).map_err(|e| {
        Error::invalid(
            COMPRESS_CORRUPT,
            base + e.offset,
            format!("table {}: SimpleU32 stream: {}", t.display_name(), e.message),
        )
    })?;
    Ok(out)
}

/// Content checks of every readable table: text, JSON, INDEX and RANGE values, compressed
/// streams; the other tables are read through once so an unreadable file shows.
pub fn check_contents(input: &Input, limits: &Limits, doc: &Document, f: &mut Findings) {
    check_contents_upto(input, limits, doc, u64::MAX, f);
}

/// [`check_contents`] of the tables whose data is at most `max_table` bytes (stored and
/// decoded); the others are counted and reported as one info finding (`inspect` checks the
/// small tables only).
pub(crate) fn check_contents_upto(input: &Input, limits: &Limits, doc: &Document, max_table: u64, f: &mut Findings) {
    let mut spent = 0u64;
    let mut skipped = 0u64;
    for ds in &doc.datasets {
        let tag = format!("dataset@{:#x}", ds.location.offset);
        for t in &ds.tables {
            if !t.readable() || matches!(t.prim, Prim::Reserved(_)) {
                continue;
            }
            let Some(base) = t.data_offset else { continue };
            // A compressed stream decodes to at most 16 words per byte: a larger shape is
            // refused by `decompress` before anything is allocated, so it costs nothing here.
            let decoded = match t.compression() {
                Compression::SimpleU32 => t
                    .decoded_len()
                    .min(t.data_size.saturating_mul(4 * compress::MAX_WORDS_PER_BYTE)),
                _ => 0,
            };
            if t.data_size.max(decoded) > max_table {
                skipped += 1;
                continue;
            }
            let tt = format!("{tag}.table[{}] ({})", t.index, t.display_name());
            spent = spent.saturating_add(t.data_size.saturating_add(decoded));
            if spent > budget(doc.file_len) {
                push(
                    f,
                    LIMIT_WORK,
                    Some(base),
                    format!("{tt}: table contents read exceed the work budget; the rest is not checked"),
                );
                return;
            }
            let r = match t.compression() {
                Compression::SimpleU32 => match decompress(input, t, base, limits) {
                    Ok(bytes) => check_table(
                        &TableData::Mem {
                            bytes: &bytes,
                            at: base,
                            exact: false,
                        },
                        doc,
                        t,
                        limits,
                        &tt,
                        f,
                    ),
                    Err(e) => Err(e),
                },
                _ => {
                    let data = TableData::Stored {
                        input,
                        offset: base,
                        len: t.data_size,
                    };
                    check_table(&data, doc, t, limits, &tt, f).and_then(|()| match t.hint {
                        // Tables without content rules are read through once so an unreadable
                        // file shows.
                        Hint::Text | Hint::Json | Hint::Index | Hint::Range | Hint::Dataset if t.hint_ok => Ok(()),
                        _ => data.chunks(8, |_, _| true),
                    })
                }
            };
            if let Err(e) = r {
                let fallback = if e.kind == rasterpack_common::ErrorKind::LimitExceeded {
                    LIMIT_WORK
                } else {
                    IO
                };
                let code = codes::CODES.iter().find(|c| c.0 == e.code).map_or(fallback, |c| c.0);
                push(f, code, e.offset.or(Some(base)), format!("{tt}: {}", e.message));
            }
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

/// The content rules of one table (text, JSON, INDEX / RANGE values), on its stored or
/// decoded bytes: shared by `validate` and the read path.
pub(crate) fn check_table(
    data: &TableData<'_>,
    doc: &Document,
    t: &Table,
    limits: &Limits,
    tt: &str,
    f: &mut Findings,
) -> rasterpack_common::Result<()> {
    if !t.hint_ok {
        return Ok(());
    }
    match t.hint {
        Hint::Text => check_text(data, t, tt, f),
        Hint::Json => {
            if data.len() > limits.max_text {
                push(
                    f,
                    JSON_TOO_LARGE,
                    Some(data.at(0)),
                    format!("{tt}: JSON of {} bytes exceeds the text limit", data.len()),
                );
                Ok(())
            } else {
                data.whole(limits).map(|b| check_json(t, &b, data.at(0), tt, f))
            }
        }
        Hint::Index | Hint::Range => match t.index_target {
            Some((d, o)) => {
                let len = doc
                    .datasets
                    .get(d)
                    .and_then(|ds| ds.tables.get(o))
                    .and_then(|x| x.shape.axes.first().copied())
                    .unwrap_or(0) as u64;
                check_indices(data, t, len, tt, f)
            }
            None => Ok(()),
        },
        _ => Ok(()),
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

fn check_indices(
    data: &TableData<'_>,
    t: &Table,
    target_len: u64,
    tt: &str,
    f: &mut Findings,
) -> rasterpack_common::Result<()> {
    let sz = t.prim.size().unwrap_or(1) as usize;
    let range = t.hint == Hint::Range;
    let rec = if range { 2 * sz } else { sz };
    let (mut bad_index, mut inverted, mut beyond) = (None, None, None);
    let (mut n_bad, mut n_inv, mut n_beyond) = (0u64, 0u64, 0u64);
    data.chunks(rec, |off, chunk| {
        if !range {
            // Fast path: the maximum first, details only when something is out of range.
            let max = match t.prim {
                Prim::U8 => chunk.iter().copied().max().unwrap_or(0) as u64,
                Prim::U16 => chunk
                    .chunks_exact(2)
                    .map(|c| u16::from_le_bytes([c[0], c[1]]))
                    .max()
                    .unwrap_or(0) as u64,
                Prim::U32 => chunk
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .max()
                    .unwrap_or(0) as u64,
                _ => chunk
                    .chunks_exact(8)
                    .map(|c| read_uint(Prim::U64, c))
                    .max()
                    .unwrap_or(0),
            };
            if max >= target_len {
                for (k, c) in chunk.chunks_exact(sz).enumerate() {
                    let v = read_uint(t.prim, c);
                    if v >= target_len {
                        n_bad += 1;
                        bad_index.get_or_insert((off + (k * sz) as u64, v));
                    }
                }
            }
        } else {
            for (k, c) in chunk.chunks_exact(rec).enumerate() {
                let (s, e) = (read_uint(t.prim, c), read_uint(t.prim, &c[sz..]));
                let at = off + (k * rec) as u64;
                if s > e {
                    n_inv += 1;
                    inverted.get_or_insert((at, s, e));
                }
                if s > target_len || e > target_len {
                    n_beyond += 1;
                    beyond.get_or_insert((at, s, e));
                }
            }
        }
        true
    })?;
    if let Some((at, v)) = bad_index {
        push(
            f,
            INDEX_OUT_OF_RANGE,
            Some(data.at(at)),
            format!("{tt}: {n_bad} index value(s) >= target length {target_len}, first {v}"),
        );
    }
    if let Some((at, s, e)) = inverted {
        push(
            f,
            RANGE_INVERTED,
            Some(data.at(at)),
            format!("{tt}: {n_inv} range(s) with start > end, first ({s},{e})"),
        );
    }
    if let Some((at, s, e)) = beyond {
        push(
            f,
            RANGE_OUT_OF_RANGE,
            Some(data.at(at)),
            format!("{tt}: {n_beyond} range(s) beyond target length {target_len}, first ({s},{e})"),
        );
    }
    Ok(())
}

/// Text validation, one string at a time (scalars stream; list rows are checked row by row).
fn check_text(data: &TableData<'_>, t: &Table, tt: &str, f: &mut Findings) -> rasterpack_common::Result<()> {
    let unit = t.prim.size().unwrap_or(1) as usize;
    let scalar = t.shape.real().is_empty();
    let width = t.shape.ghost().first().copied().unwrap_or(0) as usize * unit;
    let mut bad: Option<(u64, String)> = None;
    if scalar {
        let mut v = TextCheck::new(t.prim);
        data.chunks(unit.max(1), |off, chunk| match v.feed(chunk) {
            Ok(()) => true,
            Err((rel, m)) => {
                bad = Some((off + rel, m));
                false
            }
        })?;
        if bad.is_none() {
            if let Err((_, m)) = v.finish() {
                bad = Some((data.len(), m));
            }
        }
    } else if width > 0 {
        data.chunks(width, |off, chunk| {
            for (k, row) in chunk.chunks(width).enumerate() {
                let mut v = TextCheck::new(t.prim);
                let r = v
                    .feed(row)
                    .and_then(|_| v.finish().map_err(|(_, m)| (row.len() as u64, m)));
                if let Err((rel, m)) = r {
                    bad = Some((off + (k * width) as u64 + rel, m));
                    return false;
                }
            }
            true
        })?;
    }
    if let Some((at, m)) = bad {
        push(f, TEXT_INVALID, Some(data.at(at)), format!("{tt}: {m}"));
    }
    Ok(())
}

/// Incremental strict decoder for UTF-8 / UTF-16LE / UTF-32LE; feeds must be whole code units
/// for UTF-16/32 (the chunking guarantees it).
pub(crate) struct TextCheck {
    prim: Prim,
    carry: Vec<u8>,
    high: bool,
    pos: u64,
}

impl TextCheck {
    pub(crate) fn new(prim: Prim) -> Self {
        TextCheck {
            prim,
            carry: Vec::new(),
            high: false,
            pos: 0,
        }
    }

    /// Errors carry the offset relative to the start of this feed.
    pub(crate) fn feed(&mut self, b: &[u8]) -> Result<(), (u64, String)> {
        let start = self.pos;
        self.pos += b.len() as u64;
        match self.prim {
            Prim::U8 | Prim::I8 => {
                let mut buf;
                let data: &[u8] = if self.carry.is_empty() {
                    b
                } else {
                    buf = std::mem::take(&mut self.carry);
                    buf.extend_from_slice(b);
                    &buf
                };
                let back = data.len() as u64 - b.len() as u64;
                match std::str::from_utf8(data) {
                    Ok(_) => Ok(()),
                    Err(e) => match e.error_len() {
                        None => {
                            self.carry = data[e.valid_up_to()..].to_vec();
                            Ok(())
                        }
                        Some(_) => Err((
                            (e.valid_up_to() as u64).saturating_sub(back),
                            format!("invalid UTF-8 at byte {}", start + e.valid_up_to() as u64 - back),
                        )),
                    },
                }
            }
            Prim::U16 => {
                for (k, c) in b.chunks_exact(2).enumerate() {
                    let u = u16::from_le_bytes([c[0], c[1]]);
                    let rel = (k * 2) as u64;
                    match u {
                        0xD800..=0xDBFF => {
                            if self.high {
                                return Err((rel, "unpaired UTF-16 high surrogate".into()));
                            }
                            self.high = true;
                        }
                        0xDC00..=0xDFFF => {
                            if !self.high {
                                return Err((rel, format!("unpaired UTF-16 low surrogate {u:#06x}")));
                            }
                            self.high = false;
                        }
                        _ => {
                            if self.high {
                                return Err((rel, "unpaired UTF-16 high surrogate".into()));
                            }
                        }
                    }
                }
                Ok(())
            }
            Prim::U32 => {
                for (k, c) in b.chunks_exact(4).enumerate() {
                    let u = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                    if char::from_u32(u).is_none() {
                        return Err(((k * 4) as u64, format!("{u:#x} is not a Unicode scalar value")));
                    }
                }
                Ok(())
            }
            _ => Err((0, "not a text primitive".into())),
        }
    }

    pub(crate) fn finish(&mut self) -> Result<(), (u64, String)> {
        if !self.carry.is_empty() {
            return Err((0, "UTF-8 ends inside a multi-byte sequence".into()));
        }
        if self.high {
            return Err((0, "UTF-16 ends with an unpaired high surrogate".into()));
        }
        Ok(())
    }
}

/// Decode one string (strict). Errors carry the byte offset relative to `b`.
fn decode_one(prim: Prim, b: &[u8]) -> Result<String, (u64, String)> {
    match prim {
        Prim::U8 | Prim::I8 => std::str::from_utf8(b)
            .map(str::to_string)
            .map_err(|e| (e.valid_up_to() as u64, format!("invalid UTF-8: {e}"))),
        Prim::U16 => {
            let units: Vec<u16> = b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
            let mut s = String::with_capacity(units.len());
            let mut pos = 0u64;
            for r in char::decode_utf16(units.iter().copied()) {
                match r {
                    Ok(c) => {
                        pos += 2 * c.len_utf16() as u64;
                        s.push(c);
                    }
                    Err(e) => {
                        return Err((
                            pos,
                            format!("unpaired UTF-16 surrogate {:#06x}", e.unpaired_surrogate()),
                        ))
                    }
                }
            }
            Ok(s)
        }
        Prim::U32 => {
            let mut s = String::with_capacity(b.len() / 4);
            for (k, c) in b.chunks_exact(4).enumerate() {
                let u = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                match char::from_u32(u) {
                    Some(ch) => s.push(ch),
                    None => return Err(((k * 4) as u64, format!("{u:#x} is not a Unicode scalar value"))),
                }
            }
            Ok(s)
        }
        _ => Err((0, "not a text primitive".into())),
    }
}

/// Decode a TEXT table's bytes: a scalar verbatim, list items with trailing NULs stripped.
pub(crate) fn decode_text(t: &Table, b: &[u8]) -> Result<Text, (u64, String)> {
    let unit = t.prim.size().unwrap_or(1) as usize;
    if t.shape.real().is_empty() {
        return decode_one(t.prim, b).map(Text::Scalar);
    }
    let width = t.shape.ghost().first().copied().unwrap_or(0) as usize * unit;
    let rows = t.shape.records() as usize;
    let mut out = Vec::with_capacity(rows.min(b.len().max(1)));
    if width == 0 {
        return Ok(Text::List(vec![String::new(); rows.min(1 << 20)]));
    }
    for (k, row) in b.chunks(width).enumerate() {
        // Trailing NUL code units are padding.
        let mut end = row.len();
        while end >= unit && row[end - unit..end].iter().all(|&x| x == 0) {
            end -= unit;
        }
        out.push(decode_one(t.prim, &row[..end]).map_err(|(rel, m)| ((k * width) as u64 + rel, m))?);
    }
    Ok(Text::List(out))
}

/// JSON: valid UTF-8 JSON; an N-D table holds nested arrays of exactly its shape.
fn check_json(t: &Table, b: &[u8], base: u64, tt: &str, f: &mut Findings) {
    let v: Value = match serde_json::from_slice(b) {
        Ok(v) => v,
        Err(e) => {
            push(f, JSON_INVALID, Some(base), format!("{tt}: {e}"));
            return;
        }
    };
    if let Err(m) = json_shape(&v, t.shape.real()) {
        push(f, JSON_SHAPE, Some(base), format!("{tt}: {m}"));
    }
}

pub(crate) fn json_shape(v: &Value, shape: &[u32]) -> Result<(), String> {
    let Some((&n, rest)) = shape.split_first() else {
        return Ok(());
    };
    match v {
        Value::Array(a) if a.len() as u64 == n as u64 => a.iter().try_for_each(|x| json_shape(x, rest)),
        Value::Array(a) => Err(format!("JSON array of {} items where the shape wants {n}", a.len())),
        _ => Err(format!("JSON value where the shape wants an array of {n}")),
    }
}
