//! One member's content as it streams by: inflated through a small buffer (deflate) or taken
//! as stored, CRC-32 and length checked at the end, the `.npy` header gathered from the first
//! bytes.

use miniz_oxide::inflate::stream::{inflate, InflateState};
use miniz_oxide::{DataFormat, MZError, MZFlush, MZStatus};
use rasterpack_common::npy::{self, NpyHeader};
use rasterpack_common::Error;

use super::zip::Member;
use crate::scan::Flow;

/// Inflate output buffer.
const INFLATE_OUT: usize = 64 << 10;
/// Longest `.npy` header read from a member.
pub(crate) const NPY_HEADER_MAX: usize = 1 << 20;

/// The content of one member, fed its stored bytes in order.
pub(crate) struct MemberData {
    name: String,
    declared: u64,
    inflate: Option<Box<InflateState>>,
    out: Vec<u8>,
    crc: crc32fast::Hasher,
    /// Content bytes produced so far.
    pub produced: u64,
    /// Stored members always; deflate members once the stream has ended.
    complete: bool,
    error: Option<String>,
}

impl MemberData {
    /// Stored (method 0) or deflate (method 8) content of `m`.
    pub(crate) fn new(m: &Member) -> MemberData {
        MemberData {
            name: m.name.clone(),
            declared: m.uncomp_size,
            inflate: (m.method == 8).then(|| InflateState::new_boxed(DataFormat::Raw)),
            out: Vec::new(),
            crc: crc32fast::Hasher::new(),
            produced: 0,
            complete: m.method == 0,
            error: None,
        }
    }

    /// The next stored bytes; content goes to `content(offset in the content, bytes)`. Stops
    /// (returns [`Flow::Stop`]) when `content` does or when the member is found damaged.
    pub(crate) fn feed(&mut self, mut stored: &[u8], content: &mut dyn FnMut(u64, &[u8]) -> Flow) -> Flow {
        if self.error.is_some() {
            return Flow::Stop;
        }
        let Some(st) = self.inflate.as_mut() else {
            let at = self.produced;
            self.crc.update(stored);
            self.produced += stored.len() as u64;
            return content(at, stored);
        };
        if self.out.is_empty() {
            self.out = vec![0u8; INFLATE_OUT];
        }
        // Bytes after the end of the deflate stream are ignored, as Python's zipfile does.
        while !self.complete {
            let r = inflate(st, stored, &mut self.out, MZFlush::None);
            stored = &stored[r.bytes_consumed..];
            let got = &self.out[..r.bytes_written];
            let at = self.produced;
            self.crc.update(got);
            self.produced += got.len() as u64;
            if self.produced > self.declared {
                self.error = Some(format!(
                    "member {:?}: inflates to more than the {} bytes declared",
                    self.name, self.declared
                ));
                return Flow::Stop;
            }
            let flow = if got.is_empty() { Flow::More } else { content(at, got) };
            match r.status {
                Ok(MZStatus::StreamEnd) => self.complete = true,
                Ok(_) | Err(MZError::Buf) => {
                    if r.bytes_consumed == 0 && r.bytes_written == 0 {
                        break;
                    }
                }
                Err(e) => {
                    self.error = Some(format!("member {:?}: deflate error {e:?}", self.name));
                    return Flow::Stop;
                }
            }
            if flow == Flow::Stop {
                return Flow::Stop;
            }
            if stored.is_empty() && r.bytes_written < self.out.len() {
                break;
            }
        }
        Flow::More
    }

    /// The verdict once every stored byte was fed: `Err` with a message when the member is
    /// damaged (deflate error, length, CRC-32).
    pub(crate) fn finish(&mut self, crc32: u32) -> Result<(), String> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if !self.complete {
            return Err(format!("member {:?}: the deflate stream ends early", self.name));
        }
        if self.produced != self.declared {
            return Err(format!(
                "member {:?}: inflates to {} bytes, {} declared",
                self.name, self.produced, self.declared
            ));
        }
        let crc = std::mem::replace(&mut self.crc, crc32fast::Hasher::new()).finalize();
        if crc != crc32 {
            return Err(format!("member {:?}: CRC-32 mismatch", self.name));
        }
        Ok(())
    }

    /// Whether the member's method is one rasterpack decodes.
    pub(crate) fn method_supported(method: u16) -> bool {
        method == 0 || method == 8
    }
}

/// The `.npy` header gathered from a member's first content bytes.
#[derive(Default)]
pub(crate) struct NpyPrefix {
    bytes: Vec<u8>,
    /// Parsed (or failed) once enough bytes are in.
    pub result: Option<Result<NpyHeader, Error>>,
}

impl NpyPrefix {
    /// Content bytes at content offset `at`; returns how many of `b` belong to the header
    /// (the rest is array data, once the header is parsed).
    pub(crate) fn feed(&mut self, at: u64, b: &[u8]) -> usize {
        if self.result.is_some() || at != self.bytes.len() as u64 {
            return 0;
        }
        let mut used = 0;
        while self.result.is_none() {
            let need = self.needed();
            if self.bytes.len() >= need {
                self.settle();
                break;
            }
            let take = (need - self.bytes.len()).min(b.len() - used);
            if take == 0 {
                break;
            }
            self.bytes.extend_from_slice(&b[used..used + take]);
            used += take;
        }
        used
    }

    /// Bytes the header needs: 12 until its length is known, then the whole header.
    fn needed(&self) -> usize {
        let b = &self.bytes;
        if b.len() < 12 {
            return 12;
        }
        let len = match (&b[..6] == npy::MAGIC, b[6]) {
            (true, 1) => u16::from_le_bytes([b[8], b[9]]) as usize + 10,
            (true, 2 | 3) => u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize + 12,
            // Not a .npy header: the parser says why from what is in.
            _ => return 12,
        };
        len.clamp(12, NPY_HEADER_MAX + 1)
    }

    fn settle(&mut self) {
        if self.bytes.len() > NPY_HEADER_MAX {
            self.result = Some(Err(Error::invalid(
                "npy.header",
                0,
                format!("the .npy header is longer than {NPY_HEADER_MAX} bytes"),
            )));
        } else {
            self.result = Some(npy::parse_header(&self.bytes));
        }
        self.bytes = Vec::new();
    }

    /// The verdict when the content has ended (a content shorter than its header is an error).
    pub(crate) fn finish(&mut self) -> Result<NpyHeader, Error> {
        if self.result.is_none() {
            self.result = Some(npy::parse_header(&self.bytes));
        }
        self.result
            .clone()
            .unwrap_or_else(|| Err(Error::usage("internal: no .npy header")))
    }
}
