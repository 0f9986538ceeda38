//! Decoding of OpenVDS wavelet-compressed chunks (`Wavelet`, `WaveletLossless`,
//! `WaveletNormalizeBlock`, `WaveletNormalizeBlockLossless`) at full quality, bit-identical with
//! OpenVDS 3.4.9. The format is described in docs/formats/vds-wavelet.md.
//!
//! A chunk decodes into one brick written linearly (X fastest, no padding) into a caller's
//! buffer, in the channel's native format (R32, or U8/U16 codes). Every size read from the
//! chunk is checked against the brick and the bytes present before it is used; every section
//! must end where the next begins, and the last one at the chunk's end.

pub mod fse;
pub mod transform;
pub mod tree;

use rasterpack_common::{ByteReader, Error, ErrorKind, Result};

use crate::layout::VdsSampleFormat;
use tree::{Overwrite, Plan, Walk, LEVELS};

/// Stream versions 1.4, 1.5 and 1.6.
pub const VERSION_MIN: i32 = 671;
/// Newest stream version decoded (1.6).
pub const VERSION_MAX: i32 = 673;
const VERSION_STREAM_FIX: i32 = 673;
/// OpenVDS's cap on every axis of a wavelet brick.
pub const MAX_AXIS: i32 = 512;
const HEADER: usize = 24;
const NORMAL_BLOCK: usize = 8;

const INT_INTEGER: i32 = 1;
const INT_DIFF_PASS: i32 = 4;
const INT_16BIT: i32 = 8;

/// How to decode a chunk: what the layer says (method, channel) and the brick it must fill.
#[derive(Debug, Clone, Copy)]
pub struct WaveletParams {
    /// The channel's format: R32, U8 or U16.
    pub format: VdsSampleFormat,
    /// The format asked for: the channel's, or R32 for physical values. Like OpenVDS, a float
    /// stream asked for as R32 comes out raw even in a U8/U16 channel, and an integer stream
    /// comes out as its U8/U16 codes whatever is asked for (see [`WaveletInfo::format`]).
    pub destination: VdsSampleFormat,
    /// `WaveletNormalizeBlock*` methods.
    pub normalize: bool,
    /// `*Lossless` methods (a full-quality read applies the lossless residual).
    pub lossless: bool,
    /// The channel's value range.
    pub value_range: [f32; 2],
    /// The channel's integer scale.
    pub integer_scale: f32,
    /// The channel's integer offset.
    pub integer_offset: f32,
    /// Whether the channel uses a no-value.
    pub use_no_value: bool,
    /// The channel's no-value.
    pub no_value: f32,
    /// The brick's size from the layer geometry (X, Y, Z).
    pub size: [u64; 3],
    /// Cap on the entries of each zero-tree list (<= 16 bytes each): a valid brick never needs
    /// more than its coefficient count; a limit below that bounds memory on hostile input.
    pub max_list_entries: usize,
}

/// What the header and sections of a decoded chunk said.
#[derive(Debug, Clone)]
pub struct WaveletInfo {
    /// The format written to the output: R32, U8 or U16.
    pub format: VdsSampleFormat,
    /// Stream version (671..=673).
    pub version: i32,
    /// Dimensions of the transform.
    pub dimensions: i32,
    /// Integer flags: 1 integer, 2 lossless-optimised, 4 diff-pass, 8 16-bit.
    pub integer_info: i32,
    /// For adaptive level k: the bytes of the chunk a decode at that level reads.
    pub level_need: [u64; LEVELS],
    /// Bytes used by the full-quality decode (rounded up to 4, like every section).
    pub used: u64,
}

/// Reusable buffers for decoding bricks one after another.
#[derive(Default)]
pub struct WaveletScratch {
    picture: Vec<f32>,
    tree: tree::TreeScratch,
    transform: transform::TransformScratch,
    fse: fse::FseTable,
    planes: Vec<u8>,
    counts: Vec<u8>,
    mask: Vec<u32>,
}

fn bad(code: &'static str, at: usize, msg: impl Into<String>) -> Error {
    Error::invalid(code, at as u64, msg.into())
}

/// Truncation found by the common cursor is this codec's finding: the chunk, not the file,
/// is short.
fn truncated(e: Error) -> Error {
    if e.kind == ErrorKind::Truncated {
        Error {
            kind: ErrorKind::Invalid,
            code: "vds.wavelet.truncated".into(),
            ..e
        }
    } else {
        e
    }
}

