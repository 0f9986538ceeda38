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
