//! The wavelet band plan and the coefficient stream: which sub-bands a brick is split into, how
//! the zero-tree of coefficients is walked bit plane by bit plane, and how the coefficients are
//! rebuilt from their significance, refinement and sign bits (docs/formats/vds-wavelet.md).

use rasterpack_common::{slice_at, Error, Result};

/// Bands shrink while any axis is at least this long.
const BAND_MIN: usize = 8;
/// At most 10 halvings (sizes are capped at 512, which needs 7).
pub const MAX_ITERATIONS: usize = 10;
/// Adaptive levels recorded in the stream header and in the chunk metadata.
pub const LEVELS: usize = 16;
/// The reference decoder keeps 256 bit planes at most.
const MAX_PLANES: i32 = 256;

const X_SHIFT: u32 = 0;
const Y_SHIFT: u32 = 9;
const Z_SHIFT: u32 = 18;
const ITER_SHIFT: u32 = 27;
const COORD_MASK: u32 = (1 << 9) - 1;

fn pack(x: i32, y: i32, z: i32) -> u32 {
    (x as u32) | ((y as u32) << Y_SHIFT) | ((z as u32) << Z_SHIFT)
}
fn unpack(p: u32) -> [i32; 3] {
    [
        ((p >> X_SHIFT) & COORD_MASK) as i32,
        ((p >> Y_SHIFT) & COORD_MASK) as i32,
        ((p >> Z_SHIFT) & COORD_MASK) as i32,
    ]
}

/// Sizes of the successive bands and which axes each transform step splits.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Dimensions transformed (1 to 3).
    pub dims: usize,
    /// Transform sizes (1 on axes past `dims`).
    pub size: [usize; 3],
    /// Allocated sizes: 1 stays 1, others round up to a multiple of 8 (the picture's pitch).
    pub alloc: [usize; 3],
    /// Transform steps.
    pub iterations: usize,
    /// Band size after each step.
    pub band: [[usize; 3]; MAX_ITERATIONS + 1],
    /// Which axes each step splits (bit per axis).
    pub mask: [u8; MAX_ITERATIONS],
}

impl Plan {
    /// `size` must be 1..=512 on each axis (checked by the caller).
    pub fn new(dims: usize, size: [usize; 3]) -> Plan {
        let alloc = size.map(|s| if s == 1 { 1 } else { (s + 7) & !7 });
        let mut band = [[0usize; 3]; MAX_ITERATIONS + 1];
        let mut mask = [0u8; MAX_ITERATIONS];
        let mut cur = size;
        let mut i = 0;
        while i < MAX_ITERATIONS && cur.iter().any(|&s| s >= BAND_MIN) {
            band[i] = cur;
            let mut m = 0u8;
            for a in 0..3 {
                if cur[a] >= BAND_MIN {
                    m |= 1 << a;
                    cur[a] = cur[a].div_ceil(2);
                }
            }
            mask[i] = m;
            i += 1;
        }
        band[i] = cur;
        if i == 0 {
            band[1] = cur;
        }
        Plan {
            dims,
            size,
            alloc,
            iterations: i,
            band,
            mask,
        }
    }

