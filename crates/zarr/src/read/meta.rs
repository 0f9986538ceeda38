//! Zarr node metadata (`zarr.json`, `.zarray`, `.zgroup`) checked before zarrs sees it: the
//! numbers a store declares (shape, chunk shape, shard shape) are bounded here with checked
//! arithmetic, and the features rasterpack has no counterpart for are named, so that zarrs is
//! only asked to open what can be read within the limits.
//!
//! Pure: bytes in, a [`NodeMeta`] or an [`Error`] out (no I/O), so it is fuzzed on its own
//! (`fuzz/fuzz_targets/zarr_meta.rs`).

use rasterpack_common::{DType, Error, Limits, Result};
use serde_json::Value;

/// Which metadata document a node was described by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaFile {
    /// Zarr v3 `zarr.json` (array or group).
    V3,
    /// Zarr v2 `.zarray`.
    V2Array,
    /// Zarr v2 `.zgroup`.
    V2Group,
}

impl MetaFile {
    /// The document's file name inside the node's directory.
    pub fn file_name(self) -> &'static str {
        match self {
            MetaFile::V3 => "zarr.json",
            MetaFile::V2Array => ".zarray",
            MetaFile::V2Group => ".zgroup",
        }
    }
}

/// What a node's metadata declares, as far as rasterpack needs it before opening it.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeMeta {
    /// A group: its children are found by listing the directory.
    Group {
        /// 2 or 3.
        zarr_format: u8,
    },
    /// An array.
    Array(ArrayMeta),
}

/// An array's declared layout, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrayMeta {
    /// 2 or 3.
    pub zarr_format: u8,
    /// Shape in C order.
    pub shape: Vec<u64>,
    /// The data type, or the name of one rasterpack has no counterpart for (unsupported).
    pub dtype: std::result::Result<DType, String>,
    /// Regular chunk shape (the shard shape when the array is sharded).
    pub chunk_shape: Vec<u64>,
    /// The unit rasterpack decodes at a time: the inner chunk of a sharded array, else the chunk.
    pub unit_shape: Vec<u64>,
    /// Codec names in order (v3 `codecs`; v2 filters then the compressor).
    pub codecs: Vec<String>,
    /// The bytes-to-bytes codecs of the (outer, unsharded) chain, in encoding order: what the
    /// decompression guard replays with a bounded output.
    pub byte_codecs: Vec<String>,
    /// Number of chunks (shards) the grid declares.
    pub chunk_count: u64,
    /// How a sharded array's inner chunks are found and decoded; `None` when not sharded.
    pub shard: Option<Box<ShardMeta>>,
}

/// The sharding codec's layout, as rasterpack reads it: the shard index located and checked
/// here, each inner chunk cut out of its shard by the index and decoded on its own, through
/// the decompression guard like a plain chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardMeta {
    /// The inner chunks' codec chain, as declared (zarrs builds it).
    pub inner_codecs: Vec<Value>,
    /// The inner chain's bytes-to-bytes codecs in encoding order (what the guard replays).
    pub inner_byte_codecs: Vec<String>,
    /// The index ends with a crc32c checksum (`index_codecs` `bytes`, `crc32c`).
    pub index_crc: bool,
    /// The index is at the end of the shard (`index_location`, `end` by default).
    pub index_at_end: bool,
    /// Inner chunks per shard.
    pub inner_count: u64,
}

impl ShardMeta {
    /// Bytes of the index: 16 per inner chunk, and the checksum.
    pub fn index_len(&self) -> u64 {
        self.inner_count * 16 + if self.index_crc { 4 } else { 0 }
    }
}

/// Codecs that turn an array into bytes (the end of the array-to-array part of a chain).
fn array_to_bytes(name: &str) -> bool {
    matches!(
        name,
        "bytes" | "sharding_indexed" | "vlen-utf8" | "vlen-bytes" | "zfp" | "pcodec" | "packbits"
    )
}

