//! Writing: a builder of datasets and datatables. The writer hashes names (DJB2-xor, seed
//! 3581), sorts the lookups by hash, pads strings and data to 8 bytes and datasets to 16,
//! computes every offset, and refuses anything that would not validate.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;

use rasterpack_common::{Error, Input, Limits, Result};
use serde_json::Value;

use crate::model::Element;
use crate::parse::{encode_type_info, Shape};
use crate::raw::{
    name_hash, Hint, Prim, DATASET_CHECK, DATASET_STATIC_SIZE, DESCRIPTOR_SIZE, FILE_HEADER_SIZE, LOOKUP_SIZE, MAGIC,
};

/// Handle of a dataset inside a [`UdfWriter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DatasetId(usize);

/// Text encodings of TEXT tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `u8` code units.
    Utf8,
    /// `i8` code units (also UTF-8).
    Utf8Signed,
    /// `u16` little-endian.
    Utf16,
    /// `u32` little-endian.
    Utf32,
}

impl Encoding {
    fn prim(self) -> Prim {
        match self {
            Encoding::Utf8 => Prim::U8,
            Encoding::Utf8Signed => Prim::I8,
            Encoding::Utf16 => Prim::U16,
            Encoding::Utf32 => Prim::U32,
        }
    }

    fn units(self, s: &str) -> (Vec<u8>, usize) {
        let mut out = Vec::new();
        let n = match self {
            Encoding::Utf8 | Encoding::Utf8Signed => {
                out.extend_from_slice(s.as_bytes());
                s.len()
            }
            Encoding::Utf16 => {
                let mut n = 0;
                for u in s.encode_utf16() {
                    out.extend_from_slice(&u.to_le_bytes());
                    n += 1;
                }
                n
            }
            Encoding::Utf32 => {
                for c in s.chars() {
                    out.extend_from_slice(&(c as u32).to_le_bytes());
                }
                s.chars().count()
            }
        };
        (out, n)
    }
}

#[derive(Debug, Clone)]
enum Payload {
    Bytes(Vec<u8>),
    /// DATASET table entries, resolved to file offsets at layout time.
    Links(Vec<Option<DatasetId>>),
}

/// One datatable to write.
#[derive(Debug, Clone)]
pub struct TableSpec {
    pub name: String,
    pub prim: Prim,
    pub hint: Hint,
    /// Real axes (their count is the dimension, 0..=3).
    pub real: Vec<u32>,
    /// Ghost axes (e.g. `[3]` for RGB, `[len]` for text).
    pub ghost: Vec<u32>,
    pub index_name: Option<String>,
    pub related_name: Option<String>,
    pub type_name: Option<String>,
    payload: Payload,
    /// Why the table cannot be written faithfully (found when it was built; `add` refuses it).
    unwritable: Option<String>,
}

impl TableSpec {
    /// Any primitive and hint from raw little-endian bytes.
    pub fn raw(name: &str, prim: Prim, hint: Hint, real: &[u32], ghost: &[u32], bytes: Vec<u8>) -> TableSpec {
        TableSpec {
            name: name.into(),
            prim,
            hint,
            real: real.to_vec(),
            ghost: ghost.to_vec(),
            index_name: None,
            related_name: None,
            type_name: None,
            payload: Payload::Bytes(bytes),
            unwritable: None,
        }
    }

    /// A scalar / 1-D / 2-D / 3-D array of `T` (C order, last axis fastest), hint NONE.
    pub fn array<T: Element>(name: &str, real: &[u32], values: &[T]) -> TableSpec {
        let mut b = Vec::with_capacity(values.len() * T::PRIM.size().unwrap_or(1) as usize);
        for &v in values {
            v.put_le(&mut b);
        }
        Self::raw(name, T::PRIM, Hint::None, real, &[], b)
    }

    /// A single value.
    pub fn scalar<T: Element>(name: &str, value: T) -> TableSpec {
        Self::array(name, &[], &[value])
    }

    /// Set the hint and its ghost axes (values must then cover real x ghost elements).
    pub fn with_hint(mut self, hint: Hint, ghost: &[u32]) -> TableSpec {
        self.hint = hint;
        self.ghost = ghost.to_vec();
        self
    }

