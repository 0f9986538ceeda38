//! Object access. OpenVDS datasets are a set of named objects (`VolumeDataLayout`,
//! `LayerStatus`, `<layer>/<chunk>`, `<layer>/ChunkMetadata/<page>`); both storage kinds are
//! presented through the small [`ObjectStore`] trait: [`DirStore`] (an object-store dataset
//! copied to a directory, one file per object), [`RemoteStore`] (the dataset where OpenVDS
//! wrote it, in S3/GCS/Azure, through an [`ObjectSource`]) and
//! [`crate::container::Container`] (the single-file `.vds`, whose files and index pages are
//! presented as the same objects).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rasterpack_common::{Error, ErrorKind, Limits, ObjectSource, Result};

/// Read-only access to the objects of one dataset.
pub trait ObjectStore: Send + Sync {
    /// The object's bytes, `None` when there is no such object.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>>;
    /// Keys starting with `prefix` (sorted).
    fn list(&self, prefix: &str) -> Result<Vec<String>>;
    /// The base64 `x-amz-meta-vdschunkmetadata` (legacy `VDS-Chunk-Metadata`) header of an
    /// object, when the store keeps object metadata.
    fn chunk_metadata_header(&self, _key: &str) -> Option<String> {
        None
    }
    /// Whether object metadata headers are known at all (validation compares them only then).
    fn has_object_metadata(&self) -> bool {
        false
    }
    /// `"object-dir"`, `"object-store"` or `"vds-file"`.
    fn kind(&self) -> &'static str;
    /// Read an object into `buf` (reusing its allocation); `false` when there is no object.
    fn get_into(&self, key: &str, buf: &mut Vec<u8>) -> Result<bool> {
        match self.get(key)? {
            Some(v) => {
                *buf = v;
                Ok(true)
            }
            None => Ok(false),
        }
    }
    /// Size of an object without reading it when the store can tell.
    fn object_size(&self, key: &str) -> Result<Option<u64>> {
        Ok(self.get(key)?.map(|b| b.len() as u64))
    }
    /// Numbers of the chunk-metadata pages of `layer` the store holds (ascending, each below
    /// `pages`) when it can list them cheaply; `None` means "ask for every page".
    fn stored_metadata_pages(&self, _layer: &str, _pages: u64) -> Result<Option<Vec<u64>>> {
        Ok(None)
    }
    /// A hint that the chunks `keys` are read next (a read's group of bricks): a remote store
    /// starts fetching them concurrently. Local stores ignore it.
    fn prefetch(&self, _keys: &[String]) {}
}

/// The metadata name of the chunk-metadata header OpenVDS puts on each chunk object it writes
/// to a cloud store (`x-amz-meta-vdschunkmetadata` on S3).
pub const CHUNK_METADATA_HEADER: &str = "vdschunkmetadata";

/// An object-store dataset in a cloud store, where OpenVDS writes it: the same objects as a
/// [`DirStore`], fetched on demand (only those a read needs) through an [`ObjectSource`];
/// object metadata headers come with the objects themselves.
#[derive(Debug)]
pub struct RemoteStore {
    source: Arc<dyn ObjectSource>,
    limits: Limits,
    /// Chunk sizes of the layers asked about, from one listing each (the last few layers).
    sizes: std::sync::Mutex<Vec<(String, Sizes)>>,
}

/// Object sizes by key.
type Sizes = Arc<BTreeMap<String, u64>>;

/// Layers whose chunk sizes [`RemoteStore`] keeps.
const SIZED_LAYERS: usize = 4;

impl RemoteStore {
    /// The dataset whose objects `source` fetches.
    pub fn new(source: Arc<dyn ObjectSource>, limits: &Limits) -> RemoteStore {
        RemoteStore {
            source,
            limits: *limits,
            sizes: Default::default(),
        }
    }

    /// The sizes of the chunk objects of `layer`: one listing (1000 keys a request on S3)
    /// instead of a HEAD request per chunk when a report sums a layer's stored bytes.
    fn layer_sizes(&self, layer: &str) -> Result<Sizes> {
        if let Ok(s) = self.sizes.lock() {
            if let Some((_, m)) = s.iter().find(|(l, _)| l == layer) {
                return Ok(m.clone());
            }
        }
        let m: Sizes = Arc::new(
            self.source
                .list(&format!("{layer}/"), &self.limits)?
                .into_iter()
                .collect(),
        );
        if let Ok(mut s) = self.sizes.lock() {
            if s.len() >= SIZED_LAYERS {
                s.remove(0);
            }
            s.push((layer.to_string(), m.clone()));
        }
        Ok(m)
    }
}

