//! Codec-level tests: encode -> decode sweeps over random tiles, and crafted or damaged blocks
//! that must be refused with an error (never a panic, never an unbounded allocation).

use rasterpack_gvrs::codec::{self, m32, zlib, Codec, Predictor};

/// Small deterministic PRNG (xorshift64*), so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn tile(rng: &mut Rng, rows: usize, cols: usize, style: u64) -> Vec<i32> {
    let n = rows * cols;
    match style {
        0 => (0..n)
            .map(|i| ((i / cols) * 3 + (i % cols) * 2) as i32 + rng.below(3) as i32)
            .collect(),
        1 => (0..n).map(|_| rng.next() as i32).collect(),
        2 => (0..n)
            .map(|_| [i32::MIN, i32::MAX, i32::MIN + 1, 0, -1, 1][rng.below(6) as usize])
            .collect(),
        3 => {
            // Smooth with null holes: DifferencingWithNulls.
            (0..n)
                .map(|i| {
                    if rng.below(5) == 0 {
                        i32::MIN
                    } else {
                        1000 + (i % cols) as i32 * 7 - (i / cols) as i32 * 5
                    }
                })
                .collect()
        }
        4 => vec![rng.next() as i32; n],
        _ => (0..n).map(|_| rng.below(300) as i32 - 150).collect(),
    }
}

const LISTS: [&[(u8, Codec)]; 4] = [
    &[(0, Codec::Huffman), (1, Codec::Deflate), (2, Codec::Float)],
    &[(0, Codec::Deflate)],
    &[(3, Codec::Huffman)],
    &[(1, Codec::Float), (0, Codec::Huffman)],
];

#[test]
fn random_int_tiles_round_trip() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut compressed = 0;
    for case in 0..600 {
        let rows = 1 + rng.below(24) as usize;
        let cols = 1 + rng.below(24) as usize;
        let style = case % 6;
        let v = tile(&mut rng, rows, cols, style);
        let list = LISTS[case as usize % LISTS.len()];
        if let Some(block) = codec::encode_int(&v, rows, cols, list) {
            assert!(block.len() < rows * cols * 4, "block not smaller than uncompressed");
            let c = list.iter().find(|c| c.0 == block[0]).expect("index from the list").1;
            let mut out = vec![0i32; rows * cols];
            codec::decode_int(c, &block, rows, cols, &mut out)
                .unwrap_or_else(|e| panic!("case {case} {rows}x{cols} style {style}: {e:?}"));
            assert_eq!(out, v, "case {case} {rows}x{cols} style {style}");
            compressed += 1;
        }
    }
    assert!(compressed > 300, "only {compressed} tiles compressed");
}

#[test]
fn every_predictor_round_trips_directly() {
    let mut rng = Rng(7);
    for case in 0..300 {
        let rows = 2 + rng.below(12) as usize;
        let cols = 2 + rng.below(12) as usize;
        let v = tile(&mut rng, rows, cols, case % 6);
        let has_null = v.contains(&i32::MIN);
        for p in [
            Predictor::Differencing,
            Predictor::Linear,
            Predictor::Triangle,
            Predictor::DifferencingWithNulls,
        ] {
            let mut codes = Vec::new();
            let Some(seed) = codec::predictor::encode(p, rows, cols, &v, &mut codes) else {
                continue;
            };
            if has_null && p != Predictor::DifferencingWithNulls {
                // INT_MIN is an ordinary residual value for the others: still exact.
            }
            let mut out = vec![0; rows * cols];
            codec::predictor::decode(p, seed, rows, cols, &codes, &mut out).unwrap();
            assert_eq!(out, v, "{p:?} {rows}x{cols}");
        }
    }
}

