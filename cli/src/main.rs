//! `rasterpack`: inspect, validate and convert VOLP, UDF, GVRS, FOLD and OpenVDS files.
//!
//! The contract (commands, exit codes, JSON shape) is `docs/cli.md`; the formats plug in through
//! `rasterpack_common::Format` and are listed in `registry.rs`.

mod budget;
mod convert;
mod detect;
mod output;
mod progress;
mod signals;
mod stdio;
mod subset;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgGroup, Args, Parser, Subcommand};

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
#[command(group(ArgGroup::new("subset").multiple(false)))]
pub struct ConvertArgs {
    /// Object-store setting for URL inputs and outputs, `KEY=VALUE` (repeatable):
    /// `object_store` keys such as aws_endpoint, allow_http, aws_region, plus max_requests,
    /// max_retries, retry_timeout_secs. Overrides the environment (AWS_*, GOOGLE_*, AZURE_*).
    #[arg(long = "storage-option", value_name = "KEY=VALUE")]
    storage_option: Vec<String>,
    /// Input file, directory or URL (`-` for standard input).
    #[arg(value_name = "IN")]
    input: PathBuf,
    /// Output file (`-` for standard output, with --to); its format comes from --to or its
    /// extension.
    #[arg(value_name = "OUT")]
    output: PathBuf,
    /// Overwrite OUT if it exists.
    #[arg(long)]
    force: bool,
    /// Write an output more than 4096 times the size of its source and larger than 1 GiB (refused
    /// without it, like a decompression bomb).
    #[arg(long)]
    allow_expansion: bool,
    /// Output format: npy, volp, gvrs, udf, fold (default: from OUT's extension).
    #[arg(long, value_name = "FORMAT")]
    to: Option<String>,
    /// Which array: GVRS element, UDF `DATASET_PATH/TABLE`, FOLD `CHUNK/ARRAY` (or
    /// `'["CHUNK","ARRAY"]'` for names holding `/`), VDS channel.
    #[arg(long, value_name = "NAME")]
    element: Option<String>,
    /// Write physical values (VOLP: stored*scale+offset as float64; VDS: dequantized float32).
    #[arg(long)]
    physical: bool,
    /// GVRS integer-coded floats: write the stored int32 codes instead of decoded floats.
    #[arg(long)]
    codes: bool,
    /// Only a box of the array, as numpy slices in the output's axis order: `START:END`,
    /// `START:`, `:END`, `:` or `INDEX` per axis, comma-separated; axes left out are whole
    /// (e.g. `0:2,100:200` or `:,5`).
    #[arg(long, value_name = "SLICES", group = "subset", allow_hyphen_values = true)]
    region: Option<String>,
    /// A window of a 2-D grid (GVRS), as gdal_translate -srcwin: first row and column, then the
    /// number of rows and columns.
    #[arg(long, value_name = "ROW,COL,ROWS,COLS", group = "subset", allow_hyphen_values = true)]
    window: Option<String>,
    /// A box of a VDS volume: one `START:END` (or `:`, or `INDEX`) per dimension, in VDS order,
    /// dimension 0 (the fastest, e.g. Sample) first, as `inspect` lists the axes. The output
    /// reverses them, like every VDS conversion.
    #[arg(long = "box", value_name = "RANGES", group = "subset", allow_hyphen_values = true)]
    box_ranges: Option<String>,
    /// A range of levels of a VOLP volume (axis 0): `A:B` is levels A to B-1; `A` one level.
    #[arg(long, value_name = "A:B", group = "subset", allow_hyphen_values = true)]
    levels: Option<String>,
    /// VDS level of detail (0 = full resolution, 1 = half, ...); a subset flag then counts in
    /// that level's samples.
    #[arg(long, value_name = "N")]
    lod: Option<u32>,
    /// GVRS output tile size, `ROWSxCOLS` (e.g. 128x128).
    #[arg(long, value_name = "ROWSxCOLS", value_parser = parse_tile)]
    tile: Option<(u32, u32)>,
    /// Output compression. GVRS (smallest block per tile): none; default (huffman, deflate,
    /// float: every Gridfour reads it); all (default and canonical, Gridfour 2026's list); lsop
    /// (default and LSOP12); or a comma list of those and huffman, deflate, float, canonical
    /// (e.g. all,lsop). VOLP: zstd or zstd:LEVEL (1..22, or negative for zstd's fast levels, e.g. zstd:-3). FOLD: zstd or none, optionally
    /// +rs16/+rs32/+rs64 (Reed-Solomon ECC).
    #[arg(long, value_name = "CODEC")]
    compress: Option<String>,
}

fn parse_tile(s: &str) -> Result<(u32, u32), String> {
    let (r, c) = s.split_once(['x', 'X']).ok_or("expected ROWSxCOLS, e.g. 128x128")?;
    let r: u32 = r.trim().parse().map_err(|_| format!("bad row count {r:?}"))?;
    let c: u32 = c.trim().parse().map_err(|_| format!("bad column count {c:?}"))?;
    if r == 0 || c == 0 {
        return Err("tile dimensions must be at least 1".into());
    }
    Ok((r, c))
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
    };
    match rasterpack_store::StoreOptions::parse(storage) {
        Ok(o) => detect::set_store_options(o),
        Err(e) => {
            eprintln!("rasterpack: {}", e.message);
            return ExitCode::from(2);
        }
    }
    let writes_stdout = match &cli.command {
        Command::Inspect(_) => true,
        Command::Validate(a) => !a.quiet,
        Command::Convert(a) => a.output.as_os_str() == "-",
    };
    if writes_stdout && stdio::stdout_was_closed() {
        // A report or data with nowhere to go is lost work, never a success.
        eprintln!("rasterpack: standard output is closed: nowhere to write the output");
        return ExitCode::from(2);
    }
    let outcome = match cli.command {
        Command::Inspect(a) => output::run_reports(output::Mode::Inspect { all: a.all }, &a.paths, a.json, false),
        Command::Validate(a) => {
            output::run_reports(output::Mode::Validate { strict: a.strict }, &a.paths, a.json, a.quiet)
        }
        Command::Convert(a) => convert::run(&a),
    };
    match outcome {
        Outcome::Code(c) => ExitCode::from(c),
        // The reader of a report closed the pipe (`| head`): end quietly.
        Outcome::BrokenPipe => ExitCode::SUCCESS,
    }
}
