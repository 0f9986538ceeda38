//! UDF ("Untitled Data Format", revision `UDF0`): reader, validator and writer.
//!
//! A UDF file holds a graph of *datasets*; each dataset holds named *datatables* of one
//! primitive type (`u8`..`f64`, or custom bytes) with up to three real axes, a type hint
//! (text, JSON, links to other datasets, indices, coordinates, colours...) and optional
//! "ghost" axes (the inner sizes of fixed-size records). The format is described at
//! <https://github.com/CasualX/UntitledDataFormat>; `docs/formats/udf.md` in the rasterpack
//! repository records what the spec leaves open and how rasterpack decides.
//!
//! # Reading, validating, writing
//!
//! [`UdfFile`] opens a file ([`UdfFile::open`] for a path, [`UdfFile::from_bytes`],
//! [`UdfFile::from_input`]); every table that reads as an array is named
//! `DATASET_PATH/TABLE` (`root/grid`, `root/child/temps`) and read through the
//! [`ArrayFile`] interface, whole or a [`Region`] of it, into an [`NdArray`] with typed access.
//! [`UdfFile::validate`] checks every rule; [`UdfWriter`] builds files.
//!
//! ```
//! use rasterpack_udf::{ArrayFile, ArrayRequest, Region, TableSpec, UdfFile, UdfWriter};
//!
//! # fn main() -> rasterpack_udf::Result<()> {
//! // Write: a root dataset holding a 2x3 float32 table and a text table.
//! let mut writer = UdfWriter::new("DEMO")?;
//! let root = writer.add_dataset("ROOT")?;
//! writer.set_root(root);
//! writer.add(root, TableSpec::array("grid", &[2, 3], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]))?;
//! writer.add(root, TableSpec::text("title", "a small grid", rasterpack_udf::UdfEncoding::Utf8))?;
//! let bytes = writer.to_bytes()?;
//!
//! // Open (here from memory; `UdfFile::open("file.udf")` for a path) and validate.
//! let file = UdfFile::from_bytes(bytes)?;
//! assert!(file.validate().is_valid(true));
//! let names: Vec<_> = file.arrays()?.into_iter().filter_map(|a| a.name).collect();
//! assert_eq!(names, ["root/grid", "root/title"]);
//!
//! // Read a table whole, then a region of it (rows 1..2, columns 0..2 in C order).
//! let grid = file.read(&ArrayRequest::for_element("root/grid"))?;
//! assert_eq!(grid.shape, [2, 3]);
//! assert_eq!(grid.as_slice::<f32>()?, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
//! let rows_1_cols_0_2 = Region::from_start_size(&[1, 0], &[1, 2])?;
//! let part = file.read(&ArrayRequest::for_element("root/grid").with_region(rows_1_cols_0_2))?;
//! assert_eq!(part.to_vec::<f32>()?, [4.0, 5.0]);
//!
//! // Typed access per table, and text.
//! let (_, title) = file.find("root/title")?;
//! assert_eq!(file.text(title)?, rasterpack_udf::UdfText::Scalar("a small grid".into()));
//! # Ok(())
//! # }
//! ```
//!
//! # Layers
//!
//! [`raw`] (on-disk structures) -> [`parse`] (bytes -> raw) -> [`document`] (what the walk
//! learns: datasets and tables) -> [`validate`] (the structural walk and the content checks,
//! collecting findings with the codes in [`codes`]) -> [`model`] ([`UdfFile`]: typed access,
//! streamed reads) -> [`write`](mod@write) (the builder and the streaming array writer).
//! [`UdfFormat`] is the format-independent entry point the CLI uses.
//!
//! Axis order: `data_shape` packs `x`, `y`, `z`; the axes are the real ones (the type's
//! dimension count) followed by the ghost ones, and the data is stored with the last axis
//! fastest (a 1-D text list `[n, width]` holds `n` rows of `width` code units). Arrays keep
//! that order: numpy shape `[x, y, z]` in C order.
//!
//! Untrusted input never panics, allocates only from checked sizes, and reads table data in
//! pieces of a few MiB: validating or converting a table of any size holds a small working
//! set.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod codes;
pub mod compress;
pub mod document;
pub mod model;
pub mod parse;
pub mod raw;
mod read;
mod report;
pub mod samples;
pub mod validate;
pub mod write;

use std::io::Write;

