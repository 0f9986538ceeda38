//! Writing a `.npz` of several arrays as they stream: one member `<name>.npy` per array, written
//! as its values arrive (never held), in the layout Python's zipfile writes for `np.savez`
//! with `force_zip64` (numpy's choice for large members), zip64 throughout:
//!
//! - each local header carries a zip64 extra field with both sizes (`0xFFFFFFFF` in the 32-bit
//!   fields), so a member of any size has room for them; the sizes of a stored member are
//!   known when it begins (the `.npy` header plus the array's bytes);
//! - the CRC-32 is only known once the last byte went by: on a file it is written into the
//!   local header afterwards (a positioned write, as zipfile seeks back); on a stream (an
//!   upload, a pipe) the local header says so (flag bit 3) and a zip64 data descriptor after
//!   the data carries it (and, deflated, the sizes), as zipfile does on an unseekable file;
//! - every central directory entry has a zip64 extra field (sizes and local header offset)
//!   and the end of the archive has the zip64 end record and locator, so any size or count
//!   fits and readers take one path whatever the archive's size.
//!
//! With deflate (`np.savez_compressed`), each member is compressed through a small buffer
//! (miniz_oxide, zlib's default level, as zipfile's `ZIP_DEFLATED`).

use miniz_oxide::deflate::core::{
    compress, create_comp_flags_from_zip_params, CompressorOxide, TDEFLFlush, TDEFLStatus,
};
use rasterpack_common::{npy, output::write_all_at, ArrayInfo, ArraySink, Error, Output, Result};

use super::zip::{CDIR_SIG, EOCD_SIG, FLAG_DESCRIPTOR, FLAG_UTF8, LOCAL_SIG, ZIP64_EOCD_SIG, ZIP64_LOCATOR_SIG};

/// Data descriptor signature.
const DESCRIPTOR_SIG: u32 = 0x0807_4b50;
/// "Version needed to extract" of zip64 members (4.5).
const ZIP64_VERSION: u16 = 45;
/// Output written in pieces of about this size.
const BUFFER: usize = 1 << 20;

/// Compression of the members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NpzCompression {
    /// Stored members (`np.savez`).
    #[default]
    Stored,
    /// Deflated members (`np.savez_compressed`).
    Deflate,
}

impl NpzCompression {
    /// From `--compress`: none (or not given) stores, `deflate` deflates.
    pub fn parse(spec: Option<&str>) -> Result<NpzCompression> {
        match spec.map(str::to_ascii_lowercase).as_deref() {
            None | Some("none") | Some("stored") => Ok(NpzCompression::Stored),
            Some("deflate") | Some("zip") => Ok(NpzCompression::Deflate),
            Some(other) => Err(Error::usage(format!(
                "unknown npz compression {other:?} (none as np.savez, or deflate as np.savez_compressed)"
            ))),
        }
    }

    fn method(self) -> u16 {
        match self {
            NpzCompression::Stored => 0,
            NpzCompression::Deflate => 8,
        }
    }
}

/// The member name (without `.npy`) under which an array of name `name` (or the `index`-th
/// unnamed array) is written: the name as the source gives it, so `np.load(f)[name]` finds
/// it, `/` included (numpy takes `"a/b"` as a key). Characters no zip reader keeps as they are
/// are replaced by `_`: NUL (Python's zipfile cuts a name there) and the other control
/// characters, and `\` (a folder separator to Windows tools); so are path components that
/// are empty, `.` or `..` (a tool that extracts the archive would leave its folder). An
/// unnamed array is `arr_INDEX`, as `np.savez` names positional arrays.
pub fn member_name(name: Option<&str>, index: usize) -> String {
    let Some(name) = name else {
        return format!("arr_{index}");
    };
    name.split('/')
        .map(|part| match part {
            "" | "." => "_".to_string(),
            ".." => "__".to_string(),
            _ => part
                .chars()
                .map(|c| if c.is_control() || c == '\\' { '_' } else { c })
                .collect(),
        })
        .collect::<Vec<String>>()
        .join("/")
}

/// A member written so far, for the central directory.
struct Entry {
    fname: String,
    flags: u16,
    crc: u32,
    comp_size: u64,
    size: u64,
    offset: u64,
}

/// The member being written.
struct Open {
    entry: Entry,
    /// Array bytes expected, and received so far (in order).
    data_len: u64,
    received: u64,
    crc: crc32fast::Hasher,
    deflate: Option<Box<CompressorOxide>>,
}