    /// Elements of the allocated picture.
    pub fn picture_len(&self) -> usize {
        self.alloc[0] * self.alloc[1] * self.alloc[2]
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct ChildBand {
    pos: [i32; 3],
    extra: [i32; 3],
    legal: [i32; 3],
    sector: usize,
}

#[derive(Debug, Clone, Default)]
struct SectorInfo {
    pos: [i32; 3],
    children: Vec<ChildBand>,
}

#[derive(Debug, Clone, Default)]
struct StepInfo {
    child_count: [i32; 3],
    child: i32,
    normal: bool,
    sectors: [SectorInfo; 8],
}

/// How the sub-bands of each transform step map onto the children of the next finer step.
fn step_infos(plan: &Plan) -> Vec<StepInfo> {
    let t = plan.iterations;
    let band = |i: usize| plan.band[i].map(|v| v as i32);
    let mut out = vec![StepInfo::default(); t];
    for i in 1..t {
        let cur = plan.mask[i] as usize;
        let next = plan.mask[i - 1] as usize;
        let other = cur ^ next;
        let info = &mut out[i];
        info.child_count = [1, 1, 1];
        for a in 0..3 {
            if cur & (1 << a) != 0 {
                info.child_count[a] = 2;
            }
        }
        info.child = info.child_count.iter().product();
        let mut add_extras = true;
        let mut normal = true;
        for sector in 1..8usize {
            let mut children = Vec::new();
            let mut pos = [0i32; 3];
            if sector & cur == sector {
                let mut child_pos = [0i32; 3];
                for a in 0..3 {
                    if sector & (1 << a) != 0 {
                        pos[a] = band(i + 1)[a];
                        child_pos[a] = band(i)[a];
                    }
                }
                children.push(ChildBand {
                    pos: child_pos,
                    sector,
                    ..Default::default()
                });
                if other != 0 {
                    normal = false;
                    for o in 1..8usize {
                        if other & o == o {
                            let mut p = child_pos;
                            for a in 0..3 {
                                if o & (1 << a) != 0 {
                                    p[a] = band(i)[a];
                                }
                            }
                            children.push(ChildBand {
                                pos: p,
                                sector: sector + o,
                                ..Default::default()
                            });
                        }
                    }
                    if add_extras {
                        add_extras = false;
                        for o in 1..8usize {
                            if other & o == o {
                                let mut p = pos;
                                for a in 0..3 {
                                    if o & (1 << a) != 0 {
                                        p[a] = band(i)[a];
                                    }
                                    if sector & (1 << a) != 0 {
                                        p[a] = 0;
                                    }
                                }
                                children.push(ChildBand {
                                    pos: p,
                                    sector: o,
                                    ..Default::default()
                                });
                            }
                        }
                    }
                }
            }
            let mut start_write = [0i32; 3];
            let mut end_write = band(i);
            for a in 0..3 {
                if sector & (1 << a) != 0 {
                    start_write[a] = band(i + 1)[a];
                } else {
                    end_write[a] = band(i + 1)[a];
                }
            }
            let mut delta = [0i32; 3];
            for a in 0..3 {
                delta[a] = end_write[a] - start_write[a];
                if cur & (1 << a) != 0 {
                    delta[a] *= 2;
                }
            }
            let child_mul = info.child_count;
            for c in children.iter_mut() {
                let mut end_read = band(i);
                for a in 0..3 {
                    if c.sector & (1 << a) != 0 {
                        end_read[a] = band(i - 1)[a];
                    }
                }
                c.legal = end_read;
                for a in 0..3 {
                    if start_write[a] * child_mul[a] != c.pos[a] || c.pos[a] + delta[a] > end_read[a] {
                        normal = false;
                    }
                }
                c.extra = [-1, -1, -1];
                for a in 0..3 {
                    if end_read[a] - c.pos[a] > delta[a] {
                        normal = false;
                        c.extra[a] = end_write[a] - 1;
                    }
                }
            }
            info.sectors[sector] = SectorInfo { pos, children };
        }
        info.normal = normal;
    }
    out
}

/// A sub-band of the zero-tree walk: either "normal" (children are the doubled coordinates)
/// with the id of its child sub-band, or split into explicit child bands.
#[derive(Debug, Clone)]
enum Compiled {
    Normal {
        child: u16,
    },
    Split {
        count: [i32; 3],
        pos: [i32; 3],
        subs: Vec<CompiledChild>,
    },
}

#[derive(Debug, Clone, Copy)]
struct CompiledChild {
    pos: [i32; 3],
    extra: [i32; 3],
    legal: [i32; 3],
    child: u16,
}

/// Everything the walk needs that depends only on the brick's shape and stream version.
pub struct Walk {
    compiled: Vec<Compiled>, // index 0 unused: id 0 means "normal all the way down"
    first: [u16; 8],
    /// Whether every node is normal (no tree to walk).
    pub all_normal: bool,
    children: [usize; MAX_ITERATIONS],
    masks: [u8; MAX_ITERATIONS],
    and_mask: u32,
    screen: [i64; 8],
    screen_normal: Vec<i64>,
    child_normal: Vec<u32>,
    /// Coarsest band's coefficients (x, y, z), in stream order.
    pixels: Vec<[i32; 3]>,
    /// The coarsest detail bands: (x, y, z, sector).
    roots: Vec<([i32; 3], usize)>,
    root_iteration: i32,
    /// Whether the stream predates the traversal fix (versions before 1.6).
    pub stream_bug: bool,
    sx: i64,
    sxy: i64,
    dims: usize,
}

impl Walk {
    /// The walk for `plan`, with or without the traversal fix.
    pub fn new(plan: &Plan, stream_fix: bool) -> Walk {
        let t = plan.iterations;
        let steps = step_infos(plan);
        let mut compiled = vec![Compiled::Normal { child: 0 }];
        let mut ids = [[0u16; 8]; MAX_ITERATIONS];
        let mut all_normal = true;
        for i in 1..t {
            for sector in 1..8usize {
                if sector & plan.mask[i] as usize != sector {
                    continue;
                }
                let st = &steps[i];
                let sec = &st.sectors[sector];
                let mut normal = st.normal;
                if !st.normal {
                    all_normal = false;
                }
                if !normal && sec.children.len() == 1 && sec.children[0].extra == [-1, -1, -1] {
                    let l = sec.children[0].legal;
                    let even = |a: usize| l[a] & 1 == 0;
                    normal = if stream_fix {
                        (0..3).all(|a| even(a) || st.child_count[a] == 1)
                    } else {
                        even(0) && even(1) && (even(2) || st.child == 4)
                    };
                }
                let id = if normal {
                    if i <= 1 || ids[i - 1][sector] == 0 {
                        0
                    } else {
                        compiled.push(Compiled::Normal {
                            child: ids[i - 1][sector],
                        });
                        (compiled.len() - 1) as u16
                    }
                } else {
                    let subs = sec
                        .children
                        .iter()
                        .map(|c| CompiledChild {
                            pos: c.pos,
                            extra: c.extra,
                            legal: c.legal,
                            child: if i > 1 { ids[i - 1][c.sector] } else { 0 },
                        })
                        .collect();
                    compiled.push(Compiled::Split {
                        count: st.child_count,
                        pos: sec.pos,
                        subs,
                    });
                    (compiled.len() - 1) as u16
                };
                ids[i][sector] = id;
            }
        }
        // Streams before version 1.6 were written with a traversal that can overwrite values
        // for one band shape; the reader then guards (or allows) overwrites.
        let mut stream_bug = false;
        for i in 1..t {
            for sector in 1..8usize {
                if sector & plan.mask[i] as usize != sector {
                    continue;
                }
                let st = &steps[i];
                let sec = &st.sectors[sector];
                if st.normal || sec.children.len() != 1 || sec.children[0].extra != [-1, -1, -1] {
                    continue;
                }
                let l = sec.children[0].legal;
                let even = |a: usize| l[a] & 1 == 0;
                // A 4-child step that splits Z, whose legal Z edge is odd while X and Y are even.
                if even(0) && even(1) && st.child == 4 && !even(2) && st.child_count[2] > 1 {
                    stream_bug = true;
                }
            }
        }
        let mut children = [1usize; MAX_ITERATIONS];
        for i in 0..t {
            children[i] = 1 << plan.mask[i].count_ones();
        }
        let second = if t > 1 { plan.mask[1] } else { 0 };
        let mut and_mask = 0u32;
        for a in 0..3 {
            if second & (1 << a) != 0 {
                and_mask |= COORD_MASK << (9 * a as u32);
            }
        }
        let sx = plan.alloc[0] as i64;
        let sxy = (plan.alloc[0] * plan.alloc[1]) as i64;
        let mut screen = [0i64; 8];
        let mut screen_normal = Vec::new();
        let mut child_normal = Vec::new();
        for count in 0..8usize {
            let (ix, iy, iz) = ((count & 1) as i64, ((count >> 1) & 1) as i64, ((count >> 2) & 1) as i64);
            screen[count] = ix + iy * sx + iz * sxy;
            if count & second as usize == count {
                screen_normal.push(screen[count]);
                child_normal.push(((ix as u32) << X_SHIFT) | ((iy as u32) << Y_SHIFT) | ((iz as u32) << Z_SHIFT));
            }
        }
        // The coarsest detail bands are the roots of the tree; with a single step, the whole
        // brick is stored as start values.
        let mut roots = Vec::new();
        if t >= 2 {
            let i = t - 1;
            for sector in 1..8usize {
                if sector & plan.mask[i] as usize != sector {
                    continue;
                }
                let mut lo = [0usize; 3];
                let mut hi = plan.band[i + 1];
                for a in 0..3 {
                    if sector & (1 << a) != 0 {
                        lo[a] = plan.band[i + 1][a];
                        hi[a] = plan.band[i][a];
                    }
                }
                for z in lo[2]..hi[2] {
                    for y in lo[1]..hi[1] {
                        for x in lo[0]..hi[0] {
                            roots.push(([x as i32, y as i32, z as i32], sector));
                        }
                    }
                }
            }
        }
        let base = if t == 1 { plan.band[0] } else { plan.band[t] };
        let mut pixels = Vec::with_capacity(base.iter().product());
        for z in 0..base[2] {
            for y in 0..base[1] {
                for x in 0..base[0] {
                    pixels.push([x as i32, y as i32, z as i32]);
                }
            }
        }
        let mut first = [0u16; 8];
        if t >= 2 {
            first[1..8].copy_from_slice(&ids[t - 1][1..8]);
        }
        Walk {
            compiled,
            first,
            all_normal,
            children,
            masks: plan.mask,
            and_mask,
            screen,
            screen_normal,
            child_normal,
            pixels,
            roots,
            root_iteration: t as i32 - 1,
            stream_bug,
            sx,
            sxy,
            dims: plan.dims,
        }
    }

    fn multiple(&self) -> usize {
        if self.all_normal {
            self.children[1]
        } else {
            1 << self.dims
        }
    }
}

/// How decoded values may land on positions already holding a value (streams of the
/// pre-1.6 traversal bug).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overwrite {
    /// Positions are assumed fresh.
    Assume,
    /// A later value replaces an earlier one.
    Allow,
    /// A position keeps its first value.
    Prevent,
}

/// A node of the general walk: packed coordinates, its sub-band id and transform step.
#[derive(Debug, Clone, Copy)]
struct Node {
    xyz: u32,
    sub: u16,
    iter: i32,
}

/// Reusable buffers of the walk.
#[derive(Default)]
pub struct TreeScratch {
    insig: Vec<Node>,
    sig: Vec<Node>,
    insig_n: Vec<u32>,
    sig_n: Vec<u32>,
    pos_multi: Vec<u32>,
    pos_single: Vec<i64>,
    values: Vec<f32>,
}

/// Where each bit plane's value bits start and how many values each plane holds.
#[derive(Debug, Clone)]
pub struct StreamInfo {
    /// Bytes of the coefficient stream the walk used (all planes down to level 0).
    pub used: usize,
    /// For adaptive level k (< 16): the bytes of the stream a decode at that level needs.
    pub level_need: [usize; LEVELS],
}

fn corrupt(msg: impl Into<String>) -> Error {
    Error::invalid_at("vds.wavelet.stream", None, msg.into())
}

/// A count of the stream header (16 multiple-group counts, then 16 single counts).
fn header_count(stream: &[u8], k: usize) -> Result<i32> {
    let b = slice_at(stream, (k * 4) as u64, 4, "coefficient stream header")
        .map_err(|_| corrupt("coefficient stream ends inside its header"))?;
    Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn bits<'a>(stream: &'a [u8], pos: &mut usize, n: usize) -> Result<&'a [u8]> {
    let len = n.div_ceil(8);
    let s = stream.get(*pos..*pos + len).ok_or_else(|| {
        corrupt(format!(
            "coefficient stream ends at byte {} inside a bit plane",
            stream.len()
        ))
    })?;
    *pos += len;
    Ok(s)
}

