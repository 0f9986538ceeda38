//! Writing VOLP: a compact JSON header (keys in spec order, then metadata), known as soon as
//! the array's dtype and shape are, then one zstd frame compressed as the values arrive. The
//! frame records its content size and a content checksum, so readers can check both.

use rasterpack_common::stream::SequentialCursor;
use rasterpack_common::{ArrayInfo, ArraySink, Error, ErrorKind, NdArray, Output, Result, WriteOptions};
use serde_json::{Map, Value};
use zstd::zstd_safe::{CCtx, CParameter, InBuffer, OutBuffer};

use crate::model::VOLP_DTYPES;
use crate::raw::{KNOWN_KEYS, MAGIC, MAX_BODY_LEN, MAX_HEADER_LEN};

/// zstd level used when the caller has no preference.
pub const DEFAULT_LEVEL: i32 = 3;

/// The attribute a VOLP source puts its uninterpreted header keys in (an object of key -> JSON
/// text, in file order); the writer appends them to the new header as written.
pub const UNKNOWN_KEYS_ATTR: &str = "volp_unknown_keys";

/// The levels [`level_ok`] takes, for messages.
const LEVELS: &str = "1..=22, or -1 down to zstd's fastest, -131072";

/// A zstd level the writer takes: 1..=22 (as `zstd -1` .. `zstd --ultra -22`), or a negative
/// "fast" level down to libzstd's minimum (`zstd --fast=N`; the reference packer passes them
/// to libzstd as given). 0 is refused: libzstd reads it as "its default", which says nothing.
pub fn level_ok(level: i32) -> bool {
    level != 0 && (zstd::zstd_safe::min_c_level()..=zstd::zstd_safe::max_c_level().min(22)).contains(&level)
}

/// Compressed bytes are written out in pieces of about this size.
const OUT_PIECE: usize = 1 << 20;

/// What goes into a VOLP header besides dtype and shape, and how hard to compress.
///
/// Fields left `None` come from the array's attributes when it has them (`scale`, `offset`,
/// `bbox`, `levels`, `variable`, `valid_time`, and its name as `variable`), else the spec's
/// defaults (scale 1.0, offset 0.0).
#[derive(Debug, Clone, PartialEq)]
pub struct VolpWriteOptions {
    /// `scale` of `physical = stored * scale + offset`.
    pub scale: Option<f64>,
    /// `offset` of `physical = stored * scale + offset`.
    pub offset: Option<f64>,
    /// Further header keys (`bbox`, `levels`, `variable`, `valid_time` or any key of your own),
    /// written after the required ones. The keys the header itself uses (`version`, `shape`,
    /// `dtype`, `compression`, `scale`, `offset`) are refused.
    pub metadata: Map<String, Value>,
    /// zstd level: 1..=22, or a negative "fast" level down to zstd's minimum (-131072), as the
    /// reference packer accepts (see [`level_ok`]).
    pub level: i32,
}

impl Default for VolpWriteOptions {
    fn default() -> Self {
        VolpWriteOptions {
            scale: None,
            offset: None,
            metadata: Map::new(),
            level: DEFAULT_LEVEL,
        }
    }
}

impl VolpWriteOptions {
    /// The options `convert` passes: `--compress zstd` or `zstd:LEVEL` (see [`level_ok`]).
    pub fn from_write_options(opts: &WriteOptions) -> Result<VolpWriteOptions> {
        let level = match opts.compress.as_deref() {
            None => DEFAULT_LEVEL,
            Some(c) if c.eq_ignore_ascii_case("zstd") => DEFAULT_LEVEL,
            Some(c) => c
                .split_once(':')
                .filter(|(name, _)| name.eq_ignore_ascii_case("zstd"))
                .and_then(|(_, l)| l.parse::<i32>().ok())
                .filter(|&l| level_ok(l))
                .ok_or_else(|| {
                    Error::usage(format!(
                        "VOLP compression must be \"zstd\" or \"zstd:LEVEL\" ({}), not {c:?}",
                        LEVELS
                    ))
                })?,
        };
        Ok(VolpWriteOptions {
            level,
            ..VolpWriteOptions::default()
        })
    }

