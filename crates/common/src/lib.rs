//! Shared plumbing for rasterpack's format crates: bounds-checked endian readers, resource
//! limits, the error and finding types, inputs, in-memory arrays, `.npy` I/O and the
//! [`Format`] trait the CLI drives.
#![forbid(unsafe_code)]

pub mod array;
pub mod error;
pub mod finding;
pub mod format;
pub mod json;
pub mod limits;
pub mod npy;
pub mod npy_format;
pub mod reader;
pub mod source;
#[doc(hidden)]
pub mod testkit;

pub use array::{byte_len, DType, NdArray};
pub use error::{Error, ErrorKind, Result};
pub use finding::{Finding, Findings, Severity};
pub use format::{ArrayRequest, Format, InspectOptions, Report, RequestFlag, Section, ValidateOptions, WriteOptions};
pub use limits::Limits;
pub use reader::{slice_at, ByteReader};
pub use source::Input;
