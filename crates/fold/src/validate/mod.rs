//! The six validation layers of the FOLD spec (section 6), in order, collecting every
//! finding: structure, anti-DoS limits, bounds, per-chunk integrity (with Reed-Solomon
//! repair), manifest hash, payload semantics.
//!
//! Chunks are checked one at a time as they stream: CRC32C and SHA-256 on
//! the stored bytes, zstd through a small reused buffer, and the decoded bytes straight into
//! the check of their type (a streaming JSON syntax check, a streaming `.npz` check, a count
//! for opaque chunks). Memory is a working set of a few MiB whatever a chunk declares; only an
//! ECC repair holds a chunk's stored payload.

mod chunk;
mod ecc_check;
mod payload;

pub use chunk::NPZ_MEMBERS_HELD_MAX;

use std::collections::HashMap;

use rasterpack_common::{Error, Finding, Findings, Input, Interrupt, Limits, Progress, Severity};
use sha2::{Digest, Sha256};

use crate::npz::NpzArrayInfo;
use crate::parse::{self, FoldContainer, FoldEntry};
use crate::pjson::{self, Value};
use crate::raw::ChunkHeader;

pub use crate::npz::MEMBER_DAMAGED as NPZ_MEMBER_DAMAGED;
pub(crate) use chunk::{check_chunk, check_chunk_riding};
pub(crate) use payload::PayloadRider;

/// What a chunk decoded to (kept only when the caller asks for content).
#[derive(Debug, Clone, PartialEq)]
pub enum FoldContent {
    /// Not decoded (integrity or bounds failed, or content not requested).
    None,
    /// A JSON chunk's document.
    Json(Value),
    /// A JSON chunk too large to hold as a document (it was checked as a stream): its size.
    JsonNotKept(u64),
    /// An NPZ0 chunk's arrays.
    Npz(Vec<NpzArrayInfo>),
    /// A zip archive that is not an `.npz` (TSAV torch archives): member names.
    Zip(Vec<String>),
    /// Opaque bytes: the first few for a preview.
    Opaque(Vec<u8>),
}

/// Status of one chunk after validation.
#[derive(Debug, Clone, PartialEq)]
pub struct FoldChunkStatus {
    /// The chunk's index entry.
    pub entry: FoldEntry,
    /// Its chunk header, when it could be read.
    pub header: Option<ChunkHeader>,
    /// CRC32C of the stored payload matched (after repair, if any).
    pub crc_ok: Option<bool>,
    /// SHA-256 of the stored payload matched the index (after repair, if any).
    pub sha_ok: Option<bool>,
    /// Payload bytes corrected by ECC.
    pub repaired_bytes: usize,
    /// Human ECC status: `none`, `rs(16) ok`, `rs(16) repaired N byte(s)`, `rs(16) quirk`, ...
    pub ecc_status: String,
    /// The payload decoded to `uncomp_len` bytes and (for JSON/NPZ0) parsed.
    pub decoded: bool,
    /// SHA-256 of the decoded payload (reports only).
    pub uncompressed_sha256: Option<String>,
    /// What the payload holds, when content was asked for.
    pub content: FoldContent,
    /// The decoded payload, when [`FoldAnalyzeOptions::keep_payload`] asked for it.
    pub payload: Option<Vec<u8>>,
    /// Error findings about this chunk (its index entry, header, bounds, integrity, payload):
    /// while there is one, nothing is read from the chunk. A damaged NPZ0 member is not one
    /// of them (see [`NpzArrayInfo::damaged`]): the other members stay readable.
    pub errors: Vec<Finding>,
    /// An NPZ0 archive's central directory, for reads of its members.
    pub(crate) directory: Option<std::sync::Arc<crate::npz::Directory>>,
}

impl FoldChunkStatus {
    fn new(e: &FoldEntry) -> FoldChunkStatus {
        FoldChunkStatus {
            entry: e.clone(),
            header: None,
            crc_ok: None,
            sha_ok: None,
            repaired_bytes: 0,
            ecc_status: "-".into(),
            decoded: false,
            uncompressed_sha256: None,
            content: FoldContent::None,
            payload: None,
            errors: Vec::new(),
            directory: None,
        }
    }
}

