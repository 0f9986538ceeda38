//! Validation: the structural walk (file header, dataset graph, descriptors, lookups, hints,
//! cross-table references) and the content checks (text, JSON, indices, ranges, compressed
//! streams), collecting every finding with a stable code (see [`crate::codes`]) and the offset
//! of the field at fault.
//!
//! Memory stays bounded: dataset headers are bounded by their u16 counts (< 4 MiB each), table
//! data is streamed in 4 MiB pieces, compressed streams decode piece by piece, and JSON is
//! parsed as it streams without building the document. Time stays near-linear: every name
//! lookup and duplicate check goes through a hash map.
//!
//! Modules, in the order of the walk: `walk` (file header, graph, cross-table rules),
//! `dataset` (one dataset, stage by stage), `table` (one descriptor's rules), then the content
//! rules: `content` (streaming checks), `text`, `json`.

mod content;
mod dataset;
mod json;
mod table;
mod text;
mod walk;

use rasterpack_common::{Findings, Input, Limits, Severity};

use crate::codes;
use crate::document::UdfDocument;

pub use content::{check_contents, for_each_chunk};
pub use walk::walk;

pub(crate) use content::{check_contents_upto, check_table_bytes, for_each_decoded, ContentCheck, Position, CHUNK};
pub(crate) use json::json_shape;
pub(crate) use table::hint_allows;
pub(crate) use text::decode_text;

/// Full validation: structure plus every table's content.
pub fn validate(input: &Input, limits: &Limits) -> UdfDocument {
    validate_with_progress(input, limits, &|_, _| {})
}

/// [`validate`], telling `progress(done, total)` how many bytes of table data are checked (at
/// each 4 MiB piece), for a progress bar.
pub fn validate_with_progress(input: &Input, limits: &Limits, progress: &dyn Fn(u64, u64)) -> UdfDocument {
    let mut doc = walk(input, limits);
    let mut f = std::mem::take(&mut doc.findings);
    check_contents_upto(input, limits, &doc, u64::MAX, progress, &mut f);
    doc.findings = f;
    doc
}

fn push(f: &mut Findings, code: &'static str, offset: Option<u64>, msg: String) {
    let sev = codes::severity(code).unwrap_or(Severity::Error);
    f.push(sev, code, offset, msg);
}

/// DATASET links followed per table and in the whole file, at most.
const MAX_LINKS: u64 = 1 << 20;

/// Work budget for reads (dataset headers; table contents): overlapping datasets could make
/// a small file demand quadratic work, so reads beyond 4x the file size plus 64 MiB stop.
fn budget(file_len: u64) -> u64 {
    file_len.saturating_mul(4).saturating_add(64 << 20)
}
