//! GVRS compression codecs: GvrsHuffman, GvrsDeflate (each with the four predictors and M32),
//! GvrsFloat, LSOP12 (legacy and revised headers) and GvrsCanonicalHuffman (Gridfour 2026),
//! bit-exact with Gridfour (the repository's `docs/formats/gvrs-codecs.md` describes each).
//!
//! Every decoder is bounded: the M32 stream length in a block header is checked against the
//! largest length the tile could need (6 bytes per cell) before anything is allocated, and zlib
//! output never exceeds the expected size. Error offsets are relative to the block start.

pub mod bits;
pub mod canonical;
pub mod float;
pub mod huffman;
pub mod lsop;
pub mod m32;
pub mod predictor;
pub mod zlib;

use rasterpack_common::{Error, Result};

pub use predictor::Predictor;

/// A codec named in the header's codec list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    /// `GvrsHuffman`: a predictor's residuals as M32 bytes, coded with Gridfour's Huffman code.
    Huffman,
    /// `GvrsDeflate`: a predictor's residuals as M32 bytes, zlib-compressed.
    Deflate,
    /// `GvrsFloat`: float bits split into sign, exponent and mantissa bytes, each zlib-compressed.
    Float,
    /// `LSOP12`: Gridfour's least-squares optimal predictor over 12 neighbours.
    Lsop12,
    /// `GvrsCanonicalHuffman` (Gridfour 2026): residuals as i32 symbols, canonical Huffman code.
    CanonicalHuffman,
}

impl Codec {
    /// The codec for a name in the header's codec list, `None` when rasterpack does not implement it.
    pub fn from_name(name: &str) -> Option<Codec> {
        match name {
            "GvrsHuffman" => Some(Codec::Huffman),
            "GvrsDeflate" => Some(Codec::Deflate),
            "GvrsFloat" => Some(Codec::Float),
            "LSOP12" => Some(Codec::Lsop12),
            "GvrsCanonicalHuffman" => Some(Codec::CanonicalHuffman),
            _ => None,
        }
    }

    /// The name the header's codec list spells it with (`GvrsHuffman`).
    pub fn name(self) -> &'static str {
        match self {
            Codec::Huffman => "GvrsHuffman",
            Codec::Deflate => "GvrsDeflate",
            Codec::Float => "GvrsFloat",
            Codec::Lsop12 => "LSOP12",
            Codec::CanonicalHuffman => "GvrsCanonicalHuffman",
        }
    }

    /// Whether the codec codes integer elements (Integer, Short, integer-coded float).
    pub fn is_integer(self) -> bool {
        self != Codec::Float
    }
}

/// Length of the Deflate/Huffman block header: codec index, predictor, seed, nM32.
pub const PREDICTOR_HEADER_LEN: usize = 10;

/// M32 never needs more than 6 bytes per residual (Gridfour's own bound).
const MAX_M32_PER_CELL: usize = 6;

fn bad(code: &'static str, offset: usize, message: impl Into<String>) -> Error {
    Error::invalid(code, offset as u64, message)
}

/// A header value rasterpack does not know (a later Gridfour revision, or damage it cannot tell
/// from one): "unsupported", never a guess.
fn unknown(code: &'static str, offset: usize, message: impl Into<String>) -> Error {
    Error::unsupported(code, Some(offset as u64), message)
}

fn predictor_of(code: u8, codec: Codec) -> Result<Predictor> {
    Predictor::from_code(code).ok_or_else(|| {
        unknown(
            "gvrs.codec.unknown_predictor",
            1,
            format!(
                "{} block names predictor code {code}, which rasterpack does not know (1..=4 are defined)",
                codec.name()
            ),
        )
    })
}

fn check_shape(rows: usize, cols: usize, len: usize) -> Result<usize> {
    let cells = rows
        .checked_mul(cols)
        .ok_or_else(|| Error::usage("tile cell count overflows"))?;
    if cells == 0 || cells != len {
        return Err(Error::usage(format!("output holds {len} cells, tile is {rows}x{cols}")));
    }
    Ok(cells)
}

