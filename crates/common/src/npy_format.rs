//! `.npy` as a [`Format`], so `inspect`, `validate` and `convert` treat numpy files like any other.

use std::io::Write;

use serde_json::Value;

use crate::array::NdArray;
use crate::error::{Error, Result};
use crate::format::{ArrayRequest, Format, InspectOptions, Report, ValidateOptions, WriteOptions};
use crate::npy;
use crate::source::Input;

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
        let bytes = input.read_all(&req.limits)?;
        npy::read(&bytes, &req.limits)
    }
    fn write_array(&self, array: &NdArray, _opts: &WriteOptions, out: &mut dyn Write) -> Result<()> {
        npy::write(out, array).map_err(|e| Error::io("writing .npy", &e))
    }
}
