//! Reading one array: the NPZ0 chunks `--element` may mean are checked as `validate` checks
//! them (index entry, chunk header, bounds, CRC32C, SHA-256, `chunk_hashes`, ECC repair,
//! decoded length, the members' local headers and extents; for zstd chunks every member
//! whole), the element is resolved, then the member is decoded again and its array (or a
//! region of it) streams into the sink: only as far as the region reaches, from the repaired
//! payload when ECC repaired the chunk. The member's own CRC-32 and length are checked when it
//! is decoded to its end.
//!
//! Memory is a working set (a zstd window, inflate and read buffers), whatever the array's
//! size. Chunks the element cannot mean are not read.

use rasterpack_common::fortran::{self, FortranReorder};
use rasterpack_common::npy::NpyHeader;
use rasterpack_common::{
    ArrayInfo, ArrayRequest, ArraySink, DType, Error, HeldBlocks, Input, Interrupt, Limits, RegionRuns, Result,
};

use crate::element::{npz_chunks, pick_array};
use crate::npz::member::NpyPrefix;
use crate::npz::{self, array_name, decode_name, ArrayTarget, CdWalk, ContentTap, StreamCheck, WalkMode};
use crate::parse::{FoldContainer, FoldEntry};
use crate::raw::{CHUNK_HEADER_LEN, FLAG_NONE};
use crate::scan::{scan_local, scan_local_hashed, Flow, Stored};
use crate::validate::{
    check_chunk_riding, chunk_hashes, duplicate_name_error, name_counts, ChunkContext, FoldAnalyzeOptions,
    FoldChunkStatus, FoldContent, Layers, PayloadRider,
};

/// At most this many bytes of the index's `metadata` (as JSON text) ride on an array's
/// attributes: they are the file's, of any size, and every writer that keeps attributes
/// (VDS metadata, the Zarr `rasterpack` attribute) copies them.
pub(crate) const MAX_ATTR_METADATA: usize = 64 * 1024;

/// The file-level facts an array read from `c` carries as its attributes (`ArrayInfo::attrs`):
/// the index's `version`, `created_at_unix` and `metadata` object without `chunk_hashes` and
/// `manifest_hash` (they protect this file's bytes and mean nothing in another file). A
/// `metadata` whose JSON text exceeds [`MAX_ATTR_METADATA`] is left out (`metadata_omitted`
/// gives its size): the cost of a read follows the array, not the index.
pub(crate) fn file_attrs(c: &FoldContainer) -> serde_json::Map<String, serde_json::Value> {
    use serde_json::Value as S;
    let mut out = serde_json::Map::new();
    out.insert("version".into(), S::from(c.index.version.clone()));
    if let Some(t) = c.index.created_at_unix.and_then(serde_json::Number::from_f64) {
        out.insert("created_at_unix".into(), S::Number(t));
    }
    if let S::Object(mut m) = c.index.metadata.to_serde() {
        m.remove("chunk_hashes");
        m.remove("manifest_hash");
        let len = serde_json::to_string(&m).map(|t| t.len()).unwrap_or(usize::MAX);
        if len <= MAX_ATTR_METADATA {
            out.insert("metadata".into(), S::Object(m));
        } else {
            out.insert("metadata_omitted".into(), S::from(format!("{len} bytes of JSON")));
        }
    }
    out
}

/// Chunks `element` may name: with the explicit `["CHUNK","ARRAY"]` form only chunks of that
/// name; otherwise every NPZ0 chunk (a bare array name may be in any of them).
fn candidates<'c>(c: &'c FoldContainer, element: Option<&str>) -> Vec<&'c FoldEntry> {
    let explicit = element
        .filter(|e| e.starts_with('['))
        .and_then(|e| serde_json::from_str::<[String; 2]>(e).ok());
    c.index
        .entries
        .iter()
        .filter(|e| e.ctype == "NPZ0")
        .filter(|e| explicit.as_ref().is_none_or(|[chunk, _]| &e.name == chunk))
        .collect()
}

/// Announce chunk `e`'s bytes (header, payload, ECC) to a remote input (see
/// [`Input::prefetch`]): the read checks every stored byte of the chunk (its CRC32C and
/// SHA-256), so they are fetched in a few large requests, not one per piece. Only a hint:
/// every byte is still read and checked. An extent that overflows is not announced (the
/// chunk's own checks report it). Local inputs: nothing.
fn announce_chunk(input: &Input, e: &FoldEntry) {
    if !input.is_remote() {
        return;
    }
    let end = e
        .offset
        .checked_add(e.header_len)
        .and_then(|x| x.checked_add(e.comp_len))
        .and_then(|x| x.checked_add(e.ecc_len));
    if let Some(end) = end {
        input.prefetch(std::slice::from_ref(&(e.offset..end.min(input.len()))));
    }
}

/// Verify chunk `e` as `validate` does; its status (errors, arrays, directory) and the
/// repaired payload when ECC repaired it.
fn verify_chunk(
    input: &Input,
    c: &FoldContainer,
    e: &FoldEntry,
    limits: &Limits,
    npz_members_held: &std::cell::Cell<u64>,
    rider: Option<&mut dyn PayloadRider>,
    interrupt: Option<Interrupt>,
) -> Result<(FoldChunkStatus, Option<Vec<u8>>)> {
    announce_chunk(input, e);
    let mut l = Layers::default();
    let hashes = chunk_hashes(c, &mut l);
    let mut errors = l.errors_since([0; 6]);
    errors.extend(duplicate_name_error(c, e, &name_counts(c)));
    let opts = FoldAnalyzeOptions {
        limits: *limits,
        content: true,
        keep_repairs: true,
        interrupt,
        ..Default::default()
    };
    let ctx = ChunkContext {
        input,
        container: c,
        hashes: &hashes,
        opts: &opts,
        // The member read is checked by the read itself (below): the others need only be
        // listed. zstd chunks are checked wholly all the same (their directory is at the end).
        members: WalkMode::List,
        keep_directory: true,
        npz_members_held,
    };
    let before = l.counts();
    let mut repairs = Vec::new();
    let mut st = check_chunk_riding(&ctx, e, &mut l, &mut Vec::new(), &mut repairs, rider)?;
    errors.extend(l.errors_since(before));
    st.errors = errors;
    let payload_off = e.offset + CHUNK_HEADER_LEN;
    let repaired = repairs.into_iter().find(|(off, _)| *off == payload_off).map(|(_, b)| b);
    Ok((st, repaired))
}

