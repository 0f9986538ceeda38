//! The corpus's VDS edge cases at the command line (issue 17, items 3, 4 and 17): what each
//! command exits with, as `edges/README.md` says, and that failures name what failed.

use std::path::Path;
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rasterpack"))
        .args(args)
        .output()
        .unwrap()
}

fn convert(src: &Path, physical: bool) -> Output {
    let out = std::env::temp_dir().join(format!(
        "rasterpack-vds-edges-{}-{}.npy",
        std::process::id(),
        src.file_name().unwrap().to_string_lossy()
    ));
    let _ = std::fs::remove_file(&out);
    let mut args = vec!["convert", src.to_str().unwrap(), out.to_str().unwrap()];
    if physical {
        args.push("--physical");
    }
    let o = run(&args);
    let _ = std::fs::remove_file(&out);
    o
}

/// An index page or a chunk extent past the end of the file: validate exit 1 (as before),
/// convert exit 1 naming the layer and the page or chunk (was exit 0 with unwritten bricks).
#[test]
fn past_eof_layers_fail_convert() {
    let Some(edges) = rasterpack_common::testkit::corpus_dir("edges/vds") else {
        return;
    };
    for (file, needle) in [
        ("vds_index_page_offset_past_eof.vds", "index page 3"),
        ("vds_chunk_extent_past_eof.vds", "chunk 18"),
    ] {
        let p = edges.join(file);
        assert_eq!(run(&["validate", p.to_str().unwrap()]).status.code(), Some(1), "{file}");
        for physical in [false, true] {
            let o = convert(&p, physical);
            let stderr = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{file}: {stderr}");
            assert!(
                stderr.contains(needle) && stderr.contains("cannot be located"),
                "{file}: {stderr}"
            );
            assert!(!stderr.contains("vds.channel.unwritten"), "{file}: {stderr}");
        }
    }
}

/// `negativeMargin` i64::MAX: validate exit 1 (margin out of range), inspect 0 or 1, convert 1;
/// never 101 (an overflow panic in a build with overflow checks, as tests are).
#[test]
fn margin_i64_max_is_out_of_range() {
    let Some(edges) = rasterpack_common::testkit::corpus_dir("edges/vds") else {
        return;
    };
    let p = edges.join("vds_margin_i64_max_objdir");
    let v = run(&["validate", p.to_str().unwrap()]);
    assert_eq!(v.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&v.stdout).contains("vds.layout.margin"));
    let code = run(&["inspect", p.to_str().unwrap()]).status.code();
    assert!(matches!(code, Some(0 | 1)), "{code:?}");
    assert_eq!(convert(&p, false).status.code(), Some(1));
}

/// A U8 channel stored as a float wavelet stream: valid with the compatibility warning,
/// converts (exit 0).
#[test]
fn u8_float_stream_converts_with_a_compat_warning() {
    let Some(edges) = rasterpack_common::testkit::corpus_dir("edges/vds") else {
        return;
    };
    let p = edges.join("wnbl_u8_float_stream.vds");
    let v = run(&["validate", "--json", p.to_str().unwrap()]);
    assert_eq!(v.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&v.stdout).contains("vds.compat.wavelet_float_codes"));
    assert_eq!(convert(&p, false).status.code(), Some(0));
    assert_eq!(convert(&p, true).status.code(), Some(0));
}
