//! Streaming reads (issue 12): regions read exactly the values of the whole array, through
//! random-access and sequential sinks alike, only the bricks a region meets are decoded, levels
//! of detail are addressed by the request, and a sequential read whose slab cannot fit the
//! working set is refused before anything is decoded.

use std::ops::Range;

use rasterpack_common::{ArrayInfo, ArrayRequest, ArraySink, ErrorKind, Input, Limits, MemorySink, Region, Result};
use rasterpack_vds_meta::container::Container;
use rasterpack_vds_meta::layout::{VdsCompression, VdsSampleFormat};
use rasterpack_vds_meta::testsupport::{sample_data, write_container, write_container_bricks, Spec};
use rasterpack_vds_meta::{NdArray, VdsDataset, VdsValues};

/// A sink that takes bytes only in order (like a pipe), collecting them.
#[derive(Default)]
struct InOrder {
    info: Option<ArrayInfo>,
    data: Vec<u8>,
}

impl ArraySink for InOrder {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        self.info = Some(info.clone());
        Ok(())
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        assert_eq!(
            offset,
            self.data.len() as u64,
            "a sequential sink got bytes out of order"
        );
        self.data.extend_from_slice(data);
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

fn open(bytes: Vec<u8>) -> VdsDataset {
    VdsDataset::from_bytes(bytes).unwrap()
}

fn region(ranges: &[Range<u64>]) -> Region {
    Region {
        ranges: ranges.to_vec(),
    }
}

/// Pseudo-random regions of `shape` (deterministic).
fn regions(shape: &[u64], n: usize, seed: u64) -> Vec<Region> {
    let mut s = seed | 1;
    let mut next = move |m: u64| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s % m
    };
    (0..n)
        .map(|_| {
            region(
                &shape
                    .iter()
                    .map(|&d| {
                        let a = next(d);
                        a..a + 1 + next(d - a)
                    })
                    .collect::<Vec<_>>(),
            )
        })
        .collect()
}

/// The same values (dtype, shape, bytes), reporting the first differing byte.
#[track_caller]
fn same(got: &NdArray, want: &NdArray, what: &str) {
    assert_eq!((got.dtype, &got.shape), (want.dtype, &want.shape), "{what}");
    if let Some(i) = got.data.iter().zip(&want.data).position(|(a, b)| a != b) {
        panic!("{what}: first difference at byte {i} of {}", want.data.len());
    }
    assert_eq!(got.data.len(), want.data.len(), "{what}");
}

fn read_in_order(ds: &VdsDataset, req: &ArrayRequest) -> Result<NdArray> {
    let mut sink = InOrder::default();
    ds.stream(req, &mut sink)?;
    let info = sink.info.unwrap();
    NdArray::new(info.dtype, info.shape, sink.data)
}

#[test]
fn regions_read_what_the_whole_array_holds() {
    let cases = [
        Spec {
            dims: vec![70, 45, 33],
            compression: VdsCompression::RLE,
            ..Default::default()
        },
        Spec {
            dims: vec![50, 37, 20, 3],
            compression: VdsCompression::Zip,
            negative_margin: 2,
            positive_margin: 2,
            page_entries: 8,
            ..Default::default()
        },
        Spec {
            dims: vec![40, 33],
            format: VdsSampleFormat::U16,
            components: 2,
            ..Default::default()
        },
        Spec {
            dims: vec![66, 40, 35],
            format: VdsSampleFormat::U8,
            integer_scale: 0.01,
            use_no_value: true,
            no_value: -5.0,
            unwritten: vec![1, 4],
            compression: VdsCompression::RLE,
            ..Default::default()
        },
    ];
    for (k, spec) in cases.iter().enumerate() {
        let ds = open(write_container(spec, &sample_data(spec, 7 + k as u64)));
        for physical in [false, true] {
            let req = ArrayRequest::default().with_physical(physical);
            let whole = ds.read(&req).unwrap();
            let mut want_shape: Vec<u64> = spec.dims.iter().rev().copied().collect();
            if spec.components > 1 {
                want_shape.push(spec.components as u64);
            }
            assert_eq!(whole.shape, want_shape);
            same(
                &read_in_order(&ds, &req).unwrap(),
                &whole,
                &format!("case {k}: sequential whole read"),
            );
            for r in regions(&whole.shape, 12, 99 + k as u64) {
                let want = whole.region(&r).unwrap();
                let req = req.clone().with_region(&r);
                same(
                    &ds.read(&req).unwrap(),
                    &want,
                    &format!("case {k} physical {physical} region {r:?}"),
                );
                same(
                    &read_in_order(&ds, &req).unwrap(),
                    &want,
                    &format!("case {k}: sequential {r:?}"),
                );
            }
        }
    }
}

