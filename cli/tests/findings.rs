//! Files with findings (issue 11, items 10 and 17): `inspect` never claims a file is valid,
//! `convert` reads an intact array from a file with errors elsewhere and says on stderr that
//! the file has findings, and refuses damaged data with its finding.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rasterpack_common::{Input, Limits};
use rasterpack_udf::{codes, Hint, Prim, TableSpec, UdfFile, UdfWriter};
use serde_json::Value;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rasterpack"))
        .env_remove("NO_COLOR")
        .args(args)
        .output()
        .expect("run rasterpack")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exit code")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rasterpack-findings-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn desc(bytes: &[u8], path: &str) -> usize {
    let f = UdfFile::open_lenient(&Input::from_bytes("t", bytes.to_vec()), &Limits::default());
    f.find(path).unwrap().1.desc_offset as usize
}

fn data(bytes: &[u8], path: &str) -> usize {
    let f = UdfFile::open_lenient(&Input::from_bytes("t", bytes.to_vec()), &Limits::default());
    f.find(path).unwrap().1.data_offset.unwrap() as usize
}

/// root: `good` f32 [3], `bad` f32 [2], `pts` f32 [2], `idx` u8 [n] INDEX into `pts`.
fn udf(idx_len: usize) -> Vec<u8> {
    let mut w = UdfWriter::new("FIND").unwrap();
    let root = w.add_dataset("ROOT").unwrap();
    w.set_root(root);
    w.add(root, TableSpec::array("good", &[3], &[1.5f32, 2.5, -3.0]))
        .unwrap();
    w.add(root, TableSpec::array("bad", &[2], &[4f32, 5.0])).unwrap();
    w.add(root, TableSpec::array("pts", &[2], &[0f32, 1.0])).unwrap();
    w.add(
        root,
        TableSpec::array("idx", &[idx_len as u32], &vec![1u8; idx_len])
            .with_hint(Hint::Index, &[])
            .index_into("pts"),
    )
    .unwrap();
    w.to_bytes().unwrap()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.to_str().unwrap().to_string()
}

fn npy_f64(path: &Path) -> Vec<f64> {
    let a = rasterpack_common::npy::read(&std::fs::read(path).unwrap(), &Limits::default()).unwrap();
    a.to_f64()
}

