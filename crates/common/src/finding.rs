//! Validation findings: what `validate` reports. Findings are not errors: validation collects
//! all of them instead of stopping at the first.

use serde::Serialize;

use crate::error::Error;

/// How serious a [`Finding`] is, from the least: `Info < Warning < Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// A remark (e.g. a feature rasterpack skips); never changes a verdict.
    Info,
    /// Something suspicious that the format allows; an error under `--strict`.
    Warning,
    /// A broken rule: the input is invalid.
    Error,
}

impl Severity {
    /// `info`, `warning` or `error`, as JSON reports write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// One problem (or remark) about an input: a stable code scripts can grep, the byte offset of
/// the offending field when there is one, and a sentence for people.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// How serious it is.
    pub severity: Severity,
    /// Stable, dotted, lower-case code (`gvrs.tile.crc_mismatch`).
    pub code: String,
    /// Absolute byte offset of the offending field, when there is one.
    pub offset: Option<u64>,
    /// A sentence for people.
    pub message: String,
}

/// An ordered collection of findings with shorthand constructors.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Findings(pub Vec<Finding>);

impl Findings {
    /// No findings yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a finding.
    pub fn push(
        &mut self,
        severity: Severity,
        code: impl Into<String>,
        offset: Option<u64>,
        message: impl Into<String>,
    ) {
        self.0.push(Finding {
            severity,
            code: code.into(),
            offset,
            message: message.into(),
        });
    }

    /// Add an [`Severity::Error`] finding.
    pub fn error(&mut self, code: impl Into<String>, offset: Option<u64>, message: impl Into<String>) {
        self.push(Severity::Error, code, offset, message);
    }

    /// Add a [`Severity::Warning`] finding.
    pub fn warning(&mut self, code: impl Into<String>, offset: Option<u64>, message: impl Into<String>) {
        self.push(Severity::Warning, code, offset, message);
    }

    /// Add a [`Severity::Info`] finding.
    pub fn info(&mut self, code: impl Into<String>, offset: Option<u64>, message: impl Into<String>) {
        self.push(Severity::Info, code, offset, message);
    }

    /// Record a parse error as an error finding (its code and offset carried over).
    pub fn push_error(&mut self, err: &Error) {
        self.push(Severity::Error, err.code.to_string(), err.offset, err.message.clone());
    }

    /// Whether any finding is an error.
    pub fn has_errors(&self) -> bool {
        self.0.iter().any(|f| f.severity == Severity::Error)
    }

    /// Whether a finding has exactly this code.
    pub fn has_code(&self, code: &str) -> bool {
        self.0.iter().any(|f| f.code == code)
    }

    /// The findings in the order they were found.
    pub fn iter(&self) -> impl Iterator<Item = &Finding> {
        self.0.iter()
    }

    /// How many findings there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there is no finding.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Append every finding of `other`.
    pub fn extend(&mut self, other: Findings) {
        self.0.extend(other.0);
    }
}
