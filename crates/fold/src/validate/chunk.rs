//! One chunk through the layers: its sizes against the limits, its header against its index
//! entry and the file, its stored bytes against their hashes (with ECC repair), its decoded
//! payload against its type. Each step is one function named for what it checks.

use rasterpack_common::{Error, Limits};

use super::ecc_check::{check_ecc, EccOutcome};
use super::payload::{PayloadCheck, PayloadRider, PayloadVerdict};
use super::{ChunkContext, FoldChunkStatus, FoldContent, Layers};
use crate::parse::FoldEntry;
use crate::raw::{ChunkHeader, CHUNK_HEADER_LEN, FLAG_NONE, FLAG_ZSTD, MAX_CHUNK_SIZE};
use crate::scan::{scan, scan_local_hashed, Stored};

/// Check one chunk, every layer, findings into `l`. `spans` collects the chunk's extent for the
/// layout check; `repairs` the repaired bytes when the caller keeps them.
pub(crate) fn check_chunk(
    ctx: &ChunkContext<'_>,
    e: &FoldEntry,
    l: &mut Layers,
    spans: &mut Vec<(u64, u64, String)>,
    repairs: &mut Vec<(u64, Vec<u8>)>,
) -> Result<FoldChunkStatus, Error> {
    check_chunk_riding(ctx, e, l, spans, repairs, None)
}

/// [`check_chunk`], with `rider` seeing the decoded payload in the same pass (on this thread,
/// the stored bytes hashed on a second one): the one-pass read of an array. The checks and
/// findings are [`check_chunk`]'s; only the first pass over the stored bytes is shared.
pub(crate) fn check_chunk_riding(
    ctx: &ChunkContext<'_>,
    e: &FoldEntry,
    l: &mut Layers,
    spans: &mut Vec<(u64, u64, String)>,
    repairs: &mut Vec<(u64, Vec<u8>)>,
    rider: Option<&mut dyn PayloadRider>,
) -> Result<FoldChunkStatus, Error> {
    let mut st = FoldChunkStatus::new(e);
    let max = MAX_CHUNK_SIZE.min(ctx.opts.limits.max_alloc);
    let mut too_large = check_index_sizes(ctx, e, max, l);
    let Some(h) = read_chunk_header(ctx, e, l)? else {
        return Ok(st);
    };
    st.header = Some(h);
    check_header_agrees(e, &h, l);
    check_flags(e, &h, l);
    check_header_sizes(e, &h, max, &mut too_large, l);
    if !too_large.is_empty() {
        return Ok(st);
    }
    let Some(end) = check_extent(ctx, e, &h, l) else {
        return Ok(st);
    };
    spans.push((e.offset, end, e.name.clone()));
    let verdict = check_integrity(ctx, e, &h, &mut st, l, repairs, rider)?;
    check_listed_hash(ctx, e, l);
    let Some(verdict) = verdict else {
        return Ok(st);
    };
    check_semantics(ctx, e, verdict, &mut st, l);
    Ok(st)
}

/// Layer 2, from the index alone, before any read: no length above the chunk limit.
/// Returns the lengths found too large.
fn check_index_sizes(ctx: &ChunkContext<'_>, e: &FoldEntry, max: u64, l: &mut Layers) -> Vec<u64> {
    let mut too_large = Vec::new();
    for (what, v) in [
        ("comp_len", e.comp_len),
        ("uncomp_len", e.uncomp_len),
        ("ecc_len", e.ecc_len),
    ] {
        if v > max {
            l.limits.error(
                "fold.limits.chunk_too_large",
                Some(ctx.container.header.index_off),
                format!(
                    "chunk {:?}: index {what} {v} exceeds the chunk limit of {max} bytes",
                    e.name
                ),
            );
            too_large.push(v);
        }
    }
    too_large
}

