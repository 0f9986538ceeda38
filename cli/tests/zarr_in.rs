//! Zarr stores as input (issue 20): stores written by zarr-python 3 (v3 and v2; zstd, gzip,
//! blosc (v3 zstd/shuffle, v2 lz4/bitshuffle), no compression; sharding; partial edge chunks; absent chunks read as the fill value;
//! a group) converted to every format rasterpack writes with their values preserved, and
//! hand-made damaged, unsupported and hostile stores answered with the right exit code, the
//! chunk key or feature named, and peak RSS within 256 MiB.
//!
//! The zarr-python stores need `$RASTERPACK_PYTHON` (the venv of `.ci/venv.sh`, with `zarr`);
//! without it those tests are skipped visibly, and under `CI=true` they fail instead.

use std::path::{Path, PathBuf};
use std::process::Command;

mod support;
use support::{check, s, scratch};

use rasterpack::{ArrayRequest, NdArray};

fn python() -> Option<PathBuf> {
    match std::env::var_os("RASTERPACK_PYTHON") {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => {
            if std::env::var_os("CI").is_some_and(|v| v == "true") {
                panic!(
                    "the zarr-python stores need RASTERPACK_PYTHON (.ci/venv.sh), and CI=true does not allow the skip"
                );
            }
            rasterpack_common::testkit::skip("needs zarr-python: RASTERPACK_PYTHON is not set (source .ci/venv.sh)");
            None
        }
    }
}

