#![no_main]
//! `.npz` files over arbitrary bytes: inspect, validate and every member's read never panic; a
//! member the read returns is one `validate` found intact, with the dtype and shape it lists;
//! and writing the arrays read (stored, then deflated, to a stream) gives an archive that
//! validates and reads back the same.
use libfuzzer_sys::fuzz_target;
use rasterpack_common::{
    ArrayInfo, ArrayRequest, ArraySink, Format, Input, InspectOptions, Limits, Output, ValidateOptions,
};
use rasterpack_fold::npz::{NpzCompression, NpzWriter};
use rasterpack_fold::NpzFormat;

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_alloc: 1 << 24,
        max_array_bytes: 1 << 24,
        ..Limits::default()
    };
    let input = Input::from_bytes("fuzz.npz", data.to_vec());
    let _ = NpzFormat.inspect(&input, &InspectOptions { all: false, limits });
    let report = NpzFormat.validate(&input, &ValidateOptions { limits, ..Default::default() });
    let Some(listed) = report.summary.get("arrays").and_then(|a| a.as_array()).cloned() else {
        return;
    };
    let mut read = Vec::new();
    for a in listed.iter().take(8) {
        let Some(name) = a["name"].as_str() else { continue };
        let req = ArrayRequest {
            element: Some(name.to_string()),
            limits,
            ..ArrayRequest::default()
        };
        if let Ok(array) = NpzFormat.read_array(&input, &req) {
            assert_eq!(a["shape"], rasterpack_common::serde_json::json!(array.shape), "{name}");
            assert_eq!(a["dtype"], rasterpack_common::serde_json::json!(array.dtype.name()), "{name}");
            read.push((name.to_string(), array));
        }
    }
    for compression in [NpzCompression::Stored, NpzCompression::Deflate] {
        let mut out = Vec::new();
        let mut w = NpzWriter::new(Output::Stream(&mut out), compression);
        let mut written = Vec::new();
        for (name, array) in &read {
            // Names repeated by a damaged archive are refused by the writer.
            let Ok(mut m) = w.member(name) else { continue };
            m.begin(&ArrayInfo::of(array)).unwrap();
            m.write_at(0, &array.data).unwrap();
            m.finish().unwrap();
            written.push((name, array));
        }
        w.finish().unwrap();
        let again = Input::from_bytes("again.npz", out);
        let r = NpzFormat.validate(&again, &ValidateOptions { limits, ..Default::default() });
        assert!(r.is_valid(true), "{:?}", r.findings);
        for (name, array) in written {
            let back = NpzFormat.read_array(&again, &ArrayRequest::for_element(name)).unwrap();
            assert_eq!((back.dtype, &back.shape, &back.data), (array.dtype, &array.shape, &array.data));
        }
    }
});