/// The NPZ0 chunks `element` may name, each verified: statuses, and repaired payloads.
pub(crate) type Verified = (Vec<FoldChunkStatus>, Vec<Option<Vec<u8>>>);

/// Verify every NPZ0 chunk `element` may name (see [`candidates`]).
pub(crate) fn verify_candidates(
    input: &Input,
    c: &FoldContainer,
    element: Option<&str>,
    limits: &Limits,
    interrupt: Option<Interrupt>,
) -> Result<Verified> {
    let mut statuses = Vec::new();
    let mut repaired = Vec::new();
    // The candidates' verdicts are held together: bounded over all of them, as in `validate`.
    let held = std::cell::Cell::new(0);
    for e in candidates(c, element) {
        let (st, rep) = verify_chunk(input, c, e, limits, &held, None, interrupt.clone())?;
        statuses.push(st);
        repaired.push(rep);
    }
    Ok((statuses, repaired))
}

/// Every NPZ0 chunk of a file verified by an earlier call (see [`stream_array`]), with the
/// limits it was verified under. Kept only when no chunk needed an ECC repair (so it holds no
/// payload in memory).
#[derive(Debug)]
pub(crate) struct VerifiedChunks {
    pub limits: Limits,
    pub statuses: Vec<FoldChunkStatus>,
}

/// Most NPZ0 members (over all chunks) whose verdicts a file keeps for later reads: ~200 bytes
/// each, so at most ~13 MiB held while the file is open. Archives with more members are
/// verified again by each read, as before (the one-pass read pays off for large arrays).
const KEEP_MEMBERS_MAX: usize = 65_536;

impl VerifiedChunks {
    /// What [`verify_candidates`] found for every NPZ0 chunk, when it can be kept.
    pub(crate) fn keep(limits: &Limits, verified: &Verified) -> Option<VerifiedChunks> {
        VerifiedChunks::keep_statuses(limits, &verified.0, verified.1.iter().any(Option::is_some))
    }

    /// [`VerifiedChunks::keep`] of the statuses of every NPZ0 chunk, `repaired` when ECC
    /// repaired any of them.
    pub(crate) fn keep_statuses(
        limits: &Limits,
        statuses: &[FoldChunkStatus],
        repaired: bool,
    ) -> Option<VerifiedChunks> {
        let members: usize = statuses
            .iter()
            .map(|st| match &st.content {
                FoldContent::Npz(arrays) => arrays.len(),
                _ => 0,
            })
            .sum();
        (!repaired && members <= KEEP_MEMBERS_MAX).then(|| VerifiedChunks {
            limits: *limits,
            statuses: statuses.to_vec(),
        })
    }
}

/// What a read verified of the file besides the array: the statuses of every NPZ0 chunk
/// (when the read's element could only mean the file's one NPZ0 chunk, verified in the read's
/// own pass), and whether ECC repaired any. Everything `arrays()` needs to list the file.
pub(crate) type SeenChunks = Option<(Vec<FoldChunkStatus>, bool)>;

/// Stream the array `req` names (or `req.region` of it) into `sink`.
///
/// Into a sink that takes bytes in any order, a read whose element can only mean one NPZ0
/// chunk (the file has one, or the `["CHUNK","ARRAY"]` form names one) reads that chunk once:
/// the chunk's own check (every check `arrays()` runs on it) and the member's decode into the
/// sink ride on the same pass ([`read_riding`]). With `earlier` (every NPZ0 chunk verified by
/// an earlier `arrays()`, under the same limits) the chunk is read once too, its stored bytes
/// hashed (CRC32C, SHA-256, on a second thread) as they are decoded into the sink, and the
/// read fails if they no longer match (the file changed since). Into a sequential sink that
/// takes blocks (`stats`), the same one-pass reads run through [`HeldBlocks`]: what the sink
/// makes of the bytes counts only once every check passed, and a repaired chunk starts the
/// array again from the repaired bytes. Otherwise the candidate chunks are verified first and
/// the chosen one decoded after: a sequential sink gets nothing before the chunk verified.
///
/// `seen` gets the statuses of every NPZ0 chunk when this read verified them all (see
/// [`SeenChunks`]), so the file's listing need not verify them again.
pub(crate) fn stream_array(
    input: &Input,
    c: &FoldContainer,
    req: &ArrayRequest,
    sink: &mut dyn ArraySink,
    earlier: Option<&VerifiedChunks>,
    seen: &mut SeenChunks,
) -> Result<()> {
    if !sink.random_access() && sink.takes_blocks() {
        let mut held = HeldBlocks::new(sink);
        stream_held(input, c, req, &mut held, earlier, seen)?;
        return held.commit();
    }
    let earlier = earlier.filter(|v| v.limits == req.limits && sink.random_access());
    if earlier.is_none() && sink.random_access() {
        // Not a chunk with ECC: its pass may decode damaged bytes into the sink before the
        // repair, and the repaired decode would then write every byte a second time, which a
        // sink that counts its bytes (a `.npy` file) rightly refuses.
        if let [e] = candidates(c, req.element.as_deref()).as_slice() {
            if e.ecc_len == 0 {
                let Some((statuses, repaired)) = read_riding(input, c, e, req, sink, seen)? else {
                    return Ok(());
                };
                // Not delivered in the pass: decode the member again from the verified
                // chunk. The sink may have begun with the same array already (a region read
                // of another member, say).
                let mut again = Rebegin { sink, began: None };
                return deliver(input, c, req, &mut again, &statuses, &[repaired], false);
            }
        }
    }
    match earlier {
        Some(v) => deliver(input, c, req, sink, &v.statuses, &vec![None; v.statuses.len()], true),
        None => {
            // A chunk with ECC is verified (and repaired) before the sink sees a byte: the
            // sink's interrupt hook (Ctrl-C) is polled through that work.
            let interrupt = sink.interrupt();
            let (statuses, repaired) = verify_candidates(input, c, req.element.as_deref(), &req.limits, interrupt)?;
            deliver(input, c, req, sink, &statuses, &repaired, false)
        }
    }
}

