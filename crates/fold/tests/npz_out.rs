//! `.npz` output: several arrays streamed into one archive (on a file and on a stream), read
//! back by the `.npz` reader, with the zip64 layout numpy's `force_zip64` writes checked byte
//! by byte.

use rasterpack_common::{ArrayRequest, ArraySink, DType, Format, Input, Limits, NdArray, Output, ValidateOptions};
use rasterpack_fold::npz::{self, NpzCompression, NpzWriter};
use rasterpack_fold::NpzFormat;

fn arrays() -> Vec<(String, NdArray)> {
    let a = NdArray::from_vec(vec![3, 4], (0..12).map(|v| v as f32 * 0.5 - 1.0).collect()).unwrap();
    let b = NdArray::from_vec(vec![5], vec![1i64, -2, 3, -4, i64::MAX]).unwrap();
    let c = NdArray::new(DType::U8, vec![0, 7], Vec::new()).unwrap();
    let d = NdArray::from_vec(vec![2, 2, 2], (0..8).map(|v| v as f64 * 1e300).collect()).unwrap();
    vec![
        ("grid".into(), a),
        ("survey/table 1".into(), b),
        ("empty".into(), c),
        ("höhe".into(), d),
    ]
}

/// Each array streamed in pieces of `piece` bytes.
fn write(out: Output, compression: NpzCompression, piece: usize) {
    let mut w = NpzWriter::new(out, compression);
    for (name, a) in arrays() {
        let mut m = w.member(&name).unwrap();
        m.begin(&rasterpack_common::ArrayInfo::of(&a)).unwrap();
        for (k, p) in a.data.chunks(piece.max(1)).enumerate() {
            m.write_at((k * piece) as u64, p).unwrap();
        }
        m.finish().unwrap();
    }
    w.finish().unwrap();
}

fn check_reads_back(bytes: Vec<u8>) {
    let input = Input::from_bytes("out.npz", bytes);
    assert!(NpzFormat.detect(&input.head(64)));
    let report = NpzFormat.validate(&input, &ValidateOptions::default());
    assert!(report.is_valid(true), "{:?}", report.findings);
    assert_eq!(report.summary["members"], 4);
    for (name, a) in arrays() {
        let req = ArrayRequest::for_element(&name);
        let got = NpzFormat.read_array(&input, &req).unwrap();
        assert_eq!(
            (got.dtype, &got.shape, &got.data),
            (a.dtype, &a.shape, &a.data),
            "{name}"
        );
    }
    // Several arrays: reading without a name says which there are.
    let e = NpzFormat.read_array(&input, &ArrayRequest::default()).unwrap_err();
    assert_eq!(e.code, "request.element_required");
}

#[test]
fn several_arrays_on_a_stream_and_a_file_read_back() {
    for compression in [NpzCompression::Stored, NpzCompression::Deflate] {
        for piece in [1usize, 8, 4096] {
            let mut streamed = Vec::new();
            write(Output::Stream(&mut streamed), compression, piece);
            check_reads_back(streamed.clone());

            let path = std::env::temp_dir().join(format!("rp-npz-out-{}-{piece}.npz", std::process::id()));
            let file = std::fs::File::options()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .unwrap();
            write(Output::File(&file), compression, piece);
            drop(file);
            let on_file = std::fs::read(&path).unwrap();
            std::fs::remove_file(&path).unwrap();
            check_reads_back(on_file.clone());
            if compression == NpzCompression::Stored {
                // The same bytes but for the descriptors (and flag bit 3) of the stream.
                assert_eq!(on_file.len() + 4 * 24, streamed.len());
            }
        }
    }
}

