//! Input arrays for the writer tests and what each level of detail of them reads as.
#![allow(dead_code)]

use rasterpack_common::{ArrayInfo, DType};

/// Deterministic values of `info`'s dtype (C order): noise with runs, a constant block (so
/// some bricks are constant), and for floats NaN, -0.0 and infinities; for uint8/uint16 the
/// top code (a no-value when the channel has one).
pub fn sample(info: &ArrayInfo, seed: u64) -> Vec<u8> {
    let n: u64 = info.shape.iter().product();
    let last = *info.shape.last().unwrap();
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407) | 1;
    let mut out = Vec::with_capacity(n as usize * info.dtype.size());
    for i in 0..n {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let r = s;
        // The first 40 samples of every row are one value: whole bricks of it where rows allow.
        let flat = i % last < 40;
        let k = if flat {
            3
        } else if r.is_multiple_of(5) {
            7
        } else {
            r >> 11
        };
        match info.dtype {
            DType::Bool => out.push(if flat { 1 } else { (r & 1) as u8 }),
            DType::U8 => out.push(if !flat && r.is_multiple_of(97) { 255 } else { k as u8 }),
            DType::U16 => {
                out.extend_from_slice(&(if !flat && r.is_multiple_of(97) { 65535 } else { k as u16 }).to_le_bytes())
            }
            DType::U32 => out.extend_from_slice(&(k as u32).to_le_bytes()),
            DType::U64 => out.extend_from_slice(&k.to_le_bytes()),
            DType::F32 => {
                let v = match r % 211 {
                    0 if !flat => f32::NAN,
                    1 if !flat => -0.0,
                    2 if !flat => f32::INFINITY,
                    _ => ((k % 1000) as f32 - 500.0) / 64.0,
                };
                out.extend_from_slice(&v.to_le_bytes());
            }
            DType::F64 => {
                let v = match r % 211 {
                    0 if !flat => f64::from_bits(0x7ff8_0000_0000_1234),
                    1 if !flat => -0.0,
                    _ => ((k % 100_000) as f64 - 5e4) / 3.0,
                };
                out.extend_from_slice(&v.to_le_bytes());
            }
            d => panic!("no sample for {d:?}"),
        }
    }
    out
}

/// The shape (C order) and values LOD `lod` of `data` reads as: every `2^lod`-th element along
/// the brick axes (the last three; a 4-D array's first axis is not reduced).
pub fn decimate(info: &ArrayInfo, data: &[u8], lod: u32) -> (Vec<u64>, Vec<u8>) {
    // A 1-D array is written as a 2-D volume of one trace: it reads back as shape (1, N).
    let mut info = info.clone();
    if info.shape.len() == 1 {
        info.shape.insert(0, 1);
    }
    let n = info.shape.len();
    let e = info.dtype.size();
    let step: Vec<u64> = (0..n).map(|a| if n == 4 && a == 0 { 1 } else { 1 << lod }).collect();
    let shape: Vec<u64> = info.shape.iter().zip(&step).map(|(&s, &k)| s.div_ceil(k)).collect();
    let total: u64 = shape.iter().product();
    let mut out = Vec::with_capacity(total as usize * e);
    let mut idx = vec![0u64; n];
    for _ in 0..total {
        let mut src = 0u64;
        for a in 0..n {
            src = src * info.shape[a] + idx[a] * step[a];
        }
        out.extend_from_slice(&data[src as usize * e..(src as usize + 1) * e]);
        for a in (0..n).rev() {
            idx[a] += 1;
            if idx[a] < shape[a] {
                break;
            }
            idx[a] = 0;
        }
    }
    (shape, out)
}