use rasterpack_common::{InspectOptions, Output};

pub use document::{UdfCompression, UdfDataset, UdfDocument, UdfTable, UdfText};
pub use model::{UdfFile, UdfValues};
pub use rasterpack_common::{
    ArrayFile, ArrayInfo, ArrayRequest, DType, Element, Error, ErrorKind, Finding, Findings, Input, Limits, NdArray,
    Region, Report, Result, Severity,
};
pub use raw::{FileOffset as UdfFileOffset, Hint, Prim};
pub use write::{writer_for_array, TableSpec, UdfArrayWriter, UdfDatasetId, UdfEncoding, UdfWriter, ATTRS_TABLE};

/// The UDF format behind the format-independent [`rasterpack_common::Format`] interface (what
/// the CLI and [`rasterpack_common::open_any`] use).
pub struct UdfFormat;

impl rasterpack_common::Format for UdfFormat {
    fn name(&self) -> &'static str {
        "udf"
    }
    fn honours(&self) -> &'static [rasterpack_common::RequestFlag] {
        use rasterpack_common::RequestFlag;
        &[RequestFlag::Element]
    }

    fn description(&self) -> &'static str {
        "Untitled Data Format (UDF0): datasets of typed datatables"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["udf"]
    }

    /// `UDF0`, and `UDF1`..`UDF9` so later revisions are reported (as unsupported revisions)
    /// instead of as an unknown format.
    fn detect(&self, head: &[u8]) -> bool {
        head.len() >= 4 && head.starts_with(b"UDF") && head[3].is_ascii_digit()
    }

    /// The structural walk, plus the content checks of the tables up to 1 MiB (all of them
    /// with `--all`): cheap, and enough to say whether small files have content errors.
    fn inspect(&self, input: &Input, opts: &InspectOptions) -> Result<Report> {
        let mut file = UdfFile::open_lenient(input, &opts.limits);
        let mut report = Report::new("udf");
        report.findings.extend(std::mem::take(&mut file.doc.findings));
        let max_table = if opts.all { u64::MAX } else { report::PREVIEW_TEXT_MAX };
        validate::check_contents_upto(
            input,
            &opts.limits,
            &file.doc,
            max_table,
            &|_, _| {},
            &mut report.findings,
        );
        report::describe(&file, opts.all, &mut report);
        Ok(report)
    }

    fn validate(&self, input: &Input, opts: &rasterpack_common::ValidateOptions) -> Report {
        UdfFile::open_lenient(input, &opts.limits).into_report(opts)
    }

    /// Reads one table. Errors elsewhere in the file do not stop it: the table's own
    /// structure and content are checked, and a table that `validate` would reject is refused
    /// with the finding. A file whose structure could not be walked at all fails with its
    /// first error.
    fn read_array(&self, input: &Input, req: &ArrayRequest) -> Result<NdArray> {
        rasterpack_common::read_by_streaming(self, input, req)
    }

    /// Streams one table (or `req.region` of it) from the input, a few MiB at a time.
    fn stream_array(
        &self,
        input: &Input,
        req: &ArrayRequest,
        sink: &mut dyn rasterpack_common::ArraySink,
    ) -> Result<()> {
        ArrayFile::stream(&UdfFile::open_lenient(input, &req.limits), req, sink)
    }

    fn write_array(&self, array: &NdArray, _opts: &rasterpack_common::WriteOptions, out: &mut dyn Write) -> Result<()> {
        use rasterpack_common::ArraySink;
        let mut writer = UdfArrayWriter::new(Output::Stream(out));
        writer.begin(&ArrayInfo::of(array))?;
        writer.write_at(0, &array.data)?;
        writer.finish()
    }

    /// The table is written as the data arrives (in order on a stream).
    fn streams_output(&self) -> bool {
        true
    }

    /// Writes the table as the data arrives (see [`UdfArrayWriter`]).
    fn array_writer<'a>(
        &'a self,
        _opts: &rasterpack_common::WriteOptions,
        out: Output<'a>,
    ) -> Result<Box<dyn rasterpack_common::ArraySink + 'a>> {
        Ok(Box::new(UdfArrayWriter::new(out)))
    }

    fn open(&self, input: Input, limits: Limits) -> Result<Box<dyn ArrayFile>> {
        Ok(Box::new(UdfFile::from_input(input, limits)?))
    }
}

/// The README's examples, compiled as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
