//! The zip layer of NPZ0 chunks (issue 17): members with the zip "encrypted" flag are
//! unsupported on every path and never read as plaintext (item 5).

use rasterpack_common::{
    ArrayInfo, ArrayRequest, ArraySink, DType, ErrorKind, Format, Input, InspectOptions, Limits, NdArray, Region,
    Severity, ValidateOptions,
};
use rasterpack_fold::npz;
use rasterpack_fold::{FoldBuilder, FoldChunkOptions, FoldCompression, FoldFile, FoldFormat};

const UNSUPPORTED: &str = "fold.payload.npz_unsupported";

fn arrays() -> (NdArray, NdArray) {
    let a = NdArray::new(DType::U16, vec![3, 4], (0..24).collect()).unwrap();
    let b = NdArray::new(DType::F32, vec![2, 5], (0..40).map(|i| i * 3).collect()).unwrap();
    (a, b)
}

/// Offsets of the general-purpose flags of member `name`: in its local header and in its
/// central directory entry.
fn flag_offsets(z: &[u8], name: &str) -> (usize, usize) {
    let n = name.as_bytes();
    let hits: Vec<usize> = (0..z.len() - n.len()).filter(|&p| &z[p..p + n.len()] == n).collect();
    assert_eq!(hits.len(), 2, "{name} once in its local header, once in the directory");
    // Local header: name at +30, flags at +6. Directory entry: name at +46, flags at +8.
    assert_eq!(z[hits[0] - 30..hits[0] - 26], 0x0403_4b50u32.to_le_bytes());
    assert_eq!(z[hits[1] - 46..hits[1] - 42], 0x0201_4b50u32.to_le_bytes());
    (hits[0] - 30 + 6, hits[1] - 46 + 8)
}

/// The archive of arrays `a` and `b`, member `b.npy` flagged encrypted where `local` and
/// `central` say. Its bytes stay the plaintext `.npy`: a reader that ignores the flag would
/// return `b`'s values, which is what must never happen.
fn archive(local: bool, central: bool) -> Vec<u8> {
    let (a, b) = arrays();
    let mut z = npz::write(&[("a", &a), ("b", &b)]);
    let (l, c) = flag_offsets(&z, "b.npy");
    if local {
        z[l] |= 1;
    }
    if central {
        z[c] |= 1;
    }
    z
}

fn fold(z: &[u8], compression: FoldCompression) -> Input {
    let mut bld = FoldBuilder::new();
    bld.created_at_unix = 1.0;
    bld.add_raw_chunk("n", "NPZ0", z, FoldChunkOptions { compression, ecc: None })
        .unwrap();
    Input::from_bytes("enc.fold", bld.to_bytes().unwrap())
}

/// A sink that records whether any byte reached it.
#[derive(Default)]
struct Spy {
    begun: bool,
    bytes: u64,
}

impl ArraySink for Spy {
    fn begin(&mut self, _: &ArrayInfo) -> rasterpack_common::Result<()> {
        self.begun = true;
        Ok(())
    }
    fn write_at(&mut self, _: u64, data: &[u8]) -> rasterpack_common::Result<()> {
        self.bytes += data.len() as u64;
        Ok(())
    }
    fn finish(&mut self) -> rasterpack_common::Result<()> {
        Ok(())
    }
}

#[test]
fn encrypted_members_are_unsupported_on_every_path() {
    let (a, _) = arrays();
    for (local, central) in [(true, true), (true, false), (false, true)] {
        let z = archive(local, central);
        let what = format!("flag in local header: {local}, in directory: {central}");
        // The in-memory description.
        let info = npz::describe(&z, &Limits::default()).unwrap();
        assert!(info[0].is_readable(), "{what}");
        assert!(
            info[1].unsupported.as_deref().is_some_and(|u| u.contains("encrypted")) && !info[1].is_readable(),
            "{what}: {:?}",
            info[1]
        );
        // The one-pass check of a streamed (zstd) archive cannot vouch for it.
        let mut check = npz::StreamCheck::new(&Limits::default());
        check.feed(&z);
        assert_eq!(check.finish(), None, "{what}: left to the walk against the directory");
        let e = npz::read_array(&z, "b", &Limits::default()).unwrap_err();
        assert_eq!(
            (e.kind, e.code.as_ref()),
            (ErrorKind::Unsupported, UNSUPPORTED),
            "{what}"
        );
        assert_eq!(npz::read_array(&z, "a", &Limits::default()).unwrap().data, a.data);
        // Stored and zstd chunks take different validation paths (walk / streaming check).
        for compression in [FoldCompression::None, FoldCompression::Zstd(3)] {
            let input = fold(&z, compression);
            let what = format!("{what}, {compression:?}");
            for report in [
                FoldFormat.validate(&input, &ValidateOptions::default()),
                FoldFormat.inspect(&input, &InspectOptions::default()).unwrap(),
            ] {
                let f: Vec<_> = report.findings.iter().filter(|f| f.code == UNSUPPORTED).collect();
                assert_eq!(f.len(), 1, "{what}: {:?}", report.findings);
                assert_eq!(f[0].severity, Severity::Info, "{what}");
                assert!(f[0].message.contains("encrypted"), "{what}: {}", f[0].message);
                assert!(report.unsupported, "{what}: exit 3");
                assert!(!report.findings.has_errors(), "{what}: {:?}", report.findings);
            }
            // Whole, region and streamed reads of `b` are refused, nothing delivered.
            let whole = ArrayRequest::for_element("n/b");
            let region =
                ArrayRequest::for_element("n/b").with_region(Region::from_start_size(&[1, 1], &[1, 2]).unwrap());
            for req in [&whole, &region] {
                let e = FoldFormat.read_array(&input, req).unwrap_err();
                assert_eq!(
                    (e.kind, e.code.as_ref()),
                    (ErrorKind::Unsupported, UNSUPPORTED),
                    "{what}: {e}"
                );
                let file = FoldFile::from_input(input.clone(), Limits::default()).unwrap();
                let mut spy = Spy::default();
                let e = file.stream(req, &mut spy).unwrap_err();
                assert_eq!(e.kind, ErrorKind::Unsupported, "{what}: {e}");
                assert_eq!((spy.begun, spy.bytes), (false, 0), "{what}: nothing reaches the sink");
            }
            // Without --element the file holds two arrays; `a` still reads exactly.
            assert_eq!(
                FoldFormat
                    .read_array(&input, &ArrayRequest::for_element("n/a"))
                    .unwrap()
                    .data,
                a.data,
                "{what}"
            );
        }
    }
    // The control: without the flag the same bytes are a readable member.
    let z = archive(false, false);
    assert!(npz::describe(&z, &Limits::default())
        .unwrap()
        .iter()
        .all(|i| i.is_readable()));
}

#[test]
fn corpus_member_with_the_encrypted_flag_is_unsupported() {
    let Some(dir) = rasterpack_common::testkit::corpus_dir("hostile") else {
        return;
    };
    let input = Input::open(dir.join("more/fold_npz_member_encrypted_flag.fold")).unwrap();
    let v = FoldFormat.validate(&input, &ValidateOptions::default());
    assert!(v.unsupported && !v.findings.has_errors(), "{:?}", v.findings);
    assert!(v.findings.has_code(UNSUPPORTED), "{:?}", v.findings);
    let e = FoldFormat.read_array(&input, &ArrayRequest::default()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unsupported, "{e}");
}
