//! `validate` and `inspect` of any input (which need not open): every finding, and a report of
//! what could be read.
//!
//! `validate` applies every prefix and header rule, then decodes the whole body as it streams
//! (a reused window, nothing kept) with every body check; when the header is unusable it still
//! checks the frame structure. `inspect` checks the same structure but decodes only a sample
//! (the first [`INSPECT_SAMPLE`] bytes, or everything with `--all`) for its statistics.

use rasterpack_common::json::{f64_value, fmt_at, fmt_bytes, fmt_f64};
use rasterpack_common::{DType, Input, InspectOptions, Limits, Report, Result, ValidateOptions};
use serde_json::{json, Map, Value};

use crate::body::{check_can_produce, decode_body, walk_body, BodyInfo, DecodePlan};
use crate::model::{StatsAccumulator, VolpHeader, VolpStats};
use crate::parse::{parse_structure, Structure};

/// Decoded bytes `inspect` reads for its statistics (unless `--all`).
pub const INSPECT_SAMPLE: u64 = 1 << 20;

/// Every finding of `input`: prefix, header rules, and the whole body decoded as it streams.
pub fn validate_input(input: &Input, opts: &ValidateOptions) -> Report {
    let mut report = Report::new("volp");
    let s = match parse_structure(input, &opts.limits) {
        Ok(s) => s,
        Err(e) => {
            report.fail(&e);
            return report;
        }
    };
    header_findings(&mut report, &s);
    let body = match (&s.check.header, s.check.compression_ok) {
        (_, false) => {
            body_not_checked(&mut report, &s);
            None
        }
        (Some(h), true) => {
            let expected = h.decoded_len();
            let total = input.len();
            let decoded = check_can_produce(input, s.body_offset, expected).and_then(|()| {
                decode_body(
                    input,
                    s.body_offset,
                    DecodePlan::full(expected),
                    &mut |_, _| Ok(()),
                    &mut |pos| opts.report_progress(pos, total),
                )
            });
            recorded(&mut report, decoded)
        }
        // The header is unusable, so the expected size is unknown: still check the frames.
        (None, true) => recorded(&mut report, walk_body(input, s.body_offset, None)),
    };
    describe(&mut report, &s, body, None, false);
    report
}

/// The structure of `input` and statistics of a sample of its values (or all with `opts.all`).
pub fn inspect_input(input: &Input, opts: &InspectOptions) -> Result<Report> {
    let s = parse_structure(input, &opts.limits)?;
    let mut report = Report::new("volp");
    header_findings(&mut report, &s);
    let mut stats = None;
    let body = match (&s.check.header, s.check.compression_ok) {
        (_, false) => {
            body_not_checked(&mut report, &s);
            None
        }
        (Some(h), true) => {
            let body = recorded(&mut report, walk_body(input, s.body_offset, Some(h.decoded_len())));
            if body.is_some() {
                stats = sample_stats(input, &s, h, opts.all, &mut report);
            }
            body
        }
        (None, true) => recorded(&mut report, walk_body(input, s.body_offset, None)),
    };
    describe(&mut report, &s, body, stats.as_ref(), opts.all);
    Ok(report)
}

/// Statistics of the stored values: the whole body with `all`, else its first
/// [`INSPECT_SAMPLE`] bytes. Decoding errors become findings.
fn sample_stats(input: &Input, s: &Structure, h: &VolpHeader, all: bool, report: &mut Report) -> Option<Sample> {
    let expected = h.decoded_len();
    let elem = h.dtype.size() as u64;
    let stop = if all {
        expected
    } else {
        expected.min((INSPECT_SAMPLE / elem).max(1) * elem)
    };
    let plan = DecodePlan {
        expected,
        skip_before: 0,
        stop,
    };
    let mut acc = StatsAccumulator::new(h.dtype);
    let res = decode_body(
        input,
        s.body_offset,
        plan,
        &mut |_, bytes| {
            acc.add(bytes);
            Ok(())
        },
        &mut |_| {},
    );
    match res {
        Ok(_) => Some(Sample {
            stats: acc.finish(),
            of: h.elements(),
            dtype: h.dtype,
            scale: h.scale,
            offset: h.offset,
        }),
        Err(e) => {
            report.findings.push_error(&e);
            None
        }
    }
}

