//! A request log of region reads and whole-file validates through `RemoteObject`: a counting
//! wrapper around an in-memory `ObjectStore` records every ranged GET, so the bytes a read
//! fetches can be set against the bytes of the tiles it needs (issue 19: at most 1.2x the
//! tiles' bytes plus the metadata), and a validate shown to stream the object once.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions,
    PutPayload, PutResult,
};
use rasterpack_common::{ArrayRequest, Input, Limits, MemorySink, Region};
use rasterpack_gvrs::{GvrsFile, GvrsWriter, GvrsWriterOptions, NdArray, Output};
use rasterpack_store::{Location, RemoteObject};

/// Every GET (with its range) counted; everything else passed through.
#[derive(Debug, Default)]
struct Counting {
    inner: InMemory,
    requests: AtomicU64,
    bytes: AtomicU64,
    log: Mutex<Vec<Range<u64>>>,
}

impl Counting {
    fn take(&self) -> (u64, u64) {
        self.log.lock().unwrap().clear();
        (
            self.requests.swap(0, Ordering::SeqCst),
            self.bytes.swap(0, Ordering::SeqCst),
        )
    }
}

impl std::fmt::Display for Counting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for Counting {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        let r = self.inner.get_opts(location, options).await?;
        self.requests.fetch_add(1, Ordering::SeqCst);
        self.bytes.fetch_add(r.range.end - r.range.start, Ordering::SeqCst);
        self.log.lock().unwrap().push(r.range.clone());
        Ok(r)
    }
    async fn head(&self, location: &Path) -> object_store::Result<ObjectMeta> {
        self.inner.head(location).await
    }
    async fn delete(&self, location: &Path) -> object_store::Result<()> {
        self.inner.delete(location).await
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.inner.copy(from, to).await
    }
    async fn copy_if_not_exists(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.inner.copy_if_not_exists(from, to).await
    }
}

/// A 4000 x 4000 float32 grid (a smooth surface with fine noise, so tiles compress to
/// different sizes) as GVRS bytes.
fn grid() -> (Vec<u8>, NdArray) {
    let (rows, cols) = (4000usize, 4000usize);
    let mut values = Vec::with_capacity(rows * cols);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for r in 0..rows {
        for c in 0..cols {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let noise = (seed % 1000) as f32 / 1000.0;
            values.push((r as f32 / 300.0).sin() * 500.0 + (c as f32 / 200.0).cos() * 300.0 + noise);
        }
    }
    let array = NdArray::from_vec(vec![rows as u64, cols as u64], values).unwrap();
    let mut bytes = Vec::new();
    GvrsWriter::new(
        Output::Stream(&mut bytes),
        GvrsWriterOptions::default().with_element_name("z"),
    )
    .write_array(&array)
    .unwrap();
    (bytes, array)
}

fn remote(store: &Arc<Counting>, bytes: &[u8]) -> Input {
    remote_named(store, bytes, "grid.gvrs")
}

fn remote_named(store: &Arc<Counting>, bytes: &[u8], name: &str) -> Input {
    let path = Path::from(name);
    let s = Arc::clone(store);
    let data = bytes.to_vec();
    let p = path.clone();
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(async move { s.put(&p, data.into()).await })
        .unwrap();
    let loc = Location {
        url: format!("memory:///{name}"),
        store: Arc::clone(store) as Arc<dyn ObjectStore>,
        path,
        max_requests: 16,
    };
    Input::remote(Arc::new(RemoteObject::open(loc).unwrap()))
}

