//! `rasterpack`: inspect, validate and convert VOLP, UDF, GVRS, FOLD and OpenVDS files.
//!
//! The contract (commands, exit codes, JSON shape) is `docs/cli.md`; the formats plug in through
//! `rasterpack_common::Format` and are listed once, in the library (`rasterpack::formats()`).

mod diff;
mod output;
mod stats;
mod stdio;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use rasterpack::args::ConvertArgs;
use rasterpack::convert;
use rasterpack::preview::{self, PreviewArgs};

use crate::output::Outcome;

const AFTER_HELP: &str = "\
Formats (detected from content, never from the file name):
  volp      Volume Pack: VOLP + JSON header + zstd body (3-D tensor)
  gvrs      Gridfour Virtual Raster Store 1.4 (tiled 2-D grids)
  udf       Untitled Data Format (UDF0 datasets of typed tables)
  fold      .fold/.mind chunk containers (CRC32C, SHA-256, Reed-Solomon ECC)
  vds       OpenVDS Volume Data Store (.vds file or object-store directory)
  npy       numpy .npy arrays

Exit codes: 0 valid, 1 invalid, 2 usage or I/O error, 3 unsupported feature.
With several inputs the highest applicable code wins in the order 2 > 3 > 1 > 0.

Examples (run from a clone of the repository):
  rasterpack inspect testdata/volp/temperature_4x32x32_int16.volp
  rasterpack validate --json testdata/gvrs/*.gvrs | jq '.files[] | select(.valid | not) | .path'
  rasterpack convert testdata/volp/temperature_4x32x32_int16.volp t.npy --physical
  rasterpack convert testdata/gvrs/crafted_all_types.gvrs a.npy --element a
  rasterpack convert testdata/gvrs/crafted_all_types.gvrs w.npy --element a --window 1,2,3,4
  rasterpack convert testdata/volp/temperature_4x32x32_int16.volp l.npy --levels 1:3
  rasterpack convert testdata/vds/small_r32_zip.vds b.npy --box 0:10,:,2:6
  rasterpack preview testdata/vds/small_r32_zip.vds inline.png --slice Inline=2 --colormap seismic
  rasterpack convert testdata/volp/cloud_2x8x8_float32.volp - --to npy | rasterpack inspect -";

#[derive(Parser, Debug)]
#[command(
    name = "rasterpack",
    version,
    about = "Inspect, validate and convert binary raster and volume containers",
    long_about = "Inspect, validate and convert binary raster and volume containers: VOLP, GVRS, UDF, \
                  FOLD/.mind, OpenVDS and .npy. Reports go to stdout (tables, or one JSON document \
                  with --json); diagnostics go to stderr.",
    after_help = AFTER_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show what each file holds: header, arrays, tiles/chunks, metadata.
    Inspect(InspectArgs),
    /// Check every rule, checksum and payload; report all problems found.
    Validate(ValidateArgs),
    /// Convert an array between formats (e.g. VOLP -> .npy), or repair a FOLD file.
    Convert(Box<ConvertArgs>),
    /// Value statistics per array: counts of fill/NaN/inf cells, min, max, mean, std, sum,
    /// histogram.
    Stats(StatsArgs),
    /// Compare two arrays cell by cell (across formats): exit 0 when equal within the
    /// tolerance, 1 when not.
    Diff(DiffArgs),
    /// Draw a 2-D grid, or a slice of a volume, as a PNG (colormaps, fill transparent).
    Preview(Box<PreviewArgs>),
}

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// Object-store setting for URL inputs, `KEY=VALUE` (repeatable), as for validate.
    #[arg(long = "storage-option", value_name = "KEY=VALUE")]
    storage_option: Vec<String>,
    /// First input (its array is side A).
    #[arg(value_name = "A")]
    a: PathBuf,
    /// Second input (side B; relative differences are relative to its values).
    #[arg(value_name = "B")]
    b: PathBuf,
    /// Which array of A (as `convert --element`).
    #[arg(long, value_name = "NAME")]
    element_a: Option<String>,
    /// Which array of B.
    #[arg(long, value_name = "NAME")]
    element_b: Option<String>,
    /// Absolute tolerance: cells are equal when |a - b| <= atol + rtol * |b| (numpy.isclose);
    /// NaN equals NaN.
    #[arg(long, value_name = "X", default_value_t = 0.0)]
    atol: f64,
    /// Relative tolerance (see --atol).
    #[arg(long, value_name = "Y", default_value_t = 0.0)]
    rtol: f64,
    /// Write one JSON document.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// Object-store setting for URL inputs, `KEY=VALUE` (repeatable), as for validate.
    #[arg(long = "storage-option", value_name = "KEY=VALUE")]
    storage_option: Vec<String>,
    /// Write one JSON document (schema in docs/schema/report.schema.json).
    #[arg(long)]
    json: bool,
    /// Only this array (GVRS element, UDF `DATASET_PATH/TABLE`, FOLD `CHUNK/ARRAY`, VDS
    /// channel); default: every array of the file.
    #[arg(long, value_name = "NAME")]
    element: Option<String>,
    /// Only a box of the array, as numpy slices in `convert`'s axis order (as `convert
    /// --region`).
    #[arg(long, value_name = "SLICES", allow_hyphen_values = true)]
    region: Option<String>,
    /// VDS level of detail (0 = full resolution).
    #[arg(long, value_name = "N")]
    lod: Option<u32>,
    /// Also count the valid cells in BINS equal bins over [min, max] (numpy.histogram; reads
    /// the array a second time).
    #[arg(long, value_name = "BINS")]
    histogram: Option<u64>,
    /// Files, directories (object-store VDS datasets), or `-` for standard input.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
}

#[derive(Args, Debug)]
struct InspectArgs {
    /// Write one JSON document (schema in docs/schema/report.schema.json).
    #[arg(long)]
    json: bool,
    /// Show everything (every chunk, whole JSON documents) instead of truncating.
    #[arg(long)]
    all: bool,
    /// Object-store setting for URL inputs and outputs, `KEY=VALUE` (repeatable):
    /// `object_store` keys such as aws_endpoint, allow_http, aws_region, plus max_requests,
    /// max_retries, retry_timeout_secs. Overrides the environment (AWS_*, GOOGLE_*, AZURE_*).
    #[arg(long = "storage-option", value_name = "KEY=VALUE")]
    storage_option: Vec<String>,
    /// Files, directories (object-store VDS datasets), URLs (s3://, gs://, az://, http(s)://,
    /// file://; a URL ending in `/` validates every object under it), or `-` for standard input.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
}

#[derive(Args, Debug)]
struct ValidateArgs {
    /// Write one JSON document (schema in docs/schema/report.schema.json).
    #[arg(long)]
    json: bool,
    /// Treat warnings as errors.
    #[arg(long)]
    strict: bool,
    /// Print nothing on stdout; only the exit code tells the verdict.
    #[arg(long, short)]
    quiet: bool,
    /// Check N inputs at once (reports still come in input order). Default: 1, or 4 for the
    /// objects a prefix URL lists. Peak memory grows with N.
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    jobs: Option<u16>,
    /// Object-store setting for URL inputs and outputs, `KEY=VALUE` (repeatable):
    /// `object_store` keys such as aws_endpoint, allow_http, aws_region, plus max_requests,
    /// max_retries, retry_timeout_secs. Overrides the environment (AWS_*, GOOGLE_*, AZURE_*).
    #[arg(long = "storage-option", value_name = "KEY=VALUE")]
    storage_option: Vec<String>,
    /// Files, directories (object-store VDS datasets), URLs (s3://, gs://, az://, http(s)://,
    /// file://; a URL ending in `/` validates every object under it), or `-` for standard input.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version print to stdout and succeed; real usage errors exit 2.
            let help_only = matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            );
            let code = if help_only { 0 } else { 2 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let storage = match &cli.command {
        Command::Inspect(a) => &a.storage_option,
        Command::Validate(a) => &a.storage_option,
        Command::Convert(a) => &a.storage_option,
        Command::Stats(a) => &a.storage_option,
        Command::Diff(a) => &a.storage_option,
        Command::Preview(a) => &a.storage_option,
    };
    match rasterpack_store::StoreOptions::parse(storage) {
        Ok(o) => rasterpack::detect::set_store_options(o),
        Err(e) => {
            eprintln!("rasterpack: {}", e.message);
            return ExitCode::from(2);
        }
    }
    let writes_stdout = match &cli.command {
        Command::Inspect(_) => true,
        Command::Validate(a) => !a.quiet,
        Command::Convert(a) => a.output.as_os_str() == "-",
        Command::Preview(a) => a.output.as_os_str() == "-",
        Command::Stats(_) | Command::Diff(_) => true,
    };
    if writes_stdout && stdio::stdout_was_closed() {
        // A report or data with nowhere to go is lost work, never a success.
        eprintln!("rasterpack: standard output is closed: nowhere to write the output");
        return ExitCode::from(2);
    }
    let outcome = match cli.command {
        Command::Inspect(a) => output::run_reports(output::Mode::Inspect { all: a.all }, &a.paths, a.json, false, None),
        Command::Validate(a) => output::run_reports(
            output::Mode::Validate { strict: a.strict },
            &a.paths,
            a.json,
            a.quiet,
            a.jobs.map(usize::from),
        ),
        Command::Convert(a) => convert::run(&a),
        Command::Stats(a) => stats::run(&a),
        Command::Diff(a) => diff::run(&a),
        Command::Preview(a) => {
            rasterpack::signals::install();
            preview::run(&a)
        }
    };
    // A signal being handled ends the process itself, by that signal.
    rasterpack::signals::hold_if_terminating();
    match outcome {
        Outcome::Code(c) => ExitCode::from(c),
        // The reader of a report closed the pipe (`| head`): end quietly.
        Outcome::BrokenPipe => ExitCode::SUCCESS,
    }
}
