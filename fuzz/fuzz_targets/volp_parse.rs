#![no_main]
//! VOLP: parse + validate + decode + inspect arbitrary bytes. Nothing may panic, and decode must
//! succeed exactly when validation finds no error.
use libfuzzer_sys::fuzz_target;
use rasterpack_common::{ArrayRequest, Format, Input, Limits};
use rasterpack_volp::{decode, validate_full, VolpFormat};

fuzz_target!(|data: &[u8]| {
    let v = validate_full(data, &Limits::default());
    let d = decode(data);
    assert_eq!(d.is_ok(), !v.findings.has_errors());
    if let Ok(vol) = d {
        let _ = rasterpack_volp::to_physical(&vol);
    }
    let input = Input::from_bytes("fuzz", data.to_vec());
    let _ = VolpFormat.inspect(&input, &Default::default());
    let _ = VolpFormat.read_array(&input, &ArrayRequest::default());
});
