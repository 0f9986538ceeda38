//! Validation findings: what `validate` reports. Findings are not errors: validation collects
//! all of them instead of stopping at the first.

use std::collections::HashMap;

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

/// Findings listed per code in a report by default ([`Findings::listing_at_most`]); the others
/// are counted in [`Findings::omitted`]. A small file can hold 130,000 broken tables, and each
/// listed finding costs memory in every report, table and JSON document that shows it: 256 of
/// one code say what is wrong as well as all of them do.
pub const LISTED_PER_CODE: usize = 256;

/// Findings of one code and severity that a capped [`Findings`] counted instead of listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Omitted {
    /// The code of the findings left out.
    pub code: String,
    /// Their severity (an omitted error still makes the input invalid).
    pub severity: Severity,
    /// How many were left out.
    pub count: u64,
}

/// An ordered collection of findings with shorthand constructors.
///
/// [`Findings::new`] lists every finding: collectors that look findings up by position (the
/// faults of one table, one chunk) need them all. A report's collection
/// ([`Findings::listing_at_most`], what [`crate::Report::new`] starts with) lists at most a
/// number of findings per code and counts the rest per code and severity; the counted ones keep
/// their effect on the verdict ([`Findings::has_errors`], [`crate::Report::is_valid`]).
/// Serializes as the list of listed findings.
#[derive(Debug, Clone, PartialEq)]
pub struct Findings {
    list: Vec<Finding>,
    /// Per code and severity, in the order they were first left out.
    omitted: Vec<Omitted>,
    /// How many findings of each code are listed (only kept when capped).
    listed: HashMap<String, usize>,
    /// Findings listed per code at most (`usize::MAX`: no cap).
    cap: usize,
}

impl Default for Findings {
    fn default() -> Self {
        Findings {
            list: Vec::new(),
            omitted: Vec::new(),
            listed: HashMap::new(),
            cap: usize::MAX,
        }
    }
}

impl Serialize for Findings {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.list.serialize(s)
    }
}

impl From<Vec<Finding>> for Findings {
    fn from(list: Vec<Finding>) -> Self {
        Findings {
            list,
            ..Findings::default()
        }
    }
}

impl Findings {
    /// No findings yet; every finding added is listed.
    pub fn new() -> Self {
        Self::default()
    }

    /// No findings yet; at most `cap` findings of each code are listed, the others counted
    /// (see [`Findings::omitted`]). [`LISTED_PER_CODE`] is the reports' default.
    pub fn listing_at_most(cap: usize) -> Self {
        Findings {
            cap,
            ..Findings::default()
        }
    }

    /// The most findings of one code this collection lists (`usize::MAX`: all).
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Add a finding.
    pub fn push(
        &mut self,
        severity: Severity,
        code: impl Into<String>,
        offset: Option<u64>,
        message: impl Into<String>,
    ) {
        self.add(Finding {
            severity,
            code: code.into(),
            offset,
            message: message.into(),
        });
    }

    /// Add a finding: listed while its code has fewer than the cap listed, counted otherwise.
    pub fn add(&mut self, finding: Finding) {
        if self.cap == usize::MAX {
            self.list.push(finding);
            return;
        }
        let listed = self.listed.get(finding.code.as_str()).copied().unwrap_or(0);
        if listed < self.cap {
            // At most `cap` insertions per code: the clone costs nothing in a flood.
            self.listed.insert(finding.code.clone(), listed + 1);
            self.list.push(finding);
        } else {
            self.count_omitted(finding.code, finding.severity, 1);
        }
    }

