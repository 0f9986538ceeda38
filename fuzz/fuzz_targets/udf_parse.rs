#![no_main]
use libfuzzer_sys::fuzz_target;
use rasterpack_common::{
    ArrayFile, ArrayInfo, ArrayRequest, ArraySink, Format, Input, InspectOptions, Limits, Output, Region,
    ValidateOptions,
};
use rasterpack_udf::{validate, UdfFile, UdfFormat};

// Parse + validate + inspect + read every table of arbitrary bytes (whole, by region, and
// streamed into the UDF writer): must never panic.
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
            if let Ok(whole) = file.array(ds, t) {
                // A region (the second half of the first axis) equals the cut of the whole.
                if let Some(&first) = whole.shape.first() {
                    if first > 1 {
                        let mut region = Region::full(&whole.shape);
                        region.ranges[0].start = first / 2;
                        let req = ArrayRequest::for_element(file.path_of(t))
                            .with_limits(limits)
                            .with_region(&region);
                        if let Ok(part) = file.read(&req) {
                            assert_eq!(part.data, whole.region(&region).unwrap().data);
                        }
                    }
                }
                // Streamed into the UDF writer, the copy reads back the same.
                let mut copy = Vec::new();
                let mut w = UdfFormat.array_writer(&Default::default(), Output::Stream(&mut copy)).unwrap();
                if w.begin(&ArrayInfo::of(&whole)).is_ok() {
                    w.write_at(0, &whole.data).unwrap();
                    w.finish().unwrap();
                    drop(w);
                    let back = UdfFormat.read_array(&Input::from_bytes("copy", copy), &ArrayRequest::default());
                    assert_eq!(back.unwrap().data, whole.data);
                }
            }
        }
    }
});
