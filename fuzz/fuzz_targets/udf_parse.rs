#![no_main]
use libfuzzer_sys::fuzz_target;
use rasterpack_common::{Format, Input, InspectOptions, Limits, ValidateOptions};
use rasterpack_udf::{validate, UdfFile, UdfFormat};

// Parse + validate + inspect + read every table of arbitrary bytes: must never panic.
fuzz_target!(|data: &[u8]| {
    let input = Input::from_bytes("fuzz", data.to_vec());
    let limits = Limits {
        max_alloc: 64 << 20,
        max_text: 1 << 20,
        max_array_bytes: 64 << 20,
        ..Limits::default()
    };
    let _ = validate::validate(&input, &limits);
    let _ = UdfFormat.inspect(&input, &InspectOptions { all: false, limits });
    let _ = UdfFormat.validate(&input, &ValidateOptions { limits, ..Default::default() });
    let file = UdfFile::open_lenient(&input, &limits);
    for ds in file.datasets() {
        for t in &ds.tables {
            let _ = file.typed_values(t);
            let _ = file.text(t);
            let _ = file.json(t);
            let _ = file.array(ds, t);
        }
    }
});
