//! The VDS writer: an array (1-D to 4-D; VDS dimension 0 is its last, fastest axis) to a `.vds`
//! container or an object-store directory that OpenVDS 3.4.9 reads, brick by brick as the
//! array arrives in C order. The inverse of the reading layers: `encode` serializes bricks
//! (None / RLE / Zip, constant bricks as hashes, as [`crate::chunk`] decodes them), `target`
//! lays out the container's index pages and file table ([`crate::container`]) or the
//! directory's objects, chunk-metadata pages and `LayerStatus` ([`crate::store`]), and this
//! module holds one band of brick rows per level of detail (see `docs/formats/vds.md`, writer
//! section).
//!
//! Memory: per level, the brick rows being filled (`brick + margins` slices of the array's
//! slowest brick axis) and the encoded bricks of one brick row; LOD k+1 is fed from LOD k's
//! rows as they complete (every other voxel per axis), so the whole array is never held.

mod encode;
mod target;

use std::path::Path;

use rayon::prelude::*;
use serde_json::{json, Value};

use rasterpack_common::{ArrayInfo, ArraySink, DType, Error, Limits, ObjectSink, Output, Result, WriteOptions};

use crate::geometry::LayerGeometry;
use crate::layout::{parse_layout, VdsCompression, VdsSampleFormat, VolumeDataLayout};

#[cfg(feature = "testsupport")]
pub(crate) use encode::pack_bits;
pub use encode::{constant_hash, rle_encode, ZIP_LEVEL};
pub use target::DirSink;
use target::Target;

/// Chunk-metadata entries per page (container index pages and directory `ChunkMetadata`
/// pages), OpenVDS's default.
pub const PAGE_ENTRIES: usize = 1024;

/// Default axis names, dimension 0 first (OpenVDS's seismic convention).
const AXIS_NAMES: [&str; 4] = ["Sample", "Crossline", "Inline", "Dim3"];

/// One axis as `--axis NAME:UNIT:MIN:MAX` gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct AxisSpec {
    /// Axis name.
    pub name: String,
    /// Unit of its coordinates.
    pub unit: String,
    /// Coordinate of the first sample.
    pub min: f64,
    /// Coordinate of the last sample.
    pub max: f64,
}

impl AxisSpec {
    /// Parse `NAME:UNIT:MIN:MAX` (the unit may be empty).
    pub fn parse(s: &str) -> Result<AxisSpec> {
        let parts: Vec<&str> = s.split(':').collect();
        let [name, unit, min, max] = parts[..] else {
            return Err(Error::usage(format!("--axis {s:?}: expected NAME:UNIT:MIN:MAX")));
        };
        let num = |t: &str| {
            t.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| Error::usage(format!("--axis {s:?}: {t:?} is not a finite number")))
        };
        if name.is_empty() {
            return Err(Error::usage(format!("--axis {s:?}: the name is empty")));
        }
        Ok(AxisSpec {
            name: name.to_string(),
            unit: unit.to_string(),
            min: num(min)?,
            max: num(max)?,
        })
    }
}

/// One metadata item, `CATEGORY/NAME=VALUE`: an integer value is stored as `Int`, another
/// number as `Double`, anything else as `String`.
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataSpec {
    /// Category.
    pub category: String,
    /// Name within the category.
    pub name: String,
    /// The value, typed.
    pub value: Value,
    /// Its OpenVDS type name (`Int`, `Double`, `String`).
    pub type_name: &'static str,
}

impl MetadataSpec {
    /// Parse `CATEGORY/NAME=VALUE`.
    pub fn parse(s: &str) -> Result<MetadataSpec> {
        let bad = || Error::usage(format!("--metadata {s:?}: expected CATEGORY/NAME=VALUE"));
        let (key, value) = s.split_once('=').ok_or_else(bad)?;
        let (category, name) = key.split_once('/').ok_or_else(bad)?;
        if name.is_empty() {
            return Err(bad());
        }
        let (value, type_name) = if let Ok(i) = value.trim().parse::<i32>() {
            (json!(i), "Int")
        } else if let Some(d) = value.trim().parse::<f64>().ok().filter(|d| d.is_finite()) {
            (json!(d), "Double")
        } else {
            (json!(value), "String")
        };
        Ok(MetadataSpec {
            category: category.to_string(),
            name: name.to_string(),
            value,
            type_name,
        })
    }
}

/// A channel beside the primary one: its name, and what `--value-range`/`--no-value` give the
/// primary (default: the source channel's own settings, else the data's range and none).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChannelSpec {
    /// Channel name (unique in the dataset; it prefixes the channel's layer names).
    pub name: String,
    /// The channel's value range (U8/U16: the codes' physical range).
    pub value_range: Option<(f64, f64)>,
    /// The channel's no-value.
    pub no_value: Option<f64>,
}