fn le16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes(b[o..o + 2].try_into().unwrap())
}
fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn le64(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// The layout of numpy's `force_zip64` members, small enough for CI: zip64 extra fields with
/// the sizes in every local header and directory entry, 0xFFFFFFFF in the 32-bit fields, and
/// the zip64 end record and locator.
#[test]
fn zip64_structure_of_a_small_member() {
    let a = NdArray::from_vec(vec![2, 3], vec![1u16, 2, 3, 4, 5, 6]).unwrap();
    let path = std::env::temp_dir().join(format!("rp-npz-zip64-{}.npz", std::process::id()));
    let file = std::fs::File::create(&path).unwrap();
    NpzFormat
        .array_writer(&Default::default(), Output::File(&file))
        .and_then(|mut s| {
            s.begin(&rasterpack_common::ArrayInfo::of(&a))?;
            s.write_at(0, &a.data)?;
            s.finish()
        })
        .unwrap();
    drop(file);
    let z = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let header = rasterpack_common::npy::header_bytes(a.dtype, &a.shape);
    let size = (header.len() + a.data.len()) as u64;
    let name = b"arr_0.npy";
    // Local header.
    assert_eq!(le32(&z, 0), 0x0403_4b50);
    assert_eq!(le16(&z, 4), 45, "version needed: zip64");
    assert_eq!(le16(&z, 6), 0, "no data descriptor on a file");
    assert_eq!(le16(&z, 8), 0, "stored");
    let mut content = header.clone();
    content.extend_from_slice(&a.data);
    assert_eq!(le32(&z, 14), npz::crc32(&content));
    assert_eq!((le32(&z, 18), le32(&z, 22)), (u32::MAX, u32::MAX));
    assert_eq!(le16(&z, 26) as usize, name.len());
    assert_eq!(le16(&z, 28), 20);
    assert_eq!(&z[30..30 + name.len()], name);
    let x = 30 + name.len();
    assert_eq!((le16(&z, x), le16(&z, x + 2)), (1, 16), "zip64 extra field");
    assert_eq!((le64(&z, x + 4), le64(&z, x + 12)), (size, size));
    assert_eq!(&z[x + 20..x + 20 + content.len()], &content[..]);
    // Directory entry.
    let cd = x + 20 + content.len();
    assert_eq!(le32(&z, cd), 0x0201_4b50);
    assert_eq!(le32(&z, cd + 16), npz::crc32(&content));
    assert_eq!(
        (le32(&z, cd + 20), le32(&z, cd + 24), le32(&z, cd + 42)),
        (u32::MAX, u32::MAX, u32::MAX)
    );
    assert_eq!(le16(&z, cd + 30), 28);
    let cx = cd + 46 + name.len();
    assert_eq!((le16(&z, cx), le16(&z, cx + 2)), (1, 24));
    assert_eq!(
        (le64(&z, cx + 4), le64(&z, cx + 12), le64(&z, cx + 20)),
        (size, size, 0)
    );
    // zip64 end record, locator, end record.
    let z64 = cx + 28;
    assert_eq!(le32(&z, z64), 0x0606_4b50);
    assert_eq!((le64(&z, z64 + 24), le64(&z, z64 + 32)), (1, 1));
    assert_eq!((le64(&z, z64 + 40), le64(&z, z64 + 48)), ((z64 - cd) as u64, cd as u64));
    let loc = z64 + 56;
    assert_eq!(le32(&z, loc), 0x0706_4b50);
    assert_eq!(le64(&z, loc + 8), z64 as u64);
    let end = loc + 20;
    assert_eq!(le32(&z, end), 0x0605_4b50);
    assert_eq!(z.len(), end + 22);
    // And it reads back (through the zip64 records).
    let got = NpzFormat
        .read_array(&Input::from_bytes("x.npz", z), &ArrayRequest::default())
        .unwrap();
    assert_eq!(got.data, a.data);
}

#[test]
fn a_damaged_member_is_a_finding_and_its_read_fails() {
    let mut z = Vec::new();
    write(Output::Stream(&mut z), NpzCompression::Stored, 4096);
    // Flip one value byte of "grid" (after its local header and .npy header).
    let at = z.windows(8).position(|w| w == b"grid.npy").unwrap() + 8 + 20 + 128 + 5;
    z[at] ^= 0x40;
    let input = Input::from_bytes("bad.npz", z);
    let report = NpzFormat.validate(&input, &ValidateOptions::default());
    assert!(!report.is_valid(false));
    assert!(
        report.findings.iter().any(|f| f.code == "npz.member_damaged"),
        "{:?}",
        report.findings
    );
    let e = NpzFormat
        .read_array(&input, &ArrayRequest::for_element("grid"))
        .unwrap_err();
    assert_eq!(e.code, "npz.member_damaged");
    // The other members stay readable.
    assert!(NpzFormat
        .read_array(&input, &ArrayRequest::for_element("empty"))
        .is_ok());
    let _ = Limits::default();
}
