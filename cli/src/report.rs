//! One input's `inspect`/`validate` result and its `--json` file entry (docs/cli.md), shared
//! by the CLI's reports and the Python package's `validate`/`inspect`.

use rasterpack_common::{
    Error, ErrorKind, Finding, InspectOptions, Limits, Progress, Report, ValidateOptions, LISTED_PER_CODE,
};
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::detect;

/// What to do with each input.
#[derive(Debug, Clone, Copy)]
pub enum Mode {
    /// `inspect`: the cheap structural checks, no verdict.
    Inspect {
        /// Show everything (`--all`).
        all: bool,
    },
    /// `validate`: every rule, checksum and payload.
    Validate {
        /// Warnings count as errors (`--strict`).
        strict: bool,
    },
}

/// How the program ends.
pub enum Outcome {
    Code(u8),
    /// stdout was closed by the reader: end quietly with success.
    BrokenPipe,
}

/// One input's result.
pub struct FileResult {
    /// The input as given (shown escaped in text, as UTF-8 with replacement characters in JSON).
    pub path: PathBuf,
    pub format: Option<&'static str>,
    pub report: Report,
    /// The verdict of `validate`; `None` for `inspect`, which makes only the cheap structural
    /// checks and so never claims a file is valid.
    pub valid: Option<bool>,
    pub exit_code: u8,
}

/// Exit code of a failed operation by error kind.
pub fn exit_code_for(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Io | ErrorKind::Usage => 2,
        ErrorKind::Unsupported => 3,
        ErrorKind::Truncated | ErrorKind::Invalid | ErrorKind::LimitExceeded => 1,
    }
}

/// The worse of two exit codes in the order 2 > 3 > 1 > 0.
pub fn worst(a: u8, b: u8) -> u8 {
    let rank = |c: u8| match c {
        2 => 3,
        3 => 2,
        1 => 1,
        _ => 0,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

/// The version of the `--json` document's shape (docs/schema/report.schema.json).
pub const SCHEMA_VERSION: u32 = 3;

/// Inspect or validate one input, as `rasterpack inspect`/`validate` do for each path: a file
/// that cannot be opened or detected is a report with one finding, never an `Err`. `progress`
/// is told how far `validate` has come.
pub fn check(mode: &Mode, path: &Path, limits: &Limits, progress: Option<Progress>) -> FileResult {
    let full = matches!(mode, Mode::Validate { .. });
    let failed = |format: Option<&'static str>, err: Error| {
        let mut report = Report::new(format.unwrap_or(""));
        report.fail(&err);
        FileResult {
            path: path.to_path_buf(),
            format,
            report,
            valid: full.then_some(false),
            exit_code: exit_code_for(err.kind),
        }
    };
    let input = match detect::open(path, limits) {
        Ok(i) => i,
        Err(e) => return failed(None, e),
    };
    let (mut report, strict) = match mode {
        Mode::Inspect { all } => {
            let format = match detect::detect(&input) {
                Ok(f) => f,
                Err(e) => return failed(None, e),
            };
            match format.inspect(
                &input,
                &InspectOptions {
                    all: *all,
                    limits: *limits,
                },
            ) {
                Ok(r) => (r, false),
                Err(e) => return failed(Some(format.name()), e.in_format(format.name())),
            }
        }
        Mode::Validate { strict } => {
            let opts = ValidateOptions {
                limits: *limits,
                progress,
            };
            // The library's one call for a full report, whatever is wrong with the input.
            (crate::validate_input(&input, &opts), *strict)
        }
    };
    // Whatever collection the format filled: the report lists at most this many findings of
    // one code (the rest are counted), so a flood of one finding cannot fill memory here.
    report.cap_findings(LISTED_PER_CODE);
    let valid = report.is_valid(strict);
    let exit_code = if report.unsupported {
        3
    } else if !valid {
        1
    } else {
        0
    };
    FileResult {
        path: path.to_path_buf(),
        // An input of no known format is reported with no format (`null` in JSON).
        format: (!report.format.is_empty()).then_some(report.format),
        report,
        valid: full.then_some(valid),
        exit_code,
    }
}

/// One finding as the `--json` document writes it.
pub fn finding_json(f: &Finding) -> Value {
    json!({ "severity": f.severity.as_str(), "code": f.code, "offset": f.offset, "message": f.message })
}

/// The `--json` document's entry for one file.
pub fn file_json(r: &FileResult) -> Value {
    let mut obj = Map::new();
    obj.insert("path".into(), Value::from(r.path.to_string_lossy()));
    obj.insert("format".into(), r.format.map(Value::from).unwrap_or(Value::Null));
    // inspect reports what it checked and no verdict; validate adds its verdict.
    match r.valid {
        Some(valid) => {
            obj.insert("checked".into(), Value::from("full"));
            obj.insert("valid".into(), Value::from(valid));
        }
        None => {
            obj.insert("checked".into(), Value::from("structure"));
        }
    }
    obj.insert("unsupported".into(), Value::from(r.report.unsupported));
    obj.insert("exit_code".into(), Value::from(r.exit_code));
    obj.insert(
        "findings".into(),
        Value::Array(r.report.findings.iter().map(finding_json).collect()),
    );
    // Findings past the per-code cap: counted, with their severity (they count in the verdict).
    let omitted = r
        .report
        .findings
        .omitted()
        .iter()
        .map(|o| json!({ "code": o.code, "severity": o.severity.as_str(), "count": o.count }));
    obj.insert("findings_omitted".into(), Value::Array(omitted.collect()));
    obj.insert("summary".into(), Value::Object(r.report.summary.clone()));
    Value::Object(obj)
}