/// The sections after the header (each padded to a word).
struct Sections<'a> {
    /// Zero-run counts (after the section's size field), when there are any.
    zero_runs: Option<&'a [u8]>,
    /// Run-length NoValue mask and its absolute offset.
    no_value: Option<(&'a [u8], usize)>,
    normal: Vec<f32>,
    threshold: f32,
    start_threshold: f32,
    stream: &'a [u8],
    stream_at: usize,
    /// Where the lossless residual (if any) starts.
    rest_at: usize,
}

fn sections(src: &[u8], normal_count: usize) -> Result<Sections<'_>> {
    let mut r = ByteReader::new(src);
    r.seek(HEADER, "wavelet header")?;
    let zero_at = r.position();
    let zero_size = r.i32_le("zero-run section size")?;
    if zero_size < 4 {
        return Err(bad(
            "vds.wavelet.zero_runs",
            zero_at,
            format!("zero-run section size {zero_size} (at least 4)"),
        ));
    }
    let zero = r.bytes(zero_size as usize - 4, "zero-run section")?;
    r.align_to(4, "zero-run section")?;
    let nov_at = r.position();
    let nov_size = r.i32_le("NoValue section size")?;
    let no_value = match nov_size {
        -1 => None,
        n if n < 0 => return Err(bad("vds.wavelet.novalue", nov_at, format!("NoValue mask size {n}"))),
        n => {
            r.f32_le("NoValue section")?; // the encoder's NoValue: reads use the channel's
            let at = r.position();
            let mask = r.bytes(n as usize, "NoValue mask")?;
            r.align_to(4, "NoValue mask")?;
            Some((mask, at))
        }
    };
    let mut normal = Vec::with_capacity(normal_count.min(r.remaining() / 4));
    for _ in 0..normal_count {
        normal.push(r.f32_le("normalization field")?);
    }
    let threshold = r.f32_le("thresholds")?;
    let start_threshold = r.f32_le("thresholds")?;
    let stream_len = r.i32_le("coefficient stream size")?;
    if stream_len < 0 {
        return Err(bad(
            "vds.wavelet.stream",
            r.position() - 4,
            format!("coefficient stream size {stream_len}"),
        ));
    }
    let stream_at = r.position();
    let stream = r.bytes(stream_len as usize, "coefficient stream")?;
    r.align_to(4, "coefficient stream")?;
    Ok(Sections {
        zero_runs: (zero_size > 4).then_some(zero),
        no_value,
        normal,
        threshold,
        start_threshold,
        stream,
        stream_at,
        rest_at: r.position(),
    })
}

