//! Where a writer puts a file: a seekable file (positioned writes allowed, e.g. the CLI's
//! temporary file) or a forward-only stream (standard output, a pipe, a `Vec<u8>`).

use std::fs::File;
use std::io::Write;

use crate::error::{Error, Result};

/// The destination of a writer. A `File` starts empty and may be written at any position; a
/// `Stream` only in order.
pub enum Output<'a> {
    /// A regular file opened for writing, empty: writers may use positioned writes.
    File(&'a File),
    /// A forward-only byte stream.
    Stream(&'a mut dyn Write),
}

impl std::fmt::Debug for Output<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Output::File(file) => f.debug_tuple("File").field(file).finish(),
            Output::Stream(_) => f.write_str("Stream(..)"),
        }
    }
}

impl Output<'_> {
    /// Whether positioned writes are possible.
    pub fn is_seekable(&self) -> bool {
        matches!(self, Output::File(_))
    }

    /// Append-only writing: the file is written from its current position.
    pub fn as_write(&mut self) -> &mut dyn Write {
        match self {
            Output::File(file) => file,
            Output::Stream(w) => *w,
        }
    }
}

/// Write all of `buf` at `offset` of `file` (positioned; the file position is not used).
pub fn write_all_at(file: &File, buf: &[u8], offset: u64) -> Result<()> {
    write_at_impl(file, buf, offset).map_err(|e| Error::io(&format!("writing at offset {offset}"), &e))
}

#[cfg(unix)]
fn write_at_impl(file: &File, buf: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
}

#[cfg(windows)]
fn write_at_impl(file: &File, mut buf: &[u8], mut offset: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_write(buf, offset)? {
            0 => return Err(std::io::ErrorKind::WriteZero.into()),
            n => {
                buf = &buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}