#[test]
fn tiny_working_sets_still_read_exactly() {
    let spec = Spec {
        dims: vec![90, 64, 40],
        compression: VdsCompression::RLE,
        ..Default::default()
    };
    let data = sample_data(&spec, 3);
    let ds = open(write_container(&spec, &data));
    let whole = ds.read(&ArrayRequest::default()).unwrap();
    assert!(whole.data == data);
    // Budgets that force the group level down to single bricks (random access).
    for ws in [4 << 20, 2 << 20, 1 << 20] {
        let limits = Limits {
            working_set: ws,
            ..Limits::default()
        };
        let got = ds.read(&ArrayRequest::default().with_limits(limits)).unwrap();
        same(&got, &whole, &format!("working set {ws}"));
    }
    // Below one brick per decoding thread, even a random-access read is refused.
    let limits = Limits {
        working_set: 300 << 10,
        ..Limits::default()
    };
    let err = ds.read(&ArrayRequest::default().with_limits(limits)).unwrap_err();
    assert_eq!(err.code, "limit.working_set", "{err}");
}

#[test]
fn a_sequential_read_whose_slab_cannot_fit_is_refused_before_decoding() {
    let spec = Spec {
        dims: vec![200, 150, 64],
        ..Default::default()
    };
    let ds = open(write_container(&spec, &sample_data(&spec, 5)));
    // One slab: 200 x 150 x 32 float32 = 3.84 MB.
    let limits = Limits {
        working_set: 2 << 20,
        ..Limits::default()
    };
    let mut sink = InOrder::default();
    let err = ds
        .stream(&ArrayRequest::default().with_limits(limits), &mut sink)
        .unwrap_err();
    assert_eq!(err.code, "limit.working_set", "{err}");
    assert_eq!(err.kind, ErrorKind::LimitExceeded);
    assert!(sink.info.is_none(), "refused before begin");
    // A random-access sink reads it with the same budget, a group of bricks at a time.
    let mut mem = MemorySink::new(limits);
    ds.stream(&ArrayRequest::default().with_limits(limits), &mut mem)
        .unwrap();
    same(
        &mem.into_array().unwrap(),
        &ds.read(&ArrayRequest::default()).unwrap(),
        "random access",
    );
    // And the sequential one a region whose slab fits.
    let part = region(&[0..64, 0..40, 0..200]);
    let got = read_in_order(&ds, &ArrayRequest::default().with_limits(limits).with_region(&part)).unwrap();
    same(
        &got,
        &ds.read(&ArrayRequest::default()).unwrap().region(&part).unwrap(),
        "slab that fits",
    );
}

/// Corrupt the RLE stream of chunk `chunk` (its first run overruns the chunk).
fn corrupt_chunk(bytes: &mut [u8], chunk: usize) {
    let c = Container::open(&Input::from_bytes("x", bytes.to_vec()), &Limits::default()).unwrap();
    let f = c.files.iter().find(|f| f.entry.file_type == *b"VDS ").unwrap();
    let (o, n) = f.extent(chunk);
    assert!(n > 40);
    bytes[o as usize + 36] = 0xBF;
    bytes[o as usize + 37] = 0xFF;
}

#[test]
fn a_region_decodes_only_the_bricks_it_meets() {
    // 2 x 2 x 2 bricks of 32; chunk 7 is the far corner (x, y, z >= 32).
    let spec = Spec {
        dims: vec![64, 64, 64],
        compression: VdsCompression::RLE,
        detect_constants: false,
        ..Default::default()
    };
    let mut bytes = write_container(&spec, &sample_data(&spec, 11));
    corrupt_chunk(&mut bytes, 7);
    let ds = open(bytes);
    let whole = ds.read(&ArrayRequest::default()).unwrap_err();
    assert!(whole.code.starts_with("vds.chunk.rle"), "{whole}");
    // C order [z, y, x]: a box in the near half of z misses chunk 7, one touching x=32.. too.
    for r in [
        region(&[0..32, 0..64, 0..64]),
        region(&[40..64, 0..31, 0..64]),
        region(&[33..60, 33..60, 0..32]),
    ] {
        ds.read(&ArrayRequest::default().with_region(&r))
            .unwrap_or_else(|e| panic!("{r:?}: {e}"));
        read_in_order(&ds, &ArrayRequest::default().with_region(&r)).unwrap();
    }
    // A box meeting chunk 7 by one voxel fails.
    let err = ds
        .read(&ArrayRequest::default().with_region(region(&[32..33, 32..33, 32..33])))
        .unwrap_err();
    assert!(err.code.starts_with("vds.chunk.rle"), "{err}");
}

