//! Gridfour Virtual Raster Store (GVRS 1.4): read, validate and write tiled 2-D grids,
//! bit-exact with [Gridfour](https://github.com/gwlucastrig/gridfour).
//!
//! A GVRS file holds a grid of `rows x cols` cells cut into tiles of `tile_rows x tile_cols`;
//! each cell has one value per *element* (a named variable: 32-bit integer, 16-bit integer,
//! 32-bit float, or integer-coded float). Tiles are stored compressed with Gridfour's codecs
//! (Huffman or Deflate after a predictor, GvrsFloat, LSOP12, canonical Huffman) or raw; a tile
//! never written holds the element's fill value. Gridfour documents the format and its codecs
//! in its [project notes](https://gwlucastrig.github.io/GridfourDocs/notes/index.html);
//! what rasterpack accepts where Gridfour's files and its documentation differ is in the
//! repository's `docs/formats/gvrs.md`.
//!
//! [`GvrsFile`] opens a file (from a path, bytes, or an [`Input`]) and reads elements by name,
//! whole or a window ([`Region`]), into memory ([`GvrsFile::read`], typed through
//! [`NdArray::to_vec`]) or into any [`ArraySink`] ([`GvrsFile::stream`]: a file, a `.npy`
//! writer) with memory bounded by [`Limits::working_set`], whatever the grid's size.
//! [`GvrsFile::validate`] checks every rule, checksum and tile. [`GvrsWriter`] writes a grid as
//! it arrives, one band of tile rows at a time; [`write::GvrsSpec`] describes files with
//! several elements, metadata and coordinates.
//!
//! ```
//! use rasterpack_gvrs::{ArrayRequest, GvrsFile, GvrsWriter, GvrsWriterOptions, NdArray, Output, Region};
//!
//! # fn main() -> rasterpack_gvrs::Result<()> {
//! // Write a 300 x 200 float32 grid, in 100 x 100 tiles, into memory.
//! let values: Vec<f32> = (0..300 * 200).map(|i| (i / 200) as f32 + (i % 200) as f32 / 1000.0).collect();
//! let grid = NdArray::from_vec(vec![300, 200], values)?;
//! let mut bytes = Vec::new();
//! let options = GvrsWriterOptions::default().with_tile(100, 100).with_element_name("depth");
//! GvrsWriter::new(Output::Stream(&mut bytes), options).write_array(&grid)?;
//!
//! // Open it (GvrsFile::open(path) for a file) and check every rule, CRC and tile.
//! let file = GvrsFile::from_bytes(bytes)?;
//! assert!(file.validate().is_valid(true));
//! assert_eq!(file.elements[0].name(), "depth");
//!
//! // Read the element whole, and a window of 5 rows x 4 columns at row 10, column 20.
//! let whole = file.read(&ArrayRequest::for_element("depth"))?;
//! assert_eq!(whole.to_vec::<f32>()?, grid.to_vec::<f32>()?);
//! let window = Region::from_start_size(&[10, 20], &[5, 4])?;
//! let part = file.read(&ArrayRequest::for_element("depth").with_region(window))?;
//! assert_eq!(part.shape, vec![5, 4]);
//! assert_eq!(part.as_slice::<f32>()?[0], 10.02);
//! # Ok(())
//! # }
//! ```
//!
//! Layers: [`raw`] (on-disk structures with their offsets) -> [`parse`] (checked bytes -> raw)
//! -> [`validate`] (findings) and [`model`] ([`GvrsFile`]); [`codec`] holds the compression
//! codecs, [`write`](mod@write) the writer, and [`GvrsFormat`] is what the `rasterpack` command line drives.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod carry;
pub mod codec;
mod inspect;
pub mod model;
pub mod parse;
pub mod raw;
mod read;
pub mod validate;
pub mod write;

use std::io::Write;

use rasterpack_common::{read_by_streaming, Format, InspectOptions, ValidateOptions, WriteOptions};

