//! Reads by element index for tests that walk every element (the public API names elements).
#![allow(dead_code)]

use rasterpack_common::{ArrayRequest, NdArray, Region, Result};
use rasterpack_gvrs::{GvrsCellValue, GvrsFile};

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
