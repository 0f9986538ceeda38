//! SimpleU32 (scheme 17): an encoder written here from the opcode table in `compress.rs`
//! (greedy: repeat, table slot, the shortest delta, else a literal) against the decoder, on
//! many kinds of data. The decoder's agreement with the reference encoder itself is checked
//! by the edge file in the interop test (and was checked on 200 files the reference wrote, see
//! docs/formats/udf.md).

use rasterpack_udf::compress::{decode_simple_u32, word_hash};

/// The stream, and which opcodes it used (delta 6/14/20/28 bits, slot, repeat, literal).
fn encode(values: &[u32]) -> (Vec<u8>, [bool; 7]) {
    let mut used = [false; 7];
    let mut out = Vec::new();
    let mut table = [0u32; 64];
    let mut last = 0u32;
    let mut i = 0;
    while i < values.len() {
        let v = values[i];
        if v == last {
            let run = values[i..].iter().take(16).take_while(|&&x| x == v).count();
            out.push(0xE0 | (run - 1) as u8);
            used[5] = true;
            i += run;
            if run != 16 {
                last = last.wrapping_add(1);
            }
            continue;
        }
        let slot = (word_hash(v) % 64) as usize;
        if table[slot] == v {
            out.push(0x80 | slot as u8);
            used[4] = true;
            last = v;
            i += 1;
            continue;
        }
        let d = v.wrapping_sub(last) as i32;
        let d = if d > 0 { d - 1 } else { d };
        let fits = |bits: u32| (-(1i64 << (bits - 1))..(1i64 << (bits - 1))).contains(&(d as i64));
        let u = d as u32;
        if fits(6) {
            out.push((u & 0x3F) as u8);
            used[0] = true;
        } else if fits(14) {
            out.extend_from_slice(&[0x40 | ((u >> 8) & 0x3F) as u8, u as u8]);
            used[1] = true;
        } else if fits(20) {
            out.extend_from_slice(&[0xC0 | ((u >> 16) & 0x0F) as u8, (u >> 8) as u8, u as u8]);
            used[2] = true;
        } else if fits(28) {
            out.extend_from_slice(&[
                0xD0 | ((u >> 24) & 0x0F) as u8,
                (u >> 16) as u8,
                (u >> 8) as u8,
                u as u8,
            ]);
            used[3] = true;
        } else {
            out.push(0xF0);
            out.extend_from_slice(&v.to_le_bytes());
            used[6] = true;
        }
        table[slot] = v;
        last = v;
        i += 1;
    }
    (out, used)
}

fn decode(stream: &[u8], n: usize) -> Vec<u32> {
    let mut out = vec![0u8; n * 4];
    decode_simple_u32(stream, &mut out, true).unwrap();
    out.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 16) as u32
    }
}

#[test]
fn round_trips_every_kind_of_data() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut ops_seen = [false; 7];
    for case in 0..600 {
        let n = (rng.next() % 700) as usize;
        let bits = rng.next() % 33;
        let mut acc = 0u32;
        let values: Vec<u32> = (0..n)
            .map(|i| {
                let r = rng.next();
                match case % 6 {
                    0 => r.checked_shr(32 - bits).unwrap_or(0),
                    1 => {
                        acc = acc.wrapping_add(r % 5);
                        acc
                    }
                    2 => (i as u32 / 17) * 2,
                    3 => [3, 3, 70_000, u32::MAX, 0, 1 << 27][(r % 6) as usize],
                    4 => {
                        acc = acc.wrapping_add(r % 4_000_000).wrapping_sub(2_000_000);
                        acc
                    }
                    _ => r,
                }
            })
            .collect();
        let (stream, used) = encode(&values);
        for (seen, u) in ops_seen.iter_mut().zip(used) {
            *seen |= u;
        }
        assert_eq!(decode(&stream, n), values, "case {case}");
        // The same stream against any other length fails.
        let mut out = vec![0u8; (n + 1) * 4];
        assert!(decode_simple_u32(&stream, &mut out, true).is_err(), "case {case}");
    }
    assert_eq!(ops_seen, [true; 7], "every opcode is exercised");
}
