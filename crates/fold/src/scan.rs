//! A chunk's payload as a stream: the stored bytes are read in pieces through a few reused
//! buffers (CRC32C and SHA-256 computed on them as they pass), decoded (zstd through a small
//! reused output buffer, or taken as they are) and handed piece by piece to a consumer (a JSON
//! or `.npz` check, an array sink). Memory is a working set of a few MiB whatever the chunk's
//! size; nothing is allocated from a size the file declares.
//!
//! Large chunks are scanned on two threads: the reading thread hashes while a second one
//! decodes and consumes. A consumer may stop early ([`Flow::Stop`], e.g. a region read that
//! has all it needs); the stored bytes are still hashed to the end when hashes were asked for.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use rasterpack_common::{Error, Input};
use sha2::{Digest, Sha256};
use zstd::zstd_safe::{get_error_name, DCtx, InBuffer, OutBuffer};

use crate::raw::{FLAG_NONE, FLAG_ZSTD};

/// Piece size of reads of stored bytes.
pub(crate) const PIECE: usize = 2 << 20;
/// Size of the reused zstd output buffer: the pieces consumers see.
const OUT_PIECE: usize = 256 << 10;
/// Chunks at least this large are scanned on two threads.
const PARALLEL_MIN: u64 = 1 << 20;
/// Largest zstd window accepted: zstd's own default for streaming decoders (`zstd -d` refuses
/// larger ones without `--long`). Decoding a frame needs a buffer of its window size.
pub(crate) const MAX_WINDOW_LOG: u32 = 27;

/// Code of a zstd frame whose window is above [`MAX_WINDOW_LOG`].
pub(crate) const ZSTD_WINDOW_CODE: &str = "fold.limits.zstd_window";

/// Where the stored bytes are.
#[derive(Clone, Copy)]
pub(crate) enum Stored<'a> {
    /// `len` bytes at `offset` of the input.
    File { input: &'a Input, offset: u64, len: u64 },
    /// In memory (a payload repaired by ECC).
    Memory(&'a [u8]),
}

impl Stored<'_> {
    pub(crate) fn len(&self) -> u64 {
        match self {
            Stored::File { len, .. } => *len,
            Stored::Memory(m) => m.len() as u64,
        }
    }
}

/// Whether a consumer wants more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    More,
    Stop,
}

/// A decoding failure: its finding code and message.
pub(crate) type DecodeError = (&'static str, String);

/// How decoding went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decoded {
    /// Decoded bytes handed to the consumer.
    pub produced: u64,
    /// Every byte was decoded and the length checked (false when the consumer stopped).
    pub complete: bool,
}

