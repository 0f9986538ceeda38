//! The streaming `.npz` check of NPZ0 chunks (`npz::StreamCheck`, used by `validate` for large
//! zstd chunks) against the in-memory one (`npz::describe`, used by `inspect`): whenever the
//! streaming check gives a verdict it is `describe`'s, and damaged archives give the same
//! finding codes either way.

use rasterpack_common::{DType, Format, Input, InspectOptions, Limits, NdArray, Report, ValidateOptions};
use rasterpack_fold::npz::{self, crc32, StreamCheck};
use rasterpack_fold::{FoldBuilder, FoldChunkOptions, FoldCompression, FoldFormat};

struct M<'a> {
    name: &'a str,
    content: Vec<u8>,
    deflate: bool,
    /// Sizes as numpy's `force_zip64` writes them (0xFFFFFFFF + zip64 extra fields).
    zip64: bool,
    /// Bit 3: sizes and CRC in a data descriptor after the data (zeros in the local header).
    descriptor: bool,
}

fn npy(shape: &[u64], data: Vec<u8>) -> Vec<u8> {
    let a = NdArray::new(DType::U8, shape.to_vec(), data).unwrap();
    let mut v = rasterpack_common::npy::header_bytes(a.dtype, &a.shape);
    v.extend_from_slice(&a.data);
    v
}

fn member(name: &str, len: usize, seed: u64, deflate: bool) -> M<'_> {
    let mut s = seed;
    let data: Vec<u8> = (0..len)
        .map(|i| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            // Compressible enough that deflate uses all block kinds.
            if i % 3 == 0 {
                (s >> 40) as u8
            } else {
                (i / 64) as u8
            }
        })
        .collect();
    M {
        name,
        content: npy(&[len as u64], data),
        deflate,
        zip64: false,
        descriptor: false,
    }
}

