//! zstd frames as RFC 8878 lays them out, read without decompressing: frame headers (declared
//! content size, window, checksum flag), skippable frames, and the walk over block headers that
//! finds where a frame ends and how much it can produce at most.
//!
//! libzstd is not asked for the frame header because it reads a content-size field of
//! `2^64 - 1` as "unknown" (its own sentinel), while RFC 8878 gives that field no special value:
//! VOLP reads every present content-size field as the size the frame declares (see
//! `docs/formats/volp.md`, "Declared frame content sizes").

use rasterpack_common::{Error, ErrorKind, Result};

use crate::body::BodyReader;
use crate::raw::{SKIPPABLE_MAGIC_BASE, SKIPPABLE_MAGIC_MASK, ZSTD_FRAME_MAGIC};

/// Longest zstd frame header: magic 4, descriptor 1, window 1, dictionary id 4, content size 8.
pub const MAX_FRAME_HEADER_LEN: usize = 18;
/// A block never produces more than this (RFC 8878 3.1.1.2.3, `Block_Maximum_Size`).
pub const MAX_BLOCK_LEN: u64 = 128 << 10;
/// Largest window libzstd decodes on 64-bit hosts (`ZSTD_WINDOWLOG_MAX_64`); larger windows are
/// refused by every decoder built on it.
pub const MAX_WINDOW_LOG: u32 = 31;

/// The header of a zstd frame (RFC 8878 section 3.1.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZstdFrameHeader {
    /// Bytes from the magic to the first block header.
    pub header_len: usize,
    /// The `Frame_Content_Size` field when present: the exact decoded size the frame declares.
    pub content_size: Option<u64>,
    /// `Window_Size` (the content size for single-segment frames).
    pub window_size: u64,
    /// Whether a 4-byte XXH64 content checksum follows the last block.
    pub checksum: bool,
}

impl ZstdFrameHeader {
    /// The most one block of this frame may produce.
    pub fn block_max(&self) -> u64 {
        self.window_size.min(MAX_BLOCK_LEN)
    }
}

/// What starts at a frame position of the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameHeader {
    /// A zstd data frame.
    Zstd(ZstdFrameHeader),
    /// A skippable frame (magic `0x184D2A5?`): 8 header bytes then `data_len` bytes of user data.
    Skippable {
        /// Length of the user data after the 8-byte header.
        data_len: u32,
    },
}

/// Why the bytes at a frame position are not a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAFrame {
    /// Fewer than 4 bytes, or a magic that is neither a zstd nor a skippable frame.
    Magic(String),
    /// A frame magic whose header is broken or truncated.
    Header(String),
}

/// Parse the frame header at the start of `bytes` (up to [`MAX_FRAME_HEADER_LEN`] bytes, fewer
/// only where the input ends).
pub fn parse_frame_header(bytes: &[u8]) -> std::result::Result<FrameHeader, NotAFrame> {
    let Some(magic) = bytes.get(..4) else {
        return Err(NotAFrame::Magic("too short for a frame magic".into()));
    };
    let magic = u32::from_le_bytes([magic[0], magic[1], magic[2], magic[3]]);
    if magic & SKIPPABLE_MAGIC_MASK == SKIPPABLE_MAGIC_BASE {
        let len = bytes
            .get(4..8)
            .ok_or_else(|| NotAFrame::Header("skippable frame header is truncated".into()))?;
        return Ok(FrameHeader::Skippable {
            data_len: u32::from_le_bytes([len[0], len[1], len[2], len[3]]),
        });
    }
    if magic != ZSTD_FRAME_MAGIC {
        return Err(NotAFrame::Magic(format!("magic 0x{magic:08x} is not a zstd frame")));
    }
    let truncated = || NotAFrame::Header("zstd frame header is truncated".into());
    let descriptor = *bytes.get(4).ok_or_else(truncated)?;
    let fcs_flag = descriptor >> 6;
    let single_segment = descriptor & 0x20 != 0;
    if descriptor & 0x08 != 0 {
        return Err(NotAFrame::Header(
            "zstd frame header is corrupt: the reserved descriptor bit is set".into(),
        ));
    }
    let checksum = descriptor & 0x04 != 0;
    let dict_len = [0usize, 1, 2, 4][usize::from(descriptor & 3)];
    let fcs_len = match fcs_flag {
        0 => usize::from(single_segment),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let mut pos = 5;
    let mut window_size = 0u64;
    if !single_segment {
        let wd = *bytes.get(pos).ok_or_else(truncated)?;
        let log = 10 + u32::from(wd >> 3);
        if log > MAX_WINDOW_LOG {
            return Err(NotAFrame::Header(format!(
                "zstd frame asks for a window of 2^{log} bytes, above the 2^{MAX_WINDOW_LOG} decoders accept"
            )));
        }
        let base = 1u64 << log;
        window_size = base + (base / 8) * u64::from(wd & 7);
        pos += 1;
    }
    let dict = bytes.get(pos..pos + dict_len).ok_or_else(truncated)?;
    let dictionary_id = dict.iter().rev().fold(0u32, |acc, &b| (acc << 8) | u32::from(b));
    if dictionary_id != 0 {
        return Err(NotAFrame::Header(format!(
            "zstd frame needs dictionary {dictionary_id}; VOLP bodies are plain zstd"
        )));
    }
    pos += dict_len;
    let fcs = bytes.get(pos..pos + fcs_len).ok_or_else(truncated)?;
    let field = fcs.iter().rev().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    let content_size = match fcs_len {
        0 => None,
        2 => Some(field + 256),
        _ => Some(field),
    };
    pos += fcs_len;
    if single_segment {
        window_size = content_size.unwrap_or(0);
    }
    Ok(FrameHeader::Zstd(ZstdFrameHeader {
        header_len: pos,
        content_size,
        window_size,
        checksum,
    }))
}

/// What walking a frame's blocks found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockWalk {
    /// Bytes of the whole frame, header and checksum included.
    pub frame_len: u64,
    /// The most the frame can decode to: raw and RLE blocks state their size, a compressed block
    /// gives at most one block's maximum.
    pub max_output: u64,
}