/// Statistics over `stats.count` of `of` values.
struct Sample {
    stats: VolpStats,
    of: u64,
    /// The stored values' dtype: their figures print at its precision.
    dtype: DType,
    scale: f64,
    offset: f64,
}

fn header_findings(report: &mut Report, s: &Structure) {
    for e in &s.check.errors {
        report.findings.push_error(e);
    }
    report.findings.extend(s.check.notes.clone());
}

fn body_not_checked(report: &mut Report, s: &Structure) {
    report.findings.info(
        "volp.body.not_checked",
        Some(s.body_offset),
        "body not checked: its compression is not zstd",
    );
}

fn recorded(report: &mut Report, res: Result<BodyInfo>) -> Option<BodyInfo> {
    res.map_err(|e| report.findings.push_error(&e)).ok()
}

/// Validate with default options but these limits (what [`crate::VolpFile::validate_input`] runs).
pub(crate) fn validate_with_limits(input: &Input, limits: &Limits) -> Report {
    validate_input(
        input,
        &ValidateOptions {
            limits: *limits,
            ..Default::default()
        },
    )
}

fn compact(v: &Value, all: bool) -> String {
    let s = v.to_string();
    if all || s.chars().count() <= 120 {
        s
    } else {
        let cut: String = s.chars().take(117).collect();
        format!("{cut}...")
    }
}

/// The summary (snake_case keys; an `arrays` list as every format has) and the sections.
fn describe(report: &mut Report, s: &Structure, body: Option<BodyInfo>, sample: Option<&Sample>, all: bool) {
    let c = &s.check;
    let sum = &mut report.summary;
    sum.insert("header_len".into(), Value::from(s.prefix.header_len));
    sum.insert("body_len".into(), Value::from(s.body_len));
    let mut rows: Vec<(String, String)> = Vec::new();
    match &c.header {
        Some(h) => header_summary(sum, &mut rows, s, h),
        None => {
            sum.insert("header".into(), Value::Object(c.json.clone()));
            if let Some(d) = c.dtype {
                sum.insert("dtype".into(), Value::from(d.name()));
            }
            if let Some(sh) = c.shape {
                sum.insert("shape".into(), Value::from(sh.to_vec()));
            }
            rows.push((
                "header".into(),
                format!("{} bytes at offset 8 (rules failed, see findings)", s.prefix.header_len),
            ));
            rows.push((
                "body (compressed)".into(),
                format!("{} at offset {}", fmt_bytes(s.body_len), s.body_offset),
            ));
        }
    }
    if let Some(b) = body {
        sum.insert("zstd_frames".into(), Value::from(b.zstd_frames));
        sum.insert("skippable_frames".into(), Value::from(b.skippable_frames));
        sum.insert("checksummed_frames".into(), Value::from(b.checksummed_frames));
        rows.push((
            "frames".into(),
            format!(
                "{} zstd ({} with a content checksum), {} skippable",
                b.zstd_frames, b.checksummed_frames, b.skippable_frames
            ),
        ));
    }
    report.fields("VOLP header", rows);
    match &c.header {
        Some(h) => metadata_section(report, h, all),
        None => {
            let text = serde_json::to_string_pretty(&Value::Object(c.json.clone())).unwrap_or_default();
            report.text("Header JSON", text);
        }
    }
    if let Some(sample) = sample {
        values_section(report, sample);
    }
}

