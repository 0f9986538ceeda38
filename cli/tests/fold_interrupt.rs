//! A FOLD conversion that repairs a chunk with ECC is interruptible (issue 18): the interrupt
//! hook `convert_with` takes (the one Python's Ctrl-C and the CLI share) reaches the FOLD
//! verification and Reed-Solomon repair, which ask it every few MiB of their work; an `Err`
//! stops the conversion with that error and leaves no output and no temporary file.
//!
//! The checks count polls, not time: a repair that never asks the hook (the bug: FOLD -> FOLD
//! made no poll at all, a read to `.npy` only after the whole repair) fails them whatever the
//! machine's speed.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use rasterpack::args::ConvertArgs;
use rasterpack::common::ArrayInfo;
use rasterpack::common::Interrupt;
use rasterpack::convert::convert_with;
use rasterpack::{ArrayRequest, ArraySink, Error, NdArray, Result, WriteOptions};

mod support;

/// Payload of the chunk: 8 MiB of float32.
const VALUES: usize = 2 << 20;

/// A FOLD file whose one NPZ0 chunk (uncompressed, rs(32)) has three damaged bytes in three
/// blocks, all repairable; and the file before the damage.
fn damaged_fold(dir: &Path) -> (PathBuf, Vec<u8>) {
    let values: Vec<f32> = (0..VALUES).map(|i| (i as f32 * 0.001).sin()).collect();
    let mut array = NdArray::from_vec(vec![VALUES as u64], values).unwrap();
    array.name = Some("v".into());
    let good_path = dir.join("good.fold");
    let opts = WriteOptions {
        compress: Some("none+rs32".into()),
        ..WriteOptions::default()
    };
    rasterpack::save(&array, &good_path, &opts).unwrap();
    let good = std::fs::read(&good_path).unwrap();
    std::fs::remove_file(&good_path).unwrap();
    let mut bad = good.clone();
    // The payload fills most of the file (the parity is 32/223 of it, after it).
    for at in [bad.len() / 8, bad.len() / 3, bad.len() / 2] {
        bad[at] ^= 0x5A;
    }
    let path = dir.join("in.fold");
    std::fs::write(&path, &bad).unwrap();
    let report = rasterpack::validate(&path).unwrap();
    assert!(
        report.is_valid(false) && report.findings.has_code("fold.ecc.repaired"),
        "{:?}",
        report.findings
    );
    (path, good)
}

fn args(input: &Path, output: &Path) -> ConvertArgs {
    ConvertArgs {
        input: input.to_path_buf(),
        output: output.to_path_buf(),
        ..Default::default()
    }
}

/// A hook that counts its calls and, from call `stop_at` on, says "interrupted".
fn hook(stop_at: u64) -> (Interrupt, Arc<AtomicU64>) {
    let calls = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&calls);
    let hook: Interrupt = Arc::new(move || {
        let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
        if n >= stop_at {
            return Err(Error::usage("interrupted"));
        }
        Ok(())
    });
    (hook, calls)
}

/// Files in `dir` besides the input.
fn left_behind(dir: &Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != "in.fold")
        .collect()
}

#[test]
fn a_fold_repair_copy_polls_the_interrupt_and_stops_leaving_nothing() {
    let dir = support::scratch("fold-interrupt", "copy");
    let (input, good) = damaged_fold(&dir);
    let out = dir.join("out.fold");

    // Uninterrupted: the copy is the file before the damage, and the hook was asked all along
    // (8 MiB hashed, repaired, hashed again, its parity checked, 9 MiB copied: tens of polls).
    let (ask, calls) = hook(u64::MAX);
    convert_with(&args(&input, &out), false, ask).unwrap();
    assert!(std::fs::read(&out).unwrap() == good, "the repaired copy differs");
    let total = calls.load(Ordering::SeqCst);
    assert!(total >= 16, "the repair copy asked the interrupt hook {total} times");
    std::fs::remove_file(&out).unwrap();

    // Interrupted halfway (inside the repair work): the hook's error, nothing left, and not one
    // more poll after it.
    let stop_at = total / 2;
    let (ask, calls) = hook(stop_at);
    let err = convert_with(&args(&input, &out), false, ask).unwrap_err();
    assert_eq!(err.message, "interrupted", "{err}");
    assert_eq!(calls.load(Ordering::SeqCst), stop_at);
    assert!(left_behind(&dir).is_empty(), "left behind: {:?}", left_behind(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_fold_read_to_npy_stops_during_the_repair_leaving_nothing() {
    let dir = support::scratch("fold-interrupt", "npy");
    let (input, _) = damaged_fold(&dir);
    let out = dir.join("out.npy");
    let (ask, calls) = hook(3);
    let err = convert_with(&args(&input, &out), false, ask).unwrap_err();
    assert_eq!(err.message, "interrupted", "{err}");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert!(left_behind(&dir).is_empty(), "left behind: {:?}", left_behind(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Counts the polls of the hook it hands out, and whether the array had begun when each came.
struct Watching {
    hook: Interrupt,
    began: Arc<AtomicBool>,
    bytes: Vec<u8>,
}

impl ArraySink for Watching {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        self.began.store(true, Ordering::SeqCst);
        self.bytes = vec![0; info.byte_len()? as usize];
        Ok(())
    }
    fn random_access(&self) -> bool {
        true
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.bytes[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        Ok(())
    }
    fn interrupt(&self) -> Option<Interrupt> {
        Some(Arc::clone(&self.hook))
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

#[test]
fn a_fold_read_polls_the_sinks_interrupt_all_through_the_repair() {
    let dir = support::scratch("fold-interrupt", "read");
    let (input, _) = damaged_fold(&dir);
    let began = Arc::new(AtomicBool::new(false));
    let before_begin = Arc::new(AtomicU64::new(0));
    let (b, n) = (Arc::clone(&began), Arc::clone(&before_begin));
    let mut sink = Watching {
        hook: Arc::new(move || {
            if !b.load(Ordering::SeqCst) {
                n.fetch_add(1, Ordering::SeqCst);
            }
            Ok(())
        }),
        began,
        bytes: Vec::new(),
    };
    let file = rasterpack::open(&input).unwrap();
    file.stream(&ArrayRequest::default(), &mut sink).unwrap();
    // The repaired values: what was written.
    let want: Vec<u8> = (0..VALUES)
        .flat_map(|i| (i as f32 * 0.001).sin().to_le_bytes())
        .collect();
    assert!(sink.bytes == want, "the repaired read differs");
    // Before the array begins, the chunk is hashed, repaired and checked: 8 MiB several times
    // over, a poll every few MiB.
    let polls = before_begin.load(Ordering::SeqCst);
    assert!(polls >= 8, "{polls} polls before the array began");
    let _ = std::fs::remove_dir_all(&dir);
}
