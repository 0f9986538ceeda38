//! Layer 6 as the payload streams by: each chunk type's check is fed the decoded bytes piece
//! by piece, and concludes once the stream has ended.
//!
//! - `JSON`: the streaming syntax check ([`crate::jsonstream`]); for reports, documents up to
//!   [`JSON_CONTENT_MAX`] are also parsed into a value (larger ones are checked, not shown).
//! - `NPZ0`: stored chunks (and repaired payloads) are walked against their central directory,
//!   read first by position; zstd chunks go through [`StreamCheck`] in one pass, and when it
//!   cannot vouch for the archive, a second pass walks it against the directory it kept.
//! - anything else is opaque: counted; reports keep the first bytes and, for a zip archive
//!   (TSAV), its member names from the directory at the end.

use std::sync::Arc;

use rasterpack_common::{Error, ErrorKind, Limits, Severity, LISTED_PER_CODE};
use sha2::{Digest, Sha256};

use super::{hex, FoldAnalyzeOptions, FoldContent};
use crate::jsonstream::JsonCheck;
use crate::npz::{self, CdWalk, ContentTap, Directory, NpzArrayInfo, StreamCheck, StreamVerdict, WalkMode};
use crate::parse::{FoldEntry, JSON_MAX_DEPTH};
use crate::pjson;
use crate::raw::{ChunkHeader, FLAG_NONE};
use crate::scan::{scan, DecodeError, Decoded, Flow, Stored};

/// Largest JSON chunk parsed into a document for reports (a parsed document takes many times
/// its text in memory); larger ones are checked as a stream only.
pub(crate) const JSON_CONTENT_MAX: u64 = 1 << 20;
/// Bytes of an opaque chunk kept for a preview.
const PREVIEW: usize = 64;
/// Most bytes kept from the end of an opaque chunk, for a zip directory listing.
const TAIL_KEEP: usize = (npz::MAX_DIRECTORY + 22 + 65535 + 76) as usize;

/// A finding about the payload, before it is placed (the caller adds the chunk and offset).
pub(crate) struct PayloadFinding {
    pub severity: Severity,
    pub code: String,
    pub message: String,
}

/// What the payload check concluded.
pub(crate) struct PayloadVerdict {
    /// How decoding went.
    pub decode: Result<Decoded, DecodeError>,
    /// The payload is what its type says (JSON parses, the archive is readable).
    pub parsed: bool,
    pub findings: Vec<PayloadFinding>,
    /// Findings counted, not listed: code, severity, how many.
    pub counted: Vec<(&'static str, Severity, u64)>,
    pub content: FoldContent,
    pub decoded_sha256: Option<String>,
    pub payload: Option<Vec<u8>>,
    /// An NPZ0 archive's central directory (the read path extracts members with it).
    pub directory: Option<Arc<Directory>>,
    /// The member (directory index) whose content went to a rider's tap, when the streaming
    /// check vouched for the archive in that same pass (see [`PayloadRider`]).
    pub tapped: Option<usize>,
}

/// A read that rides on a chunk's check: it sees the decoded bytes the check sees, in the same
/// pass, on the caller's thread (the one-pass read of a named array, `crate::read`).
pub(crate) trait PayloadRider {
    /// The tap that takes one member's content from a streamed (zstd) archive.
    fn tap(&mut self) -> &mut dyn ContentTap;
    /// A decoded piece of a stored archive, with the directory the check walks it against.
    fn stored_piece(&mut self, dir: &Arc<Directory>, total: u64, piece: &[u8]);
    /// The check concluded: the member whose content the tap got, when the check vouched
    /// for the archive in the same pass ([`PayloadVerdict::tapped`]).
    fn concluded(&mut self, tapped: Option<usize>);
}

enum Kind {
    Json {
        check: JsonCheck,
        keep: Option<Vec<u8>>,
    },
    /// Sequential check of a streamed archive.
    NpzStream(Box<StreamCheck>),
    /// Walk against a directory read first (and a copy of the directory).
    NpzWalk(Box<CdWalk>, Arc<Directory>),
    /// The directory of a stored archive could not be read.
    NpzNoDirectory(Error),
    Opaque {
        head: Vec<u8>,
        tail: Option<Tail>,
    },
}

/// The last bytes of a stream.
pub(crate) struct Tail {
    bytes: Vec<u8>,
    /// Stream offset of `bytes[0]`.
    base: u64,
    pos: u64,
}

impl Tail {
    fn new() -> Tail {
        Tail {
            bytes: Vec::new(),
            base: 0,
            pos: 0,
        }
    }

