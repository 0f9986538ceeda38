//! Writing FOLD files pyfolds 1.0.2 reads back.
//!
//! pyfolds writes a provisional header, the chunks, the index, then seeks back to rewrite the
//! header. rasterpack writes to any `Write` (no seeking), so [`FoldBuilder`] prepares every
//! chunk in memory first (compressed, hashed, ECC computed) and then writes header, chunks and
//! index in one pass; the bytes are the same layout.
//!
//! ECC: `rs(N)` bytes are the parity of each Reed-Solomon block, block after block. For a
//! payload that fits one block (`comp_len <= 255 - N`) that is exactly what pyfolds writes.
//! For longer payloads pyfolds' own layout stores the last `ecc_len` bytes of its interleaved
//! data/parity codeword stream, which are not parity; rasterpack writes the real parity of
//! every block instead (same
//! `ecc_len`), which it validates and repairs, and records a note in [`FoldBuilder::notes`]:
//! pyfolds 1.0.2 cannot read a multi-block ECC chunk in either layout.
//!
//! The builder refuses what it cannot write faithfully (text with lone surrogates, duplicate
//! JSON keys, malformed numbers, JSON or NPZ0 payloads the validator would reject), so every
//! file it writes validates strictly and reads back as given.

use std::io::Write;

use rasterpack_common::{Error, NdArray, Result};
use sha2::{Digest, Sha256};

use crate::ecc::Rs;
use crate::npz;
use crate::parse::JSON_MAX_DEPTH;
use crate::pjson::{self, Ascii, JStr, Value};
use crate::raw::{
    ChunkHeader, FileHeader, CHUNK_HEADER_LEN, FLAG_NONE, FLAG_ZSTD, HEADER_LEN, KNOWN_VERSIONS, MAGIC, MAX_CHUNK_SIZE,
    MAX_INDEX_SIZE,
};

/// Compression of one chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoldCompression {
    /// Stored as is (flags 0).
    None,
    /// zstd at this level (pyfolds uses 3), content size in the frame.
    Zstd(i32),
}

/// How one chunk is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FoldChunkOptions {
    /// Compression of the payload.
    pub compression: FoldCompression,
    /// Reed-Solomon parity bytes per block (`rs(N)`, pyfolds: 16/32/64), or none.
    pub ecc: Option<u8>,
}

impl Default for FoldChunkOptions {
    fn default() -> Self {
        FoldChunkOptions {
            compression: FoldCompression::Zstd(3),
            ecc: None,
        }
    }
}

/// What the index says of one chunk.
pub(crate) struct IndexRecord<'a> {
    pub name: &'a str,
    pub ctype: &'a str,
    pub header: ChunkHeader,
    pub sha256: &'a str,
    pub ecc_algo: &'a str,
    /// Offset of the chunk header in the file.
    pub offset: u64,
}

struct Prepared {
    name: String,
    /// The type code as text (the same four characters as the header's bytes).
    ctype: String,
    header: ChunkHeader,
    stored: Vec<u8>,
    ecc: Vec<u8>,
    ecc_algo: String,
    sha256: String,
}

/// Collects chunks and metadata, then writes a complete file.
pub struct FoldBuilder {
    chunks: Vec<Prepared>,
    /// Chunk names in use.
    chunk_names: std::collections::HashSet<String>,
    metadata: Vec<(JStr, Value)>,
    /// Where each metadata key is in `metadata` (setting a key again replaces its value).
    metadata_at: std::collections::HashMap<String, usize>,
    /// `created_at_unix`; defaults to the current time.
    pub created_at_unix: f64,
    /// Index `version` (pyfolds writes "1.2.0").
    pub version: String,
    /// Things a caller should tell the user (e.g. that pyfolds cannot read a multi-block ECC
    /// chunk).
    pub notes: Vec<String>,
}