    /// The header for an array of `info` (dtype and shape already checked).
    fn header_json(&self, info: &ArrayInfo, shape: [u64; 3]) -> Result<Vec<u8>> {
        let attr = |key: &str| info.attrs.get(key).and_then(Value::as_f64).filter(|v| v.is_finite());
        let scale = self.scale.or_else(|| attr("scale")).unwrap_or(1.0);
        let offset = self.offset.or_else(|| attr("offset")).unwrap_or(0.0);
        if !scale.is_finite() || !offset.is_finite() {
            return Err(Error::usage(format!(
                "scale ({scale}) and offset ({offset}) must be finite numbers"
            )));
        }
        let mut h = Map::new();
        h.insert("version".into(), Value::from(1));
        h.insert("shape".into(), Value::from(shape.to_vec()));
        h.insert("dtype".into(), Value::from(info.dtype.name()));
        h.insert("compression".into(), Value::from("zstd"));
        h.insert("scale".into(), Value::from(scale));
        h.insert("offset".into(), Value::from(offset));
        for key in ["bbox", "levels", "variable", "valid_time"] {
            if let Some(v) = info.attrs.get(key) {
                h.insert(key.into(), v.clone());
            }
        }
        for (k, v) in &self.metadata {
            if KNOWN_KEYS[..6].contains(&k.as_str()) {
                return Err(Error::usage(format!(
                    "metadata key \"{k}\" is reserved for the VOLP header itself"
                )));
            }
            h.insert(k.clone(), v.clone());
        }
        if let (false, Some(name)) = (h.contains_key("variable"), &info.name) {
            h.insert("variable".into(), Value::from(name.clone()));
        }
        // Keys a VOLP source did not interpret go last, in their order, their values copied as
        // written (a 30-digit integer stays one); a key already written above is not repeated.
        let carried: Vec<(&String, &str)> = match info.attrs.get(UNKNOWN_KEYS_ATTR) {
            Some(Value::Object(keys)) => keys
                .iter()
                .filter(|(k, _)| !h.contains_key(*k) && !KNOWN_KEYS.contains(&k.as_str()))
                .filter_map(|(k, v)| Some((k, v.as_str()?)))
                .filter(|(_, text)| crate::json::parse(text, 64).is_ok())
                .collect(),
            _ => Vec::new(),
        };
        let mut header =
            serde_json::to_vec(&Value::Object(h)).map_err(|e| Error::usage(format!("header JSON: {e}")))?;
        if !carried.is_empty() {
            header.pop(); // the closing brace
            for (k, text) in carried {
                header.push(b',');
                header.extend_from_slice(
                    serde_json::to_string(k)
                        .map_err(|e| Error::usage(format!("header JSON: {e}")))?
                        .as_bytes(),
                );
                header.push(b':');
                header.extend_from_slice(text.as_bytes());
            }
            header.push(b'}');
        }
        if header.len() > MAX_HEADER_LEN as usize {
            return Err(Error::usage(format!(
                "header of {} bytes exceeds VOLP's 1 MiB limit",
                header.len()
            )));
        }
        Ok(header)
    }
}

/// Check that VOLP can hold an array of `info`: one of the five dtypes, 3-D with every
/// dimension >= 1, at most 256 MiB of values. Returns the shape and the byte count.
fn check_target(info: &ArrayInfo) -> Result<([u64; 3], u64)> {
    if !VOLP_DTYPES.contains(&info.dtype) {
        return Err(Error::usage(format!(
            "VOLP cannot store {} values: only uint8, int16, int32, float32 and float64",
            info.dtype.name()
        )));
    }
    let shape: [u64; 3] = info.shape.as_slice().try_into().map_err(|_| {
        Error::usage(format!(
            "VOLP holds 3-D volumes [levels, lat, lon]; this array has {} dimension(s) {:?}",
            info.shape.len(),
            info.shape
        ))
    })?;
    if shape.contains(&0) {
        return Err(Error::usage(format!(
            "VOLP shape {shape:?} has an empty dimension: every dimension must be >= 1"
        )));
    }
    let bytes = rasterpack_common::byte_len(info.dtype, &shape).filter(|&b| b <= MAX_BODY_LEN);
    let bytes = bytes.ok_or_else(|| {
        Error::new(
            ErrorKind::Usage,
            "volp.limit.body",
            None,
            format!(
                "an array of shape {shape:?} and dtype {} exceeds VOLP's decoded body limit of 256 MiB \
                 (268,435,456 bytes); readers would refuse it",
                info.dtype.name()
            ),
        )
    })?;
    Ok((shape, bytes))
}

/// Writes one array as a VOLP file as its values arrive (an [`ArraySink`]): the header at
/// [`ArraySink::begin`] (which refuses, before any value arrives, what VOLP cannot hold: another
/// dtype, not 3-D, more than 256 MiB), the values through zstd's streaming compressor, the end of
/// the frame at [`ArraySink::finish`]. Values must come in order (it is not random-access);
/// memory stays at zstd's working set whatever the array's size.
pub struct VolpWriter<'a> {
    out: Output<'a>,
    opts: VolpWriteOptions,
    cctx: Option<CCtx<'static>>,
    cursor: SequentialCursor,
    expected: u64,
    pending: Vec<u8>,
}

impl std::fmt::Debug for VolpWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VolpWriter")
            .field("out", &self.out)
            .field("opts", &self.opts)
            .field("position", &self.cursor.position)
            .field("expected", &self.expected)
            .finish()
    }
}

