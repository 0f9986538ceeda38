//! `convert IN out.zarr` (issue 20): the store holds exactly the array `convert IN out.npy`
//! writes with the same flags. Read back here through zarrs (another reader than the one that
//! wrote it: zarrs' decoding of the store's metadata and codecs) and compared with the `.npy`
//! output read by the npy reader; zarr-python 3 and xarray read the same stores when
//! `RASTERPACK_PYTHON` names a Python with them (`.ci/venv.sh`).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use rasterpack_common::{ArrayRequest, NdArray};
use serde_json::Value;
use support::{check, run, s, scratch};
use zarrs::array::Array;
use zarrs::filesystem::FilesystemStore;

fn testdata(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata").join(rel)
}

/// The `.npy` file's array (through the npy reader).
fn npy(path: &Path) -> NdArray {
    rasterpack::open(path).unwrap().read(&ArrayRequest::default()).unwrap()
}

/// The array at `node` of the store at `dir`, through zarrs: (zarr data type name, shape,
/// little-endian bytes in C order).
fn zarr(dir: &Path, node: &str) -> (String, Vec<u64>, Vec<u8>) {
    const { assert!(cfg!(target_endian = "little"), "zarrs gives native-endian bytes") };
    let store = Arc::new(FilesystemStore::new(dir).unwrap());
    let array = Array::open(store, node).unwrap_or_else(|e| panic!("{}{node}: {e}", dir.display()));
    let bytes = array
        .retrieve_array_subset(&array.subset_all())
        .unwrap()
        .into_fixed()
        .unwrap()
        .into_owned();
    (array.data_type().to_string(), array.shape().to_vec(), bytes)
}

fn zarr_name(dtype: rasterpack_common::DType) -> &'static str {
    use rasterpack_common::DType::*;
    match dtype {
        Bool => "bool",
        F16 => "float16",
        C64 => "complex64",
        C128 => "complex128",
        d => d.name(),
    }
}

/// Convert `input` with `flags` to `.npy` and to `.zarr` in `dir` (as `stem`), and check the
/// store holds the `.npy` array: dtype, shape and every byte.
fn same_as_npy(dir: &Path, input: &Path, stem: &str, flags: &[&str]) -> PathBuf {
    same_as_npy_with(dir, input, stem, flags, &[])
}

/// [`same_as_npy`] with `zarr_flags` (layout flags only Zarr output takes) for the store.
fn same_as_npy_with(dir: &Path, input: &Path, stem: &str, flags: &[&str], zarr_flags: &[&str]) -> PathBuf {
    let n = dir.join(format!("{stem}.npy"));
    let z = dir.join(format!("{stem}.zarr"));
    let mut a = vec!["convert", s(input), s(&n)];
    a.extend_from_slice(flags);
    check(&a, 0);
    let mut a = vec!["convert", s(input), s(&z)];
    a.extend_from_slice(flags);
    a.extend_from_slice(zarr_flags);
    check(&a, 0);
    let want = npy(&n);
    let (dtype, shape, bytes) = zarr(&z, "/");
    assert_eq!(dtype, zarr_name(want.dtype), "{stem}");
    assert_eq!(shape, want.shape, "{stem}");
    assert!(bytes == want.data, "{stem}: the Zarr values differ from the .npy ones");
    // And back through rasterpack's own Zarr reader: the same .npy file, byte for byte.
    let back = dir.join(format!("{stem}.back.npy"));
    check(&["convert", s(&z), s(&back), "--force"], 0);
    assert!(
        std::fs::read(&back).unwrap() == std::fs::read(&n).unwrap(),
        "{stem}: Zarr -> .npy differs"
    );
    z
}

