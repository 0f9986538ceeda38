#![no_main]
//! FOLD's streaming checks against their whole-document references, over arbitrary bytes: the
//! streaming JSON check gives `pjson::parse`'s verdict (same offset and message) whatever the
//! piece size; the streaming `.npz` check never vouches for anything `npz::describe` does not
//! say; reads of every listed array, whole and by region, never panic.
use libfuzzer_sys::fuzz_target;
use rasterpack_common::{ArrayFile, ArrayRequest, Region};
use rasterpack_fold::jsonstream::JsonCheck;
use rasterpack_fold::npz::{self, StreamCheck};
use rasterpack_fold::{pjson, FoldFile};

fuzz_target!(|data: &[u8]| {
    let Some((&first, doc)) = data.split_first() else { return };
    let piece = (first as usize % 17) + 1;

    let mut check = JsonCheck::new(8);
    for p in doc.chunks(piece) {
        check.feed(p);
    }
    assert_eq!(check.finish(), pjson::parse(doc, 8).map(|_| ()), "JSON verdicts differ");

    let limits = Default::default();
    let whole = npz::describe(doc, &limits);
    let mut stream = StreamCheck::new(&limits);
    for p in doc.chunks(piece * 97) {
        stream.feed(p);
    }
    if let Some(streamed) = stream.finish() {
        assert_eq!(Some(streamed), whole.as_ref().ok().cloned(), "the streaming check vouched alone");
    }
    if let Ok(arrays) = &whole {
        for a in arrays {
            let r = npz::read_array(doc, &a.name, &limits);
            if a.is_readable() {
                let got = r.expect("a readable member reads");
                assert_eq!(got.shape, a.shape);
            }
        }
    }

    if let Ok(file) = FoldFile::from_bytes(doc.to_vec()) {
        let _ = file.validate();
        for a in file.arrays().unwrap_or_default() {
            let name = a.name.clone().unwrap_or_default();
            let _ = file.read(&ArrayRequest::for_element(name.clone()));
            let half: Vec<u64> = a.shape.iter().map(|&d| d / 2).collect();
            let size: Vec<u64> = a.shape.iter().map(|&d| d - d / 2).collect();
            if let Ok(region) = Region::from_start_size(&half, &size) {
                let _ = file.read(&ArrayRequest::for_element(name).with_region(region));
            }
        }
    }
});