/// Writes a `.npz` onto an [`Output`]: [`NpzWriter::member`] gives the sink of each array in
/// turn, [`NpzWriter::finish`] writes the central directory. Each member's sink takes the
/// array's bytes in ascending order (it is not random-access: the CRC-32 is computed as they
/// pass).
pub struct NpzWriter<'a> {
    out: Output<'a>,
    compression: NpzCompression,
    /// Bytes of the archive written so far (including `buf`).
    pos: u64,
    buf: Vec<u8>,
    entries: Vec<Entry>,
    open: Option<Open>,
    /// Member names (without `.npy`) taken so far.
    names: std::collections::HashSet<String>,
}

impl<'a> NpzWriter<'a> {
    /// A writer onto `out` (a file must be empty).
    pub fn new(out: Output<'a>, compression: NpzCompression) -> NpzWriter<'a> {
        NpzWriter {
            out,
            compression,
            pos: 0,
            buf: Vec::with_capacity(BUFFER),
            entries: Vec::new(),
            open: None,
            names: std::collections::HashSet::new(),
        }
    }

    /// The sink of the next member, `<name>.npy` ([`member_name`] makes `name` from an
    /// array's). A name already written is refused.
    pub fn member(&mut self, name: &str) -> Result<NpzMember<'_, 'a>> {
        if self.open.is_some() {
            return Err(Error::usage("internal: a member begun before the last one finished"));
        }
        if !self.names.insert(name.to_string()) {
            return Err(Error::unsupported(
                "npz.name",
                None,
                format!("two arrays would both be the member {name:?}.npy of the .npz"),
            ));
        }
        Ok(NpzMember {
            writer: self,
            name: format!("{name}.npy"),
        })
    }

    fn emit(&mut self, bytes: &[u8]) -> Result<()> {
        self.pos += bytes.len() as u64;
        if self.buf.len() + bytes.len() > BUFFER {
            self.flush_buf()?;
        }
        if bytes.len() >= BUFFER {
            return self.put(bytes);
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    fn flush_buf(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            let buf = std::mem::take(&mut self.buf);
            self.put(&buf)?;
            self.buf = buf;
            self.buf.clear();
        }
        Ok(())
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.out
            .as_write()
            .write_all(bytes)
            .map_err(|e| Error::io("writing .npz", &e))
    }

    /// Stored bytes of the open member (compressed first when deflating).
    fn member_bytes(&mut self, data: &[u8], last: bool) -> Result<()> {
        let Some(open) = self.open.as_mut() else {
            return Err(Error::usage("internal: member data outside a member"));
        };
        open.crc.update(data);
        let Some(mut c) = open.deflate.take() else {
            open.entry.comp_size += data.len() as u64;
            return self.emit(data);
        };
        let mut out = vec![0u8; 256 << 10];
        let mut input = data;
        let flush = if last { TDEFLFlush::Finish } else { TDEFLFlush::None };
        let result = loop {
            let (status, used, made) = compress(&mut c, input, &mut out, flush);
            input = &input[used..];
            if let Some(open) = self.open.as_mut() {
                open.entry.comp_size += made as u64;
            }
            if let Err(e) = self.emit(&out[..made]) {
                break Err(e);
            }
            match status {
                TDEFLStatus::Done => break Ok(()),
                TDEFLStatus::Okay if input.is_empty() && made < out.len() && !last => break Ok(()),
                TDEFLStatus::Okay => continue,
                TDEFLStatus::BadParam | TDEFLStatus::PutBufFailed => {
                    break Err(Error::usage(format!("internal: deflate failed ({status:?})")))
                }
            }
        };
        if let Some(open) = self.open.as_mut() {
            open.deflate = Some(c);
        }
        result
    }

    /// The central directory and the end records; the archive is complete.
    pub fn finish(mut self) -> Result<()> {
        if self.open.is_some() {
            return Err(Error::usage("internal: the .npz ended inside a member"));
        }
        let cd_offset = self.pos;
        let mut cd = Vec::new();
        for e in &self.entries {
            cd.extend_from_slice(&CDIR_SIG.to_le_bytes());
            cd.extend_from_slice(&(0x0300 | ZIP64_VERSION).to_le_bytes()); // made by: Unix, 4.5
            cd.extend_from_slice(&ZIP64_VERSION.to_le_bytes());
            cd.extend_from_slice(&e.flags.to_le_bytes());
            cd.extend_from_slice(&self.compression.method().to_le_bytes());
            cd.extend_from_slice(&[0, 0, 0x21, 0]); // DOS time and date: 1980-01-01 00:00
            cd.extend_from_slice(&e.crc.to_le_bytes());
            cd.extend_from_slice(&u32::MAX.to_le_bytes());
            cd.extend_from_slice(&u32::MAX.to_le_bytes());
            cd.extend_from_slice(&(e.fname.len() as u16).to_le_bytes());
            cd.extend_from_slice(&28u16.to_le_bytes()); // extra: the zip64 field
            cd.extend_from_slice(&[0, 0, 0, 0, 0, 0]); // comment length, disk, internal attributes
            cd.extend_from_slice(&(0o100644u32 << 16).to_le_bytes());
            cd.extend_from_slice(&u32::MAX.to_le_bytes());
            cd.extend_from_slice(e.fname.as_bytes());
            cd.extend_from_slice(&1u16.to_le_bytes());
            cd.extend_from_slice(&24u16.to_le_bytes());
            cd.extend_from_slice(&e.size.to_le_bytes());
            cd.extend_from_slice(&e.comp_size.to_le_bytes());
            cd.extend_from_slice(&e.offset.to_le_bytes());
        }
        let count = self.entries.len() as u64;
        let zip64_end = cd_offset + cd.len() as u64;
        cd.extend_from_slice(&ZIP64_EOCD_SIG.to_le_bytes());
        cd.extend_from_slice(&44u64.to_le_bytes());
        cd.extend_from_slice(&(0x0300 | ZIP64_VERSION).to_le_bytes());
        cd.extend_from_slice(&ZIP64_VERSION.to_le_bytes());
        cd.extend_from_slice(&[0; 8]); // this disk, the directory's disk
        cd.extend_from_slice(&count.to_le_bytes());
        cd.extend_from_slice(&count.to_le_bytes());
        cd.extend_from_slice(&(zip64_end - cd_offset).to_le_bytes());
        cd.extend_from_slice(&cd_offset.to_le_bytes());
        cd.extend_from_slice(&ZIP64_LOCATOR_SIG.to_le_bytes());
        cd.extend_from_slice(&0u32.to_le_bytes());
        cd.extend_from_slice(&zip64_end.to_le_bytes());
        cd.extend_from_slice(&1u32.to_le_bytes());
        // The end record points at the zip64 one for every figure.
        cd.extend_from_slice(&EOCD_SIG.to_le_bytes());
        cd.extend_from_slice(&[0; 4]);
        cd.extend_from_slice(&u16::MAX.to_le_bytes());
        cd.extend_from_slice(&u16::MAX.to_le_bytes());
        cd.extend_from_slice(&u32::MAX.to_le_bytes());
        cd.extend_from_slice(&u32::MAX.to_le_bytes());
        cd.extend_from_slice(&0u16.to_le_bytes());
        self.emit(&cd)?;
        self.flush_buf()?;
        self.out.as_write().flush().map_err(|e| Error::io("writing .npz", &e))
    }
}

/// The sink of one member ([`NpzWriter::member`]); `finish` ends the member.
pub struct NpzMember<'w, 'a> {
    writer: &'w mut NpzWriter<'a>,
    name: String,
}

impl NpzWriter<'_> {
    /// Begin member `fname` (`<name>.npy`) of the array `info` describes: its local header
    /// and `.npy` header.
    fn begin_member(&mut self, fname: &str, info: &ArrayInfo) -> Result<()> {
        let w = self;
        if w.open.is_some() {
            return Err(Error::usage("internal: a member begun twice"));
        }
        let header = npy::header_bytes(info.dtype, &info.shape);
        let data_len = info.byte_len()?;
        let size = data_len
            .checked_add(header.len() as u64)
            .ok_or_else(|| Error::usage("internal: member size overflows"))?;
        let stream = !w.out.is_seekable();
        let deflate = w.compression == NpzCompression::Deflate;
        // Python's zipfile marks names that are not ASCII as UTF-8.
        let mut flags = if fname.is_ascii() { 0 } else { FLAG_UTF8 };
        if stream {
            flags |= FLAG_DESCRIPTOR;
        }
        let entry = Entry {
            fname: fname.to_string(),
            flags,
            crc: 0,
            comp_size: 0,
            size,
            offset: w.pos,
        };
        let mut local = Vec::with_capacity(30 + entry.fname.len() + 20);
        local.extend_from_slice(&LOCAL_SIG.to_le_bytes());
        local.extend_from_slice(&ZIP64_VERSION.to_le_bytes());
        local.extend_from_slice(&flags.to_le_bytes());
        local.extend_from_slice(&w.compression.method().to_le_bytes());
        local.extend_from_slice(&[0, 0, 0x21, 0]);
        local.extend_from_slice(&0u32.to_le_bytes()); // CRC-32: after the data
        local.extend_from_slice(&u32::MAX.to_le_bytes());
        local.extend_from_slice(&u32::MAX.to_le_bytes());
        local.extend_from_slice(&(entry.fname.len() as u16).to_le_bytes());
        local.extend_from_slice(&20u16.to_le_bytes());
        local.extend_from_slice(entry.fname.as_bytes());
        local.extend_from_slice(&1u16.to_le_bytes());
        local.extend_from_slice(&16u16.to_le_bytes());
        local.extend_from_slice(&size.to_le_bytes());
        // A stored member's size is known now; a deflated one's is written after it (or in
        // the descriptor).
        local.extend_from_slice(&(if deflate { 0 } else { size }).to_le_bytes());
        w.emit(&local)?;
        w.open = Some(Open {
            entry,
            data_len,
            received: 0,
            crc: crc32fast::Hasher::new(),
            deflate: deflate.then(|| Box::new(CompressorOxide::new(create_comp_flags_from_zip_params(6, -15, 0)))),
        });
        w.member_bytes(&header, data_len == 0)
    }

    /// The array's bytes from `offset`, in order.
    fn member_data(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let w = self;
        if data.is_empty() {
            // Nothing to add (and a finished deflate stream must not be fed again).
            return Ok(());
        }
        let Some(open) = w.open.as_mut() else {
            return Err(Error::usage("internal: member data before its header"));
        };
        if offset != open.received {
            return Err(Error::usage(format!(
                "internal: .npz member data at {offset}, expected at {} (in order)",
                open.received
            )));
        }
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|&e| e <= open.data_len)
            .ok_or_else(|| Error::usage("internal: .npz member data past the array's size"))?;
        open.received = end;
        let last = end == open.data_len;
        w.member_bytes(data, last)
    }

