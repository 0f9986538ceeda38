//! The body, streamed: zstd frames are read through a small buffer (positioned reads, or the
//! bytes already in memory), decoded with libzstd's streaming decoder into one reused window,
//! and each full window is handed to a consumer (a sink, a statistics pass, or nothing when only
//! validating). Memory is the window plus libzstd's frame window, whatever the body's size.
//!
//! Every check of the whole-body decoder runs here too: the frame structure, each frame's
//! declared content size against the room left (refused before decompressing), the content
//! checksum (libzstd verifies it as the frame ends), the decoded length against the header's
//! `product(shape) * size(dtype)` (never decoding past it), and nothing after the last frame.

use rasterpack_common::{Error, ErrorKind, Input, Result};

use crate::frame::{parse_frame_header, walk_blocks, FrameHeader, NotAFrame, ZstdFrameHeader, MAX_FRAME_HEADER_LEN};

/// Bytes read from a file at once.
pub const READ_PIECE: usize = 1 << 20;
/// Decoded bytes handed to a consumer at once (a multiple of every element size).
pub const WINDOW_LEN: usize = 1 << 20;

/// Reads the body sequentially through a buffer, with look-ahead for frame headers: positioned
/// reads of [`READ_PIECE`] bytes from a file, or slices of an input already in memory.
pub struct BodyReader<'a> {
    mem: Option<&'a [u8]>,
    input: &'a Input,
    buf: Vec<u8>,
    /// Absolute offset of `buf[0]`.
    buf_at: u64,
    /// Unread bytes are `buf[lo..hi]`.
    lo: usize,
    hi: usize,
    /// Absolute read position when the input is in memory.
    mem_pos: u64,
    end: u64,
}

impl<'a> BodyReader<'a> {
    /// A reader of `input` from absolute offset `start` to its end.
    pub fn new(input: &'a Input, start: u64) -> BodyReader<'a> {
        BodyReader {
            mem: input.as_bytes(),
            input,
            buf: Vec::new(),
            buf_at: start,
            lo: 0,
            hi: 0,
            mem_pos: start,
            end: input.len(),
        }
    }

    /// Absolute position of the next unread byte.
    pub fn pos(&self) -> u64 {
        match self.mem {
            Some(_) => self.mem_pos,
            None => self.buf_at + self.lo as u64,
        }
    }

    /// Bytes left in the input.
    pub fn remaining(&self) -> u64 {
        self.end.saturating_sub(self.pos())
    }

    /// The next unread bytes (empty only at the end of the input).
    pub fn fill(&mut self) -> Result<&[u8]> {
        if let Some(mem) = self.mem {
            return Ok(mem.get(self.mem_pos as usize..).unwrap_or(&[]));
        }
        if self.lo == self.hi {
            self.refill(0)?;
        }
        Ok(&self.buf[self.lo..self.hi])
    }

    /// Up to `n` unread bytes (fewer only where the input ends), without consuming them.
    pub fn peek(&mut self, n: usize) -> Result<&[u8]> {
        if let Some(mem) = self.mem {
            let rest = mem.get(self.mem_pos as usize..).unwrap_or(&[]);
            return Ok(&rest[..n.min(rest.len())]);
        }
        if self.hi - self.lo < n && ((self.hi - self.lo) as u64) < self.remaining() {
            self.refill(n)?;
        }
        let have = (self.hi - self.lo).min(n);
        Ok(&self.buf[self.lo..self.lo + have])
    }

    /// Move the unread bytes to the front of the buffer and read more after them: at least
    /// `want` bytes in all where the input has them.
    fn refill(&mut self, want: usize) -> Result<()> {
        let pos = self.pos();
        let keep = self.hi - self.lo;
        let cap = READ_PIECE.max(want);
        if self.buf.len() < cap {
            self.buf.resize(cap, 0);
        }
        self.buf.copy_within(self.lo..self.hi, 0);
        self.buf_at = pos;
        self.lo = 0;
        self.hi = keep;
        let avail = self.end.saturating_sub(pos + keep as u64);
        let n = (cap - keep).min(usize::try_from(avail).unwrap_or(usize::MAX));
        self.input
            .read_at(pos + keep as u64, &mut self.buf[keep..keep + n], "VOLP body")?;
        self.hi = keep + n;
        Ok(())
    }

    /// Mark `n` bytes (at most those [`BodyReader::fill`] or [`BodyReader::peek`] returned) read.
    pub fn consume(&mut self, n: usize) {
        match self.mem {
            Some(_) => self.mem_pos += n as u64,
            None => self.lo = (self.lo + n).min(self.hi),
        }
    }

    /// Skip `n` bytes without reading them (a truncation error past the end).
    pub fn skip(&mut self, n: u64) -> Result<()> {
        if n > self.remaining() {
            return Err(Error::truncated("VOLP body", self.pos(), n, self.remaining()));
        }
        match self.mem {
            Some(_) => self.mem_pos += n,
            None => {
                let buffered = (self.hi - self.lo) as u64;
                if n <= buffered {
                    self.lo += n as usize;
                } else {
                    self.buf_at = self.pos() + n;
                    self.lo = 0;
                    self.hi = 0;
                }
            }
        }
        Ok(())
    }
}

/// What the body's frames are, as far as they were read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BodyInfo {
    /// zstd data frames.
    pub zstd_frames: u32,
    /// Skippable frames (ignored).
    pub skippable_frames: u32,
    /// zstd frames carrying a content checksum.
    pub checksummed_frames: u32,
    /// Sum of the declared content sizes, when every zstd frame declares one.
    pub declared_len: Option<u64>,
}

