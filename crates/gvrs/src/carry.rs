//! What the GVRS writer keeps of a source's metadata (issue 20: round trips keep the metadata
//! the target can hold): an element's fill value, unit, texts and range, and the grid's
//! coordinates and raster space, taken from the attributes readers put on an array
//! ([`ArrayInfo::attrs`]):
//!
//! - a GVRS element's own attributes (`fill`/`fill_bits`, `unit`, `label`, `description`,
//!   `continuous`, `min`/`max`), and `coordinates` (the header's stored fields) or `axes`;
//! - the same through a Zarr store rasterpack wrote (its reader hands back the source's
//!   attributes from the `rasterpack` attribute);
//! - a VDS channel's `unit` and NoValue (when `use_no_value`), and its `axes` for a 2-D array;
//! - a foreign Zarr array's `fill_value` and CF `units` attribute.
//!
//! A value the element type cannot hold exactly (a fill of 0.5 for an int32 element, a range
//! that excludes nothing sensible) is left at Gridfour's default rather than rounded: a written
//! file says what the source said, or keeps the defaults.

use rasterpack_common::json::value_f64 as num;
use rasterpack_common::ArrayInfo;
use serde_json::{Map, Value};

use crate::raw::ElementRange;
use crate::write::{Coordinates, ElementSpec, GvrsSpec, RasterSpace};

/// An f32 given as `0x7fc00000`-style bits (what GVRS attributes keep beside the value).
fn bits(v: Option<&Value>) -> Option<f32> {
    let s = v?.as_str()?.strip_prefix("0x")?;
    u32::from_str_radix(s, 16).ok().map(f32::from_bits)
}

/// An f32 attribute: its `_bits` when present (exact, NaN payloads kept), else the number
/// when f32 holds it exactly.
fn f32_attr(a: &Map<String, Value>, key: &str) -> Option<f32> {
    if let Some(b) = bits(a.get(&format!("{key}_bits"))) {
        return Some(b);
    }
    let v = num(a.get(key)?)?;
    ((v as f32) as f64 == v || v.is_nan()).then_some(v as f32)
}

fn int_in(v: f64, lo: f64, hi: f64) -> Option<f64> {
    (v.fract() == 0.0 && v >= lo && v <= hi).then_some(v)
}

/// The attributes that describe the element: a GVRS source's own (they carry `type_code`).
fn gvrs_element(a: &Map<String, Value>) -> Option<&Map<String, Value>> {
    a.contains_key("type_code").then_some(a)
}

/// The fill value the source declares, as a number of the array's dtype (see the module
/// documentation for the sources).
fn declared_fill(info: &ArrayInfo) -> Option<f64> {
    let a = &info.attrs;
    if let Some(e) = gvrs_element(a) {
        return num(e.get("fill")?);
    }
    if let Some(Value::Object(ch)) = a.get("channel") {
        if ch.get("use_no_value").and_then(Value::as_bool) != Some(true) {
            return None;
        }
        return num(ch.get("no_value")?);
    }
    if a.get("source_format").and_then(Value::as_str) == Some("zarr") {
        return num(a.get("fill_value")?);
    }
    None
}

fn unit(a: &Map<String, Value>) -> Option<String> {
    let s = if let Some(e) = gvrs_element(a) {
        e.get("unit")
    } else if let Some(Value::Object(ch)) = a.get("channel") {
        ch.get("unit")
    } else {
        a.get("attributes").and_then(|u| u.get("units"))
    };
    s.and_then(Value::as_str).map(str::to_string)
}

