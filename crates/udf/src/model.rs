//! The friendly API: a UDF file opened from an [`Input`], its dataset graph, and typed access
//! to every datatable (values, text, JSON, dataset links).

use std::borrow::Cow;

use rasterpack_common::{DType, Error, ErrorKind, Finding, Findings, Input, Limits, NdArray, Result, Severity};
use serde_json::Value;

use crate::codes;
use crate::parse::Shape;
use crate::raw::{DatasetHeader, Descriptor, FileHeader, FileOffset, Hint, Prim};
use crate::validate;

/// Everything the structural walk learned about a file, with the findings it made.
#[derive(Debug, Clone, Default)]
pub struct Document {
    pub file_len: u64,
    /// `None` when the file is too short or its magic is wrong.
    pub header: Option<FileHeader>,
    /// Datasets reachable from the root, in breadth-first order (the root first).
    pub datasets: Vec<Dataset>,
    pub findings: Findings,
}

/// One string lookup entry with its resolved string.
#[derive(Debug, Clone)]
pub struct Lookup {
    pub hash: u32,
    pub offset: u16,
    pub len: u16,
    /// The string when the entry is in bounds and UTF-8.
    pub string: Option<String>,
    /// Absolute file offset of the entry.
    pub entry_offset: u64,
}

/// A link from a DATASET table entry to a dataset.
#[derive(Debug, Clone)]
pub struct ChildLink {
    pub table: usize,
    pub entry: u64,
    pub location: FileOffset,
    /// Absolute offset of the entry's 16 bytes.
    pub entry_offset: u64,
    /// Index into [`Document::datasets`]; `None` for null or invalid entries.
    pub target: Option<usize>,
    /// Non-null and passes the file-offset rules (only these are followed).
    pub valid: bool,
}

/// A dataset: header, lookup, tables.
#[derive(Debug, Clone)]
pub struct Dataset {
    pub location: FileOffset,
    /// `root`, then `/TABLE` or `/TABLE[i]` per DATASET link followed (first discovery).
    pub path: String,
    /// The dataset this one was first reached from.
    pub parent: Option<usize>,
    pub depth: u32,
    pub header: DatasetHeader,
    /// False when the check value is wrong (nothing else is read).
    pub check_ok: bool,
    /// Absolute offset where table data starts, when `header_size` is usable.
    pub data_base: Option<u64>,
    pub lookups: Vec<Lookup>,
    pub tables: Vec<Table>,
    pub children: Vec<ChildLink>,
    /// Errors of this dataset's header that make all its tables unreadable (an unusable
    /// `header_size`: where the data starts is unknown).
    pub faults: Vec<Finding>,
}

impl Dataset {
    /// The printable part of the id (NUL padding dropped).
    pub fn id(&self) -> String {
        id_string(&self.header.id)
    }

    pub fn table(&self, name: &str) -> Option<&Table> {
        self.tables.iter().find(|t| t.name.as_deref() == Some(name))
    }
}

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
pub struct Table {
    /// Index of the dataset holding the table in [`Document::datasets`].
    pub dataset: usize,
    pub index: usize,
    /// Absolute offset of the descriptor.
    pub desc_offset: u64,
    pub desc: Descriptor,
    pub name: Option<String>,
    pub index_name: Option<String>,
    pub related_name: Option<String>,
    pub type_name: Option<String>,
    pub prim: Prim,
    pub hint: Hint,
    pub shape: Shape,
    pub compressed: bool,
    /// Absolute offset of the data (when the dataset header is usable).
    pub data_offset: Option<u64>,
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
    /// elsewhere in the file do not (ERRATA: an intact table is readable whatever the verdict
    /// on the rest of the file). Content errors (text, JSON, index values) are found when the
    /// data is read.
    pub faults: Vec<Finding>,
}

/// How a table's data is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    /// Scheme 17 of the reference crate, on a 4-byte primitive: decoded (see [`crate::compress`]).
    SimpleU32,
    /// Any other scheme (or scheme 17 on another primitive): not decodable, reads are unsupported.
    Unsupported(u16),
}

impl Table {
    pub fn compression(&self) -> Compression {
        match self.desc.compress_info {
            0 => Compression::None,
            crate::compress::SIMPLE_U32 if self.prim.size() == Some(4) => Compression::SimpleU32,
            c => Compression::Unsupported(c),
        }
    }