impl BodyInfo {
    fn count(&mut self, h: &ZstdFrameHeader) {
        self.zstd_frames += 1;
        self.checksummed_frames += u32::from(h.checksum);
        self.declared_len = match (self.zstd_frames, self.declared_len, h.content_size) {
            (1, _, Some(cs)) => Some(cs),
            (_, Some(sum), Some(cs)) => Some(sum.saturating_add(cs)),
            _ => None,
        };
    }
}

/// The frame at the reader's position, or `None` at the end of the body. `any_frame` says
/// whether a frame came before (junk after frames is "trailing bytes", junk instead of the
/// first frame means the body is not zstd).
fn next_frame(reader: &mut BodyReader<'_>, any_frame: bool) -> Result<Option<FrameHeader>> {
    if reader.remaining() == 0 {
        return Ok(None);
    }
    let at = reader.pos();
    let left = reader.remaining();
    let head = reader.peek(MAX_FRAME_HEADER_LEN)?;
    match parse_frame_header(head) {
        Ok(h) => Ok(Some(h)),
        Err(NotAFrame::Magic(what)) if any_frame => Err(Error::invalid(
            "volp.body.trailing_bytes",
            at,
            format!("{left} byte(s) after the last zstd frame: {what}"),
        )),
        Err(NotAFrame::Magic(what)) => Err(Error::invalid(
            "volp.body.decompress",
            at,
            format!("the body is not zstd data: {what}"),
        )),
        Err(NotAFrame::Header(what)) => Err(Error::invalid("volp.body.decompress", at, what)),
    }
}

/// Skip the skippable frame at the reader's position.
fn skip_skippable(reader: &mut BodyReader<'_>, data_len: u32) -> Result<()> {
    let at = reader.pos();
    let total = 8 + u64::from(data_len);
    if total > reader.remaining() {
        return Err(Error::invalid(
            "volp.body.decompress",
            at,
            format!(
                "skippable frame declares {data_len} bytes, only {} remain",
                reader.remaining().saturating_sub(8)
            ),
        ));
    }
    reader.skip(total)
}

fn empty_body(body_offset: u64) -> Error {
    Error::invalid(
        "volp.body.empty",
        body_offset,
        "the body is empty: a zstd frame is required",
    )
}

