//! Writing: a builder of datasets and datatables ([`UdfWriter`]), and a sink that writes one
//! array as a UDF file as its bytes arrive ([`UdfArrayWriter`]). The writer hashes names
//! (DJB2-xor, seed 3581), sorts the lookups by hash, pads strings and data to 8 bytes and
//! datasets to 16, computes every offset, and refuses anything that would not validate.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;

use rasterpack_common::output::write_all_at;
use rasterpack_common::stream::SequentialCursor;
use rasterpack_common::{ArrayInfo, ArraySink, DType, Element, Error, Input, Limits, NdArray, Output, Result};
use serde_json::Value;

use crate::document::{dtype_prim, UdfTable};
use crate::parse::{encode_type_info, Shape};
use crate::raw::{
    name_hash, Hint, Prim, DATASET_CHECK, DATASET_STATIC_SIZE, DESCRIPTOR_SIZE, FILE_HEADER_SIZE, LOOKUP_SIZE, MAGIC,
};

/// Handle of a dataset inside a [`UdfWriter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdfDatasetId(usize);

/// Text encodings of TEXT tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UdfEncoding {
    /// `u8` code units.
    Utf8,
    /// `i8` code units (also UTF-8).
    Utf8Signed,
    /// `u16` little-endian.
    Utf16,
    /// `u32` little-endian.
    Utf32,
}

impl UdfEncoding {
    fn prim(self) -> Prim {
        match self {
            UdfEncoding::Utf8 => Prim::U8,
            UdfEncoding::Utf8Signed => Prim::I8,
            UdfEncoding::Utf16 => Prim::U16,
            UdfEncoding::Utf32 => Prim::U32,
        }
    }

