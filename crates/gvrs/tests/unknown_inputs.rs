//! Never silently wrong (issue 9, item 2): every input a decoder does not know ends in
//! "unsupported" (exit 3) naming what is unknown, and every convention it does know gives
//! Gridfour's exact values. One test per unknown input: a codec name, an LSOP header flag,
//! residual coding and coefficient count, a predictor code, the canonical Huffman reserved bit,
//! and the Short fill convention of Gridfour 2026; plus the codec-list compatibility warning.

mod util;
use util::*;
mod craft;

use craft::{text, Craft, El, Meta};
use rasterpack_common::{ArrayRequest, ErrorKind, Format, Input, Limits, Report, Severity, ValidateOptions};
use rasterpack_gvrs::codec::{self, Codec};
use rasterpack_gvrs::{GvrsFile, GvrsFormat};

const R: usize = 8;
const C: usize = 10;

fn input(b: &[u8]) -> Input {
    Input::from_bytes("t.gvrs", b.to_vec())
}

fn validate(b: &[u8]) -> Report {
    GvrsFormat.validate(&input(b), &ValidateOptions::default())
}

/// A smooth 8 x 10 tile (LSOP12 needs at least 6 x 6).
fn values() -> Vec<i32> {
    (0..R * C)
        .map(|i| {
            let (r, c) = ((i / C) as f64, (i % C) as f64);
            (300.0 * (r * 0.4).sin() + 20.0 * c) as i32 + (i % 3) as i32
        })
        .collect()
}

/// A one-tile Integer file whose codec list is `codecs` and whose tile is `block`.
fn file_with(codecs: &[&str], block: Vec<u8>) -> Vec<u8> {
    let mut c = Craft::new(R as i32, C as i32, R as i32, C as i32, vec![El::int("z", i32::MIN)]);
    c.codecs = codecs.iter().map(|s| s.to_string()).collect();
    assert!(
        block.len() < R * C * 4,
        "the block must be shorter than the uncompressed one"
    );
    c.tiles.push((0, vec![block]));
    c.build()
}

/// The file is reported unsupported (exit 3) by validate and by every read, with `code`, and
/// the messages name `what`.
fn assert_unsupported(b: &[u8], code: &str, what: &str) {
    let r = validate(b);
    assert!(r.unsupported, "{code}: {:#?}", r.findings);
    let f = r
        .findings
        .iter()
        .find(|f| f.code == code)
        .unwrap_or_else(|| panic!("no {code}: {:#?}", r.findings));
    assert!(f.message.contains(what), "{}", f.message);
    let e = GvrsFormat.read_array(&input(b), &ArrayRequest::default()).unwrap_err();
    assert_eq!((e.kind, e.code.as_ref()), (ErrorKind::Unsupported, code), "{e:?}");
    assert!(e.message.contains(what), "{}", e.message);
    let f = GvrsFile::from_input(input(b), Limits::default()).unwrap();
    assert_eq!(cell(&f, 0, 0, 0).unwrap_err().kind, ErrorKind::Unsupported);
}

#[test]
fn unknown_codec_name() {
    let b = file_with(&["GvrsZstd"], vec![0, 1, 2, 3]);
    let r = validate(&b);
    assert!(r
        .findings
        .iter()
        .any(|f| f.code == "gvrs.header.codec_unknown" && f.message.contains("GvrsZstd")));
    assert_unsupported(&b, "gvrs.tile.codec_unsupported", "GvrsZstd");
}

/// An LSOP12 block with canonical residuals (revised header) or Huffman ones (legacy header).
fn lsop_block(canonical: bool) -> Vec<u8> {
    use codec::lsop::ResidualCoding;
    let coding = if canonical {
        ResidualCoding::Canonical
    } else {
        ResidualCoding::Huffman
    };
    let b = codec::lsop::encode_with(0, &values(), R, C, 6, &[coding]).unwrap();
    assert_eq!(codec::lsop::parse_header(&b).unwrap().revised, canonical);
    b
}

