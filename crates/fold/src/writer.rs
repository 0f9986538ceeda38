//! `convert` to FOLD as the data arrives: one NPZ0 chunk `nuclear_arrays` holding the array,
//! written while the source decodes it.
//!
//! Everything about the archive is known up front but the member's CRC-32, so the member is
//! written as Python's zipfile writes one to a stream: the sizes in the local header, the
//! CRC-32 in a data descriptor after the data (flag bit 3). The archive passes through zstd
//! (or not), and the stored bytes through CRC32C, SHA-256 and the Reed-Solomon parity as they
//! are written. On a file the chunk and file headers, whose lengths and checksums are known
//! only at the end, are written last at their places; on a stream the stored payload is
//! collected (bounded by the limits: it is the compressed size) and written at the end.

use std::fs::File;
use std::io::Write;

use rasterpack_common::output::write_all_at;
use rasterpack_common::{npy, ArrayInfo, ArraySink, Error, Limits, Output, Result};
use sha2::{Digest, Sha256};
use zstd::zstd_safe::zstd_sys::ZSTD_EndDirective;
use zstd::zstd_safe::{CCtx, CParameter, InBuffer, OutBuffer};

use crate::ecc::Rs;
use crate::npz::StreamedMember;
use crate::pjson::Value;
use crate::raw::{ChunkHeader, FileHeader, CHUNK_HEADER_LEN, FLAG_NONE, FLAG_ZSTD, HEADER_LEN, MAGIC, MAX_CHUNK_SIZE};
use crate::write::{check_array_name, multi_block_note, FoldBuilder, FoldChunkOptions, FoldCompression, IndexRecord};

/// Name of the chunk `convert` writes.
pub const ARRAY_CHUNK: &str = "nuclear_arrays";

/// Where the file goes: positioned writes on a file, or a buffer written out at the end.
enum Dest<'a> {
    File(&'a File),
    Collect {
        buf: Vec<u8>,
        out: &'a mut dyn Write,
        limits: Limits,
    },
}

impl Dest<'_> {
    fn write_at(&mut self, offset: u64, bytes: &[u8]) -> Result<()> {
        match self {
            Dest::File(f) => write_all_at(f, bytes, offset),
            Dest::Collect { buf, limits, .. } => {
                let end = offset
                    .checked_add(bytes.len() as u64)
                    .ok_or_else(|| Error::usage("FOLD output too large"))?;
                if end > buf.len() as u64 {
                    limits.check_alloc(end, "FOLD output collected for a stream", None)?;
                    buf.resize(end as usize, 0);
                }
                buf[offset as usize..end as usize].copy_from_slice(bytes);
                Ok(())
            }
        }
    }
}

/// The stored bytes on their way out: hashed, parity computed, written in large pieces.
struct StoredOut {
    pos: u64,
    pending: Vec<u8>,
    crc: u32,
    sha: Sha256,
    rs: Option<Rs>,
    block: Vec<u8>,
    parity: Vec<u8>,
    limits: Limits,
}

const FLUSH: usize = 1 << 20;

impl StoredOut {
    fn push(&mut self, dest: &mut Dest<'_>, mut b: &[u8]) -> Result<()> {
        self.crc = crc32c::crc32c_append(self.crc, b);
        self.sha.update(b);
        if let Some(rs) = &self.rs {
            while !b.is_empty() {
                let take = (rs.k() - self.block.len()).min(b.len());
                self.block.extend_from_slice(&b[..take]);
                self.pending.extend_from_slice(&b[..take]);
                b = &b[take..];
                if self.block.len() == rs.k() {
                    self.parity.extend_from_slice(&rs.parity(&self.block));
                    self.block.clear();
                    self.limits
                        .check_alloc(self.parity.len() as u64, "Reed-Solomon parity being written", None)?;
                }
            }
        } else {
            self.pending.extend_from_slice(b);
        }
        if self.pending.len() >= FLUSH {
            self.flush(dest)?;
        }
        Ok(())
    }

    fn flush(&mut self, dest: &mut Dest<'_>) -> Result<()> {
        if !self.pending.is_empty() {
            dest.write_at(self.pos, &self.pending)?;
            self.pos += self.pending.len() as u64;
            self.pending.clear();
        }
        Ok(())
    }
}

/// The archive's bytes on their way into the stored payload.
enum Encoder {
    Plain,
    Zstd(Box<CCtx<'static>>, Vec<u8>),
}

/// The array sink of [`crate::FoldFormat`]'s `array_writer`.
pub struct FoldArrayWriter<'a> {
    dest: Dest<'a>,
    opts: FoldChunkOptions,
    limits: Limits,
    state: Option<Writing>,
}

