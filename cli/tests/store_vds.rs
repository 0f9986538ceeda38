//! VDS datasets in OpenVDS's cloud layout read from S3 (issue 19): a moto S3 server on loopback
//! (started here, from `$RASTERPACK_PYTHON`'s venv) holds `s3://bucket/<dataset>/` prefixes with
//! `VolumeDataLayout`, `LayerStatus` and `<layer>/<chunk>` objects. Uploaded copies of the
//! directory-layout datasets must read and validate exactly as the directory does (their
//! `x-amz-meta-vdschunkmetadata` headers taken from the `.objmeta.json` sidecar), and datasets
//! OpenVDS 3.4.9 itself writes to the server must read equal to OpenVDS's own read.
//!
//! Without `$RASTERPACK_PYTHON` the tests skip visibly; under `CI=true` they fail instead.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::s3::{self, Moto};
use support::{check_bound, s, scratch};

/// Upload the directory-layout dataset `dir` under `s3://bucket/prefix/`, each object with
/// the `x-amz-meta-*` headers `headers` gives it (the `.objmeta.json` sidecar's form).
fn upload_dataset(moto: &Moto, bucket: &str, prefix: &str, dir: &Path, headers: &serde_json::Value) {
    let files: Vec<_> = s3::files_under(dir, "")
        .into_iter()
        .map(|(key, path)| {
            let meta = headers["objects"][&key].as_object().cloned().unwrap_or_default();
            let meta = meta
                .into_iter()
                .filter_map(|(k, v)| k.strip_prefix("x-amz-meta-").map(|k| (k.to_string(), v)))
                .collect();
            (format!("{prefix}/{key}"), path, meta)
        })
        .collect();
    moto.upload_with_metadata(bucket, &files);
}

