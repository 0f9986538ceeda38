//! A read of a named array reads its chunk once, with or without `arrays()` first: the
//! chunk's checks (CRC32C, SHA-256, the archive's members) ride on the pass that decodes the
//! member into the sink, and the read fails (nothing returned) when any of them fails, with
//! the code `arrays()`/`validate` report for that chunk. After `arrays()` the stored bytes are
//! hashed as they are decoded: a chunk changed after `arrays()` fails the read with its
//! integrity code.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rasterpack_common::{ArrayInfo, ArrayRequest, ArraySink, DType, ErrorKind, Input, Limits, NdArray, Result};
use rasterpack_fold::{FoldBuilder, FoldChunkOptions, FoldCompression, FoldFile};

mod counted;
use counted::Counted;

/// 4 MiB of float32 (above the size where hashing moves to a second thread), in one NPZ0
/// chunk `c` as array `v`; the file, its source and the chunk's stored length.
fn sample(compression: FoldCompression) -> (NdArray, Arc<Counted>, FoldFile, u64) {
    let n = 1 << 20;
    let mut seed = 7u64;
    let data: Vec<u8> = (0..n)
        .flat_map(|i| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((i % 977) as f32 + (seed >> 44) as f32 * 1e-3).to_le_bytes()
        })
        .collect();
    let array = NdArray::new(DType::F32, vec![1024, 1024], data).unwrap();
    let mut b = FoldBuilder::new();
    b.add_npz("c", &[("v", &array)], FoldChunkOptions { compression, ecc: None })
        .unwrap();
    let bytes = b.to_bytes().unwrap();
    let source = Arc::new(Counted {
        bytes: Mutex::new(bytes),
        read: AtomicU64::new(0),
    });
    let file = FoldFile::from_input(Input::remote(source.clone()), Limits::default()).unwrap();
    let stored = file.chunks()[0].comp_len;
    (array, source, file, stored)
}

fn request() -> ArrayRequest {
    ArrayRequest::for_element("c/v")
}

#[test]
fn a_read_after_arrays_reads_the_chunk_once() {
    for compression in [FoldCompression::None, FoldCompression::Zstd(3)] {
        let (array, source, file, stored) = sample(compression);
        let listed = file.arrays().unwrap();
        assert_eq!(listed.len(), 1);
        // arrays() verified the chunk: it read every stored byte once.
        assert!(source.read.load(Ordering::Relaxed) >= stored, "{compression:?}");
        source.read.store(0, Ordering::Relaxed);
        let got = file.read(&request()).unwrap();
        assert_eq!(got.data, array.data, "{compression:?}");
        let read = source.read.load(Ordering::Relaxed);
        // One pass over the chunk (plus its header); two passes read it twice.
        assert!(
            read >= stored && read < stored + stored / 2,
            "{compression:?}: the read took {read} bytes of a {stored}-byte chunk"
        );
    }
}

#[test]
fn a_read_by_name_without_the_listing_reads_the_chunk_once() {
    for compression in [FoldCompression::None, FoldCompression::Zstd(3)] {
        // No arrays() first (what Python's `rasterpack.open(p)[name]` does now).
        let (array, source, file, stored) = sample(compression);
        let got = file.read(&request()).unwrap();
        assert_eq!(got.data, array.data, "{compression:?}");
        let read = source.read.load(Ordering::Relaxed);
        assert!(
            read >= stored && read < stored + stored / 2,
            "{compression:?}: the read took {read} bytes of a {stored}-byte chunk"
        );
        // The default array (no name) and a region read: one pass too, same values.
        source.read.store(0, Ordering::Relaxed);
        let got = file.read(&ArrayRequest::default()).unwrap();
        assert_eq!(got.data, array.data, "{compression:?}");
        let head = rasterpack_common::Region::from_start_size(&[3, 0], &[2, 1024]).unwrap();
        let part = file.read(&request().with_region(head)).unwrap();
        assert_eq!(part.data, array.data[3 * 4096..5 * 4096], "{compression:?}");
        let read = source.read.load(Ordering::Relaxed);
        assert!(
            read < 2 * stored + stored / 2,
            "{compression:?}: {read} bytes for two reads"
        );
    }
}

#[test]
fn array_info_reads_the_npy_header_not_the_chunk() {
    use rasterpack_common::ArrayFile;
    for compression in [FoldCompression::None, FoldCompression::Zstd(3)] {
        let (array, source, file, stored) = sample(compression);
        for element in [Some("c/v"), Some("[\"c\",\"v\"]"), None] {
            source.read.store(0, Ordering::Relaxed);
            let info = file.array_info(element).unwrap();
            assert_eq!(info.shape, array.shape, "{compression:?} {element:?}");
            assert_eq!(info.dtype, DType::F32);
            assert_eq!(info.name.as_deref(), Some(element.unwrap_or("c/v")));
            // At most one read piece (2 MiB) of the chunk, not a pass over it.
            let read = source.read.load(Ordering::Relaxed);
            assert!(
                read <= (2 << 20) + 4096 && read < stored,
                "{compression:?}: {read} of {stored}"
            );
        }
        // An array the chunk does not hold: the listing says so.
        let err = file.array_info(Some("c/w")).unwrap_err();
        assert_eq!(err.code, "request.no_such_element", "{err}");
        // Then the read by that name: one pass.
        source.read.store(0, Ordering::Relaxed);
        let (_, source, file, stored) = sample(compression);
        file.array_info(Some("c/v")).unwrap();
        file.read(&request()).unwrap();
        let read = source.read.load(Ordering::Relaxed);
        // The peek (one 2 MiB piece), then one pass (and the archive directory: ~128 KiB).
        assert!(
            read < stored + (2 << 20) + (256 << 10),
            "{compression:?}: {read} of {stored}"
        );
    }
}

