//! A bound on what a chunk may decompress to, checked before zarrs decodes it: zarrs' gzip
//! decoder reads to the end of the stream and its zstd decoder sizes its buffer from the frame
//! header, so a small hostile chunk could otherwise make it allocate gigabytes. The
//! bytes-to-bytes codecs of the chain are replayed here in decoding order, each with its output
//! cut at the size the chunk must decode to (plus the few bytes a checksum codec adds), which
//! costs one more pass of decompression and no more memory than the chunk itself.

use std::io::Read;

use rasterpack_common::{Error, Result};

/// Bytes the checksum codecs may add per stage.
const SLACK: u64 = 64;

/// Check that `encoded` decodes through `byte_codecs` (in encoding order) to at most `expected`
/// bytes at each stage. A codec the guard does not know ends the check (zarrs decodes it, or
/// refuses it as unsupported).
pub fn check(encoded: &[u8], byte_codecs: &[String], expected: u64, key: &str) -> Result<()> {
    let bound = expected.saturating_add(SLACK.saturating_mul(byte_codecs.len() as u64));
    let mut data: std::borrow::Cow<'_, [u8]> = std::borrow::Cow::Borrowed(encoded);
    for (stage, codec) in byte_codecs.iter().rev().enumerate() {
        let next = match codec.as_str() {
            "blosc" => {
                // c-blosc sizes its output from the frame header (16 bytes: uncompressed size
                // at 4, stored size at 12) and decodes into exactly that: the header is
                // bounded here; decompressing it again here would need the C library twice.
                check_blosc(&data, bound, key)?;
                if stage + 1 < byte_codecs.len() {
                    return Err(Error::unsupported(
                        "zarr.codec_unsupported",
                        None,
                        format!(
                            "chunk {key}: blosc inside other compression ({}): its output could not be bounded",
                            byte_codecs.join(", ")
                        ),
                    ));
                }
                return Ok(());
            }
            "gzip" => bounded(flate2::read::GzDecoder::new(&data[..]), bound, codec, key)?,
            "zlib" => bounded(flate2::read::ZlibDecoder::new(&data[..]), bound, codec, key)?,
            "zstd" => {
                // A frame header may declare any content size; zarrs allocates what it says.
                if let Ok(Some(declared)) = zstd::zstd_safe::get_frame_content_size(&data) {
                    if declared > bound {
                        return Err(too_large(key, codec, declared, bound));
                    }
                }
                let decoder = zstd::stream::read::Decoder::with_buffer(&data[..])
                    .map_err(|e| damaged(key, codec, &e.to_string()))?;
                bounded(decoder, bound, codec, key)?
            }
            "crc32c" => {
                // The checksum itself is zarrs' to verify; only its 4 bytes come off here.
                let n = data.len().saturating_sub(4);
                data[..n].to_vec()
            }
            _ => return Ok(()),
        };
        data = std::borrow::Cow::Owned(next);
    }
    Ok(())
}

/// The c-blosc frame header of `data`: a stored size that is the chunk's, and an uncompressed
/// size within `bound`.
fn check_blosc(data: &[u8], bound: u64, key: &str) -> Result<()> {
    let word = |at: usize| {
        data.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64)
    };
    let (Some(nbytes), Some(cbytes)) = (word(4), word(12)) else {
        return Err(damaged(
            key,
            "blosc",
            &format!("{} bytes, shorter than its 16-byte header", data.len()),
        ));
    };
    if cbytes != data.len() as u64 {
        return Err(damaged(
            key,
            "blosc",
            &format!("its header says {cbytes} stored bytes, the chunk has {}", data.len()),
        ));
    }
    if nbytes > bound {
        return Err(too_large(key, "blosc", nbytes, bound));
    }
    Ok(())
}

fn bounded(reader: impl Read, bound: u64, codec: &str, key: &str) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    reader
        .take(bound.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| damaged(key, codec, &e.to_string()))?;
    if out.len() as u64 > bound {
        return Err(too_large(key, codec, out.len() as u64, bound));
    }
    Ok(out)
}

fn too_large(key: &str, codec: &str, got: u64, bound: u64) -> Error {
    Error::invalid_at(
        "zarr.chunk_too_large",
        None,
        format!("chunk {key}: its {codec} stream decodes to more than {bound} bytes (at least {got}), the size of the chunk"),
    )
}

fn damaged(key: &str, codec: &str, why: &str) -> Error {
    Error::invalid_at(
        "zarr.chunk_decode",
        None,
        format!("chunk {key}: {codec} does not decode: {why}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn streams_that_fit_pass_and_bombs_stop_at_the_bound() {
        let chunk = vec![7u8; 4096];
        assert!(check(&gzip(&chunk), &names(&["gzip"]), 4096, "c/0").is_ok());
        let z = zstd::bulk::compress(&chunk, 1).unwrap();
        assert!(check(&z, &names(&["zstd"]), 4096, "c/0").is_ok());
        // crc32c after gzip: its 4 bytes come off before the gzip stage.
        let mut with_crc = gzip(&chunk);
        with_crc.extend_from_slice(&[1, 2, 3, 4]);
        assert!(check(&with_crc, &names(&["gzip", "crc32c"]), 4096, "c/0").is_ok());
        // 64 MiB behind a 4 KiB chunk: stopped after bound + 1 bytes, never held whole.
        let bomb = gzip(&vec![0u8; 64 << 20]);
        let e = check(&bomb, &names(&["gzip"]), 4096, "c/1/2").unwrap_err();
        assert_eq!(e.code, "zarr.chunk_too_large");
        assert!(e.message.contains("c/1/2"), "{}", e.message);
        // A zstd frame whose header declares more than the chunk is refused from the header.
        let zbomb = zstd::bulk::compress(&vec![0u8; 1 << 20], 1).unwrap();
        assert_eq!(
            check(&zbomb, &names(&["zstd"]), 4096, "c/0").unwrap_err().code,
            "zarr.chunk_too_large"
        );
        // Damage is a decode error naming the key; a codec the guard does not know is zarrs'.
        assert_eq!(
            check(b"garbage", &names(&["gzip"]), 4096, "c/0").unwrap_err().code,
            "zarr.chunk_decode"
        );
        assert!(check(b"garbage", &names(&["frobnicate"]), 4096, "c/0").is_ok());
        // blosc: the header's sizes are checked (the C library decodes into what it says).
        let mut header = vec![2u8, 1, 1, 1];
        header.extend((1u32 << 30).to_le_bytes()); // 1 GiB uncompressed
        header.extend(4096u32.to_le_bytes());
        header.extend(16u32.to_le_bytes());
        assert_eq!(
            check(&header, &names(&["blosc"]), 4096, "c/0").unwrap_err().code,
            "zarr.chunk_too_large"
        );
        header[4..8].copy_from_slice(&4096u32.to_le_bytes());
        assert!(check(&header, &names(&["blosc"]), 4096, "c/0").is_ok());
        header[12..16].copy_from_slice(&99u32.to_le_bytes());
        assert_eq!(
            check(&header, &names(&["blosc"]), 4096, "c/0").unwrap_err().code,
            "zarr.chunk_decode"
        );
        assert_eq!(
            check(&header[..8], &names(&["blosc"]), 4096, "c/0").unwrap_err().code,
            "zarr.chunk_decode"
        );
    }
}