/// Everything validation learnt about a file.
#[derive(Debug, Clone, Default)]
pub struct FoldAnalysis {
    /// Every finding, in layer order.
    pub findings: Findings,
    /// Header and index, when they could be read.
    pub container: Option<FoldContainer>,
    /// One status per index entry that parsed.
    pub chunks: Vec<FoldChunkStatus>,
    /// `Some(true/false)` when the metadata holds a manifest hash.
    pub manifest_ok: Option<bool>,
    /// The manifest hash the metadata hashes to.
    pub manifest_recomputed: Option<String>,
    /// Repaired stored payloads: (absolute offset, bytes), for `convert` to write back.
    pub repairs: Vec<(u64, Vec<u8>)>,
}

/// Options of [`analyze`].
#[derive(Clone, Default)]
pub struct FoldAnalyzeOptions {
    /// Resource limits.
    pub limits: Limits,
    /// Keep decoded JSON / NPZ descriptions in [`FoldChunkStatus::content`].
    pub content: bool,
    /// Compute [`FoldChunkStatus::uncompressed_sha256`] (one more SHA-256 pass, over the
    /// decoded bytes: for reports).
    pub decoded_sha256: bool,
    /// Keep repaired payloads in [`FoldAnalysis::repairs`].
    pub keep_repairs: bool,
    /// Keep each verified, decoded payload in [`FoldChunkStatus::payload`] (bounded by the
    /// limits: for tools and tests, not for large files).
    pub keep_payload: bool,
    /// Told how many bytes of the file are checked, chunk by chunk.
    pub progress: Option<Progress>,
    /// Asked whether to go on (Ctrl-C in a host such as Python, a cancelled job): before each
    /// chunk and between pieces of the work on one (hashing, ECC repair, re-encoding parity),
    /// at least every few MiB. An `Err` stops the analysis with that error.
    pub interrupt: Option<Interrupt>,
}

impl std::fmt::Debug for FoldAnalyzeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FoldAnalyzeOptions")
            .field("limits", &self.limits)
            .field("content", &self.content)
            .field("decoded_sha256", &self.decoded_sha256)
            .field("keep_repairs", &self.keep_repairs)
            .field("keep_payload", &self.keep_payload)
            .field("progress", &self.progress)
            .field("interrupt", &self.interrupt.as_ref().map(|_| ".."))
            .finish()
    }
}

impl FoldAnalyzeOptions {
    /// Ask [`FoldAnalyzeOptions::interrupt`] whether to go on.
    pub(crate) fn poll(&self) -> Result<(), Error> {
        match &self.interrupt {
            Some(hook) => hook(),
            None => Ok(()),
        }
    }
}

/// Findings per validation layer, merged in layer order at the end.
#[derive(Default)]
pub(crate) struct Layers {
    pub structure: Findings,
    pub limits: Findings,
    pub bounds: Findings,
    pub integrity: Findings,
    pub manifest: Findings,
    pub semantics: Findings,
}

impl Layers {
    fn all(&self) -> [&Findings; 6] {
        [
            &self.structure,
            &self.limits,
            &self.bounds,
            &self.integrity,
            &self.manifest,
            &self.semantics,
        ]
    }

    /// How many findings each layer holds.
    pub(crate) fn counts(&self) -> [usize; 6] {
        self.all().map(Findings::len)
    }

    /// The error findings about a chunk as a whole added since `counts` gave `before` (a
    /// damaged NPZ0 member leaves the other members readable: it is not one of them).
    pub(crate) fn errors_since(&self, before: [usize; 6]) -> Vec<Finding> {
        self.all()
            .iter()
            .zip(before)
            .flat_map(|(f, n)| f.since(n))
            .filter(|f| f.severity == Severity::Error && !crate::npz::is_member_code(&f.code))
            .cloned()
            .collect()
    }

    fn merged(self) -> Findings {
        let mut f = self.structure;
        f.extend(self.limits);
        f.extend(self.bounds);
        f.extend(self.integrity);
        f.extend(self.manifest);
        f.extend(self.semantics);
        f
    }
}

/// `metadata.chunk_hashes`: the SHA-256 each chunk name is listed with (the last of repeated
/// keys, as a Python dict keeps it).
#[derive(Debug, Clone, Default)]
pub(crate) struct ChunkHashes {
    by_name: HashMap<String, String>,
}

