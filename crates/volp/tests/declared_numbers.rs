//! Arithmetic on what a VOLP header declares never overflows (issue 17, item 17): every number
//! of the JSON headers of `testdata/volp`'s valid files is set in turn to each of
//! `testkit::EXTREME_NUMBERS`, and validate and reads (stored and physical) must end in a
//! verdict, never a panic (tests build with overflow checks on); a read succeeds only when
//! validation finds no error.

use rasterpack_common::testkit::{json_number_spans, replace_json_number, EXTREME_NUMBERS};
use rasterpack_common::{ArrayRequest, Format, Input, ValidateOptions};
use rasterpack_volp::VolpFormat;

const FILES: [&[u8]; 2] = [
    include_bytes!("../../../testdata/volp/cloud_2x8x8_float32.volp"),
    include_bytes!("../../../testdata/volp/temperature_4x32x32_int16.volp"),
];

#[test]
fn header_numbers_at_their_extremes() {
    let mut cases = 0;
    for file in FILES {
        let len = u32::from_le_bytes(file[4..8].try_into().unwrap()) as usize;
        let header = &file[8..8 + len];
        for span in json_number_spans(header) {
            for &tok in EXTREME_NUMBERS {
                let h = replace_json_number(header, span.clone(), tok);
                let mut b = file[..4].to_vec();
                b.extend_from_slice(&(h.len() as u32).to_le_bytes());
                b.extend_from_slice(&h);
                b.extend_from_slice(&file[8 + len..]);
                let input = Input::from_bytes("x.volp", b);
                let r = VolpFormat.validate(&input, &ValidateOptions::default());
                let read = VolpFormat.read_array(&input, &ArrayRequest::default());
                let _ = VolpFormat.read_array(&input, &ArrayRequest::default().with_physical(true));
                assert_eq!(read.is_ok(), !r.findings.has_errors(), "{tok}: {:?}", r.findings);
                cases += 1;
            }
        }
    }
    assert!(cases > 100, "{cases} cases");
}
