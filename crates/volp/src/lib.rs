//! VOLP (Volume Pack): a `VOLP` magic, a u32 header length, a JSON header and a zstd body
//! holding a `[levels, lat, lon]` tensor.
//!
//! Follows `specs/volp.md` and the VOLP decisions of `specs/ERRATA.md`; see
//! `docs/formats/volp.md` for what is accepted and the finding codes.
//!
//! Layers: [`raw`] (on-disk layout) -> [`parse`] (checked bytes -> structures, bounded zstd)
//! -> [`validate`] (all findings) -> [`model`] (header, volume, physical values) -> [`write`].
#![forbid(unsafe_code)]

pub mod json;
pub mod model;
pub mod parse;
pub mod raw;
#[doc(hidden)]
pub mod samples;
pub mod validate;
pub mod write;

mod format;

pub use format::VolpFormat;
pub use model::{stats, to_physical, to_physical_le_bytes, Header, Metadata, Stats, VolpFile, Volume, DTYPES};
pub use validate::{validate, validate_full, Validation};
pub use write::{encode, DEFAULT_LEVEL};

use rasterpack_common::{Error, ErrorKind, Limits, Result};

/// Read the prefix and header of a file and apply every header rule; the first broken rule is
/// the error.
pub fn read_header(data: &[u8], limits: &Limits) -> Result<VolpFile> {
    let s = parse::parse_structure(data, limits)?;
    if let Some(e) = s.check.errors.first() {
        return Err(e.clone());
    }
    s.file()
        .ok_or_else(|| Error::invalid_at("volp.header.invalid", Some(8), "header rules failed"))
}

/// Decode a whole file with the default limits.
pub fn decode(data: &[u8]) -> Result<Volume> {
    decode_with_limits(data, &Limits::default())
}

/// Decode a whole file: header rules, then the body straight into one buffer of exactly the
/// expected size (at most 256 MiB, and within `limits`).
pub fn decode_with_limits(data: &[u8], limits: &Limits) -> Result<Volume> {
    let file = read_header(data, limits)?;
    let expected = file.header.decoded_len();
    let body = data.get(file.body_offset as usize..).unwrap_or(&[]);
    let frames = parse::plan_body(body, file.body_offset, expected)?;
    let n = limits
        .check_alloc(expected, "decoded body", Some(file.body_offset))
        .map_err(crate::parse::alloc_limit)?;
    if expected > limits.max_array_bytes {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            "volp.limit.array",
            Some(file.body_offset),
            format!(
                "decoded body of {expected} bytes exceeds the configured array limit of {} bytes",
                limits.max_array_bytes
            ),
        ));
    }
    let mut out = vec![0u8; n];
    parse::decode_frames(&frames, file.body_offset, &mut out)?;
    Ok(Volume {
        header: file.header,
        data: out,
    })
}
