//! `stats` of a FOLD array decodes its chunk once: the figures ride on the pass that checks
//! the chunk (CRC32C, SHA-256, the archive's members), held aside until those checks pass, and
//! that pass also lists the file (the only NPZ0 chunk verified), so `arrays()` after it reads
//! nothing. A chunk that needs an ECC repair gives the figures of the repaired bytes; one that
//! cannot be repaired gives an error, never figures.
//!
//! "Once" is seen from outside: the file is a [`RangeSource`] that counts the bytes read from
//! it, as in `read_once.rs`. The figures are compared with those of the same array fed to the
//! stats sink in C order from memory: the same bits, and the same as numpy's (cli/tests/stats.rs).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rasterpack_common::stats::{self, Stats};
use rasterpack_common::{ArrayInfo, ArrayRequest, DType, ErrorKind, Input, Limits, NdArray};
use rasterpack_fold::{FoldBuilder, FoldChunkOptions, FoldCompression, FoldFile};

mod counted;
use counted::Counted;

/// `n` float32 values with some NaN and infinities, as a `[n / 512, 512]` array.
fn values(n: usize) -> NdArray {
    let mut seed = 11u64;
    let data: Vec<u8> = (0..n)
        .flat_map(|i| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let v = match i % 5003 {
                17 => f32::NAN,
                29 => f32::INFINITY,
                _ => (i % 977) as f32 - 300.0 + (seed >> 44) as f32 * 1e-3,
            };
            v.to_le_bytes()
        })
        .collect();
    NdArray::new(DType::F32, vec![n as u64 / 512, 512], data).unwrap()
}

fn fold_bytes(array: &NdArray, compression: FoldCompression, ecc: Option<u8>) -> Vec<u8> {
    let mut b = FoldBuilder::new();
    b.add_npz("c", &[("v", array)], FoldChunkOptions { compression, ecc })
        .unwrap();
    b.to_bytes().unwrap()
}

fn counted(bytes: Vec<u8>) -> (Arc<Counted>, FoldFile) {
    let source = Arc::new(Counted {
        bytes: Mutex::new(bytes),
        read: AtomicU64::new(0),
    });
    let file = FoldFile::from_input(Input::remote(source.clone()), Limits::default()).unwrap();
    (source, file)
}

/// The figures of `file`'s array `c/v`, as `rasterpack stats` computes them.
fn stats_of(file: &FoldFile, bins: Option<u64>) -> rasterpack_common::Result<Stats> {
    let req = ArrayRequest::for_element("c/v");
    stats::compute(|sink| file.stream(&req, sink), bins)
}

/// The figures of `array` fed to the stats sink in C order from memory.
fn stats_in_memory(array: &NdArray, bins: Option<u64>) -> Stats {
    stats::compute(
        |sink| {
            sink.begin(&ArrayInfo::new(array.dtype, array.shape.clone()))?;
            sink.write_at(0, &array.data)
        },
        bins,
    )
    .unwrap()
}

#[test]
fn stats_read_the_chunk_once_and_list_the_file_in_the_same_pass() {
    // 4 MiB: above the size where the read hashes on a second thread.
    let array = values(1 << 20);
    let want = stats_in_memory(&array, None);
    let want_hist = stats_in_memory(&array, Some(16));
    assert!(want.nan_count > 0 && want.inf_count > 0 && want.valid_count > 0);
    for compression in [FoldCompression::None, FoldCompression::Zstd(3)] {
        let bytes = fold_bytes(&array, compression, None);
        let (source, file) = counted(bytes.clone());
        let stored = file.chunks()[0].comp_len;
        let got = stats_of(&file, None).unwrap();
        assert_eq!(got, want, "{compression:?}");
        let read = source.read.load(Ordering::Relaxed);
        assert!(
            read >= stored && read < stored + stored / 2,
            "{compression:?}: stats read {read} bytes of a {stored}-byte chunk"
        );
        // The pass verified the file's only NPZ0 chunk: the listing comes without a read.
        source.read.store(0, Ordering::Relaxed);
        let listed = file.arrays().unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].name.as_deref(), Some("c/v"));
        assert_eq!(
            source.read.load(Ordering::Relaxed),
            0,
            "{compression:?}: the listing read again"
        );

        // With the histogram: two passes (the bins need the range), each one read.
        let (source, file) = counted(bytes.clone());
        assert_eq!(stats_of(&file, Some(16)).unwrap(), want_hist, "{compression:?}");
        let read = source.read.load(Ordering::Relaxed);
        assert!(
            read < 2 * stored + stored / 2,
            "{compression:?}: stats --histogram read {read} bytes of a {stored}-byte chunk"
        );

        // After the listing (what `arrays()` first does): one pass, the stored bytes hashed
        // again as they are decoded.
        let (source, file) = counted(bytes);
        file.arrays().unwrap();
        source.read.store(0, Ordering::Relaxed);
        assert_eq!(stats_of(&file, None).unwrap(), want, "{compression:?}");
        let read = source.read.load(Ordering::Relaxed);
        assert!(
            read >= stored && read < stored + stored / 2,
            "{compression:?}: stats after the listing read {read} bytes of a {stored}-byte chunk"
        );
    }
}

/// `bad` with `count` bytes of the payload block `block` (of `k` bytes) changed.
fn damage(bad: &mut [u8], block: usize, k: usize, count: usize) {
    let start = 28 + 32 + block * k;
    for i in 0..count {
        bad[start + i * 7] ^= 0x5a;
    }
}

#[test]
fn a_repaired_chunk_gives_the_figures_of_the_repaired_bytes() {
    let array = values(1 << 18);
    let want = stats_in_memory(&array, None);
    let want_hist = stats_in_memory(&array, Some(8));
    for compression in [FoldCompression::None, FoldCompression::Zstd(3)] {
        let good = fold_bytes(&array, compression, Some(32));
        // rs(32): 223 data bytes per block, up to 16 wrong bytes each repaired. Damage the
        // first block, one in the middle and the last full one.
        let blocks = FoldFile::from_bytes(good.clone()).unwrap().chunks()[0].comp_len as usize / 223;
        let mut bad = good.clone();
        for block in [0, blocks / 2, blocks - 1] {
            damage(&mut bad, block, 223, 12);
        }
        let file = FoldFile::from_bytes(bad.clone()).unwrap();
        let report = file.validate();
        assert!(
            report.findings.has_code("fold.ecc.repaired"),
            "{compression:?}: {:?}",
            report.findings
        );
        assert_eq!(stats_of(&file, None).unwrap(), want, "{compression:?}");
        let file = FoldFile::from_bytes(bad.clone()).unwrap();
        assert_eq!(stats_of(&file, Some(8)).unwrap(), want_hist, "{compression:?}");
        // After the listing too.
        let file = FoldFile::from_bytes(bad).unwrap();
        file.arrays().unwrap();
        assert_eq!(stats_of(&file, None).unwrap(), want, "{compression:?}");

        // 20 wrong bytes in one block: past what rs(32) repairs, so no figures at all.
        let mut worse = good.clone();
        damage(&mut worse, blocks / 2, 223, 20);
        let file = FoldFile::from_bytes(worse).unwrap();
        let err = stats_of(&file, None).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid, "{compression:?}: {err}");
        // The undamaged file: the same figures, in one pass.
        let file = FoldFile::from_bytes(good).unwrap();
        assert_eq!(stats_of(&file, None).unwrap(), want, "{compression:?}");
    }
}