#[test]
fn levels_of_detail_are_read_by_request() {
    let spec = Spec {
        dims: vec![70, 50, 36],
        lod_levels: 2,
        compression: VdsCompression::Zip,
        ..Default::default()
    };
    let ds = open(write_container(&spec, &sample_data(&spec, 4)));
    for lod in 0..=2u32 {
        let li = ds.lod_layer(0, lod).unwrap();
        let layer = ds.read_layer(li, VdsValues::Native).unwrap();
        let req = ArrayRequest {
            lod,
            ..ArrayRequest::default()
        };
        let a = ds.read(&req).unwrap();
        same(&a, &layer, &format!("LOD {lod}"));
        let want: Vec<u64> = spec.dims.iter().rev().map(|&d| d.div_ceil(1 << lod)).collect();
        assert_eq!(a.shape, want, "LOD {lod}");
        let r = Region::from_start_size(&[1, 2, 3], &[a.shape[0] - 1, a.shape[1] - 2, a.shape[2] - 3]).unwrap();
        same(
            &ds.read(&req.clone().with_region(&r)).unwrap(),
            &a.region(&r).unwrap(),
            "LOD region",
        );
    }
    let err = ds
        .read(&ArrayRequest {
            lod: 3,
            ..ArrayRequest::default()
        })
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Usage, "{err}");
    assert!(
        err.message.contains("no LOD 3") && err.message.contains("0, 1, 2"),
        "{err}"
    );
}

#[test]
fn streamed_container_writer_matches_the_whole_one() {
    let spec = Spec {
        dims: vec![50, 40, 30],
        compression: VdsCompression::RLE,
        page_entries: 2,
        ..Default::default()
    };
    let data = sample_data(&spec, 8);
    let whole = open(write_container(&spec, &data))
        .read(&ArrayRequest::default())
        .unwrap();
    let path = std::env::temp_dir().join(format!("rasterpack-vds-streamed-{}.vds", std::process::id()));
    let mut file = std::fs::File::create(&path).unwrap();
    write_container_bricks(&spec, &mut file, |_, e| {
        // The brick's native values gathered from the whole array (X fastest).
        let mut payload = Vec::new();
        for z in e.stored_origin[2]..e.stored_origin[2] + e.stored_size[2] {
            for y in e.stored_origin[1]..e.stored_origin[1] + e.stored_size[1] {
                let row = ((z * 40 + y) * 50 + e.stored_origin[0]) as usize * 4;
                payload.extend_from_slice(&data[row..row + e.stored_size[0] as usize * 4]);
            }
        }
        Some(payload)
    })
    .unwrap();
    drop(file);
    let ds = VdsDataset::open(&path).unwrap();
    assert!(ds.validate().is_valid(true), "{:?}", ds.validate().findings);
    same(&ds.read(&ArrayRequest::default()).unwrap(), &whole, "streamed writer");
    std::fs::remove_file(&path).unwrap();
}

/// A sink holding the whole array in its own buffer (as Python's numpy sink does) that refuses
/// `write_at` and `fill_at`: whole-element reads decode every brick straight into its buffer.
#[derive(Default)]
struct DirectOnly {
    info: Option<ArrayInfo>,
    buf: Vec<u8>,
}