#[test]
fn floats_round_trip_bit_exactly() {
    let specials = [
        0.0f32,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MIN_POSITIVE / 3.0,
        f32::MAX,
        f32::MIN,
        1.5,
    ];
    let nans = [0x7FC0_0000u32, 0x7F80_0001, 0xFFC0_1234, 0x7FFF_FFFF];
    let mut rng = Rng(42);
    for case in 0..200 {
        let rows = 1 + rng.below(20) as usize;
        let cols = 1 + rng.below(20) as usize;
        let v: Vec<f32> = (0..rows * cols)
            .map(|i| match (case + i) % 5 {
                0 => specials[rng.below(specials.len() as u64) as usize],
                1 => f32::from_bits(nans[rng.below(4) as usize]),
                _ => (i as f32 * 0.37).sin() * 100.0,
            })
            .collect();
        let list = [(2u8, Codec::Float)];
        let Some(block) = codec::encode_float(&v, rows, cols, &list) else {
            continue;
        };
        assert!(block.len() < rows * cols * 4);
        let mut out = vec![0f32; rows * cols];
        codec::decode_float(Codec::Float, &block, rows, cols, &mut out).unwrap();
        let a: Vec<u32> = v.iter().map(|x| x.to_bits()).collect();
        let b: Vec<u32> = out.iter().map(|x| x.to_bits()).collect();
        assert_eq!(a, b);
    }
    // A smooth large tile certainly compresses.
    let v: Vec<f32> = (0..64 * 64).map(|i| 20.0 + (i % 64) as f32 * 0.25).collect();
    assert!(codec::encode_float(&v, 64, 64, &[(0, Codec::Float)]).is_some());
    // Integer codecs never code floats.
    assert!(codec::encode_float(&v, 64, 64, &[(0, Codec::Deflate), (1, Codec::Huffman)]).is_none());
}

#[test]
fn incompressible_tiles_are_not_encoded() {
    let mut rng = Rng(3);
    let v: Vec<i32> = (0..16).map(|_| rng.next() as i32).collect();
    assert!(codec::encode_int(&v, 4, 4, LISTS[0]).is_none());
    assert!(codec::encode_int(&v, 4, 4, &[(0, Codec::Float)]).is_none());
}

fn header(codec_index: u8, predictor: u8, seed: i32, n: i32) -> Vec<u8> {
    let mut b = vec![codec_index, predictor];
    b.extend_from_slice(&seed.to_le_bytes());
    b.extend_from_slice(&n.to_le_bytes());
    b
}

fn code_of(r: rasterpack_common::Result<()>) -> String {
    r.expect_err("must be refused").code.to_string()
}

