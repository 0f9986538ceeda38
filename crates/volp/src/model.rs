//! What a VOLP file means: the accepted header with its defaults, the metadata, physical values
//! and statistics of the stored values.

use rasterpack_common::DType;
use serde_json::{Map, Value};

/// The element types VOLP defines (spec section 3); nothing else is accepted.
pub const VOLP_DTYPES: [DType; 5] = [DType::U8, DType::I16, DType::I32, DType::F32, DType::F64];

/// The common metadata keys of spec section 2 (`bbox`, `levels`, `variable`, `valid_time`), as
/// found in the header. They are shown, never checked against the shape (the spec's own example
/// has 3 `levels` for 32 levels).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VolpMetadata {
    /// `bbox`: `{west, south, east, north, bottom, top}` by the spec.
    pub bbox: Option<Value>,
    /// `levels`: the vertical coordinate of each level by the spec.
    pub levels: Option<Value>,
    /// `variable`: the quantity's name by the spec.
    pub variable: Option<Value>,
    /// `valid_time`: an ISO 8601 UTC time by the spec.
    pub valid_time: Option<Value>,
}

impl VolpMetadata {
    /// Present keys in spec order.
    pub fn entries(&self) -> Vec<(&'static str, &Value)> {
        [
            ("bbox", &self.bbox),
            ("levels", &self.levels),
            ("variable", &self.variable),
            ("valid_time", &self.valid_time),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| (k, v)))
        .collect()
    }

    /// `variable`, when it is a string.
    pub fn variable_name(&self) -> Option<&str> {
        self.variable.as_ref().and_then(Value::as_str)
    }

    /// `valid_time`, when it is a string.
    pub fn valid_time_text(&self) -> Option<&str> {
        self.valid_time.as_ref().and_then(Value::as_str)
    }

    /// `levels`, when it is an array of numbers.
    pub fn level_values(&self) -> Option<Vec<f64>> {
        self.levels.as_ref()?.as_array()?.iter().map(Value::as_f64).collect()
    }

    /// `bbox` as `[west, south, east, north, bottom, top]`, when it has all six as numbers.
    pub fn bbox_values(&self) -> Option<[f64; 6]> {
        let b = self.bbox.as_ref()?.as_object()?;
        let mut out = [0.0; 6];
        for (slot, key) in out.iter_mut().zip(["west", "south", "east", "north", "bottom", "top"]) {
            *slot = b.get(key)?.as_f64()?;
        }
        Some(out)
    }
}

/// A header that passed every rule, with the documented defaults applied (a missing `scale`
/// is 1.0, `offset` 0.0, `version` 1).
#[derive(Debug, Clone, PartialEq)]
pub struct VolpHeader {
    /// Effective version: missing, `null` or < 1 become 1; larger versions decode the same way.
    /// A version beyond u64 (`1e400`) is `u64::MAX` here; [`VolpHeader::version_text`] says it.
    pub version: u64,
    /// The effective version as the header writes it (`"1"` for the defaults, `"1e400"` kept
    /// as itself), for reports: a number too large for `version` is never shown as u64::MAX.
    pub version_text: String,
    /// Element type of the stored values.
    pub dtype: DType,
    /// `[levels, lat, lon]`, each >= 1: the C-order shape of the stored tensor.
    pub shape: [u64; 3],
    /// Effective scale (1.0 when missing or not a finite number).
    pub scale: f64,
    /// Effective offset (0.0 when missing or not a finite number).
    pub offset: f64,
    /// The compression as written (any case of `zstd`), or `zstd` when the key is missing.
    pub compression: String,
    /// The common metadata keys.
    pub metadata: VolpMetadata,
    /// Keys the spec does not define, in file order (ignored for decoding, shown by inspect).
    pub unknown: Map<String, Value>,
    /// The same keys with their values as compact JSON text, numbers exactly as written: what
    /// a conversion to VOLP carries into the new header.
    pub unknown_json: Vec<(String, String)>,
}

impl VolpHeader {
    /// The version for JSON reports: a number when it fits `u64` and is written as an integer,
    /// else the text as written (the rule for integers beyond 64 bits, docs/cli.md).
    pub fn version_json(&self) -> Value {
        match self.version_text.parse::<u64>() {
            Ok(v) => Value::from(v),
            Err(_) if self.version == u64::MAX => Value::from(self.version_text.clone()),
            Err(_) => Value::from(self.version),
        }
    }

    /// Number of stored values (`product(shape)`).
    pub fn elements(&self) -> u64 {
        // Checked when the header was accepted: the product fits and is <= 256 MiB.
        self.shape.iter().product()
    }

