//! Short forms of the public API for tests that work on byte images.
#![allow(dead_code)]

use rasterpack_volp::{
    ArrayRequest, DType, Findings, Input, Limits, NdArray, Result, VolpFile, VolpHeader, VolpWriteOptions, VolpWriter,
};
use serde_json::{Map, Value};

/// Every finding of a byte image.
pub fn validate(bytes: &[u8]) -> Findings {
    validate_with(bytes, &Limits::default())
}

/// Every finding of a byte image, with these limits.
pub fn validate_with(bytes: &[u8], limits: &Limits) -> Findings {
    VolpFile::validate_input(&Input::from_bytes("t.volp", bytes.to_vec()), limits).findings
}

/// The stored values of a byte image.
pub fn decode(bytes: &[u8]) -> Result<NdArray> {
    read(bytes, &ArrayRequest::default())
}

/// A read of a byte image.
pub fn read(bytes: &[u8], req: &ArrayRequest) -> Result<NdArray> {
    VolpFile::from_input(Input::from_bytes("t.volp", bytes.to_vec()), req.limits)?.read(req)
}

/// The accepted header of a byte image.
pub fn header(bytes: &[u8]) -> Result<VolpHeader> {
    Ok(VolpFile::from_bytes(bytes.to_vec())?.header().clone())
}

/// A VOLP image of stored little-endian `data`.
pub fn encode(
    dtype: DType,
    shape: [u64; 3],
    data: &[u8],
    scale: f64,
    offset: f64,
    metadata: &Map<String, Value>,
    level: i32,
) -> Result<Vec<u8>> {
    let array = NdArray::new(dtype, shape.to_vec(), data.to_vec())?;
    let opts = VolpWriteOptions {
        scale: Some(scale),
        offset: Some(offset),
        metadata: metadata.clone(),
        level,
    };
    VolpWriter::encode(&array, &opts)
}

/// `VOLP`, the header length, the header, the body.
pub fn file(header: &[u8], body: &[u8]) -> Vec<u8> {
    let mut out = b"VOLP".to_vec();
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(header);
    out.extend_from_slice(body);
    out
}
