//! `.npy` as a [`Format`], so `inspect`, `validate` and `convert` treat numpy files like any other.

use std::io::Write;

use serde_json::Value;

use crate::array::NdArray;
use crate::error::{Error, Result};
use crate::format::{read_by_streaming, ArrayRequest, Format, InspectOptions, Report, ValidateOptions, WriteOptions};
use crate::npy;
use crate::output::Output;
use crate::source::Input;
use crate::stream::{stream_stored_c_order, ArrayInfo, ArraySink};

pub struct NpyFormat;

impl NpyFormat {
    fn describe(input: &Input) -> Result<(npy::NpyHeader, Report)> {
        // The header is at most a few KiB; 1 MiB bounds a hostile header length.
        let head = input.head(1 << 20);
        let h = npy::parse_header(&head)?;
        let mut report = Report::new("npy");
        report.summary.insert(
            "version".into(),
            Value::from(format!("{}.{}", h.version.0, h.version.1)),
        );
        report.summary.insert("dtype".into(), Value::from(h.dtype.name()));
        report.summary.insert("shape".into(), Value::from(h.shape.clone()));
        report
            .summary
            .insert("fortran_order".into(), Value::from(h.fortran_order));
        report.summary.insert("data_offset".into(), Value::from(h.data_offset));
        report.fields(
            "npy",
            vec![
                ("version".into(), format!("{}.{}", h.version.0, h.version.1)),
                (
                    "dtype".into(),
                    format!(
                        "{} ({})",
                        h.dtype.name(),
                        if h.big_endian { "big-endian" } else { "little-endian" }
                    ),
                ),
                ("shape".into(), format!("{:?}", h.shape)),
                (
                    "order".into(),
                    if h.fortran_order { "Fortran".into() } else { "C".into() },
                ),
                (
                    "data".into(),
                    format!("{} bytes at offset {}", h.data_len, h.data_offset),
                ),
            ],
        );
        let actual = input.len().saturating_sub(h.data_offset);
        if actual != h.data_len {
            report.findings.error(
                "npy.data_length",
                Some(h.data_offset),
                format!("header declares {} data bytes, the file holds {actual}", h.data_len),
            );
        }
        Ok((h, report))
    }
}

impl Format for NpyFormat {
    fn name(&self) -> &'static str {
        "npy"
    }
    fn description(&self) -> &'static str {
        "numpy .npy array"
    }
    fn extensions(&self) -> &'static [&'static str] {
        &["npy"]
    }
    fn detect(&self, head: &[u8]) -> bool {
        head.starts_with(npy::MAGIC)
    }
    fn inspect(&self, input: &Input, _opts: &InspectOptions) -> Result<Report> {
        Ok(Self::describe(input)?.1)
    }
    fn validate(&self, input: &Input, _opts: &ValidateOptions) -> Report {
        match Self::describe(input) {
            Ok((_, report)) => report,
            Err(e) => {
                let mut r = Report::new("npy");
                r.fail(&e);
                r
            }
        }
    }
    fn read_array(&self, input: &Input, req: &ArrayRequest) -> Result<NdArray> {
        read_by_streaming(self, input, req)
    }
    fn stream_array(&self, input: &Input, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        let h = npy::parse_header(&input.head(1 << 20))?;
        npy::check_data(&h, input.len())?;
        let region = req.region_of(&h.shape)?;
        sink.begin(&ArrayInfo::new(h.dtype, region.shape()))?;
        let size = h.dtype.size();
        let mut swap = |b: &mut [u8]| {
            if h.big_endian && size > 1 {
                b.chunks_exact_mut(size).for_each(|v| v.reverse());
            }
        };
        stream_stored_c_order(input, h.data_offset, h.dtype, &h.shape, Some(&region), &mut swap, sink)
    }
    fn write_array(&self, array: &NdArray, _opts: &WriteOptions, out: &mut dyn Write) -> Result<()> {
        npy::write(out, array).map_err(|e| Error::io("writing .npy", &e))
    }
    fn array_writer<'a>(&'a self, _opts: &WriteOptions, out: Output<'a>) -> Result<Box<dyn ArraySink + 'a>> {
        Ok(Box::new(npy::NpyWriter::new(out)))
    }
}
