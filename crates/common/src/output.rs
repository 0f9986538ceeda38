//! Where a writer puts a file: a seekable file (positioned writes allowed, e.g. the CLI's
//! temporary file) or a forward-only stream (standard output, a pipe, a `Vec<u8>`).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

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

/// Write a file through `write` so that `path` only ever holds a complete one: the bytes go to
/// a temporary file in the same folder (same file system, so the rename is atomic), which is
/// renamed onto `path` on success and removed on failure.
pub fn write_file_atomically(path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let shown = path.display().to_string();
    let name = path
        .file_name()
        .ok_or_else(|| Error::usage(format!("{shown}: not a file name to write to")))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(
        ".{}-{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let temp = path.with_file_name(temp_name);
    let result = (|| {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(|e| Error::io(&format!("creating {}", temp.display()), &e))?;
        let mut out = BufWriter::new(file);
        write(&mut out)?;
        out.flush().map_err(|e| Error::io(&format!("writing {shown}"), &e))?;
        std::fs::rename(&temp, path).map_err(|e| Error::io(&format!("renaming onto {shown}"), &e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}