impl ArraySink for DirectOnly {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        self.buf = vec![0xAB; info.byte_len()? as usize];
        self.info = Some(info.clone());
        Ok(())
    }
    fn write_at(&mut self, offset: u64, _: &[u8]) -> Result<()> {
        Err(rasterpack_common::Error::usage(format!(
            "write_at({offset}) on a direct sink"
        )))
    }
    fn fill_at(&mut self, offset: u64, _: u64, _: &[u8]) -> Result<()> {
        Err(rasterpack_common::Error::usage(format!(
            "fill_at({offset}) on a direct sink"
        )))
    }
    fn direct_buffer(&mut self) -> Option<&mut [u8]> {
        self.info.as_ref().map(|_| &mut self.buf[..])
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

#[test]
fn reads_into_a_sinks_own_buffer_decode_straight_into_it() {
    let cases = [
        Spec {
            dims: vec![70, 45, 33],
            compression: VdsCompression::Zip,
            unwritten: vec![1],
            ..Default::default()
        },
        Spec {
            dims: vec![50, 37, 20, 3],
            compression: VdsCompression::RLE,
            negative_margin: 2,
            positive_margin: 2,
            ..Default::default()
        },
        Spec {
            dims: vec![66, 40, 35],
            format: VdsSampleFormat::U8,
            integer_scale: 0.01,
            use_no_value: true,
            no_value: -5.0,
            compression: VdsCompression::Zip,
            ..Default::default()
        },
    ];
    for (k, spec) in cases.iter().enumerate() {
        let ds = open(write_container(spec, &sample_data(spec, 3 + k as u64)));
        for physical in [false, true] {
            let req = ArrayRequest::default().with_physical(physical);
            let want = read_in_order(&ds, &req).unwrap();
            let mut sink = DirectOnly::default();
            ds.stream(&req, &mut sink)
                .unwrap_or_else(|e| panic!("case {k} physical {physical}: {e}"));
            let info = sink.info.unwrap();
            same(
                &NdArray::new(info.dtype, info.shape, sink.buf).unwrap(),
                &want,
                &format!("case {k} physical {physical}: whole"),
            );
            for r in regions(&want.shape, 6, 11 + k as u64) {
                let mut sink = DirectOnly::default();
                ds.stream(&req.clone().with_region(&r), &mut sink).unwrap();
                let info = sink.info.unwrap();
                same(
                    &NdArray::new(info.dtype, info.shape, sink.buf).unwrap(),
                    &want.region(&r).unwrap(),
                    &format!("case {k} physical {physical}: region {r:?}"),
                );
            }
        }
    }
}

/// Passes everything through to a `.npy` writer, and its parallel file on (as the CLI's
/// wrappers that only check, count or poll do), keeping a clone to count the writes made
/// through it and counting the groups reported.
struct PassParallel<S> {
    inner: S,
    offered: Option<rasterpack_common::ParallelFile>,
    reported: u64,
}

impl<S: ArraySink> ArraySink for PassParallel<S> {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        self.inner.begin(info)
    }
    fn random_access(&self) -> bool {
        self.inner.random_access()
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.inner.write_at(offset, data)
    }
    fn fill_at(&mut self, offset: u64, len: u64, pattern: &[u8]) -> Result<()> {
        self.inner.fill_at(offset, len, pattern)
    }
    fn parallel_file(&mut self) -> Option<rasterpack_common::ParallelFile> {
        self.offered = self.inner.parallel_file();
        self.offered.clone()
    }
    fn written_elsewhere(&mut self, len: u64) -> Result<()> {
        self.reported += 1;
        self.inner.written_elsewhere(len)
    }
    fn finish(&mut self) -> Result<()> {
        self.inner.finish()
    }
}

/// A wrapper that must see the bytes (like a view or stats sink): it keeps the default
/// `parallel_file` (none), so the file it wraps is written only through it.
struct SeesBytes<S> {
    inner: S,
    seen: u64,
}

impl<S: ArraySink> ArraySink for SeesBytes<S> {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        self.inner.begin(info)
    }
    fn random_access(&self) -> bool {
        self.inner.random_access()
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.seen += data.len() as u64;
        self.inner.write_at(offset, data)
    }
    fn fill_at(&mut self, offset: u64, len: u64, pattern: &[u8]) -> Result<()> {
        self.seen += len;
        self.inner.fill_at(offset, len, pattern)
    }
    fn finish(&mut self) -> Result<()> {
        self.inner.finish()
    }
}