/// [`stream_array`] into a sink that takes blocks, held aside until the checks pass: the
/// one-pass reads of a random-access sink, a chunk with ECC included (its repair starts the
/// array again: the new `begin` drops the blocks of the damaged bytes).
fn stream_held(
    input: &Input,
    c: &FoldContainer,
    req: &ArrayRequest,
    held: &mut HeldBlocks<'_>,
    earlier: Option<&VerifiedChunks>,
    seen: &mut SeenChunks,
) -> Result<()> {
    if let Some(v) = earlier.filter(|v| v.limits == req.limits) {
        return deliver(input, c, req, held, &v.statuses, &vec![None; v.statuses.len()], true);
    }
    if let [e] = candidates(c, req.element.as_deref()).as_slice() {
        let Some((statuses, repaired)) = read_riding(input, c, e, req, held, seen)? else {
            return Ok(());
        };
        return deliver(input, c, req, held, &statuses, &[repaired], false);
    }
    let interrupt = held.interrupt();
    let (statuses, repaired) = verify_candidates(input, c, req.element.as_deref(), &req.limits, interrupt)?;
    deliver(input, c, req, held, &statuses, &repaired, false)
}

/// Decode the array `req` names from chunks verified already (`statuses`, with the payloads ECC
/// repaired) into `sink`; with `hash_on_read` the stored bytes are hashed again as they are
/// decoded (statuses from an earlier call).
fn deliver(
    input: &Input,
    c: &FoldContainer,
    req: &ArrayRequest,
    sink: &mut dyn ArraySink,
    statuses: &[FoldChunkStatus],
    repaired: &[Option<Vec<u8>>],
    hash_on_read: bool,
) -> Result<()> {
    let chunks = npz_chunks(statuses);
    let (chunk, name) = pick_array(&chunks, req.element.as_deref())?;
    let at = statuses
        .iter()
        .position(|s| std::ptr::eq(s, chunk.status))
        .ok_or_else(|| Error::usage("internal: the chosen chunk is not among those verified"))?;
    let st = &statuses[at];
    let e = &st.entry;
    let payload_off = e.offset + CHUNK_HEADER_LEN;
    let (Some(h), Some(dir), FoldContent::Npz(arrays)) = (st.header, st.directory.clone(), &st.content) else {
        return Err(Error::invalid_at(
            "fold.payload.unreadable",
            Some(e.offset),
            format!("chunk {:?} could not be decoded", e.name),
        ));
    };
    let idx = dir
        .members
        .iter()
        .position(|m| array_name(&m.name) == name)
        .ok_or_else(|| Error::usage(format!("no array {name:?} in chunk {:?}", e.name)))?;
    if let Some(err) = arrays.get(idx).and_then(|info| info.read_error(&dir.members[idx])) {
        return Err(Error::new(
            err.kind,
            err.code,
            Some(payload_off),
            format!("chunk {:?}: {}", e.name, err.message),
        ));
    }
    let stored = match &repaired[at] {
        Some(bytes) => Stored::Memory(bytes),
        None => Stored::File {
            input,
            offset: payload_off,
            len: h.comp_len,
        },
    };
    let mut target = RegionTarget {
        sink,
        spec: req,
        name: name.clone(),
        attrs: file_attrs(c),
        plan: None,
    };
    let mut walk = CdWalk::new(
        dir,
        h.uncomp_len,
        &req.limits,
        WalkMode::Verify,
        Some((idx, &mut target)),
    );
    // Only the chunk was verified above (its members were listed): the member read is decoded
    // to its end, so its own CRC-32 is checked even when the region ends early. numpy refuses
    // a member whose CRC-32 is wrong, and a read never returns what the reference refuses.
    walk.verify_target(true);
    if hash_on_read {
        announce_chunk(input, e);
    }
    match (h.flags, stored) {
        (flags, Stored::File { input, offset, len }) if hash_on_read => {
            let scanned = scan_local_hashed(input, offset, len, flags, h.uncomp_len, &mut |p| walk.feed(p))?;
            let (crc, sha) = scanned.hashes.unwrap_or_default();
            if crc != h.crc32c {
                return Err(Error::invalid_at(
                    "fold.integrity.crc_mismatch",
                    Some(e.offset + 24),
                    format!(
                        "chunk {:?}: CRC32C of the stored payload is {crc:#010x}, header says {:#010x} (changed since it was verified)",
                        e.name, h.crc32c
                    ),
                ));
            }
            if sha != e.sha256 {
                return Err(Error::invalid_at(
                    "fold.integrity.sha_mismatch",
                    Some(c.header.index_off),
                    format!(
                        "chunk {:?}: SHA-256 of the stored payload is {sha}, index says {} (changed since it was verified)",
                        e.name, e.sha256
                    ),
                ));
            }
            if let Err((code, msg)) = scanned.decode {
                return Err(Error::invalid_at(
                    code,
                    Some(payload_off),
                    format!("chunk {:?}: {msg}", e.name),
                ));
            }
        }
        (FLAG_NONE, Stored::File { input, offset, len }) => {
            // Stored as is: read only the ranges the walk needs.
            let mut buf = vec![0u8; npz_piece(len)];
            while let Some(at) = walk.wants_from() {
                let n = (len - at).min(buf.len() as u64) as usize;
                input.read_at(offset + at, &mut buf[..n], "chunk payload")?;
                if walk.feed_at(at, &buf[..n]) == Flow::Stop {
                    break;
                }
            }
        }
        (FLAG_NONE, Stored::Memory(m)) => npz::feed_all(&mut walk, m),
        (flags, stored) => {
            let scanned = scan_local(stored, flags, h.uncomp_len, &mut |p| walk.feed(p))?;
            if let Err((code, msg)) = scanned.decode {
                return Err(Error::invalid_at(
                    code,
                    Some(payload_off),
                    format!("chunk {:?}: {msg}", e.name),
                ));
            }
        }
    }
    let (result, _) = walk.finish_with_target();
    result.map_err(|err| {
        Error::new(
            err.kind,
            err.code,
            Some(payload_off),
            format!("chunk {:?}: {}", e.name, err.message),
        )
    })?;
    target.complete()
}

