//! [`VolpFormat`]: VOLP behind the CLI's [`Format`] trait.

use std::io::Write;

use rasterpack_common::json::{f64_value, fmt_bytes, fmt_f64};
use rasterpack_common::{
    ArrayRequest, DType, Error, Format, Input, InspectOptions, Limits, NdArray, Report, Result, ValidateOptions,
    WriteOptions,
};
use serde_json::{json, Map, Value};

use crate::model::{self, Volume};
use crate::parse::{self, BodyInfo, Structure};
use crate::raw::MAGIC;
use crate::write::{encode, DEFAULT_LEVEL};

/// Bodies up to this size are decoded by `inspect` for statistics (`--all` lifts it).
const INSPECT_DECODE_MAX: u64 = 64 << 20;

/// The VOLP format.
pub struct VolpFormat;

fn compact(v: &Value, all: bool) -> String {
    let s = v.to_string();
    if all || s.chars().count() <= 120 {
        s
    } else {
        let cut: String = s.chars().take(117).collect();
        format!("{cut}...")
    }
}

/// Build a report from what could be read. `decode` says whether to decode the body.
fn build_report(data: &[u8], limits: &Limits, decode: bool, all: bool) -> Result<Report> {
    let s = parse::parse_structure(data, limits)?;
    let mut report = Report::new("volp");
    for e in &s.check.errors {
        report.findings.push_error(e);
    }
    report.findings.extend(s.check.notes.clone());
    let mut body_info: Option<BodyInfo> = None;
    let mut volume: Option<Volume> = None;
    let body = data.get(s.body_offset as usize..).unwrap_or(&[]);
    match (&s.check.header, s.check.compression_ok) {
        (_, false) => report.findings.info(
            "volp.body.not_checked",
            Some(s.body_offset),
            "body not checked: its compression is not zstd",
        ),
        (Some(h), true) if decode || h.decoded_len() <= INSPECT_DECODE_MAX => {
            match parse::decode_body_vec(body, s.body_offset, h.decoded_len(), limits) {
                Ok((info, data)) => {
                    body_info = Some(info);
                    volume = Some(Volume {
                        header: h.clone(),
                        data,
                    });
                }
                Err(e) => report.findings.push_error(&e),
            }
        }
        _ => {
            let planned = match &s.check.header {
                Some(h) => parse::plan_body(body, s.body_offset, h.decoded_len()).map(|_| ()),
                None => parse::frames(body, s.body_offset).map(|_| ()),
            };
            if let Err(e) = planned {
                report.findings.push_error(&e);
            } else if s.check.header.is_some() {
                report.findings.info(
                    "volp.body.not_decoded",
                    Some(s.body_offset),
                    format!(
                        "body larger than {} not decoded by inspect (use --all or validate)",
                        fmt_bytes(INSPECT_DECODE_MAX)
                    ),
                );
            }
        }
    }
    describe(&mut report, &s, body_info, volume.as_ref(), all);
    Ok(report)
}

