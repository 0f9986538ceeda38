//! Streaming reads (issue 12): windows read only the tiles they meet, every sink kind (in place
//! in memory, random-access, sequential) gets the same bytes as a slice of the whole element,
//! whatever the working set, bands that no stored tile meets arrive as fill runs, a sequential
//! sink whose band cannot fit is refused before anything is decoded, and elements stack into
//! VOLP levels band by band.

use rasterpack_common::{
    ArrayInfo, ArrayRequest, ArraySink, ErrorKind, Format, Input, Limits, NdArray, Region, Result,
};
use rasterpack_gvrs::write::{to_bytes, ElementRange, ElementSpec, ElementValues, GvrsSpec};
use rasterpack_gvrs::{GvrsFile, GvrsFormat};

const ROWS: u32 = 45;
const COLS: u32 = 61;
const TILE: (u32, u32) = (8, 10);

/// A test sink: collects what arrives (random-access or in order, never in place), counting
/// writes and fill runs.
struct TestSink {
    random: bool,
    data: Vec<u8>,
    filled: Vec<bool>,
    position: u64,
    began: bool,
    written_bytes: u64,
    fill_bytes: u64,
    largest_write: usize,
}

impl TestSink {
    fn new(random: bool) -> TestSink {
        TestSink {
            random,
            data: Vec::new(),
            filled: Vec::new(),
            position: 0,
            began: false,
            written_bytes: 0,
            fill_bytes: 0,
            largest_write: 0,
        }
    }

    fn put(&mut self, offset: u64, bytes: &[u8]) -> Result<()> {
        if !self.random {
            assert_eq!(offset, self.position, "a sequential sink got bytes out of order");
            self.position += bytes.len() as u64;
        }
        let at = offset as usize;
        self.data[at..at + bytes.len()].copy_from_slice(bytes);
        for f in &mut self.filled[at..at + bytes.len()] {
            assert!(!*f, "byte {at} delivered twice");
            *f = true;
        }
        Ok(())
    }
}

impl ArraySink for TestSink {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        let n = info.byte_len()? as usize;
        self.data = vec![0; n];
        self.filled = vec![false; n];
        self.began = true;
        Ok(())
    }
    fn random_access(&self) -> bool {
        self.random
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.written_bytes += data.len() as u64;
        self.largest_write = self.largest_write.max(data.len());
        self.put(offset, data)
    }
    fn fill_at(&mut self, offset: u64, len: u64, pattern: &[u8]) -> Result<()> {
        self.fill_bytes += len;
        let bytes: Vec<u8> = pattern.repeat(len as usize / pattern.len());
        self.put(offset, &bytes)
    }
    fn finish(&mut self) -> Result<()> {
        assert!(self.filled.iter().all(|&f| f), "bytes left undelivered");
        Ok(())
    }
}

fn int_values(fill: i32) -> Vec<i32> {
    (0..ROWS * COLS)
        .map(|i| {
            let (r, c) = (i / COLS, i % COLS);
            // Tiles of rows 16..32 x cols 20..40 hold only fill: not stored.
            if (16..32).contains(&r) && (20..40).contains(&c) {
                fill
            } else {
                (r as i32 * 1000 + c as i32) * if i % 7 == 0 { -1 } else { 1 }
            }
        })
        .collect()
}

/// Three elements: Integer "a" (with unstored tiles), Float "b", integer-coded float "c".
fn sample(checksums: bool) -> Vec<u8> {
    let ints = int_values(i32::MIN);
    let floats: Vec<f32> = (0..ROWS * COLS).map(|i| (i as f32).sin() * 100.0).collect();
    let codes: Vec<i32> = (0..ROWS * COLS).map(|i| (i as i32 % 500) - 250).collect();
    let mut spec = GvrsSpec::new(
        ROWS,
        COLS,
        TILE.0,
        TILE.1,
        ElementSpec::new("a", ElementRange::integer()),
    );
    spec.elements.push(ElementSpec::new("b", ElementRange::float()));
    spec.elements
        .push(ElementSpec::new("c", ElementRange::int_coded_float(10.0, 5.0)));
    spec.checksums = checksums;
    to_bytes(
        &spec,
        &[
            ElementValues::Int(&ints),
            ElementValues::Float(&floats),
            ElementValues::Codes(&codes),
        ],
    )
    .unwrap()
}

fn open(bytes: &[u8]) -> GvrsFile {
    GvrsFile::from_bytes(bytes.to_vec()).unwrap()
}

fn req(element: &str, codes: bool, region: Option<&Region>, working_set: u64) -> ArrayRequest {
    let mut r = ArrayRequest::for_element(element)
        .with_codes(codes)
        .with_limits(Limits {
            working_set,
            ..Limits::default()
        });
    if let Some(region) = region {
        r = r.with_region(region);
    }
    r
}