#[inline]
fn bit(field: &[u8], i: usize) -> bool {
    field[i >> 3] & (1 << (i & 7)) != 0
}

/// How many entries a node or position list may hold: the brick's coefficient count (a valid
/// tree never exceeds it), lowered by the caller's memory limit (`limited`).
#[derive(Debug, Clone, Copy)]
pub struct Cap {
    /// Most entries allowed.
    pub entries: usize,
    /// Whether the cap comes from the caller's limit (not the coefficient count).
    pub limited: bool,
}

fn push_checked<T>(v: &mut Vec<T>, item: T, cap: Cap) -> Result<()> {
    if v.len() >= cap.entries {
        return Err(if cap.limited {
            Error::limit(
                "limit.alloc",
                None,
                "the wavelet zero-tree needs more memory than the allocation limit allows",
            )
        } else {
            corrupt("the zero-tree has more nodes than the brick")
        });
    }
    v.push(item);
    Ok(())
}

/// Number of bit planes below the start threshold: -1 when the stream holds none.
pub fn plane_count(threshold: f32, start: f32) -> Result<i32> {
    let mut n = 0i32;
    let mut t = start;
    while t >= threshold {
        t *= 0.5;
        n += 1;
        if n > MAX_PLANES {
            return Err(corrupt(format!(
                "thresholds {threshold} / {start} give more than {MAX_PLANES} bit planes"
            )));
        }
    }
    Ok(n - 1)
}

