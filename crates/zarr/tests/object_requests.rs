//! A Zarr store read through an object store asks for each chunk once: one GET whose size is
//! checked (against the chunk's cap) before its body is read, not a size request followed by a
//! GET. The source here is a directory seen through `ObjectSource` that counts its calls the way
//! an object store counts requests, and refuses an object above `limits.max_alloc` from its
//! size before reading it, as the object-store source does from a GET's response.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rasterpack_common::{ArrayFile, ArrayRequest, Error, Limits, ObjectSource, Result};
use rasterpack_zarr::ZarrFile;

const SHAPE: [u64; 2] = [10, 12];
const CHUNK: [u64; 2] = [4, 5];
/// Absent from the store: read as the fill value.
const ABSENT: [u64; 2] = [1, 1];
const FILL: i32 = -7;

#[derive(Debug, Default)]
struct Calls {
    /// Size requests (HEAD), by key.
    sizes: BTreeMap<String, u64>,
    /// Whole-object reads (GET), by key, with the largest `max_alloc` each was given.
    gets: BTreeMap<String, (u64, u64)>,
}

#[derive(Debug)]
struct DirObjects {
    root: PathBuf,
    calls: Mutex<Calls>,
}

impl DirObjects {
    fn chunk_sizes(&self) -> u64 {
        let calls = self.calls.lock().unwrap();
        calls
            .sizes
            .iter()
            .filter(|(k, _)| k.starts_with("c/"))
            .map(|(_, n)| n)
            .sum()
    }
    fn chunk_gets(&self) -> BTreeMap<String, (u64, u64)> {
        let calls = self.calls.lock().unwrap();
        calls
            .gets
            .iter()
            .filter(|(k, _)| k.starts_with("c/"))
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }
}

impl ObjectSource for DirObjects {
    fn name(&self) -> String {
        format!("test://{}", self.root.display())
    }
    fn get_into(&self, key: &str, buf: &mut Vec<u8>, limits: &Limits) -> Result<bool> {
        {
            let mut calls = self.calls.lock().unwrap();
            let e = calls.gets.entry(key.to_string()).or_insert((0, 0));
            e.0 += 1;
            e.1 = e.1.max(limits.max_alloc);
        }
        let path = self.root.join(key);
        let Ok(meta) = std::fs::metadata(&path) else {
            return Ok(false);
        };
        // The size first, as a GET's response gives it before the body.
        limits.check_alloc(meta.len(), &format!("object {key}"), None)?;
        *buf = std::fs::read(&path).map_err(|e| Error::io(key, &e))?;
        Ok(true)
    }
    fn size(&self, key: &str) -> Result<Option<u64>> {
        *self.calls.lock().unwrap().sizes.entry(key.to_string()).or_insert(0) += 1;
        Ok(std::fs::metadata(self.root.join(key)).ok().map(|m| m.len()))
    }
    fn list(&self, prefix: &str, _limits: &Limits) -> Result<Vec<(String, u64)>> {
        fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, u64)>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let p = entry.path();
                if p.is_dir() {
                    walk(root, &p, out);
                } else if let (Ok(rel), Ok(m)) = (p.strip_prefix(root), entry.metadata()) {
                    out.push((rel.to_string_lossy().into_owned(), m.len()));
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &self.root, &mut out);
        out.retain(|(k, _)| k.starts_with(prefix));
        out.sort();
        Ok(out)
    }
    fn object_metadata(&self, _key: &str, _name: &str) -> Result<Option<String>> {
        Ok(None)
    }
    fn keeps_object_metadata(&self) -> bool {
        false
    }
}

fn value(y: u64, x: u64) -> i32 {
    (y * 100 + x) as i32
}