#[test]
fn region_read_fetches_the_tiles_it_needs_and_validate_streams() {
    let (bytes, array) = grid();
    let local = GvrsFile::from_bytes(bytes.clone()).unwrap();
    let g = local.geometry;
    let store = Arc::new(Counting::default());
    let input = remote(&store, &bytes);

    // Opening: the header and the directories.
    let file = GvrsFile::from_input(input, Limits::default()).unwrap();
    let (open_requests, metadata) = store.take();

    // A window of 1% of the cells (400 x 400 at row 1700, column 2300).
    let (r0, c0, n) = (1700u32, 2300u32, 400u32);
    let req = ArrayRequest::for_element("z")
        .with_region(Region::from_start_size(&[r0 as u64, c0 as u64], &[n as u64, n as u64]).unwrap());
    let mut sink = MemorySink::new(Limits::default());
    file.stream(&req, &mut sink).unwrap();
    let got = sink.into_array().unwrap();
    let want = local.read(&req).unwrap();
    assert_eq!(
        got.data, want.data,
        "the window read by ranges differs from the local read"
    );
    let (requests, fetched) = store.take();

    // The tiles the window meets, and their records' bytes.
    let mut tiles = 0u64;
    let mut tile_bytes = 0u64;
    for tr in r0 / g.tile_rows..=(r0 + n - 1) / g.tile_rows {
        for tc in c0 / g.tile_cols..=(c0 + n - 1) / g.tile_cols {
            if let Some(off) = local.tile_offset(tr, tc) {
                let (rec, _) = local.read_tile_record(off).unwrap();
                tiles += 1;
                tile_bytes += rec.record.length as u64;
            }
        }
    }
    eprintln!(
        "4000x4000 GVRS ({} bytes, {}x{} tiles): open {open_requests} requests / {metadata} bytes; \
         400x400 window: {tiles} tiles of {tile_bytes} bytes, fetched {fetched} bytes in {requests} requests ({:.3}x)",
        bytes.len(),
        g.tile_rows,
        g.tile_cols,
        fetched as f64 / tile_bytes as f64
    );
    assert!(tiles >= 4, "the window should meet several tiles");
    // The tiles of each band lie end to end in the file: announced together, they are fetched
    // in one request per band (issue 19: adjacent ranges are coalesced), not one or two per tile.
    let bands = ((r0 + n - 1) / g.tile_rows - r0 / g.tile_rows + 1) as u64;
    assert!(
        requests <= bands + 2 && requests * 4 <= tiles,
        "{requests} requests for {tiles} tiles in {bands} bands"
    );
    assert!(
        fetched as f64 <= 1.2 * tile_bytes as f64,
        "window fetched {fetched} bytes for {tile_bytes} bytes of tiles"
    );
    assert!(
        metadata < bytes.len() as u64 / 100,
        "opening fetched {metadata} of {} bytes",
        bytes.len()
    );
    let _ = array;

    // Whole-file validate, told it reads everything: the object streams by windows, each
    // fetched once, and the verdict is the local one.
    let input = remote(&store, &bytes);
    store.take();
    input.advise_sequential();
    let file = GvrsFile::from_input(input, Limits::default()).unwrap();
    let report = file.validate();
    let (requests, fetched) = store.take();
    assert_eq!(report.is_valid(true), local.validate().is_valid(true));
    assert!(report.is_valid(true));
    let windows = (bytes.len() as u64).div_ceil(rasterpack_store::WINDOW);
    eprintln!(
        "validate: {requests} requests, {fetched} bytes for a {} byte object ({windows} windows)",
        bytes.len()
    );
    assert!(requests <= windows + 2, "{requests} requests for {windows} windows");
    assert!(
        fetched <= bytes.len() as u64 + rasterpack_store::WINDOW,
        "{fetched} bytes fetched"
    );
}