/// Parse a Deflate/Huffman block header: (predictor, seed, nM32).
fn predictor_header(codec: Codec, block: &[u8], cells: usize) -> Result<(Predictor, i32, usize)> {
    if block.len() < PREDICTOR_HEADER_LEN {
        return Err(bad(
            "gvrs.codec.truncated",
            0,
            format!(
                "compressed block of {} bytes is shorter than its 10-byte header",
                block.len()
            ),
        ));
    }
    let p = predictor_of(block[1], codec)?;
    let seed = i32::from_le_bytes([block[2], block[3], block[4], block[5]]);
    let n = i32::from_le_bytes([block[6], block[7], block[8], block[9]]);
    let max = cells.saturating_mul(MAX_M32_PER_CELL);
    let n = usize::try_from(n).ok().filter(|&n| n <= max).ok_or_else(|| {
        bad(
            "gvrs.codec.bad_m32_length",
            6,
            format!("M32 stream length {n} out of range 0..={max} for {cells} cells"),
        )
    })?;
    Ok((p, seed, n))
}

/// The M32 residual stream of a Deflate or Huffman block.
fn residual_stream(codec: Codec, block: &[u8], n: usize) -> Result<Vec<u8>> {
    let mut codes = vec![0u8; n];
    let payload = &block[PREDICTOR_HEADER_LEN..];
    match codec {
        Codec::Deflate => match zlib::inflate_exact(payload, &mut codes) {
            Ok(used) if used == payload.len() => {}
            Ok(used) => {
                return Err(bad(
                    "gvrs.codec.trailing_data",
                    PREDICTOR_HEADER_LEN + used,
                    format!("{} byte(s) after the zlib stream", payload.len() - used),
                ))
            }
            Err(e) => return Err(bad(e.code(), PREDICTOR_HEADER_LEN, e.message(n))),
        },
        _ => {
            let mut r = huffman::BitReader::new(payload);
            huffman::decode_sequence(&mut r, &mut codes)
                .map_err(|e| bad(e.code(), PREDICTOR_HEADER_LEN, format!("Huffman data: {e:?}")))?;
            let used = r.pos().div_ceil(8);
            if used != payload.len() {
                return Err(bad(
                    "gvrs.codec.trailing_data",
                    PREDICTOR_HEADER_LEN + used,
                    format!("{} byte(s) after the Huffman data", payload.len() - used),
                ));
            }
        }
    }
    Ok(codes)
}

/// Decode a compressed integer block (`block` = the whole stored block, byte 0 being the codec
/// index the caller already resolved to `codec`) into `out` (`rows * cols` cells, row-major).
/// Error offsets are relative to the block start.
pub fn decode_int(codec: Codec, block: &[u8], rows: usize, cols: usize, out: &mut [i32]) -> Result<()> {
    let cells = check_shape(rows, cols, out.len())?;
    match codec {
        Codec::Huffman | Codec::Deflate => {
            let (p, seed, n) = predictor_header(codec, block, cells)?;
            let codes = residual_stream(codec, block, n)?;
            predictor::decode(p, seed, rows, cols, &codes, out).map_err(|e| match e {
                predictor::PredictError::M32(m) => bad(
                    m.code(),
                    PREDICTOR_HEADER_LEN,
                    format!(
                        "{} residual stream: {m:?} ({} predictor, {n} bytes)",
                        codec.name(),
                        p.name()
                    ),
                ),
                predictor::PredictError::Shape => bad(
                    "gvrs.codec.bad_shape",
                    1,
                    format!("{} predictor cannot code a {rows}x{cols} tile", p.name()),
                ),
            })
        }
        Codec::Lsop12 => lsop::decode(block, rows, cols, out).map_err(|e| {
            if e.unsupported {
                unknown(e.code, e.offset, e.message)
            } else {
                bad(e.code, e.offset, e.message)
            }
        }),
        Codec::CanonicalHuffman => decode_canonical(block, rows, cols, out),
        Codec::Float => Err(bad(
            "gvrs.codec.float_for_integer",
            0,
            "GvrsFloat block in an integer element",
        )),
    }
}

/// Length of a GvrsCanonicalHuffman block header: codec index, predictor, seed.
pub const CANONICAL_HEADER_LEN: usize = 6;