/// Result of [`scan`].
pub(crate) struct Scanned {
    /// CRC32C and SHA-256 (hex) of the stored bytes, when asked for.
    pub hashes: Option<(u32, String)>,
    pub decode: Result<Decoded, DecodeError>,
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Incremental CRC32C and SHA-256.
struct Hasher {
    sha: Sha256,
    crc: u32,
}

impl Hasher {
    fn new() -> Hasher {
        Hasher {
            sha: Sha256::new(),
            crc: 0,
        }
    }
    fn update(&mut self, b: &[u8]) {
        self.sha.update(b);
        self.crc = crc32c::crc32c_append(self.crc, b);
    }
    fn finish(self) -> (u32, String) {
        (self.crc, hex(&self.sha.finalize()))
    }
}

/// CRC32C and SHA-256 of a byte slice, on both cores for large ones.
/// [`hashes`] in pieces of [`PIECE`] bytes, asking `poll` before each.
pub(crate) fn hashes_polled(data: &[u8], poll: Poll<'_>) -> Result<(u32, String), Error> {
    if data.len() <= PIECE {
        poll()?;
        return Ok(hashes(data));
    }
    let (sha, crc) = rayon::join(
        || {
            let mut sha = Sha256::new();
            for piece in data.chunks(PIECE) {
                poll()?;
                sha.update(piece);
            }
            Ok::<_, Error>(hex(&sha.finalize()))
        },
        || data.chunks(PIECE).fold(0, crc32c::crc32c_append),
    );
    Ok((crc, sha?))
}

pub(crate) fn hashes(data: &[u8]) -> (u32, String) {
    if data.len() < (1 << 20) {
        return (crc32c::crc32c(data), hex(&Sha256::digest(data)));
    }
    let (sha, crc) = rayon::join(|| hex(&Sha256::digest(data)), || crc32c::crc32c(data));
    (crc, sha)
}

/// Turns stored pieces into decoded pieces for a consumer.
enum Decoder {
    /// Stored as is.
    Copy {
        produced: u64,
    },
    Zstd(Box<ZstdStream>),
    /// Decoding failed or cannot start; the consumer gets nothing more.
    Failed(DecodeError),
    /// The consumer stopped.
    Stopped {
        produced: u64,
    },
}

struct ZstdStream {
    dctx: DCtx<'static>,
    out: Vec<u8>,
    produced: u64,
    uncomp_len: u64,
    /// Last return value of the decoder (0 when a frame just ended).
    hint: usize,
    /// The first bytes, until the frame header can be read.
    head: Vec<u8>,
    head_checked: bool,
}

fn zstd_error(code: usize) -> DecodeError {
    let name = get_error_name(code);
    if name.contains("too much memory") || name.contains("indow") {
        (
            ZSTD_WINDOW_CODE,
            format!(
                "zstd: {name} (frames with a window above {} MiB are refused)",
                1u64 << (MAX_WINDOW_LOG - 20)
            ),
        )
    } else {
        ("fold.payload.decompress_failed", format!("zstd: {name}"))
    }
}

fn too_much(uncomp_len: u64) -> DecodeError {
    (
        "fold.payload.uncomp_len_mismatch",
        format!("zstd payload decompresses to more than uncomp_len ({uncomp_len}) bytes"),
    )
}

impl Decoder {
    fn new(flags: u32, stored_len: u64, uncomp_len: u64) -> Decoder {
        match flags {
            FLAG_NONE if stored_len != uncomp_len => Decoder::Failed((
                "fold.payload.uncomp_len_mismatch",
                format!("uncompressed chunk holds {stored_len} bytes, uncomp_len says {uncomp_len}"),
            )),
            FLAG_NONE => Decoder::Copy { produced: 0 },
            FLAG_ZSTD => {
                let mut dctx = DCtx::create();
                if let Err(c) = dctx.set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(MAX_WINDOW_LOG)) {
                    return Decoder::Failed(zstd_error(c));
                }
                Decoder::Zstd(Box::new(ZstdStream {
                    dctx,
                    out: vec![0u8; OUT_PIECE],
                    produced: 0,
                    uncomp_len,
                    hint: 1,
                    head: Vec::new(),
                    head_checked: false,
                }))
            }
            _ => Decoder::Failed((
                "fold.chunk.bad_flags",
                format!("flags {flags} is neither 0 (none) nor 1 (zstd)"),
            )),
        }
    }

    /// Whether the decoder still wants stored bytes.
    fn active(&self) -> bool {
        matches!(self, Decoder::Copy { .. } | Decoder::Zstd(_))
    }

    fn push(&mut self, piece: &[u8], consumer: &mut dyn FnMut(&[u8]) -> Flow) {
        let outcome = match self {
            Decoder::Copy { produced } => {
                *produced += piece.len() as u64;
                match consumer(piece) {
                    Flow::More => Ok(Flow::More),
                    Flow::Stop => Ok(Flow::Stop),
                }
            }
            Decoder::Zstd(z) => z.push(piece, consumer),
            _ => return,
        };
        self.after(outcome);
    }

    fn after(&mut self, outcome: Result<Flow, DecodeError>) {
        match outcome {
            Ok(Flow::More) => {}
            Ok(Flow::Stop) => {
                let produced = self.produced();
                *self = Decoder::Stopped { produced };
            }
            Err(e) => *self = Decoder::Failed(e),
        }
    }

