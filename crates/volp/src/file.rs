//! [`VolpFile`]: a VOLP file opened for reading.

use std::path::Path;

use rasterpack_common::{
    ArrayFile, ArrayInfo, ArrayRequest, ArraySink, Error, Input, Limits, Report, Result, ValidateOptions,
};
use serde_json::{Map, Value};

use crate::body::{decode_body, DecodePlan};
use crate::model::{StatsAccumulator, VolpHeader, VolpStats};
use crate::parse::parse_structure;
use crate::read::{array_info, stream_volume};
use crate::validate::{validate_input, validate_with_limits};

/// A VOLP file opened for reading: its prefix and header are read and every header rule holds;
/// the body stays in the input until a read or [`VolpFile::validate`] streams it.
///
/// A VOLP file holds one array, the `[levels, lat, lon]` tensor; read it (or a [`Region`] of
/// it) through [`ArrayFile`]: stored values, or float64 physical values
/// (`stored * scale + offset`) with [`ArrayRequest::with_physical`].
///
/// [`Region`]: rasterpack_common::Region
#[derive(Debug, Clone)]
pub struct VolpFile {
    input: Input,
    limits: Limits,
    header: VolpHeader,
    header_json: Map<String, Value>,
    header_len: u32,
    body_offset: u64,
    body_len: u64,
}

impl VolpFile {
    /// Open the file at `path` with default [`Limits`].
    pub fn open(path: impl AsRef<Path>) -> Result<VolpFile> {
        VolpFile::from_input(Input::open(path.as_ref())?, Limits::default())
    }

    /// Read a VOLP file held in memory, with default [`Limits`].
    pub fn from_bytes(bytes: Vec<u8>) -> Result<VolpFile> {
        VolpFile::from_input(Input::from_bytes("<memory>", bytes), Limits::default())
    }

    /// Read from an [`Input`] with the given limits. Fails with the first broken prefix or
    /// header rule (its code and offset); [`VolpFile::validate_input`] lists every finding of a
    /// file that does not open.
    pub fn from_input(input: Input, limits: Limits) -> Result<VolpFile> {
        let s = parse_structure(&input, &limits)?;
        if let Some(e) = s.check.errors.first() {
            return Err(e.clone());
        }
        let header = s
            .check
            .header
            .ok_or_else(|| Error::invalid_at("volp.header.invalid", Some(8), "header rules failed"))?;
        Ok(VolpFile {
            input,
            limits,
            header,
            header_json: s.check.json,
            header_len: s.prefix.header_len,
            body_offset: s.body_offset,
            body_len: s.body_len,
        })
    }

    /// Every finding of any input, even one that does not open: the prefix and header rules,
    /// then the whole body decoded as it streams. Memory stays at a small working set.
    pub fn validate_input(input: &Input, limits: &Limits) -> Report {
        validate_with_limits(input, limits)
    }

    /// Every finding of this file (see [`VolpFile::validate_input`]).
    pub fn validate(&self) -> Report {
        validate_input(
            &self.input,
            &ValidateOptions {
                limits: self.limits,
                ..Default::default()
            },
        )
    }

    /// The accepted header, with the spec's defaults applied.
    pub fn header(&self) -> &VolpHeader {
        &self.header
    }

    /// The whole header as JSON, in file order (unknown keys included).
    pub fn header_json(&self) -> &Map<String, Value> {
        &self.header_json
    }

    /// The declared header length (bytes 4..8).
    pub fn header_len(&self) -> u32 {
        self.header_len
    }

    /// Offset of the first body byte (8 + header length).
    pub fn body_offset(&self) -> u64 {
        self.body_offset
    }

    /// Bytes of compressed body.
    pub fn body_len(&self) -> u64 {
        self.body_len
    }

    /// Statistics of every stored value, computed as the body streams (every body check runs).
    pub fn stats(&self) -> Result<VolpStats> {
        let mut acc = StatsAccumulator::new(self.header.dtype);
        decode_body(
            &self.input,
            self.body_offset,
            DecodePlan::full(self.header.decoded_len()),
            &mut |_, bytes| {
                acc.add(bytes);
                Ok(())
            },
            &mut |_| {},
        )?;
        Ok(acc.finish())
    }
}

impl ArrayFile for VolpFile {
    fn format_name(&self) -> &'static str {
        "volp"
    }

    /// The one array: unnamed, the stored dtype, shape `[levels, lat, lon]`, the header's
    /// scale, offset and metadata as attributes.
    fn arrays(&self) -> Result<Vec<ArrayInfo>> {
        let mut info = array_info(&self.header, self.header.shape.to_vec(), false);
        info.name = None;
        Ok(vec![info])
    }

    fn validate(&self) -> Report {
        VolpFile::validate(self)
    }

    /// Stream the volume or `req.region` of it (decoding stops after the region; frames wholly
    /// before it that declare their size are skipped). `req.element` must be `None`: a VOLP file
    /// holds one array.
    fn stream(&self, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        if let Some(name) = &req.element {
            return Err(Error::usage(format!(
                "a VOLP file holds one unnamed array; there is no element {name:?}"
            )));
        }
        req.check_honoured(&crate::VolpFormat)?;
        stream_volume(&self.input, &self.header, self.body_offset, req, sink)
    }
}

// The reader API every format shares (no trait import needed).
rasterpack_common::reader_api!(VolpFile, crate::VolpFormat, delegate);