#[test]
fn a_damaged_chunk_read_by_name_fails_as_the_listing_reports_it() {
    for compression in [FoldCompression::None, FoldCompression::Zstd(3)] {
        let (_, source, file, _) = sample(compression);
        damage(&source, &file);
        // What validate reports for the chunk (arrays() leaves it out for that reason).
        let report = file.validate();
        let first = report
            .findings
            .iter()
            .find(|f| f.severity == rasterpack_common::Severity::Error)
            .unwrap()
            .code
            .clone();
        assert_eq!(first, "fold.integrity.crc_mismatch", "{compression:?}");
        assert!(file.arrays().unwrap().is_empty(), "{compression:?}");
        // A fresh file, read by name with no listing: the same code, nothing returned.
        let fresh = FoldFile::from_input(Input::remote(source.clone()), Limits::default()).unwrap();
        let err = fresh.read(&request()).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid, "{compression:?}: {err}");
        assert_eq!(err.code, first, "{compression:?}: {err}");
        let mut mem = rasterpack_common::MemorySink::new(Limits::default());
        assert!(fresh.stream(&request(), &mut mem).is_err());
    }
}

#[test]
fn a_chunk_ecc_repairs_reads_its_repaired_values_by_name() {
    for compression in [FoldCompression::None, FoldCompression::Zstd(3)] {
        let (array, _, _, _) = sample(compression);
        let mut b = FoldBuilder::new();
        b.add_npz(
            "c",
            &[("v", &array)],
            FoldChunkOptions {
                compression,
                ecc: Some(32),
            },
        )
        .unwrap();
        let mut bytes = b.to_bytes().unwrap();
        let clean = FoldFile::from_bytes(bytes.clone()).unwrap();
        let e = clean.chunks()[0].clone();
        // A few bytes in the middle of the payload and one in the .npz header: repairable.
        for at in [e.offset + 32 + 40, e.offset + 32 + e.comp_len / 2] {
            bytes[at as usize] ^= 0x5a;
        }
        let file = FoldFile::from_bytes(bytes).unwrap();
        let got = file.read(&request()).unwrap();
        assert_eq!(got.shape, array.shape, "{compression:?}");
        assert_eq!(got.data, array.data, "{compression:?}");
    }
}

/// Flip one byte of the stored payload, in the middle of the chunk.
fn damage(source: &Counted, file: &FoldFile) {
    let e = &file.chunks()[0];
    let at = (e.offset + 32 + e.comp_len / 2) as usize;
    source.bytes.lock().unwrap()[at] ^= 0x10;
}

#[test]
fn a_chunk_changed_after_arrays_fails_the_read() {
    for compression in [FoldCompression::None, FoldCompression::Zstd(3)] {
        let (_, source, file, _) = sample(compression);
        file.arrays().unwrap();
        damage(&source, &file);
        let err = file.read(&request()).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid, "{compression:?}: {err}");
        assert_eq!(err.code, "fold.integrity.crc_mismatch", "{compression:?}: {err}");
        // A region read checks the whole chunk too.
        let head = rasterpack_common::Region::from_start_size(&[0, 0], &[2, 1024]).unwrap();
        let err = file.read(&request().with_region(head)).unwrap_err();
        assert_eq!(err.code, "fold.integrity.crc_mismatch", "{compression:?}: {err}");
    }
}

/// A sink that takes bytes only in order (a pipe).
#[derive(Default)]
struct Sequential {
    got: u64,
}

impl ArraySink for Sequential {
    fn begin(&mut self, _: &ArrayInfo) -> Result<()> {
        Ok(())
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        assert_eq!(offset, self.got);
        self.got += data.len() as u64;
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

#[test]
fn a_sequential_sink_gets_nothing_from_a_chunk_changed_after_arrays() {
    let (_, source, file, _) = sample(FoldCompression::Zstd(3));
    file.arrays().unwrap();
    damage(&source, &file);
    let mut sink = Sequential::default();
    let err = file.stream(&request(), &mut sink).unwrap_err();
    assert_eq!(err.code, "fold.integrity.crc_mismatch", "{err}");
    assert_eq!(sink.got, 0);
}

#[test]
fn files_of_very_many_members_are_verified_again_by_each_read() {
    // More members than a file keeps verdicts for after arrays() (65 536; an archive holds at
    // most 65 535, so two chunks): each read verifies its chunk first again, same values.
    let one = NdArray::new(DType::U8, vec![1], vec![7]).unwrap();
    let names: Vec<String> = (0..40_000).map(|i| format!("m{i}")).collect();
    let arrays: Vec<(&str, &NdArray)> = names.iter().map(|n| (n.as_str(), &one)).collect();
    let mut b = FoldBuilder::new();
    b.add_npz("c", &arrays, FoldChunkOptions::default()).unwrap();
    b.add_npz("d", &arrays, FoldChunkOptions::default()).unwrap();
    let source = Arc::new(Counted {
        bytes: Mutex::new(b.to_bytes().unwrap()),
        read: AtomicU64::new(0),
    });
    let file = FoldFile::from_input(Input::remote(source.clone()), Limits::default()).unwrap();
    let stored: u64 = file.chunks().iter().map(|e| e.comp_len).sum();
    assert_eq!(file.arrays().unwrap().len(), 80_000);
    source.read.store(0, Ordering::Relaxed);
    let got = file.read(&ArrayRequest::for_element("c/m39999")).unwrap();
    assert_eq!(got.data, vec![7]);
    // Both chunks verified again (a bare or CHUNK/ARRAY name may mean either), then c read.
    assert!(source.read.load(Ordering::Relaxed) >= stored);
}