    /// The data can be read (as stored, or decoded from a supported compression). Says
    /// nothing about [`Table::faults`].
    pub fn readable(&self) -> bool {
        self.layout_ok
            && self.size_ok
            && self.data_offset.is_some()
            && !matches!(self.compression(), Compression::Unsupported(_))
    }

    /// Length of the data once decoded: `data_size`, or the shape's words for compressed tables.
    pub fn decoded_len(&self) -> u64 {
        match self.compression() {
            Compression::SimpleU32 => self.shape.elements().saturating_mul(4),
            _ => self.data_size,
        }
    }

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
}

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

/// Decoded text of a TEXT table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Text {
    /// A scalar string, kept verbatim (NULs included).
    Scalar(String),
    /// One string per record (C order over the real axes), trailing NUL padding removed.
    List(Vec<String>),
}

impl Text {
    pub fn to_json(&self) -> Value {
        match self {
            Text::Scalar(s) => Value::from(s.as_str()),
            Text::List(v) => Value::from(v.clone()),
        }
    }
}

/// The values of a table, typed by primitive (little-endian decoded).
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    /// Custom primitive: the raw bytes.
    Custom(Vec<u8>),
}

/// A primitive element type with a UDF primitive code.
pub trait Element: Copy + Sized {
    const PRIM: Prim;
    fn from_le(b: &[u8]) -> Self;
    fn put_le(self, out: &mut Vec<u8>);
}