/// Decode the coefficient stream into `picture` (allocated size, zeroed here): start values,
/// then the zero-tree walk over `planes + 1` bit planes, then every significant coefficient.
#[allow(clippy::too_many_arguments)]
pub fn decode(
    plan: &Plan,
    walk: &Walk,
    stream: &[u8],
    threshold: f32,
    planes: i32,
    integer: bool,
    overwrite: Overwrite,
    max_list_entries: usize,
    picture: &mut [f32],
    s: &mut TreeScratch,
) -> Result<StreamInfo> {
    let coefficients = plan.picture_len();
    if picture.len() != coefficients {
        return Err(Error::usage("wavelet picture of the wrong size"));
    }
    let cap = Cap {
        entries: coefficients.min(max_list_entries),
        limited: max_list_entries < coefficients,
    };
    let all_normal = walk.all_normal;
    let multiple = walk.multiple();
    let mut pos = LEVELS * 4;
    if !all_normal {
        pos += LEVELS * 4;
    }
    let first_values = pos;
    let n_start = walk.pixels.len() + walk.roots.len();
    pos = n_start
        .checked_mul(4)
        .and_then(|b| b.checked_add(pos))
        .filter(|&e| e <= stream.len())
        .ok_or_else(|| corrupt("coefficient stream ends inside its start values"))?;
    let mut level_need = [pos; LEVELS];

    let mut at_level_m = vec![0usize; (planes.max(0) + 1) as usize];
    let mut enc_m = at_level_m.clone();
    let mut at_level_s = at_level_m.clone();
    let mut enc_s = at_level_m.clone();

    s.insig.clear();
    s.sig.clear();
    s.insig_n.clear();
    s.sig_n.clear();
    s.pos_multi.clear();
    s.pos_single.clear();
    if all_normal {
        for (p, _) in &walk.roots {
            s.insig_n
                .push(pack(p[0], p[1], p[2]) | ((walk.root_iteration as u32) << ITER_SHIFT));
        }
    } else {
        for (p, sector) in &walk.roots {
            s.insig.push(Node {
                xyz: pack(p[0], p[1], p[2]),
                sub: walk.first[*sector],
                iter: walk.root_iteration,
            });
        }
    }

    let mut sign_set_m = 0usize;
    let mut sign_set_s = 0usize;
    let mut b = planes;
    while b >= 0 {
        let mut insig_cur = 0usize;
        let mut sig_cur = 0usize;
        loop {
            let (ni, ns) = if all_normal {
                (s.insig_n.len(), s.sig_n.len())
            } else {
                (s.insig.len(), s.sig.len())
            };
            if insig_cur >= ni && sig_cur >= ns {
                break;
            }
            if insig_cur < ni {
                let field = bits(stream, &mut pos, ni - insig_cur)?;
                if all_normal {
                    insig_pass_normal(field, insig_cur, s, cap)?;
                    insig_cur = s.insig_n.len();
                } else {
                    insig_pass(walk, field, insig_cur, s, cap)?;
                    insig_cur = s.insig.len();
                }
            }
            let ns = if all_normal { s.sig_n.len() } else { s.sig.len() };
            if sig_cur < ns {
                let field = bits(stream, &mut pos, ns - sig_cur)?;
                if all_normal {
                    sig_pass_normal(walk, field, sig_cur, s, cap)?;
                    sig_cur = s.sig_n.len();
                } else {
                    sig_pass(walk, field, sig_cur, s, cap)?;
                    sig_cur = s.sig.len();
                }
            }
        }
        let bu = b as usize;
        let vm = s.pos_multi.len();
        at_level_m[bu] = vm * multiple;
        enc_m[bu] = pos;
        pos += (vm * multiple).div_ceil(8) + ((vm - sign_set_m) * multiple).div_ceil(8);
        let vs = s.pos_single.len();
        if !all_normal {
            at_level_s[bu] = vs;
            enc_s[bu] = pos;
            pos += vs.div_ceil(8) + (vs - sign_set_s).div_ceil(8);
        }
        if pos > stream.len() {
            return Err(corrupt("coefficient stream ends inside the value bits"));
        }
        if bu < LEVELS {
            // The stream header records the value counts of the first 16 planes: they must
            // agree with the walk (the decoder trusts them for the value pass).
            let want_m = header_count(stream, bu)?;
            if want_m as i64 != vm as i64 {
                return Err(corrupt(format!(
                    "bit plane {bu}: the stream header says {want_m} coefficient groups, the zero-tree walk finds {vm}"
                )));
            }
            if !all_normal {
                let want_s = header_count(stream, LEVELS + bu)?;
                if want_s as i64 != vs as i64 {
                    return Err(corrupt(format!(
                        "bit plane {bu}: the stream header says {want_s} single coefficients, the zero-tree walk finds {vs}"
                    )));
                }
            }
            level_need[bu] = pos;
        }
        sign_set_m = vm;
        sign_set_s = vs;
        b -= 1;
    }
    // Levels past the last plane need only what precedes the planes; fill from below.
    let used = pos;

    picture.fill(0.0);
    for (k, p) in walk.pixels.iter().chain(walk.roots.iter().map(|(p, _)| p)).enumerate() {
        let at = first_values + 4 * k;
        let v = f32::from_le_bytes([stream[at], stream[at + 1], stream[at + 2], stream[at + 3]]);
        let idx = p[0] as i64 + p[1] as i64 * walk.sx + p[2] as i64 * walk.sxy;
        picture[idx as usize] = v;
    }

    if planes >= 0 {
        let start_value = if integer { 0.0 } else { threshold * 0.5 };
        // Multiple-coefficient groups first, then single coefficients.
        let n_m = s.pos_multi.len() * multiple;
        if n_m + s.pos_single.len() > coefficients {
            return Err(corrupt("more coefficient values than the brick holds"));
        }
        if n_m > 0 {
            values(
                stream,
                &at_level_m,
                &enc_m,
                planes,
                threshold,
                start_value,
                n_m,
                &mut s.values,
            )?;
            for (p, &item) in s.pos_multi.iter().enumerate() {
                let (base, disp): (i64, &[i64]) = if all_normal {
                    let doubled = item.wrapping_add(item & walk.and_mask);
                    let c = unpack(doubled);
                    (
                        c[0] as i64 + c[1] as i64 * walk.sx + c[2] as i64 * walk.sxy,
                        &walk.screen_normal,
                    )
                } else {
                    let c = unpack(item);
                    (
                        c[0] as i64 + c[1] as i64 * walk.sx + c[2] as i64 * walk.sxy,
                        &walk.screen,
                    )
                };
                for c in 0..multiple {
                    let d = *disp
                        .get(c)
                        .ok_or_else(|| corrupt("coefficient group larger than the band"))?;
                    store(picture, base + d, s.values[p * multiple + c], overwrite)?;
                }
            }
        }
        let n_s = s.pos_single.len();
        if !all_normal && n_s > 0 {
            values(
                stream,
                &at_level_s,
                &enc_s,
                planes,
                threshold,
                start_value,
                n_s,
                &mut s.values,
            )?;
            for (k, &p) in s.pos_single.iter().enumerate() {
                store(picture, p, s.values[k], overwrite)?;
            }
        }
    }
    Ok(StreamInfo { used, level_need })
}