/// How to write a VDS dataset.
#[derive(Debug, Clone)]
pub struct VdsWriteOptions {
    /// Brick edge: 32, 64, 128 or 256 (2-D arrays get OpenVDS's 4x bricks).
    pub brick_size: u32,
    /// Margin voxels on each side of each brick (both the negative and positive margin).
    pub margin: u32,
    /// None, RLE or Zip.
    pub compression: VdsCompression,
    /// Levels of detail beyond full resolution (0..=12): LOD k keeps every 2^k-th voxel.
    pub lods: u32,
    /// The channel's value range; for U8/U16, the codes' physical range (code 0 = MIN, the
    /// top code = MAX). Default: the data's range (U8/U16: the codes themselves).
    pub value_range: Option<(f64, f64)>,
    /// The channel's no-value (sets `useNoValue`).
    pub no_value: Option<f64>,
    /// Axes, dimension 0 (the array's last axis) first; default: the source's when it has
    /// as many with the same sample counts, else Sample/Crossline/Inline/Dim3 over 0..n-1.
    pub axes: Vec<AxisSpec>,
    /// Metadata items.
    pub metadata: Vec<MetadataSpec>,
    /// Name of the channel (default: the source array's name, else `Amplitude`).
    pub channel_name: Option<String>,
    /// Channels beside the primary, in order: the writer then takes `1 + channels.len()`
    /// arrays one after another (`begin` .. `finish` each, the primary first), every one of the
    /// primary's shape, each with its own sample format; the dataset is written at the last
    /// `finish`.
    pub channels: Vec<ChannelSpec>,
    /// The source's format name: the metadata category of the primary array's attributes
    /// (`None`: `rasterpack`). A VDS source's attributes describe its channel, not metadata.
    pub source_format: Option<String>,
    /// Bounds on what is held.
    pub limits: Limits,
}

impl Default for VdsWriteOptions {
    fn default() -> Self {
        VdsWriteOptions {
            brick_size: 64,
            margin: 0,
            compression: VdsCompression::Zip,
            lods: 0,
            value_range: None,
            no_value: None,
            axes: Vec::new(),
            metadata: Vec::new(),
            channel_name: None,
            channels: Vec::new(),
            source_format: None,
            limits: Limits::default(),
        }
    }
}

impl VdsWriteOptions {
    /// The options of `rasterpack convert` (`--compress`, `--brick-size`, `--margin`, `--lods`,
    /// `--value-range`, `--no-value`, `--axis`, `--metadata`), checked: a bad value is a usage
    /// error before anything is written.
    pub fn from_write_options(opts: &WriteOptions) -> Result<VdsWriteOptions> {
        let compression = match opts.compress.as_deref().map(str::to_ascii_lowercase).as_deref() {
            None | Some("zip") => VdsCompression::Zip,
            Some("none") => VdsCompression::None,
            Some("rle") => VdsCompression::RLE,
            Some(other) => {
                return Err(Error::usage(format!(
                    "VDS compression {other:?}: rasterpack writes none, rle or zip"
                )))
            }
        };
        let brick_size = opts.brick_size.unwrap_or(64);
        if ![32, 64, 128, 256].contains(&brick_size) {
            return Err(Error::usage(format!(
                "--brick-size {brick_size}: VDS bricks are 32, 64, 128 or 256"
            )));
        }
        let margin = opts.margin.unwrap_or(0);
        // OpenVDS keeps a brick's interior at least as large as its margins.
        if margin.saturating_mul(4) > brick_size {
            return Err(Error::usage(format!(
                "--margin {margin} is too large for {brick_size}-voxel bricks (at most a quarter of the brick, {})",
                brick_size / 4
            )));
        }
        let lods = opts.lods.unwrap_or(0);
        if lods > 12 {
            return Err(Error::usage(format!(
                "--lods {lods}: VDS has at most 12 levels of detail"
            )));
        }
        if let Some((lo, hi)) = opts.value_range {
            if !(lo.is_finite() && hi.is_finite() && lo < hi) {
                return Err(Error::usage(format!("--value-range {lo},{hi}: needs finite MIN < MAX")));
            }
        }
        if opts.no_value.is_some_and(|v| !v.is_finite()) {
            return Err(Error::usage("--no-value must be a finite number"));
        }
        Ok(VdsWriteOptions {
            brick_size,
            margin,
            compression,
            lods,
            value_range: opts.value_range,
            no_value: opts.no_value,
            axes: opts.axes.iter().map(|a| AxisSpec::parse(a)).collect::<Result<_>>()?,
            metadata: opts
                .metadata
                .iter()
                .map(|m| MetadataSpec::parse(m))
                .collect::<Result<_>>()?,
            channel_name: None,
            channels: Vec::new(),
            source_format: None,
            limits: opts.limits,
        })
    }
}

/// The VDS sample format of a numpy dtype, or a usage error naming the dtype.
pub fn sample_format(dtype: DType) -> Result<VdsSampleFormat> {
    Ok(match dtype {
        DType::Bool => VdsSampleFormat::Bit1,
        DType::U8 => VdsSampleFormat::U8,
        DType::U16 => VdsSampleFormat::U16,
        DType::U32 => VdsSampleFormat::U32,
        DType::U64 => VdsSampleFormat::U64,
        DType::F32 => VdsSampleFormat::R32,
        DType::F64 => VdsSampleFormat::R64,
        d => {
            return Err(Error::usage(format!(
                "VDS has no sample format for {}: it stores uint8, uint16, uint32, uint64, float32, float64 and bool",
                d.name()
            )))
        }
    })
}

