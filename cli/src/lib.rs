//! rasterpack as one library: open, validate, inspect, read and write any of the formats it
//! knows (VOLP, GVRS, UDF, FOLD, OpenVDS, `.npy` and `.npz`) without naming the format, as
//! `image::open` does for pictures. The format comes from the content, never from the name.
//!
//! ```no_run
//! # fn main() -> rasterpack::Result<()> {
//! let file = rasterpack::open("cube.volp")?;          // any of the six formats
//! println!("{} file", file.format_name());
//! for info in file.arrays()? {
//!     println!("{:?} {:?} {:?}", info.name, info.dtype, info.shape);
//! }
//! let whole = file.read(&rasterpack::ArrayRequest::default())?;   // the default array
//! let values: Vec<f64> = whole.to_vec()?;                          // typed, checked
//!
//! // The full report `rasterpack validate` prints, even for a file whose header is broken.
//! let report = rasterpack::validate("cube.volp")?;
//! for f in report.findings.iter() {
//!     println!("{} {} @ {:?}: {}", f.severity.as_str(), f.code, f.offset, f.message);
//! }
//!
//! // Write an array; the format follows the extension (or name one: `save_as`).
//! rasterpack::save(&whole, "cube.npy", &rasterpack::WriteOptions::default())?;
//! # let _ = values;
//! # Ok(())
//! # }
//! ```
//!
//! The CLI (`rasterpack` binary, default feature `cli`) is one front on these calls; library
//! users who want none of its dependencies use `default-features = false`. Each format is also
//! usable alone through its own crate, re-exported here ([`volp`], [`gvrs`], [`udf`], [`fold`],
//! [`vds`], [`common`]), with reader types of one shape (`XFile::open`, `.arrays()`,
//! `.read()`, `.stream()`, `.blocks::<T>()`, `.validate()`, `XFile::validate_path`).
//! docs/library.md shows the whole shape.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::path::Path;

pub use rasterpack_common as common;
pub use rasterpack_fold as fold;
pub use rasterpack_gvrs as gvrs;
pub use rasterpack_udf as udf;
pub use rasterpack_vds_meta as vds;
pub use rasterpack_volp as volp;
pub use rasterpack_zarr as zarr;

pub use rasterpack_common::{
    ArrayFile, ArrayInfo, ArrayRequest, ArraySink, DType, Element, Error, ErrorKind, Finding, Findings, Format, Input,
    InspectOptions, Limits, NdArray, Region, RegionSpec, Report, RequestFlag, Result, Severity, ValidateOptions,
    WriteOptions,
};

/// Every format rasterpack knows, in the order detection asks them (their magics do not
/// overlap, so the order decides nothing today). The CLI uses this same list.
static FORMATS: [&dyn Format; 8] = [
    &rasterpack_common::NpyFormat,
    &rasterpack_volp::VolpFormat,
    &rasterpack_gvrs::GvrsFormat,
    &rasterpack_udf::UdfFormat,
    &rasterpack_fold::FoldFormat,
    &rasterpack_fold::NpzFormat,
    &rasterpack_vds_meta::VdsFormat,
    &rasterpack_zarr::ZarrFormat,
];

/// Every format rasterpack knows: the one registry the CLI and the library share.
pub fn formats() -> &'static [&'static dyn Format] {
    &FORMATS
}

/// The format of `input`, from its content (magic bytes, or a directory's layout document),
/// never from its name; unknown content is a `format.unknown` error.
pub fn detect(input: &Input) -> Result<&'static dyn Format> {
    rasterpack_common::detect(input, formats())
}

/// The format named `name` (`"volp"`) or written to files with extension `name` (`"npy"`, a
/// leading dot and case ignored): how a target is chosen when writing.
pub fn format_by_name(name: &str) -> Option<&'static dyn Format> {
    let wanted = name.trim_start_matches('.').to_ascii_lowercase();
    formats()
        .iter()
        .copied()
        .find(|f| f.name() == wanted || f.extensions().contains(&wanted.as_str()))
}

/// Open `path` (a file, a directory holding an OpenVDS object-store dataset or a Zarr store, or
/// a URL: see [`input`]) as whichever format its content says, with default [`Limits`].
///
/// Fails when the path cannot be read (`io`), the content is no known format
/// (`format.unknown`) or its structure does not open (the first broken rule's code and
/// offset); [`validate`] then gives every finding.
pub fn open(path: impl AsRef<Path>) -> Result<Box<dyn ArrayFile>> {
    open_with(path, Limits::default())
}

/// [`open`] with other [`Limits`].
pub fn open_with(path: impl AsRef<Path>, limits: Limits) -> Result<Box<dyn ArrayFile>> {
    open_input(input(path)?, limits)
}

/// The [`Input`] at `path`: a URL (`s3://`, `gs://`, `az://`, `http(s)://`, `file://`) read by
/// ranges through `rasterpack-store`, with endpoints and credentials from the environment
/// (`AWS_ENDPOINT_URL`, ...: the CLI adds its `--storage-option` pairs), or a local path. What
/// [`open`], [`validate`] and [`inspect`] read, so every front takes the same URLs.
pub fn input(path: impl AsRef<Path>) -> Result<Input> {
    let path = path.as_ref();
    match path.to_str().filter(|p| rasterpack_store::is_url(p)) {
        Some(url) => rasterpack_store::open(url, &rasterpack_store::StoreOptions::default()),
        None => Input::open(path),
    }
}