/// Layer 3: the 32-byte chunk header lies in the file after the file header; read it.
fn read_chunk_header(ctx: &ChunkContext<'_>, e: &FoldEntry, l: &mut Layers) -> Result<Option<ChunkHeader>, Error> {
    let file_len = ctx.container.file_len;
    if e.offset < crate::raw::HEADER_LEN || e.offset.checked_add(CHUNK_HEADER_LEN).is_none_or(|end| end > file_len) {
        l.bounds.error(
            "fold.bounds.chunk_out_of_bounds",
            Some(e.offset),
            format!(
                "chunk {:?}: header at offset {} is outside the chunk area of the file ({file_len} bytes)",
                e.name, e.offset
            ),
        );
        return Ok(None);
    }
    let mut hb = [0u8; 32];
    ctx.input.read_at(e.offset, &mut hb, "chunk header")?;
    Ok(Some(ChunkHeader::from_bytes(&hb)))
}

/// Layer 1: the chunk header says what the index entry says (pyfolds trusts the header
/// silently). The index holds the type code as JSON text: the decoded characters are
/// compared with the header's bytes.
fn check_header_agrees(e: &FoldEntry, h: &ChunkHeader, l: &mut Layers) {
    let mut diffs = Vec::new();
    if h.ctype[..] != *e.ctype.as_bytes() {
        diffs.push(format!(
            "ctype \"{}\" vs \"{}\"",
            h.ctype_str(),
            crate::raw::ctype_display(e.ctype.as_bytes())
        ));
    }
    for (what, hv, iv) in [
        ("flags", h.flags as u64, e.flags),
        ("uncomp_len", h.uncomp_len, e.uncomp_len),
        ("comp_len", h.comp_len, e.comp_len),
        ("crc32c", h.crc32c as u64, e.crc32c),
        ("ecc_len", h.ecc_len as u64, e.ecc_len),
    ] {
        if hv != iv {
            diffs.push(format!("{what} {hv} vs {iv}"));
        }
    }
    if !diffs.is_empty() {
        l.structure.error(
            "fold.chunk.header_mismatch",
            Some(e.offset),
            format!(
                "chunk {:?}: chunk header and index disagree (header vs index): {}",
                e.name,
                diffs.join(", ")
            ),
        );
    }
}

/// Layer 1: flags are 0 (stored) or 1 (zstd).
fn check_flags(e: &FoldEntry, h: &ChunkHeader, l: &mut Layers) {
    if h.flags != FLAG_NONE && h.flags != FLAG_ZSTD {
        l.structure.error(
            "fold.chunk.bad_flags",
            Some(e.offset + 4),
            format!("chunk {:?}: flags {} is neither 0 nor 1", e.name, h.flags),
        );
    }
}

/// Layer 2, from the chunk header: no length above the chunk limit (each length reported
/// once, whether the index or the header states it).
fn check_header_sizes(e: &FoldEntry, h: &ChunkHeader, max: u64, too_large: &mut Vec<u64>, l: &mut Layers) {
    for (what, v, off) in [
        ("comp_len", h.comp_len, 16u64),
        ("uncomp_len", h.uncomp_len, 8),
        ("ecc_len", h.ecc_len as u64, 28),
    ] {
        if v > max && !too_large.contains(&v) {
            l.limits.error(
                "fold.limits.chunk_too_large",
                Some(e.offset + off),
                format!("chunk {:?}: {what} {v} exceeds the chunk limit of {max} bytes", e.name),
            );
            too_large.push(v);
        }
    }
}

/// Layer 3: payload and ECC bytes lie in the file. Returns the end of the chunk's extent.
fn check_extent(ctx: &ChunkContext<'_>, e: &FoldEntry, h: &ChunkHeader, l: &mut Layers) -> Option<u64> {
    let payload_off = e.offset + CHUNK_HEADER_LEN;
    let file_len = ctx.container.file_len;
    match payload_off
        .checked_add(h.comp_len)
        .and_then(|x| x.checked_add(h.ecc_len as u64))
    {
        Some(end) if end <= file_len => Some(end),
        _ => {
            l.bounds.error(
                "fold.bounds.chunk_out_of_bounds",
                Some(e.offset + 16),
                format!(
                    "chunk {:?}: payload of {} + ECC of {} bytes at offset {payload_off} runs past the end of the file ({file_len} bytes)",
                    e.name, h.comp_len, h.ecc_len
                ),
            );
            None
        }
    }
}

