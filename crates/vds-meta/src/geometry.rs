//! Brick and chunk geometry of a layer: chunk counts, chunk index <->
//! coordinates, extents with and without margins, LOD reduction, 2-D tiles, PerTrace channels
//! and the full-resolution dimension. Pure arithmetic on checked model values; saturating or
//! checked everywhere so a hostile layout cannot overflow.

use serde::Serialize;

use crate::layout::{VdsChannelMapping, VolumeDataLayout};

/// Split `<channel>Dimensions_<digits>LOD<n>` (the last `Dimensions_`, the last `LOD`).
/// Returns the channel name prefix (empty for the primary channel), the group dims and the LOD.
pub fn parse_layer_name(name: &str) -> Option<(String, Vec<usize>, u32)> {
    let di = name.rfind("Dimensions_")?;
    let rest = &name[di + "Dimensions_".len()..];
    let li = rest.rfind("LOD")?;
    let digits = &rest[..li];
    let lod_s = &rest[li + 3..];
    if digits.is_empty() || digits.len() > 3 || lod_s.is_empty() || lod_s.len() > 2 {
        return None;
    }
    let mut group = Vec::new();
    for c in digits.bytes() {
        if !(b'0'..=b'5').contains(&c) {
            return None;
        }
        let d = (c - b'0') as usize;
        if group.last().is_some_and(|&l| l >= d) {
            return None;
        }
        group.push(d);
    }
    if !lod_s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let lod: u32 = lod_s.parse().ok()?;
    Some((name[..di].to_owned(), group, lod))
}

/// `Dimensions_012`.
pub fn group_name(group: &[usize]) -> String {
    let mut s = String::from("Dimensions_");
    for d in group {
        s.push(char::from(b'0' + *d as u8));
    }
    s
}

/// How one of the 6 dims behaves in a layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum DimKind {
    /// Past the dimensionality: extent 1.
    Unused,
    /// Partitioned into bricks of `brick` voxels (with margins, LOD-reduced unless full-res).
    Bricked,
    /// Outside the chunk group: one chunk per index.
    PerIndex,
    /// PerTrace dim 0 with several values: one chunk of `mappedValues`, LOD-reduced, no margins.
    TraceValues,
    /// PerTrace dim 0 with one value: extent 1, not a chunk dim.
    TraceSingle,
}

/// The geometry of one layer.
#[derive(Debug, Clone, Serialize)]
pub struct LayerGeometry {
    /// Layer name (`Dimensions_012LOD0`, ...).
    pub name: String,
    /// Index of the channel the layer stores.
    pub channel: usize,
    /// Dims of the dimension group (e.g. `[0, 1, 2]` for `Dimensions_012`).
    pub group: Vec<usize>,
    /// Level of detail (0 = full resolution).
    pub lod: u32,
    /// Dims the chunks are partitioned in (the descriptor's X, Y, Z), at most 3.
    pub chunk_dims: Vec<usize>,
    /// How each of the 6 dims is cut into chunks.
    pub kinds: [DimKind; 6],
    /// LOD0 extent of each dim (dim 0 = mappedValues for PerTrace channels).
    pub extent: [u64; 6],
    /// Brick stride in LOD0 voxels (Bricked), `mappedValues` (TraceValues), else 1.
    pub brick: [u64; 6],
    /// Whether the dim is LOD-reduced in this layer.
    pub scaled: [bool; 6],
    /// Chunks along each dim.
    pub chunks: [u64; 6],
    /// Chunks in the layer (product of `chunks`).
    pub chunk_count: u64,
    /// Voxel shape of the layer at its LOD.
    pub shape: [u64; 6],
    /// Margin before each brick, in voxels.
    pub neg_margin: u64,
    /// Margin after each brick, in voxels.
    pub pos_margin: u64,
}

/// Extents of one chunk: LOD0 coordinates with and without margins, plus what is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkExtent {
    /// First LOD0 voxel of the chunk with its margins.
    pub min: [u64; 6],
    /// End (exclusive) of the chunk with its margins, in LOD0 voxels.
    pub max: [u64; 6],
    /// First LOD0 voxel the chunk owns (without margins).
    pub min_excl: [u64; 6],
    /// End (exclusive) of what the chunk owns, in LOD0 voxels.
    pub max_excl: [u64; 6],
    /// Stored voxels, in the layer's (LOD) voxel space.
    pub stored_origin: [u64; 6],
    /// Stored voxels per dim, in the layer's voxel space.
    pub stored_size: [u64; 6],
    /// The part this chunk owns (no margins), in the layer's voxel space.
    pub owned_min: [u64; 6],
    /// End (exclusive) of the owned part, in the layer's voxel space.
    pub owned_max: [u64; 6],
}

fn ceil_shift(v: u64, n: u32) -> u64 {
    if n >= 64 {
        return u64::from(v != 0);
    }
    let m = (1u64 << n) - 1;
    (v >> n) + u64::from(v & m != 0)
}

