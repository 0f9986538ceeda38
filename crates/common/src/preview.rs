//! A picture of an array (`rasterpack preview`): a 2-D grid, or a 2-D slice of a volume, sampled
//! down to the picture's size while the slice streams, coloured through a colormap, with
//! fill/NoValue, NaN and infinite cells transparent. The CLI and any other front call [`render`]
//! and only encode the RGBA pixels it returns (the CLI writes PNG).
//!
//! Cost follows the pixels shown: only the slice is read (readers decode just the blocks it
//! meets), and where the file has coarser levels of detail (VDS LODs) the coarsest one that
//! still has at least as many samples as the picture is read instead. Each pixel takes the one
//! cell at its centre (nearest sampling), so the picture is the same bytes whatever order or
//! thread count the source decodes with, and memory is the picture's, not the slice's.

use crate::any::ArrayFile;
use crate::array::{f16_to_f64, DType};
use crate::error::{Error, ErrorKind, Result};
use crate::format::ArrayRequest;
use crate::limits::Limits;
use crate::stats::{fill_value, require_real};
use crate::stream::{ArrayInfo, ArraySink, Region, RegionSpec};

/// The longest side of a picture made without `--size`.
pub const DEFAULT_SIDE: u32 = 1024;

/// The most pixels a picture may have (8 Mi: 4096 x 2048): the sampled values (8 bytes each)
/// and the RGBA pixels are held in memory.
pub const MAX_PIXELS: u64 = 1 << 23;

/// How values become colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colormap {
    /// Black (low) to white (high).
    Gray,
    /// Dark blue, blue, white, red, dark red (matplotlib's `seismic`); its range is made
    /// symmetric around 0 unless `--range` gives one.
    Seismic,
    /// Matplotlib's `viridis` (dark purple to yellow), from 9 of its colours, linear between.
    Viridis,
    /// Matplotlib's `terrain` (blue sea, green, sand, brown, white).
    Terrain,
}

/// Colours at positions in `[0, 1]`, linear between.
type Anchors = &'static [(f64, [f64; 3])];

const GRAY: Anchors = &[(0.0, [0.0, 0.0, 0.0]), (1.0, [1.0, 1.0, 1.0])];
const SEISMIC: Anchors = &[
    (0.0, [0.0, 0.0, 0.3]),
    (0.25, [0.0, 0.0, 1.0]),
    (0.5, [1.0, 1.0, 1.0]),
    (0.75, [1.0, 0.0, 0.0]),
    (1.0, [0.5, 0.0, 0.0]),
];
const VIRIDIS: Anchors = &[
    (0.0, [68.0 / 255.0, 1.0 / 255.0, 84.0 / 255.0]),
    (0.125, [72.0 / 255.0, 40.0 / 255.0, 120.0 / 255.0]),
    (0.25, [62.0 / 255.0, 73.0 / 255.0, 137.0 / 255.0]),
    (0.375, [49.0 / 255.0, 104.0 / 255.0, 142.0 / 255.0]),
    (0.5, [38.0 / 255.0, 130.0 / 255.0, 142.0 / 255.0]),
    (0.625, [31.0 / 255.0, 158.0 / 255.0, 137.0 / 255.0]),
    (0.75, [53.0 / 255.0, 183.0 / 255.0, 121.0 / 255.0]),
    (0.875, [110.0 / 255.0, 206.0 / 255.0, 88.0 / 255.0]),
    (1.0, [253.0 / 255.0, 231.0 / 255.0, 37.0 / 255.0]),
];
const TERRAIN: Anchors = &[
    (0.0, [0.2, 0.2, 0.6]),
    (0.15, [0.0, 0.6, 1.0]),
    (0.25, [0.0, 0.8, 0.4]),
    (0.5, [1.0, 1.0, 0.6]),
    (0.75, [0.5, 0.36, 0.33]),
    (1.0, [1.0, 1.0, 1.0]),
];

