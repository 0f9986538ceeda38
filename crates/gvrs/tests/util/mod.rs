//! What the GVRS tests share: reads by element index for tests that walk every element (the
//! public API names elements), and the corpus's sidecars.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rasterpack_common::{ArrayRequest, NdArray, Region, Result};
use rasterpack_gvrs::{GvrsCellValue, GvrsFile};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Element `e` of `f`, whole: its values, or with `codes` the stored codes.
pub fn read_el(f: &GvrsFile, e: usize, codes: bool) -> Result<NdArray> {
    f.read(&ArrayRequest::for_element(f.elements[e].name()).with_codes(codes))
}

/// A window of element `e`: `nrows x ncols` cells from (`row0`, `col0`).
pub fn read_window(
    f: &GvrsFile,
    e: usize,
    row0: u32,
    col0: u32,
    nrows: u32,
    ncols: u32,
    codes: bool,
) -> Result<NdArray> {
    let region = Region::from_start_size(&[row0 as u64, col0 as u64], &[nrows as u64, ncols as u64])?;
    f.read(
        &ArrayRequest::for_element(f.elements[e].name())
            .with_codes(codes)
            .with_region(region),
    )
}

/// One cell of element `e`.
pub fn cell(f: &GvrsFile, e: usize, row: u32, col: u32) -> Result<GvrsCellValue> {
    f.cell(&f.elements[e].name(), row, col)
}

/// Every `*.truth.json` sidecar in `dir` with the file it describes, sorted by path.
pub fn sidecars(dir: &Path) -> Vec<(PathBuf, Value)> {
    let mut out: Vec<(PathBuf, Value)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            let name = p.file_name()?.to_str()?.to_string();
            let file = name.strip_suffix(".truth.json")?;
            let v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            Some((dir.join(file), v))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(!out.is_empty(), "no sidecars in {}", dir.display());
    out
}

/// SHA-256 of `b` in lowercase hex, as the sidecars write it.
pub fn sha(b: &[u8]) -> String {
    Sha256::digest(b).iter().map(|x| format!("{x:02x}")).collect()
}
