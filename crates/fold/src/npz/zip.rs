//! The zip layer of `.npz` archives: records, the central directory, member names as
//! Python's zipfile decodes them, CRC-32.

use rasterpack_common::{Error, Limits, Result};

pub(crate) const EOCD_SIG: u32 = 0x0605_4b50;
pub(crate) const ZIP64_LOCATOR_SIG: u32 = 0x0706_4b50;
pub(crate) const ZIP64_EOCD_SIG: u32 = 0x0606_4b50;
pub(crate) const CDIR_SIG: u32 = 0x0201_4b50;
pub(crate) const LOCAL_SIG: u32 = 0x0403_4b50;

pub(crate) fn le16(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?))
}
pub(crate) fn le32(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}
pub(crate) fn le64(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?))
}

/// CRC-32 (IEEE, zip). crc32fast picks a carry-less-multiply (PCLMULQDQ) kernel at run time:
/// ~10x the former slicing-by-8 table, which made member checks a third of NPZ0 validation.
pub fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

fn gf2_times(mat: &[u32; 32], mut vec: u32) -> u32 {
    let mut sum = 0;
    let mut i = 0;
    while vec != 0 {
        if vec & 1 != 0 {
            sum ^= mat[i];
        }
        vec >>= 1;
        i += 1;
    }
    sum
}

fn gf2_square(square: &mut [u32; 32], mat: &[u32; 32]) {
    for n in 0..32 {
        square[n] = gf2_times(mat, mat[n]);
    }
}

/// CRC-32 of `A || B` from `crc32(A)`, `crc32(B)` and `B`'s length (zlib's `crc32_combine`).
pub fn crc32_combine(mut crc1: u32, crc2: u32, mut len2: u64) -> u32 {
    if len2 == 0 {
        return crc1;
    }
    let mut even = [0u32; 32];
    let mut odd = [0u32; 32];
    odd[0] = 0xEDB8_8320;
    for (n, v) in odd.iter_mut().enumerate().skip(1) {
        *v = 1 << (n - 1);
    }
    gf2_square(&mut even, &odd); // 2 zero bits
    gf2_square(&mut odd, &even); // 4 zero bits
    loop {
        gf2_square(&mut even, &odd);
        if len2 & 1 != 0 {
            crc1 = gf2_times(&even, crc1);
        }
        len2 >>= 1;
        if len2 == 0 {
            break;
        }
        gf2_square(&mut odd, &even);
        if len2 & 1 != 0 {
            crc1 = gf2_times(&odd, crc1);
        }
        len2 >>= 1;
        if len2 == 0 {
            break;
        }
    }
    crc1 ^ crc2
}

/// [`crc32`] on both cores for large inputs.
pub fn crc32_par(data: &[u8]) -> u32 {
    if data.len() < (8 << 20) {
        return crc32(data);
    }
    let (a, b) = data.split_at(data.len() / 2);
    let (ca, cb) = rayon::join(|| crc32(a), || crc32(b));
    crc32_combine(ca, cb, b.len() as u64)
}

/// One member of a zip archive, from the central directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Name as Python's zipfile decodes it (see [`decode_name`]).
    pub name: String,
    /// General-purpose flags (bit 3: sizes in a data descriptor, bit 11: UTF-8 name).
    pub flags: u16,
    /// Compression method (0 stored, 8 deflate).
    pub method: u16,
    /// CRC-32 of the member's content.
    pub crc32: u32,
    /// Stored (compressed) size.
    pub comp_size: u64,
    /// Content size.
    pub uncomp_size: u64,
    /// Offset of the member's local header in the archive.
    pub local_offset: u64,
}

/// The central directory of an archive: its members in directory order, and where it starts
/// (the end of the last member's extent, for Python's overlap rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directory {
    /// Members in directory order.
    pub members: Vec<Member>,
    /// Offset of the central directory in the archive.
    pub offset: u64,
}

/// Largest central directory rasterpack reads (about 350 000 members): numpy archives hold a
/// handful; a larger one is refused with a limit error rather than held.
pub const MAX_DIRECTORY: u64 = 16 << 20;

