//! Peak heap use stays bounded: by the largest chunk for big files, and small for hostile
//! files declaring huge sizes (a counting global allocator, one test in this binary).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use rasterpack_common::{Format, Input, ValidateOptions};
use rasterpack_fold::{FoldBuilder, FoldChunkOptions, FoldCompression, FoldFormat};

struct Counting;
static CUR: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let n = CUR.fetch_add(l.size(), Ordering::SeqCst) + l.size();
        PEAK.fetch_max(n, Ordering::SeqCst);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        CUR.fetch_sub(l.size(), Ordering::SeqCst);
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn peak_during(f: impl FnOnce()) -> usize {
    let base = CUR.load(Ordering::SeqCst);
    PEAK.store(base, Ordering::SeqCst);
    f();
    PEAK.load(Ordering::SeqCst) - base
}

#[test]
fn memory_is_bounded() {
    const MIB: usize = 1 << 20;
    // Eight chunks of 2 MiB: validation holds about one chunk (stored + decoded), not the file.
    let path = std::env::temp_dir().join(format!("rp-fold-mem-{}.fold", std::process::id()));
    {
        let mut b = FoldBuilder::new();
        for i in 0..8 {
            let payload: Vec<u8> = (0..2 * MIB).map(|j| ((j * 31 + i) % 251) as u8).collect();
            let c = if i % 2 == 0 {
                FoldCompression::Zstd(1)
            } else {
                FoldCompression::None
            };
            b.add_chunk(
                &format!("c{i}"),
                "BLOB",
                &payload,
                FoldChunkOptions {
                    compression: c,
                    ecc: None,
                },
            )
            .unwrap();
        }
        std::fs::write(&path, b.to_bytes().unwrap()).unwrap();
    }
    let input = Input::open(&path).unwrap();
    let peak = peak_during(|| {
        let r = FoldFormat.validate(&input, &ValidateOptions::default());
        assert!(r.is_valid(true), "{:?}", r.findings);
    });
    std::fs::remove_file(&path).unwrap();
    assert!(peak < 6 * MIB, "validating 16 MiB of chunks peaked at {peak} bytes");

    // A 14-byte zstd frame header declaring 1 GiB of content, uncomp_len 1 GiB to match.
    let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd, 0xc0, 0x00];
    frame.extend_from_slice(&(1u64 << 30).to_le_bytes());
    let mut b = FoldBuilder::new();
    b.add_chunk(
        "x",
        "BLOB",
        &frame,
        FoldChunkOptions {
            compression: FoldCompression::None,
            ecc: None,
        },
    )
    .unwrap();
    let mut file = b.to_bytes().unwrap();
    file[28 + 7] = 1; // flags: zstd
    file[28 + 8..28 + 16].copy_from_slice(&(1u64 << 30).to_be_bytes()); // uncomp_len
    let input = Input::from_bytes("hostile", file);
    let peak = peak_during(|| {
        let _ = FoldFormat.validate(&input, &ValidateOptions::default());
    });
    assert!(peak < 4 * MIB, "hostile file peaked at {peak} bytes");
}