    /// A scalar text (kept verbatim).
    pub fn text(name: &str, s: &str, enc: Encoding) -> TableSpec {
        let (b, n) = enc.units(s);
        Self::raw(name, enc.prim(), Hint::Text, &[], &[n as u32], b)
    }

    /// A 1-D list of strings, NUL padded to the longest (at least one code unit wide, since
    /// a ghost axis may not be 0).
    pub fn text_list(name: &str, items: &[&str], enc: Encoding) -> TableSpec {
        let enc_items: Vec<(Vec<u8>, usize)> = items.iter().map(|s| enc.units(s)).collect();
        // Readers strip the NUL padding of list items, so an item's own trailing NUL is lost.
        let unwritable = items
            .iter()
            .find(|s| s.ends_with('\0'))
            .map(|s| format!("text list item {s:?} ends with NUL, which readers take for padding"));
        let width = enc_items.iter().map(|e| e.1).max().unwrap_or(0).max(1);
        let unit = enc.prim().size().unwrap_or(1) as usize;
        let mut b = Vec::with_capacity(width * unit * items.len());
        for (bytes, _) in enc_items {
            let row = b.len();
            b.extend_from_slice(&bytes);
            b.resize(row + width * unit, 0);
        }
        let mut t = Self::raw(name, enc.prim(), Hint::Text, &[items.len() as u32], &[width as u32], b);
        t.unwritable = unwritable;
        t
    }

    /// A scalar JSON document (any JSON value).
    pub fn json(name: &str, value: &Value) -> TableSpec {
        Self::raw(name, Prim::Custom, Hint::Json, &[], &[], value.to_string().into_bytes())
    }

    /// A JSON document of nested arrays with the given shape (checked when added).
    pub fn json_shaped(name: &str, value: &Value, real: &[u32]) -> TableSpec {
        Self::raw(
            name,
            Prim::Custom,
            Hint::Json,
            real,
            &[],
            value.to_string().into_bytes(),
        )
    }

    /// A scalar DATASET link.
    pub fn link(name: &str, child: Option<DatasetId>) -> TableSpec {
        let mut t = Self::raw(name, Prim::U64, Hint::Dataset, &[], &[2], Vec::new());
        t.payload = Payload::Links(vec![child]);
        t
    }

    /// A 1-D DATASET table (`None` entries are null links).
    pub fn links(name: &str, children: &[Option<DatasetId>]) -> TableSpec {
        let mut t = Self::raw(
            name,
            Prim::U64,
            Hint::Dataset,
            &[children.len() as u32],
            &[2],
            Vec::new(),
        );
        t.payload = Payload::Links(children.to_vec());
        t
    }

    /// INDEX / RANGE target.
    pub fn index_into(mut self, target: &str) -> TableSpec {
        self.index_name = Some(target.into());
        self
    }

    /// Struct-of-arrays sibling.
    pub fn related(mut self, other: &str) -> TableSpec {
        self.related_name = Some(other.into());
        self
    }

    pub fn type_name(mut self, name: &str) -> TableSpec {
        self.type_name = Some(name.into());
        self
    }

    fn len(&self) -> u64 {
        match &self.payload {
            Payload::Bytes(b) => b.len() as u64,
            Payload::Links(l) => 16 * l.len() as u64,
        }
    }

    fn axes(&self) -> Vec<u32> {
        self.real.iter().chain(&self.ghost).copied().collect()
    }
}

#[derive(Debug, Clone)]
struct DatasetSpec {
    id: [u8; 4],
    tables: Vec<TableSpec>,
}

/// Builds a UDF file.
#[derive(Debug, Clone)]
pub struct UdfWriter {
    id: [u8; 4],
    datasets: Vec<DatasetSpec>,
    root: Option<DatasetId>,
}

fn usage(m: String) -> Error {
    Error::usage(m)
}

fn make_id(id: &str) -> Result<[u8; 4]> {
    let b = id.as_bytes();
    if b.len() > 4 || !b.iter().all(|&c| (0x20..=0x7e).contains(&c)) {
        return Err(usage(format!(
            "UDF id {id:?} must be at most 4 printable ASCII characters"
        )));
    }
    let mut out = [0u8; 4];
    out[..b.len()].copy_from_slice(b);
    Ok(out)
}