/// The oracle script (OpenVDS against the server), with `args`; its standard output.
fn oracle(moto: &Moto, args: &[&str]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/vds_s3.py");
    let out = Command::new(moto.python_path())
        .arg(&script)
        .arg(args[0])
        .arg(moto.endpoint())
        .args(&args[1..])
        .output()
        .expect("run the OpenVDS oracle");
    assert!(
        out.status.success(),
        "oracle {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A report with the input's name and the storage kind taken out (`object-dir` for the
/// directory, `object-store` for the prefix: the only difference allowed).
fn normalized(text: &str, name: &str) -> String {
    text.replace(name, "<input>")
        .replace("\"object-store\"", "\"<storage>\"")
        .replace("\"object-dir\"", "\"<storage>\"")
}

/// The directory read and the s3:// read of the same dataset: same exit code, same report.
fn same_verdict(moto: &Moto, cmd: &str, url: &str, local: &Path) {
    let a = support::run(&[cmd, "--json", s(local)]);
    let b = moto.run(&[cmd, "--json", url]);
    assert_eq!(
        a.code(),
        b.code(),
        "{cmd} {url}: local {:?}, s3 {:?}\n{}",
        a.code(),
        b.code(),
        b.stderr()
    );
    assert_eq!(
        normalized(&a.stdout(), s(local)),
        normalized(&b.stdout(), url),
        "{cmd} {url}: reports differ"
    );
    check_bound(&[cmd, url], &b);
}

/// `convert` of the whole array and of boxes from the directory and from the prefix: same exit
/// code, same bytes.
fn same_arrays(moto: &Moto, url: &str, local: &Path, dir: &Path) -> usize {
    let mut compared = 0;
    for extra in [&[][..], &["--box", "1:9,2:20,:"][..], &["--region", "1:3,:,5:17"][..]] {
        let (a_out, b_out) = (dir.join("a.npy"), dir.join("b.npy"));
        let mut a_args = vec!["convert", "--force"];
        a_args.extend(extra);
        let mut b_args = a_args.clone();
        a_args.extend([s(local), s(&a_out)]);
        b_args.extend([url, s(&b_out)]);
        let a = support::run(&a_args);
        let b = moto.run(&b_args);
        assert_eq!(a.code(), b.code(), "{b_args:?}: {}\n{}", a.stderr(), b.stderr());
        if a.code() == Some(0) {
            assert_eq!(
                std::fs::read(&a_out).unwrap(),
                std::fs::read(&b_out).unwrap(),
                "{b_args:?}"
            );
            compared += 1;
        }
        check_bound(&b_args, &b);
    }
    compared
}

/// The directory-layout datasets of testdata/ and the corpus, with their sidecar headers.
fn datasets() -> Vec<(String, PathBuf, serde_json::Value)> {
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/vds/small_objdir")];
    if let Some(corpus) = rasterpack_common::testkit::corpus_dir("") {
        for sub in ["vds", "edges/vds"] {
            for e in std::fs::read_dir(corpus.join(sub)).unwrap() {
                let p = e.unwrap().path();
                if p.join("VolumeDataLayout").is_file() {
                    dirs.push(p);
                }
            }
        }
    }
    dirs.sort();
    dirs.into_iter()
        .map(|d| {
            let name = d.file_name().unwrap().to_str().unwrap().to_string();
            let mut side = d.clone().into_os_string();
            side.push(".objmeta.json");
            let headers = std::fs::read(&side)
                .ok()
                .and_then(|t| serde_json::from_slice(&t).ok())
                .unwrap_or(serde_json::Value::Null);
            (name, d, headers)
        })
        .collect()
}

#[test]
fn cloud_layout_reads_equal_directory_reads() {
    let Some(py) = s3::python("moto[server] and openvds") else {
        return;
    };
    let dir = scratch("store_vds", "cloud_layout_reads_equal_directory_reads");
    let moto = Moto::start(&py, Some(dir.join("moto.log")));
    let sets = datasets();
    for (name, path, headers) in &sets {
        upload_dataset(&moto, "vds", name, path, headers);
    }
    let mut compared = 0;
    for (name, path, headers) in &sets {
        let url = format!("s3://vds/{name}");
        // A dataset without a sidecar has no headers on S3 either; the directory read knows no
        // headers at all then, so only datasets with a sidecar compare validate reports.
        if !headers.is_null() {
            same_verdict(&moto, "validate", &url, path);
        }
        same_verdict(&moto, "inspect", &url, path);
        compared += same_arrays(&moto, &url, path, &dir);
    }
    assert!(
        compared >= sets.len(),
        "only {compared} arrays compared for {} datasets",
        sets.len()
    );
    eprintln!(
        "{} cloud-layout datasets read from s3:// equal to directory reads ({compared} arrays)",
        sets.len()
    );
}

/// A copy of the directory dataset `src` in `dst` with `headers` as its sidecar.
fn copy_with_sidecar(src: &Path, dst: &Path, headers: &serde_json::Value) {
    for (key, path) in s3::files_under(src, "") {
        let to = dst.join(&key);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&path, &to).unwrap();
    }
    let mut side = dst.as_os_str().to_owned();
    side.push(".objmeta.json");
    std::fs::write(side, headers.to_string()).unwrap();
}

#[test]
fn chunk_metadata_headers_are_checked() {
    let Some(py) = s3::python("moto[server] and openvds") else {
        return;
    };
    let dir = scratch("store_vds", "chunk_metadata_headers_are_checked");
    let moto = Moto::start(&py, Some(dir.join("moto.log")));
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/vds/small_objdir");
    let key = "Dimensions_012LOD0/0";
    // The chunk's hash with one bit changed, still valid base64 of 8 bytes.
    let good = "mg7QfZ2Y9gM=";
    let bad = "mg7QfZ2Y9gI=";
    let cases = [
        (
            "good",
            serde_json::json!({"objects": {key: {"x-amz-meta-vdschunkmetadata": good}}}),
            0,
            None,
        ),
        (
            "mismatch",
            serde_json::json!({"objects": {key: {"x-amz-meta-vdschunkmetadata": bad}}}),
            1,
            Some("vds.object_metadata.mismatch"),
        ),
        (
            "not_base64",
            serde_json::json!({"objects": {key: {"x-amz-meta-vdschunkmetadata": "@@@"}}}),
            1,
            Some("vds.object_metadata.base64"),
        ),
        // The legacy name (`VDS-Chunk-Metadata`; S3 keeps user metadata names in lower case),
        // which OpenVDS still reads: checked the same way.
        (
            "legacy_good",
            serde_json::json!({"objects": {key: {"x-amz-meta-vds-chunk-metadata": good}}}),
            0,
            None,
        ),
        (
            "legacy_mismatch",
            serde_json::json!({"objects": {key: {"x-amz-meta-vds-chunk-metadata": bad}}}),
            1,
            Some("vds.object_metadata.mismatch"),
        ),
        // Both names: the current one counts, as in OpenVDS.
        (
            "both",
            serde_json::json!({"objects": {key: {
                "x-amz-meta-vdschunkmetadata": good,
                "x-amz-meta-vds-chunk-metadata": bad
            }}}),
            0,
            None,
        ),
        // No header on a data chunk: OpenVDS warns and uses the page; so do we.
        (
            "missing",
            serde_json::json!({"objects": {}}),
            0,
            Some("vds.object_metadata.missing"),
        ),
    ];
    for (name, headers, exit, code) in &cases {
        let local = dir.join(name);
        copy_with_sidecar(&src, &local, headers);
        upload_dataset(&moto, "hdr", name, &src, headers);
        let url = format!("s3://hdr/{name}");
        same_verdict(&moto, "validate", &url, &local);
        let r = moto.run(&["validate", "--json", &url]);
        assert_eq!(r.code(), Some(*exit), "{name}: {}", r.stdout());
        match code {
            Some(code) => assert!(r.stdout().contains(code), "{name}: no {code}: {}", r.stdout()),
            None => assert!(!r.stdout().contains("vds.object_metadata"), "{name}: {}", r.stdout()),
        }
        // A read checks the header too: a chunk whose header disagrees is never decoded.
        let out = dir.join(format!("{name}.npy"));
        let c = moto.run(&["convert", "--force", &url, s(&out)]);
        assert_eq!(c.code(), Some(*exit), "convert {name}: {}", c.stderr());
        if *exit == 1 {
            assert!(c.stderr().contains(code.unwrap()), "convert {name}: {}", c.stderr());
        }
    }
}

/// OpenVDS 3.4.9 writes datasets in its cloud layout to the server; rasterpack reads them from
/// s3:// equal to OpenVDS's own read of the same objects, and validate finds nothing.
#[test]
fn openvds_written_datasets_read_equal() {
    let Some(py) = s3::python("moto[server] and openvds") else {
        return;
    };
    let dir = scratch("store_vds", "openvds_written_datasets_read_equal");
    let moto = Moto::start(&py, Some(dir.join("moto.log")));
    moto.create_bucket("ovds");
    for method in ["None", "Zip", "WaveletLossless", "Wavelet"] {
        let url = format!("s3://ovds/{method}");
        // Odd sizes: partial bricks on every axis.
        oracle(&moto, &["write", &url, method, "70", "50", "40", "32"]);
        let theirs = dir.join(format!("{method}.openvds.npy"));
        oracle(&moto, &["read", &url, s(&theirs)]);
        let ours = dir.join(format!("{method}.npy"));
        let r = moto.run(&["convert", "--force", &url, s(&ours)]);
        assert_eq!(r.code(), Some(0), "convert {url}: {}", r.stderr());
        assert_eq!(
            std::fs::read(&ours).unwrap(),
            std::fs::read(&theirs).unwrap(),
            "{url}: rasterpack's read differs from OpenVDS's"
        );
        let v = moto.run(&["validate", "--json", &url]);
        let doc: serde_json::Value = serde_json::from_str(&v.stdout()).expect("one JSON document");
        assert_eq!(v.code(), Some(0), "validate {url}: {}", v.stdout());
        assert_eq!(doc["files"][0]["findings"], serde_json::json!([]), "validate {url}");
        check_bound(&["convert", &url], &r);
    }
}

/// The request log of a region read: 1% of a 256x256x512 R32 Zip dataset (brick 64, 4x4x8
/// chunks) fetches the three metadata objects and the two chunks the box meets, nothing else,
/// and at most 1.2x their bytes (whole-object GETs; moto's log names every request).
#[test]
fn region_read_fetches_only_its_bricks() {
    let Some(py) = s3::python("moto[server] and openvds") else {
        return;
    };
    let dir = scratch("store_vds", "region_read_fetches_only_its_bricks");
    let moto = Moto::start(&py, Some(dir.join("moto.log")));
    moto.create_bucket("log");
    // A smooth field (no noise) compresses well: the upload stays quick.
    oracle(
        &moto,
        &["write", "s3://log/cube", "Zip", "256", "256", "512", "64", "0"],
    );
    let sizes: std::collections::BTreeMap<String, u64> =
        serde_json::from_str(&oracle(&moto, &["sizes", "log", "cube"])).expect("sizes");
    let from = moto.log_len();
    // 64 x 64 x 82 samples = 1.0% of the volume; Z 0..82 meets bricks 0 and 1 along Z.
    let out = dir.join("box.npy");
    let r = moto.run(&[
        "convert",
        "--force",
        "--box",
        "0:64,0:64,0:82",
        "s3://log/cube",
        s(&out),
    ]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert_eq!(std::fs::metadata(&out).unwrap().len(), 128 + 64 * 64 * 82 * 4);
    // Werkzeug writes its log line after the response: give it a moment.
    std::thread::sleep(Duration::from_millis(300));
    let gets = moto.gets_since(from, "log");
    let metadata = ["VolumeDataLayout", "LayerStatus", "Dimensions_012LOD0/ChunkMetadata/0"];
    let touched = ["Dimensions_012LOD0/0", "Dimensions_012LOD0/16"];
    let size = |k: &str| sizes.get(k).copied().unwrap_or_else(|| panic!("no object {k}"));
    let mut fetched = 0u64;
    for g in gets.iter().filter(|g| !g.contains("list-type")) {
        let key = g.strip_prefix("cube/").unwrap_or(g);
        assert!(
            metadata.contains(&key) || touched.contains(&key),
            "fetched {key}, which the box does not need: {gets:?}"
        );
        fetched += size(key);
    }
    for t in touched {
        assert!(
            gets.iter().any(|g| g == &format!("cube/{t}")),
            "{t} was not fetched: {gets:?}"
        );
    }
    let needed: u64 = metadata.iter().chain(&touched).map(|k| size(k)).sum();
    let total: u64 = sizes.values().sum();
    eprintln!(
        "box read: {} requests, {fetched} bytes fetched, {needed} needed, dataset {total} bytes",
        gets.len()
    );
    assert!(fetched * 10 <= needed * 12, "fetched {fetched} bytes, needed {needed}");
}

/// `validate s3://bucket/prefix/` reports a VDS dataset under the prefix once, as a dataset,
/// beside the single-object files there.
#[test]
fn prefix_listing_validates_a_dataset_once() {
    let Some(py) = s3::python("moto[server] and openvds") else {
        return;
    };
    let dir = scratch("store_vds", "prefix_listing_validates_a_dataset_once");
    let moto = Moto::start(&py, Some(dir.join("moto.log")));
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/vds");
    let side: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.join("small_objdir.objmeta.json")).unwrap()).unwrap();
    upload_dataset(&moto, "mixed", "p/cube", &data.join("small_objdir"), &side);
    // A single-object file beside it: a one-object "dataset" of its own name.
    let file_dir = dir.join("file");
    std::fs::create_dir_all(&file_dir).unwrap();
    std::fs::copy(data.join("small_r32_zip.vds"), file_dir.join("small_r32_zip.vds")).unwrap();
    upload_dataset(&moto, "mixed", "p", &file_dir, &serde_json::Value::Null);
    let r = moto.run(&["validate", "--json", "s3://mixed/p/"]);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout()).expect("one JSON document");
    let paths: Vec<&str> = doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        ["s3://mixed/p/cube", "s3://mixed/p/small_r32_zip.vds"],
        "{}",
        r.stdout()
    );
    assert_eq!(r.code(), Some(0), "{}", r.stdout());
}

