//! Bytes -> raw structures. Every function takes a slice of exactly the structure's size (the
//! callers check lengths against the file first), so nothing here can read out of bounds.

use crate::raw::{
    type_bits, DatasetHeader, Descriptor, FileHeader, FileOffset, Hint, LookupEntry, Prim, DATASET_STATIC_SIZE,
    FILE_HEADER_SIZE,
};

fn u16_at(b: &[u8], o: usize) -> u16 {
    match b.get(o..o + 2) {
        Some(s) => u16::from_le_bytes([s[0], s[1]]),
        None => 0,
    }
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    match b.get(o..o + 4) {
        Some(s) => u32::from_le_bytes([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    match b.get(o..o + 8).and_then(|s| <[u8; 8]>::try_from(s).ok()) {
        Some(a) => u64::from_le_bytes(a),
        None => 0,
    }
}

fn id_at(b: &[u8], o: usize) -> [u8; 4] {
    b.get(o..o + 4)
        .and_then(|s| <[u8; 4]>::try_from(s).ok())
        .unwrap_or_default()
}

/// Decode the `0x40`-byte file header (`b` must hold at least that many bytes).
pub fn file_header(b: &[u8; FILE_HEADER_SIZE]) -> FileHeader {
    FileHeader {
        magic: id_at(b, 0),
        id: id_at(b, 4),
        next: u64_at(b, 8),
        root: file_offset(b, 0x10),
        reserved: [u64_at(b, 0x20), u64_at(b, 0x28), u64_at(b, 0x30), u64_at(b, 0x38)],
    }
}

/// A [`FileOffset`] at `o` in `b`.
pub fn file_offset(b: &[u8], o: usize) -> FileOffset {
    FileOffset {
        offset: u64_at(b, o),
        size: u64_at(b, o + 8),
    }
}

/// Decode the static dataset header.
pub fn dataset_header(b: &[u8; DATASET_STATIC_SIZE]) -> DatasetHeader {
    DatasetHeader {
        check: u32_at(b, 0),
        checksum: u32_at(b, 4),
        id: id_at(b, 8),
        header_size: u16_at(b, 0xC),
        descs_len: u16_at(b, 0xE),
        lookup_len: u16_at(b, 0x10),
        string_len: u16_at(b, 0x12),
        reserved: [u16_at(b, 0x14), u16_at(b, 0x16)],
    }
}

/// Decode one descriptor (`b` holds 0x30 bytes; missing bytes read as 0).
pub fn descriptor(b: &[u8]) -> Descriptor {
    Descriptor {
        key_name: u32_at(b, 0),
        type_info: u16_at(b, 4),
        compress_info: u16_at(b, 6),
        mem_start: u32_at(b, 8),
        mem_end: u32_at(b, 0xC),
        data_size: u32_at(b, 0x10),
        data_shape: [u32_at(b, 0x14), u32_at(b, 0x18)],
        index_name: u32_at(b, 0x1C),
        related_name: u32_at(b, 0x20),
        type_name: u32_at(b, 0x24),
        checksum: u32_at(b, 0x28),
        reserved: u32_at(b, 0x2C),
    }
}

/// Decode one lookup entry (`b` holds 8 bytes; missing bytes read as 0).
pub fn lookup(b: &[u8]) -> LookupEntry {
    LookupEntry {
        hash: u32_at(b, 0),
        offset: u16_at(b, 4),
        len: u16_at(b, 6),
    }
}

/// `type_info` split into its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeInfo {
    /// The primitive.
    pub prim: Prim,
    /// Number of real dimensions, 0..=3.
    pub dims: u8,
    /// The type hint.
    pub hint: Hint,
    /// Bits that must be zero (bit 6, bits 14-15) that are set.
    pub reserved_bits: u16,
}

/// Split a `type_info` into its fields.
pub fn type_info(t: u16) -> TypeInfo {
    TypeInfo {
        prim: Prim::from_bits((t & type_bits::PRIM_MASK) as u8, t & type_bits::EXT_BIT != 0),
        dims: ((t & type_bits::DIM_MASK) >> 4) as u8,
        hint: Hint::from_value(((t & type_bits::HINT_MASK) >> 8) as u8),
        reserved_bits: t & (type_bits::RESERVED_BIT6 | type_bits::RESERVED_HIGH),
    }
}

/// Encode a type_info from its fields.
pub fn encode_type_info(prim: Prim, dims: u8, hint: Hint) -> u16 {
    prim.bits() | ((dims as u16 & 3) << 4) | ((hint.value() as u16 & 0x3F) << 8)
}

/// The axes of a datatable: the type's dimension count extended to the last non-zero of the
/// packed `x, y, z`: the extra axes are "ghost" axes (the inner sizes of fixed-size records).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// Real dimension count from `type_info`.
    pub dims: u8,
    /// Every axis, real then ghost: `x`, `y`, `z` up to the last one in use.
    pub axes: Vec<u32>,
    /// A ghost axis is 0 while a later one is not (invalid).
    pub gap: bool,
}

impl Shape {
    /// The axes of a descriptor: `dims` real axes from `type_info`, the packed `data_shape`.
    pub fn decode(dims: u8, raw: [u32; 2]) -> Shape {
        let v = [raw[0], raw[1] & 0x00FF_FFFF, raw[1] >> 24];
        let last = v.iter().rposition(|&a| a != 0).map_or(0, |p| p + 1);
        let n = last.max(dims.min(3) as usize);
        let axes = v[..n].to_vec();
        let gap = axes.iter().skip(dims as usize).any(|&a| a == 0);
        Shape {
            dims: dims.min(3),
            axes,
            gap,
        }
    }

    /// Pack real and ghost axes; `None` when they do not fit (`y` < 2^24, `z` < 2^8, <= 3 axes).
    pub fn encode(axes: &[u32]) -> Option<[u32; 2]> {
        if axes.len() > 3 {
            return None;
        }
        let x = axes.first().copied().unwrap_or(0);
        let y = axes.get(1).copied().unwrap_or(0);
        let z = axes.get(2).copied().unwrap_or(0);
        if y > 0x00FF_FFFF || z > 0xFF {
            return None;
        }
        Some([x, y | (z << 24)])
    }

    /// The real axes.
    pub fn real(&self) -> &[u32] {
        &self.axes[..(self.dims as usize).min(self.axes.len())]
    }

    /// The ghost axes.
    pub fn ghost(&self) -> &[u32] {
        &self.axes[(self.dims as usize).min(self.axes.len())..]
    }

    /// Number of elements over every axis (1 for a scalar without ghost axes).
    pub fn elements(&self) -> u64 {
        // At most 2^32 * 2^24 * 2^8 = 2^64: saturate the one overflowing case.
        self.axes.iter().fold(1u64, |acc, &a| acc.saturating_mul(a as u64))
    }

    /// Number of records over the real axes (1 for a scalar).
    pub fn records(&self) -> u64 {
        self.real().iter().fold(1u64, |acc, &a| acc.saturating_mul(a as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_from_corpus() {
        // u01: i16_3d [2, 67108867] -> [2, 3, 4]; u06: image rgb 2D [2, 50331650] -> [2, 2, 3].
        let s = Shape::decode(3, [2, 67108867]);
        assert_eq!(s.axes, vec![2, 3, 4]);
        let s = Shape::decode(2, [2, 50331650]);
        assert_eq!((s.real(), s.ghost()), (&[2u32, 2][..], &[3u32][..]));
        let s = Shape::decode(0, [36, 0]);
        assert_eq!((s.real(), s.ghost()), (&[][..], &[36u32][..]));
        let s = Shape::decode(1, [0, 0]);
        assert_eq!(s.axes, vec![0]);
        assert_eq!(s.elements(), 0);
        let s = Shape::decode(0, [0, 0]);
        assert_eq!(s.elements(), 1);
        assert!(Shape::decode(1, [3, 5 << 24]).gap);
        assert_eq!(Shape::encode(&[2, 3, 4]), Some([2, 67108867]));
        assert_eq!(Shape::encode(&[2, 3, 256]), None);
    }
}
