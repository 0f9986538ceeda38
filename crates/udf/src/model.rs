//! The friendly API: a UDF file opened from a path, bytes or an [`Input`], its dataset graph,
//! and typed access to every datatable (values, text, JSON, dataset links, arrays and regions
//! of them, streamed or in memory).

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;

use rasterpack_common::{
    ArrayInfo, ArrayRequest, ArraySink, Element, Error, ErrorKind, Finding, Findings, Input, Limits, MemorySink,
    NdArray, Result, Severity,
};
use serde_json::Value;

use crate::codes;
use crate::document::{dtype_prim, UdfCompression, UdfDataset, UdfDocument, UdfTable, UdfText};
use crate::raw::{FileHeader, FileOffset, Hint, Prim};
use crate::read::TableSource;

/// Tables named in the hint of a request that names none (or one the file lacks): a file of
/// 330,000 tables must not make a message of megabytes.
const HINT_TABLES: usize = 32;
use crate::validate::{self, Position};

/// What one decoded row of a text list costs at least (a `String`), against `Limits::max_text`.
pub const TEXT_ROW_COST: u64 = std::mem::size_of::<String>() as u64;

/// The values of a table, typed by primitive (little-endian decoded).
#[derive(Debug, Clone, PartialEq)]
pub enum UdfValues {
    /// `u8` values.
    U8(Vec<u8>),
    /// `i8` values.
    I8(Vec<i8>),
    /// `u16` values.
    U16(Vec<u16>),
    /// `i16` values.
    I16(Vec<i16>),
    /// `u32` values.
    U32(Vec<u32>),
    /// `i32` values.
    I32(Vec<i32>),
    /// `u64` values.
    U64(Vec<u64>),
    /// `i64` values.
    I64(Vec<i64>),
    /// `f32` values.
    F32(Vec<f32>),
    /// `f64` values.
    F64(Vec<f64>),
    /// Custom primitive: the raw bytes.
    Custom(Vec<u8>),
}

/// A UDF file opened for reading: the structure is walked when it is opened, table data is
/// read on demand (streamed from disk for files).
///
/// Opening is lenient, as every rasterpack reader is: a file with errors opens, every table
/// that is intact reads, and a table that `validate` would reject is refused with the finding
/// (see [`UdfFile::validate`] for all findings).
#[derive(Debug, Clone)]
pub struct UdfFile {
    input: Input,
    limits: Limits,
    /// What the structural walk found (datasets, tables, findings).
    pub doc: UdfDocument,
    names: OnceLock<NameIndex>,
}

/// Tables by `DATASET_PATH/TABLE` and by bare name (built on the first lookup).
#[derive(Debug, Clone, Default)]
struct NameIndex {
    by_path: HashMap<String, (usize, usize)>,
    by_name: HashMap<String, Vec<(usize, usize)>>,
}

impl UdfFile {
    /// Open the file at `path` with default [`Limits`]. Fails when it is not a UDF0 file (or
    /// its header is cut short) or when nothing of it could be walked; a file with errors
    /// elsewhere opens, and its intact tables read.
    pub fn open(path: impl AsRef<Path>) -> Result<UdfFile> {
        UdfFile::from_input(Input::open(path.as_ref())?, Limits::default())
    }

    /// A UDF file held in memory, with default [`Limits`].
    pub fn from_bytes(bytes: Vec<u8>) -> Result<UdfFile> {
        UdfFile::from_input(Input::from_bytes("<memory>", bytes), Limits::default())
    }

    /// Open `input` with `limits` (see [`UdfFile::open`]).
    pub fn from_input(input: Input, limits: Limits) -> Result<UdfFile> {
        let file = UdfFile::open_lenient(&input, &limits);
        if file.doc.header.is_none() || file.doc.datasets.iter().all(|d| d.tables.is_empty()) {
            if let Some(e) = file.first_error() {
                return Err(e);
            }
        }
        Ok(file)
    }

    /// Walk the structure and keep whatever could be read, errors or not (never fails).
    pub fn open_lenient(input: &Input, limits: &Limits) -> UdfFile {
        UdfFile::from_document(input, limits, validate::walk(input, limits))
    }

