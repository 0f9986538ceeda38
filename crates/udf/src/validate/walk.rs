//! The structural walk: the file header, then the dataset graph breadth first from the root
//! (each dataset is read by [`super::dataset`]), then the rules that span datasets (cycles,
//! `related_name` and `index_name` targets).
//!
//! Every loop here is linear in what it walks (name lookups go through hash maps), so the walk
//! of a file with many entries costs O(entries); [`Walker::work`] counts the steps so a test can
//! hold it to that.

use std::collections::{HashMap, VecDeque};

use rasterpack_common::{Finding, Findings, Input, Limits, Severity, LISTED_PER_CODE};

use super::push;
use crate::codes::*;
use crate::document::{UdfDataset, UdfDocument};
use crate::parse;
use crate::raw::{desc_field as F, FileOffset, Hint, DATASET_STATIC_SIZE, FILE_HEADER_SIZE, MAGIC};

/// The structural walk: everything but the content of non-DATASET tables.
pub fn walk(input: &Input, limits: &Limits) -> UdfDocument {
    let mut w = Walker::new(input, limits);
    w.run();
    w.doc
}

pub(super) struct Walker<'a> {
    pub(super) input: &'a Input,
    pub(super) limits: &'a Limits,
    pub(super) file_len: u64,
    /// `doc.findings` lists every finding of the stage under way (a dataset; the rules across
    /// datasets): the stage attributes its errors to tables by position. Between stages they
    /// move here, listed at most [`LISTED_PER_CODE`] per code.
    pub(super) doc: UdfDocument,
    kept: Findings,
    by_loc: HashMap<FileOffset, usize>,
    /// DATASET links read in the whole file.
    pub(super) edges: u64,
    /// Bytes of dataset headers and DATASET tables read, against the work budget.
    pub(super) header_bytes: u64,
    /// Bytes of descriptors and lookup entries decoded, against the entry budget.
    pub(super) entry_bytes: u64,
    /// Steps taken (entries visited, names looked up): what the walk's cost is measured in.
    pub(super) work: u64,
}

