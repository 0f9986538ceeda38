//! GVRS writer (owned by the codec/writer work). INTERFACE STUB.

use std::io::Write;

use rasterpack_common::{Error, NdArray, Result, WriteOptions};

/// Write `array` (2-D `[rows, cols]`, int32 / int16 / float32) as a one-element GVRS file,
/// honouring `opts.tile` and `opts.compress` (`none`, `deflate`, `huffman`, `float`, `all`).
pub fn write_ndarray(array: &NdArray, opts: &WriteOptions, out: &mut dyn Write) -> Result<()> {
    let _ = (array, opts, out);
    Err(Error::unsupported("gvrs.write.unsupported", None, "the GVRS writer is not implemented yet"))
}