fn zip(members: &[M]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut cd = Vec::new();
    for m in members {
        let fname = format!("{}.npy", m.name);
        let crc = crc32(&m.content);
        let data = if m.deflate {
            miniz_oxide::deflate::compress_to_vec(&m.content, 6)
        } else {
            m.content.clone()
        };
        let (c, u) = (data.len() as u64, m.content.len() as u64);
        let method: u16 = if m.deflate { 8 } else { 0 };
        let flags: u16 = if m.descriptor { 8 } else { 0 };
        let offset = out.len() as u64;
        let mut lextra = Vec::new();
        let (lc, lu) = if m.zip64 {
            lextra.extend_from_slice(&1u16.to_le_bytes());
            lextra.extend_from_slice(&16u16.to_le_bytes());
            lextra.extend_from_slice(&u.to_le_bytes());
            lextra.extend_from_slice(&c.to_le_bytes());
            (0xFFFF_FFFFu32, 0xFFFF_FFFFu32)
        } else if m.descriptor {
            (0, 0)
        } else {
            (c as u32, u as u32)
        };
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        out.extend_from_slice(&45u16.to_le_bytes());
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&method.to_le_bytes());
        out.extend_from_slice(&[0, 0, 0x21, 0]);
        out.extend_from_slice(&(if m.descriptor { 0 } else { crc }).to_le_bytes());
        out.extend_from_slice(&lc.to_le_bytes());
        out.extend_from_slice(&lu.to_le_bytes());
        out.extend_from_slice(&(fname.len() as u16).to_le_bytes());
        out.extend_from_slice(&(lextra.len() as u16).to_le_bytes());
        out.extend_from_slice(fname.as_bytes());
        out.extend_from_slice(&lextra);
        out.extend_from_slice(&data);
        if m.descriptor {
            out.extend_from_slice(&0x0807_4b50u32.to_le_bytes());
            out.extend_from_slice(&crc.to_le_bytes());
            out.extend_from_slice(&(c as u32).to_le_bytes());
            out.extend_from_slice(&(u as u32).to_le_bytes());
        }
        let mut cextra = Vec::new();
        let (cc, cu, co) = if m.zip64 {
            cextra.extend_from_slice(&1u16.to_le_bytes());
            cextra.extend_from_slice(&24u16.to_le_bytes());
            cextra.extend_from_slice(&u.to_le_bytes());
            cextra.extend_from_slice(&c.to_le_bytes());
            cextra.extend_from_slice(&offset.to_le_bytes());
            (0xFFFF_FFFFu32, 0xFFFF_FFFFu32, 0xFFFF_FFFFu32)
        } else {
            (c as u32, u as u32, offset as u32)
        };
        cd.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        cd.extend_from_slice(&[45, 3, 45, 0]);
        cd.extend_from_slice(&flags.to_le_bytes());
        cd.extend_from_slice(&method.to_le_bytes());
        cd.extend_from_slice(&[0, 0, 0x21, 0]);
        cd.extend_from_slice(&crc.to_le_bytes());
        cd.extend_from_slice(&cc.to_le_bytes());
        cd.extend_from_slice(&cu.to_le_bytes());
        cd.extend_from_slice(&(fname.len() as u16).to_le_bytes());
        cd.extend_from_slice(&(cextra.len() as u16).to_le_bytes());
        cd.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        cd.extend_from_slice(&(0o100644u32 << 16).to_le_bytes());
        cd.extend_from_slice(&co.to_le_bytes());
        cd.extend_from_slice(fname.as_bytes());
        cd.extend_from_slice(&cextra);
    }
    let cd_off = out.len() as u64;
    let n = members.len() as u16;
    out.extend_from_slice(&cd);
    if members.iter().any(|m| m.zip64) {
        let z = out.len() as u64;
        out.extend_from_slice(&0x0606_4b50u32.to_le_bytes());
        out.extend_from_slice(&44u64.to_le_bytes());
        out.extend_from_slice(&[45, 3, 45, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        out.extend_from_slice(&(n as u64).to_le_bytes());
        out.extend_from_slice(&(n as u64).to_le_bytes());
        out.extend_from_slice(&(cd.len() as u64).to_le_bytes());
        out.extend_from_slice(&cd_off.to_le_bytes());
        out.extend_from_slice(&0x0706_4b50u32.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&z.to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
    }
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&(cd.len() as u32).to_le_bytes());
    out.extend_from_slice(&(cd_off as u32).to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// Streaming verdict of `z` fed in pieces of `piece` bytes.
fn stream(z: &[u8], piece: usize, l: &Limits) -> Option<Vec<npz::NpzArrayInfo>> {
    let mut c = StreamCheck::new(l);
    for p in z.chunks(piece.max(1)) {
        c.feed(p);
    }
    c.finish()
}

/// Whenever streaming gives a verdict (any piece size), `describe` agrees; returns whether it did.
fn agrees(z: &[u8]) -> bool {
    let l = Limits::default();
    let whole = npz::describe(z, &l);
    let mut verdicts = Vec::new();
    for piece in [1usize, 5, 29, 4096, usize::MAX] {
        let s = stream(z, piece, &l);
        if let Some(a) = &s {
            assert_eq!(whole.as_ref().ok(), Some(a), "streaming accepted what describe did not");
        }
        verdicts.push(s.is_some());
    }
    assert!(verdicts.windows(2).all(|w| w[0] == w[1]), "{verdicts:?}");
    verdicts[0]
}

fn samples() -> Vec<(&'static str, Vec<u8>)> {
    let mut zip64 = vec![member("a", 3000, 1, false), member("b", 70000, 2, true)];
    zip64.iter_mut().for_each(|m| m.zip64 = true);
    vec![
        (
            "stored",
            zip(&[
                member("a", 1000, 1, false),
                member("b", 5, 2, false),
                member("c", 0, 3, false),
            ]),
        ),
        (
            "deflated",
            zip(&[
                member("a", 100_000, 1, true),
                member("b", 7, 2, true),
                member("c", 0, 3, true),
            ]),
        ),
        ("mixed", zip(&[member("a", 4000, 1, true), member("b", 9000, 2, false)])),
        ("zip64", zip(&zip64)),
        (
            "writer",
            npz::write(&[("x", &NdArray::new(DType::F32, vec![3, 5], (0..60).collect()).unwrap())]),
        ),
    ]
}

#[test]
fn valid_archives_stream_to_the_in_memory_description() {
    for (what, z) in samples() {
        assert!(npz::describe(&z, &Limits::default()).is_ok(), "{what}");
        assert!(agrees(&z), "{what}: streaming gave no verdict");
    }
}

#[test]
fn data_descriptors_fall_back() {
    let mut ms = vec![member("a", 500, 1, true), member("b", 600, 2, false)];
    ms.iter_mut().for_each(|m| m.descriptor = true);
    let z = zip(&ms);
    assert!(!agrees(&z));
}

#[test]
fn damaged_archives_never_stream_to_a_different_verdict() {
    let l = Limits::default();
    for (what, z) in samples() {
        // Small enough for every cut and every byte.
        let z = if z.len() > 20_000 {
            zip(&[member("a", 2000, 1, true), member("b", 300, 2, false)])
        } else {
            z
        };
        for cut in 0..z.len() {
            if let Some(a) = stream(&z[..cut], 4096, &l) {
                assert_eq!(npz::describe(&z[..cut], &l).ok(), Some(a), "{what}: cut {cut}");
            }
        }
        for i in 0..z.len() {
            for x in [0xFFu8, 0x01] {
                let mut d = z.clone();
                d[i] ^= x;
                if let Some(a) = stream(&d, 4096, &l) {
                    assert_eq!(npz::describe(&d, &l).ok(), Some(a), "{what}: byte {i} ^ {x:#x}");
                }
            }
        }
    }
}

fn payload_codes(r: &Report) -> Vec<String> {
    let mut c: Vec<String> = r
        .findings
        .iter()
        .filter(|f| f.code.starts_with("fold."))
        .map(|f| f.code.clone())
        .collect();
    c.sort();
    c
}

/// A FOLD file holding `z` as a zstd NPZ0 chunk (large enough for streamed validation).
fn fold(z: &[u8]) -> Input {
    let mut b = FoldBuilder::new();
    b.created_at_unix = 1.0;
    b.add_raw_chunk(
        "arrays",
        "NPZ0",
        z,
        FoldChunkOptions {
            compression: FoldCompression::Zstd(1),
            ecc: None,
        },
    )
    .unwrap();
    Input::from_bytes("npz", b.to_bytes().unwrap())
}

#[test]
fn validate_streams_npz0_with_the_findings_of_inspect() {
    // ~5 MiB of noise so the stored payload passes the streaming threshold.
    let mut s = 5u64;
    let noise: Vec<u8> = (0..(5usize << 20) + 123)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 33) as u8
        })
        .collect();
    let big = M {
        name: "noise",
        content: npy(&[noise.len() as u64], noise),
        deflate: false,
        zip64: true,
        descriptor: false,
    };
    let good = zip(&[member("small", 20_000, 9, true), big, member("tail", 777, 4, false)]);
    assert!(agrees(&good));
    assert!(fold(&good).len() > 4 << 20, "too small for streamed validation");
    let n = good.len();
    let data_at = n / 2;
    // CRC field of the last central directory entry.
    let cd_crc = (0..n - 4)
        .rev()
        .find(|&p| good[p..p + 4] == [0x50, 0x4b, 0x01, 0x02])
        .unwrap()
        + 16;
    let mut cases: Vec<(&str, Vec<u8>)> = vec![("valid", good.clone())];
    let mut d = good.clone();
    d[data_at] ^= 0x40;
    cases.push(("flipped data byte", d));
    let mut d = good.clone();
    d[cd_crc] ^= 1;
    cases.push(("wrong CRC in the central directory", d));
    let mut d = good.clone();
    d[18] ^= 4; // first member's compressed size in its local header: only the central
    cases.push(("wrong local size", d)); // directory counts, so valid (via the fallback)
    let mut d = good.clone();
    d[cd_crc + 8] ^= 1; // uncompressed size in the central directory
    cases.push(("wrong central size", d));
    cases.push(("truncated", good[..n - 100].to_vec()));
    cases.push(("truncated in data", good[..data_at].to_vec()));
    let mut d = good.clone();
    d[0] = b'Q';
    cases.push(("no first local header", d));
    // Byte flips over the first local headers and the central directory / end records.
    let mut flips = Vec::new();
    for i in (0..160).chain(n - 420..n).step_by(3) {
        let mut d = good.clone();
        d[i] ^= 0xA5;
        flips.push((i, d));
    }
    for (what, z) in cases {
        let input = fold(&z);
        let v = FoldFormat.validate(&input, &ValidateOptions::default());
        let i = FoldFormat.inspect(&input, &InspectOptions::default()).unwrap();
        assert_eq!(
            payload_codes(&v),
            payload_codes(&i),
            "{what}: {:?} vs {:?}",
            v.findings,
            i.findings
        );
        let ok = what == "valid" || what == "wrong local size";
        assert_eq!(v.is_valid(false), ok, "{what}: {:?}", v.findings);
    }
    for (i, z) in flips {
        let input = fold(&z);
        let v = FoldFormat.validate(&input, &ValidateOptions::default());
        let i2 = FoldFormat.inspect(&input, &InspectOptions::default()).unwrap();
        assert_eq!(
            payload_codes(&v),
            payload_codes(&i2),
            "flip at {i}: {:?} vs {:?}",
            v.findings,
            i2.findings
        );
    }
}

