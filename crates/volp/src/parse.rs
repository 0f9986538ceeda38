//! Bytes -> checked structures. Every size from the file is compared with the input length and
//! the spec limits before anything is allocated; nothing here panics on hostile input.

use rasterpack_common::{DType, Error, ErrorKind, Findings, Limits};
use serde_json::{Map, Value};

use crate::json::{self, JValue, JsonErrorKind, Node};
use crate::model::{Header, Metadata, VolpFile, DTYPES};
use crate::raw::*;

/// A caller limit refused a size: give it the VOLP namespace (`volp.limit.alloc`).
pub fn alloc_limit(e: Error) -> Error {
    Error::new(e.kind, "volp.limit.alloc", e.offset, e.message)
}

/// Read and check the 8-byte prefix.
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
/// text limit and the file size; return the header bytes.
pub fn header_bytes<'a>(data: &'a [u8], prefix: &RawPrefix, limits: &Limits) -> Result<&'a [u8], Error> {
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
    let end = PREFIX_LEN + len as usize;
    if end > data.len() {
        return Err(Error::new(
            ErrorKind::Truncated,
            "volp.header.truncated",
            Some(4),
            format!(
                "header length {len} needs bytes up to offset {end}, the file has only {} bytes",
                data.len()
            ),
        ));
    }
    Ok(&data[PREFIX_LEN..end])
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

/// The outcome of reading the header fields: the accepted header (when no rule failed), every
/// broken rule, and warnings/notes.
#[derive(Debug, Clone, Default)]
pub struct HeaderCheck {
    pub header: Option<Header>,
    pub errors: Vec<Error>,
    pub notes: Findings,
    /// What could be read even when some rule failed (for inspect of invalid files).
    pub dtype: Option<DType>,
    pub shape: Option<[u64; 3]>,
    /// False when `compression` is present and not zstd: the body cannot be interpreted.
    pub compression_ok: bool,
    pub json: Map<String, Value>,
}

/// An integral JSON number, exactly: `2`, `2.0`, `2e0`, `20e-1` are 2; `2.5` and `1e-400` are
/// not integral. Computed from the digits, never through a float.
enum Integral {
    Value { negative: bool, magnitude: u64 },
    TooLarge { negative: bool },
    Fraction,
}

fn integral(raw: &str) -> Integral {
    let (negative, body) = match raw.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, raw),
    };
    let (mantissa, exp) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], &body[i + 1..]),
        None => (body, "0"),
    };
    let (int_part, frac_part) = match mantissa.find('.') {
        Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
        None => (mantissa, ""),
    };
    // Saturating exponent: anything beyond +-10^6 behaves like infinity here.
    let exp_neg = exp.starts_with('-');
    let exp_digits = exp.trim_start_matches(['+', '-']);
    let mut e: i64 = 0;
    for c in exp_digits.bytes() {
        e = (e * 10 + (c - b'0') as i64).min(1_000_000);
    }
    if exp_neg {
        e = -e;
    }
    let digits: Vec<u8> = int_part.bytes().chain(frac_part.bytes()).map(|c| c - b'0').collect();
    let mut e = e - frac_part.len() as i64;
    let mut sig: &[u8] = &digits;
    while let Some((&0, rest)) = sig.split_last() {
        sig = rest;
        e += 1;
    }
    while let Some((&0, rest)) = sig.split_first() {
        sig = rest;
    }
    if sig.is_empty() {
        return Integral::Value { negative, magnitude: 0 };
    }
    if e < 0 {
        return Integral::Fraction;
    }
    if sig.len() as i64 + e > 20 {
        return Integral::TooLarge { negative };
    }
    let mut m: u64 = 0;
    for &d in sig {
        match m.checked_mul(10).and_then(|x| x.checked_add(d as u64)) {
            Some(x) => m = x,
            None => return Integral::TooLarge { negative },
        }
    }
    for _ in 0..e {
        match m.checked_mul(10) {
            Some(x) => m = x,
            None => return Integral::TooLarge { negative },
        }
    }
    Integral::Value { negative, magnitude: m }
}

