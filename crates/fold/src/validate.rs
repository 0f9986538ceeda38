//! The six validation layers of fold.md section 6, in order, collecting every finding:
//! structure, anti-DoS limits, bounds, per-chunk integrity (with Reed-Solomon repair),
//! manifest hash, payload semantics. Chunks are read one at a time, so memory stays bounded
//! by the largest chunk.

use rasterpack_common::{Error, Finding, Findings, Input, Limits, Severity};
use sha2::{Digest, Sha256};

use crate::ecc::{self, Layout, Rs};
use crate::npz::{self, ArrayInfo};
use crate::parse::{self, Container, Entry, JSON_MAX_DEPTH};
use crate::pjson::{self, Value};
use crate::raw::{ChunkHeader, CHUNK_HEADER_LEN, FLAG_NONE, FLAG_ZSTD, MAX_CHUNK_SIZE};

/// Code of an NPZ0 member that cannot be read (CRC-32, sizes, `.npy` header, a repeated
/// name) in an archive that can.
pub const NPZ_MEMBER_DAMAGED: &str = "fold.payload.npz_member_damaged";

/// What a chunk decoded to (kept only when the caller asks for content).
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// Not decoded (integrity or bounds failed, or content not requested).
    None,
    Json(Value),
    Npz(Vec<ArrayInfo>),
    /// A zip archive that is not an `.npz` (TSAV torch archives): member names.
    Zip(Vec<String>),
    /// Opaque bytes: the first few for a preview.
    Opaque(Vec<u8>),
}

/// Status of one chunk after validation.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkStatus {
    pub entry: Entry,
    pub header: Option<ChunkHeader>,
    /// CRC32C of the stored payload matched (after repair, if any).
    pub crc_ok: Option<bool>,
    pub sha_ok: Option<bool>,
    /// Payload bytes corrected by ECC.
    pub repaired_bytes: usize,
    /// Human ECC status: `none`, `ok`, `repaired N bytes`, `quirk`, ...
    pub ecc_status: String,
    /// The payload decoded to `uncomp_len` bytes and (for JSON/NPZ0) parsed.
    pub decoded: bool,
    pub uncompressed_sha256: Option<String>,
    pub content: Content,
    /// The decoded payload, when [`AnalyzeOptions::keep_payload`] asked for it.
    pub payload: Option<Vec<u8>>,
    /// Error findings about this chunk (its index entry, header, bounds, integrity, payload):
    /// while there is one, nothing is read from the chunk. A damaged NPZ0 member is not one
    /// of them (see [`npz::ArrayInfo::damaged`]): the other members stay readable.
    pub errors: Vec<Finding>,
}

/// Everything validation learnt about a file.
#[derive(Debug, Clone, Default)]
pub struct Analysis {
    pub findings: Findings,
    pub container: Option<Container>,
    pub chunks: Vec<ChunkStatus>,
    /// `Some(true/false)` when the metadata holds a manifest hash.
    pub manifest_ok: Option<bool>,
    pub manifest_recomputed: Option<String>,
    /// Repaired stored payloads: (absolute offset, bytes), for `convert` to write back.
    pub repairs: Vec<(u64, Vec<u8>)>,
}

/// Options of [`analyze`].
#[derive(Debug, Clone, Default)]
pub struct AnalyzeOptions {
    pub limits: Limits,
    /// Keep decoded JSON / NPZ descriptions in [`ChunkStatus::content`].
    pub content: bool,
    /// Keep repaired payloads in [`Analysis::repairs`].
    pub keep_repairs: bool,
    /// Keep each verified, decoded payload in [`ChunkStatus::payload`].
    pub keep_payload: bool,
}

#[derive(Default)]
struct Layers {
    structure: Findings,
    limits: Findings,
    bounds: Findings,
    integrity: Findings,
    manifest: Findings,
    semantics: Findings,
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
    fn counts(&self) -> [usize; 6] {
        self.all().map(Findings::len)
    }

    /// The error findings about a chunk as a whole added since `counts` gave `before` (a
    /// damaged NPZ0 member leaves the other members readable: it is not one of them).
    fn errors_since(&self, before: [usize; 6]) -> Vec<Finding> {
        self.all()
            .iter()
            .zip(before)
            .flat_map(|(f, n)| f.0.get(n..).unwrap_or(&[]))
            .filter(|f| f.severity == Severity::Error && f.code != NPZ_MEMBER_DAMAGED)
            .cloned()
            .collect()
    }
}

/// How many index entries carry each name.
fn name_counts(c: &Container) -> std::collections::HashMap<&str, usize> {
    let mut m = std::collections::HashMap::with_capacity(c.index.entries.len());
    for e in &c.index.entries {
        *m.entry(e.name.as_str()).or_insert(0) += 1;
    }
    m
}

/// The finding that makes a chunk name ambiguous: two index entries share it.
fn duplicate_name_error(c: &Container, e: &Entry, counts: &std::collections::HashMap<&str, usize>) -> Option<Finding> {
    let n = counts.get(e.name.as_str()).copied().unwrap_or(0);
    (n > 1).then(|| Finding {
        severity: Severity::Error,
        code: "fold.index.duplicate_name".into(),
        offset: Some(c.header.index_off),
        message: format!("chunk name {:?} appears {n} times in the index", e.name),
    })
}

