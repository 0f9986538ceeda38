//! Opening inputs and finding their format from content.

use std::io::Read;
use std::path::Path;

use rasterpack_common::{Error, ErrorKind, Format, Input, Limits};

use rasterpack_cli::registry;

/// Open a path (or `-` for standard input, read whole, bounded by the allocation limit).
pub fn open(path: &str, limits: &Limits) -> Result<Input, Error> {
    if path == "-" {
        let mut data = Vec::new();
        let cap = limits.max_alloc;
        std::io::stdin()
            .lock()
            .take(cap.saturating_add(1))
            .read_to_end(&mut data)
            .map_err(|e| Error::io("reading standard input", &e))?;
        if data.len() as u64 > cap {
            return Err(Error::new(
                ErrorKind::Io,
                "io",
                None,
                format!("standard input exceeds {cap} bytes"),
            ));
        }
        return Ok(Input::from_bytes("-", data));
    }
    Input::open(Path::new(path))
}

/// The format of an opened input, or a clear "unknown format" error.
pub fn detect(input: &Input) -> Result<&'static dyn Format, Error> {
    if let Some(dir) = input.dir() {
        return registry::formats()
            .into_iter()
            .find(|f| f.detect_dir(dir))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Unsupported,
                    "format.unknown",
                    None,
                    format!(
                        "{}: directory holds no dataset rasterpack knows (no VolumeDataLayout)",
                        dir.display()
                    ),
                )
            });
    }
    let head = input.head(64);
    registry::formats()
        .into_iter()
        .find(|f| f.detect(&head))
        .ok_or_else(|| {
            let shown: String = head
                .iter()
                .take(8)
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" ");
            Error::new(
                ErrorKind::Invalid,
                "format.unknown",
                Some(0),
                if head.is_empty() {
                    "empty input: not a format rasterpack knows".to_string()
                } else {
                    format!("unknown format (first bytes: {shown}); rasterpack reads volp, gvrs, udf, fold, vds, npy")
                },
            )
        })
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
