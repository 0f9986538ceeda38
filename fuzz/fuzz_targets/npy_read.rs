#![no_main]
//! `.npy` reads over arbitrary bytes, any dtype, byte order and layout: the streamed read (with
//! working sets small enough to force Fortran slabs and bands, to memory and to a sequential
//! sink) gives exactly what the whole-file `npy::read` gives, or fails; nothing panics.
use libfuzzer_sys::fuzz_target;
use rasterpack_common::npy::{self, NpyWriter};
use rasterpack_common::{ArrayFile, ArrayRequest, ArraySink, Limits, NpyFile, Output};

fuzz_target!(|data: &[u8]| {
    let Some((&first, file)) = data.split_first() else { return };
    let limits = Limits {
        max_alloc: 1 << 24,
        max_array_bytes: 1 << 24,
        ..Limits::default()
    };
    let whole = npy::read(file, &limits);
    let Ok(npy_file) = NpyFile::from_bytes(file.to_vec()) else {
        assert!(whole.is_err(), "a header the reader takes, the file reader refuses");
        return;
    };
    // Working sets from a few bytes up: slabs of a row, bands of an index, or the whole.
    let ws = (u64::from(first) + 1) * 24;
    let req = ArrayRequest {
        limits: Limits {
            working_set: ws,
            ..limits
        },
        ..ArrayRequest::default()
    };
    if let Ok(got) = npy_file.read(&req) {
        let want = whole.as_ref().expect("the streamed read reads only what the whole read reads");
        assert_eq!(&got, want, "streamed and whole reads differ");
    }
    let mut out = Vec::new();
    let streamed = {
        let mut w = NpyWriter::new(Output::Stream(&mut out));
        npy_file.stream(&req, &mut w).and_then(|_| w.finish())
    };
    if streamed.is_ok() {
        let want = whole.as_ref().expect("a sequential read reads only what the whole read reads");
        let mut expect = npy::header_bytes(want.dtype, &want.shape);
        expect.extend_from_slice(&want.data);
        assert_eq!(out, expect, "sequential and whole reads differ");
    }
});