/// A box of a `.vds` file meeting every brick (stored end to end): the bricks a read announces
/// are fetched a few to a request, not one request (or two) per brick, and no more bytes than
/// the bricks hold, plus the metadata; the values are the local read's.
#[test]
fn vds_file_box_fetches_its_bricks_in_few_requests() {
    use rasterpack_common::ArraySink as _;
    use rasterpack_vds_meta::container::Container;
    use rasterpack_vds_meta::layout::VdsCompression;
    use rasterpack_vds_meta::store::ObjectStore as _;
    use rasterpack_vds_meta::write::{VdsWriteOptions, VdsWriter};
    use rasterpack_vds_meta::VdsDataset;

    // 64 x 128 x 256 float32, 64^3 bricks: 8 bricks of 1 MiB (uncompressed, so they are
    // large enough for several to a request to matter).
    let shape = [64u64, 128, 256];
    let n: u64 = shape.iter().product();
    let values: Vec<f32> = (0..n).map(|i| ((i as f32) * 0.37).sin() * 100.0).collect();
    let array = NdArray::from_vec(shape.to_vec(), values).unwrap();
    let mut bytes = Vec::new();
    let mut w = VdsWriter::container(
        Output::Stream(&mut bytes),
        VdsWriteOptions {
            compression: VdsCompression::None,
            ..VdsWriteOptions::default()
        },
    );
    w.begin(&rasterpack_common::ArrayInfo::of(&array)).unwrap();
    w.write_at(0, &array.data).unwrap();
    w.finish().unwrap();
    drop(w);

    let local_input = Input::from_bytes("<memory>", bytes.clone());
    let container = Container::open(&local_input, &Limits::default()).unwrap();
    let mut bricks = 0u64;
    let mut brick_bytes = 0u64;
    for key in container.list("").unwrap() {
        if key.rsplit_once('/').is_some_and(|(_, i)| i.parse::<u64>().is_ok()) {
            bricks += 1;
            brick_bytes += container.object_size(&key).unwrap().unwrap();
        }
    }
    assert_eq!(bricks, 8, "the file should hold 8 bricks");

    let store = Arc::new(Counting::default());
    let input = remote_named(&store, &bytes, "cube.vds");
    let remote = VdsDataset::from_input(input, Limits::default()).unwrap();
    let (_, metadata) = store.take();
    // Every brick met: the last axis cut short inside its last brick.
    let req = ArrayRequest::default().with_region(Region::from_start_size(&[0, 0, 0], &[64, 128, 200]).unwrap());
    let got = remote.read(&req).unwrap();
    let (requests, fetched) = store.take();
    let local = VdsDataset::from_input(local_input, Limits::default()).unwrap();
    assert_eq!(
        got.data,
        local.read(&req).unwrap().data,
        "the box read by ranges differs from the local read"
    );
    eprintln!(
        ".vds box: {bricks} bricks of {brick_bytes} bytes, fetched {fetched} bytes in {requests} requests \
         ({:.3}x; opening {metadata} bytes)",
        fetched as f64 / brick_bytes as f64
    );
    assert!(requests * 2 <= bricks, "{requests} requests for {bricks} bricks");
    assert!(
        fetched as f64 <= 1.2 * brick_bytes as f64 + 64.0 * 1024.0,
        "fetched {fetched} bytes for {brick_bytes} bytes of bricks"
    );
}

/// Values that compress a little (zstd keeps them near their size): a chunk or table of `n`,
/// 16 MiB here, several times the pieces a read asks for at once.
fn noisy(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (i as f32 * 0.01).sin() * 100.0 + (s % 1000) as f32 / 1000.0
        })
        .collect()
}