/// Walk the blocks of the zstd frame whose header `h` starts at the reader's position, leaving
/// the reader after the frame. Nothing is decompressed; block headers are checked as libzstd
/// checks them (a reserved block type, a block above the block maximum, a frame cut short).
pub fn walk_blocks(reader: &mut BodyReader<'_>, h: &ZstdFrameHeader) -> Result<BlockWalk> {
    let start = reader.pos();
    reader.skip(h.header_len as u64)?;
    let block_max = h.block_max();
    let mut max_output = 0u64;
    loop {
        let at = reader.pos();
        let head = reader.peek(3)?;
        if head.len() < 3 {
            return Err(frame_error(start, "zstd frame is truncated inside a block header"));
        }
        let bits = u32::from_le_bytes([head[0], head[1], head[2], 0]);
        let (last, kind, size) = (bits & 1 == 1, (bits >> 1) & 3, u64::from(bits >> 3));
        reader.consume(3);
        let (consumed, produced) = match kind {
            0 => (size, size),
            1 => (1, size),
            2 => (size, block_max),
            _ => return Err(frame_error(at, "zstd block type 3 is reserved")),
        };
        if size > block_max {
            return Err(frame_error(
                at,
                format!("zstd block of {size} bytes is larger than the frame's block maximum of {block_max}"),
            ));
        }
        if consumed > reader.remaining() {
            return Err(frame_error(start, "zstd frame is truncated inside a block"));
        }
        reader.skip(consumed)?;
        max_output = max_output.saturating_add(produced);
        if last {
            break;
        }
    }
    if h.checksum {
        if reader.remaining() < 4 {
            return Err(frame_error(start, "zstd frame is truncated before its checksum"));
        }
        reader.skip(4)?;
    }
    Ok(BlockWalk {
        frame_len: reader.pos() - start,
        max_output,
    })
}

/// A structural error of the frame at absolute offset `at`.
pub fn frame_error(at: u64, message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Invalid, "volp.body.decompress", Some(at), message.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(bytes: &[u8]) -> ZstdFrameHeader {
        match parse_frame_header(bytes).unwrap() {
            FrameHeader::Zstd(h) => h,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn content_size_fields_of_every_width() {
        let magic = ZSTD_FRAME_MAGIC.to_le_bytes();
        // Single segment, 1-byte field.
        let h = header(&[&magic[..], &[0x20, 200]].concat());
        assert_eq!((h.content_size, h.window_size, h.header_len), (Some(200), 200, 6));
        // 2-byte field: value + 256; window descriptor 0x38 = 2^17.
        let h = header(&[&magic[..], &[0x40, 0x38, 0x00, 0x01]].concat());
        assert_eq!((h.content_size, h.window_size), (Some(512), 1 << 17));
        // 8-byte fields are read as written, 2^64 - 1 included (libzstd calls it "unknown").
        let h = header(&[&magic[..], &[0xC0, 0x38], &u64::MAX.to_le_bytes()].concat());
        assert_eq!(h.content_size, Some(u64::MAX));
        let h = header(&[&magic[..], &[0xC4, 0x38], &(1u64 << 63).to_le_bytes()].concat());
        assert_eq!((h.content_size, h.checksum), (Some(1 << 63), true));
        // No field: unknown size.
        let h = header(&[&magic[..], &[0x00, 0x00]].concat());
        assert_eq!((h.content_size, h.window_size), (None, 1 << 10));
    }

    #[test]
    fn broken_headers_are_refused() {
        let magic = ZSTD_FRAME_MAGIC.to_le_bytes();
        for bad in [
            &[0x00, 0x00][..],
            &[0x28, 0xB5, 0x2F, 0xFD],
            &[0x28, 0xB5, 0x2F, 0xFD, 0xC0, 0x38, 1, 2],
        ] {
            assert!(parse_frame_header(bad).is_err(), "{bad:?}");
        }
        // Reserved bit, a dictionary, a window above 2^31.
        for tail in [&[0x08u8, 0x38][..], &[0x01, 0x38, 7], &[0x00, 22 << 3]] {
            assert!(matches!(
                parse_frame_header(&[&magic[..], tail].concat()),
                Err(NotAFrame::Header(_))
            ));
        }
        let skippable = parse_frame_header(&[0x5F, 0x2A, 0x4D, 0x18, 9, 0, 0, 0]).unwrap();
        assert_eq!(skippable, FrameHeader::Skippable { data_len: 9 });
    }
}
