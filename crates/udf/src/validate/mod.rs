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

/// Findings of one code listed in a report; the others are counted per code and severity
/// ([`Findings::omitted`]). A dataset can declare 65535 broken descriptors in 3 MiB, and every
/// finding costs memory in each report that lists it. The walk applies it between datasets
/// (each table keeps its own faults, so reads still refuse every broken table).
pub use rasterpack_common::LISTED_PER_CODE;

fn push(f: &mut Findings, code: &'static str, offset: Option<u64>, msg: String) {
    let sev = codes::severity(code).unwrap_or(Severity::Error);
    f.push(sev, code, offset, msg);
}

/// Entry budget: bytes of descriptors and lookup entries decoded in the whole walk. Datasets
/// that do not overlap hold at most the file's length of them; overlapping ones could make a
/// small file decode the same header many times, and each decoded entry costs memory (the
/// table, its findings: up to a KiB each), so decoding stops beyond the file's length plus
/// one of the largest dataset headers (3.7 MiB).
fn entry_budget(file_len: u64) -> u64 {
    file_len.saturating_add(4 << 20)
}

/// DATASET links followed per table and in the whole file, at most.
const MAX_LINKS: u64 = 1 << 20;

/// Work budget for reads (dataset headers; table contents): overlapping datasets could make
/// a small file demand quadratic work, so reads beyond 4x the file size plus 64 MiB stop.
fn budget(file_len: u64) -> u64 {
    file_len.saturating_mul(4).saturating_add(64 << 20)
}

#[cfg(test)]
mod tests {
    use super::walk::Walker;
    use super::*;
    use crate::model::UdfFile;
    use crate::raw::Hint;
    use crate::write::{TableSpec, UdfWriter};

    /// A root with `kids` child datasets of 1000 tables each: 500 values, 400 tables related
    /// to one of them, 100 INDEX tables whose target is in the root (a lookup that walks up
    /// to the parent). Returns the file and its number of entries (tables, lookup entries,
    /// links).
    fn many_entries(kids: usize) -> (Vec<u8>, u64) {
        let mut w = UdfWriter::new("MANY").unwrap();
        let root = w.add_dataset("ROOT").unwrap();
        w.set_root(root);
        w.add(root, TableSpec::array("pts", &[4], &[0f32; 4])).unwrap();
        let children: Vec<_> = (0..kids).map(|_| w.add_dataset("KID").unwrap()).collect();
        w.add(
            root,
            TableSpec::links("kids", &children.iter().map(|&c| Some(c)).collect::<Vec<_>>()),
        )
        .unwrap();
        for &c in &children {
            for i in 0..500 {
                w.add(c, TableSpec::array(&format!("v{i}"), &[1], &[i as f32])).unwrap();
            }
            for i in 0..400 {
                w.add(
                    c,
                    TableSpec::array(&format!("w{i}"), &[1], &[1u8]).related(&format!("v{i}")),
                )
                .unwrap();
            }
            for i in 0..100 {
                let spec = TableSpec::array(&format!("x{i}"), &[1], &[3u8])
                    .with_hint(Hint::Index, &[])
                    .index_into("pts");
                w.add(c, spec).unwrap();
            }
        }
        // Per child: 1000 tables and 1001 lookup entries (the names and `pts`); the root:
        // 2 tables, 2 lookups, `kids` links.
        let entries = kids as u64 * 2001 + 4 + kids as u64;
        (w.to_bytes().unwrap(), entries)
    }

    fn walk_work(bytes: &[u8]) -> (UdfDocument, u64) {
        let input = Input::from_bytes("many", bytes.to_vec());
        let limits = Limits::default();
        let mut w = Walker::new(&input, &limits);
        w.run();
        (w.doc, w.work)
    }

    /// Issue 12 item 3: the walk of ~200k entries (100k tables) costs a bounded number of
    /// steps per entry (every lookup a hash map probe), and twice the entries cost twice the
    /// steps, not four times.
    #[test]
    fn the_walk_is_linear_in_the_entries() {
        let (big, entries) = many_entries(100);
        let (doc, work) = walk_work(&big);
        assert!(
            doc.findings.is_empty(),
            "{:?}",
            &doc.findings.as_slice()[..doc.findings.len().min(3)]
        );
        assert_eq!(doc.datasets.len(), 101);
        let tables: usize = doc.datasets.iter().map(|d| d.tables.len()).sum();
        assert_eq!(tables, 100_002);
        eprintln!("walk: {work} steps for {entries} entries");
        assert!(work <= 12 * entries, "{work} steps for {entries} entries");
        let (half, half_entries) = many_entries(50);
        let (_, half_work) = walk_work(&half);
        let ratio = work as f64 / half_work as f64;
        let entry_ratio = entries as f64 / half_entries as f64;
        assert!(
            ratio < entry_ratio * 1.1,
            "work grew {ratio:.2}x for {entry_ratio:.2}x the entries"
        );
        // Every table found by its path and every related / index reference resolved.
        let file = UdfFile::from_bytes(big).unwrap();
        for path in file.table_paths() {
            assert_eq!(file.path_of(file.find(&path).unwrap().1), path);
        }
        let resolved = doc
            .datasets
            .iter()
            .flat_map(|d| &d.tables)
            .filter(|t| t.index_target == Some((0, 0)))
            .count();
        assert_eq!(resolved, 100 * 100);
    }
}