struct Writing {
    member: StreamedMember,
    builder: FoldBuilder,
    encoder: Encoder,
    stored: StoredOut,
    /// Archive bytes encoded so far, and the whole archive's length.
    archive_pos: u64,
    archive_len: u64,
    /// Array data bytes received, and expected.
    received: u64,
    data_len: u64,
    zip_crc: crc32fast::Hasher,
}

impl<'a> FoldArrayWriter<'a> {
    /// A writer onto `out` with chunk options `opts`.
    pub(crate) fn new(out: Output<'a>, opts: FoldChunkOptions, limits: Limits) -> FoldArrayWriter<'a> {
        let dest = match out {
            Output::File(f) => Dest::File(f),
            Output::Stream(w) => Dest::Collect {
                buf: Vec::new(),
                out: w,
                limits,
            },
        };
        FoldArrayWriter {
            dest,
            opts,
            limits,
            state: None,
        }
    }

    fn writing(&mut self) -> Result<&mut Writing> {
        self.state
            .as_mut()
            .ok_or_else(|| Error::usage("internal: FOLD writer used before begin"))
    }

    /// Archive bytes into the encoder and out as stored bytes.
    fn archive(dest: &mut Dest<'_>, w: &mut Writing, bytes: &[u8], end: bool) -> Result<()> {
        w.archive_pos += bytes.len() as u64;
        match &mut w.encoder {
            Encoder::Plain => w.stored.push(dest, bytes),
            Encoder::Zstd(cctx, out) => {
                let mut input = InBuffer::around(bytes);
                loop {
                    let mut ob = OutBuffer::around(&mut out[..]);
                    let directive = if end {
                        ZSTD_EndDirective::ZSTD_e_end
                    } else {
                        ZSTD_EndDirective::ZSTD_e_continue
                    };
                    let left = cctx
                        .compress_stream2(&mut ob, &mut input, directive)
                        .map_err(|c| Error::usage(format!("zstd: {}", zstd::zstd_safe::get_error_name(c))))?;
                    let n = ob.pos();
                    w.stored.push(dest, &out[..n])?;
                    let done = if end { left == 0 } else { input.pos() == bytes.len() };
                    if done {
                        return Ok(());
                    }
                }
            }
        }
    }
}

impl ArraySink for FoldArrayWriter<'_> {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        let name = info
            .name
            .clone()
            .filter(|n| check_array_name(n).is_ok() && !n.contains('/'))
            .unwrap_or_else(|| "arr_0".into());
        let header = npy::header_bytes(info.dtype, &info.shape);
        let data_len = info.byte_len()?;
        let content = data_len + header.len() as u64;
        let member_probe = StreamedMember::new(&name, 0);
        let archive_len =
            member_probe.local_header().len() as u64 + content + 16 + member_probe.directory(0, 0).len() as u64;
        if archive_len > MAX_CHUNK_SIZE {
            return Err(Error::usage(format!(
                "chunk {ARRAY_CHUNK:?}: the array needs {archive_len} bytes, above the 1 GiB FOLD chunk limit"
            )));
        }
        let member = StreamedMember::new(&name, content as u32);
        let mut builder = FoldBuilder::new();
        builder.metadata("writer", Value::str(concat!("rasterpack ", env!("CARGO_PKG_VERSION"))))?;
        if !info.attrs.is_empty() {
            builder.metadata(
                "source_attrs",
                Value::from_serde(&serde_json::Value::Object(info.attrs.clone())),
            )?;
        }
        let encoder = match self.opts.compression {
            FoldCompression::None => Encoder::Plain,
            FoldCompression::Zstd(level) => {
                let mut cctx = CCtx::create();
                let zerr = |c| Error::usage(format!("zstd: {}", zstd::zstd_safe::get_error_name(c)));
                cctx.set_parameter(CParameter::CompressionLevel(level)).map_err(zerr)?;
                cctx.set_parameter(CParameter::ContentSizeFlag(true)).map_err(zerr)?;
                cctx.set_pledged_src_size(Some(archive_len)).map_err(zerr)?;
                Encoder::Zstd(Box::new(cctx), vec![0u8; CCtx::out_size()])
            }
        };
        let rs = match self.opts.ecc {
            None => None,
            Some(n) => Some(
                Rs::new(n as usize).ok_or_else(|| Error::usage(format!("rs({n}) is not a valid Reed-Solomon code")))?,
            ),
        };
        let mut w = Writing {
            member,
            builder,
            encoder,
            stored: StoredOut {
                pos: HEADER_LEN + CHUNK_HEADER_LEN,
                pending: Vec::with_capacity(FLUSH + (1 << 17)),
                crc: 0,
                sha: Sha256::new(),
                rs,
                block: Vec::new(),
                parity: Vec::new(),
                limits: self.limits,
            },
            archive_pos: 0,
            archive_len,
            received: 0,
            data_len,
            zip_crc: crc32fast::Hasher::new(),
        };
        // Header places are reserved; they are written last.
        self.dest
            .write_at(0, &[0u8; (HEADER_LEN + CHUNK_HEADER_LEN) as usize])?;
        let local = w.member.local_header();
        w.zip_crc.update(&header);
        Self::archive(&mut self.dest, &mut w, &local, false)?;
        Self::archive(&mut self.dest, &mut w, &header, false)?;
        self.state = Some(w);
        Ok(())
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let mut state = self.state.take();
        let result = (|| {
            let w = state
                .as_mut()
                .ok_or_else(|| Error::usage("internal: FOLD writer used before begin"))?;
            if offset != w.received || w.received + data.len() as u64 > w.data_len {
                return Err(Error::usage(format!(
                    "internal: the FOLD writer got bytes at {offset} while at {} of {}",
                    w.received, w.data_len
                )));
            }
            w.received += data.len() as u64;
            w.zip_crc.update(data);
            Self::archive(&mut self.dest, w, data, false)
        })();
        self.state = state;
        result
    }

    fn finish(&mut self) -> Result<()> {
        self.writing()?;
        let Some(mut w) = self.state.take() else {
            return Err(Error::usage("internal: FOLD writer used before begin"));
        };
        if w.received != w.data_len {
            return Err(Error::usage(format!(
                "internal: the source delivered {} of {} bytes",
                w.received, w.data_len
            )));
        }
        let crc = std::mem::replace(&mut w.zip_crc, crc32fast::Hasher::new()).finalize();
        let descriptor = w.member.descriptor(crc);
        Self::archive(&mut self.dest, &mut w, &descriptor, false)?;
        let directory = w.member.directory(crc, w.archive_pos as u32);
        Self::archive(&mut self.dest, &mut w, &directory, true)?;
        if w.archive_pos != w.archive_len {
            return Err(Error::usage("internal: the archive's length is not what was planned"));
        }
        w.stored.flush(&mut self.dest)?;
        // The last, short Reed-Solomon block.
        let mut stored = w.stored;
        if let Some(rs) = &stored.rs {
            if !stored.block.is_empty() {
                let p = rs.parity(&stored.block);
                stored.parity.extend_from_slice(&p);
            }
        }
        let payload_off = HEADER_LEN + CHUNK_HEADER_LEN;
        let comp_len = stored.pos - payload_off;
        let ecc_len = stored.parity.len() as u64;
        self.dest.write_at(stored.pos, &stored.parity)?;
        let chunk_header = ChunkHeader {
            ctype: *b"NPZ0",
            flags: match self.opts.compression {
                FoldCompression::None => FLAG_NONE,
                FoldCompression::Zstd(_) => FLAG_ZSTD,
            },
            uncomp_len: w.archive_len,
            comp_len,
            crc32c: stored.crc,
            ecc_len: u32::try_from(ecc_len).map_err(|_| Error::usage("ECC bytes above 4 GiB"))?,
        };
        if comp_len > MAX_CHUNK_SIZE {
            return Err(Error::usage(format!(
                "chunk {ARRAY_CHUNK:?}: compressed payload exceeds the 1 GiB chunk limit"
            )));
        }
        let sha = crate::validate::hex(&stored.sha.finalize());
        let ecc_algo = stored
            .rs
            .as_ref()
            .map_or("none".to_string(), |rs| format!("rs({})", rs.nsym()));
        let record = IndexRecord {
            name: ARRAY_CHUNK,
            ctype: "NPZ0",
            header: chunk_header,
            sha256: &sha,
            ecc_algo: &ecc_algo,
            offset: HEADER_LEN,
        };
        let text = w.builder.index_text(std::slice::from_ref(&record))?;
        let index_off = stored.pos + ecc_len;
        self.dest.write_at(index_off, text.as_bytes())?;
        let file_header = FileHeader {
            magic: MAGIC,
            header_len: HEADER_LEN as u32,
            index_off,
            index_len: text.len() as u64,
        };
        self.dest.write_at(HEADER_LEN, &chunk_header.to_bytes())?;
        self.dest.write_at(0, &file_header.to_bytes())?;
        if let Some(rs) = &stored.rs {
            if comp_len > rs.k() as u64 {
                eprintln!("rasterpack: note: {}", multi_block_note(ARRAY_CHUNK, comp_len, rs));
            }
        }
        if let Dest::Collect { buf, out, .. } = &mut self.dest {
            out.write_all(buf)
                .and_then(|_| out.flush())
                .map_err(|e| Error::io("writing FOLD output", &e))?;
        }
        Ok(())
    }
}
