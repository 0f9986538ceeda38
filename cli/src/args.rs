//! `convert`'s arguments, shared by the binary (parsed by clap) and library callers (the
//! Python package builds them from keywords), so both run the same conversion.

use std::path::PathBuf;

use clap::{ArgGroup, Args};

/// The arguments of `rasterpack convert` (see docs/cli.md).
#[derive(Args, Debug, Clone, Default)]
#[command(group(ArgGroup::new("subset").multiple(false)))]
pub struct ConvertArgs {
    /// Object-store setting for URL inputs and outputs, `KEY=VALUE` (repeatable):
    /// `object_store` keys such as aws_endpoint, allow_http, aws_region, plus max_requests,
    /// max_retries, retry_timeout_secs. Overrides the environment (AWS_*, GOOGLE_*, AZURE_*).
    #[arg(long = "storage-option", value_name = "KEY=VALUE")]
    pub storage_option: Vec<String>,
    /// Input file, directory or URL (`-` for standard input).
    #[arg(value_name = "IN")]
    pub input: PathBuf,
    /// Output file (`-` for standard output, with --to); its format comes from --to or its
    /// extension.
    #[arg(value_name = "OUT")]
    pub output: PathBuf,
    /// Overwrite OUT if it exists.
    #[arg(long)]
    pub force: bool,
    /// Write an output more than 4096 times the size of its source and larger than 1 GiB (refused
    /// without it, like a decompression bomb).
    #[arg(long)]
    pub allow_expansion: bool,
    /// Output format: npy, volp, gvrs, udf, fold, vds, zarr (default: from OUT's extension; a
    /// VDS OUT without the .vds extension is the object-store directory layout).
    #[arg(long, value_name = "FORMAT")]
    pub to: Option<String>,
    /// Which array: GVRS element, UDF `DATASET_PATH/TABLE`, FOLD `CHUNK/ARRAY` (or
    /// `'["CHUNK","ARRAY"]'` for names holding `/`), VDS channel.
    #[arg(long, value_name = "NAME")]
    pub element: Option<String>,
    /// Write physical values (VOLP: stored*scale+offset as float64; VDS: dequantized float32).
    #[arg(long)]
    pub physical: bool,
    /// GVRS integer-coded floats: write the stored int32 codes instead of decoded floats.
    #[arg(long)]
    pub codes: bool,
    /// Only part of the array, as numpy's basic slicing in the output's axis order, one per
    /// axis, comma-separated: `START:STOP[:STEP]` (each part optional; negative positions count
    /// from the end) or `INDEX` (the axis is dropped, as in numpy); axes left out are whole
    /// (e.g. `0:2,100:200`, `::2,::2` or `-1`).
    #[arg(long, value_name = "SLICES", group = "subset", allow_hyphen_values = true)]
    pub region: Option<String>,
    /// A window of a 2-D grid (GVRS), as gdal_translate -srcwin: first row and column, then the
    /// number of rows and columns.
    #[arg(long, value_name = "ROW,COL,ROWS,COLS", group = "subset", allow_hyphen_values = true)]
    pub window: Option<String>,
    /// A box of a VDS volume: one `START:END` (or `:`, or `INDEX`) per dimension, in VDS order,
    /// dimension 0 (the fastest, e.g. Sample) first, as `inspect` lists the axes. The output
    /// reverses them, like every VDS conversion.
    #[arg(long = "box", value_name = "RANGES", group = "subset", allow_hyphen_values = true)]
    pub box_ranges: Option<String>,
    /// A range of levels of a VOLP volume (axis 0): `A:B` is levels A to B-1; `A` one level.
    #[arg(long, value_name = "A:B", group = "subset", allow_hyphen_values = true)]
    pub levels: Option<String>,
    /// Drop every axis of length 1 from the output (a VOLP level as a 2-D grid:
    /// `--levels 0 --squeeze`).
    #[arg(long)]
    pub squeeze: bool,
    /// Put an axis of length 1 in front of the output's axes (a 2-D grid as a one-level VOLP).
    #[arg(long)]
    pub expand_dims: bool,
    /// VDS level of detail (0 = full resolution, 1 = half, ...); a subset flag then counts in
    /// that level's samples.
    #[arg(long, value_name = "N")]
    pub lod: Option<u32>,
    /// GVRS output tile size, `ROWSxCOLS` (e.g. 128x128).
    #[arg(long, value_name = "ROWSxCOLS", value_parser = parse_tile)]
    pub tile: Option<(u32, u32)>,
    /// Output compression. GVRS (smallest block per tile): none; default (huffman, deflate,
    /// float: every Gridfour reads it); all (default and canonical, Gridfour 2026's list); lsop
    /// (default and LSOP12); or a comma list of those and huffman, deflate, float, canonical
    /// (e.g. all,lsop). VOLP: zstd or zstd:LEVEL (1..22, or negative for zstd's fast levels, e.g. zstd:-3). FOLD: zstd or none, optionally
    /// +rs16/+rs32/+rs64 (Reed-Solomon ECC).
    #[arg(long, value_name = "CODEC")]
    pub compress: Option<String>,
    /// Zarr output chunk shape in the output's axis order, e.g. 64x64x64 (default: the source's
    /// own tiles/bricks; for sources stored in one piece, chunks of about 4 MiB).
    #[arg(long, value_name = "SHAPE")]
    pub chunks: Option<String>,
    /// Zarr output: store the chunks in shards of this shape (the sharding codec; a whole number
    /// of chunks along each axis), e.g. 256x256x256.
    #[arg(long, value_name = "SHAPE")]
    pub shard: Option<String>,
    /// Zarr output: a group holding every array of IN (one Zarr array per element, channel,
    /// table or member, under its name). VDS output: one channel per array of IN, the first the
    /// primary.
    #[arg(long)]
    pub all: bool,
    /// VDS output: brick edge, 32, 64 (default), 128 or 256 voxels (2-D arrays: 4x that).
    #[arg(long, value_name = "N")]
    pub brick_size: Option<u32>,
    /// VDS output: margin voxels on each side of each brick (default 0; at most a quarter of
    /// the brick).
    #[arg(long, value_name = "N")]
    pub margin: Option<u32>,
    /// VDS output: levels of detail beyond full resolution (0..12); LOD k keeps every 2^k-th
    /// voxel along each brick axis.
    #[arg(long, value_name = "N")]
    pub lods: Option<u32>,
    /// VDS output: the channel's value range; for uint8/uint16 arrays the physical values of
    /// code 0 and the top code (integerOffset/integerScale).
    #[arg(long, value_name = "MIN,MAX", value_parser = parse_range, allow_hyphen_values = true)]
    pub value_range: Option<(f64, f64)>,
    /// VDS output: the channel's no-value (sets useNoValue; uint8/uint16: the top code).
    #[arg(long, value_name = "V", allow_hyphen_values = true)]
    pub no_value: Option<f64>,
    /// VDS output: one axis, NAME:UNIT:MIN:MAX (coordinates of the first and last sample);
    /// repeat once per dimension, dimension 0 (the array's last axis) first.
    #[arg(long = "axis", value_name = "NAME:UNIT:MIN:MAX", allow_hyphen_values = true)]
    pub axes: Vec<String>,
    /// VDS output: a metadata item, CATEGORY/NAME=VALUE (integers as Int, numbers as Double,
    /// else String); repeatable.
    #[arg(long = "metadata", value_name = "CATEGORY/NAME=VALUE")]
    pub metadata: Vec<String>,
    /// VDS output: one more channel beside IN's array, the array ELEMENT (or the only one) of
    /// the input PATH, named NAME; same shape as IN's array; repeatable.
    #[arg(long = "channel", value_name = "NAME=PATH[:ELEMENT]")]
    pub channels: Vec<String>,
}