/// Run every layer. I/O errors (not file problems) are returned as `Err`.
pub fn analyze(input: &Input, opts: &AnalyzeOptions) -> Result<Analysis, Error> {
    let mut out = Analysis::default();
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
    let mut spans: Vec<(u64, u64, String)> = Vec::new();
    for entry in &container.index.entries {
        let before = l.counts();
        let mut st = check_chunk(
            input,
            &container,
            entry,
            &hashes,
            opts,
            &mut l,
            &mut spans,
            &mut out.repairs,
        )?;
        st.errors = index_errors.clone();
        st.errors.extend(duplicate_name_error(&container, entry, &name_counts));
        st.errors.extend(l.errors_since(before));
        out.chunks.push(st);
    }
    let complete = spans.len() == container.index.entries.len()
        && container.index.entries.len() == container.index.declared_chunks;
    check_layout(&container, &mut spans, complete, &mut l);
    let (ok, recomputed) = check_manifest(&container, &mut l);
    out.manifest_ok = ok;
    out.manifest_recomputed = recomputed;
    let mut f = l.structure;
    f.extend(l.limits);
    f.extend(l.bounds);
    f.extend(l.integrity);
    f.extend(l.manifest);
    f.extend(l.semantics);
    out.findings = f;
    out.container = Some(container);
    Ok(out)
}

/// `metadata.chunk_hashes`, as (name, sha) pairs.
fn chunk_hashes(c: &Container, l: &mut Layers) -> Option<Vec<(String, String)>> {
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
            let mut v: Vec<(String, String)> = Vec::new();
            for (k, val) in m {
                v.retain(|(n, _)| !k.eq_str(n));
                v.push((k.to_string_lossy(), val.as_str().unwrap_or_default()));
            }
            for (name, _) in &v {
                if !c.index.entries.iter().any(|e| &e.name == name) {
                    l.integrity.warning(
                        "fold.integrity.chunk_hashes_extra",
                        at,
                        format!("chunk_hashes names {name:?}, which is not in the index"),
                    );
                }
            }
            Some(v)
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

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 on one core while CRC32C (and zstd, done by the caller) run on the other.
fn hashes(data: &[u8]) -> (u32, String) {
    if data.len() < (1 << 20) {
        return (crc32c::crc32c(data), hex(&Sha256::digest(data)));
    }
    let (sha, crc) = rayon::join(|| hex(&Sha256::digest(data)), || crc32c::crc32c(data));
    (crc, sha)
}

/// Decode a stored payload: `Ok(None)` means "the stored bytes are the payload".
fn decode(flags: u32, comp: &[u8], uncomp_len: u64) -> Result<Option<Vec<u8>>, (&'static str, String)> {
    match flags {
        FLAG_NONE => {
            if comp.len() as u64 != uncomp_len {
                return Err((
                    "fold.payload.uncomp_len_mismatch",
                    format!(
                        "uncompressed chunk holds {} bytes, uncomp_len says {uncomp_len}",
                        comp.len()
                    ),
                ));
            }
            Ok(None)
        }
        FLAG_ZSTD => {
            // A frame header announcing another size is caught before allocating.
            let declared = zstd::zstd_safe::get_frame_content_size(comp);
            if let Ok(Some(size)) = declared {
                if size > uncomp_len {
                    return Err((
                        "fold.payload.uncomp_len_mismatch",
                        format!("zstd frame declares {size} bytes, uncomp_len says {uncomp_len}"),
                    ));
                }
            }
            // A zstd block (3-byte header) yields at most 128 KiB, so a payload cannot expand
            // by more than ~43690x: a larger uncomp_len is not trusted with an up-front buffer.
            let plausible = uncomp_len <= (comp.len() as u64).saturating_mul(65536).saturating_add(1 << 20);
            if !plausible || !matches!(declared, Ok(Some(s)) if s == uncomp_len) {
                // No content size (or several frames): stream, growing the buffer only as data
                // is produced, never past uncomp_len + 1.
                return stream_decode(comp, uncomp_len).map(Some);
            }
            let cap = usize::try_from(uncomp_len)
                .map_err(|_| ("fold.limits.chunk_too_large", "uncomp_len too large".to_string()))?;
            let mut buf: Vec<u8> = Vec::with_capacity(cap);
            let mut dec =
                zstd::bulk::Decompressor::new().map_err(|e| ("fold.payload.decompress_failed", e.to_string()))?;
            match dec.decompress_to_buffer(comp, &mut buf) {
                Ok(n) if n as u64 == uncomp_len => Ok(Some(buf)),
                Ok(n) => Err((
                    "fold.payload.uncomp_len_mismatch",
                    format!("zstd payload decompresses to {n} bytes, uncomp_len says {uncomp_len}"),
                )),
                Err(e) if e.to_string().contains("Destination buffer is too small") => Err((
                    "fold.payload.uncomp_len_mismatch",
                    format!("zstd payload decompresses to more than uncomp_len ({uncomp_len}) bytes"),
                )),
                Err(e) => Err(("fold.payload.decompress_failed", format!("zstd: {e}"))),
            }
        }
        _ => Err((
            "fold.chunk.bad_flags",
            format!("flags {flags} is neither 0 (none) nor 1 (zstd)"),
        )),
    }
}

fn stream_decode(comp: &[u8], uncomp_len: u64) -> Result<Vec<u8>, (&'static str, String)> {
    use std::io::Read;
    let dec = zstd::stream::read::Decoder::with_buffer(comp)
        .map_err(|e| ("fold.payload.decompress_failed", format!("zstd: {e}")))?;
    let mut out = Vec::new();
    dec.take(uncomp_len.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| ("fold.payload.decompress_failed", format!("zstd: {e}")))?;
    if out.len() as u64 != uncomp_len {
        return Err((
            "fold.payload.uncomp_len_mismatch",
            if out.len() as u64 > uncomp_len {
                format!("zstd payload decompresses to more than uncomp_len ({uncomp_len}) bytes")
            } else {
                format!(
                    "zstd payload decompresses to {} bytes, uncomp_len says {uncomp_len}",
                    out.len()
                )
            },
        ));
    }
    Ok(out)
}

/// Chunks at least this large are verified in pieces when their content is not needed.
const STREAM_MIN: u64 = 4 << 20;
/// Piece size of streamed verification.
const PIECE: usize = 2 << 20;

/// Decoded bytes when collected, `None` when only counted.
type Streamed = Result<Option<Payload>, (&'static str, String)>;
/// CRC32C, SHA-256, decode result and streamed `.npz` verdict of a streamed payload.
type StreamVerified = (u32, String, Streamed, Option<Vec<ArrayInfo>>);

/// A decoded payload: a `Vec`, or (large collected payloads) anonymous memory advised for
/// transparent huge pages. A fresh 64 MiB `Vec` costs 16384 page faults while zstd writes it,
/// ~40% of the decode time; with 2 MiB pages that is 32 faults.
pub(crate) enum Payload {
    Vec(Vec<u8>),
    /// The mapping (rounded up to 2 MiB) and the payload length within it.
    Map(memmap2::MmapMut, usize),
}

impl std::ops::Deref for Payload {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Payload::Vec(v) => v,
            Payload::Map(m, n) => m.get(..*n).unwrap_or(&[]),
        }
    }
}