impl<'a> VolpWriter<'a> {
    /// A writer onto `out` (a file or any [`Write`](std::io::Write) as [`Output::Stream`]).
    pub fn new(out: Output<'a>, opts: VolpWriteOptions) -> VolpWriter<'a> {
        VolpWriter {
            out,
            opts,
            cctx: None,
            cursor: SequentialCursor::default(),
            expected: 0,
            pending: Vec::new(),
        }
    }

    /// Encode a whole array in memory as a VOLP file.
    pub fn encode(array: &NdArray, opts: &VolpWriteOptions) -> Result<Vec<u8>> {
        let mut bytes = Vec::new();
        let mut w = VolpWriter::new(Output::Stream(&mut bytes), opts.clone());
        w.begin(&ArrayInfo::of(array))?;
        w.write_at(0, &array.data)?;
        w.finish()?;
        drop(w);
        Ok(bytes)
    }

    fn write_out(&mut self, bytes: &[u8]) -> Result<()> {
        self.out
            .as_write()
            .write_all(bytes)
            .map_err(|e| Error::io("writing VOLP", &e))
    }

    /// Write out the compressed bytes collected so far.
    fn drain(&mut self) -> Result<()> {
        let pending = std::mem::take(&mut self.pending);
        let res = self.write_out(&pending);
        self.pending = pending;
        self.pending.clear();
        res
    }

    fn context(&mut self) -> Result<&mut CCtx<'static>> {
        self.cctx
            .as_mut()
            .ok_or_else(|| Error::usage("internal: VolpWriter used before begin or after finish"))
    }
}

fn zstd_failure(code: usize) -> Error {
    Error::new(
        ErrorKind::Io,
        "volp.zstd_compress",
        None,
        format!("zstd compression failed: {}", zstd::zstd_safe::get_error_name(code)),
    )
}

impl ArraySink for VolpWriter<'_> {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        let (shape, bytes) = check_target(info)?;
        if !level_ok(self.opts.level) {
            return Err(Error::usage(format!(
                "zstd level {} is outside {LEVELS}",
                self.opts.level
            )));
        }
        let header = self.opts.header_json(info, shape)?;
        let mut cctx = CCtx::try_create().ok_or_else(|| Error::usage("could not create a zstd context"))?;
        for p in [
            CParameter::CompressionLevel(self.opts.level),
            CParameter::ContentSizeFlag(true),
            CParameter::ChecksumFlag(true),
        ] {
            cctx.set_parameter(p).map_err(zstd_failure)?;
        }
        cctx.set_pledged_src_size(Some(bytes)).map_err(zstd_failure)?;
        let mut prefix = MAGIC.to_vec();
        prefix.extend_from_slice(&(header.len() as u32).to_le_bytes());
        prefix.extend_from_slice(&header);
        self.write_out(&prefix)?;
        self.cctx = Some(cctx);
        self.expected = bytes;
        self.cursor = SequentialCursor::default();
        self.pending = Vec::with_capacity(OUT_PIECE + CCtx::out_size());
        Ok(())
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        if offset
            .checked_add(data.len() as u64)
            .is_none_or(|end| end > self.expected)
        {
            return Err(Error::usage(format!(
                "internal: a write of {} bytes at {offset} falls outside the {}-byte volume",
                data.len(),
                self.expected
            )));
        }
        self.cursor.advance(offset, data.len())?;
        let mut input = InBuffer::around(data);
        while input.pos() < data.len() {
            if self.pending.capacity() - self.pending.len() < CCtx::out_size() {
                self.drain()?;
            }
            let mut pending = std::mem::take(&mut self.pending);
            let at = pending.len();
            let res = {
                let cctx = self.context()?;
                let mut out = OutBuffer::around_pos(&mut pending, at);
                cctx.compress_stream2(
                    &mut out,
                    &mut input,
                    zstd::zstd_safe::zstd_sys::ZSTD_EndDirective::ZSTD_e_continue,
                )
            };
            self.pending = pending;
            res.map_err(zstd_failure)?;
        }
        if self.pending.len() >= OUT_PIECE {
            self.drain()?;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        if self.cursor.position != self.expected {
            return Err(Error::usage(format!(
                "internal: the source delivered {} of {} volume bytes",
                self.cursor.position, self.expected
            )));
        }
        loop {
            if self.pending.capacity() - self.pending.len() < CCtx::out_size() {
                self.drain()?;
            }
            let mut pending = std::mem::take(&mut self.pending);
            let at = pending.len();
            let res = {
                let cctx = self.context()?;
                let mut out = OutBuffer::around_pos(&mut pending, at);
                cctx.end_stream(&mut out)
            };
            self.pending = pending;
            if res.map_err(zstd_failure)? == 0 {
                break;
            }
        }
        self.drain()?;
        self.cctx = None;
        self.out.as_write().flush().map_err(|e| Error::io("writing VOLP", &e))
    }
}
