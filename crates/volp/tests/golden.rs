//! Golden `inspect` output of the committed samples: any change to the summary JSON or the
//! human sections shows up in review. Regenerate with `VOLP_BLESS=1 cargo test -p rasterpack-volp --test golden`.
//!
//! This detects change, not correctness: the golden files are rasterpack's own output,
//! blessed when they were written, so a value wrong since then stays "golden". What the values
//! should be is checked against independent sources elsewhere: `tests/interop.rs` reads the
//! reference-written corpus and compares with its truth sidecars (verdicts, codes, stored and
//! physical values bit for bit), and `tests/testdata.rs` checks these samples against the generator that
//! wrote them.

use std::path::PathBuf;

use rasterpack_common::{Format, Input, Section};
use rasterpack_volp::VolpFormat;

fn render(sections: &[Section]) -> String {
    let mut out = String::new();
    for s in sections {
        match s {
            Section::Fields { title, rows } => {
                out.push_str(&format!("## {title}\n"));
                for (k, v) in rows {
                    out.push_str(&format!("{k}: {v}\n"));
                }
            }
            Section::Table { title, headers, rows } => {
                out.push_str(&format!("## {title}\n{}\n", headers.join(" | ")));
                for r in rows {
                    out.push_str(&format!("{}\n", r.join(" | ")));
                }
            }
            Section::Text { title, text } => out.push_str(&format!("## {title}\n{text}\n")),
        }
    }
    out
}

#[test]
fn inspect_output_is_stable() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for name in ["temperature_4x32x32_int16", "cloud_2x8x8_float32"] {
        let input = Input::open(root.join(format!("../../testdata/volp/{name}.volp"))).unwrap();
        let r = VolpFormat.inspect(&input, &Default::default()).unwrap();
        let findings: Vec<String> = r
            .findings
            .iter()
            .map(|f| format!("{} {} {:?} {}", f.severity.as_str(), f.code, f.offset, f.message))
            .collect();
        let got = format!(
            "{}\n\n{}\n## findings\n{}\n",
            serde_json::to_string_pretty(&r.summary).unwrap(),
            render(&r.sections),
            findings.join("\n")
        );
        let path = root.join(format!("tests/golden/{name}.inspect.txt"));
        if std::env::var_os("VOLP_BLESS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &got).unwrap();
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (run with VOLP_BLESS=1)", path.display()));
        assert_eq!(
            got, want,
            "{name}: inspect output changed (this test detects change, not correctness); rerun with \
             VOLP_BLESS=1 if intended"
        );
    }
}
