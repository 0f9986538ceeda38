#![no_main]
//! GVRS: header/directory/record parsing, full validation (every tile decoded), inspect and
//! element reads over arbitrary bytes. Must never panic or allocate past the limits.
use libfuzzer_sys::fuzz_target;
use rasterpack_common::{ArrayRequest, Format, Input, InspectOptions, Limits, Region, ValidateOptions};
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
    if let Ok(f) = GvrsFile::from_input(input, limits) {
        for e in &f.elements {
            let name = e.name();
            let _ = f.read(&ArrayRequest::for_element(&name));
            let _ = f.read(&ArrayRequest::for_element(&name).with_codes(true).with_region(Region::full(&[1, 1])));
            let _ = f.cell(&name, 0, 0);
        }
        let _ = f.metadata();
        let _ = f.file_space_directory();
    }
});