#[test]
fn inspect_never_says_valid_and_validate_does() {
    let dir = scratch("claims");
    // An INDEX value out of range in a table over 1 MiB: inspect does not check the content of
    // such tables, validate does.
    let mut b = udf(1_200_000);
    let at = data(&b, "root/idx") + 1_100_000;
    b[at] = 7;
    let f = write(&dir, "big_index.udf", &b);
    let o = run(&["inspect", "--json", &f]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let file = &doc["files"][0];
    assert_eq!(file["checked"], Value::from("structure"));
    assert!(file.get("valid").is_none(), "inspect gives no verdict: {file}");
    assert!(
        file["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == codes::CONTENT_NOT_CHECKED),
        "inspect says what it did not check"
    );
    let o = run(&["inspect", &f]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!text.contains("VALID"), "{text}");
    assert!(text.contains("structure checked"), "{text}");
    let o = run(&["validate", "--json", &f]);
    assert_eq!(code(&o), 1);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let file = &doc["files"][0];
    assert_eq!(
        (&file["checked"], &file["valid"]),
        (&Value::from("full"), &Value::Bool(false))
    );
    assert_eq!(file["findings"][0]["code"], Value::from(codes::INDEX_OUT_OF_RANGE));
    // The damaged table is refused, the others convert, with a note on stderr (inspect does not
    // see this error, so the note is not guaranteed here; see the next test).
    let out = dir.join("idx.npy");
    let o = run(&["convert", &f, out.to_str().unwrap(), "--element", "root/idx"]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains(codes::INDEX_OUT_OF_RANGE), "{}", stderr(&o));
    assert!(!out.exists());
}

#[test]
fn intact_tables_convert_from_a_file_with_errors_and_the_cli_says_so() {
    let dir = scratch("intact");
    let clean = udf(3);
    // `bad`: shape [3] for 8 bytes of f32 (an error of that table only).
    let mut broken = clean.clone();
    broken[desc(&clean, "root/bad") + 0x14] = 3;
    let f = write(&dir, "broken.udf", &broken);
    let o = run(&["validate", &f]);
    assert_eq!(code(&o), 1);
    assert!(String::from_utf8_lossy(&o.stdout).contains(codes::TABLE_SHAPE_SIZE));

    let good = dir.join("good.npy");
    let o = run(&["convert", &f, good.to_str().unwrap(), "--element", "root/good"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(npy_f64(&good), vec![1.5, 2.5, -3.0]);
    let note = format!("note: {f} has findings (1 error, 0 warnings); run `rasterpack validate {f}`");
    assert!(stderr(&o).contains(&note), "{}", stderr(&o));

    let bad = dir.join("bad.npy");
    let o = run(&["convert", &f, bad.to_str().unwrap(), "--element", "root/bad"]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains(codes::TABLE_SHAPE_SIZE), "{}", stderr(&o));
    assert!(!bad.exists());

    // A warning only: a scalar with ghost axes [2] under NONE (the reference writer's form).
    let mut w = UdfWriter::new("GHST").unwrap();
    let root = w.add_dataset("ROOT").unwrap();
    w.set_root(root);
    w.add(root, TableSpec::array("v", &[2], &[7u8, 9])).unwrap();
    let mut ghost = w.to_bytes().unwrap();
    let d = desc(&ghost, "root/v");
    let scalar = rasterpack_udf::parse::encode_type_info(Prim::U8, 0, Hint::None);
    ghost[d + 4..d + 6].copy_from_slice(&scalar.to_le_bytes());
    let g = write(&dir, "ghost.udf", &ghost);
    assert_eq!(code(&run(&["validate", &g])), 0);
    assert_eq!(code(&run(&["validate", "--strict", &g])), 1);
    let v = dir.join("v.npy");
    let o = run(&["convert", &g, v.to_str().unwrap(), "--element", "root/v"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(npy_f64(&v), vec![7.0, 9.0]);
    assert!(
        stderr(&o).contains("has findings (0 errors, 1 warning)"),
        "{}",
        stderr(&o)
    );

    // A clean file: no note.
    let c = write(&dir, "clean.udf", &clean);
    let out = dir.join("clean.npy");
    let o = run(&["convert", &c, out.to_str().unwrap(), "--element", "root/good"]);
    assert_eq!(code(&o), 0);
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
}

/// Issue 17 item 15: a text list of only empty strings as the reference's `build_string_array`
/// writes it (`[n, 0]`, no data bytes) is valid with a compatibility warning, invalid under
/// `--strict`, and converts as any text list does (its code units, one row per string): a
/// `uint8` `.npy` of shape `(3, 0)`, three empty strings.
#[test]
fn a_text_list_of_empty_strings_validates_with_a_warning_and_converts() {
    let dir = scratch("empty-strings");
    let mut w = UdfWriter::new("TXT").unwrap();
    let root = w.add_dataset("ROOT").unwrap();
    w.set_root(root);
    let list = TableSpec::text_list("l", &["", "", ""], rasterpack_udf::UdfEncoding::Utf8);
    w.add(root, list).unwrap();
    let mut b = w.to_bytes().unwrap();
    let d = desc(&b, "root/l");
    for field in [0x08, 0x0C, 0x10, 0x18] {
        // mem_start, mem_end, data_size and the packed y/z axes: what the reference writes
        b[d + field..d + field + 4].copy_from_slice(&0u32.to_le_bytes());
    }
    let path = write(&dir, "empty_strings.udf", &b);
    let o = run(&["validate", "--json", &path]);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stdout));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = &doc["files"][0]["findings"];
    assert_eq!(f.as_array().unwrap().len(), 1, "{f}");
    assert_eq!(f[0]["code"], codes::TEXT_EMPTY_STRINGS_NO_GHOST);
    assert_eq!(code(&run(&["validate", "--strict", &path])), 1);
    let npy = dir.join("l.npy");
    let o = run(&["convert", "--element", "root/l", &path, npy.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let bytes = std::fs::read(&npy).unwrap();
    let header = String::from_utf8_lossy(&bytes[10..bytes.len().min(128)]).into_owned();
    assert!(
        header.contains("'descr': '|u1'") && header.contains("'shape': (3, 0)"),
        "{header}"
    );
    assert_eq!(bytes.len(), 128, "no data bytes");
    std::fs::remove_dir_all(&dir).unwrap();
}