/// An int32 store of uncompressed little-endian chunks, one of them absent.
fn make_store(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let meta = serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": SHAPE, "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": CHUNK}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": FILL, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {}
    });
    std::fs::write(dir.join("zarr.json"), serde_json::to_vec(&meta).unwrap()).unwrap();
    for cy in 0..SHAPE[0].div_ceil(CHUNK[0]) {
        for cx in 0..SHAPE[1].div_ceil(CHUNK[1]) {
            if [cy, cx] == ABSENT {
                continue;
            }
            let mut bytes = Vec::new();
            for y in cy * CHUNK[0]..(cy + 1) * CHUNK[0] {
                for x in cx * CHUNK[1]..(cx + 1) * CHUNK[1] {
                    bytes.extend_from_slice(&value(y, x).to_le_bytes());
                }
            }
            let p = dir.join(format!("c/{cy}/{cx}"));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, bytes).unwrap();
        }
    }
}

fn expected() -> Vec<i32> {
    let mut out = Vec::new();
    for y in 0..SHAPE[0] {
        for x in 0..SHAPE[1] {
            let absent = [y / CHUNK[0], x / CHUNK[1]] == ABSENT;
            out.push(if absent { FILL } else { value(y, x) });
        }
    }
    out
}

fn open(dir: &Path) -> (Arc<DirObjects>, ZarrFile) {
    let source = Arc::new(DirObjects {
        root: dir.to_path_buf(),
        calls: Mutex::default(),
    });
    let file = ZarrFile::open_objects(Arc::clone(&source) as Arc<dyn ObjectSource>, Limits::default()).unwrap();
    (source, file)
}

#[test]
fn each_chunk_is_one_capped_get_and_an_oversized_chunk_is_refused_from_its_size() {
    let dir = std::env::temp_dir().join(format!("rasterpack-zarr-objects-{}", std::process::id()));
    make_store(&dir);
    let chunk_bytes = CHUNK.iter().product::<u64>() * 4;
    // The cap the reader puts on a stored chunk (a compressed chunk is never much larger than
    // what it decodes to).
    let cap = chunk_bytes + chunk_bytes / 8 + (1 << 20);

    let (source, file) = open(&dir);
    let got = file.read(&ArrayRequest::default()).unwrap();
    assert_eq!(got.to_vec::<i32>().unwrap(), expected());
    let local = ZarrFile::open(&dir, Limits::default()).unwrap();
    assert_eq!(local.read(&ArrayRequest::default()).unwrap().data, got.data);

    let chunks = SHAPE[0].div_ceil(CHUNK[0]) * SHAPE[1].div_ceil(CHUNK[1]);
    let gets = source.chunk_gets();
    assert_eq!(
        gets.len() as u64,
        chunks,
        "every chunk key asked for, the absent one too: {gets:?}"
    );
    for (key, (n, max_alloc)) in &gets {
        assert_eq!(*n, 1, "{key} fetched {n} times");
        assert_eq!(*max_alloc, cap, "{key} fetched without its cap");
    }
    assert_eq!(source.chunk_sizes(), 0, "a size request was made for a chunk");

    // `validate` decodes every chunk the same way.
    let (source, file) = open(&dir);
    let report = file.validate();
    assert!(!report.findings.has_errors(), "{:?}", report.findings);
    assert_eq!(source.chunk_sizes(), 0);
    assert!(source.chunk_gets().values().all(|&(n, m)| n == 1 && m == cap));

    // A stored chunk one byte above the cap: refused as the local read refuses it, with the
    // finding that names the chunk, and never read whole (the cap was the GET's limit).
    std::fs::write(dir.join("c/0/1"), vec![0u8; (cap + 1) as usize]).unwrap();
    let (_, file) = open(&dir);
    let remote = file.read(&ArrayRequest::default()).unwrap_err();
    let local = ZarrFile::open(&dir, Limits::default())
        .unwrap()
        .read(&ArrayRequest::default())
        .unwrap_err();
    for err in [&remote, &local] {
        assert_eq!(err.code, "zarr.chunk_too_large", "{err}");
        assert!(err.message.contains("chunk c/0/1"), "{err}");
    }
    assert_eq!(remote.kind, local.kind);
    let _ = std::fs::remove_dir_all(&dir);
}
