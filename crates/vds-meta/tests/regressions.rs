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

/// The counters are process-wide: tests that measure run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn fuzz_regressions_stay_small() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
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
        let _ = VdsFormat.inspect(
            &input,
            &InspectOptions {
                all: true,
                ..Default::default()
            },
        );
        let _ = VdsFormat.read_array(&input, &Default::default());
        let peak = PEAK.load(Ordering::Relaxed) - base;
        assert!(peak < limit, "{}: peak {peak} bytes", p.display());
        n += 1;
    }
    assert!(n >= 1);
}

#[test]
fn huge_declared_chunk_count_allocates_nothing() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    use rasterpack_vds_meta::layout::VdsCompression;
    use rasterpack_vds_meta::testsupport::{sample_data, write_dir, Spec};
    let dir = std::env::temp_dir().join(format!("rp-vds-huge-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let spec = Spec {
        dims: vec![20, 6, 4],
        compression: VdsCompression::None,
        ..Default::default()
    };
    write_dir(&spec, &sample_data(&spec, 3), &dir).unwrap();
    let ls_path = dir.join("LayerStatus");
    let mut ls: serde_json::Value = serde_json::from_slice(&std::fs::read(&ls_path).unwrap()).unwrap();
    ls[0]["chunkCount"] = 15_000_000.into();
    ls[0].as_object_mut().unwrap().remove("pageDirectory");
    std::fs::write(&ls_path, ls.to_string()).unwrap();
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let r = VdsFormat.validate(&Input::open(&dir).unwrap(), &ValidateOptions::default());
    let peak = PEAK.load(Ordering::Relaxed) - base;
    assert!(r.findings.has_code("vds.layer.chunk_count"), "{:?}", r.findings);
    assert!(peak < 16 << 20, "peak {peak} bytes");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(format!("{}.objmeta.json", dir.display()));
}
