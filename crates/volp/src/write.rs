//! Encoding: a compact JSON header (keys in spec order, then metadata) and one zstd frame that
//! records its content size.

use rasterpack_common::{DType, Error, Result};
use serde_json::{Map, Value};

use crate::model::DTYPES;
use crate::raw::{KNOWN_KEYS, MAGIC, MAX_BODY_LEN, MAX_HEADER_LEN};

/// zstd level used when the caller has no preference.
pub const DEFAULT_LEVEL: i32 = 3;

/// Encode stored little-endian values `data` of `dtype` and `shape` (`[levels, lat, lon]`) as a
/// VOLP file. `metadata` keys (`bbox`, `levels`, `variable`, `valid_time`, or any other
/// non-reserved key) are written after the required ones.
pub fn encode(
    dtype: DType,
    shape: [u64; 3],
    data: &[u8],
    scale: f64,
    offset: f64,
    metadata: &Map<String, Value>,
    level: i32,
) -> Result<Vec<u8>> {
    if !DTYPES.contains(&dtype) {
        return Err(Error::usage(format!(
            "VOLP cannot store dtype {}: only uint8, int16, int32, float32 and float64",
            dtype.name()
        )));
    }
    if shape.contains(&0) {
        return Err(Error::usage(format!(
            "VOLP shape {shape:?} has an empty dimension: every dimension must be >= 1"
        )));
    }
    let expected =
        rasterpack_common::byte_len(dtype, &shape).ok_or_else(|| Error::usage(format!("shape {shape:?} overflows")))?;
    if expected > MAX_BODY_LEN {
        return Err(Error::usage(format!(
            "volume of {expected} bytes exceeds VOLP's 256 MiB decoded body limit; readers would refuse it"
        )));
    }
    if expected != data.len() as u64 {
        return Err(Error::usage(format!(
            "shape {shape:?} of {} needs {expected} bytes, got {}",
            dtype.name(),
            data.len()
        )));
    }
    if !scale.is_finite() || !offset.is_finite() {
        return Err(Error::usage(format!(
            "scale ({scale}) and offset ({offset}) must be finite numbers"
        )));
    }
    let mut h = Map::new();
    h.insert("version".into(), Value::from(1));
    h.insert("shape".into(), Value::from(shape.to_vec()));
    h.insert("dtype".into(), Value::from(dtype.name()));
    h.insert("compression".into(), Value::from("zstd"));
    h.insert("scale".into(), Value::from(scale));
    h.insert("offset".into(), Value::from(offset));
    for (k, v) in metadata {
        if KNOWN_KEYS[..6].contains(&k.as_str()) {
            return Err(Error::usage(format!(
                "metadata key \"{k}\" is reserved for the VOLP header itself"
            )));
        }
        h.insert(k.clone(), v.clone());
    }
    let header = serde_json::to_vec(&Value::Object(h)).map_err(|e| Error::usage(format!("header JSON: {e}")))?;
    if header.len() > MAX_HEADER_LEN as usize {
        return Err(Error::usage(format!(
            "header of {} bytes exceeds VOLP's 1 MiB limit",
            header.len()
        )));
    }
    let body = zstd::bulk::compress(data, level).map_err(|e| Error::io("zstd compression", &e))?;
    let mut out = Vec::with_capacity(8 + header.len() + body.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&body);
    Ok(out)
}
