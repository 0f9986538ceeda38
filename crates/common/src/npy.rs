//! numpy `.npy` files: reading versions 1.0-3.0 (either byte order, C or Fortran order; values
//! come out little-endian in C order) and writing version 1.0 (little-endian, C order), which
//! every numpy since 1.0 loads.

use std::io::Write;

use crate::array::{byte_len, DType, NdArray};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::output::{write_all_at, Output};
use crate::reader::ByteReader;
use crate::stream::{ArrayInfo, ArraySink, ParallelFile, SequentialCursor};

/// The six bytes every `.npy` file starts with.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// What a `.npy` header declares, and where its data starts.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyHeader {
    /// Format version `(major, minor)`: 1.0, 2.0 or 3.0.
    pub version: (u8, u8),
    /// Element type (byte order aside).
    pub dtype: DType,
    /// `>` byte order in the descr: values must be byte-swapped on read ([`DType::swap_to_le`]).
    pub big_endian: bool,
    /// `fortran_order: True`: column-major data (first axis fastest), reordered to C order on
    /// read ([`crate::fortran`]).
    pub fortran_order: bool,
    /// Extent per axis.
    pub shape: Vec<u64>,
    /// Where the data starts (after the padded header).
    pub data_offset: u64,
    /// `product(shape) * itemsize`.
    pub data_len: u64,
}

fn bad(offset: u64, msg: impl Into<String>) -> Error {
    Error::invalid("npy.header", offset, msg)
}

/// Parse the magic, version and header dictionary of a `.npy` file.
pub fn parse_header(bytes: &[u8]) -> Result<NpyHeader> {
    let mut r = ByteReader::new(bytes);
    if r.bytes(6, "npy magic")? != MAGIC {
        return Err(Error::invalid(
            "npy.magic",
            0,
            "not a .npy file (magic \\x93NUMPY missing)",
        ));
    }
    let major = r.u8("npy major version")?;
    let minor = r.u8("npy minor version")?;
    let header_len = match major {
        1 => r.u16_le("npy header length")? as u64,
        2 | 3 => r.u32_le("npy header length")? as u64,
        v => {
            return Err(Error::unsupported(
                "npy.version",
                Some(6),
                format!("npy version {v}.{minor} is not supported"),
            ))
        }
    };
    let text_start = r.offset();
    let text = r.bytes_u64(header_len, "npy header")?;
    let text = std::str::from_utf8(text).map_err(|_| bad(text_start, "npy header is not UTF-8/ASCII"))?;
    let dict = parse_dict(text).map_err(|m| bad(text_start, format!("npy header: {m}")))?;
    let descr = dict.descr.ok_or_else(|| bad(text_start, "npy header has no 'descr'"))?;
    let (dtype, big_endian) = parse_descr(&descr).ok_or_else(|| {
        Error::unsupported(
            "npy.dtype",
            Some(text_start),
            format!("npy dtype {descr:?} is not supported"),
        )
    })?;
    let shape = dict.shape.ok_or_else(|| bad(text_start, "npy header has no 'shape'"))?;
    let data_len = byte_len(dtype, &shape).ok_or_else(|| bad(text_start, "npy shape overflows"))?;
    Ok(NpyHeader {
        version: (major, minor),
        dtype,
        big_endian,
        fortran_order: dict.fortran_order.unwrap_or(false),
        shape,
        data_offset: r.offset(),
        data_len,
    })
}

/// Check that an input of `input_len` bytes holds exactly the data `h` declares.
pub fn check_data(h: &NpyHeader, input_len: u64) -> Result<()> {
    let available = input_len.saturating_sub(h.data_offset);
    if available < h.data_len {
        return Err(Error::truncated("npy data", h.data_offset, h.data_len, available));
    }
    if available > h.data_len {
        return Err(Error::invalid(
            "npy.trailing_bytes",
            h.data_offset + h.data_len,
            format!("{} byte(s) after the array data", available - h.data_len),
        ));
    }
    Ok(())
}