fn meta(store: &Path, node: &str) -> Value {
    let path = store.join(node.trim_start_matches('/')).join("zarr.json");
    serde_json::from_slice(&std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// The readable testdata files, with the flags each is converted with (the source flags of
/// `.npy` output: element, physical, codes, region spellings, lod).
const CASES: &[(&str, &[&str])] = &[
    ("vds/small_r32_zip.vds", &[]),
    ("vds/small_r32_zip.vds", &["--box", "3:15,:,2:6"]),
    ("vds/small_u8_rle_novalue.vds", &[]),
    ("vds/small_u8_rle_novalue.vds", &["--physical"]),
    ("vds/small_4d_r32_none_lod1.vds", &[]),
    ("vds/small_4d_r32_none_lod1.vds", &["--lod", "1"]),
    ("vds/small_legacy_vdsobject.vds", &[]),
    ("vds/small_objdir", &[]),
    ("volp/temperature_4x32x32_int16.volp", &[]),
    ("volp/temperature_4x32x32_int16.volp", &["--physical"]),
    ("volp/temperature_4x32x32_int16.volp", &["--levels", "1:3"]),
    ("volp/cloud_2x8x8_float32.volp", &[]),
    ("gvrs/crafted_all_types.gvrs", &["--element", "a"]),
    (
        "gvrs/crafted_all_types.gvrs",
        &["--element", "a", "--window", "1,2,3,4"],
    ),
    ("gvrs/crafted_compressed.gvrs", &["--element", "v"]),
    ("udf/sample.udf", &["--element", "root/child/temps"]),
    ("fold/sample.fold", &["--element", "nuclear_arrays/grid"]),
    ("fold/sample.fold", &["--element", "nuclear_arrays/counts"]),
];

#[test]
fn every_testdata_array_reads_back_as_the_npy_output() {
    let dir = scratch("zarr", "testdata");
    for (k, (file, flags)) in CASES.iter().enumerate() {
        same_as_npy(&dir, &testdata(file), &format!("c{k}"), flags);
    }
}

#[test]
fn the_default_grid_is_the_sources_blocks_and_the_metadata_is_kept() {
    let dir = scratch("zarr", "grid");
    let src = testdata("vds/small_r32_zip.vds");
    let z = same_as_npy(&dir, &src, "vds", &[]);
    let m = meta(&z, "/");
    let bricks = rasterpack::open(&src).unwrap().chunk_shape(None).unwrap();
    assert_eq!(
        m["chunk_grid"]["configuration"]["chunk_shape"],
        serde_json::json!(bricks)
    );
    assert_eq!(m["zarr_format"], 3);
    let codecs: Vec<&str> = m["codecs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(codecs, ["bytes", "zstd"]);
    // VDS axis names, dimension 0 (the fastest, Sample) last.
    let axes = m["dimension_names"].as_array().unwrap();
    assert_eq!(axes.last().unwrap(), "Sample", "{m}");
    assert_eq!(m["attributes"]["rasterpack"]["source_format"], "vds");
    assert!(m["attributes"]["rasterpack"]["metadata"]["axes"].is_array(), "{m}");

    // A VDS channel with NoValue: the stored U8 codes' fill is the NoValue code 255.
    let z = same_as_npy(&dir, &testdata("vds/small_u8_rle_novalue.vds"), "novalue", &[]);
    let m = meta(&z, "/");
    assert_eq!(m["fill_value"], 255, "{m}");
    assert_eq!(m["data_type"], "uint8");

    // GVRS: rows/columns, the element's fill; VOLP: levels/y/x, NaN-free int16 fill 0.
    let z = same_as_npy(
        &dir,
        &testdata("gvrs/crafted_compressed.gvrs"),
        "gvrs",
        &["--element", "v"],
    );
    assert_eq!(meta(&z, "/")["dimension_names"], serde_json::json!(["rows", "columns"]));
    let z = same_as_npy(&dir, &testdata("volp/temperature_4x32x32_int16.volp"), "volp", &[]);
    let m = meta(&z, "/");
    assert_eq!(m["dimension_names"], serde_json::json!(["levels", "y", "x"]));
    assert_eq!(m["fill_value"], 0);
    assert_eq!(m["attributes"]["rasterpack"]["metadata"]["scale"], 0.01, "{m}");
    // A float source without a declared fill: NaN, as zarr-python defaults.
    let z = same_as_npy(&dir, &testdata("volp/cloud_2x8x8_float32.volp"), "cloud", &[]);
    assert_eq!(meta(&z, "/")["fill_value"], "NaN");
}

/// The default grid is the source's tiles also when the array is not named (a GVRS file of one
/// element: its blocks are listed by element name), and with --element.
#[test]
fn gvrs_tiles_are_the_default_grid() {
    let dir = scratch("zarr", "tiles");
    let z = same_as_npy(
        &dir,
        &testdata("gvrs/crafted_all_types.gvrs"),
        "named",
        &["--element", "a"],
    );
    assert_eq!(
        meta(&z, "/")["chunk_grid"]["configuration"]["chunk_shape"],
        serde_json::json!([4, 5])
    );
    let Some(gvrs) = rasterpack_common::testkit::corpus_dir("gvrs") else {
        return;
    };
    // 100 x 120 cells in tiles of 25 x 40, one element.
    let z = same_as_npy(&dir, &gvrs.join("int_plain.gvrs"), "single", &[]);
    assert_eq!(
        meta(&z, "/")["chunk_grid"]["configuration"]["chunk_shape"],
        serde_json::json!([25, 40])
    );
}

#[test]
fn chunks_shard_and_compress_choose_the_layout() {
    let dir = scratch("zarr", "layout");
    let src = testdata("vds/small_r32_zip.vds");
    let shape = npy_shape(&dir, &src);
    let z = same_as_npy_with(&dir, &src, "c", &[], &["--chunks", "7x5x3"]);
    assert_eq!(
        meta(&z, "/")["chunk_grid"]["configuration"]["chunk_shape"],
        serde_json::json!([7, 5, 3])
    );
    let z = same_as_npy_with(&dir, &src, "gz", &[], &["--compress", "gzip:1"]);
    let m = meta(&z, "/");
    assert_eq!(m["codecs"][1]["name"], "gzip");
    assert_eq!(m["codecs"][1]["configuration"]["level"], 1);
    let z = same_as_npy_with(&dir, &src, "raw", &[], &["--compress", "none"]);
    assert_eq!(meta(&z, "/")["codecs"].as_array().unwrap().len(), 1);
    let z = same_as_npy_with(&dir, &src, "sh", &[], &["--chunks", "4x4x4", "--shard", "8x8x12"]);
    let m = meta(&z, "/");
    assert_eq!(
        m["chunk_grid"]["configuration"]["chunk_shape"],
        serde_json::json!([8, 8, 12])
    );
    assert_eq!(m["codecs"][0]["name"], "sharding_indexed");
    assert_eq!(
        m["codecs"][0]["configuration"]["chunk_shape"],
        serde_json::json!([4, 4, 4])
    );
    assert_eq!(shape.len(), 3);

    // Refused before anything is written: a shard not made of whole chunks, a rank mismatch,
    // an unknown codec, --tile, and the Zarr flags for another output.
    let out = dir.join("bad.zarr");
    for flags in [
        &["--chunks", "4x4x4", "--shard", "6x8x8"][..],
        &["--chunks", "4x4"],
        &["--chunks", "0x4x4"],
        &["--compress", "lz4"],
        &["--compress", "zstd:99"],
        &["--tile", "8x8"],
    ] {
        let mut a = vec!["convert", s(&src), s(&out)];
        a.extend_from_slice(flags);
        let r = check(&a, 2);
        assert!(!out.exists(), "{flags:?} left a store");
        assert!(r.stderr().contains("rasterpack: convert"), "{}", r.stderr());
    }
    let r = check(&["convert", s(&src), s(&dir.join("x.npy")), "--chunks", "4x4x4"], 2);
    assert!(r.stderr().contains("only to Zarr"), "{}", r.stderr());
    assert_no_temporaries(&dir);
}

/// A store written with the default codecs carries zstd's checksum: a byte changed inside a
/// chunk that zstd stored raw (random bytes do not compress) is a finding naming the chunk, not
/// other values read without complaint.
#[test]
fn a_changed_byte_in_a_default_chunk_is_caught() {
    let dir = scratch("zarr", "checksum");
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let values: Vec<u8> = (0..64 * 64)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 24) as u8
        })
        .collect();
    let src = dir.join("noise.npy");
    let array = NdArray::from_vec(vec![64, 64], values).unwrap();
    rasterpack::save(&array, &src, &rasterpack::WriteOptions::default()).unwrap();
    let z = dir.join("noise.zarr");
    check(&["convert", s(&src), s(&z), "--chunks", "32x32"], 0);
    let codecs = &meta(&z, "/")["codecs"];
    assert_eq!(codecs[1]["name"], "zstd", "{codecs}");
    assert_eq!(codecs[1]["configuration"]["checksum"], true, "{codecs}");
    check(&["validate", s(&z)], 0);
    let chunk = z.join("c/1/0");
    let mut bytes = std::fs::read(&chunk).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x10;
    std::fs::write(&chunk, &bytes).unwrap();
    let r = check(&["validate", s(&z)], 1);
    assert!(r.stdout().contains("c/1/0"), "{}", r.stdout());
    let r = check(&["convert", s(&z), s(&dir.join("back.npy"))], 1);
    assert!(r.stderr().contains("c/1/0"), "{}", r.stderr());
    let _ = std::fs::remove_dir_all(&dir);
}