/// Open an [`Input`] (a path, or bytes in memory) as whichever format its content says.
pub fn open_input(input: Input, limits: Limits) -> Result<Box<dyn ArrayFile>> {
    let format = detect(&input)?;
    format.open(input, limits)
}

/// Every finding of the file at `path`: the full report `rasterpack validate` prints, whatever
/// is wrong with the file (unknown content, a broken header, damaged payloads: all findings,
/// never just the first error). `Err` only when the path cannot be read at all (`io`).
///
/// `report.is_valid(strict)` is the verdict; `report.unsupported` marks a feature rasterpack
/// does not implement.
pub fn validate(path: impl AsRef<Path>) -> Result<Report> {
    let input = input(path)?;
    Ok(validate_input(&input, &ValidateOptions::default()))
}

/// [`validate`] for an opened [`Input`], with options (limits, a progress callback). A format
/// that cannot be detected is reported as a `format.unknown` finding (or, for a directory of
/// no known layout, as unsupported), as the CLI reports it.
///
/// As in the CLI's reports, at most [`common::LISTED_PER_CODE`] findings of one code are
/// listed and the rest counted (`report.findings.omitted()`), so a flood of one finding cannot
/// fill memory.
pub fn validate_input(input: &Input, opts: &ValidateOptions) -> Report {
    // Validate reads every byte: a remote object is fetched ahead of the checks.
    input.advise_sequential();
    let mut report = match detect(input) {
        Ok(format) => format.validate(input, opts),
        Err(e) => {
            let mut report = Report::new("");
            report.fail(&e);
            report
        }
    };
    report.cap_findings(common::LISTED_PER_CODE);
    report
}

/// What the file at `path` holds (the report `rasterpack inspect` prints): header facts as
/// JSON in `summary`, and cheap structural findings.
pub fn inspect(path: impl AsRef<Path>) -> Result<Report> {
    let input = input(path)?;
    let format = detect(&input)?;
    let mut report = format
        .inspect(&input, &InspectOptions::default())
        .map_err(|e| e.in_format(format.name()))?;
    report.cap_findings(common::LISTED_PER_CODE);
    Ok(report)
}

/// Write `array` to `path` in the format its extension names (`.volp`, `.gvrs`, `.udf`,
/// `.fold`, `.npy`); see [`save_as`] to name the format. Options the format does not honour
/// are refused (`request.option_not_honoured`).
pub fn save(array: &NdArray, path: impl AsRef<Path>, opts: &WriteOptions) -> Result<()> {
    let path = path.as_ref();
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let format = format_by_name(ext).ok_or_else(|| {
        Error::usage(format!(
            "cannot tell which format to write to {}: give the path an extension of a format rasterpack \
             writes (volp, gvrs, udf, fold, npy) or use save_as",
            path.display()
        ))
    })?;
    format.save(array, path, opts)
}

/// Write `array` to `path` as the format named `format` (`"gvrs"`).
pub fn save_as(array: &NdArray, path: impl AsRef<Path>, format: &str, opts: &WriteOptions) -> Result<()> {
    let target =
        format_by_name(format).ok_or_else(|| Error::usage(format!("rasterpack knows no format named {format:?}")))?;
    target.save(array, path.as_ref(), opts)
}

/// Run `f` (a read) so that its parallel work runs on this thread when rayon's global pool has
/// a single thread (`RAYON_NUM_THREADS=1`): reads from several threads (Python threads, a
/// caller's own workers) then decode side by side, one core each, instead of queueing their
/// pieces in that pool's one worker. With a larger pool, or inside a pool, `f` runs as it is.
/// The Python package runs every read through this.
pub fn on_this_thread_when_alone<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    if rayon::current_num_threads() > 1 || rayon::current_thread_index().is_some() {
        return f();
    }
    thread_local! {
        // A pool of this thread alone: `install` runs `f` here and its parallel work inline.
        static ALONE: Option<rayon::ThreadPool> = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .use_current_thread()
            .build()
            .ok();
    }
    ALONE.with(|pool| match pool {
        Some(pool) => pool.install(f),
        None => f(),
    })
}

/// The CLI's commands as library calls: opening inputs (`-`, FIFOs), the `--json` entries of
/// `inspect`/`validate`, and `convert` with its arguments. The `rasterpack` binary and the
/// Python package (`python/`) both run these, so the two fronts share one implementation. Their
/// contract is docs/cli.md.
#[cfg(feature = "cli")]
#[allow(missing_docs)]
pub mod args;
#[cfg(feature = "cli")]
#[allow(missing_docs)]
pub mod budget;
#[cfg(feature = "cli")]
#[allow(missing_docs)]
pub mod convert;
#[cfg(feature = "cli")]
#[allow(missing_docs)]
pub mod detect;
#[cfg(feature = "cli")]
#[allow(missing_docs)]
pub mod preview;
#[cfg(feature = "cli")]
#[allow(missing_docs)]
pub mod progress;
#[cfg(feature = "cli")]
#[allow(missing_docs)]
pub mod report;
#[cfg(feature = "cli")]
#[allow(missing_docs)]
pub mod signals;

#[cfg(feature = "cli")]
#[allow(missing_docs)]
pub mod subset;
#[cfg(feature = "cli")]
#[allow(missing_docs)]
pub mod vds_out;
#[cfg(feature = "cli")]
#[allow(missing_docs)]
pub mod zarr_out;

/// The repository README's examples, compiled as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