/// Carry the source's fill value, unit, texts and range into `e`, an element of type
/// `dtype` with Gridfour's defaults.
pub(crate) fn element(e: &mut ElementSpec, info: &ArrayInfo) {
    let a = &info.attrs;
    if let Some(u) = unit(a) {
        e.unit = u;
    }
    if let Some(g) = gvrs_element(a) {
        for (key, field) in [("label", &mut e.label), ("description", &mut e.description)] {
            if let Some(s) = g.get(key).and_then(Value::as_str) {
                *field = s.to_string();
            }
        }
        if let Some(c) = g.get("continuous").and_then(Value::as_bool) {
            e.continuous = c;
        }
    }
    let fill = declared_fill(info);
    let range = gvrs_element(a).map(|g| (g.get("min").and_then(num), g.get("max").and_then(num)));
    match &mut e.kind {
        ElementRange::Integer { min, max, fill: f } => {
            let (lo, hi) = (i32::MIN as f64, i32::MAX as f64);
            if let Some(v) = fill.and_then(|v| int_in(v, lo, hi)) {
                *f = v as i32;
            }
            if let Some((Some(a), Some(b))) = range {
                if let (Some(a), Some(b)) = (int_in(a, lo, hi), int_in(b, lo, hi)) {
                    (*min, *max) = (a as i32, b as i32);
                }
            }
        }
        ElementRange::Short { min, max, fill: f } => {
            let (lo, hi) = (i16::MIN as f64, i16::MAX as f64);
            if let Some(v) = fill.and_then(|v| int_in(v, lo, hi)) {
                *f = v as i16;
            }
            if let Some((Some(a), Some(b))) = range {
                if let (Some(a), Some(b)) = (int_in(a, lo, hi), int_in(b, lo, hi)) {
                    (*min, *max) = (a as i16, b as i16);
                }
            }
        }
        ElementRange::Float { min, max, fill: f } => {
            let exact = |v: f64| ((v as f32) as f64 == v || v.is_nan()).then_some(v as f32);
            // A GVRS source keeps the exact bits (a NaN's payload); others give the number.
            let g = gvrs_element(a);
            if let Some(v) = g.and_then(|g| f32_attr(g, "fill")).or_else(|| fill.and_then(exact)) {
                *f = v;
            }
            if let Some(g) = g {
                if let (Some(a), Some(b)) = (f32_attr(g, "min"), f32_attr(g, "max")) {
                    (*min, *max) = (a, b);
                }
            }
        }
        // The writer makes no integer-coded floats from arrays (their values are float32).
        ElementRange::IntCodedFloat { .. } => {}
    }
}