/// A verified chunk's status and its ECC-repaired payload (when ECC repaired it).
type OneChunk = (Vec<FoldChunkStatus>, Option<Vec<u8>>);

/// The one-pass read of chunk `e`, the only chunk `req.element` may mean: the chunk is checked
/// exactly as `arrays()` checks it ([`verify_chunk`]: header against index, bounds, CRC32C,
/// SHA-256, `chunk_hashes`, decoded length, the archive's members) while the member the
/// element names (the one it most likely names, found by its local header or the directory)
/// is decoded into `sink` from the same bytes. The array counts only if every check passed and
/// the element resolves, on the checked chunk, to that very member (`Ok(None)`); otherwise the
/// chunk's failure is returned as the listing reports it, or (an ECC repair, an archive the
/// streaming check could not follow, another member after all) the verified chunk and its
/// repaired payload, for the caller to decode the member again: the cost of one pass is paid
/// only by files that verify. `seen` gets the chunk's status when it is the file's only NPZ0
/// chunk.
fn read_riding(
    input: &Input,
    c: &FoldContainer,
    e: &FoldEntry,
    req: &ArrayRequest,
    sink: &mut dyn ArraySink,
    seen: &mut SeenChunks,
) -> Result<Option<OneChunk>> {
    let want = likely_array(e, req.element.as_deref());
    let held = std::cell::Cell::new(0);
    let mut rider = Rider {
        want,
        target: Some(RegionTarget {
            sink: &mut *sink,
            spec: req,
            name: String::new(),
            attrs: file_attrs(c),
            plan: None,
        }),
        walk: None,
        tap: None,
        vouched: None,
        failure: None,
    };
    let (st, rep) = verify_chunk(input, c, e, &req.limits, &held, Some(&mut rider), None)?;
    let statuses = vec![st];
    let npz_total = c.index.entries.iter().filter(|x| x.ctype == "NPZ0").count();
    // Kept for the listing only when small enough to keep (as `VerifiedChunks` would): a copy
    // of 330 000 members' descriptions costs more than listing the file again, if ever asked.
    let members = match &statuses[0].content {
        crate::validate::FoldContent::Npz(arrays) => arrays.len(),
        _ => 0,
    };
    if npz_total == 1 && members <= KEEP_MEMBERS_MAX {
        *seen = Some((statuses.clone(), rep.is_some()));
    }
    let chunks = npz_chunks(&statuses);
    let rode = match pick_array(&chunks, req.element.as_deref()) {
        Ok((chunk, name)) if rep.is_none() => rider.delivered(chunk.status, &name)?,
        Ok(_) => false,
        Err(err) => return Err(err),
    };
    Ok((!rode).then_some((statuses, rep)))
}

/// The array name `element` most likely means in chunk `e` (the only NPZ0 chunk it may
/// mean): `None` for the default (the first member). Checked against the verified chunk after
/// the pass.
fn likely_array(e: &FoldEntry, element: Option<&str>) -> Option<String> {
    let el = element?;
    if el.starts_with('[') {
        if let Ok([_, array]) = serde_json::from_str::<[String; 2]>(el) {
            return Some(array);
        }
    }
    Some(
        match el.strip_prefix(e.name.as_str()).and_then(|r| r.strip_prefix('/')) {
            Some(array) => array.to_string(),
            None => el.to_string(),
        },
    )
}

/// Decodes the likely member into the caller's sink as the chunk's check walks the archive.
struct Rider<'s, 'r> {
    want: Option<String>,
    /// The target while no walk holds it.
    target: Option<RegionTarget<'s, 'r>>,
    /// A stored archive: the walk against its directory that extracts the member (as every
    /// read's walk does), with its directory index.
    walk: Option<(usize, CdWalk<RegionTarget<'s, 'r>>)>,
    /// A streamed archive: the member taken from its local headers.
    tap: Option<TapState>,
    /// The member the streaming check vouched for, after it concluded.
    vouched: Option<usize>,
    failure: Option<Error>,
}

/// The member a [`Rider`] takes from a streamed archive.
struct TapState {
    index: usize,
    declared: u64,
    npy: NpyPrefix,
    header_sent: bool,
    done: bool,
}

impl Rider<'_, '_> {
    fn wants(&self, member: &str) -> bool {
        self.want.as_deref().is_none_or(|w| w == array_name(member))
    }

    /// Whether the member `name` of the verified chunk `st` went whole into the sink, from
    /// bytes every check passed. `Err` when it did and the array cannot be read after all.
    fn delivered(self, st: &FoldChunkStatus, name: &str) -> Result<bool> {
        let (Some(dir), FoldContent::Npz(arrays)) = (st.directory.as_ref(), &st.content) else {
            return Ok(false);
        };
        let Some(idx) = dir.members.iter().position(|m| array_name(&m.name) == name) else {
            return Ok(false);
        };
        if self.failure.is_some() {
            return Ok(false);
        }
        let target = match (self.walk, self.tap) {
            (Some((at, walk)), None) if at == idx => match walk.finish_with_target() {
                (Ok(_), Some(target)) => target,
                _ => return Ok(false),
            },
            (None, Some(tap)) if tap.index == idx && self.vouched == Some(idx) && tap.done => match self.target {
                Some(target) => target,
                None => return Ok(false),
            },
            _ => return Ok(false),
        };
        if target.name != name {
            return Ok(false);
        }
        let payload_off = st.entry.offset + CHUNK_HEADER_LEN;
        if let Some(err) = arrays.get(idx).and_then(|info| info.read_error(&dir.members[idx])) {
            return Err(Error::new(
                err.kind,
                err.code,
                Some(payload_off),
                format!("chunk {:?}: {}", st.entry.name, err.message),
            ));
        }
        Ok(target.complete().is_ok())
    }
}