    /// Walk the structure; fails with the first error finding when there is one (the strict
    /// open: run [`UdfFile::validate`] on a lenient open to see them all).
    pub fn open_strict(input: &Input, limits: &Limits) -> Result<UdfFile> {
        let file = UdfFile::open_lenient(input, limits);
        match file.first_error() {
            Some(e) => Err(e),
            None => Ok(file),
        }
    }

    /// Wrap a document already walked (e.g. by [`crate::validate::validate`]).
    pub fn from_document(input: &Input, limits: &Limits, doc: UdfDocument) -> UdfFile {
        UdfFile {
            input: input.clone(),
            limits: *limits,
            doc,
            names: OnceLock::new(),
        }
    }

    /// The input the file is read from.
    pub fn input(&self) -> &Input {
        &self.input
    }

    /// The limits reads are held to.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The first error finding of the walk, as an error.
    pub(crate) fn first_error(&self) -> Option<Error> {
        let f = self.doc.findings.iter().find(|f| f.severity == Severity::Error)?;
        let kind = if f.code == codes::TRUNCATED {
            ErrorKind::Truncated
        } else {
            ErrorKind::Invalid
        };
        Some(Error::new(kind, f.code.clone(), f.offset, f.message.clone()))
    }

    /// The file header, when it could be read.
    pub fn header(&self) -> Option<&FileHeader> {
        self.doc.header.as_ref()
    }

    /// The datasets reachable from the root, breadth first (the root first).
    pub fn datasets(&self) -> &[UdfDataset] {
        &self.doc.datasets
    }

    /// The root dataset.
    pub fn root(&self) -> Option<&UdfDataset> {
        self.doc.datasets.first()
    }

    /// Every `(dataset, table)` as `DATASET_PATH/TABLE` element names.
    pub fn table_paths(&self) -> Vec<String> {
        self.tables()
            .map(|(ds, t)| format!("{}/{}", ds.path, t.display_name()))
            .collect()
    }

    /// The tables a request can name and get an array of (those with a dtype, as
    /// `arrays()` lists them; custom-typed ones do not convert), as a hint: the first
    /// [`HINT_TABLES`], then how many more.
    fn convertible_hint(&self) -> String {
        let mut names = self
            .tables()
            .filter(|(_, t)| t.dtype().is_some())
            .map(|(ds, t)| format!("{}/{}", ds.path, t.display_name()));
        let mut shown: Vec<String> = names.by_ref().take(HINT_TABLES).collect();
        let more = names.count();
        if shown.is_empty() {
            return "(none: no datatable of this file converts)".into();
        }
        if more > 0 {
            shown.push(format!("... and {more} more (`rasterpack inspect` lists them)"));
        }
        shown.join(", ")
    }

    /// Every table with its dataset, datasets breadth first, tables in descriptor order.
    pub fn tables(&self) -> impl Iterator<Item = (&UdfDataset, &UdfTable)> {
        self.doc
            .datasets
            .iter()
            .flat_map(|ds| ds.tables.iter().map(move |t| (ds, t)))
    }

    fn names(&self) -> &NameIndex {
        self.names.get_or_init(|| {
            let mut index = NameIndex::default();
            for (di, ds) in self.doc.datasets.iter().enumerate() {
                for (ti, t) in ds.tables.iter().enumerate() {
                    let path = format!("{}/{}", ds.path, t.display_name());
                    // The first dataset (breadth first) and first table win, as a scan would.
                    index.by_path.entry(path).or_insert((di, ti));
                    if let Some(n) = &t.name {
                        index.by_name.entry(n.clone()).or_default().push((di, ti));
                    }
                }
            }
            index
        })
    }

    fn at(&self, (di, ti): (usize, usize)) -> (&UdfDataset, &UdfTable) {
        let ds = &self.doc.datasets[di];
        (ds, &ds.tables[ti])
    }

