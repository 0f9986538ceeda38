//! `.npz` archives (numpy `savez` / `savez_compressed`): a zip of `.npy` members. A small
//! zip reader (stored and deflate members, zip64 sizes as numpy's `force_zip64` writes them)
//! and a stored-member writer, so no zip crate is needed.

use rasterpack_common::{npy, Error, Limits, NdArray, Result};

const EOCD_SIG: u32 = 0x0605_4b50;
const ZIP64_LOCATOR_SIG: u32 = 0x0706_4b50;
const ZIP64_EOCD_SIG: u32 = 0x0606_4b50;
const CDIR_SIG: u32 = 0x0201_4b50;
const LOCAL_SIG: u32 = 0x0403_4b50;

fn le16(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?))
}
fn le32(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}
fn le64(b: &[u8], o: usize) -> Option<u64> {
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
    pub name: String,
    pub method: u16,
    pub crc32: u32,
    pub comp_size: u64,
    pub uncomp_size: u64,
    pub local_offset: u64,
}

/// General-purpose flag bit 11: the member name is UTF-8 (otherwise it is CP437).
const FLAG_UTF8: u16 = 0x0800;

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

fn bad(offset: u64, msg: impl Into<String>) -> Error {
    Error::invalid("fold.payload.bad_zip", offset, msg)
}

/// List the members of a zip archive held in `b` (offsets in errors are relative to `b`).
pub fn members(b: &[u8], limits: &Limits) -> Result<Vec<Member>> {
    members_from(b, 0, limits)
}

/// [`members`] of an archive of which `b` holds the bytes from absolute offset `base` to the
/// end. Structures before `base` are errors (for `base` 0 this is exactly [`members`]).
fn members_from(b: &[u8], base: u64, limits: &Limits) -> Result<Vec<Member>> {
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

/// The decompressed content of one member, CRC-checked, bounded by its declared size.
pub fn member_data(b: &[u8], m: &Member, limits: &Limits) -> Result<Vec<u8>> {
    member_bytes(b, m, limits).map(|c| c.into_owned())
}

/// Like [`member_data`], borrowing stored members instead of copying them.
pub fn member_bytes<'a>(b: &'a [u8], m: &Member, limits: &Limits) -> Result<std::borrow::Cow<'a, [u8]>> {
    use std::borrow::Cow;
    let lo = usize::try_from(m.local_offset).map_err(|_| bad(0, "member offset out of range"))?;
    if le32(b, lo) != Some(LOCAL_SIG) {
        return Err(bad(m.local_offset, format!("member {:?}: bad local header", m.name)));
    }
    let nlen = le16(b, lo + 26).ok_or_else(|| bad(m.local_offset, "truncated local header"))? as u64;
    let xlen = le16(b, lo + 28).ok_or_else(|| bad(m.local_offset, "truncated local header"))? as u64;
    let start = m.local_offset + 30 + nlen + xlen;
    let end = start
        .checked_add(m.comp_size)
        .filter(|&e| e <= b.len() as u64)
        .ok_or_else(|| bad(m.local_offset, format!("member {:?}: data out of bounds", m.name)))?;
    let src = &b[start as usize..end as usize];
    let size = limits.check_alloc(m.uncomp_size, "npz member", Some(start))?;
    let data = match m.method {
        0 => {
            if m.comp_size != m.uncomp_size {
                return Err(bad(start, format!("member {:?}: stored sizes differ", m.name)));
            }
            Cow::Borrowed(src)
        }
        8 => {
            let d = miniz_oxide::inflate::decompress_to_vec_with_limit(src, size)
                .map_err(|e| bad(start, format!("member {:?}: deflate error {:?}", m.name, e.status)))?;
            if d.len() != size {
                return Err(bad(
                    start,
                    format!("member {:?}: inflates to {} bytes, {} declared", m.name, d.len(), size),
                ));
            }
            Cow::Owned(d)
        }
        other => {
            return Err(Error::unsupported(
                "fold.payload.zip_method",
                Some(m.local_offset),
                format!("member {:?}: zip method {other} is not supported", m.name),
            ))
        }
    };
    if crc32_par(&data) != m.crc32 {
        return Err(bad(start, format!("member {:?}: CRC-32 mismatch", m.name)));
    }
    Ok(data)
}

