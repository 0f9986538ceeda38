//! Bytes -> raw structures: the file header and the JSON index, checked (layers 1-3 of
//! the FOLD spec's section 6, for the header and the index). Nothing here panics on hostile
//! input.

use rasterpack_common::{Findings, Input, Limits};

use crate::pjson::{self, Value};
use crate::raw::{FileHeader, CHUNK_HEADER_LEN, HEADER_LEN, KNOWN_VERSIONS, MAGIC, MAX_INDEX_SIZE};

/// Deepest JSON nesting accepted in the index and JSON chunks (Python's own recursion limit
/// is about 1000; 512 keeps our recursive walk well inside a thread's stack).
pub const JSON_MAX_DEPTH: u32 = 512;

/// One index entry, fields as the index states them.
#[derive(Debug, Clone, PartialEq)]
pub struct FoldEntry {
    /// Position in the index `chunks` list.
    pub pos: usize,
    /// Chunk name (unique in a valid file).
    pub name: String,
    /// Four-character type code (`JSON`, `NPZ0`, `TSAV`, anything else is opaque).
    pub ctype: String,
    /// 0: stored as is, 1: zstd.
    pub flags: u64,
    /// Offset of the chunk header in the file.
    pub offset: u64,
    /// Size of the chunk header (always 32).
    pub header_len: u64,
    /// Stored payload length.
    pub comp_len: u64,
    /// Decoded payload length.
    pub uncomp_len: u64,
    /// CRC32C of the stored payload.
    pub crc32c: u64,
    /// SHA-256 (lowercase hex) of the stored payload.
    pub sha256: String,
    /// `none` or `rs(N)`.
    pub ecc_algo: String,
    /// Length of the ECC bytes after the payload.
    pub ecc_len: u64,
}

/// The parsed index.
#[derive(Debug, Clone)]
pub struct FoldIndex {
    /// The whole index document.
    pub value: Value,
    /// `version`, `"1.0.0"` when missing (as pyfolds defaults it).
    pub version: String,
    /// `created_at_unix`, when the index has it.
    pub created_at_unix: Option<f64>,
    /// The `metadata` object (user keys, `chunk_hashes`, `manifest_hash`).
    pub metadata: Value,
    /// Entries whose fields all parsed (the others are reported and skipped).
    pub entries: Vec<FoldEntry>,
    /// Number of items in `chunks`, including malformed ones.
    pub declared_chunks: usize,
}

/// A FOLD file whose header and index passed the structural checks.
#[derive(Debug, Clone)]
pub struct FoldContainer {
    /// Size of the file.
    pub file_len: u64,
    /// The 28-byte file header.
    pub header: FileHeader,
    /// The JSON index.
    pub index: FoldIndex,
}

impl FoldContainer {
    /// `.mind` files are FOLD files holding a chunk named `ai_graph` or `ai_vectors`.
    pub fn is_mind(&self) -> bool {
        self.index
            .entries
            .iter()
            .any(|e| e.name == "ai_graph" || e.name == "ai_vectors")
    }
}