impl Default for FoldBuilder {
    fn default() -> Self {
        Self::new()
    }
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Python's `int()` refuses longer decimal literals (`sys.get_int_max_str_digits()`).
const MAX_INT_DIGITS: usize = 4300;

/// Refuse a JSON value that would not be written and read back as it is: a string or key
/// with a lone UTF-16 surrogate (no UTF-8 for it; Python's encoder refuses it too), an object
/// with a repeated key (a Python dict keeps one), an int that is not a decimal literal, or
/// nesting deeper than readers accept. `path` names the place for the message; `depth` is the
/// value's depth in its document (0 for a JSON chunk, 2 for a metadata member of the index).
pub fn check_writable(v: &Value, path: &str, depth: u32) -> Result<()> {
    fn walk(v: &Value, path: &mut String, depth: u32) -> Result<()> {
        let refuse = |path: &str, why: &str| Err(Error::usage(format!("cannot write {path} faithfully: {why}")));
        if depth > JSON_MAX_DEPTH {
            return refuse(path, &format!("nested deeper than {JSON_MAX_DEPTH} levels"));
        }
        match v {
            Value::Null | Value::Bool(_) | Value::Float(_) => Ok(()),
            Value::Int(d) => {
                let digits = d.strip_prefix('-').unwrap_or(d);
                let canonical = !digits.is_empty()
                    && digits.bytes().all(|b| b.is_ascii_digit())
                    && (digits == "0" || !digits.starts_with('0'))
                    && d != "-0";
                if !canonical {
                    return refuse(path, &format!("{d:?} is not a decimal integer literal"));
                }
                if digits.len() > MAX_INT_DIGITS {
                    return refuse(path, &format!("an integer of more than {MAX_INT_DIGITS} digits"));
                }
                Ok(())
            }
            Value::Str(s) => match s.as_string() {
                Some(_) => Ok(()),
                None => refuse(
                    path,
                    "the text holds a lone UTF-16 surrogate, which UTF-8 cannot encode",
                ),
            },
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    walk(item, path, depth + 1)?;
                    path.truncate(len);
                }
                Ok(())
            }
            Value::Object(members) => {
                let mut seen = std::collections::HashSet::with_capacity(members.len());
                for (k, item) in members {
                    let key = k.to_string_lossy();
                    if k.as_string().is_none() {
                        return refuse(
                            path,
                            &format!("key {key:?} holds a lone UTF-16 surrogate, which UTF-8 cannot encode"),
                        );
                    }
                    if !seen.insert(k) {
                        return refuse(path, &format!("key {key:?} appears twice"));
                    }
                    let len = path.len();
                    path.push_str(&format!("[{key:?}]"));
                    walk(item, path, depth + 1)?;
                    path.truncate(len);
                }
                Ok(())
            }
        }
    }
    walk(v, &mut path.to_string(), depth)
}

/// The note for a chunk whose ECC spans several Reed-Solomon blocks.
pub(crate) fn multi_block_note(name: &str, stored: u64, rs: &Rs) -> String {
    format!(
        "chunk {name:?}: {stored} stored bytes span {} rs({}) blocks; the ECC holds the parity of each block, which rasterpack validates and repairs, but pyfolds 1.0.2 cannot read a chunk whose ECC spans several blocks (its reader decodes payload and ECC as one codeword stream and fails with \"ECC decode falhou\"; the same happens to the multi-block chunks it writes itself)",
        stored.div_ceil(rs.k() as u64),
        rs.nsym()
    )
}

/// Check an array name for an NPZ0 member: 1..200 bytes, no NUL (Python's zipfile cuts names
/// there).
pub(crate) fn check_array_name(n: &str) -> Result<()> {
    if n.is_empty() || n.len() > 200 {
        return Err(Error::usage(format!("array name {n:?} must be 1..200 bytes")));
    }
    if n.contains('\0') {
        return Err(Error::usage(format!("array name {n:?} contains a NUL character")));
    }
    Ok(())
}

impl FoldBuilder {
    /// An empty file: no chunks, no metadata, created now, index version 1.2.0.
    pub fn new() -> FoldBuilder {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        FoldBuilder {
            chunks: Vec::new(),
            chunk_names: std::collections::HashSet::new(),
            metadata: Vec::new(),
            metadata_at: std::collections::HashMap::new(),
            created_at_unix: now,
            version: "1.2.0".into(),
            notes: Vec::new(),
        }
    }

    /// Set a user metadata member (`chunk_hashes` and `manifest_hash` are computed).
    pub fn metadata(&mut self, key: &str, value: Value) -> Result<()> {
        if key == "chunk_hashes" || key == "manifest_hash" {
            return Err(Error::usage(format!("metadata key {key:?} is computed by the writer")));
        }
        // A member of the index's `metadata` object, itself a member of the index.
        check_writable(&value, &format!("metadata[{key:?}]"), 2)?;
        match self.metadata_at.get(key) {
            // Replaced in place: the key keeps its first position, as in a Python dict.
            Some(&at) => self.metadata[at].1 = value,
            None => {
                self.metadata_at.insert(key.to_string(), self.metadata.len());
                self.metadata.push((JStr::new(key), value));
            }
        }
        Ok(())
    }