/// What an `.npy` member holds, for reports.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrayInfo {
    /// Array name (`N` for the member `N.npy`).
    pub name: String,
    /// numpy descr as written (`<f4`), or the rasterpack dtype name.
    pub dtype: String,
    pub shape: Vec<u64>,
    /// Set when rasterpack cannot decode the dtype or layout, or the member's zip method.
    pub unsupported: Option<String>,
    /// The member's zip method is not stored/deflate (`unsupported` says which).
    pub zip_method_unsupported: bool,
    /// Set when the member is damaged or ambiguous (CRC-32, sizes, `.npy` header, a name
    /// used twice): it is never read. The other members of the archive stay readable.
    pub damaged: Option<String>,
}

/// Array name of a member (`x.npy` -> `x`).
pub fn array_name(member: &str) -> &str {
    member.strip_suffix(".npy").unwrap_or(member)
}

/// Array names that more than one member maps to.
fn repeated_names(members: &[Member]) -> std::collections::HashSet<&str> {
    let mut seen = std::collections::HashSet::with_capacity(members.len());
    let mut twice = std::collections::HashSet::new();
    for m in members {
        let n = array_name(&m.name);
        if !seen.insert(n) {
            twice.insert(n);
        }
    }
    twice
}

/// Decode every member header. An archive whose zip structure is unreadable is an error; a
/// member that is damaged or not decodable here is described as such ([`ArrayInfo::damaged`],
/// [`ArrayInfo::unsupported`]) and the others still are.
pub fn describe(b: &[u8], limits: &Limits) -> Result<Vec<ArrayInfo>> {
    let members = members(b, limits)?;
    let twice = repeated_names(&members);
    let mut out = Vec::with_capacity(members.len());
    for m in &members {
        let name = array_name(&m.name).to_string();
        let mut info = ArrayInfo {
            name,
            dtype: "?".into(),
            shape: Vec::new(),
            unsupported: None,
            zip_method_unsupported: false,
            damaged: None,
        };
        if twice.contains(info.name.as_str()) {
            info.damaged = Some(format!("array name {:?} is used by more than one member", info.name));
            out.push(info);
            continue;
        }
        let data = match member_bytes(b, m, limits) {
            Ok(d) => d,
            Err(e) if e.kind == rasterpack_common::ErrorKind::Unsupported => {
                info.unsupported = Some(e.message);
                info.zip_method_unsupported = true;
                out.push(info);
                continue;
            }
            Err(e) => {
                info.damaged = Some(e.message);
                out.push(info);
                continue;
            }
        };
        match npy::parse_header(&data) {
            Ok(h) => {
                let avail = data.len() as u64 - h.data_offset.min(data.len() as u64);
                info.dtype = descr(h.dtype, h.big_endian);
                info.shape = h.shape;
                if avail != h.data_len {
                    info.damaged = Some(format!(
                        "array {:?}: {avail} data bytes, shape needs {}",
                        info.name, h.data_len
                    ));
                } else if h.fortran_order {
                    info.unsupported = Some("Fortran order".to_string());
                }
            }
            Err(e) if e.kind == rasterpack_common::ErrorKind::Unsupported => info.unsupported = Some(e.message),
            Err(e) => info.damaged = Some(format!("array {:?}: {}", info.name, e.message)),
        }
        out.push(info);
    }
    Ok(out)
}

/// Kept `.npy` header bytes per member in [`StreamCheck`].
const NPY_PREFIX: usize = 64 << 10;
/// Most bytes after the last member (central directory and end records) [`StreamCheck`] keeps.
const TAIL_MAX: usize = 16 << 20;
/// Most `.npy` header bytes kept over all members.
const PREFIX_BUDGET: usize = 16 << 20;
/// Archives with more members are left to the in-memory check.
const MAX_STREAM_MEMBERS: u64 = 1 << 16;

/// One member as its local header and data showed it while streaming.
struct Local {
    offset: u64,
    method: u16,
    comp_size: u64,
    /// Bytes the member's data produced (inflated for deflate members).
    produced: u64,
    crc: u32,
    /// First bytes of the member's content (the `.npy` header).
    prefix: Vec<u8>,
    /// A deflate stream reached its end; stored members: always.
    complete: bool,
}

enum Phase {
    /// Gathering a local header (or deciding that the members are over).
    Header,
    /// Member data: bytes still to come.
    Data(u64),
    /// Central directory and end records.
    Tail,
}

