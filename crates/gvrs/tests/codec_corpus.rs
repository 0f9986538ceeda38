//! Decode every stored tile of the corpus with the codecs alone and compare with the `.raw`
//! dumps bit for bit. A tiny test-only locator finds the tiles from the sidecar's
//! `tile_content_offsets` (the reader crate has its own, independent path to them).

use std::path::{Path, PathBuf};

use rasterpack_gvrs::codec::{self, Codec};
use serde_json::Value;
use sha2::{Digest, Sha256};

fn corpus() -> Option<PathBuf> {
    rasterpack_common::testkit::corpus_dir("gvrs")
}

fn le_i32(b: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

#[derive(Clone, Copy, PartialEq)]
enum Ty {
    Int,
    Icf,
    Float,
    Short,
}

/// A decoded element grid as i32 bit patterns (floats as their bits, ICF as the integer codes).
struct Grid {
    ty: Ty,
    cells: Vec<i32>,
}

struct Stats {
    decoded_cells: usize,
    compressed: usize,
    seconds: f64,
}

fn decode_file(dir: &Path, truth: &Value) -> (Vec<Grid>, Stats) {
    let file = truth["file"].as_str().unwrap();
    let bytes = std::fs::read(dir.join(file)).unwrap();
    let rows = truth["rows"].as_u64().unwrap() as usize;
    let cols = truth["cols"].as_u64().unwrap() as usize;
    let tr = truth["tile_rows"].as_u64().unwrap() as usize;
    let tc = truth["tile_cols"].as_u64().unwrap() as usize;
    let grid_cols = truth["tile_grid_cols"].as_u64().unwrap() as usize;
    let codecs: Vec<Codec> = truth["codecs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Codec::from_name(c.as_str().unwrap()).unwrap())
        .collect();
    let elements = truth["elements"].as_array().unwrap();
    let mut grids: Vec<Grid> = elements
        .iter()
        .map(|e| {
            let (ty, fill) = match e["type"].as_str().unwrap() {
                "INTEGER" => (Ty::Int, e["fill"].as_i64().unwrap() as i32),
                "SHORT" => (Ty::Short, e["fill"].as_i64().unwrap() as i32),
                "INT_CODED_FLOAT" => (Ty::Icf, e["fill_int"].as_i64().unwrap() as i32),
                "FLOAT" => (
                    Ty::Float,
                    u32::from_str_radix(e["fill_bits"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap() as i32,
                ),
                t => panic!("type {t}"),
            };
            Grid {
                ty,
                cells: vec![fill; rows * cols],
            }
        })
        .collect();
    let n = tr * tc;
    let mut ints = vec![0i32; n];
    let mut floats = vec![0f32; n];
    let mut stats = Stats {
        decoded_cells: 0,
        compressed: 0,
        seconds: 0.0,
    };
    let t0 = std::time::Instant::now();
    for entry in truth["tile_content_offsets"].as_array().unwrap() {
        let index = entry[0].as_u64().unwrap() as usize;
        let mut at = entry[1].as_u64().unwrap() as usize;
        assert_eq!(le_i32(&bytes, at) as usize, index, "{file}: tile index at {at}");
        at += 4;
        let (row0, col0) = (index / grid_cols * tr, index % grid_cols * tc);
        for g in grids.iter_mut() {
            let len = le_i32(&bytes, at) as usize;
            let block = &bytes[at + 4..at + 4 + len];
            at += 4 + len;
            let raw_len = if g.ty == Ty::Short { (n * 2 + 3) & !3 } else { n * 4 };
            if len == raw_len {
                for i in 0..n {
                    ints[i] = if g.ty == Ty::Short {
                        i16::from_le_bytes([block[2 * i], block[2 * i + 1]]) as i32
                    } else {
                        le_i32(block, 4 * i)
                    };
                }
            } else {
                stats.compressed += 1;
                let c = codecs[block[0] as usize];
                if g.ty == Ty::Float {
                    codec::decode_float(c, block, tr, tc, &mut floats)
                        .unwrap_or_else(|e| panic!("{file} tile {index}: {e:?}"));
                    for i in 0..n {
                        ints[i] = floats[i].to_bits() as i32;
                    }
                } else {
                    codec::decode_int(c, block, tr, tc, &mut ints)
                        .unwrap_or_else(|e| panic!("{file} tile {index}: {e:?}"));
                    if g.ty == Ty::Short {
                        for v in ints.iter_mut() {
                            *v = *v as i16 as i32;
                        }
                    }
                }
            }
            stats.decoded_cells += n;
            for r in 0..tr {
                let gr = row0 + r;
                if gr >= rows {
                    break;
                }
                let w = tc.min(cols - col0);
                g.cells[gr * cols + col0..gr * cols + col0 + w].copy_from_slice(&ints[r * tc..r * tc + w]);
            }
        }
    }
    stats.seconds = t0.elapsed().as_secs_f64();
    (grids, stats)
}

fn to_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn sha_hex(b: &[u8]) -> String {
    Sha256::digest(b).iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn corpus_tiles_decode_bit_exactly() {
    let Some(dir) = corpus() else { return };
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut checked = 0;
    for name in names.iter().filter(|n| n.ends_with(".truth.json")) {
        let truth: Value = serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap();
        if truth["expected_verdict"] != "valid"
            || truth.get("tile_content_offsets").is_none()
            || truth["file"] == "big_terrain_4000.gvrs"
        {
            continue;
        }
        let (grids, _) = decode_file(&dir, &truth);
        for (g, e) in grids.iter().zip(truth["elements"].as_array().unwrap()) {
            let key = if g.ty == Ty::Icf { "icode_raw_file" } else { "raw_file" };
            let raw = std::fs::read(dir.join(e[key].as_str().unwrap())).unwrap();
            assert!(
                to_bytes(&g.cells) == raw,
                "{name}: element {} differs from {}",
                e["name"],
                e[key]
            );
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} element dumps checked");
}

#[test]
fn big_terrain_decodes_bit_exactly() {
    let Some(dir) = corpus() else { return };
    let truth: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("big_terrain_4000.gvrs.truth.json")).unwrap()).unwrap();
    let (grids, stats) = decode_file(&dir, &truth);
    let e = &truth["elements"][0];
    assert_eq!(
        sha_hex(&to_bytes(&grids[0].cells)),
        e["icode_raw_sha256"].as_str().unwrap()
    );
    eprintln!(
        "big_terrain_4000: {} tiles ({} compressed), {:.1} MB of cells in {:.3} s (test profile)",
        truth["tile_content_offsets"].as_array().unwrap().len(),
        stats.compressed,
        stats.decoded_cells as f64 * 4.0 / 1e6,
        stats.seconds
    );
}

/// LSOP12 blocks (Huffman and Deflate residuals) from the corpus, truncated at every length
/// and with every byte flipped: decoding returns Ok or Err, never panics.
#[test]
fn damaged_lsop_blocks_never_panic() {
    let Some(dir) = corpus() else { return };
    let truth: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("icf_lsop.gvrs.truth.json")).unwrap()).unwrap();
    let bytes = std::fs::read(dir.join("icf_lsop.gvrs")).unwrap();
    let t = truth["tile_rows"].as_u64().unwrap() as usize;
    let mut seen = std::collections::BTreeSet::new();
    let mut out = vec![0i32; t * t];
    for entry in truth["tile_content_offsets"].as_array().unwrap() {
        let at = entry[1].as_u64().unwrap() as usize + 4;
        let len = le_i32(&bytes, at) as usize;
        let block = &bytes[at + 4..at + 4 + len];
        if len == t * t * 4 || !seen.insert(block[62] & 0x0F) {
            continue;
        }
        codec::decode_int(Codec::Lsop12, block, t, t, &mut out).expect("valid block");
        for n in 0..block.len() {
            assert!(codec::decode_int(Codec::Lsop12, &block[..n], t, t, &mut out).is_err());
        }
        let mut m = block.to_vec();
        // Every byte of the header and payload start, then a stride through the rest.
        let positions: Vec<usize> = (0..m.len()).filter(|&i| i < 200 || i % 7 == 0).collect();
        for i in positions {
            m[i] ^= 0xFF;
            let _ = codec::decode_int(Codec::Lsop12, &m, t, t, &mut out);
            m[i] ^= 0xFF;
        }
    }
    assert_eq!(seen.len(), 2, "both LSOP12 residual methods exercised");
}
