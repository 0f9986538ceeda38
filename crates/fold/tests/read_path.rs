//! Every check that protects the bytes being read runs on the read path too (issue 11, item
//! 16): each protected structure is damaged in turn and the array read must fail with the
//! finding's code (ErrorKind::Invalid, exit 1), never return values. A clean chunk in a file
//! with damage elsewhere stays readable.

use rasterpack_common::{ArrayRequest, DType, ErrorKind, Format, Input, NdArray, ValidateOptions};
use rasterpack_fold::{
    analyze, npz, validate, FoldAnalyzeOptions, FoldBuilder, FoldChunkOptions, FoldCompression, FoldFormat,
};

fn array(seed: u32, n: usize) -> NdArray {
    let data: Vec<u8> = (0..n as u32)
        .flat_map(|i| ((i * 7 + seed) as f32 * 0.25).to_le_bytes())
        .collect();
    NdArray::new(DType::F32, vec![n as u64], data).unwrap()
}

struct Sample {
    bytes: Vec<u8>,
    clean: NdArray,
    target: NdArray,
}

/// Chunks `clean` (array `c`), `target` (array `t`, stored) and `zipped` (array `z`, zstd).
fn sample() -> Sample {
    let (clean, target) = (array(1, 50), array(2, 60));
    let mut b = FoldBuilder::new();
    b.created_at_unix = 1.0;
    let stored = FoldChunkOptions {
        compression: FoldCompression::None,
        ecc: None,
    };
    b.add_npz("clean", &[("c", &clean)], stored).unwrap();
    b.add_npz("target", &[("t", &target)], stored).unwrap();
    b.add_npz("zipped", &[("z", &array(3, 70))], FoldChunkOptions::default())
        .unwrap();
    Sample {
        bytes: b.to_bytes().unwrap(),
        clean,
        target,
    }
}

fn read(bytes: &[u8], element: &str) -> rasterpack_common::Result<NdArray> {
    FoldFormat.read_array(
        &Input::from_bytes("f", bytes.to_vec()),
        &ArrayRequest {
            element: Some(element.into()),
            ..Default::default()
        },
    )
}

/// Offset of the `nth` occurrence of `needle`.
fn find(hay: &[u8], needle: &str, nth: usize) -> usize {
    let n = needle.as_bytes();
    (0..hay.len() - n.len())
        .filter(|&p| &hay[p..p + n.len()] == n)
        .nth(nth)
        .unwrap_or_else(|| panic!("{needle:?} #{nth} not found"))
}

/// Where chunk `name`'s header starts.
fn chunk_offset(bytes: &[u8], name: &str) -> usize {
    let a = analyze(&Input::from_bytes("f", bytes.to_vec()), &FoldAnalyzeOptions::default()).unwrap();
    a.chunks.iter().find(|c| c.entry.name == name).unwrap().entry.offset as usize
}

/// The read of `t` fails with `code` (exit 1); the clean chunk still reads exactly.
fn fails_with(s: &Sample, damaged: &[u8], code: &str) {
    let e = read(damaged, "target/t").expect_err(code);
    assert_eq!((e.kind, e.code.as_ref()), (ErrorKind::Invalid, code), "{e}");
    assert!(e.offset.is_some(), "{e}: the error says where");
    let v = FoldFormat.validate(&Input::from_bytes("f", damaged.to_vec()), &ValidateOptions::default());
    assert!(
        v.findings.has_code(code),
        "validate reports {code} too: {:?}",
        v.findings
    );
    assert_eq!(
        read(damaged, "clean/c").unwrap().data,
        s.clean.data,
        "{code}: clean chunk"
    );
}