/// One level of detail being written: the brick rows being filled for the current index of the
/// dimensions outside the brick group (dimension 3 of a 4-D array), and the layer's chunk table.
struct Level {
    g: LayerGeometry,
    /// The slowest brick dimension (2 for 3-D/4-D, 1 for 2-D, 0 for 1-D); rows are its slices.
    top: usize,
    /// Voxels of a row along dimension 0 and 1 (1 when part of the rows or absent).
    px: usize,
    py: usize,
    /// Rows per outer index (the level's extent along `top`) and outer indices.
    rows: u64,
    outers: u64,
    row_bytes: usize,
    /// Rows `band_start..` of the current outer index (the last one maybe incomplete).
    band: Vec<u8>,
    band_start: u64,
    outer: u64,
    /// Next brick row (along `top`) to encode.
    next_brick_row: u64,
    /// Complete rows handed to the next level.
    rows_forwarded: u64,
    layer: target::LayerTable,
}

/// Range of finite values seen (what `valueRange` defaults to).
#[derive(Debug, Clone, Copy)]
struct Range(f64, f64);

impl Range {
    const EMPTY: Range = Range(f64::INFINITY, f64::NEG_INFINITY);
    fn join(self, o: Range) -> Range {
        Range(self.0.min(o.0), self.1.max(o.1))
    }
}

fn value_range_of(format: VdsSampleFormat, bytes: &[u8]) -> Range {
    let mut r = Range::EMPTY;
    macro_rules! scan {
        ($t:ty, $n:expr) => {
            for c in bytes.chunks_exact($n) {
                let v = <$t>::from_le_bytes(c.try_into().unwrap_or([0; $n])) as f64;
                if v.is_finite() {
                    r.0 = r.0.min(v);
                    r.1 = r.1.max(v);
                }
            }
        };
    }
    match format {
        VdsSampleFormat::Bit1 | VdsSampleFormat::U8 | VdsSampleFormat::U16 => {}
        VdsSampleFormat::R32 => {
            // f32 comparisons, widened once: the scan runs over every brick.
            let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
            for c in bytes.chunks_exact(4) {
                let v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                if v.is_finite() {
                    lo = lo.min(v);
                    hi = hi.max(v);
                }
            }
            r = Range(lo as f64, hi as f64);
        }
        VdsSampleFormat::R64 => scan!(f64, 8),
        VdsSampleFormat::U32 => scan!(u32, 4),
        VdsSampleFormat::U64 => scan!(u64, 8),
    }
    r
}

/// Writes one array as a VDS dataset as it arrives in C order (an [`ArraySink`]; the data must
/// come in order, without gaps). [`ArraySink::begin`] refuses, before anything is written, a
/// dtype or shape VDS cannot hold and brick rows larger than the working set.
pub struct VdsWriter<'a> {
    opts: VdsWriteOptions,
    target: Option<Target<'a>>,
    state: Option<Writing>,
}

struct Writing {
    /// The layout as written so far: one channel descriptor per channel begun.
    layout: Value,
    parsed: VolumeDataLayout,
    /// The primary's shape (C order, a 1-D array already as one trace): every channel's.
    shape: Vec<u64>,
    /// The channel being written (or the last one finished, when `open` is false).
    channel: usize,
    open: bool,
    levels: Vec<Level>,
    total: u64,
    received: u64,
    range: Range,
    /// Layers and value ranges of the channels finished so far.
    layers: Vec<target::LayerTable>,
    ranges: Vec<Range>,
}

/// A channel's settings as written: the options' for the primary, the [`ChannelSpec`]'s for
/// the others, and the source channel's own (a VDS source's `channel` attribute) where neither
/// gives one.
struct Resolved {
    name: String,
    value_range: Option<(f64, f64)>,
    no_value: Option<f64>,
}

impl<'a> VdsWriter<'a> {
    /// A writer of a `.vds` container onto `out` (a file: written in place, the header last;
    /// a stream: held in memory up to `limits.max_array_bytes`, then written).
    pub fn container(out: Output<'a>, opts: VdsWriteOptions) -> VdsWriter<'a> {
        VdsWriter {
            target: Some(Target::container(out, opts.limits.max_array_bytes)),
            opts,
            state: None,
        }
    }

    /// A writer of an object-store directory at `path`: written into a sibling directory
    /// that replaces `path` only when complete (an existing `path` only with `force`), and
    /// is removed when the write fails or the writer is dropped before `finish`.
    pub fn directory(path: &Path, force: bool, opts: VdsWriteOptions) -> Result<VdsWriter<'static>> {
        Ok(VdsWriter {
            target: Some(Target::objects(Box::new(DirSink::new(path, force)?))),
            opts,
            state: None,
        })
    }

