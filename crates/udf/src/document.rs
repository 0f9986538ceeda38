//! What the structural walk learns about a file: the dataset graph, every datatable descriptor
//! decoded and resolved, and the findings made on the way. Plain data, no I/O: both
//! [`crate::validate`] (which builds it) and [`crate::model`] (which reads through it) use it.

use std::collections::HashMap;

use rasterpack_common::{DType, Finding, Findings};
use serde_json::Value;

use crate::parse::Shape;
use crate::raw::{DatasetHeader, Descriptor, FileHeader, FileOffset, Hint, Prim};

/// Everything the structural walk learned about a file, with the findings it made.
#[derive(Debug, Clone, Default)]
pub struct UdfDocument {
    /// Length of the input in bytes.
    pub file_len: u64,
    /// `None` when the file is too short or its magic is wrong.
    pub header: Option<FileHeader>,
    /// Datasets reachable from the root, in breadth-first order (the root first).
    pub datasets: Vec<UdfDataset>,
    /// Every finding of the walk (and of the content checks, after [`crate::validate::validate`]).
    pub findings: Findings,
}

/// One string lookup entry with its resolved string.
#[derive(Debug, Clone)]
pub struct Lookup {
    /// The key descriptors use to name the string.
    pub hash: u32,
    /// Byte offset of the string in the dataset's string block.
    pub offset: u16,
    /// Byte length of the string.
    pub len: u16,
    /// The string when the entry is in bounds and UTF-8.
    pub string: Option<String>,
    /// Absolute file offset of the entry.
    pub entry_offset: u64,
}

/// A link from one entry of a DATASET table to a dataset.
#[derive(Debug, Clone)]
pub struct ChildLink {
    /// Index of the DATASET table in its dataset's [`UdfDataset::tables`].
    pub table: usize,
    /// Flat C-order index of the entry in that table.
    pub entry: u64,
    /// Where the entry points.
    pub location: FileOffset,
    /// Absolute offset of the entry's 16 bytes.
    pub entry_offset: u64,
    /// Index into [`UdfDocument::datasets`]; `None` for null or invalid entries.
    pub target: Option<usize>,
    /// Non-null and passes the file-offset rules (only these are followed).
    pub valid: bool,
}

/// A dataset: its header, string lookup, datatables and links to child datasets.
#[derive(Debug, Clone)]
pub struct UdfDataset {
    /// Where the dataset lives in the file.
    pub location: FileOffset,
    /// `root`, then `/TABLE` or `/TABLE[i]` per DATASET link followed (first discovery).
    pub path: String,
    /// The dataset this one was first reached from.
    pub parent: Option<usize>,
    /// Number of links followed from the root to reach it.
    pub depth: u32,
    /// The static header.
    pub header: DatasetHeader,
    /// False when the check value is wrong (nothing else is read).
    pub check_ok: bool,
    /// Absolute offset where table data starts, when `header_size` is usable.
    pub data_base: Option<u64>,
    /// The string lookup entries, in file order.
    pub lookups: Vec<Lookup>,
    /// The datatables, in descriptor order.
    pub tables: Vec<UdfTable>,
    /// The entries of this dataset's DATASET tables, in table then entry order.
    pub children: Vec<ChildLink>,
    /// Errors of this dataset's header that make all its tables unreadable (an unusable
    /// `header_size`: where the data starts is unknown).
    pub faults: Vec<Finding>,
    /// The first table of each name: name lookups in constant time.
    pub(crate) by_name: HashMap<String, usize>,
}

impl UdfDataset {
    /// A dataset about to be read: only its location and place in the graph are known.
    pub(crate) fn blank(location: FileOffset, path: String, parent: Option<usize>, depth: u32) -> UdfDataset {
        UdfDataset {
            location,
            path,
            parent,
            depth,
            header: DatasetHeader::default(),
            check_ok: false,
            data_base: None,
            lookups: Vec::new(),
            tables: Vec::new(),
            children: Vec::new(),
            faults: Vec::new(),
            by_name: HashMap::new(),
        }
    }

    /// The printable part of the id (NUL padding dropped).
    pub fn id(&self) -> String {
        id_string(&self.header.id)
    }

