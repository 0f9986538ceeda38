//! Every format behind the CLI, on damaged copies of every sample in `testdata/`: truncated at
//! every offset and with every byte flipped, `inspect`, `validate` and `read_array` must return
//! (a report or an error), never panic. A counting allocator checks that no damaged file makes
//! rasterpack allocate more than a small multiple of what the intact file needs.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use rasterpack_common::{ArrayRequest, Input, InspectOptions, Limits, ValidateOptions};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            let now = CURRENT.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size - layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        } else {
            CURRENT.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn samples() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("testdata");
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if !matches!(p.extension().and_then(|e| e.to_str()), Some("md" | "json" | "txt")) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Limits tight enough that honouring them is visible in a test, loose enough for the samples.
fn test_limits() -> Limits {
    Limits {
        max_alloc: 32 << 20,
        max_array_bytes: 32 << 20,
        ..Limits::default()
    }
}

/// Run everything a user can ask of one input; returns the peak heap growth in bytes.
fn exercise(bytes: Vec<u8>) -> usize {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let input = Input::from_bytes("damaged", bytes);
    let head = input.head(64);
    let limits = test_limits();
    for f in rasterpack::formats().iter().filter(|f| f.detect(&head)) {
        let _ = f.inspect(&input, &InspectOptions { all: false, limits });
        let _ = f.validate(
            &input,
            &ValidateOptions {
                limits,
                ..Default::default()
            },
        );
        // Whole arrays may legitimately be large (a sparse volume); the limits bound them.
        let _ = f.read_array(
            &input,
            &ArrayRequest {
                limits,
                ..ArrayRequest::default()
            },
        );
    }
    PEAK.load(Ordering::Relaxed).saturating_sub(base)
}

#[test]
fn damaged_samples_never_panic_and_stay_bounded() {
    let files = samples();
    assert!(
        files.len() >= 8,
        "expected the shipped samples in testdata/, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for path in files {
        let good = std::fs::read(&path).unwrap();
        let intact_peak = exercise(good.clone());
        // A damaged file may need what the intact one needs, plus what the limits allow.
        let bound = intact_peak * 4 + (40 << 20);
        // Every offset for small files; an even spread of 3000 offsets for larger ones.
        let step = (good.len() / 3000).max(1);
        let mut check = |what: String, bytes: Vec<u8>| {
            let peak = exercise(bytes);
            if peak > bound {
                failures.push(format!(
                    "{} {what}: {peak} bytes at peak (intact: {intact_peak})",
                    path.display()
                ));
            }
        };
        for cut in (0..good.len()).step_by(step) {
            check(format!("truncated to {cut}"), good[..cut].to_vec());
        }
        for (i, at) in (0..good.len()).step_by(step).enumerate() {
            let mut bad = good.clone();
            bad[at] ^= 1 << (i % 8);
            check(format!("bit {} flipped at {at}", i % 8), bad.clone());
            bad[at] = good[at] ^ 0xFF;
            check(format!("byte inverted at {at}"), bad);
        }
    }
    assert!(
        failures.is_empty(),
        "damaged copies allocated too much:\n{}",
        failures.join("\n")
    );
}
