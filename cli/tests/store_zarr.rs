//! Zarr stores read from S3 (issues 19 and 20): a moto S3 server on loopback (started here, from
//! `$RASTERPACK_PYTHON`'s venv) holds uploaded copies of Zarr stores, written by rasterpack's
//! own writer (plain and sharded) and by zarr-python 3 (v2 and v3, sharded, a group). Each
//! `s3://` store must convert, inspect and validate exactly as its local directory does: the
//! same reader code reads both (the prefix is detected as Zarr by its root metadata). A damaged
//! chunk is exit 1 naming its key; a missing store exit 2 naming the URL.
//!
//! Without `$RASTERPACK_PYTHON` the tests skip visibly; under `CI=true` they fail instead.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::s3::{self, Moto};
use support::{check, check_bound, s, scratch};

/// The stores to upload, as (name, local directory, element): zarr-python's and ours.
fn stores(py: &str, dir: &Path) -> Vec<(String, PathBuf, Option<&'static str>)> {
    let theirs = dir.join("python");
    std::fs::create_dir_all(&theirs).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/zarr/make_python_stores.py");
    let out = Command::new(py).arg(script).arg(&theirs).output().expect("run python");
    assert!(
        out.status.success(),
        "make_python_stores.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut v = Vec::new();
    for name in [
        "v3_zstd.zarr",
        "v3_gzip.zarr",
        "v3_shard.zarr",
        "v3_fill.zarr",
        "v2_zlib.zarr",
        "v2_blosc.zarr",
        "group.zarr",
    ] {
        let element = (name == "group.zarr").then_some("sub/codes");
        v.push((name.to_string(), theirs.join(name), element));
    }
    let vds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/vds/small_r32_zip.vds");
    for (name, extra) in [("ours.zarr", &[][..]), ("ours_shard.zarr", &["--shard", "8x12x20"][..])] {
        let out = dir.join(name);
        let mut args = vec!["convert", s(&vds), s(&out), "--chunks", "4x6x10"];
        args.extend(extra);
        check(&args, 0);
        v.push((name.to_string(), out, None));
    }
    v
}

/// Upload the store at `local` under `s3://zarr/<name>/`.
fn upload(moto: &Moto, name: &str, local: &Path) {
    moto.upload("zarr", &s3::files_under(local, &format!("{name}/")));
}

/// A report with the input's name taken out.
fn normalized(text: &str, name: &str) -> String {
    text.replace(name, "<input>")
}

#[test]
fn s3_zarr_stores_read_and_validate_as_their_directories() {
    let Some(py) = s3::python("moto[server] and zarr") else {
        return;
    };
    let dir = scratch("store_zarr", "read_equal");
    let moto = Moto::start(&py, None);
    let all = stores(&py, &dir);
    for (name, local, _) in &all {
        upload(&moto, name, local);
    }
    for (name, local, element) in &all {
        let url = format!("s3://zarr/{name}");
        for cmd in ["inspect", "validate"] {
            let a = support::run(&[cmd, "--json", s(local)]);
            let b = moto.run(&[cmd, "--json", &url]);
            assert_eq!(a.code(), Some(0), "{cmd} {name} (local): {}", a.stderr());
            assert_eq!(b.code(), a.code(), "{cmd} {url}: {}", b.stderr());
            assert_eq!(
                normalized(&a.stdout(), s(local)),
                normalized(&b.stdout(), &url),
                "{cmd} {url}: the reports differ"
            );
        }
        for region in [None, Some("1:5,2:9")] {
            let (a_out, b_out) = (dir.join("a.npy"), dir.join("b.npy"));
            let mut tail: Vec<&str> = Vec::new();
            if let Some(e) = element {
                tail.extend(["--element", e]);
            }
            if let Some(r) = region {
                tail.extend(["--region", r]);
            }
            let mut a_args = vec!["convert", "--force", s(local), s(&a_out)];
            a_args.extend(&tail);
            let mut b_args = vec!["convert", "--force", &url, s(&b_out)];
            b_args.extend(&tail);
            let a = support::run(&a_args);
            let b = moto.run(&b_args);
            assert_eq!(a.code(), Some(0), "{a_args:?}: {}", a.stderr());
            assert_eq!(b.code(), Some(0), "{b_args:?}: {}", b.stderr());
            let (want, got) = (std::fs::read(&a_out).unwrap(), std::fs::read(&b_out).unwrap());
            assert!(want.len() > 128, "{a_args:?}: an empty array");
            assert!(want == got, "{b_args:?}: the values differ from the local read");
            check_bound(&b_args, &b);
        }
    }
}

#[test]
fn a_damaged_s3_chunk_is_named_and_a_missing_store_is_exit_2() {
    let Some(py) = s3::python("moto[server] and zarr") else {
        return;
    };
    let dir = scratch("store_zarr", "damaged");
    let moto = Moto::start(&py, None);
    let store = dir.join("bad.zarr");
    let vds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/vds/small_r32_zip.vds");
    check(&["convert", s(&vds), s(&store), "--chunks", "4x6x10"], 0);
    // The middle of one chunk's zstd frame overwritten: its decode fails, the others read.
    let chunk = store.join("c/0/1/0");
    let mut bytes = std::fs::read(&chunk).unwrap();
    assert!(bytes.len() > 40, "chunk c/0/1/0 is {} bytes", bytes.len());
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid - 8..mid + 8] {
        *b ^= 0xa5;
    }
    std::fs::write(&chunk, &bytes).unwrap();
    upload(&moto, "bad.zarr", &store);
    let url = "s3://zarr/bad.zarr";

    let local = support::run(&["validate", s(&store)]);
    let r = moto.run(&["validate", url]);
    assert_eq!(local.code(), Some(1), "local validate: {}", local.stdout());
    assert_eq!(r.code(), Some(1), "validate {url}: {}{}", r.stdout(), r.stderr());
    assert!(
        r.stdout().contains("c/0/1/0"),
        "the finding names the chunk key: {}",
        r.stdout()
    );
    let out = dir.join("bad.npy");
    let r = moto.run(&["convert", url, s(&out)]);
    assert_eq!(r.code(), Some(1), "convert {url}: {}", r.stderr());
    assert!(r.stderr().contains("c/0/1/0"), "{}", r.stderr());
    assert!(!out.exists(), "a failed convert leaves no output");

    moto.create_bucket("zarr");
    let missing = "s3://zarr/nothing.zarr";
    for args in [vec!["validate", missing], vec!["convert", missing, s(&out)]] {
        let r = moto.run(&args);
        assert_eq!(r.code(), Some(2), "{args:?}: {}", r.stderr());
        assert!(r.stderr().contains(missing), "{args:?} names the URL: {}", r.stderr());
    }
}