/// The file id: printable ASCII, NUL padded (no printable byte after a NUL).
pub(super) fn id_ok(id: &[u8; 4]) -> bool {
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

impl<'a> Walker<'a> {
    pub(super) fn new(input: &'a Input, limits: &'a Limits) -> Walker<'a> {
        Walker {
            input,
            limits,
            file_len: input.len(),
            doc: UdfDocument {
                file_len: input.len(),
                ..UdfDocument::default()
            },
            kept: Findings::listing_at_most(LISTED_PER_CODE),
            by_loc: HashMap::new(),
            edges: 0,
            header_bytes: 0,
            entry_bytes: 0,
            work: 0,
        }
    }

    pub(super) fn err(&mut self, code: &'static str, offset: Option<u64>, msg: String) {
        push(&mut self.doc.findings, code, offset, msg);
    }

    /// The error findings made since `mark` (a length of `doc.findings`), minus the limit
    /// ones (a limit stops the walk; it says nothing about the bytes already read).
    pub(super) fn errors_since(&self, mark: usize) -> Vec<Finding> {
        self.doc
            .findings
            .since(mark)
            .iter()
            .filter(|f| {
                f.severity == Severity::Error
                    && !matches!(f.code.as_str(), LIMIT_WORK | DATASET_TOO_MANY | DATASET_TOO_DEEP)
            })
            .cloned()
            .collect()
    }

    pub(super) fn run(&mut self) {
        if let Some(root) = self.file_header() {
            if self.check_offset(root, 0x10, || "root".to_string()) {
                self.bfs(root);
            }
        }
        self.end_stage();
        self.find_cycles();
        self.cross_checks();
        self.end_stage();
        self.doc.findings = std::mem::take(&mut self.kept);
    }

    /// Move the findings of the stage that ended into the capped list.
    fn end_stage(&mut self) {
        let stage = std::mem::take(&mut self.doc.findings);
        self.kept.extend(stage);
    }

    /// The file header's rules; the root's location when the header could be read.
    fn file_header(&mut self) -> Option<FileOffset> {
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
            return None;
        }
        let Ok(hb) = <[u8; FILE_HEADER_SIZE]>::try_from(head.as_slice()) else {
            self.err(
                TRUNCATED,
                Some(0),
                format!("file is {} bytes, the UDF header needs 64", self.file_len),
            );
            return None;
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
        Some(h.root)
    }

    /// Rules of a file offset; true when it points at a dataset worth reading.
    pub(super) fn check_offset(&mut self, fo: FileOffset, at: u64, what: impl Fn() -> String) -> bool {
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

    /// Read every dataset reachable from the root, breadth first; a dataset reached again (a
    /// DAG) is read once.
    fn bfs(&mut self, root: FileOffset) {
        let mut queue = VecDeque::new();
        self.by_loc.insert(root, 0);
        self.doc.datasets.push(UdfDataset::blank(root, "root".into(), None, 0));
        queue.push_back(0usize);
        while let Some(i) = queue.pop_front() {
            self.load_dataset(i);
            self.end_stage();
            if !self.follow_links(i, &mut queue) {
                return;
            }
        }
    }

    /// Resolve the DATASET links of dataset `i` to datasets, queueing the new ones. False when
    /// the dataset count limit stops the walk.
    fn follow_links(&mut self, i: usize, queue: &mut VecDeque<usize>) -> bool {
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
            self.work += 1;
            let target = match self.by_loc.get(&loc) {
                Some(&t) => t,
                None => {
                    let at = self.doc.datasets[i].children[k].entry_offset;
                    if depth > self.limits.max_depth {
                        self.err(
                            DATASET_TOO_DEEP,
                            Some(at),
                            format!("{path}: dataset graph deeper than {}", self.limits.max_depth),
                        );
                        continue;
                    }
                    if self.doc.datasets.len() as u64 >= self.limits.max_entries {
                        self.err(
                            DATASET_TOO_MANY,
                            Some(at),
                            format!("more than {} datasets", self.limits.max_entries),
                        );
                        return false;
                    }
                    let t = self.doc.datasets.len();
                    self.by_loc.insert(loc, t);
                    self.doc.datasets.push(UdfDataset::blank(loc, path, Some(i), depth));
                    queue.push_back(t);
                    t
                }
            };
            self.doc.datasets[i].children[k].target = Some(target);
        }
        true
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
            self.work += 1;
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

    /// `related_name` and `index_name` targets, each looked up by name in constant time.
    fn cross_checks(&mut self) {
        let mut errs = Vec::new();
        let mut targets = Vec::new();
        let mut work = 0u64;
        for (di, ds) in self.doc.datasets.iter().enumerate() {
            let tag = format!("dataset@{:#x}", ds.location.offset);
            for t in &ds.tables {
                work += 1;
                let tt = format!("{tag}.table[{}]", t.index);
                if let Some(r) = &t.related_name {
                    if let Some(e) = related_error(ds, t, r, &tt) {
                        errs.push((di, t.index, e.0, e.1, e.2));
                    }
                }
                if !matches!(t.hint, Hint::Index | Hint::Range) || !t.hint_ok {
                    continue;
                }
                let Some(target) = &t.index_name else {
                    continue;
                };
                // The same dataset first, then the parents on the path from the root.
                let mut cur = Some(di);
                let mut hit = None;
                let mut guard = 0u32;
                while let Some(c) = cur {
                    work += 1;
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
                let at = t.desc_offset + F::INDEX_NAME;
                match hit {
                    None => errs.push((
                        di,
                        t.index,
                        INDEX_TARGET_MISSING,
                        at,
                        format!("{tt}: target {target:?} not found"),
                    )),
                    Some((c, o)) => {
                        let ot = &self.doc.datasets[c].tables[o];
                        if ot.shape.dims != 1 {
                            errs.push((
                                di,
                                t.index,
                                INDEX_TARGET_DIM,
                                at,
                                format!("{tt}: target {target:?} is {}-D, must be 1-D", ot.shape.dims),
                            ));
                        } else {
                            targets.push((di, t.index, (c, o)));
                        }
                    }
                }
            }
        }
        self.work += work;
        for (di, ti, code, at, m) in errs {
            let mark = self.doc.findings.len();
            self.err(code, Some(at), m);
            let faults = self.errors_since(mark);
            self.doc.datasets[di].tables[ti].add_faults(faults);
        }
        for (di, ti, tg) in targets {
            self.doc.datasets[di].tables[ti].index_target = Some(tg);
        }
    }
}

/// The `related_name` rule of table `t` of `ds`: the sibling exists and has the same real axes.
fn related_error(
    ds: &UdfDataset,
    t: &crate::document::UdfTable,
    r: &str,
    tt: &str,
) -> Option<(&'static str, u64, String)> {
    let at = t.desc_offset + F::RELATED_NAME;
    match ds.table(r) {
        None => Some((RELATED_MISSING, at, format!("{tt}: related table {r:?} not found"))),
        Some(o) if o.shape.dims != t.shape.dims || o.shape.real() != t.shape.real() => Some((
            RELATED_SHAPE,
            at,
            format!(
                "{tt}: related {r:?} has real shape {:?}, this table {:?}",
                o.shape.real(),
                t.shape.real()
            ),
        )),
        Some(_) => None,
    }
}