impl LayerGeometry {
    /// The geometry of `channel`'s layer for `group` at `lod`. `None` when the combination is
    /// impossible (group dims past the dimensionality).
    pub fn new(layout: &VolumeDataLayout, channel: usize, group: &[usize], lod: u32) -> Option<LayerGeometry> {
        let n = layout.dimensionality();
        let ch = layout.channels.get(channel)?;
        if group.is_empty() || group.iter().any(|&d| d >= n) || lod > 12 {
            return None;
        }
        let lo = &layout.layout;
        let neg = lo.negative_margin as u64;
        let pos = lo.positive_margin as u64;
        let base = (lo.brick_size as u64).checked_sub(neg + pos).filter(|&b| b > 0)?;
        let stride = if group.len() == 2 {
            base.checked_mul(lo.brick_size_2d_multiplier as u64)?
        } else {
            base
        };
        let full_res = if lo.force_full_resolution_dimension || lo.full_resolution_dimension >= 0 {
            usize::try_from(lo.full_resolution_dimension).ok()
        } else {
            None
        };
        let sizes = layout.sizes6();
        let mut g = LayerGeometry {
            name: String::new(),
            channel,
            group: group.to_vec(),
            lod,
            chunk_dims: Vec::new(),
            kinds: [DimKind::Unused; 6],
            extent: [1; 6],
            brick: [1; 6],
            scaled: [false; 6],
            chunks: [1; 6],
            chunk_count: 1,
            shape: [1; 6],
            neg_margin: neg,
            pos_margin: pos,
        };
        let per_trace = ch.mapping == VdsChannelMapping::PerTrace;
        for d in 0..6 {
            if d >= n {
                continue;
            }
            let in_group = group.contains(&d);
            if d == 0 && per_trace {
                let mv = ch.mapped_values.max(1);
                g.extent[0] = mv;
                if mv == 1 {
                    g.kinds[0] = DimKind::TraceSingle;
                } else if in_group {
                    g.kinds[0] = DimKind::TraceValues;
                    g.brick[0] = mv;
                    g.scaled[0] = true;
                    g.chunk_dims.push(0);
                    g.shape[0] = ceil_shift(mv, lod);
                    continue;
                } else {
                    g.kinds[0] = DimKind::PerIndex;
                    g.chunks[0] = mv;
                }
                g.shape[0] = g.extent[0];
                continue;
            }
            g.extent[d] = sizes[d];
            if in_group {
                g.kinds[d] = DimKind::Bricked;
                g.chunk_dims.push(d);
                let is_full = full_res == Some(d);
                let b = if is_full {
                    stride
                } else {
                    stride.checked_shl(lod).unwrap_or(u64::MAX).min(sizes[d])
                };
                // A 1-voxel stride (min with N) keeps the division defined.
                let b = b.max(1);
                g.brick[d] = b;
                g.scaled[d] = !is_full;
                let num = sizes[d] as i128 - 1 - neg as i128 - pos as i128;
                g.chunks[d] = if num < 0 { 1 } else { (num as u64) / b + 1 };
                g.shape[d] = if is_full { sizes[d] } else { ceil_shift(sizes[d], lod) };
            } else {
                g.kinds[d] = DimKind::PerIndex;
                g.chunks[d] = sizes[d];
                g.shape[d] = sizes[d];
            }
        }
        g.chunk_count = g.chunks.iter().try_fold(1u64, |a, &c| a.checked_mul(c))?;
        g.name = layer_name(layout, channel, group, lod);
        Some(g)
    }

    /// Chunk coordinates (per dim) of chunk `index`, dim 0 fastest.
    pub fn chunk_coords(&self, mut index: u64) -> [u64; 6] {
        let mut c = [0u64; 6];
        for d in 0..6 {
            let k = self.chunks[d].max(1);
            c[d] = index % k;
            index /= k;
        }
        c
    }

    /// Index of the chunk at chunk coordinates `coords` (dim 0 fastest).
    pub fn chunk_index(&self, coords: &[u64; 6]) -> u64 {
        let mut idx = 0u64;
        let mut mul = 1u64;
        for d in 0..6 {
            idx = idx.saturating_add(coords[d].saturating_mul(mul));
            mul = mul.saturating_mul(self.chunks[d]);
        }
        idx
    }

