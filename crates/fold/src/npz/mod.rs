//! `.npz` archives (numpy `savez` / `savez_compressed`): a zip of `.npy` members, as the NPZ0
//! chunks of FOLD files hold them. A small zip reader of its own (stored and deflate members,
//! zip64 sizes as numpy's `force_zip64` writes them, data descriptors) and a stored-member
//! writer, so no zip crate is needed.
//!
//! Members are read as Python's zipfile (and so numpy and pyfolds) reads them: the central
//! directory is the truth; a member whose local header names it differently, or whose data
//! runs into the next member, is refused (newer Pythons refuse both); its content must inflate
//! to the declared size with the declared CRC-32. Checking streams: no member is ever held
//! whole, whatever size it declares ([`describe`], [`StreamCheck`]).

mod check;
pub(crate) mod member;
pub(crate) mod walk;
mod write;
pub(crate) mod zip;

use std::borrow::Cow;
use std::sync::Arc;

use rasterpack_common::{fortran, npy, DType, Error, Limits, NdArray, Result};

pub use check::StreamCheck;
pub(crate) use check::{ContentTap, StreamVerdict};
pub(crate) use walk::{ArrayTarget, CdWalk, WalkMode};
pub use write::write;
pub(crate) use write::StreamedMember;
pub use zip::{
    crc32, crc32_combine, crc32_par, decode_name, directory_in, members, Directory, Member, DIRECTORY_LIMIT_CODE,
    MAX_DIRECTORY,
};

use crate::scan::Flow;

/// Code of a member that cannot be read (CRC-32, sizes, `.npy` header, a repeated name) in an
/// archive that can.
pub const MEMBER_DAMAGED: &str = "fold.payload.npz_member_damaged";
/// Code of a member whose local header names it differently from the central directory.
pub const MEMBER_NAME_MISMATCH: &str = "fold.payload.npz_member_name_mismatch";
/// Code of a member whose data runs into the next member or the central directory.
pub const MEMBER_OVERLAP: &str = "fold.payload.npz_member_overlap";

/// Damaged members of one archive whose messages are kept in full (as many as a report
/// lists findings of one code); past them each gets a fixed sentence per code. A central
/// directory may list 350 000 members, all damaged: their messages were ~60 MB (issue 17).
pub const DAMAGE_DETAILED: usize = rasterpack_common::LISTED_PER_CODE;

/// Whether `code` is about one member of an archive (the other members stay readable).
pub fn is_member_code(code: &str) -> bool {
    code.starts_with("fold.payload.npz_member_")
}

/// Why one member cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpzDamage {
    /// Finding code ([`MEMBER_DAMAGED`], [`MEMBER_NAME_MISMATCH`], [`MEMBER_OVERLAP`]).
    pub code: &'static str,
    /// What is wrong, for people. Past the first [`DAMAGE_DETAILED`] damaged members of an
    /// archive, a fixed sentence per code (the per-member detail is not held).
    pub message: Cow<'static, str>,
}

/// What one `.npy` member of an archive holds.
#[derive(Debug, Clone, PartialEq)]
pub struct NpzArrayInfo {
    /// Array name (`N` for the member `N.npy`).
    pub name: String,
    /// Element type, when the member's `.npy` header was read and rasterpack knows it.
    pub dtype: Option<DType>,
    /// numpy's `descr` as written (`<f4`, `>i2`), `?` when unknown.
    pub descr: String,
    /// Shape (C order), empty when unknown.
    pub shape: Vec<u64>,
    /// Set when rasterpack cannot decode the dtype or layout, or the member's zip method.
    pub unsupported: Option<String>,
    /// A zip feature of the member is not supported: a method other than stored/deflate, or
    /// encryption (`unsupported` says which; code `fold.payload.npz_unsupported`).
    pub zip_method_unsupported: bool,
    /// Set when the member is damaged or ambiguous (CRC-32, sizes, `.npy` header, a name used
    /// twice, a local header that disagrees, overlapping data): it is never read. The other
    /// members of the archive stay readable.
    pub damaged: Option<NpzDamage>,
}

impl NpzArrayInfo {
    /// An array of this name about which nothing else is known yet.
    pub(crate) fn named(name: &str) -> NpzArrayInfo {
        NpzArrayInfo {
            name: name.to_string(),
            dtype: None,
            descr: "?".into(),
            shape: Vec::new(),
            unsupported: None,
            zip_method_unsupported: false,
            damaged: None,
        }
    }

    /// Readable: neither damaged nor unsupported.
    pub fn is_readable(&self) -> bool {
        self.damaged.is_none() && self.unsupported.is_none() && self.dtype.is_some()
    }
}

/// Array name of a member (`x.npy` -> `x`).
pub fn array_name(member: &str) -> &str {
    member.strip_suffix(".npy").unwrap_or(member)
}

/// numpy's `dtype.str` (`<f4`, `>i2`, `|b1`).
pub(crate) fn descr(d: DType, big_endian: bool) -> String {
    let le = d.npy_descr();
    if big_endian && d.size() > 1 {
        format!(">{}", &le[1..])
    } else {
        le.to_string()
    }
}