/// Apply every header rule of the spec and the ERRATA VOLP table.
pub fn check_header(members: &[(String, Node)], base: u64) -> HeaderCheck {
    let mut c = HeaderCheck {
        compression_ok: true,
        ..Default::default()
    };
    let get = |k: &str| members.iter().find(|(key, _)| key == k).map(|(_, n)| n);
    let at = |n: &Node| base + n.offset as u64;
    for (k, v) in members {
        c.json.insert(k.clone(), v.value.to_serde());
    }

    // version: integral number or null/missing; < 1 -> 1.
    let mut version = 1u64;
    match get("version") {
        None => c
            .notes
            .info("volp.version.missing", None, "no \"version\" key: read as version 1"),
        Some(n) => match &n.value {
            JValue::Null => c.notes.info(
                "volp.version.missing",
                Some(at(n)),
                "\"version\" is null: read as version 1",
            ),
            JValue::Number { raw, .. } => match integral(raw) {
                Integral::Value { negative, magnitude } if negative || magnitude < 1 => c.notes.info(
                    "volp.version.defaulted",
                    Some(at(n)),
                    format!("version {raw} is below 1: read as version 1"),
                ),
                Integral::Value { magnitude, .. } => version = magnitude,
                Integral::TooLarge { negative: true } => c.notes.info(
                    "volp.version.defaulted",
                    Some(at(n)),
                    format!("version {raw} is below 1: read as version 1"),
                ),
                Integral::TooLarge { negative: false } => version = u64::MAX,
                Integral::Fraction => c.errors.push(Error::invalid(
                    "volp.version.invalid",
                    at(n),
                    format!("\"version\" must be an integer, found {raw}"),
                )),
            },
            other => c.errors.push(Error::invalid(
                "volp.version.invalid",
                at(n),
                format!("\"version\" must be an integer, found {}", other.type_name()),
            )),
        },
    }
    if version > 1 {
        c.notes.info(
            "volp.version.newer",
            get("version").map(at),
            format!("version {version} is newer than 1: decoded with the version 1 layout"),
        );
    }

    // dtype: exactly one of the five names.
    let mut dtype = None;
    match get("dtype") {
        None => c.errors.push(Error::invalid_at(
            "volp.dtype.missing",
            Some(base),
            "required key \"dtype\" is missing",
        )),
        Some(n) => match &n.value {
            JValue::String(s) => match DType::from_name(s).filter(|d| DTYPES.contains(d)) {
                Some(d) => dtype = Some(d),
                None => c.errors.push(Error::invalid(
                    "volp.dtype.unsupported",
                    at(n),
                    format!(
                        "dtype \"{}\" is not one of uint8, int16, int32, float32, float64",
                        s.escape_debug()
                    ),
                )),
            },
            other => c.errors.push(Error::invalid(
                "volp.dtype.invalid",
                at(n),
                format!("\"dtype\" must be a string, found {}", other.type_name()),
            )),
        },
    }
    c.dtype = dtype;

    // shape: exactly 3 integral numbers >= 1.
    let mut shape = None;
    match get("shape") {
        None => c.errors.push(Error::invalid_at(
            "volp.shape.missing",
            Some(base),
            "required key \"shape\" is missing",
        )),
        Some(n) => match &n.value {
            JValue::Array(items) if items.len() == 3 => {
                let mut dims = [0u64; 3];
                let mut ok = true;
                for (i, item) in items.iter().enumerate() {
                    let problem = match &item.value {
                        JValue::Number { raw, .. } => match integral(raw) {
                            Integral::Value {
                                negative: false,
                                magnitude,
                            } if magnitude >= 1 => {
                                dims[i] = magnitude;
                                None
                            }
                            Integral::Value { .. } | Integral::TooLarge { negative: true } => {
                                Some(format!("{raw} is below 1"))
                            }
                            Integral::TooLarge { negative: false } => Some(format!("{raw} does not fit in 64 bits")),
                            Integral::Fraction => Some(format!("{raw} is not an integer")),
                        },
                        other => Some(format!("found {}", other.type_name())),
                    };
                    if let Some(p) = problem {
                        ok = false;
                        c.errors.push(Error::invalid(
                            "volp.shape.invalid",
                            at(item),
                            format!("shape[{i}] must be an integer >= 1: {p}"),
                        ));
                    }
                }
                if ok {
                    shape = Some(dims);
                }
            }
            JValue::Array(items) => c.errors.push(Error::invalid(
                "volp.shape.invalid",
                at(n),
                format!(
                    "shape must have exactly 3 dimensions [levels, lat, lon], found {}",
                    items.len()
                ),
            )),
            other => c.errors.push(Error::invalid(
                "volp.shape.invalid",
                at(n),
                format!("shape must be an array of 3 integers, found {}", other.type_name()),
            )),
        },
    }
    c.shape = shape;

    // Sizes: checked products, then the 256 MiB limit (before any decompression).
    if let Some(dims) = shape {
        let shape_at = get("shape").map(at);
        let elements = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        match elements {
            None => c.errors.push(Error::invalid_at(
                "volp.shape.overflow",
                shape_at,
                format!("shape {dims:?} has more elements than 64 bits can count"),
            )),
            Some(elements) => {
                if let Some(d) = dtype {
                    match elements.checked_mul(d.size() as u64) {
                        None => c.errors.push(Error::invalid_at(
                            "volp.shape.overflow",
                            shape_at,
                            format!("shape {dims:?} x {} bytes overflows 64 bits", d.size()),
                        )),
                        Some(len) if len > MAX_BODY_LEN => c.errors.push(Error::invalid_at(
                            "volp.limit.body",
                            shape_at,
                            format!(
                                "decoded body would be {len} bytes, above the limit of {MAX_BODY_LEN} bytes (256 MiB)"
                            ),
                        )),
                        Some(_) => {}
                    }
                }
            }
        }
    }

    // compression: case-insensitive "zstd"; missing -> zstd with a warning.
    let mut compression = "zstd".to_string();
    match get("compression") {
        None => c.notes.warning(
            "volp.compression.missing",
            None,
            "no \"compression\" key: assuming \"zstd\"",
        ),
        Some(n) => match &n.value {
            JValue::String(s) if s.eq_ignore_ascii_case("zstd") => compression = s.clone(),
            JValue::String(s) => {
                c.compression_ok = false;
                c.errors.push(Error::invalid(
                    "volp.compression.unknown",
                    at(n),
                    format!(
                        "compression \"{}\" is not supported: only \"zstd\" is defined",
                        s.escape_debug()
                    ),
                ))
            }
            other => {
                c.compression_ok = false;
                c.errors.push(Error::invalid(
                    "volp.compression.unknown",
                    at(n),
                    format!(
                        "\"compression\" must be the string \"zstd\", found {}",
                        other.type_name()
                    ),
                ))
            }
        },
    }

    // scale / offset: finite numbers, else defaults with a warning.
    let number_or_default = |key: &str, default: f64, c: &mut HeaderCheck| -> f64 {
        match get(key) {
            None => {
                c.notes.info(
                    format!("volp.{key}.missing"),
                    None,
                    format!("no \"{key}\" key: using {default:?}"),
                );
                default
            }
            Some(n) => match &n.value {
                JValue::Number { value, .. } if value.is_finite() => *value,
                other => {
                    let what = match other {
                        JValue::Number { raw, .. } => format!("{raw} (out of the f64 range)"),
                        JValue::String(s) => format!("the string \"{}\"", s.escape_debug()),
                        o => o.type_name().to_string(),
                    };
                    c.notes.warning(
                        format!("volp.{key}.invalid"),
                        Some(at(n)),
                        format!("\"{key}\" is {what}, not a finite number: using {default:?}"),
                    );
                    default
                }
            },
        }
    };
    let scale = number_or_default("scale", 1.0, &mut c);
    let offset = number_or_default("offset", 0.0, &mut c);

    // Metadata: shown, remarks at most.
    let meta = |k: &str| get(k).map(|n| n.value.to_serde());
    let metadata = Metadata {
        bbox: meta("bbox"),
        levels: meta("levels"),
        variable: meta("variable"),
        valid_time: meta("valid_time"),
    };
    check_metadata(members, shape, base, &mut c.notes);
    let mut unknown = Map::new();
    for (k, v) in members {
        if !KNOWN_KEYS.contains(&k.as_str()) {
            unknown.insert(k.clone(), v.value.to_serde());
        }
    }
    if !unknown.is_empty() {
        let names: Vec<&str> = unknown.keys().map(|s| s.as_str()).collect();
        c.notes.info(
            "volp.header.unknown_keys",
            None,
            format!("unknown header keys ignored: {}", names.join(", ")),
        );
    }

    if c.errors.is_empty() {
        if let (Some(dtype), Some(shape)) = (dtype, shape) {
            c.header = Some(Header {
                version,
                dtype,
                shape,
                scale,
                offset,
                compression,
                metadata,
                unknown,
            });
        }
    }
    c
}