/// Incremental `.npz` check of an archive fed in pieces (the decoded zstd stream of an NPZ0
/// chunk): local headers and member data are walked in order (CRC-32 as the data passes,
/// deflate members inflated through a small buffer, the `.npy` header kept), the central
/// directory is kept (bounded) and cross-checked at the end. [`StreamCheck::finish`] gives
/// what [`describe`] would give for the whole archive, or `None` when streaming cannot tell
/// (any damage, data descriptors, unusual layouts, limits): the caller then checks the whole
/// archive in memory, so findings are always those of [`describe`].
pub struct StreamCheck {
    limits: Limits,
    pos: u64,
    phase: Phase,
    hdr: Vec<u8>,
    locals: Vec<Local>,
    cur: Option<Local>,
    inflate: Option<Box<miniz_oxide::inflate::stream::InflateState>>,
    out: Vec<u8>,
    crc: crc32fast::Hasher,
    tail: Vec<u8>,
    tail_base: u64,
    /// `.npy` header bytes kept so far.
    kept: usize,
    failed: bool,
}

impl StreamCheck {
    pub fn new(limits: &Limits) -> StreamCheck {
        StreamCheck {
            limits: *limits,
            pos: 0,
            phase: Phase::Header,
            hdr: Vec::new(),
            locals: Vec::new(),
            cur: None,
            inflate: None,
            out: Vec::new(),
            crc: crc32fast::Hasher::new(),
            tail: Vec::new(),
            tail_base: 0,
            kept: 0,
            failed: false,
        }
    }