impl Colormap {
    /// The colormap named `name` (`gray`, `seismic`, `viridis`, `terrain`).
    pub fn parse(name: &str) -> Result<Colormap> {
        match name.to_ascii_lowercase().as_str() {
            "gray" | "grey" => Ok(Colormap::Gray),
            "seismic" => Ok(Colormap::Seismic),
            "viridis" => Ok(Colormap::Viridis),
            "terrain" => Ok(Colormap::Terrain),
            _ => Err(Error::usage(format!(
                "unknown colormap {name:?}: choose gray, seismic, viridis or terrain"
            ))),
        }
    }

    fn anchors(self) -> Anchors {
        match self {
            Colormap::Gray => GRAY,
            Colormap::Seismic => SEISMIC,
            Colormap::Viridis => VIRIDIS,
            Colormap::Terrain => TERRAIN,
        }
    }

    /// The colour of `t` in `[0, 1]` (clamped; NaN counts as 0): linear between the anchors,
    /// each channel rounded to 8 bits. No 256-entry table first, so that 0 on `seismic` (its
    /// middle) is exactly white.
    pub fn rgb(self, t: f64) -> [u8; 3] {
        let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
        let anchors = self.anchors();
        let mut i = 0;
        while i + 2 < anchors.len() && t > anchors[i + 1].0 {
            i += 1;
        }
        let (p0, c0) = anchors[i];
        let (p1, c1) = anchors[i + 1];
        let f = if p1 > p0 {
            ((t - p0) / (p1 - p0)).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let mut out = [0u8; 3];
        for k in 0..3 {
            let v = c0[k] + (c1[k] - c0[k]) * f;
            out[k] = (v * 255.0).round().clamp(0.0, 255.0) as u8;
        }
        out
    }
}

/// Which values the colormap's ends stand for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scaling {
    /// The smallest and largest valid value shown (symmetric around 0 for `seismic`).
    MinMax,
    /// `--range MIN,MAX`: exactly these (values outside take the end colours).
    Range(f64, f64),
    /// `--percent-clip P`: the P-th and (100-P)-th percentiles of the valid values shown
    /// (numpy's `percentile`, linear), symmetric around 0 for `seismic`.
    PercentClip(f64),
}

/// An axis of the array: its numpy number (C order, as `convert` writes the array; negative
/// counts from the end) or a name the file gives its axes (VDS: `Inline`, `Crossline`, ...).
#[derive(Debug, Clone, PartialEq)]
pub enum AxisRef {
    /// A numpy axis number.
    Number(i64),
    /// An axis name, compared without case.
    Name(String),
}

/// `--slice AXIS=I`: keep only index `I` (negative counts from the end) of one axis.
#[derive(Debug, Clone, PartialEq)]
pub struct SliceSpec {
    /// The axis cut.
    pub axis: AxisRef,
    /// The index kept, in full-resolution samples.
    pub index: i64,
}

impl SliceSpec {
    /// `AXIS=I`, e.g. `0=120`, `-1=5` or `Inline=120`.
    pub fn parse(s: &str) -> Result<SliceSpec> {
        let (axis, index) = s
            .split_once('=')
            .ok_or_else(|| Error::usage(format!("--slice {s:?}: expected AXIS=INDEX, e.g. 0=120 or Inline=120")))?;
        let (axis, index) = (axis.trim(), index.trim());
        let index: i64 = index
            .parse()
            .map_err(|_| Error::usage(format!("--slice {s:?}: {index:?} is not an integer index")))?;
        let axis = match axis.parse::<i64>() {
            Ok(n) => AxisRef::Number(n),
            Err(_) if !axis.is_empty() => AxisRef::Name(axis.to_owned()),
            Err(_) => return Err(Error::usage(format!("--slice {s:?}: the axis is missing"))),
        };
        Ok(SliceSpec { axis, index })
    }
}

/// What to draw.
#[derive(Debug, Clone)]
pub struct PreviewOptions {
    /// Which array (as `convert --element`).
    pub element: Option<String>,
    /// Axes cut to one index, so that two axes are left to show.
    pub slices: Vec<SliceSpec>,
    /// The level of detail to read (VDS); `None` chooses the coarsest one that still has as
    /// many samples as the picture (and 0 where the file has no levels).
    pub lod: Option<u32>,
    /// The colours.
    pub colormap: Colormap,
    /// The values the colormap's ends stand for.
    pub scaling: Scaling,
    /// Picture width and height; a missing height keeps the slice's aspect ratio; `None`: the
    /// slice's size with its longest side at most [`DEFAULT_SIDE`].
    pub size: Option<(u32, Option<u32>)>,
    /// Shade the colours by the slope lit from the north-west (azimuth 315°, altitude 45°).
    pub hillshade: bool,
    /// Bounds on what the reads may allocate.
    pub limits: Limits,
}