impl PayloadRider for Rider<'_, '_> {
    fn tap(&mut self) -> &mut dyn ContentTap {
        self
    }

    fn stored_piece(&mut self, dir: &std::sync::Arc<crate::npz::Directory>, total: u64, piece: &[u8]) {
        if self.walk.is_none() {
            let Some(mut target) = self.target.take() else { return };
            let Some(idx) = dir.members.iter().position(|m| self.wants(&m.name)) else {
                return;
            };
            target.name = array_name(&dir.members[idx].name).to_string();
            let mut walk = CdWalk::new(
                std::sync::Arc::clone(dir),
                total,
                &target.spec.limits,
                WalkMode::Verify,
                Some((idx, target)),
            );
            walk.verify_target(true);
            self.walk = Some((idx, walk));
        }
        if let Some((_, walk)) = self.walk.as_mut() {
            walk.feed(piece);
        }
    }

    fn concluded(&mut self, tapped: Option<usize>) {
        self.vouched = tapped;
    }
}

impl ContentTap for Rider<'_, '_> {
    fn start(&mut self, index: usize, name: &[u8], flags: u16, declared: u64) -> bool {
        if self.tap.is_some() || self.target.is_none() {
            return false;
        }
        let Ok(decoded) = decode_name(name, flags) else {
            return false;
        };
        if !self.wants(&decoded) {
            return false;
        }
        if let Some(t) = self.target.as_mut() {
            t.name = array_name(&decoded).to_string();
        }
        self.tap = Some(TapState {
            index,
            declared,
            npy: NpyPrefix::default(),
            header_sent: false,
            done: false,
        });
        true
    }

    fn content(&mut self, at: u64, bytes: &[u8]) {
        let (Some(tap), Some(target)) = (self.tap.as_mut(), self.target.as_mut()) else {
            return;
        };
        if tap.done || self.failure.is_some() {
            return;
        }
        let used = tap.npy.feed(at, bytes);
        let Some(header) = &tap.npy.result else { return };
        let h = match header {
            Ok(h) => h,
            Err(err) => {
                self.failure = Some(err.clone());
                return;
            }
        };
        if !tap.header_sent {
            tap.header_sent = true;
            // The data the member holds fills the shape (what the walk refuses otherwise).
            let avail = tap.declared - h.data_offset.min(tap.declared);
            if avail != h.data_len {
                self.failure = Some(Error::usage("the member's size does not fit its shape"));
                return;
            }
            if let Err(err) = target.header(h) {
                self.failure = Some(err);
                return;
            }
        }
        let rest = &bytes[used..];
        if rest.is_empty() {
            return;
        }
        let data_at = (at + used as u64).saturating_sub(h.data_offset);
        match target.data(data_at, rest) {
            Ok(Flow::More) => {}
            Ok(Flow::Stop) => tap.done = true,
            Err(err) => self.failure = Some(err),
        }
    }
}

/// A sink that a second decode of the same array may begin again: a `begin` with the array it
/// already began is not passed on (its bytes are all written again).
struct Rebegin<'a> {
    sink: &'a mut dyn ArraySink,
    began: Option<ArrayInfo>,
}

impl<'a> rasterpack_common::SinkWrapper for Rebegin<'a> {
    type Inner = dyn ArraySink + 'a;
    fn inner(&mut self) -> &mut (dyn ArraySink + 'a) {
        self.sink
    }
    fn inner_ref(&self) -> &(dyn ArraySink + 'a) {
        self.sink
    }
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        if self.began.as_ref() == Some(info) {
            return Ok(());
        }
        self.began = Some(info.clone());
        self.sink.begin(info)
    }
}

/// The array `element` names, from its member's `.npy` header, when the element can only mean
/// one NPZ0 chunk and that chunk has no ECC (a damaged header could be repaired into another
/// one): the payload is decoded from its start only as far as that header. Nothing is
/// verified (the read is); `None` when the header is not found that way (the caller lists).
pub(crate) fn peek_array(
    input: &Input,
    c: &FoldContainer,
    element: Option<&str>,
    limits: &Limits,
) -> Result<Option<ArrayInfo>> {
    let chunks = candidates(c, element);
    let [e] = chunks.as_slice() else {
        return Ok(None);
    };
    let payload_off = e.offset.saturating_add(CHUNK_HEADER_LEN);
    let end = payload_off.checked_add(e.comp_len);
    if e.ecc_len != 0 || e.offset < crate::raw::HEADER_LEN || end.is_none_or(|end| end > c.file_len) {
        return Ok(None);
    }
    let mut hb = [0u8; CHUNK_HEADER_LEN as usize];
    input.read_at(e.offset, &mut hb, "chunk header")?;
    let h = crate::raw::ChunkHeader::from_bytes(&hb);
    if h.flags as u64 != e.flags || h.comp_len != e.comp_len || h.uncomp_len != e.uncomp_len {
        return Ok(None);
    }
    let mut peek = Peek {
        want: likely_array(e, element),
        taken: None,
        npy: NpyPrefix::default(),
    };
    let mut check = StreamCheck::new(limits);
    let stored = Stored::File {
        input,
        offset: payload_off,
        len: h.comp_len,
    };
    scan_local(stored, h.flags, h.uncomp_len, &mut |p| {
        check.feed_tapped(p, &mut peek);
        if peek.npy.result.is_some() {
            Flow::Stop
        } else {
            Flow::More
        }
    })?;
    let (Some(array), Some(Ok(header))) = (peek.taken, peek.npy.result) else {
        return Ok(None);
    };
    let mut info = ArrayInfo::new(header.dtype, header.shape);
    info.attrs = file_attrs(c);
    info.name = Some(match element {
        Some(el) => el.to_string(),
        None => format!("{}/{array}", e.name),
    });
    Ok(Some(info))
}

