//! `stats FILE...`: the value statistics of each array (`rasterpack_common::stats` computes
//! them while the array streams; this module only chooses the arrays and prints).

use std::io::Write;
use std::path::Path;

use rasterpack_common::json::{self, fmt_f64};
use rasterpack_common::stats::{self, Stats};
use rasterpack_common::{ArrayInfo, ArrayRequest, DType, Error, Limits, RegionSpec, Report};
use serde_json::{json, Map, Value};

use crate::output::write_failed;
use crate::StatsArgs;
use rasterpack::detect;
use rasterpack::report::{exit_code_for, finding_json, worst, Outcome, SCHEMA_VERSION};

/// One array's outcome.
struct ArrayResult {
    name: Option<String>,
    /// What the source announced (or listed); `None` when the array could not be found.
    info: Option<ArrayInfo>,
    stats: Result<Stats, Error>,
}

/// One input's outcome.
struct FileResult {
    path: String,
    format: Option<&'static str>,
    /// Why the file could not be opened or its arrays listed.
    error: Option<Error>,
    arrays: Vec<ArrayResult>,
    /// Arrays of the file past [`MAX_ARRAYS`], not computed.
    omitted: usize,
    exit_code: u8,
}

/// Without `--element`, the figures of at most this many arrays per file (the first ones the
/// file lists; the others are counted), as `inspect` describes at most 4096 UDF tables: a file
/// of 330,000 empty arrays must not hold 330,000 results in memory.
const MAX_ARRAYS: usize = 4096;

pub fn run(args: &StatsArgs) -> Outcome {
    let limits = Limits::default();
    let region = match args.region.as_deref().map(RegionSpec::parse).transpose() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rasterpack: stats: --region: {e}");
            return Outcome::Code(2);
        }
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut code = 0u8;
    let mut files = Vec::new();
    for path in &args.paths {
        let result = process(args, path, region.as_ref(), &limits);
        let path = &result.path;
        code = worst(code, result.exit_code);
        if let Some(e) = &result.error {
            eprintln!("rasterpack: stats {path}: {e}");
        }
        for a in &result.arrays {
            if let Err(e) = &a.stats {
                eprintln!(
                    "rasterpack: stats {path} {}: {e}",
                    a.name.as_deref().unwrap_or("(array)")
                );
            }
        }
        if args.json {
            files.push(file_json(&result));
        } else if let Err(e) = out.write_all(render(&result).as_bytes()) {
            return write_failed(&e);
        }
    }
    if args.json {
        let doc = json!({ "schema_version": SCHEMA_VERSION, "files": files });
        let written = serde_json::to_writer_pretty(&mut out, &doc)
            .map_err(std::io::Error::from)
            .and_then(|_| out.write_all(b"\n"));
        if let Err(e) = written {
            return write_failed(&e);
        }
    }
    if let Err(e) = out.flush() {
        return write_failed(&e);
    }
    Outcome::Code(code)
}