/// Stream `req` into a `.npy` file through [`PassParallel`] (`parallel`) or [`SeesBytes`]:
/// the file's bytes, the bytes the wrapper saw, the positioned writes made through the file
/// the writer offered (`None`: none was offered) and the groups reported written.
fn npy_through(ds: &VdsDataset, req: &ArrayRequest, name: &str, parallel: bool) -> (Vec<u8>, u64, Option<u64>, u64) {
    let path = std::env::temp_dir().join(format!("rasterpack-vds-par-{}-{name}.npy", std::process::id()));
    let file = std::fs::File::create(&path).unwrap();
    let npy = rasterpack_common::npy::NpyWriter::new(rasterpack_common::Output::File(&file));
    let (seen, writes, reported) = if parallel {
        let mut sink = PassParallel {
            inner: npy,
            offered: None,
            reported: 0,
        };
        ds.stream(req, &mut sink).unwrap();
        sink.finish().unwrap();
        (0, sink.offered.as_ref().map(|f| f.writes()), sink.reported)
    } else {
        let mut sink = SeesBytes { inner: npy, seen: 0 };
        ds.stream(req, &mut sink).unwrap();
        sink.finish().unwrap();
        (sink.seen, None, 0)
    };
    drop(file);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    (bytes, seen, writes, reported)
}

#[test]
fn decoding_threads_write_a_local_npy_themselves_with_the_same_bytes() {
    let cases = [
        // Zip R32, several groups, unwritten bricks (fills stay on the sink's thread).
        Spec {
            dims: vec![150, 130, 140],
            compression: VdsCompression::Zip,
            unwritten: vec![1, 5],
            lod_levels: 1,
            ..Default::default()
        },
        Spec {
            dims: vec![140, 120, 100],
            format: VdsSampleFormat::U8,
            integer_scale: 0.01,
            compression: VdsCompression::RLE,
            ..Default::default()
        },
    ];
    for (k, spec) in cases.iter().enumerate() {
        let ds = open(write_container(spec, &sample_data(spec, 11 + k as u64)));
        let mut reqs = vec![
            ("whole", ArrayRequest::default()),
            ("physical", ArrayRequest::default().with_physical(true)),
            (
                "box",
                ArrayRequest::default().with_region(region(&[3..97, 1..119, 5..133])),
            ),
        ];
        if spec.lod_levels > 0 {
            reqs.push((
                "lod1",
                ArrayRequest {
                    lod: 1,
                    ..ArrayRequest::default()
                },
            ));
        }
        for (what, req) in reqs {
            let want = ds.read(&req).unwrap();
            let name = format!("{k}-{what}");
            let (serial, seen, _, _) = npy_through(&ds, &req, &format!("{name}-serial"), false);
            assert_eq!(seen, want.data.len() as u64, "{name}: every byte through the wrapper");
            let (parallel, _, writes, reported) = npy_through(&ds, &req, &format!("{name}-parallel"), true);
            let writes = writes.expect("a local .npy offers its file");
            assert!(
                writes > 0 && reported > 1,
                "{name}: the decoding threads wrote ({writes} writes, {reported} groups reported)"
            );
            assert_eq!(
                &serial[serial.len() - want.data.len()..],
                &want.data[..],
                "{name}: serial"
            );
            assert!(serial == parallel, "{name}: parallel output differs from serial");
        }
    }
}

/// [`PassParallel`] whose sink says "stop" (as an interrupted CLI does) when the `stop_at`-th
/// group written by the decoding threads is reported.
struct StopAt<S> {
    inner: PassParallel<S>,
    stop_at: u64,
    /// How long each report takes: a reporting thread that gets little of the machine.
    report_delay: std::time::Duration,
}

impl<S: ArraySink> ArraySink for StopAt<S> {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        self.inner.begin(info)
    }
    fn random_access(&self) -> bool {
        self.inner.random_access()
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.inner.write_at(offset, data)
    }
    fn fill_at(&mut self, offset: u64, len: u64, pattern: &[u8]) -> Result<()> {
        self.inner.fill_at(offset, len, pattern)
    }
    fn parallel_file(&mut self) -> Option<rasterpack_common::ParallelFile> {
        self.inner.parallel_file()
    }
    fn written_elsewhere(&mut self, len: u64) -> Result<()> {
        std::thread::sleep(self.report_delay);
        self.inner.written_elsewhere(len)?;
        if self.inner.reported == self.stop_at {
            return Err(rasterpack_common::Error::new(
                ErrorKind::Usage,
                "test.interrupted",
                None,
                "interrupted",
            ));
        }
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        self.inner.finish()
    }
}