/// Takes the `.npy` header of the member [`peek_array`] looks for.
struct Peek {
    want: Option<String>,
    taken: Option<String>,
    npy: NpyPrefix,
}

impl ContentTap for Peek {
    fn start(&mut self, _: usize, name: &[u8], flags: u16, _: u64) -> bool {
        let Ok(decoded) = decode_name(name, flags) else {
            return false;
        };
        let array = array_name(&decoded);
        if self.taken.is_some() || self.want.as_deref().is_some_and(|w| w != array) {
            return false;
        }
        self.taken = Some(array.to_string());
        true
    }
    fn content(&mut self, at: u64, bytes: &[u8]) {
        self.npy.feed(at, bytes);
    }
}

/// Stream member `idx` (array `name`) of the archive stored as is at `offset..offset+len` of
/// `input` (a `.npz` file: 0 and its length) into `sink`, or `req.region` of it; the member is
/// decoded to its end, so its CRC-32 is checked even when the region ends early. A sink that
/// takes bytes only in order gets nothing before the member verified (a first pass).
#[allow(clippy::too_many_arguments)]
pub(crate) fn stream_npz_member(
    input: &Input,
    offset: u64,
    len: u64,
    dir: std::sync::Arc<npz::Directory>,
    idx: usize,
    name: &str,
    req: &ArrayRequest,
    sink: &mut dyn ArraySink,
) -> Result<()> {
    let mut buf = vec![0u8; npz_piece(len)];
    if !sink.random_access() {
        let mut walk = CdWalk::new(
            dir.clone(),
            len,
            &req.limits,
            WalkMode::Verify,
            Some((idx, crate::npz::walk::NoTarget)),
        );
        walk.any_member_size();
        feed_stored(&mut walk, input, offset, len, &mut buf)?;
        walk.finish()?;
    }
    let mut target = RegionTarget {
        sink,
        spec: req,
        name: name.to_string(),
        // A `.npz` file has no index: no file-level metadata.
        attrs: serde_json::Map::new(),
        plan: None,
    };
    let mut walk = CdWalk::new(dir, len, &req.limits, WalkMode::Verify, Some((idx, &mut target)));
    walk.verify_target(true);
    walk.any_member_size();
    feed_stored(&mut walk, input, offset, len, &mut buf)?;
    let (result, _) = walk.finish_with_target();
    result?;
    target.complete()
}

/// Feed `walk` the ranges it asks for of an archive stored as is at `offset..offset+len`.
fn feed_stored<T: ArrayTarget>(
    walk: &mut CdWalk<T>,
    input: &Input,
    offset: u64,
    len: u64,
    buf: &mut [u8],
) -> Result<()> {
    while let Some(at) = walk.wants_from() {
        let n = (len - at).min(buf.len() as u64) as usize;
        input.read_at(offset + at, &mut buf[..n], "npz archive")?;
        if walk.feed_at(at, &buf[..n]) == Flow::Stop {
            break;
        }
    }
    Ok(())
}

fn npz_piece(len: u64) -> usize {
    len.clamp(1, 4 << 20) as usize
}

/// What the region target does once the `.npy` header is known.
struct Plan {
    runs: RegionRuns,
    /// The run being delivered: its source offset and length.
    current: Option<(u64, u64)>,
    /// Bytes of the current run already delivered.
    in_run: u64,
    /// Output offset of the next byte.
    out: u64,
    total: u64,
    dtype: DType,
    swap: bool,
    /// A value cut by the end of a piece (byte-swapped dtypes only).
    partial: Vec<u8>,
    /// Fortran-order members: the stored bytes are reordered to C order on the way.
    fortran: Option<FortranReorder>,
}

/// Delivers a member's array, or the requested region of it, to the caller's sink.
struct RegionTarget<'s, 'r> {
    sink: &'s mut dyn ArraySink,
    spec: &'r ArrayRequest,
    name: String,
    /// The array's attributes: the file's ([`file_attrs`]).
    attrs: serde_json::Map<String, serde_json::Value>,
    plan: Option<Plan>,
}

impl RegionTarget<'_, '_> {
    /// Every byte of the region was delivered.
    fn complete(&self) -> Result<()> {
        match &self.plan {
            Some(p) if p.out == p.total => Ok(()),
            Some(p) => Err(Error::invalid_at(
                npz::MEMBER_DAMAGED,
                None,
                format!("array {:?}: {} of {} bytes could be read", self.name, p.out, p.total),
            )),
            None => Err(Error::invalid_at(
                npz::MEMBER_DAMAGED,
                None,
                format!("array {:?}: its .npy header could not be read", self.name),
            )),
        }
    }

    fn emit(sink: &mut dyn ArraySink, p: &mut Plan, bytes: &[u8]) -> Result<()> {
        if !p.swap {
            return Self::deliver(sink, p, bytes);
        }
        // Whole values only, swapped to little-endian.
        let mut buf = std::mem::take(&mut p.partial);
        buf.extend_from_slice(bytes);
        let elem = p.dtype.size();
        let whole = buf.len() / elem * elem;
        let (values, rest) = buf.split_at_mut(whole);
        p.dtype.swap_to_le(values);
        if !values.is_empty() {
            Self::deliver(sink, p, values)?;
        }
        p.partial = rest.to_vec();
        Ok(())
    }

    /// Little-endian bytes of the stored region, in stored order, to the sink (reordered to C
    /// order first for a Fortran-order member).
    fn deliver(sink: &mut dyn ArraySink, p: &mut Plan, bytes: &[u8]) -> Result<()> {
        match p.fortran.as_mut() {
            Some(f) => f.write_at(sink, p.out, bytes)?,
            None => sink.write_at(p.out, bytes)?,
        }
        p.out += bytes.len() as u64;
        Ok(())
    }
}

