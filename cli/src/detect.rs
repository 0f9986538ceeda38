//! Opening inputs and finding their format from content.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::OnceLock;

use rasterpack_store::StoreOptions;

use rasterpack_common::{shown, Error, ErrorKind, Format, Input, Limits, DETECT_BYTES};

/// `--storage-option` pairs for URLs, set once by `main` before any input is opened.
static STORE_OPTIONS: OnceLock<StoreOptions> = OnceLock::new();

/// Keep the `--storage-option` pairs for every URL opened later.
pub fn set_store_options(opts: StoreOptions) {
    let _ = STORE_OPTIONS.set(opts);
}

/// The `--storage-option` pairs (none when not set).
pub fn store_options() -> StoreOptions {
    STORE_OPTIONS.get().cloned().unwrap_or_default()
}

/// Open a path: `-` is standard input; a URL (`s3://`, `gs://`, `az://`, `http(s)://`,
/// `file://`) through `rasterpack-store`, read by ranges; FIFOs, devices and sockets are read
/// as streams like standard input (their metadata has no length); anything else through
/// [`Input::open`].
pub fn open(path: &Path, limits: &Limits) -> Result<Input, Error> {
    if let Some(url) = path.to_str().filter(|p| rasterpack_store::is_url(p)) {
        return rasterpack_store::open(url, &store_options());
    }
    if path.as_os_str() == "-" {
        if let Some(input) = stdin_as_file()? {
            return Ok(input);
        }
        return read_stream("standard input", Path::new("-"), std::io::stdin().lock(), limits);
    }
    if is_stream(path) {
        let name = shown(path);
        let file = File::open(path).map_err(|e| Error::io_path(path, &e))?;
        return read_stream(&name, path, file, limits);
    }
    Input::open(path)
}

/// Does `path` name something that can only be read front to back (no length, no seeking)?
fn is_stream(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        std::fs::metadata(path).is_ok_and(|m| {
            let t = m.file_type();
            t.is_fifo() || t.is_char_device() || t.is_block_device() || t.is_socket()
        })
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

/// Standard input redirected from a regular file (`< cube.volp`), read by position like the
/// file itself when nothing has read it yet; `None` for pipes, terminals and devices.
#[cfg(unix)]
fn stdin_as_file() -> Result<Option<Input>, Error> {
    use std::io::Seek;
    use std::os::fd::AsFd;
    let Ok(fd) = std::io::stdin().as_fd().try_clone_to_owned() else {
        return Ok(None);
    };
    let mut file = File::from(fd);
    let regular = file.metadata().is_ok_and(|m| m.is_file());
    // A shell that read part of it already (`{ head -c 4; rasterpack inspect -; } < f`) leaves
    // the offset past 0: then it is a stream from there.
    if !regular || file.stream_position().ok() != Some(0) {
        return Ok(None);
    }
    Input::from_file("-", file).map(Some)
}

#[cfg(not(unix))]
fn stdin_as_file() -> Result<Option<Input>, Error> {
    Ok(None)
}

/// Read a stream of a known format into an unnamed temporary file (in `TMPDIR`), at most
/// `limits.max_alloc` bytes, and read that by position like any file: formats need random
/// access, and holding the stream in memory would cost its whole size in RSS. The first bytes
/// are checked first: a stream no format claims (`/dev/zero`, `/dev/urandom`) is answered
/// from them alone, without reading on.
fn read_stream(what: &str, name: &Path, mut stream: impl Read, limits: &Limits) -> Result<Input, Error> {
    let io = |e: std::io::Error| Error::io(&format!("reading {what}"), &e);
    let mut data = Vec::with_capacity(DETECT_BYTES);
    (&mut stream)
        .take(DETECT_BYTES as u64)
        .read_to_end(&mut data)
        .map_err(io)?;
    let known = crate::formats().iter().any(|f| f.detect(&data));
    if data.len() < DETECT_BYTES || !known {
        return Ok(Input::from_bytes(shown(name), data));
    }
    let spool_error = |e: std::io::Error| {
        Error::io(
            &format!(
                "copying {what} into a temporary file in {}",
                shown(&std::env::temp_dir())
            ),
            &e,
        )
    };
    let mut spool = tempfile::tempfile().map_err(spool_error)?;
    spool.write_all(&data).map_err(spool_error)?;
    let cap = limits.max_alloc;
    let mut rest = stream.take(cap.saturating_sub(data.len() as u64).saturating_add(1));
    let copied = copy(&mut rest, &mut spool).map_err(|e| match e {
        Copy::Read(e) => io(e),
        Copy::Write(e) => spool_error(e),
    })?;
    if (data.len() as u64).saturating_add(copied) > cap {
        return Err(Error::new(
            ErrorKind::Io,
            "input.stream_too_large",
            None,
            format!(
                "{what} goes on past {cap} bytes, the most rasterpack takes of a stream; \
                 save it to a file to read it"
            ),
        ));
    }
    Input::from_file(name, spool)
}

/// Which side of a copy failed.
enum Copy {
    Read(std::io::Error),
    Write(std::io::Error),
}

/// Copy `from` to `to` through a 1 MiB buffer, telling a read error from a write error (a full
/// `TMPDIR` is not a fault of the input).
fn copy(from: &mut impl Read, to: &mut File) -> Result<u64, Copy> {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Copy::Read(e)),
        };
        to.write_all(&buf[..n]).map_err(Copy::Write)?;
        total += n as u64;
    }
}

/// The format of an opened input, or a clear "unknown format" error: the library's detection
/// (content only, never the name) over every format it knows.
pub fn detect(input: &Input) -> Result<&'static dyn Format, Error> {
    crate::detect(input)
}

/// The format to write, from `--to` or the output's extension.
pub fn target(to: Option<&str>, out: &Path) -> Result<&'static dyn Format, Error> {
    let wanted = match to {
        Some(t) => t.trim_start_matches('.').to_ascii_lowercase(),
        None => out
            .extension()
            .and_then(|e| e.to_str())
            .map(|e| e.to_ascii_lowercase())
            .ok_or_else(|| {
                Error::usage(format!(
                    "cannot tell the output format of {:?}: give --to FORMAT or an extension",
                    shown(out)
                ))
            })?,
    };
    crate::format_by_name(&wanted).ok_or_else(|| {
        Error::usage(format!(
            "unknown output format {wanted:?} (known: volp, gvrs, udf, fold, vds, npy, npz, zarr)"
        ))
    })
}
