//! Layer 4, Reed-Solomon: a damaged payload is repaired (per-block parity first, then
//! pyfolds' stream-tail layout) and kept only when its CRC32C and SHA-256 match again; the ECC
//! bytes of a verified payload are compared with both layouts.

use rasterpack_common::Error;

use super::{ChunkContext, FoldChunkStatus, Layers};
use crate::ecc::{self, Layout, Rs};
use crate::parse::FoldEntry;
use crate::raw::{ChunkHeader, CHUNK_HEADER_LEN};
use crate::scan::hashes_polled;

/// What the ECC step did to the stored payload.
pub(crate) enum EccOutcome {
    /// Nothing (verified, no ECC, or not repairable).
    Unchanged,
    /// Repaired: the payload that now verifies.
    Repaired(Vec<u8>),
}

/// The ECC step of chunk `e`: `verified` says whether the stored payload's hashes match.
pub(crate) fn check_ecc(
    ctx: &ChunkContext<'_>,
    e: &FoldEntry,
    h: &ChunkHeader,
    verified: bool,
    st: &mut FoldChunkStatus,
    l: &mut Layers,
    repairs: &mut Vec<(u64, Vec<u8>)>,
) -> Result<EccOutcome, Error> {
    let payload_off = e.offset + CHUNK_HEADER_LEN;
    let ecc_off = payload_off + h.comp_len;
    let name = &e.name;
    let rs = ecc::parse_algo(&e.ecc_algo).and_then(Rs::new);
    let Some(rs) = rs else {
        if e.ecc_algo == "none" {
            st.ecc_status = "none".into();
            if h.ecc_len != 0 {
                l.integrity.warning(
                    "fold.ecc.unexpected_bytes",
                    Some(ecc_off),
                    format!("chunk {name:?}: ecc_algo \"none\" but {} ECC bytes", h.ecc_len),
                );
            }
        } else {
            st.ecc_status = format!("unknown ({})", e.ecc_algo);
            l.integrity.warning(
                "fold.ecc.unknown_algo",
                Some(ecc_off),
                format!("chunk {name:?}: unknown ecc_algo {:?}: ECC not used", e.ecc_algo),
            );
        }
        return Ok(EccOutcome::Unchanged);
    };
    let k = rs.k() as u64;
    let expected = h.comp_len.div_ceil(k) * rs.nsym() as u64;
    st.ecc_status = format!("rs({}) ok", rs.nsym());
    if h.ecc_len as u64 != expected {
        st.ecc_status = format!("rs({}) bad length", rs.nsym());
        l.integrity.warning(
            "fold.ecc.bad_len",
            Some(e.offset + 28),
            format!(
                "chunk {name:?}: {} ECC bytes, {expected} expected for {} payload bytes with rs({})",
                h.ecc_len,
                h.comp_len,
                rs.nsym()
            ),
        );
        return Ok(EccOutcome::Unchanged);
    }
    if verified {
        check_parity(ctx, e, h, &rs, st, l, repairs)?;
        return Ok(EccOutcome::Unchanged);
    }
    repair(ctx, e, h, &rs, st, l, repairs)
}

