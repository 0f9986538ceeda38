#![no_main]
use libfuzzer_sys::fuzz_target;
use rasterpack_udf::compress::decode_simple_u32;

// The SimpleU32 (scheme 17) decoder on arbitrary streams and output lengths, whole and prefix
// decodes: must never panic, and a whole decode that succeeds fills exactly the output.
fuzz_target!(|data: &[u8]| {
    let Some((&n, stream)) = data.split_first() else { return };
    let words = n as usize * 3;
    let mut out = vec![0u8; words * 4];
    let whole = decode_simple_u32(stream, &mut out, true);
    let mut prefix = vec![0u8; words * 4];
    if decode_simple_u32(stream, &mut prefix, false).is_ok() && whole.is_ok() {
        assert_eq!(out, prefix);
    }
});