thread_local! {
    /// Residual buffer reused by [`decode_canonical`] (every value is written or the decode fails).
    static CANON_RESIDUALS: std::cell::RefCell<Vec<i32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Map a canonical-text error found at bit stream offset `at` to an `Error`.
pub fn canonical_error(e: canonical::CanonError, at: usize, what: &str) -> Error {
    let msg = format!("{what}: {}", e.message());
    if e.is_unsupported() {
        unknown(e.code(), at, msg)
    } else {
        bad(e.code(), at, msg)
    }
}

/// GvrsCanonicalHuffman block: `[index][predictor][i32 seed]`, then one canonical text of the
/// predictor's residuals; predictor 0 with nothing after the seed = every cell is the seed.
fn decode_canonical(block: &[u8], rows: usize, cols: usize, out: &mut [i32]) -> Result<()> {
    let h = CANONICAL_HEADER_LEN;
    if block.len() < h {
        return Err(bad(
            "gvrs.codec.truncated",
            0,
            format!(
                "GvrsCanonicalHuffman block of {} bytes is shorter than its 6-byte header",
                block.len()
            ),
        ));
    }
    let seed = i32::from_le_bytes([block[2], block[3], block[4], block[5]]);
    if block[1] == 0 {
        // Gridfour's uniform tile: exactly the header.
        if block.len() != h {
            return Err(bad(
                "gvrs.codec.trailing_data",
                h,
                format!(
                    "GvrsCanonicalHuffman uniform-value block (predictor 0) holds {} byte(s) after its seed",
                    block.len() - h
                ),
            ));
        }
        out.fill(seed);
        return Ok(());
    }
    let p = predictor_of(block[1], Codec::CanonicalHuffman)?;
    let n = predictor::residual_count(p, rows, cols);
    let payload = &block[h..];
    CANON_RESIDUALS.with(|cell| {
        let mut res = cell.borrow_mut();
        res.resize(n, 0);
        let mut bits = canonical::Bits::new(payload, 0);
        canonical::decode_text(&mut bits, &mut res)
            .map_err(|e| canonical_error(e, h, "GvrsCanonicalHuffman residuals"))?;
        let used = bits.consumed().div_ceil(8);
        if used != payload.len() {
            return Err(bad(
                "gvrs.codec.trailing_data",
                h + used,
                format!("{} byte(s) after the canonical Huffman data", payload.len() - used),
            ));
        }
        predictor::decode_ints(p, seed, rows, cols, &res, out).map_err(|e| match e {
            // Counts were checked by the text decoder: only the shape can be refused here.
            predictor::PredictError::M32(m) => bad(m.code(), h, format!("{} predictor residuals: {m:?}", p.name())),
            predictor::PredictError::Shape => bad(
                "gvrs.codec.bad_shape",
                1,
                format!("{} predictor cannot code a {rows}x{cols} tile", p.name()),
            ),
        })
    })
}

/// Decode a compressed float block into `out` (`rows * cols` cells).
pub fn decode_float(codec: Codec, block: &[u8], rows: usize, cols: usize, out: &mut [f32]) -> Result<()> {
    check_shape(rows, cols, out.len())?;
    match codec {
        Codec::Float => float::decode(block, cols, out).map_err(|e| bad(e.code, e.offset, e.message)),
        _ => Err(bad(
            "gvrs.codec.integer_for_float",
            0,
            format!(
                "{} block in a float element (Gridfour only codes floats with GvrsFloat)",
                codec.name()
            ),
        )),
    }
}

/// Encoder settings for [`encode_int_with`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EncodeOptions {
    /// zlib level for GvrsDeflate (Gridfour uses 6).
    pub deflate_level: u8,
    /// zlib level for GvrsFloat sections (Gridfour uses 9; 6 is nearly as small and faster).
    pub float_level: u8,
    /// `None`: deflate the residuals of every predictor and keep the smallest (Gridfour's
    /// exhaustive search). `Some(m)`: deflate only the predictors whose exact Huffman size is
    /// within a fraction `m` of the smallest one (Huffman and Deflate sizes rank predictors
    /// alike; this skips most deflate calls, which dominate writing time).
    pub deflate_margin: Option<f32>,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions {
            deflate_level: 6,
            float_level: 6,
            deflate_margin: None,
        }
    }
}

