//! Opening inputs and finding their format from content.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::OnceLock;

use rasterpack_store::StoreOptions;

use rasterpack_common::{Error, ErrorKind, Format, Input, Limits, DETECT_BYTES};

use rasterpack_cli::registry;

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
pub fn open(path: &str, limits: &Limits) -> Result<Input, Error> {
    if rasterpack_store::is_url(path) {
        return rasterpack_store::open(path, &store_options());
    }
    if path == "-" {
        return read_stream("standard input", "-", std::io::stdin().lock(), limits);
    }
    if is_stream(Path::new(path)) {
        let file = File::open(path).map_err(|e| Error::io(path, &e))?;
        return read_stream(path, path, file, limits);
    }
    Input::open(Path::new(path))
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

/// Read a stream into memory, at most `limits.max_alloc` bytes. The first bytes are checked
/// first: a stream no format claims (`/dev/zero`, `/dev/urandom`) is answered from them alone,
/// without reading on.
fn read_stream(what: &str, name: &str, mut stream: impl Read, limits: &Limits) -> Result<Input, Error> {
    let io = |e: std::io::Error| Error::io(&format!("reading {what}"), &e);
    let mut data = Vec::with_capacity(DETECT_BYTES);
    (&mut stream)
        .take(DETECT_BYTES as u64)
        .read_to_end(&mut data)
        .map_err(io)?;
    let known = registry::formats().into_iter().any(|f| f.detect(&data));
    if data.len() < DETECT_BYTES || !known {
        return Ok(Input::from_bytes(name, data));
    }
    let cap = limits.max_alloc;
    stream
        .take(cap.saturating_sub(data.len() as u64).saturating_add(1))
        .read_to_end(&mut data)
        .map_err(io)?;
    if data.len() as u64 > cap {
        return Err(Error::new(
            ErrorKind::Io,
            "input.stream_too_large",
            None,
            format!(
                "{what} goes on past {cap} bytes, the most rasterpack holds of a stream; \
                 save it to a file to read it"
            ),
        ));
    }
    Ok(Input::from_bytes(name, data))
}

/// The format of an opened input, or a clear "unknown format" error: the library's detection
/// (content only, never the name) over every format the CLI knows.
pub fn detect(input: &Input) -> Result<&'static dyn Format, Error> {
    rasterpack_common::detect(input, &registry::formats())
}

/// The format to write, from `--to` or the output's extension.
pub fn target(to: Option<&str>, out: &str) -> Result<&'static dyn Format, Error> {
    let wanted = match to {
        Some(t) => t.trim_start_matches('.').to_ascii_lowercase(),
        None => Path::new(out)
            .extension()
            .and_then(|e| e.to_str())
            .map(|e| e.to_ascii_lowercase())
            .ok_or_else(|| {
                Error::usage(format!(
                    "cannot tell the output format of {out:?}: give --to FORMAT or an extension"
                ))
            })?,
    };
    registry::formats()
        .into_iter()
        .find(|f| f.name() == wanted || f.extensions().contains(&wanted.as_str()))
        .ok_or_else(|| {
            Error::usage(format!(
                "unknown output format {wanted:?} (known: volp, gvrs, udf, fold, npy)"
            ))
        })
}