#[test]
fn crafted_bad_blocks_are_refused() {
    let mut out = vec![0i32; 16];
    // Bad M32: an introducer followed by six continuation groups.
    let m = [0x7Fu8, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00];
    let mut b = header(0, 1, 0, m.len() as i32);
    b.extend_from_slice(&zlib::deflate(&m, 6));
    assert_eq!(
        code_of(codec::decode_int(Codec::Deflate, &b, 4, 4, &mut out)),
        "gvrs.codec.bad_m32"
    );
    // Too few residuals for the tile.
    let m = [1u8; 3];
    let mut b = header(0, 1, 0, 3);
    b.extend_from_slice(&zlib::deflate(&m, 6));
    assert_eq!(
        code_of(codec::decode_int(Codec::Deflate, &b, 4, 4, &mut out)),
        "gvrs.codec.m32_truncated"
    );
    // Too many residuals.
    let m = [1u8; 20];
    let mut b = header(0, 1, 0, 20);
    b.extend_from_slice(&zlib::deflate(&m, 6));
    assert_eq!(
        code_of(codec::decode_int(Codec::Deflate, &b, 4, 4, &mut out)),
        "gvrs.codec.m32_trailing"
    );
    // Unknown predictor: not known, so unsupported (exit 3), never decoded by guess.
    let mut b = header(0, 9, 0, 15);
    b.extend_from_slice(&zlib::deflate(&[0; 15], 6));
    let e = codec::decode_int(Codec::Deflate, &b, 4, 4, &mut out).unwrap_err();
    assert_eq!(
        (e.kind, e.code.as_ref()),
        (
            rasterpack_common::ErrorKind::Unsupported,
            "gvrs.codec.unknown_predictor"
        )
    );
    // Negative and oversized nM32: refused before any allocation.
    for n in [-1, i32::MAX, 16 * 6 + 1] {
        let b = header(0, 1, 0, n);
        assert_eq!(
            code_of(codec::decode_int(Codec::Huffman, &b, 4, 4, &mut out)),
            "gvrs.codec.bad_m32_length"
        );
    }
    // zlib bomb: 50 MB of zeros declared as 15 bytes, or as the maximum the tile allows.
    let bomb = zlib::deflate(&vec![0u8; 50_000_000], 9);
    for n in [15, 96] {
        let mut b = header(0, 1, 0, n);
        b.extend_from_slice(&bomb);
        assert_eq!(
            code_of(codec::decode_int(Codec::Deflate, &b, 4, 4, &mut out)),
            "gvrs.codec.zlib_too_long"
        );
    }
    // Raw deflate instead of zlib.
    let mut b = header(0, 1, 0, 15);
    b.extend_from_slice(&miniz_oxide::deflate::compress_to_vec(&[0; 15], 6));
    assert_eq!(
        code_of(codec::decode_int(Codec::Deflate, &b, 4, 4, &mut out)),
        "gvrs.codec.zlib_corrupt"
    );
    // Huffman tree declaring 2 leaves but holding 3.
    let mut b = header(0, 1, 0, 15);
    b.extend_from_slice(&[0x01, 0x08, 0x04, 0x00, 0x00]);
    assert_eq!(
        code_of(codec::decode_int(Codec::Huffman, &b, 4, 4, &mut out)),
        "gvrs.codec.huffman_tree"
    );
    // Huffman data cut short.
    let v: Vec<i32> = (0..16).map(|i| i * i * 37).collect();
    let good = codec::encode_int(&v, 4, 4, &[(0, Codec::Huffman)]).expect("compressible");
    let cut = &good[..good.len() - 1];
    assert!(codec::decode_int(Codec::Huffman, cut, 4, 4, &mut out).is_err());
    // Float codec on an integer element and the reverse.
    assert_eq!(
        code_of(codec::decode_int(Codec::Float, &good, 4, 4, &mut out)),
        "gvrs.codec.float_for_integer"
    );
    let mut f = vec![0f32; 16];
    assert_eq!(
        code_of(codec::decode_float(Codec::Huffman, &good, 4, 4, &mut f)),
        "gvrs.codec.integer_for_float"
    );
    // Linear on one column is refused (Gridfour cannot decode it either).
    let mut one = vec![0i32; 4];
    let mut b = header(0, 2, 0, 3);
    b.extend_from_slice(&zlib::deflate(&[0; 3], 6));
    assert_eq!(
        code_of(codec::decode_int(Codec::Deflate, &b, 4, 1, &mut one)),
        "gvrs.codec.bad_shape"
    );
    // A revised LSOP header with a residual coding rasterpack does not know: unsupported.
    let mut l = vec![0u8; 80];
    l[1] = 0x40 | 0x03;
    l[2] = 12;
    let e = codec::decode_int(Codec::Lsop12, &l, 4, 4, &mut out).unwrap_err();
    assert_eq!(
        (e.kind, e.code.as_ref()),
        (
            rasterpack_common::ErrorKind::Unsupported,
            "gvrs.codec.lsop_residual_type"
        )
    );
    // LSOP12 header only.
    assert_eq!(
        code_of(codec::decode_int(Codec::Lsop12, &[0; 20], 4, 4, &mut out)),
        "gvrs.codec.truncated"
    );
}