/// Read and check the 28-byte header and the index. Findings go to `f`; `None` when the file
/// cannot be read further (any structural, limit or bounds failure of header or index).
pub fn open(
    input: &Input,
    limits: &Limits,
    f: &mut Findings,
) -> Result<Option<FoldContainer>, rasterpack_common::Error> {
    let file_len = input.len();
    if file_len < HEADER_LEN {
        f.error(
            "fold.header.truncated_header",
            Some(0),
            format!("file holds {file_len} byte(s); the FOLD header needs 28"),
        );
        return Ok(None);
    }
    let mut hb = [0u8; 28];
    input.read_at(0, &mut hb, "FOLD header")?;
    let header = FileHeader::from_bytes(&hb);
    if header.magic != MAGIC {
        f.error(
            "fold.header.bad_magic",
            Some(0),
            format!(
                "magic is {:?}, expected \"FOLDv1\\0\\0\"",
                crate::raw::ctype_display(&header.magic)
            ),
        );
        return Ok(None);
    }
    if header.header_len as u64 != HEADER_LEN {
        // Reported, but the rest of the file is still checked: the layout does not depend on it.
        f.error(
            "fold.header.header_len",
            Some(8),
            format!("header_len is {}, must be 28", header.header_len),
        );
    }
    if header.index_off < HEADER_LEN {
        let why = if header.index_off == 0 {
            " (the writer never finalized the file)"
        } else {
            ""
        };
        f.error(
            "fold.header.index_off_lt_header",
            Some(12),
            format!("index_off {} is inside the 28-byte header{why}", header.index_off),
        );
        return Ok(None);
    }
    // Layer 2: anti-DoS limit before anything is allocated.
    let max_index = MAX_INDEX_SIZE.min(limits.max_text);
    if header.index_len > max_index {
        f.error(
            "fold.limits.index_too_large",
            Some(20),
            format!("index_len {} exceeds the limit of {max_index} bytes", header.index_len),
        );
        return Ok(None);
    }
    // Layer 3: bounds.
    if header
        .index_off
        .checked_add(header.index_len)
        .is_none_or(|e| e > file_len)
    {
        f.error(
            "fold.bounds.index_out_of_bounds",
            Some(12),
            format!(
                "index [{}, +{}) extends past the end of the file ({file_len} bytes)",
                header.index_off, header.index_len
            ),
        );
        return Ok(None);
    }
    let text = input.read_vec(header.index_off, header.index_len, "FOLD index", limits)?;
    let value = match pjson::parse(&text, JSON_MAX_DEPTH) {
        Ok(v) => v,
        Err(e) => {
            f.error(
                "fold.index.index_bad_json",
                Some(header.index_off + e.offset as u64),
                format!("index is not valid JSON: {}", e.message),
            );
            return Ok(None);
        }
    };
    drop(text);
    let index = match check_index(value, header.index_off, f) {
        Some(i) => i,
        None => return Ok(None),
    };
    Ok(Some(FoldContainer {
        file_len,
        header,
        index,
    }))
}

fn check_index(value: Value, at: u64, f: &mut Findings) -> Option<FoldIndex> {
    let at = Some(at);
    if !matches!(value, Value::Object(_)) {
        f.error(
            "fold.index.index_bad_json",
            at,
            format!("index is a JSON {}, not an object", value.type_name()),
        );
        return None;
    }
    match value.get("format") {
        Some(v) if v.as_str().as_deref() == Some("fold") => {}
        Some(v) => f.error(
            "fold.index.index_bad_format",
            at,
            format!(
                "index format is {}, must be \"fold\" (also for .mind files)",
                pjson::dumps(v, false, pjson::Ascii::Raw)
            ),
        ),
        None => f.error("fold.index.index_bad_format", at, "index has no \"format\" member"),
    }
    let version = match value.get("version") {
        None => "1.0.0".to_string(),
        Some(Value::Str(s)) => s.to_string_lossy(),
        Some(other) => pjson::dumps(other, false, pjson::Ascii::Raw),
    };
    if !KNOWN_VERSIONS.contains(&version.as_str()) {
        f.warning(
            "fold.index.unknown_version",
            at,
            format!("index version {version:?} is not one pyfolds knows (1.0.0, 1.1.0, 1.2.0)"),
        );
    }
    let created_at_unix = match value.get("created_at_unix") {
        None => None,
        Some(v @ (Value::Int(_) | Value::Float(_))) => v.as_f64(),
        Some(v) => {
            f.warning(
                "fold.index.bad_type",
                at,
                format!("created_at_unix is a {}, expected a number", v.type_name()),
            );
            None
        }
    };
    let metadata = match value.get("metadata") {
        Some(m @ Value::Object(_)) => m.clone(),
        Some(m) => {
            f.error(
                "fold.index.bad_type",
                at,
                format!("metadata is a {}, expected an object", m.type_name()),
            );
            Value::Object(Vec::new())
        }
        None => {
            f.error("fold.index.missing_key", at, "index has no \"metadata\" member");
            Value::Object(Vec::new())
        }
    };
    let items: &[Value] = match value.get("chunks") {
        Some(Value::Array(a)) => a,
        Some(v) => {
            f.error(
                "fold.index.bad_type",
                at,
                format!("chunks is a {}, expected an array", v.type_name()),
            );
            &[]
        }
        None => {
            f.error("fold.index.missing_key", at, "index has no \"chunks\" member");
            &[]
        }
    };
    let mut entries = Vec::new();
    let mut names: std::collections::HashSet<String> = std::collections::HashSet::new();
    for (pos, item) in items.iter().enumerate() {
        if let Some(e) = check_entry(pos, item, at, f) {
            if !names.insert(e.name.clone()) {
                f.error(
                    "fold.index.duplicate_name",
                    at,
                    format!("chunk name {:?} appears more than once", e.name),
                );
            }
            entries.push(e);
        }
    }
    let declared_chunks = items.len();
    Some(FoldIndex {
        version,
        created_at_unix,
        metadata,
        entries,
        declared_chunks,
        value,
    })
}