/// A damaged payload: which layout the ECC bytes have cannot be told from damaged data, so
/// try per-block parity (rasterpack's), then pyfolds' stream tail; only a payload whose
/// hashes match again counts. The stored payload is held for this (bounded by the limits).
fn repair(
    ctx: &ChunkContext<'_>,
    e: &FoldEntry,
    h: &ChunkHeader,
    rs: &Rs,
    st: &mut FoldChunkStatus,
    l: &mut Layers,
    repairs: &mut Vec<(u64, Vec<u8>)>,
) -> Result<EccOutcome, Error> {
    let payload_off = e.offset + CHUNK_HEADER_LEN;
    let ecc_off = payload_off + h.comp_len;
    let name = &e.name;
    let limits = &ctx.opts.limits;
    let comp = ctx.input.read_vec(payload_off, h.comp_len, "chunk payload", limits)?;
    let ecc_bytes = ctx.input.read_vec(ecc_off, h.ecc_len as u64, "chunk ECC", limits)?;
    let multi = h.comp_len > rs.k() as u64;
    let layouts: &[Layout] = if multi {
        &[Layout::BlockParity, Layout::PyfoldsTail]
    } else {
        &[Layout::BlockParity]
    };
    let mut fixed: Option<(Layout, ecc::Repair, Vec<u8>)> = None;
    let mut tail_rep = None;
    for &layout in layouts {
        let mut trial = comp.clone();
        let rep = ecc::repair_polled(rs, &mut trial, &ecc_bytes, layout, &|| ctx.opts.poll())?;
        if layout == Layout::PyfoldsTail {
            tail_rep = Some(rep.clone());
        }
        // A layout whose every usable block decoded wins over one that verified with some
        // block failing (the damage lay in blocks both layouts cover).
        if hashes_polled(&trial, &|| ctx.opts.poll())? == (h.crc32c, e.sha256.clone())
            && fixed.as_ref().is_none_or(|f| f.1.failed)
        {
            fixed = Some((layout, rep.clone(), trial));
            if !rep.failed {
                break;
            }
        }
    }
    let Some((layout, rep, trial)) = fixed else {
        st.ecc_status = format!("rs({}) uncorrectable", rs.nsym());
        let why = match tail_rep {
            Some(rep) => format!(
                " (neither as per-block parity nor in pyfolds' multi-block layout, whose parity covers {} of {} blocks)",
                rep.usable_blocks, rep.blocks
            ),
            None => String::new(),
        };
        l.integrity.error(
            "fold.ecc.ecc_uncorrectable",
            Some(payload_off),
            format!(
                "chunk {name:?}: payload corrupted beyond what rs({}) can correct{why}",
                rs.nsym()
            ),
        );
        return Ok(EccOutcome::Unchanged);
    };
    st.repaired_bytes = rep.payload_bytes;
    st.ecc_status = format!("rs({}) repaired {} byte(s)", rs.nsym(), rep.payload_bytes);
    l.integrity.warning(
        "fold.ecc.repaired",
        Some(payload_off),
        format!(
            "chunk {name:?}: Reed-Solomon corrected {} byte(s) of the stored payload",
            rep.payload_bytes
        ),
    );
    if ctx.opts.keep_repairs {
        repairs.push((payload_off, trial.clone()));
        // Damaged ECC bytes are rewritten too (in the layout that repaired), so the copy is
        // whole again; intact ones are kept as they are.
        let poll = || ctx.opts.poll();
        if ecc::layout_of_polled(rs, &trial, &ecc_bytes, &poll)?.is_none() {
            repairs.push((
                ecc_off,
                match layout {
                    Layout::BlockParity => ecc::block_parity_polled(rs, &trial, &poll)?,
                    Layout::PyfoldsTail => ecc::pyfolds_ecc(rs, &trial),
                },
            ));
        }
    }
    Ok(EccOutcome::Repaired(trial))
}

/// A verified payload: are the ECC bytes what either layout says they must be?
fn check_parity(
    ctx: &ChunkContext<'_>,
    e: &FoldEntry,
    h: &ChunkHeader,
    rs: &Rs,
    st: &mut FoldChunkStatus,
    l: &mut Layers,
    repairs: &mut Vec<(u64, Vec<u8>)>,
) -> Result<(), Error> {
    let payload_off = e.offset + CHUNK_HEADER_LEN;
    let ecc_off = payload_off + h.comp_len;
    let name = &e.name;
    let k = rs.k() as u64;
    let multi = h.comp_len > k;
    match stream_layout(ctx.input, payload_off, h.comp_len, ecc_off, rs, &|| ctx.opts.poll())? {
        Some(Layout::BlockParity) if multi => l.integrity.info(
            "fold.ecc.multi_block_parity",
            Some(ecc_off),
            format!(
                "chunk {name:?}: rs({}) parity of each of its {} blocks (rasterpack's layout; it repairs every block). pyfolds 1.0.2 cannot read chunks whose ECC spans several blocks",
                rs.nsym(),
                h.comp_len.div_ceil(k)
            ),
        ),
        Some(Layout::PyfoldsTail) if multi => {
            st.ecc_status = format!("rs({}) quirk", rs.nsym());
            l.integrity.warning(
                "fold.ecc.ecc_layout_quirk",
                Some(ecc_off),
                format!(
                    "chunk {name:?}: payload verifies, but its {} payload bytes span several RS blocks and pyfolds stored the tail of the codeword stream instead of the parity: ECC could not repair damage",
                    h.comp_len
                ),
            );
        }
        Some(_) => {}
        None => {
            st.ecc_status = format!("rs({}) parity mismatch", rs.nsym());
            l.integrity.warning(
                "fold.ecc.parity_mismatch",
                Some(ecc_off),
                format!("chunk {name:?}: payload verifies but the ECC bytes are not its Reed-Solomon parity in either known layout (convert rewrites them)"),
            );
            if ctx.opts.keep_repairs {
                let whole = ctx
                    .input
                    .read_vec(payload_off, h.comp_len, "chunk payload", &ctx.opts.limits)?;
                repairs.push((ecc_off, ecc::block_parity_polled(rs, &whole, &|| ctx.opts.poll())?));
            }
        }
    }
    Ok(())
}