#[test]
fn corpus_npz0_payloads_stream_to_the_in_memory_description() {
    // Archives as numpy/pyfolds write them (zip64 local headers): every NPZ0 payload of
    // `$RASTERPACK_CORPUS/fold` that `describe` reads must stream to the same description.
    let Some(dir) = rasterpack_common::testkit::corpus_dir("fold") else {
        return;
    };
    let entries = std::fs::read_dir(&dir).expect("the corpus's fold folder is readable");
    let opts = rasterpack_fold::FoldAnalyzeOptions {
        keep_payload: true,
        ..Default::default()
    };
    let mut seen = 0;
    for ent in entries.flatten() {
        let path = ent.path();
        if !matches!(path.extension().and_then(|e| e.to_str()), Some("fold" | "mind")) {
            continue;
        }
        let Ok(input) = Input::open(&path) else { continue };
        let Ok(a) = rasterpack_fold::analyze(&input, &opts) else {
            continue;
        };
        for st in &a.chunks {
            let (true, Some(p)) = (st.entry.ctype == "NPZ0", &st.payload) else {
                continue;
            };
            let whole = npz::describe(p, &Limits::default());
            let streamed = agrees(p);
            if whole.is_ok() {
                assert!(streamed, "{}: no streaming verdict", path.display());
                seen += 1;
            }
        }
    }
    eprintln!("{seen} corpus NPZ0 payloads streamed");
}
