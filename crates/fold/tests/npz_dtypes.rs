//! NPZ0 members of float16, complex64/complex128 and other dtypes, in either byte order and in
//! C or Fortran order, 1-D to 4-D, stored and deflated: the `.npy` members are crafted byte by
//! byte (`rasterpack_common::npy_cases`), zipped here, and read back whole, by region, to a
//! sequential sink and through the in-memory `npz::read_array`, against values computed
//! independently of the reader.

use rasterpack_common::npy_cases::{expected, npy_case, regions, KINDS, SHAPES};
use rasterpack_common::{ArrayInfo, ArrayRequest, ArraySink, DType, Limits, MemorySink, Region, RegionSpec, Result};
use rasterpack_fold::npz::{self, crc32};
use rasterpack_fold::{FoldBuilder, FoldChunkOptions, FoldCompression, FoldFile};

/// A zip archive of `(name.npy, content)` members, stored or deflated (the layout Python's
/// zipfile writes).
fn zip(members: &[(String, Vec<u8>, bool)]) -> Vec<u8> {
    let mut z = Vec::new();
    let mut cd = Vec::new();
    for (name, content, deflate) in members {
        let data = if *deflate {
            miniz_oxide::deflate::compress_to_vec(content, 6)
        } else {
            content.clone()
        };
        let fname = format!("{name}.npy");
        let method: u16 = if *deflate { 8 } else { 0 };
        let offset = z.len() as u32;
        let sizes = |v: &mut Vec<u8>| {
            v.extend_from_slice(&method.to_le_bytes());
            v.extend_from_slice(&[0, 0, 0x21, 0]);
            v.extend_from_slice(&crc32(content).to_le_bytes());
            v.extend_from_slice(&(data.len() as u32).to_le_bytes());
            v.extend_from_slice(&(content.len() as u32).to_le_bytes());
            v.extend_from_slice(&(fname.len() as u16).to_le_bytes());
        };
        z.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        z.extend_from_slice(&[20, 0, 0, 0]);
        sizes(&mut z);
        z.extend_from_slice(&0u16.to_le_bytes());
        z.extend_from_slice(fname.as_bytes());
        z.extend_from_slice(&data);
        cd.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        cd.extend_from_slice(&[20, 3, 20, 0, 0, 0]);
        sizes(&mut cd);
        cd.extend_from_slice(&[0; 12]);
        cd.extend_from_slice(&offset.to_le_bytes());
        cd.extend_from_slice(fname.as_bytes());
    }
    let cd_off = z.len() as u32;
    let n = members.len() as u16;
    z.extend_from_slice(&cd);
    z.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    z.extend_from_slice(&[0, 0, 0, 0]);
    z.extend_from_slice(&n.to_le_bytes());
    z.extend_from_slice(&n.to_le_bytes());
    z.extend_from_slice(&(cd.len() as u32).to_le_bytes());
    z.extend_from_slice(&cd_off.to_le_bytes());
    z.extend_from_slice(&0u16.to_le_bytes());
    z
}

fn fold_of(zip: &[u8], compression: FoldCompression) -> FoldFile {
    let mut b = FoldBuilder::new();
    b.add_raw_chunk("c", "NPZ0", zip, FoldChunkOptions { compression, ecc: None })
        .unwrap();
    FoldFile::from_bytes(b.to_bytes().unwrap()).unwrap()
}

/// A sink that accepts only ascending, gapless writes (a pipe, a compressing writer).
#[derive(Default)]
struct SequentialSink {
    data: Vec<u8>,
}

