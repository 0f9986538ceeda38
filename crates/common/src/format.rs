//! The small trait each format crate implements so the CLI can detect, inspect, validate and
//! convert any input without knowing its format.

use std::io::Write;
use std::path::Path;

use serde_json::{Map, Value};

use crate::array::NdArray;
use crate::error::{Error, Result};
use crate::finding::{Findings, Severity};
use crate::limits::Limits;
use crate::source::Input;

/// A piece of human-readable output; the CLI renders it as a table.
#[derive(Debug, Clone, PartialEq)]
pub enum Section {
    /// Two-column "field | value" table.
    Fields { title: String, rows: Vec<(String, String)> },
    /// A table with a header row.
    Table {
        title: String,
        headers: Vec<String>,
        rows: Vec<Vec<String>>,
    },
    /// Pre-formatted text (JSON documents, previews).
    Text { title: String, text: String },
}

/// What `inspect` and `validate` produce for one input.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Format name (`volp`, `gvrs`, ...).
    pub format: &'static str,
    /// Format-specific facts as JSON (the `summary` member of the `--json` output).
    pub summary: Map<String, Value>,
    /// Findings in the order they were found.
    pub findings: Findings,
    /// The same facts laid out for people.
    pub sections: Vec<Section>,
    /// Set when the file uses a feature rasterpack does not implement (exit code 3).
    pub unsupported: bool,
}

impl Report {
    pub fn new(format: &'static str) -> Self {
        Report {
            format,
            ..Default::default()
        }
    }

    /// Valid: no error finding (and, when `strict`, no warning either).
    pub fn is_valid(&self, strict: bool) -> bool {
        !self
            .findings
            .iter()
            .any(|f| f.severity == Severity::Error || (strict && f.severity == Severity::Warning))
    }

    pub fn fields(&mut self, title: impl Into<String>, rows: Vec<(String, String)>) {
        self.sections.push(Section::Fields {
            title: title.into(),
            rows,
        });
    }

    pub fn table(&mut self, title: impl Into<String>, headers: &[&str], rows: Vec<Vec<String>>) {
        self.sections.push(Section::Table {
            title: title.into(),
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows,
        });
    }

    pub fn text(&mut self, title: impl Into<String>, text: impl Into<String>) {
        self.sections.push(Section::Text {
            title: title.into(),
            text: text.into(),
        });
    }

    /// Record an error that stopped the work as a finding (its kind decides `unsupported`).
    pub fn fail(&mut self, err: &Error) {
        if err.kind == crate::ErrorKind::Unsupported {
            self.unsupported = true;
            self.findings
                .push(Severity::Info, err.code.to_string(), err.offset, err.message.clone());
        } else {
            self.findings.push_error(err);
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct InspectOptions {
    /// Show everything (every chunk, whole JSON documents) instead of a truncated view.
    pub all: bool,
    pub limits: Limits,
}

#[derive(Debug, Clone, Default)]
pub struct ValidateOptions {
    pub limits: Limits,
}

/// Which array `read_array` should produce.
#[derive(Debug, Clone, Default)]
pub struct ArrayRequest {
    /// Element / table / channel / `CHUNK/ARRAY` name (`--element`).
    pub element: Option<String>,
    /// Physical values (scale and offset applied) instead of stored ones (`--physical`).
    pub physical: bool,
    /// Stored integer codes instead of decoded values (`--codes`, GVRS integer-coded floats).
    pub codes: bool,
    /// Name of the format the array is headed for, for sources that shape output per target
    /// (GVRS elements become VOLP levels).
    pub target: Option<&'static str>,
    pub limits: Limits,
}

/// How `write_array` should encode (flags of `convert`).
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Tile size `[rows, cols]` (`--tile`, GVRS).
    pub tile: Option<(u32, u32)>,
    /// Compression name (`--compress`); `None` means the format's default.
    pub compress: Option<String>,
    pub limits: Limits,
}

/// A flag of `convert` that shapes what is read ([`ArrayRequest`]) or written ([`WriteOptions`]).
/// Each format lists the ones it honours ([`Format::honours`]) so the CLI can refuse the others
/// by name instead of silently ignoring them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestFlag {
    /// `--element`: which element / table / channel / array to read (source side).
    Element,
    /// `--physical`: physical values instead of stored ones (source side).
    Physical,
    /// `--codes`: stored integer codes instead of decoded values (source side).
    Codes,
    /// `--tile`: output tile size (target side).
    Tile,
    /// `--compress`: output compression (target side).
    Compress,
}

impl RequestFlag {
    /// Every flag, in the order `--help` lists them.
    pub const ALL: [RequestFlag; 5] = [
        RequestFlag::Element,
        RequestFlag::Physical,
        RequestFlag::Codes,
        RequestFlag::Tile,
        RequestFlag::Compress,
    ];

    /// The command-line spelling (`--element`).
    pub fn as_str(self) -> &'static str {
        match self {
            RequestFlag::Element => "--element",
            RequestFlag::Physical => "--physical",
            RequestFlag::Codes => "--codes",
            RequestFlag::Tile => "--tile",
            RequestFlag::Compress => "--compress",
        }
    }

    /// Does the flag concern reading the source (true) or writing the target (false)?
    pub fn is_source_flag(self) -> bool {
        matches!(self, RequestFlag::Element | RequestFlag::Physical | RequestFlag::Codes)
    }
}

/// One container format.
pub trait Format: Send + Sync {
    /// Short name used in reports and `--to` (`volp`).
    fn name(&self) -> &'static str;
    /// One line for `--help` and reports.
    fn description(&self) -> &'static str;
    /// File extensions (without dot) that select this format as a `convert` target.
    fn extensions(&self) -> &'static [&'static str];
    /// Does a file starting with `head` (up to 64 bytes) belong to this format?
    fn detect(&self, head: &[u8]) -> bool;
    /// The `convert` flags this format honours: source flags in `read_array`, target flags in
    /// `write_array`. The default is none, so a flag a format has not declared is refused.
    fn honours(&self) -> &'static [RequestFlag] {
        &[]
    }
    /// Does a directory hold a dataset of this format?
    fn detect_dir(&self, _dir: &Path) -> bool {
        false
    }
    /// Describe what the input holds; cheap structural findings may be included.
    fn inspect(&self, input: &Input, opts: &InspectOptions) -> Result<Report>;
    /// Check every rule, checksum and payload; never stops at the first finding.
    fn validate(&self, input: &Input, opts: &ValidateOptions) -> Report;
    /// Decode one array.
    fn read_array(&self, input: &Input, req: &ArrayRequest) -> Result<NdArray>;
    /// Encode one array as a complete file of this format.
    fn write_array(&self, _array: &NdArray, _opts: &WriteOptions, _out: &mut dyn Write) -> Result<()> {
        Err(Error::usage(format!("rasterpack cannot write {} files", self.name())))
    }
    /// A conversion this source format does itself (e.g. FOLD -> FOLD repair); `None` means
    /// "use the generic read_array -> write_array path".
    fn convert_special(
        &self,
        _input: &Input,
        _target: &dyn Format,
        _req: &ArrayRequest,
        _opts: &WriteOptions,
        _out: &mut dyn Write,
    ) -> Option<Result<()>> {
        None
    }
}