/// [`ecc::layout_of`] for a verified payload read from the file: payload and ECC bytes are
/// read in batches of blocks, so memory does not grow with the chunk.
fn stream_layout(
    input: &rasterpack_common::Input,
    payload_off: u64,
    len: u64,
    ecc_off: u64,
    rs: &Rs,
    poll: &dyn Fn() -> Result<(), Error>,
) -> Result<Option<Layout>, Error> {
    const BATCH: u64 = 8192;
    let (k, n) = (rs.k() as u64, rs.nsym() as u64);
    let nblocks = len.div_ceil(k);
    if len == 0 {
        return Ok(Some(Layout::BlockParity));
    }
    let mut data = Vec::new();
    let mut ecc = Vec::new();
    let read = |off: u64, bytes: u64, buf: &mut Vec<u8>, what: &str| -> Result<(), Error> {
        buf.resize(bytes as usize, 0);
        input.read_at(off, buf, what)
    };
    // Per-block parity: batch after batch of blocks against their parity.
    let mut b0 = 0;
    let mut blocks_match = true;
    while b0 < nblocks && blocks_match {
        poll()?;
        let b1 = (b0 + BATCH).min(nblocks);
        let d1 = (b1 * k).min(len);
        read(payload_off + b0 * k, d1 - b0 * k, &mut data, "chunk payload")?;
        read(ecc_off + b0 * n, (b1 - b0) * n, &mut ecc, "chunk ECC")?;
        blocks_match = rs.block_parity(&data) == ecc;
        b0 = b1;
    }
    if blocks_match {
        return Ok(Some(Layout::BlockParity));
    }
    // pyfolds: the ECC bytes are the codeword stream from stream offset `len` on. Block b's
    // codeword starts at stream offset b * 255; only the last blocks reach past `len`.
    let cw = crate::ecc::NSIZE as u64;
    let block_end = |b: u64| b * cw + ((b + 1) * k).min(len) - b * k + n;
    let mut b = (len / cw).saturating_sub(1);
    while b < nblocks && block_end(b) <= len {
        b += 1;
    }
    while b < nblocks {
        poll()?;
        let b1 = (b + BATCH).min(nblocks);
        let d1 = (b1 * k).min(len);
        read(payload_off + b * k, d1 - b * k, &mut data, "chunk payload")?;
        let mut stream = Vec::with_capacity(((b1 - b) * cw) as usize);
        for block in data.chunks(k as usize) {
            stream.extend_from_slice(block);
            stream.extend_from_slice(&rs.parity(block));
        }
        let s0 = b * cw;
        let skip = len.saturating_sub(s0);
        let from = s0 + skip - len;
        read(ecc_off + from, stream.len() as u64 - skip, &mut ecc, "chunk ECC")?;
        if stream.get(skip as usize..) != Some(&ecc[..]) {
            return Ok(None);
        }
        b = b1;
    }
    Ok(Some(Layout::PyfoldsTail))
}
