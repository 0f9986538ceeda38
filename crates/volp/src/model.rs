//! The friendly API: a parsed header, a decoded volume, physical values and statistics.

use rasterpack_common::DType;
use serde_json::{Map, Value};

/// The element types VOLP defines (spec section 3); nothing else is accepted.
pub const DTYPES: [DType; 5] = [DType::U8, DType::I16, DType::I32, DType::F32, DType::F64];

/// The common metadata keys of spec section 2, shown as found (never checked against the shape).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata {
    pub bbox: Option<Value>,
    pub levels: Option<Value>,
    pub variable: Option<Value>,
    pub valid_time: Option<Value>,
}

impl Metadata {
    /// Present keys in spec order.
    pub fn entries(&self) -> Vec<(&'static str, &Value)> {
        let mut out = Vec::new();
        for (k, v) in [
            ("bbox", &self.bbox),
            ("levels", &self.levels),
            ("variable", &self.variable),
            ("valid_time", &self.valid_time),
        ] {
            if let Some(v) = v {
                out.push((k, v));
            }
        }
        out
    }
}

/// A header that passed every rule, with the ERRATA defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// Effective version: missing, `null` or < 1 become 1; larger versions decode the same way.
    pub version: u64,
    pub dtype: DType,
    /// `[levels, lat, lon]`, each >= 1.
    pub shape: [u64; 3],
    /// Effective scale (1.0 when missing or not a finite number).
    pub scale: f64,
    /// Effective offset (0.0 when missing or not a finite number).
    pub offset: f64,
    /// The compression as written (any case of `zstd`), or `zstd` when the key is missing.
    pub compression: String,
    pub metadata: Metadata,
    /// Keys the spec does not define, in file order (ignored for decoding, shown by inspect).
    pub unknown: Map<String, Value>,
}

impl Header {
    pub fn elements(&self) -> u64 {
        // Checked when the header was accepted: the product fits and is <= 256 MiB.
        self.shape.iter().product()
    }

    /// `product(shape) * size(dtype)`: the exact decoded body length.
    pub fn decoded_len(&self) -> u64 {
        self.elements() * self.dtype.size() as u64
    }
}

/// Where the parts of a file are, plus its accepted header.
#[derive(Debug, Clone, PartialEq)]
pub struct VolpFile {
    pub header: Header,
    /// Declared header length (bytes 4..8).
    pub header_len: u32,
    /// Offset of the first body byte (8 + header_len).
    pub body_offset: u64,
    /// Compressed body length: everything after the header.
    pub body_len: u64,
    /// The whole header as JSON, in file order.
    pub header_json: Map<String, Value>,
}

/// A decoded volume: stored values, little-endian, C order over `header.shape`.
#[derive(Debug, Clone, PartialEq)]
pub struct Volume {
    pub header: Header,
    pub data: Vec<u8>,
}

macro_rules! for_each_value {
    ($dtype:expr, $data:expr, |$v:ident| $body:expr) => {
        match $dtype {
            DType::U8 => $data.iter().for_each(|&b| {
                let $v = b as f64;
                $body
            }),
            DType::I16 => $data.chunks_exact(2).for_each(|c| {
                let $v = i16::from_le_bytes([c[0], c[1]]) as f64;
                $body
            }),
            DType::I32 => $data.chunks_exact(4).for_each(|c| {
                let $v = i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64;
                $body
            }),
            DType::F32 => $data.chunks_exact(4).for_each(|c| {
                let $v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64;
                $body
            }),
            DType::F64 => $data.chunks_exact(8).for_each(|c| {
                let $v = f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
                $body
            }),
            _ => {}
        }
    };
}

/// Physical values `f64(stored) * scale + offset` in C order.
///
/// Rust never contracts a multiply and an add into an FMA, so this is the two-rounding
/// result the corpus sidecars hold, bit for bit.
pub fn to_physical(volume: &Volume) -> Vec<f64> {
    let (s, o) = (volume.header.scale, volume.header.offset);
    let d = &volume.data;
    match volume.header.dtype {
        DType::U8 => d.iter().map(|&b| b as f64 * s + o).collect(),
        DType::I16 => d
            .chunks_exact(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]) as f64 * s + o)
            .collect(),
        DType::I32 => d
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64 * s + o)
            .collect(),
        DType::F32 => d
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64 * s + o)
            .collect(),
        DType::F64 => d
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) * s + o)
            .collect(),
        _ => Vec::new(),
    }
}

/// Physical values as little-endian f64 bytes (what `.npy` float64 output holds).
pub fn to_physical_le_bytes(volume: &Volume) -> Vec<u8> {
    let vals = to_physical(volume);
    let mut out = Vec::with_capacity(vals.len() * 8);
    for v in vals {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Summary statistics of the stored values (NaNs counted apart, infinities included).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    pub count: u64,
    pub nan_count: u64,
    /// `None` when every value is NaN.
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub mean: Option<f64>,
}

/// One pass over the stored values.
pub fn stats(volume: &Volume) -> Stats {
    let mut count = 0u64;
    let mut nan = 0u64;
    let (mut min, mut max, mut sum) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for_each_value!(volume.header.dtype, volume.data, |v| {
        count += 1;
        if v.is_nan() {
            nan += 1;
        } else {
            min = min.min(v);
            max = max.max(v);
            sum += v;
        }
    });
    let n = count - nan;
    Stats {
        count,
        nan_count: nan,
        min: (n > 0).then_some(min),
        max: (n > 0).then_some(max),
        mean: (n > 0).then(|| sum / n as f64),
    }
}