fn windows() -> Vec<Region> {
    [
        ([0, 0], [ROWS, COLS]),
        ([0, 0], [1, 1]),
        ([3, 7], [20, 30]),
        ([16, 20], [16, 20]),
        ([17, 25], [5, 5]),
        ([ROWS - 1, 0], [1, COLS]),
        ([0, COLS - 3], [ROWS, 3]),
        ([7, 9], [2, 2]),
    ]
    .iter()
    .map(|(s, n)| Region::from_start_size(&[s[0] as u64, s[1] as u64], &[n[0] as u64, n[1] as u64]).unwrap())
    .collect()
}

#[test]
fn every_sink_gets_the_window_of_the_whole_element() {
    let bytes = sample(true);
    let f = open(&bytes);
    for (element, codes) in [("a", false), ("b", false), ("c", false), ("c", true)] {
        let whole = f.read(&req(element, codes, None, 96 << 20)).unwrap();
        assert_eq!(whole.shape, vec![ROWS as u64, COLS as u64]);
        for window in windows() {
            let want = whole.region(&window).unwrap();
            // In memory (decoded in place).
            let got = f.read(&req(element, codes, Some(&window), 96 << 20)).unwrap();
            assert_eq!(got.data, want.data, "{element} {window:?} in memory");
            assert_eq!(got.name.as_deref(), Some(element));
            // Streamed, with working sets from tiny (stripes, one band per group) to roomy.
            for working_set in [4000, 9000, 40_000, 96 << 20] {
                for random in [true, false] {
                    let mut sink = TestSink::new(random);
                    match f.stream(&req(element, codes, Some(&window), working_set), &mut sink) {
                        Ok(()) => {
                            sink.finish().unwrap();
                            assert_eq!(
                                sink.data, want.data,
                                "{element} {window:?} ws {working_set} random {random}"
                            );
                        }
                        Err(e) => {
                            // Only a band that cannot fit, only for an in-order sink, only
                            // before anything was asked of the sink.
                            assert_eq!(e.code, "limit.working_set", "{e}");
                            assert!(!random, "random-access sinks get stripes: {e}");
                            assert!(!sink.began);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn small_working_sets_cut_stripes_for_random_access_and_refuse_in_order_sinks() {
    let f = open(&sample(true));
    // 4000 bytes: a tile decoder (1312 bytes: the largest tile record and its cells) and two
    // groups of less than one band of 8 rows x 61 columns of int32 (1952 bytes).
    let mut sequential = TestSink::new(false);
    let e = f.stream(&req("a", false, None, 4000), &mut sequential).unwrap_err();
    assert_eq!(
        (e.kind, e.code.as_ref()),
        (ErrorKind::LimitExceeded, "limit.working_set")
    );
    assert!(!sequential.began, "refused before begin");
    let mut random = TestSink::new(true);
    f.stream(&req("a", false, None, 4000), &mut random).unwrap();
    random.finish().unwrap();
    // Stripes: no single write spans a whole band.
    assert!(random.largest_write < 1952, "largest write {}", random.largest_write);
    assert_eq!(random.data, f.read_element("a").unwrap().data);
}

#[test]
fn a_damaged_tile_outside_the_window_does_not_stop_the_window() {
    let mut bytes = sample(true);
    let f = open(&bytes);
    // Damage a byte of the first element's block in tile (4, 5) (rows 32..40, cols 50..60).
    let off = f.tile_offset(4, 5).unwrap() as usize;
    bytes[off + 12] ^= 0x40;
    let f = open(&bytes);
    let inside = Region::from_start_size(&[30, 45], &[5, 10]).unwrap();
    let outside = Region::from_start_size(&[0, 0], &[32, 50]).unwrap();
    for random in [true, false] {
        let mut sink = TestSink::new(random);
        f.stream(&req("a", false, Some(&outside), 96 << 20), &mut sink).unwrap();
        let mut sink = TestSink::new(random);
        let e = f
            .stream(&req("a", false, Some(&inside), 96 << 20), &mut sink)
            .unwrap_err();
        assert_eq!(
            (e.kind, e.code.as_ref()),
            (ErrorKind::Invalid, "gvrs.tile.crc_mismatch")
        );
    }
    assert!(f.read(&req("a", false, Some(&outside), 96 << 20)).is_ok());
    assert_eq!(f.read_element("a").unwrap_err().code, "gvrs.tile.crc_mismatch");
    // The same through the format, as convert reads it.
    let input = Input::from_bytes("t.gvrs", bytes);
    assert!(GvrsFormat
        .read_array(&input, &req("a", false, Some(&outside), 96 << 20))
        .is_ok());
    assert_eq!(
        GvrsFormat
            .read_array(&input, &ArrayRequest::for_element("a"))
            .unwrap_err()
            .code,
        "gvrs.tile.crc_mismatch"
    );
}

#[test]
fn bands_without_stored_tiles_arrive_as_fill_runs() {
    // 64 x 64 int32 in 8 x 8 tiles, only tile (0, 0) stored.
    let mut v = vec![i32::MIN; 64 * 64];
    v[3] = 5;
    let spec = GvrsSpec::new(64, 64, 8, 8, ElementSpec::new("z", ElementRange::integer()));
    let bytes = to_bytes(&spec, &[ElementValues::Int(&v)]).unwrap();
    let f = open(&bytes);
    for random in [true, false] {
        let mut sink = TestSink::new(random);
        f.stream(&ArrayRequest::default(), &mut sink).unwrap();
        sink.finish().unwrap();
        // One band (8 rows x 64 columns) is decoded; the other 56 rows are one fill run.
        assert_eq!(sink.written_bytes, 8 * 64 * 4);
        assert_eq!(sink.fill_bytes, 56 * 64 * 4);
        let want: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(sink.data, want);
    }
    // A file with no tile at all: nothing but fill.
    let none = to_bytes(&spec, &[ElementValues::Int(&[i32::MIN; 64 * 64])]).unwrap();
    let mut sink = TestSink::new(false);
    open(&none).stream(&ArrayRequest::default(), &mut sink).unwrap();
    assert_eq!((sink.written_bytes, sink.fill_bytes), (0, 64 * 64 * 4));
}

#[test]
fn elements_stack_into_volp_levels_band_by_band() {
    let a: Vec<f32> = (0..ROWS * COLS).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..ROWS * COLS).map(|i| -(i as f32)).collect();
    let mut spec = GvrsSpec::new(ROWS, COLS, 8, 10, ElementSpec::new("p", ElementRange::float()));
    spec.elements.push(ElementSpec::new("q", ElementRange::float()));
    let f = open(&to_bytes(&spec, &[ElementValues::Float(&a), ElementValues::Float(&b)]).unwrap());
    let volp = |region: Option<Region>, working_set: u64| {
        let mut r = req("p", false, None, working_set);
        r.element = None;
        r.target = Some("volp");
        if let Some(region) = region {
            r = r.with_region(region);
        }
        r
    };
    let whole = f.read(&volp(None, 96 << 20)).unwrap();
    assert_eq!(whole.shape, vec![2, ROWS as u64, COLS as u64]);
    assert_eq!(whole.name.as_deref(), Some("p+q"));
    let levels = NdArray::from_vec(vec![2, ROWS as u64, COLS as u64], a.iter().chain(&b).copied().collect()).unwrap();
    assert_eq!(whole.data, levels.data);
    // A two-axis region is a window of every level; three axes also pick the levels.
    let window = Region::from_start_size(&[5, 6], &[20, 30]).unwrap();
    let mut sink = TestSink::new(false);
    f.stream(&volp(Some(window.clone()), 9000), &mut sink).unwrap();
    sink.finish().unwrap();
    let want = levels
        .region(&Region::from_start_size(&[0, 5, 6], &[2, 20, 30]).unwrap())
        .unwrap();
    assert_eq!(sink.data, want.data);
    let second = Region::from_start_size(&[1, 5, 6], &[1, 20, 30]).unwrap();
    let got = f.read(&volp(Some(second.clone()), 96 << 20)).unwrap();
    assert_eq!(got.data, levels.region(&second).unwrap().data);
}

#[test]
fn a_sink_that_refuses_at_begin_gets_no_decoding() {
    // VOLP's writer refuses at begin; nothing may be decoded (or read) first.
    struct Refuse;
    impl ArraySink for Refuse {
        fn begin(&mut self, _: &ArrayInfo) -> Result<()> {
            Err(rasterpack_common::Error::limit("limit.test", None, "refused"))
        }
        fn write_at(&mut self, _: u64, _: &[u8]) -> Result<()> {
            panic!("written after a refused begin")
        }
        fn finish(&mut self) -> Result<()> {
            Ok(())
        }
    }
    let mut bytes = sample(true);
    // Damage every tile: a decode before begin would fail with the tile's error instead.
    let f = open(&bytes);
    for (_, off) in f.stored_tiles() {
        bytes[off as usize + 12] ^= 1;
    }
    let e = open(&bytes)
        .stream(&ArrayRequest::for_element("a"), &mut Refuse)
        .unwrap_err();
    assert_eq!(e.code, "limit.test");
}

#[test]
fn requests_name_elements() {
    let f = open(&sample(false));
    let e = f.read(&ArrayRequest::default()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Usage);
    assert!(e.message.contains("a, b, c"), "{e}");
    let e = f.read_element("nope").unwrap_err();
    assert!(e.message.contains("nope") && e.message.contains("a, b, c"), "{e}");
    let e = f
        .read(&ArrayRequest::for_element("a").with_region(Region::from_start_size(&[40, 0], &[10, 1]).unwrap()))
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Usage, "window outside the grid");
    let infos = rasterpack_common::ArrayFile::arrays(&f).unwrap();
    let names: Vec<_> = infos
        .iter()
        .map(|i| (i.name.clone().unwrap(), i.dtype.name()))
        .collect();
    assert_eq!(
        names,
        [("a".into(), "int32"), ("b".into(), "float32"), ("c".into(), "float32")]
    );
    assert!(infos.iter().all(|i| i.shape == [ROWS as u64, COLS as u64]));
}