/// Decode every member of an archive held in memory: an archive whose zip structure is
/// unreadable is an error; a member that is damaged or not decodable here is described as
/// such ([`NpzArrayInfo::damaged`], [`NpzArrayInfo::unsupported`]) and the others still are.
/// Members are inflated through a small buffer, never held whole.
pub fn describe(b: &[u8], limits: &Limits) -> Result<Vec<NpzArrayInfo>> {
    let dir = Arc::new(directory_in(b, 0, limits)?);
    let mut walk: CdWalk = CdWalk::new(dir, b.len() as u64, limits, WalkMode::Verify, None);
    feed_all(&mut walk, b);
    walk.finish()
}

/// Feed a walk the bytes of an archive held in memory, from where it wants them.
pub(crate) fn feed_all<T: ArrayTarget>(walk: &mut CdWalk<T>, b: &[u8]) {
    const PIECE: u64 = 4 << 20;
    while let Some(at) = walk.wants_from() {
        let Ok(start) = usize::try_from(at) else { return };
        let end = (at.saturating_add(PIECE)).min(b.len() as u64) as usize;
        let Some(piece) = b.get(start..end) else { return };
        if piece.is_empty() || walk.feed_at(at, piece) == Flow::Stop {
            return;
        }
    }
}

/// The central directory of an archive of `total` bytes read by position (`read_at(offset,
/// buffer)`): the end records from its last bytes, then the directory.
pub(crate) fn directory_at(
    total: u64,
    limits: &Limits,
    read_at: &mut dyn FnMut(u64, &mut [u8]) -> Result<()>,
) -> Result<Directory> {
    let tail_len = total.min(zip::END_RECORDS_MAX);
    let mut tail = vec![0u8; tail_len as usize];
    read_at(total - tail_len, &mut tail)?;
    let (cd_off, _) = zip::directory_extent(&tail, total)?;
    let from = cd_off.min(total - tail_len);
    let len = total - from;
    let n = limits.check_alloc(len, "npz central directory", Some(from))?;
    let mut bytes = vec![0u8; n];
    read_at(from, &mut bytes)?;
    directory_in(&bytes, from, limits)
}

/// Collects one array in memory ([`read_array`]).
struct MemoryTarget {
    limits: Limits,
    array: Option<NdArray>,
    big_endian: bool,
    fortran_order: bool,
}

impl ArrayTarget for MemoryTarget {
    fn header(&mut self, h: &npy::NpyHeader) -> Result<()> {
        let n = self.limits.check_alloc(h.data_len, "npz array", None)?;
        self.array = Some(NdArray::new(h.dtype, h.shape.clone(), vec![0u8; n])?);
        self.big_endian = h.big_endian;
        self.fortran_order = h.fortran_order;
        Ok(())
    }
    fn data(&mut self, at: u64, bytes: &[u8]) -> Result<Flow> {
        let a = self
            .array
            .as_mut()
            .ok_or_else(|| Error::usage("internal: array data before its header"))?;
        let start = usize::try_from(at).map_err(|_| Error::usage("internal: offset"))?;
        let dst = a
            .data
            .get_mut(start..start + bytes.len())
            .ok_or_else(|| Error::usage("internal: array data past its size"))?;
        dst.copy_from_slice(bytes);
        Ok(Flow::More)
    }
}