    fn produced(&self) -> u64 {
        match self {
            Decoder::Copy { produced } | Decoder::Stopped { produced } => *produced,
            Decoder::Zstd(z) => z.produced,
            Decoder::Failed(_) => 0,
        }
    }

    fn finish(mut self, consumer: &mut dyn FnMut(&[u8]) -> Flow) -> Result<Decoded, DecodeError> {
        if let Decoder::Zstd(z) = &mut self {
            let outcome = z.finish(consumer);
            self.after(outcome);
        }
        match self {
            Decoder::Copy { produced } => Ok(Decoded {
                produced,
                complete: true,
            }),
            Decoder::Zstd(z) => Ok(Decoded {
                produced: z.produced,
                complete: true,
            }),
            Decoder::Stopped { produced } => Ok(Decoded {
                produced,
                complete: false,
            }),
            Decoder::Failed(e) => Err(e),
        }
    }
}

impl ZstdStream {
    /// A frame header announcing more than `uncomp_len` is refused before decoding anything.
    fn check_head(&mut self, piece: &[u8]) -> Result<(), DecodeError> {
        if self.head_checked {
            return Ok(());
        }
        let take = piece.len().min(18usize.saturating_sub(self.head.len()));
        self.head.extend_from_slice(&piece[..take]);
        match zstd::zstd_safe::get_frame_content_size(&self.head) {
            // Not enough bytes for the frame header yet.
            Err(_) if self.head.len() < 18 && !piece.is_empty() => return Ok(()),
            Ok(Some(size)) if size > self.uncomp_len => {
                return Err((
                    "fold.payload.uncomp_len_mismatch",
                    format!("zstd frame declares {size} bytes, uncomp_len says {}", self.uncomp_len),
                ))
            }
            _ => {}
        }
        self.head_checked = true;
        self.head = Vec::new();
        Ok(())
    }

    fn push(&mut self, piece: &[u8], consumer: &mut dyn FnMut(&[u8]) -> Flow) -> Result<Flow, DecodeError> {
        self.check_head(piece)?;
        let mut inb = InBuffer::around(piece);
        while inb.pos() < piece.len() {
            let before = inb.pos();
            let mut outb = OutBuffer::around(&mut self.out[..]);
            let r = self.dctx.decompress_stream(&mut outb, &mut inb).map_err(zstd_error)?;
            let got = outb.pos();
            self.hint = r;
            self.produced += got as u64;
            if self.produced > self.uncomp_len {
                return Err(too_much(self.uncomp_len));
            }
            if inb.pos() == before && got == 0 {
                return Err((
                    "fold.payload.decompress_failed",
                    "zstd: decoder made no progress".into(),
                ));
            }
            if got > 0 && consumer(&self.out[..got]) == Flow::Stop {
                return Ok(Flow::Stop);
            }
        }
        Ok(Flow::More)
    }

    fn finish(&mut self, consumer: &mut dyn FnMut(&[u8]) -> Flow) -> Result<Flow, DecodeError> {
        self.check_head(&[])?;
        // Flush what the decoder still holds.
        loop {
            let mut inb = InBuffer::around(&[]);
            let mut outb = OutBuffer::around(&mut self.out[..]);
            let r = self.dctx.decompress_stream(&mut outb, &mut inb).map_err(zstd_error)?;
            let got = outb.pos();
            if got == 0 {
                // Nothing left. (A call after a finished frame asks for a new frame header:
                // its hint is not about the data we gave.)
                break;
            }
            self.hint = r;
            self.produced += got as u64;
            if self.produced > self.uncomp_len {
                return Err(too_much(self.uncomp_len));
            }
            if consumer(&self.out[..got]) == Flow::Stop {
                return Ok(Flow::Stop);
            }
        }
        if self.hint != 0 {
            return Err((
                "fold.payload.decompress_failed",
                "zstd: data ends inside a frame".into(),
            ));
        }
        if self.produced != self.uncomp_len {
            return Err((
                "fold.payload.uncomp_len_mismatch",
                format!(
                    "zstd payload decompresses to {} bytes, uncomp_len says {}",
                    self.produced, self.uncomp_len
                ),
            ));
        }
        Ok(Flow::More)
    }
}