    /// End the member: its CRC-32 into the local header, or a data descriptor.
    fn end_member(&mut self) -> Result<()> {
        let w = self;
        let Some(open) = w.open.take() else {
            return Err(Error::usage("internal: a member finished before it began"));
        };
        if open.received != open.data_len {
            return Err(Error::usage(format!(
                "internal: the source delivered {} of {} array bytes",
                open.received, open.data_len
            )));
        }
        let mut entry = open.entry;
        entry.crc = open.crc.finalize();
        if w.out.is_seekable() {
            w.flush_buf()?;
        }
        match &w.out {
            Output::File(file) => {
                // Back into the local header: its CRC-32, and a deflated member's size.
                write_all_at(file, &entry.crc.to_le_bytes(), entry.offset + 14)?;
                if w.compression == NpzCompression::Deflate {
                    let at = entry.offset + 30 + entry.fname.len() as u64 + 12;
                    write_all_at(file, &entry.comp_size.to_le_bytes(), at)?;
                }
            }
            Output::Stream(_) => {
                let mut d = Vec::with_capacity(24);
                d.extend_from_slice(&DESCRIPTOR_SIG.to_le_bytes());
                d.extend_from_slice(&entry.crc.to_le_bytes());
                d.extend_from_slice(&entry.comp_size.to_le_bytes());
                d.extend_from_slice(&entry.size.to_le_bytes());
                w.emit(&d)?;
            }
        }
        w.entries.push(entry);
        Ok(())
    }
}

