//! Bounded zlib (RFC 1950) inflate and a reusable deflater, both on miniz_oxide.

use std::cell::RefCell;

use miniz_oxide::deflate::core::{compress_to_output, CompressorOxide, TDEFLFlush, TDEFLStatus};
use miniz_oxide::inflate::core::inflate_flags::{
    TINFL_FLAG_PARSE_ZLIB_HEADER, TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF,
};
use miniz_oxide::inflate::core::{decompress, DecompressorOxide};
use miniz_oxide::inflate::TINFLStatus;
use miniz_oxide::DataFormat;

/// Why a zlib stream was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZlibError {
    /// The stream would inflate to more than the expected size (a bomb, or a wrong size field).
    TooLong,
    /// The stream ended (Adler-32 checked) with fewer bytes than expected.
    TooShort(usize),
    /// The input ends before the end of the stream.
    Truncated,
    /// Corrupt deflate data, bad zlib header, or an Adler-32 mismatch.
    Corrupt,
}

impl ZlibError {
    /// The finding code (`gvrs.codec.zlib_*`).
    pub fn code(self) -> &'static str {
        match self {
            ZlibError::TooLong => "gvrs.codec.zlib_too_long",
            ZlibError::TooShort(_) => "gvrs.codec.zlib_too_short",
            ZlibError::Truncated => "gvrs.codec.zlib_truncated",
            ZlibError::Corrupt => "gvrs.codec.zlib_corrupt",
        }
    }

    /// What went wrong, in words (`expected`: the decoded length the tile needs).
    pub fn message(self, expected: usize) -> String {
        match self {
            ZlibError::TooLong => format!("zlib stream inflates to more than the expected {expected} bytes"),
            ZlibError::TooShort(n) => format!("zlib stream inflates to {n} bytes, expected {expected}"),
            ZlibError::Truncated => "zlib stream is truncated".to_string(),
            ZlibError::Corrupt => "zlib stream is corrupt (bad header, deflate data or Adler-32)".to_string(),
        }
    }
}

thread_local! {
    static INFLATER: RefCell<Box<DecompressorOxide>> = RefCell::new(Box::default());
    static DEFLATER: RefCell<Option<(u8, Box<CompressorOxide>)>> = const { RefCell::new(None) };
}

/// Inflate one complete zlib stream from the start of `input` into exactly `out.len()` bytes.
/// Never writes past `out`; returns the number of input bytes the stream occupies.
pub fn inflate_exact(input: &[u8], out: &mut [u8]) -> Result<usize, ZlibError> {
    INFLATER.with(|cell| {
        let mut guard = cell.borrow_mut();
        let r: &mut DecompressorOxide = &mut guard;
        r.init();
        let flags = TINFL_FLAG_PARSE_ZLIB_HEADER | TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF;
        let (status, used, written) = decompress(r, input, out, 0, flags);
        match status {
            TINFLStatus::Done if written == out.len() => Ok(used),
            TINFLStatus::Done => Err(ZlibError::TooShort(written)),
            TINFLStatus::HasMoreOutput => Err(ZlibError::TooLong),
            TINFLStatus::NeedsMoreInput | TINFLStatus::FailedCannotMakeProgress => Err(ZlibError::Truncated),
            _ => Err(ZlibError::Corrupt),
        }
    })
}

/// Append a zlib stream of `data` at `level` (0..=10) to `out`.
pub fn deflate_into(data: &[u8], level: u8, out: &mut Vec<u8>) {
    DEFLATER.with(|cell| {
        let mut slot = cell.borrow_mut();
        let reuse = matches!(&*slot, Some((l, _)) if *l == level);
        if !reuse {
            let mut c = Box::new(CompressorOxide::default());
            c.set_format_and_level(DataFormat::Zlib, level);
            *slot = Some((level, c));
        }
        if let Some((_, c)) = slot.as_mut() {
            c.reset();
            let (status, _) = compress_to_output(c, data, TDEFLFlush::Finish, |chunk| {
                out.extend_from_slice(chunk);
                true
            });
            debug_assert_eq!(status, TDEFLStatus::Done);
        }
    })
}

/// A zlib stream of `data` at `level` as a new vector.
pub fn deflate(data: &[u8], level: u8) -> Vec<u8> {
    let mut v = Vec::with_capacity(data.len() / 2 + 16);
    deflate_into(data, level, &mut v);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bounds() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 7) as u8).collect();
        let z = deflate(&data, 6);
        let z2 = deflate(&data, 6);
        assert_eq!(z, z2, "reset deflater is deterministic");
        let mut out = vec![0u8; data.len()];
        assert_eq!(inflate_exact(&z, &mut out), Ok(z.len()));
        assert_eq!(out, data);
        let mut small = vec![0u8; data.len() - 1];
        assert_eq!(inflate_exact(&z, &mut small), Err(ZlibError::TooLong));
        let mut big = vec![0u8; data.len() + 1];
        assert_eq!(inflate_exact(&z, &mut big), Err(ZlibError::TooShort(data.len())));
        assert_eq!(inflate_exact(&z[..z.len() - 3], &mut out), Err(ZlibError::Truncated));
        let mut bad = z.clone();
        let n = bad.len();
        bad[n - 1] ^= 1;
        assert_eq!(inflate_exact(&bad, &mut out), Err(ZlibError::Corrupt));
    }
}