/// Code of an archive whose central directory is above [`MAX_DIRECTORY`].
pub const DIRECTORY_LIMIT_CODE: &str = "fold.limits.npz_directory";

/// Local header signature bit 3 of the general-purpose flags: CRC and sizes follow the data.
pub(crate) const FLAG_DESCRIPTOR: u16 = 0x0008;

/// General-purpose flag bit 0: the member is encrypted. Its bytes are not the content, so it
/// is never read (Python's zipfile refuses it without a password too).
pub(crate) const FLAG_ENCRYPTED: u16 = 0x0001;

/// General-purpose flag bit 11: the member name is UTF-8 (otherwise it is CP437).
pub(crate) const FLAG_UTF8: u16 = 0x0800;

/// CP437 for bytes 0x80..=0xFF (0x00..=0x7F are ASCII), as Python's `cp437` codec maps them.
const CP437_HIGH: [char; 128] = [
    '\u{00c7}', '\u{00fc}', '\u{00e9}', '\u{00e2}', '\u{00e4}', '\u{00e0}', '\u{00e5}', '\u{00e7}', '\u{00ea}',
    '\u{00eb}', '\u{00e8}', '\u{00ef}', '\u{00ee}', '\u{00ec}', '\u{00c4}', '\u{00c5}', '\u{00c9}', '\u{00e6}',
    '\u{00c6}', '\u{00f4}', '\u{00f6}', '\u{00f2}', '\u{00fb}', '\u{00f9}', '\u{00ff}', '\u{00d6}', '\u{00dc}',
    '\u{00a2}', '\u{00a3}', '\u{00a5}', '\u{20a7}', '\u{0192}', '\u{00e1}', '\u{00ed}', '\u{00f3}', '\u{00fa}',
    '\u{00f1}', '\u{00d1}', '\u{00aa}', '\u{00ba}', '\u{00bf}', '\u{2310}', '\u{00ac}', '\u{00bd}', '\u{00bc}',
    '\u{00a1}', '\u{00ab}', '\u{00bb}', '\u{2591}', '\u{2592}', '\u{2593}', '\u{2502}', '\u{2524}', '\u{2561}',
    '\u{2562}', '\u{2556}', '\u{2555}', '\u{2563}', '\u{2551}', '\u{2557}', '\u{255d}', '\u{255c}', '\u{255b}',
    '\u{2510}', '\u{2514}', '\u{2534}', '\u{252c}', '\u{251c}', '\u{2500}', '\u{253c}', '\u{255e}', '\u{255f}',
    '\u{255a}', '\u{2554}', '\u{2569}', '\u{2566}', '\u{2560}', '\u{2550}', '\u{256c}', '\u{2567}', '\u{2568}',
    '\u{2564}', '\u{2565}', '\u{2559}', '\u{2558}', '\u{2552}', '\u{2553}', '\u{256b}', '\u{256a}', '\u{2518}',
    '\u{250c}', '\u{2588}', '\u{2584}', '\u{258c}', '\u{2590}', '\u{2580}', '\u{03b1}', '\u{00df}', '\u{0393}',
    '\u{03c0}', '\u{03a3}', '\u{03c3}', '\u{00b5}', '\u{03c4}', '\u{03a6}', '\u{0398}', '\u{03a9}', '\u{03b4}',
    '\u{221e}', '\u{03c6}', '\u{03b5}', '\u{2229}', '\u{2261}', '\u{00b1}', '\u{2265}', '\u{2264}', '\u{2320}',
    '\u{2321}', '\u{00f7}', '\u{2248}', '\u{00b0}', '\u{2219}', '\u{00b7}', '\u{221a}', '\u{207f}', '\u{00b2}',
    '\u{25a0}', '\u{00a0}',
];

