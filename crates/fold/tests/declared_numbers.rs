//! Arithmetic on what a FOLD index declares never overflows (issue 17, item 17): every number
//! of `testdata/fold/sample.fold`'s JSON index is set in turn to each of
//! `testkit::EXTREME_NUMBERS`, and validate and reads must end in a verdict, never a panic
//! (tests build with overflow checks on). The fuzz target `json_numbers` found the first case:
//! an `offset` near u64::MAX overflowed `offset + 32` on the read path.

use rasterpack_common::testkit::{json_number_spans, replace_json_number, EXTREME_NUMBERS};
use rasterpack_common::{ArrayRequest, Format, Input, ValidateOptions};
use rasterpack_fold::FoldFormat;

const SAMPLE: &[u8] = include_bytes!("../../../testdata/fold/sample.fold");

/// The file with its index (big-endian offset at 12, length at 20; the end of the file)
/// replaced by `index`.
fn with_index(index: &[u8]) -> Vec<u8> {
    let off = u64::from_be_bytes(SAMPLE[12..20].try_into().unwrap()) as usize;
    let mut b = SAMPLE[..off].to_vec();
    b[20..28].copy_from_slice(&(index.len() as u64).to_be_bytes());
    b.extend_from_slice(index);
    b
}

#[test]
fn index_numbers_at_their_extremes() {
    let off = u64::from_be_bytes(SAMPLE[12..20].try_into().unwrap()) as usize;
    let len = u64::from_be_bytes(SAMPLE[20..28].try_into().unwrap()) as usize;
    assert_eq!(off + len, SAMPLE.len(), "the index ends the sample");
    let index = &SAMPLE[off..];
    let spans = json_number_spans(index);
    assert!(spans.len() > 10, "{} numbers", spans.len());
    let mut offsets = 0;
    for span in spans {
        let before = String::from_utf8_lossy(&index[..span.start]);
        let is_offset = before.trim_end().ends_with("\"offset\":");
        for &tok in EXTREME_NUMBERS {
            let input = Input::from_bytes("x.fold", with_index(&replace_json_number(index, span.clone(), tok)));
            let r = FoldFormat.validate(&input, &ValidateOptions::default());
            for physical in [false, true] {
                let _ = FoldFormat.read_array(&input, &ArrayRequest::default().with_physical(physical));
            }
            if is_offset && tok.parse::<u64>().is_ok_and(|v| v > 1 << 62) {
                assert!(
                    r.findings.has_code("fold.index.out_of_range"),
                    "offset {tok}: {:?}",
                    r.findings
                );
                offsets += 1;
            }
        }
    }
    assert!(offsets > 0, "no offset set beyond 2^62");
}