fn codec_name(c: &Value, what: &str) -> Result<String> {
    match c {
        Value::String(s) => Ok(s.clone()),
        Value::Object(o) => Ok(o
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("zarr.meta_codecs", what, "a codec has no name"))?
            .to_string()),
        _ => Err(bad("zarr.meta_codecs", what, "a codec is neither a name nor an object")),
    }
}

fn unsupported_sharding(what: &str, why: &str) -> Error {
    Error::unsupported(
        "zarr.codec_unsupported",
        None,
        format!("{what}: sharding_indexed {why}"),
    )
}

/// The sharding codec's configuration `config` within chains whose codecs `before` precede it
/// and `after` follow it, for shards of `shard` holding inner chunks of `inner`.
fn parse_sharding(
    config: Option<&Value>,
    before: usize,
    after: usize,
    inner: &[u64],
    shard: &[u64],
    what: &str,
    limits: &Limits,
) -> Result<ShardMeta> {
    // Inner chunks are read one at a time out of a shard as stored: a codec on the whole
    // shard (compressing it, or transposing the array first) would need it decoded whole.
    if before > 0 || after > 0 {
        return Err(unsupported_sharding(
            what,
            "with other codecs around it in the array's chain (rasterpack reads inner chunks out of shards as stored)",
        ));
    }
    let inner_codecs = config
        .and_then(|c| c.get("codecs"))
        .and_then(Value::as_array)
        .ok_or_else(|| bad("zarr.meta_codecs", what, "sharding_indexed has no codecs list"))?
        .clone();
    let mut inner_byte_codecs = Vec::new();
    let mut seen_array_to_bytes = false;
    for c in &inner_codecs {
        let name = codec_name(c, what)?;
        if name == "sharding_indexed" {
            return Err(unsupported_sharding(what, "nested in a shard"));
        }
        if seen_array_to_bytes {
            inner_byte_codecs.push(name.clone());
        }
        seen_array_to_bytes |= array_to_bytes(&name);
    }
    let index_codecs = config
        .and_then(|c| c.get("index_codecs"))
        .and_then(Value::as_array)
        .ok_or_else(|| bad("zarr.meta_codecs", what, "sharding_indexed has no index_codecs list"))?;
    let little = |c: &Value| {
        c.get("configuration")
            .and_then(|c| c.get("endian"))
            .is_none_or(|e| e.as_str() == Some("little"))
    };
    let names: Vec<String> = index_codecs
        .iter()
        .map(|c| codec_name(c, what))
        .collect::<Result<_>>()?;
    let index_crc = match names.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["bytes"] if little(&index_codecs[0]) => false,
        ["bytes", "crc32c"] if little(&index_codecs[0]) => true,
        _ => {
            return Err(unsupported_sharding(
                what,
                &format!("index_codecs {names:?} (rasterpack reads a little-endian index, with or without crc32c)"),
            ))
        }
    };
    let index_at_end = match config.and_then(|c| c.get("index_location")) {
        None => true,
        Some(Value::String(l)) if l == "end" => true,
        Some(Value::String(l)) if l == "start" => false,
        Some(other) => {
            return Err(bad(
                "zarr.meta_codecs",
                what,
                format!("index_location is {}, expected \"start\" or \"end\"", show(Some(other))),
            ))
        }
    };
    if shard.iter().zip(inner).any(|(&s, &i)| !s.is_multiple_of(i)) {
        return Err(bad(
            "zarr.meta_chunks",
            what,
            format!("shards of {shard:?} are not a whole number of inner chunks {inner:?}"),
        ));
    }
    let inner_count = check_grid(shard, inner, "sharding chunk_shape", what, limits)?;
    // Each inner chunk read reads the shard's index (and checks its checksum): bounded well
    // within the working set, since several inner chunks are decoded at once.
    let index_bytes = inner_count.saturating_mul(16);
    if index_bytes > limits.working_set / 16 {
        return Err(Error::limit(
            "limit.working_set",
            None,
            format!(
                "{what}: a shard of {shard:?} in inner chunks of {inner:?} has an index of {index_bytes} bytes, \
                 read with every inner chunk: above the {} bytes allowed (1/16 of the working set)",
                limits.working_set / 16
            ),
        ));
    }
    Ok(ShardMeta {
        inner_codecs,
        inner_byte_codecs,
        index_crc,
        index_at_end,
        inner_count,
    })
}