impl Default for PreviewOptions {
    fn default() -> Self {
        PreviewOptions {
            element: None,
            slices: Vec::new(),
            lod: None,
            colormap: Colormap::Gray,
            scaling: Scaling::MinMax,
            size: None,
            hillshade: false,
            limits: Limits::default(),
        }
    }
}

/// A rendered picture and what it shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Preview {
    /// Pixels across.
    pub width: u32,
    /// Pixels down.
    pub height: u32,
    /// `width * height` RGBA pixels, row by row; alpha 0 for fill/NoValue, NaN and infinite
    /// cells, 255 elsewhere.
    pub rgba: Vec<u8>,
    /// The values the colormap's first and last colour stand for.
    pub range: (f64, f64),
    /// The level of detail read.
    pub lod: u32,
    /// The shape of the array read (at that level of detail).
    pub shape: Vec<u64>,
    /// The numpy axes shown as rows and columns (`None`: a single row or column).
    pub axes: (Option<usize>, Option<usize>),
    /// The box of the array read (at that level of detail).
    pub region: Region,
}

/// Draw the array of `file` that `opts` chooses (see the module docs).
pub fn render(file: &dyn ArrayFile, opts: &PreviewOptions) -> Result<Preview> {
    let base = ArrayRequest {
        element: opts.element.clone(),
        lod: opts.lod.unwrap_or(0),
        limits: opts.limits,
        ..ArrayRequest::default()
    };
    let info = probe(file, &base)?;
    require_real(info.dtype, "a preview")?;
    let cut = cut_axes(&info, &opts.slices)?;
    let (rows_axis, cols_axis) = shown_axes(&info.shape, &cut)?;
    let extent = |a: Option<usize>| a.map_or(1, |a| info.shape[a]);
    let (h, w) = (extent(rows_axis), extent(cols_axis));
    if h == 0 || w == 0 {
        return Err(Error::usage(format!(
            "the slice to show is empty (array shape {:?})",
            info.shape
        )));
    }
    let (ow, oh) = picture_size(opts.size, h, w)?;

    // A coarser level of detail where the file has one and it still fills the picture.
    let mut lod = base.lod;
    let mut shape = info.shape.clone();
    if opts.lod.is_none() {
        let factor = (h as f64 / oh as f64).min(w as f64 / ow as f64);
        let mut k = if factor >= 2.0 { factor.log2().floor() as u32 } else { 0 };
        k = k.min(12);
        while k > 0 {
            let req = ArrayRequest { lod: k, ..base.clone() };
            if let Ok(coarse) = probe(file, &req) {
                if coarse.shape.len() == info.shape.len() && coarse.dtype == info.dtype {
                    lod = k;
                    shape = coarse.shape;
                    break;
                }
            }
            k -= 1;
        }
    }
    // The cut indices, in samples of the level read.
    let mut ranges: Vec<std::ops::Range<u64>> = shape.iter().map(|&d| 0..d).collect();
    for &(axis, index) in &cut {
        let full = info.shape[axis];
        let here = shape[axis];
        let i = if here == full {
            index
        } else {
            ((index as u128 * here as u128) / full.max(1) as u128) as u64
        };
        let i = i.min(here.saturating_sub(1));
        ranges[axis] = i..i.saturating_add(1).min(here.max(1));
    }
    let region = Region { ranges };
    let rshape = region.shape();
    let (h, w) = (rows_axis.map_or(1, |a| rshape[a]), cols_axis.map_or(1, |a| rshape[a]));
    if h == 0 || w == 0 {
        return Err(Error::usage(format!(
            "the slice to show is empty at LOD {lod} (shape {shape:?})"
        )));
    }
    let mut sampler = Sampler {
        expected: rshape.clone(),
        dtype: info.dtype,
        fill: None,
        rows: h,
        cols: w,
        row0: 0,
        read_rows: h,
        out_rows: oh as u64,
        out_cols: ow as u64,
        grid: vec![f64::NAN; oh as usize * ow as usize],
    };
    // Rows further apart than the file's blocks are read one by one, so that the blocks
    // between them are never decoded (a 2^31-row grid shown in 1024 rows reads 1024 rows);
    // otherwise the slice streams once.
    let element = opts.element.as_deref().or(info.name.as_deref());
    let block_rows = rows_axis.and_then(|a| file.chunk_shape(element)?.get(a).copied());
    let by_rows = matches!((rows_axis, block_rows), (Some(_), Some(t)) if t > 0 && h / oh as u64 > t);
    match rows_axis {
        Some(a) if by_rows => {
            let mut last = None;
            for or in 0..oh as u64 {
                let r = centre(or, oh as u64, h);
                if last == Some(r) {
                    continue;
                }
                last = Some(r);
                let mut one = region.clone();
                let first = region.ranges[a].start + r;
                one.ranges[a] = first..first + 1;
                sampler.row0 = r;
                sampler.read_rows = 1;
                sampler.expected = one.shape();
                let req = ArrayRequest {
                    lod,
                    region: Some(RegionSpec::from(&one)),
                    ..base.clone()
                };
                file.stream(&req, &mut sampler)?;
            }
        }
        _ => {
            let req = ArrayRequest {
                lod,
                region: Some(RegionSpec::from(&region)),
                ..base
            };
            file.stream(&req, &mut sampler)?;
        }
    }
    sampler.finish()?;
    let grid = sampler.grid;

    let range = value_range(&grid, opts.scaling, opts.colormap)?;
    let shade = opts.hillshade.then(|| {
        hillshade(
            &grid,
            ow as usize,
            oh as usize,
            w as f64 / ow as f64,
            h as f64 / oh as f64,
        )
    });
    let mut rgba = vec![0u8; grid.len() * 4];
    for (i, &v) in grid.iter().enumerate() {
        if !v.is_finite() {
            continue; // transparent
        }
        let (lo, hi) = range;
        let t = if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
        let mut c = opts.colormap.rgb(t);
        if let Some(s) = &shade {
            for x in &mut c {
                *x = (*x as f64 * s[i]).round().clamp(0.0, 255.0) as u8;
            }
        }
        rgba[i * 4..i * 4 + 3].copy_from_slice(&c);
        rgba[i * 4 + 3] = 255;
    }
    Ok(Preview {
        width: ow,
        height: oh,
        rgba,
        range,
        lod,
        shape,
        axes: (rows_axis, cols_axis),
        region,
    })
}