/// Zeroed anonymous memory of at least `len` bytes with MADV_HUGEPAGE (this kernel's THP mode
/// is `madvise`); `None` if the mapping fails (the caller then uses a `Vec`).
fn huge_buffer(len: u64) -> Option<memmap2::MmapMut> {
    const HUGE: u64 = 2 << 20;
    let map_len = usize::try_from(len.checked_add(HUGE - 1)? / HUGE * HUGE).ok()?;
    let m = memmap2::MmapOptions::new().len(map_len).map_anon().ok()?;
    // Only advice: without huge pages the buffer still works, with 4 KiB faults.
    let _ = m.advise(memmap2::Advice::HugePage);
    Some(m)
}

/// Where collected zstd output goes.
enum Sink {
    Vec(Vec<u8>),
    /// Mapping and bytes filled so far.
    Map(memmap2::MmapMut, usize),
}

impl Sink {
    fn len(&self) -> usize {
        match self {
            Sink::Vec(v) => v.len(),
            Sink::Map(_, n) => *n,
        }
    }
}

/// CRC32C, SHA-256 and decode result of a stored zstd payload read piece by piece into a few
/// reused buffers: hashing on this thread, zstd on a helper thread. With `collect`, the
/// decoded bytes are gathered (for JSON/NPZ0 checks); otherwise only counted, or (with `npz`)
/// fed to the streaming `.npz` check, whose verdict is the fourth value (`None`: no verdict).
fn stream_verify(
    input: &Input,
    off: u64,
    h: &ChunkHeader,
    collect: bool,
    npz: Option<npz::StreamCheck>,
) -> Result<StreamVerified, Error> {
    use std::sync::mpsc::sync_channel;
    let total = h.comp_len;
    let mut sha = Sha256::new();
    let mut crc = 0u32;
    let (full_tx, full_rx) = sync_channel::<(Vec<u8>, usize)>(2);
    let (free_tx, free_rx) = sync_channel::<Vec<u8>>(4);
    for _ in 0..3 {
        let _ = free_tx.send(vec![0u8; PIECE]);
    }
    let uncomp_len = h.uncomp_len;
    std::thread::scope(|s| {
        let consumer = s.spawn(move || {
            let mut npz = npz;
            let dec = zstd_consume(full_rx, free_tx, total, uncomp_len, collect, &mut npz);
            let arrays = match &dec {
                Ok(_) => npz.and_then(npz::StreamCheck::finish),
                Err(_) => None,
            };
            (dec, arrays)
        });
        let mut pos = 0u64;
        let mut spare: Option<Vec<u8>> = None;
        let mut alive = true;
        let mut read_err = None;
        while pos < total {
            // When the decoder has stopped (error), keep hashing with a buffer of our own.
            let mut buf = match if alive { free_rx.recv().ok() } else { None } {
                Some(b) => b,
                None => spare.take().unwrap_or_else(|| vec![0u8; PIECE]),
            };
            let n = (total - pos).min(PIECE as u64) as usize;
            if let Err(e) = input.read_at(off + pos, &mut buf[..n], "chunk payload") {
                read_err = Some(e);
                break;
            }
            sha.update(&buf[..n]);
            crc = crc32c::crc32c_append(crc, &buf[..n]);
            if alive {
                if let Err(back) = full_tx.send((buf, n)) {
                    alive = false;
                    spare = Some(back.0 .0);
                }
            } else {
                spare = Some(buf);
            }
            pos += n as u64;
        }
        drop(full_tx);
        let (dec, arrays) = consumer.join().unwrap_or_else(|_| {
            (
                Err(("fold.payload.decompress_failed", "zstd decoder thread failed".into())),
                None,
            )
        });
        match read_err {
            Some(e) => Err(e),
            None => Ok((crc, hex(&sha.finalize()), dec, arrays)),
        }
    })
}

