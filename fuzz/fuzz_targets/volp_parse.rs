#![no_main]
//! VOLP: validate, read (stored, physical, a region), stream statistics and inspect arbitrary
//! bytes. Nothing may panic, and a whole read must succeed exactly when validation finds no
//! error.
use libfuzzer_sys::fuzz_target;
use rasterpack_common::{ArrayFile, ArrayRequest, Format, Input, Limits, Region};
use rasterpack_volp::{VolpFile, VolpFormat};

fuzz_target!(|data: &[u8]| {
    let input = Input::from_bytes("fuzz", data.to_vec());
    let report = VolpFile::validate_input(&input, &Limits::default());
    let read = VolpFile::from_input(input.clone(), Limits::default()).and_then(|file| {
        let whole = file.read(&ArrayRequest::default())?;
        let _ = file.read(&ArrayRequest::default().with_physical(true));
        let _ = file.stats();
        let shape = &file.header().shape;
        if shape.iter().all(|&n| n > 0) {
            let start: Vec<u64> = shape.iter().map(|&n| n / 2).collect();
            let size: Vec<u64> = shape.iter().map(|&n| (n - n / 2).min(2)).collect();
            if let Ok(region) = Region::from_start_size(&start, &size) {
                let _ = file.read(&ArrayRequest::default().with_region(region));
            }
        }
        Ok(whole)
    });
    assert_eq!(read.is_ok(), !report.findings.has_errors());
    let _ = VolpFormat.inspect(&input, &Default::default());
    let _ = VolpFormat.read_array(&input, &ArrayRequest::default());
});
