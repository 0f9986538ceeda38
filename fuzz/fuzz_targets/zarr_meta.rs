#![no_main]
//! Zarr node metadata (`zarr.json`, `.zarray`, `.zgroup`) as rasterpack checks it before zarrs
//! opens an array: never panics, and whatever it accepts is bounded by the limits (chunk count,
//! the decoded size of one chunk).
use libfuzzer_sys::fuzz_target;
use rasterpack_common::Limits;
use rasterpack_zarr::read::meta::{parse, MetaFile, NodeMeta};

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    for file in [MetaFile::V3, MetaFile::V2Array, MetaFile::V2Group] {
        if let Ok(NodeMeta::Array(m)) = parse(data, file, "fuzz", &limits) {
            assert!(m.chunk_count <= limits.max_entries);
            assert_eq!(m.chunk_shape.len(), m.shape.len());
            assert_eq!(m.unit_shape.len(), m.shape.len());
            let elem = m.dtype.as_ref().map_or(1, |d| d.size() as u64);
            let unit = m.unit_shape.iter().try_fold(elem, |a, &d| a.checked_mul(d));
            assert!(unit.is_some_and(|u| u <= limits.working_set));
        }
    }
});