/// Decode zstd pieces as they arrive: into one small reused buffer (counting only), or into a
/// growing buffer never larger than `uncomp_len` (collecting).
fn zstd_consume(
    rx: std::sync::mpsc::Receiver<(Vec<u8>, usize)>,
    free: std::sync::mpsc::SyncSender<Vec<u8>>,
    comp_len: u64,
    uncomp_len: u64,
    collect: bool,
    npz: &mut Option<npz::StreamCheck>,
) -> Streamed {
    use zstd::zstd_safe::{get_error_name, DCtx, InBuffer, OutBuffer};
    let fail = |c: usize| ("fold.payload.decompress_failed", format!("zstd: {}", get_error_name(c)));
    let too_much = || {
        (
            "fold.payload.uncomp_len_mismatch",
            format!("zstd payload decompresses to more than uncomp_len ({uncomp_len}) bytes"),
        )
    };
    let mut dctx = DCtx::create();
    let mut scratch = vec![0u8; 256 << 10];
    let mut sink = Sink::Vec(Vec::new());
    if collect {
        // Up front only what the stored size can plausibly expand to (see `decode`).
        let plausible = comp_len.saturating_mul(65536).saturating_add(1 << 20);
        let map = if uncomp_len >= STREAM_MIN && uncomp_len <= plausible {
            huge_buffer(uncomp_len)
        } else {
            None
        };
        match map {
            Some(m) => {
                // zstd then decodes blocks straight into the buffer instead of into its window
                // and copying out (~12% of decode time on match-heavy data). Optional.
                let _ = dctx.set_parameter(zstd::zstd_safe::DParameter::StableOutBuffer(true));
                sink = Sink::Map(m, 0)
            }
            None => {
                if let Sink::Vec(v) = &mut sink {
                    v.reserve(uncomp_len.min(plausible).min(usize::MAX as u64) as usize);
                }
            }
        }
    }
    let mut produced = 0u64;
    let mut hint = 1usize;
    // One decoder step; returns (input consumed, output produced, zstd hint).
    let mut step = |inb: &mut InBuffer<'_>,
                    sink: &mut Sink,
                    scratch: &mut [u8]|
     -> Result<(usize, usize, usize), (&'static str, String)> {
        let before = inb.pos();
        let full = (sink.len() as u64) >= uncomp_len;
        let map_dst = match sink {
            Sink::Map(m, filled) => m.get_mut(..uncomp_len as usize).map(|d| (d, filled)),
            _ => None,
        };
        if let Some((dst, filled)) = map_dst {
            // Always the same whole buffer (the stable-output contract); a full buffer that
            // zstd still wants to write to is reported as too small.
            let start = *filled;
            let mut outb = OutBuffer::around_pos(dst, start);
            let r = dctx.decompress_stream(&mut outb, inb).map_err(|c| {
                if get_error_name(c).contains("too small") {
                    too_much()
                } else {
                    fail(c)
                }
            })?;
            let got = outb.pos() - start;
            *filled = outb.pos();
            return Ok((inb.pos() - before, got, r));
        }
        if let (Sink::Vec(sink), true) = (sink, collect && !full) {
            if sink.len() == sink.capacity() {
                let want = (uncomp_len - sink.len() as u64).min(sink.len().max(1 << 20) as u64) as usize;
                sink.reserve_exact(want);
            }
            let start = sink.len();
            let mut outb = OutBuffer::around_pos(sink, start);
            let r = dctx.decompress_stream(&mut outb, inb).map_err(fail)?;
            let got = outb.pos() - start;
            Ok((inb.pos() - before, got, r))
        } else {
            // Counting, or a collecting sink already full: any further byte is too much.
            let mut outb = OutBuffer::around(scratch);
            let r = dctx.decompress_stream(&mut outb, inb).map_err(fail)?;
            Ok((inb.pos() - before, outb.pos(), r))
        }
    };
    for (buf, n) in rx {
        let mut inb = InBuffer::around(&buf[..n]);
        while inb.pos() < n {
            let (used, got, r) = step(&mut inb, &mut sink, &mut scratch)?;
            if let (Some(chk), false) = (npz.as_mut(), collect) {
                chk.feed(scratch.get(..got).unwrap_or(&[]));
            }
            hint = r;
            produced += got as u64;
            if produced > uncomp_len || (collect && produced > sink.len() as u64) {
                return Err(too_much());
            }
            if used == 0 && got == 0 {
                return Err((
                    "fold.payload.decompress_failed",
                    "zstd: decoder made no progress".into(),
                ));
            }
        }
        let _ = free.send(buf);
    }
    // Flush what the decoder still holds.
    loop {
        let mut inb = InBuffer::around(&[]);
        let (_, got, r) = step(&mut inb, &mut sink, &mut scratch)?;
        if let (Some(chk), false) = (npz.as_mut(), collect) {
            chk.feed(scratch.get(..got).unwrap_or(&[]));
        }
        if got == 0 {
            // Nothing left. (A call after a finished frame asks for a new frame header: its
            // hint is not about the data we gave.)
            break;
        }
        hint = r;
        produced += got as u64;
        if produced > uncomp_len || (collect && produced > sink.len() as u64) {
            return Err(too_much());
        }
    }
    if hint != 0 {
        return Err((
            "fold.payload.decompress_failed",
            "zstd: data ends inside a frame".into(),
        ));
    }
    if produced != uncomp_len {
        return Err((
            "fold.payload.uncomp_len_mismatch",
            format!("zstd payload decompresses to {produced} bytes, uncomp_len says {uncomp_len}"),
        ));
    }
    Ok(collect.then(|| match sink {
        Sink::Vec(v) => Payload::Vec(v),
        Sink::Map(m, n) => Payload::Map(m, n),
    }))
}

