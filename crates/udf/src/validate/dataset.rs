//! One dataset, stage by stage: the static header, the sizes it declares, the string lookup,
//! the descriptors, repeated names, and the DATASET links. Each stage records its findings and
//! attributes the errors to what they make unreadable (the dataset, or single tables).

use std::collections::HashMap;

use rasterpack_common::Finding;

use super::content::for_each_chunk;
use super::table::DescAt;
use super::walk::{id_ok, Walker};
use super::{budget, entry_budget, MAX_LINKS};
use crate::codes::*;
use crate::document::{ChildLink, Lookup, UdfCompression, UdfTable};
use crate::parse;
use crate::raw::{DatasetHeader, FileOffset, Hint, DATASET_CHECK, DATASET_STATIC_SIZE, DESCRIPTOR_SIZE, LOOKUP_SIZE};

/// What the string lookup resolves: the string of each key (the first entry wins for a
/// repeated key, already an error), and the errors of each key's entries with their position.
#[derive(Default)]
pub(super) struct Names {
    strings: HashMap<u32, Option<String>>,
    faults: HashMap<u32, Vec<(usize, Finding)>>,
}

impl Names {
    pub(super) fn get(&self, key: u32) -> Option<&Option<String>> {
        self.strings.get(&key)
    }
}

impl Walker<'_> {
    /// Read and judge dataset `i`.
    pub(super) fn load_dataset(&mut self, i: usize) {
        let loc = self.doc.datasets[i].location;
        let tag = format!("dataset@{:#x}", loc.offset);
        let Some(h) = self.read_static_header(i, &tag) else {
            return;
        };
        let Some(needed) = self.check_header_sizes(i, &tag, &h) else {
            return;
        };
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
        let (lookups, names) = self.read_lookups(&tag, loc, &h, &body);
        self.doc.datasets[i].lookups = lookups;
        let mut tables = self.read_descriptors(&tag, i, &h, &body, &names);
        self.mark_duplicate_names(&tag, &mut tables);
        let children = self.read_dataset_links(&tag, &mut tables);
        self.doc.datasets[i].set_tables(tables);
        self.doc.datasets[i].children = children;
    }

    /// The static header: check value, checksum, id, reserved. `None` when the check value is
    /// wrong (nothing else of the dataset is read) or the header cannot be read.
    fn read_static_header(&mut self, i: usize, tag: &str) -> Option<DatasetHeader> {
        let loc = self.doc.datasets[i].location;
        let mut sb = [0u8; DATASET_STATIC_SIZE];
        if let Err(e) = self.input.read_at(loc.offset, &mut sb, "dataset header") {
            self.err(IO, Some(loc.offset), format!("{tag}: {e}"));
            return None;
        }
        let h = parse::dataset_header(&sb);
        self.doc.datasets[i].header = h;
        if h.check != DATASET_CHECK {
            self.err(
                DATASET_BAD_CHECK,
                Some(loc.offset),
                format!("{tag}: check {:#010x}, expected {DATASET_CHECK:#010x}", h.check),
            );
            return None;
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
        Some(h)
    }

    /// `header_size` against what the header holds and the dataset's size; where the data
    /// starts. Returns the header's byte length when it can be read (inside the dataset and
    /// within the work budget).
    fn check_header_sizes(&mut self, i: usize, tag: &str, h: &DatasetHeader) -> Option<u64> {
        let loc = self.doc.datasets[i].location;
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
            return None;
        }
        self.header_bytes = self.header_bytes.saturating_add(needed);
        self.entry_bytes = self
            .entry_bytes
            .saturating_add(DESCRIPTOR_SIZE as u64 * h.descs_len as u64 + LOOKUP_SIZE as u64 * h.lookup_len as u64);
        if self.header_bytes > budget(self.file_len) || self.entry_bytes > entry_budget(self.file_len) {
            self.err(
                LIMIT_WORK,
                Some(loc.offset),
                format!("{tag}: dataset headers read exceed the work budget; not read"),
            );
            return None;
        }
        Some(needed)
    }

    /// The lookup entries after the descriptors: hash 0, repeated hashes, bounds, UTF-8.
    fn read_lookups(&mut self, tag: &str, loc: FileOffset, h: &DatasetHeader, body: &[u8]) -> (Vec<Lookup>, Names) {
        let descs_end = DESCRIPTOR_SIZE * h.descs_len as usize;
        let strings = body
            .get(descs_end + LOOKUP_SIZE * h.lookup_len as usize..)
            .unwrap_or(&[]);
        let lookup_base = loc.offset + (DATASET_STATIC_SIZE + descs_end) as u64;
        let mut lookups = Vec::with_capacity(h.lookup_len as usize);
        let mut seen: HashMap<u32, usize> = HashMap::new();
        let mut names = Names::default();
        for k in 0..h.lookup_len as usize {
            self.work += 1;
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
            if e.hash != 0 {
                // Errors of a lookup entry concern the tables whose names use its hash.
                let faults = self.errors_since(entry_mark);
                if !faults.is_empty() {
                    let list = names.faults.entry(e.hash).or_default();
                    list.extend(faults.into_iter().map(|f| (k, f)));
                }
                names.strings.entry(e.hash).or_insert_with(|| string.clone());
            }
            lookups.push(Lookup {
                hash: e.hash,
                offset: e.offset,
                len: e.len,
                string,
                entry_offset: at,
            });
        }
        (lookups, names)
    }

    /// Each descriptor's own rules, plus the errors of the lookup entries its names use.
    fn read_descriptors(
        &mut self,
        tag: &str,
        i: usize,
        h: &DatasetHeader,
        body: &[u8],
        names: &Names,
    ) -> Vec<UdfTable> {
        let loc = self.doc.datasets[i].location;
        let data_base = self.doc.datasets[i].data_base;
        let mut tables = Vec::with_capacity(h.descs_len as usize);
        for k in 0..h.descs_len as usize {
            self.work += 1;
            let at = loc.offset + (DATASET_STATIC_SIZE + k * DESCRIPTOR_SIZE) as u64;
            let d = parse::descriptor(body.get(k * DESCRIPTOR_SIZE..).unwrap_or(&[]));
            let here = DescAt {
                tag,
                ds: i,
                loc,
                data_base,
                k,
                at,
            };
            let mut t = self.table(&here, d, names);
            let mut keys = [d.key_name, d.index_name, d.related_name, d.type_name];
            keys.sort_unstable();
            let mut inherited: Vec<&(usize, Finding)> = Vec::new();
            for (n, key) in keys.iter().enumerate() {
                self.work += 1;
                if n > 0 && keys[n - 1] == *key {
                    continue;
                }
                if let Some(list) = names.faults.get(key) {
                    inherited.extend(list);
                }
            }
            // In lookup order, as the entries were judged.
            inherited.sort_by_key(|(k, _)| *k);
            t.add_faults(inherited.into_iter().map(|(_, f)| f.clone()));
            tables.push(t);
        }
        tables
    }

    /// Two tables with one name: an error, and both tables are ambiguous.
    fn mark_duplicate_names(&mut self, tag: &str, tables: &mut [UdfTable]) {
        let mut by_name: HashMap<&str, usize> = HashMap::new();
        let mut dups = Vec::new();
        for t in tables.iter() {
            self.work += 1;
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
        for (prev, k, at, m) in dups {
            let mark = self.doc.findings.len();
            self.err(TABLE_DUPLICATE_NAME, Some(at), m);
            for f in self.errors_since(mark) {
                tables[prev].add_faults([f.clone()]);
                tables[k].add_faults([f]);
            }
        }
    }

    /// The entries of every sound DATASET table, checked as file offsets; an invalid entry is
    /// a fault of its table.
    fn read_dataset_links(&mut self, tag: &str, tables: &mut [UdfTable]) -> Vec<ChildLink> {
        let mut children = Vec::new();
        for t in tables.iter_mut() {
            if t.hint == Hint::Dataset && t.hint_ok && t.readable() && t.compression() == UdfCompression::None {
                let mark = self.doc.findings.len();
                self.read_links(tag, t, &mut children);
                let faults = self.errors_since(mark);
                t.add_faults(faults);
            }
        }
        children
    }

    fn read_links(&mut self, tag: &str, t: &UdfTable, out: &mut Vec<ChildLink>) {
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
            self.work += 1;
            let at = base.checked_add(entry.saturating_mul(16)).unwrap_or(base);
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
}