impl UdfWriter {
    /// A new file with the given file id (up to 4 printable ASCII characters).
    pub fn new(id: &str) -> Result<UdfWriter> {
        Ok(UdfWriter {
            id: make_id(id)?,
            datasets: Vec::new(),
            root: None,
        })
    }

    pub fn add_dataset(&mut self, id: &str) -> Result<DatasetId> {
        self.datasets.push(DatasetSpec {
            id: make_id(id)?,
            tables: Vec::new(),
        });
        Ok(DatasetId(self.datasets.len() - 1))
    }

    pub fn set_root(&mut self, ds: DatasetId) {
        self.root = Some(ds);
    }

    /// Add a table after checking every rule that concerns it alone.
    pub fn add(&mut self, ds: DatasetId, t: TableSpec) -> Result<()> {
        check_spec(&t)?;
        let n = self.datasets.len();
        if let Payload::Links(l) = &t.payload {
            if l.iter().flatten().any(|d| d.0 >= n) {
                return Err(usage(format!("table {}: link to an unknown dataset", t.name)));
            }
        }
        let d = self
            .datasets
            .get_mut(ds.0)
            .ok_or_else(|| usage("unknown dataset".into()))?;
        if d.tables.iter().any(|o| o.name == t.name) {
            return Err(usage(format!("table name {:?} used twice in one dataset", t.name)));
        }
        d.tables.push(t);
        Ok(())
    }