fn describe(report: &mut Report, s: &Structure, body: Option<BodyInfo>, volume: Option<&Volume>, all: bool) {
    let sum = &mut report.summary;
    let c = &s.check;
    sum.insert("header_len".into(), Value::from(s.prefix.header_len));
    sum.insert("body_len".into(), Value::from(s.body_len));
    let mut rows: Vec<(String, String)> = Vec::new();
    match &c.header {
        Some(h) => {
            let decoded = h.decoded_len();
            sum.insert("version".into(), Value::from(h.version));
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
            rows.push(("version".into(), h.version.to_string()));
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
        rows.push((
            "frames".into(),
            format!("{} zstd, {} skippable", b.zstd_frames, b.skippable_frames),
        ));
    }
    report.fields("VOLP header", rows);

    if let Some(h) = &c.header {
        let mut meta_rows: Vec<(String, String)> = h
            .metadata
            .entries()
            .into_iter()
            .map(|(k, v)| (k.to_string(), compact(v, all)))
            .collect();
        for (k, v) in &h.unknown {
            meta_rows.push((format!("{k} (unknown key)"), compact(v, all)));
        }
        if !meta_rows.is_empty() {
            report.fields("Metadata", meta_rows);
        }
    } else {
        let text = serde_json::to_string_pretty(&Value::Object(c.json.clone())).unwrap_or_default();
        report.text("Header JSON", text);
    }

    if let Some(v) = volume {
        let st = model::stats(v);
        let (sc, of) = (v.header.scale, v.header.offset);
        let phys = |x: Option<f64>| x.map(|x| x * sc + of);
        let (pmin, pmax) = if sc < 0.0 {
            (phys(st.max), phys(st.min))
        } else {
            (phys(st.min), phys(st.max))
        };
        let opt = |x: Option<f64>| x.map(f64_value).unwrap_or(Value::Null);
        let txt = |x: Option<f64>| x.map(fmt_f64).unwrap_or_else(|| "-".into());
        report.summary.insert(
            "stats".into(),
            json!({
                "count": st.count, "nan_count": st.nan_count,
                "min": opt(st.min), "max": opt(st.max), "mean": opt(st.mean),
                "physical_min": opt(pmin), "physical_max": opt(pmax), "physical_mean": opt(phys(st.mean)),
            }),
        );
        report.table(
            "Values",
            &["", "min", "max", "mean"],
            vec![
                vec!["stored".into(), txt(st.min), txt(st.max), txt(st.mean)],
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
}

fn load(input: &Input, limits: &Limits) -> Result<std::sync::Arc<Vec<u8>>> {
    input.read_all(limits).map_err(|e| match e.kind {
        rasterpack_common::ErrorKind::LimitExceeded => parse::alloc_limit(e),
        _ => e.in_format("volp"),
    })
}

fn attr_f64(attrs: &Map<String, Value>, key: &str, default: f64) -> f64 {
    attrs
        .get(key)
        .and_then(Value::as_f64)
        .filter(|v| v.is_finite())
        .unwrap_or(default)
}

impl Format for VolpFormat {
    fn name(&self) -> &'static str {
        "volp"
    }
    fn honours(&self) -> &'static [rasterpack_common::RequestFlag] {
        use rasterpack_common::RequestFlag;
        &[RequestFlag::Physical, RequestFlag::Compress]
    }
    fn description(&self) -> &'static str {
        "VOLP volume pack: JSON header + zstd [levels, lat, lon] tensor"
    }
    fn extensions(&self) -> &'static [&'static str] {
        &["volp"]
    }
    fn detect(&self, head: &[u8]) -> bool {
        head.starts_with(&MAGIC)
    }
    fn inspect(&self, input: &Input, opts: &InspectOptions) -> Result<Report> {
        let data = load(input, &opts.limits)?;
        build_report(&data, &opts.limits, opts.all, opts.all)
    }
    fn validate(&self, input: &Input, opts: &ValidateOptions) -> Report {
        let res = load(input, &opts.limits).and_then(|data| build_report(&data, &opts.limits, true, false));
        match res {
            Ok(r) => r,
            Err(e) => {
                let mut r = Report::new("volp");
                r.fail(&e);
                r
            }
        }
    }
    fn read_array(&self, input: &Input, req: &ArrayRequest) -> Result<NdArray> {
        let data = load(input, &req.limits)?;
        let vol = crate::decode_with_limits(&data, &req.limits)?;
        let h = &vol.header;
        let mut attrs = Map::new();
        for (k, v) in h.metadata.entries() {
            attrs.insert(k.into(), v.clone());
        }
        attrs.insert("version".into(), Value::from(h.version));
        let shape = h.shape.to_vec();
        let mut arr = if req.physical {
            // Physical values already include scale and offset; keep the originals apart so a
            // later VOLP write does not apply them twice.
            attrs.insert("source_scale".into(), f64_value(h.scale));
            attrs.insert("source_offset".into(), f64_value(h.offset));
            NdArray::new(DType::F64, shape, model::to_physical_le_bytes(&vol))?
        } else {
            attrs.insert("scale".into(), f64_value(h.scale));
            attrs.insert("offset".into(), f64_value(h.offset));
            let dtype = h.dtype;
            NdArray::new(dtype, shape, vol.data)?
        };
        arr.name = h.metadata.variable.as_ref().and_then(Value::as_str).map(str::to_string);
        arr.attrs = attrs;
        Ok(arr)
    }
    fn write_array(&self, array: &NdArray, opts: &WriteOptions, out: &mut dyn Write) -> Result<()> {
        if !model::DTYPES.contains(&array.dtype) {
            return Err(Error::usage(format!(
                "VOLP cannot store {} values: only uint8, int16, int32, float32 and float64",
                array.dtype.name()
            )));
        }
        let shape: [u64; 3] = array.shape.as_slice().try_into().map_err(|_| {
            Error::usage(format!(
                "VOLP holds 3-D volumes [levels, lat, lon]; this array has {} dimension(s) {:?}",
                array.shape.len(),
                array.shape
            ))
        })?;
        let level = match opts.compress.as_deref() {
            None => DEFAULT_LEVEL,
            Some(c) if c.eq_ignore_ascii_case("zstd") => DEFAULT_LEVEL,
            Some(c) => match c
                .split_once(':')
                .filter(|(n, _)| n.eq_ignore_ascii_case("zstd"))
                .and_then(|(_, l)| l.parse::<i32>().ok())
            {
                Some(l) if (1..=22).contains(&l) => l,
                _ => {
                    return Err(Error::usage(format!(
                        "VOLP compression must be \"zstd\" or \"zstd:LEVEL\" (1..=22), not {c:?}"
                    )))
                }
            },
        };
        let scale = attr_f64(&array.attrs, "scale", 1.0);
        let offset = attr_f64(&array.attrs, "offset", 0.0);
        let mut meta = Map::new();
        for k in ["bbox", "levels", "variable", "valid_time"] {
            if let Some(v) = array.attrs.get(k) {
                meta.insert(k.into(), v.clone());
            }
        }
        if !meta.contains_key("variable") {
            if let Some(n) = &array.name {
                meta.insert("variable".into(), Value::from(n.clone()));
            }
        }
        let bytes = encode(array.dtype, shape, &array.data, scale, offset, &meta, level)?;
        out.write_all(&bytes).map_err(|e| Error::io("writing VOLP", &e))
    }
}
