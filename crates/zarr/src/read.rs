//! Reading Zarr v3 and v2 stores as rasterpack arrays.
//!
//! A store is a directory whose `zarr.json` (v3) or `.zarray`/`.zgroup` (v2) says what it is: an
//! array store is one array; a group's arrays are listed by their path inside it (`a/b`). The
//! metadata is checked here first ([`meta`]: declared shapes, chunk counts and chunk sizes
//! against the [`Limits`], the data types rasterpack has no counterpart for), then the arrays
//! are opened through zarrs. Reads go chunk by chunk (inner chunk by inner chunk for sharded
//! arrays), a band of chunks at a time, decoded in parallel within [`Limits::working_set`], and
//! every chunk's compressed stream is bounded by its decoded size first ([`guard`]).

pub mod guard;
pub mod meta;
pub mod objects;

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

use rasterpack_common::format::Section;
use rasterpack_common::stream::copy_block_into_window;
use rasterpack_common::{
    shown, ArrayFile, ArrayInfo, ArrayRequest, ArraySink, DType, Error, ErrorKind, Findings, Input, InspectOptions,
    Limits, MemorySink, Region, Report, Result, Severity, ValidateOptions,
};
use rayon::prelude::*;
use serde_json::{json, Map, Value};
use zarrs::array::codec::{ArrayToBytesCodecTraits, CodecOptions};
use zarrs::array::{Array, ArrayCreateError};
use zarrs::filesystem::FilesystemStore;
use zarrs::storage::{ReadableListableStorage, ReadableListableStorageTraits, StoreKey, StorePrefix};

pub use meta::{ArrayMeta, MetaFile, NodeMeta};

/// The format name in reports.
pub const NAME: &str = "zarr";

/// Does `dir` hold a Zarr node (v3 `zarr.json`, v2 `.zarray` or `.zgroup`)?
pub fn is_store(dir: &Path) -> bool {
    NODE_FILES.iter().any(|f| dir.join(f.file_name()).is_file())
}

/// Do the objects under a prefix hold a Zarr node at their root?
pub fn is_object_store(objects: &dyn rasterpack_common::ObjectSource) -> bool {
    NODE_FILES
        .iter()
        .any(|f| matches!(objects.size(f.file_name()), Ok(Some(_))))
}

/// The metadata documents that make a node, v3 first (as zarrs prefers it).
const NODE_FILES: [MetaFile; 3] = [MetaFile::V3, MetaFile::V2Array, MetaFile::V2Group];

/// The store key of `name` in the node at `rel` (`""` for the root).
fn node_key(rel: &str, name: &str) -> Result<StoreKey> {
    let key = if rel.is_empty() {
        name.to_string()
    } else {
        format!("{rel}/{name}")
    };
    StoreKey::new(key.clone())
        .map_err(|e| Error::invalid_at("zarr.meta_invalid", None, format!("node key {key:?}: {e}")))
}

fn storage_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Io, "io", None, format!("{what}: {e}"))
}

/// The metadata document that describes the node at `rel` (`None`: no node there).
fn node_file(store: &ReadableListableStorage, rel: &str) -> Result<Option<MetaFile>> {
    for f in NODE_FILES {
        let key = node_key(rel, f.file_name())?;
        if store
            .size_key(&key)
            .map_err(|e| storage_err(key.as_str(), e))?
            .is_some()
        {
            return Ok(Some(f));
        }
    }
    Ok(None)
}

/// One array of a store, opened.
struct ZArray {
    /// Name as `--element` takes it: `None` for an array store, else its path in the group.
    name: Option<String>,
    /// zarrs' node path (`/`, `/a/b`).
    path: String,
    meta: ArrayMeta,
    dtype: DType,
    array: Array<dyn ReadableListableStorageTraits>,
    /// A sharded array's inner codec chain (inner chunks are decoded here, not by zarrs'
    /// sharding codec, so that each goes through the decompression guard).
    inner_chain: Option<Arc<zarrs::array::codec::CodecChain>>,
    /// The object store the array is read from, when it is one: its chunks are then fetched
    /// in one capped GET each rather than a size request and a GET.
    objects: Option<Arc<objects::ObjectStorage>>,
}

/// An array node that did not open (unsupported feature, broken metadata).
struct Broken {
    name: Option<String>,
    error: Error,
}

/// A Zarr store opened for reading: its arrays, found by walking the hierarchy.
pub struct ZarrFile {
    /// The directory or prefix URL, for messages.
    root: String,
    limits: Limits,
    root_meta: NodeMeta,
    arrays: Vec<ZArray>,
    broken: Vec<Broken>,
    groups: Vec<String>,
    /// Problems met while walking the hierarchy (nodes skipped).
    findings: Findings,
    /// See [`ZArray::objects`].
    objects: Option<Arc<objects::ObjectStorage>>,
}

impl std::fmt::Debug for ZarrFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZarrFile")
            .field("root", &self.root)
            .field("arrays", &self.arrays.iter().map(|a| &a.path).collect::<Vec<_>>())
            .finish()
    }
}

