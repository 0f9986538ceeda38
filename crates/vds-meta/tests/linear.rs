//! No superlinear walks (issue 12 item 3): opening, validating, describing and reading a
//! dataset with thousands of channels and layers, and a layer that declares tens of thousands
//! of chunk-metadata pages of which two are stored, costs work proportional to what is stored.
//! Work is counted, not timed: every store call, every key a listing returns and every page
//! read, through an object store that counts them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rasterpack_common::{ArrayRequest, Findings, Limits, Result};
use rasterpack_vds_meta::store::ObjectStore;
use rasterpack_vds_meta::testsupport::Spec;
use rasterpack_vds_meta::VdsDataset;
use serde_json::{json, Value};

/// An object store in memory that counts the work asked of it.
#[derive(Default)]
struct Counting {
    objects: BTreeMap<String, Vec<u8>>,
    work: Arc<AtomicU64>,
}

impl Counting {
    fn charge(&self, n: u64) {
        self.work.fetch_add(n, Ordering::Relaxed);
    }
}

impl ObjectStore for Counting {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.charge(1);
        Ok(self.objects.get(key).cloned())
    }
    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let keys: Vec<String> = self
            .objects
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, _)| k.clone())
            .collect();
        self.charge(1 + keys.len() as u64);
        Ok(keys)
    }
    fn kind(&self) -> &'static str {
        "object-dir"
    }
    fn object_size(&self, key: &str) -> Result<Option<u64>> {
        self.charge(1);
        Ok(self.objects.get(key).map(|b| b.len() as u64))
    }
    fn stored_metadata_pages(&self, layer: &str, pages: u64) -> Result<Option<Vec<u64>>> {
        let prefix = format!("{layer}/ChunkMetadata/");
        let v: Vec<u64> = self
            .list(&prefix)?
            .iter()
            .filter_map(|k| k[prefix.len()..].parse().ok())
            .filter(|&p| p < pages)
            .collect();
        Ok(Some(v))
    }
}

/// An uncompressed float32 chunk of `size` voxels, all `v` but the first.
fn chunk(size: [u64; 3], v: f32) -> Vec<u8> {
    let mut obj = Vec::new();
    for x in [3, size[0] as i32, size[1] as i32, size[2] as i32, 3, 1] {
        obj.extend_from_slice(&x.to_le_bytes());
    }
    let n = size.iter().product::<u64>();
    for i in 0..n {
        obj.extend_from_slice(&(if i == 0 { 0.5 } else { v }).to_le_bytes());
    }
    obj
}

fn status(name: &str, chunks: u64, valid: u64, page_size: u64) -> Value {
    json!({"layerName": name, "compressionMethod": "None", "compressionTolerance": 0.0,
           "chunkCount": chunks, "validChunkCount": valid, "chunkMetadataPageSize": page_size,
           "chunkMetadataByteSize": 8})
}

#[test]
fn work_follows_what_is_stored() {
    const CHANNELS: u64 = 3000;
    let mut store = Counting::default();
    // The primary channel: 64 x 32 x 32768 float32 with bricks of 32 (2048 chunks, pages of
    // one entry, two of them stored); the others: one chunk each.
    let spec = Spec {
        dims: vec![64, 32, 32768],
        ..Default::default()
    };
    let mut layout = spec.layout_json();
    let first = layout["channelDescriptors"][0].clone();
    let channels = layout["channelDescriptors"].as_array_mut().unwrap();
    for c in 1..CHANNELS {
        let mut ch = first.clone();
        ch["name"] = json!(format!("C{c}"));
        ch["renderable"] = json!(false);
        channels.push(ch);
    }
    store
        .objects
        .insert("VolumeDataLayout".into(), serde_json::to_vec(&layout).unwrap());
    let primary = "Dimensions_012LOD0";
    let mut layers = vec![status(primary, 2 * 1024, 2, 1)];
    for (page, at) in [(0u64, 0u64), (1500, 1500)] {
        store.objects.insert(
            format!("{primary}/ChunkMetadata/{page}"),
            0x1234u64.to_le_bytes().to_vec(),
        );
        store
            .objects
            .insert(format!("{primary}/{at}"), chunk([32, 32, 32], 0.25));
    }
    for c in 1..CHANNELS {
        let name = format!("C{c}Dimensions_012LOD0");
        layers.push(status(&name, 2 * 1024, 1, 1024));
        let mut page = vec![0u8; 1024 * 8];
        page[..8].copy_from_slice(&0x5678u64.to_le_bytes());
        store.objects.insert(format!("{name}/ChunkMetadata/0"), page);
        store.objects.insert(format!("{name}/0"), chunk([32, 32, 32], c as f32));
    }
    store
        .objects
        .insert("LayerStatus".into(), serde_json::to_vec(&layers).unwrap());
    let stored_objects = store.objects.len() as u64;

    let work = store.work.clone();
    let ds = VdsDataset::open_store(Box::new(store), None, Findings::new(), &Limits::default()).unwrap();
    let report = ds.validate();
    assert!(
        !report.findings.iter().any(|f| f.code.starts_with("vds.layer.valid")),
        "{:?}",
        report.findings.iter().take(5).collect::<Vec<_>>()
    );
    assert_eq!(report.summary["arrays"].as_array().unwrap().len() as u64, CHANNELS);
    let a = ds.read(&ArrayRequest::for_element("C2999")).unwrap();
    assert_eq!(a.shape, vec![32768, 32, 64]);
    // Work: what the store was asked, against what it holds.
    let work = work.load(Ordering::Relaxed);
    eprintln!("{stored_objects} objects, {CHANNELS} channels and layers: {work} units of store work");
    assert!(
        work <= 12 * (stored_objects + CHANNELS),
        "store work {work} is out of proportion to {stored_objects} objects"
    );
}
