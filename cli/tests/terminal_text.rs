//! Terminal text of issue 22: `inspect`'s last line wraps at word boundaries to 80 columns,
//! floats print at the array's own precision (f32 as f32), the GVRS tile-encoding table has
//! separate count and byte columns, and the UDF "choose an element" hint lists only the tables
//! that convert.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const EXE: &str = env!("CARGO_BIN_EXE_rasterpack");

fn run(args: &[&str]) -> Output {
    Command::new(EXE)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run rasterpack")
}

fn testdata(rel: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    root.join("testdata").join(rel).to_str().unwrap().to_string()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rasterpack-text-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The words of a table's text: cells split at whitespace and column rules.
fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| c.is_whitespace() || "│┆,".contains(c))
        .filter(|w| !w.is_empty())
        .collect()
}

/// The closing lines of one `inspect` report (after the last table), as printed.
fn closing_lines(report: &str) -> Vec<&str> {
    let lines: Vec<&str> = report.lines().collect();
    let last_table = lines.iter().rposition(|l| l.starts_with('└')).unwrap();
    lines[last_table + 1..]
        .iter()
        .copied()
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn inspect_last_line_wraps_at_words_within_80_columns() {
    // A path long enough that the closing line cannot fit on one 80-column line (but not
    // longer than 80 itself: a word that long keeps a line of its own, whole).
    let dir = scratch("wrap").join("some-folder");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("temperature_4x32x32_int16.volp");
    std::fs::copy(testdata("volp/temperature_4x32x32_int16.volp"), &file).unwrap();
    let file = file.to_str().unwrap();
    for path in [file, testdata("volp/cloud_2x8x8_float32.volp").as_str()] {
        let o = run(&["inspect", path]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let text = stdout(&o);
        let closing = closing_lines(&text);
        assert!(closing.len() >= 2, "the closing text wraps: {closing:?}");
        for line in &closing {
            assert!(line.chars().count() <= 80, "wider than 80: {line:?}");
        }
        // Broken only between words: the words are those of the one-line text, in order,
        // the path whole.
        let joined = closing.join(" ");
        assert!(joined.starts_with(&format!("{path}: structure checked")), "{joined}");
        assert!(
            joined.ends_with("(inspect checks the structure only; `rasterpack validate` checks everything)"),
            "{joined}"
        );
    }
}

#[test]
fn floats_print_at_the_arrays_own_precision() {
    // float32 values: the shortest text that reads back as the same f32.
    let cloud = testdata("volp/cloud_2x8x8_float32.volp");
    let o = run(&["inspect", &cloud]);
    let text = stdout(&o);
    let w = words(&text);
    assert!(w.contains(&"0.9990717"), "{text}");
    assert!(!text.contains("0.9990717172622681"), "f32 printed as f64: {text}");
    assert_eq!("0.9990717".parse::<f32>().unwrap(), 0.9990717172622681f64 as f32);

    let o = run(&["stats", &cloud]);
    let text = stdout(&o);
    assert!(words(&text).contains(&"0.9990717"), "{text}");
    // The JSON keeps every figure at f64, as numpy computes them.
    let o = run(&["stats", "--json", &cloud]);
    assert!(stdout(&o).contains("0.9990717172622681"), "{}", stdout(&o));

    // float64 values stay f64: physical VOLP values are computed in f64 (ERRATA), so their
    // mean is an f64 figure.
    let temp = testdata("volp/temperature_4x32x32_int16.volp");
    let text = stdout(&run(&["inspect", &temp]));
    assert!(words(&text).contains(&"245.76275146484375"), "{text}");

    // GVRS float elements (min/max/fill are f32 in the header) and UDF float32 tables
    // (their previews): no f32 value printed with an f64's digits.
    for file in [
        "gvrs/crafted_all_types.gvrs",
        "gvrs/crafted_compressed.gvrs",
        "udf/sample.udf",
    ] {
        let text = stdout(&run(&["inspect", &testdata(file)]));
        for w in words(&text) {
            let w = w.trim_matches(|c: char| "[]".contains(c));
            if let Ok(v) = w.parse::<f64>() {
                let digits = w.trim_start_matches('-').chars().filter(char::is_ascii_digit).count();
                assert!(
                    digits < 12 || (v as f32) as f64 != v,
                    "{file}: an f32 printed with f64 digits: {w}\n{text}"
                );
            }
        }
    }
}

#[test]
fn diff_prints_f32_differences_as_f32_and_f64_as_f64() {
    use rasterpack_common::{npy, NdArray};
    let dir = scratch("diff");
    let write = |name: &str, a: &NdArray| {
        let mut bytes = Vec::new();
        npy::write(&mut bytes, a).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_str().unwrap().to_string()
    };
    let a32 = write("a32.npy", &NdArray::from_vec(vec![3], vec![1.0f32, 2.0, 3.0]).unwrap());
    let b32 = write("b32.npy", &NdArray::from_vec(vec![3], vec![1.0f32, 2.1, 3.0]).unwrap());
    let o = run(&["diff", &a32, &b32]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = stdout(&o);
    // 2.1f32 - 2.0f32 = 0.099999905 as an f32 (0.09999990463256836 as f64).
    let d = 2.1f32 as f64 - 2.0;
    assert!(text.contains(&format!("max abs difference {:?}", d as f32)), "{text}");
    assert!(!text.contains(&format!("{d:?}")), "{text}");

    let a64 = write("a64.npy", &NdArray::from_vec(vec![3], vec![1.0f64, 2.0, 3.0]).unwrap());
    let b64 = write("b64.npy", &NdArray::from_vec(vec![3], vec![1.0f64, 2.1, 3.0]).unwrap());
    let text = stdout(&run(&["diff", &a64, &b64]));
    assert!(
        text.contains(&format!("max abs difference {:?}", 2.1f64 - 2.0)),
        "{text}"
    );
}

#[test]
fn gvrs_tile_encodings_have_count_and_byte_columns() {
    let o = run(&["inspect", &testdata("gvrs/crafted_compressed.gvrs")]);
    let text = stdout(&o);
    let at = text.find("Tile encodings").expect(&text);
    let table: Vec<&str> = text[at..]
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty() && !l.starts_with(|c: char| c.is_alphabetic()))
        .collect();
    let header = words(table[1]);
    assert_eq!(
        header,
        [
            "element",
            "encoding",
            "tiles",
            "stored",
            "bytes",
            "uncompressed",
            "bytes",
            "ratio"
        ],
        "{text}"
    );
    // One row per element and encoding; every count and byte figure is a number of its own.
    let rows: Vec<Vec<&str>> = table
        .iter()
        .filter(|l| l.starts_with('│') && !l.contains("element"))
        .map(|l| words(l))
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert_eq!(
        rows[0],
        [
            "v",
            "codec[0]=GvrsHuffman/predictor=1(Differencing)",
            "1",
            "22",
            "256",
            "11.64"
        ],
        "{text}"
    );
    assert_eq!(
        rows[1],
        ["f", "codec[2]=GvrsFloat", "1", "143", "256", "1.79"],
        "{text}"
    );
}

#[test]
fn udf_hint_lists_only_tables_that_convert() {
    let src = testdata("udf/sample.udf");
    let dir = scratch("udf");
    let out = dir.join("x.npy");
    let o = run(&["convert", &src, out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    let list = err
        .split("DATASET_PATH/TABLE: ")
        .nth(1)
        .and_then(|rest| rest.split(" [").next())
        .expect(&err);
    let listed: Vec<&str> = list.split(", ").collect();
    // sample.udf's root/meta is a text (JSON) table: no array dtype, it does not convert.
    assert!(!listed.contains(&"root/meta"), "{err}");
    let o = run(&["convert", &src, out.to_str().unwrap(), "--element", "root/meta"]);
    assert_ne!(o.status.code(), Some(0), "root/meta converts after all: {}", stderr(&o));
    // Every table listed converts.
    assert_eq!(listed.len(), 8, "{err}");
    for table in &listed {
        let o = run(&["convert", "--force", &src, out.to_str().unwrap(), "--element", table]);
        assert_eq!(o.status.code(), Some(0), "{table}: {}", stderr(&o));
    }
    // A name the file does not have gets the same list.
    let o = run(&["convert", "--force", &src, out.to_str().unwrap(), "--element", "nope"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("root/grid") && !stderr(&o).contains("root/meta"),
        "{}",
        stderr(&o)
    );
}

/// A UDF float32 table's preview prints its values as f32 (corpus/udf/u01_primitives.udf holds
/// -0.00325f32).
#[test]
fn udf_f32_previews_print_as_f32() {
    let Some(dir) = rasterpack_common::testkit::corpus_dir("udf") else {
        return;
    };
    let file = dir.join("u01_primitives.udf");
    let text = stdout(&run(&["inspect", file.to_str().unwrap()]));
    assert!(text.contains("-0.00325]"), "{text}");
    assert!(!text.contains("-0.0032500000670552254"), "{text}");
}