fn check_metadata(members: &[(String, Node)], shape: Option<[u64; 3]>, base: u64, notes: &mut Findings) {
    for (k, n) in members {
        let at = Some(base + n.offset as u64);
        match (k.as_str(), &n.value) {
            ("levels", JValue::Array(items)) => {
                if let Some(s) = shape {
                    if items.len() as u64 != s[0] {
                        notes.info(
                            "volp.metadata.levels_len",
                            at,
                            format!(
                                "\"levels\" has {} entries for shape[0] = {} (not used for decoding)",
                                items.len(),
                                s[0]
                            ),
                        );
                    }
                }
            }
            ("levels", v) => notes.info(
                "volp.metadata.type",
                at,
                format!("\"levels\" is {}, expected an array", v.type_name()),
            ),
            ("bbox", JValue::Object(m)) => {
                let missing: Vec<&str> = ["west", "south", "east", "north", "bottom", "top"]
                    .into_iter()
                    .filter(|key| {
                        !m.iter()
                            .any(|(mk, mv)| mk == key && matches!(mv.value, JValue::Number { .. }))
                    })
                    .collect();
                if !missing.is_empty() {
                    notes.info(
                        "volp.metadata.bbox",
                        at,
                        format!("\"bbox\" lacks numeric {}", missing.join(", ")),
                    );
                }
            }
            ("bbox", v) => notes.info(
                "volp.metadata.type",
                at,
                format!("\"bbox\" is {}, expected an object", v.type_name()),
            ),
            ("variable" | "valid_time", JValue::String(_)) => {}
            ("variable" | "valid_time", v) => notes.info(
                "volp.metadata.type",
                at,
                format!("\"{k}\" is {}, expected a string", v.type_name()),
            ),
            _ => {}
        }
    }
}