/// Read a whole `.npy` image into an [`NdArray`] (C order, little-endian in memory).
pub fn read(bytes: &[u8], limits: &Limits) -> Result<NdArray> {
    let h = parse_header(bytes)?;
    check_data(&h, bytes.len() as u64)?;
    limits.check_alloc(h.data_len, "npy data", Some(h.data_offset))?;
    let mut data = bytes[h.data_offset as usize..].to_vec();
    if h.big_endian {
        h.dtype.swap_to_le(&mut data);
    }
    if h.fortran_order {
        data = crate::fortran::fortran_to_c(&data, h.dtype.size(), &h.shape)?;
    }
    NdArray::new(h.dtype, h.shape, data)
}

/// The version-1.0 header for `dtype`/`shape`, padded so the data starts on a 64-byte boundary.
pub fn header_bytes(dtype: DType, shape: &[u64]) -> Vec<u8> {
    let shape_text = match shape {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
        ),
    };
    let mut dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape_text}, }}",
        dtype.npy_descr()
    );
    // Version 1.0 header lengths are u16; shapes this long need version 2.0.
    let (major, len_size) = if dict.len() + 12 + 64 > u16::MAX as usize {
        (2u8, 4usize)
    } else {
        (1u8, 2usize)
    };
    let prefix = 6 + 2 + len_size;
    let total = (prefix + dict.len() + 1).div_ceil(64) * 64;
    while prefix + dict.len() + 1 < total {
        dict.push(' ');
    }
    dict.push('\n');
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[major, 0]);
    if major == 1 {
        out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(dict.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out
}

/// Write `array` as a `.npy` file.
pub fn write(out: &mut dyn Write, array: &NdArray) -> std::io::Result<()> {
    out.write_all(&header_bytes(array.dtype, &array.shape))?;
    out.write_all(&array.data)
}

/// A streaming `.npy` writer: the header goes out at [`ArraySink::begin`] (dtype and shape are
/// known up front), the data as it arrives. On a file, writes may come in any order and
/// neighbouring writes are combined into large positioned writes; on a stream they must come in
/// order.
pub struct NpyWriter<'a> {
    out: Output<'a>,
    data_offset: u64,
    data_len: u64,
    cursor: SequentialCursor,
    /// Combined pending bytes for a file: `pending` goes at `pending_at`.
    pending: Vec<u8>,
    pending_at: u64,
    written: u64,
}

/// Pending bytes are flushed once they reach this size.
const COMBINE: usize = 4 << 20;