/// Read a node's metadata document, refusing one larger than `limits.max_text` before reading.
fn read_meta(
    store: &ReadableListableStorage,
    rel: &str,
    file: MetaFile,
    shown_path: &str,
    limits: &Limits,
) -> Result<NodeMeta> {
    let key = node_key(rel, file.file_name())?;
    let what = format!("{shown_path}{}", file.file_name());
    let len = store
        .size_key(&key)
        .map_err(|e| storage_err(&what, e))?
        .ok_or_else(|| Error::new(ErrorKind::Io, "io", None, format!("{what}: gone while read")))?;
    if len > limits.max_text {
        return Err(Error::limit(
            "limit.text",
            None,
            format!("{what}: {len} bytes, above the limit of {} bytes", limits.max_text),
        ));
    }
    let bytes = store
        .get(&key)
        .map_err(|e| storage_err(&what, e))?
        .ok_or_else(|| Error::new(ErrorKind::Io, "io", None, format!("{what}: gone while read")))?;
    // The size was checked before the read; a store that sent more is not believed.
    if bytes.len() as u64 != len {
        return Err(Error::new(
            ErrorKind::Io,
            "io",
            None,
            format!("{what}: {} bytes read of {len}", bytes.len()),
        ));
    }
    meta::parse(&bytes, file, &what, limits)
}

impl ZarrFile {
    /// Open the store at `dir` within `limits` (see [`ZarrFile::open_store`]).
    pub fn open(dir: &Path, limits: Limits) -> Result<ZarrFile> {
        let store: ReadableListableStorage = Arc::new(
            FilesystemStore::new(dir)
                .map_err(|e| Error::new(ErrorKind::Io, "io", None, format!("{}: {e}", shown(dir))))?,
        );
        Self::open_store(store, shown(dir), limits)
    }

    /// Open the Zarr store under an object-store prefix within `limits` (see
    /// [`ZarrFile::open_store`]): the same reader, through [`objects::ObjectStorage`].
    pub fn open_objects(source: Arc<dyn rasterpack_common::ObjectSource>, limits: Limits) -> Result<ZarrFile> {
        let name = source.name();
        let objects = Arc::new(objects::ObjectStorage::new(source, limits));
        Self::open_with(
            Arc::clone(&objects) as ReadableListableStorage,
            name,
            limits,
            Some(objects),
        )
    }

    /// Open the store `store` (called `root` in messages) within `limits`: every node's
    /// metadata is read and checked; arrays that do not open are kept with their error
    /// (reading them returns it, `validate` reports it). Fails when the root has no Zarr
    /// metadata, or its own metadata is broken.
    pub fn open_store(store: ReadableListableStorage, root: String, limits: Limits) -> Result<ZarrFile> {
        Self::open_with(store, root, limits, None)
    }

    fn open_with(
        store: ReadableListableStorage,
        root: String,
        limits: Limits,
        objects: Option<Arc<objects::ObjectStorage>>,
    ) -> Result<ZarrFile> {
        let Some(file) = node_file(&store, "")? else {
            return Err(Error::invalid_at(
                "zarr.no_metadata",
                None,
                format!("{root}: no zarr.json, .zarray or .zgroup"),
            ));
        };
        let root_meta = read_meta(&store, "", file, "", &limits)?;
        let mut zf = ZarrFile {
            root,
            limits,
            root_meta: root_meta.clone(),
            arrays: Vec::new(),
            broken: Vec::new(),
            groups: Vec::new(),
            findings: Findings::listing_at_most(rasterpack_common::LISTED_PER_CODE),
            objects,
        };
        let mut nodes = 0u64;
        zf.add_node(&store, "", root_meta, 0, &mut nodes);
        Ok(zf)
    }

    /// Add the node at store path `rel` (`""` for the root) and, for a group, its children.
    fn add_node(&mut self, store: &ReadableListableStorage, rel: &str, node: NodeMeta, depth: u32, nodes: &mut u64) {
        let name = (!rel.is_empty()).then(|| rel.to_string());
        let path = format!("/{rel}");
        match node {
            NodeMeta::Array(meta) => match open_array(store, &path, meta) {
                Ok(a) => self.arrays.push(ZArray {
                    name,
                    objects: self.objects.clone(),
                    ..a
                }),
                Err(error) => self.broken.push(Broken { name, error }),
            },
            NodeMeta::Group { .. } => {
                self.groups.push(path.clone());
                if depth >= self.limits.max_depth {
                    self.findings.error(
                        "limit.depth",
                        None,
                        format!(
                            "group {path}: deeper than {} levels; its children are not read",
                            self.limits.max_depth
                        ),
                    );
                    return;
                }
                // One level of the group's keys: its child nodes are the sub-prefixes.
                let prefix = if rel.is_empty() {
                    StorePrefix::root()
                } else {
                    match StorePrefix::new(format!("{rel}/")) {
                        Ok(p) => p,
                        Err(e) => {
                            self.findings
                                .push_error(&storage_err(&format!("listing group {path}"), e));
                            return;
                        }
                    }
                };
                let mut children: Vec<String> = match store.list_dir(&prefix) {
                    Ok(listed) => listed
                        .prefixes()
                        .iter()
                        .filter_map(|p| {
                            let name = p.as_str().strip_prefix(prefix.as_str())?.trim_end_matches('/');
                            (!name.is_empty() && !name.contains('/')).then(|| name.to_string())
                        })
                        .filter(|n| !n.starts_with('.'))
                        .take(self.limits.max_entries.min(usize::MAX as u64) as usize)
                        .collect(),
                    Err(e) => {
                        self.findings
                            .push_error(&storage_err(&format!("listing group {path}"), e));
                        return;
                    }
                };
                children.sort();
                for child in children {
                    *nodes += 1;
                    if *nodes > self.limits.max_entries {
                        self.findings.error(
                            "limit.entries",
                            None,
                            format!(
                                "the store holds more than {} nodes; the rest are not read",
                                self.limits.max_entries
                            ),
                        );
                        return;
                    }
                    let child_rel = if rel.is_empty() {
                        child.clone()
                    } else {
                        format!("{rel}/{child}")
                    };
                    // A directory without metadata is no node (v2 nested chunk keys live in arrays,
                    // which are not walked); it is skipped.
                    let file = match node_file(store, &child_rel) {
                        Ok(Some(f)) => f,
                        Ok(None) => continue,
                        Err(error) => {
                            self.findings.push_error(&error);
                            continue;
                        }
                    };
                    match read_meta(store, &child_rel, file, &format!("{child_rel}/"), &self.limits) {
                        Ok(m) => self.add_node(store, &child_rel, m, depth + 1, nodes),
                        Err(error) if file == MetaFile::V2Group => self.findings.push_error(&error),
                        // Possibly an array: reading it by name gives this error.
                        Err(error) => self.broken.push(Broken {
                            name: Some(child_rel),
                            error,
                        }),
                    }
                }
            }
        }
    }

