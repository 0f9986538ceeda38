//! `.npy` as a [`Format`], so `inspect`, `validate` and `convert` treat numpy files like any other.

use std::io::Write;

use serde_json::Value;

use crate::any::ArrayFile;
use crate::array::NdArray;
use crate::error::{Error, Result};
use crate::format::{read_by_streaming, ArrayRequest, Format, InspectOptions, Report, ValidateOptions, WriteOptions};
use crate::fortran;
use crate::limits::Limits;
use crate::npy;
use crate::output::Output;
use crate::source::Input;
use crate::stream::{stream_stored_c_order, ArrayInfo, ArraySink};

/// The `.npy` format behind the [`Format`] trait: detection by magic, inspect/validate of the
/// header against the data, streamed (and region) reads, and a streaming writer.
pub struct NpyFormat;

impl NpyFormat {
    fn describe(input: &Input) -> Result<(npy::NpyHeader, Report)> {
        // The header is at most a few KiB; 1 MiB bounds a hostile header length.
        let head = input.head(1 << 20);
        let h = npy::parse_header(&head)?;
        let mut report = Report::new("npy");
        // The summary shape every format shares: its arrays, in `.npy` axis order.
        report.summary.insert(
            "arrays".into(),
            serde_json::json!([{"name": Value::Null, "dtype": h.dtype.name(), "shape": h.shape}]),
        );
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
        req.check_honoured(self)?;
        let h = npy::parse_header(&input.head(1 << 20))?;
        npy::check_data(&h, input.len())?;
        let region = req.region_of(&h.shape)?;
        let info = ArrayInfo::new(h.dtype, region.shape());
        let mut swap = |b: &mut [u8]| {
            if h.big_endian {
                h.dtype.swap_to_le(b);
            }
        };
        if h.fortran_order {
            // The stored bytes are the C-order transpose: reordered on the way.
            return fortran::stream_fortran_stored(
                input,
                h.data_offset,
                h.dtype,
                &h.shape,
                &region,
                &mut swap,
                &req.limits,
                sink,
            );
        }
        sink.begin(&info)?;
        stream_stored_c_order(input, h.data_offset, h.dtype, &h.shape, Some(&region), &mut swap, sink)
    }
    fn write_array(&self, array: &NdArray, _opts: &WriteOptions, out: &mut dyn Write) -> Result<()> {
        npy::write(out, array).map_err(|e| Error::io("writing .npy", &e))
    }
    fn array_writer<'a>(&'a self, _opts: &WriteOptions, out: Output<'a>) -> Result<Box<dyn ArraySink + 'a>> {
        Ok(Box::new(npy::NpyWriter::new(out)))
    }
    /// The header, then the values in C order as they arrive.
    fn streams_output(&self) -> bool {
        true
    }
    fn open(&self, input: Input, limits: Limits) -> Result<Box<dyn ArrayFile>> {
        Ok(Box::new(NpyFile::from_input(input, limits)?))
    }
}

/// A `.npy` file opened for reading: its header is parsed, the data stays on disk until read.
#[derive(Debug, Clone)]
pub struct NpyFile {
    input: Input,
    limits: Limits,
    header: npy::NpyHeader,
}

impl NpyFile {
    /// Open a `.npy` file with default limits.
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<NpyFile> {
        NpyFile::from_input(Input::open(path.as_ref())?, Limits::default())
    }

    /// Read a `.npy` image held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<NpyFile> {
        NpyFile::from_input(Input::from_bytes("<memory>", bytes), Limits::default())
    }

    /// Read from an [`Input`] with the given limits.
    pub fn from_input(input: Input, limits: Limits) -> Result<NpyFile> {
        let header = npy::parse_header(&input.head(1 << 20))?;
        Ok(NpyFile { input, limits, header })
    }

    /// The parsed header (dtype, shape, byte order, where the data starts).
    pub fn header(&self) -> &npy::NpyHeader {
        &self.header
    }
}

impl ArrayFile for NpyFile {
    fn format_name(&self) -> &'static str {
        "npy"
    }
    fn arrays(&self) -> Result<Vec<ArrayInfo>> {
        Ok(vec![ArrayInfo::new(self.header.dtype, self.header.shape.clone())])
    }
    fn validate(&self) -> Report {
        NpyFormat.validate(
            &self.input,
            &ValidateOptions {
                limits: self.limits,
                ..Default::default()
            },
        )
    }
    fn stream(&self, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        if let Some(name) = &req.element {
            return Err(Error::usage(format!(
                "a .npy file holds one unnamed array; there is no {name:?}"
            )));
        }
        NpyFormat.stream_array(&self.input, req, sink)
    }
}

impl NpyFile {
    /// Every finding of this file (the header rules, and that the data is all there).
    pub fn validate(&self) -> Report {
        ArrayFile::validate(self)
    }
}

// The reader API every format shares (no trait import needed).
crate::reader_api!(NpyFile, NpyFormat, delegate);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{open_any, Region};

    #[test]
    fn open_any_reads_npy_whole_and_by_region() {
        let array = NdArray::from_vec(vec![4, 3], (0..12).map(|v| v as f64 * 0.5).collect()).unwrap();
        let path = std::env::temp_dir().join(format!("rp-open-any-{}.npy", std::process::id()));
        let mut bytes = Vec::new();
        npy::write(&mut bytes, &array).unwrap();
        std::fs::write(&path, &bytes).unwrap();

        let file = open_any(&path, &[&NpyFormat]).unwrap();
        assert_eq!(file.format_name(), "npy");
        assert_eq!(file.arrays().unwrap()[0].shape, vec![4, 3]);
        assert!(file.validate().is_valid(true));
        assert_eq!(file.read(&ArrayRequest::default()).unwrap(), array);
        let region = Region::from_start_size(&[1, 1], &[2, 2]).unwrap();
        let part = file.read(&ArrayRequest::default().with_region(&region)).unwrap();
        assert_eq!(part.to_vec::<f64>().unwrap(), vec![2.0, 2.5, 3.5, 4.0]);
        assert!(file.read(&ArrayRequest::for_element("x")).is_err());

        let same = NpyFile::from_bytes(bytes).unwrap();
        assert_eq!(same.header().shape, vec![4, 3]);
        std::fs::write(&path, b"not a known format").unwrap();
        assert_eq!(open_any(&path, &[&NpyFormat]).err().unwrap().code, "format.unknown");
        std::fs::remove_file(&path).unwrap();
    }
}
