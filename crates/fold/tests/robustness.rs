//! Hostile input: truncation at every offset, every byte flipped, bit flips, absurd sizes.
//! Validation, inspection and array reads must return normally, never panic.

use rasterpack_common::{ArrayRequest, DType, Format, Input, InspectOptions, NdArray, ValidateOptions};
use rasterpack_fold::pjson::Value;
use rasterpack_fold::{analyze, FoldAnalyzeOptions, FoldBuilder, FoldChunkOptions, FoldCompression, FoldFormat};

fn sample(compression: FoldCompression, ecc: Option<u8>) -> Vec<u8> {
    let mut b = FoldBuilder::new();
    b.created_at_unix = 1.5;
    b.metadata("k", Value::Array(vec![Value::Float(f64::NAN), Value::int(7)]))
        .unwrap();
    let opts = FoldChunkOptions { compression, ecc };
    b.add_json("meta", &Value::object(vec![("a", Value::Float(0.5))]), opts)
        .unwrap();
    let arr = NdArray::new(DType::I16, vec![2, 3], (0..12).collect()).unwrap();
    b.add_npz("arrays", &[("x", &arr)], opts).unwrap();
    b.add_chunk("blob", "BLOB", b"0123456789", opts).unwrap();
    b.to_bytes().unwrap()
}

fn exercise(bytes: Vec<u8>) {
    let input = Input::from_bytes("x", bytes);
    let _ = FoldFormat.validate(&input, &ValidateOptions::default());
    let _ = FoldFormat.inspect(&input, &InspectOptions::default());
    let _ = FoldFormat.read_array(&input, &ArrayRequest::default());
}

#[test]
fn truncation_at_every_offset() {
    for (c, e) in [(FoldCompression::Zstd(3), None), (FoldCompression::None, Some(16))] {
        let good = sample(c, e);
        assert!(FoldFormat
            .validate(&Input::from_bytes("g", good.clone()), &ValidateOptions::default())
            .is_valid(true));
        for cut in 0..good.len() {
            let input = Input::from_bytes("x", good[..cut].to_vec());
            let r = FoldFormat.validate(&input, &ValidateOptions::default());
            assert!(!r.is_valid(false), "cut at {cut} accepted");
        }
    }
}

#[test]
fn every_byte_flipped() {
    for (c, e) in [
        (FoldCompression::Zstd(3), None),
        (FoldCompression::None, Some(16)),
        (FoldCompression::Zstd(3), Some(32)),
    ] {
        let good = sample(c, e);
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0xFF;
            exercise(bad);
        }
    }
}

