//! Bytes -> [`crate::raw`] structures. Every size and offset read from the file is checked
//! (against the record, the file size and the [`Limits`]) before it is used or allocated; a
//! failure is an [`Error`] carrying the absolute offset. Judging values (reserved bytes, CRCs,
//! identifier syntax, ...) is left to `validate`.

use rasterpack_common::{ByteReader, Error, Input, Limits, Result};

use crate::raw::*;

/// Smallest legal record: 8-byte prefix + 4-byte CRC, rounded to 8.
pub const MIN_RECORD_LEN: u64 = 16;

fn string(r: &mut ByteReader<'_>, field: &str) -> Result<RawString> {
    let offset = r.offset();
    let n = r.u16_le(field)?;
    let bytes = r.bytes(n as usize, field)?.to_vec();
    Ok(RawString { offset, bytes })
}

fn tail(r: &ByteReader<'_>) -> (u64, Vec<u8>) {
    (r.offset(), r.rest().to_vec())
}

fn pad_to_4(r: &mut ByteReader<'_>, field: &str) -> Result<(u64, Vec<u8>)> {
    let at = r.offset();
    let rem = at % 4;
    let n = if rem == 0 { 0 } else { (4 - rem) as usize };
    Ok((at, r.bytes(n, field)?.to_vec()))
}

/// The identification block (bytes 0..16): magic, version, reserved.
pub fn parse_id(head: &[u8]) -> Result<(u8, u8, [u8; 2])> {
    let mut r = ByteReader::new(head);
    let magic = r.bytes(12, "identification")?;
    if magic != MAGIC {
        return Err(Error::invalid(
            "gvrs.id.magic",
            0,
            "the file does not start with \"gvrs raster\\0\"",
        ));
    }
    let major = r.u8("version")?;
    let minor = r.u8("sub-version")?;
    let reserved = r.array::<2>("reserved identification bytes")?;
    Ok((major, minor, reserved))
}

/// Read and parse the header record (the whole record is read; its size is checked first).
pub fn read_header(input: &Input, limits: &Limits) -> Result<Header> {
    let mut first = [0u8; 24];
    input.read_at(0, &mut first, "identification block and header record prefix")?;
    parse_id(&first)?;
    let len = i32::from_le_bytes([first[16], first[17], first[18], first[19]]);
    let len = check_record_length(len, HEADER_RECORD_START, input.len())?;
    if len < 284 - HEADER_RECORD_START + 4 + 2 + 8 + 4 {
        return Err(Error::invalid(
            "gvrs.header.length",
            HEADER_RECORD_START,
            format!("header record length {len} is too small for the fixed fields"),
        ));
    }
    let bytes = input.read_vec(0, HEADER_RECORD_START + len, "header record", limits)?;
    parse_header(&bytes).map_err(|e| {
        // A header that does not parse and whose CRC (checksums on, file closed) does not match
        // is damaged: say so rather than name the field the damage happened to hit.
        let checksums = bytes[128] != 0;
        let closed = bytes[48..56].iter().all(|&b| b == 0);
        let (stored, computed) = record_crc(&bytes[HEADER_RECORD_START as usize..]);
        if checksums && closed && stored != computed {
            Error::invalid(
                "gvrs.header.crc_mismatch",
                HEADER_RECORD_START + len - 4,
                format!(
                    "CRC32C of the header record is 0x{computed:08x}, stored 0x{stored:08x}: the header is damaged ({})",
                    e.message
                ),
            )
        } else {
            e
        }
    })
}

/// A record length read from the file: positive, and the record must lie inside the file.
fn check_record_length(len: i32, start: u64, file_len: u64) -> Result<u64> {
    if (len as i64) < MIN_RECORD_LEN as i64 {
        return Err(Error::invalid(
            "gvrs.record.length",
            start,
            format!("record length {len} is below the minimum of 16"),
        ));
    }
    let len = len as u64;
    if start.checked_add(len).is_none_or(|e| e > file_len) {
        return Err(Error::invalid(
            "gvrs.record.outside_file",
            start,
            format!("record of {len} bytes at offset {start} ends past the end of the file ({file_len} bytes)"),
        ));
    }
    Ok(len)
}