/// The zarr-python stores and their reference values in a scratch folder.
fn python_stores(name: &str) -> Option<PathBuf> {
    let py = python()?;
    let dir = scratch("zarr-in", name);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/zarr/make_python_stores.py");
    let out = Command::new(py).arg(script).arg(&dir).output().expect("run python");
    assert!(
        out.status.success(),
        "make_python_stores.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(dir)
}

fn read(path: &Path, element: Option<&str>) -> NdArray {
    let f = rasterpack::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let req = ArrayRequest {
        element: element.map(str::to_string),
        ..ArrayRequest::default()
    };
    f.read(&req).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn same_values(got: &NdArray, want: &NdArray, what: &str) {
    assert_eq!(got.shape, want.shape, "{what}: shape");
    assert_eq!(got.dtype, want.dtype, "{what}: dtype");
    assert!(got.data == want.data, "{what}: values differ");
}

/// (store, element, reference .npy) of every zarr-python case.
const CASES: [(&str, Option<&str>, &str); 12] = [
    ("v3_zstd.zarr", None, "v3_zstd"),
    ("v3_gzip.zarr", None, "v3_gzip"),
    ("v3_none.zarr", None, "v3_none"),
    ("v3_blosc.zarr", None, "v3_blosc"),
    ("v3_shard.zarr", None, "v3_shard"),
    ("v3_fill.zarr", None, "v3_fill"),
    ("v2_zlib.zarr", None, "v2_default"),
    ("v2_gzip.zarr", None, "v2_gzip"),
    ("v2_none.zarr", None, "v2_none"),
    ("v2_blosc.zarr", None, "v2_blosc"),
    ("group.zarr", Some("amp"), "group_amp"),
    ("group.zarr", Some("sub/codes"), "group_sub_codes"),
];

#[test]
fn python_written_stores_read_exactly_and_convert_to_npy() {
    let Some(dir) = python_stores("npy") else { return };
    for (store, element, reference) in CASES {
        let src = dir.join(store);
        let want = read(&dir.join(format!("{reference}.npy")), None);
        same_values(&read(&src, element), &want, store);
        let out = dir.join(format!("{reference}.out.npy"));
        let mut args = vec!["convert", s(&src), s(&out)];
        if let Some(e) = element {
            args.extend(["--element", e]);
        }
        check(&args, 0);
        same_values(&read(&out, None), &want, &format!("{store} -> npy"));
    }
}

#[test]
fn python_written_stores_convert_to_every_format() {
    let Some(dir) = python_stores("formats") else { return };
    let mut converted = std::collections::BTreeMap::<&str, Vec<&str>>::new();
    for (store, element, reference) in CASES {
        let src = dir.join(store);
        let want = read(&dir.join(format!("{reference}.npy")), None);
        for ext in ["volp", "gvrs", "udf", "fold"] {
            let out = dir.join(format!("{reference}.{ext}"));
            let mut args = vec!["convert", s(&src), s(&out)];
            if let Some(e) = element {
                args.extend(["--element", e]);
            }
            let r = support::run(&args);
            if r.code() != Some(0) {
                // A target that cannot hold this array (rank, dtype) refuses it by name.
                assert!(matches!(r.code(), Some(1..=3)), "{args:?}: {}", r.stderr());
                continue;
            }
            // Whatever the target wrote reads back as the same values (its own default array).
            let back = read(&out, None);
            assert_eq!(back.data.len(), want.data.len(), "{store} -> {ext}: size");
            let back_f: Vec<f64> = back.to_f64();
            let want_f: Vec<f64> = want.to_f64();
            assert!(
                back_f
                    .iter()
                    .zip(&want_f)
                    .all(|(a, b)| a == b || (a.is_nan() && b.is_nan())),
                "{store} -> {ext}: values differ"
            );
            converted.entry(ext).or_default().push(store);
        }
    }
    eprintln!("converted: {converted:?}");
    for ext in ["volp", "gvrs", "udf", "fold"] {
        assert!(
            converted.get(ext).is_some_and(|v| !v.is_empty()),
            "no zarr case converted to {ext}: {converted:?}"
        );
    }
}

#[test]
fn regions_and_elements_read_only_what_they_ask() {
    let Some(dir) = python_stores("region") else { return };
    let want = read(&dir.join("v3_zstd.npy"), None);
    let region = rasterpack::Region::parse("3:20,5:,2:9", &want.shape).unwrap();
    let out = dir.join("cut.npy");
    check(
        &[
            "convert",
            s(&dir.join("v3_zstd.zarr")),
            s(&out),
            "--region",
            "3:20,5:,2:9",
        ],
        0,
    );
    same_values(&read(&out, None), &want.region(&region).unwrap(), "region");
    // The sharded store, by a region that cuts shards and inner chunks.
    let want = read(&dir.join("v3_shard.npy"), None);
    let region = rasterpack::Region::parse("5:33,7:30", &want.shape).unwrap();
    let f = rasterpack::open(dir.join("v3_shard.zarr")).unwrap();
    let got = f
        .read(&ArrayRequest::default().with_region(rasterpack::RegionSpec::parse("5:33,7:30").unwrap()))
        .unwrap();
    same_values(&got, &want.region(&region).unwrap(), "shard region");
    // The group lists its arrays by path, with dimension names and attributes where set.
    let g = rasterpack::open(dir.join("group.zarr")).unwrap();
    let names: Vec<Option<String>> = g.arrays().unwrap().into_iter().map(|a| a.name).collect();
    assert_eq!(names, [Some("amp".to_string()), Some("sub/codes".to_string())]);
    let one = rasterpack::open(dir.join("v3_zstd.zarr")).unwrap().arrays().unwrap();
    assert_eq!(one[0].attrs["dimension_names"], serde_json::json!(["z", "y", "x"]));
    assert_eq!(one[0].attrs["attributes"]["units"], "m");
    // An unknown element is a usage error naming the arrays there are.
    let r = check(
        &[
            "convert",
            s(&dir.join("group.zarr")),
            s(&dir.join("x.npy")),
            "--element",
            "nope",
        ],
        2,
    );
    assert!(r.stderr().contains("sub/codes"), "{}", r.stderr());
    // inspect and validate take the stores.
    for (store, _, _) in CASES {
        let r = check(&["validate", s(&dir.join(store)), "--json"], 0);
        let j: serde_json::Value = serde_json::from_slice(&r.out.stdout).unwrap();
        assert_eq!(j["files"][0]["format"], "zarr", "{store}: {j}");
    }
    let r = check(&["inspect", s(&dir.join("v3_fill.zarr"))], 0);
    assert!(r.stdout().contains("-7.5"), "{}", r.stdout());
    let r = check(&["validate", s(&dir.join("v3_fill.zarr")), "--json"], 0);
    assert!(r.stdout().contains("zarr.chunks_missing"), "{}", r.stdout());
    // The string array zarr-python wrote has no rasterpack counterpart: unsupported, named.
    let r = check(&["convert", s(&dir.join("v3_string.zarr")), s(&dir.join("str.npy"))], 3);
    assert!(r.stderr().contains("string"), "{}", r.stderr());
    check(&["validate", s(&dir.join("v3_string.zarr"))], 3);
}

// ---- hand-made stores: damaged, unsupported, hostile ----

/// A v3 array store at `dir` with `meta` as its zarr.json and `chunks` as (key, bytes).
fn store(dir: &Path, meta: serde_json::Value, chunks: &[(&str, Vec<u8>)]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("zarr.json"), serde_json::to_vec_pretty(&meta).unwrap()).unwrap();
    for (key, bytes) in chunks {
        let p = dir.join(key);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
}

fn v3(shape: &[u64], chunks: &[u64], dtype: &str, codecs: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": shape, "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0, "codecs": codecs, "attributes": {}
    })
}

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn le_u16(values: impl Iterator<Item = u16>) -> Vec<u8> {
    values.flat_map(|v| v.to_le_bytes()).collect()
}