fn only_skippable(body_offset: u64) -> Error {
    Error::invalid(
        "volp.body.decompress",
        body_offset,
        "the body holds only skippable frames, no zstd data",
    )
}

/// Walk every frame of the body without decompressing: its structure (each frame complete,
/// nothing after the last) and what it declares. With `expected`, the frames must be able to
/// produce that many bytes (declared sizes, or block bounds for frames without one).
pub fn walk_body(input: &Input, body_offset: u64, expected: Option<u64>) -> Result<BodyInfo> {
    let mut reader = BodyReader::new(input, body_offset);
    if reader.remaining() == 0 {
        return Err(empty_body(body_offset));
    }
    let mut info = BodyInfo::default();
    let mut bound = 0u64;
    while let Some(frame) = next_frame(&mut reader, info.zstd_frames + info.skippable_frames > 0)? {
        match frame {
            FrameHeader::Skippable { data_len } => {
                skip_skippable(&mut reader, data_len)?;
                info.skippable_frames += 1;
            }
            FrameHeader::Zstd(h) => {
                info.count(&h);
                let walk = walk_blocks(&mut reader, &h)?;
                bound = bound.saturating_add(h.content_size.unwrap_or(walk.max_output));
            }
        }
    }
    if info.zstd_frames == 0 {
        return Err(only_skippable(body_offset));
    }
    if let Some(expected) = expected {
        if bound < expected {
            return Err(cannot_produce(body_offset, bound, expected));
        }
    }
    Ok(info)
}

fn cannot_produce(body_offset: u64, bound: u64, needed: u64) -> Error {
    Error::invalid(
        "volp.body.size_mismatch",
        body_offset,
        format!("body can decode to at most {bound} bytes, shape and dtype require {needed}"),
    )
}

/// Check, before anything is decoded or allocated for the output, that the frames can produce
/// the first `needed` bytes at all: declared content sizes, or block bounds for frames without
/// one (RFC 8878: raw and RLE blocks state their size, a compressed block yields at most one
/// block maximum). Stops as soon as the bound reaches `needed`, so a frame that declares its
/// size costs one header read. A few bytes of body never make a reader allocate 256 MiB.
pub fn check_can_produce(input: &Input, body_offset: u64, needed: u64) -> Result<()> {
    let mut reader = BodyReader::new(input, body_offset);
    if reader.remaining() == 0 {
        return Err(empty_body(body_offset));
    }
    let mut bound = 0u64;
    let mut frames = 0u32;
    let mut zstd_frames = 0u32;
    while bound < needed {
        let Some(frame) = next_frame(&mut reader, frames > 0)? else {
            break;
        };
        frames += 1;
        match frame {
            FrameHeader::Skippable { data_len } => skip_skippable(&mut reader, data_len)?,
            FrameHeader::Zstd(h) => {
                zstd_frames += 1;
                if let Some(cs) = h.content_size {
                    bound = bound.saturating_add(cs);
                    if bound >= needed {
                        break;
                    }
                }
                let walk = walk_blocks(&mut reader, &h)?;
                if h.content_size.is_none() {
                    bound = bound.saturating_add(walk.max_output);
                }
            }
        }
    }
    if frames > 0 && zstd_frames == 0 && bound < needed {
        return Err(only_skippable(body_offset));
    }
    if bound < needed {
        return Err(cannot_produce(body_offset, bound, needed));
    }
    Ok(())
}

/// Which decoded bytes a decode needs: all of `0..expected` (a full decode, every check), or,
/// for a region, only `skip_before..stop`: decoding stops at `stop`, and frames that end before
/// `skip_before` are skipped when they declare their size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodePlan {
    /// `product(shape) * size(dtype)`.
    pub expected: u64,
    /// Frames with a declared size that end at or before this byte are not decoded.
    pub skip_before: u64,
    /// Decoding stops once this many bytes are decoded (`expected` for a full decode).
    pub stop: u64,
}

impl DecodePlan {
    /// Every byte, every check.
    pub fn full(expected: u64) -> DecodePlan {
        DecodePlan {
            expected,
            skip_before: 0,
            stop: expected,
        }
    }

