//! Bounds-checked cursors over byte slices. Every read either returns the value or an
//! [`Error`] naming the field and the absolute offset; nothing here can panic.

use crate::error::{Error, Result};

/// A forward cursor over a byte slice, reporting absolute file offsets (`base + pos`).
///
/// Field names passed to the read methods end up in truncation messages, so name the field
/// as the spec does ("header length", "tile index").
#[derive(Debug, Clone)]
pub struct ByteReader<'a> {
    data: &'a [u8],
    pos: usize,
    base: u64,
}

macro_rules! int_readers {
    ($($le:ident $be:ident $t:ty;)*) => {$(
        #[doc = concat!("Read a little-endian `", stringify!($t), "`.")]
        pub fn $le(&mut self, field: &str) -> Result<$t> {
            Ok(<$t>::from_le_bytes(self.array(field)?))
        }
        #[doc = concat!("Read a big-endian `", stringify!($t), "`.")]
        pub fn $be(&mut self, field: &str) -> Result<$t> {
            Ok(<$t>::from_be_bytes(self.array(field)?))
        }
    )*};
}

impl<'a> ByteReader<'a> {
    /// A reader over `data`, whose first byte sits at absolute offset 0.
    pub fn new(data: &'a [u8]) -> Self {
        Self::at(data, 0)
    }

    /// A reader over `data`, whose first byte sits at absolute offset `base` in the file.
    pub fn at(data: &'a [u8], base: u64) -> Self {
        ByteReader { data, pos: 0, base }
    }

    /// Absolute offset of the next byte to be read.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Position relative to the start of the slice.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes left to read.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// True when every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The bytes not yet read.
    pub fn rest(&self) -> &'a [u8] {
        &self.data[self.pos..]
    }

    /// Move to a slice-relative position; fails past the end.
    pub fn seek(&mut self, pos: usize, field: &str) -> Result<()> {
        if pos > self.data.len() {
            return Err(Error::truncated(field, self.base + pos as u64, 0, 0));
        }
        self.pos = pos;
        Ok(())
    }

    /// Take `n` bytes as a slice.
    pub fn bytes(&mut self, n: usize, field: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(Error::truncated(
                field,
                self.offset(),
                n as u64,
                self.remaining() as u64,
            ));
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// Take `n` bytes where `n` came from the file as a u64 (checked before any use).
    pub fn bytes_u64(&mut self, n: u64, field: &str) -> Result<&'a [u8]> {
        match usize::try_from(n) {
            Ok(n) => self.bytes(n, field),
            Err(_) => Err(Error::truncated(field, self.offset(), n, self.remaining() as u64)),
        }
    }

    /// Skip `n` bytes.
    pub fn skip(&mut self, n: usize, field: &str) -> Result<()> {
        self.bytes(n, field).map(|_| ())
    }

    /// Skip to the next multiple of `align` in *absolute* offsets (an `align` of 0 or 1 skips
    /// nothing).
    pub fn align_to(&mut self, align: u64, field: &str) -> Result<()> {
        if align <= 1 {
            return Ok(());
        }
        let rem = self.offset() % align;
        if rem != 0 {
            self.skip((align - rem) as usize, field)?;
        }
        Ok(())
    }

    /// Take `N` bytes as an array.
    pub fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N]> {
        let b = self.bytes(N, field)?;
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        Ok(out)
    }

    /// Read one byte.
    pub fn u8(&mut self, field: &str) -> Result<u8> {
        Ok(self.bytes(1, field)?[0])
    }

    /// Read one byte as a signed value.
    pub fn i8(&mut self, field: &str) -> Result<i8> {
        Ok(self.u8(field)? as i8)
    }

    int_readers! {
        u16_le u16_be u16;
        i16_le i16_be i16;
        u32_le u32_be u32;
        i32_le i32_be i32;
        u64_le u64_be u64;
        i64_le i64_be i64;
        f32_le f32_be f32;
        f64_le f64_be f64;
    }
}

/// Bounds-checked slice `data[offset .. offset + len]` with u64 arithmetic that cannot wrap.
pub fn slice_at<'a>(data: &'a [u8], offset: u64, len: u64, field: &str) -> Result<&'a [u8]> {
    let available = (data.len() as u64).saturating_sub(offset);
    let end = offset.checked_add(len);
    match end {
        Some(end) if end <= data.len() as u64 => Ok(&data[offset as usize..end as usize]),
        _ => Err(Error::truncated(field, offset, len, available)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_endians_and_reports_offsets() {
        let data = [1u8, 0, 0, 0, 0, 0, 0, 2, 9];
        let mut r = ByteReader::at(&data, 100);
        assert_eq!(r.u32_le("a").unwrap(), 1);
        assert_eq!(r.u32_be("b").unwrap(), 2);
        assert_eq!(r.offset(), 108);
        let err = r.u16_le("tail").unwrap_err();
        assert_eq!(err.offset, Some(108));
        assert!(err.message.contains("tail"), "{}", err.message);
        // A failed read consumes nothing.
        assert_eq!(r.u8("last").unwrap(), 9);
    }

    #[test]
    fn slice_at_never_wraps() {
        let data = [0u8; 16];
        assert!(slice_at(&data, u64::MAX, 2, "x").is_err());
        assert!(slice_at(&data, 8, u64::MAX, "x").is_err());
        assert_eq!(slice_at(&data, 8, 8, "x").unwrap().len(), 8);
        assert!(slice_at(&data, 9, 8, "x").is_err());
    }

    #[test]
    fn huge_u64_length_is_an_error_not_a_panic() {
        let data = [0u8; 4];
        let mut r = ByteReader::new(&data);
        assert!(r.bytes_u64(u64::MAX, "blob").is_err());
        r.u8("first").unwrap();
        r.align_to(8, "pad").unwrap_err();
        // An alignment of 0 (say, read from a file) skips nothing instead of dividing by zero.
        r.align_to(0, "pad").unwrap();
        assert_eq!(r.offset(), 1);
    }
}