#[test]
fn each_protected_structure_damaged_fails_the_read_with_its_code() {
    let s = sample();
    assert_eq!(read(&s.bytes, "target/t").unwrap().data, s.target.data);
    let at = chunk_offset(&s.bytes, "target");

    // Stored payload byte: CRC32C (then SHA-256).
    let mut d = s.bytes.clone();
    d[at + 32 + 100] ^= 0x20;
    fails_with(&s, &d, "fold.integrity.crc_mismatch");

    // Chunk header fields that the index repeats: CRC32C, lengths, flags, ctype.
    for (field, byte) in [
        ("crc32c", 24),
        ("comp_len", 23),
        ("uncomp_len", 15),
        ("flags", 7),
        ("ctype", 0),
    ] {
        let mut d = s.bytes.clone();
        d[at + byte] ^= 0x01;
        let e = read(&d, "target/t").expect_err(field);
        assert_eq!(e.code, "fold.chunk.header_mismatch", "{field}: {e}");
        assert_eq!(e.kind, ErrorKind::Invalid);
        assert_eq!(read(&d, "clean/c").unwrap().data, s.clean.data);
    }

    // The index's SHA-256 of the chunk (its second occurrence; the first is chunk_hashes).
    let sha = analyze(&Input::from_bytes("f", s.bytes.clone()), &FoldAnalyzeOptions::default())
        .unwrap()
        .chunks[1]
        .entry
        .sha256
        .clone();
    let flip = |c: u8| if c == b'0' { b'1' } else { b'0' };
    let mut d = s.bytes.clone();
    let p = find(&d, &sha, 1);
    d[p] = flip(d[p]);
    fails_with(&s, &d, "fold.integrity.sha_mismatch");

    // metadata.chunk_hashes: the hierarchical hash.
    let mut d = s.bytes.clone();
    let p = find(&d, &sha, 0);
    d[p] = flip(d[p]);
    fails_with(&s, &d, "fold.integrity.chunk_hashes_mismatch");

    // uncomp_len in header and index alike, one more than the zstd frame yields.
    let z = chunk_offset(&s.bytes, "zipped");
    let a = analyze(&Input::from_bytes("f", s.bytes.clone()), &FoldAnalyzeOptions::default()).unwrap();
    let len = a.chunks[2].entry.uncomp_len;
    assert_ne!(len % 10, 9, "same digit count after +1");
    let mut d = s.bytes.clone();
    d[z + 8..z + 16].copy_from_slice(&(len + 1).to_be_bytes());
    let p = find(&d, &format!("\"uncomp_len\":{len}"), 0) + "\"uncomp_len\":".len();
    d[p..p + len.to_string().len()].copy_from_slice((len + 1).to_string().as_bytes());
    let e = read(&d, "zipped/z").unwrap_err();
    assert_eq!(
        (e.kind, e.code.as_ref()),
        (ErrorKind::Invalid, "fold.payload.uncomp_len_mismatch"),
        "{e}"
    );
    assert_eq!(read(&d, "target/t").unwrap().data, s.target.data);
}

#[test]
fn duplicate_chunk_names_are_never_read() {
    let (one, two) = (array(1, 10), array(2, 10));
    let mut b = FoldBuilder::new();
    let o = FoldChunkOptions::default();
    b.add_npz("tgt_a", &[("t", &one)], o).unwrap();
    b.add_npz("tgt_b", &[("t", &two)], o).unwrap();
    let mut d = b.to_bytes().unwrap();
    // Rename the second chunk in its index entry (the name occurs in chunk_hashes first).
    let p = find(&d, "\"name\":\"tgt_b\"", 0) + "\"name\":\"tgt_".len();
    d[p] = b'a';
    for element in ["tgt_a/t", "t"] {
        let e = read(&d, element).unwrap_err();
        assert_eq!(
            (e.kind, e.code.as_ref()),
            (ErrorKind::Invalid, "fold.index.duplicate_name"),
            "{e}"
        );
    }
}

#[test]
fn npz_member_crc_fails_only_that_member() {
    // An archive with a wrong CRC-32 for member "bad" but a correct chunk CRC32C/SHA-256
    // (the archive was written wrong, not damaged later).
    let (good, bad) = (array(4, 20), array(5, 20));
    let mut z = npz::write(&[("good", &good), ("bad", &bad)]);
    let cd = find(&z, "PK\u{1}\u{2}", 1);
    z[cd + 16] ^= 0xff;
    let mut b = FoldBuilder::new();
    b.add_raw_chunk("n", "NPZ0", &z, FoldChunkOptions::default()).unwrap();
    let d = b.to_bytes().unwrap();
    let v = FoldFormat.validate(&Input::from_bytes("f", d.clone()), &ValidateOptions::default());
    assert!(
        v.findings.has_code("fold.payload.npz_member_damaged"),
        "{:?}",
        v.findings
    );
    assert!(!v.is_valid(false));
    let e = read(&d, "n/bad").unwrap_err();
    assert_eq!(
        (e.kind, e.code.as_ref()),
        (ErrorKind::Invalid, "fold.payload.npz_member_damaged"),
        "{e}"
    );
    assert!(e.message.contains("CRC-32"), "{e}");
    assert_eq!(read(&d, "n/good").unwrap().data, good.data);
    // The archive reader itself checks the member CRC-32 whatever it is asked through.
    assert!(npz::read_array(&z, "bad", &Default::default()).is_err());
}

#[test]
fn ecc_repairs_are_read_and_damage_beyond_them_is_not() {
    let t = array(6, 30); // ~360 bytes with the .npy header and zip framing: two blocks
    for (nsym, errors, repaired) in [(64u8, 10usize, true), (16, 40, false)] {
        let mut b = FoldBuilder::new();
        let opts = FoldChunkOptions {
            compression: FoldCompression::None,
            ecc: Some(nsym),
        };
        b.add_npz("target", &[("t", &t)], opts).unwrap();
        let good = b.to_bytes().unwrap();
        let a = analyze(&Input::from_bytes("f", good.clone()), &FoldAnalyzeOptions::default()).unwrap();
        let n = a.chunks[0].entry.comp_len as usize;
        let mut d = good.clone();
        for i in 0..errors {
            d[28 + 32 + (i * 13) % n] ^= 0x33;
        }
        if repaired {
            assert_eq!(read(&d, "target/t").unwrap().data, t.data, "repaired, then verified");
        } else {
            let e = read(&d, "target/t").unwrap_err();
            assert_eq!(
                (e.kind, e.code.as_ref()),
                (ErrorKind::Invalid, "fold.ecc.ecc_uncorrectable"),
                "{e}"
            );
        }
    }
}

