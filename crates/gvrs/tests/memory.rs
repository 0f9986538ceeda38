//! A counting global allocator shows that validation streams tiles (peak memory independent of
//! the grid size) and that cell access is bounded by the tile cache.

mod util;
use util::*;
mod craft;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use craft::{Craft, El};
use rasterpack_common::{Input, Limits};
use rasterpack_gvrs::GvrsFile;

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Tests in this binary measure one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Peak bytes allocated on top of what was live when `f` started.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

fn big_crafted_file() -> std::path::PathBuf {
    // 800 x 800 Integer cells in 20 x 20 tiles: 1600 tiles, a 2.6 MB file, 2.56 MB decoded.
    let mut c = Craft::new(800, 800, 20, 20, vec![El::int("v", -1)]);
    c.fill_tiles(|_, r, col| (r * 800 + col) as i64);
    let path = std::env::temp_dir().join(format!("rasterpack-gvrs-mem-{}.gvrs", std::process::id()));
    std::fs::write(&path, c.build()).unwrap();
    path
}

#[test]
fn validation_streams_tiles() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let path = big_crafted_file();
    let input = Input::open(&path).unwrap();
    // Warm rayon's pool outside the measurement.
    rayon::join(|| (), || ());
    let (report, peak) = peak_during(|| rasterpack_gvrs::validate::validate(&input, &Default::default()));
    assert!(report.is_valid(false), "{:#?}", report.findings);
    assert_eq!(report.summary["populated_tiles"], 1600);
    // The decoded grid is 2.56 MB; validation must stay far below it.
    assert!(peak < 600 << 10, "validation peaked at {peak} bytes");
    std::fs::remove_file(&path).ok();
}

/// An in-order sink that drops what it gets (a pipe, say).
struct Drain(u64);

impl rasterpack_common::ArraySink for Drain {
    fn begin(&mut self, _: &rasterpack_common::ArrayInfo) -> rasterpack_common::Result<()> {
        Ok(())
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> rasterpack_common::Result<()> {
        assert_eq!(offset, self.0, "in order");
        self.0 += data.len() as u64;
        Ok(())
    }
    fn fill_at(&mut self, offset: u64, len: u64, _: &[u8]) -> rasterpack_common::Result<()> {
        assert_eq!(offset, self.0, "in order");
        self.0 += len;
        Ok(())
    }
    fn finish(&mut self) -> rasterpack_common::Result<()> {
        Ok(())
    }
}

#[test]
fn streaming_reads_stay_within_the_working_set() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let path = big_crafted_file();
    let f = GvrsFile::open(&path).unwrap();
    rayon::join(|| (), || ());
    // 2.56 MB of cells through a 256 KiB working set.
    let req = rasterpack_common::ArrayRequest::for_element("v").with_limits(Limits {
        working_set: 256 << 10,
        ..Limits::default()
    });
    let mut sink = Drain(0);
    let ((), peak) = peak_during(|| f.stream(&req, &mut sink).unwrap());
    assert_eq!(sink.0, 800 * 800 * 4);
    assert!(peak < 300 << 10, "streaming peaked at {peak} bytes");
    std::fs::remove_file(&path).ok();
}

#[test]
fn validation_reports_progress() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let path = big_crafted_file();
    let input = Input::open(&path).unwrap();
    let calls = std::sync::Arc::new(Mutex::new(Vec::new()));
    let seen = std::sync::Arc::clone(&calls);
    let opts = rasterpack_common::ValidateOptions {
        progress: Some(rasterpack_common::Progress(std::sync::Arc::new(move |done, total| {
            seen.lock().unwrap().push((done, total))
        }))),
        ..Default::default()
    };
    assert!(rasterpack_gvrs::validate::validate(&input, &opts).is_valid(true));
    let calls = calls.lock().unwrap();
    // One call per batch of tiles (1600 tiles, 256 a batch) and a last one at the end.
    assert!(calls.len() >= 7, "{calls:?}");
    assert!(calls.windows(2).all(|w| w[0].0 <= w[1].0), "monotonic: {calls:?}");
    assert_eq!(*calls.last().unwrap(), (input.len(), input.len()));
    std::fs::remove_file(&path).ok();
}

#[test]
fn cell_access_is_bounded_by_the_cache() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let path = big_crafted_file();
    let f = GvrsFile::from_input(Input::open(&path).unwrap(), Limits::default()).unwrap();
    f.set_cache_bytes(16 << 10);
    let (sum, peak) = peak_during(|| {
        let mut sum = 0i64;
        for r in (0..800).step_by(7) {
            for c in (0..800).step_by(13) {
                if let rasterpack_gvrs::GvrsCellValue::Integer(v) = cell(&f, 0, r, c).unwrap() {
                    assert_eq!(v, (r * 800 + c) as i32);
                    sum += v as i64;
                }
            }
        }
        sum
    });
    assert!(sum > 0);
    assert!(f.cache_bytes() <= 16 << 10);
    assert!(peak < 64 << 10, "cell reads peaked at {peak} bytes");
    std::fs::remove_file(&path).ok();
}

#[test]
fn big_corpus_file_validates_in_bounded_memory() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(root) = rasterpack_common::testkit::corpus_dir("") else {
        return;
    };
    let input = Input::open(std::path::Path::new(&root).join("gvrs/big_terrain_4000.gvrs")).unwrap();
    rayon::join(|| (), || ());
    let (report, peak) = peak_during(|| rasterpack_gvrs::validate::validate(&input, &Default::default()));
    assert!(report.is_valid(false) && !report.unsupported, "{:#?}", report.findings);
    // 16M cells (64 MB decoded); the target is < 64 MiB peak for the whole process.
    assert!(peak < 8 << 20, "validating big_terrain_4000 peaked at {peak} bytes");
    eprintln!("big_terrain_4000 validation peak heap: {peak} bytes");
}