    /// The first table named `name`.
    pub fn table(&self, name: &str) -> Option<&UdfTable> {
        self.by_name.get(name).and_then(|&k| self.tables.get(k))
    }

    /// Set the tables, indexing them by name.
    pub(crate) fn set_tables(&mut self, tables: Vec<UdfTable>) {
        self.by_name.clear();
        for t in &tables {
            if let Some(n) = &t.name {
                self.by_name.entry(n.clone()).or_insert(t.index);
            }
        }
        self.tables = tables;
    }

    /// The links of the DATASET table `table` (children are stored in table order).
    pub fn links_of(&self, table: usize) -> &[ChildLink] {
        let start = self.children.partition_point(|c| c.table < table);
        let end = self.children.partition_point(|c| c.table <= table);
        &self.children[start..end]
    }
}

/// A 4-byte id as text: printable ASCII up to the first NUL, other bytes as `?`.
pub(crate) fn id_string(id: &[u8; 4]) -> String {
    let end = id.iter().position(|&b| b == 0).unwrap_or(4);
    id[..end]
        .iter()
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '?'
            }
        })
        .collect()
}

/// One datatable descriptor, decoded and resolved.
#[derive(Debug, Clone)]
pub struct UdfTable {
    /// Index of the dataset holding the table in [`UdfDocument::datasets`].
    pub dataset: usize,
    /// Index of the descriptor in its dataset.
    pub index: usize,
    /// Absolute offset of the descriptor.
    pub desc_offset: u64,
    /// The descriptor as stored.
    pub desc: Descriptor,
    /// The table's name (`key_name` resolved), when the lookup has it.
    pub name: Option<String>,
    /// The INDEX / RANGE target's name.
    pub index_name: Option<String>,
    /// The struct-of-arrays sibling's name.
    pub related_name: Option<String>,
    /// The free-form type name.
    pub type_name: Option<String>,
    /// The primitive element type.
    pub prim: Prim,
    /// The type hint.
    pub hint: Hint,
    /// Real and ghost axes.
    pub shape: Shape,
    /// `compress_info` is not 0.
    pub compressed: bool,
    /// Absolute offset of the data (when the dataset header is usable).
    pub data_offset: Option<u64>,
    /// Bytes of stored data (`data_size`).
    pub data_size: u64,
    /// Memory range valid and inside the dataset.
    pub layout_ok: bool,
    /// `data_size` agrees with shape x primitive size (always true for custom).
    pub size_ok: bool,
    /// The primitive and ghost-axis rules of the hint hold.
    pub hint_ok: bool,
    /// `(dataset, table)` an INDEX / RANGE table points into.
    pub index_target: Option<(usize, usize)>,
    /// The structural errors that concern this table itself (its descriptor, names, memory
    /// range, hint rules, references, DATASET entries): any of them makes it unreadable. Errors
    /// elsewhere in the file do not (rasterpack's rule: an intact table is readable whatever
    /// the verdict on the rest of the file). Content errors (text, JSON, index values) are
    /// found when the data is read. Only the first is kept (reads and reports name the first;
    /// the file's findings count them all): a 6 MiB file of 130,000 tables that each break two
    /// rules held ~30 MiB of second faults per open, twice over in `diff`.
    pub faults: Vec<Finding>,
}

/// How a table's data is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UdfCompression {
    /// As the values themselves.
    None,
    /// Scheme 17 of the reference crate, on a 4-byte primitive: decoded (see [`crate::compress`]).
    SimpleU32,
    /// Any other scheme (or scheme 17 on another primitive): not decodable, reads are unsupported.
    Unsupported(u16),
}

impl UdfTable {
    /// Add `more` structural errors of this table: kept only while it has none (see
    /// [`UdfTable::faults`]).
    pub(crate) fn add_faults(&mut self, more: impl IntoIterator<Item = Finding>) {
        if self.faults.is_empty() {
            self.faults.extend(more.into_iter().take(1));
        }
    }

    /// How the data is stored.
    pub fn compression(&self) -> UdfCompression {
        match self.desc.compress_info {
            0 => UdfCompression::None,
            crate::compress::SIMPLE_U32 if self.prim.size() == Some(4) => UdfCompression::SimpleU32,
            c => UdfCompression::Unsupported(c),
        }
    }

