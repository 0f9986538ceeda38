//! The committed samples in testdata/volp are exactly what the generator makes, and read as
//! documented.

use std::path::PathBuf;

use rasterpack_common::{Format, Input};
use rasterpack_volp::{samples, VolpFormat};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/volp")
}

#[test]
fn committed_samples_match_the_generator() {
    for (name, bytes) in samples::all() {
        let on_disk = std::fs::read(dir().join(name))
            .unwrap_or_else(|e| panic!("{name}: {e} (run the make_volp_testdata example)"));
        assert!(
            on_disk == bytes,
            "{name} differs from the generator: rerun `cargo run -p rasterpack-volp --example make_volp_testdata`"
        );
        let input = Input::open(dir().join(name)).unwrap();
        let r = VolpFormat.validate(&input, &Default::default());
        assert_eq!(
            r.is_valid(true),
            !name.starts_with("invalid"),
            "{name}: {:?}",
            r.findings
        );
    }
    let input = Input::open(dir().join("temperature_4x32x32_int16.volp")).unwrap();
    let r = VolpFormat.inspect(&input, &Default::default()).unwrap();
    assert_eq!(r.summary["shape"], serde_json::json!([4, 32, 32]));
    assert_eq!(r.summary["metadata"]["variable"], "air_temperature");
    let pmin = r.summary["stats"]["physical_min"].as_f64().unwrap();
    let pmax = r.summary["stats"]["physical_max"].as_f64().unwrap();
    assert!(pmin > 190.0 && pmax < 300.0, "{pmin} {pmax}");
}