/// CRC32C and SHA-256 of a stored payload read in pieces through one reused buffer.
fn stream_hash(input: &Input, off: u64, total: u64) -> Result<(u32, String), Error> {
    let mut sha = Sha256::new();
    let mut crc = 0u32;
    let mut buf = vec![0u8; PIECE.min(total as usize)];
    let mut pos = 0u64;
    while pos < total {
        let n = (total - pos).min(PIECE as u64) as usize;
        input.read_at(off + pos, &mut buf[..n], "chunk payload")?;
        sha.update(&buf[..n]);
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        pos += n as u64;
    }
    Ok((crc, hex(&sha.finalize())))
}

/// [`ecc::layout_of`] for a verified payload too large to hold: payload and ECC bytes are read
/// in batches of blocks.
fn stream_layout(input: &Input, payload_off: u64, len: u64, ecc_off: u64, rs: &Rs) -> Result<Option<Layout>, Error> {
    const BATCH: u64 = 8192;
    let (k, n) = (rs.k() as u64, rs.nsym() as u64);
    let nblocks = len.div_ceil(k);
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

#[allow(clippy::too_many_arguments)]
fn check_chunk(
    input: &Input,
    c: &Container,
    e: &Entry,
    hashes_meta: &Option<Vec<(String, String)>>,
    opts: &AnalyzeOptions,
    l: &mut Layers,
    spans: &mut Vec<(u64, u64, String)>,
    repairs: &mut Vec<(u64, Vec<u8>)>,
) -> Result<ChunkStatus, Error> {
    let name = &e.name;
    let mut st = ChunkStatus {
        entry: e.clone(),
        header: None,
        crc_ok: None,
        sha_ok: None,
        repaired_bytes: 0,
        ecc_status: "-".into(),
        decoded: false,
        uncompressed_sha256: None,
        content: Content::None,
        payload: None,
        errors: Vec::new(),
    };
    let at = Some(e.offset);
    let max = MAX_CHUNK_SIZE.min(opts.limits.max_alloc);
    // Layer 2: the index's sizes, before any read.
    let mut too_large = Vec::new();
    for (what, v) in [
        ("comp_len", e.comp_len),
        ("uncomp_len", e.uncomp_len),
        ("ecc_len", e.ecc_len),
    ] {
        if v > max {
            l.limits.error(
                "fold.limits.chunk_too_large",
                Some(c.header.index_off),
                format!("chunk {name:?}: index {what} {v} exceeds the chunk limit of {max} bytes"),
            );
            too_large.push(v);
        }
    }
    // Layer 3: the chunk header must lie in the file.
    if e.offset < crate::raw::HEADER_LEN
        || e.offset
            .checked_add(CHUNK_HEADER_LEN)
            .is_none_or(|end| end > c.file_len)
    {
        l.bounds.error(
            "fold.bounds.chunk_out_of_bounds",
            at,
            format!(
                "chunk {name:?}: header at offset {} is outside the chunk area of the file ({} bytes)",
                e.offset, c.file_len
            ),
        );
        return Ok(st);
    }
    let mut hb = [0u8; 32];
    input.read_at(e.offset, &mut hb, "chunk header")?;
    let h = ChunkHeader::from_bytes(&hb);
    st.header = Some(h);
    // Index and header must agree (pyfolds trusts the header silently).
    let mut diffs = Vec::new();
    // The index holds the type code as JSON text: compare the decoded characters with the
    // header's bytes (control characters are escaped in JSON, raw in the header).
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
            at,
            format!(
                "chunk {name:?}: chunk header and index disagree (header vs index): {}",
                diffs.join(", ")
            ),
        );
    }
    if h.flags != FLAG_NONE && h.flags != FLAG_ZSTD {
        l.structure.error(
            "fold.chunk.bad_flags",
            Some(e.offset + 4),
            format!("chunk {name:?}: flags {} is neither 0 nor 1", h.flags),
        );
    }
    for (what, v, off) in [
        ("comp_len", h.comp_len, 16u64),
        ("uncomp_len", h.uncomp_len, 8),
        ("ecc_len", h.ecc_len as u64, 28),
    ] {
        if v > max && !too_large.contains(&v) {
            l.limits.error(
                "fold.limits.chunk_too_large",
                Some(e.offset + off),
                format!("chunk {name:?}: {what} {v} exceeds the chunk limit of {max} bytes"),
            );
            too_large.push(v);
        }
    }
    if !too_large.is_empty() {
        return Ok(st);
    }
    let payload_off = e.offset + CHUNK_HEADER_LEN;
    let end = payload_off
        .checked_add(h.comp_len)
        .and_then(|x| x.checked_add(h.ecc_len as u64));
    match end {
        Some(end) if end <= c.file_len => spans.push((e.offset, end, name.clone())),
        _ => {
            l.bounds.error(
                "fold.bounds.chunk_out_of_bounds",
                Some(e.offset + 16),
                format!(
                    "chunk {name:?}: payload of {} + ECC of {} bytes at offset {payload_off} runs past the end of the file ({} bytes)",
                    h.comp_len, h.ecc_len, c.file_len
                ),
            );
            return Ok(st);
        }
    }
    // Layer 4: integrity of the stored payload.
    let ecc_off = payload_off + h.comp_len;
    let flags = h.flags;
    let uncomp_len = h.uncomp_len;
    // Large chunks are verified in pieces through reused buffers while zstd decodes on a
    // second thread: opaque chunks are only counted (no chunk-sized allocation at all), JSON
    // and NPZ0 chunks are collected for their checks. Whatever fails is re-read whole below
    // for ECC repair and exact reporting. (`inspect` and array reads keep the whole path.)
    let streamable = h.comp_len >= STREAM_MIN && !opts.content && !opts.keep_payload && h.flags <= FLAG_ZSTD;
    // NPZ0 archives are checked as they stream by (no chunk-sized buffer); an archive the
    // streaming check cannot vouch for is checked whole below, so findings do not change.
    let npz_stream = streamable && h.flags == FLAG_ZSTD && e.ctype == "NPZ0";
    let collect = (e.ctype == "JSON" || e.ctype == "NPZ0") && !npz_stream;
    let npz_check = npz_stream.then(|| npz::StreamCheck::new(&opts.limits));
    let streamed = match (streamable, h.flags) {
        (true, FLAG_ZSTD) => Some(stream_verify(input, payload_off, &h, collect, npz_check)?),
        (true, _) if !collect => {
            let (crc, sha) = stream_hash(input, payload_off, h.comp_len)?;
            let dec = if h.comp_len == h.uncomp_len {
                Ok(None)
            } else {
                Err((
                    "fold.payload.uncomp_len_mismatch",
                    format!(
                        "uncompressed chunk holds {} bytes, uncomp_len says {}",
                        h.comp_len, h.uncomp_len
                    ),
                ))
            };
            Some((crc, sha, dec, None))
        }
        _ => None,
    };
    let mut streamed_arrays = None;
    let (mut comp, ecc_bytes, crc, sha, mut decoded) = match streamed {
        Some((crc, sha, dec, arrays))
            if crc == h.crc32c && sha == e.sha256 && (!npz_stream || (dec.is_ok() && arrays.is_some())) =>
        {
            streamed_arrays = arrays;
            (Vec::new(), Vec::new(), crc, sha, dec)
        }
        _ => {
            let comp = input.read_vec(payload_off, h.comp_len, "chunk payload", &opts.limits)?;
            let ecc_bytes = input.read_vec(ecc_off, h.ecc_len as u64, "chunk ECC", &opts.limits)?;
            let ((crc, sha), dec) = if comp.len() >= (1 << 20) {
                // zstd (the slowest stage) on one core; SHA-256 and CRC32C on the other.
                let ((sha, crc), dec) = rayon::join(
                    || (hex(&Sha256::digest(&comp)), crc32c::crc32c(&comp)),
                    || decode(flags, &comp, uncomp_len).map(|o| o.map(Payload::Vec)),
                );
                ((crc, sha), dec)
            } else {
                (
                    hashes(&comp),
                    decode(flags, &comp, uncomp_len).map(|o| o.map(Payload::Vec)),
                )
            };
            (comp, ecc_bytes, crc, sha, dec)
        }
    };
    let mut crc_ok = crc == h.crc32c;
    let mut sha_ok = sha == e.sha256;
    let rs = ecc::parse_algo(&e.ecc_algo).and_then(Rs::new);
    if e.ecc_algo == "none" {
        st.ecc_status = "none".into();
        if h.ecc_len != 0 {
            l.integrity.warning(
                "fold.ecc.unexpected_bytes",
                Some(ecc_off),
                format!("chunk {name:?}: ecc_algo \"none\" but {} ECC bytes", h.ecc_len),
            );
        }
    } else if rs.is_none() {
        st.ecc_status = format!("unknown ({})", e.ecc_algo);
        l.integrity.warning(
            "fold.ecc.unknown_algo",
            Some(ecc_off),
            format!("chunk {name:?}: unknown ecc_algo {:?}: ECC not used", e.ecc_algo),
        );
    }
    if let Some(rs) = &rs {
        let k = rs.k() as u64;
        let expected = h.comp_len.div_ceil(k) * rs.nsym() as u64;
        let multi = h.comp_len > k;
        st.ecc_status = format!("rs({}) ok", rs.nsym());
        if h.ecc_len as u64 != expected {
            st.ecc_status = format!("rs({}) bad length", rs.nsym());
            l.integrity.warning(
                "fold.ecc.bad_len",
                Some(e.offset + 28),
                format!(
                    "chunk {name:?}: {} ECC bytes, {} expected for {} payload bytes with rs({})",
                    h.ecc_len,
                    expected,
                    h.comp_len,
                    rs.nsym()
                ),
            );
        } else if !(crc_ok && sha_ok) {
            // Which layout the ECC bytes have cannot be told from damaged data: try per-block
            // parity (rasterpack's), then pyfolds' stream tail; only a payload whose hashes
            // match again counts.
            let layouts: &[Layout] = if multi {
                &[Layout::BlockParity, Layout::PyfoldsTail]
            } else {
                &[Layout::BlockParity]
            };
            let mut fixed: Option<(Layout, ecc::Repair, Vec<u8>)> = None;
            let mut tail_rep = None;
            for &layout in layouts {
                let mut trial = comp.clone();
                let rep = ecc::repair(rs, &mut trial, &ecc_bytes, layout);
                if layout == Layout::PyfoldsTail {
                    tail_rep = Some(rep.clone());
                }
                // A layout whose every usable block decoded wins over one that verified with
                // some block failing (the damage lay in blocks both layouts cover).
                if hashes(&trial) == (h.crc32c, e.sha256.clone()) && fixed.as_ref().is_none_or(|f| f.1.failed) {
                    fixed = Some((layout, rep.clone(), trial));
                    if !rep.failed {
                        break;
                    }
                }
            }
            if let Some((layout, rep, trial)) = fixed {
                comp = trial;
                crc_ok = true;
                sha_ok = true;
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
                decoded = decode(flags, &comp, uncomp_len).map(|o| o.map(Payload::Vec));
                if opts.keep_repairs {
                    repairs.push((payload_off, comp.clone()));
                    // Damaged ECC bytes are rewritten too (in the layout that repaired), so
                    // the copy is whole again; intact ones are kept as they are.
                    if ecc::layout_of(rs, &comp, &ecc_bytes).is_none() {
                        repairs.push((
                            ecc_off,
                            match layout {
                                Layout::BlockParity => rs.block_parity(&comp),
                                Layout::PyfoldsTail => ecc::pyfolds_ecc(rs, &comp),
                            },
                        ));
                    }
                }
            } else {
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
            }
        } else {
            // The payload verifies: are the ECC bytes what either layout says they must be?
            let layout = if comp.len() as u64 == h.comp_len {
                ecc::layout_of(rs, &comp, &ecc_bytes)
            } else {
                stream_layout(input, payload_off, h.comp_len, ecc_off, rs)?
            };
            match layout {
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
                    if opts.keep_repairs {
                        let whole;
                        let data = if comp.len() as u64 == h.comp_len {
                            &comp
                        } else {
                            whole = input.read_vec(payload_off, h.comp_len, "chunk payload", &opts.limits)?;
                            &whole
                        };
                        repairs.push((ecc_off, rs.block_parity(data)));
                    }
                }
            }
        }
    }
    st.crc_ok = Some(crc_ok);
    st.sha_ok = Some(sha_ok);
    if !crc_ok {
        l.integrity.error(
            "fold.integrity.crc_mismatch",
            Some(e.offset + 24),
            format!(
                "chunk {name:?}: CRC32C of the stored payload is {crc:#010x}, header says {:#010x}",
                h.crc32c
            ),
        );
    }
    if !sha_ok {
        l.integrity.error(
            "fold.integrity.sha_mismatch",
            Some(c.header.index_off),
            format!(
                "chunk {name:?}: SHA-256 of the stored payload is {sha}, index says {}",
                e.sha256
            ),
        );
    }
    if let Some(hm) = hashes_meta {
        match hm.iter().find(|(n, _)| n == name) {
            Some((_, h2)) if *h2 != e.sha256 => l.integrity.error(
                "fold.integrity.chunk_hashes_mismatch",
                Some(c.header.index_off),
                format!(
                    "chunk {name:?}: metadata.chunk_hashes says {h2}, the index entry says {}",
                    e.sha256
                ),
            ),
            Some(_) => {}
            None => l.integrity.warning(
                "fold.integrity.chunk_hashes_missing",
                Some(c.header.index_off),
                format!("chunk {name:?} is not listed in metadata.chunk_hashes"),
            ),
        }
    }
    if !(crc_ok && sha_ok) {
        return Ok(st);
    }
    // Layer 6: semantics of the decoded payload.
    let raw: &[u8] = match &decoded {
        Ok(Some(v)) => v,
        Ok(None) => &comp,
        Err((code, msg)) => {
            if *code != "fold.chunk.bad_flags" {
                l.semantics
                    .error(*code, Some(payload_off), format!("chunk {name:?}: {msg}"));
            }
            return Ok(st);
        }
    };
    if opts.content {
        // Only reports show it; plain validation skips a second full SHA-256 pass.
        st.uncompressed_sha256 = Some(hex(&Sha256::digest(raw)));
    }
    if opts.keep_payload {
        st.payload = Some(raw.to_vec());
    }
    let keep = opts.content;
    match e.ctype.as_str() {
        "JSON" => match pjson::parse(raw, JSON_MAX_DEPTH) {
            Ok(v) => {
                st.decoded = true;
                if keep {
                    st.content = Content::Json(v);
                }
            }
            Err(err) => l.semantics.error(
                "fold.payload.bad_json",
                Some(payload_off),
                format!(
                    "chunk {name:?}: JSON payload invalid at decoded byte {}: {}",
                    err.offset, err.message
                ),
            ),
        },
        "NPZ0" => match streamed_arrays.map_or_else(|| npz::describe(raw, &opts.limits), Ok) {
            Ok(arrays) => {
                st.decoded = true;
                for a in &arrays {
                    if let Some(why) = &a.damaged {
                        l.semantics.error(
                            NPZ_MEMBER_DAMAGED,
                            Some(payload_off),
                            format!(
                                "chunk {name:?}: NPZ0 member of array {:?} is not readable: {why}",
                                a.name
                            ),
                        );
                    } else if let Some(why) = &a.unsupported {
                        let code = if a.zip_method_unsupported {
                            "fold.payload.npz_unsupported"
                        } else {
                            "fold.payload.npz_dtype_unsupported"
                        };
                        l.semantics.info(
                            code,
                            Some(payload_off),
                            format!(
                                "chunk {name:?}: array {:?} cannot be decoded by rasterpack: {why}",
                                a.name
                            ),
                        );
                    }
                }
                if keep {
                    st.content = Content::Npz(arrays);
                }
            }
            Err(err) if err.kind == rasterpack_common::ErrorKind::Unsupported => l.semantics.info(
                "fold.payload.npz_unsupported",
                Some(payload_off),
                format!(
                    "chunk {name:?}: NPZ0 archive uses a feature rasterpack does not implement: {}",
                    err.message
                ),
            ),
            Err(err) => l.semantics.error(
                "fold.payload.bad_npz",
                Some(payload_off),
                format!(
                    "chunk {name:?}: NPZ0 payload is not a readable .npz archive: {}",
                    err.message
                ),
            ),
        },
        _ => {
            st.decoded = true;
            if keep {
                st.content = match npz::members(raw, &opts.limits) {
                    Ok(m) if raw.starts_with(b"PK") => Content::Zip(m.into_iter().map(|m| m.name).collect()),
                    _ => Content::Opaque(raw[..raw.len().min(64)].to_vec()),
                };
            }
        }
    }
    Ok(st)
}