/// A member name as Python's zipfile (and so numpy and pyfolds) decodes it: UTF-8 when flag
/// bit 11 is set (an error if it is not UTF-8, as in Python), CP437 otherwise.
pub fn decode_name(raw: &[u8], flags: u16) -> std::result::Result<String, std::str::Utf8Error> {
    if flags & FLAG_UTF8 != 0 {
        return std::str::from_utf8(raw).map(str::to_string);
    }
    Ok(raw
        .iter()
        .map(|&b| {
            if b < 0x80 {
                b as char
            } else {
                CP437_HIGH[(b - 0x80) as usize]
            }
        })
        .collect())
}

pub(crate) fn bad(offset: u64, msg: impl Into<String>) -> Error {
    Error::invalid("fold.payload.bad_zip", offset, msg)
}

/// List the members of a zip archive held in `b` (offsets in errors are relative to `b`).
pub fn members(b: &[u8], limits: &Limits) -> Result<Vec<Member>> {
    directory_in(b, 0, limits).map(|d| d.members)
}

/// Bytes at the end of an archive that always hold its end records (the end-of-central-
/// directory record, its comment, the zip64 locator): where to look before the directory.
pub(crate) const END_RECORDS_MAX: u64 = 22 + 65535 + 20 + 56;

/// Where the central directory of an archive of `total` bytes lies, from `tail`, its last
/// bytes (at least [`END_RECORDS_MAX`] of them when the archive is that long): `(offset,
/// size)`. Checked against the archive and [`MAX_DIRECTORY`].
pub(crate) fn directory_extent(tail: &[u8], total: u64) -> Result<(u64, u64)> {
    let base = total.saturating_sub(tail.len() as u64);
    let (_, cd_off, cd_size) = end_records(tail, base)?;
    Ok((cd_off, cd_size))
}

/// The central directory of an archive of which `b` holds the bytes from absolute offset
/// `base` to the end. Structures before `base` are errors.
pub fn directory_in(b: &[u8], base: u64, limits: &Limits) -> Result<Directory> {
    let (count, cd_off, cd_size) = end_records(b, base)?;
    let members = directory_entries(b, base, count, cd_off, cd_size, limits)?;
    Ok(Directory {
        members,
        offset: cd_off,
    })
}

/// `(member count, directory offset, directory size)` from the end records held in `b` (the
/// archive's bytes from `base` to its end).
fn end_records(b: &[u8], base: u64) -> Result<(u64, u64, u64)> {
    let total = base
        .checked_add(b.len() as u64)
        .ok_or_else(|| bad(0, "archive too large"))?;
    if b.len() < 22 {
        return Err(bad(0, "too short for a zip archive"));
    }
    // The end-of-central-directory record is within the last 22 + 65535 bytes.
    let lowest = b.len().saturating_sub(22 + 65535);
    let mut eocd = None;
    let mut p = b.len() - 22;
    loop {
        if le32(b, p) == Some(EOCD_SIG) && le16(b, p + 20).map(|c| p + 22 + c as usize) == Some(b.len()) {
            eocd = Some(p);
            break;
        }
        if p == lowest {
            break;
        }
        p -= 1;
    }
    let eocd = eocd.ok_or_else(|| bad(0, "no zip end-of-central-directory record"))?;
    let mut count = le16(b, eocd + 10).unwrap_or(0) as u64;
    let mut cd_size = le32(b, eocd + 12).unwrap_or(0) as u64;
    let mut cd_off = le32(b, eocd + 16).unwrap_or(0) as u64;
    if count == 0xFFFF || cd_size == 0xFFFF_FFFF || cd_off == 0xFFFF_FFFF {
        let loc = eocd
            .checked_sub(20)
            .ok_or_else(|| bad(eocd as u64, "zip64 locator missing"))?;
        if le32(b, loc) != Some(ZIP64_LOCATOR_SIG) {
            return Err(bad(loc as u64, "zip64 locator missing"));
        }
        let z = le64(b, loc + 8).unwrap_or(u64::MAX);
        let zi = z
            .checked_sub(base)
            .and_then(|r| usize::try_from(r).ok())
            .filter(|&z| z < b.len())
            .ok_or_else(|| bad(loc as u64, "zip64 record out of bounds"))?;
        if le32(b, zi) != Some(ZIP64_EOCD_SIG) {
            return Err(bad(z, "bad zip64 end record"));
        }
        count = le64(b, zi + 32).ok_or_else(|| bad(z, "truncated zip64 end record"))?;
        cd_size = le64(b, zi + 40).ok_or_else(|| bad(z, "truncated zip64 end record"))?;
        cd_off = le64(b, zi + 48).ok_or_else(|| bad(z, "truncated zip64 end record"))?;
    }
    if cd_off.checked_add(cd_size).is_none_or(|e| e > total) {
        return Err(bad(eocd as u64, "central directory out of bounds"));
    }
    if cd_size > MAX_DIRECTORY {
        return Err(Error::limit(
            DIRECTORY_LIMIT_CODE,
            Some(cd_off),
            format!("the central directory holds {cd_size} bytes, above rasterpack's limit of {MAX_DIRECTORY}"),
        ));
    }
    Ok((count, cd_off, cd_size))
}