fn npy_shape(dir: &Path, src: &Path) -> Vec<u64> {
    let n = dir.join("shape.npy");
    check(&["convert", s(src), s(&n), "--force"], 0);
    npy(&n).shape
}

fn assert_no_temporaries(dir: &Path) {
    let left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".rasterpack-"))
        .collect();
    assert!(left.is_empty(), "temporaries left: {left:?}");
}

#[test]
fn outputs_are_atomic_and_force_replaces_a_store() {
    let dir = scratch("zarr", "atomic");
    let out = dir.join("o.zarr");
    let good = testdata("volp/cloud_2x8x8_float32.volp");
    check(&["convert", s(&good), s(&out)], 0);
    // No --force: refused, the store untouched.
    let r = check(
        &["convert", s(&testdata("volp/temperature_4x32x32_int16.volp")), s(&out)],
        2,
    );
    assert!(r.stderr().contains("--force"), "{}", r.stderr());
    assert_eq!(zarr(&out, "/").1, vec![2, 8, 8]);
    // --force: replaced whole (no chunk of the old array is left behind).
    same_as_npy(
        &dir,
        &testdata("volp/temperature_4x32x32_int16.volp"),
        "o",
        &["--force"],
    );
    assert_eq!(zarr(&out, "/").1, vec![4, 32, 32]);
    // A source that fails while streaming leaves no store and no temporary directory, and the
    // old store stays when it was to be replaced.
    let bad = testdata("volp/invalid_truncated_body.volp");
    let fresh = dir.join("fresh.zarr");
    let r = run(&["convert", s(&bad), s(&fresh)]);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    assert!(!fresh.exists());
    let r = run(&["convert", s(&bad), s(&out), "--force"]);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    assert_eq!(zarr(&out, "/").1, vec![4, 32, 32]);
    // A damaged VDS brick: exit 1 as for .npy, nothing left.
    let r = run(&["convert", s(&testdata("vds/invalid_rle_overrun.vds")), s(&fresh)]);
    let r_npy = run(&[
        "convert",
        s(&testdata("vds/invalid_rle_overrun.vds")),
        s(&dir.join("rle.npy")),
    ]);
    assert_eq!(r.code(), r_npy.code(), "{}", r.stderr());
    assert!(!fresh.exists());
    // `--to zarr` for a name without the suffix; standard output is refused.
    same_as_npy(&dir, &good, "plain", &[]);
    check(&["convert", s(&good), s(&dir.join("noext")), "--to", "zarr"], 0);
    assert_eq!(zarr(&dir.join("noext"), "/").1, vec![2, 8, 8]);
    check(&["convert", s(&good), "-", "--to", "zarr"], 2);
    assert_no_temporaries(&dir);
}