/// Decode a wavelet chunk into `out` (resized to the brick's native bytes, X fastest).
pub fn decode(src: &[u8], p: &WaveletParams, s: &mut WaveletScratch, out: &mut Vec<u8>) -> Result<WaveletInfo> {
    let mut r = ByteReader::new(src);
    let mut header = [0i32; 6];
    for v in header.iter_mut() {
        *v = r.i32_le("wavelet header").map_err(truncated)?;
    }
    let [version, compressed, hx, hy, hz, w] = header;
    let hsize = [hx, hy, hz];
    let dims = w & 0xFF;
    let integer_info = (w >> 8) & 0xFF;
    if !(VERSION_MIN..=VERSION_MAX).contains(&version) {
        return Err(bad(
            "vds.chunk.wavelet_version",
            0,
            format!("wavelet version {version} (OpenVDS reads 671..673)"),
        ));
    }
    if !(1..=3).contains(&dims) || hsize.iter().any(|&v| !(0..=MAX_AXIS).contains(&v)) {
        return Err(bad(
            "vds.chunk.wavelet_header",
            8,
            format!("wavelet header: {dims} dimensions, sizes {hsize:?} (1..3 dimensions, sizes 0..512)"),
        ));
    }
    let dims = dims as usize;
    // Axes past the header's dimensions are 1 in the decoded brick.
    let mut size = [1usize; 3];
    for a in 0..dims {
        size[a] = hsize[a] as usize;
    }
    if size.map(|v| v as u64) != p.size {
        return Err(bad(
            "vds.chunk.wavelet_geometry",
            8,
            format!(
                "wavelet brick {size:?} ({dims}-D), the layer's geometry needs {:?}",
                p.size
            ),
        ));
    }
    if compressed as i64 != src.len() as i64 {
        return Err(bad(
            "vds.chunk.wavelet_size",
            4,
            format!(
                "wavelet compressedSize {compressed} but the chunk holds {} bytes",
                src.len()
            ),
        ));
    }
    if src.len() == HEADER {
        return Err(bad(
            "vds.wavelet.truncated",
            HEADER,
            "wavelet chunk holds only its header",
        ));
    }
    // The format the decoder produces: integer streams come out as U8/U16 codes, float
    // streams as R32 or quantized straight to the channel's U8/U16.
    let integer = integer_info & INT_INTEGER != 0;
    let stream_format = if integer {
        if integer_info & INT_16BIT != 0 {
            VdsSampleFormat::U16
        } else {
            VdsSampleFormat::U8
        }
    } else {
        VdsSampleFormat::R32
    };
    let produced = match (p.destination, stream_format) {
        (VdsSampleFormat::U8, _) => VdsSampleFormat::U8,
        (VdsSampleFormat::U16, VdsSampleFormat::R32) => VdsSampleFormat::U16,
        (_, sf) => sf,
    };
    // Combinations OpenVDS itself has no defined result for are not guessed at.
    let supported = match p.format {
        VdsSampleFormat::R32 => stream_format == VdsSampleFormat::R32,
        VdsSampleFormat::U8 => true,
        VdsSampleFormat::U16 => stream_format != VdsSampleFormat::U8,
        _ => false,
    };
    if !supported
        || !matches!(
            p.destination,
            VdsSampleFormat::R32 | VdsSampleFormat::U8 | VdsSampleFormat::U16
        )
    {
        return Err(Error::unsupported(
            "vds.wavelet.format",
            Some(20),
            format!(
                "a {} channel holding {} wavelet data is not supported",
                p.format.name(),
                if stream_format == VdsSampleFormat::R32 {
                    "float"
                } else {
                    stream_format.name()
                }
            ),
        ));
    }
    let lossless = p.lossless && (!integer || integer_info & INT_DIFF_PASS != 0);

    let plan = Plan::new(dims, size);
    let [sx, sy, sz] = size;

    let normal_count = if p.normalize {
        sx.div_ceil(NORMAL_BLOCK) * sy.div_ceil(NORMAL_BLOCK) * sz.div_ceil(NORMAL_BLOCK)
    } else {
        0
    };
    let sec = sections(src, normal_count).map_err(truncated)?;
    let (threshold, start_threshold, stream, stream_at) =
        (sec.threshold, sec.start_threshold, sec.stream, sec.stream_at);

    let planes = tree::plane_count(threshold, start_threshold).map_err(|e| e.shifted(stream_at as u64))?;
    let walk = Walk::new(&plan, version >= VERSION_STREAM_FIX);
    let overwrite = if version < VERSION_STREAM_FIX && walk.stream_bug {
        if lossless {
            Overwrite::Allow
        } else {
            Overwrite::Prevent
        }
    } else {
        Overwrite::Assume
    };
    s.picture.clear();
    s.picture.resize(plan.picture_len(), 0.0);
    let info = tree::decode(
        &plan,
        &walk,
        stream,
        threshold,
        planes,
        integer,
        overwrite,
        p.max_list_entries,
        &mut s.picture,
        &mut s.tree,
    )
    .map_err(|e| Error {
        offset: Some(stream_at as u64),
        ..e
    })?;
    if info.used != stream.len() {
        return Err(bad(
            "vds.wavelet.stream",
            stream_at,
            format!(
                "coefficient stream holds {} bytes, its bit planes use {}",
                stream.len(),
                info.used
            ),
        ));
    }

    transform::inverse(&plan, &mut s.picture, integer_info, &mut s.transform);

    let (ax, axy) = (plan.alloc[0], plan.alloc[0] * plan.alloc[1]);
    if let Some((rle, at)) = sec.no_value {
        apply_no_value(rle, size, ax, axy, p.no_value, &mut s.mask, &mut s.picture)
            .map_err(|e| e.shifted(at as u64))?;
    }
    if p.normalize {
        normalize(&sec.normal, size, ax, axy, &mut s.picture);
    }
    if let Some(counts) = sec.zero_runs {
        zero_runs(
            counts,
            HEADER + 4,
            size,
            ax,
            axy,
            &mut s.fse,
            &mut s.counts,
            &mut s.picture,
        )
        .map_err(truncated)?;
    }
    let mut at = sec.rest_at;
    if lossless {
        at = lossless_residual(src, at, size, ax, axy, &mut s.fse, &mut s.planes, &mut s.picture).map_err(truncated)?;
        at = (at + 3) & !3;
    }
    if at != src.len() {
        return Err(bad(
            "vds.wavelet.trailing",
            at,
            format!("wavelet data ends at byte {at}, the chunk holds {}", src.len()),
        ));
    }

    let mut level_need = [0u64; LEVELS];
    for k in 0..LEVELS {
        level_need[k] = (stream_at + info.level_need[k]) as u64;
    }
    write_out(&s.picture, size, ax, axy, produced, p, integer_info, out);
    Ok(WaveletInfo {
        format: produced,
        version,
        dimensions: dims as i32,
        integer_info,
        level_need,
        used: at as u64,
    })
}

