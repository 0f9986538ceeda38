//! Golden `inspect` output (JSON summary and text sections) of the sample files, so output
//! changes show up in review. Regenerate with `VDS_BLESS=1 cargo test -p rasterpack-vds-meta
//! --test golden`.
//!
//! This detects change, not correctness: the golden files are rasterpack's own output,
//! blessed when they were written, so a value wrong since then stays "golden". Correctness is
//! checked against independent sources elsewhere: `tests/interop.rs` compares layouts, chunk
//! lists and full LOD0 dumps of datasets written by OpenVDS 3.4.9 (the corpus) with the
//! sidecars and dumps made by OpenVDS itself, and `tests/testdata.rs` reads these samples back to the data the
//! test-support writer put in them.

use std::path::PathBuf;

use rasterpack_common::{Format, Input, InspectOptions, Section};
use rasterpack_vds_meta::VdsFormat;

fn render(sections: &[Section]) -> String {
    let mut out = String::new();
    for s in sections {
        match s {
            Section::Fields { title, rows } => {
                out += &format!("## {title}\n");
                for (k, v) in rows {
                    out += &format!("{k}: {v}\n");
                }
            }
            Section::Table { title, headers, rows } => {
                out += &format!("## {title}\n{}\n", headers.join(" | "));
                for r in rows {
                    out += &format!("{}\n", r.join(" | "));
                }
            }
            Section::Text { title, text } => out += &format!("## {title}\n{text}\n"),
        }
    }
    out
}

#[test]
fn inspect_matches_golden() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let data = root.join("../../testdata/vds");
    let golden = root.join("tests/golden");
    let bless = std::env::var_os("VDS_BLESS").is_some();
    for name in ["small_u8_rle_novalue.vds", "small_4d_r32_none_lod1.vds", "small_objdir"] {
        let input = Input::open(data.join(name)).unwrap();
        let r = VdsFormat
            .inspect(
                &input,
                &InspectOptions {
                    all: true,
                    ..Default::default()
                },
            )
            .unwrap();
        let json = serde_json::to_string_pretty(&serde_json::Value::Object(r.summary.clone())).unwrap() + "\n";
        let text = render(&r.sections);
        for (ext, got) in [("json", json), ("txt", text)] {
            let path = golden.join(format!("{name}.inspect.{ext}"));
            if bless {
                std::fs::write(&path, &got).unwrap();
            } else {
                let want = std::fs::read_to_string(&path)
                    .unwrap_or_else(|_| panic!("{} missing: run with VDS_BLESS=1", path.display()));
                assert!(
                    got == want,
                    "{} differs from the golden output (VDS_BLESS=1 regenerates)",
                    path.display()
                );
            }
        }
    }
}