/// Largest number of dimensions rasterpack takes from a Zarr array (numpy's own limit is 64).
pub const MAX_RANK: usize = 64;

fn bad(code: &'static str, what: &str, message: impl Into<String>) -> Error {
    Error::invalid_at(code, None, format!("{what}: {}", message.into()))
}

/// Parse and check the metadata document `file` (named `what` in messages) of one node.
pub fn parse(bytes: &[u8], file: MetaFile, what: &str, limits: &Limits) -> Result<NodeMeta> {
    if bytes.len() as u64 > limits.max_text {
        return Err(Error::limit(
            "limit.text",
            None,
            format!(
                "{what}: {} bytes, above the limit of {} bytes",
                bytes.len(),
                limits.max_text
            ),
        ));
    }
    let doc: Value =
        serde_json::from_slice(bytes).map_err(|e| bad("zarr.meta_json", what, format!("not JSON: {e}")))?;
    // serde_json recurses on nesting; its own limit (128) keeps that bounded.
    let obj = doc
        .as_object()
        .ok_or_else(|| bad("zarr.meta_json", what, "not a JSON object"))?;
    let format = obj.get("zarr_format").and_then(Value::as_u64);
    match file {
        MetaFile::V3 => {
            if format != Some(3) {
                return Err(bad(
                    "zarr.meta_version",
                    what,
                    format!("zarr_format is {}, expected 3", show(obj.get("zarr_format"))),
                ));
            }
            match obj.get("node_type").and_then(Value::as_str) {
                Some("group") => Ok(NodeMeta::Group { zarr_format: 3 }),
                Some("array") => parse_v3_array(obj, what, limits).map(NodeMeta::Array),
                other => Err(bad(
                    "zarr.meta_node_type",
                    what,
                    format!("node_type is {}, expected \"array\" or \"group\"", show_str(other)),
                )),
            }
        }
        MetaFile::V2Group => {
            if format != Some(2) {
                return Err(bad(
                    "zarr.meta_version",
                    what,
                    format!("zarr_format is {}, expected 2", show(obj.get("zarr_format"))),
                ));
            }
            Ok(NodeMeta::Group { zarr_format: 2 })
        }
        MetaFile::V2Array => {
            if format != Some(2) {
                return Err(bad(
                    "zarr.meta_version",
                    what,
                    format!("zarr_format is {}, expected 2", show(obj.get("zarr_format"))),
                ));
            }
            parse_v2_array(obj, what, limits).map(NodeMeta::Array)
        }
    }
}

fn show(v: Option<&Value>) -> String {
    v.map_or_else(|| "missing".to_string(), |v| truncated(&v.to_string()))
}

fn show_str(v: Option<&str>) -> String {
    v.map_or_else(|| "missing".to_string(), |s| truncated(&format!("{s:?}")))
}

/// At most 80 characters of a value quoted in a message (a hostile document may hold megabytes).
fn truncated(s: &str) -> String {
    match s.char_indices().nth(80) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s.to_string(),
    }
}

fn u64_list(v: Option<&Value>, field: &str, what: &str) -> Result<Vec<u64>> {
    let list = v.and_then(Value::as_array).ok_or_else(|| {
        bad(
            "zarr.meta_shape",
            what,
            format!("{field} is {}, expected a list of integers", show(v)),
        )
    })?;
    if list.len() > MAX_RANK {
        return Err(Error::unsupported(
            "zarr.rank_unsupported",
            None,
            format!(
                "{what}: {field} has {} dimensions, more than the {MAX_RANK} rasterpack takes",
                list.len()
            ),
        ));
    }
    list.iter()
        .map(|x| {
            x.as_u64().ok_or_else(|| {
                bad(
                    "zarr.meta_shape",
                    what,
                    format!(
                        "{field} holds {}, not a non-negative integer",
                        truncated(&x.to_string())
                    ),
                )
            })
        })
        .collect()
}