#[test]
fn a_damaged_chunk_is_exit_1_naming_its_key() {
    let dir = scratch("zarr-in", "damaged");
    let codecs = serde_json::json!([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "gzip", "configuration": {"level": 1}}]);
    let good = |r: u64| gzip(&le_u16((0..16).map(|i| (r * 16 + i) as u16)));
    let src = dir.join("bad.zarr");
    store(
        &src,
        v3(&[8, 4], &[4, 4], "uint16", codecs.clone()),
        &[("c/0/0", good(0)), ("c/1/0", b"not gzip at all".to_vec())],
    );
    let r = check(&["validate", s(&src)], 1);
    assert!(
        r.stdout().contains("c/1/0") && r.stdout().contains("zarr.chunk_decode"),
        "{}",
        r.stdout()
    );
    let r = check(&["convert", s(&src), s(&dir.join("o.npy"))], 1);
    assert!(r.stderr().contains("c/1/0"), "{}", r.stderr());
    assert!(!dir.join("o.npy").exists(), "a failed convert leaves no output");
    // A chunk of the right codec but the wrong size (uncompressed, one value short).
    let raw = serde_json::json!([{"name": "bytes", "configuration": {"endian": "little"}}]);
    let short = dir.join("short.zarr");
    store(&short, v3(&[4, 4], &[4, 4], "uint16", raw), &[("c/0/0", vec![0u8; 30])]);
    let r = check(&["validate", s(&short)], 1);
    assert!(r.stdout().contains("c/0/0"), "{}", r.stdout());
    // The good store reads back exactly, the absent second chunk as the fill value.
    let ok = dir.join("ok.zarr");
    store(&ok, v3(&[8, 4], &[4, 4], "uint16", codecs), &[("c/0/0", good(0))]);
    let a = read(&ok, None);
    let mut want: Vec<u16> = (0..16).collect();
    want.extend([0u16; 16]);
    assert_eq!(a.to_vec::<u16>().unwrap(), want);
}

#[test]
fn unsupported_features_are_exit_3_naming_them() {
    let dir = scratch("zarr-in", "unsupported");
    let codec = dir.join("codec.zarr");
    store(
        &codec,
        v3(
            &[4],
            &[4],
            "uint8",
            serde_json::json!([{"name": "bytes"}, {"name": "frobnicate"}]),
        ),
        &[],
    );
    for cmd in ["validate", "inspect"] {
        let r = check(&[cmd, s(&codec)], 3);
        assert!(
            r.stdout().contains("frobnicate") || r.stderr().contains("frobnicate"),
            "{cmd}: {} {}",
            r.stdout(),
            r.stderr()
        );
    }
    let r = check(&["convert", s(&codec), s(&dir.join("o.npy"))], 3);
    assert!(r.stderr().contains("frobnicate"), "{}", r.stderr());
    let strings = dir.join("strings.zarr");
    store(
        &strings,
        v3(&[4], &[4], "string", serde_json::json!([{"name": "vlen-utf8"}])),
        &[],
    );
    let r = check(&["convert", s(&strings), s(&dir.join("o.npy"))], 3);
    assert!(r.stderr().contains("string"), "{}", r.stderr());
    let grid = dir.join("grid.zarr");
    let mut m = v3(&[4], &[4], "uint8", serde_json::json!([{"name": "bytes"}]));
    m["chunk_grid"] = serde_json::json!({"name": "rectangular", "configuration": {"chunk_shape": [[1, 3]]}});
    store(&grid, m, &[]);
    let r = check(&["validate", s(&grid)], 3);
    assert!(r.stdout().contains("rectangular"), "{}", r.stdout());
}

