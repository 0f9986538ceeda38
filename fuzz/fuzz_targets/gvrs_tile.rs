#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = data; // TODO(gvrs_tile): replaced by the format owner
});