fn header_summary(sum: &mut Map<String, Value>, rows: &mut Vec<(String, String)>, s: &Structure, h: &VolpHeader) {
    let decoded = h.decoded_len();
    sum.insert(
        "arrays".into(),
        json!([{"name": Value::Null, "dtype": h.dtype.name(), "shape": h.shape}]),
    );
    sum.insert("version".into(), h.version_json());
    sum.insert("dtype".into(), Value::from(h.dtype.name()));
    sum.insert("shape".into(), Value::from(h.shape.to_vec()));
    sum.insert("scale".into(), f64_value(h.scale));
    sum.insert("offset".into(), f64_value(h.offset));
    sum.insert("compression".into(), Value::from(h.compression.clone()));
    sum.insert("elements".into(), Value::from(h.elements()));
    sum.insert("decoded_len".into(), Value::from(decoded));
    let ratio = if s.body_len > 0 {
        decoded as f64 / s.body_len as f64
    } else {
        f64::NAN
    };
    sum.insert("ratio".into(), f64_value(ratio));
    let mut meta = Map::new();
    for (k, v) in h.metadata.entries() {
        meta.insert(k.into(), v.clone());
    }
    meta.insert("unknown".into(), Value::Object(h.unknown.clone()));
    sum.insert("metadata".into(), Value::Object(meta));
    rows.push(("version".into(), h.version_text.clone()));
    rows.push(("dtype".into(), h.dtype.name().into()));
    rows.push(("shape [levels, lat, lon]".into(), format!("{:?}", h.shape)));
    rows.push(("scale".into(), fmt_f64(h.scale)));
    rows.push(("offset".into(), fmt_f64(h.offset)));
    rows.push(("compression".into(), h.compression.clone()));
    rows.push(("header".into(), format!("{} bytes at offset 8", s.prefix.header_len)));
    rows.push((
        "body (compressed)".into(),
        format!("{} at offset {}", fmt_bytes(s.body_len), s.body_offset),
    ));
    rows.push((
        "decoded".into(),
        format!("{} ({} elements)", fmt_bytes(decoded), h.elements()),
    ));
    rows.push(("ratio".into(), format!("{ratio:.2}")));
}

fn metadata_section(report: &mut Report, h: &VolpHeader, all: bool) {
    let mut rows: Vec<(String, String)> = h
        .metadata
        .entries()
        .into_iter()
        .map(|(k, v)| (k.to_string(), compact(v, all)))
        .collect();
    for (k, v) in &h.unknown {
        rows.push((format!("{k} (unknown key)"), compact(v, all)));
    }
    if !rows.is_empty() {
        report.fields("Metadata", rows);
    }
}

fn values_section(report: &mut Report, sample: &Sample) {
    let st = &sample.stats;
    let (sc, of) = (sample.scale, sample.offset);
    let phys = |x: Option<f64>| x.map(|x| x * sc + of);
    let (pmin, pmax) = if sc < 0.0 {
        (phys(st.max), phys(st.min))
    } else {
        (phys(st.min), phys(st.max))
    };
    let opt = |x: Option<f64>| x.map(f64_value).unwrap_or(Value::Null);
    // Stored figures at the stored dtype's precision (a float32 body's as f32). Physical values
    // are computed in f64 (ERRATA), so theirs are f64 figures, unless scale 1 and offset 0
    // leave them the stored values exactly.
    let phys_dtype = if sc == 1.0 && of == 0.0 {
        sample.dtype
    } else {
        DType::F64
    };
    let at = |x: Option<f64>, dtype: DType| x.map(|x| fmt_at(x, dtype)).unwrap_or_else(|| "-".into());
    let stored = |x: Option<f64>| at(x, sample.dtype);
    let txt = |x: Option<f64>| at(x, phys_dtype);
    let sampled = st.count < sample.of;
    report.summary.insert(
        "stats".into(),
        json!({
            "count": st.count, "nan_count": st.nan_count, "sampled": sampled,
            "min": opt(st.min), "max": opt(st.max), "mean": opt(st.mean),
            "physical_min": opt(pmin), "physical_max": opt(pmax), "physical_mean": opt(phys(st.mean)),
        }),
    );
    let title = if sampled {
        format!(
            "Values (the first {} of {} values; --all for every value)",
            st.count, sample.of
        )
    } else {
        "Values".to_string()
    };
    report.table(
        title,
        &["", "min", "max", "mean"],
        vec![
            vec!["stored".into(), stored(st.min), stored(st.max), stored(st.mean)],
            vec![
                "physical (stored * scale + offset)".into(),
                txt(pmin),
                txt(pmax),
                txt(phys(st.mean)),
            ],
        ],
    );
    if st.nan_count > 0 {
        report.fields("NaN", vec![("NaN values".into(), st.nan_count.to_string())]);
    }
}