/// Stream into a `.npy` file through [`StopAt`]: the read's error and the positioned writes
/// made through the file.
fn npy_stopped(
    ds: &VdsDataset,
    name: &str,
    stop_at: u64,
    report_delay: std::time::Duration,
) -> (rasterpack_common::Error, u64) {
    let path = std::env::temp_dir().join(format!("rasterpack-vds-stop-{}-{name}.npy", std::process::id()));
    let file = std::fs::File::create(&path).unwrap();
    let mut sink = StopAt {
        inner: PassParallel {
            inner: rasterpack_common::npy::NpyWriter::new(rasterpack_common::Output::File(&file)),
            offered: None,
            reported: 0,
        },
        stop_at,
        report_delay,
    };
    let err = ds.stream(&ArrayRequest::default(), &mut sink).unwrap_err();
    let writes = sink.inner.offered.as_ref().map_or(0, |f| f.writes());
    drop(file);
    std::fs::remove_file(&path).unwrap();
    (err, writes)
}

#[test]
fn decoding_threads_writing_a_file_take_no_more_groups_after_an_interrupt_or_a_failed_brick() {
    // 64 x 64 x 4096 U8 in bricks of 32: 128 slabs of 4 bricks, a group each (one write).
    let spec = Spec {
        dims: vec![64, 64, 4096],
        format: VdsSampleFormat::U8,
        integer_scale: 0.01,
        compression: VdsCompression::RLE,
        detect_constants: false,
        ..Default::default()
    };
    let bytes = write_container(&spec, &sample_data(&spec, 5));
    let ds = open(bytes.clone());
    let (whole, _, writes, reported) = npy_through(&ds, &ArrayRequest::default(), "stop-whole", true);
    assert_eq!(
        &whole[whole.len() - 64 * 64 * 4096..],
        &ds.read(&ArrayRequest::default()).unwrap().data[..]
    );
    assert_eq!((writes, reported), (Some(128), 128), "one write per slab");
    // Stopped at the 3rd group reported: only the groups already being decoded are written
    // after it (at most one per task, and there are far fewer tasks than groups).
    let (err, writes) = npy_stopped(&ds, "interrupt", 3, std::time::Duration::ZERO);
    assert_eq!(err.code, "test.interrupted", "{err}");
    assert!(
        (3..64).contains(&writes),
        "{writes} of 128 groups written after the interrupt"
    );
    // The same with a reporting thread that lags (20 ms a report, while a group decodes in
    // well under that): the tasks wait for it rather than write on to the end, so the
    // interrupt still stops the writes within a few groups (a clean CI run under load wrote
    // 80 of 128 before the tasks were held to it).
    let (err, writes) = npy_stopped(&ds, "interrupt-lagging", 3, std::time::Duration::from_millis(20));
    assert_eq!(err.code, "test.interrupted", "{err}");
    assert!(
        (3..32).contains(&writes),
        "{writes} of 128 groups written after the interrupt, the reports lagging"
    );
    // A brick of slab 20 that fails: its error is the read's, and the slabs after are not read.
    let mut bad = bytes;
    corrupt_chunk(&mut bad, 20 * 4 + 2);
    let (err, writes) = npy_stopped(&open(bad), "failed", u64::MAX, std::time::Duration::ZERO);
    assert!(err.code.starts_with("vds.chunk.rle"), "{err}");
    assert!(writes < 64, "{writes} of 128 groups written after a failed brick");
}

#[test]
fn decoding_threads_writing_a_file_take_groups_of_at_most_4_mib() {
    // 256 x 256 x 128 R32 in bricks of 64: slabs of 16 MiB (2 of them) for other sinks; for a
    // file the threads write, rows of bricks of 4 MiB (8), written as 64 KiB runs.
    let spec = Spec {
        dims: vec![256, 256, 128],
        brick_size: 64,
        compression: VdsCompression::None,
        detect_constants: false,
        ..Default::default()
    };
    let ds = open(write_container(&spec, &sample_data(&spec, 9)));
    let want = ds.read(&ArrayRequest::default()).unwrap();
    let (bytes, _, writes, reported) = npy_through(&ds, &ArrayRequest::default(), "rows", true);
    assert_eq!(&bytes[bytes.len() - want.data.len()..], &want.data[..]);
    assert_eq!(
        (reported, writes),
        (8, Some(8 * 64)),
        "groups reported, positioned writes"
    );
}