    /// The limits the store was opened with.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    fn find(&self, element: Option<&str>) -> Result<&ZArray> {
        let wanted = element.map(|e| e.trim_matches('/'));
        if let Some(a) = self.arrays.iter().find(|a| match wanted {
            None => true,
            Some(w) => a.name.as_deref().unwrap_or("") == w,
        }) {
            return Ok(a);
        }
        if let Some(b) = self.broken.iter().find(|b| match wanted {
            None => true,
            Some(w) => b.name.as_deref().unwrap_or("") == w,
        }) {
            return Err(b.error.clone());
        }
        let names: Vec<String> = self
            .arrays
            .iter()
            .map(|a| a.name.clone().unwrap_or_else(|| "/".into()))
            .collect();
        Err(match element {
            Some(e) => Error::new(
                ErrorKind::Usage,
                "zarr.no_such_array",
                None,
                format!(
                    "no array {e:?} in this Zarr store; its arrays are: {}",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ),
            ),
            None => Error::invalid_at("zarr.no_arrays", None, "the Zarr store holds no array"),
        })
    }

    fn info_of(&self, a: &ZArray) -> ArrayInfo {
        // A store rasterpack wrote hands its source's name and metadata back to the writers,
        // as the source itself would have given them (`convert X s.zarr && convert s.zarr Y`
        // carries what `convert X Y` carries).
        if let Some((name, attrs)) = carried(a) {
            return ArrayInfo {
                dtype: a.dtype,
                shape: a.meta.shape.clone(),
                name: if a.name.is_none() { name } else { a.name.clone() },
                attrs,
            };
        }
        let mut attrs = Map::new();
        attrs.insert("source_format".into(), json!("zarr"));
        attrs.insert("zarr_format".into(), json!(a.meta.zarr_format));
        attrs.insert("chunks".into(), json!(a.meta.chunk_shape));
        if a.meta.unit_shape != a.meta.chunk_shape {
            attrs.insert("shard_inner_chunks".into(), json!(a.meta.unit_shape));
        }
        attrs.insert("codecs".into(), json!(a.meta.codecs));
        attrs.insert("fill_value".into(), fill_json(a));
        if let Some(names) = a.array.dimension_names() {
            attrs.insert("dimension_names".into(), json!(names));
        }
        if !a.array.attributes().is_empty() {
            attrs.insert("attributes".into(), Value::Object(a.array.attributes().clone()));
        }
        ArrayInfo {
            dtype: a.dtype,
            shape: a.meta.shape.clone(),
            name: a.name.clone(),
            attrs,
        }
    }

    /// Stream the array `req.element` (the root array, or a group's first array in path order,
    /// when `None`), or `req.region` of it, into `sink`.
    pub fn stream_request(&self, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        req.check_honoured(&crate::ZarrFormat)?;
        let a = self.find(req.element.as_deref())?;
        let region = req.region_of(&a.meta.shape)?;
        let mut info = self.info_of(a);
        info.shape = region.shape();
        sink.begin(&info)?;
        if region.shape().contains(&0) {
            return Ok(());
        }
        let limits = &req.limits;
        let elem = a.dtype.size() as u64;
        let unit = &a.meta.unit_shape;
        if unit.is_empty() {
            // A 0-D array is one chunk of one value.
            let (_, data) = decode_unit(a, &[])?;
            return sink.write_at(0, &data);
        }
        let reg_shape = region.shape();
        // One band (the region's rows of one unit along the first axis) is assembled in memory,
        // with a batch of whole decoded units beside it: at least one must fit.
        let band_bytes = reg_shape[1..]
            .iter()
            .try_fold(elem, |acc, &d| acc.checked_mul(d))
            .and_then(|rb| rb.checked_mul(unit[0].min(reg_shape[0])));
        let spare = band_bytes.and_then(|b| limits.working_set.checked_sub(b));
        let batch = spare.map_or(0, |sp| sp / unit_bytes(a).max(1));
        if batch >= 1 {
            self.stream_bands(a, &region, batch.min(256) as usize, sink)
        } else if sink.random_access() {
            self.stream_units(a, &region, limits, sink)
        } else {
            Err(Error::limit(
                "limit.working_set",
                None,
                format!(
                    "a band of chunks {unit:?} across the {reg_shape:?} region needs more than the working set of {} bytes \
                     for an output written in order; read a region, or write to a file",
                    limits.working_set
                ),
            ))
        }
    }

    /// One band of units along the first axis at a time, assembled in memory and written in C
    /// order (so every sink takes it, in one write per band); the band's units are decoded in
    /// parallel, `batch` at a time, each copied in and dropped.
    fn stream_bands(&self, a: &ZArray, region: &Region, batch: usize, sink: &mut dyn ArraySink) -> Result<()> {
        let unit = &a.meta.unit_shape;
        let elem = a.dtype.size();
        let r0 = &region.ranges[0];
        let row_bytes: u64 = region.shape()[1..].iter().product::<u64>() * elem as u64;
        let mut band_start = r0.start / unit[0] * unit[0];
        while band_start < r0.end {
            let lo = band_start.max(r0.start);
            let hi = (band_start + unit[0]).min(r0.end);
            let mut band = region.clone();
            band.ranges[0] = lo..hi;
            let mut buf = MemorySink::new(Limits::unlimited());
            buf.begin(&ArrayInfo::new(a.dtype, band.shape()))?;
            let idx: Vec<Vec<u64>> = unit_indices(unit, &band).collect();
            for group in idx.chunks(batch) {
                let decoded: Vec<Result<(Region, Vec<u8>)>> = group.par_iter().map(|i| decode_unit(a, i)).collect();
                for d in decoded {
                    let (block, data) = d?;
                    copy_block_into_window(&block, &data, elem, &band, &mut buf)?;
                }
            }
            let band_data = buf.into_array()?.data;
            sink.write_at((lo - r0.start) * row_bytes, &band_data)?;
            band_start += unit[0];
        }
        Ok(())
    }

    /// Units in C order of the unit grid, in batches that fit the working set, each copied
    /// straight into a random-access sink.
    fn stream_units(&self, a: &ZArray, region: &Region, limits: &Limits, sink: &mut dyn ArraySink) -> Result<()> {
        let unit_bytes = unit_bytes(a);
        let per_batch = (limits.working_set / unit_bytes.max(1)).clamp(1, 256) as usize;
        let elem = a.dtype.size();
        let mut batch = Vec::with_capacity(per_batch);
        let flush = |batch: &mut Vec<Vec<u64>>, sink: &mut dyn ArraySink| -> Result<()> {
            let decoded: Vec<Result<(Region, Vec<u8>)>> = batch.par_iter().map(|idx| decode_unit(a, idx)).collect();
            batch.clear();
            for d in decoded {
                let (block, data) = d?;
                copy_block_into_window(&block, &data, elem, region, sink)?;
            }
            Ok(())
        };
        for idx in unit_indices(&a.meta.unit_shape, region) {
            batch.push(idx);
            if batch.len() == per_batch {
                flush(&mut batch, sink)?;
            }
        }
        if !batch.is_empty() {
            flush(&mut batch, sink)?;
        }
        Ok(())
    }

    /// Check every array's metadata and every chunk: all findings.
    pub fn validate_with(&self, opts: &ValidateOptions) -> Report {
        let mut report = Report::new(NAME);
        report.findings.extend(self.findings.clone());
        for b in &self.broken {
            let name = b.name.as_deref().unwrap_or("/");
            let mut e = b.error.clone();
            if !e.message.contains(name) {
                e.message = format!("array {name}: {}", e.message);
            }
            report.fail(&e);
        }
        let total: u64 = self.arrays.iter().map(unit_count).sum();
        let mut done = 0u64;
        for a in &self.arrays {
            validate_array(a, opts, &mut report.findings, &mut done, total);
        }
        self.describe(false, &mut report);
        report
    }

    /// The summary and tables of `inspect`.
    pub fn describe(&self, _all: bool, report: &mut Report) {
        let root_kind = match &self.root_meta {
            NodeMeta::Group { .. } => "group",
            NodeMeta::Array(_) => "array",
        };
        let zarr_format = match &self.root_meta {
            NodeMeta::Group { zarr_format } => *zarr_format,
            NodeMeta::Array(m) => m.zarr_format,
        };
        let arrays: Vec<Value> = self
            .arrays
            .iter()
            .map(|a| {
                let mut o = Map::new();
                o.insert("name".into(), json!(a.name.clone().unwrap_or_else(|| "/".into())));
                o.insert("dtype".into(), json!(a.dtype.name()));
                o.insert("shape".into(), json!(a.meta.shape));
                o.insert("chunks".into(), json!(a.meta.chunk_shape));
                if a.meta.unit_shape != a.meta.chunk_shape {
                    o.insert("shard_inner_chunks".into(), json!(a.meta.unit_shape));
                }
                o.insert("chunk_count".into(), json!(a.meta.chunk_count));
                o.insert("codecs".into(), json!(a.meta.codecs));
                o.insert("fill_value".into(), fill_json(a));
                o.insert("dimension_names".into(), json!(a.array.dimension_names()));
                o.insert("attributes".into(), Value::Object(a.array.attributes().clone()));
                Value::Object(o)
            })
            .collect();
        let unreadable: Vec<Value> = self
            .broken
            .iter()
            .map(|b| json!({"name": b.name.clone().unwrap_or_else(|| "/".into()), "code": b.error.code, "message": b.error.message}))
            .collect();
        report.summary.insert("zarr_format".into(), json!(zarr_format));
        report.summary.insert("node_type".into(), json!(root_kind));
        report.summary.insert("groups".into(), json!(self.groups));
        report.summary.insert("arrays".into(), Value::Array(arrays));
        if !unreadable.is_empty() {
            report
                .summary
                .insert("unreadable_arrays".into(), Value::Array(unreadable));
        }
        report.fields(
            "Zarr store",
            vec![
                ("path".into(), self.root.clone()),
                ("zarr_format".into(), zarr_format.to_string()),
                ("node type".into(), root_kind.into()),
                ("arrays".into(), self.arrays.len().to_string()),
                ("groups".into(), self.groups.len().to_string()),
            ],
        );
        let rows = self
            .arrays
            .iter()
            .map(|a| {
                vec![
                    a.name.clone().unwrap_or_else(|| "/".into()),
                    a.dtype.name().into(),
                    format!("{:?}", a.meta.shape),
                    if a.meta.unit_shape != a.meta.chunk_shape {
                        format!("{:?} (inner {:?})", a.meta.chunk_shape, a.meta.unit_shape)
                    } else {
                        format!("{:?}", a.meta.chunk_shape)
                    },
                    a.meta.codecs.join(", "),
                    fill_json(a).to_string(),
                    a.array
                        .dimension_names()
                        .as_ref()
                        .map(|n| {
                            n.iter()
                                .map(|d| d.clone().unwrap_or_else(|| "-".into()))
                                .collect::<Vec<_>>()
                                .join(", ")
                        })
                        .unwrap_or_default(),
                ]
            })
            .chain(self.broken.iter().map(|b| {
                vec![
                    b.name.clone().unwrap_or_else(|| "/".into()),
                    format!("unreadable: {}", b.error.code),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                ]
            }))
            .collect();
        report.sections.push(Section::Table {
            title: "Arrays".into(),
            headers: [
                "name",
                "dtype",
                "shape",
                "chunks",
                "codecs",
                "fill_value",
                "dimension_names",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            rows,
        });
    }
}

