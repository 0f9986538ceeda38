//! Inputs the fuzzer found (`tests/regressions/`, by bug class in the name), replayed forever
//! under a counting allocator: they must return normally and stay within a small peak.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use rasterpack_common::{Format, Input, InspectOptions, ValidateOptions};
use rasterpack_vds_meta::VdsFormat;

struct Counting;
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator and only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(l.size(), Ordering::Relaxed) + l.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        CURRENT.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

#[test]
fn fuzz_regressions_stay_small() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/regressions");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let bytes = std::fs::read(&p).unwrap();
        let limit = bytes.len() * 64 + (16 << 20);
        let base = CURRENT.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let input = Input::from_bytes("r.vds", bytes);
        let _ = VdsFormat.validate(&input, &ValidateOptions::default());
        let _ = VdsFormat.inspect(&input, &InspectOptions { all: true, ..Default::default() });
        let _ = VdsFormat.read_array(&input, &Default::default());
        let peak = PEAK.load(Ordering::Relaxed) - base;
        assert!(peak < limit, "{}: peak {peak} bytes", p.display());
        n += 1;
    }
    assert!(n >= 1);
}
