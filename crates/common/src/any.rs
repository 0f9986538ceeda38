//! One interface over every format: detect a file's format from its content and open it as an
//! [`ArrayFile`], whatever the format (gimli's `object::read::any` idea).

use std::path::Path;

use crate::array::NdArray;
use crate::error::{Error, ErrorKind, Result};
use crate::format::{ArrayRequest, Format, Report};
use crate::limits::Limits;
use crate::source::Input;
use crate::stream::{ArrayInfo, ArraySink, MemorySink, RegionSpec};

/// What every format's reader offers: the arrays a file holds, full validation, and reads of a
/// whole array or a region of it, in memory or streamed. Each format crate's reader type
/// implements it; [`open_any`] returns one for any format.
pub trait ArrayFile: Send + Sync {
    /// The format's short name (`volp`, `gvrs`, `udf`, `fold`, `vds`, `npy`).
    fn format_name(&self) -> &'static str;

    /// The arrays this file holds, named as [`ArrayRequest::element`] takes them (GVRS element,
    /// UDF `DATASET_PATH/TABLE`, FOLD `CHUNK/ARRAY`, VDS channel; `None` for a single array).
    fn arrays(&self) -> Result<Vec<ArrayInfo>>;

    /// Check every rule, checksum and payload of the file; all findings, not just the first.
    fn validate(&self) -> Report;

    /// Stream one array (or `req.region` of it) into `sink` (see [`crate::stream`]); the caller
    /// calls `finish`.
    fn stream(&self, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()>;

    /// One array (or `req.region` of it) in memory, bounded by `req.limits.max_array_bytes`.
    fn read(&self, req: &ArrayRequest) -> Result<NdArray> {
        let mut sink = MemorySink::new(req.limits);
        self.stream(req, &mut sink)?;
        sink.finish()?;
        sink.into_array()
    }
}

/// How many leading bytes [`detect`] looks at (a stream must keep at least these to be
/// detected).
pub const DETECT_BYTES: usize = 64;

/// The format of `input` among `formats`, from its content (magic bytes, or a directory's
/// layout document), never from its name.
pub fn detect<'f>(input: &Input, formats: &[&'f dyn Format]) -> Result<&'f dyn Format> {
    if let Some(dir) = input.dir() {
        return formats.iter().copied().find(|f| f.detect_dir(dir)).ok_or_else(|| {
            Error::new(
                ErrorKind::Unsupported,
                "format.unknown",
                None,
                format!(
                    "{}: the directory holds no dataset of a known format",
                    crate::names::shown(dir)
                ),
            )
        });
    }
    let head = input.head(DETECT_BYTES);
    formats.iter().copied().find(|f| f.detect(&head)).ok_or_else(|| {
        let shown: Vec<String> = head.iter().take(8).map(|b| format!("{b:02x}")).collect();
        let known: Vec<&str> = formats.iter().map(|f| f.name()).collect();
        Error::new(
            ErrorKind::Invalid,
            "format.unknown",
            Some(0),
            if head.is_empty() {
                "empty input: not a format rasterpack knows".to_string()
            } else {
                format!(
                    "unknown format (first bytes: {}); known: {}",
                    shown.join(" "),
                    known.join(", ")
                )
            },
        )
    })
}

/// Open `path` (a file, or a directory holding an object-store dataset) as whichever of
/// `formats` its content says, with default [`Limits`].
pub fn open_any(path: impl AsRef<Path>, formats: &[&dyn Format]) -> Result<Box<dyn ArrayFile>> {
    let input = Input::open(path.as_ref())?;
    let format = detect(&input, formats)?;
    format.open(input, Limits::default())
}

impl ArrayRequest {
    /// A request for the array named `name` (see [`ArrayFile::arrays`]), default limits.
    pub fn for_element(name: impl Into<String>) -> ArrayRequest {
        ArrayRequest {
            element: Some(name.into()),
            ..ArrayRequest::default()
        }
    }

    /// The same request restricted to `region` (C axis order, as the array's shape).
    pub fn with_region(mut self, region: impl Into<RegionSpec>) -> ArrayRequest {
        self.region = Some(region.into());
        self
    }

    /// The same request with physical values (scale and offset applied) when `physical`.
    pub fn with_physical(mut self, physical: bool) -> ArrayRequest {
        self.physical = physical;
        self
    }

    /// The same request with stored integer codes instead of decoded values when `codes` (GVRS
    /// integer-coded floats; `--codes`).
    pub fn with_codes(mut self, codes: bool) -> ArrayRequest {
        self.codes = codes;
        self
    }

    /// The same request with other limits.
    pub fn with_limits(mut self, limits: Limits) -> ArrayRequest {
        self.limits = limits;
        self
    }
}