/// The source's name and metadata a store rasterpack wrote carries under the `rasterpack`
/// attribute (`docs/formats/zarr.md`): `None` for any other store, or one whose recorded dtype
/// is not the array's (edited since, so the metadata may not describe these values). The
/// writers check what they take from it as they check a native source's attributes.
fn carried(a: &ZArray) -> Option<(Option<String>, Map<String, Value>)> {
    let rp = a.array.attributes().get("rasterpack")?.as_object()?;
    rp.get("source_format")?.as_str()?;
    if rp.get("dtype")?.as_str()? != a.dtype.name() {
        return None;
    }
    let metadata = rp.get("metadata")?.as_object()?.clone();
    let name = rp.get("name").and_then(Value::as_str).map(str::to_string);
    Some((name, metadata))
}

/// The fill value as the metadata wrote it (zarrs keeps the bytes; the JSON is re-read).
fn fill_json(a: &ZArray) -> Value {
    let bytes = a.array.fill_value().as_ne_bytes();
    let v: Option<Value> = match a.dtype {
        DType::Bool => bytes.first().map(|&b| json!(b != 0)),
        DType::U8 => bytes.first().map(|&b| json!(b)),
        DType::I8 => bytes.first().map(|&b| json!(b as i8)),
        DType::U16 => bytes.try_into().ok().map(|b| json!(u16::from_ne_bytes(b))),
        DType::I16 => bytes.try_into().ok().map(|b| json!(i16::from_ne_bytes(b))),
        DType::U32 => bytes.try_into().ok().map(|b| json!(u32::from_ne_bytes(b))),
        DType::I32 => bytes.try_into().ok().map(|b| json!(i32::from_ne_bytes(b))),
        DType::U64 => bytes.try_into().ok().map(|b| json!(u64::from_ne_bytes(b))),
        DType::I64 => bytes.try_into().ok().map(|b| json!(i64::from_ne_bytes(b))),
        DType::F32 => bytes
            .try_into()
            .ok()
            .map(|b| rasterpack_common::json::f64_value(f32::from_ne_bytes(b) as f64)),
        DType::F64 => bytes
            .try_into()
            .ok()
            .map(|b| rasterpack_common::json::f64_value(f64::from_ne_bytes(b))),
        DType::F16 => bytes
            .try_into()
            .ok()
            .map(|b| rasterpack_common::json::f64_value(rasterpack_common::f16_to_f64(u16::from_ne_bytes(b)))),
        DType::C64 | DType::C128 => None,
    };
    v.unwrap_or_else(|| json!(bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()))
}