#[inline]
fn store(picture: &mut [f32], at: i64, v: f32, overwrite: Overwrite) -> Result<()> {
    let slot = usize::try_from(at)
        .ok()
        .and_then(|i| picture.get_mut(i))
        .ok_or_else(|| corrupt("a coefficient lands outside the brick"))?;
    if overwrite != Overwrite::Prevent || *slot == 0.0 {
        *slot = v;
    }
    Ok(())
}

/// Rebuild `n` coefficient magnitudes and signs plane by plane, lowest plane first: each value
/// is the start value plus the thresholds of its set refinement bits, added in increasing
/// order, negated by its sign bit at the plane where it became significant.
#[allow(clippy::too_many_arguments)]
fn values(
    stream: &[u8],
    at_level: &[usize],
    enc: &[usize],
    planes: i32,
    threshold: f32,
    start_value: f32,
    n: usize,
    out: &mut Vec<f32>,
) -> Result<()> {
    if at_level[0] != n {
        return Err(corrupt("value count differs from the walk"));
    }
    out.clear();
    out.resize(n, start_value);
    let mut t = threshold;
    for b in 0..=planes as usize {
        let active = at_level[b];
        let next = if (b as i32) < planes { at_level[b + 1] } else { 0 };
        let refine = stream
            .get(enc[b]..enc[b] + active.div_ceil(8))
            .ok_or_else(|| corrupt("value bits outside the stream"))?;
        let signs_at = enc[b] + active.div_ceil(8);
        let signs = stream
            .get(signs_at..signs_at + (active - next).div_ceil(8))
            .ok_or_else(|| corrupt("sign bits outside the stream"))?;
        // Branch-free: unset bits add +0.0, which leaves every value (all >= +0 until their
        // sign is applied, after which they take no more bits) unchanged.
        let tb = t.to_bits();
        let (whole, tail) = out[..active].split_at_mut(active & !7);
        for (chunk, &byte) in whole.chunks_exact_mut(8).zip(refine) {
            for (j, v) in chunk.iter_mut().enumerate() {
                let m = (u32::from(byte >> j) & 1).wrapping_neg();
                *v += f32::from_bits(tb & m);
            }
        }
        if let Some(&byte) = refine.get(active / 8) {
            for (j, v) in tail.iter_mut().enumerate() {
                let m = (u32::from(byte >> j) & 1).wrapping_neg();
                *v += f32::from_bits(tb & m);
            }
        }
        // The sign flips the sign bit, as OpenVDS's multiplication by -1 does.
        for (k, v) in out[next..active].iter_mut().enumerate() {
            let m = u32::from(signs[k >> 3] >> (k & 7)) & 1;
            *v = f32::from_bits(v.to_bits() ^ (m << 31));
        }
        t *= 2.0;
    }
    Ok(())
}