/// Check a chunk shape against the array's shape; returns the number of chunks.
fn check_grid(shape: &[u64], chunks: &[u64], field: &str, what: &str, limits: &Limits) -> Result<u64> {
    if chunks.len() != shape.len() {
        return Err(bad(
            "zarr.meta_chunks",
            what,
            format!("{field} has {} dimensions, the shape {}", chunks.len(), shape.len()),
        ));
    }
    if chunks.contains(&0) {
        return Err(bad(
            "zarr.meta_chunks",
            what,
            format!("{field} {chunks:?} has a zero extent"),
        ));
    }
    let count = shape
        .iter()
        .zip(chunks)
        .try_fold(1u64, |acc, (&s, &c)| acc.checked_mul(s.div_ceil(c)))
        .ok_or_else(|| {
            bad(
                "zarr.meta_chunks",
                what,
                format!("the chunk count of {field} {chunks:?} overflows"),
            )
        })?;
    if count > limits.max_entries {
        return Err(Error::limit(
            "limit.entries",
            None,
            format!(
                "{what}: shape {shape:?} in chunks of {chunks:?} declares {count} chunks, above the limit of {}",
                limits.max_entries
            ),
        ));
    }
    Ok(count)
}

/// The decoded size of one unit, which must fit the working set: zarrs decodes a chunk whole.
fn check_unit(dtype: &std::result::Result<DType, String>, unit: &[u64], what: &str, limits: &Limits) -> Result<()> {
    let elem = dtype.as_ref().map_or(1, |d| d.size() as u64);
    let bytes = unit.iter().try_fold(elem, |acc, &d| acc.checked_mul(d));
    match bytes {
        Some(b) if b <= limits.working_set && b <= limits.max_alloc => Ok(()),
        _ => Err(Error::limit(
            "limit.working_set",
            None,
            format!(
                "{what}: a chunk of {unit:?} values of {elem} bytes is decoded whole, above the working set of {} bytes",
                limits.working_set.min(limits.max_alloc)
            ),
        )),
    }
}

fn parse_v3_array(obj: &serde_json::Map<String, Value>, what: &str, limits: &Limits) -> Result<ArrayMeta> {
    let shape = u64_list(obj.get("shape"), "shape", what)?;
    let dtype = match obj.get("data_type") {
        Some(Value::String(name)) => match v3_dtype(name) {
            Some(d) => Ok(d),
            None => Err(name.clone()),
        },
        Some(Value::Object(o)) => Err(o
            .get("name")
            .and_then(Value::as_str)
            .map_or_else(|| "an extension data type".to_string(), str::to_string)),
        other => return Err(bad("zarr.meta_dtype", what, format!("data_type is {}", show(other)))),
    };
    let grid = obj
        .get("chunk_grid")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("zarr.meta_chunks", what, "chunk_grid is missing"))?;
    let grid_name = grid.get("name").and_then(Value::as_str);
    if grid_name != Some("regular") {
        return Err(Error::unsupported(
            "zarr.chunk_grid_unsupported",
            None,
            format!(
                "{what}: chunk grid {} (rasterpack reads regular grids)",
                show_str(grid_name)
            ),
        ));
    }
    let chunk_shape = u64_list(
        grid.get("configuration").and_then(|c| c.get("chunk_shape")),
        "chunk_shape",
        what,
    )?;
    let chunk_count = check_grid(&shape, &chunk_shape, "chunk_shape", what, limits)?;
    let codecs_json = obj
        .get("codecs")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("zarr.meta_codecs", what, "codecs is missing or not a list"))?;
    let mut codecs = Vec::new();
    let mut byte_codecs = Vec::new();
    let mut unit_shape = chunk_shape.clone();
    let mut after_array_to_bytes = false;
    let mut sharding = None;
    for (k, c) in codecs_json.iter().enumerate() {
        let name = codec_name(c, what)?;
        if name == "sharding_indexed" {
            let inner = u64_list(
                c.get("configuration").and_then(|c| c.get("chunk_shape")),
                "sharding chunk_shape",
                what,
            )?;
            if inner.len() != chunk_shape.len() || inner.contains(&0) {
                return Err(bad(
                    "zarr.meta_chunks",
                    what,
                    format!("sharding chunk_shape {inner:?} does not fit chunks of {chunk_shape:?}"),
                ));
            }
            // The shard index holds 16 bytes per inner chunk: bounded like a chunk grid.
            check_grid(&chunk_shape, &inner, "sharding chunk_shape", what, limits)?;
            sharding = Some((k, inner.clone()));
            unit_shape = inner;
        }
        if after_array_to_bytes {
            byte_codecs.push(name.clone());
        }
        after_array_to_bytes |= array_to_bytes(&name);
        codecs.push(name);
    }
    let shard = match sharding {
        Some((k, inner)) => Some(Box::new(parse_sharding(
            codecs_json[k].get("configuration"),
            k,
            codecs_json.len() - k - 1,
            &inner,
            &chunk_shape,
            what,
            limits,
        )?)),
        None => None,
    };
    check_unit(&dtype, &unit_shape, what, limits)?;
    Ok(ArrayMeta {
        zarr_format: 3,
        shape,
        dtype,
        chunk_shape,
        unit_shape,
        codecs,
        byte_codecs,
        chunk_count,
        shard,
    })
}