/// Open one array node through zarrs, mapping its refusals to rasterpack's codes: features it
/// (or rasterpack) does not implement are unsupported, broken metadata is invalid.
fn open_array(store: &ReadableListableStorage, path: &str, meta: ArrayMeta) -> Result<ZArray> {
    let dtype = match &meta.dtype {
        Ok(d) => *d,
        Err(name) => {
            return Err(Error::unsupported(
                "zarr.dtype_unsupported",
                None,
                format!("array {path}: data type {name} has no rasterpack counterpart"),
            ))
        }
    };
    let array = Array::open(store.clone(), path).map_err(|e| create_error(path, &e))?;
    if array.data_type().fixed_size() != Some(dtype.size()) {
        return Err(Error::unsupported(
            "zarr.dtype_unsupported",
            None,
            format!(
                "array {path}: zarrs reads data type {} for {}",
                array.data_type(),
                dtype.name()
            ),
        ));
    }
    let inner_chain = match &meta.shard {
        None => None,
        Some(shard) => {
            let metadata = shard
                .inner_codecs
                .iter()
                .map(|c| serde_json::from_value::<zarrs::metadata::v3::MetadataV3>(c.clone()))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| {
                    Error::invalid_at("zarr.meta_codecs", None, format!("array {path}: sharding codecs: {e}"))
                })?;
            let chain = zarrs::array::codec::CodecChain::from_metadata(&metadata).map_err(|e| match e {
                zarrs::plugin::PluginCreateError::Unsupported(_) => Error::unsupported(
                    "zarr.codec_unsupported",
                    None,
                    format!("array {path}: inside its shards: {e}"),
                ),
                _ => Error::invalid_at(
                    "zarr.meta_codecs",
                    None,
                    format!("array {path}: inside its shards: {e}"),
                ),
            })?;
            Some(Arc::new(chain))
        }
    };
    Ok(ZArray {
        name: None,
        path: path.to_string(),
        meta,
        dtype,
        array,
        inner_chain,
        objects: None,
    })
}