impl ArrayTarget for RegionTarget<'_, '_> {
    fn header(&mut self, h: &NpyHeader) -> Result<()> {
        let region = self.spec.region_of(&h.shape)?;
        let mut info = ArrayInfo::new(h.dtype, region.shape());
        info.name = Some(self.name.clone());
        info.attrs = self.attrs.clone();
        let total = info.byte_len()?;
        let elem = h.dtype.size() as u64;
        // A Fortran-order member stores the C-order transpose: walk the (reversed) region of
        // that, and reorder what it delivers.
        let (fortran, mut runs) = if h.fortran_order {
            let reorder = FortranReorder::begin(&info, &self.spec.limits, self.sink)?;
            let stored = fortran::fortran_stored_shape(&h.shape);
            let runs = RegionRuns::new(&stored, &fortran::fortran_stored_region(&region), elem);
            (Some(reorder), runs)
        } else {
            self.sink.begin(&info)?;
            (None, RegionRuns::new(&h.shape, &region, elem))
        };
        let current = runs.next();
        self.plan = Some(Plan {
            runs,
            current,
            in_run: 0,
            out: 0,
            total,
            dtype: h.dtype,
            swap: h.big_endian && h.dtype.swap_unit() > 1,
            partial: Vec::new(),
            fortran,
        });
        Ok(())
    }

    fn data(&mut self, at: u64, bytes: &[u8]) -> Result<Flow> {
        let Some(p) = self.plan.as_mut() else {
            return Err(Error::usage("internal: array data before its header"));
        };
        let end = at + bytes.len() as u64;
        while let Some((start, len)) = p.current {
            let run_start = start + p.in_run;
            let run_end = start + len;
            if run_start >= end {
                return Ok(Flow::More);
            }
            if run_start < at {
                return Err(Error::usage("internal: array data arrived out of order"));
            }
            let upto = run_end.min(end);
            let piece = &bytes[(run_start - at) as usize..(upto - at) as usize];
            Self::emit(self.sink, p, piece)?;
            p.in_run += piece.len() as u64;
            if p.in_run == len {
                p.in_run = 0;
                p.current = p.runs.next();
            }
        }
        Ok(Flow::Stop)
    }
}

#[cfg(test)]
mod tests {
    use rasterpack_common::{DType, MemorySink, NdArray, RegionSpec};

    use crate::npz::crc32;
    use crate::write::{FoldBuilder, FoldChunkOptions, FoldCompression};
    use crate::FoldFile;

    #[test]
    fn a_second_decode_passes_every_hook_on_but_a_repeated_begin() {
        use rasterpack_common::testkit::{assert_forwards, call_every_hook, HookProbe};
        let info = rasterpack_common::ArrayInfo::new(DType::U16, vec![3, 4]);
        let mut probe = HookProbe::default();
        call_every_hook(
            &mut super::Rebegin {
                sink: &mut probe,
                began: None,
            },
            &info,
        );
        assert_forwards("Rebegin", &probe, &[]);
        // Begun with this array already: everything but `begin` still goes on.
        let mut probe = HookProbe::default();
        call_every_hook(
            &mut super::Rebegin {
                sink: &mut probe,
                began: Some(info.clone()),
            },
            &info,
        );
        assert_forwards("Rebegin, begun", &probe, &["begin"]);
    }

    /// A zip of one member `name.npy` holding `content`, stored or deflated.
    fn zip_one(name: &str, content: &[u8], deflate: bool) -> Vec<u8> {
        let data = if deflate {
            miniz_oxide::deflate::compress_to_vec(content, 6)
        } else {
            content.to_vec()
        };
        let fname = format!("{name}.npy");
        let method: u16 = if deflate { 8 } else { 0 };
        let mut z = Vec::new();
        z.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        z.extend_from_slice(&20u16.to_le_bytes());
        z.extend_from_slice(&0u16.to_le_bytes());
        z.extend_from_slice(&method.to_le_bytes());
        z.extend_from_slice(&[0, 0, 0x21, 0]);
        z.extend_from_slice(&crc32(content).to_le_bytes());
        z.extend_from_slice(&(data.len() as u32).to_le_bytes());
        z.extend_from_slice(&(content.len() as u32).to_le_bytes());
        z.extend_from_slice(&(fname.len() as u16).to_le_bytes());
        z.extend_from_slice(&0u16.to_le_bytes());
        z.extend_from_slice(fname.as_bytes());
        z.extend_from_slice(&data);
        let cd = z.len() as u32;
        let mut c = Vec::new();
        c.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        c.extend_from_slice(&[20, 3, 20, 0, 0, 0]);
        c.extend_from_slice(&method.to_le_bytes());
        c.extend_from_slice(&[0, 0, 0x21, 0]);
        c.extend_from_slice(&crc32(content).to_le_bytes());
        c.extend_from_slice(&(data.len() as u32).to_le_bytes());
        c.extend_from_slice(&(content.len() as u32).to_le_bytes());
        c.extend_from_slice(&(fname.len() as u16).to_le_bytes());
        c.extend_from_slice(&[0; 12]);
        c.extend_from_slice(&0u32.to_le_bytes());
        c.extend_from_slice(fname.as_bytes());
        z.extend_from_slice(&c);
        z.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
        z.extend_from_slice(&[0, 0, 0, 0, 1, 0, 1, 0]);
        z.extend_from_slice(&(c.len() as u32).to_le_bytes());
        z.extend_from_slice(&cd.to_le_bytes());
        z.extend_from_slice(&0u16.to_le_bytes());
        z
    }

    /// A `.npy` member of u16 values `0..n` in shape `shape`, little- or big-endian.
    fn member(shape: &[u64], big_endian: bool) -> (Vec<u8>, NdArray) {
        let n: u64 = shape.iter().product();
        let values: Vec<u16> = (0..n).map(|v| (v * 7 % 65521) as u16).collect();
        let array = NdArray::from_vec(shape.to_vec(), values.clone()).unwrap();
        let mut content = rasterpack_common::npy::header_bytes(DType::U16, shape);
        if big_endian {
            let at = content.windows(5).position(|w| w == b"'<u2'").unwrap();
            content[at + 1] = b'>';
            values.iter().for_each(|v| content.extend_from_slice(&v.to_be_bytes()));
        } else {
            content.extend_from_slice(&array.data);
        }
        (content, array)
    }