/// The largest offset or length an index entry may declare (2^62).
const MAX_DECLARED: u64 = 1 << 62;

fn check_entry(pos: usize, item: &Value, at: Option<u64>, f: &mut Findings) -> Option<FoldEntry> {
    if !matches!(item, Value::Object(_)) {
        f.error(
            "fold.index.bad_type",
            at,
            format!("chunks[{pos}] is a {}, expected an object", item.type_name()),
        );
        return None;
    }
    let label = match item.get("name").and_then(|v| v.as_str()) {
        Some(n) => format!("chunks[{pos}] ({n:?})"),
        None => format!("chunks[{pos}]"),
    };
    let mut ok = true;
    let mut string = |key: &str, f: &mut Findings| -> String {
        match item.get(key) {
            Some(Value::Str(s)) => s.to_string_lossy(),
            Some(v) => {
                f.error(
                    "fold.index.bad_type",
                    at,
                    format!("{label}: {key} is a {}, expected a string", v.type_name()),
                );
                ok = false;
                String::new()
            }
            None => {
                f.error("fold.index.missing_key", at, format!("{label}: missing {key:?}"));
                ok = false;
                String::new()
            }
        }
    };
    let name = string("name", f);
    let ctype = string("ctype", f);
    let sha256 = string("sha256", f);
    let ecc_algo = string("ecc_algo", f);
    let mut ok2 = true;
    let mut uint = |key: &str, f: &mut Findings| -> u64 {
        match item.get(key) {
            Some(v @ Value::Int(_)) => match v.as_u64() {
                Some(u) => u,
                None => {
                    f.error(
                        "fold.index.bad_type",
                        at,
                        format!("{label}: {key} is not an unsigned 64-bit integer"),
                    );
                    ok2 = false;
                    0
                }
            },
            Some(v) => {
                f.error(
                    "fold.index.bad_type",
                    at,
                    format!("{label}: {key} is a {}, expected an integer", v.type_name()),
                );
                ok2 = false;
                0
            }
            None => {
                f.error("fold.index.missing_key", at, format!("{label}: missing {key:?}"));
                ok2 = false;
                0
            }
        }
    };
    let flags = uint("flags", f);
    let offset = uint("offset", f);
    let header_len = uint("header_len", f);
    let comp_len = uint("comp_len", f);
    let uncomp_len = uint("uncomp_len", f);
    let crc32c = uint("crc32c", f);
    let ecc_len = uint("ecc_len", f);
    if !(ok && ok2) {
        return None;
    }
    let mut good = true;
    if ctype.len() != 4 || !ctype.is_ascii() {
        f.error(
            "fold.index.bad_ctype",
            at,
            format!("{label}: ctype {ctype:?} is not 4 ASCII characters"),
        );
        good = false;
    }
    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        f.error(
            "fold.index.bad_sha256",
            at,
            format!("{label}: sha256 {sha256:?} is not 64 lowercase hex digits"),
        );
    }
    if header_len != CHUNK_HEADER_LEN {
        f.error(
            "fold.index.header_len",
            at,
            format!("{label}: header_len {header_len}, must be 32"),
        );
    }
    if crc32c > u32::MAX as u64 {
        f.error(
            "fold.index.bad_type",
            at,
            format!("{label}: crc32c {crc32c} does not fit 32 bits"),
        );
    }
    // No file is 4 EiB long: the bound keeps `offset + 32 + comp_len + ecc_len` inside u64,
    // so no sum over an entry's declared numbers can overflow.
    for (key, v) in [
        ("offset", offset),
        ("comp_len", comp_len),
        ("uncomp_len", uncomp_len),
        ("ecc_len", ecc_len),
    ] {
        if v > MAX_DECLARED {
            f.error(
                "fold.index.out_of_range",
                at,
                format!("{label}: {key} {v} is beyond any file (above 2^62)"),
            );
            good = false;
        }
    }
    if !good {
        return None;
    }
    Some(FoldEntry {
        pos,
        name,
        ctype,
        flags,
        offset,
        header_len,
        comp_len,
        uncomp_len,
        crc32c,
        sha256,
        ecc_algo,
        ecc_len,
    })
}