fn create_error(path: &str, e: &ArrayCreateError) -> Error {
    use zarrs::plugin::PluginCreateError;
    let msg = format!("array {path}: {e}");
    match e {
        ArrayCreateError::CodecsCreateError(PluginCreateError::Unsupported(_)) => {
            Error::unsupported("zarr.codec_unsupported", None, msg)
        }
        ArrayCreateError::DataTypeCreateError(_) => Error::unsupported("zarr.dtype_unsupported", None, msg),
        ArrayCreateError::StorageTransformersCreateError(_) => {
            Error::unsupported("zarr.storage_transformer_unsupported", None, msg)
        }
        ArrayCreateError::ChunkGridCreateError(PluginCreateError::Unsupported(_)) => {
            Error::unsupported("zarr.chunk_grid_unsupported", None, msg)
        }
        ArrayCreateError::ChunkKeyEncodingCreateError(PluginCreateError::Unsupported(_)) => {
            Error::unsupported("zarr.chunk_key_encoding_unsupported", None, msg)
        }
        ArrayCreateError::AdditionalFieldUnsupportedError(_) => Error::unsupported("zarr.field_unsupported", None, msg),
        ArrayCreateError::UnsupportedZarrV2Array(_) => Error::unsupported("zarr.v2_unsupported", None, msg),
        ArrayCreateError::InvalidFillValue(_) | ArrayCreateError::InvalidFillValueMetadata(_) => {
            Error::invalid_at("zarr.meta_fill_value", None, msg)
        }
        ArrayCreateError::StorageError(_) => Error::new(ErrorKind::Io, "io", None, msg),
        _ => Error::invalid_at("zarr.meta_invalid", None, msg),
    }
}

/// Decoded bytes of one unit.
fn unit_bytes(a: &ZArray) -> u64 {
    a.meta.unit_shape.iter().product::<u64>() * a.dtype.size() as u64
}

fn unit_count(a: &ZArray) -> u64 {
    a.meta
        .shape
        .iter()
        .zip(&a.meta.unit_shape)
        .map(|(&s, &u)| s.div_ceil(u))
        .product()
}

/// The unit-grid indices of every unit meeting `region`, in C order.
fn unit_indices(unit: &[u64], region: &Region) -> impl Iterator<Item = Vec<u64>> {
    let lo: Vec<u64> = region.ranges.iter().zip(unit).map(|(r, &u)| r.start / u).collect();
    let hi: Vec<u64> = region
        .ranges
        .iter()
        .zip(unit)
        .map(|(r, &u)| r.end.div_ceil(u))
        .collect();
    let empty = lo.iter().zip(&hi).any(|(l, h)| l >= h);
    let mut next = (!empty).then(|| lo.clone());
    std::iter::from_fn(move || {
        let cur = next.take()?;
        let mut n = cur.clone();
        let mut axis = n.len();
        loop {
            if axis == 0 {
                break;
            }
            axis -= 1;
            n[axis] += 1;
            if n[axis] < hi[axis] {
                next = Some(n);
                break;
            }
            n[axis] = lo[axis];
        }
        Some(cur)
    })
}

/// The chunk (shard) holding unit `idx`, and the unit's box: whole, past the array's edge too.
fn unit_place(a: &ZArray, idx: &[u64]) -> (Vec<u64>, Region) {
    let unit = &a.meta.unit_shape;
    let start: Vec<u64> = idx.iter().zip(unit).map(|(&i, &u)| i * u).collect();
    let chunk: Vec<u64> = start.iter().zip(&a.meta.chunk_shape).map(|(&s, &c)| s / c).collect();
    let block = Region {
        ranges: start.iter().zip(unit).map(|(&s, &u)| s..s + u).collect(),
    };
    (chunk, block)
}

fn key_text(a: &ZArray, chunk: &[u64]) -> String {
    a.array.chunk_key(chunk).to_string()
}

/// Decode one unit whole: `(its box, its little-endian bytes)`. A chunk absent from the store
/// reads as the fill value, as Zarr defines it.
fn decode_unit(a: &ZArray, idx: &[u64]) -> Result<(Region, Vec<u8>)> {
    decode_unit_checked(a, idx).map(|(b, d, _)| (b, d))
}

