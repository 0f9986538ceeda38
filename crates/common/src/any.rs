//! One interface over every format: detect a file's format from its content and open it as an
//! [`ArrayFile`], whatever the format (gimli's `object::read::any` idea).

use std::path::Path;

use crate::array::NdArray;
use crate::error::{Error, ErrorKind, Result};
use crate::format::{ArrayRequest, Format, Report};
use crate::limits::Limits;
use crate::source::Input;
use crate::stream::{ArrayInfo, ArraySink, Interrupt, MemorySink, RegionSpec};

/// What every format's reader offers: the arrays a file holds, full validation, and reads of a
/// whole array or a region of it, in memory or streamed. Each format crate's reader type
/// implements it; [`open_any`] returns one for any format.
pub trait ArrayFile: Send + Sync {
    /// The format's short name (`volp`, `gvrs`, `udf`, `fold`, `vds`, `npy`).
    fn format_name(&self) -> &'static str;

    /// The arrays this file holds, named as [`ArrayRequest::element`] takes them (GVRS element,
    /// UDF `DATASET_PATH/TABLE`, FOLD `CHUNK/ARRAY`, VDS channel; `None` for a single array).
    fn arrays(&self) -> Result<Vec<ArrayInfo>>;

    /// [`ArrayFile::arrays`], asking `interrupt` whether to go on (Ctrl-C) through long work
    /// the listing does: FOLD verifies, and repairs, every NPZ0 chunk to list its arrays. An
    /// `Err` from the hook stops the listing with that error. Formats whose listing reads only
    /// headers ignore the hook.
    fn arrays_interruptible(&self, interrupt: Option<&Interrupt>) -> Result<Vec<ArrayInfo>> {
        let _ = interrupt;
        self.arrays()
    }

    /// What [`ArrayFile::arrays`] had to leave out: what it is (a FOLD chunk that fails its
    /// checks, whose arrays cannot be named, let alone read; a damaged or unsupported member as
    /// `CHUNK/ARRAY`) and the error a read of it gives; at most the first
    /// [`crate::LISTED_PER_CODE`]. A command over "every array" (`stats`, `convert --all`) reports
    /// these rather than passing over them in silence. Empty for formats whose listing leaves
    /// nothing out (the default); asked after `arrays`, it costs nothing more.
    fn unlisted(&self) -> Result<Vec<(String, Error)>> {
        Ok(Vec::new())
    }

    /// [`ArrayFile::arrays`] for work over every array (`convert --all`, `.npz` output): fails
    /// with the first of [`ArrayFile::unlisted`] when the listing had to leave anything out,
    /// so a damaged chunk never yields an output that silently lacks its arrays.
    fn arrays_complete(&self) -> Result<Vec<ArrayInfo>> {
        let arrays = self.arrays()?;
        match self.unlisted()?.into_iter().next() {
            Some((_, e)) => Err(e),
            None => Ok(arrays),
        }
    }

    /// The array `element` names (`None`: the first of [`ArrayFile::arrays`]), without reading
    /// more than its description needs where the format can: FOLD reads the member's `.npy`
    /// header, not the whole file's listing. Nothing is verified here; a read of the array is.
    fn array_info(&self, element: Option<&str>) -> Result<ArrayInfo> {
        let arrays = self.arrays()?;
        let found = match element {
            None => arrays.into_iter().next(),
            Some(name) => arrays.into_iter().find(|a| a.name.as_deref() == Some(name)),
        };
        found.ok_or_else(|| {
            Error::new(
                ErrorKind::Usage,
                "request.no_such_element",
                None,
                match element {
                    Some(name) => format!("no array {name:?} in the file"),
                    None => "the file holds no array".to_string(),
                },
            )
        })
    }

    /// [`ArrayFile::array_info`], polling `interrupt` (Ctrl-C) through what it reads: the FOLD
    /// listing it may need verifies and repairs chunks (see [`ArrayFile::arrays_interruptible`]).
    fn array_info_interruptible(&self, element: Option<&str>, interrupt: Option<&Interrupt>) -> Result<ArrayInfo> {
        let _ = interrupt;
        self.array_info(element)
    }

    /// Check every rule, checksum and payload of the file; all findings, not just the first.
    fn validate(&self) -> Report;

