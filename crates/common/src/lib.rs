//! Shared plumbing for rasterpack's format crates, and the one interface over all of them:
//! bounds-checked endian readers, resource [`Limits`], the [`Error`] and [`Finding`] types,
//! [`Input`]s, in-memory arrays ([`NdArray`]) with typed access, arrays that stream into an
//! [`ArraySink`] a region at a time, `.npy` I/O, and the [`Format`] / [`ArrayFile`] traits every
//! format crate implements.
//!
//! Each format lives in its own crate (`rasterpack-volp`, `-gvrs`, `-udf`, `-fold`,
//! `-vds-meta`), with a reader type of the same shape; `.npy` lives here ([`NpyFile`],
//! [`NpyFormat`]) and shows that shape:
//!
//! ```
//! use rasterpack_common::{
//!     detect, npy, open_any, ArrayFile, ArrayRequest, ArraySink, DType, Format, Input, NdArray, NpyFile, NpyFormat,
//!     Output, Region,
//! };
//!
//! # fn main() -> rasterpack_common::Result<()> {
//! // A 3 x 4 float32 array, saved as numpy would.
//! let grid = NdArray::from_vec(vec![3, 4], (0..12).map(|v| v as f32 * 0.5).collect())?;
//! let mut bytes = Vec::new();
//! npy::write(&mut bytes, &grid).unwrap();
//! let path = std::env::temp_dir().join(format!("rasterpack-doc-{}.npy", std::process::id()));
//! std::fs::write(&path, &bytes).unwrap();
//!
//! // Open any file whose format is among those given; the format comes from the content.
//! let formats: &[&dyn Format] = &[&NpyFormat];
//! let file = open_any(&path, formats)?;
//! assert_eq!(file.format_name(), "npy");
//! let info = &file.arrays()?[0];
//! assert_eq!((info.dtype, info.shape.clone()), (DType::F32, vec![3, 4]));
//! assert!(file.validate().is_valid(true));
//!
//! // Typed access: the values as f32 (asking for another type is an `array.dtype_mismatch`).
//! let whole = file.read(&ArrayRequest::default())?;
//! assert_eq!(whole.as_slice::<f32>()?[5], 2.5);
//! assert!(whole.to_vec::<f64>().is_err());
//!
//! // A region, in the array's (C, `.npy`) axis order: rows 1..3, columns 2..4. Formats that
//! // stream read only the blocks it meets.
//! let region = Region::from_start_size(&[1, 2], &[2, 2])?;
//! let part = file.read(&ArrayRequest::default().with_region(&region))?;
//! assert_eq!(part.shape, vec![2, 2]);
//! assert_eq!(part.to_vec::<f32>()?, vec![3.0, 3.5, 5.0, 5.5]);
//!
//! // Stream a region into any sink without holding the array: here a `.npy` writer on a Vec
//! // (an `Output::File` would allow positioned writes instead).
//! let mut copy = Vec::new();
//! {
//!     let mut sink = npy::NpyWriter::new(Output::Stream(&mut copy));
//!     file.stream(&ArrayRequest::default().with_region(&region), &mut sink)?;
//!     sink.finish()?;
//! }
//! assert_eq!(NpyFile::from_bytes(copy)?.read(&ArrayRequest::default())?, part);
//!
//! // Detection alone, on bytes in memory: unknown content is a `format.unknown` error.
//! let input = Input::from_bytes("in memory", bytes);
//! assert_eq!(detect(&input, formats)?.name(), "npy");
//! let junk = Input::from_bytes("junk", b"not an array".to_vec());
//! assert_eq!(detect(&junk, formats).err().map(|e| e.code), Some("format.unknown".into()));
//! # std::fs::remove_file(&path).unwrap();
//! # Ok(())
//! # }
//! ```
//!
//! Every reader treats its input as hostile: lengths, counts and offsets are checked against
//! the input and the [`Limits`] before anything is allocated, and failures are [`Error`]s with
//! a stable code and the byte offset, never panics. With the `ndarray` feature,
//! `NdArray::to_ndarray` gives an `ndarray::ArrayD<T>` in the same axis order.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod any;
pub mod array;
pub mod blocks;
pub mod diff;
pub mod error;
pub mod finding;
pub mod format;
pub mod fortran;
pub mod json;
pub mod limits;
pub mod names;
pub mod npy;
#[doc(hidden)]
pub mod npy_cases;
pub mod npy_format;
pub mod output;
pub mod preview;
pub mod reader;
pub mod source;
pub mod stats;
pub mod stream;
#[doc(hidden)]
pub mod testkit;
pub mod wrapper;

pub use any::{detect, open_any, ArrayFile, DETECT_BYTES};
pub use array::{byte_len, f16_to_f64, DType, Element, NdArray};
pub use blocks::{for_each_block, Block, Blocks};
pub use error::{Error, ErrorKind, OsError, Result};
pub use finding::{Finding, Findings, Omitted, Severity, LISTED_PER_CODE};
pub use format::{
    read_by_streaming, ArrayRequest, Format, InspectOptions, Progress, Report, RequestFlag, Section, ValidateOptions,
    WriteOptions,
};
pub use fortran::{FortranReorder, FortranSink};
pub use limits::Limits;
pub use names::shown;
pub use npy_format::{NpyFile, NpyFormat};
pub use output::{write_file_atomically, Output};
pub use reader::{slice_at, ByteReader};
pub use source::{Input, ObjectSink, ObjectSource, RangeSource};
pub use stream::{
    stream_view, written_without_handle, ArrayInfo, ArraySink, BlockSink, HeldBlocks, Interrupt, MemorySink,
    ParallelBlocks, ParallelFile, ProgressSink, Region, RegionRuns, RegionSpec, View, ViewSink,
};
pub use wrapper::SinkWrapper;

/// The JSON crate of the public types that carry metadata ([`ArrayInfo::attrs`], report
/// sections), re-exported so a program uses the same version without depending on it.
pub use serde_json;

/// The `ndarray` crate of [`NdArray::to_ndarray`] and [`NdArray::from_ndarray`], re-exported so a
/// program uses the same version.
#[cfg(feature = "ndarray")]
pub use ndarray;

/// The README's example, compiled as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