    fn feed(&mut self, b: &[u8]) {
        self.pos += b.len() as u64;
        if b.len() >= TAIL_KEEP {
            self.bytes.clear();
            self.bytes.extend_from_slice(&b[b.len() - TAIL_KEEP..]);
        } else {
            self.bytes.extend_from_slice(b);
            if self.bytes.len() >= 2 * TAIL_KEEP {
                self.bytes.drain(..self.bytes.len() - TAIL_KEEP);
            }
        }
        self.base = self.pos - self.bytes.len() as u64;
    }
}

/// The check of one chunk's payload, fed as it decodes.
pub(crate) struct PayloadCheck {
    kind: Kind,
    decoded_sha: Option<Sha256>,
    keep: Option<Vec<u8>>,
    uncomp_len: u64,
    /// NPZ0 members this chunk may still hold verdicts for (the file's budget,
    /// [`super::NPZ_MEMBERS_HELD_MAX`], less what earlier chunks hold).
    npz_room: u64,
}

/// Refuse a directory listing more members than the file's budget has room for, before its
/// members are walked (a walk holds ~200 bytes a member).
fn within_room(dir: Directory, room: u64, limits: &Limits) -> rasterpack_common::Result<Directory> {
    let n = dir.members.len() as u64;
    if n > room {
        return Err(Error::limit(
            npz::DIRECTORY_LIMIT_CODE,
            Some(dir.offset),
            format!(
                "the archive lists {n} members; with the NPZ0 chunks before it that is more than rasterpack's limit of {} members in one file",
                super::chunk::npz_members_held_max(limits)
            ),
        ));
    }
    Ok(dir)
}

/// The directory of an archive stored as is: read by position.
fn stored_directory(stored: Stored<'_>, opts: &FoldAnalyzeOptions, mode: WalkMode, room: u64) -> Result<Kind, Error> {
    let total = stored.len();
    let dir = match stored {
        Stored::File { input, offset, len } => npz::directory_at(len, &opts.limits, &mut |at, buf| {
            input.read_at(offset + at, buf, "NPZ0 archive")
        }),
        Stored::Memory(m) => npz::directory_in(m, 0, &opts.limits),
    }
    .and_then(|d| within_room(d, room, &opts.limits));
    match dir {
        Ok(dir) => {
            let dir = Arc::new(dir);
            Ok(Kind::NpzWalk(
                Box::new(CdWalk::new(Arc::clone(&dir), total, &opts.limits, mode, None)),
                dir,
            ))
        }
        Err(e) if e.kind == ErrorKind::Io => Err(e),
        Err(e) => Ok(Kind::NpzNoDirectory(e)),
    }
}

impl PayloadCheck {
    /// The check for chunk `e` (header `h`) whose stored bytes are `stored`.
    pub(crate) fn new(
        e: &FoldEntry,
        h: &ChunkHeader,
        opts: &FoldAnalyzeOptions,
        members: WalkMode,
        npz_room: u64,
        stored: Stored<'_>,
    ) -> Result<PayloadCheck, Error> {
        let kind = match e.ctype.as_str() {
            "JSON" => Kind::Json {
                check: JsonCheck::new(JSON_MAX_DEPTH),
                keep: (opts.content && h.uncomp_len <= JSON_CONTENT_MAX).then(Vec::new),
            },
            "NPZ0" if h.flags == FLAG_NONE && stored.len() == h.uncomp_len => {
                stored_directory(stored, opts, members, npz_room)?
            }
            "NPZ0" => Kind::NpzStream(Box::new(StreamCheck::new(&opts.limits))),
            _ => Kind::Opaque {
                head: Vec::new(),
                tail: opts.content.then(Tail::new),
            },
        };
        let keep = if opts.keep_payload {
            opts.limits.check_alloc(h.uncomp_len, "chunk payload", Some(e.offset))?;
            Some(Vec::new())
        } else {
            None
        };
        Ok(PayloadCheck {
            kind,
            decoded_sha: opts.decoded_sha256.then(Sha256::new),
            keep,
            uncomp_len: h.uncomp_len,
            npz_room,
        })
    }