    /// The data can be read (as stored, or decoded from a supported compression). Says
    /// nothing about [`UdfTable::faults`].
    pub fn readable(&self) -> bool {
        self.layout_ok
            && self.size_ok
            && self.data_offset.is_some()
            && !matches!(self.compression(), UdfCompression::Unsupported(_))
    }

    /// Length of the data once decoded: `data_size`, or the shape's words for compressed tables.
    pub fn decoded_len(&self) -> u64 {
        match self.compression() {
            UdfCompression::SimpleU32 => self.shape.elements().saturating_mul(4),
            _ => self.data_size,
        }
    }

    /// The name, or `#INDEX` for a table whose name cannot be resolved.
    pub fn display_name(&self) -> String {
        match &self.name {
            Some(n) => n.clone(),
            None => format!("#{}", self.index),
        }
    }

    /// The `DType` of the primitive (custom and reserved have none).
    pub fn dtype(&self) -> Option<DType> {
        prim_dtype(self.prim)
    }

    /// The shape of the table read as an array: the real axes then the ghost axes, or the
    /// shape a `type_name` of `ndarray:AxBxC` records (what `write_array` stores for shapes the
    /// packed encoding cannot hold) when it holds exactly the table's values.
    pub fn array_shape(&self) -> Vec<u64> {
        let axes: Vec<u64> = self.shape.axes.iter().map(|&a| a as u64).collect();
        if let (Some(dtype), Some(full)) = (
            self.dtype(),
            self.type_name.as_deref().and_then(parse_ndarray_type_name),
        ) {
            if rasterpack_common::byte_len(dtype, &full) == Some(self.decoded_len()) {
                return full;
            }
        }
        axes
    }

    /// A numeric table: a dtype, and neither text nor dataset links (what a read without a name picks).
    pub(crate) fn is_value_array(&self) -> bool {
        self.dtype().is_some() && self.hint != Hint::Dataset && self.hint != Hint::Text
    }
}

/// The numpy-style dtype of a UDF primitive (custom and reserved have none).
pub fn prim_dtype(p: Prim) -> Option<DType> {
    Some(match p {
        Prim::U8 => DType::U8,
        Prim::I8 => DType::I8,
        Prim::U16 => DType::U16,
        Prim::I16 => DType::I16,
        Prim::U32 => DType::U32,
        Prim::I32 => DType::I32,
        Prim::U64 => DType::U64,
        Prim::I64 => DType::I64,
        Prim::F32 => DType::F32,
        Prim::F64 => DType::F64,
        Prim::Custom | Prim::Reserved(_) => return None,
    })
}

/// The UDF primitive that stores a dtype (`bool` is stored as `u8`); `None` for the dtypes UDF
/// has no primitive for (`float16`, `complex64`, `complex128`: the spec's list ends at `f64`).
pub fn dtype_prim(d: DType) -> Option<Prim> {
    Some(match d {
        DType::Bool | DType::U8 => Prim::U8,
        DType::I8 => Prim::I8,
        DType::U16 => Prim::U16,
        DType::I16 => Prim::I16,
        DType::U32 => Prim::U32,
        DType::I32 => Prim::I32,
        DType::U64 => Prim::U64,
        DType::I64 => Prim::I64,
        DType::F32 => Prim::F32,
        DType::F64 => Prim::F64,
        DType::F16 | DType::C64 | DType::C128 => return None,
    })
}

/// `ndarray:10x180x360` -> `[10, 180, 360]`.
pub fn parse_ndarray_type_name(s: &str) -> Option<Vec<u64>> {
    let rest = s.strip_prefix("ndarray:")?;
    if rest.is_empty() {
        return Some(Vec::new());
    }
    rest.split('x').map(|p| p.parse::<u64>().ok()).collect()
}

/// Decoded text of a TEXT table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UdfText {
    /// A scalar string, kept verbatim (NULs included).
    Scalar(String),
    /// One string per record (C order over the real axes), trailing NUL padding removed.
    List(Vec<String>),
}

impl UdfText {
    /// The text as JSON: a string, or an array of strings.
    pub fn to_json(&self) -> Value {
        match self {
            UdfText::Scalar(s) => Value::from(s.as_str()),
            UdfText::List(v) => Value::from(v.clone()),
        }
    }
}