fn parse_v2_array(obj: &serde_json::Map<String, Value>, what: &str, limits: &Limits) -> Result<ArrayMeta> {
    let shape = u64_list(obj.get("shape"), "shape", what)?;
    let chunk_shape = u64_list(obj.get("chunks"), "chunks", what)?;
    let dtype = match obj.get("dtype") {
        Some(Value::String(s)) => v2_dtype(s).ok_or_else(|| s.clone()),
        Some(Value::Array(_)) => Err("a structured dtype".to_string()),
        other => return Err(bad("zarr.meta_dtype", what, format!("dtype is {}", show(other)))),
    };
    let chunk_count = check_grid(&shape, &chunk_shape, "chunks", what, limits)?;
    let mut codecs = Vec::new();
    if let Some(filters) = obj.get("filters").and_then(Value::as_array) {
        for f in filters {
            codecs.push(f.get("id").and_then(Value::as_str).unwrap_or("?").to_string());
        }
    }
    let mut byte_codecs = Vec::new();
    match obj.get("compressor") {
        None | Some(Value::Null) => {}
        Some(c) => {
            let id = c
                .get("id")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("zarr.meta_codecs", what, "the compressor has no id"))?;
            codecs.push(id.to_string());
            byte_codecs.push(id.to_string());
        }
    }
    check_unit(&dtype, &chunk_shape, what, limits)?;
    Ok(ArrayMeta {
        zarr_format: 2,
        shape,
        dtype,
        unit_shape: chunk_shape.clone(),
        chunk_shape,
        codecs,
        byte_codecs,
        chunk_count,
        shard: None,
    })
}

/// A Zarr v3 core data type name as rasterpack's dtype.
pub fn v3_dtype(name: &str) -> Option<DType> {
    Some(match name {
        "bool" => DType::Bool,
        "int8" => DType::I8,
        "int16" => DType::I16,
        "int32" => DType::I32,
        "int64" => DType::I64,
        "uint8" => DType::U8,
        "uint16" => DType::U16,
        "uint32" => DType::U32,
        "uint64" => DType::U64,
        "float16" => DType::F16,
        "float32" => DType::F32,
        "float64" => DType::F64,
        "complex64" => DType::C64,
        "complex128" => DType::C128,
        _ => return None,
    })
}