/// Read one array (by array name) out of an archive held in memory; its member's local
/// header, CRC-32 and sizes are checked. A name used by more than one member is refused
/// (which one a reader picks differs).
pub fn read_array(b: &[u8], name: &str, limits: &Limits) -> Result<NdArray> {
    let dir = Arc::new(directory_in(b, 0, limits)?);
    let Some(idx) = dir.members.iter().position(|m| array_name(&m.name) == name) else {
        return Err(Error::usage(format!("no array {name:?} in the archive")));
    };
    let target = MemoryTarget {
        limits: *limits,
        array: None,
        big_endian: false,
        fortran_order: false,
    };
    let mut walk = CdWalk::new(dir, b.len() as u64, limits, WalkMode::Verify, Some((idx, target)));
    feed_all(&mut walk, b);
    let (result, target) = walk.finish_with_target();
    result?;
    let target = target.ok_or_else(|| Error::usage("internal: the walk lost its target"))?;
    let mut array = target
        .array
        .ok_or_else(|| Error::invalid_at(MEMBER_DAMAGED, None, format!("array {name:?} could not be read")))?;
    if target.big_endian {
        array.dtype.swap_to_le(&mut array.data);
    }
    if target.fortran_order {
        // The whole array is in memory already (bounded by the limits above).
        array.data = fortran::fortran_to_c(&array.data, array.dtype.size(), &array.shape)?;
    }
    array.name = Some(name.to_string());
    Ok(array)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        let data: Vec<u8> = (0..(9u32 << 20) + 7)
            .map(|i| (i.wrapping_mul(2654435761) >> 7) as u8)
            .collect();
        assert_eq!(crc32_par(&data), crc32(&data));
        for split in [0usize, 1, 5, 1000] {
            let (a, b) = data[..2000].split_at(split);
            assert_eq!(crc32_combine(crc32(a), crc32(b), b.len() as u64), crc32(&data[..2000]));
        }
    }

    #[test]
    fn round_trip() {
        let a = NdArray::new(DType::F32, vec![2, 2], (0..16).collect()).unwrap();
        let b = NdArray::new(DType::I64, vec![3], vec![7; 24]).unwrap();
        let z = write(&[("a", &a), ("b", &b)]);
        let l = Limits::default();
        let info = describe(&z, &l).unwrap();
        assert_eq!(info[0].name, "a", "{info:?}");
        assert!(info.iter().all(NpzArrayInfo::is_readable), "{info:?}");
        assert_eq!(info[1].descr, "<i8");
        assert_eq!(info[1].dtype, Some(DType::I64));
        assert_eq!(read_array(&z, "b", &l).unwrap().data, b.data);
        for cut in 0..z.len() {
            let _ = describe(&z[..cut], &l);
        }
    }

    #[test]
    fn streamed_member_layout_reads_back() {
        let a = NdArray::new(DType::U16, vec![3, 2], (0..12).collect()).unwrap();
        let mut content = npy::header_bytes(a.dtype, &a.shape);
        content.extend_from_slice(&a.data);
        let m = StreamedMember::new("grid", content.len() as u32);
        let mut z = m.local_header();
        z.extend_from_slice(&content);
        z.extend_from_slice(&m.descriptor(crc32(&content)));
        let cd = z.len() as u32;
        z.extend_from_slice(&m.directory(crc32(&content), cd));
        let l = Limits::default();
        let info = describe(&z, &l).unwrap();
        assert_eq!((info[0].dtype, info[0].shape.clone()), (Some(DType::U16), vec![3, 2]));
        assert_eq!(read_array(&z, "grid", &l).unwrap().data, a.data);
        let mut s = StreamCheck::new(&l);
        for p in z.chunks(7) {
            s.feed(p);
        }
        assert_eq!(
            s.finish(),
            Some(info),
            "the streaming check follows the data descriptor"
        );
        // A wrong CRC in the descriptor and the directory: damaged either way.
        let mut bad = z.clone();
        let at = 30 + 8 + content.len() + 4;
        bad[at] ^= 1;
        let mut s = StreamCheck::new(&l);
        s.feed(&bad);
        assert_eq!(s.finish(), None);
    }

    #[test]
    fn names_that_differ_and_overlaps_are_refused_per_member() {
        let a = NdArray::new(DType::U8, vec![4], vec![1, 2, 3, 4]).unwrap();
        let z = write(&[("a", &a), ("b", &a)]);
        let l = Limits::default();
        // Rename member "b" in its local header only.
        let mut renamed = z.clone();
        let second = renamed.windows(5).rposition(|w| w == b"b.npy").unwrap();
        let local_b = renamed.windows(5).position(|w| w == b"b.npy").unwrap();
        assert!(local_b < second);
        renamed[local_b] = b'c';
        let info = describe(&renamed, &l).unwrap();
        assert!(info[0].is_readable());
        assert_eq!(info[1].damaged.as_ref().map(|d| d.code), Some(MEMBER_NAME_MISMATCH));
        assert!(read_array(&renamed, "a", &l).is_ok());
        assert_eq!(read_array(&renamed, "b", &l).unwrap_err().code, MEMBER_NAME_MISMATCH);
        // Point the second directory entry at the first local header: its name differs there.
        let dir = directory_in(&z, 0, &l).unwrap();
        let entry = z.windows(4).rposition(|w| w == 0x0201_4b50u32.to_le_bytes()).unwrap();
        let mut same = z.clone();
        same[entry + 42..entry + 46].copy_from_slice(&0u32.to_le_bytes());
        assert_ne!(dir.members[1].local_offset, 0);
        let info = describe(&same, &l).unwrap();
        assert!(info[0].damaged.is_none(), "{info:?}");
        assert_eq!(info[1].damaged.as_ref().map(|d| d.code), Some(MEMBER_NAME_MISMATCH));
        // Both entries named "a" at one header: the second overlaps (Python's end offsets).
        let mut twin = same.clone();
        let cd_name = twin.windows(5).rposition(|w| w == b"b.npy").unwrap();
        twin[cd_name] = b'a';
        let info = describe(&twin, &l).unwrap();
        assert!(info.iter().all(|i| i.damaged.is_some()), "repeated names: {info:?}");
        // Member "a" declared 10 bytes longer (stored, so both sizes): it runs into "b".
        let first = z.windows(4).position(|w| w == 0x0201_4b50u32.to_le_bytes()).unwrap();
        let mut long = z.clone();
        for field in [first + 20, first + 24] {
            let v = u32::from_le_bytes(long[field..field + 4].try_into().unwrap()) + 10;
            long[field..field + 4].copy_from_slice(&v.to_le_bytes());
        }
        let info = describe(&long, &l).unwrap();
        assert_eq!(
            info[0].damaged.as_ref().map(|d| d.code),
            Some(MEMBER_OVERLAP),
            "{info:?}"
        );
        assert!(info[1].is_readable());
    }
}
