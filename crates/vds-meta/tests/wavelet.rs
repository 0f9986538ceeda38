//! Wavelet decoding against OpenVDS's own outputs: the serialized-chunk test vectors of
//! `$RASTERPACK_CORPUS/vds/chunks` (decoded by OpenVDS's wavelet source, SHA-256 in the
//! MANIFEST), truncation and bit-flip sweeps over them.

use std::path::{Path, PathBuf};

use rasterpack_vds_meta::layout::VdsSampleFormat;
use rasterpack_vds_meta::wavelet::{self, WaveletParams, WaveletScratch};
use serde_json::Value;
use sha2::{Digest, Sha256};

fn corpus() -> Option<PathBuf> {
    rasterpack_common::testkit::corpus_dir("vds")
}

fn format(name: &str) -> VdsSampleFormat {
    match name {
        "R32" => VdsSampleFormat::R32,
        "U8" => VdsSampleFormat::U8,
        "U16" => VdsSampleFormat::U16,
        other => panic!("format {other}"),
    }
}

/// The wavelet vectors with the parameters OpenVDS's test decodes them with.
fn vectors(dir: &Path) -> Vec<(String, Vec<u8>, WaveletParams, Value)> {
    let m: Value = serde_json::from_slice(&std::fs::read(dir.join("chunks/MANIFEST.json")).unwrap()).unwrap();
    let mut out = Vec::new();
    for v in m["vectors"].as_array().unwrap() {
        if v["header"]["kind"] != "wavelet" {
            continue;
        }
        let file = v["file"].as_str().unwrap().to_string();
        let bytes = std::fs::read(dir.join("chunks").join(&file)).unwrap();
        let d = &v["decode_parameters"];
        let method = d["compressionMethod"].as_str().unwrap();
        let size: Vec<u64> = v["expected"]["size"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        let vr = d["valueRange"].as_array().unwrap();
        let p = WaveletParams {
            format: format(d["destinationFormat"].as_str().unwrap()),
            destination: format(d["destinationFormat"].as_str().unwrap()),
            normalize: method.contains("Normalize"),
            lossless: method.ends_with("Lossless") && d["adaptiveLevel"].as_i64() == Some(-1),
            value_range: [vr[0].as_f64().unwrap() as f32, vr[1].as_f64().unwrap() as f32],
            integer_scale: d["integerScale"].as_f64().unwrap() as f32,
            integer_offset: d["integerOffset"].as_f64().unwrap() as f32,
            use_no_value: d["useNoValue"].as_bool().unwrap(),
            no_value: d["replacementNoValue"].as_f64().unwrap() as f32,
            size: [size[0], size[1], size[2]],
            max_list_entries: usize::MAX,
        };
        out.push((file, bytes, p, v.clone()));
    }
    assert!(
        out.len() >= 11,
        "expected the 11 wavelet chunk vectors, found {}",
        out.len()
    );
    out
}

#[test]
fn chunk_vectors_decode_bit_identically() {
    let Some(dir) = corpus() else { return };
    let mut s = WaveletScratch::default();
    for (file, bytes, p, v) in vectors(&dir) {
        let mut out = Vec::new();
        let info = wavelet::decode(&bytes, &p, &mut s, &mut out).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(info.used as usize, bytes.len(), "{file}");
        assert_eq!(
            out.len() as u64,
            v["expected"]["decoded_bytes"].as_u64().unwrap(),
            "{file}"
        );
        assert_eq!(
            format!("{:x}", Sha256::digest(&out)),
            v["expected"]["sha256"].as_str().unwrap(),
            "{file}: decoded bytes differ from OpenVDS's"
        );
        if p.size[0] == 100 {
            // A memory limit below what the zero-tree needs is a limit error, not "invalid".
            let q = WaveletParams {
                max_list_entries: 10,
                ..p
            };
            let e = wavelet::decode(&bytes, &q, &mut s, &mut out).unwrap_err();
            assert_eq!(e.kind, rasterpack_common::ErrorKind::LimitExceeded, "{file}: {e}");
        }
        if let Some(alt) = v.get("alternate_decode").filter(|a| a.is_object()) {
            let r = alt["decode_parameters_change"]["replacementNoValue"].as_f64().unwrap() as f32;
            let q = WaveletParams { no_value: r, ..p };
            wavelet::decode(&bytes, &q, &mut s, &mut out).unwrap();
            assert_eq!(
                format!("{:x}", Sha256::digest(&out)),
                alt["sha256"].as_str().unwrap(),
                "{file} (alternate)"
            );
        }
    }
}

/// Every truncation of a wavelet chunk fails (also with its compressedSize patched to match),
/// and sampled bit flips either fail or decode to a brick of the right size: never a panic.
#[test]
fn truncated_and_flipped_chunks_fail_cleanly() {
    let Some(dir) = corpus() else { return };
    let mut s = WaveletScratch::default();
    let mut out = Vec::new();
    for (file, bytes, p, v) in vectors(&dir) {
        let want = v["expected"]["decoded_bytes"].as_u64().unwrap() as usize;
        let n = bytes.len();
        let cuts: Vec<usize> = (0..64)
            .chain((64..n).step_by((n / 97).max(1)))
            .chain(n - 8..n)
            .collect();
        for cut in cuts {
            let t = &bytes[..cut];
            assert!(wavelet::decode(t, &p, &mut s, &mut out).is_err(), "{file} cut at {cut}");
            if cut >= 24 {
                let mut patched = t.to_vec();
                patched[4..8].copy_from_slice(&(cut as i32).to_le_bytes());
                let e = wavelet::decode(&patched, &p, &mut s, &mut out);
                assert!(e.is_err(), "{file} cut at {cut} with a matching compressedSize decoded");
            }
        }
        let flips: Vec<usize> = (0..64 * 8)
            .step_by(7)
            .chain((512..n * 8).step_by((n * 8 / 41).max(1)))
            .collect();
        for bit in flips {
            let mut b = bytes.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            if let Ok(info) = wavelet::decode(&b, &p, &mut s, &mut out) {
                let elem = match info.format {
                    VdsSampleFormat::U8 => 1,
                    VdsSampleFormat::U16 => 2,
                    _ => 4,
                };
                assert_eq!(out.len() / elem, want / p.format.native_bytes(), "{file} bit {bit}");
            }
        }
    }
}

/// `edges/vds/wnbl_nan_inf_margin4.vds` (WaveletNormalizeBlockLossless, 424 x 1 R32, brick 64,
/// margins 4, NaN and inf among the values) reads as exactly what was written (`.lod0.raw`, the
/// generator's array, which OpenVDS also returns): the lossy part of the decode makes NaNs
/// whose sign the lossless residual XORs into finite neighbours, so a NaN of the wrong sign
/// there is a finite value of the wrong sign in the output.
#[test]
fn nonfinite_normalize_block_lossless_reads_what_was_written() {
    use rasterpack_common::{ArrayRequest, Format, Input};
    use rasterpack_vds_meta::VdsFormat;
    let Some(dir) = rasterpack_common::testkit::corpus_dir("edges/vds") else {
        return;
    };
    let name = "wnbl_nan_inf_margin4";
    let want = std::fs::read(dir.join(format!("{name}.lod0.raw"))).unwrap();
    let input = Input::open(dir.join(format!("{name}.vds"))).unwrap();
    let a = VdsFormat
        .read_array(
            &input,
            &ArrayRequest {
                physical: true,
                ..Default::default()
            },
        )
        .unwrap();
    let nonfinite = want
        .chunks_exact(4)
        .filter(|c| !f32::from_le_bytes((*c).try_into().unwrap()).is_finite())
        .count();
    assert!(nonfinite >= 2, "the file should hold NaN and inf values");
    assert!(a.data == want, "{name}: {}", differences(&a.data, &want, 4));
}

/// Where two reads differ: the count and the first few sample indices with their bits.
fn differences(got: &[u8], want: &[u8], elem: usize) -> String {
    if got.len() != want.len() {
        return format!("{} bytes, OpenVDS read {}", got.len(), want.len());
    }
    let diff: Vec<usize> = (0..got.len() / elem)
        .filter(|&i| got[i * elem..(i + 1) * elem] != want[i * elem..(i + 1) * elem])
        .collect();
    let show: Vec<String> = diff
        .iter()
        .take(6)
        .map(|&i| {
            let (g, w) = (&got[i * elem..(i + 1) * elem], &want[i * elem..(i + 1) * elem]);
            format!("#{i}: {g:02x?} want {w:02x?}")
        })
        .collect();
    format!("{} samples differ ({})", diff.len(), show.join(", "))
}

/// A directory of wavelet datasets written by OpenVDS 3.4.9 next to OpenVDS's own LOD0 reads
/// (`X.vds`, `X.vds.native.raw` = the channel's format, `X.vds.r32.raw` = float32), made by
/// `benches/openvds_wavelet.py matrix DIR` (needs `pip install openvds==3.4.9 numpy`; `.ci/run`
/// makes it). Set `RASTERPACK_VDS_ORACLE=DIR`; skipped visibly otherwise, and never under
/// `CI=true`.
#[test]
fn oracle_datasets_match_openvds_reads() {
    use rasterpack_common::{ArrayRequest, Format, Input, ValidateOptions};
    use rasterpack_vds_meta::VdsFormat;
    let Some(dir) = rasterpack_common::testkit::env_dir("RASTERPACK_VDS_ORACLE", "OpenVDS-written wavelet datasets")
    else {
        return;
    };
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "vds"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no .vds in {}", dir.display());
    let mut failed = Vec::new();
    for p in &paths {
        let name = p.display().to_string();
        let input = Input::open(p).unwrap();
        let r = VdsFormat.validate(&input, &ValidateOptions::default());
        assert!(r.is_valid(true), "{name}: {:?}", r.findings);
        for (physical, suffix) in [(false, "native"), (true, "r32")] {
            let want = std::fs::read(format!("{name}.{suffix}.raw")).unwrap();
            let a = VdsFormat
                .read_array(
                    &input,
                    &ArrayRequest {
                        physical,
                        ..Default::default()
                    },
                )
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            if a.data != want {
                let elem = (a.data.len() as u64 / a.shape.iter().product::<u64>().max(1)).max(1) as usize;
                failed.push(format!(
                    "{name}: {suffix} read differs from OpenVDS's: {}",
                    differences(&a.data, &want, elem)
                ));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} datasets:\n{}",
        failed.len(),
        paths.len(),
        failed.join("\n")
    );
}
