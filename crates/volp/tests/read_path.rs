//! The read path (`read_array`, what `convert` runs) makes every check that protects the bytes
//! it hands out (issue 11, item 16): each protected structure is damaged in turn; the read
//! fails with the finding `validate` reports (exit 1), never with values.
//! (`robustness.rs` adds the blanket property: decode succeeds exactly when validate finds no
//! error, over every truncation and every flipped byte.)

mod common;

use common::validate;
use rasterpack_common::Format;
use rasterpack_volp::{ArrayRequest, ErrorKind, Input, Severity, VolpFormat};

const HEADER: &str = r#"{"version":1,"shape":[1,2,2],"dtype":"float32","scale":1.0,"offset":0.0,"compression":"zstd"}"#;
const VALUES: [f32; 4] = [1.0, 2.0, 3.0, 4.0];

fn le(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// A zstd frame with a content checksum (XXH64, low 4 bytes at its end) and a content size.
fn frame_with_checksum(data: &[u8]) -> Vec<u8> {
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    enc.include_checksum(true).unwrap();
    enc.set_pledged_src_size(Some(data.len() as u64)).unwrap();
    std::io::Write::write_all(&mut enc, data).unwrap();
    enc.finish().unwrap()
}

fn file(header: &str, body: &[u8]) -> Vec<u8> {
    common::file(header.as_bytes(), body)
}

fn body_offset() -> usize {
    8 + HEADER.len()
}

fn base() -> Vec<u8> {
    file(HEADER, &frame_with_checksum(&le(&VALUES)))
}

fn read(bytes: &[u8], physical: bool) -> rasterpack_common::Result<rasterpack_common::NdArray> {
    let req = ArrayRequest {
        physical,
        ..Default::default()
    };
    VolpFormat.read_array(&Input::from_bytes("t.volp", bytes.to_vec()), &req)
}

/// The read (stored and physical) fails with `code` as an invalid or truncated file (exit 1),
/// and validate reports it.
#[track_caller]
fn refused(bytes: &[u8], code: &str) {
    let errors: Vec<String> = validate(bytes)
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| f.code.clone())
        .collect();
    assert!(
        errors.iter().any(|e| e == code),
        "validate: want {code}, got {errors:?}"
    );
    for physical in [false, true] {
        let e = read(bytes, physical).expect_err("damaged data must not be read");
        assert!(
            matches!(e.kind, ErrorKind::Invalid | ErrorKind::Truncated),
            "exit 1: {e}"
        );
        assert_eq!(e.code, code, "{e}");
    }
}

#[test]
fn the_intact_file_reads_and_its_checksum_is_there() {
    let b = base();
    let frame = &b[body_offset()..];
    assert_eq!(frame[4] & 0x04, 0x04, "the frame descriptor sets the checksum flag");
    assert!(validate(&b).is_empty());
    let a = read(&b, false).unwrap();
    assert_eq!(a.data, le(&VALUES));
}

#[test]
fn prefix_and_header() {
    let b = base();
    let mut m = b.clone();
    m[0] = b'X';
    refused(&m, "volp.magic");
    let mut m = b.clone();
    m[4..8].copy_from_slice(&0u32.to_le_bytes());
    refused(&m, "volp.header.len_out_of_range");
    let mut m = b.clone();
    m[4..8].copy_from_slice(&(HEADER.len() as u32 + 1000).to_le_bytes());
    refused(&m, "volp.header.truncated");
    let e = read(&b[..6], false).unwrap_err();
    assert_eq!(e.code, "volp.prefix.truncated");
    // A JSON byte (the closing brace) and the fields that size the body.
    let mut m = b.clone();
    m[body_offset() - 1] = b' ';
    refused(&m, "volp.header.json");
    refused(
        &file(&HEADER.replace("[1,2,2]", "[1,2,3]"), &b[body_offset()..]),
        "volp.body.size_mismatch",
    );
    refused(
        &file(&HEADER.replace("float32", "float64"), &b[body_offset()..]),
        "volp.body.size_mismatch",
    );
    refused(
        &file(&HEADER.replace("float32", "uint8"), &b[body_offset()..]),
        "volp.body.size_mismatch",
    );
}

#[test]
fn zstd_frames() {
    let b = base();
    let body = body_offset();
    // The frame's content checksum (its last 4 bytes).
    let mut m = b.clone();
    let last = m.len() - 1;
    m[last] ^= 0x01;
    refused(&m, "volp.body.decompress");
    let e = read(&m, false).unwrap_err();
    assert!(e.message.contains("checksum"), "{e}");
    // A compressed block byte: the data changes, the checksum catches it (or the block breaks).
    let payload = frame_with_checksum(&le(&VALUES)).len();
    for at in body + 6..body + payload - 4 {
        let mut m = b.clone();
        m[at] ^= 0x10;
        let e = read(&m, false).expect_err("a damaged block is never read");
        assert_eq!(e.kind, ErrorKind::Invalid);
        assert!(e.code.starts_with("volp.body."), "byte {at}: {e}");
        assert!(validate(&m).has_code(&e.code), "byte {at}: {e}");
    }
    // The frame magic.
    let mut m = b.clone();
    m[body] ^= 0xFF;
    refused(&m, "volp.body.decompress");
    // The declared content size (single-segment frames hold it right after the descriptor).
    let mut m = b.clone();
    assert_eq!(
        m[body + 4] & 0xC0,
        0,
        "content size in 1 byte (FCS flag 0, single segment)"
    );
    m[body + 5] = 17;
    refused(&m, "volp.body.size_mismatch");
    // Truncated frames and bytes after the last frame.
    refused(&b[..b.len() - 3], "volp.body.decompress");
    let mut m = b.clone();
    m.extend_from_slice(b"junk");
    refused(&m, "volp.body.trailing_bytes");
    // A skippable frame whose length runs past the end.
    let mut m = b.clone();
    m.extend_from_slice(&0x184D_2A50u32.to_le_bytes());
    m.extend_from_slice(&100u32.to_le_bytes());
    refused(&m, "volp.body.decompress");
    // A second frame: more data than the shape holds.
    let mut m = b.clone();
    m.extend_from_slice(&frame_with_checksum(&[0u8; 4]));
    refused(&m, "volp.body.size_mismatch");
}