/// A Zarr v2 (numpy) type string (`<f4`, `|u1`) as rasterpack's dtype.
pub fn v2_dtype(typestr: &str) -> Option<DType> {
    let rest = typestr.strip_prefix(['<', '>', '|', '='])?;
    if rest == "b1" {
        return Some(DType::Bool);
    }
    v2_sized(rest)
}

fn v2_sized(rest: &str) -> Option<DType> {
    Some(match rest {
        "i1" => DType::I8,
        "i2" => DType::I16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "u1" => DType::U8,
        "u2" => DType::U16,
        "u4" => DType::U32,
        "u8" => DType::U64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        "c8" => DType::C64,
        "c16" => DType::C128,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v3(shape: &str, chunks: &str, dtype: &str, codecs: &str) -> Vec<u8> {
        format!(
            r#"{{"zarr_format":3,"node_type":"array","shape":{shape},"data_type":{dtype},
            "chunk_grid":{{"name":"regular","configuration":{{"chunk_shape":{chunks}}}}},
            "chunk_key_encoding":{{"name":"default"}},"fill_value":0,"codecs":{codecs}}}"#
        )
        .into_bytes()
    }

    fn parse_v3(bytes: &[u8]) -> Result<NodeMeta> {
        parse(bytes, MetaFile::V3, "zarr.json", &Limits::default())
    }

    #[test]
    fn arrays_groups_and_their_numbers() {
        let ok = parse_v3(&v3(
            "[10,7]",
            "[4,4]",
            r#""int16""#,
            r#"[{"name":"bytes"},{"name":"zstd"}]"#,
        ))
        .unwrap();
        let NodeMeta::Array(m) = ok else { panic!("not an array") };
        assert_eq!((m.chunk_count, m.dtype.clone()), (6, Ok(DType::I16)));
        assert_eq!(m.byte_codecs, ["zstd"]);
        let sharded = parse_v3(&v3(
            "[16]",
            "[8]",
            r#""uint8""#,
            r#"[{"name":"sharding_indexed","configuration":{"chunk_shape":[2],
                "codecs":[{"name":"bytes"},{"name":"zstd"}],"index_codecs":[{"name":"bytes"},{"name":"crc32c"}]}}]"#,
        ))
        .unwrap();
        let NodeMeta::Array(m) = sharded else {
            panic!("not an array")
        };
        assert_eq!((m.chunk_shape, m.unit_shape), (vec![8], vec![2]));
        let shard = m.shard.unwrap();
        assert_eq!(shard.inner_byte_codecs, ["zstd"]);
        assert_eq!(
            (shard.index_crc, shard.index_at_end, shard.index_len()),
            (true, true, 68)
        );
        // Inner chunks are read out of a shard as stored: a codec around the shard, a nested
        // shard or an index rasterpack cannot locate is named as unsupported.
        for codecs in [
            r#"[{"name":"sharding_indexed","configuration":{"chunk_shape":[2],"codecs":[{"name":"bytes"}],
                "index_codecs":[{"name":"bytes"}]}},{"name":"gzip"}]"#,
            r#"[{"name":"sharding_indexed","configuration":{"chunk_shape":[2],"codecs":[{"name":"sharding_indexed"}],
                "index_codecs":[{"name":"bytes"}]}}]"#,
            r#"[{"name":"sharding_indexed","configuration":{"chunk_shape":[2],"codecs":[{"name":"bytes"}],
                "index_codecs":[{"name":"bytes","configuration":{"endian":"big"}}]}}]"#,
        ] {
            let e = parse_v3(&v3("[16]", "[8]", r#""uint8""#, codecs)).unwrap_err();
            assert_eq!(e.code, "zarr.codec_unsupported", "{codecs}");
            assert!(e.message.contains("sharding_indexed"), "{}", e.message);
        }
        // An index read with every inner chunk stays small beside the working set.
        let e = parse_v3(&v3(
            "[1048576]",
            "[1048576]",
            r#""uint8""#,
            r#"[{"name":"sharding_indexed","configuration":{"chunk_shape":[1],"codecs":[{"name":"bytes"}],
                "index_codecs":[{"name":"bytes"}]}}]"#,
        ))
        .unwrap_err();
        assert_eq!(e.code, "limit.working_set");
        assert_eq!(
            parse_v3(br#"{"zarr_format":3,"node_type":"group"}"#).unwrap(),
            NodeMeta::Group { zarr_format: 3 }
        );
        let v2 = br#"{"zarr_format":2,"shape":[5],"chunks":[2],"dtype":">f8","compressor":{"id":"gzip"}}"#;
        let NodeMeta::Array(m) = parse(v2, MetaFile::V2Array, ".zarray", &Limits::default()).unwrap() else {
            panic!("not an array")
        };
        assert_eq!(
            (m.dtype, m.chunk_count, m.byte_codecs),
            (Ok(DType::F64), 3, vec!["gzip".to_string()])
        );
    }

    #[test]
    fn declared_numbers_are_bounded() {
        let code = |b: &[u8]| parse_v3(b).unwrap_err().code;
        let bytes = r#"[{"name":"bytes"}]"#;
        assert_eq!(
            code(&v3("[1073741824,1073741824]", "[1,1]", r#""uint8""#, bytes)),
            "limit.entries"
        );
        assert_eq!(
            code(&v3("[1099511627776,1099511627776]", "[1,1]", r#""uint8""#, bytes)),
            "zarr.meta_chunks"
        );
        assert_eq!(
            code(&v3("[1099511627776]", "[1099511627776]", r#""uint8""#, bytes)),
            "limit.working_set"
        );
        assert_eq!(code(&v3("[4]", "[0]", r#""uint8""#, bytes)), "zarr.meta_chunks");
        assert_eq!(code(&v3("[4]", "[2,2]", r#""uint8""#, bytes)), "zarr.meta_chunks");
        assert_eq!(code(&v3("[-4]", "[2]", r#""uint8""#, bytes)), "zarr.meta_shape");
        let rank65 = format!("[{}]", vec!["1"; 65].join(","));
        assert_eq!(
            code(&v3(&rank65, &rank65, r#""uint8""#, bytes)),
            "zarr.rank_unsupported"
        );
        // A shard whose index would list 2^40 inner chunks.
        let shard = r#"[{"name":"sharding_indexed","configuration":{"chunk_shape":[1,1]}}]"#;
        assert_eq!(
            code(&v3("[1048576,1048576]", "[1048576,1048576]", r#""uint8""#, shard)),
            "limit.entries"
        );
        assert_eq!(code(b"{\"zarr_format\":3"), "zarr.meta_json");
        assert_eq!(code(br#"{"zarr_format":2,"node_type":"array"}"#), "zarr.meta_version");
        let big = vec![b' '; 200];
        let tiny = Limits {
            max_text: 100,
            ..Limits::default()
        };
        assert_eq!(
            parse(&big, MetaFile::V3, "zarr.json", &tiny).unwrap_err().code,
            "limit.text"
        );
    }

    #[test]
    fn types_without_a_counterpart_are_named() {
        let bytes = r#"[{"name":"bytes"}]"#;
        for (dtype, name) in [
            (r#""string""#, "string"),
            (r#""bfloat16""#, "bfloat16"),
            (r#"{"name":"x.y"}"#, "x.y"),
        ] {
            let NodeMeta::Array(m) = parse_v3(&v3("[4]", "[2]", dtype, bytes)).unwrap() else {
                panic!()
            };
            assert_eq!(m.dtype, Err(name.to_string()));
        }
        assert_eq!(v2_dtype("<U10"), None);
        assert_eq!(v2_dtype("|b1"), Some(DType::Bool));
        assert_eq!(v2_dtype("<c16"), Some(DType::C128));
        let grid = br#"{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"uint8","chunk_grid":{"name":"rectangular"},"codecs":[]}"#;
        assert_eq!(parse_v3(grid).unwrap_err().code, "zarr.chunk_grid_unsupported");
    }
}
