//! VOLP (Volume Pack): a reader, validator and writer for volumes stored as a `VOLP` magic, a
//! u32 header length, a JSON header and a zstd body holding one `[levels, lat, lon]` tensor in C
//! order (little-endian `uint8`, `int16`, `int32`, `float32` or `float64`), with
//! `physical = stored * scale + offset`.
//!
//! The header must be one UTF-8 JSON object of at most 1 MiB with `shape` and `dtype`; the body
//! one or more zstd frames decoding to exactly `product(shape) * size(dtype)` bytes, at most
//! 256 MiB. Where the specification leaves a case open (missing keys, strings for numbers, case
//! of `zstd`, limits), rasterpack follows one documented decision per case; the repository's
//! `docs/formats/volp.md` lists them with every finding code.
//!
//! # Reading, validating, writing
//!
//! [`VolpFile`] opens a file ([`VolpFile::open`] for a path, [`VolpFile::from_bytes`],
//! [`VolpFile::from_input`]) by reading its prefix and header only; the body is decoded as it
//! streams when the array is read, so memory stays at a small working set. Reads go through
//! the [`ArrayFile`] interface shared by every rasterpack format: the whole volume or a
//! [`Region`] of it (a range of levels, a window of rows and columns), stored values or float64
//! physical values, into an [`NdArray`] with typed access (or into any [`ArraySink`]).
//! [`VolpFile::validate`] checks every rule and returns all findings. [`VolpWriter`] writes
//! VOLP files, in memory or as the values arrive.
//!
//! ```
//! use rasterpack_volp::{ArrayFile, ArrayRequest, NdArray, Region, VolpFile, VolpWriteOptions, VolpWriter};
//!
//! # fn main() -> rasterpack_volp::Result<()> {
//! // Write: a 2-level, 3x4 int16 volume with scale and offset, in memory.
//! let values: Vec<i16> = (0..24).collect();
//! let volume = NdArray::from_vec(vec![2, 3, 4], values)?;
//! let options = VolpWriteOptions {
//!     scale: Some(0.5),
//!     offset: Some(100.0),
//!     ..VolpWriteOptions::default()
//! };
//! let bytes = VolpWriter::encode(&volume, &options)?;
//!
//! // Open (from memory here; `VolpFile::open("cube.volp")` for a path) and validate.
//! let file = VolpFile::from_bytes(bytes)?;
//! assert_eq!(file.header().shape, [2, 3, 4]);
//! assert!(file.validate().is_valid(true));
//!
//! // Read the whole volume, typed.
//! let stored = file.read(&ArrayRequest::default())?;
//! assert_eq!(stored.as_slice::<i16>()?[..4], [0, 1, 2, 3]);
//!
//! // Read level 1, rows 1..3, columns 0..2 as physical values (stored * 0.5 + 100).
//! let region = Region::from_start_size(&[1, 1, 0], &[1, 2, 2])?;
//! let part = file.read(&ArrayRequest::default().with_region(region).with_physical(true))?;
//! assert_eq!(part.shape, [1, 2, 2]);
//! assert_eq!(part.to_vec::<f64>()?, [108.0, 108.5, 110.0, 110.5]);
//! # Ok(())
//! # }
//! ```
//!
//! The same file through the format-independent API: `rasterpack_common::open_any(path,
//! &[&VolpFormat])` returns it as a `Box<dyn ArrayFile>`.
//!
//! # Layers
//!
//! [`raw`] (the on-disk layout) -> [`parse`] (the prefix and header JSON, read with positioned
//! reads) and [`header_rules`] (every header rule, all findings) -> the body decoder (zstd frames
//! walked and decoded as they stream into a reused window, every body check on the way) ->
//! [`validate`] (findings and reports) -> [`model`] ([`VolpHeader`], statistics) and
//! [`VolpFile`] -> [`write`](mod@write) ([`VolpWriter`]). [`VolpFormat`] is the entry point the
//! CLI uses.
//!
//! Untrusted input never panics; sizes from the file are checked against the input's length
//! and the limits before anything is allocated; no frame is decoded past the size the header
//! declares.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod header_rules;
pub mod json;
pub mod model;
pub mod parse;
pub mod raw;
#[doc(hidden)]
pub mod samples;
pub mod validate;
pub mod write;

mod body;
mod file;
mod format;
mod frame;
mod read;

pub use file::VolpFile;
pub use format::VolpFormat;
pub use model::{VolpHeader, VolpMetadata, VolpStats, VOLP_DTYPES};
pub use rasterpack_common::{
    ArrayFile, ArrayInfo, ArrayRequest, ArraySink, DType, Element, Error, ErrorKind, Finding, Findings, Input, Limits,
    NdArray, Output, Region, Report, Result, Severity,
};
pub use write::{VolpWriteOptions, VolpWriter, DEFAULT_LEVEL};

/// The README's examples, compiled as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