/// Parse `count` central directory entries at `cd_off` (absolute) from `b` (bytes from `base`).
fn directory_entries(
    b: &[u8],
    base: u64,
    count: u64,
    cd_off: u64,
    cd_size: u64,
    limits: &Limits,
) -> Result<Vec<Member>> {
    let eocd = b.len().saturating_sub(22);
    // Each central directory entry is at least 46 bytes.
    if count > cd_size / 46 + 1 || count > limits.max_entries {
        return Err(bad(eocd as u64, format!("implausible member count {count}")));
    }
    let mut out = Vec::new();
    let mut p = cd_off
        .checked_sub(base)
        .and_then(|r| usize::try_from(r).ok())
        .ok_or_else(|| bad(eocd as u64, "central directory before the kept bytes"))?;
    for _ in 0..count {
        if le32(b, p) != Some(CDIR_SIG) {
            return Err(bad(p as u64, "bad central directory entry"));
        }
        let hdr = b
            .get(p..p + 46)
            .ok_or_else(|| bad(p as u64, "truncated central directory"))?;
        let flags = le16(hdr, 8).unwrap_or(0);
        let method = le16(hdr, 10).unwrap_or(0);
        let crc = le32(hdr, 16).unwrap_or(0);
        let mut comp = le32(hdr, 20).unwrap_or(0) as u64;
        let mut uncomp = le32(hdr, 24).unwrap_or(0) as u64;
        let nlen = le16(hdr, 28).unwrap_or(0) as usize;
        let xlen = le16(hdr, 30).unwrap_or(0) as usize;
        let clen = le16(hdr, 32).unwrap_or(0) as usize;
        let mut local = le32(hdr, 42).unwrap_or(0) as u64;
        let name = b
            .get(p + 46..p + 46 + nlen)
            .ok_or_else(|| bad(p as u64, "truncated member name"))?;
        let extra = b
            .get(p + 46 + nlen..p + 46 + nlen + xlen)
            .ok_or_else(|| bad(p as u64, "truncated extra field"))?;
        // zip64 extended information: the 0xFFFFFFFF fields, in order.
        let mut x = 0;
        while x + 4 <= extra.len() {
            let id = le16(extra, x).unwrap_or(0);
            let sz = le16(extra, x + 2).unwrap_or(0) as usize;
            let body = extra.get(x + 4..x + 4 + sz).unwrap_or(&[]);
            if id == 1 {
                let mut q = 0;
                for field in [&mut uncomp, &mut comp, &mut local] {
                    if *field == 0xFFFF_FFFF {
                        *field = le64(body, q).ok_or_else(|| bad(p as u64, "truncated zip64 extra field"))?;
                        q += 8;
                    }
                }
            }
            x += 4 + sz;
        }
        let name = decode_name(name, flags)
            .map_err(|_| bad(p as u64, "member name is not UTF-8 although flag bit 11 says it is"))?;
        out.push(Member {
            name,
            flags,
            method,
            crc32: crc,
            comp_size: comp,
            uncomp_size: uncomp,
            local_offset: local,
        });
        p += 46 + nlen + xlen + clen;
    }
    Ok(out)
}
