//! Shared plumbing for rasterpack's format crates: bounds-checked endian readers, resource
//! limits, the error and finding types, inputs, in-memory arrays, `.npy` I/O and the
//! [`Format`] trait the CLI drives.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod any;
pub mod array;
pub mod error;
pub mod finding;
pub mod format;
pub mod json;
pub mod limits;
pub mod npy;
pub mod npy_format;
pub mod output;
pub mod reader;
pub mod source;
pub mod stream;
#[doc(hidden)]
pub mod testkit;

pub use any::{detect, open_any, ArrayFile};
pub use array::{byte_len, DType, Element, NdArray};
pub use error::{Error, ErrorKind, Result};
pub use finding::{Finding, Findings, Severity};
pub use format::{
    read_by_streaming, ArrayRequest, Format, InspectOptions, Progress, Report, RequestFlag, Section, ValidateOptions,
    WriteOptions,
};
pub use limits::Limits;
pub use output::Output;
pub use reader::{slice_at, ByteReader};
pub use source::Input;
pub use stream::{ArrayInfo, ArraySink, MemorySink, ProgressSink, Region, RegionSpec};
