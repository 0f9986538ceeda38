#![no_main]
//! FOLD parse + validate + inspect + array read over arbitrary bytes: must never panic.
use libfuzzer_sys::fuzz_target;
use rasterpack_common::{ArrayRequest, Format, Input, InspectOptions, ValidateOptions};
use rasterpack_fold::FoldFormat;

fuzz_target!(|data: &[u8]| {
    let input = Input::from_bytes("fuzz.fold", data.to_vec());
    let _ = FoldFormat.validate(&input, &ValidateOptions::default());
    let _ = FoldFormat.inspect(&input, &InspectOptions::default());
    let _ = FoldFormat.read_array(&input, &ArrayRequest::default());
    let _ = rasterpack_fold::pjson::parse(data, 64);
    let _ = rasterpack_fold::npz::describe(data, &Default::default());
});
