//! Decompression bombs: frames that claim or produce far more than the header's size are
//! refused quickly, and peak heap use stays small (a counting global allocator proves it).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Instant;

mod common;

use common::{decode, validate};
use rasterpack_common::Format;
use rasterpack_volp::{Input, VolpFormat};

struct Counting;
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Tests in this binary run one at a time so the peak belongs to one of them.
static SERIAL: Mutex<()> = Mutex::new(());

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(l.size(), Relaxed) + l.size();
        PEAK.fetch_max(now, Relaxed);
        System.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(l.size(), Relaxed) + l.size();
        PEAK.fetch_max(now, Relaxed);
        System.alloc_zeroed(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        CURRENT.fetch_sub(l.size(), Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if new > l.size() {
            let now = CURRENT.fetch_add(new - l.size(), Relaxed) + (new - l.size());
            PEAK.fetch_max(now, Relaxed);
        } else {
            CURRENT.fetch_sub(l.size() - new, Relaxed);
        }
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Peak heap growth (bytes) while running `f`.
fn peak_during(f: impl FnOnce()) -> usize {
    let base = CURRENT.load(Relaxed);
    PEAK.store(base, Relaxed);
    f();
    PEAK.load(Relaxed) - base
}

fn volp(header: &str, body: &[u8]) -> Vec<u8> {
    let mut out = b"VOLP".to_vec();
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(body);
    out
}

/// A zstd frame of `blocks` RLE blocks of 128 KiB each. With `fcs`, a single-segment frame
/// declaring that content size (8-byte field); without, a 128 KiB window and no size.
fn rle_frame(blocks: u32, fcs: Option<u64>) -> Vec<u8> {
    let mut f = vec![0x28, 0xB5, 0x2F, 0xFD];
    match fcs {
        Some(n) => {
            f.push(0b1110_0000); // FCS 8 bytes, single segment
            f.extend_from_slice(&n.to_le_bytes());
        }
        None => {
            f.push(0);
            f.push(7 << 3); // window 2^(10+7) = 128 KiB
        }
    }
    for i in 0..blocks {
        let last = (i + 1 == blocks) as u32;
        let h = last | (1 << 1) | ((128 << 10) << 3);
        f.extend_from_slice(&h.to_le_bytes()[..3]);
        f.push(0x41);
    }
    f
}

const H16: &str = r#"{"version":1,"shape":[1,1,4],"dtype":"float32","compression":"zstd","scale":1.0,"offset":0.0}"#;

#[test]
fn frame_claiming_4_gib_is_refused_without_allocating_it() {
    let _g = SERIAL.lock().unwrap();
    // 32768 blocks * 128 KiB = 4 GiB, declared in the frame header.
    let file = volp(H16, &rle_frame(32768, Some(4 << 30)));
    assert!(file.len() < 200_000);
    let t = Instant::now();
    let peak = peak_during(|| {
        let e = decode(&file).unwrap_err();
        assert_eq!(e.code, "volp.body.size_mismatch", "{e}");
        assert!(validate(&file).has_code("volp.body.size_mismatch"));
    });
    assert!(t.elapsed().as_secs_f64() < 2.0, "took {:?}", t.elapsed());
    assert!(peak < 4 << 20, "peak heap {peak} bytes");
}

#[test]
fn frame_without_size_that_expands_to_4_gib_stops_at_the_expected_size() {
    let _g = SERIAL.lock().unwrap();
    let file = volp(H16, &rle_frame(32768, None));
    let t = Instant::now();
    let peak = peak_during(|| {
        let e = decode(&file).unwrap_err();
        assert_eq!(e.code, "volp.body.size_mismatch", "{e}");
        let input = Input::from_bytes("bomb", file.clone());
        assert!(!VolpFormat.validate(&input, &Default::default()).is_valid(false));
    });
    assert!(t.elapsed().as_secs_f64() < 2.0, "took {:?}", t.elapsed());
    assert!(peak < 4 << 20, "peak heap {peak} bytes");
}

#[test]
fn tiny_body_declaring_256_mib_allocates_nothing_large() {
    let _g = SERIAL.lock().unwrap();
    // The header asks for exactly the 256 MiB limit; the body can produce 128 KiB at most.
    let h = r#"{"shape":[256,1024,1024],"dtype":"uint8","compression":"zstd"}"#;
    for body in [
        rle_frame(1, None),
        rle_frame(1, Some(128 << 10)),
        zstd::bulk::compress(&[1, 2, 3], 3).unwrap(),
    ] {
        let file = volp(h, &body);
        let peak = peak_during(|| {
            let e = decode(&file).unwrap_err();
            assert_eq!(e.code, "volp.body.size_mismatch", "{e}");
            let input = Input::from_bytes("small", file.clone());
            assert!(!VolpFormat.validate(&input, &Default::default()).is_valid(false));
            assert!(VolpFormat
                .inspect(&input, &Default::default())
                .unwrap()
                .findings
                .has_errors());
        });
        assert!(peak < 4 << 20, "peak heap {peak} bytes");
    }
}

#[test]
fn many_small_frames_summing_past_the_size_are_refused() {
    let _g = SERIAL.lock().unwrap();
    let h = r#"{"shape":[1,1,262144],"dtype":"uint8","compression":"zstd"}"#;
    // 2 frames of 128 KiB fill it exactly; a third pushes past.
    let mut body = rle_frame(1, None);
    body.extend(rle_frame(1, Some(128 << 10)));
    let ok = volp(h, &body);
    assert_eq!(decode(&ok).unwrap().data.len(), 262144);
    body.extend(rle_frame(1, None));
    let peak = peak_during(|| {
        assert_eq!(decode(&volp(h, &body)).unwrap_err().code, "volp.body.size_mismatch");
    });
    assert!(peak < (262144 + (4 << 20)), "peak heap {peak} bytes");
}
