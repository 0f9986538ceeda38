//! Validation findings: what `validate` reports. Findings are not errors: validation collects
//! all of them instead of stopping at the first.

use serde::Serialize;

use crate::error::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
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
    pub severity: Severity,
    pub code: String,
    pub offset: Option<u64>,
    pub message: String,
}

/// An ordered collection of findings with shorthand constructors.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Findings(pub Vec<Finding>);

impl Findings {
    pub fn new() -> Self {
        Self::default()
    }

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

    pub fn error(&mut self, code: impl Into<String>, offset: Option<u64>, message: impl Into<String>) {
        self.push(Severity::Error, code, offset, message);
    }

    pub fn warning(&mut self, code: impl Into<String>, offset: Option<u64>, message: impl Into<String>) {
        self.push(Severity::Warning, code, offset, message);
    }

    pub fn info(&mut self, code: impl Into<String>, offset: Option<u64>, message: impl Into<String>) {
        self.push(Severity::Info, code, offset, message);
    }

    /// Record a parse error as an error finding (its code and offset carried over).
    pub fn push_error(&mut self, err: &Error) {
        self.push(Severity::Error, err.code.to_string(), err.offset, err.message.clone());
    }

    pub fn has_errors(&self) -> bool {
        self.0.iter().any(|f| f.severity == Severity::Error)
    }

    pub fn has_code(&self, code: &str) -> bool {
        self.0.iter().any(|f| f.code == code)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Finding> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn extend(&mut self, other: Findings) {
        self.0.extend(other.0);
    }
}