impl ArraySink for NpzMember<'_, '_> {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        self.writer.begin_member(&self.name, info)
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.writer.member_data(offset, data)
    }
    fn finish(&mut self) -> Result<()> {
        self.writer.end_member()
    }
}

/// The `.npz` of one array ([`rasterpack_common::Format::array_writer`]): one member named
/// after the array ([`member_name`]), then the directory.
pub struct SingleNpz<'a> {
    writer: Option<NpzWriter<'a>>,
}

impl<'a> SingleNpz<'a> {
    /// A one-array `.npz` onto `out`.
    pub fn new(out: Output<'a>, compression: NpzCompression) -> SingleNpz<'a> {
        SingleNpz {
            writer: Some(NpzWriter::new(out, compression)),
        }
    }

    fn writer(&mut self) -> Result<&mut NpzWriter<'a>> {
        self.writer
            .as_mut()
            .ok_or_else(|| Error::usage("internal: the .npz was already finished"))
    }
}

impl ArraySink for SingleNpz<'_> {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        let name = member_name(info.name.as_deref(), 0);
        let w = self.writer()?;
        w.names.insert(name.clone());
        w.begin_member(&format!("{name}.npy"), info)
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.writer()?.member_data(offset, data)
    }
    fn finish(&mut self) -> Result<()> {
        self.writer()?.end_member()?;
        match self.writer.take() {
            Some(w) => w.finish(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_names_map_only_what_readers_cannot_keep() {
        assert_eq!(member_name(None, 3), "arr_3");
        assert_eq!(member_name(Some("elevation"), 0), "elevation");
        assert_eq!(member_name(Some("survey/Table 1"), 0), "survey/Table 1");
        assert_eq!(member_name(Some("höhe"), 0), "höhe");
        assert_eq!(member_name(Some("/a//b/./../c"), 0), "_/a/_/b/_/__/c");
        assert_eq!(member_name(Some("a\0b\\c\n"), 0), "a_b_c_");
        assert_eq!(member_name(Some(""), 0), "_");
    }
}