/// A file read up to (not including) the body: the prefix and header rules applied.
#[derive(Debug, Clone)]
pub struct Structure {
    pub prefix: RawPrefix,
    pub check: HeaderCheck,
    pub body_offset: u64,
    pub body_len: u64,
}

impl Structure {
    pub fn file(&self) -> Option<VolpFile> {
        self.check.header.clone().map(|header| VolpFile {
            header,
            header_len: self.prefix.header_len,
            body_offset: self.body_offset,
            body_len: self.body_len,
            header_json: self.check.json.clone(),
        })
    }
}

/// Prefix + header. Errors here are fatal (nothing after them can be read).
pub fn parse_structure(data: &[u8], limits: &Limits) -> Result<Structure, Error> {
    let prefix = parse_prefix(data)?;
    let hb = header_bytes(data, &prefix, limits)?;
    let members = parse_header_json(hb, limits)?;
    let check = check_header(&members, PREFIX_LEN as u64);
    let body_offset = (PREFIX_LEN + hb.len()) as u64;
    Ok(Structure {
        prefix,
        check,
        body_offset,
        body_len: data.len() as u64 - body_offset,
    })
}

/// One frame of the body.
#[derive(Debug, Clone, Copy)]
pub enum Frame<'a> {
    /// A zstd frame: its bytes and the content size its header declares, if any.
    Zstd {
        offset: u64,
        bytes: &'a [u8],
        content_size: Option<u64>,
        max_output: u64,
    },
    /// A skippable frame (magic 0x184D2A5?): ignored.
    Skippable { offset: u64, len: u64 },
}

fn zstd_err(code: usize) -> &'static str {
    zstd::zstd_safe::get_error_name(code)
}