#[test]
fn known_lsop_headers_decode_exactly() {
    for canonical in [false, true] {
        let b = file_with(&["LSOP12"], lsop_block(canonical));
        assert!(validate(&b).is_valid(false));
        let a = read_el(&GvrsFile::from_input(input(&b), Limits::default()).unwrap(), 0, false).unwrap();
        let got: Vec<i32> = a
            .data
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, values());
    }
}

#[test]
fn unknown_lsop_residual_coding() {
    // Revised header, coding 3 (Gridfour knows 0, 1 and 2).
    let mut b = lsop_block(true);
    b[1] = 0x40 | 3;
    assert_unsupported(&file_with(&["LSOP12"], b), "gvrs.codec.lsop_residual_type", "coding 3");
    // Legacy header, method 5.
    let mut b = lsop_block(false);
    b[62] = 5;
    assert_unsupported(&file_with(&["LSOP12"], b), "gvrs.codec.lsop_residual_type", "coding 5");
}

#[test]
fn unknown_lsop_flags() {
    // Revised header: the reserved bit 5.
    let mut b = lsop_block(true);
    b[1] |= 0x20;
    assert_unsupported(&file_with(&["LSOP12"], b), "gvrs.codec.lsop_flags", "0x20");
    // Legacy header: a bit of the method byte other than the coding and the checksum flag.
    let mut b = lsop_block(false);
    b[62] |= 0x10;
    assert_unsupported(&file_with(&["LSOP12"], b), "gvrs.codec.lsop_flags", "0x10");
}

#[test]
fn unknown_lsop_coefficient_count() {
    let mut b = lsop_block(true);
    b[2] = 8;
    assert_unsupported(
        &file_with(&["LSOP12"], b),
        "gvrs.codec.lsop_coefficients",
        "8 predictor",
    );
    let mut b = lsop_block(false);
    b[1] = 8;
    assert_unsupported(
        &file_with(&["LSOP12"], b),
        "gvrs.codec.lsop_coefficients",
        "8 predictor",
    );
}

#[test]
fn lsop_value_checksum_is_verified() {
    // Legacy header with the checksum flag: the CRC32C of the values follows the header.
    let v = values();
    let b = lsop_block(false);
    let crc = crc32c::crc32c(&v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>());
    let mut with = b[..63].to_vec();
    with[62] |= 0x80;
    with.extend_from_slice(&crc.to_le_bytes());
    with.extend_from_slice(&b[63..]);
    let f = file_with(&["LSOP12"], with.clone());
    assert!(validate(&f).is_valid(false));
    // A wrong checksum: the values are not handed out.
    with[63] ^= 1;
    let f = file_with(&["LSOP12"], with);
    let e = GvrsFormat.read_array(&input(&f), &ArrayRequest::default()).unwrap_err();
    assert_eq!(
        (e.kind, e.code.as_ref()),
        (ErrorKind::Invalid, "gvrs.codec.lsop_checksum")
    );
}

#[test]
fn unknown_predictor_code() {
    let v = values();
    for (name, c) in [
        ("GvrsHuffman", Codec::Huffman),
        ("GvrsDeflate", Codec::Deflate),
        ("GvrsCanonicalHuffman", Codec::CanonicalHuffman),
    ] {
        let mut b = codec::encode_int(&v, R, C, &[(0, c)]).unwrap();
        assert!(validate(&file_with(&[name], b.clone())).is_valid(false), "{name}");
        b[1] = 7;
        assert_unsupported(
            &file_with(&[name], b),
            "gvrs.codec.unknown_predictor",
            "predictor code 7",
        );
    }
}

#[test]
fn canonical_reserved_bit() {
    let mut b = codec::encode_int(&values(), R, C, &[(0, Codec::CanonicalHuffman)]).unwrap();
    assert_ne!(b[1], 0, "not the uniform form");
    b[6] |= 1; // the first bit of the canonical text
    assert_unsupported(
        &file_with(&["GvrsCanonicalHuffman"], b),
        "gvrs.codec.canonical_reserved",
        "reserved bit",
    );
}

