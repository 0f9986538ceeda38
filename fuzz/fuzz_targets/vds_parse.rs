#![no_main]
//! VDS: parse a `.vds` container, validate it (decoding every None/RLE/Zip brick), inspect it
//! and read its primary channel. Nothing may panic or allocate past the (tightened) limits.
//! Seed with `testdata/vds/*.vds`.
use libfuzzer_sys::fuzz_target;
use rasterpack_common::{ArrayRequest, Format, Input, InspectOptions, Limits, ValidateOptions};
use rasterpack_vds_meta::VdsFormat;

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_alloc: 64 << 20,
        max_array_bytes: 64 << 20,
        max_entries: 1 << 20,
        ..Limits::default()
    };
    let input = Input::from_bytes("fuzz.vds", data.to_vec());
    let _ = VdsFormat.detect(&input.head(64));
    let _ = VdsFormat.validate(&input, &ValidateOptions { limits, ..Default::default() });
    let _ = VdsFormat.inspect(&input, &InspectOptions { all: true, limits });
    let _ = VdsFormat.read_array(
        &input,
        &ArrayRequest {
            limits,
            physical: true,
            ..Default::default()
        },
    );
});