impl ObjectStore for RemoteStore {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let mut buf = Vec::new();
        Ok(self.get_into(key, &mut buf)?.then_some(buf))
    }

    fn get_into(&self, key: &str, buf: &mut Vec<u8>) -> Result<bool> {
        self.source.get_into(key, buf, &self.limits)
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        Ok(self
            .source
            .list(prefix, &self.limits)?
            .into_iter()
            .map(|(k, _)| k)
            .collect())
    }

    fn chunk_metadata_header(&self, key: &str) -> Option<String> {
        // A header that cannot be fetched reads as missing (a warning; the page is used): the
        // chunk object itself was fetched, and its page is what reads trust.
        self.source.object_metadata(key, CHUNK_METADATA_HEADER).ok().flatten()
    }

    fn has_object_metadata(&self) -> bool {
        self.source.keeps_object_metadata()
    }

    fn kind(&self) -> &'static str {
        "object-store"
    }

    fn object_size(&self, key: &str) -> Result<Option<u64>> {
        // A chunk (`layer/<index>`): from the layer's listing; anything else: a HEAD request.
        match key.rsplit_once('/') {
            Some((layer, i)) if !layer.contains('/') && !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()) => {
                Ok(self.layer_sizes(layer)?.get(key).copied())
            }
            _ => self.source.size(key),
        }
    }

    fn stored_metadata_pages(&self, layer: &str, pages: u64) -> Result<Option<Vec<u64>>> {
        // One listing of the layer's page folder instead of a request per possible page.
        let prefix = format!("{layer}/ChunkMetadata/");
        let mut v: Vec<u64> = self
            .list(&prefix)?
            .iter()
            .filter_map(|k| k[prefix.len()..].parse().ok())
            .filter(|&p| p < pages)
            .collect();
        v.sort_unstable();
        v.dedup();
        Ok(Some(v))
    }

    fn prefetch(&self, keys: &[String]) {
        self.source.prefetch(keys, &self.limits);
    }
}

/// An object-store dataset in a directory: key `a/b` is the file `<root>/a/b`. Object metadata
/// headers come from a `<root>.objmeta.json` sidecar beside the directory when there is one
/// (`{"objects": {"<key>": {"x-amz-meta-vdschunkmetadata": "<base64>"}}}`).
#[derive(Debug)]
pub struct DirStore {
    root: PathBuf,
    limits: Limits,
    headers: Option<BTreeMap<String, String>>,
}

impl DirStore {
    /// Open the object-store dataset in directory `root`.
    pub fn open(root: &Path, limits: &Limits) -> Result<DirStore> {
        if !root.is_dir() {
            return Err(Error::usage(format!(
                "{} is not a directory",
                rasterpack_common::shown(root)
            )));
        }
        let mut headers = None;
        let mut side = root.as_os_str().to_owned();
        side.push(".objmeta.json");
        let side = PathBuf::from(side);
        if let Ok(meta) = std::fs::metadata(&side) {
            if meta.is_file() && meta.len() <= limits.max_text {
                if let Ok(text) = std::fs::read(&side) {
                    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&text) {
                        let mut map = BTreeMap::new();
                        if let Some(objs) = v.get("objects").and_then(|o| o.as_object()) {
                            for (k, h) in objs {
                                let val = h
                                    .get("x-amz-meta-vdschunkmetadata")
                                    .or_else(|| h.get("x-amz-meta-vds-chunk-metadata"))
                                    .or_else(|| h.get("VDS-Chunk-Metadata"))
                                    .and_then(|x| x.as_str());
                                if let Some(val) = val {
                                    map.insert(k.clone(), val.to_owned());
                                }
                            }
                        }
                        headers = Some(map);
                    }
                }
            }
        }
        Ok(DirStore {
            root: root.to_path_buf(),
            limits: *limits,
            headers,
        })
    }

    fn path_of(&self, key: &str) -> Result<PathBuf> {
        if key.is_empty()
            || key.starts_with('/')
            || key
                .split('/')
                .any(|c| c.is_empty() || c == "." || c == ".." || c.contains('\\'))
        {
            return Err(Error::invalid_at(
                "vds.store.key",
                None,
                format!("object key {key:?} is not a plain relative key"),
            ));
        }
        Ok(self.root.join(key))
    }
}