/// Layer 4: CRC32C and SHA-256 of the stored bytes, computed as they stream while the payload
/// is decoded into the check of its type; on a mismatch, Reed-Solomon repair and the checks
/// again. Returns the payload's verdict when the stored bytes verify (after repair).
fn check_integrity(
    ctx: &ChunkContext<'_>,
    e: &FoldEntry,
    h: &ChunkHeader,
    st: &mut FoldChunkStatus,
    l: &mut Layers,
    repairs: &mut Vec<(u64, Vec<u8>)>,
    rider: Option<&mut dyn PayloadRider>,
) -> Result<Option<PayloadVerdict>, Error> {
    let payload_off = e.offset + CHUNK_HEADER_LEN;
    let stored = Stored::File {
        input: ctx.input,
        offset: payload_off,
        len: h.comp_len,
    };
    let mut check = PayloadCheck::new(e, h, ctx.opts, ctx.members, npz_room(ctx), stored)?;
    let (scanned, verdict) = match rider {
        Some(rider) => {
            let scanned = scan_local_hashed(ctx.input, payload_off, h.comp_len, h.flags, h.uncomp_len, &mut |p| {
                check.consume_riding(p, rider)
            })?;
            let verdict = check.conclude(scanned.decode.clone(), stored, h, ctx.opts)?;
            rider.concluded(verdict.tapped);
            (scanned, verdict)
        }
        None => {
            let scanned = scan(stored, h.flags, h.uncomp_len, true, &|| ctx.opts.poll(), &mut |p| {
                check.consume(p)
            })?;
            let verdict = check.conclude(scanned.decode.clone(), stored, h, ctx.opts)?;
            (scanned, verdict)
        }
    };
    let (crc, sha) = scanned.hashes.clone().unwrap_or_default();
    let mut verdict = Some(verdict);
    let mut crc_ok = crc == h.crc32c;
    let mut sha_ok = sha == e.sha256;
    match check_ecc(ctx, e, h, crc_ok && sha_ok, st, l, repairs)? {
        EccOutcome::Unchanged => {}
        EccOutcome::Repaired(payload) => {
            crc_ok = true;
            sha_ok = true;
            let stored = Stored::Memory(&payload);
            let mut check = PayloadCheck::new(e, h, ctx.opts, ctx.members, npz_room(ctx), stored)?;
            let scanned = scan(stored, h.flags, h.uncomp_len, false, &|| ctx.opts.poll(), &mut |p| {
                check.consume(p)
            })?;
            verdict = Some(check.conclude(scanned.decode, stored, h, ctx.opts)?);
        }
    }
    st.crc_ok = Some(crc_ok);
    st.sha_ok = Some(sha_ok);
    if !crc_ok {
        l.integrity.error(
            "fold.integrity.crc_mismatch",
            Some(e.offset + 24),
            format!(
                "chunk {:?}: CRC32C of the stored payload is {crc:#010x}, header says {:#010x}",
                e.name, h.crc32c
            ),
        );
    }
    if !sha_ok {
        l.integrity.error(
            "fold.integrity.sha_mismatch",
            Some(ctx.container.header.index_off),
            format!(
                "chunk {:?}: SHA-256 of the stored payload is {sha}, index says {}",
                e.name, e.sha256
            ),
        );
    }
    Ok(if crc_ok && sha_ok { verdict } else { None })
}

/// Layer 4: `metadata.chunk_hashes` lists the chunk with the index's SHA-256.
fn check_listed_hash(ctx: &ChunkContext<'_>, e: &FoldEntry, l: &mut Layers) {
    let Some(hashes) = ctx.hashes else { return };
    let at = Some(ctx.container.header.index_off);
    match hashes.get(&e.name) {
        Some(listed) if listed != e.sha256 => l.integrity.error(
            "fold.integrity.chunk_hashes_mismatch",
            at,
            format!(
                "chunk {:?}: metadata.chunk_hashes says {listed}, the index entry says {}",
                e.name, e.sha256
            ),
        ),
        Some(_) => {}
        None => l.integrity.warning(
            "fold.integrity.chunk_hashes_missing",
            at,
            format!("chunk {:?} is not listed in metadata.chunk_hashes", e.name),
        ),
    }
}