impl ChunkHashes {
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.by_name.get(name).map(String::as_str)
    }
}

/// How many index entries carry each name.
pub(crate) fn name_counts(c: &FoldContainer) -> HashMap<&str, usize> {
    let mut m = HashMap::with_capacity(c.index.entries.len());
    for e in &c.index.entries {
        *m.entry(e.name.as_str()).or_insert(0) += 1;
    }
    m
}

/// The finding that makes a chunk name ambiguous: two index entries share it.
pub(crate) fn duplicate_name_error(c: &FoldContainer, e: &FoldEntry, counts: &HashMap<&str, usize>) -> Option<Finding> {
    let n = counts.get(e.name.as_str()).copied().unwrap_or(0);
    (n > 1).then(|| Finding {
        severity: Severity::Error,
        code: "fold.index.duplicate_name".into(),
        offset: Some(c.header.index_off),
        message: format!("chunk name {:?} appears {n} times in the index", e.name),
    })
}

/// What a chunk check needs besides the chunk itself.
pub(crate) struct ChunkContext<'a> {
    pub input: &'a Input,
    pub container: &'a FoldContainer,
    pub hashes: &'a Option<ChunkHashes>,
    pub opts: &'a FoldAnalyzeOptions,
    /// How far NPZ0 members of stored chunks are checked: wholly (validation), or as far as
    /// their `.npy` headers (a read, which checks the member it reads itself).
    pub members: crate::npz::WalkMode,
    /// Keep NPZ0 central directories in the statuses (a read extracts members with them).
    pub keep_directory: bool,
    /// NPZ0 members whose verdicts are held so far, over the chunks checked with this context
    /// (bounded by [`chunk::NPZ_MEMBERS_HELD_MAX`]).
    pub npz_members_held: &'a std::cell::Cell<u64>,
}

/// Run every layer. I/O errors (not file problems) are returned as `Err`.
pub fn analyze(input: &Input, opts: &FoldAnalyzeOptions) -> Result<FoldAnalysis, Error> {
    let mut out = FoldAnalysis::default();
    let mut head = Findings::new();
    let container = parse::open(input, &opts.limits, &mut head)?;
    let Some(container) = container else {
        out.findings = head;
        return Ok(out);
    };
    let mut l = Layers {
        structure: head,
        ..Default::default()
    };
    let before = l.counts();
    let hashes = chunk_hashes(&container, &mut l);
    // A malformed chunk_hashes leaves every chunk without its hierarchical check.
    let index_errors = l.errors_since(before);
    let name_counts = name_counts(&container);
    let held = std::cell::Cell::new(0);
    let ctx = ChunkContext {
        input,
        container: &container,
        hashes: &hashes,
        opts,
        members: crate::npz::WalkMode::Verify,
        keep_directory: false,
        npz_members_held: &held,
    };
    let mut spans: Vec<(u64, u64, String)> = Vec::new();
    for entry in &container.index.entries {
        opts.poll()?;
        let before = l.counts();
        let mut st = check_chunk(&ctx, entry, &mut l, &mut spans, &mut out.repairs)?;
        st.errors = index_errors.clone();
        st.errors.extend(duplicate_name_error(&container, entry, &name_counts));
        st.errors.extend(l.errors_since(before));
        out.chunks.push(st);
        if let Some(p) = &opts.progress {
            (p.0)(
                entry.offset.saturating_add(entry.comp_len).min(input.len()),
                input.len(),
            );
        }
    }
    let complete = spans.len() == container.index.entries.len()
        && container.index.entries.len() == container.index.declared_chunks;
    check_layout(&container, &mut spans, complete, &mut l);
    let (ok, recomputed) = check_manifest(&container, &mut l);
    out.manifest_ok = ok;
    out.manifest_recomputed = recomputed;
    out.findings = l.merged();
    out.container = Some(container);
    Ok(out)
}

