//! Arithmetic on what a dataset declares never overflows (issue 17, item 17): every number of
//! the `VolumeDataLayout` and `LayerStatus` documents of a generated object-store dataset is
//! set in turn to each of `testkit::EXTREME_NUMBERS`, and validate, inspect and reads must end
//! in a verdict, never a panic (tests build with overflow checks on: the dev profile keeps
//! them). Margins and mapped-value counts out of range are errors, not wrapped sums.

use std::path::{Path, PathBuf};

use rasterpack_common::testkit::{json_number_spans, replace_json_number, EXTREME_NUMBERS};
use rasterpack_common::{ArrayRequest, Format, Input, InspectOptions, Limits, ValidateOptions};
use rasterpack_vds_meta::testsupport::{sample_data, write_dir, Spec};
use rasterpack_vds_meta::VdsFormat;
use serde_json::Value;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rasterpack-vds-numbers-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Tight limits: a huge declared shape ends in a limit error quickly instead of a long read.
fn limits() -> Limits {
    Limits {
        max_alloc: 64 << 20,
        max_array_bytes: 64 << 20,
        ..Limits::default()
    }
}

/// Validate, inspect, and read the primary channel (physical) and the per-trace one (stored).
/// Returns whether validation found errors.
fn exercise(dir: &Path) -> bool {
    let input = Input::Dir {
        path: dir.to_path_buf(),
    };
    let limits = limits();
    let report = VdsFormat.validate(
        &input,
        &ValidateOptions {
            limits,
            ..Default::default()
        },
    );
    let _ = VdsFormat.inspect(&input, &InspectOptions { all: true, limits });
    for (element, physical) in [(None, true), (Some("Trace"), false)] {
        let _ = VdsFormat.read_array(
            &input,
            &ArrayRequest {
                limits,
                physical,
                element: element.map(str::to_string),
                ..Default::default()
            },
        );
    }
    report.findings.has_errors()
}

/// A small RLE dataset whose layout also declares a per-trace channel (never written): its
/// `mappedValues` become chunk sizes in the geometry.
fn dataset(dir: &Path) -> Vec<u8> {
    let spec = Spec {
        dims: vec![40, 9, 5],
        negative_margin: 1,
        positive_margin: 1,
        compression: rasterpack_vds_meta::layout::VdsCompression::RLE,
        ..Default::default()
    };
    write_dir(&spec, &sample_data(&spec, 3), dir).unwrap();
    let mut layout: Value = serde_json::from_slice(&std::fs::read(dir.join("VolumeDataLayout")).unwrap()).unwrap();
    let mut trace = layout["channelDescriptors"][0].clone();
    trace["name"] = "Trace".into();
    trace["channelMapping"] = "PerTrace".into();
    trace["mappedValues"] = 3.into();
    layout["channelDescriptors"].as_array_mut().unwrap().push(trace);
    let text = serde_json::to_vec_pretty(&layout).unwrap();
    std::fs::write(dir.join("VolumeDataLayout"), &text).unwrap();
    text
}

/// The key a number token belongs to (the last `"key":` before it), to name cases.
fn key_before(text: &[u8], at: usize) -> String {
    let s = String::from_utf8_lossy(&text[..at]);
    let Some(colon) = s.rfind("\":") else {
        return String::new();
    };
    let start = s[..colon].rfind('"').map_or(0, |q| q + 1);
    s[start..colon].to_string()
}

#[test]
fn layout_numbers_at_their_extremes() {
    let dir = tmp("layout");
    let text = dataset(&dir);
    assert!(!exercise(&dir), "the unmutated dataset is valid");
    let spans = json_number_spans(&text);
    assert!(spans.len() > 20, "{} numbers", spans.len());
    let (mut margins, mut mapped) = (0, 0);
    for span in spans {
        let key = key_before(&text, span.start);
        for &tok in EXTREME_NUMBERS {
            eprintln!("VolumeDataLayout: {key} = {tok}");
            std::fs::write(
                dir.join("VolumeDataLayout"),
                replace_json_number(&text, span.clone(), tok),
            )
            .unwrap();
            let invalid = exercise(&dir);
            // Margins of a 32-voxel brick: only 0 and 1 (with 1 on the other side) fit.
            if key.ends_with("Margin") && !matches!(tok, "0" | "1") {
                assert!(invalid, "{key} = {tok} must be invalid");
                margins += 1;
            }
            // mappedValues of the per-trace channel (the second one written): 1 ..= i32::MAX.
            let per_trace = String::from_utf8_lossy(&text[..span.start]).contains("PerTrace");
            if key == "mappedValues" && per_trace {
                let fits = tok.parse::<i64>().is_ok_and(|v| (1..=i64::from(i32::MAX)).contains(&v));
                if !fits {
                    assert!(invalid, "mappedValues = {tok} must be invalid");
                    mapped += 1;
                }
            }
        }
    }
    assert!(
        margins > 30 && mapped > 10,
        "{margins} margin and {mapped} mappedValues cases"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(format!("{}.objmeta.json", dir.display()));
}

#[test]
fn layer_status_numbers_at_their_extremes() {
    let dir = tmp("status");
    dataset(&dir);
    let text = std::fs::read(dir.join("LayerStatus")).unwrap();
    let spans = json_number_spans(&text);
    assert!(spans.len() > 8, "{} numbers", spans.len());
    for span in spans {
        let key = key_before(&text, span.start);
        for &tok in EXTREME_NUMBERS {
            eprintln!("LayerStatus: {key} = {tok}");
            std::fs::write(dir.join("LayerStatus"), replace_json_number(&text, span.clone(), tok)).unwrap();
            exercise(&dir);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(format!("{}.objmeta.json", dir.display()));
}

/// `edges/vds/vds_margin_i64_max_objdir`: `negativeMargin` i64::MAX, `positiveMargin` 1.
#[test]
fn corpus_margin_i64_max_is_out_of_range() {
    let Some(edges) = rasterpack_common::testkit::corpus_dir("edges/vds") else {
        return;
    };
    let input = Input::Dir {
        path: edges.join("vds_margin_i64_max_objdir"),
    };
    let r = VdsFormat.validate(&input, &ValidateOptions::default());
    assert!(
        r.findings.iter().any(|f| f.code == "vds.layout.margin"),
        "{:?}",
        r.findings
    );
    assert!(!r.is_valid(false));
    let _ = VdsFormat.inspect(&input, &InspectOptions::default());
    let e = VdsFormat.read_array(&input, &ArrayRequest::default()).unwrap_err();
    assert_eq!(e.code, "vds.layout.margin", "{e}");
}
