//! Open a `.npy` file through the format-independent interface, list its array, validate it,
//! and print a few values, optionally of a region:
//!
//! ```sh
//! cargo run -p rasterpack-common --example npy_info -- cube.npy            # the whole array
//! cargo run -p rasterpack-common --example npy_info -- cube.npy 0:2,5      # numpy-like slices
//! ```
//!
//! Only the public API of `rasterpack-common` is used; a format crate's `Format` in the list
//! given to `open_any` would make the same program read that format too.

use std::process::ExitCode;

use rasterpack_common::{open_any, ArrayRequest, Format, NpyFormat, RegionSpec, Severity};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: npy_info FILE.npy [SLICES]");
        return ExitCode::from(2);
    };
    match run(path, args.get(1).map(String::as_str)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("npy_info: {path}: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(path: &str, slices: Option<&str>) -> rasterpack_common::Result<()> {
    let formats: &[&dyn Format] = &[&NpyFormat];
    let file = open_any(path, formats)?;
    for array in file.arrays()? {
        println!(
            "{} array {}: {} {:?}",
            file.format_name(),
            array.name.as_deref().unwrap_or("(unnamed)"),
            array.dtype.name(),
            array.shape
        );
    }
    let report = file.validate();
    for finding in report.findings.iter().filter(|f| f.severity != Severity::Info) {
        println!("  {} {}: {}", finding.severity.as_str(), finding.code, finding.message);
    }
    println!("valid: {}", report.is_valid(false));

    let mut request = ArrayRequest::default();
    if let Some(slices) = slices {
        request = request.with_region(RegionSpec::parse(slices)?);
    }
    let array = file.read(&request)?;
    let values = array.to_f64();
    let shown: Vec<String> = values.iter().take(8).map(|v| v.to_string()).collect();
    println!(
        "read {:?} ({} values): {}{}",
        array.shape,
        values.len(),
        shown.join(", "),
        if values.len() > 8 { ", ..." } else { "" }
    );
    Ok(())
}