    /// A writer of OpenVDS's object-store layout through `sink` (a local directory, an
    /// object-store prefix): the same objects in the same order, the chunks first and the
    /// objects that make the dataset visible (`LayerStatus`, then `VolumeDataLayout`) last.
    pub fn objects(sink: Box<dyn ObjectSink + 'a>, opts: VdsWriteOptions) -> VdsWriter<'a> {
        VdsWriter {
            target: Some(Target::objects(sink)),
            opts,
            state: None,
        }
    }

    /// The directory a [`VdsWriter::directory`] writes into before it is renamed into place
    /// (`None` for a container): what a front removes when a signal ends the process.
    pub fn temp_dir(&self) -> Option<&Path> {
        self.target.as_ref().and_then(Target::temp_dir)
    }

    /// The settings of channel `k` for the array `info`.
    fn resolve(&self, k: usize, info: &ArrayInfo, format: VdsSampleFormat) -> Result<Resolved> {
        let (name, mut value_range, mut no_value) = if k == 0 {
            let name = self
                .opts
                .channel_name
                .clone()
                .or_else(|| info.name.clone().filter(|s| !s.is_empty()))
                .unwrap_or_else(|| "Amplitude".into());
            (name, self.opts.value_range, self.opts.no_value)
        } else {
            let c = self.opts.channels.get(k - 1).ok_or_else(|| {
                Error::usage(format!("internal: the VDS writer got a channel {k} it was not told of"))
            })?;
            (c.name.clone(), c.value_range, c.no_value)
        };
        if name.is_empty() {
            return Err(Error::usage("a VDS channel name cannot be empty"));
        }
        // The source's own channel settings, when it is a VDS channel and nothing overrides them.
        if let Some(c) = info.attrs.get("channel").and_then(Value::as_object) {
            if no_value.is_none() && c.get("use_no_value").and_then(Value::as_bool) == Some(true) {
                no_value = c.get("no_value").and_then(Value::as_f64);
            }
            if value_range.is_none() && matches!(format, VdsSampleFormat::U8 | VdsSampleFormat::U16) {
                // A U8/U16 source keeps its codes' physical mapping.
                let (s, o) = (
                    c.get("integer_scale").and_then(Value::as_f64),
                    c.get("integer_offset").and_then(Value::as_f64),
                );
                if let (Some(s), Some(o)) = (s, o) {
                    if (s, o) != (1.0, 0.0) && s > 0.0 {
                        let top = if format == VdsSampleFormat::U8 { 255.0 } else { 65535.0 }
                            - f64::from(u8::from(no_value.is_some()));
                        value_range = Some((o, o + s * top));
                    }
                }
            }
        }
        Ok(Resolved {
            name,
            value_range,
            no_value,
        })
    }

    /// The layout of the primary channel's dataset (axes from `--axis`, else the source's).
    fn layout_json(&self, info: &ArrayInfo, format: VdsSampleFormat, ch: &Resolved) -> Result<Value> {
        let o = &self.opts;
        let n = info.shape.len();
        let dims: Vec<u64> = info.shape.iter().rev().copied().collect();
        let axes: Vec<Value> = if !o.axes.is_empty() {
            if o.axes.len() != n {
                return Err(Error::usage(format!(
                    "{} --axis given for a {n}-D array: give one per dimension (dimension 0, the array's last axis, first)",
                    o.axes.len()
                )));
            }
            o.axes
                .iter()
                .zip(&dims)
                .map(|(a, &s)| json!({"name": a.name, "unit": a.unit, "numSamples": s, "coordinateMin": a.min, "coordinateMax": a.max}))
                .collect()
        } else if let Some(axes) = source_axes(info, &dims) {
            axes
        } else {
            dims.iter()
                .enumerate()
                .map(|(d, &s)| json!({"name": AXIS_NAMES[d], "unit": "", "numSamples": s, "coordinateMin": 0.0, "coordinateMax": (s - 1) as f64}))
                .collect()
        };
        // `--metadata` items, then the source's attributes under its format's name (an item
        // given both ways is the `--metadata` one).
        let category = o.source_format.as_deref().unwrap_or("rasterpack");
        let mut items = o.metadata.clone();
        if category != "vds" {
            for m in attrs_metadata(category, &info.attrs) {
                if !items.iter().any(|x| x.category == m.category && x.name == m.name) {
                    items.push(m);
                }
            }
        }
        let metadata: Vec<Value> = items
            .iter()
            .map(|m| json!({"category": m.category, "name": m.name, "type": m.type_name, "value": m.value}))
            .collect();
        Ok(json!({
            "axisDescriptors": axes,
            "channelDescriptors": [channel_json(info, format, ch)],
            "layoutDescriptor": {
                "brickSize": format!("BrickSize_{}", o.brick_size),
                "negativeMargin": o.margin, "positiveMargin": o.margin,
                "brickSize2DMultiplier": 4,
                "lodLevels": if o.lods == 0 { "LODLevels_None".to_string() } else { format!("LODLevels_{}", o.lods) },
                // OpenVDS finds a 2-D volume's LODs only with create2DLODs.
                "create2DLODs": o.lods > 0 && n == 2,
                "forceFullResolutionDimension": false, "fullResolutionDimension": -1,
            },
            "metadata": metadata,
        }))
    }
}

/// One channel descriptor (its value range as given; the data's is filled in at the end).
fn channel_json(info: &ArrayInfo, format: VdsSampleFormat, ch: &Resolved) -> Value {
    let unit = info
        .attrs
        .get("channel")
        .and_then(|c| c.get("unit"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let nov = ch.no_value.is_some();
    let (scale, offset, vr) = match format {
        VdsSampleFormat::U8 | VdsSampleFormat::U16 => {
            let top = if format == VdsSampleFormat::U8 { 255.0 } else { 65535.0 } - f64::from(u8::from(nov));
            match ch.value_range {
                // OpenVDS's codes: value = code * integerScale + integerOffset, in f32.
                Some((lo, hi)) => (f32r((hi - lo) / top), f32r(lo), (lo, hi)),
                None => (1.0, 0.0, (0.0, top)),
            }
        }
        VdsSampleFormat::Bit1 => (1.0, 0.0, ch.value_range.unwrap_or((0.0, 1.0))),
        _ => (1.0, 0.0, ch.value_range.unwrap_or((0.0, 1.0))),
    };
    json!({
        "format": format.name(),
        "components": "Components_1",
        "name": ch.name, "unit": unit,
        "valueRange": [vr.0, vr.1],
        "channelMapping": "Direct", "mappedValues": 1,
        "discrete": false, "renderable": true, "allowLossyCompression": false,
        "useNoValue": nov, "noValue": ch.no_value.map(f32r).unwrap_or(0.0),
        "integerScale": scale, "integerOffset": offset,
    })
}

/// At most this many metadata items come from a source's attributes, each value (a string, or
/// a list as JSON text) at most `MAX_ATTR_TEXT` bytes: attributes are the source's, of any size.
const MAX_ATTR_ITEMS: usize = 256;
const MAX_ATTR_TEXT: usize = 4096;

/// A source's attributes as metadata items of `category`: nested objects flattened into
/// dotted names, an i32 as `Int`, another number as `Double`, a string or boolean as `String`,
/// a list as its JSON text (`String`); the keys the layout already holds (`axes`) and
/// rasterpack's own bookkeeping (`source_format`, `warnings`, zarrs' `_zarrs`) are left out;
/// of a Zarr array, only its `attributes` (the rest describes its storage).
fn attrs_metadata(category: &str, attrs: &serde_json::Map<String, Value>) -> Vec<MetadataSpec> {
    fn walk(prefix: &str, v: &Value, depth: usize, out: &mut Vec<(String, Value, &'static str)>) {
        if out.len() >= MAX_ATTR_ITEMS {
            return;
        }
        let text = |t: String| (t.len() <= MAX_ATTR_TEXT).then(|| (json!(t), "String"));
        let item = match v {
            Value::Null => None,
            Value::Bool(b) => Some((json!(b.to_string()), "String")),
            Value::Number(n) => match n.as_i64().and_then(|i| i32::try_from(i).ok()) {
                Some(i) => Some((json!(i), "Int")),
                // A u64/i64 beyond f64's exact range stays exact as text.
                None if n.is_f64() => n.as_f64().filter(|d| d.is_finite()).map(|d| (json!(d), "Double")),
                None => text(n.to_string()),
            },
            Value::String(t) => text(t.clone()),
            Value::Array(_) => text(v.to_string()),
            Value::Object(m) => {
                if depth < 4 {
                    for (k, v) in m {
                        walk(&format!("{prefix}.{k}"), v, depth + 1, out);
                    }
                } else {
                    if let Some(t) = text(v.to_string()) {
                        out.push((prefix.to_string(), t.0, t.1));
                    }
                }
                None
            }
        };
        if let Some((value, type_name)) = item {
            out.push((prefix.to_string(), value, type_name));
        }
    }
    // A Zarr array's own attributes are its metadata (the rest describes its storage).
    let none = serde_json::Map::new();
    let attrs = match (category, attrs.get("attributes")) {
        ("zarr", Some(Value::Object(user))) => user,
        ("zarr", _) => &none,
        _ => attrs,
    };
    let mut out = Vec::new();
    for (k, v) in attrs {
        if matches!(k.as_str(), "axes" | "source_format" | "warnings" | "_zarrs") {
            continue;
        }
        walk(k, v, 0, &mut out);
    }
    out.truncate(MAX_ATTR_ITEMS);
    out.into_iter()
        .map(|(name, value, type_name)| MetadataSpec {
            category: category.to_string(),
            name,
            value,
            type_name,
        })
        .collect()
}

/// `x` rounded to the nearest f32 (OpenVDS holds these numbers as floats).
fn f32r(x: f64) -> f64 {
    x as f32 as f64
}

/// The largest f32 at or below `x`, and the smallest at or above: a value range OpenVDS's
/// floats hold without cutting off the data's extremes.
fn f32_down(x: f64) -> f64 {
    let f = x as f32;
    if (f as f64) > x {
        f.next_down() as f64
    } else {
        f as f64
    }
}
fn f32_up(x: f64) -> f64 {
    let f = x as f32;
    if (f as f64) < x {
        f.next_up() as f64
    } else {
        f as f64
    }
}

/// The axes the source's attributes give, dimension 0 first: its `axes` (a VDS source's, a
/// GVRS grid's coordinates), else the `axes` a Zarr array's `rasterpack` attribute keeps (a
/// store rasterpack wrote from such a source), else a Zarr array's `dimension_names` over
/// `0..N-1`; only when there is one per dimension with the same sample counts (not after a
/// region or LOD cut them).
fn source_axes(info: &ArrayInfo, dims: &[u64]) -> Option<Vec<Value>> {
    let zarr_kept = info
        .attrs
        .get("attributes")
        .and_then(|a| a.pointer("/rasterpack/metadata/axes"));
    if let Some(axes) = [info.attrs.get("axes"), zarr_kept]
        .into_iter()
        .flatten()
        .find_map(|a| axes_attr(a, dims))
    {
        return Some(axes);
    }
    // Zarr's names are in C order (the last one is dimension 0); a null name keeps the default.
    let names = info.attrs.get("dimension_names")?.as_array()?;
    if names.len() != dims.len() || names.iter().all(Value::is_null) {
        return None;
    }
    Some(
        names
            .iter()
            .rev()
            .zip(dims)
            .enumerate()
            .map(|(d, (name, &s))| {
                let name = name.as_str().filter(|n| !n.is_empty()).unwrap_or(AXIS_NAMES[d]);
                json!({"name": name, "unit": "", "numSamples": s, "coordinateMin": 0.0, "coordinateMax": (s - 1) as f64})
            })
            .collect(),
    )
}

/// An `axes` attribute (`name`, `unit`, `num_samples`, `coordinate_min`, `coordinate_max`
/// per dimension, dimension 0 first) as axis descriptors, when it fits `dims`.
fn axes_attr(axes: &Value, dims: &[u64]) -> Option<Vec<Value>> {
    let axes = axes.as_array()?;
    if axes.len() != dims.len() {
        return None;
    }
    axes.iter()
        .zip(dims)
        .map(|(a, &n)| {
            let a = a.as_object()?;
            let num = |k: &str| a.get(k).and_then(Value::as_f64).filter(|v| v.is_finite());
            (a.get("num_samples")?.as_u64()? == n).then_some(())?;
            Some(json!({
                "name": a.get("name")?.as_str()?,
                "unit": a.get("unit").and_then(Value::as_str).unwrap_or(""),
                "numSamples": n,
                "coordinateMin": num("coordinate_min")?,
                "coordinateMax": num("coordinate_max")?,
            }))
        })
        .collect()
}

impl Level {
    fn new(g: LayerGeometry, elem: usize, total_rows_outer: u64, channel: &str) -> Level {
        let top = *g.chunk_dims.last().unwrap_or(&0);
        let px = if top >= 1 { g.shape[0] as usize } else { 1 };
        let py = if top >= 2 { g.shape[1] as usize } else { 1 };
        let rows = g.shape[top];
        let layer = target::LayerTable::new(&g, channel);
        Level {
            top,
            px,
            py,
            rows,
            outers: total_rows_outer,
            // Saturating: a plane too large for memory is refused by the working-set check.
            row_bytes: px.saturating_mul(py).saturating_mul(elem),
            band: Vec::new(),
            band_start: 0,
            outer: 0,
            next_brick_row: 0,
            rows_forwarded: 0,
            layer,
            g,
        }
    }

    /// Bytes of the largest band this level holds (a brick row with margins, plus one row).
    fn band_bytes(&self) -> u64 {
        let e = self.g.chunk_extent(0);
        (e.stored_size[self.top] + 1).saturating_mul(self.row_bytes as u64)
    }

    /// The rows (along `top`) brick row `i` stores: `start..end`.
    fn brick_rows(&self, i: u64) -> (u64, u64) {
        let mut c = [0u64; 6];
        c[self.top] = i;
        let e = self.g.chunk_extent(self.g.chunk_index(&c));
        (
            e.stored_origin[self.top],
            e.stored_origin[self.top] + e.stored_size[self.top],
        )
    }
}

/// Take `data` (the next bytes of level `k`'s rows, in order) into the level, forwarding
/// completed rows to level `k + 1` and encoding each brick row once its rows are all there.
fn push(
    levels: &mut [Level],
    data: &[u8],
    ch: &crate::layout::VdsChannel,
    comp: VdsCompression,
    elem: usize,
    target: &mut Target,
    range: &mut Range,
) -> Result<()> {
    let (this, rest) = levels
        .split_first_mut()
        .ok_or_else(|| Error::usage("internal: no level"))?;
    let mut data = data;
    while !data.is_empty() {
        if this.outer >= this.outers {
            return Err(Error::usage(
                "internal: the VDS writer got more data than the array holds",
            ));
        }
        let have = this.band_start * this.row_bytes as u64 + this.band.len() as u64;
        let room = (this.rows * this.row_bytes as u64 - have) as usize;
        let take = room.min(data.len());
        this.band.extend_from_slice(&data[..take]);
        data = &data[take..];
        let complete = this.band_start + (this.band.len() / this.row_bytes) as u64;
        // Every other row, every other voxel of it, is the next level's row.
        if !rest.is_empty() {
            while this.rows_forwarded < complete {
                let r = this.rows_forwarded;
                this.rows_forwarded += 1;
                if r % 2 != 0 {
                    continue;
                }
                let at = ((r - this.band_start) as usize) * this.row_bytes;
                let row = &this.band[at..at + this.row_bytes];
                let mut half = Vec::with_capacity(rest[0].row_bytes);
                for y in (0..this.py).step_by(2) {
                    for x in (0..this.px).step_by(2) {
                        let s = (y * this.px + x) * elem;
                        half.extend_from_slice(&row[s..s + elem]);
                    }
                }
                push(rest, &half, ch, comp, elem, target, range)?;
            }
        }
        while this.next_brick_row < this.g.chunks[this.top] {
            let (start, end) = this.brick_rows(this.next_brick_row);
            if end > complete {
                break;
            }
            encode_brick_row(this, start, ch, comp, elem, target, range)?;
            this.next_brick_row += 1;
            if this.next_brick_row < this.g.chunks[this.top] {
                let (next_start, _) = this.brick_rows(this.next_brick_row);
                let drop = ((next_start - this.band_start) as usize * this.row_bytes).min(this.band.len());
                this.band.drain(..drop);
                this.band_start = next_start;
            }
        }
        if complete == this.rows {
            this.band.clear();
            this.band_start = 0;
            this.rows_forwarded = 0;
            this.next_brick_row = 0;
            this.outer += 1;
        }
    }
    Ok(())
}

/// Encode (in parallel) and store the bricks of brick row `next_brick_row` of the current outer
/// index, whose rows start at `start` in the band.
fn encode_brick_row(
    l: &mut Level,
    start: u64,
    ch: &crate::layout::VdsChannel,
    comp: VdsCompression,
    elem: usize,
    target: &mut Target,
    range: &mut Range,
) -> Result<()> {
    debug_assert!(start >= l.band_start);
    let g = &l.g;
    let mut c = [0u64; 6];
    c[l.top] = l.next_brick_row;
    // A 4-D array's dimension 3 is outside the brick group: one brick per index.
    c[3] = l.outer;
    let (n0, n1) = match l.top {
        0 => (1, 1),
        1 => (g.chunks[0], 1),
        _ => (g.chunks[0], g.chunks[1]),
    };
    let mut indices = Vec::with_capacity((n0 * n1) as usize);
    for c1 in 0..n1 {
        for c0 in 0..n0 {
            let mut cc = c;
            if l.top >= 1 {
                cc[0] = c0;
            }
            if l.top >= 2 {
                cc[1] = c1;
            }
            indices.push(g.chunk_index(&cc));
        }
    }
    let (band, band_start, px, py, top, row_bytes) = (&l.band, l.band_start, l.px, l.py, l.top, l.row_bytes);
    let want_range = !matches!(
        ch.format,
        VdsSampleFormat::U8 | VdsSampleFormat::U16 | VdsSampleFormat::Bit1
    );
    let encoded: Vec<(u64, encode::Encoded, Range)> = indices
        .par_iter()
        .map(|&index| {
            let e = g.chunk_extent(index);
            let (x0, xs) = if top >= 1 {
                (e.stored_origin[0] as usize, e.stored_size[0] as usize)
            } else {
                (0, 1)
            };
            let (y0, ys) = if top >= 2 {
                (e.stored_origin[1] as usize, e.stored_size[1] as usize)
            } else {
                (0, 1)
            };
            let (z0, zs) = (e.stored_origin[top], e.stored_size[top]);
            let mut payload = Vec::with_capacity(xs * ys * zs as usize * elem);
            for z in z0..z0 + zs {
                let row = (z - band_start) as usize * row_bytes;
                for y in y0..y0 + ys {
                    let s = row + (y * px + x0) * elem;
                    payload.extend_from_slice(&band[s..s + xs * elem]);
                }
            }
            let _ = py;
            let r = if want_range {
                value_range_of(ch.format, &payload)
            } else {
                Range::EMPTY
            };
            let enc = encode::encode_brick(
                ch,
                comp,
                g.lod,
                index,
                g.chunk_dims.len(),
                g.descriptor_size(&e),
                &payload,
            );
            (index, enc, r)
        })
        .collect();
    for (index, enc, r) in encoded {
        *range = range.join(r);
        target.put(&mut l.layer, index, enc)?;
    }
    Ok(())
}

impl ArraySink for VdsWriter<'_> {
    /// Begin the primary channel (the first call) or the next of [`VdsWriteOptions::channels`].
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        let format = sample_format(info.dtype)?;
        let n = info.shape.len();
        if !(1..=4).contains(&n) {
            return Err(Error::usage(format!(
                "rasterpack writes 1-D to 4-D arrays as VDS; this one has shape {:?}",
                info.shape
            )));
        }
        if let Some(&s) = info.shape.iter().find(|&&s| s == 0 || s > i32::MAX as u64) {
            return Err(Error::usage(format!(
                "an axis of {s} samples: VDS axes hold 1 to {} samples",
                i32::MAX
            )));
        }
        // OpenVDS 3.4.9 crashes on 1-D layouts (creating or opening one): a 1-D array is
        // written as a 2-D volume of one trace, which it reads (shape (1, N) read back).
        let mut info = info.clone();
        if n == 1 {
            info.shape.insert(0, 1);
            info.attrs.remove("axes");
            // The one --axis of a 1-D array is dimension 0; the added dimension gets a default.
            if self.opts.axes.len() == 1 {
                self.opts.axes.push(AxisSpec {
                    name: AXIS_NAMES[1].into(),
                    unit: String::new(),
                    min: 0.0,
                    max: 0.0,
                });
            }
        }
        let info = &info;
        let n = info.shape.len();
        let k = match &self.state {
            None => 0,
            Some(st) if st.open => {
                return Err(Error::usage(
                    "internal: a VDS channel began before the last one finished",
                ))
            }
            Some(st) => st.channel + 1,
        };
        if k > self.opts.channels.len() {
            return Err(Error::usage(format!(
                "internal: the VDS writer was told of {} channels and got another",
                k
            )));
        }
        let ch = self.resolve(k, info, format)?;
        let (layout, parsed) = match &self.state {
            None => {
                let layout = self.layout_json(info, format, &ch)?;
                let parsed = parse_layout(&layout, &mut Default::default())
                    .map_err(|e| Error::usage(format!("internal: the layout written does not parse: {e}")))?;
                (layout, parsed)
            }
            Some(st) => {
                if info.shape != st.shape {
                    return Err(Error::usage(format!(
                        "the VDS channel {:?} has shape {:?}, not the primary channel {:?}'s {:?}: every channel of a VDS spans the whole volume",
                        ch.name,
                        info.shape,
                        st.parsed.channels.first().map(|c| c.name.as_str()).unwrap_or(""),
                        st.shape
                    )));
                }
                if st.parsed.channels.iter().any(|c| c.name == ch.name) {
                    return Err(Error::usage(format!(
                        "two VDS channels named {:?}: channel names are unique",
                        ch.name
                    )));
                }
                let mut layout = st.layout.clone();
                if let Some(Value::Array(chs)) = layout.get_mut("channelDescriptors") {
                    chs.push(channel_json(info, format, &ch));
                }
                let parsed = parse_layout(&layout, &mut Default::default())
                    .map_err(|e| Error::usage(format!("the VDS channel {:?}: {e}", ch.name)))?;
                (layout, parsed)
            }
        };
        let group: Vec<usize> = (0..n.min(3)).collect();
        let elem = format.native_bytes();
        let outers = if n == 4 { info.shape[0] } else { 1 };
        let mut levels = Vec::new();
        for lod in 0..=self.opts.lods {
            let g = LayerGeometry::new(&parsed, k, &group, lod)
                .ok_or_else(|| Error::usage("internal: no geometry for the layout written"))?;
            if g.chunk_count > i32::MAX as u64 {
                return Err(Error::usage(format!(
                    "{} bricks in {}: more than a VDS layer indexes (use larger bricks)",
                    g.chunk_count, g.name
                )));
            }
            levels.push(Level::new(g, elem, outers, &ch.name));
        }
        let held: u64 = levels.iter().map(|l| l.band_bytes()).sum::<u64>().saturating_mul(2);
        // A request the writer cannot serve (not a property of the input): a usage error.
        if held > self.opts.limits.working_set {
            return Err(Error::new(
                rasterpack_common::ErrorKind::Usage,
                "vds.write.working_set",
                None,
                format!(
                    "the VDS writer holds {held} bytes of brick rows and their encoded bricks, above the working set of {} bytes \
                     (use smaller bricks, or raise it)",
                    self.opts.limits.working_set
                ),
            ));
        }
        let target = self
            .target
            .as_mut()
            .ok_or_else(|| Error::usage("internal: the VDS writer has finished"))?;
        let geoms: Vec<&LayerGeometry> = levels.iter().map(|l| &l.g).collect();
        if k == 0 {
            target.begin(&geoms)?;
        } else {
            target.add_layers(&geoms)?;
        }
        let total = info.byte_len()?;
        match &mut self.state {
            None => {
                self.state = Some(Writing {
                    layout,
                    parsed,
                    shape: info.shape.clone(),
                    channel: 0,
                    open: true,
                    levels,
                    total,
                    received: 0,
                    range: Range::EMPTY,
                    layers: Vec::new(),
                    ranges: Vec::new(),
                })
            }
            Some(st) => {
                st.layout = layout;
                st.parsed = parsed;
                st.channel = k;
                st.open = true;
                st.levels = levels;
                st.total = total;
                st.received = 0;
                st.range = Range::EMPTY;
            }
        }
        Ok(())
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let target = self
            .target
            .as_mut()
            .ok_or_else(|| Error::usage("internal: the VDS writer has finished"))?;
        let st = self
            .state
            .as_mut()
            .filter(|st| st.open)
            .ok_or_else(|| Error::usage("internal: the VDS writer got data before begin"))?;
        if offset != st.received {
            return Err(Error::usage(format!(
                "internal: the VDS writer takes the array in order: a write at {offset}, expected {}",
                st.received
            )));
        }
        if offset.checked_add(data.len() as u64).is_none_or(|e| e > st.total) {
            return Err(Error::usage("internal: a write past the end of the array"));
        }
        st.received += data.len() as u64;
        let ch = st.parsed.channels[st.channel].clone();
        let elem = ch.format.native_bytes();
        push(
            &mut st.levels,
            data,
            &ch,
            self.opts.compression,
            elem,
            target,
            &mut st.range,
        )
    }

    /// Finish the channel begun; after the last one, write the layout and the chunk tables
    /// and put the dataset in place.
    fn finish(&mut self) -> Result<()> {
        let st = self
            .state
            .as_mut()
            .filter(|st| st.open)
            .ok_or_else(|| Error::usage("internal: the VDS writer finished before begin"))?;
        if st.received != st.total {
            return Err(Error::usage(format!(
                "internal: the VDS writer got {} of {} bytes",
                st.received, st.total
            )));
        }
        st.open = false;
        st.layers
            .extend(std::mem::take(&mut st.levels).into_iter().map(|l| l.layer));
        st.ranges.push(st.range);
        if st.channel < self.opts.channels.len() {
            return Ok(());
        }
        let Some(st) = self.state.take() else {
            return Err(Error::usage("internal: the VDS writer finished before begin"));
        };
        // The layout again, now that each channel's value range is known (where none was given).
        let mut layout = st.layout.clone();
        for (k, (c, r)) in st.parsed.channels.iter().zip(&st.ranges).enumerate() {
            let given = match k {
                0 => self.opts.value_range,
                _ => self.opts.channels[k - 1].value_range,
            };
            if given.is_some()
                || matches!(
                    c.format,
                    VdsSampleFormat::U8 | VdsSampleFormat::U16 | VdsSampleFormat::Bit1
                )
            {
                continue;
            }
            if let Some(vr) = layout.pointer_mut(&format!("/channelDescriptors/{k}/valueRange")) {
                *vr = if r.0 <= r.1 {
                    json!([f32_down(r.0), f32_up(r.1)])
                } else {
                    json!([0.0, 1.0])
                };
            }
        }
        let target = self
            .target
            .take()
            .ok_or_else(|| Error::usage("internal: the VDS writer finished twice"))?;
        target.finish(&layout, self.opts.compression, st.layers)
    }
}
