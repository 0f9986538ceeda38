//! The fast path of the `.npz` check for an archive that streams by (the decoded zstd stream
//! of an NPZ0 chunk): local headers and member data are walked in the order they come, and
//! the central directory, which comes last, is cross-checked at the end. One pass, for the
//! archives numpy writes; anything else is left to [`super::walk::CdWalk`], which needs the
//! directory first.

use rasterpack_common::{npy, Limits, Result};

use super::zip::{
    decode_name, directory_in, le16, le32, le64, Directory, END_RECORDS_MAX, FLAG_DESCRIPTOR, FLAG_ENCRYPTED,
    LOCAL_SIG, MAX_DIRECTORY,
};
use super::{array_name, descr, NpzArrayInfo};

/// Kept `.npy` header bytes per member in [`StreamCheck`].
const NPY_PREFIX: usize = 64 << 10;
/// Most bytes after the last member (central directory and end records) [`StreamCheck`] keeps,
/// and the most it keeps of the end of an archive it could not follow.
const TAIL_MAX: usize = (MAX_DIRECTORY + END_RECORDS_MAX) as usize;
/// Signature that may start a data descriptor.
const DESCRIPTOR_SIG: u32 = 0x0807_4b50;
/// Most `.npy` header bytes kept over all members.
const PREFIX_BUDGET: usize = 16 << 20;
/// Archives with more members are left to the in-memory check.
const MAX_STREAM_MEMBERS: u64 = 1 << 16;

/// One member as its local header and data showed it while streaming.
struct Local {
    offset: u64,
    /// The name bytes of the local header, and its general-purpose flags.
    name: Vec<u8>,
    flags: u16,
    /// Sizes in the data descriptor are 8 bytes (the local header has a zip64 field).
    zip64: bool,
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
    /// A data descriptor after the member's data: its bytes so far.
    Descriptor,
    /// Central directory and end records.
    Tail,
}

/// Incremental `.npz` check of an archive fed in pieces (the decoded zstd stream of an NPZ0
/// chunk): local headers and member data are walked in order (CRC-32 as the data passes,
/// deflate members inflated through a small buffer, the `.npy` header kept), the central
/// directory is kept (bounded) and cross-checked at the end (offsets, methods, sizes, CRCs,
/// names). [`StreamCheck::finish`] gives what [`super::describe`] gives for the whole archive,
/// or `None` when streaming cannot tell (any damage, data descriptors without sizes in the
/// local header, unusual layouts, limits): the caller then walks the archive again against
/// its directory, so findings are always those of [`super::describe`].
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
    /// Bytes of the data descriptor being read.
    desc: Vec<u8>,
    /// The local index of the member whose content goes to a [`ContentTap`], once chosen.
    tapped: Option<usize>,
    /// The current member's content goes to the tap.
    tapping: bool,
}

/// Receives one member's content as a [`StreamCheck`] walks the archive (a read that checks
/// the whole archive and extracts one member in the same pass). What it receives counts only
/// if the check vouches for the archive at the end.
pub(crate) trait ContentTap {
    /// A member starts: its index among the local headers, its raw name and flags, and the
    /// content size its local header declares. True to receive its content (the first member
    /// taken is the only one).
    fn start(&mut self, index: usize, name: &[u8], flags: u16, declared: u64) -> bool;
    /// Content bytes of the member at content offset `at`, in order.
    fn content(&mut self, at: u64, bytes: &[u8]);
}

/// The tap of a plain check.
struct NoTap;

impl ContentTap for NoTap {
    fn start(&mut self, _: usize, _: &[u8], _: u16, _: u64) -> bool {
        false
    }
    fn content(&mut self, _: u64, _: &[u8]) {}
}

/// What a [`StreamCheck`] concluded.
pub(crate) enum StreamVerdict {
    /// The archive is what the members and directory say: [`super::describe`]'s answer, and
    /// the directory.
    Vouched(Vec<NpzArrayInfo>, Directory),
    /// It could not follow the archive: the directory from the archive's last bytes (or why
    /// it could not be read), for a walk against it.
    Directory(Result<Directory>),
}

