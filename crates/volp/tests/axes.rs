//! A VOLP volume names its axes (`ArrayInfo::attrs["axes"]`, dimension 0 first: `x`, `y`,
//! `levels`) from its header: `bbox` west..east and south..north in degrees, evenly spaced
//! `levels` as the level axis's range; otherwise sample indices. The VDS and Zarr writers
//! take their axis names and coordinates from this attribute.

use rasterpack_common::{ArrayFile, ArrayRequest, NdArray};
use rasterpack_volp::{VolpFile, VolpWriteOptions, VolpWriter};
use serde_json::{json, Value};

/// The `axes` attribute of a 3 x 2 x 4 float32 volume written with header `metadata`.
fn axes_of(metadata: Value) -> Value {
    let array = NdArray::from_vec(vec![3, 2, 4], vec![0f32; 24]).unwrap();
    let opts = VolpWriteOptions {
        metadata: metadata.as_object().unwrap().clone(),
        ..Default::default()
    };
    let file = VolpFile::from_bytes(VolpWriter::encode(&array, &opts).unwrap()).unwrap();
    let info = file.array_info(None).unwrap();
    let listed = &file.arrays().unwrap()[0];
    assert_eq!(
        listed.attrs.get("axes"),
        info.attrs.get("axes"),
        "listing and request agree"
    );
    info.attrs.get("axes").cloned().unwrap_or(Value::Null)
}

fn axis(name: &str, unit: &str, n: u64, lo: f64, hi: f64) -> Value {
    json!({"name": name, "unit": unit, "num_samples": n, "coordinate_min": lo, "coordinate_max": hi})
}

#[test]
fn axes_come_from_the_bbox_and_evenly_spaced_levels() {
    let bbox = json!({"west": -10, "south": 35, "east": 30, "north": 70, "bottom": 1000, "top": 250});
    assert_eq!(
        axes_of(json!({"bbox": bbox, "levels": [1000, 900, 800]})),
        json!([
            axis("x", "deg", 4, -10.0, 30.0),
            axis("y", "deg", 2, 35.0, 70.0),
            axis("levels", "", 3, 1000.0, 800.0),
        ])
    );
    // Uneven levels: an axis holds a linear coordinate only, so the level axis is the index.
    assert_eq!(
        axes_of(json!({"bbox": bbox, "levels": [1000, 850, 500]}))[2],
        axis("levels", "", 3, 0.0, 2.0)
    );
    // Levels of another count than the volume's, or not numbers.
    assert_eq!(axes_of(json!({"levels": [1, 2]}))[2], axis("levels", "", 3, 0.0, 2.0));
    assert_eq!(
        axes_of(json!({"levels": ["a", "b", "c"]}))[2],
        axis("levels", "", 3, 0.0, 2.0)
    );
    // No bbox, a bbox missing a side, or one whose sides are reversed: sample indices.
    let plain = json!([
        axis("x", "", 4, 0.0, 3.0),
        axis("y", "", 2, 0.0, 1.0),
        axis("levels", "", 3, 0.0, 2.0)
    ]);
    assert_eq!(axes_of(json!({})), plain);
    assert_eq!(
        axes_of(json!({"bbox": {"west": 0, "east": 5, "south": 1}}))[1],
        axis("y", "", 2, 0.0, 1.0)
    );
    assert_eq!(
        axes_of(json!({"bbox": {"west": 0, "east": 5, "south": 1}}))[0],
        axis("x", "deg", 4, 0.0, 5.0)
    );
    assert_eq!(
        axes_of(json!({"bbox": {"west": 5, "east": 0, "south": 1, "north": 2}}))[0],
        axis("x", "", 4, 0.0, 3.0)
    );
}

#[test]
fn a_region_keeps_the_volumes_axes() {
    // As a VDS source's region: the axes describe the volume; writers take them only where
    // their sample counts are the array's.
    let array = NdArray::from_vec(vec![3, 2, 4], vec![0f32; 24]).unwrap();
    let file = VolpFile::from_bytes(VolpWriter::encode(&array, &VolpWriteOptions::default()).unwrap()).unwrap();
    let region = rasterpack_common::RegionSpec::parse("0:2,:,:").unwrap();
    let nd = file.read(&ArrayRequest::default().with_region(region)).unwrap();
    assert_eq!(nd.shape, [2, 2, 4]);
    assert_eq!(nd.attrs["axes"][2], axis("levels", "", 3, 0.0, 2.0));
}