#[test]
fn all_writes_a_group_with_every_array_under_its_name() {
    let dir = scratch("zarr", "all");
    for file in [
        "gvrs/crafted_all_types.gvrs",
        "udf/sample.udf",
        "fold/sample.fold",
        "vds/small_r32_zip.vds",
    ] {
        let src = testdata(file);
        let z = dir.join(format!("{}.zarr", file.replace('/', "_")));
        check(&["convert", s(&src), s(&z), "--all"], 0);
        assert_eq!(meta(&z, "/")["node_type"], "group");
        let arrays = rasterpack::open(&src).unwrap().arrays().unwrap();
        assert!(!arrays.is_empty());
        for info in arrays {
            let name = info.name.clone().unwrap_or_else(|| "array0".into());
            let n = dir.join("one.npy");
            match &info.name {
                Some(e) => check(&["convert", s(&src), s(&n), "--force", "--element", e], 0),
                None => check(&["convert", s(&src), s(&n), "--force"], 0),
            };
            let want = npy(&n);
            // Flat: `/` in names becomes `.`; the name itself is kept in the attributes.
            let node = format!("/{}", name.replace('/', "."));
            assert_eq!(meta(&z, &node)["attributes"]["rasterpack"]["name"], name.as_str());
            let (dtype, shape, bytes) = zarr(&z, &node);
            assert_eq!(
                (dtype.as_str(), &shape),
                (zarr_name(want.dtype), &want.shape),
                "{file} {name}"
            );
            assert!(bytes == want.data, "{file} {name}: values differ");
        }
    }
}

