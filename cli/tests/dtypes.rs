//! float16, complex64 and complex128 (and other dtypes) in either byte order and in C or
//! Fortran order through the binary (issue 17, item 13): `.npy` inputs crafted byte by byte
//! (`rasterpack_common::npy_cases`, values computed independently of the reader) convert to
//! `.npy` and FOLD exactly, whole and by `--region`; what the writers produce passes
//! `validate --strict`; the writers that cannot hold a dtype (VOLP, GVRS, UDF) refuse it with
//! exit 2 naming the dtype and the format, before the output exists; `--physical` is exit 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rasterpack_common::npy_cases::{expected, npy_case, KINDS};
use rasterpack_common::{npy, DType, Limits, Region};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rasterpack"))
        .args(args)
        .output()
        .expect("run rasterpack")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exit code")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rasterpack-dtypes-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The `.npy` at `path`, read with the project's reader (checked against crafted bytes in
/// `crates/common/tests/npy_dtypes.rs`): dtype, shape and little-endian C-order bytes.
fn load(path: &Path) -> (DType, Vec<u64>, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap();
    let h = npy::parse_header(&bytes).unwrap();
    assert!(
        !h.big_endian && !h.fortran_order,
        "{path:?}: writers write little-endian C order"
    );
    let a = npy::read(&bytes, &Limits::default()).unwrap();
    (a.dtype, a.shape, a.data)
}

#[test]
fn npy_inputs_convert_exactly_to_npy_and_fold() {
    let dir = scratch("convert");
    let shape: &[u64] = &[3, 4, 5];
    let mut cases = 0;
    for (dtype, code_) in KINDS {
        for big_endian in [false, true] {
            for fortran in [false, true] {
                let tag = format!(
                    "{}{code_}{}",
                    if big_endian { 'b' } else { 'l' },
                    if fortran { 'F' } else { 'C' }
                );
                let input = dir.join(format!("{tag}.npy"));
                std::fs::write(&input, npy_case(dtype, code_, big_endian, fortran, shape)).unwrap();
                let whole = expected(dtype, shape, &Region::full(shape));

                let out = dir.join(format!("{tag}.out.npy"));
                let o = run(&["convert", s(&input), s(&out)]);
                assert_eq!(code(&o), 0, "{tag}: {}", String::from_utf8_lossy(&o.stderr));
                assert_eq!(load(&out), (dtype, shape.to_vec(), whole.clone()), "{tag} -> npy");

                // numpy's slice a[1:3, 2, 1:] of the same array.
                let part = dir.join(format!("{tag}.part.npy"));
                let o = run(&["convert", s(&input), s(&part), "--region", "1:3,2,1:"]);
                assert_eq!(code(&o), 0, "{tag}: {}", String::from_utf8_lossy(&o.stderr));
                let region = Region::parse("1:3,2,1:", shape).unwrap();
                assert_eq!(load(&part).2, expected(dtype, shape, &region), "{tag} --region");

                let fold = dir.join(format!("{tag}.fold"));
                let o = run(&["convert", s(&input), s(&fold)]);
                assert_eq!(code(&o), 0, "{tag}: {}", String::from_utf8_lossy(&o.stderr));
                let o = run(&["validate", "--strict", s(&fold)]);
                assert_eq!(code(&o), 0, "{tag}: {}", String::from_utf8_lossy(&o.stdout));
                let back = dir.join(format!("{tag}.back.npy"));
                let o = run(&["convert", s(&fold), s(&back)]);
                assert_eq!(code(&o), 0, "{tag}: {}", String::from_utf8_lossy(&o.stderr));
                assert_eq!(load(&back), (dtype, shape.to_vec(), whole), "{tag} -> fold -> npy");
                cases += 1;
            }
        }
    }
    assert_eq!(cases, KINDS.len() * 4);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn writers_that_cannot_hold_a_dtype_refuse_it_by_name() {
    let dir = scratch("refuse");
    for (dtype, code_) in [(DType::F16, "f2"), (DType::C64, "c8"), (DType::C128, "c16")] {
        // Shapes each writer takes, so the dtype is the only reason to refuse.
        for (format, shape) in [("volp", &[2u64, 3, 4][..]), ("gvrs", &[3, 4]), ("udf", &[3, 4])] {
            let input = dir.join(format!("{code_}_{format}.npy"));
            std::fs::write(&input, npy_case(dtype, code_, true, true, shape)).unwrap();
            let out = dir.join(format!("{code_}.{format}"));
            let o = run(&["convert", s(&input), s(&out)]);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(code(&o), 2, "{format} {}: {err}", dtype.name());
            assert!(
                err.contains(dtype.name()) && err.contains(&format.to_uppercase()),
                "{format}: the refusal names the dtype and the format: {err}"
            );
            assert!(!out.exists(), "{format}: nothing is written");
            let leftovers: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .filter_map(|e| e.ok())
                .filter(|e| !e.file_name().to_string_lossy().ends_with(".npy"))
                .collect();
            assert!(
                leftovers.is_empty(),
                "{format}: no temporary file is left: {leftovers:?}"
            );
        }
        // Scale and offset have no meaning for complex values (and .npy has none).
        let input = dir.join(format!("{code_}_physical.npy"));
        std::fs::write(&input, npy_case(dtype, code_, false, false, &[4])).unwrap();
        let o = run(&["convert", s(&input), s(&dir.join("p.npy")), "--physical"]);
        assert_eq!(code(&o), 2, "--physical: {}", String::from_utf8_lossy(&o.stderr));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn inspect_reports_the_dtype_byte_order_and_layout() {
    let dir = scratch("inspect");
    let input = dir.join("c.npy");
    std::fs::write(&input, npy_case(DType::C128, "c16", true, true, &[2, 3])).unwrap();
    let o = run(&["inspect", "--json", s(&input)]);
    assert_eq!(code(&o), 0);
    let text = String::from_utf8_lossy(&o.stdout);
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let summary = &doc["files"][0]["summary"];
    assert_eq!(summary["dtype"], "complex128", "{text}");
    assert_eq!(summary["fortran_order"], true, "{text}");
    assert_eq!(summary["arrays"][0]["dtype"], "complex128", "{text}");
    // The documented report schema lists every dtype name a report may hold.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/schema/report.schema.json");
    let schema: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(root).unwrap()).unwrap();
    let names = dtype_enum(&schema).expect("the schema has a dtype enum");
    for (dtype, _) in KINDS {
        assert!(
            names.contains(&dtype.name().to_string()),
            "schema lacks {}",
            dtype.name()
        );
    }
    let o = run(&["validate", "--strict", s(&input)]);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stdout));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The `enum` of the schema's `dtype` property.
fn dtype_enum(v: &serde_json::Value) -> Option<Vec<String>> {
    match v {
        serde_json::Value::Object(m) => {
            if let Some(list) = m.get("dtype").and_then(|d| d.get("enum")).and_then(|e| e.as_array()) {
                return Some(list.iter().filter_map(|n| n.as_str().map(String::from)).collect());
            }
            m.values().find_map(dtype_enum)
        }
        serde_json::Value::Array(a) => a.iter().find_map(dtype_enum),
        _ => None,
    }
}