fn insig_pass_normal(field: &[u8], start: usize, s: &mut TreeScratch, cap: Cap) -> Result<()> {
    let mut write = start;
    for k in 0..s.insig_n.len() - start {
        let item = s.insig_n[start + k];
        if bit(field, k) {
            if item >= (2 << ITER_SHIFT) {
                push_checked(&mut s.sig_n, item, cap)?;
            }
            push_checked(&mut s.pos_multi, item, cap)?;
        } else {
            s.insig_n[write] = item;
            write += 1;
        }
    }
    s.insig_n.truncate(write);
    Ok(())
}

fn sig_pass_normal(walk: &Walk, field: &[u8], start: usize, s: &mut TreeScratch, cap: Cap) -> Result<()> {
    let mut write = start;
    for k in 0..s.sig_n.len() - start {
        let item = s.sig_n[start + k];
        if bit(field, k) {
            let next = item.wrapping_add(item & walk.and_mask).wrapping_sub(1 << ITER_SHIFT);
            for &d in &walk.child_normal {
                push_checked(&mut s.insig_n, next.wrapping_add(d), cap)?;
            }
        } else {
            s.sig_n[write] = item;
            write += 1;
        }
    }
    s.sig_n.truncate(write);
    Ok(())
}

fn insig_pass(walk: &Walk, field: &[u8], start: usize, s: &mut TreeScratch, cap: Cap) -> Result<()> {
    let mut write = start;
    for k in 0..s.insig.len() - start {
        let node = s.insig[start + k];
        if bit(field, k) {
            if node.iter > 1 {
                push_checked(&mut s.sig, node, cap)?;
            }
            expand(walk, node, true, s, cap)?;
        } else {
            s.insig[write] = node;
            write += 1;
        }
    }
    s.insig.truncate(write);
    Ok(())
}