/// Overlaps (invalid), gaps and trailing bytes (warnings) between chunks and the index.
/// `complete`: every chunk's extent is known; gaps are only meaningful then.
fn check_layout(c: &Container, spans: &mut [(u64, u64, String)], complete: bool, l: &mut Layers) {
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

/// The text pyfolds hashes for `metadata.manifest_hash`.
pub fn manifest_source(metadata: &Value) -> String {
    let stripped = match metadata {
        Value::Object(m) => Value::Object(m.iter().filter(|(k, _)| !k.eq_str("manifest_hash")).cloned().collect()),
        other => other.clone(),
    };
    pjson::dumps(&stripped, true, pjson::Ascii::Escape)
}

pub fn manifest_hash(metadata: &Value) -> String {
    hex(&Sha256::digest(manifest_source(metadata).as_bytes()))
}

fn check_manifest(c: &Container, l: &mut Layers) -> (Option<bool>, Option<String>) {
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

/// Fully verify one chunk and return its decoded bytes (used by `read_array`): every check
/// that protects those bytes runs (index entry, chunk header, bounds, CRC32C, SHA-256,
/// `metadata.chunk_hashes`, ECC repair, decoded length); the first error is returned.
pub fn read_chunk(input: &Input, c: &Container, name: &str, limits: &Limits) -> Result<Vec<u8>, Error> {
    let e = c
        .index
        .entries
        .iter()
        .find(|e| e.name == name)
        .ok_or_else(|| Error::usage(format!("no chunk named {name:?}")))?;
    let mut l = Layers::default();
    let hashes = chunk_hashes(c, &mut l);
    let mut errors = l.errors_since([0; 6]);
    errors.extend(duplicate_name_error(c, e, &name_counts(c)));
    let mut spans = Vec::new();
    let mut repairs = Vec::new();
    let opts = AnalyzeOptions {
        limits: *limits,
        content: false,
        keep_repairs: false,
        keep_payload: true,
    };
    let before = l.counts();
    let st = check_chunk(input, c, e, &hashes, &opts, &mut l, &mut spans, &mut repairs)?;
    errors.extend(l.errors_since(before));
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
