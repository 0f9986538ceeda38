//! Every rule, all findings: the prefix and header rules, every header field, then the body
//! decoded in full (bounded by the expected size) when the header allows it.

use rasterpack_common::{Findings, Limits};

use crate::model::Volume;
use crate::parse::{self, BodyInfo, Structure};

/// What validation learned besides the findings (for reports).
#[derive(Debug, Clone, Default)]
pub struct Validation {
    pub findings: Findings,
    pub structure: Option<Structure>,
    pub body: Option<BodyInfo>,
    /// The decoded volume, when the whole file is valid.
    pub volume: Option<Volume>,
}

/// Validate a whole file in memory, collecting every finding.
pub fn validate(data: &[u8]) -> Findings {
    validate_full(data, &Limits::default()).findings
}

pub fn validate_full(data: &[u8], limits: &Limits) -> Validation {
    let mut v = Validation::default();
    let s = match parse::parse_structure(data, limits) {
        Ok(s) => s,
        Err(e) => {
            v.findings.push_error(&e);
            return v;
        }
    };
    for e in &s.check.errors {
        v.findings.push_error(e);
    }
    v.findings.extend(s.check.notes.clone());
    let body = data.get(s.body_offset as usize..).unwrap_or(&[]);
    if !s.check.compression_ok {
        v.findings.info(
            "volp.body.not_checked",
            Some(s.body_offset),
            "body not checked: its compression is not zstd",
        );
    } else if let Some(h) = &s.check.header {
        match parse::decode_body_vec(body, s.body_offset, h.decoded_len(), limits) {
            Ok((info, data)) => {
                v.body = Some(info);
                if !v.findings.has_errors() {
                    v.volume = Some(Volume {
                        header: h.clone(),
                        data,
                    });
                }
            }
            Err(e) => v.findings.push_error(&e),
        }
    } else {
        // Header rules failed, so the expected size is unknown: still check the frame structure.
        if let Err(e) = parse::frames(body, s.body_offset) {
            v.findings.push_error(&e);
        }
    }
    v.structure = Some(s);
    v
}