/// [`decode_unit`], also telling whether the chunk was present.
fn decode_unit_checked(a: &ZArray, idx: &[u64]) -> Result<(Region, Vec<u8>, bool)> {
    let (chunk, block) = unit_place(a, idx);
    let key = key_text(a, &chunk);
    let expected = unit_bytes(a);
    let fail = |code: &'static str, msg: String| Error::invalid_at(code, None, format!("chunk {key}: {msg}"));
    let mut present = true;
    let mut data: Vec<u8> = if a.meta.unit_shape == a.meta.chunk_shape {
        // Bound the stored chunk before reading it: a compressed chunk is never much larger
        // than what it decodes to.
        let store_key = a.array.chunk_key(&chunk);
        let cap = stored_cap(expected);
        let too_large = |what: String| {
            fail(
                "zarr.chunk_too_large",
                format!("{what} stored bytes for a chunk of {expected} bytes"),
            )
        };
        let encoded = match &a.objects {
            // One GET whose size is checked from the response before its body is read.
            Some(objects) => match objects.get_capped(store_key.as_str(), cap) {
                Ok(found) => found,
                Err(objects::Capped::TooLarge(e)) => return Err(too_large(format!("more than {cap} ({})", e.message))),
                Err(objects::Capped::Failed(e)) => {
                    return Err(Error {
                        message: format!("chunk {key}: {}", e.message),
                        ..e
                    })
                }
            },
            None => {
                let stored = a
                    .array
                    .storage()
                    .size_key(&store_key)
                    .map_err(|e| Error::new(ErrorKind::Io, "io", None, format!("chunk {key}: {e}")))?;
                if let Some(s) = stored.filter(|&s| s > cap) {
                    return Err(too_large(s.to_string()));
                }
                a.array
                    .retrieve_encoded_chunk(&chunk)
                    .map_err(|e| Error::new(ErrorKind::Io, "io", None, format!("chunk {key}: {e}")))?
            }
        };
        match encoded {
            None => {
                present = false;
                a.array
                    .fill_value()
                    .as_ne_bytes()
                    .repeat(expected as usize / a.dtype.size())
            }
            Some(encoded) => {
                guard::check(&encoded, &a.meta.byte_codecs, expected, &key)?;
                let repr = a
                    .array
                    .chunk_array_representation(&chunk)
                    .map_err(|e| fail("zarr.chunk_decode", e.to_string()))?;
                let decoded = a
                    .array
                    .codecs()
                    .decode(Cow::Owned(encoded), &repr, &CodecOptions::default())
                    .map_err(|e| fail("zarr.chunk_decode", e.to_string()))?;
                decoded
                    .into_fixed()
                    .map_err(|e| fail("zarr.chunk_decode", e.to_string()))?
                    .into_owned()
            }
        }
    } else {
        match read_inner(a, &chunk, idx, expected, &key)? {
            Some(data) => data,
            None => {
                present = false;
                a.array
                    .fill_value()
                    .as_ne_bytes()
                    .repeat(expected as usize / a.dtype.size())
            }
        }
    };
    if data.len() as u64 != expected {
        return Err(fail(
            "zarr.chunk_size",
            format!("decodes to {} bytes, expected {expected}", data.len()),
        ));
    }
    if cfg!(target_endian = "big") {
        a.dtype.swap_to_le(&mut data);
    }
    Ok((block, data, present))
}

/// The most stored bytes a chunk (or inner chunk) decoding to `expected` bytes may hold: a
/// compressed chunk is never much larger than what it decodes to.
fn stored_cap(expected: u64) -> u64 {
    expected.saturating_add(expected / 8).saturating_add(1 << 20)
}

/// `len` bytes at `offset` of the value at `key`, exactly.
fn read_range(a: &ZArray, key: &zarrs::storage::StoreKey, offset: u64, len: u64, shown_key: &str) -> Result<Vec<u8>> {
    let got = a
        .array
        .storage()
        .get_partial(key, zarrs::storage::byte_range::ByteRange::FromStart(offset, Some(len)))
        .map_err(|e| Error::new(ErrorKind::Io, "io", None, format!("chunk {shown_key}: {e}")))?;
    match got {
        Some(b) if b.len() as u64 == len => Ok(b.to_vec()),
        _ => Err(Error::new(
            ErrorKind::Io,
            "io",
            None,
            format!("chunk {shown_key}: {len} bytes at {offset} could not be read (the shard changed while read?)"),
        )),
    }
}

/// One inner chunk of the shard `chunk`: located through the shard's index (its checksum
/// checked), its stored bytes bounded like a plain chunk's and replayed through the
/// decompression guard, then decoded by the inner codec chain. The shard is never read whole,
/// so its size is not bounded by the working set; the inner chunk and the index are (see
/// [`meta`]). `None` when the shard or the inner chunk is absent (the fill value).
fn read_inner(a: &ZArray, chunk: &[u64], idx: &[u64], expected: u64, key: &str) -> Result<Option<Vec<u8>>> {
    let (Some(shard), Some(chain)) = (&a.meta.shard, &a.inner_chain) else {
        return Err(Error::usage("internal: a sharded array without its sharding layout"));
    };
    let fail = |code: &'static str, msg: String| Error::invalid_at(code, None, format!("chunk {key}: {msg}"));
    let store_key = a.array.chunk_key(chunk);
    let Some(size) = a
        .array
        .storage()
        .size_key(&store_key)
        .map_err(|e| Error::new(ErrorKind::Io, "io", None, format!("chunk {key}: {e}")))?
    else {
        return Ok(None);
    };
    let index_len = shard.index_len();
    if size < index_len {
        return Err(fail(
            "zarr.shard_index",
            format!("{size} bytes, shorter than the shard index of {index_len} bytes"),
        ));
    }
    let index_at = if shard.index_at_end { size - index_len } else { 0 };
    let index = read_range(a, &store_key, index_at, index_len, key)?;
    let entries = &index[..(shard.inner_count * 16) as usize];
    if shard.index_crc {
        let stored = u32::from_le_bytes([
            index[entries.len()],
            index[entries.len() + 1],
            index[entries.len() + 2],
            index[entries.len() + 3],
        ]);
        let computed = crc32c::crc32c(entries);
        if stored != computed {
            return Err(Error::invalid_at(
                "zarr.shard_index_checksum",
                Some(index_at + entries.len() as u64),
                format!("chunk {key}: the shard index's crc32c is {stored:#010x}, its entries give {computed:#010x}"),
            ));
        }
    }
    // The inner chunk's place in its shard, in C order of the shard's inner grid.
    let inner = &a.meta.unit_shape;
    let mut n = 0u64;
    for ((&i, &u), (&c, &cs)) in idx.iter().zip(inner).zip(chunk.iter().zip(&a.meta.chunk_shape)) {
        let per = cs / u;
        n = n * per + (i - c * per);
    }
    let at = (n * 16) as usize;
    let word = |k: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&entries[at + k..at + k + 8]);
        u64::from_le_bytes(b)
    };
    let (offset, nbytes) = (word(0), word(8));
    if offset == u64::MAX && nbytes == u64::MAX {
        return Ok(None);
    }
    let what = format!("inner chunk {idx:?}");
    if offset.checked_add(nbytes).is_none_or(|end| end > size) {
        return Err(Error::invalid_at(
            "zarr.shard_index",
            Some(index_at + at as u64),
            format!("chunk {key}: the index places {what} at {offset} ({nbytes} bytes), past the shard's {size} bytes"),
        ));
    }
    let cap = stored_cap(expected);
    if nbytes > cap {
        return Err(fail(
            "zarr.chunk_too_large",
            format!("{what}: {nbytes} stored bytes for an inner chunk of {expected} bytes"),
        ));
    }
    let encoded = read_range(a, &store_key, offset, nbytes, key)?;
    guard::check(&encoded, &shard.inner_byte_codecs, expected, &format!("{key} ({what})"))?;
    let shape: Vec<std::num::NonZeroU64> = inner
        .iter()
        .map(|&u| std::num::NonZeroU64::new(u))
        .collect::<Option<_>>()
        .ok_or_else(|| fail("zarr.meta_chunks", "an inner chunk extent of 0".into()))?;
    let repr = zarrs::array::ChunkRepresentation::new(shape, a.array.data_type().clone(), a.array.fill_value().clone())
        .map_err(|e| fail("zarr.chunk_decode", format!("{what}: {e}")))?;
    let decoded = chain
        .decode(Cow::Owned(encoded), &repr, &CodecOptions::default())
        .map_err(|e| fail("zarr.chunk_decode", format!("{what}: {e}")))?
        .into_fixed()
        .map_err(|e| fail("zarr.chunk_decode", format!("{what}: {e}")))?
        .into_owned();
    Ok(Some(decoded))
}

