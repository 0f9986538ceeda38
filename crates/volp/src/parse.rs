//! Bytes -> checked structures: the prefix, the header length and the header JSON, read from
//! the input with positioned reads (the body is never loaded here). Every size from the file is
//! compared with the input length and the spec limits before anything is allocated; nothing
//! here panics on hostile input.

use rasterpack_common::{Error, ErrorKind, Input, Limits};

use crate::header_rules::{check_header, HeaderCheck};
use crate::json::{self, JValue, JsonErrorKind, Node};
use crate::raw::*;

/// A caller limit refused a size: give it the VOLP namespace (`volp.limit.alloc`).
pub fn alloc_limit(e: Error) -> Error {
    Error::new(e.kind, "volp.limit.alloc", e.offset, e.message)
}

/// Read and check the 8-byte prefix from the first bytes of the file (`data` is shorter only
/// when the whole file is).
pub fn parse_prefix(data: &[u8]) -> Result<RawPrefix, Error> {
    let n = data.len().min(4);
    if data[..n] != MAGIC[..n] {
        let mut found = [0u8; 4];
        found[..n].copy_from_slice(&data[..n]);
        return Err(Error::invalid(
            "volp.magic",
            0,
            format!(
                "not a VOLP file: magic is {:?}, expected \"VOLP\"",
                String::from_utf8_lossy(&found[..n])
            ),
        ));
    }
    if data.len() < PREFIX_LEN {
        return Err(Error::new(
            ErrorKind::Truncated,
            "volp.prefix.truncated",
            Some(data.len() as u64),
            format!(
                "file is {} bytes long: the 8-byte prefix (magic + header length) is incomplete",
                data.len()
            ),
        ));
    }
    let header_len = u32::from_le_bytes([data[4], data[5], data[6], data[7]]);
    Ok(RawPrefix {
        magic: MAGIC,
        header_len,
    })
}

/// Check the declared header length against the spec limit (inclusive 1..=1 MiB), the caller's
/// text limit and the input's size; read and return the header bytes.
pub fn header_bytes(input: &Input, prefix: &RawPrefix, limits: &Limits) -> Result<Vec<u8>, Error> {
    let len = prefix.header_len;
    if len == 0 || len > MAX_HEADER_LEN {
        return Err(Error::invalid(
            "volp.header.len_out_of_range",
            4,
            format!("header length {len} is outside 1..={MAX_HEADER_LEN} bytes"),
        ));
    }
    if len as u64 > limits.max_text {
        return Err(Error::limit(
            "volp.limit.header",
            Some(4),
            format!(
                "header length {len} exceeds the configured text limit of {} bytes",
                limits.max_text
            ),
        ));
    }
    let end = PREFIX_LEN as u64 + len as u64;
    if end > input.len() {
        return Err(Error::new(
            ErrorKind::Truncated,
            "volp.header.truncated",
            Some(4),
            format!(
                "header length {len} needs bytes up to offset {end}, the file has only {} bytes",
                input.len()
            ),
        ));
    }
    let mut bytes = vec![0u8; len as usize];
    input.read_at(PREFIX_LEN as u64, &mut bytes, "VOLP header")?;
    Ok(bytes)
}

/// Header bytes -> a JSON object: UTF-8 without BOM, one RFC 8259 object, no duplicate keys.
pub fn parse_header_json(bytes: &[u8], limits: &Limits) -> Result<Vec<(String, Node)>, Error> {
    let base = PREFIX_LEN as u64;
    if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return Err(Error::invalid(
            "volp.header.bom",
            base,
            "header starts with a UTF-8 byte order mark",
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        Error::invalid(
            "volp.header.utf8",
            base + e.valid_up_to() as u64,
            format!(
                "header is not valid UTF-8 (invalid byte at header offset {})",
                e.valid_up_to()
            ),
        )
    })?;
    let depth = limits.max_depth.clamp(1, 128);
    let node = json::parse(text, depth).map_err(|e| {
        let code = match e.kind {
            JsonErrorKind::Syntax => "volp.header.json",
            JsonErrorKind::DuplicateKey(_) => "volp.header.duplicate_key",
            JsonErrorKind::TooDeep => "volp.header.depth",
        };
        Error::invalid(code, base + e.offset as u64, format!("header JSON: {}", e.message))
    })?;
    match node.value {
        JValue::Object(members) => Ok(members),
        other => Err(Error::invalid(
            "volp.header.not_object",
            base + node.offset as u64,
            format!("header JSON is {}, not an object", other.type_name()),
        )),
    }
}

/// A file read up to (not including) the body: the prefix and header rules applied.
#[derive(Debug, Clone)]
pub struct Structure {
    /// The fixed prefix.
    pub prefix: RawPrefix,
    /// The header rules' outcome.
    pub check: HeaderCheck,
    /// Offset of the first body byte (8 + header length).
    pub body_offset: u64,
    /// Bytes of body (everything after the header).
    pub body_len: u64,
}

/// Prefix + header. Errors here are fatal (nothing after them can be read); broken header rules
/// are collected in [`Structure::check`].
pub fn parse_structure(input: &Input, limits: &Limits) -> Result<Structure, Error> {
    if let Some(dir) = input.dir() {
        return Err(Error::usage(format!(
            "{} is a directory, not a VOLP file",
            rasterpack_common::shown(dir)
        )));
    }
    let head = input.head(PREFIX_LEN);
    let prefix = parse_prefix(&head)?;
    let hb = header_bytes(input, &prefix, limits)?;
    let members = parse_header_json(&hb, limits)?;
    let check = check_header(&members, PREFIX_LEN as u64);
    let body_offset = (PREFIX_LEN + hb.len()) as u64;
    Ok(Structure {
        prefix,
        check,
        body_offset,
        body_len: input.len() - body_offset,
    })
}