/// Parse the header from the file's first `16 + header length` bytes.
pub fn parse_header(bytes: &[u8]) -> Result<Header> {
    let (version_major, version_minor, id_reserved) = parse_id(bytes)?;
    let mut r = ByteReader::at(bytes.get(16..).unwrap_or(&[]), 16);
    let record = record_header_from(&mut r, 16)?;
    let len = record.length.max(0) as usize;
    let total = 16usize.checked_add(len).filter(|&t| t <= bytes.len() && len >= 16);
    let Some(total) = total else {
        return Err(Error::truncated(
            "header record",
            16,
            len as u64,
            bytes.len() as u64 - 16,
        ));
    };
    // Parse the body without the CRC so fields can never run into it.
    let body_end = total - 4;
    let mut r = ByteReader::at(&bytes[24..body_end], 24);
    let mut uuid_bytes = [0u8; 16];
    uuid_bytes.copy_from_slice(r.bytes(16, "UUID")?);
    let time_modified = r.i64_le("time modified")?;
    let time_opened_for_writing = r.i64_le("time opened for writing")?;
    let offset_file_space_directory = r.i64_le("file-space directory offset")?;
    let offset_metadata_directory = r.i64_le("metadata directory offset")?;
    let levels = r.i16_le("number of levels")?;
    let reserved_74 = r.array::<6>("reserved header bytes")?;
    let offset_tile_directory = r.i64_le("tile directory offset")?;
    let reserved_88 = r.array::<16>("reserved header bytes")?;
    let rows = r.i32_le("rows in raster")?;
    let cols = r.i32_le("columns in raster")?;
    let tile_rows = r.i32_le("rows in tile")?;
    let tile_cols = r.i32_le("columns in tile")?;
    let reserved_120 = r.array::<8>("reserved header bytes")?;
    let checksums = r.u8("checksum flag")?;
    let raster_space = r.u8("raster space")?;
    let coordinate_system = r.u8("coordinate system")?;
    let reserved_131 = r.array::<5>("reserved header bytes")?;
    let x0 = r.f64_le("x0")?;
    let y0 = r.f64_le("y0")?;
    let x1 = r.f64_le("x1")?;
    let y1 = r.f64_le("y1")?;
    let cell_size_x = r.f64_le("cell size x")?;
    let cell_size_y = r.f64_le("cell size y")?;
    let mut m2r = [0f64; 6];
    for v in &mut m2r {
        *v = r.f64_le("model-to-raster transform")?;
    }
    let mut r2m = [0f64; 6];
    for v in &mut r2m {
        *v = r.f64_le("raster-to-model transform")?;
    }
    let count_offset = r.offset();
    let element_count = r.i32_le("element count")?;
    if element_count < 0 {
        return Err(Error::invalid(
            "gvrs.header.element_count",
            count_offset,
            format!("negative element count {element_count}"),
        ));
    }
    let mut elements = Vec::new();
    for _ in 0..element_count {
        elements.push(parse_element(&mut r)?);
    }
    let codec_count_offset = r.offset();
    let codec_count = r.i32_le("codec count")?;
    if codec_count < 0 {
        return Err(Error::invalid(
            "gvrs.header.codec_count",
            codec_count_offset,
            format!("negative codec count {codec_count}"),
        ));
    }
    let mut codecs = Vec::new();
    for _ in 0..codec_count {
        codecs.push(string(&mut r, "codec name")?);
    }
    let product_label = string(&mut r, "product label")?;
    let tail = tail(&r);
    let crc_offset = body_end as u64;
    let crc = u32::from_le_bytes([
        bytes[body_end],
        bytes[body_end + 1],
        bytes[body_end + 2],
        bytes[body_end + 3],
    ]);
    Ok(Header {
        version_major,
        version_minor,
        id_reserved,
        record,
        uuid_bytes,
        time_modified,
        time_opened_for_writing,
        offset_file_space_directory,
        offset_metadata_directory,
        levels,
        reserved_74,
        offset_tile_directory,
        reserved_88,
        rows,
        cols,
        tile_rows,
        tile_cols,
        reserved_120,
        checksums,
        raster_space,
        coordinate_system,
        reserved_131,
        x0,
        y0,
        x1,
        y1,
        cell_size_x,
        cell_size_y,
        m2r,
        r2m,
        element_count,
        elements,
        codec_count_offset,
        codec_count,
        codecs,
        product_label,
        tail,
        crc_offset,
        crc,
    })
}