/// `metadata.chunk_hashes`, checked against the index: linear in the names (a hash map, not a
/// scan of the index per name).
pub(crate) fn chunk_hashes(c: &FoldContainer, l: &mut Layers) -> Option<ChunkHashes> {
    let at = Some(c.header.index_off);
    match c.index.metadata.get("chunk_hashes") {
        None => {
            l.integrity.warning(
                "fold.integrity.chunk_hashes_missing",
                at,
                "metadata has no chunk_hashes",
            );
            None
        }
        Some(Value::Object(m)) => {
            let members = Value::dict_members(m);
            let mut by_name = HashMap::with_capacity(members.len());
            let names: std::collections::HashSet<&str> = c.index.entries.iter().map(|e| e.name.as_str()).collect();
            for (k, val) in members {
                let name = k.to_string_lossy();
                if !names.contains(name.as_str()) {
                    l.integrity.warning(
                        "fold.integrity.chunk_hashes_extra",
                        at,
                        format!("chunk_hashes names {name:?}, which is not in the index"),
                    );
                }
                by_name.insert(name, val.as_str().unwrap_or_default());
            }
            Some(ChunkHashes { by_name })
        }
        Some(other) => {
            l.structure.error(
                "fold.index.bad_type",
                at,
                format!("metadata.chunk_hashes is a {}, expected an object", other.type_name()),
            );
            None
        }
    }
}

pub(crate) fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Overlaps (invalid), gaps and trailing bytes (warnings) between chunks and the index.
/// `complete`: every chunk's extent is known; gaps are only meaningful then.
fn check_layout(c: &FoldContainer, spans: &mut [(u64, u64, String)], complete: bool, l: &mut Layers) {
    spans.sort();
    let mut cursor = crate::raw::HEADER_LEN;
    let mut cursor_name = "file header".to_string();
    for (start, end, name) in spans.iter() {
        if *start < cursor {
            l.bounds.error(
                "fold.bounds.overlap",
                Some(*start),
                format!("chunk {name:?} at offset {start} overlaps the {cursor_name} (ends at {cursor})"),
            );
        } else if *start > cursor && complete {
            l.bounds.warning(
                "fold.bounds.gap",
                Some(cursor),
                format!("{} unused byte(s) before chunk {name:?}", start - cursor),
            );
        }
        if *end > cursor {
            cursor = *end;
            cursor_name = format!("chunk {name:?}");
        }
    }
    let idx = c.header.index_off;
    if idx < cursor {
        l.bounds.error(
            "fold.bounds.overlap",
            Some(idx),
            format!("the index at offset {idx} overlaps the {cursor_name} (ends at {cursor})"),
        );
    } else if idx > cursor && complete {
        l.bounds.warning(
            "fold.bounds.gap",
            Some(cursor),
            format!("{} unused byte(s) before the index", idx - cursor),
        );
    }
    let idx_end = idx.saturating_add(c.header.index_len);
    if c.file_len > idx_end {
        l.bounds.warning(
            "fold.bounds.trailing_bytes",
            Some(idx_end),
            format!("{} byte(s) after the index", c.file_len - idx_end),
        );
    }
}

/// The text pyfolds hashes for `metadata.manifest_hash`: Python's `json.dumps(metadata
/// without manifest_hash, sort_keys=True, separators=(",", ":"))` (ASCII escapes on).
pub fn manifest_source(metadata: &Value) -> String {
    let stripped = match metadata {
        Value::Object(m) => Value::Object(m.iter().filter(|(k, _)| !k.eq_str("manifest_hash")).cloned().collect()),
        other => other.clone(),
    };
    pjson::dumps(&stripped, true, pjson::Ascii::Escape)
}

/// SHA-256 (hex) of [`manifest_source`]: what `metadata.manifest_hash` must hold.
pub fn manifest_hash(metadata: &Value) -> String {
    hex(&Sha256::digest(manifest_source(metadata).as_bytes()))
}

fn check_manifest(c: &FoldContainer, l: &mut Layers) -> (Option<bool>, Option<String>) {
    let at = Some(c.header.index_off);
    let recomputed = manifest_hash(&c.index.metadata);
    match c.index.metadata.get("manifest_hash") {
        None => {
            l.manifest.info(
                "fold.manifest.missing",
                at,
                "metadata has no manifest_hash: nothing to verify",
            );
            (None, Some(recomputed))
        }
        Some(Value::Str(s)) if s.eq_str(&recomputed) => (Some(true), Some(recomputed)),
        Some(v) => {
            let shown = v.as_str().unwrap_or_else(|| pjson::dumps(v, false, pjson::Ascii::Raw));
            l.manifest.warning(
                "fold.manifest.manifest_hash_mismatch",
                at,
                format!("metadata.manifest_hash is {shown}, the metadata hashes to {recomputed}"),
            );
            (Some(false), Some(recomputed))
        }
    }
}