fn validate_array(a: &ZArray, opts: &ValidateOptions, findings: &mut Findings, done: &mut u64, total: u64) {
    let name = a.name.clone().unwrap_or_else(|| "/".into());
    let full = Region::full(&a.meta.shape);
    if a.meta.shape.contains(&0) {
        return;
    }
    let per_batch = (opts.limits.working_set / unit_bytes(a).max(1)).clamp(1, 256) as usize;
    let mut missing = 0u64;
    let mut count = 0u64;
    let mut batch: Vec<Vec<u64>> = Vec::with_capacity(per_batch);
    let mut run = |batch: &mut Vec<Vec<u64>>, findings: &mut Findings| {
        let results: Vec<Result<bool>> = batch
            .par_iter()
            .map(|i| decode_unit_checked(a, i).map(|(_, _, present)| present))
            .collect();
        for r in results {
            count += 1;
            match r {
                Ok(true) => {}
                Ok(false) => missing += 1,
                Err(e) => findings.push_error(&e),
            }
        }
        *done += batch.len() as u64;
        opts.report_progress(*done, total);
        batch.clear();
    };
    for idx in unit_indices(&a.meta.unit_shape, &full) {
        batch.push(idx);
        if batch.len() == per_batch {
            run(&mut batch, findings);
        }
    }
    if !batch.is_empty() {
        run(&mut batch, findings);
    }
    if missing > 0 {
        findings.push(
            Severity::Info,
            "zarr.chunks_missing".to_string(),
            None,
            format!("array {name}: {missing} of {count} chunks are absent and read as the fill value"),
        );
    }
}

impl ArrayFile for ZarrFile {
    fn format_name(&self) -> &'static str {
        NAME
    }

    fn arrays(&self) -> Result<Vec<ArrayInfo>> {
        if self.arrays.is_empty() {
            if let Some(b) = self.broken.first() {
                return Err(b.error.clone());
            }
        }
        Ok(self.arrays.iter().map(|a| self.info_of(a)).collect())
    }

    fn validate(&self) -> Report {
        self.validate_with(&ValidateOptions {
            limits: self.limits,
            ..Default::default()
        })
    }

    fn stream(&self, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        self.stream_request(req, sink)
    }

    fn chunk_shape(&self, element: Option<&str>) -> Option<Vec<u64>> {
        self.find(element).ok().map(|a| a.meta.unit_shape.clone())
    }
}

/// Open a Zarr input: a directory, or the objects under a store prefix; a file is no store.
pub fn open_input(input: &Input, limits: Limits) -> Result<ZarrFile> {
    if let Input::Objects { source } = input {
        return ZarrFile::open_objects(Arc::clone(source), limits);
    }
    let dir = input.dir().ok_or_else(|| {
        Error::invalid_at(
            "zarr.not_a_directory",
            None,
            format!("{}: a Zarr store is a directory", input.name()),
        )
    })?;
    ZarrFile::open(dir, limits)
}

/// `inspect` of a Zarr input.
pub fn inspect(input: &Input, opts: &InspectOptions) -> Result<Report> {
    let zf = open_input(input, opts.limits)?;
    let mut report = Report::new(NAME);
    report.findings.extend(zf.findings.clone());
    for b in &zf.broken {
        report.fail(&b.error);
    }
    zf.describe(opts.all, &mut report);
    Ok(report)
}

/// `validate` of a Zarr input: every finding, never an early stop.
pub fn validate(input: &Input, opts: &ValidateOptions) -> Report {
    match open_input(input, opts.limits) {
        Ok(zf) => zf.validate_with(opts),
        Err(e) => {
            let mut report = Report::new(NAME);
            report.fail(&e);
            report
        }
    }
}