#[test]
fn single_bit_flips() {
    let good = sample(FoldCompression::Zstd(3), Some(16));
    let original = FoldFormat
        .read_array(&Input::from_bytes("g", good.clone()), &ArrayRequest::default())
        .unwrap();
    // Where each chunk's stored payload and ECC bytes lie (every chunk is rs(16), one block).
    let a = analyze(&Input::from_bytes("g", good.clone()), &FoldAnalyzeOptions::default()).unwrap();
    let mut payloads = Vec::new();
    let mut eccs = Vec::new();
    for c in &a.chunks {
        let (start, e) = (c.entry.offset as usize + 32, &c.entry);
        assert!(e.comp_len <= 239 && e.ecc_len == 16, "{}: one rs(16) block", e.name);
        payloads.push(start..start + e.comp_len as usize);
        eccs.push(start + e.comp_len as usize..start + (e.comp_len + e.ecc_len) as usize);
    }
    let (mut repaired, mut ecc_flips, mut others) = (0, 0, 0);
    for i in 0..good.len() {
        for bit in [0u8, 3, 7] {
            let mut bad = good.clone();
            bad[i] ^= 1 << bit;
            let input = Input::from_bytes("x", bad);
            let r = FoldFormat.validate(&input, &ValidateOptions::default());
            let read = FoldFormat.read_array(&input, &ArrayRequest::default());
            let at = format!("bit {bit} of byte {i}");
            if payloads.iter().any(|p| p.contains(&i)) {
                // One byte wrong in a block that rs(16) corrects up to 8 in: repaired, the
                // file stays valid with a warning, the array reads as written.
                assert!(r.is_valid(false) && !r.is_valid(true), "{at}: {:?}", r.findings);
                assert!(r.findings.has_code("fold.ecc.repaired"), "{at}: {:?}", r.findings);
                let back = read.unwrap_or_else(|e| panic!("{at}: {e}"));
                assert_eq!(
                    (back.shape, back.data),
                    (original.shape.clone(), original.data.clone()),
                    "{at}"
                );
                repaired += 1;
            } else if eccs.iter().any(|p| p.contains(&i)) {
                // The payload verifies; only its parity is off: valid with a warning.
                assert!(r.is_valid(false) && !r.is_valid(true), "{at}: {:?}", r.findings);
                let back = read.unwrap_or_else(|e| panic!("{at}: {e}"));
                assert_eq!(back.data, original.data, "{at}");
                ecc_flips += 1;
            } else {
                // Headers and the index: a verdict, and a read either fails or returns the
                // values written, never others.
                if let Ok(back) = read {
                    assert_eq!(
                        (back.dtype, back.shape, back.data),
                        (original.dtype, original.shape.clone(), original.data.clone()),
                        "{at}: a read returned other values ({:?})",
                        r.findings
                    );
                }
                others += 1;
            }
        }
    }
    assert!(
        repaired > 0 && ecc_flips > 0 && others > 0,
        "{repaired} {ecc_flips} {others}"
    );
}

#[test]
fn absurd_sizes_are_refused_before_allocation() {
    let good = sample(FoldCompression::None, None);
    // uncomp_len / comp_len / ecc_len of the first chunk set to huge values, index too.
    for (off, len) in [(28 + 8, 8usize), (28 + 16, 8), (28 + 28, 4), (12, 8), (20, 8)] {
        let mut bad = good.clone();
        bad[off..off + len].fill(0xFF);
        exercise(bad.clone());
        bad[off] = 0x7F;
        exercise(bad);
    }
    // Deeply nested JSON index.
    let mut f = b"FOLDv1\0\0".to_vec();
    let idx = "[".repeat(100_000);
    f.extend_from_slice(&28u32.to_be_bytes());
    f.extend_from_slice(&28u64.to_be_bytes());
    f.extend_from_slice(&(idx.len() as u64).to_be_bytes());
    f.extend_from_slice(idx.as_bytes());
    let r = FoldFormat.validate(&Input::from_bytes("deep", f), &ValidateOptions::default());
    assert!(r.findings.has_code("fold.index.index_bad_json"));
}

#[test]
fn deep_but_allowed_nesting_does_not_overflow_the_stack() {
    // 500 levels (the limit is 512) in metadata: parsed, hashed, reported; on a test thread's
    // small stack.
    let depth = 500;
    let mut v = Value::Null;
    for _ in 0..depth {
        v = Value::Array(vec![v]);
    }
    let mut b = FoldBuilder::new();
    b.metadata("deep", v).unwrap();
    let bytes = b.to_bytes().unwrap();
    let input = Input::from_bytes("deep", bytes);
    let r = FoldFormat.validate(&input, &ValidateOptions::default());
    assert!(r.is_valid(true), "{:?}", r.findings);
    let _ = FoldFormat
        .inspect(
            &input,
            &InspectOptions {
                all: true,
                ..Default::default()
            },
        )
        .unwrap();
}