    /// Find a table by `DATASET_PATH/TABLE` (e.g. `root/children[1]/values`) or by a bare table
    /// name when only one table in the file has it.
    pub fn find(&self, element: &str) -> Result<(&UdfDataset, &UdfTable)> {
        let names = self.names();
        if let Some(&hit) = names.by_path.get(element) {
            return Ok(self.at(hit));
        }
        match names.by_name.get(element).map(Vec::as_slice).unwrap_or(&[]) {
            [one] => Ok(self.at(*one)),
            [] => Err(Error::usage(format!(
                "no datatable {element:?} in this UDF file; choose one of: {}",
                self.convertible_hint()
            ))),
            hits => Err(Error::usage(format!(
                "datatable name {element:?} is ambiguous; choose one of: {}",
                hits.iter()
                    .map(|&h| self.path_of(self.at(h).1))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// The `DATASET_PATH/TABLE` name of a table.
    pub fn path_of(&self, t: &UdfTable) -> String {
        match self.doc.datasets.get(t.dataset) {
            Some(ds) => format!("{}/{}", ds.path, t.display_name()),
            None => t.display_name(),
        }
    }

    /// The table a request names, or the file's only numeric table when it names none. A name
    /// not found in a file with errors says so (the walk may have stopped before the table).
    pub(crate) fn select(&self, element: Option<&str>) -> Result<(&UdfDataset, &UdfTable)> {
        if self.doc.datasets.iter().all(|d| d.tables.is_empty()) {
            if let Some(e) = self.first_error() {
                return Err(e);
            }
        }
        if let Some(e) = element {
            return self.find(e).map_err(|err| match self.first_error() {
                Some(first) => Error::new(
                    first.kind,
                    first.code,
                    first.offset,
                    format!("{}; the file has errors, the first: {}", err.message, first.message),
                ),
                None => err,
            });
        }
        let mut numeric = self.tables().filter(|(_, t)| t.is_value_array());
        match (numeric.next(), numeric.next()) {
            (Some(only), None) => Ok(only),
            _ => Err(Error::new(
                ErrorKind::Usage,
                "request.element_required",
                None,
                format!(
                    "this UDF file holds {} datatables, {} of which convert; name one as DATASET_PATH/TABLE: {}",
                    self.tables().count(),
                    self.tables().filter(|(_, t)| t.dtype().is_some()).count(),
                    self.convertible_hint()
                ),
            )),
        }
    }

    /// The table's own checks (rasterpack's rule: an intact table is readable whatever the
    /// verdict on the rest of the file): no fault of its dataset header or of itself, a
    /// supported compression, a usable data range. Returns where its data starts.
    fn require_intact(&self, t: &UdfTable) -> Result<u64> {
        let ds_faults = self
            .doc
            .datasets
            .get(t.dataset)
            .map_or(&[][..], |d| d.faults.as_slice());
        if let Some(f) = ds_faults.iter().chain(&t.faults).next() {
            return Err(finding_error(f, &self.path_of(t)));
        }
        if let UdfCompression::Unsupported(c) = t.compression() {
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

    /// The first `n` bytes of a table's (decoded) data, for previews: the table's own
    /// structural faults are checked, its content is not. Reads only what the prefix needs.
    pub fn bytes_prefix(&self, t: &UdfTable, n: u64) -> Result<Vec<u8>> {
        let off = self.require_intact(t)?;
        let n = n.min(t.decoded_len());
        let n = self.limits.check_alloc(n, "preview", Some(off))?;
        if t.compression() != UdfCompression::SimpleU32 {
            return self.input.read_vec(off, n as u64, "table data", &self.limits);
        }
        let mut out = Vec::with_capacity(n);
        validate::for_each_decoded(
            &self.input,
            t,
            off,
            n as u64,
            |_, words| {
                let take = (n - out.len()).min(words.len());
                out.extend_from_slice(&words[..take]);
                Ok(out.len() < n)
            },
            |_| {},
        )?;
        Ok(out)
    }

    /// The table's data after its own structural checks, decoded when compressed (within the
    /// limits); content rules are not checked here.
    fn data(&self, t: &UdfTable) -> Result<Cow<'_, [u8]>> {
        let off = self.require_intact(t)?;
        if t.compression() == UdfCompression::SimpleU32 {
            let len = t.decoded_len();
            if len > self.limits.max_array_bytes {
                return Err(Error::limit(
                    "limit.array",
                    Some(off),
                    format!("decoded table of {len} bytes"),
                ));
            }
            let mut out = Vec::new();
            validate::for_each_decoded(
                &self.input,
                t,
                off,
                u64::MAX,
                |_, words| {
                    self.limits
                        .check_alloc(out.len() as u64 + words.len() as u64, "decoded table", Some(off))?;
                    out.extend_from_slice(words);
                    Ok(true)
                },
                |_| {},
            )?;
            return Ok(Cow::Owned(out));
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

    /// The content rules of a table (text, JSON, INDEX / RANGE values) on its data in memory.
    fn check_content(&self, t: &UdfTable, b: &[u8]) -> Result<()> {
        let off = t.data_offset.unwrap_or(0);
        let position = if t.compression() == UdfCompression::None {
            Position::stored(off)
        } else {
            Position::decoded(off)
        };
        let mut f = Findings::new();
        validate::check_table_bytes(&self.doc, t, b, position, &self.limits, &self.path_of(t), &mut f);
        let first = f.iter().find(|x| x.severity == Severity::Error).cloned();
        match first {
            Some(x) => Err(finding_error(&x, &self.path_of(t))),
            None => Ok(()),
        }
    }

    /// The stored bytes of a table (decoded when compressed), once the table's own structure
    /// and content rules hold: borrowed from memory inputs, read otherwise. A table that
    /// `validate` would reject is never handed out; errors elsewhere in the file do not matter.
    pub fn bytes(&self, t: &UdfTable) -> Result<Cow<'_, [u8]>> {
        let b = self.data(t)?;
        self.check_content(t, &b)?;
        Ok(b)
    }

    /// The values as `T` (which must match the table's primitive), in C order over all axes.
    pub fn values<T: Element>(&self, t: &UdfTable) -> Result<Vec<T>> {
        let want = dtype_prim(T::DTYPE);
        if Some(t.prim) != want {
            return Err(Error::new(
                ErrorKind::Usage,
                "array.dtype_mismatch",
                None,
                format!(
                    "table {} holds {}, not {}",
                    t.display_name(),
                    t.prim.name(),
                    T::DTYPE.name()
                ),
            ));
        }
        let b = self.bytes(t)?;
        Ok(b.chunks_exact(T::DTYPE.size()).map(T::from_le_slice).collect())
    }

    /// The values typed by the table's primitive.
    pub fn typed_values(&self, t: &UdfTable) -> Result<UdfValues> {
        Ok(match t.prim {
            Prim::U8 => UdfValues::U8(self.values(t)?),
            Prim::I8 => UdfValues::I8(self.values(t)?),
            Prim::U16 => UdfValues::U16(self.values(t)?),
            Prim::I16 => UdfValues::I16(self.values(t)?),
            Prim::U32 => UdfValues::U32(self.values(t)?),
            Prim::I32 => UdfValues::I32(self.values(t)?),
            Prim::U64 => UdfValues::U64(self.values(t)?),
            Prim::I64 => UdfValues::I64(self.values(t)?),
            Prim::F32 => UdfValues::F32(self.values(t)?),
            Prim::F64 => UdfValues::F64(self.values(t)?),
            Prim::Custom => UdfValues::Custom(self.bytes(t)?.into_owned()),
            Prim::Reserved(b) => {
                return Err(Error::invalid(
                    codes::TABLE_RESERVED_PRIM,
                    t.desc_offset + 4,
                    format!("reserved primitive 0x{b:x}"),
                ))
            }
        })
    }

    fn check_text_size(&self, t: &UdfTable) -> Result<()> {
        if t.data_size > self.limits.max_text {
            return Err(Error::limit(
                "limit.text",
                Some(t.desc_offset),
                format!("text table of {} bytes", t.data_size),
            ));
        }
        // A list of empty strings holds no bytes but costs a `String` per row once decoded.
        let rows = t.shape.records();
        if t.hint == Hint::Text && rows.saturating_mul(TEXT_ROW_COST) > self.limits.max_text {
            return Err(Error::limit(
                "limit.text",
                Some(t.desc_offset),
                format!(
                    "text list of {rows} strings ({TEXT_ROW_COST} bytes each once decoded) is above the \
                     limit of {} bytes",
                    self.limits.max_text
                ),
            ));
        }
        Ok(())
    }

    /// Decode a TEXT table (within `Limits::max_text`, counting each row as
    /// [`TEXT_ROW_COST`] bytes at least).
    pub fn text(&self, t: &UdfTable) -> Result<UdfText> {
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
            if t.compression() == UdfCompression::None {
                base + rel
            } else {
                base
            }
        };
        validate::decode_text(t, &b).map_err(|(rel, msg)| {
            Error::invalid(
                codes::TEXT_INVALID,
                at(rel),
                format!("table {}: {msg}", self.path_of(t)),
            )
        })
    }

    /// Parse a JSON table (within `Limits::max_text`).
    pub fn json(&self, t: &UdfTable) -> Result<Value> {
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
        validate::json_shape(&v, t.shape.real())
            .map_err(|m| Error::invalid(codes::JSON_SHAPE, at, format!("JSON of table {}: {m}", self.path_of(t))))?;
        Ok(v)
    }

    /// The file offsets of a DATASET table.
    pub fn file_offsets(&self, t: &UdfTable) -> Result<Vec<FileOffset>> {
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

    /// What reading table `t` of `ds` as an array gives: its dtype and full shape (real axes
    /// then ghost axes, or the `ndarray:` type name's shape), its name, and as attributes the
    /// sibling JSON object `attrs` (what `write_array` stores) plus the table's UDF facts.
    pub fn array_info(&self, ds: &UdfDataset, t: &UdfTable) -> Result<ArrayInfo> {
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
        let mut info = ArrayInfo::new(dtype, t.array_shape());
        info.name = t.name.clone();
        if let Some(at) = ds.table(crate::ATTRS_TABLE) {
            if at.hint == Hint::Json && at.index != t.index && at.faults.is_empty() {
                if let Ok(Value::Object(m)) = self.json(at) {
                    info.attrs = m;
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
        info.attrs.entry("udf").or_insert(Value::Object(udf));
        Ok(info)
    }

    /// Stream table `t` of `ds`, or `req.region` of it (C axis order, as
    /// [`UdfFile::array_info`]'s shape), into `sink`: `begin`, then the bytes as they are read
    /// (see [`rasterpack_common::stream`]); the caller calls `finish`. Only the bytes the
    /// region needs are read; the content rules of the values read are checked on the way.
    pub fn stream_table(
        &self,
        ds: &UdfDataset,
        t: &UdfTable,
        req: &ArrayRequest,
        sink: &mut dyn ArraySink,
    ) -> Result<()> {
        let full = self.array_info(ds, t)?;
        let base = self.require_intact(t)?;
        let region = req.region_of(&full.shape)?;
        let info = ArrayInfo {
            shape: region.shape(),
            ..full.clone()
        };
        sink.begin(&info)?;
        let path = self.path_of(t);
        TableSource {
            input: &self.input,
            doc: &self.doc,
            table: t,
            base,
            dtype: full.dtype,
            shape: &full.shape,
            path: &path,
        }
        .stream(&region, sink)
    }

    /// The table as an array in memory (bounded by `Limits::max_array_bytes`): its primitive
    /// dtype, shape = real axes then ghost axes, C order (the last axis fastest, as stored).
    pub fn array(&self, ds: &UdfDataset, t: &UdfTable) -> Result<NdArray> {
        let mut sink = MemorySink::new(self.limits);
        self.stream_table(ds, t, &ArrayRequest::default(), &mut sink)?;
        sink.into_array()
    }

    /// The arrays of the file, one per table with a dtype, named `DATASET_PATH/TABLE`.
    pub fn array_list(&self) -> Vec<ArrayInfo> {
        self.tables()
            .filter_map(|(ds, t)| {
                let dtype = t.dtype()?;
                let mut info = ArrayInfo::new(dtype, t.array_shape());
                info.name = Some(format!("{}/{}", ds.path, t.display_name()));
                Some(info)
            })
            .collect()
    }
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