    /// Stream one array (or `req.region` of it) into `sink` (see [`crate::stream`]); the caller
    /// calls `finish`.
    fn stream(&self, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()>;

    /// The file's own block shape for the array named `element` (GVRS tile, VDS brick), in the
    /// array's C axis order: a region aligned to it decodes each block once. `None` when the
    /// format stores the array in one piece (or has no such name).
    fn chunk_shape(&self, _element: Option<&str>) -> Option<Vec<u64>> {
        None
    }

    /// [`ArrayFile::chunk_shape`] at level of detail `lod` (a VDS LOD's bricks); `None` when
    /// the format has no such level.
    fn chunk_shape_at(&self, element: Option<&str>, lod: u32) -> Option<Vec<u64>> {
        match lod {
            0 => self.chunk_shape(element),
            _ => None,
        }
    }

    /// One array (or `req.region` of it) in memory, bounded by `req.limits.max_array_bytes`.
    fn read(&self, req: &ArrayRequest) -> Result<NdArray> {
        let mut sink = MemorySink::new(req.limits);
        crate::stream::stream_view(req, false, 0, &mut sink, |r, s| self.stream(r, s))?;
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
    if let Some(objects) = input.objects() {
        return formats
            .iter()
            .copied()
            .find(|f| f.detect_objects(objects))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Unsupported,
                    "format.unknown",
                    None,
                    format!("{}: the prefix holds no dataset of a known format", objects.name()),
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
/// `formats` its content says, with default [`Limits`]. Programs that want every format use
/// the `rasterpack` crate's `rasterpack::open(path)`, which passes all of them.
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

/// The inherent methods every format's reader type offers, so that no trait import is needed:
/// `validate_path` (the full report of any file, even one that does not open) and `blocks`
/// (typed blocks). With `delegate`, also `arrays`, `read` and `stream` forwarding to the type's
/// [`ArrayFile`] implementation (for types without inherent ones).
#[doc(hidden)]
#[macro_export]
macro_rules! reader_api {
    ($file:ty, $format:expr, delegate) => {
        impl $file {
            /// The arrays this file holds, named as [`ArrayRequest::element`]
            /// (`rasterpack_common::ArrayRequest::element`) takes them (see
            /// `rasterpack_common::ArrayFile::arrays`).
            pub fn arrays(&self) -> $crate::Result<::std::vec::Vec<$crate::ArrayInfo>> {
                $crate::ArrayFile::arrays(self)
            }

            /// One array (or `req.region` of it) in memory, within
            /// `req.limits.max_array_bytes`; options the format does not honour are refused.
            pub fn read(&self, req: &$crate::ArrayRequest) -> $crate::Result<$crate::NdArray> {
                $crate::ArrayFile::read(self, req)
            }

            /// Stream one array (or `req.region` of it) into `sink`, following the protocol of
            /// `rasterpack_common::stream`; the caller calls `finish`.
            pub fn stream(&self, req: &$crate::ArrayRequest, sink: &mut dyn $crate::ArraySink) -> $crate::Result<()> {
                $crate::ArrayFile::stream(self, req, sink)
            }
        }
        $crate::reader_api!($file, $format);
    };
    ($file:ty, $format:expr) => {
        impl $file {
            /// Every finding of the file at `path`, whatever is wrong with it (a broken header
            /// included): the report `rasterpack validate` prints. `Err` only when the path
            /// cannot be read (`io`). `report.is_valid(strict)` is the verdict.
            pub fn validate_path(path: impl AsRef<::std::path::Path>) -> $crate::Result<$crate::Report> {
                let input = $crate::Input::open(path.as_ref())?;
                Ok($crate::Format::validate(
                    &$format,
                    &input,
                    &$crate::ValidateOptions::default(),
                ))
            }

            /// The array `req` asks for, one typed block at a time (see
            /// `rasterpack_common::blocks`): `for block in file.blocks::<f32>(&req)? { .. }`.
            pub fn blocks<T: $crate::Element>(
                &self,
                req: &$crate::ArrayRequest,
            ) -> $crate::Result<$crate::Blocks<'_, T>> {
                $crate::Blocks::new(self, req)
            }

            /// The array `req` asks for in one pass of the source, as typed blocks of at most
            /// `block_bytes` handed to `each` (see `rasterpack_common::for_each_block`).
            pub fn for_each_block<T: $crate::Element>(
                &self,
                req: &$crate::ArrayRequest,
                block_bytes: u64,
                mut each: impl FnMut($crate::Block<T>) -> $crate::Result<()>,
            ) -> $crate::Result<()> {
                $crate::for_each_block(self, req, block_bytes, &mut each)
            }
        }
    };
}