/// A read of one FOLD chunk's array (the `["CHUNK","ARRAY"]` form: that chunk only) checks
/// every stored byte of the chunk: announced, they come in a few requests, at most 1.2x the
/// chunk's bytes; the values are the local read's.
#[test]
fn fold_chunk_read_fetches_its_chunk_in_few_requests() {
    use rasterpack_fold::write::{FoldBuilder, FoldChunkOptions};
    use rasterpack_fold::FoldFile;

    let mut b = FoldBuilder::new();
    let arrays: Vec<NdArray> = (0..3)
        .map(|k| NdArray::from_vec(vec![2048, 2048], noisy(2048 * 2048, 7 + k)).unwrap())
        .collect();
    for (k, a) in arrays.iter().enumerate() {
        b.add_npz(&format!("chunk{k}"), &[("v", a)], FoldChunkOptions::default())
            .unwrap();
    }
    let bytes = b.to_bytes().unwrap();
    let local = FoldFile::from_bytes(bytes.clone()).unwrap();
    let e = local.chunks().iter().find(|e| e.name == "chunk1").unwrap().clone();
    let chunk_bytes = e.header_len + e.comp_len + e.ecc_len;

    let store = Arc::new(Counting::default());
    let input = remote_named(&store, &bytes, "a.fold");
    let file = FoldFile::from_input(input, Limits::default()).unwrap();
    let (open_requests, metadata) = store.take();
    let req = ArrayRequest::for_element(r#"["chunk1","v"]"#);
    let mut sink = MemorySink::new(Limits::default());
    file.stream(&req, &mut sink).unwrap();
    let (requests, fetched) = store.take();
    assert!(
        sink.into_array().unwrap().data == arrays[1].data,
        "the chunk read by ranges differs from what was written"
    );
    eprintln!(
        "FOLD ({} bytes): open {open_requests} requests / {metadata} bytes; chunk1 of {chunk_bytes} bytes: \
         fetched {fetched} bytes in {requests} requests ({:.3}x)",
        bytes.len(),
        fetched as f64 / chunk_bytes as f64
    );
    assert!(chunk_bytes > 12 << 20, "a chunk of {chunk_bytes} bytes");
    assert!(
        requests <= 3,
        "{requests} requests for one chunk of {chunk_bytes} bytes"
    );
    assert!(
        fetched as f64 <= 1.2 * chunk_bytes as f64,
        "fetched {fetched} bytes for a chunk of {chunk_bytes}"
    );
}

/// A whole read of one UDF table among several: its stored bytes are announced and come in a
/// few requests, at most 1.2x the table's bytes; the values are the local read's.
#[test]
fn udf_table_read_fetches_its_table_in_few_requests() {
    use rasterpack_udf::write::{TableSpec, UdfWriter};
    use rasterpack_udf::UdfFile;

    let mut w = UdfWriter::new("TEST").unwrap();
    let ds = w.add_dataset("ROOT").unwrap();
    w.set_root(ds);
    let tables: Vec<Vec<f32>> = (0..3).map(|k| noisy(2048 * 2048, 11 + k)).collect();
    for (k, t) in tables.iter().enumerate() {
        w.add(ds, TableSpec::array(&format!("t{k}"), &[2048, 2048], t)).unwrap();
    }
    let bytes = w.to_bytes().unwrap();
    let table_bytes = (2048 * 2048 * 4) as u64;

    let store = Arc::new(Counting::default());
    let input = remote_named(&store, &bytes, "a.udf");
    let file = UdfFile::from_input(input, Limits::default()).unwrap();
    let (open_requests, metadata) = store.take();
    let req = ArrayRequest::for_element("root/t1");
    let mut sink = MemorySink::new(Limits::default());
    file.stream(&req, &mut sink).unwrap();
    let (requests, fetched) = store.take();
    let got = sink.into_array().unwrap();
    let want: Vec<u8> = tables[1].iter().flat_map(|v| v.to_le_bytes()).collect();
    assert!(
        got.data == want,
        "the table read by ranges differs from what was written"
    );
    eprintln!(
        "UDF ({} bytes): open {open_requests} requests / {metadata} bytes; table t1 of {table_bytes} bytes: \
         fetched {fetched} bytes in {requests} requests ({:.3}x)",
        bytes.len(),
        fetched as f64 / table_bytes as f64
    );
    assert!(
        requests <= 3,
        "{requests} requests for one table of {table_bytes} bytes"
    );
    assert!(
        fetched as f64 <= 1.2 * table_bytes as f64,
        "fetched {fetched} bytes for a table of {table_bytes}"
    );
}