fn parse_element(r: &mut ByteReader<'_>) -> Result<ElementSpec> {
    let offset = r.offset();
    let type_byte = r.u8("element type")?;
    let element_type = ElementType::from_u8(type_byte).ok_or_else(|| {
        Error::invalid(
            "gvrs.element.type",
            offset,
            format!("unknown element type {type_byte} (0..=3 are defined)"),
        )
    })?;
    let continuous = r.u8("element continuous flag")?;
    let reserved = r.array::<6>("reserved element bytes")?;
    let name = string(r, "element name")?;
    let pad_before_range = pad_to_4(r, "element padding")?;
    let range_offset = r.offset();
    let range = match element_type {
        ElementType::Integer => ElementRange::Integer {
            min: r.i32_le("element min")?,
            max: r.i32_le("element max")?,
            fill: r.i32_le("element fill")?,
        },
        ElementType::Float => ElementRange::Float {
            min: r.f32_le("element min")?,
            max: r.f32_le("element max")?,
            fill: r.f32_le("element fill")?,
        },
        ElementType::IntCodedFloat => ElementRange::IntCodedFloat {
            min: r.f32_le("element min")?,
            max: r.f32_le("element max")?,
            fill: r.f32_le("element fill")?,
            scale: r.f32_le("element scale")?,
            offset: r.f32_le("element offset")?,
            min_int: r.i32_le("element integer min")?,
            max_int: r.i32_le("element integer max")?,
            fill_int: r.i32_le("element integer fill")?,
        },
        ElementType::Short => ElementRange::Short {
            min: r.i16_le("element min")?,
            max: r.i16_le("element max")?,
            fill: r.i16_le("element fill")?,
        },
    };
    let label = string(r, "element label")?;
    let description = string(r, "element description")?;
    let unit = string(r, "element unit")?;
    let pad_after = pad_to_4(r, "element padding")?;
    Ok(ElementSpec {
        offset,
        element_type,
        continuous,
        reserved,
        name,
        pad_before_range,
        range_offset,
        range,
        label,
        description,
        unit,
        pad_after,
    })
}

fn record_header_from(r: &mut ByteReader<'_>, start: u64) -> Result<RecordHeader> {
    let length = r.i32_le("record length")?;
    let record_type = r.u8("record type")?;
    let reserved = r.array::<3>("reserved record bytes")?;
    Ok(RecordHeader {
        start,
        length,
        record_type,
        reserved,
    })
}

/// Read the 8-byte prefix of the record starting at `start`.
pub fn read_record_header(input: &Input, start: u64) -> Result<RecordHeader> {
    let mut b = [0u8; 8];
    input.read_at(start, &mut b, "record header")?;
    record_header_from(&mut ByteReader::at(&b, start), start)
}

/// Where a directory points: a content offset, which must leave room for the record prefix.
pub fn record_start_of(content_offset: i64, field_offset: u64, what: &str) -> Result<u64> {
    if content_offset < 8 {
        return Err(Error::invalid(
            "gvrs.record.outside_file",
            field_offset,
            format!("{what} reference {content_offset} cannot point at record content"),
        ));
    }
    Ok(content_offset as u64 - 8)
}

/// Read and check a record prefix: the expected type, a length inside the file and at most
/// `max_len`. Returns the prefix and the checked length.
pub fn read_record_prefix(
    input: &Input,
    start: u64,
    expected: RecordType,
    max_len: u64,
) -> Result<(RecordHeader, u64)> {
    let rec = read_record_header(input, start)?;
    if rec.record_type != expected as u8 {
        let found = RecordType::from_u8(rec.record_type).map_or("an unknown record type", |t| t.name());
        return Err(Error::invalid(
            format!("gvrs.{}.record_type", expected.area()),
            start + 4,
            format!(
                "expected a {} (type {}) at offset {start}, found {found} (type {})",
                expected.name(),
                expected as u8,
                rec.record_type
            ),
        ));
    }
    let len = check_record_length(rec.length, start, input.len())?;
    if len > max_len {
        return Err(Error::invalid(
            format!("gvrs.{}.length", expected.area()),
            start,
            format!(
                "{} length {len} exceeds the largest possible size {max_len}",
                expected.name()
            ),
        ));
    }
    Ok((rec, len))
}