fn sig_pass(walk: &Walk, field: &[u8], start: usize, s: &mut TreeScratch, cap: Cap) -> Result<()> {
    let mut write = start;
    for k in 0..s.sig.len() - start {
        let node = s.sig[start + k];
        if bit(field, k) {
            expand(walk, node, false, s, cap)?;
        } else {
            s.sig[write] = node;
            write += 1;
        }
    }
    s.sig.truncate(write);
    Ok(())
}

/// The children of a significant node: in the insignificant-set pass their positions become
/// coefficient values; in the significant-set pass they become new tree nodes.
fn expand(walk: &Walk, node: Node, values_pass: bool, s: &mut TreeScratch, cap: Cap) -> Result<()> {
    let ideal = 1usize << walk.dims;
    let iter = usize::try_from(node.iter)
        .ok()
        .filter(|&i| i < MAX_ITERATIONS)
        .ok_or_else(|| corrupt("tree node below the finest band"))?;
    let entry = if node.sub == 0 {
        None
    } else {
        Some(
            walk.compiled
                .get(node.sub as usize)
                .ok_or_else(|| corrupt("unknown sub-band"))?,
        )
    };
    match entry {
        None | Some(Compiled::Normal { .. }) => {
            let child_sub = match entry {
                Some(Compiled::Normal { child }) => *child,
                _ => 0,
            };
            if ideal == walk.children[iter] {
                let doubled = node.xyz.wrapping_add(node.xyz);
                if values_pass {
                    push_checked(&mut s.pos_multi, doubled, cap)?;
                } else {
                    for c in 0..ideal {
                        let d = *walk
                            .child_normal
                            .get(c)
                            .ok_or_else(|| corrupt("child outside the band"))?;
                        push_checked(
                            &mut s.insig,
                            Node {
                                xyz: doubled.wrapping_add(d),
                                sub: child_sub,
                                iter: node.iter - 1,
                            },
                            cap,
                        )?;
                    }
                }
            } else {
                let mut c = unpack(node.xyz);
                let mask = walk.masks[iter] as usize;
                for a in 0..3 {
                    if mask & (1 << a) != 0 {
                        c[a] <<= 1;
                    }
                }
                let rel = c[0] as i64 + c[1] as i64 * walk.sx + c[2] as i64 * walk.sxy;
                for d in 0..=mask {
                    if d & mask != d {
                        continue;
                    }
                    if values_pass {
                        push_checked(&mut s.pos_single, rel + walk.screen[d], cap)?;
                    } else {
                        let (ix, iy, iz) = ((d & 1) as i32, ((d >> 1) & 1) as i32, ((d >> 2) & 1) as i32);
                        push_checked(
                            &mut s.insig,
                            Node {
                                xyz: pack(c[0] + ix, c[1] + iy, c[2] + iz),
                                sub: child_sub,
                                iter: node.iter - 1,
                            },
                            cap,
                        )?;
                    }
                }
            }
        }
        Some(Compiled::Split { count, pos, subs }) => {
            let n = unpack(node.xyz);
            let rel = [
                (n[0] - pos[0]) * count[0],
                (n[1] - pos[1]) * count[1],
                (n[2] - pos[2]) * count[2],
            ];
            for sb in subs {
                let cp = [sb.pos[0] + rel[0], sb.pos[1] + rel[1], sb.pos[2] + rel[2]];
                let mut actual = *count;
                for a in 0..3 {
                    if n[a] == sb.extra[a] {
                        actual[a] += 1;
                    }
                }
                if values_pass
                    && (actual[0] * actual[1] * actual[2]) as usize == ideal
                    && (0..3).all(|a| cp[a] + actual[a] <= sb.legal[a])
                {
                    push_checked(&mut s.pos_multi, pack(cp[0], cp[1], cp[2]), cap)?;
                    continue;
                }
                for iz in 0..actual[2] {
                    for iy in 0..actual[1] {
                        for ix in 0..actual[0] {
                            let p = [ix + cp[0], iy + cp[1], iz + cp[2]];
                            if p[0] < sb.legal[0] && p[1] < sb.legal[1] && p[2] < sb.legal[2] {
                                if values_pass {
                                    push_checked(
                                        &mut s.pos_single,
                                        p[0] as i64 + p[1] as i64 * walk.sx + p[2] as i64 * walk.sxy,
                                        cap,
                                    )?;
                                } else {
                                    push_checked(
                                        &mut s.insig,
                                        Node {
                                            xyz: pack(p[0], p[1], p[2]),
                                            sub: sb.child,
                                            iter: node.iter - 1,
                                        },
                                        cap,
                                    )?;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(())
}