impl ConvertArgs {
    /// The VDS-only output flags given, by name.
    pub fn vds_flags(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        for (set, name) in [
            (self.brick_size.is_some(), "--brick-size"),
            (self.margin.is_some(), "--margin"),
            (self.lods.is_some(), "--lods"),
            (self.value_range.is_some(), "--value-range"),
            (self.no_value.is_some(), "--no-value"),
            (!self.axes.is_empty(), "--axis"),
            (!self.metadata.is_empty(), "--metadata"),
            (!self.channels.is_empty(), "--channel"),
        ] {
            if set {
                v.push(name);
            }
        }
        v
    }
}

pub fn parse_range(s: &str) -> Result<(f64, f64), String> {
    let (a, b) = s.split_once(',').ok_or("expected MIN,MAX, e.g. -1.5,1.5")?;
    let a: f64 = a.trim().parse().map_err(|_| format!("bad minimum {a:?}"))?;
    let b: f64 = b.trim().parse().map_err(|_| format!("bad maximum {b:?}"))?;
    Ok((a, b))
}

pub fn parse_tile(s: &str) -> Result<(u32, u32), String> {
    let (r, c) = s.split_once(['x', 'X']).ok_or("expected ROWSxCOLS, e.g. 128x128")?;
    let r: u32 = r.trim().parse().map_err(|_| format!("bad row count {r:?}"))?;
    let c: u32 = c.trim().parse().map_err(|_| format!("bad column count {c:?}"))?;
    if r == 0 || c == 0 {
        return Err("tile dimensions must be at least 1".into());
    }
    Ok((r, c))
}
