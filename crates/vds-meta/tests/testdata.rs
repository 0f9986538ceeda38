//! The sample files in `testdata/vds` are what the test-support writer makes, read back to
//! their data, and validate as intended. Regenerate with
//! `cargo run -p rasterpack-vds-meta --features testsupport --example make_vds_testdata`.

use std::path::PathBuf;

use rasterpack_common::{Format, Input, Limits, ValidateOptions};
use rasterpack_vds_meta::testsupport::{ramp_data, testdata_specs, write_container};
use rasterpack_vds_meta::{VdsDataset, VdsFormat, VdsValues};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/vds")
}

#[test]
fn samples_are_current_and_valid() {
    for (name, spec) in testdata_specs() {
        let bytes = std::fs::read(dir().join(name)).unwrap();
        let data = ramp_data(&spec);
        assert!(
            bytes == write_container(&spec, &data),
            "{name} is stale: regenerate testdata"
        );
        let input = Input::from_bytes(name, bytes);
        let r = VdsFormat.validate(&input, &ValidateOptions::default());
        assert!(r.is_valid(true), "{name}: {:?}", r.findings);
        let ds = VdsDataset::from_input(input.clone(), Limits::default()).unwrap();
        let got = ds
            .read_layer(ds.lod0_layer(0).unwrap(), VdsValues::Native)
            .unwrap()
            .data;
        if spec.unwritten.is_empty() {
            assert_eq!(got, data, "{name}");
        } else {
            // Unwritten chunks read as the NoValue code (useNoValue channel).
            assert_eq!(got.len(), data.len());
            assert!(got.iter().zip(&data).all(|(g, d)| g == d || *g == 255), "{name}");
        }
    }
    let r = VdsFormat.validate(
        &Input::open(dir().join("invalid_rle_overrun.vds")).unwrap(),
        &ValidateOptions::default(),
    );
    assert!(r.findings.has_code("vds.chunk.rle_run"), "{:?}", r.findings);
    // The same data as small_r32_zip.vds, its layout in the legacy VDSObject text.
    let (_, spec) = &testdata_specs()[0];
    let legacy = Input::open(dir().join("small_legacy_vdsobject.vds")).unwrap();
    let r = VdsFormat.validate(&legacy, &ValidateOptions::default());
    assert!(
        r.is_valid(true) && r.findings.has_code("vds.legacy_layout.used"),
        "{:?}",
        r.findings
    );
    let ds = VdsDataset::from_input(legacy.clone(), Limits::default()).unwrap();
    assert_eq!(ds.read_layer(0, VdsValues::Native).unwrap().data, ramp_data(spec));
    let d = dir().join("small_objdir");
    assert!(VdsFormat.detect_dir(&d));
    let r = VdsFormat.validate(&Input::open(&d).unwrap(), &ValidateOptions::default());
    assert!(r.is_valid(true), "{:?}", r.findings);
}