    /// [`PayloadCheck::consume`], with `rider` seeing the same bytes (a zstd archive's member
    /// content through its tap, a stored archive's bytes with its directory).
    pub(crate) fn consume_riding(&mut self, piece: &[u8], rider: &mut dyn PayloadRider) -> Flow {
        let total = self.uncomp_len;
        match &mut self.kind {
            Kind::NpzStream(check) if self.decoded_sha.is_none() && self.keep.is_none() => {
                check.feed_tapped(piece, rider.tap());
                Flow::More
            }
            Kind::NpzWalk(walk, dir) if self.decoded_sha.is_none() && self.keep.is_none() => {
                walk.feed(piece);
                rider.stored_piece(dir, total, piece);
                Flow::More
            }
            _ => self.consume(piece),
        }
    }

    /// The next decoded bytes. Validation reads every byte: never stops the stream.
    pub(crate) fn consume(&mut self, piece: &[u8]) -> Flow {
        if let Some(s) = self.decoded_sha.as_mut() {
            s.update(piece);
        }
        if let Some(k) = self.keep.as_mut() {
            if (k.len() + piece.len()) as u64 <= self.uncomp_len {
                k.extend_from_slice(piece);
            }
        }
        match &mut self.kind {
            Kind::Json { check, keep } => {
                check.feed(piece);
                if let Some(k) = keep {
                    k.extend_from_slice(piece);
                }
            }
            Kind::NpzStream(check) => check.feed(piece),
            Kind::NpzWalk(walk, _) => {
                walk.feed(piece);
            }
            Kind::NpzNoDirectory(_) => {}
            Kind::Opaque { head, tail } => {
                if head.len() < PREVIEW {
                    let n = (PREVIEW - head.len()).min(piece.len());
                    head.extend_from_slice(&piece[..n]);
                }
                if let Some(t) = tail {
                    t.feed(piece);
                }
            }
        }
        Flow::More
    }

