//! Writing FOLD files pyfolds 1.0.2 reads back.
//!
//! pyfolds writes a provisional header, the chunks, the index, then seeks back to rewrite the
//! header. rasterpack writes to any `Write` (no seeking), so [`FoldBuilder`] prepares every
//! chunk in memory first (compressed, hashed, ECC computed) and then writes header, chunks and
//! index in one pass; the bytes are the same layout.
//!
//! ECC: `rs(N)` is written only for stored payloads that fit one Reed-Solomon block
//! (`comp_len <= 255 - N`), where the ECC bytes are the true parity. For longer payloads
//! pyfolds' layout stores bytes that are not parity (see docs/formats/fold.md), so the
//! builder writes `ecc_algo: "none"` for such a chunk and records a note in
//! [`FoldBuilder::notes`].

use std::io::Write;

use rasterpack_common::{Error, NdArray, Result};
use sha2::{Digest, Sha256};

use crate::ecc::{self, Rs};
use crate::npz;
use crate::pjson::{self, Ascii, JStr, Value};
use crate::raw::{ChunkHeader, FileHeader, CHUNK_HEADER_LEN, FLAG_NONE, FLAG_ZSTD, HEADER_LEN, MAGIC, MAX_CHUNK_SIZE};

/// Compression of one chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    /// zstd at this level (pyfolds uses 3), content size in the frame.
    Zstd(i32),
}

/// How one chunk is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkOptions {
    pub compression: Compression,
    /// Reed-Solomon parity bytes per block (`rs(N)`, pyfolds: 16/32/64), or none.
    pub ecc: Option<u8>,
}

impl Default for ChunkOptions {
    fn default() -> Self {
        ChunkOptions {
            compression: Compression::Zstd(3),
            ecc: None,
        }
    }
}

struct Prepared {
    name: String,
    header: ChunkHeader,
    stored: Vec<u8>,
    ecc: Vec<u8>,
    ecc_algo: String,
    sha256: String,
}

/// Collects chunks and metadata, then writes a complete file.
pub struct FoldBuilder {
    chunks: Vec<Prepared>,
    metadata: Vec<(JStr, Value)>,
    /// `created_at_unix`; defaults to the current time.
    pub created_at_unix: f64,
    /// Index `version` (pyfolds writes "1.2.0").
    pub version: String,
    /// Things the builder decided on the caller's behalf (e.g. ECC dropped for a large chunk).
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

impl FoldBuilder {
    pub fn new() -> FoldBuilder {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        FoldBuilder {
            chunks: Vec::new(),
            metadata: Vec::new(),
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
        self.metadata.retain(|(k, _)| !k.eq_str(key));
        self.metadata.push((JStr::new(key), value));
        Ok(())
    }

    /// Add a chunk of any 4-character ASCII type.
    pub fn add_chunk(&mut self, name: &str, ctype: &str, payload: &[u8], opts: ChunkOptions) -> Result<()> {
        let ct: [u8; 4] = ctype
            .as_bytes()
            .try_into()
            .ok()
            .filter(|_| ctype.is_ascii())
            .ok_or_else(|| Error::usage(format!("chunk type {ctype:?} must be 4 ASCII characters")))?;
        if self.chunks.iter().any(|c| c.name == name) {
            return Err(Error::usage(format!("chunk name {name:?} used twice")));
        }
        if payload.len() as u64 > MAX_CHUNK_SIZE {
            return Err(Error::usage(format!(
                "chunk {name:?}: {} bytes exceed the 1 GiB chunk limit",
                payload.len()
            )));
        }
        let (stored, flags) = match opts.compression {
            Compression::None => (payload.to_vec(), FLAG_NONE),
            Compression::Zstd(level) => (
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
                    self.notes.push(format!(
                        "chunk {name:?}: {} stored bytes exceed one rs({n}) block ({} bytes); written without ECC because pyfolds' multi-block ECC layout cannot repair",
                        stored.len(),
                        rs.k()
                    ));
                    (Vec::new(), "none".to_string())
                } else {
                    (ecc::pyfolds_ecc(&rs, &stored), format!("rs({n})"))
                }
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
        self.chunks.push(Prepared {
            name: name.to_string(),
            header,
            stored,
            ecc: ecc_bytes,
            ecc_algo,
            sha256,
        });
        Ok(())
    }

    /// A `JSON` chunk, serialized as pyfolds does (`ensure_ascii=False`, compact).
    pub fn add_json(&mut self, name: &str, value: &Value, opts: ChunkOptions) -> Result<()> {
        let text = pjson::dumps(value, false, Ascii::Raw);
        self.add_chunk(name, "JSON", text.as_bytes(), opts)
    }

    /// An `NPZ0` chunk: an `np.savez`-style archive of the arrays.
    pub fn add_npz(&mut self, name: &str, arrays: &[(&str, &NdArray)], opts: ChunkOptions) -> Result<()> {
        let total: u64 = arrays.iter().map(|(_, a)| a.data.len() as u64 + 256).sum();
        if total > MAX_CHUNK_SIZE {
            return Err(Error::usage(format!(
                "chunk {name:?}: arrays exceed the 1 GiB chunk limit"
            )));
        }
        for (n, _) in arrays {
            if n.is_empty() || n.len() > 200 {
                return Err(Error::usage(format!("array name {n:?} must be 1..200 bytes")));
            }
        }
        self.add_chunk(name, "NPZ0", &npz::write(arrays), opts)
    }

    /// The metadata as it will be written (with `chunk_hashes` and `manifest_hash`).
    pub fn final_metadata(&self) -> Value {
        let mut m = self.metadata.clone();
        let hashes = Value::Object(
            self.chunks
                .iter()
                .map(|c| (JStr::new(&c.name), Value::str(&c.sha256)))
                .collect(),
        );
        m.push((JStr::new("chunk_hashes"), hashes));
        let mh = crate::validate::manifest_hash(&Value::Object(m.clone()));
        m.push((JStr::new("manifest_hash"), Value::str(&mh)));
        Value::Object(m)
    }

    /// Write the whole file.
    pub fn write_to(&self, out: &mut dyn Write) -> Result<()> {
        let mut entries = Vec::new();
        let mut offset = HEADER_LEN;
        for c in &self.chunks {
            entries.push(Value::object(vec![
                ("name", Value::str(&c.name)),
                ("ctype", Value::str(&c.header.ctype_str())),
                ("flags", Value::int(c.header.flags)),
                ("offset", Value::int(offset)),
                ("header_len", Value::int(CHUNK_HEADER_LEN)),
                ("comp_len", Value::int(c.header.comp_len)),
                ("uncomp_len", Value::int(c.header.uncomp_len)),
                ("crc32c", Value::int(c.header.crc32c)),
                ("sha256", Value::str(&c.sha256)),
                ("ecc_algo", Value::str(&c.ecc_algo)),
                ("ecc_len", Value::int(c.header.ecc_len)),
            ]));
            offset += CHUNK_HEADER_LEN + c.stored.len() as u64 + c.ecc.len() as u64;
        }
        let index = Value::object(vec![
            ("format", Value::str("fold")),
            ("version", Value::str(&self.version)),
            ("created_at_unix", Value::Float(self.created_at_unix)),
            ("metadata", self.final_metadata()),
            ("chunks", Value::Array(entries)),
        ]);
        let text = pjson::dumps(&index, false, Ascii::Raw);
        let header = FileHeader {
            magic: MAGIC,
            header_len: HEADER_LEN as u32,
            index_off: offset,
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