/// The errors that stop a read of chunk `e`: findings about the index it depends on
/// (`chunk_hashes`, a duplicate name) and those of its own checks, first one first.
pub(crate) fn chunk_read_errors(c: &FoldContainer, e: &FoldEntry) -> (Vec<Finding>, Option<ChunkHashes>) {
    let mut l = Layers::default();
    let hashes = chunk_hashes(c, &mut l);
    let mut errors = l.errors_since([0; 6]);
    errors.extend(duplicate_name_error(c, e, &name_counts(c)));
    (errors, hashes)
}

/// Fully verify one chunk and return its decoded bytes (bounded by `limits.max_alloc`):
/// every check that protects those bytes runs (index entry, chunk header, bounds, CRC32C,
/// SHA-256, `metadata.chunk_hashes`, ECC repair, decoded length); the first error is returned.
pub fn read_chunk(input: &Input, c: &FoldContainer, name: &str, limits: &Limits) -> Result<Vec<u8>, Error> {
    let e = c
        .index
        .entries
        .iter()
        .find(|e| e.name == name)
        .ok_or_else(|| Error::usage(format!("no chunk named {name:?}")))?;
    let (mut errors, hashes) = chunk_read_errors(c, e);
    let opts = FoldAnalyzeOptions {
        limits: *limits,
        keep_payload: true,
        ..Default::default()
    };
    let held = std::cell::Cell::new(0);
    let ctx = ChunkContext {
        input,
        container: c,
        hashes: &hashes,
        opts: &opts,
        members: crate::npz::WalkMode::Verify,
        keep_directory: false,
        npz_members_held: &held,
    };
    let mut l = Layers::default();
    let st = check_chunk(&ctx, e, &mut l, &mut Vec::new(), &mut Vec::new())?;
    errors.extend(l.errors_since([0; 6]));
    if let Some(bad) = errors.first() {
        return Err(Error::invalid_at(bad.code.clone(), bad.offset, bad.message.clone()));
    }
    st.payload.ok_or_else(|| {
        Error::invalid_at(
            "fold.payload.unreadable",
            Some(e.offset),
            format!("chunk {name:?} could not be decoded"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::write::{FoldBuilder, FoldChunkOptions};

    fn log2(n: u64) -> u64 {
        64 - n.leading_zeros() as u64
    }

    /// 100k metadata keys (at the top of the metadata, and one level down) cost work in
    /// proportion to n log n: key comparisons and lookups are counted, not timed.
    #[test]
    fn metadata_with_100k_keys_costs_n_log_n_work() {
        const N: u64 = 100_000;
        for nested in [false, true] {
            let mut b = FoldBuilder::new();
            let keys: Vec<(String, Value)> = (0..N)
                .map(|i| (format!("k{:06}", (i * 7919) % N), Value::int(i as i64)))
                .collect();
            if nested {
                let obj = Value::Object(keys.iter().map(|(k, v)| (pjson::JStr::new(k), v.clone())).collect());
                b.metadata("nested", obj).unwrap();
            } else {
                for (k, v) in &keys {
                    b.metadata(k, v.clone()).unwrap();
                }
            }
            b.add_json("j", &Value::int(1), FoldChunkOptions::default()).unwrap();
            let bytes = b.to_bytes().unwrap();
            let input = Input::from_bytes("keys", bytes);
            crate::work::take();
            for content in [false, true] {
                let a = analyze(
                    &input,
                    &FoldAnalyzeOptions {
                        content,
                        ..Default::default()
                    },
                )
                .unwrap();
                assert_eq!(a.manifest_ok, Some(true), "nested {nested}: {:?}", a.findings);
            }
            let work = crate::work::take();
            let bound = 40 * N * log2(N);
            assert!(
                work <= bound,
                "nested {nested}: {work} steps for {N} keys (bound {bound}: n log n, not n^2 = {})",
                N * N
            );
            assert!(work >= N, "the counter counts ({work})");
        }
    }
}