/// Read a whole record: prefix checked by [`read_record_prefix`], then the record bytes
/// (record start first).
pub fn read_record(
    input: &Input,
    start: u64,
    expected: RecordType,
    max_len: u64,
    limits: &Limits,
) -> Result<(RecordHeader, Vec<u8>)> {
    let (rec, len) = read_record_prefix(input, start, expected, max_len)?;
    let bytes = input.read_vec(start, len, expected.name(), limits)?;
    Ok((rec, bytes))
}

fn crc_of(bytes: &[u8]) -> u32 {
    let n = bytes.len();
    if n < 4 {
        return 0;
    }
    u32::from_le_bytes([bytes[n - 4], bytes[n - 3], bytes[n - 2], bytes[n - 1]])
}

/// The body of a record (after the 8-byte prefix, before the CRC) as a reader.
fn body(bytes: &[u8], start: u64) -> ByteReader<'_> {
    let end = bytes.len().saturating_sub(4).max(8.min(bytes.len()));
    ByteReader::at(bytes.get(8..end).unwrap_or(&[]), start + 8)
}

/// Parse a tile directory record (`bytes` = the whole record).
pub fn parse_tile_directory(rec: RecordHeader, bytes: &[u8], limits: &Limits) -> Result<TileDirectory> {
    let mut r = body(bytes, rec.start);
    let format = r.u8("tile directory format")?;
    let standard_references = r.u8("standard references flag")?;
    let reserved = r.array::<6>("reserved tile directory bytes")?;
    let row0 = r.i32_le("tile directory row0")?;
    let col0 = r.i32_le("tile directory col0")?;
    let dims_offset = r.offset();
    let n_rows = r.i32_le("tile directory rows")?;
    let n_cols = r.i32_le("tile directory columns")?;
    if n_rows < 0 || n_cols < 0 {
        return Err(Error::invalid(
            "gvrs.tile_directory.dimensions",
            dims_offset,
            format!("negative tile directory dimensions {n_rows} x {n_cols}"),
        ));
    }
    let count = (n_rows as u64) * (n_cols as u64);
    let size: u64 = if standard_references != 0 { 8 } else { 4 };
    if count > limits.max_entries || count * size > r.remaining() as u64 {
        return Err(Error::invalid(
            "gvrs.tile_directory.dimensions",
            dims_offset,
            format!(
                "{n_rows} x {n_cols} tile directory entries do not fit in the record ({} bytes left)",
                r.remaining()
            ),
        ));
    }
    let entries_offset = r.offset();
    let mut entries = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let v = if standard_references != 0 {
            r.i64_le("tile reference")?
        } else {
            r.u32_le("tile reference")? as i64 * 8
        };
        entries.push(v);
    }
    Ok(TileDirectory {
        record: rec,
        format,
        standard_references,
        reserved,
        row0,
        col0,
        n_rows,
        n_cols,
        entries_offset,
        entries,
        tail: tail(&r),
        crc: crc_of(bytes),
    })
}

/// Parse a metadata directory record.
pub fn parse_metadata_directory(rec: RecordHeader, bytes: &[u8], limits: &Limits) -> Result<MetadataDirectory> {
    let mut r = body(bytes, rec.start);
    let count_offset = r.offset();
    let count = r.i32_le("metadata record count")?;
    // An entry takes at least 15 bytes: a count that cannot fit is refused before looping.
    if count < 0 || count as u64 > limits.max_entries || count as u64 * 15 > r.remaining() as u64 {
        return Err(Error::invalid(
            "gvrs.metadata_directory.count",
            count_offset,
            format!(
                "metadata record count {count} does not fit in the directory ({} bytes left)",
                r.remaining()
            ),
        ));
    }
    let mut entries = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let offset = r.offset();
        let content_offset = r.i64_le("metadata reference")?;
        let name = string(&mut r, "metadata name")?;
        let record_id = r.i32_le("metadata record id")?;
        let data_type = r.u8("metadata type")?;
        entries.push(MetadataDirEntry {
            offset,
            content_offset,
            name,
            record_id,
            data_type,
        });
    }
    Ok(MetadataDirectory {
        record: rec,
        count,
        entries,
        tail: tail(&r),
        crc: crc_of(bytes),
    })
}