#[test]
fn m32_long_codes_round_trip_through_blocks() {
    // Residuals spanning every M32 length, Differencing on one row.
    let v: Vec<i32> = [
        0i64,
        126,
        253,
        16_000,
        2_100_000,
        270_000_000,
        2_147_483_647,
        -2_147_483_648,
        5,
    ]
    .iter()
    .map(|&x| x as i32)
    .collect();
    let mut codes = Vec::new();
    let seed = codec::predictor::encode(Predictor::Differencing, 1, v.len(), &v, &mut codes).unwrap();
    let mut out = vec![0; v.len()];
    codec::predictor::decode(Predictor::Differencing, seed, 1, v.len(), &codes, &mut out).unwrap();
    assert_eq!(out, v);
    let mut e = Vec::new();
    m32::encode(300, &mut e);
    assert_eq!(e, [0x7F, 0x80, 0x2D]);
}

/// Truncate and flip every byte of valid blocks of each codec: decoding returns, never panics.
#[test]
fn damaged_blocks_never_panic() {
    let rows = 12;
    let cols = 10;
    let mut rng = Rng(99);
    let mut blocks: Vec<(Codec, Vec<u8>)> = Vec::new();
    for (style, list) in [
        (0u64, &[(0u8, Codec::Huffman)][..]),
        (0, &[(0, Codec::Deflate)][..]),
        (3, &[(0, Codec::Huffman)][..]),
        (5, &[(0, Codec::Deflate)][..]),
        (0, &[(0, Codec::CanonicalHuffman)][..]),
        (3, &[(0, Codec::CanonicalHuffman)][..]),
        (5, &[(0, Codec::CanonicalHuffman)][..]),
    ] {
        let v = tile(&mut rng, rows, cols, style);
        blocks.push((
            list[0].1,
            codec::encode_int(&v, rows, cols, list).expect("compressible"),
        ));
    }
    // LSOP12 under both headers (the tile is 12 x 10).
    let v = tile(&mut rng, rows, cols, 0);
    for coding in [
        codec::lsop::ResidualCoding::Huffman,
        codec::lsop::ResidualCoding::Deflate,
        codec::lsop::ResidualCoding::Canonical,
    ] {
        blocks.push((
            Codec::Lsop12,
            codec::lsop::encode_with(0, &v, rows, cols, 6, &[coding]).expect("eligible"),
        ));
    }
    let f: Vec<f32> = (0..rows * cols).map(|i| (i as f32 * 0.1).cos()).collect();
    blocks.push((
        Codec::Float,
        codec::encode_float(&f, rows, cols, &[(0, Codec::Float)]).expect("compressible"),
    ));
    let mut ints = vec![0i32; rows * cols];
    let mut floats = vec![0f32; rows * cols];
    let run = |c: Codec, b: &[u8], ints: &mut [i32], floats: &mut [f32]| {
        if c == Codec::Float {
            let _ = codec::decode_float(c, b, rows, cols, floats);
        } else {
            let _ = codec::decode_int(c, b, rows, cols, ints);
        }
    };
    for (c, b) in &blocks {
        for n in 0..b.len() {
            run(*c, &b[..n], &mut ints, &mut floats);
        }
        let mut m = b.clone();
        for i in 0..m.len() {
            for x in [0xFFu8, 0x01, 0x80] {
                m[i] ^= x;
                run(*c, &m, &mut ints, &mut floats);
                m[i] ^= x;
            }
        }
    }
}