fn process(args: &StatsArgs, path: &Path, region: Option<&RegionSpec>, limits: &Limits) -> FileResult {
    let mut result = FileResult {
        path: path.display().to_string(),
        format: None,
        error: None,
        arrays: Vec::new(),
        omitted: 0,
        exit_code: 0,
    };
    let fail = |mut r: FileResult, e: Error| {
        r.exit_code = exit_code_for(e.kind);
        r.error = Some(e);
        r
    };
    let input = match detect::open(path, limits) {
        Ok(i) => i,
        Err(e) => return fail(result, e),
    };
    let format = match detect::detect(&input) {
        Ok(f) => f,
        Err(e) => return fail(result, e),
    };
    result.format = Some(format.name());
    let file = match format.open(input, *limits) {
        Ok(f) => f,
        Err(e) => return fail(result, e.in_format(format.name())),
    };
    let one = |name: Option<String>| -> (Option<ArrayInfo>, Result<Stats, Error>) {
        let req = ArrayRequest {
            element: name,
            region: region.cloned(),
            lod: args.lod.unwrap_or(0),
            limits: *limits,
            ..ArrayRequest::default()
        };
        let mut announced: Option<ArrayInfo> = None;
        // The second pass (the histogram) announces the same array again.
        let stats = stats::compute(
            |sink| {
                let mut tap = Tap {
                    inner: sink,
                    info: &mut announced,
                };
                rasterpack_common::stream_view(&req, false, 0, &mut tap, |r, s| file.stream(r, s))
            },
            args.histogram,
        );
        (announced, stats)
    };
    // The first array is read before the file is listed: a FOLD listing verifies every chunk,
    // and the read of a file's only NPZ0 chunk runs those same checks in its own pass and
    // keeps the listing, so the chunk is decoded once, not twice. Its figures are used only if
    // the listing names it (what the listing leaves out is not computed).
    let first = match &args.element {
        Some(name) => Some(name.clone()),
        None => file.array_info(None).ok().and_then(|a| a.name),
    };
    let mut early = first.map(|name| (name.clone(), one(Some(name))));
    // The arrays asked for, or every array the file lists.
    let listed = match file.arrays() {
        Ok(a) => a,
        Err(e) => return fail(result, e.in_format(format.name())),
    };
    // With --element, the reader itself finds the array (or says why it cannot).
    let chosen: Vec<Option<String>> = match &args.element {
        Some(name) => vec![Some(name.clone())],
        None => {
            result.omitted = listed.len().saturating_sub(MAX_ARRAYS);
            listed.into_iter().take(MAX_ARRAYS).map(|a| a.name).collect()
        }
    };
    let without_element = args.element.is_none();
    for name in chosen {
        let reuse = early.take_if(|(first, _)| name.as_deref() == Some(first.as_str()));
        let (info, stats) = match reuse {
            Some((_, done)) => done,
            None => one(name.clone()),
        };
        if let Err(e) = &stats {
            result.exit_code = worst(result.exit_code, exit_code_for(e.kind));
        }
        result.arrays.push(ArrayResult { name, info, stats });
    }
    // "Every array" includes those the listing had to leave out (a FOLD chunk that fails its
    // checks): each is shown with the error a read of it gives, never passed over in silence.
    if without_element {
        let unlisted = match file.unlisted() {
            Ok(u) => u,
            Err(e) => return fail(result, e.in_format(format.name())),
        };
        for (what, e) in unlisted {
            let e = e.in_format(format.name());
            result.exit_code = worst(result.exit_code, exit_code_for(e.kind));
            result.arrays.push(ArrayResult {
                name: Some(what),
                info: None,
                stats: Err(e),
            });
        }
    }
    result
}

/// Passes everything on and keeps what the source announced (the dtype and shape of the
/// region actually read). A source that holds blocks aside until its checks pass announces the
/// array only then ([`rasterpack_common::HeldBlocks`]): a chunk that fails them shows no dtype
/// or shape either.
struct Tap<'a, 'b> {
    inner: &'a mut dyn rasterpack_common::ArraySink,
    info: &'b mut Option<ArrayInfo>,
}

impl<'a> rasterpack_common::SinkWrapper for Tap<'a, '_> {
    type Inner = dyn rasterpack_common::ArraySink + 'a;
    fn inner(&mut self) -> &mut (dyn rasterpack_common::ArraySink + 'a) {
        self.inner
    }
    fn inner_ref(&self) -> &(dyn rasterpack_common::ArraySink + 'a) {
        self.inner
    }
    fn begin(&mut self, info: &ArrayInfo) -> rasterpack_common::Result<()> {
        *self.info = Some(ArrayInfo {
            attrs: Map::new(),
            ..info.clone()
        });
        self.inner.begin(info)
    }
}

