//! `diff A B`: compare two arrays across formats (`rasterpack_common::diff` streams both sides
//! in step; this module opens the files and prints).

use std::io::Write;
use std::path::Path;

use rasterpack_common::diff::{self, Diff, Tolerance};
use rasterpack_common::json::fmt_at;
use rasterpack_common::{ArrayFile, ArrayRequest, DType, Error, Limits};
use serde_json::json;

use crate::DiffArgs;
use rasterpack::detect;
use rasterpack::report::{exit_code_for, Outcome, SCHEMA_VERSION};

fn open(path: &Path, limits: &Limits) -> Result<Box<dyn ArrayFile>, Error> {
    let input = detect::open(path, limits)?;
    let format = detect::detect(&input)?;
    format.open(input, *limits).map_err(|e| e.in_format(format.name()))
}

pub fn run(args: &DiffArgs) -> Outcome {
    let tol = Tolerance {
        atol: args.atol,
        rtol: args.rtol,
    };
    if !(tol.atol >= 0.0 && tol.rtol >= 0.0) {
        eprintln!("rasterpack: diff: --atol and --rtol must be >= 0");
        return Outcome::Code(2);
    }
    let limits = Limits::default();
    let result = open(&args.a, &limits).and_then(|fa| {
        let fb = open(&args.b, &limits)?;
        let req = |e: &Option<String>| ArrayRequest {
            element: e.clone(),
            limits,
            ..ArrayRequest::default()
        };
        let (ra, rb) = (req(&args.element_a), req(&args.element_b));
        let fa = &fa;
        diff::compare(|sink| fa.stream(&ra, sink), |sink| fb.stream(&rb, sink), tol)
    });
    let d = match result {
        Ok(d) => d,
        Err(e) => {
            eprintln!("rasterpack: diff {} {}: {e}", args.a.display(), args.b.display());
            return Outcome::Code(exit_code_for(e.kind));
        }
    };
    let text = if args.json {
        let mut v = d.to_json();
        v["a"] = json!(args.a.display().to_string());
        v["b"] = json!(args.b.display().to_string());
        v["atol"] = json!(tol.atol);
        v["rtol"] = json!(tol.rtol);
        let doc = json!({ "schema_version": SCHEMA_VERSION, "diff": v });
        format!("{}\n", serde_json::to_string_pretty(&doc).unwrap_or_default())
    } else {
        render(args, &d)
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return Outcome::BrokenPipe;
        }
        eprintln!("rasterpack: writing the report: {e}");
        return Outcome::Code(2);
    }
    Outcome::Code(if d.equal() { 0 } else { 1 })
}

fn render(args: &DiffArgs, d: &Diff) -> String {
    let side = |path: &Path, (dtype, shape): &(rasterpack_common::DType, Vec<u64>)| {
        let shape: Vec<String> = shape.iter().map(u64::to_string).collect();
        format!("{}: {} ({})\n", path.display(), dtype.name(), shape.join(" x "))
    };
    let mut s = side(&args.a, &d.a) + &side(&args.b, &d.b);
    if d.a.1 != d.b.1 {
        return s + "differ: the shapes differ (no cell compared)\n";
    }
    if d.a.0 != d.b.0 {
        s += "the dtypes differ (the values are compared as float64)\n";
    }
    if d.differing == 0 {
        s += &format!("{} cells compared: all equal\n", d.compared);
        if d.a.0 != d.b.0 {
            s += "differ: dtype\n";
        }
        return s;
    }
    let first: Vec<String> = d.first.iter().flatten().map(u64::to_string).collect();
    // At the arrays' own precision: differences of two float32 arrays as f32 (`0.099999905`,
    // not `0.09999990463256836`), any other pair as f64 (the JSON keeps f64).
    let precision = match (d.a.0, d.b.0) {
        (DType::F32 | DType::F16, DType::F32 | DType::F16) => DType::F32,
        _ => DType::F64,
    };
    let fmt = |v: f64| fmt_at(v, precision);
    s + &format!(
        "differ: {} of {} cells; max abs difference {}, max relative {}; first at [{}]\n",
        d.differing,
        d.compared,
        d.max_abs.map(fmt).unwrap_or_default(),
        d.max_rel.map(fmt).unwrap_or_else(|| "-".into()),
        first.join(", ")
    )
}