/// Gridfour 2026 writes a Short element's fill cells as its null (`i32::MIN`) in compressed
/// blocks and reads them back as -32768 whatever the fill; rasterpack gives the same values,
/// with an info (fill -32768) or a warning (another fill) from validate.
#[test]
fn short_fill_convention_of_gridfour_2026() {
    let mut v = values();
    for i in (0..R * C).step_by(7) {
        v[i] = i32::MIN;
    }
    let b = codec::encode_int(&v, R, C, &[(0, Codec::CanonicalHuffman)]).unwrap();
    assert_eq!(b[1], 4, "DifferencingWithNulls");
    for fill in [i16::MIN, -999] {
        let mut c = Craft::new(R as i32, C as i32, R as i32, C as i32, vec![El::short("s", fill)]);
        c.codecs = vec!["GvrsCanonicalHuffman".into()];
        c.tiles.push((0, vec![b.clone()]));
        let file = c.build();
        let r = validate(&file);
        assert!(r.is_valid(false), "{:#?}", r.findings);
        let (code, sev) = if fill == i16::MIN {
            ("gvrs.compat.short_null_code", Severity::Info)
        } else {
            ("gvrs.compat.short_null_fill", Severity::Warning)
        };
        assert!(
            r.findings.iter().any(|f| f.code == code && f.severity == sev),
            "{fill}: {:#?}",
            r.findings
        );
        let a = GvrsFormat.read_array(&input(&file), &ArrayRequest::default()).unwrap();
        let got: Vec<i16> = a
            .data
            .chunks_exact(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect();
        let want: Vec<i16> = v
            .iter()
            .map(|&x| if x == i32::MIN { i16::MIN } else { x as i16 })
            .collect();
        assert_eq!(got, want, "fill {fill}");
    }
}

/// A 10 x 10 Short element (fill -999) in 8 x 8 tiles, compressed, as Gridfour 2026 writes it:
/// every grid cell holds `r * 10 + c` except `nulls` (which hold Gridfour's null code), and the
/// 156 cells of the edge tiles beyond the grid hold the null code too (Gridfour writes unwritten
/// cells as its null).
fn short_edge_tiles(nulls: &[(u32, u32)]) -> Vec<u8> {
    let mut c = Craft::new(10, 10, 8, 8, vec![El::short("s", -999)]);
    // GvrsHuffman first: a prefix of Gridfour's codec list, so no codec-list warning.
    c.codecs = vec!["GvrsHuffman".into()];
    for tr in 0..2u32 {
        for tc in 0..2u32 {
            let mut v = Vec::new();
            for r in 0..8 {
                for col in 0..8 {
                    let (gr, gc) = (tr * 8 + r, tc * 8 + col);
                    v.push(if gr >= 10 || gc >= 10 || nulls.contains(&(gr, gc)) {
                        i32::MIN
                    } else {
                        (gr * 10 + gc) as i32
                    });
                }
            }
            let b = codec::encode_int(&v, 8, 8, &[(0, Codec::Huffman)]).unwrap();
            c.tiles.push((tr * 2 + tc, vec![b]));
        }
    }
    c.build()
}

/// Issue 17 item 11: `gvrs.compat.short_null_fill` counts cells of the grid only. The cells of
/// edge tiles beyond the grid are never read: a file whose every grid cell is written gets no
/// warning (it used to count the 156 cells beyond the grid and fail `--strict`), and where the
/// warning applies it counts the grid's null cells (3 here, not 159).
#[test]
fn short_null_fill_counts_grid_cells_only() {
    let all_written = short_edge_tiles(&[]);
    let r = validate(&all_written);
    assert!(r.is_valid(true), "{:#?}", r.findings);
    assert!(!r.findings.has_code("gvrs.compat.short_null_fill"), "{:#?}", r.findings);
    let a = GvrsFormat
        .read_array(&input(&all_written), &ArrayRequest::default())
        .unwrap();
    let got: Vec<i16> = a
        .data
        .chunks_exact(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect();
    assert_eq!(got, (0..100).collect::<Vec<i16>>());

    // One null in each of three tiles, one of them an edge tile.
    let three = short_edge_tiles(&[(0, 0), (3, 9), (9, 9)]);
    let r = validate(&three);
    assert!(r.is_valid(false) && !r.is_valid(true), "{:#?}", r.findings);
    let w: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.code == "gvrs.compat.short_null_fill")
        .collect();
    assert_eq!(w.len(), 1, "{w:#?}");
    assert!(w[0].message.contains(": 3 grid cell(s)"), "{}", w[0].message);
}

/// The same on the Gridfour-written file of the corpus (`edges/gvrs`): `validate --strict`
/// passes, and the grid reads 0..99.
#[test]
fn gridfour_short_fill_all_written_is_strictly_valid() {
    let Some(dir) = rasterpack_common::testkit::corpus_dir("edges/gvrs") else {
        return;
    };
    let bytes = std::fs::read(dir.join("short_fill_minus999_all_written.gvrs")).unwrap();
    let r = validate(&bytes);
    assert!(r.is_valid(true), "{:#?}", r.findings);
    let a = GvrsFormat.read_array(&input(&bytes), &ArrayRequest::default()).unwrap();
    let got: Vec<i16> = a
        .data
        .chunks_exact(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect();
    assert_eq!(got, (0..100).collect::<Vec<i16>>());
}

/// Gridfour maps tile codec indexes through its own default list unless `GvrsJavaCodecs`
/// resolves the names: a file made elsewhere without the record gets a compatibility warning.
#[test]
fn codec_list_compatibility_warning() {
    let block = codec::encode_int(&values(), R, C, &[(0, Codec::Deflate)]).unwrap();
    let java = |lines: &[&str]| Meta {
        name: "GvrsJavaCodecs".into(),
        id: 0,
        ty: 9,
        content: text(&lines.iter().map(|l| format!("{l}\n")).collect::<String>()),
        description: String::new(),
    };
    let deflate = "GvrsDeflate,org.gridfour.compress.CodecDeflate,org.gridfour.compress.CodecDeflate";
    for (codecs, meta, warn) in [
        // [GvrsDeflate] without the record: index 0 would be GvrsHuffman in Gridfour.
        (vec!["GvrsDeflate"], None, true),
        (vec!["GvrsDeflate"], Some(java(&[deflate])), false),
        // A prefix of Gridfour's own list needs no record.
        (vec!["GvrsHuffman", "GvrsDeflate"], None, false),
        // LSOP12 first, the record naming only GvrsDeflate: Gridfour drops LSOP12 and shifts.
        (vec!["LSOP12", "GvrsDeflate"], Some(java(&[deflate])), true),
    ] {
        let mut c = Craft::new(R as i32, C as i32, R as i32, C as i32, vec![El::int("z", i32::MIN)]);
        c.codecs = codecs.iter().map(|s| s.to_string()).collect();
        let mut blk = block.clone();
        blk[0] = codecs.iter().position(|&n| n == "GvrsDeflate").unwrap() as u8;
        c.tiles.push((0, vec![blk]));
        c.metadata.extend(meta);
        let b = c.build();
        let r = validate(&b);
        let has = r
            .findings
            .iter()
            .any(|f| f.code == "gvrs.compat.codec_list" && f.severity == Severity::Warning);
        assert_eq!(has, warn, "{codecs:?}: {:#?}", r.findings);
        assert!(r.is_valid(false), "a compatibility warning, not an error");
        // rasterpack itself always maps through the header's list: exact values.
        let a = GvrsFormat.read_array(&input(&b), &ArrayRequest::default()).unwrap();
        let got: Vec<i32> = a
            .data
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, values());
    }
}