#[test]
fn broken_metadata_is_exit_1() {
    let dir = scratch("zarr-in", "meta");
    let not_json = dir.join("nj.zarr");
    std::fs::create_dir_all(&not_json).unwrap();
    std::fs::write(not_json.join("zarr.json"), b"{\"zarr_format\": 3,").unwrap();
    let r = check(&["validate", s(&not_json)], 1);
    assert!(r.stdout().contains("zarr.meta_json"), "{}", r.stdout());
    let zero = dir.join("zero.zarr");
    store(
        &zero,
        v3(&[4], &[0], "uint8", serde_json::json!([{"name": "bytes"}])),
        &[],
    );
    let r = check(&["validate", s(&zero)], 1);
    assert!(r.stdout().contains("zarr.meta_chunks"), "{}", r.stdout());
}

#[test]
fn hostile_stores_stay_bounded() {
    let dir = scratch("zarr-in", "hostile");
    let raw = serde_json::json!([{"name": "bytes", "configuration": {"endian": "little"}}]);
    // A declared 2^30 x 2^30 array in 1 x 1 chunks: refused by its chunk count, not walked.
    let huge = dir.join("huge.zarr");
    store(&huge, v3(&[1 << 30, 1 << 30], &[1, 1], "uint8", raw.clone()), &[]);
    for cmd in [
        &["validate", s(&huge)][..],
        &["inspect", s(&huge)],
        &["convert", s(&huge), s(&dir.join("h.npy"))],
    ] {
        let r = check(cmd, 1);
        assert!(
            format!("{}{}", r.stdout(), r.stderr()).contains("limit.entries"),
            "{cmd:?}"
        );
    }
    // A chunk count that overflows 64 bits is broken metadata.
    let over = dir.join("over.zarr");
    store(&over, v3(&[1 << 40, 1 << 40], &[1, 1], "uint8", raw.clone()), &[]);
    let r = check(&["validate", s(&over)], 1);
    assert!(r.stdout().contains("zarr.meta_chunks"), "{}", r.stdout());
    // One chunk declared as 2^40 values: refused before any decoding.
    let big_chunk = dir.join("bigchunk.zarr");
    store(
        &big_chunk,
        v3(&[1 << 40], &[1 << 40], "uint8", raw.clone()),
        &[("c/0", vec![0; 16])],
    );
    let r = check(&["validate", s(&big_chunk)], 1);
    assert!(r.stdout().contains("limit.working_set"), "{}", r.stdout());
    // A gzip chunk that inflates to 512 MiB where the chunk holds 1 MiB.
    let bomb = dir.join("bomb.zarr");
    let codecs = serde_json::json!([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "gzip", "configuration": {"level": 1}}]);
    let zeros = vec![0u8; 512 << 20];
    store(
        &bomb,
        v3(&[1024, 1024], &[1024, 1024], "uint8", codecs),
        &[("c/0/0", gzip(&zeros))],
    );
    drop(zeros);
    let r = check(&["validate", s(&bomb)], 1);
    assert!(
        r.stdout().contains("zarr.chunk_too_large") && r.stdout().contains("c/0/0"),
        "{}",
        r.stdout()
    );
    check(&["convert", s(&bomb), s(&dir.join("b.npy"))], 1);
    // A zstd chunk of 256 MiB of zeros where the chunk holds 1 KiB (its frame header says so).
    let zbomb = dir.join("zbomb.zarr");
    let zcodecs = serde_json::json!([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {"level": 1, "checksum": false}}]);
    let frame = zstd::bulk::compress(&vec![0u8; 256 << 20], 1).unwrap();
    store(&zbomb, v3(&[1024], &[1024], "uint8", zcodecs), &[("c/0", frame)]);
    let r = check(&["validate", s(&zbomb)], 1);
    assert!(r.stdout().contains("zarr.chunk_too_large"), "{}", r.stdout());
    // Groups nested 200 deep: the walk stops at the depth limit with a finding.
    let deep = dir.join("deep.zarr");
    let mut p = deep.clone();
    for _ in 0..200 {
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(
            p.join("zarr.json"),
            br#"{"zarr_format": 3, "node_type": "group", "attributes": {}}"#,
        )
        .unwrap();
        p = p.join("g");
    }
    let r = check(&["validate", s(&deep)], 1);
    assert!(r.stdout().contains("limit.depth"), "{}", r.stdout());
}

/// A shard of `inner` chunks (their encoded bytes, `None` for absent) with its index at the
/// end, `bytes` + `crc32c` as zarr-python writes it.
fn shard(inner: &[Option<Vec<u8>>]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut index = Vec::new();
    for c in inner {
        let (offset, len) = match c {
            Some(b) => {
                let at = out.len() as u64;
                out.extend_from_slice(b);
                (at, b.len() as u64)
            }
            None => (u64::MAX, u64::MAX),
        };
        index.extend(offset.to_le_bytes());
        index.extend(len.to_le_bytes());
    }
    let crc = crc32c_of(&index);
    out.extend(&index);
    out.extend(crc.to_le_bytes());
    out
}

