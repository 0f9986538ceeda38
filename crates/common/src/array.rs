//! An n-dimensional array in memory: what every format reads into and writes from, so the CLI
//! can convert between any two formats without knowing either.

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::stream::{copy_block_into_window, ArrayInfo, ArraySink, MemorySink, Region};

/// Element types rasterpack moves between formats. All data is little-endian in memory buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// numpy `bool`: one byte, 0 or 1.
    Bool,
    /// numpy `uint8`.
    U8,
    /// numpy `int8`.
    I8,
    /// numpy `uint16`.
    U16,
    /// numpy `int16`.
    I16,
    /// numpy `uint32`.
    U32,
    /// numpy `int32`.
    I32,
    /// numpy `uint64`.
    U64,
    /// numpy `int64`.
    I64,
    /// numpy `float32` (IEEE 754 binary32).
    F32,
    /// numpy `float64` (IEEE 754 binary64).
    F64,
    /// numpy `float16` (IEEE 754 binary16).
    F16,
    /// numpy `complex64`: a binary32 real part, then a binary32 imaginary part.
    C64,
    /// numpy `complex128`: a binary64 real part, then a binary64 imaginary part.
    C128,
}

impl DType {
    /// Bytes per value.
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 | DType::F16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 | DType::C64 => 8,
            DType::C128 => 16,
        }
    }

    /// Bytes of each part that is byte-swapped on its own between byte orders: the value's size,
    /// except for complex values, whose real and imaginary halves swap separately.
    pub fn swap_unit(self) -> usize {
        match self {
            DType::C64 => 4,
            DType::C128 => 8,
            d => d.size(),
        }
    }

    /// Turn whole big-endian values into little-endian ones in place (`bytes` holds whole values).
    pub fn swap_to_le(self, bytes: &mut [u8]) {
        let unit = self.swap_unit();
        if unit > 1 {
            bytes.chunks_exact_mut(unit).for_each(|v| v.reverse());
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
            DType::F16 => "float16",
            DType::C64 => "complex64",
            DType::C128 => "complex128",
        }
    }

    /// The dtype of a numpy name (`"float32"`), the inverse of [`DType::name`].
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
            "float16" => DType::F16,
            "complex64" => DType::C64,
            "complex128" => DType::C128,
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
            DType::F16 => "<f2",
            DType::C64 => "<c8",
            DType::C128 => "<c16",
        }
    }

    /// True for the real floating-point types (`float16`, `float32`, `float64`).
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::F32 | DType::F64)
    }

    /// True for `complex64` and `complex128`: values that have no single real number, so
    /// statistics, scale/offset and "physical" values do not apply to them.
    pub fn is_complex(self) -> bool {
        matches!(self, DType::C64 | DType::C128)
    }
}

/// A dense array in C order (last axis fastest), values little-endian in `data`.
#[derive(Debug, Clone, PartialEq)]
pub struct NdArray {
    /// Element type of the values.
    pub dtype: DType,
    /// Extent per axis, in C order (the `.npy` axis order).
    pub shape: Vec<u64>,
    /// The values, little-endian, C order: exactly `product(shape) * dtype.size()` bytes.
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

    /// Number of values (the product of the shape).
    pub fn len(&self) -> u64 {
        self.shape.iter().product()
    }

    /// True when the array holds no value.
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

    /// Values as f64 (for previews and physical conversions); lossy for 64-bit integers, exact
    /// for every other real type (`float16` included). Complex arrays give two numbers per value,
    /// the real part then the imaginary part.
    pub fn to_f64(&self) -> Vec<f64> {
        let d = &self.data;
        match self.dtype {
            DType::F16 => d
                .chunks_exact(2)
                .map(|c| f16_to_f64(u16::from_le_bytes([c[0], c[1]])))
                .collect(),
            DType::C64 => d
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
                .collect(),
            DType::C128 => d
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect(),
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

/// A Rust type that holds one value of a [`DType`]: what typed access ([`NdArray::as_slice`],
/// [`NdArray::to_vec`], [`NdArray::from_vec`]) works with. Implemented for `u8`..`u64`,
/// `i8`..`i64`, `f32` and `f64`; `bool` arrays read as `u8` (0 or 1).
pub trait Element: bytemuck::Pod + sealed::Sealed {
    /// The dtype this type holds.
    const DTYPE: DType;
    /// The value from its little-endian bytes (`bytes.len() == DTYPE.size()`).
    fn from_le_slice(bytes: &[u8]) -> Self;
    /// Append the value's little-endian bytes.
    fn extend_le(self, out: &mut Vec<u8>);
    /// Whether arrays of `dtype` can be viewed as this type.
    fn holds(dtype: DType) -> bool {
        dtype == Self::DTYPE
    }
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn from_le_slice(bytes: &[u8]) -> Self {
                let mut le = [0u8; std::mem::size_of::<$t>()];
                le.copy_from_slice(bytes);
                <$t>::from_le_bytes(le)
            }
            fn extend_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn holds(dtype: DType) -> bool {
                dtype == DType::$d || (DType::$d == DType::U8 && dtype == DType::Bool)
            }
        }
    )*};
}
element!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, u64 => U64, i64 => I64, f32 => F32, f64 => F64);