/// Set the voxels of the NoValue bit mask (run-length coded, rows padded to 32 bits).
fn apply_no_value(
    rle: &[u8],
    size: [usize; 3],
    ax: usize,
    axy: usize,
    no_value: f32,
    mask: &mut Vec<u32>,
    pic: &mut [f32],
) -> Result<()> {
    let words_x = size[0].div_ceil(32);
    let words = words_x * size[1] * size[2];
    mask.clear();
    mask.resize(words, 0);
    let total = words * 32;
    let mut bit = 0usize;
    let mut i = 0usize;
    let byte = |i: usize| {
        rle.get(i)
            .copied()
            .ok_or_else(|| bad("vds.wavelet.novalue", i, "NoValue mask runs past its section"))
    };
    while bit < total {
        let b0 = byte(i)? as u32;
        i += 1;
        let extra = (b0 >> 1) & 3;
        let mut run = b0 >> 3;
        for k in 0..extra {
            run |= (byte(i)? as u32) << (5 + 8 * k);
            i += 1;
        }
        let run = run as usize;
        if b0 & 1 != 0 {
            if run > total - bit {
                return Err(bad("vds.wavelet.novalue", i, "NoValue run past the end of the mask"));
            }
            for w in bit..bit + run {
                mask[w / 32] |= 1 << (w % 32);
            }
        }
        bit = bit.saturating_add(run);
    }
    let mut k = 0;
    for z in 0..size[2] {
        for y in 0..size[1] {
            let row = z * axy + y * ax;
            for x0 in (0..size[0]).step_by(32) {
                let m = mask[k];
                k += 1;
                if m == 0 {
                    continue;
                }
                for j in 0..(size[0] - x0).min(32) {
                    if m & (1 << j) != 0 {
                        pic[row + x0 + j] = no_value;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Multiply by the trilinear interpolation of the per-8^3-block normalization field.
fn normalize(field: &[f32], size: [usize; 3], ax: usize, axy: usize, pic: &mut [f32]) {
    use transform::nan::{add, mul, sub};
    let n = size.map(|v| v.div_ceil(NORMAL_BLOCK) as i32);
    let at = |x: i32, y: i32, z: i32| field[(x + y * n[0] + z * n[0] * n[1]) as usize];
    for z in 0..size[2] {
        for y in 0..size[1] {
            for x in 0..size[0] {
                let mut r = [x as f32, y as f32, z as f32];
                let mut i0 = [0i32; 3];
                let mut i1 = [0i32; 3];
                for a in 0..3 {
                    r[a] /= 8.0;
                    r[a] -= ((8.0f32 - 1.0) / 2.0) / 8.0;
                    i0[a] = r[a].floor() as i32;
                    // OpenVDS compares every axis with the X block count here.
                    if i0[a] == n[0] - 1 {
                        i0[a] -= 1;
                    }
                    i1[a] = i0[a] + 1;
                }
                for a in 0..3 {
                    i0[a] = i0[a].max(0);
                    i1[a] = i1[a].max(0).min(n[a] - 1);
                    r[a] -= i0[a] as f32;
                    r[a] = r[a].clamp(0.0, 1.0);
                }
                let v = [
                    at(i0[0], i0[1], i0[2]),
                    at(i1[0], i0[1], i0[2]),
                    at(i0[0], i1[1], i0[2]),
                    at(i1[0], i1[1], i0[2]),
                    at(i0[0], i0[1], i1[2]),
                    at(i1[0], i0[1], i1[2]),
                    at(i0[0], i1[1], i1[2]),
                    at(i1[0], i1[1], i1[2]),
                ];
                // A field holding NaN or infinity (the encoder's, for blocks with such values)
                // gives NaN; which one is OpenVDS's x86 operand order (see transform::nan):
                // each difference's minuend, then the product, and the field's value before
                // the picture's in the final multiplication.
                let lerp = |a: f32, b: f32, t: f32| add(mul(sub(b, a), t), a);
                let x0 = lerp(v[0], v[1], r[0]);
                let x2 = lerp(v[2], v[3], r[0]);
                let x4 = lerp(v[4], v[5], r[0]);
                let x6 = lerp(v[6], v[7], r[0]);
                let y0 = lerp(x0, x2, r[1]);
                let y4 = lerp(x4, x6, r[1]);
                let mut f = lerp(y0, y4, r[2]);
                if f < 1e-22 {
                    f = 1e-22;
                }
                let at = x + y * ax + z * axy;
                pic[at] = mul(f, pic[at]);
            }
        }
    }
}

/// Read one byte plane of a side channel: `[size i32]` then 0 = all `value` (an i32 follows),
/// negative = raw bytes, positive = an FSE block.
fn count_plane(r: &mut ByteReader, t: &mut fse::FseTable, out: &mut [u8]) -> Result<()> {
    let at = r.offset() as usize;
    let size = r.i32_le("zero-run counts")?;
    if size == 0 {
        out.fill(r.i32_le("zero-run counts")? as u8);
    } else if size < 0 {
        if size.unsigned_abs() as usize != out.len() {
            return Err(bad(
                "vds.wavelet.zero_runs",
                at,
                format!(
                    "raw zero-run counts of {} bytes, {} expected",
                    -(size as i64),
                    out.len()
                ),
            ));
        }
        out.copy_from_slice(r.bytes(out.len(), "zero-run counts")?);
    } else {
        let block = r.bytes(size as usize, "zero-run counts")?;
        fse::decompress(block, out, t).map_err(|e| bad("vds.wavelet.fse", at + 4, format!("zero-run counts: {e}")))?;
    }
    Ok(())
}

/// Rows (along X) that start with zeros: a count per (y, z) row, low byte plane, then a high
/// byte plane when X is 256 or more. `src` is the section after its size field, at `base`.
#[allow(clippy::too_many_arguments)]
fn zero_runs(
    src: &[u8],
    base: usize,
    size: [usize; 3],
    ax: usize,
    axy: usize,
    t: &mut fse::FseTable,
    counts: &mut Vec<u8>,
    pic: &mut [f32],
) -> Result<()> {
    let n = size[1] * size[2];
    counts.clear();
    counts.resize(2 * n, 0);
    let (low, high) = counts.split_at_mut(n);
    let mut r = ByteReader::at(src, base as u64);
    count_plane(&mut r, t, low)?;
    let wide = size[0] >= 256;
    if wide {
        count_plane(&mut r, t, high)?;
    }
    for z in 0..size[2] {
        for y in 0..size[1] {
            let k = y + z * size[1];
            let c = low[k] as usize | if wide { (high[k] as usize) << 8 } else { 0 };
            // Runs may cover the row's padding, never the next row.
            if c > ax {
                return Err(bad(
                    "vds.wavelet.zero_runs",
                    base,
                    format!("zero run of {c} samples in a row of {}", size[0]),
                ));
            }
            let row = y * ax + z * axy;
            pic[row..row + c].fill(0.0);
        }
    }
    Ok(())
}

/// The lossless residual at `at`: an unused word, four plane sizes, then four byte planes
/// (bits 0-7 .. 24-31) XORed into the f32 bits of the lossy reconstruction. Returns its end.
#[allow(clippy::too_many_arguments)]
fn lossless_residual(
    src: &[u8],
    at: usize,
    size: [usize; 3],
    ax: usize,
    axy: usize,
    t: &mut fse::FseTable,
    planes: &mut Vec<u8>,
    pic: &mut [f32],
) -> Result<usize> {
    let n = size[0] * size[1] * size[2];
    let mut r = ByteReader::new(src);
    r.seek(at, "lossless section")?;
    r.i32_le("lossless section header")?;
    let mut sizes = [0i32; 4];
    for v in sizes.iter_mut() {
        *v = r.i32_le("lossless section header")?;
    }
    planes.clear();
    planes.resize(4 * n, 0);
    for (k, &len) in sizes.iter().enumerate() {
        let plane = &mut planes[k * n..(k + 1) * n];
        let pos = r.position();
        match len {
            0 => {}
            1 => plane.fill(r.u8("lossless plane")?),
            -1 => plane.copy_from_slice(r.bytes(n, "lossless plane")?),
            l if l > 1 => {
                let block = r.bytes(l as usize, "lossless plane")?;
                fse::decompress(block, plane, t)
                    .map_err(|e| bad("vds.wavelet.fse", pos, format!("lossless plane {k}: {e}")))?;
            }
            l => {
                return Err(bad(
                    "vds.wavelet.lossless",
                    at + 4 + 4 * k,
                    format!("lossless plane size {l}"),
                ))
            }
        }
    }
    let (p0, rest) = planes.split_at(n);
    let (p1, rest) = rest.split_at(n);
    let (p2, p3) = rest.split_at(n);
    let mut i = 0;
    for z in 0..size[2] {
        for y in 0..size[1] {
            let row = &mut pic[z * axy + y * ax..z * axy + y * ax + size[0]];
            for v in row.iter_mut() {
                let r = u32::from_le_bytes([p0[i], p1[i], p2[i], p3[i]]);
                *v = f32::from_bits(v.to_bits() ^ r);
                i += 1;
            }
        }
    }
    Ok(r.position())
}

/// The range the decoded floats are quantized over (OpenVDS `Wavelet_GetQuantizationValueRange`
/// after `DeserializeVolumeData`'s range for quantized channels).
fn quantization_range(p: &WaveletParams, produced: VdsSampleFormat, integer_info: i32) -> [f32; 2] {
    let unv = p.use_no_value;
    // The range the chunk deserializer hands the decoder for U8/U16 channels.
    let orig = match (p.format, produced) {
        (VdsSampleFormat::U8 | VdsSampleFormat::U16, VdsSampleFormat::U16) => [
            p.integer_offset,
            p.integer_scale * if unv { 65534.0 } else { 65535.0 } + p.integer_offset,
        ],
        (VdsSampleFormat::U8, VdsSampleFormat::U8) => [
            p.integer_offset,
            p.integer_scale * if unv { 254.0 } else { 255.0 } + p.integer_offset,
        ],
        _ => p.value_range,
    };
    if integer_info & INT_INTEGER != 0 {
        if integer_info & INT_16BIT != 0 {
            if produced == VdsSampleFormat::U8 {
                let min = (orig[0] - p.integer_offset) / p.integer_scale;
                [min, min + (orig[1] - orig[0]) / p.integer_scale]
            } else {
                [0.0, if unv { 65534.0 } else { 65535.0 }]
            }
        } else {
            [0.0, if unv { 254.0 } else { 255.0 }]
        }
    } else {
        orig
    }
}

#[inline]
fn quantize(v: f32, min: f32, rs: f32, buckets: i32) -> i32 {
    let b = (v - min) * rs;
    if b <= 0.0 {
        0
    } else if b >= (buckets - 1) as f32 {
        buckets - 1
    } else {
        (b + 0.5) as i32
    }
}

#[allow(clippy::too_many_arguments)]
fn write_out(
    pic: &[f32],
    size: [usize; 3],
    ax: usize,
    axy: usize,
    produced: VdsSampleFormat,
    p: &WaveletParams,
    integer_info: i32,
    out: &mut Vec<u8>,
) {
    let n = size[0] * size[1] * size[2];
    out.clear();
    let rows = (0..size[2]).flat_map(|z| (0..size[1]).map(move |y| z * axy + y * ax));
    match produced {
        VdsSampleFormat::R32 => {
            let sx = size[0];
            out.resize(n * 4, 0);
            for (dst, r) in out.chunks_exact_mut(sx * 4).zip(rows) {
                for (d, v) in dst.chunks_exact_mut(4).zip(&pic[r..r + sx]) {
                    d.copy_from_slice(&v.to_le_bytes());
                }
            }
        }
        _ => {
            let [min, max] = quantization_range(p, produced, integer_info);
            let unv = p.use_no_value;
            let (top, code_nv) = if produced == VdsSampleFormat::U8 {
                (255i32, 255i32)
            } else {
                (65535, 65535)
            };
            let rs = (top - i32::from(unv)) as f32 / (max - min);
            let buckets = top + 1 - i32::from(unv);
            let code = |v: f32| {
                if unv && v == p.no_value {
                    code_nv
                } else {
                    quantize(v, min, rs, buckets)
                }
            };
            let sx = size[0];
            if produced == VdsSampleFormat::U8 {
                out.resize(n, 0);
                for (dst, r) in out.chunks_exact_mut(sx).zip(rows) {
                    for (d, &v) in dst.iter_mut().zip(&pic[r..r + sx]) {
                        *d = code(v) as u8;
                    }
                }
            } else {
                out.resize(n * 2, 0);
                for (dst, r) in out.chunks_exact_mut(sx * 2).zip(rows) {
                    for (d, &v) in dst.chunks_exact_mut(2).zip(&pic[r..r + sx]) {
                        d.copy_from_slice(&(code(v) as u16).to_le_bytes());
                    }
                }
            }
        }
    }
}

/// Check a chunk's adaptive-level table (chunk metadata bytes 8..24) against its body: each
/// level's byte count (`size_k = size_{k-1} * L[k] / 255`) must hold what a decode at that
/// level reads (level 0 of lossless chunks stops before the lossless residual). Returns a
/// message when it does not.
pub fn check_levels(info: &WaveletInfo, object_len: u64, levels: &[u8; LEVELS]) -> Option<String> {
    let sizes = crate::chunk::adaptive_level_sizes(object_len, levels);
    for (k, &sz) in sizes.iter().enumerate() {
        let need = info.level_need[k];
        if sz < need {
            return Some(format!(
                "adaptive level {k} keeps {sz} bytes of the chunk, a decode at that level reads {need}"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(size: [u64; 3], format: VdsSampleFormat) -> WaveletParams {
        WaveletParams {
            format,
            destination: format,
            normalize: false,
            lossless: false,
            value_range: [-1.0, 1.0],
            integer_scale: 1.0,
            integer_offset: 0.0,
            use_no_value: false,
            no_value: -999.0,
            size,
            max_list_entries: usize::MAX,
        }
    }

    /// A brick under 8 on every axis has no transform step: its coefficients are the raw start
    /// values. Crafted chunk: header, zero runs (counts raw), NoValue mask, thresholds, stream.
    fn crafted(values: &[f32], size: [i32; 3], zero_counts: Option<&[u8]>, mask_runs: Option<&[u8]>) -> Vec<u8> {
        crafted_normal(values, size, zero_counts, mask_runs, &[])
    }

    /// `crafted` with a normalization field (normalize methods).
    fn crafted_normal(
        values: &[f32],
        size: [i32; 3],
        zero_counts: Option<&[u8]>,
        mask_runs: Option<&[u8]>,
        field: &[f32],
    ) -> Vec<u8> {
        let mut b = Vec::new();
        for v in [673, 0, size[0], size[1], size[2], 3] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        match zero_counts {
            None => b.extend_from_slice(&4i32.to_le_bytes()),
            Some(c) => {
                let body = 4 + 4 + c.len();
                b.extend_from_slice(&(body as i32).to_le_bytes());
                b.extend_from_slice(&(-(c.len() as i32)).to_le_bytes());
                b.extend_from_slice(c);
                while b.len() % 4 != 0 {
                    b.push(0);
                }
            }
        }
        match mask_runs {
            None => b.extend_from_slice(&(-1i32).to_le_bytes()),
            Some(r) => {
                b.extend_from_slice(&(r.len() as i32).to_le_bytes());
                b.extend_from_slice(&0f32.to_le_bytes());
                b.extend_from_slice(r);
                while b.len() % 4 != 0 {
                    b.push(0);
                }
            }
        }
        for v in field {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&1.0f32.to_le_bytes()); // threshold
        b.extend_from_slice(&0.5f32.to_le_bytes()); // start threshold below it: no bit plane
        let stream_len = 64 + 4 * values.len();
        b.extend_from_slice(&(stream_len as i32).to_le_bytes());
        b.extend_from_slice(&[0u8; 64]);
        for v in values {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let n = b.len() as i32;
        b[4..8].copy_from_slice(&n.to_le_bytes());
        b
    }

    fn floats(b: &[u8]) -> Vec<f32> {
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn raw_brick_with_side_channels() {
        let vals: Vec<f32> = (0..24).map(|i| i as f32 * 0.5 - 3.0).collect();
        let mut s = WaveletScratch::default();
        let mut out = Vec::new();
        let p = params([4, 3, 2], VdsSampleFormat::R32);
        let chunk = crafted(&vals, [4, 3, 2], None, None);
        let info = decode(&chunk, &p, &mut s, &mut out).unwrap();
        assert_eq!(floats(&out), vals);
        assert_eq!(info.used as usize, chunk.len());

        // Zero runs: row (y=1, z=0) starts with 3 zeros; NoValue: voxel 2 of every row (runs:
        // skip 2, set 1, skip 29, repeated for the 6 rows of one 32-bit word each).
        let counts = [0u8, 3, 0, 0, 0, 0];
        let mut runs = Vec::new();
        for _ in 0..6 {
            runs.extend_from_slice(&[2 << 3, (1 << 3) | 1, 29 << 3]);
        }
        let chunk = crafted(&vals, [4, 3, 2], Some(&counts), Some(&runs));
        decode(&chunk, &p, &mut s, &mut out).unwrap();
        let mut want = vals.clone();
        for r in 0..6 {
            want[r * 4 + 2] = -999.0;
        }
        want[4..7].fill(0.0); // zero runs come after the mask
        assert_eq!(floats(&out), want);

        // U8 native read of the float stream quantizes over offset .. scale * 255 + offset.
        let q = WaveletParams {
            integer_scale: 0.05,
            integer_offset: -3.0,
            ..params([4, 3, 2], VdsSampleFormat::U8)
        };
        let chunk = crafted(&vals, [4, 3, 2], None, None);
        decode(&chunk, &q, &mut s, &mut out).unwrap();
        assert_eq!(out, (0..24).map(|i| (i * 10) as u8).collect::<Vec<_>>());
    }

    /// A NaN normalization value (what the encoder stores for a block holding NaN or inf)
    /// times a NaN voxel gives the field's NaN, as OpenVDS's x86 code does (`mulss` with the
    /// field's value as destination): the sign and payload of the field, not of the voxel.
    #[test]
    fn normalization_nan_wins_over_the_voxels_nan() {
        let vals = [
            f32::from_bits(0xffc0_0000),
            f32::from_bits(0x7fc0_0001),
            1.5,
            -2.0,
            f32::INFINITY,
            0.0,
        ];
        let p = WaveletParams {
            normalize: true,
            ..params([6, 1, 1], VdsSampleFormat::R32)
        };
        for field in [0x7fc0_0000u32, 0xffc0_0000, 0x7fc1_2345] {
            let chunk = crafted_normal(&vals, [6, 1, 1], None, None, &[f32::from_bits(field)]);
            let mut out = Vec::new();
            decode(&chunk, &p, &mut WaveletScratch::default(), &mut out).unwrap();
            let got: Vec<u32> = floats(&out).iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, vec![field; 6], "field {field:#x}");
        }
        // A finite field leaves a voxel's NaN as it is.
        let chunk = crafted_normal(&vals, [6, 1, 1], None, None, &[2.0]);
        let mut out = Vec::new();
        decode(&chunk, &p, &mut WaveletScratch::default(), &mut out).unwrap();
        let got: Vec<u32> = floats(&out).iter().map(|v| v.to_bits()).collect();
        assert_eq!(
            got,
            [
                0xffc0_0000,
                0x7fc0_0001,
                3.0f32.to_bits(),
                (-4.0f32).to_bits(),
                f32::INFINITY.to_bits(),
                0
            ]
        );
    }

    #[test]
    fn bad_chunks_fail_with_codes() {
        let vals = vec![1.0f32; 24];
        let p = params([4, 3, 2], VdsSampleFormat::R32);
        let mut s = WaveletScratch::default();
        let mut out = Vec::new();
        let good = crafted(&vals, [4, 3, 2], None, None);
        let code = |b: &[u8], p: &WaveletParams| {
            decode(b, p, &mut WaveletScratch::default(), &mut Vec::new())
                .unwrap_err()
                .code
        };
        assert!(decode(&good, &p, &mut s, &mut out).is_ok());
        let mut b = good.clone();
        b[0] = 0; // version
        assert_eq!(code(&b, &p), "vds.chunk.wavelet_version");
        let mut b = good.clone();
        b[8..12].copy_from_slice(&513i32.to_le_bytes());
        assert_eq!(code(&b, &p), "vds.chunk.wavelet_header");
        assert_eq!(
            code(&good, &params([4, 3, 3], VdsSampleFormat::R32)),
            "vds.chunk.wavelet_geometry"
        );
        let mut b = good.clone();
        b.push(0);
        assert_eq!(code(&b, &p), "vds.chunk.wavelet_size");
        let mut b = good.clone();
        let n = b.len() as i32 + 4;
        b.extend_from_slice(&[0; 4]);
        b[4..8].copy_from_slice(&n.to_le_bytes());
        assert_eq!(code(&b, &p), "vds.wavelet.trailing");
        let mut b = good.clone();
        b[24..28].copy_from_slice(&2i32.to_le_bytes()); // zero-run section smaller than itself
        assert_eq!(code(&b, &p), "vds.wavelet.zero_runs");
        let mut b = good.clone();
        b[40..44].copy_from_slice(&1000i32.to_le_bytes()); // stream size past the end
        assert_eq!(code(&b, &p), "vds.wavelet.truncated");
        let mut b = good.clone();
        b[32..36].copy_from_slice(&0f32.to_le_bytes()); // threshold 0: endless planes
        b[36..40].copy_from_slice(&1f32.to_le_bytes());
        assert_eq!(code(&b, &p), "vds.wavelet.stream");
        for cut in 0..good.len() {
            let mut t = good[..cut].to_vec();
            if t.len() >= 8 {
                t[4..8].copy_from_slice(&(cut as i32).to_le_bytes());
            }
            assert!(decode(&t, &p, &mut s, &mut out).is_err(), "cut at {cut}");
        }
    }
}