/// A `.npy` of float32 values in C order (`shape` slowest first).
fn write_f32_npy(path: &Path, shape: &[usize], values: &[f32]) {
    let dims: Vec<String> = shape.iter().map(|n| n.to_string()).collect();
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}",
        dims.join(", ")
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(header.len() as u16).to_le_bytes());
    b.extend_from_slice(header.as_bytes());
    for v in values {
        b.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(path, b).unwrap();
}

/// The data bytes of a `.npy` file.
fn npy_data(path: &Path) -> Vec<u8> {
    let b = std::fs::read(path).unwrap();
    let hl = u16::from_le_bytes([b[8], b[9]]) as usize;
    b[10 + hl..].to_vec()
}

/// A 40x50x70 float32 volume (odd sizes: partial 32-voxel bricks on every axis) whose first
/// brick is constant (stored as OpenVDS stores constant bricks) and the rest varied.
fn test_volume() -> (Vec<usize>, Vec<f32>) {
    volume(40, 50, 70)
}

/// A `nz x ny x nx` volume: a constant 32^3 corner (a constant brick), varied values elsewhere.
fn volume(nz: usize, ny: usize, nx: usize) -> (Vec<usize>, Vec<f32>) {
    let mut v = Vec::with_capacity(nz * ny * nx);
    for z in 0..nz {
        for y in 0..ny {
            for x in 0..nx {
                let i = (z * ny + y) * nx + x;
                v.push(if x < 32 && y < 32 && z < 32 {
                    1.25
                } else {
                    ((i * 7919) % 1013) as f32 / 17.0 - 30.0
                });
            }
        }
    }
    (vec![nz, ny, nx], v)
}