/// Split the body into frames, checking each frame's structure (complete blocks, nothing after
/// the last frame) without decompressing anything.
pub fn frames(body: &[u8], body_offset: u64) -> Result<Vec<Frame<'_>>, Error> {
    if body.is_empty() {
        return Err(Error::invalid(
            "volp.body.empty",
            body_offset,
            "the body is empty: a zstd frame is required",
        ));
    }
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < body.len() {
        let rest = &body[pos..];
        let abs = body_offset + pos as u64;
        let not_a_frame = |what: &str| {
            if out.is_empty() {
                Error::invalid(
                    "volp.body.decompress",
                    abs,
                    format!("the body is not zstd data: {what}"),
                )
            } else {
                Error::invalid(
                    "volp.body.trailing_bytes",
                    abs,
                    format!("{} byte(s) after the last zstd frame: {what}", rest.len()),
                )
            }
        };
        if rest.len() < 4 {
            return Err(not_a_frame("too short for a frame magic"));
        }
        let magic = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        if magic & SKIPPABLE_MAGIC_MASK == SKIPPABLE_MAGIC_BASE {
            if rest.len() < 8 {
                return Err(Error::invalid(
                    "volp.body.decompress",
                    abs,
                    "skippable frame header is truncated",
                ));
            }
            let len = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]) as u64;
            let total = 8 + len;
            if total > rest.len() as u64 {
                return Err(Error::invalid(
                    "volp.body.decompress",
                    abs,
                    format!("skippable frame declares {len} bytes, only {} remain", rest.len() - 8),
                ));
            }
            out.push(Frame::Skippable {
                offset: abs,
                len: total,
            });
            pos += total as usize;
            continue;
        }
        if magic != ZSTD_FRAME_MAGIC {
            return Err(not_a_frame(&format!("magic 0x{magic:08x} is not a zstd frame")));
        }
        let content_size = zstd::zstd_safe::get_frame_content_size(rest)
            .map_err(|_| Error::invalid("volp.body.decompress", abs, "zstd frame header is corrupt or truncated"))?;
        let size = zstd::zstd_safe::find_frame_compressed_size(rest).map_err(|code| {
            Error::invalid(
                "volp.body.decompress",
                abs,
                format!("zstd frame is corrupt or truncated: {}", zstd_err(code)),
            )
        })?;
        if size == 0 || size > rest.len() {
            return Err(Error::invalid("volp.body.decompress", abs, "zstd frame is truncated"));
        }
        let bytes = &rest[..size];
        let max_output = content_size.unwrap_or_else(|| block_bound(bytes));
        out.push(Frame::Zstd {
            offset: abs,
            bytes,
            content_size,
            max_output,
        });
        pos += size;
    }
    if !out.iter().any(|f| matches!(f, Frame::Zstd { .. })) {
        return Err(Error::invalid(
            "volp.body.decompress",
            body_offset,
            "the body holds only skippable frames, no zstd data",
        ));
    }
    Ok(out)
}

/// Upper bound of what a zstd frame without a content size can produce, from its block
/// headers (RFC 8878 3.1.1.2): raw and RLE blocks say their size, a compressed block yields at
/// most 128 KiB. Only called on frames zstd already measured; any surprise gives `u64::MAX`
/// (no bound), never a wrong one.
fn block_bound(frame: &[u8]) -> u64 {
    let Some(&fhd) = frame.get(4) else { return u64::MAX };
    let fcs_flag = fhd >> 6;
    let single = (fhd >> 5) & 1 == 1;
    let dict_len = [0usize, 1, 2, 4][(fhd & 3) as usize];
    let fcs_len = match fcs_flag {
        0 => usize::from(single),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let mut pos = 5 + usize::from(!single) + dict_len + fcs_len;
    let mut bound = 0u64;
    loop {
        let Some(h) = frame.get(pos..pos + 3) else {
            return u64::MAX;
        };
        let h = u32::from_le_bytes([h[0], h[1], h[2], 0]);
        let (last, kind, size) = (h & 1 == 1, (h >> 1) & 3, (h >> 3) as u64);
        pos += 3;
        let (consumed, produced) = match kind {
            0 => (size, size),
            1 => (1, size),
            2 => (size, 128 << 10),
            _ => return u64::MAX,
        };
        bound = bound.saturating_add(produced);
        pos = match pos.checked_add(consumed as usize) {
            Some(p) if p <= frame.len() => p,
            _ => return u64::MAX,
        };
        if last {
            return bound;
        }
    }
}

/// Split the body into frames and check it can produce `expected` bytes at all, before any
/// output buffer is allocated: a few bytes of body never make rasterpack allocate 256 MiB.
pub fn plan_body(body: &[u8], body_offset: u64, expected: u64) -> Result<Vec<Frame<'_>>, Error> {
    let frames = frames(body, body_offset)?;
    let bound = frames.iter().fold(0u64, |acc, f| match f {
        Frame::Zstd { max_output, .. } => acc.saturating_add(*max_output),
        Frame::Skippable { .. } => acc,
    });
    if bound < expected {
        return Err(Error::invalid(
            "volp.body.size_mismatch",
            body_offset,
            format!("body can decode to at most {bound} bytes, shape and dtype require {expected}"),
        ));
    }
    Ok(frames)
}

/// What decoding the body found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BodyInfo {
    pub zstd_frames: u32,
    pub skippable_frames: u32,
}