#[test]
fn streamed_and_whole_zstd_paths_agree_on_corrupt_frames() {
    // 5 MiB chunk: validate streams it, inspect decodes it whole. Damage inside the zstd frame
    // with matching CRC/SHA (stored uncompressed, flags patched to zstd) must give the same
    // verdict both ways and never panic.
    let mut seed = 9u64;
    let payload: Vec<u8> = (0..6 << 20)
        .map(|_| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) as u8) & 0x3f
        })
        .collect();
    let frame = zstd::bulk::compress(&payload, 1).unwrap();
    assert!(frame.len() > 4 << 20);
    for k in 0..15 {
        let ctype = ["F32R", "NPZ0", "JSON"][k % 3];
        let mut f = frame.clone();
        let at = match k {
            0 => 4,
            1 => 6,
            2 => 12,
            _ => (k * 400_009) % f.len(),
        };
        f[at] ^= 0x55 + k as u8;
        let mut b = FoldBuilder::new();
        b.add_raw_chunk(
            "z",
            ctype,
            &f,
            FoldChunkOptions {
                compression: FoldCompression::None,
                ecc: None,
            },
        )
        .unwrap();
        let mut bytes = b.to_bytes().unwrap();
        bytes[28 + 7] = 1;
        bytes[28 + 8..28 + 16].copy_from_slice(&(payload.len() as u64).to_be_bytes());
        let input = Input::from_bytes("z", bytes);
        let v = FoldFormat.validate(&input, &ValidateOptions::default());
        let i = FoldFormat.inspect(&input, &InspectOptions::default()).unwrap();
        let payload_errors =
            |r: &rasterpack_common::Report| r.findings.iter().any(|f| f.code.starts_with("fold.payload."));
        assert_eq!(
            payload_errors(&v),
            payload_errors(&i),
            "damage at {at}: {:?} vs {:?}",
            v.findings,
            i.findings
        );
        if k == 0 {
            // The damaged frame header either breaks the frame or declares another size.
            assert!(
                v.findings.has_code("fold.payload.decompress_failed")
                    || v.findings.has_code("fold.payload.uncomp_len_mismatch"),
                "{:?}",
                v.findings
            );
        }
    }
}

#[test]
fn streamed_npz_in_two_zstd_frames_decodes_into_the_fixed_buffer() {
    // An NPZ0 payload of two concatenated zstd frames (no single content size): the streamed
    // path decodes both into one uncomp_len buffer (stable output across frames); a byte more
    // or less in uncomp_len is a mismatch, as on the whole path.
    let mut seed = 11u64;
    let floats: Vec<u8> = (0..(6usize << 20))
        .map(|_| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as u8
        })
        .collect();
    let arr = NdArray::new(DType::U8, vec![floats.len() as u64], floats).unwrap();
    let npz = rasterpack_fold::npz::write(&[("a", &arr)]);
    let (x, y) = npz.split_at(npz.len() / 3);
    let mut frames = zstd::bulk::compress(x, 1).unwrap();
    frames.extend_from_slice(&zstd::bulk::compress(y, 1).unwrap());
    assert!(frames.len() > 4 << 20);
    for delta in [0i64, -1, 1] {
        let mut b = FoldBuilder::new();
        b.add_raw_chunk(
            "nuclear_arrays",
            "NPZ0",
            &frames,
            FoldChunkOptions {
                compression: FoldCompression::None,
                ecc: None,
            },
        )
        .unwrap();
        let mut bytes = b.to_bytes().unwrap();
        bytes[28 + 7] = 1;
        bytes[28 + 8..28 + 16].copy_from_slice(&(npz.len() as u64).wrapping_add_signed(delta).to_be_bytes());
        let input = Input::from_bytes("two-frames", bytes);
        let v = FoldFormat.validate(&input, &ValidateOptions::default());
        let i = FoldFormat.inspect(&input, &InspectOptions::default()).unwrap();
        let codes = |r: &rasterpack_common::Report| {
            let mut c: Vec<String> = r
                .findings
                .iter()
                .filter(|f| f.code.starts_with("fold.payload."))
                .map(|f| f.code.clone())
                .collect();
            c.sort();
            c
        };
        assert_eq!(
            codes(&v),
            codes(&i),
            "delta {delta}: {:?} vs {:?}",
            v.findings,
            i.findings
        );
        if delta == 0 {
            assert!(codes(&v).is_empty(), "{:?}", v.findings);
        } else {
            assert!(
                v.findings.has_code("fold.payload.uncomp_len_mismatch"),
                "{:?}",
                v.findings
            );
        }
    }
}