impl<'a> NpyWriter<'a> {
    /// A writer onto `out`.
    pub fn new(out: Output<'a>) -> NpyWriter<'a> {
        NpyWriter {
            out,
            data_offset: 0,
            data_len: 0,
            cursor: SequentialCursor::default(),
            pending: Vec::new(),
            pending_at: 0,
            written: 0,
        }
    }

    /// Positioned write of data bytes (file outputs only).
    fn write_file(&self, offset: u64, data: &[u8]) -> Result<()> {
        match &self.out {
            Output::File(file) => write_all_at(file, data, self.data_offset + offset),
            Output::Stream(_) => Ok(()),
        }
    }

    fn flush_pending(&mut self) -> Result<()> {
        if !self.pending.is_empty() {
            self.write_file(self.pending_at, &self.pending)?;
            self.pending.clear();
        }
        Ok(())
    }
}

impl ArraySink for NpyWriter<'_> {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        let header = header_bytes(info.dtype, &info.shape);
        self.data_len = info.byte_len()?;
        self.data_offset = header.len() as u64;
        match &mut self.out {
            Output::File(file) => write_all_at(file, &header, 0),
            Output::Stream(w) => w.write_all(&header).map_err(|e| Error::io("writing .npy header", &e)),
        }
    }

    fn random_access(&self) -> bool {
        self.out.is_seekable()
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        if offset
            .checked_add(data.len() as u64)
            .is_none_or(|end| end > self.data_len)
        {
            return Err(Error::usage(format!(
                "internal: a write of {} bytes at {offset} falls outside the {}-byte .npy data",
                data.len(),
                self.data_len
            )));
        }
        if let Output::Stream(w) = &mut self.out {
            self.cursor.advance(offset, data.len())?;
            self.written += data.len() as u64;
            return w.write_all(data).map_err(|e| Error::io("writing .npy data", &e));
        }
        self.written += data.len() as u64;
        let contiguous = !self.pending.is_empty() && self.pending_at + self.pending.len() as u64 == offset;
        if !contiguous {
            self.flush_pending()?;
            if data.len() >= COMBINE {
                return self.write_file(offset, data);
            }
            self.pending_at = offset;
        }
        self.pending.extend_from_slice(data);
        if self.pending.len() >= COMBINE {
            self.flush_pending()?;
        }
        Ok(())
    }

    fn parallel_file(&mut self) -> Option<ParallelFile> {
        match &self.out {
            Output::File(file) => ParallelFile::new(file, self.data_offset, self.data_len).ok(),
            Output::Stream(_) => None,
        }
    }

    fn written_elsewhere(&mut self, len: u64) -> Result<()> {
        // The bound check of each write is ParallelFile's; the total is checked at finish.
        self.written = self.written.saturating_add(len);
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        self.flush_pending()?;
        if self.written != self.data_len {
            return Err(Error::usage(format!(
                "internal: the source delivered {} of {} .npy data bytes",
                self.written, self.data_len
            )));
        }
        if let Output::Stream(w) = &mut self.out {
            w.flush().map_err(|e| Error::io("writing .npy data", &e))?;
        }
        Ok(())
    }
}

fn parse_descr(descr: &str) -> Option<(DType, bool)> {
    let (order, code) = match descr.as_bytes().first()? {
        b'<' | b'=' | b'|' => (false, &descr[1..]),
        b'>' => (true, &descr[1..]),
        _ => (false, descr),
    };
    let dtype = match code {
        "b1" | "?" => DType::Bool,
        "u1" => DType::U8,
        "i1" => DType::I8,
        "u2" => DType::U16,
        "i2" => DType::I16,
        "u4" => DType::U32,
        "i4" => DType::I32,
        "u8" => DType::U64,
        "i8" => DType::I64,
        "f4" => DType::F32,
        "f8" => DType::F64,
        "f2" => DType::F16,
        "c8" => DType::C64,
        "c16" => DType::C128,
        _ => return None,
    };
    Some((dtype, order))
}

#[derive(Default)]
struct Dict {
    descr: Option<String>,
    fortran_order: Option<bool>,
    shape: Option<Vec<u64>>,
}

/// Parse the Python dict literal numpy writes: `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`.
fn parse_dict(text: &str) -> std::result::Result<Dict, String> {
    let mut p = Lit {
        s: text.as_bytes(),
        i: 0,
    };
    let mut dict = Dict::default();
    p.ws();
    p.expect(b'{')?;
    loop {
        p.ws();
        if p.eat(b'}') {
            break;
        }
        let key = p.string()?;
        p.ws();
        p.expect(b':')?;
        p.ws();
        match key.as_str() {
            // A structured dtype is a list (or a tuple for sub-arrays): kept as text, reported
            // unsupported rather than as a broken header.
            "descr" if matches!(p.s.get(p.i), Some(b'[' | b'(')) => dict.descr = Some(p.literal()?),
            "descr" => dict.descr = Some(p.string()?),
            "fortran_order" => dict.fortran_order = Some(p.boolean()?),
            "shape" => dict.shape = Some(p.tuple()?),
            other => return Err(format!("unexpected key {other:?}")),
        }
        p.ws();
        if !p.eat(b',') {
            p.ws();
            p.expect(b'}')?;
            break;
        }
    }
    p.ws();
    if p.i != p.s.len() {
        return Err("text after the dictionary".into());
    }
    Ok(dict)
}