/// Carry the source's grid coordinates and raster space into `spec`: the GVRS header's stored
/// fields (`coordinates`) when the grid is the source's whole grid, else `axes` (columns
/// first, as GVRS and 2-D VDS sources give them) when their sample counts are the grid's.
pub(crate) fn grid(spec: &mut GvrsSpec, info: &ArrayInfo) {
    let a = &info.attrs;
    let (rows, cols) = (spec.rows as u64, spec.cols as u64);
    if let Some(Value::Object(c)) = a.get("coordinates") {
        let dims = (
            c.get("rows").and_then(Value::as_u64),
            c.get("cols").and_then(Value::as_u64),
        );
        let xy: Option<Vec<f64>> = ["x0", "y0", "x1", "y1"]
            .iter()
            .map(|k| c.get(*k).and_then(num).filter(|v| v.is_finite()))
            .collect();
        if let (Some(xy), (Some(r), Some(cc))) = (xy, dims) {
            if (r, cc) == (rows, cols) {
                let coordinates = match c.get("system").and_then(Value::as_str) {
                    Some("Cartesian") => Some(Coordinates::Cartesian {
                        x0: xy[0],
                        y0: xy[1],
                        x1: xy[2],
                        y1: xy[3],
                    }),
                    Some("Geographic") => Some(Coordinates::Geographic {
                        lon0: xy[0],
                        lat0: xy[1],
                        lon1: xy[2],
                        lat1: xy[3],
                    }),
                    Some("Unspecified") => Some(Coordinates::Unspecified),
                    _ => None,
                };
                if let Some(coordinates) = coordinates {
                    spec.coordinates = coordinates;
                    spec.raster_space = match c.get("raster_space").and_then(Value::as_str) {
                        Some("Point") => RasterSpace::Point,
                        Some("Area") => RasterSpace::Area,
                        _ => RasterSpace::Unspecified,
                    };
                    return;
                }
            }
        }
    }
    let Some(Value::Array(axes)) = a.get("axes") else {
        return;
    };
    let [x, y] = axes.as_slice() else {
        return;
    };
    let axis = |v: &Value, n: u64| -> Option<(String, f64, f64)> {
        let samples = v.get("num_samples").and_then(Value::as_u64)?;
        let lo = v.get("coordinate_min").and_then(num).filter(|v| v.is_finite())?;
        let hi = v.get("coordinate_max").and_then(num).filter(|v| v.is_finite())?;
        let name = v.get("name").and_then(Value::as_str).unwrap_or("").to_string();
        (samples == n).then_some((name, lo, hi))
    };
    let (Some((xn, x0, x1)), Some((yn, y0, y1))) = (axis(x, cols), axis(y, rows)) else {
        return;
    };
    let raster = (x0, x1, y0, y1) == (0.0, (cols - 1) as f64, 0.0, (rows - 1) as f64);
    spec.coordinates = match (xn.as_str(), yn.as_str()) {
        ("Longitude", "Latitude") => Coordinates::Geographic {
            lon0: x0,
            lat0: y0,
            lon1: x1,
            lat1: y1,
        },
        ("Column", "Row") if raster => Coordinates::Unspecified,
        _ => Coordinates::Cartesian { x0, y0, x1, y1 },
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use rasterpack_common::DType;
    use serde_json::json;

    fn info(dtype: DType, attrs: Value) -> ArrayInfo {
        let mut i = ArrayInfo::new(dtype, vec![4, 3]);
        i.attrs = attrs.as_object().cloned().unwrap_or_default();
        i
    }

    #[test]
    fn fills_the_type_cannot_hold_keep_the_default() {
        let mut e = ElementSpec::new("z", ElementRange::integer());
        element(&mut e, &info(DType::I32, json!({"type_code": 0, "fill": 0.5})));
        assert_eq!(e.kind, ElementRange::integer());
        let mut e = ElementSpec::new("z", ElementRange::short());
        element(&mut e, &info(DType::I16, json!({"type_code": 3, "fill": 40000})));
        assert_eq!(e.kind, ElementRange::short());
        let mut e = ElementSpec::new("z", ElementRange::float());
        element(
            &mut e,
            &info(DType::F32, json!({"source_format": "zarr", "fill_value": 0.1})),
        );
        assert!(
            matches!(e.kind, ElementRange::Float { fill, .. } if fill.is_nan()),
            "0.1 is no f32"
        );
    }

    #[test]
    fn vds_no_value_and_unit() {
        let ch = json!({"channel": {"unit": "ms", "use_no_value": true, "no_value": -999.25}});
        let mut e = ElementSpec::new("z", ElementRange::float());
        element(&mut e, &info(DType::F32, ch));
        assert_eq!(e.unit, "ms");
        assert!(matches!(e.kind, ElementRange::Float { fill, .. } if fill == -999.25));
        let off = json!({"channel": {"unit": "ms", "use_no_value": false, "no_value": -999.25}});
        let mut e = ElementSpec::new("z", ElementRange::float());
        element(&mut e, &info(DType::F32, off));
        assert!(matches!(e.kind, ElementRange::Float { fill, .. } if fill.is_nan()));
    }

    #[test]
    fn coordinates_apply_only_to_the_whole_grid() {
        let spec = |attrs| {
            let mut s = GvrsSpec::new(4, 3, 4, 3, ElementSpec::new("z", ElementRange::float()));
            grid(&mut s, &info(DType::F32, attrs));
            s.coordinates
        };
        let c = json!({"system": "Geographic", "x0": 1.0, "y0": 2.0, "x1": 3.0, "y1": 4.0,
                       "raster_space": "Area", "rows": 4, "cols": 3});
        assert_eq!(
            spec(json!({"coordinates": c})),
            Coordinates::Geographic {
                lon0: 1.0,
                lat0: 2.0,
                lon1: 3.0,
                lat1: 4.0
            }
        );
        let mut window = c.clone();
        window["rows"] = json!(8);
        assert_eq!(spec(json!({"coordinates": window})), Coordinates::Unspecified);
        let axes = json!([
            {"name": "Inline", "num_samples": 3, "coordinate_min": 10.0, "coordinate_max": 12.0},
            {"name": "Crossline", "num_samples": 4, "coordinate_min": 5.0, "coordinate_max": 20.0},
        ]);
        assert_eq!(
            spec(json!({ "axes": axes })),
            Coordinates::Cartesian {
                x0: 10.0,
                y0: 5.0,
                x1: 12.0,
                y1: 20.0
            }
        );
        let cut = json!([
            {"name": "X", "num_samples": 2, "coordinate_min": 10.0, "coordinate_max": 12.0},
            {"name": "Y", "num_samples": 4, "coordinate_min": 5.0, "coordinate_max": 20.0},
        ]);
        assert_eq!(spec(json!({ "axes": cut })), Coordinates::Unspecified);
    }
}