/// Decode every frame straight into `out` (exactly the expected size). A frame that declares or
/// produces more than the space left is refused before/while decoding: zstd never writes past
/// the slice it is given, so no byte beyond the expected size is ever produced or allocated.
pub fn decode_body(body: &[u8], body_offset: u64, out: &mut [u8]) -> Result<BodyInfo, Error> {
    let frames = plan_body(body, body_offset, out.len() as u64)?;
    decode_frames(&frames, body_offset, out)
}

/// Plan the frames, check the expected size against `limits`, then decode into one buffer of
/// exactly that size: the body decode shared by `validate` and `inspect`.
pub fn decode_body_vec(
    body: &[u8],
    body_offset: u64,
    expected: u64,
    limits: &Limits,
) -> Result<(BodyInfo, Vec<u8>), Error> {
    let frames = plan_body(body, body_offset, expected)?;
    let n = limits
        .check_alloc(expected, "decoded body", Some(body_offset))
        .map_err(alloc_limit)?;
    let mut out = vec![0u8; n];
    let info = decode_frames(&frames, body_offset, &mut out)?;
    Ok((info, out))
}

/// Decode planned frames into `out` (see [`decode_body`]).
pub fn decode_frames(frames: &[Frame<'_>], body_offset: u64, out: &mut [u8]) -> Result<BodyInfo, Error> {
    let expected = out.len() as u64;
    let mut dctx = zstd::zstd_safe::DCtx::try_create().ok_or_else(|| {
        Error::new(
            ErrorKind::Io,
            "volp.zstd_context",
            None,
            "could not create a zstd context",
        )
    })?;
    let mut written = 0usize;
    let mut info = BodyInfo::default();
    for f in frames {
        match *f {
            Frame::Skippable { .. } => info.skippable_frames += 1,
            Frame::Zstd {
                offset,
                bytes,
                content_size,
                ..
            } => {
                info.zstd_frames += 1;
                let room = out.len() - written;
                if let Some(cs) = content_size {
                    if cs > room as u64 {
                        return Err(Error::invalid(
                            "volp.body.size_mismatch",
                            offset,
                            format!(
                                "zstd frame declares {cs} decoded bytes, more than the {room} left of the expected {expected} \
                                 (refused without decompressing)"
                            ),
                        ));
                    }
                }
                match dctx.decompress(&mut out[written..], bytes) {
                    Ok(n) if n <= room => written += n,
                    Ok(_) => {
                        return Err(Error::invalid(
                            "volp.body.decompress",
                            offset,
                            "zstd reported more output than it was given room for",
                        ))
                    }
                    Err(code) => {
                        let name = zstd_err(code);
                        return Err(if name.contains("too small") {
                            Error::invalid(
                                "volp.body.size_mismatch",
                                offset,
                                format!("zstd frame decodes past the expected {expected} bytes (stopped at the limit)"),
                            )
                        } else {
                            Error::invalid(
                                "volp.body.decompress",
                                offset,
                                format!("zstd decompression failed: {name}"),
                            )
                        });
                    }
                }
            }
        }
    }
    if written as u64 != expected {
        return Err(Error::invalid(
            "volp.body.size_mismatch",
            body_offset,
            format!("body decodes to {written} bytes, shape and dtype require {expected}"),
        ));
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(raw: &str) -> Option<u64> {
        match integral(raw) {
            Integral::Value {
                negative: false,
                magnitude,
            } => Some(magnitude),
            _ => None,
        }
    }

    #[test]
    fn integral_numbers_are_exact() {
        assert_eq!(int("2"), Some(2));
        assert_eq!(int("2.0"), Some(2));
        assert_eq!(int("2e0"), Some(2));
        assert_eq!(int("20E-1"), Some(2));
        assert_eq!(int("0.02e2"), Some(2));
        assert_eq!(int("18446744073709551615"), Some(u64::MAX));
        assert!(matches!(
            integral("18446744073709551616"),
            Integral::TooLarge { negative: false }
        ));
        assert!(matches!(
            integral("1e999999999999999999999"),
            Integral::TooLarge { negative: false }
        ));
        assert!(matches!(integral("2.5"), Integral::Fraction));
        assert!(matches!(integral("1.0000000000000000001"), Integral::Fraction));
        assert!(matches!(integral("1e-400"), Integral::Fraction));
        assert!(matches!(
            integral("-3"),
            Integral::Value {
                negative: true,
                magnitude: 3
            }
        ));
        assert!(matches!(integral("0e5"), Integral::Value { magnitude: 0, .. }));
    }
}
