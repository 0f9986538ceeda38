//! [`VolpFormat`]: VOLP behind the format-independent [`Format`] interface the CLI and
//! [`rasterpack_common::open_any`] use.

use std::io::Write;

use rasterpack_common::{
    read_by_streaming, ArrayFile, ArrayInfo, ArrayRequest, ArraySink, Input, InspectOptions, Limits, NdArray, Output,
    Report, Result, ValidateOptions, WriteOptions,
};

use crate::file::VolpFile;
use crate::raw::MAGIC;
use crate::validate::{inspect_input, validate_input};
use crate::write::{VolpWriteOptions, VolpWriter};

/// The VOLP format: detection by the `VOLP` magic, inspect, validate, streamed reads and writes.
#[derive(Debug, Clone, Copy, Default)]
pub struct VolpFormat;

impl rasterpack_common::Format for VolpFormat {
    fn name(&self) -> &'static str {
        "volp"
    }
    fn honours(&self) -> &'static [rasterpack_common::RequestFlag] {
        use rasterpack_common::RequestFlag;
        &[RequestFlag::Physical, RequestFlag::Compress]
    }

    fn description(&self) -> &'static str {
        "VOLP volume pack: JSON header + zstd [levels, lat, lon] tensor"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["volp"]
    }

    fn detect(&self, head: &[u8]) -> bool {
        head.starts_with(&MAGIC)
    }

    /// The header, the frame structure (no decompression) and statistics of the first 1 MiB of
    /// values (every value with `opts.all`).
    fn inspect(&self, input: &Input, opts: &InspectOptions) -> Result<Report> {
        inspect_input(input, opts)
    }

    /// Every rule; the body is decoded as it streams, holding a small working set.
    fn validate(&self, input: &Input, opts: &ValidateOptions) -> Report {
        validate_input(input, opts)
    }

    fn read_array(&self, input: &Input, req: &ArrayRequest) -> Result<NdArray> {
        read_by_streaming(self, input, req)
    }

    fn stream_array(&self, input: &Input, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        VolpFile::from_input(input.clone(), req.limits)?.stream(req, sink)
    }

    fn write_array(&self, array: &NdArray, opts: &WriteOptions, out: &mut dyn Write) -> Result<()> {
        let mut w = VolpWriter::new(Output::Stream(out), VolpWriteOptions::from_write_options(opts)?);
        w.begin(&ArrayInfo::of(array))?;
        w.write_at(0, &array.data)?;
        w.finish()
    }

    /// The header, then zstd frames as the values arrive.
    fn streams_output(&self) -> bool {
        true
    }

    /// A [`VolpWriter`]: the header at `begin` (refusing what VOLP cannot hold before any value
    /// is decoded), then zstd streaming compression of the values as they arrive.
    fn array_writer<'a>(&'a self, opts: &WriteOptions, out: Output<'a>) -> Result<Box<dyn ArraySink + 'a>> {
        Ok(Box::new(VolpWriter::new(
            out,
            VolpWriteOptions::from_write_options(opts)?,
        )))
    }

    fn open(&self, input: Input, limits: Limits) -> Result<Box<dyn ArrayFile>> {
        Ok(Box::new(VolpFile::from_input(input, limits)?))
    }
}