    /// Add a chunk of any 4-character ASCII type. `JSON` payloads must be JSON as Python
    /// reads it and `NPZ0` payloads readable `.npz` archives: the builder does not write a
    /// chunk the validator would reject.
    pub fn add_chunk(&mut self, name: &str, ctype: &str, payload: &[u8], opts: FoldChunkOptions) -> Result<()> {
        match ctype {
            "JSON" => {
                pjson::parse(payload, JSON_MAX_DEPTH).map_err(|e| {
                    Error::usage(format!(
                        "chunk {name:?}: JSON payload invalid at byte {}: {}",
                        e.offset, e.message
                    ))
                })?;
            }
            "NPZ0" => {
                let limits = rasterpack_common::Limits::default();
                let arrays = npz::describe(payload, &limits)
                    .map_err(|e| Error::usage(format!("chunk {name:?}: not a readable .npz archive: {}", e.message)))?;
                if let Some(bad) = arrays.iter().find_map(|a| a.damaged.as_ref()) {
                    return Err(Error::usage(format!(
                        "chunk {name:?}: not a readable .npz archive: {}",
                        bad.message
                    )));
                }
            }
            _ => {}
        }
        self.add_raw_chunk(name, ctype, payload, opts)
    }

    /// [`FoldBuilder::add_chunk`] without checking the payload against its type: for tools
    /// and tests that craft damaged files on purpose. A file made with it may not validate.
    pub fn add_raw_chunk(&mut self, name: &str, ctype: &str, payload: &[u8], opts: FoldChunkOptions) -> Result<()> {
        let ct: [u8; 4] = ctype
            .as_bytes()
            .try_into()
            .ok()
            .filter(|_| ctype.is_ascii())
            .ok_or_else(|| Error::usage(format!("chunk type {ctype:?} must be 4 ASCII characters")))?;
        if self.chunk_names.contains(name) {
            return Err(Error::usage(format!("chunk name {name:?} used twice")));
        }
        if payload.len() as u64 > MAX_CHUNK_SIZE {
            return Err(Error::usage(format!(
                "chunk {name:?}: {} bytes exceed the 1 GiB chunk limit",
                payload.len()
            )));
        }
        let (stored, flags) = match opts.compression {
            FoldCompression::None => (payload.to_vec(), FLAG_NONE),
            FoldCompression::Zstd(level) => (
                zstd::bulk::compress(payload, level).map_err(|e| Error::io("zstd compression", &e))?,
                FLAG_ZSTD,
            ),
        };
        if stored.len() as u64 > MAX_CHUNK_SIZE {
            return Err(Error::usage(format!(
                "chunk {name:?}: compressed payload exceeds the 1 GiB chunk limit"
            )));
        }
        let (ecc_bytes, ecc_algo) = match opts.ecc {
            None => (Vec::new(), "none".to_string()),
            Some(n) => {
                let rs = Rs::new(n as usize)
                    .ok_or_else(|| Error::usage(format!("rs({n}) is not a valid Reed-Solomon code")))?;
                if stored.len() > rs.k() {
                    self.notes.push(multi_block_note(name, stored.len() as u64, &rs));
                }
                (rs.block_parity(&stored), format!("rs({n})"))
            }
        };
        let header = ChunkHeader {
            ctype: ct,
            flags,
            uncomp_len: payload.len() as u64,
            comp_len: stored.len() as u64,
            crc32c: crc32c::crc32c(&stored),
            ecc_len: ecc_bytes.len() as u32,
        };
        let sha256 = hex(&Sha256::digest(&stored));
        self.chunk_names.insert(name.to_string());
        self.chunks.push(Prepared {
            name: name.to_string(),
            ctype: ctype.to_string(),
            header,
            stored,
            ecc: ecc_bytes,
            ecc_algo,
            sha256,
        });
        Ok(())
    }

    /// A `JSON` chunk, serialized as pyfolds does (`ensure_ascii=False`, compact).
    pub fn add_json(&mut self, name: &str, value: &Value, opts: FoldChunkOptions) -> Result<()> {
        check_writable(value, &format!("JSON chunk {name:?}"), 0)?;
        let text = pjson::dumps(value, false, Ascii::Raw);
        self.add_chunk(name, "JSON", text.as_bytes(), opts)
    }

    /// An `NPZ0` chunk: an `np.savez`-style archive of the arrays.
    pub fn add_npz(&mut self, name: &str, arrays: &[(&str, &NdArray)], opts: FoldChunkOptions) -> Result<()> {
        let total: u64 = arrays.iter().map(|(_, a)| a.data.len() as u64 + 256).sum();
        if total > MAX_CHUNK_SIZE {
            return Err(Error::usage(format!(
                "chunk {name:?}: arrays exceed the 1 GiB chunk limit"
            )));
        }
        if arrays.len() > u16::MAX as usize {
            return Err(Error::usage(format!(
                "chunk {name:?}: {} arrays; an NPZ0 chunk holds at most 65535",
                arrays.len()
            )));
        }
        let mut seen = std::collections::HashSet::with_capacity(arrays.len());
        for (n, _) in arrays {
            check_array_name(n)?;
            if !seen.insert(*n) {
                return Err(Error::usage(format!("chunk {name:?}: array name {n:?} used twice")));
            }
        }
        self.add_chunk(name, "NPZ0", &npz::write(arrays), opts)
    }