/// Read the stored bytes, hash them when `hash`, decode them (`flags`, `uncomp_len`) and
/// hand the decoded bytes to `consumer` in order. `Err` only for I/O errors; every problem
/// of the file is in the result.
pub(crate) fn scan(
    stored: Stored<'_>,
    flags: u32,
    uncomp_len: u64,
    hash: bool,
    poll: Poll<'_>,
    consumer: &mut (dyn FnMut(&[u8]) -> Flow + Send),
) -> Result<Scanned, Error> {
    let decoder = Decoder::new(flags, stored.len(), uncomp_len);
    match stored {
        Stored::Memory(data) => {
            let run = |mut decoder: Decoder, consumer: &mut (dyn FnMut(&[u8]) -> Flow + Send)| {
                for piece in data.chunks(PIECE) {
                    if !decoder.active() {
                        break;
                    }
                    poll()?;
                    decoder.push(piece, consumer);
                }
                Ok(decoder.finish(consumer))
            };
            if hash {
                let (hashes, decode) = rayon::join(|| hashes_polled(data, poll), || run(decoder, consumer));
                Ok(Scanned {
                    hashes: Some(hashes?),
                    decode: decode?,
                })
            } else {
                Ok(Scanned {
                    hashes: None,
                    decode: run(decoder, consumer)?,
                })
            }
        }
        Stored::File { input, offset, len } => {
            if hash && len >= PARALLEL_MIN && decoder.active() {
                scan_parallel(input, offset, len, decoder, poll, consumer)
            } else {
                scan_inline(input, offset, len, hash, decoder, poll, consumer)
            }
        }
    }
}

/// The caller's interrupt hook (Ctrl-C), asked between pieces of long work: an `Err` stops
/// the work with that error.
pub(crate) type Poll<'a> = &'a (dyn Fn() -> Result<(), Error> + Sync);

/// A [`Poll`] that never stops anything.
pub(crate) fn no_poll() -> Result<(), Error> {
    Ok(())
}

/// [`scan`] of a chunk in the file, hashing the very bytes it decodes (on a second thread for
/// large chunks), for a consumer that cannot move to another thread (a caller's sink): a read
/// whose chunk was verified earlier checks the bytes it delivers in the same pass.
pub(crate) fn scan_local_hashed(
    input: &Input,
    offset: u64,
    len: u64,
    flags: u32,
    uncomp_len: u64,
    consumer: &mut dyn FnMut(&[u8]) -> Flow,
) -> Result<Scanned, Error> {
    let decoder = Decoder::new(flags, len, uncomp_len);
    // The consumer (a sink) is where the caller polls.
    scan_inline(input, offset, len, true, decoder, &no_poll, consumer)
}

/// [`scan`] without hashing, on this thread, for a consumer that cannot move to another
/// thread (a caller's sink).
pub(crate) fn scan_local(
    stored: Stored<'_>,
    flags: u32,
    uncomp_len: u64,
    consumer: &mut dyn FnMut(&[u8]) -> Flow,
) -> Result<Scanned, Error> {
    let mut decoder = Decoder::new(flags, stored.len(), uncomp_len);
    match stored {
        Stored::Memory(data) => {
            for piece in data.chunks(PIECE) {
                if !decoder.active() {
                    break;
                }
                decoder.push(piece, consumer);
            }
            Ok(Scanned {
                hashes: None,
                decode: decoder.finish(consumer),
            })
        }
        Stored::File { input, offset, len } => scan_inline(input, offset, len, false, decoder, &no_poll, consumer),
    }
}

