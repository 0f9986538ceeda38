//! Reading the volume (or a region of it) into a sink as the body decodes: stored values, or
//! physical float64 values computed a window at a time.

use rasterpack_common::{ArrayInfo, ArrayRequest, ArraySink, DType, Input, Region, Result};
use serde_json::{Map, Value};

use crate::write::UNKNOWN_KEYS_ATTR;

use crate::body::{check_can_produce, decode_body, DecodePlan};
use crate::model::{physical_le_bytes, VolpHeader};

/// The array a request delivers: dtype (float64 for physical values), the region's shape, the
/// variable as its name, and the header's metadata as attributes. Physical values carry the
/// header's scale and offset as `source_scale`/`source_offset` (not `scale`/`offset`), so
/// writing them back to VOLP does not apply them twice.
pub(crate) fn array_info(header: &VolpHeader, shape: Vec<u64>, physical: bool) -> ArrayInfo {
    let mut attrs = Map::new();
    for (k, v) in header.metadata.entries() {
        attrs.insert(k.into(), v.clone());
    }
    attrs.insert("version".into(), header.version_json());
    if !header.unknown_json.is_empty() {
        // Keys VOLP does not interpret, as JSON text: the VOLP writer copies them exactly.
        let keys = header
            .unknown_json
            .iter()
            .map(|(k, text)| (k.clone(), Value::from(text.clone())))
            .collect();
        attrs.insert(UNKNOWN_KEYS_ATTR.into(), Value::Object(keys));
    }
    let (scale_key, offset_key) = if physical {
        ("source_scale", "source_offset")
    } else {
        ("scale", "offset")
    };
    attrs.insert(scale_key.into(), rasterpack_common::json::f64_value(header.scale));
    attrs.insert(offset_key.into(), rasterpack_common::json::f64_value(header.offset));
    // The whole volume's axes, a region's too (as a VDS source's): writers take them only
    // where their sample counts are the array's.
    attrs.insert(AXES_ATTR.into(), axes(header));
    ArrayInfo {
        dtype: if physical { DType::F64 } else { header.dtype },
        shape,
        name: header.metadata.variable_name().map(str::to_string),
        attrs,
    }
}

/// The attribute that names a source's axes (as a VDS and a GVRS source do): one object per
/// dimension, dimension 0 (the array's last axis) first.
pub(crate) const AXES_ATTR: &str = "axes";

/// Axis names of a VOLP volume, dimension 0 (the fastest, `lon`) first: what the VDS writer
/// names its axes and the Zarr writer its `dimension_names` (reversed).
pub(crate) const AXIS_NAMES: [&str; 3] = ["x", "y", "levels"];

/// The volume's axes from its header, dimension 0 first, each `name`, `unit`, `num_samples`,
/// `coordinate_min`, `coordinate_max` (the first and last sample's coordinates, as VDS axes
/// say them). `x` and `y` span `bbox` west..east and south..north in `deg` when the bbox gives
/// those four as finite numbers with west < east and south < north (rasterpack's reading of
/// the spec, which does not say it: column 0 at `west`, row 0 at `south`, the bbox edges
/// on the first and last samples, as the packer's samples are made); `levels` spans
/// `levels[0]..levels[n-1]` only when `levels` has one number per level, evenly spaced
/// (an axis holds a linear coordinate only: uneven levels stay in the `levels` attribute).
/// Otherwise an axis spans its sample indices `0..n-1`, no unit.
fn axes(header: &VolpHeader) -> Value {
    let [levels, lat, lon] = header.shape;
    let index = |name: &str, n: u64| -> (String, String, u64, f64, f64) {
        (name.into(), String::new(), n, 0.0, n.saturating_sub(1) as f64)
    };
    let num = |k: &str| {
        header
            .metadata
            .bbox
            .as_ref()
            .and_then(|b| b.get(k))
            .and_then(Value::as_f64)
            .filter(|v| v.is_finite())
    };
    let span = |lo: &str, hi: &str| match (num(lo), num(hi)) {
        (Some(a), Some(b)) if a < b => Some((a, b)),
        _ => None,
    };
    let x = match span("west", "east") {
        Some((a, b)) => (AXIS_NAMES[0].into(), "deg".into(), lon, a, b),
        None => index(AXIS_NAMES[0], lon),
    };
    let y = match span("south", "north") {
        Some((a, b)) => (AXIS_NAMES[1].into(), "deg".into(), lat, a, b),
        None => index(AXIS_NAMES[1], lat),
    };
    let z = match header.metadata.level_values() {
        Some(v) if v.len() as u64 == levels && evenly_spaced(&v) => {
            (AXIS_NAMES[2].into(), String::new(), levels, v[0], v[v.len() - 1])
        }
        _ => index(AXIS_NAMES[2], levels),
    };
    Value::Array(
        [x, y, z]
            .into_iter()
            .map(|(name, unit, n, lo, hi)| {
                serde_json::json!({"name": name, "unit": unit, "num_samples": n,
                    "coordinate_min": lo, "coordinate_max": hi})
            })
            .collect(),
    )
}