/// A sink that takes blocks ([`ArraySink::parallel_blocks`]) as a stats sink does, keeping
/// each block's cells by its number; bytes in C order are a failure here.
struct Blocks {
    size: usize,
    got: std::sync::Arc<BlockLog>,
    reported: u64,
}

#[derive(Default)]
struct BlockLog(std::sync::Mutex<Vec<(u64, Vec<u8>)>>);

impl rasterpack_common::BlockSink for BlockLog {
    fn block(&self, seq: u64, data: &[u8]) -> Result<()> {
        self.0.lock().unwrap().push((seq, data.to_vec()));
        Ok(())
    }
    fn fill(&self, seq: u64, cells: u64, pattern: &[u8]) -> Result<()> {
        self.0.lock().unwrap().push((seq, pattern.repeat(cells as usize)));
        Ok(())
    }
}

impl ArraySink for Blocks {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        self.size = info.dtype.size();
        Ok(())
    }
    fn parallel_blocks(&mut self) -> Option<rasterpack_common::ParallelBlocks> {
        Some(self.got.clone())
    }
    fn written_elsewhere(&mut self, len: u64) -> Result<()> {
        self.reported += len;
        Ok(())
    }
    fn write_at(&mut self, offset: u64, _: &[u8]) -> Result<()> {
        panic!("bytes in C order at {offset} to a sink that takes blocks");
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// The blocks in number order (each number once, none missing), and the bytes reported.
fn read_blocks(ds: &VdsDataset, req: &ArrayRequest) -> (Vec<Vec<u8>>, u64, usize) {
    let mut sink = Blocks {
        size: 0,
        got: Default::default(),
        reported: 0,
    };
    ds.stream(req, &mut sink).unwrap();
    let mut got = std::mem::take(&mut *sink.got.0.lock().unwrap());
    got.sort_by_key(|b| b.0);
    for (k, (seq, _)) in got.iter().enumerate() {
        assert_eq!(*seq, k as u64, "block numbers are 0, 1, 2, ... once each");
    }
    (got.into_iter().map(|b| b.1).collect(), sink.reported, sink.size)
}

/// The values (whole `size`-byte cells) of `data`, sorted: what a multiset comparison needs.
fn cells(data: &[u8], size: usize) -> Vec<&[u8]> {
    let mut c: Vec<&[u8]> = data.chunks_exact(size).collect();
    c.sort();
    c
}

/// Bricks handed to a block-taking sink (stats) hold exactly the cells of the region, every
/// one once (margins left out, only the selected components, unwritten and NoValue bricks as
/// fill runs), in blocks numbered the same way on every read.
#[test]
fn bricks_handed_over_as_blocks_are_the_regions_cells() {
    let cases = [
        Spec {
            dims: vec![50, 37, 20, 3],
            compression: VdsCompression::Zip,
            negative_margin: 2,
            positive_margin: 2,
            page_entries: 8,
            ..Default::default()
        },
        Spec {
            dims: vec![40, 33],
            format: VdsSampleFormat::U16,
            components: 2,
            ..Default::default()
        },
        Spec {
            dims: vec![66, 40, 35],
            format: VdsSampleFormat::U8,
            integer_scale: 0.01,
            use_no_value: true,
            no_value: -5.0,
            unwritten: vec![1, 4],
            compression: VdsCompression::RLE,
            ..Default::default()
        },
    ];
    for (k, spec) in cases.iter().enumerate() {
        let ds = open(write_container(spec, &sample_data(spec, 31 + k as u64)));
        for physical in [false, true] {
            let req = ArrayRequest::default().with_physical(physical);
            let whole = ds.read(&req).unwrap();
            let mut reqs = vec![req.clone()];
            reqs.extend(
                regions(&whole.shape, 10, 7 + k as u64)
                    .iter()
                    .map(|r| req.clone().with_region(r)),
            );
            for req in &reqs {
                let want = ds.read(req).unwrap();
                let (blocks, reported, size) = read_blocks(&ds, req);
                let all: Vec<u8> = blocks.concat();
                let what = format!("case {k} physical {physical} {:?}", req.region);
                assert_eq!(reported, want.data.len() as u64, "{what}: bytes reported");
                assert_eq!(cells(&all, size), cells(&want.data, size), "{what}: the cells");
                assert_eq!(read_blocks(&ds, req).0, blocks, "{what}: the same blocks again");
            }
        }
    }
}