impl ArraySink for SequentialSink {
    fn begin(&mut self, _: &ArrayInfo) -> Result<()> {
        Ok(())
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        assert_eq!(offset, self.data.len() as u64, "out of order");
        self.data.extend_from_slice(data);
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

#[test]
fn every_kind_byte_order_and_layout_reads_exactly() {
    let mut cases = 0;
    for (dtype, code) in KINDS {
        for big_endian in [false, true] {
            for fortran in [false, true] {
                let members: Vec<(String, Vec<u8>, bool)> = SHAPES
                    .iter()
                    .enumerate()
                    .map(|(i, shape)| {
                        let content = npy_case(dtype, code, big_endian, fortran, shape);
                        (format!("s{i}"), content, i % 2 == 1)
                    })
                    .collect();
                let archive = zip(&members);
                let compression = if cases % 2 == 0 {
                    FoldCompression::None
                } else {
                    FoldCompression::Zstd(1)
                };
                let file = fold_of(&archive, compression);
                let what = format!("{}{code} fortran={fortran}", if big_endian { '>' } else { '<' });
                let report = file.validate();
                assert!(
                    report.is_valid(true) && !report.unsupported,
                    "{what}: {:?}",
                    report.findings
                );
                let infos = file.arrays().unwrap();
                for (i, shape) in SHAPES.iter().enumerate() {
                    let name = format!("s{i}");
                    let what = format!("{what} {shape:?}");
                    let info = infos.iter().find(|a| a.name.as_deref() == Some(&format!("c/{name}")));
                    let info = info.unwrap_or_else(|| panic!("{what}: not listed in {infos:?}"));
                    assert_eq!((info.dtype, info.shape.as_slice()), (dtype, *shape), "{what}");
                    let whole = expected(dtype, shape, &Region::full(shape));
                    let element = format!("c/{name}");
                    for spec in regions(shape) {
                        let region = Region::parse(&spec, shape).unwrap();
                        let req = ArrayRequest::for_element(&element).with_region(RegionSpec::from(&region));
                        let got = file.read(&req).unwrap_or_else(|e| panic!("{what} [{spec}]: {e}"));
                        assert_eq!(got.dtype, dtype);
                        assert_eq!(got.data, expected(dtype, shape, &region), "{what} [{spec}]");
                        let mut seq = SequentialSink::default();
                        file.stream(&req, &mut seq).unwrap();
                        assert_eq!(seq.data, got.data, "{what} [{spec}]: sequential");
                    }
                    let whole_read = file.read(&ArrayRequest::for_element(&element)).unwrap();
                    assert_eq!(whole_read.data, whole, "{what}: whole");
                    let mem = npz::read_array(&archive, &name, &Limits::default()).unwrap();
                    assert_eq!((mem.dtype, &mem.shape), (dtype, &shape.to_vec()), "{what}");
                    assert_eq!(mem.data, whole, "{what}: npz::read_array");
                    cases += 1;
                }
            }
        }
    }
    assert_eq!(cases, KINDS.len() * 4 * SHAPES.len());
}

/// A deflated Fortran-order member above the working set: slabs into memory (random access), a
/// clear `limit.working_set` refusal before any byte for a sequential sink.
#[test]
fn fortran_members_beyond_the_working_set() {
    let shape: &[u64] = &[40, 30, 20];
    let content = npy_case(DType::C128, "c16", true, true, shape);
    let archive = zip(&[("v".into(), content, true)]);
    let file = fold_of(&archive, FoldCompression::Zstd(3));
    let row = 40 * 30 * 16u64;
    let whole = expected(DType::C128, shape, &Region::full(shape));
    let limits = Limits {
        working_set: 3 * row,
        ..Limits::default()
    };
    let req = ArrayRequest {
        limits,
        ..ArrayRequest::for_element("c/v")
    };
    let mut mem = MemorySink::new(limits);
    file.stream(&req, &mut mem).unwrap();
    assert_eq!(mem.into_array().unwrap().data, whole, "three rows per slab");
    let region = Region::parse("3:37,5,1:19", shape).unwrap();
    let got = file.read(&req.clone().with_region(RegionSpec::parse("3:37,5,1:19").unwrap()));
    assert_eq!(got.unwrap().data, expected(DType::C128, shape, &region));
    let mut seq = SequentialSink::default();
    let err = file.stream(&req, &mut seq).unwrap_err();
    assert_eq!(err.code, "limit.working_set", "{err}");
    assert!(
        err.message.contains("complex128") && err.message.contains("Fortran"),
        "{err}"
    );
    assert!(seq.data.is_empty());
}