#[test]
fn lsop12_round_trips() {
    let mut rng = Rng(1234);
    let mut lsop_won = 0;
    for case in 0..120 {
        let rows = 6 + rng.below(30) as usize;
        let cols = 6 + rng.below(30) as usize;
        let v: Vec<i32> = match case % 4 {
            // Smooth surface with noise: LSOP12's home ground.
            0 | 1 => (0..rows * cols)
                .map(|i| {
                    let (r, c) = ((i / cols) as f64, (i % cols) as f64);
                    (1000.0 * (r * 0.13).sin() * (c * 0.07).cos() + 30.0 * r) as i32 + rng.below(3) as i32
                })
                .collect(),
            2 => vec![77; rows * cols],
            _ => tile(&mut rng, rows, cols, 1),
        };
        let mut out = vec![0i32; rows * cols];
        // Legacy header (Huffman / Deflate residuals), then canonical residuals allowed.
        for canonical in [false, true] {
            let direct = codec::lsop::encode(0, &v, rows, cols, 6, canonical).expect("eligible tile");
            codec::decode_int(Codec::Lsop12, &direct, rows, cols, &mut out)
                .unwrap_or_else(|e| panic!("case {case}: {e:?}"));
            assert_eq!(out, v, "case {case} {rows}x{cols}");
            let h = codec::lsop::parse_header(&direct).unwrap();
            assert_eq!(h.revised, h.coding == codec::lsop::ResidualCoding::Canonical);
            assert!(canonical || !h.revised);
        }
        let list = [(0u8, Codec::Huffman), (1, Codec::Deflate), (3, Codec::Lsop12)];
        if let Some(b) = codec::encode_int(&v, rows, cols, &list) {
            let c = list.iter().find(|c| c.0 == b[0]).unwrap().1;
            lsop_won += usize::from(c == Codec::Lsop12);
            codec::decode_int(c, &b, rows, cols, &mut out).unwrap();
            assert_eq!(out, v);
        }
    }
    assert!(lsop_won > 10, "LSOP12 chosen for {lsop_won} tiles");
    // Not eligible: too small, or with nulls.
    assert!(codec::lsop::encode(0, &[1; 25], 5, 5, 6, true).is_none());
    let mut n = vec![5; 64];
    n[9] = i32::MIN;
    assert!(codec::lsop::encode(0, &n, 8, 8, 6, true).is_none());
}

