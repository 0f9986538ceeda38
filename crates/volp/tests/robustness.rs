//! Hostile bytes: every truncation and every flipped byte of small valid files must give a
//! normal result (Ok, Err or findings), never a panic or an unbounded allocation.

mod common;

use common::{decode, encode, validate};
use rasterpack_common::Format;
use rasterpack_volp::{ArrayRequest, DType, Input, Region, VolpFormat};
use serde_json::{json, Map};

fn samples() -> Vec<Vec<u8>> {
    let mut meta = Map::new();
    meta.insert("levels".into(), json!([1, 2]));
    meta.insert("variable".into(), json!("v"));
    let f32s: Vec<u8> = (0..2 * 3 * 4).flat_map(|i| (i as f32 * 0.5).to_le_bytes()).collect();
    let i16s: Vec<u8> = (0..2 * 2 * 3).flat_map(|i| (i as i16 * -700).to_le_bytes()).collect();
    let mut multi = encode(
        DType::U8,
        [1, 2, 4],
        &[1, 2, 3, 4, 5, 6, 7, 8],
        2.0,
        1.0,
        &Map::new(),
        3,
    )
    .unwrap();
    // Rewrite the body of the last file as: skippable frame, checksummed frame, streaming frame.
    let body_at = rasterpack_volp::VolpFile::from_bytes(multi.clone())
        .unwrap()
        .body_offset() as usize;
    multi.truncate(body_at);
    multi.extend_from_slice(&[0x51, 0x2A, 0x4D, 0x18, 2, 0, 0, 0, 0xAA, 0xBB]);
    let mut c = zstd::bulk::Compressor::new(3).unwrap();
    c.include_checksum(true).unwrap();
    multi.extend(c.compress(&[1, 2, 3, 4]).unwrap());
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    enc.include_contentsize(false).unwrap();
    std::io::Write::write_all(&mut enc, &[5, 6, 7, 8]).unwrap();
    multi.extend(enc.finish().unwrap());
    assert_eq!(decode(&multi).unwrap().data, [1, 2, 3, 4, 5, 6, 7, 8]);
    vec![
        encode(DType::F32, [2, 3, 4], &f32s, 1.0, 0.0, &meta, 3).unwrap(),
        encode(DType::I16, [2, 2, 3], &i16s, 0.01, -40.0, &Map::new(), 3).unwrap(),
        multi,
    ]
}

fn exercise(data: &[u8]) {
    let findings = validate(data);
    let d = decode(data);
    // decode succeeds exactly when validation found no error.
    assert_eq!(d.is_ok(), !findings.has_errors(), "{:?} vs {:?}", d.err(), findings);
    let input = Input::from_bytes("fuzz", data.to_vec());
    let _ = VolpFormat.inspect(&input, &Default::default());
    let _ = VolpFormat.read_array(
        &input,
        &ArrayRequest {
            physical: true,
            ..Default::default()
        },
    );
    // A region read never panics, and reads the values the whole read has.
    if let Ok(whole) = &d {
        let region = Region::from_start_size(&[0, 0, 1], &[1, 1, 1]).unwrap();
        let part = VolpFormat
            .read_array(&input, &ArrayRequest::default().with_region(region.clone()))
            .unwrap();
        assert_eq!(part, whole.region(&region).unwrap());
    }
}

#[test]
fn every_truncation() {
    for s in samples() {
        for n in 0..s.len() {
            exercise(&s[..n]);
            assert!(decode(&s[..n]).is_err(), "truncated at {n} still decodes");
        }
    }
}

#[test]
fn every_byte_flipped() {
    for s in samples() {
        for i in 0..s.len() {
            let mut d = s.clone();
            d[i] ^= 0xFF;
            exercise(&d);
        }
    }
}

#[test]
fn every_bit_flipped_in_the_smallest() {
    let s = samples().into_iter().min_by_key(|s| s.len()).unwrap();
    for i in 0..s.len() {
        for b in 0..8 {
            let mut d = s.clone();
            d[i] ^= 1 << b;
            exercise(&d);
        }
    }
}

#[test]
fn byte_values_in_header_positions() {
    // Every value of each header-length byte and of a byte inside the JSON.
    let s = samples().remove(1);
    for pos in [4usize, 5, 6, 7, 9, 20] {
        for v in 0..=255u8 {
            let mut d = s.clone();
            d[pos] = v;
            exercise(&d);
        }
    }
}