/// The array `req` chooses, as its source announces it, without decoding it: the source's
/// `begin` is answered with an error that ends the read.
fn probe(file: &dyn ArrayFile, req: &ArrayRequest) -> Result<ArrayInfo> {
    struct Probe(Option<ArrayInfo>);
    impl ArraySink for Probe {
        fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
            self.0 = Some(info.clone());
            Err(Error::new(ErrorKind::Usage, "preview.probed", None, "probed"))
        }
        fn write_at(&mut self, _: u64, _: &[u8]) -> Result<()> {
            Ok(())
        }
        fn finish(&mut self) -> Result<()> {
            Ok(())
        }
    }
    let mut p = Probe(None);
    let result = file.stream(req, &mut p);
    match (p.0, result) {
        (Some(info), _) => Ok(info),
        (None, Err(e)) => Err(e),
        (None, Ok(())) => Err(Error::usage("the source delivered no array")),
    }
}

/// The `(axis, index)` of each `--slice`, checked against the array.
fn cut_axes(info: &ArrayInfo, slices: &[SliceSpec]) -> Result<Vec<(usize, u64)>> {
    let ndim = info.shape.len();
    let mut cut: Vec<(usize, u64)> = Vec::new();
    for s in slices {
        let axis = match &s.axis {
            AxisRef::Number(n) => {
                let a = if *n < 0 { ndim as i64 + n } else { *n };
                if a < 0 || a >= ndim as i64 {
                    return Err(Error::usage(format!(
                        "--slice axis {n} does not exist: the array has {ndim} axes (shape {:?})",
                        info.shape
                    )));
                }
                a as usize
            }
            AxisRef::Name(name) => named_axis(info, name)?,
        };
        if cut.iter().any(|&(a, _)| a == axis) {
            return Err(Error::usage(format!("--slice cuts axis {axis} twice")));
        }
        let extent = info.shape[axis];
        let i = if s.index < 0 {
            extent as i128 + s.index as i128
        } else {
            s.index as i128
        };
        if i < 0 || i >= extent as i128 {
            return Err(Error::usage(format!(
                "--slice index {} is outside axis {axis} of {extent} samples (shape {:?})",
                s.index, info.shape
            )));
        }
        cut.push((axis, i as u64));
    }
    Ok(cut)
}

