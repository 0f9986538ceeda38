//! The listing of a FOLD file verifies every NPZ0 chunk, repairing damaged ones with their
//! ECC: long work that asks the caller's interrupt hook (Ctrl-C) whether to go on, as a read
//! does (`ArrayFile::arrays_interruptible`, `array_info_interruptible`; the Python package
//! passes its signal check there).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rasterpack_common::{ArrayFile, DType, Error, ErrorKind, Interrupt, NdArray};
use rasterpack_fold::{analyze, FoldAnalyzeOptions, FoldBuilder, FoldChunkOptions, FoldCompression, FoldFile};

/// One rs(32) NPZ0 chunk of ~1 MiB (a few thousand RS blocks) with damaged bytes in three of
/// its blocks, repairable.
fn repairable() -> Vec<u8> {
    let n = 1 << 18;
    let data: Vec<u8> = (0..n as u32)
        .flat_map(|i| (i as f32 * 0.001).sin().to_le_bytes())
        .collect();
    let a = NdArray::new(DType::F32, vec![n as u64], data).unwrap();
    let mut b = FoldBuilder::new();
    let opts = FoldChunkOptions {
        compression: FoldCompression::None,
        ecc: Some(32),
    };
    b.add_npz("c", &[("v", &a)], opts).unwrap();
    let mut bytes = b.to_bytes().unwrap();
    let info = analyze(
        &rasterpack_common::Input::from_bytes("f", bytes.clone()),
        &FoldAnalyzeOptions::default(),
    )
    .unwrap();
    let (start, len) = (
        info.chunks[0].entry.offset as usize + 32,
        info.chunks[0].entry.comp_len as usize,
    );
    for at in [len / 8, len / 3, len / 2] {
        bytes[start + at] ^= 0x5A;
    }
    bytes
}

/// A hook that counts its calls and stops the work at call `stop_at` (1-based; 0: never).
fn counting(stop_at: usize) -> (Arc<AtomicUsize>, Interrupt) {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let hook: Interrupt = Arc::new(move || {
        let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
        if n == stop_at {
            Err(Error::new(
                ErrorKind::Usage,
                "interrupted",
                None,
                "interrupted by the test",
            ))
        } else {
            Ok(())
        }
    });
    (calls, hook)
}

#[test]
fn the_listing_of_a_repairable_chunk_polls_the_hook_and_stops_on_its_error() {
    let bytes = repairable();
    // Untouched: the listing repairs the chunk and names its array, polling all along.
    let f = FoldFile::from_bytes(bytes.clone()).unwrap();
    let (calls, hook) = counting(0);
    let listed = f.arrays_interruptible(Some(&hook)).unwrap();
    assert_eq!(
        listed.iter().map(|a| a.name.clone()).collect::<Vec<_>>(),
        [Some("c/v".to_string())]
    );
    let polls = calls.load(Ordering::SeqCst);
    // Before each chunk, through the hashes and the repair's batches of blocks.
    assert!(polls >= 3, "{polls} polls");

    // Stopped at each of those polls in turn: the hook's error comes out, nothing is cached,
    // and a later listing (no hook) still lists the array.
    for stop in 1..=polls {
        let f = FoldFile::from_bytes(bytes.clone()).unwrap();
        let (_, hook) = counting(stop);
        let e = f.arrays_interruptible(Some(&hook)).unwrap_err();
        assert_eq!(e.code.as_ref(), "interrupted", "stop at poll {stop}: {e}");
        assert_eq!(f.arrays().unwrap().len(), 1);
    }

    // `array_info` of a chunk with ECC needs the listing: the same polls.
    let f = FoldFile::from_bytes(bytes).unwrap();
    let (_, hook) = counting(1);
    let e = f.array_info_interruptible(Some("c/v"), Some(&hook)).unwrap_err();
    assert_eq!(e.code.as_ref(), "interrupted", "{e}");
    assert_eq!(f.array_info(Some("c/v")).unwrap().shape, [1 << 18]);
}