    fn units(self, s: &str) -> (Vec<u8>, usize) {
        let mut out = Vec::new();
        let n = match self {
            UdfEncoding::Utf8 | UdfEncoding::Utf8Signed => {
                out.extend_from_slice(s.as_bytes());
                s.len()
            }
            UdfEncoding::Utf16 => {
                let mut n = 0;
                for u in s.encode_utf16() {
                    out.extend_from_slice(&u.to_le_bytes());
                    n += 1;
                }
                n
            }
            UdfEncoding::Utf32 => {
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
    Links(Vec<Option<UdfDatasetId>>),
    /// Data of this many bytes given later, as it arrives ([`UdfArrayWriter`]).
    Deferred(u64),
}

/// One datatable to write.
#[derive(Debug, Clone)]
pub struct TableSpec {
    /// The table's name (unique in its dataset).
    pub name: String,
    /// The primitive element type.
    pub prim: Prim,
    /// The type hint.
    pub hint: Hint,
    /// Real axes (their count is the dimension, 0..=3).
    pub real: Vec<u32>,
    /// Ghost axes (e.g. `[3]` for RGB, `[len]` for text).
    pub ghost: Vec<u32>,
    /// The INDEX / RANGE target's name.
    pub index_name: Option<String>,
    /// A struct-of-arrays sibling's name.
    pub related_name: Option<String>,
    /// A free-form type name.
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
        let mut b = Vec::with_capacity(std::mem::size_of_val(values));
        for &v in values {
            v.extend_le(&mut b);
        }
        // Every Element type has a primitive (Element is u8..f64).
        Self::raw(
            name,
            dtype_prim(T::DTYPE).unwrap_or(Prim::Custom),
            Hint::None,
            real,
            &[],
            b,
        )
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
    pub fn text(name: &str, s: &str, enc: UdfEncoding) -> TableSpec {
        let (b, n) = enc.units(s);
        Self::raw(name, enc.prim(), Hint::Text, &[], &[n as u32], b)
    }

    /// A 1-D list of strings, NUL padded to the longest (at least one code unit wide, since
    /// a ghost axis may not be 0).
    pub fn text_list(name: &str, items: &[&str], enc: UdfEncoding) -> TableSpec {
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
    pub fn link(name: &str, child: Option<UdfDatasetId>) -> TableSpec {
        let mut t = Self::raw(name, Prim::U64, Hint::Dataset, &[], &[2], Vec::new());
        t.payload = Payload::Links(vec![child]);
        t
    }

    /// A 1-D DATASET table (`None` entries are null links).
    pub fn links(name: &str, children: &[Option<UdfDatasetId>]) -> TableSpec {
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

    /// A free-form type name.
    pub fn type_name(mut self, name: &str) -> TableSpec {
        self.type_name = Some(name.into());
        self
    }

    fn len(&self) -> u64 {
        match &self.payload {
            Payload::Bytes(b) => b.len() as u64,
            Payload::Links(l) => 16 * l.len() as u64,
            Payload::Deferred(n) => *n,
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

/// Builds a UDF file: datasets of tables, written whole with [`UdfWriter::to_bytes`] (checked
/// by `validate` first) or [`UdfWriter::write_to`].
#[derive(Debug, Clone)]
pub struct UdfWriter {
    id: [u8; 4],
    datasets: Vec<DatasetSpec>,
    /// The table names of each dataset: the duplicate check is a lookup, not a scan.
    names: Vec<HashSet<String>>,
    root: Option<UdfDatasetId>,
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
            names: Vec::new(),
            root: None,
        })
    }

    /// A new dataset with the given id (up to 4 printable ASCII characters).
    pub fn add_dataset(&mut self, id: &str) -> Result<UdfDatasetId> {
        self.datasets.push(DatasetSpec {
            id: make_id(id)?,
            tables: Vec::new(),
        });
        self.names.push(HashSet::new());
        Ok(UdfDatasetId(self.datasets.len() - 1))
    }

    /// The dataset the file header points at.
    pub fn set_root(&mut self, ds: UdfDatasetId) {
        self.root = Some(ds);
    }

    /// Add a table after checking every rule that concerns it alone.
    pub fn add(&mut self, ds: UdfDatasetId, t: TableSpec) -> Result<()> {
        check_spec(&t)?;
        let n = self.datasets.len();
        if let Payload::Links(l) = &t.payload {
            if l.iter().flatten().any(|d| d.0 >= n) {
                return Err(usage(format!("table {}: link to an unknown dataset", t.name)));
            }
        }
        let (Some(d), Some(names)) = (self.datasets.get_mut(ds.0), self.names.get_mut(ds.0)) else {
            return Err(usage("unknown dataset".into()));
        };
        if !names.insert(t.name.clone()) {
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

    /// Stream the file to `out` (data is written straight from the table buffers). Returns
    /// the number of bytes written.
    pub fn write_to(&self, out: &mut dyn Write) -> Result<u64> {
        let (pieces, total) = self.pieces()?;
        for piece in &pieces {
            let r = match piece {
                Piece::Bytes(b) => out.write_all(b),
                Piece::Zeros(n) => out.write_all(&vec![0u8; *n as usize]),
                Piece::Deferred => return Err(usage("internal: a table's data was never given".into())),
            };
            r.map_err(|e| Error::io("writing UDF", &e))?;
        }
        Ok(total)
    }

    /// The file in order, as pieces (the bytes of headers and tables, padding, and the place
    /// of deferred table data), and its total length.
    fn pieces(&self) -> Result<(Vec<Piece<'_>>, u64)> {
        self.check_graph()?;
        let layouts: Vec<Layout> = self.datasets.iter().map(layout).collect::<Result<_>>()?;
        let mut offsets = Vec::with_capacity(layouts.len());
        let mut pos = FILE_HEADER_SIZE as u64;
        for l in &layouts {
            offsets.push(pos);
            pos = pos.checked_add(l.size).ok_or_else(|| usage("file too large".into()))?;
        }
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
        let sizes: Vec<u64> = layouts.iter().map(|l| l.size).collect();
        let mut pieces = vec![Piece::Bytes(Cow::Owned(h))];
        for (d, l) in self.datasets.iter().zip(layouts) {
            let header_len = l.header.len() as u64;
            pieces.push(Piece::Bytes(Cow::Owned(l.header)));
            let mut written = header_len;
            for (t, &(start, _)) in d.tables.iter().zip(&l.mem) {
                let at = header_len + start as u64 * 8;
                if t.len() == 0 {
                    continue;
                }
                if at > written {
                    pieces.push(Piece::Zeros(at - written));
                }
                pieces.push(match &t.payload {
                    Payload::Bytes(b) => Piece::Bytes(Cow::Borrowed(b)),
                    Payload::Deferred(_) => Piece::Deferred,
                    Payload::Links(links) => {
                        let mut b = Vec::with_capacity(16 * links.len());
                        for c in links {
                            let (o, s) = match c {
                                Some(c) => (offsets[c.0], sizes[c.0]),
                                None => (0, 0),
                            };
                            b.extend_from_slice(&o.to_le_bytes());
                            b.extend_from_slice(&s.to_le_bytes());
                        }
                        Piece::Bytes(Cow::Owned(b))
                    }
                });
                written = at + t.len();
            }
            if l.size > written {
                pieces.push(Piece::Zeros(l.size - written));
            }
        }
        Ok((pieces, pos))
    }

    /// No cycles; INDEX / RANGE targets exist (same dataset, then parents) and are 1-D, and
    /// their values are in range; related tables exist and share the real shape.
    fn check_graph(&self) -> Result<()> {
        self.check_no_cycle()?;
        self.check_references(&self.parents())
    }

    /// The datasets `d` links to.
    fn kids(&self, d: usize) -> Vec<usize> {
        self.datasets[d]
            .tables
            .iter()
            .filter_map(|t| match &t.payload {
                Payload::Links(l) => Some(l.iter().flatten().map(|c| c.0).collect::<Vec<_>>()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// Depth-first over every dataset: a link back to a dataset on the stack is a cycle.
    fn check_no_cycle(&self) -> Result<()> {
        let n = self.datasets.len();
        let mut state = vec![0u8; n];
        for s in 0..n {
            if state[s] != 0 {
                continue;
            }
            let mut stack = vec![(s, self.kids(s), 0usize)];
            state[s] = 1;
            while let Some((node, ks, i)) = stack.last_mut() {
                if *i < ks.len() {
                    let c = ks[*i];
                    *i += 1;
                    match state[c] {
                        0 => {
                            state[c] = 1;
                            let kc = self.kids(c);
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
        Ok(())
    }

    /// Parents by breadth-first discovery from the root (what the validator uses).
    fn parents(&self) -> Vec<Option<usize>> {
        let mut parent: Vec<Option<usize>> = vec![None; self.datasets.len()];
        if let Some(r) = self.root {
            let mut seen = HashSet::from([r.0]);
            let mut q = std::collections::VecDeque::from([r.0]);
            while let Some(d) = q.pop_front() {
                for c in self.kids(d) {
                    if seen.insert(c) {
                        parent[c] = Some(d);
                        q.push_back(c);
                    }
                }
            }
        }
        parent
    }

    /// `related_name` and `index_name` targets, and INDEX / RANGE values against them.
    fn check_references(&self, parent: &[Option<usize>]) -> Result<()> {
        // Tables by name per dataset: each reference is one lookup.
        let by_name: Vec<HashMap<&str, &TableSpec>> = self
            .datasets
            .iter()
            .map(|d| d.tables.iter().map(|t| (t.name.as_str(), t)).collect())
            .collect();
        for (di, d) in self.datasets.iter().enumerate() {
            for t in &d.tables {
                if let Some(r) = &t.related_name {
                    let o = by_name[di]
                        .get(r.as_str())
                        .ok_or_else(|| usage(format!("table {}: related {r:?} missing", t.name)))?;
                    if o.real != t.real {
                        return Err(usage(format!("table {}: related {r:?} has another real shape", t.name)));
                    }
                }
                if let Some(target) = &t.index_name {
                    let mut cur = Some(di);
                    let mut found = None;
                    while let Some(c) = cur {
                        if let Some(o) = by_name[c].get(target.as_str()) {
                            found = Some(*o);
                            break;
                        }
                        cur = parent[c];
                    }
                    let o =
                        found.ok_or_else(|| usage(format!("table {}: index target {target:?} not found", t.name)))?;
                    if o.real.len() != 1 {
                        return Err(usage(format!("table {}: index target {target:?} must be 1-D", t.name)));
                    }
                    check_index_values(t, o.real[0] as u64)?;
                }
            }
        }
        Ok(())
    }
}

/// The values of an INDEX / RANGE table against its target's length.
fn check_index_values(t: &TableSpec, len: u64) -> Result<()> {
    let Payload::Bytes(b) = &t.payload else {
        return Ok(());
    };
    let sz = t.prim.size().unwrap_or(1) as usize;
    let value = |c: &[u8]| {
        let mut a = [0u8; 8];
        a[..sz].copy_from_slice(c);
        u64::from_le_bytes(a)
    };
    if t.hint == Hint::Index {
        if let Some(v) = b.chunks_exact(sz).map(value).find(|&v| v >= len) {
            return Err(usage(format!("table {}: index {v} >= target length {len}", t.name)));
        }
        return Ok(());
    }
    for p in b.chunks_exact(2 * sz) {
        let (s, e) = (value(&p[..sz]), value(&p[sz..]));
        if s > e || e > len {
            return Err(usage(format!(
                "table {}: range ({s},{e}) invalid for target length {len}",
                t.name
            )));
        }
    }
    Ok(())
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
    let checked = matches!(
        t.hint,
        Hint::Json | Hint::Text | Hint::Dataset | Hint::Index | Hint::Range
    );
    if checked && matches!(t.payload, Payload::Deferred(_)) {
        return bad("the data of a table with content rules cannot be given later".into());
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

fn dummy_table(prim: Prim, shape: Shape) -> UdfTable {
    UdfTable {
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

/// The unique strings of a dataset's tables, each with a unique non-zero key (its hash,
/// bumped on a collision): by string, and by key in key order (the lookup's order).
type StringKeys<'a> = (HashMap<&'a str, u32>, BTreeMap<u32, &'a str>);

fn string_keys(d: &DatasetSpec) -> StringKeys<'_> {
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
    (keys, used)
}

/// The dataset header (static part, descriptors, lookups, strings) and where each table's data
/// goes.
fn layout(d: &DatasetSpec) -> Result<Layout> {
    let (keys, used) = string_keys(d);
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

/// A piece of a file about to be written, in order.
enum Piece<'a> {
    Bytes(Cow<'a, [u8]>),
    Zeros(u64),
    /// The data of a deferred table, given later.
    Deferred,
}

/// Name of the JSON table `write_array` stores the array's `attrs` in.
pub const ATTRS_TABLE: &str = "attrs";

/// The writer of one array (what `write_array` and [`UdfArrayWriter`] write): one dataset
/// `ROOT` (file id `RPAK`) holding the array as one hint-NONE table (named after the array,
/// else `data`) and its `attrs` as a JSON table named `attrs`. Shapes the packed encoding
/// cannot hold (more than 3 axes, `y >= 2^24`, `z >= 256`) are stored flat with the shape in
/// `type_name` as `ndarray:AxBxC`; `bool` is stored as `u8` with `type_name` `bool`.
pub fn writer_for_array(array: &NdArray) -> Result<UdfWriter> {
    writer_for(&ArrayInfo::of(array), Payload::Bytes(array.data.clone()))
}

fn writer_for(info: &ArrayInfo, payload: Payload) -> Result<UdfWriter> {
    let bytes = info.byte_len()?;
    if bytes > u32::MAX as u64 {
        return Err(Error::usage(format!(
            "a UDF datatable holds at most 4 GiB; this array has {bytes} bytes"
        )));
    }
    let prim = dtype_prim(info.dtype).ok_or_else(|| {
        Error::usage(format!(
            "UDF cannot store {} values: its primitives are u8..u64, i8..i64, f32 and f64",
            info.dtype.name()
        ))
    })?;
    let mut w = UdfWriter::new("RPAK")?;
    let root = w.add_dataset("ROOT")?;
    w.set_root(root);
    let name = match info.name.as_deref() {
        Some(n) if !n.is_empty() && n != ATTRS_TABLE && !n.contains('/') && n.len() < 256 => n.to_string(),
        _ => "data".to_string(),
    };
    let fits = info.shape.len() <= 3 && info.shape.iter().all(|&a| a <= u32::MAX as u64) && {
        let axes: Vec<u32> = info.shape.iter().map(|&a| a as u32).collect();
        Shape::encode(&axes).is_some_and(|p| Shape::decode(axes.len() as u8, p).axes == axes)
    };
    let mut spec = if fits {
        let axes: Vec<u32> = info.shape.iter().map(|&a| a as u32).collect();
        TableSpec::raw(&name, prim, Hint::None, &axes, &[], Vec::new())
    } else {
        // The packed shape cannot hold it (z < 256, y < 2^24, <= 3 axes): store it flat and
        // keep the real shape in type_name, which read_array honours.
        let n = info.len();
        if n > u32::MAX as u64 {
            return Err(Error::usage("array has more than 2^32 elements".to_string()));
        }
        let shape: Vec<String> = info.shape.iter().map(|a| a.to_string()).collect();
        TableSpec::raw(&name, prim, Hint::None, &[n as u32], &[], Vec::new())
            .type_name(&format!("ndarray:{}", shape.join("x")))
    };
    spec.payload = payload;
    if info.dtype == DType::Bool && spec.type_name.is_none() {
        spec = spec.type_name("bool");
    }
    w.add(root, spec)?;
    if !info.attrs.is_empty() {
        w.add(root, TableSpec::json(ATTRS_TABLE, &Value::Object(info.attrs.clone())))?;
    }
    Ok(w)
}

/// Writes one array as a UDF file as its bytes arrive (the layout of
/// [`writer_for_array`]): the sizes are known at [`ArraySink::begin`], so the file header, the
/// dataset header and its lookup and strings go out first, then the data, then the `attrs`
/// table and the padding at [`ArraySink::finish`]. Nothing is back-patched: on a
/// [`Output::Stream`] the data must come in order; on a [`Output::File`] in any order
/// (neighbouring writes are combined, runs of zeros are left as holes).
pub struct UdfArrayWriter<'a> {
    out: Output<'a>,
    plan: Option<Plan>,
    cursor: SequentialCursor,
    /// Combined pending bytes for a file: `pending` goes at data offset `pending_at`.
    pending: Vec<u8>,
    pending_at: u64,
    written: u64,
}

/// Where the data goes and what follows it.
struct Plan {
    data_start: u64,
    data_len: u64,
    suffix: Vec<u8>,
    total: u64,
}

/// Pending bytes are written once they reach this size.
const COMBINE: usize = 4 << 20;

impl<'a> UdfArrayWriter<'a> {
    /// A writer onto `out`.
    pub fn new(out: Output<'a>) -> UdfArrayWriter<'a> {
        UdfArrayWriter {
            out,
            plan: None,
            cursor: SequentialCursor::default(),
            pending: Vec::new(),
            pending_at: 0,
            written: 0,
        }
    }

    fn plan(&self) -> Result<&Plan> {
        self.plan
            .as_ref()
            .ok_or_else(|| Error::usage("internal: UDF writer used before begin"))
    }

    /// Write `bytes` at absolute file offset `at` (files), or next (streams).
    fn emit(&mut self, at: u64, bytes: &[u8]) -> Result<()> {
        match &mut self.out {
            Output::File(file) => write_all_at(file, bytes, at),
            Output::Stream(w) => w.write_all(bytes).map_err(|e| Error::io("writing UDF", &e)),
        }
    }

    fn flush_pending(&mut self) -> Result<()> {
        if !self.pending.is_empty() {
            let at = self.plan()?.data_start + self.pending_at;
            let pending = std::mem::take(&mut self.pending);
            self.emit(at, &pending)?;
            self.pending = pending;
            self.pending.clear();
        }
        Ok(())
    }

    fn check_range(&self, offset: u64, len: u64) -> Result<()> {
        let data_len = self.plan()?.data_len;
        if offset.checked_add(len).is_none_or(|end| end > data_len) {
            return Err(Error::usage(format!(
                "internal: a write of {len} bytes at {offset} falls outside the {data_len}-byte UDF table"
            )));
        }
        Ok(())
    }
}

impl ArraySink for UdfArrayWriter<'_> {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        let data_len = info.byte_len()?;
        let writer = writer_for(info, Payload::Deferred(data_len))?;
        let (pieces, total) = writer.pieces()?;
        let mut prefix = Vec::new();
        let mut suffix = Vec::new();
        let mut seen_data = false;
        for piece in pieces {
            let part = if seen_data { &mut suffix } else { &mut prefix };
            match piece {
                Piece::Bytes(b) => part.extend_from_slice(&b),
                Piece::Zeros(n) => part.resize(part.len() + n as usize, 0),
                Piece::Deferred => seen_data = true,
            }
        }
        self.emit(0, &prefix)?;
        self.plan = Some(Plan {
            data_start: prefix.len() as u64,
            data_len,
            suffix,
            total,
        });
        Ok(())
    }

    fn random_access(&self) -> bool {
        self.out.is_seekable()
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.check_range(offset, data.len() as u64)?;
        self.written += data.len() as u64;
        if let Output::Stream(w) = &mut self.out {
            self.cursor.advance(offset, data.len())?;
            return w.write_all(data).map_err(|e| Error::io("writing UDF", &e));
        }
        let contiguous = !self.pending.is_empty() && self.pending_at + self.pending.len() as u64 == offset;
        if !contiguous {
            self.flush_pending()?;
            if data.len() >= COMBINE {
                let at = self.plan()?.data_start + offset;
                return self.emit(at, data);
            }
            self.pending_at = offset;
        }
        self.pending.extend_from_slice(data);
        if self.pending.len() >= COMBINE {
            self.flush_pending()?;
        }
        Ok(())
    }

    fn fill_at(&mut self, offset: u64, len: u64, pattern: &[u8]) -> Result<()> {
        // A file starts empty: runs of zeros need no writing (the length is set at finish).
        if self.out.is_seekable() && pattern.iter().all(|&b| b == 0) && !pattern.is_empty() {
            self.check_range(offset, len)?;
            self.flush_pending()?;
            self.written += len;
            return Ok(());
        }
        rasterpack_common::stream::fill_by_chunks(self, offset, len, pattern)
    }

    fn finish(&mut self) -> Result<()> {
        self.flush_pending()?;
        let plan = self
            .plan
            .take()
            .ok_or_else(|| Error::usage("internal: UDF writer finished before begin"))?;
        if self.written != plan.data_len {
            return Err(Error::usage(format!(
                "internal: the source delivered {} of {} UDF table bytes",
                self.written, plan.data_len
            )));
        }
        let at = plan.data_start + plan.data_len;
        self.emit(at, &plan.suffix)?;
        match &mut self.out {
            Output::File(file) => file
                .set_len(plan.total)
                .map_err(|e| Error::io("setting the length of the UDF file", &e)),
            Output::Stream(w) => w.flush().map_err(|e| Error::io("writing UDF", &e)),
        }
    }
}