    /// The next bytes of the archive.
    pub fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() && !self.failed {
            match self.phase {
                Phase::Header => {
                    let used = self.header_bytes(data);
                    data = &data[used..];
                }
                Phase::Data(left) => {
                    let n = usize::try_from(left).unwrap_or(usize::MAX).min(data.len());
                    let (now, rest) = data.split_at(n);
                    self.member_bytes(now);
                    self.pos = self.pos.saturating_add(n as u64);
                    data = rest;
                    let left = left - n as u64;
                    self.phase = Phase::Data(left);
                    if left == 0 {
                        self.end_member();
                    }
                }
                Phase::Tail => {
                    if self.tail.len().saturating_add(data.len()) > TAIL_MAX {
                        self.failed = true;
                    } else {
                        self.tail.extend_from_slice(data);
                    }
                    self.pos = self.pos.saturating_add(data.len() as u64);
                    data = &[];
                }
            }
        }
    }

    /// Consume header bytes; returns how many of `data` were used.
    fn header_bytes(&mut self, data: &[u8]) -> usize {
        let start = self.pos;
        let need = |h: &[u8]| -> usize {
            if h.len() < 30 {
                30
            } else {
                30 + le16(h, 26).unwrap_or(0) as usize + le16(h, 28).unwrap_or(0) as usize
            }
        };
        let mut used = 0;
        loop {
            let want = need(&self.hdr);
            if self.hdr.len() >= 4 && le32(&self.hdr, 0) != Some(LOCAL_SIG) {
                // The members are over: the rest is the central directory.
                self.tail = std::mem::take(&mut self.hdr);
                self.tail_base = (start.saturating_add(used as u64)).saturating_sub(self.tail.len() as u64);
                self.phase = Phase::Tail;
                self.pos = start.saturating_add(used as u64);
                return used;
            }
            if self.hdr.len() >= want {
                break;
            }
            // Up to the signature first, then up to the fixed part, then the whole header.
            let step = if self.hdr.len() < 4 { 4 } else { want };
            let take = (step - self.hdr.len()).min(data.len() - used);
            if take == 0 {
                self.pos = start.saturating_add(used as u64);
                return used;
            }
            self.hdr.extend_from_slice(&data[used..used + take]);
            used += take;
        }
        self.pos = start.saturating_add(used as u64);
        let h = std::mem::take(&mut self.hdr);
        let offset = self.pos.saturating_sub(h.len() as u64);
        if self.start_member(&h, offset).is_none() {
            self.failed = true;
        }
        used
    }

    fn start_member(&mut self, h: &[u8], offset: u64) -> Option<()> {
        let flags = le16(h, 6)?;
        let method = le16(h, 8)?;
        let mut comp = le32(h, 18)? as u64;
        let mut uncomp = le32(h, 22)? as u64;
        let nlen = le16(h, 26)? as usize;
        let extra = h.get(30 + nlen..)?;
        // Data descriptors (sizes after the data) are left to the in-memory check.
        if flags & 8 != 0 || (method != 0 && method != 8) {
            return None;
        }
        if comp == 0xFFFF_FFFF || uncomp == 0xFFFF_FFFF {
            let mut x = 0;
            let mut found = false;
            while x + 4 <= extra.len() {
                let id = le16(extra, x)?;
                let sz = le16(extra, x + 2)? as usize;
                let body = extra.get(x + 4..x + 4 + sz).unwrap_or(&[]);
                if id == 1 && !found {
                    found = true;
                    let mut q = 0;
                    for field in [&mut uncomp, &mut comp] {
                        if *field == 0xFFFF_FFFF {
                            *field = le64(body, q)?;
                            q += 8;
                        }
                    }
                }
                x += 4 + sz;
            }
            if !found {
                return None;
            }
        }
        if self.locals.len() as u64 >= self.limits.max_entries.min(MAX_STREAM_MEMBERS) {
            return None;
        }
        self.limits.check_alloc(uncomp, "npz member", None).ok()?;
        if method == 0 && comp != uncomp {
            return None;
        }
        self.crc = crc32fast::Hasher::new();
        self.inflate =
            (method == 8).then(|| miniz_oxide::inflate::stream::InflateState::new_boxed(miniz_oxide::DataFormat::Raw));
        self.cur = Some(Local {
            offset,
            method,
            comp_size: comp,
            produced: 0,
            crc: 0,
            prefix: Vec::new(),
            complete: method == 0,
        });
        self.phase = Phase::Data(comp);
        if comp == 0 {
            self.end_member();
        }
        Some(())
    }

    /// Content bytes of the current member.
    fn content(cur: &mut Local, crc: &mut crc32fast::Hasher, kept: &mut usize, b: &[u8]) {
        crc.update(b);
        cur.produced = cur.produced.saturating_add(b.len() as u64);
        if cur.prefix.len() < NPY_PREFIX {
            let n = (NPY_PREFIX - cur.prefix.len()).min(b.len());
            cur.prefix.extend_from_slice(&b[..n]);
            *kept = kept.saturating_add(n);
        }
    }

    /// Stored bytes of the current member.
    fn member_bytes(&mut self, mut b: &[u8]) {
        let Some(cur) = self.cur.as_mut() else {
            self.failed = true;
            return;
        };
        let Some(st) = self.inflate.as_mut() else {
            Self::content(cur, &mut self.crc, &mut self.kept, b);
            return;
        };
        use miniz_oxide::inflate::stream::inflate;
        use miniz_oxide::{MZError, MZFlush, MZStatus};
        if self.out.is_empty() {
            self.out = vec![0u8; 64 << 10];
        }
        // Bytes after the end of the deflate stream are ignored, as the in-memory inflate does.
        while !cur.complete {
            let r = inflate(st, b, &mut self.out, MZFlush::None);
            b = &b[r.bytes_consumed..];
            Self::content(cur, &mut self.crc, &mut self.kept, &self.out[..r.bytes_written]);
            match r.status {
                Ok(MZStatus::StreamEnd) => cur.complete = true,
                Ok(_) | Err(MZError::Buf) => {
                    if r.bytes_consumed == 0 && r.bytes_written == 0 {
                        break;
                    }
                }
                Err(_) => {
                    self.failed = true;
                    return;
                }
            }
            // Bounded: more than the limits allow is left to the in-memory check.
            if cur.produced > self.limits.max_alloc {
                self.failed = true;
                return;
            }
            if b.is_empty() && r.bytes_written < self.out.len() {
                break;
            }
        }
    }

    fn end_member(&mut self) {
        if self.kept > PREFIX_BUDGET {
            self.failed = true;
        }
        match self.cur.take() {
            Some(mut cur) => {
                cur.crc = std::mem::replace(&mut self.crc, crc32fast::Hasher::new()).finalize();
                self.inflate = None;
                self.locals.push(cur);
                self.phase = Phase::Header;
            }
            None => self.failed = true,
        }
    }

    /// What [`describe`] says of the whole archive, when streaming can tell it is readable.
    pub fn finish(self) -> Option<Vec<ArrayInfo>> {
        if self.failed || !matches!(self.phase, Phase::Tail) {
            return None;
        }
        let cd = members_from(&self.tail, self.tail_base, &self.limits).ok()?;
        if cd.len() != self.locals.len() {
            return None;
        }
        let mut out = Vec::with_capacity(cd.len());
        for (m, loc) in cd.iter().zip(&self.locals) {
            let size = self.limits.check_alloc(m.uncomp_size, "npz member", None).ok()? as u64;
            if m.local_offset != loc.offset
                || m.method != loc.method
                || m.comp_size != loc.comp_size
                || !loc.complete
                || loc.produced != size
                || (m.method == 0 && m.comp_size != m.uncomp_size)
                || m.crc32 != loc.crc
            {
                return None;
            }
            let h = npy::parse_header(&loc.prefix).ok()?;
            let avail = size - h.data_offset.min(size);
            if avail != h.data_len {
                return None;
            }
            out.push(ArrayInfo {
                name: array_name(&m.name).to_string(),
                dtype: descr(h.dtype, h.big_endian),
                shape: h.shape,
                unsupported: h.fortran_order.then(|| "Fortran order".to_string()),
                zip_method_unsupported: false,
                damaged: None,
            });
        }
        // Repeated names are described by the in-memory check.
        if !repeated_names(&cd).is_empty() {
            return None;
        }
        Some(out)
    }
}