/// crc32c (Castagnoli), bit by bit: the shard index's checksum, computed here independently
/// of the reader.
fn crc32c_of(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82f6_3b78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn sharded_meta(inner_codec: serde_json::Value) -> serde_json::Value {
    v3(
        &[128, 128],
        &[128, 128],
        "uint8",
        serde_json::json!([{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [64, 64],
            "codecs": [{"name": "bytes"}, inner_codec],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
            "index_location": "end"
        }}]),
    )
}

/// Inner chunks of a shard are read one by one out of the shard and go through the same
/// decompression guard as plain chunks: a bomb inside a shard is the guard's finding, naming
/// the shard's key and the inner chunk, at bounded memory; a shard index whose checksum fails
/// is exit 1; the good inner chunks around them read exactly.
#[test]
fn a_bomb_inside_a_shard_stops_at_the_guard() {
    use std::io::Write;
    let dir = scratch("zarr-in", "shardbomb");
    let gz = serde_json::json!({"name": "gzip", "configuration": {"level": 1}});
    let zs = serde_json::json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}});
    let tile = |v: u8| vec![v; 64 * 64];
    // 1 GiB of zeros as one zstd stream with no content size in its header: only a bounded
    // decoder stops it (4 KiB is what the inner chunk holds).
    let mut enc = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
    let mib = vec![0u8; 1 << 20];
    for _ in 0..1024 {
        enc.write_all(&mib).unwrap();
    }
    let zbomb = enc.finish().unwrap();
    let zgood = |v: u8| zstd::bulk::compress(&tile(v), 1).unwrap();
    let zstore = dir.join("zbomb.zarr");
    store(
        &zstore,
        sharded_meta(zs.clone()),
        &[("c/0/0", shard(&[Some(zgood(1)), Some(zbomb), None, Some(zgood(4))]))],
    );
    let gstore = dir.join("gbomb.zarr");
    store(
        &gstore,
        sharded_meta(gz.clone()),
        &[(
            "c/0/0",
            shard(&[Some(gzip(&tile(1))), Some(gzip(&vec![0u8; 64 << 20])), None, None]),
        )],
    );
    for bomb in [&zstore, &gstore] {
        let r = check(&["validate", s(bomb)], 1);
        assert!(
            r.stdout().contains("zarr.chunk_too_large") && r.stdout().contains("c/0/0 (inner chunk [0, 1])"),
            "{}",
            r.stdout()
        );
        let out = dir.join("o.npy");
        let r = check(&["convert", s(bomb), s(&out)], 1);
        assert!(
            r.stderr().contains("zarr.chunk_too_large") || r.stderr().contains("decodes to more"),
            "{}",
            r.stderr()
        );
        assert!(!out.exists());
        // The rows of the first inner chunks only: exact values, no bomb decoded.
        let f = rasterpack::open(bomb).unwrap();
        let req = ArrayRequest::default().with_region(rasterpack_common::Region {
            ranges: vec![0..64, 0..64],
        });
        assert_eq!(f.read(&req).unwrap().data, tile(1));
    }
    // The good shard: the absent inner chunk reads as the fill value 0.
    let ok = dir.join("ok.zarr");
    store(
        &ok,
        sharded_meta(zs),
        &[("c/0/0", shard(&[Some(zgood(1)), Some(zgood(2)), None, Some(zgood(4))]))],
    );
    let a = read(&ok, None);
    let at = |r: usize, c: usize| a.data[r * 128 + c];
    assert_eq!((at(0, 0), at(0, 64), at(64, 0), at(127, 127)), (1, 2, 0, 4));
    check(&["validate", s(&ok)], 0);
    // A damaged index (one byte of an entry changed): its checksum fails, exit 1.
    let mut bytes = shard(&[Some(gzip(&tile(1))), None, None, None]);
    let n = bytes.len();
    bytes[n - 4 - 64] ^= 1;
    let damaged = dir.join("index.zarr");
    store(&damaged, sharded_meta(gz), &[("c/0/0", bytes)]);
    let r = check(&["validate", s(&damaged)], 1);
    assert!(r.stdout().contains("zarr.shard_index_checksum"), "{}", r.stdout());
}