fn scan_inline(
    input: &Input,
    offset: u64,
    len: u64,
    hash: bool,
    mut decoder: Decoder,
    poll: Poll<'_>,
    consumer: &mut dyn FnMut(&[u8]) -> Flow,
) -> Result<Scanned, Error> {
    let mut hasher = hash.then(Hasher::new);
    let mut buf = vec![0u8; (PIECE as u64).min(len) as usize];
    let mut pos = 0u64;
    // Large chunks: each piece is hashed on a second thread while this one decodes it (the
    // consumer may not leave this thread: a caller's sink).
    let both = len >= PARALLEL_MIN;
    while pos < len && (hasher.is_some() || decoder.active()) {
        poll()?;
        let n = (len - pos).min(PIECE as u64) as usize;
        input.read_at(offset + pos, &mut buf[..n], "chunk payload")?;
        let piece = &buf[..n];
        match hasher.as_mut() {
            Some(h) if both && decoder.active() => std::thread::scope(|s| {
                let hashing = s.spawn(|| h.update(piece));
                decoder.push(piece, consumer);
                hashing
                    .join()
                    .map_err(|_| Error::usage("internal: the hashing thread panicked"))
            })?,
            Some(h) => {
                h.update(piece);
                decoder.push(piece, consumer);
            }
            None => decoder.push(piece, consumer),
        }
        pos += n as u64;
    }
    Ok(Scanned {
        hashes: hasher.map(Hasher::finish),
        decode: decoder.finish(consumer),
    })
}

/// Hash on this thread, decode and consume on a second one; pieces travel through three
/// reused buffers.
fn scan_parallel(
    input: &Input,
    offset: u64,
    len: u64,
    decoder: Decoder,
    poll: Poll<'_>,
    consumer: &mut (dyn FnMut(&[u8]) -> Flow + Send),
) -> Result<Scanned, Error> {
    // Pieces of at most PIECE bytes, a quarter of the chunk for smaller ones (so both threads
    // have work and three buffers stay below the chunk's size).
    let piece = (len.div_ceil(4).next_multiple_of(64 << 10)).min(PIECE as u64) as usize;
    let (full_tx, full_rx) = sync_channel::<(Vec<u8>, usize)>(2);
    let (free_tx, free_rx) = sync_channel::<Vec<u8>>(4);
    for _ in 0..3 {
        let _ = free_tx.send(vec![0u8; piece]);
    }
    std::thread::scope(|s| {
        let worker = s.spawn(move || decode_pieces(decoder, full_rx, free_tx, consumer));
        let mut hasher = Hasher::new();
        let mut pos = 0u64;
        let mut spare: Option<Vec<u8>> = None;
        let mut alive = true;
        let mut read_err = None;
        while pos < len {
            // When the decoder has stopped, keep hashing with a buffer of our own.
            let mut buf = match if alive { free_rx.recv().ok() } else { None } {
                Some(b) => b,
                None => spare.take().unwrap_or_else(|| vec![0u8; piece]),
            };
            let n = (len - pos).min(piece as u64) as usize;
            if let Err(e) = poll().and_then(|()| input.read_at(offset + pos, &mut buf[..n], "chunk payload")) {
                read_err = Some(e);
                break;
            }
            hasher.update(&buf[..n]);
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
        let decode = worker.join().unwrap_or_else(|_| {
            Err((
                "fold.payload.decompress_failed",
                "zstd decoder thread failed".to_string(),
            ))
        });
        match read_err {
            Some(e) => Err(e),
            None => Ok(Scanned {
                hashes: Some(hasher.finish()),
                decode,
            }),
        }
    })
}

fn decode_pieces(
    mut decoder: Decoder,
    rx: Receiver<(Vec<u8>, usize)>,
    free: SyncSender<Vec<u8>>,
    consumer: &mut (dyn FnMut(&[u8]) -> Flow + Send),
) -> Result<Decoded, DecodeError> {
    for (buf, n) in rx {
        decoder.push(&buf[..n], consumer);
        if !decoder.active() {
            // Dropping the receiver tells the reader to hash on alone.
            break;
        }
        let _ = free.send(buf);
    }
    decoder.finish(consumer)
}