/// numpy's `dtype.str` (`<f4`, `>i2`, `|b1`).
fn descr(d: rasterpack_common::DType, big_endian: bool) -> String {
    let le = d.npy_descr();
    if big_endian && d.size() > 1 {
        format!(">{}", &le[1..])
    } else {
        le.to_string()
    }
}

/// Read one array (by array name) out of an archive; its member's CRC-32 and sizes are
/// checked. A name used by more than one member is refused (which one a reader picks differs).
pub fn read_array(b: &[u8], name: &str, limits: &Limits) -> Result<NdArray> {
    let members = members(b, limits)?;
    let mut hits = members.iter().filter(|m| array_name(&m.name) == name);
    let Some(m) = hits.next() else {
        return Err(Error::usage(format!("no array {name:?} in the archive")));
    };
    if hits.next().is_some() {
        return Err(bad(
            m.local_offset,
            format!("array name {name:?} is used by more than one member"),
        ));
    }
    let data = member_data(b, m, limits)?;
    let mut arr = npy::read(&data, limits)?;
    arr.name = Some(name.to_string());
    Ok(arr)
}

/// An `np.savez`-style archive: stored members `<name>.npy`.
pub fn write(arrays: &[(&str, &NdArray)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, arr) in arrays {
        let mut member = npy::header_bytes(arr.dtype, &arr.shape);
        member.extend_from_slice(&arr.data);
        let fname = format!("{name}.npy");
        // Python's zipfile (numpy) marks names that are not ASCII as UTF-8; without the flag
        // readers decode them as CP437.
        let flags = if fname.is_ascii() { 0u16 } else { FLAG_UTF8 };
        let crc = crc32(&member);
        let offset = out.len() as u32;
        let size = member.len() as u32;
        // local header: version 20, flags (bit 11 or none), stored, DOS time 1980-01-01 00:00
        out.extend_from_slice(&LOCAL_SIG.to_le_bytes());
        out.extend_from_slice(&20u16.to_le_bytes());
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&[0, 0, 0, 0, 0x21, 0]);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&(fname.len() as u16).to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(fname.as_bytes());
        out.extend_from_slice(&member);
        central.extend_from_slice(&CDIR_SIG.to_le_bytes());
        central.extend_from_slice(&[20, 3, 20, 0]);
        central.extend_from_slice(&flags.to_le_bytes());
        central.extend_from_slice(&[0, 0, 0, 0, 0x21, 0]);
        central.extend_from_slice(&crc.to_le_bytes());
        central.extend_from_slice(&size.to_le_bytes());
        central.extend_from_slice(&size.to_le_bytes());
        central.extend_from_slice(&(fname.len() as u16).to_le_bytes());
        central.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]); // extra, comment, disk, internal attrs
        central.extend_from_slice(&(0o100644u32 << 16).to_le_bytes()); // external attrs
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(fname.as_bytes());
    }
    let cd_off = out.len() as u32;
    let n = arrays.len() as u16;
    out.extend_from_slice(&central);
    out.extend_from_slice(&EOCD_SIG.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_off.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rasterpack_common::DType;

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
        assert_eq!(info[0].name, "a");
        assert_eq!(info[1].dtype, "<i8");
        assert_eq!(read_array(&z, "b", &l).unwrap().data, b.data);
        for cut in 0..z.len() {
            let _ = describe(&z[..cut], &l);
        }
    }
}