impl EncodeOptions {
    /// The writer's default: exhaustive Huffman, Deflate for predictors within 3 % of the best
    /// Huffman size.
    pub fn fast() -> Self {
        EncodeOptions {
            deflate_margin: Some(0.03),
            ..EncodeOptions::default()
        }
    }
}

fn predictor_block(index: u8, p: Predictor, seed: i32, n: usize, cap: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity(cap);
    b.push(index);
    b.push(p as u8);
    b.extend_from_slice(&seed.to_le_bytes());
    b.extend_from_slice(&(n as i32).to_le_bytes());
    b
}

/// Try each `(codec index in the file's list, codec)` and return the smallest block (byte 0 =
/// that index), or `None` when no block is strictly smaller than the uncompressed `cells * 4`.
pub fn encode_int(values: &[i32], rows: usize, cols: usize, codecs: &[(u8, Codec)]) -> Option<Vec<u8>> {
    encode_int_with(values, rows, cols, codecs, &EncodeOptions::default())
}

struct Trial {
    p: Predictor,
    seed: i32,
    /// M32 residuals (when GvrsHuffman or GvrsDeflate is listed).
    codes: Vec<u8>,
    huffman: Option<(huffman::Code, u64)>,
}

/// As [`encode_int`] with explicit settings. Every applicable predictor is tried with every
/// integer codec (GvrsHuffman, GvrsDeflate, GvrsCanonicalHuffman), as Gridfour does:
/// DifferencingWithNulls when the tile holds `i32::MIN`, otherwise Differencing, Linear and
/// Triangle; with GvrsCanonicalHuffman a uniform tile is its 6-byte header alone. When LSOP12 is
/// listed, an LSOP12 block competes too (residuals coded as canonical Huffman when that codec
/// is listed as well, which makes the file one for Gridfour 2026 anyway; otherwise the legacy
/// header every Gridfour reads).
pub fn encode_int_with(
    values: &[i32],
    rows: usize,
    cols: usize,
    codecs: &[(u8, Codec)],
    opts: &EncodeOptions,
) -> Option<Vec<u8>> {
    let cells = rows.checked_mul(cols)?;
    if cells == 0 || values.len() != cells {
        return None;
    }
    let limit = cells.checked_mul(4)?;
    let find = |c: Codec| codecs.iter().find(|x| x.1 == c).map(|x| x.0);
    let huff = find(Codec::Huffman);
    let defl = find(Codec::Deflate);
    let lsop = find(Codec::Lsop12);
    let canon = find(Codec::CanonicalHuffman);
    if huff.is_none() && defl.is_none() && lsop.is_none() && canon.is_none() {
        return None;
    }
    if let Some(index) = canon {
        if values.iter().all(|&v| v == values[0]) {
            let mut b = vec![index, 0];
            b.extend_from_slice(&values[0].to_le_bytes());
            return (b.len() < limit).then_some(b);
        }
    }
    // LSOP12 (tiles of at least 6 x 6 without nulls) competes with the others.
    let lsop_block = lsop
        .and_then(|index| lsop::encode(index, values, rows, cols, opts.deflate_level, canon.is_some()))
        .filter(|b| b.len() < limit);
    let limit = lsop_block.as_ref().map_or(limit, |b| b.len());
    let has_null = values.contains(&i32::MIN);
    let preds: &[Predictor] = if has_null {
        &[Predictor::DifferencingWithNulls]
    } else {
        &[Predictor::Differencing, Predictor::Linear, Predictor::Triangle]
    };
    let m32_codecs = huff.is_some() || defl.is_some();
    let mut trials: Vec<Trial> = Vec::with_capacity(preds.len());
    // The smallest canonical Huffman block: (size, predictor, seed, residuals, plan).
    let mut best_canon: Option<(usize, Predictor, i32, Vec<i32>, canonical::TextPlan)> = None;
    for &p in preds {
        if canon.is_some() {
            let mut res = Vec::with_capacity(cells);
            if let Some(seed) = predictor::encode(p, rows, cols, values, &mut res) {
                let plan = canonical::plan(&res);
                let size = CANONICAL_HEADER_LEN + plan.bits.div_ceil(8) as usize;
                if best_canon.as_ref().is_none_or(|b| size < b.0) {
                    best_canon = Some((size, p, seed, res, plan));
                }
            }
        }
        if !m32_codecs {
            continue;
        }
        let mut codes = Vec::with_capacity(cells + cells / 4);
        let Some(seed) = predictor::encode(p, rows, cols, values, &mut codes) else {
            continue;
        };
        // The exact Huffman size ranks predictors for both codecs.
        let hist = huffman::histogram(&codes);
        let huffman = huffman::Code::build(&hist).filter(|c| c.usable()).map(|c| {
            let size = PREDICTOR_HEADER_LEN as u64 + c.bit_size(&hist).div_ceil(8);
            (c, size)
        });
        trials.push(Trial {
            p,
            seed,
            codes,
            huffman,
        });
    }
    // A canonical block lowers the bar the others must pass.
    let limit = match &best_canon {
        Some(b) if b.0 < limit => b.0,
        _ => limit,
    };
    let best_h = trials.iter().filter_map(|t| t.huffman.as_ref().map(|h| h.1)).min();
    // (size, which trial, is_huffman)
    let mut best: Option<(usize, usize, bool)> = None;
    let mut best_deflated: Option<Vec<u8>> = None;
    if huff.is_some() {
        for (i, t) in trials.iter().enumerate() {
            if let Some((_, size)) = &t.huffman {
                if (*size as usize) < best.map_or(limit, |b| b.0) {
                    best = Some((*size as usize, i, true));
                }
            }
        }
    }
    if let Some(index) = defl {
        for (i, t) in trials.iter().enumerate() {
            if let (Some(m), Some(bh), Some((_, h))) = (opts.deflate_margin, best_h, &t.huffman) {
                // Far behind the best Huffman size, or behind an LSOP12 / canonical block by
                // more than the margin: Deflate will not win.
                let h = *h as f64;
                if h > bh as f64 * (1.0 + f64::from(m))
                    || ((lsop_block.is_some() || best_canon.is_some()) && h > limit as f64 * (1.0 + f64::from(m)))
                {
                    continue;
                }
            }
            let mut b = predictor_block(index, t.p, t.seed, t.codes.len(), t.codes.len() / 2 + 32);
            zlib::deflate_into(&t.codes, opts.deflate_level, &mut b);
            if b.len() < best.map_or(limit, |x| x.0) {
                best = Some((b.len(), i, false));
                best_deflated = Some(b);
            }
        }
    }
    let Some((size, i, is_huffman)) = best else {
        // Neither GvrsHuffman nor GvrsDeflate beat the bar: canonical Huffman if it set it,
        // else LSOP12 (or nothing).
        if let (Some(index), Some((size, p, seed, res, plan))) = (canon, best_canon) {
            if size < lsop_block.as_ref().map_or(cells * 4, |b| b.len()) {
                let mut w = huffman::BitWriter::new(Vec::with_capacity(size + 8));
                w.put(u64::from(index), 8);
                w.put(p as u64, 8);
                w.put(u64::from(seed as u32), 32);
                canonical::write_text(&plan, &res, &mut w);
                return Some(w.finish());
            }
        }
        return lsop_block;
    };
    if !is_huffman {
        return best_deflated;
    }
    let t = &trials[i];
    let (code, _) = t.huffman.as_ref()?;
    let index = huff?;
    let mut w = huffman::BitWriter::new(predictor_block(index, t.p, t.seed, t.codes.len(), size + 8));
    code.write(&t.codes, &mut w);
    Some(w.finish())
}

/// As [`encode_int`] for float elements: GvrsFloat is the only Gridfour codec for floats.
pub fn encode_float(values: &[f32], rows: usize, cols: usize, codecs: &[(u8, Codec)]) -> Option<Vec<u8>> {
    encode_float_with(values, rows, cols, codecs, &EncodeOptions::default())
}

/// As [`encode_float`] with explicit settings.
pub fn encode_float_with(
    values: &[f32],
    rows: usize,
    cols: usize,
    codecs: &[(u8, Codec)],
    opts: &EncodeOptions,
) -> Option<Vec<u8>> {
    let cells = rows.checked_mul(cols)?;
    if cells == 0 || values.len() != cells {
        return None;
    }
    let index = codecs.iter().find(|c| c.1 == Codec::Float)?.0;
    let b = float::encode(index, cols, values, opts.float_level);
    (b.len() < cells.checked_mul(4)?).then_some(b)
}