    /// Every region of every member layout reads what the whole array holds there.
    #[test]
    fn regions_read_what_the_array_holds_there() {
        let shape = [6u64, 5, 4];
        let specs = ["", "0", "5", "1:3", "2:6,1:4", ":,:,3", "1:2,4,0:2", ":,2:3,:", "5,4,3"];
        for deflate in [false, true] {
            for big_endian in [false, true] {
                for compression in [FoldCompression::None, FoldCompression::Zstd(1)] {
                    let (content, array) = member(&shape, big_endian);
                    let zip = zip_one("v", &content, deflate);
                    let mut b = FoldBuilder::new();
                    b.add_chunk("c", "NPZ0", &zip, FoldChunkOptions { compression, ecc: None })
                        .unwrap();
                    let file = FoldFile::from_bytes(b.to_bytes().unwrap()).unwrap();
                    assert!(file.validate().is_valid(true));
                    for spec in specs {
                        let what = format!("deflate {deflate} big-endian {big_endian} {compression:?} {spec:?}");
                        let mut req = rasterpack_common::ArrayRequest::for_element("c/v");
                        let region = if spec.is_empty() {
                            rasterpack_common::Region::full(&shape)
                        } else {
                            rasterpack_common::Region::parse(spec, &shape).unwrap()
                        };
                        if !spec.is_empty() {
                            // The box of the spec: this checks the reader, which reads boxes.
                            req = req.with_region(RegionSpec::from(&region));
                        }
                        let got = file.read(&req).unwrap_or_else(|e| panic!("{what}: {e}"));
                        let want = array.region(&region).unwrap();
                        assert_eq!(got.shape, want.shape, "{what}");
                        assert_eq!(got.data, want.data, "{what}");
                        // A sequential sink gets the same bytes in order.
                        let mut seq = SequentialSink::default();
                        file.stream(&req, &mut seq).unwrap();
                        assert_eq!(seq.data, want.data, "{what}: sequential");
                    }
                }
            }
        }
    }

    /// A sink that accepts only ascending, gapless writes.
    #[derive(Default)]
    struct SequentialSink {
        data: Vec<u8>,
    }

    impl rasterpack_common::ArraySink for SequentialSink {
        fn begin(&mut self, _: &rasterpack_common::ArrayInfo) -> rasterpack_common::Result<()> {
            Ok(())
        }
        fn write_at(&mut self, offset: u64, data: &[u8]) -> rasterpack_common::Result<()> {
            assert_eq!(offset, self.data.len() as u64, "out of order");
            self.data.extend_from_slice(data);
            Ok(())
        }
        fn finish(&mut self) -> rasterpack_common::Result<()> {
            Ok(())
        }
    }

    /// A damaged chunk delivers nothing: it is verified before the first byte goes out.
    #[test]
    fn a_damaged_chunk_delivers_nothing() {
        let (content, _) = member(&[64, 64], false);
        let mut b = FoldBuilder::new();
        b.add_chunk("c", "NPZ0", &zip_one("v", &content, true), FoldChunkOptions::default())
            .unwrap();
        let mut bytes = b.to_bytes().unwrap();
        let last = 28 + 32 + 100;
        bytes[last] ^= 0x40;
        let file = FoldFile::from_bytes(bytes).unwrap();
        let mut seq = SequentialSink::default();
        let err = file
            .stream(&rasterpack_common::ArrayRequest::for_element("c/v"), &mut seq)
            .unwrap_err();
        assert_eq!(err.code, "fold.integrity.crc_mismatch", "{err}");
        assert!(seq.data.is_empty());
        let mut mem = MemorySink::new(Default::default());
        assert!(file
            .stream(&rasterpack_common::ArrayRequest::for_element("c/v"), &mut mem)
            .is_err());
    }

    /// A region read of a deflated member of a stored chunk delivers only the region, but the
    /// member is decoded to its end so damage written into its deflate stream after the region
    /// still fails the read, as it fails numpy's read of the member (and validate).
    #[test]
    fn a_region_read_checks_the_whole_member() {
        // Values deflate cannot squeeze much, so the end of the stream holds the last rows.
        let mut seed = 5u64;
        let values: Vec<u16> = (0..2048 * 64)
            .map(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (seed >> 48) as u16
            })
            .collect();
        let array = NdArray::from_vec(vec![2048, 64], values).unwrap();
        let mut content = rasterpack_common::npy::header_bytes(DType::U16, &array.shape);
        content.extend_from_slice(&array.data);
        let mut zip = zip_one("v", &content, true);
        // The deflate data runs from 30 + 5 ("v.npy") to the central directory; damage its
        // last bytes (the chunk's hashes are computed over the damaged archive).
        let cd = zip.windows(4).rposition(|w| w == 0x0201_4b50u32.to_le_bytes()).unwrap();
        for b in &mut zip[cd - 40..cd - 8] {
            *b ^= 0x5a;
        }
        let mut b = FoldBuilder::new();
        b.add_raw_chunk(
            "c",
            "NPZ0",
            &zip,
            FoldChunkOptions {
                compression: FoldCompression::None,
                ecc: None,
            },
        )
        .unwrap();
        let file = FoldFile::from_bytes(b.to_bytes().unwrap()).unwrap();
        let report = file.validate();
        assert!(
            report.findings.has_code(crate::npz::MEMBER_DAMAGED),
            "{:?}",
            report.findings
        );
        let head = rasterpack_common::Region::from_start_size(&[0, 0], &[8, 64]).unwrap();
        let err = file
            .read(&rasterpack_common::ArrayRequest::for_element("c/v").with_region(head))
            .unwrap_err();
        assert_eq!(err.code, crate::npz::MEMBER_DAMAGED, "{err}");
        let err = file
            .read(&rasterpack_common::ArrayRequest::for_element("c/v"))
            .unwrap_err();
        assert_eq!(err.code, crate::npz::MEMBER_DAMAGED, "{err}");
    }
}