impl NdArray {
    /// An array of `shape` from values in C order (last axis fastest).
    pub fn from_vec<T: Element>(shape: Vec<u64>, values: Vec<T>) -> Result<NdArray> {
        let mut data = Vec::with_capacity(values.len() * T::DTYPE.size());
        for v in values {
            v.extend_le(&mut data);
        }
        NdArray::new(T::DTYPE, shape, data)
    }

    fn check_holds<T: Element>(&self) -> Result<()> {
        if T::holds(self.dtype) {
            Ok(())
        } else {
            Err(Error::new(
                crate::ErrorKind::Usage,
                "array.dtype_mismatch",
                None,
                format!(
                    "the array holds {} values, not {} (use the matching Rust type, or to_f64)",
                    self.dtype.name(),
                    T::DTYPE.name()
                ),
            ))
        }
    }

    /// The values as a slice of `T`, without copying: a `array.dtype_mismatch` error when `T` is
    /// not the array's dtype. Needs a little-endian host and a buffer aligned for `T` (every
    /// allocator rasterpack runs on gives that; otherwise an error tells to use
    /// [`NdArray::to_vec`], which always works).
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        self.check_holds::<T>()?;
        if cfg!(target_endian = "big") {
            return Err(Error::usage("as_slice needs a little-endian host; use to_vec"));
        }
        bytemuck::try_cast_slice(&self.data)
            .map_err(|e| Error::usage(format!("cannot view the array as {}: {e}; use to_vec", T::DTYPE.name())))
    }

    /// The values as a `Vec<T>` (a copy, on any host): a `array.dtype_mismatch` error when `T`
    /// is not the array's dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.check_holds::<T>()?;
        Ok(self.data.chunks_exact(T::DTYPE.size()).map(T::from_le_slice).collect())
    }

    /// The array as an `ndarray::ArrayD<T>` in C order, with the same shape (and so the same axis
    /// order as `.npy` output): a `array.dtype_mismatch` error when `T` is not the array's dtype.
    #[cfg(feature = "ndarray")]
    pub fn to_ndarray<T: Element>(&self) -> Result<ndarray::ArrayD<T>> {
        let shape = self
            .shape
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<std::result::Result<Vec<usize>, _>>()
            .map_err(|_| Error::usage("array shape does not fit usize"))?;
        ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&shape), self.to_vec::<T>()?)
            .map_err(|e| Error::usage(format!("array shape {:?}: {e}", self.shape)))
    }

    /// An array from an `ndarray` array of any layout (values are taken in logical C order).
    #[cfg(feature = "ndarray")]
    pub fn from_ndarray<T: Element, D: ndarray::Dimension>(array: &ndarray::ArrayRef<T, D>) -> Result<NdArray> {
        let shape = array.shape().iter().map(|&d| d as u64).collect();
        NdArray::from_vec(shape, array.iter().copied().collect())
    }
}

/// The value of IEEE 754 binary16 bits, exactly (every binary16 value is a binary64 value). NaN
/// keeps its sign and payload (shifted into the wider significand, as a hardware conversion does).
pub fn f16_to_f64(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = (bits >> 10) & 0x1f;
    let frac = u64::from(bits & 0x3ff);
    match exp {
        // Subnormal (and zero): frac x 2^-24, exact in binary64.
        0 => sign * (frac as f64) * f64::from_bits(0x3e70_0000_0000_0000),
        0x1f => f64::from_bits((u64::from(bits & 0x8000) << 48) | 0x7ff0_0000_0000_0000 | (frac << 42)),
        e => f64::from_bits((u64::from(bits & 0x8000) << 48) | ((u64::from(e) + 1008) << 52) | (frac << 42)),
    }
}

/// `product(shape) * dtype.size()` with checked arithmetic; `None` on overflow.
pub fn byte_len(dtype: DType, shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(dtype.size() as u64, |acc, &d| acc.checked_mul(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_access_checks_the_dtype() {
        let a = NdArray::from_vec(vec![2, 3], vec![1.5f32, -2.0, 0.0, 4.25, f32::NAN, 7.0]).unwrap();
        assert_eq!(a.dtype, DType::F32);
        assert_eq!(a.to_vec::<f32>().unwrap()[3], 4.25);
        assert_eq!(a.as_slice::<f32>().unwrap()[..2], [1.5, -2.0]);
        let err = a.to_vec::<f64>().unwrap_err();
        assert_eq!(err.code, "array.dtype_mismatch");
        assert!(err.message.contains("float32"), "{}", err.message);
        assert!(a.as_slice::<i32>().is_err());
        let b = NdArray::new(DType::Bool, vec![3], vec![1, 0, 1]).unwrap();
        assert_eq!(b.as_slice::<u8>().unwrap(), [1, 0, 1]);
        assert!(
            NdArray::from_vec(vec![4], vec![1u16, 2, 3]).is_err(),
            "shape and values disagree"
        );
    }

    #[cfg(feature = "ndarray")]
    #[test]
    fn ndarray_round_trip_in_c_order() {
        let a = NdArray::from_vec(vec![2, 3], (0..6).map(|v| v as i16).collect()).unwrap();
        let nd = a.to_ndarray::<i16>().unwrap();
        assert_eq!(nd.shape(), [2, 3]);
        assert_eq!(nd[[1, 0]], 3);
        let t = nd.t();
        let back = NdArray::from_ndarray(&t).unwrap();
        assert_eq!(back.shape, vec![3, 2]);
        assert_eq!(back.to_vec::<i16>().unwrap(), vec![0, 3, 1, 4, 2, 5]);
    }
}