impl StreamCheck {
    /// A check bounded by `limits`.
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
            desc: Vec::new(),
            tapped: None,
            tapping: false,
        }
    }

    /// The next bytes of the archive.
    pub fn feed(&mut self, data: &[u8]) {
        self.feed_tapped(data, &mut NoTap)
    }

    /// The local index of the member whose content went to the tap, if one was taken.
    pub(crate) fn tapped(&self) -> Option<usize> {
        self.tapped
    }

    /// [`StreamCheck::feed`], with the content of the member `tap` takes going to it.
    pub(crate) fn feed_tapped(&mut self, mut data: &[u8], tap: &mut dyn ContentTap) {
        while !data.is_empty() {
            if self.failed {
                self.keep_end(data);
                return;
            }
            match self.phase {
                Phase::Header => {
                    let used = self.header_bytes(data, tap);
                    data = &data[used..];
                }
                Phase::Data(left) => {
                    let n = usize::try_from(left).unwrap_or(usize::MAX).min(data.len());
                    let (now, rest) = data.split_at(n);
                    self.member_bytes(now, tap);
                    if self.failed {
                        // The kept end starts with these bytes, so it stays contiguous.
                        self.tail.clear();
                        self.tail_base = self.pos;
                        self.keep_end(data);
                        return;
                    }
                    self.pos = self.pos.saturating_add(n as u64);
                    data = rest;
                    let left = left - n as u64;
                    self.phase = Phase::Data(left);
                    if left == 0 {
                        self.end_data();
                    }
                }
                Phase::Descriptor => {
                    let used = self.descriptor_bytes(data);
                    data = &data[used..];
                }
                Phase::Tail => {
                    if self.tail.len().saturating_add(data.len()) > TAIL_MAX {
                        self.fail();
                        continue;
                    }
                    self.tail.extend_from_slice(data);
                    self.pos = self.pos.saturating_add(data.len() as u64);
                    data = &[];
                }
            }
        }
    }

    /// Streaming cannot vouch for the archive: from here on only its last bytes are kept (the
    /// directory and end records, for a walk against the directory).
    fn fail(&mut self) {
        if self.failed {
            return;
        }
        self.failed = true;
        let mut kept = std::mem::take(&mut self.tail);
        kept.extend_from_slice(&std::mem::take(&mut self.hdr));
        kept.extend_from_slice(&std::mem::take(&mut self.desc));
        self.tail_base = self.pos.saturating_sub(kept.len() as u64);
        self.tail = kept;
        self.cur = None;
        self.inflate = None;
        self.locals = Vec::new();
        self.trim_end();
    }

    /// Keep the last [`TAIL_MAX`] bytes of what streams by after a failure.
    fn keep_end(&mut self, data: &[u8]) {
        self.pos = self.pos.saturating_add(data.len() as u64);
        if data.len() >= TAIL_MAX {
            self.tail.clear();
            self.tail.extend_from_slice(&data[data.len() - TAIL_MAX..]);
        } else {
            self.tail.extend_from_slice(data);
        }
        self.tail_base = self.pos - self.tail.len() as u64;
        if self.tail.len() >= 2 * TAIL_MAX {
            self.trim_end();
        }
    }

    fn trim_end(&mut self) {
        if self.tail.len() > TAIL_MAX {
            let cut = self.tail.len() - TAIL_MAX;
            self.tail.drain(..cut);
            self.tail_base += cut as u64;
        }
    }

    /// Consume header bytes; returns how many of `data` were used.
    fn header_bytes(&mut self, data: &[u8], tap: &mut dyn ContentTap) -> usize {
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
        let offset = self.pos.saturating_sub(self.hdr.len() as u64);
        if self.start_member(offset, tap).is_none() {
            self.fail();
        } else {
            self.hdr.clear();
        }
        used
    }

    fn start_member(&mut self, offset: u64, tap: &mut dyn ContentTap) -> Option<()> {
        let h = &self.hdr;
        let flags = le16(h, 6)?;
        let method = le16(h, 8)?;
        let mut comp = le32(h, 18)? as u64;
        let mut uncomp = le32(h, 22)? as u64;
        let nlen = le16(h, 26)? as usize;
        let name = h.get(30..30 + nlen)?.to_vec();
        let extra = h.get(30 + nlen..)?;
        // Encrypted members are described by the walk (unsupported, never read).
        if (method != 0 && method != 8) || flags & FLAG_ENCRYPTED != 0 {
            return None;
        }
        let zip64 = comp == 0xFFFF_FFFF || uncomp == 0xFFFF_FFFF;
        if zip64 {
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
        // A data descriptor (bit 3) can only be followed when the local header still gives
        // the stored size (rasterpack's streaming writer does; Python's on a pipe writes 0).
        if flags & FLAG_DESCRIPTOR != 0 && comp == 0 && uncomp != 0 {
            return None;
        }
        if self.locals.len() as u64 >= self.limits.max_entries.min(MAX_STREAM_MEMBERS) {
            return None;
        }
        self.limits.check_alloc(uncomp, "npz member", None).ok()?;
        if method == 0 && comp != uncomp {
            return None;
        }
        self.crc = crc32fast::Hasher::new();
        self.tapping = self.tapped.is_none() && tap.start(self.locals.len(), &name, flags, uncomp);
        if self.tapping {
            self.tapped = Some(self.locals.len());
        }
        self.inflate =
            (method == 8).then(|| miniz_oxide::inflate::stream::InflateState::new_boxed(miniz_oxide::DataFormat::Raw));
        self.cur = Some(Local {
            offset,
            name,
            flags,
            zip64,
            method,
            comp_size: comp,
            produced: 0,
            crc: 0,
            prefix: Vec::new(),
            complete: method == 0,
        });
        self.phase = Phase::Data(comp);
        if comp == 0 {
            self.end_data();
        }
        Some(())
    }

    /// A member's data has passed: a data descriptor follows when flag bit 3 says so.
    fn end_data(&mut self) {
        if self.cur.as_ref().is_some_and(|c| c.flags & FLAG_DESCRIPTOR != 0) {
            self.desc.clear();
            self.phase = Phase::Descriptor;
        } else {
            self.end_member();
        }
    }

    /// Bytes of a data descriptor: an optional signature, the CRC-32 and both sizes (4 or 8
    /// bytes each), which must be what the data showed. Returns how many of `data` it used.
    fn descriptor_bytes(&mut self, data: &[u8]) -> usize {
        let Some(zip64) = self.cur.as_ref().map(|c| c.zip64) else {
            self.fail();
            return 0;
        };
        let mut used = 0;
        loop {
            let signed = self.desc.len() >= 4 && le32(&self.desc, 0) == Some(DESCRIPTOR_SIG);
            let need = if self.desc.len() < 4 {
                4
            } else {
                (if signed { 4 } else { 0 }) + 4 + if zip64 { 16 } else { 8 }
            };
            if self.desc.len() >= need {
                break;
            }
            let take = (need - self.desc.len()).min(data.len() - used);
            if take == 0 {
                self.pos = self.pos.saturating_add(used as u64);
                return used;
            }
            self.desc.extend_from_slice(&data[used..used + take]);
            used += take;
        }
        self.pos = self.pos.saturating_add(used as u64);
        let d = std::mem::take(&mut self.desc);
        let body = if le32(&d, 0) == Some(DESCRIPTOR_SIG) {
            &d[4..]
        } else {
            &d[..]
        };
        let crc = le32(body, 0);
        let (comp, size) = if zip64 {
            (le64(body, 4), le64(body, 12))
        } else {
            (le32(body, 4).map(u64::from), le32(body, 8).map(u64::from))
        };
        self.end_member();
        let ok = self
            .locals
            .last()
            .is_some_and(|l| Some(l.crc) == crc && Some(l.comp_size) == comp && Some(l.produced) == size);
        if !ok {
            self.fail();
        }
        used
    }

    /// Content bytes of the current member.
    fn content(
        cur: &mut Local,
        crc: &mut crc32fast::Hasher,
        kept: &mut usize,
        b: &[u8],
        tap: Option<&mut dyn ContentTap>,
    ) {
        if let Some(tap) = tap {
            if !b.is_empty() {
                tap.content(cur.produced, b);
            }
        }
        crc.update(b);
        cur.produced = cur.produced.saturating_add(b.len() as u64);
        if cur.prefix.len() < NPY_PREFIX {
            let n = (NPY_PREFIX - cur.prefix.len()).min(b.len());
            cur.prefix.extend_from_slice(&b[..n]);
            *kept = kept.saturating_add(n);
        }
    }

    /// Stored bytes of the current member.
    fn member_bytes(&mut self, mut b: &[u8], tap: &mut dyn ContentTap) {
        let Some(cur) = self.cur.as_mut() else {
            self.fail();
            return;
        };
        let tapping = self.tapping;
        let Some(st) = self.inflate.as_mut() else {
            Self::content(cur, &mut self.crc, &mut self.kept, b, tapping.then_some(&mut *tap));
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
            Self::content(
                cur,
                &mut self.crc,
                &mut self.kept,
                &self.out[..r.bytes_written],
                tapping.then_some(&mut *tap),
            );
            match r.status {
                Ok(MZStatus::StreamEnd) => cur.complete = true,
                Ok(_) | Err(MZError::Buf) => {
                    if r.bytes_consumed == 0 && r.bytes_written == 0 {
                        break;
                    }
                }
                Err(_) => {
                    self.fail();
                    return;
                }
            }
            // Bounded: more than the limits allow is left to the in-memory check.
            if cur.produced > self.limits.max_alloc {
                self.fail();
                return;
            }
            if b.is_empty() && r.bytes_written < self.out.len() {
                break;
            }
        }
    }

    fn end_member(&mut self) {
        match self.cur.take() {
            Some(mut cur) => {
                cur.crc = std::mem::replace(&mut self.crc, crc32fast::Hasher::new()).finalize();
                self.inflate = None;
                self.tapping = false;
                self.locals.push(cur);
                self.phase = Phase::Header;
            }
            None => self.fail(),
        }
        if self.kept > PREFIX_BUDGET {
            self.fail();
        }
    }

    /// What [`super::describe`] says of the whole archive, when streaming can tell it.
    pub fn finish(self) -> Option<Vec<NpzArrayInfo>> {
        match self.conclude() {
            StreamVerdict::Vouched(v, _) => Some(v),
            StreamVerdict::Directory(_) => None,
        }
    }

    /// The verdict, or the directory for a walk against it.
    pub(crate) fn conclude(mut self) -> StreamVerdict {
        if !self.failed && !matches!(self.phase, Phase::Tail) {
            self.fail();
        }
        let dir = directory_in(&self.tail, self.tail_base, &self.limits);
        if self.failed {
            return StreamVerdict::Directory(dir);
        }
        match (self.vouch(dir.as_ref().ok()), dir) {
            (Some(v), Ok(dir)) => StreamVerdict::Vouched(v, dir),
            (_, dir) => StreamVerdict::Directory(dir),
        }
    }

    fn vouch(&self, dir: Option<&Directory>) -> Option<Vec<NpzArrayInfo>> {
        let cd = &dir?.members;
        if cd.len() != self.locals.len() {
            return None;
        }
        let mut out = Vec::with_capacity(cd.len());
        let mut names = std::collections::HashSet::with_capacity(cd.len());
        for (m, loc) in cd.iter().zip(&self.locals) {
            let size = self.limits.check_alloc(m.uncomp_size, "npz member", None).ok()? as u64;
            if m.local_offset != loc.offset
                || m.method != loc.method
                || m.comp_size != loc.comp_size
                || !loc.complete
                || loc.produced != size
                || (m.method == 0 && m.comp_size != m.uncomp_size)
                || m.crc32 != loc.crc
                || m.flags & FLAG_ENCRYPTED != 0
                || decode_name(&loc.name, m.flags).ok().as_deref() != Some(m.name.as_str())
            {
                return None;
            }
            // Repeated names are described by the walk.
            if !names.insert(array_name(&m.name)) {
                return None;
            }
            let h = npy::parse_header(&loc.prefix).ok()?;
            let avail = size - h.data_offset.min(size);
            if avail != h.data_len {
                return None;
            }
            out.push(NpzArrayInfo {
                dtype: Some(h.dtype),
                descr: descr(h.dtype, h.big_endian),
                shape: h.shape,
                ..NpzArrayInfo::named(array_name(&m.name))
            });
        }
        Some(out)
    }
}