/// zarr-python 3 reads every store equal to the `.npy` output (numpy), and xarray sees the
/// dimension names. One Python process for every store, so the test takes seconds.
const ZARR_PYTHON: &str = r#"
import json, sys
import numpy as np, zarr, xarray as xr
jobs = json.load(sys.stdin)
for j in jobs:
    want = np.load(j["npy"])
    a = zarr.open_array(j["zarr"], mode="r")
    got = a[...]
    assert got.dtype == want.dtype, (j, got.dtype, want.dtype)
    assert got.shape == want.shape, (j, got.shape, want.shape)
    assert np.array_equal(got, want, equal_nan=want.dtype.kind in "fc"), j
    if "dims" in j:
        got = a.metadata.dimension_names
        assert (list(got) if got is not None else None) == j["dims"], (j, got)
    # xarray opens groups: the --all stores, each array with its dimension names.
    for node, dims in j.get("xarray", {}).items():
        ds = xr.open_zarr(j["group"], consolidated=False, mask_and_scale=False)
        assert list(ds[node].dims) == dims, (j, node, ds[node].dims)
        assert np.array_equal(ds[node].values, zarr.open_group(j["group"], mode="r")[node][...], equal_nan=True)
print(len(jobs))
"#;

fn python() -> Option<PathBuf> {
    match std::env::var_os("RASTERPACK_PYTHON") {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => {
            if std::env::var_os("CI").is_some_and(|v| v == "true") {
                panic!(
                    "the zarr-python test needs RASTERPACK_PYTHON (.ci/venv.sh), and CI=true does not allow the skip"
                );
            }
            rasterpack_common::testkit::skip("needs zarr-python: RASTERPACK_PYTHON is not set (source .ci/venv.sh)");
            None
        }
    }
}

/// Readable files of the public corpus (every file `convert` to `.npy` takes), with their
/// stores; files `.npy` output refuses must be refused for Zarr with the same exit code and
/// leave nothing.
fn corpus_jobs(dir: &Path) -> Vec<Value> {
    let Some(root) = rasterpack_common::testkit::corpus_dir("") else {
        return vec![];
    };
    let mut files = vec![];
    for fmt in ["volp", "gvrs", "udf", "fold", "vds"] {
        let Ok(entries) = std::fs::read_dir(root.join(fmt)) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".json") || name.ends_with(".md") {
                continue;
            }
            files.push(p);
        }
    }
    files.sort();
    let mut jobs = vec![];
    for (k, f) in files.iter().enumerate() {
        let n = dir.join(format!("k{k}.npy"));
        let z = dir.join(format!("k{k}.zarr"));
        let rn = run(&["convert", s(f), s(&n)]);
        let rz = run(&["convert", s(f), s(&z)]);
        assert_eq!(
            rz.code(),
            rn.code(),
            "{}: zarr {} npy {}",
            f.display(),
            rz.stderr(),
            rn.stderr()
        );
        if rn.code() == Some(0) {
            jobs.push(serde_json::json!({"npy": n, "zarr": z, "src": f}));
        } else {
            assert!(!z.exists(), "{}: a failed convert left a store", f.display());
        }
    }
    assert_no_temporaries(dir);
    jobs
}