/// The numpy axis of a named VDS axis: the file lists its axes fastest first (`attrs.axes`),
/// the array's C order reverses them.
fn named_axis(info: &ArrayInfo, name: &str) -> Result<usize> {
    let names: Vec<String> = info
        .attrs
        .get("axes")
        .and_then(|v| v.as_array())
        .map(|axes| {
            axes.iter()
                .map(|a| a.get("name").and_then(|n| n.as_str()).unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default();
    let Some(d) = names.iter().position(|n| n.eq_ignore_ascii_case(name)) else {
        let known = if names.is_empty() {
            "this array names no axes; give a numpy axis number".to_owned()
        } else {
            format!("its axes are {}", names.join(", "))
        };
        return Err(Error::usage(format!("--slice: no axis named {name:?} ({known})")));
    };
    // VDS dimension d is numpy axis (dimensions - 1 - d); a components axis, when there is
    // one, comes last and is not named.
    (names.len() - 1)
        .checked_sub(d)
        .filter(|&a| a < info.shape.len())
        .ok_or_else(|| Error::usage(format!("--slice: axis {name:?} is not an axis of the array")))
}

/// The two axes left to show after the cuts; axes of one sample are dropped when more than two
/// are left.
fn shown_axes(shape: &[u64], cut: &[(usize, u64)]) -> Result<(Option<usize>, Option<usize>)> {
    let mut left: Vec<usize> = (0..shape.len())
        .filter(|a| !cut.iter().any(|&(c, _)| c == *a))
        .collect();
    if left.len() > 2 {
        left.retain(|&a| shape[a] != 1);
    }
    match left[..] {
        [] => Ok((None, None)),
        [c] => Ok((None, Some(c))),
        [r, c] => Ok((Some(r), Some(c))),
        _ => Err(Error::usage(format!(
            "a preview shows two axes, and the array has {} left of shape {shape:?}: cut {} more with \
             --slice AXIS=INDEX (e.g. --slice 0={})",
            left.len(),
            left.len() - 2,
            shape.first().copied().unwrap_or(0) / 2
        ))),
    }
}

/// `(width, height)` of the picture of an `h x w` slice.
fn picture_size(size: Option<(u32, Option<u32>)>, h: u64, w: u64) -> Result<(u32, u32)> {
    let keep = |given: u64, of: u64, other: u64| -> u32 {
        (((given as f64) * (other as f64) / (of as f64)).round() as u64).clamp(1, u32::MAX as u64) as u32
    };
    let (ow, oh) = match size {
        Some((pw, Some(ph))) => (pw, ph),
        Some((pw, None)) => (pw, keep(pw as u64, w, h)),
        None => {
            let longest = h.max(w);
            let side = longest.min(DEFAULT_SIDE as u64);
            if w >= h {
                (side as u32, keep(side, w, h))
            } else {
                (keep(side, h, w), side as u32)
            }
        }
    };
    if ow == 0 || oh == 0 {
        return Err(Error::usage("--size: the picture needs at least one pixel each way"));
    }
    if ow as u64 * oh as u64 > MAX_PIXELS {
        return Err(Error::usage(format!(
            "--size {ow}x{oh} is more than {MAX_PIXELS} pixels (e.g. 4096x2048)"
        )));
    }
    Ok((ow, oh))
}

/// The source index of output pixel `o` of `n_out` over `n_in` samples: the sample at the
/// pixel's centre, `floor((2o + 1) * n_in / (2 * n_out))`.
fn centre(o: u64, n_out: u64, n_in: u64) -> u64 {
    (((2 * o as u128 + 1) * n_in as u128) / (2 * n_out as u128)) as u64
}

/// The first output pixel whose centre sample is `i` or later (`n_out` when none).
fn first_pixel(i: u64, n_out: u64, n_in: u64) -> u64 {
    // centre(o) >= i  <=>  (2o + 1) * n_in >= 2 * i * n_out
    let need = 2 * i as u128 * n_out as u128;
    let o = if need <= n_in as u128 {
        0
    } else {
        (need - n_in as u128).div_ceil(2 * n_in as u128)
    };
    (o.min(n_out as u128)) as u64
}

/// Keeps, of the slice streaming through it, the one cell at the centre of each pixel.
struct Sampler {
    expected: Vec<u64>,
    dtype: DType,
    fill: Option<f64>,
    /// Rows and columns of the whole slice.
    rows: u64,
    cols: u64,
    /// The slice row the current read starts at, and how many rows it delivers.
    row0: u64,
    read_rows: u64,
    out_rows: u64,
    out_cols: u64,
    grid: Vec<f64>,
}

impl Sampler {
    /// Values `start..start + count` of the current read (C order), the `k`-th from `value(k)`.
    fn take(&mut self, start: u64, count: u64, value: impl Fn(usize) -> f64) {
        let end = start
            .saturating_add(count)
            .min(self.read_rows.saturating_mul(self.cols));
        let mut i = start;
        while i < end {
            let local = i / self.cols;
            let r = self.row0 + local;
            let c0 = i % self.cols;
            let c1 = (c0 + (end - i)).min(self.cols);
            let rows = first_pixel(r, self.out_rows, self.rows)..first_pixel(r + 1, self.out_rows, self.rows);
            if !rows.is_empty() {
                let cols = first_pixel(c0, self.out_cols, self.cols)..first_pixel(c1, self.out_cols, self.cols);
                for oc in cols {
                    let c = centre(oc, self.out_cols, self.cols);
                    let mut v = value((local * self.cols + c - start) as usize);
                    let is_fill = match self.fill {
                        Some(f) if f.is_nan() => v.is_nan(),
                        Some(f) => v == f,
                        None => false,
                    };
                    if is_fill {
                        v = f64::NAN;
                    }
                    for or in rows.clone() {
                        self.grid[(or * self.out_cols + oc) as usize] = v;
                    }
                }
            }
            i = local * self.cols + c1;
        }
    }

    fn whole_values(&self, offset: u64, len: u64) -> Result<(u64, u64)> {
        let size = self.dtype.size() as u64;
        if !offset.is_multiple_of(size) || !len.is_multiple_of(size) {
            return Err(Error::usage(format!(
                "internal: the source wrote {len} bytes at {offset}, not whole {size}-byte values"
            )));
        }
        Ok((offset / size, len / size))
    }
}

/// One little-endian value of `dtype` as f64 (complex types are refused before any value).
fn value_of(dtype: DType, b: &[u8]) -> f64 {
    let mut le = [0u8; 8];
    let n = b.len().min(8);
    le[..n].copy_from_slice(&b[..n]);
    match dtype {
        DType::Bool | DType::U8 => le[0] as f64,
        DType::I8 => le[0] as i8 as f64,
        DType::U16 => u16::from_le_bytes([le[0], le[1]]) as f64,
        DType::I16 => i16::from_le_bytes([le[0], le[1]]) as f64,
        DType::F16 => f16_to_f64(u16::from_le_bytes([le[0], le[1]])),
        DType::U32 => u32::from_le_bytes([le[0], le[1], le[2], le[3]]) as f64,
        DType::I32 => i32::from_le_bytes([le[0], le[1], le[2], le[3]]) as f64,
        DType::F32 => f32::from_le_bytes([le[0], le[1], le[2], le[3]]) as f64,
        DType::U64 => u64::from_le_bytes(le) as f64,
        DType::I64 => i64::from_le_bytes(le) as f64,
        DType::F64 => f64::from_le_bytes(le),
        DType::C64 | DType::C128 => f64::NAN,
    }
}

impl ArraySink for Sampler {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        // A reader that ignored the region would deliver another shape: refuse before drawing it.
        if info.shape != self.expected || info.dtype != self.dtype {
            return Err(Error::unsupported(
                "preview.region_ignored",
                None,
                format!(
                    "the reader delivered {} {:?} for the slice of shape {:?}",
                    info.dtype.name(),
                    info.shape,
                    self.expected
                ),
            ));
        }
        self.fill = fill_value(info);
        Ok(())
    }

    fn random_access(&self) -> bool {
        true
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let (start, count) = self.whole_values(offset, data.len() as u64)?;
        let (dtype, size) = (self.dtype, self.dtype.size());
        self.take(start, count, |k| value_of(dtype, &data[k * size..(k + 1) * size]));
        Ok(())
    }

    fn fill_at(&mut self, offset: u64, len: u64, pattern: &[u8]) -> Result<()> {
        let (start, count) = self.whole_values(offset, len)?;
        if pattern.len() != self.dtype.size() {
            return crate::stream::fill_by_chunks(self, offset, len, pattern);
        }
        let v = value_of(self.dtype, pattern);
        self.take(start, count, |_| v);
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// The values the colormap's ends stand for.
fn value_range(grid: &[f64], scaling: Scaling, colormap: Colormap) -> Result<(f64, f64)> {
    let symmetric = |(lo, hi): (f64, f64)| {
        if colormap == Colormap::Seismic {
            let m = lo.abs().max(hi.abs());
            (-m, m)
        } else {
            (lo, hi)
        }
    };
    match scaling {
        Scaling::Range(lo, hi) => {
            if !(lo.is_finite() && hi.is_finite() && lo < hi) {
                return Err(Error::usage(format!(
                    "--range {lo},{hi}: give two finite numbers, MIN below MAX"
                )));
            }
            Ok((lo, hi))
        }
        Scaling::MinMax => {
            let mut lo = f64::INFINITY;
            let mut hi = f64::NEG_INFINITY;
            for &v in grid.iter().filter(|v| v.is_finite()) {
                lo = lo.min(v);
                hi = hi.max(v);
            }
            Ok(if lo <= hi { symmetric((lo, hi)) } else { (0.0, 1.0) })
        }
        Scaling::PercentClip(p) => {
            if !(0.0..50.0).contains(&p) {
                return Err(Error::usage(format!(
                    "--percent-clip {p}: give a percentage from 0 up to (not including) 50"
                )));
            }
            let mut v: Vec<f64> = grid.iter().copied().filter(|v| v.is_finite()).collect();
            if v.is_empty() {
                return Ok((0.0, 1.0));
            }
            v.sort_by(f64::total_cmp);
            Ok(symmetric((percentile(&v, p), percentile(&v, 100.0 - p))))
        }
    }
}

/// numpy's `percentile(sorted, q)` with its default linear interpolation.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    let pos = q / 100.0 * (sorted.len() - 1) as f64;
    let i = pos.floor() as usize;
    let j = (i + 1).min(sorted.len() - 1);
    let f = pos - i as f64;
    sorted[i] + (sorted[j] - sorted[i]) * f
}

/// The brightness of each pixel lit from azimuth 315° at altitude 45° (the usual hillshade),
/// from the slope between the pixel's neighbours; `dx`, `dy` are the pixel spacing in samples
/// of the array (the values count as heights in sample units). Missing neighbours (edges,
/// transparent cells) give a one-sided difference.
fn hillshade(grid: &[f64], w: usize, h: usize, dx: f64, dy: f64) -> Vec<f64> {
    let zenith = 45f64.to_radians();
    let azimuth = (360.0f64 - 315.0 + 90.0).to_radians();
    let at = |r: isize, c: isize| -> Option<f64> {
        if r < 0 || c < 0 || r >= h as isize || c >= w as isize {
            return None;
        }
        let v = grid[r as usize * w + c as usize];
        v.is_finite().then_some(v)
    };
    let diff = |a: Option<f64>, z: f64, b: Option<f64>, step: f64| -> f64 {
        match (a, b) {
            (Some(a), Some(b)) => (b - a) / (2.0 * step),
            (Some(a), None) => (z - a) / step,
            (None, Some(b)) => (b - z) / step,
            (None, None) => 0.0,
        }
    };
    let mut out = vec![1.0; grid.len()];
    for r in 0..h as isize {
        for c in 0..w as isize {
            let Some(z) = at(r, c) else { continue };
            let dzdx = diff(at(r, c - 1), z, at(r, c + 1), dx);
            let dzdy = diff(at(r - 1, c), z, at(r + 1, c), dy);
            let slope = (dzdx * dzdx + dzdy * dzdy).sqrt().atan();
            let aspect = dzdy.atan2(-dzdx);
            let s = zenith.cos() * slope.cos() + zenith.sin() * slope.sin() * (azimuth - aspect).cos();
            out[r as usize * w + c as usize] = s.clamp(0.0, 1.0);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colormap_ends_are_the_published_colours() {
        assert_eq!(Colormap::Gray.rgb(0.0), [0, 0, 0]);
        assert_eq!(Colormap::Gray.rgb(1.0), [255, 255, 255]);
        assert_eq!(Colormap::Gray.rgb(0.5), [128, 128, 128]);
        assert_eq!(Colormap::Seismic.rgb(0.5), [255, 255, 255]);
        assert_eq!(Colormap::Seismic.rgb(0.0), [0, 0, 77]);
        assert_eq!(Colormap::Seismic.rgb(1.0), [128, 0, 0]);
        assert_eq!(Colormap::Viridis.rgb(0.0), [68, 1, 84]);
        assert_eq!(Colormap::Viridis.rgb(1.0), [253, 231, 37]);
        assert_eq!(Colormap::Terrain.rgb(1.0), [255, 255, 255]);
        assert_eq!(Colormap::Terrain.rgb(0.0), [51, 51, 153]);
        assert_eq!(Colormap::Gray.rgb(f64::NAN), [0, 0, 0]);
        assert_eq!(Colormap::Gray.rgb(7.0), [255, 255, 255]);
    }

    #[test]
    fn sampling_takes_the_centre_cell_of_each_pixel() {
        for (n_out, n_in) in [(3u64, 10u64), (10, 3), (7, 7), (1, 5), (4, 1000)] {
            for o in 0..n_out {
                let i = centre(o, n_out, n_in);
                assert!(i < n_in);
                assert!(first_pixel(i, n_out, n_in) <= o);
                // Every earlier pixel's centre lies before i.
                let f = first_pixel(i, n_out, n_in);
                assert_eq!(centre(f, n_out, n_in), i, "{n_out} {n_in} {o}");
                if f > 0 {
                    assert!(centre(f - 1, n_out, n_in) < i);
                }
            }
            assert_eq!(first_pixel(n_in, n_out, n_in), n_out);
        }
        assert_eq!((0..3).map(|o| centre(o, 3, 9)).collect::<Vec<_>>(), vec![1, 4, 7]);
    }

    #[test]
    fn slice_specs_parse() {
        assert_eq!(
            SliceSpec::parse("0=120").unwrap(),
            SliceSpec {
                axis: AxisRef::Number(0),
                index: 120
            }
        );
        assert_eq!(
            SliceSpec::parse("Inline=-1").unwrap(),
            SliceSpec {
                axis: AxisRef::Name("Inline".into()),
                index: -1
            }
        );
        for bad in ["0", "=3", "0=x", "0=1.5"] {
            assert!(SliceSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn percentiles_are_numpys() {
        let v = [1.0, 2.0, 3.0, 4.0, 10.0];
        // numpy.percentile([1,2,3,4,10], [10, 90]) == [1.4, 7.6]
        assert!((percentile(&v, 10.0) - 1.4).abs() < 1e-12);
        assert!((percentile(&v, 90.0) - 7.6).abs() < 1e-12);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&v, 100.0), 10.0);
    }
}