    fn count_omitted(&mut self, code: String, severity: Severity, count: u64) {
        // Codes are a small fixed set: a linear search stays cheap.
        match self
            .omitted
            .iter_mut()
            .find(|o| o.code == code && o.severity == severity)
        {
            Some(o) => o.count = o.count.saturating_add(count),
            None => self.omitted.push(Omitted { code, severity, count }),
        }
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

    /// Whether any finding, listed or counted, is an error.
    pub fn has_errors(&self) -> bool {
        self.has_severity(Severity::Error)
    }

    /// Whether any finding, listed or counted, has this severity.
    pub fn has_severity(&self, severity: Severity) -> bool {
        self.list.iter().any(|f| f.severity == severity) || self.omitted.iter().any(|o| o.severity == severity)
    }

    /// How many findings of this severity there are, listed and counted.
    pub fn count(&self, severity: Severity) -> u64 {
        let listed = self.list.iter().filter(|f| f.severity == severity).count() as u64;
        self.omitted
            .iter()
            .filter(|o| o.severity == severity)
            .fold(listed, |n, o| n.saturating_add(o.count))
    }

    /// Whether a finding, listed or counted, has exactly this code.
    pub fn has_code(&self, code: &str) -> bool {
        self.list.iter().any(|f| f.code == code) || self.omitted.iter().any(|o| o.code == code)
    }

    /// The listed findings in the order they were found.
    pub fn iter(&self) -> impl Iterator<Item = &Finding> {
        self.list.iter()
    }

    /// The listed findings in the order they were found.
    pub fn as_slice(&self) -> &[Finding] {
        &self.list
    }

    /// The listed findings from position `from` on (empty past the end): what was found since
    /// `len()` was `from`, in an uncapped collection.
    pub fn since(&self, from: usize) -> &[Finding] {
        self.list.get(from..).unwrap_or(&[])
    }

    /// The listed findings, taken out.
    pub fn into_vec(self) -> Vec<Finding> {
        self.list
    }

    /// The findings counted instead of listed, per code and severity.
    pub fn omitted(&self) -> &[Omitted] {
        &self.omitted
    }

    /// How many findings are listed.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// True when there is no finding, listed or counted.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty() && self.omitted.is_empty()
    }

    /// Append every finding of `other` (through this collection's cap; its counted findings
    /// stay counted).
    pub fn extend(&mut self, other: Findings) {
        for f in other.list {
            self.add(f);
        }
        for o in other.omitted {
            self.count_omitted(o.code, o.severity, o.count);
        }
    }

    /// These findings listed at most `cap` per code, the others counted (a collection with a
    /// cap already keeps the smaller of the two).
    pub fn capped(self, cap: usize) -> Findings {
        if self.cap <= cap {
            return self;
        }
        let mut out = Findings::listing_at_most(cap);
        out.extend(self);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_lists_the_first_of_each_code_and_counts_the_rest() {
        let mut f = Findings::listing_at_most(2);
        for i in 0..5 {
            f.error("a.flood", Some(i), format!("flood {i}"));
        }
        f.warning("b.once", None, "once");
        f.warning("a.flood", None, "same code, other severity");
        assert_eq!(f.len(), 3);
        let listed: Vec<_> = f.iter().map(|x| (x.code.as_str(), x.offset)).collect();
        assert_eq!(listed, [("a.flood", Some(0)), ("a.flood", Some(1)), ("b.once", None)]);
        let omitted: Vec<_> = f
            .omitted()
            .iter()
            .map(|o| (o.code.as_str(), o.severity, o.count))
            .collect();
        assert_eq!(
            omitted,
            [("a.flood", Severity::Error, 3), ("a.flood", Severity::Warning, 1)]
        );
        assert_eq!(f.count(Severity::Error), 5);
        assert_eq!(f.count(Severity::Warning), 2);
    }

    #[test]
    fn counted_findings_keep_their_verdict() {
        // Two warnings listed fill the cap; the error after them is counted, not listed, and
        // still counts as an error.
        let mut f = Findings::listing_at_most(2);
        f.warning("x.code", None, "w");
        f.warning("x.code", None, "w");
        assert!(!f.has_errors());
        f.error("x.code", None, "e");
        assert_eq!(f.len(), 2);
        assert!(f.has_errors());
        assert!(f.has_code("x.code"));
        let mut only_counted = Findings::listing_at_most(0);
        only_counted.error("y.code", None, "e");
        assert!(!only_counted.is_empty());
        assert!(only_counted.has_code("y.code"));
        assert!(only_counted.has_errors());
    }

    #[test]
    fn extend_and_capped_carry_counts_over() {
        let mut all = Findings::new();
        for i in 0..10 {
            all.info("c.many", Some(i), "m");
        }
        assert_eq!(all.len(), 10);
        assert!(all.omitted().is_empty());
        let capped = all.clone().capped(4);
        assert_eq!((capped.len(), capped.omitted()[0].count), (4, 6));
        let mut report = Findings::listing_at_most(3);
        report.extend(capped);
        assert_eq!(report.len(), 3);
        assert_eq!(report.omitted()[0].count, 7);
        assert_eq!(report.count(Severity::Info), 10);
    }
}