/// GvrsCanonicalHuffman blocks: the structures are validated (complete codes, length runs
/// inside their tables, exactly the residuals the tile needs, nothing after the text) and a
/// damaged block is an error with its code, never values.
#[test]
fn canonical_blocks_are_validated() {
    use codec::canonical;
    use codec::huffman::BitWriter;
    let (rows, cols) = (4usize, 5usize);
    let v: Vec<i32> = (0..20).map(|i| i * i - 40).collect();
    let mut out = vec![0i32; 20];
    let good = codec::encode_int(&v, rows, cols, &[(0, Codec::CanonicalHuffman)]).unwrap();
    codec::decode_int(Codec::CanonicalHuffman, &good, rows, cols, &mut out).unwrap();
    assert_eq!(out, v);
    let code = |b: &[u8], out: &mut [i32]| code_of(codec::decode_int(Codec::CanonicalHuffman, b, rows, cols, out));
    // Uniform tile: exactly the 6-byte header; anything after the seed is refused.
    let uniform = [0u8, 0, 7, 0, 0, 0];
    codec::decode_int(Codec::CanonicalHuffman, &uniform, rows, cols, &mut out).unwrap();
    assert!(out.iter().all(|&x| x == 7));
    assert_eq!(code(&[0, 0, 7, 0, 0, 0, 0], &mut out), "gvrs.codec.trailing_data");
    assert_eq!(code(&[0, 0, 7, 0], &mut out), "gvrs.codec.truncated");
    // A byte after the text, and the text cut short.
    let mut long = good.clone();
    long.push(0);
    assert_eq!(code(&long, &mut out), "gvrs.codec.trailing_data");
    assert_eq!(
        code(&good[..good.len() - 2], &mut out),
        "gvrs.codec.canonical_truncated"
    );
    // A text holding one residual more or fewer than the predictor needs.
    let p = good[1];
    let seed = i32::from_le_bytes(good[2..6].try_into().unwrap());
    let pred = codec::Predictor::from_code(p).unwrap();
    let mut res = Vec::new();
    codec::predictor::encode(pred, rows, cols, &v, &mut res).unwrap();
    assert_eq!(res.len(), codec::predictor::residual_count(pred, rows, cols));
    for n in [res.len() - 1, res.len() + 1] {
        let mut r = res.clone();
        r.resize(n, 3);
        let mut w = BitWriter::new(vec![0, p]);
        w.put(u64::from(seed as u32), 32);
        canonical::write_text(&canonical::plan(&r), &r, &mut w);
        assert_eq!(code(&w.finish(), &mut out), "gvrs.codec.canonical_count", "{n}");
    }
    // Hand-made texts. `msb` writes a canonical code most-significant bit first.
    fn msb(w: &mut BitWriter, c: u32, l: u32) {
        w.put(u64::from(c.reverse_bits() >> (32 - l)), l);
    }
    // Length table: symbols 18 (1 bit), 1 and 2 (2 bits); text alphabet: 2-bit escape (258, 1
    // bit), value 0 (128, 2 bits), end (259, 2 bits); then `body` writes the text itself.
    let text = |len_lens: &[(u64, u32)], body: &dyn Fn(&mut BitWriter)| {
        let mut w = BitWriter::new(vec![0, 1, 0, 0, 0, 0]);
        w.put(0, 1);
        for &(v, n) in len_lens {
            w.put(v, n);
        }
        // 128 zeros, length 2 (symbol 128), 129 zeros, 1 (symbol 258), 2 (symbol 259).
        msb(&mut w, 0, 1);
        w.put(128 - 11, 7);
        msb(&mut w, 0b11, 2);
        msb(&mut w, 0, 1);
        w.put(129 - 11, 7);
        msb(&mut w, 0b10, 2);
        msb(&mut w, 0b11, 2);
        body(&mut w);
        w.finish()
    };
    // 20 length-table lengths: 0, 2, 2, fifteen zeros (symbol 18, 4 extra bits), 1, 0.
    let table = [(0, 5), (2, 5), (2, 5), (18, 5), (4, 7), (1, 5), (0, 5)];
    let escape_first = text(&table, &|w| {
        msb(w, 0, 1);
        w.put(1, 2);
    });
    assert_eq!(code(&escape_first, &mut out), "gvrs.codec.canonical_escape");
    // Over-subscribed length table: symbol 18 given 1 bit, 1 and 2 also 1 bit.
    let over = [(0, 5), (1, 5), (1, 5), (18, 5), (4, 7), (1, 5), (0, 5)];
    assert_eq!(code(&text(&over, &|_| {}), &mut out), "gvrs.codec.canonical_incomplete");
    // A zero run past the 20 lengths of the table.
    let overrun = [(0, 5), (2, 5), (2, 5), (18, 5), (127, 7)];
    assert_eq!(code(&text(&overrun, &|_| {}), &mut out), "gvrs.codec.canonical_lengths");
    // Length symbol 19 (Gridfour never writes it) in the table's own lengths.
    let nineteen = [(19, 5)];
    assert_eq!(
        code(&text(&nineteen, &|_| {}), &mut out),
        "gvrs.codec.canonical_lengths"
    );
    // The hand-made code itself is sound: 18 zeros then the end is one residual short of the
    // 19 a 4 x 5 Differencing tile needs.
    let short = text(&table, &|w| {
        for _ in 0..18 {
            msb(w, 0b10, 2);
        }
        msb(w, 0b11, 2);
    });
    assert_eq!(code(&short, &mut out), "gvrs.codec.canonical_count");
    let exact = text(&table, &|w| {
        for _ in 0..19 {
            msb(w, 0b10, 2);
        }
        msb(w, 0, 1); // the last zero becomes 0 << 2 | 3 = 3
        w.put(3, 2);
        msb(w, 0b11, 2);
    });
    codec::decode_int(Codec::CanonicalHuffman, &exact, rows, cols, &mut out).unwrap();
    // Differencing from seed 0: 0, ..., 0 then +3 in the last cell.
    assert_eq!(out[19], 3);
    assert!(out[..19].iter().all(|&x| x == 0));
}
