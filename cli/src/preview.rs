//! `preview IN OUT.png`: a picture of a grid or of a slice of a volume. The slicing, sampling
//! and colours are the library's (`rasterpack_common::preview::render`); this front parses the
//! flags, encodes the pixels as PNG and writes them by `convert`'s output rules.

use std::path::PathBuf;

use clap::Args;
use rasterpack_common::preview::{self, Colormap, Preview, PreviewOptions, Scaling, SliceSpec};
use rasterpack_common::{shown, Error, Limits};

use crate::convert::{check_output, write_bytes};
use crate::detect;
use crate::report::{exit_code_for, Outcome};

/// The arguments of `rasterpack preview` (see docs/cli.md).
#[derive(Args, Debug, Clone, Default)]
pub struct PreviewArgs {
    /// Object-store setting for URL inputs, `KEY=VALUE` (repeatable), as for validate.
    #[arg(long = "storage-option", value_name = "KEY=VALUE")]
    pub storage_option: Vec<String>,
    /// Input file, directory or URL (`-` for standard input).
    #[arg(value_name = "IN")]
    pub input: PathBuf,
    /// The PNG to write (`-` for standard output).
    #[arg(value_name = "OUT.png")]
    pub output: PathBuf,
    /// Overwrite OUT if it exists.
    #[arg(long)]
    pub force: bool,
    /// Which array (as `convert --element`).
    #[arg(long, value_name = "NAME")]
    pub element: Option<String>,
    /// Keep one index of an axis (repeatable): AXIS is a numpy axis number of the array as
    /// `convert` writes it (negative counts from the end) or a VDS axis name; INDEX counts
    /// full-resolution samples from 0 (negative from the end). E.g. `--slice 0=120`,
    /// `--slice Inline=120`.
    #[arg(long, value_name = "AXIS=INDEX", allow_hyphen_values = true)]
    pub slice: Vec<String>,
    /// Level of detail to read (VDS); default: the coarsest that still fills the picture.
    #[arg(long, value_name = "N")]
    pub lod: Option<u32>,
    /// gray, seismic (blue-white-red, symmetric around 0), viridis or terrain.
    #[arg(long, value_name = "NAME", default_value = "gray")]
    pub colormap: String,
    /// The values of the colormap's ends (default: the smallest and largest shown).
    #[arg(
        long,
        value_name = "MIN,MAX",
        allow_hyphen_values = true,
        conflicts_with = "percent_clip"
    )]
    pub range: Option<String>,
    /// Map the P-th to the (100-P)-th percentile of the values shown (e.g. 2), clipping the rest.
    #[arg(long, value_name = "P")]
    pub percent_clip: Option<f64>,
    /// Picture size in pixels, `W` (height keeps the aspect ratio) or `WxH`; default: the
    /// slice's size, longest side at most 1024.
    #[arg(long, value_name = "W[xH]")]
    pub size: Option<String>,
    /// Shade by the slope, lit from the north-west (relief of a terrain grid).
    #[arg(long)]
    pub hillshade: bool,
}

/// `rasterpack preview`: draw, write, say what failed on stderr, end with the exit code.
pub fn run(args: &PreviewArgs) -> Outcome {
    match preview(args) {
        Ok(p) => {
            eprintln!(
                "rasterpack: preview {}: {}x{} pixels from a slice of shape {:?} at LOD {}, colours over [{}, {}]",
                shown(&args.output),
                p.width,
                p.height,
                p.region.shape(),
                p.lod,
                p.range.0,
                p.range.1
            );
            Outcome::Code(0)
        }
        Err(e) => {
            eprintln!(
                "rasterpack: preview {} -> {}: {e}",
                shown(&args.input),
                shown(&args.output)
            );
            Outcome::Code(exit_code_for(e.kind))
        }
    }
}

/// The options of `args`, checked before any input is read.
pub fn options(args: &PreviewArgs) -> Result<PreviewOptions, Error> {
    let slices = args
        .slice
        .iter()
        .map(|s| SliceSpec::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    let scaling = match (&args.range, args.percent_clip) {
        (Some(r), _) => {
            let (lo, hi) = r
                .split_once(',')
                .ok_or_else(|| Error::usage(format!("--range {r:?}: expected MIN,MAX")))?;
            let num = |s: &str| {
                s.trim()
                    .parse::<f64>()
                    .map_err(|_| Error::usage(format!("--range {r:?}: {s:?} is not a number")))
            };
            Scaling::Range(num(lo)?, num(hi)?)
        }
        (None, Some(p)) => Scaling::PercentClip(p),
        (None, None) => Scaling::MinMax,
    };
    if let Scaling::Range(lo, hi) = scaling {
        if !(lo.is_finite() && hi.is_finite() && lo < hi) {
            return Err(Error::usage(format!(
                "--range {lo},{hi}: give two finite numbers, MIN below MAX"
            )));
        }
    }
    if let Scaling::PercentClip(p) = scaling {
        if !(0.0..50.0).contains(&p) {
            return Err(Error::usage(format!(
                "--percent-clip {p}: give a percentage from 0 up to (not including) 50"
            )));
        }
    }
    let size = args.size.as_deref().map(parse_size).transpose()?;
    Ok(PreviewOptions {
        element: args.element.clone(),
        slices,
        lod: args.lod,
        colormap: Colormap::parse(&args.colormap)?,
        scaling,
        size,
        hillshade: args.hillshade,
        limits: Limits::default(),
    })
}

fn parse_size(s: &str) -> Result<(u32, Option<u32>), Error> {
    let bad = || {
        Error::usage(format!(
            "--size {s:?}: expected W or WxH in pixels, e.g. 512 or 512x256"
        ))
    };
    let num = |v: &str| v.trim().parse::<u32>().ok().filter(|&n| n > 0);
    match s.split_once(['x', 'X']) {
        Some((w, h)) => Ok((num(w).ok_or_else(bad)?, Some(num(h).ok_or_else(bad)?))),
        None => Ok((num(s).ok_or_else(bad)?, None)),
    }
}

fn preview(args: &PreviewArgs) -> Result<Preview, Error> {
    let opts = options(args)?;
    check_output(&args.output, args.force)?;
    let input = detect::open(&args.input, &opts.limits)?;
    let format = detect::detect(&input)?;
    let file = format
        .open(input, opts.limits)
        .map_err(|e| e.in_format(format.name()))?;
    let picture = preview::render(file.as_ref(), &opts).map_err(|e| e.in_format(format.name()))?;
    let png = encode_png(&picture)?;
    write_bytes(&args.output, args.force, &png)?;
    Ok(picture)
}

/// The picture as an 8-bit RGBA PNG. The encoder's settings are fixed and nothing varying
/// (no time stamp) is written, so the same picture gives the same bytes.
pub fn encode_png(p: &Preview) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    let fail = |e: png::EncodingError| Error::usage(format!("encoding the PNG: {e}"));
    {
        let mut enc = png::Encoder::new(&mut out, p.width, p.height);
        enc.set_color(png::ColorType::Rgba);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::Balanced);
        let mut writer = enc.write_header().map_err(fail)?;
        writer.write_image_data(&p.rgba).map_err(fail)?;
        writer.finish().map_err(fail)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("512").unwrap(), (512, None));
        assert_eq!(parse_size("512x256").unwrap(), (512, Some(256)));
        for bad in ["", "0", "x", "5x0", "-3", "1.5"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