/// Layer 6: the decoded payload is what its type says (findings), and what a report shows.
fn check_semantics(
    ctx: &ChunkContext<'_>,
    e: &FoldEntry,
    verdict: PayloadVerdict,
    st: &mut FoldChunkStatus,
    l: &mut Layers,
) {
    let payload_off = Some(e.offset + CHUNK_HEADER_LEN);
    let name = &e.name;
    if let Err((code, msg)) = &verdict.decode {
        // Bad flags are already a structure finding.
        if *code != "fold.chunk.bad_flags" {
            l.semantics.error(*code, payload_off, format!("chunk {name:?}: {msg}"));
        }
        return;
    }
    st.uncompressed_sha256 = verdict.decoded_sha256;
    st.payload = verdict.payload;
    // Only a read extracts members with the directory; a report has the verdicts.
    if ctx.keep_directory {
        st.directory = verdict.directory;
    }
    for f in verdict.findings {
        l.semantics.push(
            f.severity,
            f.code,
            payload_off,
            format!("chunk {name:?}: {}", f.message),
        );
    }
    for (code, severity, n) in verdict.counted {
        l.semantics.add_omitted(code, severity, n);
    }
    st.decoded = verdict.parsed;
    if let FoldContent::Npz(arrays) = &verdict.content {
        // Every NPZ0 chunk's verdicts are kept (reports list the arrays, `--element` looks
        // names up in all of them): bounded per file, not only per archive (issue 17).
        let held = ctx.npz_members_held.get();
        let n = arrays.len() as u64;
        let max = npz_members_held_max(&ctx.opts.limits);
        if held.saturating_add(n) > max {
            l.semantics.error(
                crate::npz::DIRECTORY_LIMIT_CODE,
                payload_off,
                format!(
                    "chunk {name:?}: its archive lists {n} members, and the file's NPZ0 chunks before it {held}: more than rasterpack's limit of {max} members in one file"
                ),
            );
            st.directory = None;
            return;
        }
        ctx.npz_members_held.set(held + n);
    }
    // An archive's array list is kept always (reports list the arrays); documents and
    // previews only when content was asked for.
    if ctx.opts.content || matches!(verdict.content, FoldContent::Npz(_)) {
        st.content = verdict.content;
    }
}

/// NPZ0 members a chunk checked with `ctx` may still hold verdicts for.
fn npz_room(ctx: &ChunkContext<'_>) -> u64 {
    npz_members_held_max(&ctx.opts.limits).saturating_sub(ctx.npz_members_held.get())
}

/// Bytes each held NPZ0 member is charged against [`Limits::working_set`]: what a member's
/// directory entry, walk state and verdict cost (~200 bytes, measured ~400 with the walk's
/// transient tables), rounded so that the default 96 MiB leaves [`NPZ_MEMBERS_HELD_MAX`] whole.
const NPZ_MEMBER_BYTES: u64 = 240;

/// NPZ0 members one analysis or read may hold with `limits`: [`NPZ_MEMBERS_HELD_MAX`], or fewer
/// when the working set is smaller (`diff` gives each side half), so a reader's member
/// verdicts stay within its share of the budget.
pub fn npz_members_held_max(limits: &Limits) -> u64 {
    NPZ_MEMBERS_HELD_MAX.min(limits.working_set / NPZ_MEMBER_BYTES)
}

/// Most NPZ0 members whose verdicts one analysis (or read) of a file holds, over all its NPZ0
/// chunks: above the largest central directory one archive may have (16 MiB, about 365 000
/// members), so one archive always fits. Past it a chunk is refused with
/// `fold.limits.npz_directory`: each member costs ~200 bytes held (issue 17).
pub const NPZ_MEMBERS_HELD_MAX: u64 = 400_000;

#[cfg(test)]
mod member_budget_tests {
    use super::*;

    #[test]
    fn the_member_bound_follows_the_working_set_below_the_default() {
        let mut limits = Limits::default();
        assert_eq!(npz_members_held_max(&limits), NPZ_MEMBERS_HELD_MAX);
        assert_eq!(npz_members_held_max(&Limits::unlimited()), NPZ_MEMBERS_HELD_MAX);
        // diff's half: 48 MiB / 240 bytes.
        limits.working_set /= 2;
        assert_eq!(npz_members_held_max(&limits), 209_715);
        limits.working_set = 0;
        assert_eq!(npz_members_held_max(&limits), 0);
    }
}
