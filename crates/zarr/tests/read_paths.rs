//! The two ways a Zarr read goes (a band of chunks at a time, assembled and written in C order;
//! batches of chunks straight into a random-access sink when a band does not fit the working
//! set) give the same values, whole and by region, on a hand-made store with partial edge chunks
//! and an absent chunk; an output written in order that a band cannot fit is refused with
//! `limit.working_set` before any value is written.

use std::path::Path;

use rasterpack_common::{ArrayFile, ArrayInfo, ArrayRequest, ArraySink, Limits, MemorySink, RegionSpec, Result};
use rasterpack_zarr::ZarrFile;

const SHAPE: [u64; 3] = [9, 10, 11];
const CHUNK: [u64; 3] = [4, 3, 5];
const FILL: i32 = -1;

fn value(z: u64, y: u64, x: u64) -> i32 {
    (z * 1000 + y * 100 + x) as i32
}

/// Absent from the store: read as the fill value.
const ABSENT: [u64; 3] = [1, 2, 0];

/// An int32 store with uncompressed chunks (big-endian, so the byte order is exercised too).
fn make_store(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let meta = serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": SHAPE, "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": CHUNK}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": FILL, "codecs": [{"name": "bytes", "configuration": {"endian": "big"}}],
        "attributes": {}, "dimension_names": ["z", "y", "x"]
    });
    std::fs::write(dir.join("zarr.json"), serde_json::to_vec(&meta).unwrap()).unwrap();
    for cz in 0..SHAPE[0].div_ceil(CHUNK[0]) {
        for cy in 0..SHAPE[1].div_ceil(CHUNK[1]) {
            for cx in 0..SHAPE[2].div_ceil(CHUNK[2]) {
                if [cz, cy, cx] == ABSENT {
                    continue;
                }
                let mut bytes = Vec::new();
                // Edge chunks are stored whole; the part past the array holds junk.
                for z in cz * CHUNK[0]..(cz + 1) * CHUNK[0] {
                    for y in cy * CHUNK[1]..(cy + 1) * CHUNK[1] {
                        for x in cx * CHUNK[2]..(cx + 1) * CHUNK[2] {
                            bytes.extend_from_slice(&value(z, y, x).to_be_bytes());
                        }
                    }
                }
                let p = dir.join(format!("c/{cz}/{cy}/{cx}"));
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, bytes).unwrap();
            }
        }
    }
}

fn expected(region: &[std::ops::Range<u64>]) -> Vec<i32> {
    let mut out = Vec::new();
    for z in region[0].clone() {
        for y in region[1].clone() {
            for x in region[2].clone() {
                let chunk = [z / CHUNK[0], y / CHUNK[1], x / CHUNK[2]];
                out.push(if chunk == ABSENT { FILL } else { value(z, y, x) });
            }
        }
    }
    out
}

/// A sink that takes bytes only in order (standard output, a pipe).
struct InOrder(MemorySink, u64);

impl ArraySink for InOrder {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        self.0.begin(info)
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        assert_eq!(offset, self.1, "bytes out of order");
        self.1 += data.len() as u64;
        self.0.write_at(offset, data)
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

#[test]
fn bands_and_batches_read_the_same_values() {
    let dir = std::env::temp_dir().join(format!("rasterpack-zarr-paths-{}", std::process::id()));
    make_store(&dir);
    let file = ZarrFile::open(&dir, Limits::default()).unwrap();
    assert_eq!(file.chunk_shape(None), Some(CHUNK.to_vec()));
    // A band of 4 x 10 x 11 int32 with its chunks is about 4 KiB: 1 KiB forces the batches.
    for ws in [96 << 20, 1 << 10] {
        let limits = Limits {
            working_set: ws,
            ..Limits::default()
        };
        for spec in ["", "2:7,1:9,3:11", "8,9,10", "0:9,5:6", "3:5"] {
            // The box of the spec (an integer index keeps its axis in a box): this checks the
            // reader, which reads boxes; numpy's dropped axes are the view layer's.
            let region = rasterpack_common::Region::parse(if spec.is_empty() { ":" } else { spec }, &SHAPE).unwrap();
            let req = ArrayRequest::default()
                .with_region(RegionSpec::from(&region))
                .with_limits(limits);
            let got = file.read(&req).unwrap();
            assert_eq!(got.shape, region.shape());
            assert_eq!(
                got.to_vec::<i32>().unwrap(),
                expected(&region.ranges),
                "ws {ws}, region {spec:?}"
            );
            // An in-order sink takes the bands in C order; with the small working set a band of
            // a large region does not fit and is refused before any byte is written.
            let mut sink = InOrder(MemorySink::new(Limits::default()), 0);
            match file.stream(&req, &mut sink) {
                Ok(()) => assert_eq!(
                    sink.0.into_array().unwrap().to_vec::<i32>().unwrap(),
                    expected(&region.ranges)
                ),
                Err(err) => {
                    assert!(
                        ws < 1 << 20 && region.shape().iter().product::<u64>() > 64,
                        "{spec:?}: {err}"
                    );
                    assert_eq!(err.code, "limit.working_set", "{err}");
                    assert_eq!(sink.1, 0, "nothing written before the refusal");
                }
            }
            if ws < 1 << 20 && spec.is_empty() {
                let mut sink = InOrder(MemorySink::new(Limits::default()), 0);
                assert_eq!(file.stream(&req, &mut sink).unwrap_err().code, "limit.working_set");
            }
        }
    }
    let report = file.validate();
    assert!(
        report.is_valid(true) || !report.findings.has_errors(),
        "{:?}",
        report.findings
    );
    assert!(report.findings.has_code("zarr.chunks_missing"));
    let _ = std::fs::remove_dir_all(&dir);
}