fn file_json(r: &FileResult) -> Value {
    let mut obj = Map::new();
    obj.insert("path".into(), Value::from(r.path.clone()));
    obj.insert("format".into(), r.format.map(Value::from).unwrap_or(Value::Null));
    obj.insert("checked".into(), Value::from("values"));
    obj.insert("unsupported".into(), Value::from(r.exit_code == 3));
    obj.insert("exit_code".into(), Value::from(r.exit_code));
    let mut report = Report::new(r.format.unwrap_or(""));
    if let Some(e) = &r.error {
        report.fail(e);
    }
    for a in &r.arrays {
        if let Err(e) = &a.stats {
            report.fail(e);
        }
    }
    let findings: Vec<Value> = report.findings.iter().map(finding_json).collect();
    obj.insert("findings".into(), Value::Array(findings));
    obj.insert("findings_omitted".into(), Value::Array(Vec::new()));
    obj.insert("summary".into(), Value::Object(Map::new()));
    let arrays = r
        .arrays
        .iter()
        .map(|a| {
            json!({
                "name": a.name,
                "dtype": a.info.as_ref().map(|i| i.dtype.name()),
                "shape": a.info.as_ref().map(|i| i.shape.clone()),
                "stats": a.stats.as_ref().map(Stats::to_json).unwrap_or(Value::Null),
            })
        })
        .collect();
    obj.insert("stats".into(), Value::Array(arrays));
    obj.insert("arrays_omitted".into(), Value::from(r.omitted));
    Value::Object(obj)
}

/// A figure as text at the array's own precision ([`json::fmt_at`]: an f32 array's values,
/// mean and std as f32, `245.76276`, not `245.76275634765625`). The sum and the histogram
/// edges are not the array's values and stay f64, as JSON keeps every figure.
fn fmt_at(v: f64, dtype: Option<DType>) -> String {
    match dtype {
        Some(d) => json::fmt_at(v, d),
        None => fmt_f64(v),
    }
}

fn render(r: &FileResult) -> String {
    let mut s = format!("{} ({})\n", r.path, r.format.unwrap_or("unreadable"));
    for a in &r.arrays {
        let name = a.name.as_deref().unwrap_or("(array)");
        match &a.info {
            Some(info) => {
                let shape: Vec<String> = info.shape.iter().map(u64::to_string).collect();
                s += &format!("  {name}  {} ({})\n", info.dtype.name(), shape.join(" x "));
            }
            None => s += &format!("  {name}\n"),
        }
        let st = match &a.stats {
            Ok(st) => st,
            Err(e) => {
                s += &format!("    error: {e}\n");
                continue;
            }
        };
        let dtype = a.info.as_ref().map(|i| i.dtype);
        let opt = |v: Option<f64>| v.map(|v| fmt_at(v, dtype)).unwrap_or_else(|| "-".into());
        let fill = st
            .fill
            .map(|f| format!(" (fill value {})", fmt_at(f, dtype)))
            .unwrap_or_default();
        s += &format!(
            "    cells {}: valid {}, fill {}{fill}, NaN {}, inf {}\n",
            st.count, st.valid_count, st.fill_count, st.nan_count, st.inf_count
        );
        s += &format!(
            "    min {}  max {}  mean {}  std {}  sum {}\n",
            opt(st.min),
            opt(st.max),
            opt(st.mean),
            opt(st.std),
            fmt_f64(st.sum)
        );
        if let Some(h) = &st.histogram {
            let counts: Vec<String> = h.counts.iter().map(u64::to_string).collect();
            s += &format!(
                "    histogram of {} bins over [{}, {}]: {}\n",
                h.counts.len(),
                fmt_f64(h.min),
                fmt_f64(h.max),
                counts.join(" ")
            );
        }
    }
    if r.omitted > 0 {
        s += &format!(
            "  ... and {} more arrays not computed (stats computes the first {MAX_ARRAYS}; choose one with --element)\n",
            r.omitted
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stats_tap_passes_every_hook_on() {
        use rasterpack_common::testkit::{assert_forwards, call_every_hook, HookProbe};
        let (mut probe, mut announced) = (HookProbe::default(), None);
        let info = ArrayInfo::new(DType::I16, vec![7]);
        call_every_hook(
            &mut Tap {
                inner: &mut probe,
                info: &mut announced,
            },
            &info,
        );
        assert_forwards("Tap", &probe, &[]);
        assert_eq!(announced, Some(info));
    }
}
