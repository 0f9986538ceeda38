//! `convert` of a multi-group VDS to a local `.npy`, where the decoding threads write their own
//! groups into the temporary file (issue 21, the Zip path): the values equal the reader's, a
//! `--region` box too, the interrupt is still polled between groups, and an interrupted
//! conversion leaves neither the output nor its temporary file.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rasterpack::args::ConvertArgs;
use rasterpack::convert::convert_with;
use rasterpack_common::{ArrayRequest, Error, Region};
use rasterpack_vds_meta::layout::VdsCompression;
use rasterpack_vds_meta::testsupport::{sample_data, write_container, Spec};
use rasterpack_vds_meta::VdsDataset;

mod support;

/// A Zip float32 VDS of several groups, with unwritten bricks (groups of one fill value).
fn dataset(dir: &Path) -> PathBuf {
    let spec = Spec {
        dims: vec![150, 130, 140],
        compression: VdsCompression::Zip,
        unwritten: vec![1, 5],
        ..Default::default()
    };
    let path = dir.join("in.vds");
    std::fs::write(&path, write_container(&spec, &sample_data(&spec, 21))).unwrap();
    path
}

fn args(input: &Path, output: &Path) -> ConvertArgs {
    ConvertArgs {
        input: input.to_path_buf(),
        output: output.to_path_buf(),
        ..Default::default()
    }
}

/// The `.npy` file's data (its last `len` bytes; the header is what precedes them).
fn npy_data(path: &Path, len: usize) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap();
    assert!(bytes.len() >= len && bytes.len() - len <= 4096, "{} bytes", bytes.len());
    bytes[bytes.len() - len..].to_vec()
}

#[test]
fn whole_and_region_reads_are_exact_and_polled_between_groups() {
    let dir = support::scratch("parallel-out", "exact");
    let vds = dataset(&dir);
    let ds = VdsDataset::open(&vds).unwrap();
    let whole = ds.read(&ArrayRequest::default()).unwrap();

    let polls = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&polls);
    let count = Arc::new(move || {
        counter.fetch_add(1, Ordering::Relaxed);
        Ok(())
    });
    let out = dir.join("whole.npy");
    convert_with(&args(&vds, &out), false, count).unwrap();
    assert!(npy_data(&out, whole.data.len()) == whole.data, "whole read differs");
    // begin, finish and one poll per group at least (there are several groups).
    assert!(
        polls.load(Ordering::Relaxed) >= 4,
        "{} polls",
        polls.load(Ordering::Relaxed)
    );

    let out = dir.join("region.npy");
    let mut a = args(&vds, &out);
    a.region = Some("3:97,1:119,5:133".into());
    convert_with(&a, false, Arc::new(|| Ok(()))).unwrap();
    let want = whole
        .region(&Region {
            ranges: vec![3..97, 1..119, 5..133],
        })
        .unwrap();
    assert!(npy_data(&out, want.data.len()) == want.data, "--region differs");

    // A stepped view must see the bytes: it still reads exactly.
    let out = dir.join("steps.npy");
    let mut a = args(&vds, &out);
    a.region = Some("::2,:,1::3".into());
    convert_with(&a, false, Arc::new(|| Ok(()))).unwrap();
    let mut want = Vec::new();
    for z in (0..140).step_by(2) {
        for y in 0..130 {
            for x in (1..150).step_by(3) {
                let at = ((z * 130 + y) * 150 + x) * 4;
                want.extend_from_slice(&whole.data[at..at + 4]);
            }
        }
    }
    assert!(npy_data(&out, want.len()) == want, "stepped --region differs");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_interrupt_between_groups_leaves_nothing() {
    let dir = support::scratch("parallel-out", "interrupt");
    let vds = dataset(&dir);
    let polls = AtomicU64::new(0);
    // begin passes, then the first group reported stops the conversion.
    let stop = Arc::new(move || match polls.fetch_add(1, Ordering::Relaxed) {
        0 => Ok(()),
        _ => Err(Error::usage("interrupted")),
    });
    let out = dir.join("o.npy");
    let err = convert_with(&args(&vds, &out), false, stop).unwrap_err();
    assert!(err.message.contains("interrupted"), "{err}");
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != "in.vds")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