pub use codec::Codec as GvrsCodec;
pub use inspect::{encoding_name, tile_stats, GvrsTileStats};
pub use model::{GvrsCellValue, GvrsElement, GvrsFile, GvrsGeometry, GvrsPlane};
pub use rasterpack_common::{
    ArrayFile, ArrayInfo, ArrayRequest, ArraySink, DType, Element, Error, ErrorKind, Finding, Findings, Input, Limits,
    NdArray, Output, Region, Report, Result, Severity,
};
pub use write::{GvrsCompression, GvrsWriter, GvrsWriterOptions};

/// The GVRS format as the `rasterpack` command line drives it ([`Format`]): detection by the
/// `gvrs raster` magic, `inspect`, `validate`, reads of one element (or of every element
/// stacked, towards VOLP) and writes of one 2-D array.
#[derive(Debug, Clone, Copy, Default)]
pub struct GvrsFormat;

impl Format for GvrsFormat {
    fn name(&self) -> &'static str {
        "gvrs"
    }
    fn honours(&self) -> &'static [rasterpack_common::RequestFlag] {
        use rasterpack_common::RequestFlag;
        &[
            RequestFlag::Element,
            RequestFlag::Codes,
            RequestFlag::Tile,
            RequestFlag::Compress,
        ]
    }

    fn description(&self) -> &'static str {
        "Gridfour Virtual Raster Store 1.4 (tiled raster, compressed with Gridfour's codecs)"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["gvrs"]
    }

    fn detect(&self, head: &[u8]) -> bool {
        head.starts_with(raw::MAGIC)
    }

    fn inspect(&self, input: &Input, opts: &InspectOptions) -> Result<Report> {
        let mut report = Report::new("gvrs");
        let file = GvrsFile::from_input(input.clone(), opts.limits)?;
        if file.header.time_opened_for_writing != 0 {
            report.findings.error(
                "gvrs.header.opened_for_writing",
                Some(48),
                "the file is still opened for writing (or was not closed properly): what is shown may be incomplete",
            );
        }
        if let Some(e) = &file.header_error {
            report.findings.push_error(e);
        }
        if let Some(e) = &file.tile_directory_error {
            report.findings.push_error(e);
        }
        inspect::inspect_file(&file, opts, &mut report);
        Ok(report)
    }

    fn validate(&self, input: &Input, opts: &ValidateOptions) -> Report {
        validate::validate(input, opts)
    }

    fn read_array(&self, input: &Input, req: &ArrayRequest) -> Result<NdArray> {
        read_by_streaming(self, input, req)
    }

    fn stream_array(&self, input: &Input, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        GvrsFile::from_input(input.clone(), req.limits)?.stream(req, sink)
    }

    fn write_array(&self, array: &NdArray, opts: &WriteOptions, out: &mut dyn Write) -> Result<()> {
        write::write_ndarray(array, opts, out)
    }

    /// One element per array, all of one grid (see [`write::write_ndarrays`]); GVRS metadata
    /// records are not written from JSON, so `metadata` must be empty.
    fn write_arrays(
        &self,
        arrays: &[NdArray],
        metadata: &serde_json::Map<String, serde_json::Value>,
        opts: &WriteOptions,
        out: &mut dyn Write,
    ) -> Result<()> {
        if !metadata.is_empty() {
            return Err(Error::usage("the gvrs writer takes no file metadata"));
        }
        write::write_ndarrays(arrays, opts, out)
    }

    fn array_writer<'a>(&'a self, opts: &WriteOptions, out: Output<'a>) -> Result<Box<dyn ArraySink + 'a>> {
        Ok(Box::new(GvrsWriter::new(
            out,
            GvrsWriterOptions::from_write_options(opts)?,
        )))
    }

    fn open(&self, input: Input, limits: Limits) -> Result<Box<dyn ArrayFile>> {
        Ok(Box::new(GvrsFile::from_input(input, limits)?))
    }
}

/// The README's examples, compiled as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