    /// The whole file in memory, validated before it is returned.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.write_to(&mut out)?;
        let input = Input::from_bytes("written", out);
        let doc = crate::validate::validate(&input, &Limits::unlimited());
        if let Some(f) = doc
            .findings
            .iter()
            .find(|f| f.severity == rasterpack_common::Severity::Error)
        {
            return Err(Error::invalid_at(
                f.code.clone(),
                f.offset,
                format!("the writer produced an invalid file: {}", f.message),
            ));
        }
        match input {
            Input::Bytes { data, .. } => Ok(std::sync::Arc::try_unwrap(data).unwrap_or_else(|a| (*a).clone())),
            _ => Err(usage("internal: written bytes lost".into())),
        }
    }

    /// Stream the file to `out` (data is written straight from the table buffers).
    pub fn write_to(&self, out: &mut dyn Write) -> Result<u64> {
        self.check_graph()?;
        let layouts: Vec<Layout> = self.datasets.iter().map(layout).collect::<Result<_>>()?;
        let mut offsets = Vec::with_capacity(layouts.len());
        let mut pos = FILE_HEADER_SIZE as u64;
        for l in &layouts {
            offsets.push(pos);
            pos = pos.checked_add(l.size).ok_or_else(|| usage("file too large".into()))?;
        }
        let io = |e: std::io::Error| Error::io("writing UDF", &e);
        let mut h = Vec::with_capacity(FILE_HEADER_SIZE);
        h.extend_from_slice(&MAGIC);
        h.extend_from_slice(&self.id);
        h.extend_from_slice(&0u64.to_le_bytes());
        let (ro, rs) = match self.root {
            Some(r) => (offsets[r.0], layouts[r.0].size),
            None => (0, 0),
        };
        h.extend_from_slice(&ro.to_le_bytes());
        h.extend_from_slice(&rs.to_le_bytes());
        h.resize(FILE_HEADER_SIZE, 0);
        out.write_all(&h).map_err(io)?;
        for (k, (d, l)) in self.datasets.iter().zip(&layouts).enumerate() {
            out.write_all(&l.header).map_err(io)?;
            let mut written = l.header.len() as u64;
            for (t, &(start, _)) in d.tables.iter().zip(&l.mem) {
                let at = l.header.len() as u64 + start as u64 * 8;
                if t.len() == 0 {
                    continue;
                }
                let pad = at - written;
                out.write_all(&vec![0u8; pad as usize]).map_err(io)?;
                match &t.payload {
                    Payload::Bytes(b) => out.write_all(b).map_err(io)?,
                    Payload::Links(links) => {
                        let mut b = Vec::with_capacity(16 * links.len());
                        for c in links {
                            let (o, s) = match c {
                                Some(c) => (offsets[c.0], layouts[c.0].size),
                                None => (0, 0),
                            };
                            b.extend_from_slice(&o.to_le_bytes());
                            b.extend_from_slice(&s.to_le_bytes());
                        }
                        out.write_all(&b).map_err(io)?;
                    }
                }
                written = at + t.len();
            }
            out.write_all(&vec![0u8; (l.size - written) as usize]).map_err(io)?;
            let _ = k;
        }
        Ok(pos)
    }

    /// No cycles; INDEX / RANGE targets exist (same dataset, then parents) and are 1-D, and
    /// their values are in range; related tables exist and share the real shape.
    fn check_graph(&self) -> Result<()> {
        let n = self.datasets.len();
        let kids = |d: usize| -> Vec<usize> {
            self.datasets[d]
                .tables
                .iter()
                .filter_map(|t| match &t.payload {
                    Payload::Links(l) => Some(l.iter().flatten().map(|c| c.0).collect::<Vec<_>>()),
                    _ => None,
                })
                .flatten()
                .collect()
        };
        // Cycle check over every dataset.
        let mut state = vec![0u8; n];
        for s in 0..n {
            if state[s] != 0 {
                continue;
            }
            let mut stack = vec![(s, kids(s), 0usize)];
            state[s] = 1;
            while let Some((node, ks, i)) = stack.last_mut() {
                if *i < ks.len() {
                    let c = ks[*i];
                    *i += 1;
                    match state[c] {
                        0 => {
                            state[c] = 1;
                            let kc = kids(c);
                            stack.push((c, kc, 0));
                        }
                        1 => return Err(usage("dataset links form a cycle".into())),
                        _ => {}
                    }
                } else {
                    state[*node] = 2;
                    stack.pop();
                }
            }
        }
        // Parents by breadth-first discovery from the root (what the validator uses).
        let mut parent: Vec<Option<usize>> = vec![None; n];
        if let Some(r) = self.root {
            let mut seen = HashSet::from([r.0]);
            let mut q = std::collections::VecDeque::from([r.0]);
            while let Some(d) = q.pop_front() {
                for c in kids(d) {
                    if seen.insert(c) {
                        parent[c] = Some(d);
                        q.push_back(c);
                    }
                }
            }
        }
        for (di, d) in self.datasets.iter().enumerate() {
            for t in &d.tables {
                if let Some(r) = &t.related_name {
                    let o = d
                        .tables
                        .iter()
                        .find(|o| &o.name == r)
                        .ok_or_else(|| usage(format!("table {}: related {r:?} missing", t.name)))?;
                    if o.real != t.real {
                        return Err(usage(format!("table {}: related {r:?} has another real shape", t.name)));
                    }
                }
                if let Some(target) = &t.index_name {
                    let mut cur = Some(di);
                    let mut found = None;
                    while let Some(c) = cur {
                        if let Some(o) = self.datasets[c].tables.iter().find(|o| &o.name == target) {
                            found = Some(o);
                            break;
                        }
                        cur = parent[c];
                    }
                    let o =
                        found.ok_or_else(|| usage(format!("table {}: index target {target:?} not found", t.name)))?;
                    if o.real.len() != 1 {
                        return Err(usage(format!("table {}: index target {target:?} must be 1-D", t.name)));
                    }
                    let len = o.real[0] as u64;
                    if let Payload::Bytes(b) = &t.payload {
                        let sz = t.prim.size().unwrap_or(1) as usize;
                        let vals: Vec<u64> = b
                            .chunks_exact(sz)
                            .map(|c| {
                                let mut a = [0u8; 8];
                                a[..sz].copy_from_slice(c);
                                u64::from_le_bytes(a)
                            })
                            .collect();
                        if t.hint == Hint::Index {
                            if let Some(v) = vals.iter().find(|&&v| v >= len) {
                                return Err(usage(format!("table {}: index {v} >= target length {len}", t.name)));
                            }
                        } else {
                            for p in vals.chunks_exact(2) {
                                if p[0] > p[1] || p[1] > len {
                                    return Err(usage(format!(
                                        "table {}: range ({},{}) invalid for target length {len}",
                                        t.name, p[0], p[1]
                                    )));
                                }
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Rules that concern one table alone: names, shape encoding, data length, hint rules, text
/// and JSON content.
fn check_spec(t: &TableSpec) -> Result<()> {
    let bad = |m: String| Err(usage(format!("table {:?}: {m}", t.name)));
    if let Some(why) = &t.unwritable {
        return bad(why.clone());
    }
    for n in [
        Some(&t.name),
        t.index_name.as_ref(),
        t.related_name.as_ref(),
        t.type_name.as_ref(),
    ]
    .into_iter()
    .flatten()
    {
        if n.is_empty() || n.len() > 0xFFFF {
            return bad(format!("name {n:?} must be 1..=65535 bytes"));
        }
    }
    if t.real.len() > 3 {
        return bad("more than 3 real axes".into());
    }
    let axes = t.axes();
    if t.ghost.contains(&0) {
        return bad("ghost axes must be >= 1".into());
    }
    let Some(packed) = Shape::encode(&axes) else {
        return bad(format!("shape {axes:?} does not fit (<= 3 axes, y < 2^24, z < 256)"));
    };
    // The packed form must decode to the same axes (trailing zero real axes are fine).
    let dec = Shape::decode(t.real.len() as u8, packed);
    if dec.axes != axes {
        return bad(format!("shape {axes:?} is ambiguous when packed"));
    }
    if matches!(t.prim, Prim::Reserved(_)) || matches!(t.hint, Hint::Reserved(_) | Hint::Custom(32)) {
        return bad("reserved primitive or hint".into());
    }
    if t.hint == Hint::Line {
        return bad("LINE is unspecified; refusing to write it".into());
    }
    if let Some(sz) = t.prim.size() {
        let want = dec.elements() as u128 * sz as u128;
        if want != t.len() as u128 {
            return bad(format!(
                "{} bytes of data for shape {axes:?} of {}",
                t.len(),
                t.prim.name()
            ));
        }
    }
    if t.len() > u32::MAX as u64 {
        return bad("data larger than 4 GiB".into());
    }
    if (t.index_name.is_some()) != matches!(t.hint, Hint::Index | Hint::Range) {
        return bad("index_name goes with INDEX / RANGE hints only (and they need it)".into());
    }
    let (prims_ok, ghost_ok) = crate::validate::hint_allows(t.hint, t.prim, &t.ghost);
    if !prims_ok || !ghost_ok {
        return bad(format!(
            "hint {} does not allow primitive {} with ghost axes {:?}",
            t.hint.name(),
            t.prim.name(),
            t.ghost
        ));
    }
    if t.hint == Hint::Transform && t.ghost.len() != 2 {
        return bad("TRANSFORM needs two ghost axes".into());
    }
    if let Payload::Bytes(b) = &t.payload {
        match t.hint {
            Hint::Json => {
                let v: Value =
                    serde_json::from_slice(b).map_err(|e| usage(format!("table {:?}: JSON: {e}", t.name)))?;
                crate::validate::json_shape(&v, &t.real).map_err(|m| usage(format!("table {:?}: {m}", t.name)))?;
            }
            Hint::Text => {
                let shape = Shape::decode(t.real.len() as u8, packed);
                let tab = dummy_table(t.prim, shape);
                crate::validate::decode_text(&tab, b).map_err(|(_, m)| usage(format!("table {:?}: {m}", t.name)))?;
            }
            Hint::Dataset => return bad("DATASET tables are made with TableSpec::link(s)".into()),
            _ => {}
        }
    }
    Ok(())
}

fn dummy_table(prim: Prim, shape: Shape) -> crate::model::Table {
    crate::model::Table {
        dataset: 0,
        index: 0,
        desc_offset: 0,
        desc: Default::default(),
        name: None,
        index_name: None,
        related_name: None,
        type_name: None,
        prim,
        hint: Hint::Text,
        shape,
        compressed: false,
        data_offset: None,
        data_size: 0,
        layout_ok: true,
        size_ok: true,
        hint_ok: true,
        index_target: None,
        faults: Vec::new(),
    }
}

struct Layout {
    header: Vec<u8>,
    /// `(mem_start, mem_end)` per table.
    mem: Vec<(u32, u32)>,
    size: u64,
}

fn layout(d: &DatasetSpec) -> Result<Layout> {
    // Unique strings, each with a unique non-zero key (the hash, bumped on a collision).
    let mut keys: HashMap<&str, u32> = HashMap::new();
    let mut used: BTreeMap<u32, &str> = BTreeMap::new();
    for t in &d.tables {
        for n in [
            Some(&t.name),
            t.index_name.as_ref(),
            t.related_name.as_ref(),
            t.type_name.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            if keys.contains_key(n.as_str()) {
                continue;
            }
            let mut h = name_hash(n);
            while h == 0 || used.contains_key(&h) {
                h = h.wrapping_add(1);
            }
            keys.insert(n, h);
            used.insert(h, n);
        }
    }
    let mut strings = Vec::new();
    let mut lookups = Vec::new();
    for (&h, &s) in &used {
        let off = strings.len();
        if off > 0xFFFF {
            return Err(usage("dataset string block larger than 64 KiB".into()));
        }
        strings.extend_from_slice(s.as_bytes());
        lookups.push((h, off as u16, s.len() as u16));
    }
    strings.resize(strings.len().div_ceil(8) * 8, 0);
    let header_size =
        DATASET_STATIC_SIZE + DESCRIPTOR_SIZE * d.tables.len() + LOOKUP_SIZE * lookups.len() + strings.len();
    if header_size > 0xFFF8 || d.tables.len() > 0xFFFF {
        return Err(usage(format!(
            "dataset header of {header_size} bytes exceeds the 16-bit header_size"
        )));
    }
    let mut mem = Vec::with_capacity(d.tables.len());
    let mut cursor = 0u64; // in blocks
    for t in &d.tables {
        let blocks = t.len().div_ceil(8);
        if blocks == 0 {
            mem.push((0, 0));
            continue;
        }
        let end = cursor + blocks;
        if end > u32::MAX as u64 {
            return Err(usage("dataset data exceeds 32 GiB".into()));
        }
        mem.push((cursor as u32, end as u32));
        cursor = end;
    }
    let size = (header_size as u64 + cursor * 8).div_ceil(16) * 16;
    let mut h = Vec::with_capacity(header_size);
    h.extend_from_slice(&DATASET_CHECK.to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes());
    h.extend_from_slice(&d.id);
    h.extend_from_slice(&(header_size as u16).to_le_bytes());
    h.extend_from_slice(&(d.tables.len() as u16).to_le_bytes());
    h.extend_from_slice(&(lookups.len() as u16).to_le_bytes());
    h.extend_from_slice(&(strings.len() as u16).to_le_bytes());
    h.extend_from_slice(&[0u8; 4]);
    let key = |n: &Option<String>| n.as_deref().and_then(|s| keys.get(s).copied()).unwrap_or(0);
    for (t, &(ms, me)) in d.tables.iter().zip(&mem) {
        let axes = t.axes();
        let packed = Shape::encode(&axes).unwrap_or([0, 0]);
        h.extend_from_slice(&keys.get(t.name.as_str()).copied().unwrap_or(0).to_le_bytes());
        h.extend_from_slice(&encode_type_info(t.prim, t.real.len() as u8, t.hint).to_le_bytes());
        h.extend_from_slice(&0u16.to_le_bytes());
        h.extend_from_slice(&ms.to_le_bytes());
        h.extend_from_slice(&me.to_le_bytes());
        h.extend_from_slice(&(t.len() as u32).to_le_bytes());
        h.extend_from_slice(&packed[0].to_le_bytes());
        h.extend_from_slice(&packed[1].to_le_bytes());
        h.extend_from_slice(&key(&t.index_name).to_le_bytes());
        h.extend_from_slice(&key(&t.related_name).to_le_bytes());
        h.extend_from_slice(&key(&t.type_name).to_le_bytes());
        h.extend_from_slice(&[0u8; 8]);
    }
    for (hash, off, len) in lookups {
        h.extend_from_slice(&hash.to_le_bytes());
        h.extend_from_slice(&off.to_le_bytes());
        h.extend_from_slice(&len.to_le_bytes());
    }
    h.extend_from_slice(&strings);
    Ok(Layout { header: h, mem, size })
}