struct Lit<'a> {
    s: &'a [u8],
    i: usize,
}

impl Lit<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, c: u8) -> std::result::Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!("expected '{}' at header byte {}", c as char, self.i))
        }
    }
    fn string(&mut self) -> std::result::Result<String, String> {
        let q = *self.s.get(self.i).ok_or("unexpected end")?;
        if q != b'\'' && q != b'"' {
            return Err(format!("expected a string at header byte {}", self.i));
        }
        self.i += 1;
        let start = self.i;
        while self.i < self.s.len() && self.s[self.i] != q {
            self.i += 1;
        }
        let out = String::from_utf8_lossy(&self.s[start..self.i.min(self.s.len())]).into_owned();
        self.expect(q)?;
        Ok(out)
    }
    /// A bracketed Python literal (`[('a', '<i4')]`), strings skipped whole; returned as text.
    fn literal(&mut self) -> std::result::Result<String, String> {
        let start = self.i;
        let mut depth = 0usize;
        while let Some(&c) = self.s.get(self.i) {
            match c {
                b'\'' | b'"' => {
                    self.string()?;
                    continue;
                }
                b'[' | b'(' | b'{' => depth += 1,
                b']' | b')' | b'}' => {
                    depth = depth.checked_sub(1).ok_or("unbalanced brackets")?;
                    if depth == 0 {
                        self.i += 1;
                        return Ok(String::from_utf8_lossy(&self.s[start..self.i]).into_owned());
                    }
                }
                _ => {}
            }
            self.i += 1;
        }
        Err("unterminated dtype literal".into())
    }
    fn boolean(&mut self) -> std::result::Result<bool, String> {
        if self.s[self.i..].starts_with(b"True") {
            self.i += 4;
            Ok(true)
        } else if self.s[self.i..].starts_with(b"False") {
            self.i += 5;
            Ok(false)
        } else {
            Err("expected True or False".into())
        }
    }
    fn tuple(&mut self) -> std::result::Result<Vec<u64>, String> {
        self.expect(b'(')?;
        let mut dims = Vec::new();
        loop {
            self.ws();
            if self.eat(b')') {
                break;
            }
            let start = self.i;
            while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
                self.i += 1;
            }
            let digits = std::str::from_utf8(&self.s[start..self.i]).map_err(|e| e.to_string())?;
            dims.push(
                digits
                    .parse::<u64>()
                    .map_err(|_| format!("bad dimension at header byte {start}"))?,
            );
            if dims.len() > 64 {
                return Err("more than 64 dimensions".into());
            }
            self.ws();
            if !self.eat(b',') {
                self.ws();
                self.expect(b')')?;
                break;
            }
        }
        Ok(dims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_alignment() {
        for shape in [vec![], vec![5], vec![2, 3, 4]] {
            let n: u64 = shape.iter().product();
            let data: Vec<u8> = (0..n * 4).map(|i| i as u8).collect();
            let arr = NdArray::new(DType::F32, shape.clone(), data).unwrap();
            let mut buf = Vec::new();
            write(&mut buf, &arr).unwrap();
            let h = parse_header(&buf).unwrap();
            assert_eq!(h.data_offset % 64, 0);
            assert_eq!(h.shape, shape);
            assert_eq!(read(&buf, &Limits::default()).unwrap(), arr);
        }
    }

    #[test]
    fn parses_what_numpy_writes() {
        // numpy.save(np.zeros((2,3), '>i2')) header, hand-written.
        let dict = "{'descr': '>i2', 'fortran_order': False, 'shape': (2, 3), }";
        let mut file = b"\x93NUMPY\x01\x00".to_vec();
        file.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        file.extend_from_slice(dict.as_bytes());
        file.extend_from_slice(&[0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6]);
        let arr = read(&file, &Limits::default()).unwrap();
        assert_eq!(arr.dtype, DType::I16);
        assert_eq!(arr.to_f64(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    }

    #[test]
    fn streaming_writer_matches_whole_writer() {
        let shape = vec![3u64, 5];
        let data: Vec<u8> = (0..15u16).flat_map(|v| v.to_le_bytes()).collect();
        let array = NdArray::new(DType::U16, shape.clone(), data.clone()).unwrap();
        let mut whole = Vec::new();
        write(&mut whole, &array).unwrap();

        // Forward-only stream: in order.
        let mut streamed = Vec::new();
        {
            let mut w = NpyWriter::new(Output::Stream(&mut streamed));
            w.begin(&ArrayInfo::new(DType::U16, shape.clone())).unwrap();
            assert!(!w.random_access());
            w.write_at(0, &data[..10]).unwrap();
            assert!(w.write_at(20, &data[20..]).is_err(), "a gap on a stream is refused");
            w.write_at(10, &data[10..]).unwrap();
            w.finish().unwrap();
        }
        assert_eq!(streamed, whole);

        // A file: rows in reverse order, combined and positioned.
        let path = std::env::temp_dir().join(format!("rp-npy-writer-{}", std::process::id()));
        let file = std::fs::File::create(&path).unwrap();
        {
            let mut w = NpyWriter::new(Output::File(&file));
            w.begin(&ArrayInfo::new(DType::U16, shape.clone())).unwrap();
            assert!(w.random_access());
            for row in (0..3).rev() {
                w.write_at(row * 10, &data[row as usize * 10..row as usize * 10 + 10])
                    .unwrap();
            }
            w.finish().unwrap();
        }
        assert_eq!(std::fs::read(&path).unwrap(), whole);

        // Missing bytes are reported at finish.
        let file = std::fs::File::create(&path).unwrap();
        let mut w = NpyWriter::new(Output::File(&file));
        w.begin(&ArrayInfo::new(DType::U16, shape)).unwrap();
        w.write_at(0, &data[..10]).unwrap();
        assert!(w.finish().is_err());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn hostile_headers_are_errors() {
        let mut file = b"\x93NUMPY\x01\x00".to_vec();
        let dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999, 99999999999), }";
        file.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        file.extend_from_slice(dict.as_bytes());
        assert!(read(&file, &Limits::default()).is_err());
        for cut in 0..file.len() {
            assert!(read(&file[..cut], &Limits::default()).is_err());
        }
    }

    #[test]
    fn structured_dtypes_are_unsupported_not_invalid() {
        // What numpy writes for np.zeros(1, [('a', '<i4')]) and a sub-array dtype.
        for descr in ["[('a', '<i4')]", "[('a', '<i4', (2,)), ('b]', '|u1')]", "('<i4', (2,))"] {
            let dict = format!("{{'descr': {descr}, 'fortran_order': False, 'shape': (1,), }}");
            let mut file = b"\x93NUMPY\x01\x00".to_vec();
            file.extend_from_slice(&(dict.len() as u16).to_le_bytes());
            file.extend_from_slice(dict.as_bytes());
            let err = parse_header(&file).unwrap_err();
            assert_eq!(err.kind, crate::ErrorKind::Unsupported, "{descr}: {err}");
            assert!(err.message.contains(descr), "{err}");
        }
        for broken in ["[('a', '<i4')", "[('a', '<i4'))]", "['a]"] {
            let dict = format!("{{'descr': {broken}, 'fortran_order': False, 'shape': (1,), }}");
            let mut file = b"\x93NUMPY\x01\x00".to_vec();
            file.extend_from_slice(&(dict.len() as u16).to_le_bytes());
            file.extend_from_slice(dict.as_bytes());
            let err = parse_header(&file).unwrap_err();
            assert_eq!(err.kind, crate::ErrorKind::Invalid, "{broken}: {err}");
        }
    }
}