/// LOD `lod` of a C-order volume: every 2^lod-th sample along each axis, as little-endian bytes.
fn decimated(shape: &[usize], v: &[f32], lod: u32) -> Vec<u8> {
    let st = 1usize << lod;
    let mut out = Vec::new();
    for z in (0..shape[0]).step_by(st) {
        for y in (0..shape[1]).step_by(st) {
            for x in (0..shape[2]).step_by(st) {
                out.extend_from_slice(&v[(z * shape[1] + y) * shape[2] + x].to_le_bytes());
            }
        }
    }
    out
}

/// The keys under `prefix/` in `bucket`, with their sizes (the OpenVDS oracle's boto3 listing).
fn objects_under(moto: &Moto, bucket: &str, prefix: &str) -> serde_json::Map<String, serde_json::Value> {
    let text = oracle(moto, &["sizes", bucket, prefix]);
    serde_json::from_str::<serde_json::Value>(&text)
        .expect("sizes JSON")
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// `convert IN s3://bucket/prefix --to vds` (issue 21) writes OpenVDS's cloud layout through
/// the directory writer's objects: rasterpack reads every LOD back equal to the input, its
/// `validate --strict` of the URL is clean (every chunk object carries the
/// `x-amz-meta-vdschunkmetadata` header: a missing one is a warning), OpenVDS 3.4.9 reads every
/// LOD from the server bit for bit, an existing dataset is refused without `--force` and
/// replaced with it.
#[test]
fn vds_written_to_a_prefix_reads_back_everywhere() {
    let Some(py) = s3::python("moto[server] and openvds") else {
        return;
    };
    let dir = scratch("store_vds", "vds_written_to_a_prefix_reads_back_everywhere");
    let moto = Moto::start(&py, Some(dir.join("moto.log")));
    moto.create_bucket("out");
    let (shape, values) = test_volume();
    let input = dir.join("in.npy");
    write_f32_npy(&input, &shape, &values);
    let url = "s3://out/cube";
    let write = |force: bool, compress: &str| {
        let mut a = vec![
            "convert",
            s(&input),
            url,
            "--to",
            "vds",
            "--brick-size",
            "32",
            "--lods",
            "2",
        ];
        a.extend(["--compress", compress]);
        if force {
            a.push("--force");
        }
        moto.run(&a)
    };
    let r = write(false, "zip");
    assert_eq!(r.code(), Some(0), "convert to {url}: {}", r.stderr());
    check_bound(&["convert", url], &r);
    let keys = objects_under(&moto, "out", "cube");
    assert!(
        keys.contains_key("VolumeDataLayout") && keys.contains_key("LayerStatus"),
        "{keys:?}"
    );
    assert!(keys.contains_key("Dimensions_012LOD2/0"), "{keys:?}");

    let again = write(false, "zip");
    assert_eq!(
        again.code(),
        Some(2),
        "an existing dataset without --force: {}",
        again.stderr()
    );
    assert!(again.stderr().contains("--force"), "{}", again.stderr());

    for compress in ["zip", "rle"] {
        if compress == "rle" {
            let r = write(true, "rle");
            assert_eq!(r.code(), Some(0), "convert --force to {url}: {}", r.stderr());
        }
        let v = moto.run(&["validate", "--strict", "--json", url]);
        let doc: serde_json::Value = serde_json::from_str(&v.stdout()).expect("one JSON document");
        assert_eq!(v.code(), Some(0), "validate --strict {url}: {}", v.stdout());
        assert_eq!(doc["files"][0]["findings"], serde_json::json!([]), "validate {url}");
        for lod in 0..=2u32 {
            let want = decimated(&shape, &values, lod);
            let ours = dir.join(format!("{compress}_lod{lod}.npy"));
            let r = moto.run(&["convert", "--force", "--lod", &lod.to_string(), url, s(&ours)]);
            assert_eq!(r.code(), Some(0), "convert {url} --lod {lod}: {}", r.stderr());
            assert!(
                npy_data(&ours) == want,
                "{compress}: rasterpack's LOD {lod} differs from the input"
            );
            let theirs = dir.join(format!("{compress}_lod{lod}.openvds.npy"));
            oracle(&moto, &["read", url, s(&theirs), &lod.to_string()]);
            assert!(
                npy_data(&theirs) == want,
                "{compress}: OpenVDS's LOD {lod} differs from the input"
            );
        }
    }
}

/// A convert to a prefix that fails midway (a damaged brick near the end of the source, after
/// the first bricks were uploaded) exits 1 and leaves nothing under the prefix: no
/// `VolumeDataLayout`, no chunk objects.
#[test]
fn a_failed_upload_leaves_no_dataset() {
    let Some(py) = s3::python("moto[server] and openvds") else {
        return;
    };
    let dir = scratch("store_vds", "a_failed_upload_leaves_no_dataset");
    let moto = Moto::start(&py, Some(dir.join("moto.log")));
    moto.create_bucket("out");
    // 16 MiB in 128 bricks of 32^3, so the bricks before the damaged last one are encoded and
    // their PUTs under way (the upload's own pool) well before the source read reaches it: a
    // one-group volume fails before any output exists, which tests nothing midway.
    let (shape, values) = volume(128, 128, 256);
    let input = dir.join("in.npy");
    write_f32_npy(&input, &shape, &values);
    // The source: a directory dataset whose last chunk is cut short.
    let src = dir.join("src");
    support::check(
        &[
            "convert",
            "--force",
            s(&input),
            s(&src),
            "--to",
            "vds",
            "--brick-size",
            "32",
        ],
        0,
    );
    let layer = src.join("Dimensions_012LOD0");
    let last = (0..128)
        .rev()
        .map(|i| layer.join(i.to_string()))
        .find(|p| p.is_file())
        .unwrap();
    let bytes = std::fs::read(&last).unwrap();
    assert!(bytes.len() > 100, "the last chunk holds data");
    std::fs::write(&last, &bytes[..bytes.len() / 2]).unwrap();

    let from = moto.log_len();
    let r = moto.run(&[
        "convert",
        s(&src),
        "s3://out/broken",
        "--to",
        "vds",
        "--brick-size",
        "32",
    ]);
    assert_eq!(r.code(), Some(1), "a damaged source brick: {}", r.stderr());
    let log = std::fs::read(dir.join("moto.log")).unwrap();
    let puts = String::from_utf8_lossy(&log[from as usize..])
        .matches("\"PUT /out/broken/")
        .count();
    assert!(
        puts > 0,
        "no object was uploaded before the failure: the test does not fail midway"
    );
    let left = objects_under(&moto, "out", "broken");
    assert!(left.is_empty(), "objects left after a failed convert: {left:?}");
}

/// SIGTERM while a dataset is being uploaded to a prefix: the process ends by the signal and
/// deletes every object it had put (the signal watcher runs the upload's cleanup).
#[cfg(unix)]
#[test]
fn a_signal_during_the_upload_leaves_no_dataset() {
    use std::process::Stdio;
    use std::time::Instant;
    let Some(py) = s3::python("moto[server] and openvds") else {
        return;
    };
    let dir = scratch("store_vds", "a_signal_during_the_upload_leaves_no_dataset");
    let moto = Moto::start(&py, Some(dir.join("moto.log")));
    moto.create_bucket("out");
    // 48 MiB of varied floats: long enough to convert that the signal lands midway.
    let shape = [192usize, 256, 256];
    let values: Vec<f32> = (0..shape.iter().product::<usize>())
        .map(|i| ((i.wrapping_mul(2_654_435_761)) % 100_003) as f32 * 0.37)
        .collect();
    let input = dir.join("in.npy");
    write_f32_npy(&input, &shape, &values);
    let from = moto.log_len();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rasterpack"))
        .args(["convert", s(&input), "s3://out/sig", "--to", "vds"])
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ENDPOINT_URL", moto.endpoint())
        .env("AWS_ALLOW_HTTP", "true")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run rasterpack");
    let start = Instant::now();
    loop {
        let log = std::fs::read(dir.join("moto.log")).unwrap();
        if String::from_utf8_lossy(&log[from as usize..]).contains("\"PUT /out/sig/") {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the convert ended before any object was put"
        );
        assert!(start.elapsed() < Duration::from_secs(60), "no PUT within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "the convert finished before the signal: make the input larger"
    );
    let left = objects_under(&moto, "out", "sig");
    assert!(left.is_empty(), "objects left after SIGTERM: {} of them", left.len());
}

/// Download every object under `bucket/prefix/` into the directory `to` (boto3).
fn download_prefix(moto: &Moto, bucket: &str, prefix: &str, to: &Path) {
    let script = r#"
import os, sys, boto3
s3 = boto3.client('s3', endpoint_url=sys.argv[1], region_name='us-east-1',
                  aws_access_key_id='testing', aws_secret_access_key='testing')
bucket, prefix, to = sys.argv[2], sys.argv[3] + '/', sys.argv[4]
for page in s3.get_paginator('list_objects_v2').paginate(Bucket=bucket, Prefix=prefix):
    for o in page.get('Contents', []):
        path = os.path.join(to, o['Key'][len(prefix):])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        s3.download_file(bucket, o['Key'], path)
"#;
    moto.script(script, &[bucket, prefix, s(to)], "");
}

/// `convert IN s3://bucket/x.zarr` (issue 20) writes the Zarr store through zarrs' object_store
/// adapter: zarr-python 3 reads a download of the prefix equal to the input, and so does
/// rasterpack; an existing store is refused without `--force` and replaced with it; a convert
/// that fails midway leaves no object under the prefix.
#[test]
fn zarr_written_to_a_prefix_reads_back() {
    let Some(py) = s3::python("moto[server] and openvds") else {
        return;
    };
    let dir = scratch("store_vds", "zarr_written_to_a_prefix_reads_back");
    let moto = Moto::start(&py, Some(dir.join("moto.log")));
    moto.create_bucket("out");
    let (shape, values) = test_volume();
    let input = dir.join("in.npy");
    write_f32_npy(&input, &shape, &values);
    let want = decimated(&shape, &values, 0);
    let url = "s3://out/cube.zarr";
    let r = moto.run(&["convert", s(&input), url, "--chunks", "16x32x32"]);
    assert_eq!(r.code(), Some(0), "convert to {url}: {}", r.stderr());
    check_bound(&["convert", url], &r);
    let keys = objects_under(&moto, "out", "cube.zarr");
    assert!(keys.contains_key("zarr.json"), "{keys:?}");
    // 3 x 2 x 3 chunks of the 40x50x70 array.
    assert_eq!(keys.keys().filter(|k| k.starts_with("c/")).count(), 18, "{keys:?}");

    let dl = dir.join("dl.zarr");
    let _ = std::fs::remove_dir_all(&dl);
    download_prefix(&moto, "out", "cube.zarr", &dl);
    let theirs = dir.join("zarr_python.npy");
    moto.script(
        "import sys, numpy as np, zarr; np.save(sys.argv[3], zarr.open_array(sys.argv[2], mode='r')[...])",
        &[s(&dl), s(&theirs)],
        "",
    );
    assert!(
        npy_data(&theirs) == want,
        "zarr-python's read of the uploaded store differs from the input"
    );
    let ours = dir.join("rasterpack.npy");
    support::check(&["convert", "--force", s(&dl), s(&ours)], 0);
    assert!(
        npy_data(&ours) == want,
        "rasterpack's read of the uploaded store differs from the input"
    );

    let again = moto.run(&["convert", s(&input), url]);
    assert_eq!(
        again.code(),
        Some(2),
        "an existing store without --force: {}",
        again.stderr()
    );
    let forced = moto.run(&["convert", "--force", s(&input), url, "--chunks", "40x50x70"]);
    assert_eq!(forced.code(), Some(0), "--force: {}", forced.stderr());
    let keys = objects_under(&moto, "out", "cube.zarr");
    assert_eq!(
        keys.keys().filter(|k| k.starts_with("c/")).count(),
        1,
        "the old chunks stay: {keys:?}"
    );

    // A damaged brick at the end of the source: chunks were put, then the convert fails.
    let src = dir.join("src");
    support::check(
        &[
            "convert",
            "--force",
            s(&input),
            s(&src),
            "--to",
            "vds",
            "--brick-size",
            "32",
        ],
        0,
    );
    let last = src.join("Dimensions_012LOD0/11");
    let bytes = std::fs::read(&last).unwrap();
    std::fs::write(&last, &bytes[..bytes.len() / 2]).unwrap();
    let from = moto.log_len();
    let r = moto.run(&["convert", s(&src), "s3://out/broken.zarr", "--chunks", "8x8x70"]);
    assert_eq!(r.code(), Some(1), "a damaged source brick: {}", r.stderr());
    let log = std::fs::read(dir.join("moto.log")).unwrap();
    let puts = String::from_utf8_lossy(&log[from as usize..])
        .matches("\"PUT /out/broken.zarr/")
        .count();
    // Whether a chunk went up before the damaged brick stopped the read depends on timing: the
    // small source is decoded as one group, so on a busy machine the failure can come first.
    // The deletion of what was put is the same code as the VDS output's (`prefix::Cleanup`),
    // which `a_failed_upload_leaves_no_dataset` checks with uploads made first; here nothing
    // may be left either way.
    if puts == 0 {
        eprintln!(
            "note: no chunk was put before the failure in this run (timing): only the no-leftovers rule was checked"
        );
    }
    let left = objects_under(&moto, "out", "broken.zarr");
    assert!(left.is_empty(), "objects left after a failed convert: {left:?}");
}
