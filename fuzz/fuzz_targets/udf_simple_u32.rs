#![no_main]
use libfuzzer_sys::fuzz_target;
use rasterpack_udf::compress::{decode_simple_u32, SimpleU32Decoder};

// The SimpleU32 (scheme 17) decoder on arbitrary streams and output lengths, whole and prefix
// decodes, and the streaming decoder fed in pieces of arbitrary sizes: must never panic; a
// whole decode that succeeds fills exactly the output; the streaming decoder agrees with the
// whole decode (same words, same verdict and error offset) whatever the pieces.
fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else { return };
    let Some((&piece, stream)) = rest.split_first() else { return };
    let words = n as usize * 3;
    let mut out = vec![0u8; words * 4];
    let whole = decode_simple_u32(stream, &mut out, true);
    let mut prefix = vec![0u8; words * 4];
    if decode_simple_u32(stream, &mut prefix, false).is_ok() && whole.is_ok() {
        assert_eq!(out, prefix);
    }
    // Pieces of 1..=256 bytes, the output taken 1..=64 words at a time.
    let piece = piece as usize % 256 + 1;
    let mut decoder = SimpleU32Decoder::new(words as u64);
    let mut got = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut result = Ok(());
    'feed: for chunk in stream.chunks(piece) {
        pending.extend_from_slice(chunk);
        loop {
            let limit = got.len() + 4 * (piece % 64 + 1);
            match decoder.decode(&pending, &mut got, limit) {
                Ok(0) => break,
                Ok(used) => {
                    pending.drain(..used);
                }
                Err(e) => {
                    result = Err(e);
                    break 'feed;
                }
            }
        }
    }
    if result.is_ok() {
        result = decoder.finish(&pending);
    }
    match (&whole, &result) {
        (Ok(()), Ok(())) => assert_eq!(got, out),
        (Err(a), Err(b)) => assert_eq!(a.offset, b.offset, "{a:?} {b:?}"),
        _ => panic!("whole {whole:?}, streamed {result:?}"),
    }
});
