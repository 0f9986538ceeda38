#![no_main]
//! GVRS canonical Huffman texts (Gridfour 2026) straight into the text decoder: the first two
//! bytes give how many values the text must hold, the rest is the bit stream. Also round-trips
//! values built from the input through the encoder. Must never panic, hang or over-allocate.
use libfuzzer_sys::fuzz_target;
use rasterpack_gvrs::codec::canonical;
use rasterpack_gvrs::codec::huffman::BitWriter;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let n = 1 + u16::from_le_bytes([data[0], data[1]]) as usize % 20_000;
    let mut out = vec![0i32; n];
    let mut bits = canonical::Bits::new(&data[2..], 0);
    let _ = canonical::decode_text(&mut bits, &mut out);
    // Encoder round trip over values made from the bytes (small, escaped and null values).
    let vals: Vec<i32> = data[2..]
        .chunks(3)
        .map(|c| match c {
            [a, b, c] => i32::from_le_bytes([*a, *b, *c, if *a & 1 == 1 { 0xFF } else { 0 }]),
            [a, ..] if *a == 0x80 => i32::MIN,
            [a, ..] => i32::from(*a as i8),
            [] => 0,
        })
        .collect();
    if vals.is_empty() {
        return;
    }
    let plan = canonical::plan(&vals);
    let mut w = BitWriter::new(Vec::new());
    canonical::write_text(&plan, &vals, &mut w);
    let bytes = w.finish();
    let mut back = vec![0i32; vals.len()];
    canonical::decode_text(&mut canonical::Bits::new(&bytes, 0), &mut back).expect("own output decodes");
    assert_eq!(back, vals);
});