/// Parse a metadata record.
pub fn parse_metadata_record(rec: RecordHeader, bytes: &[u8]) -> Result<MetadataRecord> {
    let mut r = body(bytes, rec.start);
    let name = string(&mut r, "metadata name")?;
    let record_id = r.i32_le("metadata record id")?;
    let data_type = r.u8("metadata type")?;
    let reserved = r.array::<3>("reserved metadata bytes")?;
    let len_offset = r.offset();
    let content_length = r.i32_le("metadata content length")?;
    if content_length < 0 || content_length as usize > r.remaining() {
        return Err(Error::invalid(
            "gvrs.metadata.content_length",
            len_offset,
            format!(
                "metadata content length {content_length} does not fit in the record ({} bytes left)",
                r.remaining()
            ),
        ));
    }
    let content_offset = r.offset();
    let content = r.bytes(content_length as usize, "metadata content")?.to_vec();
    // Gridfour sizes records with empty content 4 bytes short: the description's
    // tail may be lost to the CRC. Keep what fits instead of refusing the record.
    let desc_offset = r.offset();
    let (description, description_truncated) = if content_length == 0 && r.remaining() < 2 {
        (
            RawString {
                offset: desc_offset,
                bytes: Vec::new(),
            },
            true,
        )
    } else {
        let n = r.u16_le("metadata description")? as usize;
        if n > r.remaining() && content_length == 0 {
            let got = r.rest().to_vec();
            r.skip(got.len(), "metadata description")?;
            (
                RawString {
                    offset: desc_offset,
                    bytes: got,
                },
                true,
            )
        } else {
            (
                RawString {
                    offset: desc_offset,
                    bytes: r.bytes(n, "metadata description")?.to_vec(),
                },
                false,
            )
        }
    };
    Ok(MetadataRecord {
        record: rec,
        name,
        record_id,
        data_type,
        reserved,
        content_length,
        content_offset,
        content,
        description,
        description_truncated,
        tail: tail(&r),
        crc: crc_of(bytes),
    })
}

/// Parse a file-space directory record.
pub fn parse_file_space_directory(rec: RecordHeader, bytes: &[u8], limits: &Limits) -> Result<FileSpaceDirectory> {
    let mut r = body(bytes, rec.start);
    let count_offset = r.offset();
    let count = r.i32_le("free-space record count")?;
    if count < 0 || count as u64 > limits.max_entries || count as u64 * 12 > r.remaining() as u64 {
        return Err(Error::invalid(
            "gvrs.file_space_directory.count",
            count_offset,
            format!(
                "free-space record count {count} does not fit in the directory ({} bytes left)",
                r.remaining()
            ),
        ));
    }
    let mut entries = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let offset = r.offset();
        let position = r.i64_le("free-space record position")?;
        let size = r.i32_le("free-space record size")?;
        entries.push(FreeSpaceEntry { offset, position, size });
    }
    Ok(FileSpaceDirectory {
        record: rec,
        count,
        entries,
        tail: tail(&r),
        crc: crc_of(bytes),
    })
}

/// Parse a tile record's layout: the tile index and each element's block. `block_max[e]` is the
/// uncompressed size of element `e`'s block (a stored block is never longer).
pub fn parse_tile_record(rec: RecordHeader, bytes: &[u8], block_max: &[u64]) -> Result<TileRecord> {
    let mut r = body(bytes, rec.start);
    let tile_index = r.i32_le("tile index")?;
    let mut blocks = Vec::with_capacity(block_max.len());
    for (e, &max) in block_max.iter().enumerate() {
        let at = r.offset();
        let n = r.i32_le("tile element length")?;
        if n <= 0 || n as u64 > max {
            return Err(Error::invalid(
                "gvrs.tile.block_length",
                at,
                format!("element {e} block length {n} is outside 1..={max} (its uncompressed size)"),
            ));
        }
        if n as usize > r.remaining() {
            return Err(Error::invalid(
                "gvrs.tile.block_length",
                at,
                format!("element {e} block of {n} bytes runs past the tile record's end"),
            ));
        }
        let rel = (r.offset() - rec.start) as usize;
        r.skip(n as usize, "tile element block")?;
        blocks.push((rel, n as usize));
    }
    let blocks_end = (r.offset() - rec.start) as usize;
    Ok(TileRecord {
        record: rec,
        tile_index,
        blocks,
        blocks_end,
    })
}

/// (stored, computed) CRC32C of a record whose CRC covers every byte before it.
pub fn record_crc(bytes: &[u8]) -> (u32, u32) {
    let n = bytes.len().saturating_sub(4);
    (crc_of(bytes), crc32c::crc32c(&bytes[..n]))
}