    /// The metadata as it will be written (with `chunk_hashes` and `manifest_hash`).
    pub fn final_metadata(&self) -> Value {
        self.metadata_with(&self.records())
    }

    /// What the index says of each chunk prepared so far.
    fn records(&self) -> Vec<IndexRecord<'_>> {
        let mut offset = HEADER_LEN;
        self.chunks
            .iter()
            .map(|c| {
                let r = IndexRecord {
                    name: &c.name,
                    ctype: &c.ctype,
                    header: c.header,
                    sha256: &c.sha256,
                    ecc_algo: &c.ecc_algo,
                    offset,
                };
                offset += CHUNK_HEADER_LEN + c.stored.len() as u64 + c.ecc.len() as u64;
                r
            })
            .collect()
    }

    /// The metadata with `chunk_hashes` of `records` and the manifest hash over both.
    fn metadata_with(&self, records: &[IndexRecord<'_>]) -> Value {
        let mut m = self.metadata.clone();
        let hashes = Value::Object(
            records
                .iter()
                .map(|c| (JStr::new(c.name), Value::str(c.sha256)))
                .collect(),
        );
        m.push((JStr::new("chunk_hashes"), hashes));
        let mh = crate::validate::manifest_hash(&Value::Object(m.clone()));
        m.push((JStr::new("manifest_hash"), Value::str(&mh)));
        Value::Object(m)
    }

    /// The index text for chunks described by `records`.
    pub(crate) fn index_text(&self, records: &[IndexRecord<'_>]) -> Result<String> {
        if !KNOWN_VERSIONS.contains(&self.version.as_str()) {
            return Err(Error::usage(format!(
                "index version {:?} is not one readers know (1.0.0, 1.1.0, 1.2.0)",
                self.version
            )));
        }
        let entries = records
            .iter()
            .map(|c| {
                Value::object(vec![
                    ("name", Value::str(c.name)),
                    ("ctype", Value::str(c.ctype)),
                    ("flags", Value::int(c.header.flags)),
                    ("offset", Value::int(c.offset)),
                    ("header_len", Value::int(CHUNK_HEADER_LEN)),
                    ("comp_len", Value::int(c.header.comp_len)),
                    ("uncomp_len", Value::int(c.header.uncomp_len)),
                    ("crc32c", Value::int(c.header.crc32c)),
                    ("sha256", Value::str(c.sha256)),
                    ("ecc_algo", Value::str(c.ecc_algo)),
                    ("ecc_len", Value::int(c.header.ecc_len)),
                ])
            })
            .collect();
        let index = Value::object(vec![
            ("format", Value::str("fold")),
            ("version", Value::str(&self.version)),
            ("created_at_unix", Value::Float(self.created_at_unix)),
            ("metadata", self.metadata_with(records)),
            ("chunks", Value::Array(entries)),
        ]);
        let text = pjson::dumps(&index, false, Ascii::Raw);
        if text.len() as u64 > MAX_INDEX_SIZE {
            return Err(Error::usage(format!(
                "the index would be {} bytes, above the 100 MiB FOLD limit",
                text.len()
            )));
        }
        Ok(text)
    }

    /// Write the whole file.
    pub fn write_to(&self, out: &mut dyn Write) -> Result<()> {
        let records = self.records();
        let text = self.index_text(&records)?;
        let index_off = records.last().zip(self.chunks.last()).map_or(HEADER_LEN, |(r, c)| {
            r.offset + CHUNK_HEADER_LEN + c.stored.len() as u64 + c.ecc.len() as u64
        });
        let header = FileHeader {
            magic: MAGIC,
            header_len: HEADER_LEN as u32,
            index_off,
            index_len: text.len() as u64,
        };
        let io = |e: std::io::Error| Error::io("writing FOLD output", &e);
        out.write_all(&header.to_bytes()).map_err(io)?;
        for c in &self.chunks {
            out.write_all(&c.header.to_bytes()).map_err(io)?;
            out.write_all(&c.stored).map_err(io)?;
            out.write_all(&c.ecc).map_err(io)?;
        }
        out.write_all(text.as_bytes()).map_err(io)?;
        Ok(())
    }

    /// The whole file in memory.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut v = Vec::new();
        self.write_to(&mut v)?;
        Ok(v)
    }
}