macro_rules! element {
    ($t:ty, $p:expr, $n:expr) => {
        impl Element for $t {
            const PRIM: Prim = $p;
            fn from_le(b: &[u8]) -> Self {
                let mut a = [0u8; $n];
                a.copy_from_slice(&b[..$n]);
                <$t>::from_le_bytes(a)
            }
            fn put_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    };
}
element!(u8, Prim::U8, 1);
element!(i8, Prim::I8, 1);
element!(u16, Prim::U16, 2);
element!(i16, Prim::I16, 2);
element!(u32, Prim::U32, 4);
element!(i32, Prim::I32, 4);
element!(u64, Prim::U64, 8);
element!(i64, Prim::I64, 8);
element!(f32, Prim::F32, 4);
element!(f64, Prim::F64, 8);

/// An opened UDF file: the structural walk is done, table data is read on demand.
#[derive(Debug, Clone)]
pub struct UdfFile {
    input: Input,
    limits: Limits,
    pub doc: Document,
}

impl UdfFile {
    /// Walk the structure. Fails when the file has any error finding (run
    /// [`crate::validate::validate`] to see them all).
    pub fn open(input: &Input, limits: &Limits) -> Result<UdfFile> {
        let doc = validate::walk(input, limits);
        if let Some(f) = doc
            .findings
            .iter()
            .find(|f| f.severity == rasterpack_common::Severity::Error)
        {
            let kind = if f.code == codes::TRUNCATED {
                ErrorKind::Truncated
            } else {
                ErrorKind::Invalid
            };
            return Err(Error::new(kind, f.code.clone(), f.offset, f.message.clone()));
        }
        Ok(UdfFile {
            input: input.clone(),
            limits: *limits,
            doc,
        })
    }

    /// Walk the structure and keep whatever could be read, errors or not.
    pub fn open_lenient(input: &Input, limits: &Limits) -> UdfFile {
        UdfFile {
            input: input.clone(),
            limits: *limits,
            doc: validate::walk(input, limits),
        }
    }

    /// Wrap a document already walked (e.g. by [`crate::validate::validate`]).
    pub fn from_document(input: &Input, limits: &Limits, doc: Document) -> UdfFile {
        UdfFile {
            input: input.clone(),
            limits: *limits,
            doc,
        }
    }

    /// The first `n` bytes of a table's (decoded) data, for previews: the table's own
    /// structural faults are checked, its content is not.
    pub fn bytes_prefix(&self, t: &Table, n: u64) -> Result<Vec<u8>> {
        let off = self.require_intact(t)?;
        let n = n.min(t.decoded_len());
        match t.compression() {
            Compression::SimpleU32 => {
                let stream = self.input.read_vec(off, t.data_size, "table data", &self.limits)?;
                let mut out = vec![0u8; self.limits.check_alloc(n - n % 4, "preview", Some(off))?];
                crate::compress::decode_simple_u32(&stream, &mut out, false)
                    .map_err(|e| Error::invalid(codes::COMPRESS_CORRUPT, off + e.offset, e.message))?;
                Ok(out)
            }
            _ => self.input.read_vec(off, n, "table data", &self.limits),
        }
    }

    pub fn header(&self) -> Option<&FileHeader> {
        self.doc.header.as_ref()
    }

    pub fn datasets(&self) -> &[Dataset] {
        &self.doc.datasets
    }

    pub fn root(&self) -> Option<&Dataset> {
        self.doc.datasets.first()
    }

    /// Every `(dataset, table)` as `DATASET_PATH/TABLE` element names.
    pub fn table_paths(&self) -> Vec<String> {
        let mut v = Vec::new();
        for ds in &self.doc.datasets {
            for t in &ds.tables {
                v.push(format!("{}/{}", ds.path, t.display_name()));
            }
        }
        v
    }

    /// Find a table by `DATASET_PATH/TABLE` (e.g. `root/children[1]/values`) or by a bare table
    /// name when only one table in the file has it.
    pub fn find(&self, element: &str) -> Result<(&Dataset, &Table)> {
        for ds in &self.doc.datasets {
            if let Some(rest) = element.strip_prefix(ds.path.as_str()).and_then(|r| r.strip_prefix('/')) {
                if let Some(t) = ds.tables.iter().find(|t| t.display_name() == rest) {
                    return Ok((ds, t));
                }
            }
        }
        let hits: Vec<(&Dataset, &Table)> = self
            .doc
            .datasets
            .iter()
            .flat_map(|ds| ds.tables.iter().map(move |t| (ds, t)))
            .filter(|(_, t)| t.name.as_deref() == Some(element))
            .collect();
        match hits.len() {
            1 => Ok(hits[0]),
            0 => Err(Error::usage(format!(
                "no datatable {element:?} in this UDF file; choose one of: {}",
                self.table_paths().join(", ")
            ))),
            _ => Err(Error::usage(format!(
                "datatable name {element:?} is ambiguous; choose one of: {}",
                hits.iter()
                    .map(|(d, t)| format!("{}/{}", d.path, t.display_name()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// The `DATASET_PATH/TABLE` name of a table.
    pub fn path_of(&self, t: &Table) -> String {
        match self.doc.datasets.get(t.dataset) {
            Some(ds) => format!("{}/{}", ds.path, t.display_name()),
            None => t.display_name(),
        }
    }

    /// The table's own checks (ERRATA: an intact table is readable whatever the verdict on
    /// the rest of the file): no fault of its dataset header or of itself, a supported
    /// compression, a usable data range. Returns where its data starts.
    fn require_intact(&self, t: &Table) -> Result<u64> {
        let ds_faults = self
            .doc
            .datasets
            .get(t.dataset)
            .map_or(&[][..], |d| d.faults.as_slice());
        if let Some(f) = ds_faults.iter().chain(&t.faults).next() {
            return Err(finding_error(f, &self.path_of(t)));
        }
        if let Compression::Unsupported(c) = t.compression() {
            return Err(Error::unsupported(
                codes::TABLE_COMPRESSED,
                Some(t.desc_offset + 6),
                format!(
                    "table {} uses compression scheme {c} on {}, which rasterpack does not decode (the spec defines none)",
                    self.path_of(t),
                    t.prim.name()
                ),
            ));
        }
        match t.data_offset {
            Some(o) if t.readable() => Ok(o),
            _ => Err(Error::invalid(
                codes::TABLE_OUT_OF_BOUNDS,
                t.desc_offset,
                format!("table {} has no readable data (see validate)", self.path_of(t)),
            )),
        }
    }

    /// The table's data after its own structural checks, decoded when compressed; content
    /// rules are not checked here.
    fn data(&self, t: &Table) -> Result<Cow<'_, [u8]>> {
        let off = self.require_intact(t)?;
        if t.compression() == Compression::SimpleU32 {
            return validate::decompress(&self.input, t, off, &self.limits).map(Cow::Owned);
        }
        if let Some(all) = self.input.as_bytes() {
            let s = rasterpack_common::slice_at(all, off, t.data_size, "table data")?;
            return Ok(Cow::Borrowed(s));
        }
        Ok(Cow::Owned(self.input.read_vec(
            off,
            t.data_size,
            "table data",
            &self.limits,
        )?))
    }

    /// The content rules of a table (text, JSON, INDEX / RANGE values) on its data.
    fn check_content(&self, t: &Table, b: &[u8]) -> Result<()> {
        let off = t.data_offset.unwrap_or(0);
        let data = validate::TableData::Mem {
            bytes: b,
            at: off,
            exact: t.compression() == Compression::None,
        };
        let mut f = Findings::new();
        validate::check_table(&data, &self.doc, t, &self.limits, &self.path_of(t), &mut f)?;
        let first = f.iter().find(|x| x.severity == Severity::Error).cloned();
        match first {
            Some(x) => Err(finding_error(&x, &self.path_of(t))),
            None => Ok(()),
        }
    }

    /// The stored bytes of a table (decoded when compressed), once the table's own structure
    /// and content rules hold: borrowed from memory inputs, read otherwise. A table that
    /// `validate` would reject is never handed out; errors elsewhere in the file do not matter.
    pub fn bytes(&self, t: &Table) -> Result<Cow<'_, [u8]>> {
        let b = self.data(t)?;
        self.check_content(t, &b)?;
        Ok(b)
    }

    /// The values as `T` (which must match the table's primitive), in C order over all axes.
    pub fn values<T: Element>(&self, t: &Table) -> Result<Vec<T>> {
        if t.prim != T::PRIM {
            return Err(Error::usage(format!(
                "table {} holds {}, not {}",
                t.display_name(),
                t.prim.name(),
                T::PRIM.name()
            )));
        }
        let b = self.bytes(t)?;
        let n = T::PRIM.size().unwrap_or(1) as usize;
        Ok(b.chunks_exact(n).map(T::from_le).collect())
    }

    /// The values typed by the table's primitive.
    pub fn typed_values(&self, t: &Table) -> Result<Values> {
        Ok(match t.prim {
            Prim::U8 => Values::U8(self.values(t)?),
            Prim::I8 => Values::I8(self.values(t)?),
            Prim::U16 => Values::U16(self.values(t)?),
            Prim::I16 => Values::I16(self.values(t)?),
            Prim::U32 => Values::U32(self.values(t)?),
            Prim::I32 => Values::I32(self.values(t)?),
            Prim::U64 => Values::U64(self.values(t)?),
            Prim::I64 => Values::I64(self.values(t)?),
            Prim::F32 => Values::F32(self.values(t)?),
            Prim::F64 => Values::F64(self.values(t)?),
            Prim::Custom => Values::Custom(self.bytes(t)?.into_owned()),
            Prim::Reserved(b) => {
                return Err(Error::invalid(
                    codes::TABLE_RESERVED_PRIM,
                    t.desc_offset + 4,
                    format!("reserved primitive 0x{b:x}"),
                ))
            }
        })
    }

    fn check_text_size(&self, t: &Table) -> Result<()> {
        if t.data_size > self.limits.max_text {
            return Err(Error::limit(
                "limit.text",
                Some(t.desc_offset),
                format!("text table of {} bytes", t.data_size),
            ));
        }
        Ok(())
    }

    /// Decode a TEXT table.
    pub fn text(&self, t: &Table) -> Result<Text> {
        if t.hint != Hint::Text || !t.hint_ok {
            return Err(Error::usage(format!(
                "table {} is not a valid TEXT table",
                t.display_name()
            )));
        }
        self.check_text_size(t)?;
        // The strict decode is the content check of text.
        let b = self.data(t)?;
        let base = t.data_offset.unwrap_or(0);
        let at = |rel: u64| {
            if t.compression() == Compression::None {
                base + rel
            } else {
                base
            }
        };
        crate::validate::decode_text(t, &b).map_err(|(rel, msg)| {
            Error::invalid(
                codes::TEXT_INVALID,
                at(rel),
                format!("table {}: {msg}", self.path_of(t)),
            )
        })
    }

    /// Parse a JSON table.
    pub fn json(&self, t: &Table) -> Result<Value> {
        if t.hint != Hint::Json || !t.hint_ok {
            return Err(Error::usage(format!(
                "table {} is not a valid JSON table",
                t.display_name()
            )));
        }
        self.check_text_size(t)?;
        let b = self.data(t)?;
        let at = t.data_offset.unwrap_or(0);
        let v: Value = serde_json::from_slice(&b).map_err(|e| {
            Error::invalid(
                codes::JSON_INVALID,
                at,
                format!("JSON of table {}: {e}", self.path_of(t)),
            )
        })?;
        crate::validate::json_shape(&v, t.shape.real())
            .map_err(|m| Error::invalid(codes::JSON_SHAPE, at, format!("JSON of table {}: {m}", self.path_of(t))))?;
        Ok(v)
    }

    /// The file offsets of a DATASET table.
    pub fn file_offsets(&self, t: &Table) -> Result<Vec<FileOffset>> {
        if t.hint != Hint::Dataset || !t.hint_ok {
            return Err(Error::usage(format!(
                "table {} is not a valid DATASET table",
                t.display_name()
            )));
        }
        let v: Vec<u64> = self.values(t)?;
        Ok(v.chunks_exact(2)
            .map(|c| FileOffset {
                offset: c[0],
                size: c[1],
            })
            .collect())
    }

    /// The table as an array: its primitive dtype, shape = real axes then ghost axes, C order
    /// (the last axis fastest, as stored).
    pub fn array(&self, ds: &Dataset, t: &Table) -> Result<NdArray> {
        let dtype = t.dtype().ok_or_else(|| {
            Error::unsupported(
                "udf.table.custom_prim",
                Some(t.desc_offset + 4),
                format!(
                    "table {} has primitive {}, which has no array dtype",
                    t.display_name(),
                    t.prim.name()
                ),
            )
        })?;
        if t.decoded_len() > self.limits.max_array_bytes {
            return Err(Error::limit(
                "limit.array",
                Some(t.desc_offset),
                format!("table of {} bytes", t.decoded_len()),
            ));
        }
        let data = self.bytes(t)?.into_owned();
        let mut shape: Vec<u64> = t.shape.axes.iter().map(|&a| a as u64).collect();
        // Arrays written by `write_array` whose shape did not fit the packed encoding carry it
        // in type_name as `ndarray:AxBxC`.
        if let Some(full) = t.type_name.as_deref().and_then(parse_ndarray_type_name) {
            if rasterpack_common::byte_len(dtype, &full) == Some(data.len() as u64) {
                shape = full;
            }
        }
        let mut arr = NdArray::new(dtype, shape, data)?;
        arr.name = t.name.clone();
        // attrs: a sibling JSON object named `attrs` (what write_array stores), then our facts.
        if let Some(at) = ds.table(crate::ATTRS_TABLE) {
            if at.hint == Hint::Json && at.index != t.index && at.faults.is_empty() {
                if let Ok(Value::Object(m)) = self.json(at) {
                    arr.attrs = m;
                }
            }
        }
        let mut udf = serde_json::Map::new();
        udf.insert("path".into(), Value::from(format!("{}/{}", ds.path, t.display_name())));
        udf.insert("hint".into(), Value::from(t.hint.name()));
        udf.insert("real_shape".into(), Value::from(t.shape.real().to_vec()));
        udf.insert("ghost_shape".into(), Value::from(t.shape.ghost().to_vec()));
        if let Some(n) = &t.type_name {
            udf.insert("type_name".into(), Value::from(n.as_str()));
        }
        arr.attrs.entry("udf").or_insert(Value::Object(udf));
        Ok(arr)
    }
}

/// `ndarray:10x180x360` -> `[10, 180, 360]`.
pub fn parse_ndarray_type_name(s: &str) -> Option<Vec<u64>> {
    let rest = s.strip_prefix("ndarray:")?;
    if rest.is_empty() {
        return Some(Vec::new());
    }
    rest.split('x').map(|p| p.parse::<u64>().ok()).collect()
}

/// A finding as the error of a read: its code and offset, the table named.
fn finding_error(f: &Finding, table: &str) -> Error {
    let kind = match f.code.as_str() {
        codes::TRUNCATED => ErrorKind::Truncated,
        codes::IO => ErrorKind::Io,
        codes::LIMIT_WORK | codes::DATASET_TOO_MANY | codes::DATASET_TOO_DEEP | codes::JSON_TOO_LARGE => {
            ErrorKind::LimitExceeded
        }
        _ => ErrorKind::Invalid,
    };
    let message = if f.message.contains(table) {
        f.message.clone()
    } else {
        format!("table {table}: {}", f.message)
    };
    Error::new(kind, f.code.clone(), f.offset, message)
}
