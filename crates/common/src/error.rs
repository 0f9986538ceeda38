//! The one error type every rasterpack library returns.
//!
//! An [`Error`] names *what kind* of failure happened, a stable machine code (the same codes
//! validation findings use, e.g. `volp.header.len_out_of_range`), the byte offset where the
//! offending field lives, and a human message. Truncation is a property of the file, so it is
//! [`ErrorKind::Invalid`]-like ([`ErrorKind::Truncated`]), never an I/O error.

use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};

/// What kind of failure an [`Error`] is; the CLI maps this to exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The input ends before a field the format requires (exit 1).
    Truncated,
    /// The input breaks a rule of the format (exit 1).
    Invalid,
    /// A declared size exceeds a [`crate::Limits`] bound (exit 1: the file is refused).
    LimitExceeded,
    /// The file uses a feature rasterpack does not implement (exit 3).
    Unsupported,
    /// Reading the input or writing the output failed (exit 2).
    Io,
    /// The caller asked for something that cannot be done, e.g. a missing element (exit 2).
    Usage,
}

impl ErrorKind {
    /// The kind's name in snake_case (`limit_exceeded`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Truncated => "truncated",
            ErrorKind::Invalid => "invalid",
            ErrorKind::LimitExceeded => "limit_exceeded",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Io => "io",
            ErrorKind::Usage => "usage",
        }
    }
}

/// A failure with its stable code and, when known, the absolute byte offset it concerns.
#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    /// What kind of failure this is (decides the CLI's exit code).
    pub kind: ErrorKind,
    /// Stable, dotted, lower-case code such as `gvrs.tile.crc_mismatch`.
    pub code: Cow<'static, str>,
    /// Absolute byte offset in the input, when the failure concerns a position.
    pub offset: Option<u64>,
    /// A sentence for people: what failed and why.
    pub message: String,
    /// For an [`ErrorKind::Io`] error: the operating system's error behind it, so a caller can
    /// act on it (Python raises the matching `OSError` subclass) instead of parsing `message`.
    pub os: Option<OsError>,
}

/// The operating system's side of an I/O [`Error`]: what `std::io::Error` said, and the path
/// it concerns when one is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsError {
    /// `std::io::Error::kind` (`NotFound`, `PermissionDenied`, `IsADirectory`, ...).
    pub kind: std::io::ErrorKind,
    /// `std::io::Error::raw_os_error`: the errno on Unix, when the OS reported one.
    pub code: Option<i32>,
    /// The file the failed operation was on, when the error names one.
    pub path: Option<PathBuf>,
}

/// `std::result::Result` with rasterpack's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of any kind.
    pub fn new(
        kind: ErrorKind,
        code: impl Into<Cow<'static, str>>,
        offset: Option<u64>,
        message: impl Into<String>,
    ) -> Self {
        Error {
            kind,
            code: code.into(),
            offset,
            message: message.into(),
            os: None,
        }
    }

    /// A rule of the format was broken at `offset`.
    pub fn invalid(code: impl Into<Cow<'static, str>>, offset: u64, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, code, Some(offset), message)
    }

    /// A rule was broken but no single byte position is to blame (e.g. a cross-field rule).
    pub fn invalid_at(code: impl Into<Cow<'static, str>>, offset: Option<u64>, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, code, offset, message)
    }

    /// `needed` bytes for `field` starting at `offset`, but the input holds only `available`.
    pub fn truncated(field: &str, offset: u64, needed: u64, available: u64) -> Self {
        Self::new(
            ErrorKind::Truncated,
            "truncated",
            Some(offset),
            format!("input ends inside {field}: needs {needed} byte(s) at offset {offset}, only {available} left"),
        )
    }

    /// A size declared by the input exceeds a [`crate::Limits`] bound.
    pub fn limit(code: impl Into<Cow<'static, str>>, offset: Option<u64>, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::LimitExceeded, code, offset, message)
    }

    /// The input uses a feature rasterpack does not implement.
    pub fn unsupported(code: impl Into<Cow<'static, str>>, offset: Option<u64>, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, code, offset, message)
    }

    /// The caller asked for something that cannot be done (code `usage`).
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Usage, "usage", None, message)
    }

    /// An I/O failure, with what was being done (`context`) and the OS error.
    /// The OS error's kind and errno are kept in [`Error::os`].
    pub fn io(context: &str, err: &std::io::Error) -> Self {
        let mut e = Self::new(ErrorKind::Io, "io", None, format!("{context}: {err}"));
        e.os = Some(OsError {
            kind: err.kind(),
            code: err.raw_os_error(),
            path: None,
        });
        e
    }

    /// An I/O failure on the file at `path` (`PATH: OS error`), the path kept in [`Error::os`].
    pub fn io_path(path: &Path, err: &std::io::Error) -> Self {
        let mut e = Self::io(&crate::names::shown(path), err);
        if let Some(os) = &mut e.os {
            os.path = Some(path.to_path_buf());
        }
        e
    }

    /// Prefix the code with a format namespace when it has none (`truncated` -> `volp.truncated`).
    pub fn in_format(mut self, format: &str) -> Self {
        if !self.code.contains('.') {
            self.code = Cow::Owned(format!("{format}.{}", self.code));
        }
        self
    }

    /// Rebase a slice-relative offset onto the absolute position of that slice in the file.
    pub fn shifted(mut self, base: u64) -> Self {
        self.offset = self.offset.map(|o| o.saturating_add(base));
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offset {
            Some(o) => write!(f, "{} at offset {o} [{}]", self.message, self.code),
            None => write!(f, "{} [{}]", self.message, self.code),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_keep_the_os_error() {
        let missing = Path::new("/nonexistent/rasterpack/x.volp");
        let os = std::fs::File::open(missing).unwrap_err();
        let e = Error::io_path(missing, &os);
        assert_eq!(e.kind, ErrorKind::Io);
        let kept = e.os.expect("the OS error is kept");
        assert_eq!(kept.kind, std::io::ErrorKind::NotFound);
        assert_eq!(kept.code, os.raw_os_error());
        assert!(kept.code.is_some());
        assert_eq!(kept.path.as_deref(), Some(missing));
        assert!(
            e.message.starts_with("/nonexistent/rasterpack/x.volp: "),
            "{}",
            e.message
        );

        let made = std::io::Error::new(std::io::ErrorKind::IsADirectory, "is a directory");
        let e = Error::io("writing", &made);
        let kept = e.os.expect("kept");
        assert_eq!(
            (kept.kind, kept.code, kept.path),
            (std::io::ErrorKind::IsADirectory, None, None)
        );
        // Errors of other kinds carry none.
        assert_eq!(Error::usage("x").os, None);
    }
}