#[test]
fn zarr_python_and_xarray_read_every_store() {
    let dir = scratch("zarr", "python");
    let mut jobs = vec![];
    for (k, (file, flags)) in CASES.iter().enumerate() {
        let z = same_as_npy(&dir, &testdata(file), &format!("t{k}"), flags);
        let dims = meta(&z, "/")["dimension_names"].clone();
        jobs.push(serde_json::json!({"npy": dir.join(format!("t{k}.npy")), "zarr": z, "dims": dims}));
    }
    // blosc, as zarr-python defaults it and with other compressors and shuffles, plain and
    // inside shards (a float32 VDS, an int16 VOLP).
    for (k, (file, flags)) in [
        ("vds/small_r32_zip.vds", &["--compress", "blosc"][..]),
        ("vds/small_r32_zip.vds", &["--compress", "blosc:lz4:9:bitshuffle"]),
        (
            "volp/temperature_4x32x32_int16.volp",
            &["--compress", "blosc:zlib:3:noshuffle"],
        ),
        (
            "volp/temperature_4x32x32_int16.volp",
            &[
                "--compress",
                "blosc:blosclz:5",
                "--chunks",
                "1x8x8",
                "--shard",
                "2x16x32",
            ],
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let z = same_as_npy_with(&dir, &testdata(file), &format!("b{k}"), &[], flags);
        let text = std::fs::read_to_string(z.join("zarr.json")).unwrap();
        assert!(text.contains("\"blosc\""), "{text}");
        jobs.push(serde_json::json!({"npy": dir.join(format!("b{k}.npy")), "zarr": z}));
    }
    // xarray: the groups of --all, for the sources that name their axes.
    for (k, (file, element, dims)) in [
        ("vds/small_r32_zip.vds", "Amplitude", None),
        ("gvrs/crafted_all_types.gvrs", "a", Some(["rows", "columns"].as_slice())),
        (
            "volp/temperature_4x32x32_int16.volp",
            "array0",
            Some(["levels", "y", "x"].as_slice()),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let src = testdata(file);
        let g = dir.join(format!("g{k}.zarr"));
        check(&["convert", s(&src), s(&g), "--all"], 0);
        let want: Value = match dims {
            Some(d) => serde_json::json!(d),
            None => meta(&g, &format!("/{element}"))["dimension_names"].clone(),
        };
        assert!(want.is_array(), "{file}: no dimension names");
        let n = dir.join(format!("g{k}.npy"));
        // VOLP holds one unnamed array (node `array0`): no --element.
        match element {
            "array0" => check(&["convert", s(&src), s(&n)], 0),
            e => check(&["convert", s(&src), s(&n), "--element", e], 0),
        };
        let mut xarray = serde_json::Map::new();
        xarray.insert(element.into(), want);
        jobs.push(serde_json::json!({"npy": n, "zarr": g.join(element), "group": g, "xarray": xarray}));
    }
    let corpus = corpus_jobs(&dir);
    eprintln!("zarr: {} corpus files converted", corpus.len());
    jobs.extend(corpus);
    let Some(python) = python() else { return };
    let mut child = Command::new(python)
        .args(["-c", ZARR_PYTHON])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python");
    serde_json::to_writer(child.stdin.take().unwrap(), &jobs).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "zarr-python: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), jobs.len().to_string());
}

/// A 4 GiB input converts within the 256 MiB bound: a sparse `.npy` of 1024 x 1024 x 1024
/// float32 (zeros), streamed in C order into chunks of the default grid. Ignored by default (it
/// moves 4 GiB through zstd); run with `--ignored`.
#[test]
#[ignore]
fn a_4_gib_input_converts_within_256_mib() {
    let dir = scratch("zarr", "big");
    let src = dir.join("big.npy");
    let mut header = b"\x93NUMPY\x01\x00".to_vec();
    let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1024, 1024, 1024), }";
    let mut text = dict.to_string();
    while !(10 + text.len() + 1).is_multiple_of(64) {
        text.push(' ');
    }
    text.push('\n');
    header.extend_from_slice(&(text.len() as u16).to_le_bytes());
    header.extend_from_slice(text.as_bytes());
    let f = std::fs::File::create(&src).unwrap();
    use std::io::Write;
    (&f).write_all(&header).unwrap();
    f.set_len(header.len() as u64 + (4u64 << 30)).unwrap();
    let out = dir.join("big.zarr");
    let r = check(&["convert", s(&src), s(&out)], 0);
    eprintln!("4 GiB .npy -> Zarr: {:.1?}, peak {:?} KiB", r.elapsed, r.peak_kib);
    let (_, shape, _) = {
        let store = Arc::new(FilesystemStore::new(&out).unwrap());
        let a = Array::open(store, "/").unwrap();
        (0, a.shape().to_vec(), 0)
    };
    assert_eq!(shape, vec![1024, 1024, 1024]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The default grid at `--lod N` is the source's bricks at that level of detail, and with a
/// region it is the same bricks with the grid starting at the region's corner; the chunk shape
/// is what zarr-python sees (`Array.chunks`), expected from OpenVDS's own account of the file
/// (the corpus truth: brick size less both margins, at most the LOD's samples along each axis).
#[test]
fn lod_and_region_chunks_are_the_source_bricks() {
    let Some(vds) = rasterpack_common::testkit::corpus_dir("vds") else {
        return;
    };
    let dir = scratch("zarr", "lodgrid");
    let src = vds.join("p02_3d_r32_zip_lod2_margin.vds");
    let truth: Value =
        serde_json::from_slice(&std::fs::read(vds.join("p02_3d_r32_zip_lod2_margin.truth.json")).unwrap()).unwrap();
    let l = &truth["layout"];
    let stride = l["brickSize"].as_u64().unwrap()
        - l["negativeMargin"].as_u64().unwrap()
        - l["positiveMargin"].as_u64().unwrap();
    // Dimension 0 (Sample) last, as the array's C order has it.
    let samples: Vec<u64> = l["axes"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .map(|a| a["numSamples"].as_u64().unwrap())
        .collect();
    let mut jobs = vec![];
    for lod in 0..=2u32 {
        let want: Vec<u64> = samples.iter().map(|&n| n.div_ceil(1 << lod).min(stride)).collect();
        let z = same_as_npy(&dir, &src, &format!("lod{lod}"), &["--lod", &lod.to_string()]);
        assert_eq!(
            meta(&z, "/")["chunk_grid"]["configuration"]["chunk_shape"],
            serde_json::json!(want),
            "LOD {lod}"
        );
        jobs.push(serde_json::json!({"zarr": z, "chunks": want}));
    }
    // A region starting on brick boundaries: its chunks are whole bricks (`--box` lists VDS
    // dimensions fastest first).
    let corner = format!("{stride}:60,{stride}:50,0:40");
    let z = same_as_npy(&dir, &src, "region", &["--box", &corner]);
    let want = [stride.min(40), stride.min(50 - stride), stride.min(60 - stride)];
    assert_eq!(
        meta(&z, "/")["chunk_grid"]["configuration"]["chunk_shape"],
        serde_json::json!(want)
    );
    jobs.push(serde_json::json!({"zarr": z, "chunks": want}));
    let Some(python) = python() else { return };
    let script = r#"
import json, sys, zarr
for j in json.load(sys.stdin):
    got = list(zarr.open_array(j["zarr"], mode="r").chunks)
    assert got == j["chunks"], (j, got)
print(len(json.load(open(sys.argv[1]))) if len(sys.argv) > 1 else "ok")
"#;
    let mut child = Command::new(python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python");
    serde_json::to_writer(child.stdin.take().unwrap(), &jobs).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "zarr-python: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
}

/// A shard (or chunk) that cannot fit the working set is refused before anything is written:
/// exit 2, no store, no temporary directory left.
#[test]
fn a_shard_larger_than_the_working_set_is_refused_before_writing() {
    let dir = scratch("zarr", "bigshard");
    // 1024 x 1024 x 32 float32 values: 128 MiB, above the 96 MiB working set, as one shard.
    let src = dir.join("big.npy");
    let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (32, 1024, 1024), }";
    let mut text = dict.to_string();
    while !(10 + text.len() + 1).is_multiple_of(64) {
        text.push(' ');
    }
    text.push('\n');
    let mut header = b"\x93NUMPY\x01\x00".to_vec();
    header.extend_from_slice(&(text.len() as u16).to_le_bytes());
    header.extend_from_slice(text.as_bytes());
    let f = std::fs::File::create(&src).unwrap();
    use std::io::Write;
    (&f).write_all(&header).unwrap();
    f.set_len(header.len() as u64 + (128u64 << 20)).unwrap();
    let out = dir.join("s.zarr");
    for flags in [
        &["--chunks", "8x256x256", "--shard", "32x1024x1024"][..],
        &["--chunks", "32x1024x1024"],
    ] {
        let mut a = vec!["convert", s(&src), s(&out)];
        a.extend_from_slice(flags);
        let r = check(&a, 2);
        assert!(r.stderr().contains("working set"), "{}", r.stderr());
        assert!(r.stderr().contains(flags[flags.len() - 2]), "{}", r.stderr());
        assert!(!out.exists());
    }
    assert_no_temporaries(&dir);
    // Shards of 8 MiB are fine.
    check(
        &[
            "convert",
            s(&src),
            s(&out),
            "--chunks",
            "8x256x256",
            "--shard",
            "8x1024x256",
        ],
        0,
    );
}