impl ObjectStore for DirStore {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let path = self.path_of(key)?;
        let meta = match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => m,
            Ok(_) => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&rasterpack_common::shown(&path), &e)),
        };
        self.limits.check_alloc(meta.len(), &format!("object {key}"), None)?;
        std::fs::read(&path)
            .map(Some)
            .map_err(|e| Error::io(&rasterpack_common::shown(&path), &e))
    }

    fn get_into(&self, key: &str, buf: &mut Vec<u8>) -> Result<bool> {
        use std::io::Read;
        let path = self.path_of(key)?;
        let mut file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(Error::io(&rasterpack_common::shown(&path), &e)),
        };
        let len = file
            .metadata()
            .map_err(|e| Error::io(&rasterpack_common::shown(&path), &e))?
            .len();
        if !file.metadata().map(|m| m.is_file()).unwrap_or(false) {
            return Ok(false);
        }
        self.limits.check_alloc(len, &format!("object {key}"), None)?;
        buf.clear();
        // Bounded by the size checked above even if the file grows meanwhile.
        (&mut file)
            .take(len)
            .read_to_end(buf)
            .map_err(|e| Error::io(&rasterpack_common::shown(&path), &e))?;
        Ok(true)
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let mut out = Vec::new();
        // Walk only the folder the prefix names (`layer/ChunkMetadata/`), not the whole store:
        // listing each layer costs what that layer holds.
        let start = match prefix.rsplit_once('/') {
            None | Some(("", _)) => (self.root.clone(), String::new(), 0),
            Some((dir, _)) => match self.path_of(dir) {
                Ok(path) if path.is_dir() => (path, dir.to_string(), dir.split('/').count() as u32),
                _ => return Ok(out),
            },
        };
        let mut stack: Vec<(PathBuf, String, u32)> = vec![start];
        while let Some((dir, rel, depth)) = stack.pop() {
            // Object keys have at most three parts (`layer/ChunkMetadata/page`).
            if depth > 3 {
                continue;
            }
            let rd = std::fs::read_dir(&dir).map_err(|e| Error::io(&rasterpack_common::shown(&dir), &e))?;
            for ent in rd {
                let ent = ent.map_err(|e| Error::io(&rasterpack_common::shown(&dir), &e))?;
                let name = ent.file_name().to_string_lossy().into_owned();
                let key = if rel.is_empty() {
                    name.clone()
                } else {
                    format!("{rel}/{name}")
                };
                let ft = ent.file_type().map_err(|e| Error::io(&key, &e))?;
                if ft.is_dir() {
                    stack.push((ent.path(), key, depth + 1));
                } else if key.starts_with(prefix) {
                    out.push(key);
                    if out.len() as u64 > self.limits.max_entries {
                        return Err(Error::new(
                            ErrorKind::LimitExceeded,
                            "limit.entries",
                            None,
                            "too many objects",
                        ));
                    }
                }
            }
        }
        out.sort();
        Ok(out)
    }

    fn chunk_metadata_header(&self, key: &str) -> Option<String> {
        self.headers.as_ref().and_then(|h| h.get(key).cloned())
    }

    fn has_object_metadata(&self) -> bool {
        self.headers.is_some()
    }

    fn kind(&self) -> &'static str {
        "object-dir"
    }

    fn stored_metadata_pages(&self, layer: &str, pages: u64) -> Result<Option<Vec<u64>>> {
        let prefix = format!("{layer}/ChunkMetadata/");
        let mut v: Vec<u64> = self
            .list(&prefix)?
            .iter()
            .filter_map(|k| k[prefix.len()..].parse().ok())
            .filter(|&p| p < pages)
            .collect();
        v.sort_unstable();
        v.dedup();
        Ok(Some(v))
    }

    fn object_size(&self, key: &str) -> Result<Option<u64>> {
        let path = self.path_of(key)?;
        match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => Ok(Some(m.len())),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(&rasterpack_common::shown(&path), &e)),
        }
    }
}