    /// The verdict once the stream has ended (`decode` says how decoding went). An archive the
    /// streaming check could not vouch for is walked again from `stored`.
    pub(crate) fn conclude(
        self,
        decode: Result<Decoded, DecodeError>,
        stored: Stored<'_>,
        h: &ChunkHeader,
        opts: &FoldAnalyzeOptions,
    ) -> Result<PayloadVerdict, Error> {
        let mut v = PayloadVerdict {
            decode,
            parsed: false,
            findings: Vec::new(),
            counted: Vec::new(),
            content: FoldContent::None,
            decoded_sha256: self.decoded_sha.map(|s| hex(&s.finalize())),
            payload: self.keep,
            directory: None,
            tapped: None,
        };
        if v.decode.is_err() {
            v.payload = None;
            return Ok(v);
        }
        match self.kind {
            Kind::Json { check, keep } => match check.finish() {
                Ok(()) => {
                    v.parsed = true;
                    v.content = match keep.map(|k| pjson::parse(&k, JSON_MAX_DEPTH)) {
                        Some(Ok(value)) => FoldContent::Json(value),
                        _ => FoldContent::JsonNotKept(h.uncomp_len),
                    };
                }
                Err(err) => v.findings.push(PayloadFinding {
                    severity: Severity::Error,
                    code: "fold.payload.bad_json".into(),
                    message: format!("JSON payload invalid at decoded byte {}: {}", err.offset, err.message),
                }),
            },
            Kind::NpzStream(check) => {
                let tapped = check.tapped();
                let arrays = match (*check).conclude() {
                    StreamVerdict::Vouched(arrays, dir) => {
                        // Vouched: the local headers are the directory's members, in order.
                        v.tapped = tapped;
                        v.directory = Some(Arc::new(dir));
                        Ok(arrays)
                    }
                    StreamVerdict::Directory(Ok(dir)) => match within_room(dir, self.npz_room, &opts.limits) {
                        Ok(dir) => {
                            let dir = Arc::new(dir);
                            v.directory = Some(Arc::clone(&dir));
                            walk_again(Ok(dir), stored, h, opts)?
                        }
                        Err(e) => Err(e),
                    },
                    StreamVerdict::Directory(Err(e)) => Err(e),
                };
                npz_verdict(arrays, &mut v);
            }
            Kind::NpzWalk(walk, dir) => {
                v.directory = Some(dir);
                npz_verdict(walk.finish(), &mut v)
            }
            Kind::NpzNoDirectory(e) => npz_verdict(Err(e), &mut v),
            Kind::Opaque { head, tail } => {
                v.parsed = true;
                let names = tail.filter(|_| head.starts_with(b"PK")).and_then(|t| {
                    npz::directory_in(&t.bytes, t.base, &opts.limits)
                        .ok()
                        .map(|d| d.members.into_iter().map(|m| m.name).collect::<Vec<_>>())
                });
                v.content = match names {
                    Some(n) => FoldContent::Zip(n),
                    None => FoldContent::Opaque(head),
                };
            }
        }
        Ok(v)
    }
}

/// The second pass over an archive the streaming check could not follow: decode it again and
/// walk it against the directory found at its end.
fn walk_again(
    dir: rasterpack_common::Result<Arc<Directory>>,
    stored: Stored<'_>,
    h: &ChunkHeader,
    opts: &FoldAnalyzeOptions,
) -> Result<rasterpack_common::Result<Vec<NpzArrayInfo>>, Error> {
    let dir = match dir {
        Ok(d) => d,
        Err(e) => return Ok(Err(e)),
    };
    let mut walk: CdWalk = CdWalk::new(dir, h.uncomp_len, &opts.limits, WalkMode::Verify, None);
    let scanned = scan(stored, h.flags, h.uncomp_len, false, &|| opts.poll(), &mut |p| {
        walk.feed(p);
        Flow::More
    })?;
    if let Err((_, msg)) = scanned.decode {
        return Err(Error::invalid_at("fold.payload.decompress_failed", None, msg));
    }
    Ok(walk.finish())
}

/// Findings and content from the archive's verdict.
fn npz_verdict(arrays: rasterpack_common::Result<Vec<NpzArrayInfo>>, v: &mut PayloadVerdict) {
    match arrays {
        Ok(arrays) => {
            v.parsed = true;
            // Per code: how many members had it (the first ones are listed), and severity.
            let mut seen: Vec<(&'static str, Severity, usize)> = Vec::new();
            for a in &arrays {
                let (severity, code) = if let Some(d) = &a.damaged {
                    (Severity::Error, d.code)
                } else if a.unsupported.is_some() {
                    let code = if a.zip_method_unsupported {
                        "fold.payload.npz_unsupported"
                    } else {
                        "fold.payload.npz_dtype_unsupported"
                    };
                    (Severity::Info, code)
                } else {
                    continue;
                };
                let n = match seen.iter_mut().find(|s| s.0 == code) {
                    Some(s) => {
                        s.2 += 1;
                        s.2
                    }
                    None => {
                        seen.push((code, severity, 1));
                        1
                    }
                };
                if n > LISTED_PER_CODE {
                    // A report lists this many of a code; the rest are only counted.
                    continue;
                }
                let message = match (&a.damaged, &a.unsupported) {
                    (Some(d), _) => format!("NPZ0 member of array {:?} is not readable: {}", a.name, d.message),
                    (None, Some(why)) => format!("array {:?} cannot be decoded by rasterpack: {why}", a.name),
                    (None, None) => continue,
                };
                v.findings.push(PayloadFinding {
                    severity,
                    code: code.into(),
                    message,
                });
            }
            // Past LISTED_PER_CODE a member's finding is counted, never built: a directory may
            // list 350 000 members, and a finding each held ~5 KB through the report (issue 17).
            v.counted = seen
                .into_iter()
                .filter(|s| s.2 > LISTED_PER_CODE)
                .map(|(code, severity, n)| (code, severity, (n - LISTED_PER_CODE) as u64))
                .collect();
            v.content = FoldContent::Npz(arrays);
        }
        Err(err) if err.kind == ErrorKind::Unsupported => v.findings.push(PayloadFinding {
            severity: Severity::Info,
            code: "fold.payload.npz_unsupported".into(),
            message: format!(
                "NPZ0 archive uses a feature rasterpack does not implement: {}",
                err.message
            ),
        }),
        Err(err) if err.kind == ErrorKind::LimitExceeded => v.findings.push(PayloadFinding {
            severity: Severity::Error,
            code: err.code.to_string(),
            message: format!("NPZ0 archive refused: {}", err.message),
        }),
        Err(err) => v.findings.push(PayloadFinding {
            severity: Severity::Error,
            code: "fold.payload.bad_npz".into(),
            message: format!("NPZ0 payload is not a readable .npz archive: {}", err.message),
        }),
    }
}