#[test]
fn manifest_damage_is_reported_but_does_not_stop_verified_reads() {
    // The manifest hash covers the metadata, not chunk bytes (each is covered by CRC32C,
    // SHA-256 and chunk_hashes, all checked): a mismatch is a warning, as in pyfolds, so
    // validate passes without --strict and the array reads.
    let s = sample();
    let mut d = s.bytes.clone();
    let p = find(&d, "\"manifest_hash\":\"", 0) + "\"manifest_hash\":\"".len();
    d[p] = if d[p] == b'a' { b'b' } else { b'a' };
    let v = FoldFormat.validate(&Input::from_bytes("f", d.clone()), &ValidateOptions::default());
    assert!(v.is_valid(false) && !v.is_valid(true), "{:?}", v.findings);
    assert!(v.findings.has_code("fold.manifest.manifest_hash_mismatch"));
    assert_eq!(read(&d, "target/t").unwrap().data, s.target.data);
}

#[test]
fn the_library_read_path_checks_the_same() {
    let s = sample();
    let at = chunk_offset(&s.bytes, "target");
    let mut d = s.bytes.clone();
    d[at + 32 + 3] ^= 1;
    let input = Input::from_bytes("f", d);
    let a = analyze(&input, &FoldAnalyzeOptions::default()).unwrap();
    let c = a.container.as_ref().unwrap();
    let e = validate::read_chunk(&input, c, "target", &Default::default()).unwrap_err();
    assert_eq!(e.code, "fold.integrity.crc_mismatch");
    assert!(validate::read_chunk(&input, c, "clean", &Default::default()).is_ok());
    let st = a.chunks.iter().find(|st| st.entry.name == "target").unwrap();
    assert!(st.errors.iter().any(|f| f.code == "fold.integrity.crc_mismatch"));
    assert!(a
        .chunks
        .iter()
        .find(|st| st.entry.name == "clean")
        .unwrap()
        .errors
        .is_empty());
}

#[test]
fn a_damaged_chunk_is_named_when_no_array_can_be_chosen() {
    // The CLI bug of issue 13: the only NPZ0 chunk fails its CRC and convert said
    // "no NPZ0 array ... choose one of:" with an empty list (exit 2).
    let t = array(7, 10);
    let mut b = FoldBuilder::new();
    b.add_npz(
        "nuclear_arrays",
        &[("t", &t)],
        FoldChunkOptions {
            compression: FoldCompression::None,
            ecc: None,
        },
    )
    .unwrap();
    let mut d = b.to_bytes().unwrap();
    d[28 + 32 + 90] ^= 4;
    for element in [None, Some("t"), Some("nuclear_arrays/t"), Some("nuclear_arrays/other")] {
        let e = FoldFormat
            .read_array(
                &Input::from_bytes("f", d.clone()),
                &ArrayRequest {
                    element: element.map(String::from),
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert_eq!(
            (e.kind, e.code.as_ref()),
            (ErrorKind::Invalid, "fold.integrity.crc_mismatch"),
            "{element:?}: {e}"
        );
        assert!(e.message.contains("nuclear_arrays") && e.offset.is_some(), "{e}");
    }
}

/// An NPZ0 member whose CRC-32 was wrong when the file was written (the chunk's CRC32C and
/// SHA-256 match its bytes): numpy refuses the member, so every read of it fails, a region
/// read included, whatever the chunk's compression.
#[test]
fn a_member_written_with_a_bad_crc_is_never_read_even_in_part() {
    let values = array(4, 3_000_000); // large enough for the streamed member path
    let mut zip = npz::write(&[("m", &values)]);
    // CRC-32 of the member in its local header (offset 14) and its central-directory entry
    // (offset 16 after the entry's signature): both agree, both wrong.
    let cd = zip
        .windows(4)
        .rposition(|w| w == [0x50, 0x4b, 0x01, 0x02])
        .expect("central directory entry");
    for at in [14, cd + 16] {
        zip[at] ^= 0x5a;
    }
    for compression in [FoldCompression::None, FoldCompression::Zstd(3)] {
        let mut b = FoldBuilder::new();
        b.add_raw_chunk("bad", "NPZ0", &zip, FoldChunkOptions { compression, ecc: None })
            .unwrap();
        let input = Input::from_bytes("bad-member-crc.fold", b.to_bytes().unwrap());
        let whole = FoldFormat.read_array(&input, &ArrayRequest::for_element("bad/m"));
        assert_eq!(
            whole.unwrap_err().kind,
            ErrorKind::Invalid,
            "{compression:?}: whole read"
        );
        let region = rasterpack_common::Region::from_start_size(&[0], &[2]).unwrap();
        let part = FoldFormat.read_array(&input, &ArrayRequest::for_element("bad/m").with_region(&region));
        assert_eq!(
            part.expect_err("a region of a member numpy refuses must not read").kind,
            ErrorKind::Invalid,
            "{compression:?}: region read"
        );
    }
}
