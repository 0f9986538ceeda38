//! An n-dimensional array in memory: what every format reads into and writes from, so the CLI
//! can convert between any two formats without knowing either.

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::stream::{copy_block_into_window, ArrayInfo, ArraySink, MemorySink, Region};

/// Element types rasterpack moves between formats. All data is little-endian in memory buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    Bool,
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    U64,
    I64,
    F32,
    F64,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 => 8,
        }
    }

    /// numpy's name (`float32`), also used by VOLP headers and reports.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::U16 => "uint16",
            DType::I16 => "int16",
            DType::U32 => "uint32",
            DType::I32 => "int32",
            DType::U64 => "uint64",
            DType::I64 => "int64",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }

    pub fn from_name(name: &str) -> Option<DType> {
        Some(match name {
            "bool" => DType::Bool,
            "uint8" => DType::U8,
            "int8" => DType::I8,
            "uint16" => DType::U16,
            "int16" => DType::I16,
            "uint32" => DType::U32,
            "int32" => DType::I32,
            "uint64" => DType::U64,
            "int64" => DType::I64,
            "float32" => DType::F32,
            "float64" => DType::F64,
            _ => return None,
        })
    }

    /// The numpy `descr` string for little-endian storage (`<f4`, `|u1`).
    pub fn npy_descr(self) -> &'static str {
        match self {
            DType::Bool => "|b1",
            DType::U8 => "|u1",
            DType::I8 => "|i1",
            DType::U16 => "<u2",
            DType::I16 => "<i2",
            DType::U32 => "<u4",
            DType::I32 => "<i4",
            DType::U64 => "<u8",
            DType::I64 => "<i8",
            DType::F32 => "<f4",
            DType::F64 => "<f8",
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }
}

/// A dense array in C order (last axis fastest), values little-endian in `data`.
#[derive(Debug, Clone, PartialEq)]
pub struct NdArray {
    pub dtype: DType,
    pub shape: Vec<u64>,
    pub data: Vec<u8>,
    /// Name of the element/table/channel it came from, when the source names it.
    pub name: Option<String>,
    /// Source metadata (scale, offset, units, the source's summary...), carried into formats
    /// that can keep it.
    pub attrs: Map<String, Value>,
}

impl NdArray {
    /// Build an array, checking that `data` holds exactly `product(shape) * dtype.size()` bytes.
    pub fn new(dtype: DType, shape: Vec<u64>, data: Vec<u8>) -> Result<NdArray> {
        let expected =
            byte_len(dtype, &shape).ok_or_else(|| Error::usage(format!("array shape {shape:?} overflows")))?;
        if expected != data.len() as u64 {
            return Err(Error::usage(format!(
                "array of shape {shape:?} and dtype {} needs {expected} bytes, got {}",
                dtype.name(),
                data.len()
            )));
        }
        Ok(NdArray {
            dtype,
            shape,
            data,
            name: None,
            attrs: Map::new(),
        })
    }

    pub fn len(&self) -> u64 {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of the part of the array inside `region` (C axis order).
    pub fn region(&self, region: &Region) -> Result<NdArray> {
        region.check_within(&self.shape)?;
        let mut sink = MemorySink::new(Limits::unlimited());
        sink.begin(&ArrayInfo {
            dtype: self.dtype,
            shape: region.shape(),
            name: self.name.clone(),
            attrs: self.attrs.clone(),
        })?;
        copy_block_into_window(
            &Region::full(&self.shape),
            &self.data,
            self.dtype.size(),
            region,
            &mut sink,
        )?;
        sink.into_array()
    }

    /// Values as f64 (for previews and physical conversions); lossy for 64-bit integers.
    pub fn to_f64(&self) -> Vec<f64> {
        let d = &self.data;
        match self.dtype {
            DType::Bool | DType::U8 => d.iter().map(|&v| v as f64).collect(),
            DType::I8 => d.iter().map(|&v| v as i8 as f64).collect(),
            DType::U16 => d
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]) as f64)
                .collect(),
            DType::I16 => d
                .chunks_exact(2)
                .map(|c| i16::from_le_bytes([c[0], c[1]]) as f64)
                .collect(),
            DType::U32 => d
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
                .collect(),
            DType::I32 => d
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
                .collect(),
            DType::F32 => d
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
                .collect(),
            DType::U64 => d
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()) as f64)
                .collect(),
            DType::I64 => d
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default()) as f64)
                .collect(),
            DType::F64 => d
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect(),
        }
    }
}

/// `product(shape) * dtype.size()` with checked arithmetic; `None` on overflow.
pub fn byte_len(dtype: DType, shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(dtype.size() as u64, |acc, &d| acc.checked_mul(d))
}
