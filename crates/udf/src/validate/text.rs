//! Text rules: strict UTF-8 / UTF-16LE / UTF-32LE, checked incrementally as the data streams
//! ([`TextCheck`]) or decoded whole ([`decode_text`], for the in-memory accessors).

use crate::document::{UdfTable, UdfText};
use crate::raw::Prim;

/// Incremental strict decoder for UTF-8 / UTF-16LE / UTF-32LE; feeds must be whole code units
/// for UTF-16/32 (the chunking guarantees it).
pub(crate) struct TextCheck {
    prim: Prim,
    carry: Vec<u8>,
    high: bool,
    pos: u64,
}

impl TextCheck {
    pub(crate) fn new(prim: Prim) -> Self {
        TextCheck {
            prim,
            carry: Vec::new(),
            high: false,
            pos: 0,
        }
    }

    /// Errors carry the offset relative to the start of this feed.
    pub(crate) fn feed(&mut self, b: &[u8]) -> Result<(), (u64, String)> {
        let start = self.pos;
        self.pos += b.len() as u64;
        match self.prim {
            Prim::U8 | Prim::I8 => {
                let mut buf;
                let data: &[u8] = if self.carry.is_empty() {
                    b
                } else {
                    buf = std::mem::take(&mut self.carry);
                    buf.extend_from_slice(b);
                    &buf
                };
                let back = data.len() as u64 - b.len() as u64;
                match std::str::from_utf8(data) {
                    Ok(_) => Ok(()),
                    Err(e) => match e.error_len() {
                        None => {
                            self.carry = data[e.valid_up_to()..].to_vec();
                            Ok(())
                        }
                        Some(_) => Err((
                            (e.valid_up_to() as u64).saturating_sub(back),
                            format!("invalid UTF-8 at byte {}", start + e.valid_up_to() as u64 - back),
                        )),
                    },
                }
            }
            Prim::U16 => {
                for (k, c) in b.chunks_exact(2).enumerate() {
                    let u = u16::from_le_bytes([c[0], c[1]]);
                    let rel = (k * 2) as u64;
                    match u {
                        0xD800..=0xDBFF => {
                            if self.high {
                                return Err((rel, "unpaired UTF-16 high surrogate".into()));
                            }
                            self.high = true;
                        }
                        0xDC00..=0xDFFF => {
                            if !self.high {
                                return Err((rel, format!("unpaired UTF-16 low surrogate {u:#06x}")));
                            }
                            self.high = false;
                        }
                        _ => {
                            if self.high {
                                return Err((rel, "unpaired UTF-16 high surrogate".into()));
                            }
                        }
                    }
                }
                Ok(())
            }
            Prim::U32 => {
                for (k, c) in b.chunks_exact(4).enumerate() {
                    let u = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                    if char::from_u32(u).is_none() {
                        return Err(((k * 4) as u64, format!("{u:#x} is not a Unicode scalar value")));
                    }
                }
                Ok(())
            }
            _ => Err((0, "not a text primitive".into())),
        }
    }

    pub(crate) fn finish(&mut self) -> Result<(), (u64, String)> {
        if !self.carry.is_empty() {
            return Err((0, "UTF-8 ends inside a multi-byte sequence".into()));
        }
        if self.high {
            return Err((0, "UTF-16 ends with an unpaired high surrogate".into()));
        }
        Ok(())
    }
}

/// Decode one string (strict). Errors carry the byte offset relative to `b`.
pub(crate) fn decode_one(prim: Prim, b: &[u8]) -> Result<String, (u64, String)> {
    match prim {
        Prim::U8 | Prim::I8 => std::str::from_utf8(b)
            .map(str::to_string)
            .map_err(|e| (e.valid_up_to() as u64, format!("invalid UTF-8: {e}"))),
        Prim::U16 => {
            let units: Vec<u16> = b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
            let mut s = String::with_capacity(units.len());
            let mut pos = 0u64;
            for r in char::decode_utf16(units.iter().copied()) {
                match r {
                    Ok(c) => {
                        pos += 2 * c.len_utf16() as u64;
                        s.push(c);
                    }
                    Err(e) => {
                        return Err((
                            pos,
                            format!("unpaired UTF-16 surrogate {:#06x}", e.unpaired_surrogate()),
                        ))
                    }
                }
            }
            Ok(s)
        }
        Prim::U32 => {
            let mut s = String::with_capacity(b.len() / 4);
            for (k, c) in b.chunks_exact(4).enumerate() {
                let u = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                match char::from_u32(u) {
                    Some(ch) => s.push(ch),
                    None => return Err(((k * 4) as u64, format!("{u:#x} is not a Unicode scalar value"))),
                }
            }
            Ok(s)
        }
        _ => Err((0, "not a text primitive".into())),
    }
}

/// Decode a TEXT table's bytes: a scalar verbatim, list items with trailing NULs stripped.
pub(crate) fn decode_text(t: &UdfTable, b: &[u8]) -> Result<UdfText, (u64, String)> {
    let unit = t.prim.size().unwrap_or(1) as usize;
    if t.shape.real().is_empty() {
        return decode_one(t.prim, b).map(UdfText::Scalar);
    }
    let width = t.shape.ghost().first().copied().unwrap_or(0) as usize * unit;
    let rows = t.shape.records() as usize;
    let mut out = Vec::with_capacity(rows.min(b.len().max(1)));
    if width == 0 {
        // Rows of width 0 (the reference's list of empty strings). Callers bound `rows`
        // (`UdfFile::text` against `Limits::max_text`); never hand out fewer rows than stored.
        if rows > 1 << 24 {
            return Err((0, format!("a list of {rows} empty strings is too many to decode")));
        }
        return Ok(UdfText::List(vec![String::new(); rows]));
    }
    for (k, row) in b.chunks(width).enumerate() {
        // Trailing NUL code units are padding.
        let mut end = row.len();
        while end >= unit && row[end - unit..end].iter().all(|&x| x == 0) {
            end -= unit;
        }
        out.push(decode_one(t.prim, &row[..end]).map_err(|(rel, m)| ((k * width) as u64 + rel, m))?);
    }
    Ok(UdfText::List(out))
}
