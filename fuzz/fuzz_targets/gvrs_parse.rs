#![no_main]
//! GVRS: header/directory/record parsing, full validation (every tile decoded), inspect and
//! element reads over arbitrary bytes. Must never panic or allocate past the limits.
use libfuzzer_sys::fuzz_target;
use rasterpack_common::{Format, Input, InspectOptions, Limits, ValidateOptions};
use rasterpack_gvrs::{GvrsFile, GvrsFormat};

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_array_bytes: 16 << 20,
        max_alloc: 64 << 20,
        ..Limits::default()
    };
    let input = Input::from_bytes("fuzz.gvrs", data.to_vec());
    let _ = GvrsFormat.validate(&input, &ValidateOptions { limits, ..Default::default() });
    let _ = GvrsFormat.inspect(&input, &InspectOptions { all: false, limits });
    if let Ok(f) = GvrsFile::open(input, limits) {
        for e in 0..f.elements.len() {
            let _ = f.read_element(e, false);
            let _ = f.cell(e, 0, 0);
        }
        let _ = f.metadata();
        let _ = f.file_space_directory();
    }
});