    /// Extents of chunk `index`.
    pub fn chunk_extent(&self, index: u64) -> ChunkExtent {
        let c = self.chunk_coords(index);
        let mut e = ChunkExtent {
            min: [0; 6],
            max: [1; 6],
            min_excl: [0; 6],
            max_excl: [1; 6],
            stored_origin: [0; 6],
            stored_size: [1; 6],
            owned_min: [0; 6],
            owned_max: [1; 6],
        };
        for d in 0..6 {
            let n = self.extent[d];
            let i = c[d];
            match self.kinds[d] {
                DimKind::Unused | DimKind::TraceSingle => {}
                DimKind::PerIndex => {
                    e.min[d] = i;
                    e.max[d] = i + 1;
                    e.min_excl[d] = i;
                    e.max_excl[d] = i + 1;
                }
                DimKind::TraceValues => {
                    e.max[d] = n;
                    e.max_excl[d] = n;
                }
                DimKind::Bricked => {
                    let b = self.brick[d];
                    let last = i + 1 >= self.chunks[d];
                    let start = i.saturating_mul(b);
                    e.min[d] = start.min(n);
                    e.max[d] = start
                        .saturating_add(b)
                        .saturating_add(self.neg_margin + self.pos_margin)
                        .min(n);
                    e.min_excl[d] = if i == 0 {
                        0
                    } else {
                        start.saturating_add(self.neg_margin).min(n)
                    };
                    let mut mx = start.saturating_add(b).saturating_add(self.neg_margin);
                    if last {
                        mx = mx.saturating_add(self.pos_margin);
                    }
                    e.max_excl[d] = mx.min(n);
                }
            }
            if self.scaled[d] {
                e.stored_origin[d] = e.min[d] >> self.lod;
                e.stored_size[d] = ceil_shift(e.max[d] - e.min[d], self.lod);
                e.owned_min[d] = ceil_shift(e.min_excl[d], self.lod);
                e.owned_max[d] = ceil_shift(e.max_excl[d], self.lod);
            } else {
                e.stored_origin[d] = e.min[d];
                e.stored_size[d] = e.max[d] - e.min[d];
                e.owned_min[d] = e.min_excl[d];
                e.owned_max[d] = e.max_excl[d];
            }
            // The owned part must lie inside what is stored (it does for sane layouts).
            let so = e.stored_origin[d];
            let se = so + e.stored_size[d];
            e.owned_min[d] = e.owned_min[d].clamp(so, se);
            e.owned_max[d] = e.owned_max[d].clamp(e.owned_min[d], se);
        }
        e
    }

    /// The stored size along the chunk dims, as the chunk descriptor gives it (unused = 1).
    pub fn descriptor_size(&self, ext: &ChunkExtent) -> [u64; 3] {
        let mut s = [1u64; 3];
        for (k, &d) in self.chunk_dims.iter().enumerate().take(3) {
            s[k] = ext.stored_size[d];
        }
        s
    }
}

/// Name of a layer: channel name (omitted for the primary) + group + LOD.
pub fn layer_name(layout: &VolumeDataLayout, channel: usize, group: &[usize], lod: u32) -> String {
    let prefix = if channel == 0 {
        ""
    } else {
        layout.channels.get(channel).map(|c| c.name.as_str()).unwrap_or("")
    };
    format!("{prefix}{}LOD{lod}", group_name(group))
}

/// Why a layer name does not fit the layout, or `None` when it could exist.
pub fn layer_allowed(layout: &VolumeDataLayout, channel: usize, group: &[usize], lod: u32) -> Option<String> {
    let n = layout.dimensionality();
    let lo = &layout.layout;
    if group.iter().any(|&d| d >= n) {
        return Some(format!(
            "dimension group {} exceeds the dimensionality {n}",
            group_name(group)
        ));
    }
    if group.len() == 1 && n > 1 {
        return Some("1-D dimension groups are not used by OpenVDS".into());
    }
    if lod > lo.lod_levels {
        return Some(format!("LOD {lod} exceeds the layout's {} LOD levels", lo.lod_levels));
    }
    if lod > 0 && group.len() == 2 && n > 2 && !lo.create_2d_lods {
        return Some("2-D dimension groups have LOD0 only unless create2DLODs".into());
    }
    if lod > 0 && !layout.channels.get(channel).is_some_and(|c| c.renderable) {
        return Some("non-renderable channels have LOD0 only".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_names() {
        assert_eq!(
            parse_layer_name("Dimensions_012LOD0"),
            Some((String::new(), vec![0, 1, 2], 0))
        );
        assert_eq!(
            parse_layer_name("TraceDimensions_012LOD1"),
            Some(("Trace".into(), vec![0, 1, 2], 1))
        );
        assert_eq!(
            parse_layer_name("XDimensions_Dimensions_02LOD12"),
            Some(("XDimensions_".into(), vec![0, 2], 12))
        );
        assert_eq!(parse_layer_name("Dimensions_021LOD0"), None);
        assert_eq!(parse_layer_name("Dimensions_016LOD0"), None);
        assert_eq!(parse_layer_name("Dimensions_LOD0"), None);
        assert_eq!(parse_layer_name("Dimensions_01LOD"), None);
        assert_eq!(ceil_shift(7, 1), 4);
        assert_eq!(ceil_shift(8, 2), 2);
    }
}