    /// Every byte is needed (a region that starts at the first value and ends at the last is the
    /// whole array): then every check runs to the end of the body.
    fn is_full(&self) -> bool {
        self.skip_before == 0 && self.stop >= self.expected
    }
}

/// Decoded bytes at an offset of the C-order array: `(offset, bytes)`. Offsets ascend, each
/// window starts where the previous ended or later (after skipped frames), and every window
/// but the last is [`WINDOW_LEN`] bytes starting at a multiple of 8.
pub type Consumer<'c> = dyn FnMut(u64, &[u8]) -> Result<()> + 'c;

/// Decode the body from `body_offset` following `plan`, handing decoded windows to `consume`
/// and the input position to `progress` after each window.
pub fn decode_body(
    input: &Input,
    body_offset: u64,
    plan: DecodePlan,
    consume: &mut Consumer<'_>,
    progress: &mut dyn FnMut(u64),
) -> Result<BodyInfo> {
    let mut reader = BodyReader::new(input, body_offset);
    if reader.remaining() == 0 {
        return Err(empty_body(body_offset));
    }
    let mut d = Decoder::new(plan)?;
    let mut info = BodyInfo::default();
    while !d.done() {
        let any = info.zstd_frames + info.skippable_frames > 0;
        let Some(frame) = next_frame(&mut reader, any)? else {
            break;
        };
        match frame {
            FrameHeader::Skippable { data_len } => {
                skip_skippable(&mut reader, data_len)?;
                info.skippable_frames += 1;
            }
            FrameHeader::Zstd(h) => {
                info.count(&h);
                d.frame(&mut reader, &h, consume, progress)?;
            }
        }
    }
    if info.zstd_frames == 0 {
        return Err(only_skippable(body_offset));
    }
    d.finish(body_offset, consume)?;
    progress(reader.pos());
    Ok(info)
}

/// The streaming decoder's state: libzstd's context and the reused output window.
struct Decoder {
    dctx: zstd::zstd_safe::DCtx<'static>,
    plan: DecodePlan,
    window: Vec<u8>,
    /// Array offset of `window[0]`.
    base: u64,
    /// Bytes of the window in use.
    filled: usize,
    /// Array offset of the next decoded byte.
    produced: u64,
}