    /// `product(shape) * size(dtype)`: the exact decoded body length.
    pub fn decoded_len(&self) -> u64 {
        self.elements() * self.dtype.size() as u64
    }

    /// The physical value of a stored value: `f64(stored) * scale + offset`.
    ///
    /// Rust never contracts a multiply and an add into an FMA, so this is the two-rounding
    /// result the reference implementations compute, bit for bit.
    pub fn physical(&self, stored: f64) -> f64 {
        stored * self.scale + self.offset
    }
}

/// Calls `f` with each stored value of `bytes` (little-endian `dtype` values) as f64.
fn for_each_value(dtype: DType, bytes: &[u8], mut f: impl FnMut(f64)) {
    match dtype {
        DType::U8 => bytes.iter().for_each(|&b| f(f64::from(b))),
        DType::I16 => bytes
            .chunks_exact(2)
            .for_each(|c| f(f64::from(i16::from_le_bytes([c[0], c[1]])))),
        DType::I32 => bytes
            .chunks_exact(4)
            .for_each(|c| f(f64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))),
        DType::F32 => bytes
            .chunks_exact(4)
            .for_each(|c| f(f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))),
        DType::F64 => bytes
            .chunks_exact(8)
            .for_each(|c| f(f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))),
        _ => {}
    }
}

/// Physical values of the stored little-endian `dtype` values in `stored`, as little-endian f64
/// bytes written over `out` (which is resized to 8 bytes per value).
pub(crate) fn physical_le_bytes(dtype: DType, scale: f64, offset: f64, stored: &[u8], out: &mut Vec<u8>) {
    let n = stored.len() / dtype.size();
    out.resize(n * 8, 0);
    let dst = out.chunks_exact_mut(8);
    // One loop per dtype so each one vectorises.
    match dtype {
        DType::U8 => dst
            .zip(stored)
            .for_each(|(o, &b)| o.copy_from_slice(&(f64::from(b) * scale + offset).to_le_bytes())),
        DType::I16 => dst.zip(stored.chunks_exact(2)).for_each(|(o, c)| {
            o.copy_from_slice(&(f64::from(i16::from_le_bytes([c[0], c[1]])) * scale + offset).to_le_bytes())
        }),
        DType::I32 => dst.zip(stored.chunks_exact(4)).for_each(|(o, c)| {
            let v = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            o.copy_from_slice(&(f64::from(v) * scale + offset).to_le_bytes())
        }),
        DType::F32 => dst.zip(stored.chunks_exact(4)).for_each(|(o, c)| {
            let v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            o.copy_from_slice(&(f64::from(v) * scale + offset).to_le_bytes())
        }),
        DType::F64 => dst.zip(stored.chunks_exact(8)).for_each(|(o, c)| {
            let v = f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            o.copy_from_slice(&(v * scale + offset).to_le_bytes())
        }),
        _ => out.clear(),
    }
}

/// Summary statistics of stored values (NaNs counted apart, infinities included), gathered a
/// window at a time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VolpStats {
    /// Values seen.
    pub count: u64,
    /// NaN values among them.
    pub nan_count: u64,
    /// Smallest non-NaN value (`None` when every value is NaN).
    pub min: Option<f64>,
    /// Largest non-NaN value.
    pub max: Option<f64>,
    /// Mean of the non-NaN values.
    pub mean: Option<f64>,
}

/// Accumulates [`VolpStats`] over stored values handed over in pieces.
#[derive(Debug, Clone)]
pub(crate) struct StatsAccumulator {
    dtype: DType,
    count: u64,
    nan: u64,
    min: f64,
    max: f64,
    sum: f64,
}

impl StatsAccumulator {
    pub(crate) fn new(dtype: DType) -> StatsAccumulator {
        StatsAccumulator {
            dtype,
            count: 0,
            nan: 0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            sum: 0.0,
        }
    }

    /// Add the stored values in `bytes` (whole values).
    pub(crate) fn add(&mut self, bytes: &[u8]) {
        let (mut count, mut nan, mut min, mut max, mut sum) = (0u64, 0u64, self.min, self.max, self.sum);
        for_each_value(self.dtype, bytes, |v| {
            count += 1;
            if v.is_nan() {
                nan += 1;
            } else {
                min = min.min(v);
                max = max.max(v);
                sum += v;
            }
        });
        self.count += count;
        self.nan += nan;
        (self.min, self.max, self.sum) = (min, max, sum);
    }

    pub(crate) fn finish(&self) -> VolpStats {
        let n = self.count - self.nan;
        VolpStats {
            count: self.count,
            nan_count: self.nan,
            min: (n > 0).then_some(self.min),
            max: (n > 0).then_some(self.max),
            mean: (n > 0).then(|| self.sum / n as f64),
        }
    }
}