/// `v` (finite numbers) steps by one amount, to a part in 10^9 of the span: a linear axis.
fn evenly_spaced(v: &[f64]) -> bool {
    if v.iter().any(|x| !x.is_finite()) {
        return false;
    }
    let Some((&first, &last)) = v.first().zip(v.last()) else {
        return false;
    };
    if v.len() < 2 {
        return true;
    }
    let step = (last - first) / (v.len() - 1) as f64;
    let tol = (last - first).abs() * 1e-9;
    step != 0.0
        && v.iter()
            .enumerate()
            .all(|(i, x)| (first + step * i as f64 - x).abs() <= tol)
}

/// Stream the volume whose body starts at `body_offset` (or `req.region` of it) into `sink`:
/// `begin`, then every byte once in ascending order. Decoding stops after the region's last
/// row; frames that end before its first row are skipped when they declare their size.
pub(crate) fn stream_volume(
    input: &Input,
    header: &VolpHeader,
    body_offset: u64,
    req: &ArrayRequest,
    sink: &mut dyn ArraySink,
) -> Result<()> {
    let region = req.region_of(&header.shape)?;
    let elem = header.dtype.size() as u64;
    let expected = header.decoded_len();
    let full = region.is_full(&header.shape);
    let plan = if full {
        DecodePlan::full(expected)
    } else {
        let first = linear(&header.shape, region.ranges.iter().map(|r| r.start));
        let last = linear(&header.shape, region.ranges.iter().map(|r| r.end - 1));
        DecodePlan {
            expected,
            skip_before: first * elem,
            stop: (last + 1) * elem,
        }
    };
    // Before the sink allocates anything: can the frames produce what is needed at all?
    check_can_produce(input, body_offset, plan.stop)?;
    sink.begin(&array_info(header, region.shape(), req.physical))?;
    let mut writer = RegionWriter {
        sink,
        shape: header.shape,
        region,
        full,
        dtype: header.dtype,
        physical: req.physical.then_some((header.scale, header.offset)),
        converted: Vec::new(),
    };
    decode_body(
        input,
        body_offset,
        plan,
        &mut |at, bytes| writer.window(at, bytes),
        &mut |_| {},
    )?;
    Ok(())
}

/// C-order linear index of a position in `shape`.
fn linear(shape: &[u64; 3], pos: impl Iterator<Item = u64>) -> u64 {
    shape.iter().zip(pos).fold(0, |acc, (&d, p)| acc * d + p)
}

/// Hands the part of each decoded window inside the region to the sink, converted to physical
/// values when asked.
struct RegionWriter<'s> {
    sink: &'s mut dyn ArraySink,
    shape: [u64; 3],
    region: Region,
    full: bool,
    dtype: DType,
    physical: Option<(f64, f64)>,
    /// Reused buffer of physical values.
    converted: Vec<u8>,
}

impl RegionWriter<'_> {
    /// `bytes` are whole stored values starting at byte `at` of the full array.
    fn window(&mut self, at: u64, bytes: &[u8]) -> Result<()> {
        let elem = self.dtype.size() as u64;
        if self.full {
            return self.emit(at / elem, bytes);
        }
        if bytes.is_empty() {
            return Ok(());
        }
        let (e0, e1) = (at / elem, at / elem + bytes.len() as u64 / elem);
        let [_, lat, lon] = self.shape;
        let [levels, rows, cols] = [0, 1, 2].map(|i| self.region.ranges[i].clone());
        let (height, width) = (rows.end - rows.start, cols.end - cols.start);
        // Rows (level, lat) the window touches; jump over those outside the region.
        let mut row = e0 / lon;
        let last_row = (e1 - 1) / lon;
        while row <= last_row {
            let (level, y) = (row / lat, row % lat);
            if level >= levels.end {
                break;
            }
            if level < levels.start {
                row = levels.start * lat + rows.start;
                continue;
            }
            if y < rows.start {
                row = level * lat + rows.start;
                continue;
            }
            if y >= rows.end {
                row = (level + 1) * lat + rows.start;
                continue;
            }
            let row_at = row * lon;
            let (a, b) = ((row_at + cols.start).max(e0), (row_at + cols.end).min(e1));
            if a < b {
                let out = ((level - levels.start) * height + (y - rows.start)) * width + (a - row_at - cols.start);
                let piece = &bytes[((a - e0) * elem) as usize..((b - e0) * elem) as usize];
                self.emit(out, piece)?;
            }
            row += 1;
        }
        Ok(())
    }

    /// Stored values for output element `out`.
    fn emit(&mut self, out: u64, stored: &[u8]) -> Result<()> {
        match self.physical {
            Some((scale, offset)) => {
                physical_le_bytes(self.dtype, scale, offset, stored, &mut self.converted);
                self.sink.write_at(out * 8, &self.converted)
            }
            None => self.sink.write_at(out * self.dtype.size() as u64, stored),
        }
    }
}