impl Decoder {
    fn new(plan: DecodePlan) -> Result<Decoder> {
        let mut dctx = zstd::zstd_safe::DCtx::try_create().ok_or_else(|| {
            Error::new(
                ErrorKind::Io,
                "volp.zstd_context",
                None,
                "could not create a zstd context",
            )
        })?;
        // Accept every window libzstd can decode: memory follows the frame's real window
        // (pages are touched only as output is produced, which stops at the expected size).
        dctx.set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(crate::frame::MAX_WINDOW_LOG))
            .map_err(|code| zstd_error(0, code))?;
        let len = (WINDOW_LEN as u64).min(plan.stop.max(8).next_multiple_of(8)) as usize;
        Ok(Decoder {
            dctx,
            plan,
            window: vec![0u8; len],
            base: 0,
            filled: 0,
            produced: 0,
        })
    }

    /// A region read has everything it needs.
    fn done(&self) -> bool {
        !self.plan.is_full() && self.produced >= self.plan.stop
    }

    /// Decode (or, wholly before the region and with a declared size, skip) one zstd frame.
    fn frame(
        &mut self,
        reader: &mut BodyReader<'_>,
        h: &ZstdFrameHeader,
        consume: &mut Consumer<'_>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<()> {
        let at = reader.pos();
        let expected = self.plan.expected;
        let room = expected - self.produced;
        if let Some(cs) = h.content_size {
            if cs > room {
                return Err(Error::invalid(
                    "volp.body.size_mismatch",
                    at,
                    format!(
                        "zstd frame declares {cs} decoded bytes, more than the {room} left of the expected {expected} \
                         (refused without decompressing)"
                    ),
                ));
            }
            if !self.plan.is_full() && self.produced + cs <= self.plan.skip_before {
                walk_blocks(reader, h)?;
                self.skip_output(cs);
                return Ok(());
            }
        }
        let mut frame_out = 0u64;
        let mut stalls = 0u32;
        loop {
            if self.filled == self.window.len() {
                self.flush(consume)?;
                progress(reader.pos());
            }
            let input = reader.fill()?;
            if input.is_empty() {
                return Err(Error::invalid("volp.body.decompress", at, "zstd frame is truncated"));
            }
            // One byte of room beyond the expected size shows a frame that decodes past it.
            let cap =
                (self.window.len() - self.filled).min(usize::try_from(room - frame_out + 1).unwrap_or(usize::MAX));
            let mut out = zstd::zstd_safe::OutBuffer::around(&mut self.window[self.filled..self.filled + cap]);
            let mut inb = zstd::zstd_safe::InBuffer::around(input);
            let res = self.dctx.decompress_stream(&mut out, &mut inb);
            let (n_in, n_out) = (inb.pos(), out.pos());
            reader.consume(n_in);
            self.filled += n_out;
            self.produced += n_out as u64;
            frame_out += n_out as u64;
            if frame_out > room {
                return Err(Error::invalid(
                    "volp.body.size_mismatch",
                    at,
                    format!("zstd frame decodes past the expected {expected} bytes (stopped at the limit)"),
                ));
            }
            if let Some(cs) = h.content_size.filter(|&cs| frame_out > cs) {
                return Err(declared_size_broken(at, cs, "more"));
            }
            match res {
                Err(code) => return Err(zstd_error(at, code)),
                Ok(0) => break,
                Ok(_) if self.done() => return Ok(()),
                Ok(_) => {}
            }
            stalls = if n_in == 0 && n_out == 0 { stalls + 1 } else { 0 };
            if stalls > 2 {
                return Err(Error::invalid("volp.body.decompress", at, "zstd made no progress"));
            }
        }
        if let Some(cs) = h.content_size.filter(|&cs| frame_out != cs) {
            return Err(declared_size_broken(at, cs, "fewer"));
        }
        Ok(())
    }

    /// A skipped frame's output: nothing before it is needed either, so the window restarts at
    /// the element-aligned offset below the frame's end (the bytes between are never handed on).
    fn skip_output(&mut self, len: u64) {
        self.produced += len;
        self.base = self.produced / 8 * 8;
        self.filled = (self.produced - self.base) as usize;
    }

    /// Hand the window (clipped to the plan's stop) to the consumer.
    fn flush(&mut self, consume: &mut Consumer<'_>) -> Result<()> {
        let end = (self.base + self.filled as u64).min(self.plan.stop);
        if end > self.base {
            consume(self.base, &self.window[..(end - self.base) as usize])?;
        }
        self.base += self.filled as u64;
        self.filled = 0;
        Ok(())
    }

    /// After the last frame: the decoded length is exact (full decodes), the rest is handed on.
    fn finish(&mut self, body_offset: u64, consume: &mut Consumer<'_>) -> Result<()> {
        if self.produced < self.plan.stop || (self.plan.is_full() && self.produced != self.plan.expected) {
            return Err(Error::invalid(
                "volp.body.size_mismatch",
                body_offset,
                format!(
                    "body decodes to {} bytes, shape and dtype require {}",
                    self.produced, self.plan.expected
                ),
            ));
        }
        self.flush(consume)
    }
}

fn declared_size_broken(at: u64, cs: u64, what: &str) -> Error {
    Error::invalid(
        "volp.body.decompress",
        at,
        format!("zstd frame decodes to {what} bytes than the {cs} its header declares (corrupt frame)"),
    )
}

fn zstd_error(at: u64, code: usize) -> Error {
    Error::invalid(
        "volp.body.decompress",
        at,
        format!("zstd decompression failed: {}", zstd::zstd_safe::get_error_name(code)),
    )
}
