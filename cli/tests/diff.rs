//! `rasterpack diff`: exit codes and figures on pairs made to differ in one cell, in NaN
//! placement, in shape and in dtype; a GVRS element against its `.npy` copy; the memory bound on
//! the hostile corpus.

mod support;

use std::path::{Path, PathBuf};

use rasterpack_common::{npy, NdArray};
use serde_json::Value;
use support::{check, run, s, scratch};

fn save(dir: &Path, name: &str, a: &NdArray) -> PathBuf {
    let p = dir.join(name);
    let mut bytes = Vec::new();
    npy::write(&mut bytes, a).unwrap();
    std::fs::write(&p, bytes).unwrap();
    p
}

fn json_of(args: &[&str], code: i32) -> Value {
    let r = check(args, code);
    serde_json::from_str::<Value>(&r.stdout()).unwrap()["diff"].clone()
}

#[test]
fn diff_exit_codes_and_figures() {
    let dir = scratch("diff", "pairs");
    let base = [1.0f32, 2.0, f32::NAN, 4.0, 5.0, 6.0];
    let a = save(&dir, "a.npy", &NdArray::from_vec(vec![2, 3], base.to_vec()).unwrap());
    let same = save(&dir, "same.npy", &NdArray::from_vec(vec![2, 3], base.to_vec()).unwrap());
    let mut v = base.to_vec();
    v[4] = 5.25;
    let one = save(&dir, "one.npy", &NdArray::from_vec(vec![2, 3], v).unwrap());
    let mut v = base.to_vec();
    v.swap(1, 2);
    let nan = save(&dir, "nan.npy", &NdArray::from_vec(vec![2, 3], v).unwrap());
    let shape = save(
        &dir,
        "shape.npy",
        &NdArray::from_vec(vec![3, 2], base.to_vec()).unwrap(),
    );
    let wide: Vec<f64> = base.iter().map(|&x| x as f64).collect();
    let dtype = save(&dir, "dtype.npy", &NdArray::from_vec(vec![2, 3], wide).unwrap());

    // Equal, NaN == NaN.
    let d = json_of(&["diff", "--json", s(&a), s(&same)], 0);
    assert_eq!((d["equal"].as_bool(), d["differing"].as_u64()), (Some(true), Some(0)));
    // One cell: index [1, 1], |5 - 5.25| = 0.25, relative to B 0.25 / 5.25.
    let d = json_of(&["diff", "--json", s(&a), s(&one)], 1);
    assert_eq!(d["differing"], 1);
    assert_eq!(d["first_difference"], serde_json::json!([1, 1]));
    assert_eq!(d["max_abs_diff"].as_f64(), Some(0.25));
    assert_eq!(d["max_rel_diff"].as_f64(), Some(0.25 / 5.25));
    // Within tolerance (numpy.isclose: 0.25 <= 0.2 + 0.01 * 5.25 holds).
    check(&["diff", s(&a), s(&one), "--atol", "0.2", "--rtol", "0.01"], 0);
    check(&["diff", s(&a), s(&one), "--atol", "0.2"], 1);
    // NaN moved from [0, 2] to [0, 1]: two cells differ, the first at [0, 1].
    let d = json_of(&["diff", "--json", s(&a), s(&nan)], 1);
    assert_eq!(
        (d["differing"].as_u64(), d["first_difference"].clone()),
        (Some(2), serde_json::json!([0, 1]))
    );
    // Shape: no cell compared.
    let d = json_of(&["diff", "--json", s(&a), s(&shape)], 1);
    assert_eq!(
        (d["same_shape"].as_bool(), d["compared"].as_u64()),
        (Some(false), Some(0))
    );
    // dtype: every value equal, still not the same array.
    let d = json_of(&["diff", "--json", s(&a), s(&dtype)], 1);
    assert_eq!(
        (
            d["same_dtype"].as_bool(),
            d["compared"].as_u64(),
            d["differing"].as_u64()
        ),
        (Some(false), Some(6), Some(0))
    );
    // A missing file is exit 2, an unknown element too.
    check(&["diff", s(&a), s(&dir.join("none.npy"))], 2);
    check(&["diff", s(&a), s(&same), "--element-a", "nope"], 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_gvrs_element_equals_its_npy_copy_and_not_another_element() {
    let dir = scratch("diff", "gvrs");
    let gvrs = "../testdata/gvrs/crafted_compressed.gvrs";
    let arrays = run(&["stats", "--json", gvrs]).stdout();
    let doc: Value = serde_json::from_str(&arrays).unwrap();
    let names: Vec<String> = doc["files"][0]["stats"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["name"].as_str().map(str::to_string))
        .collect();
    assert!(!names.is_empty());
    for name in &names {
        let npy = dir.join(format!("{name}.npy"));
        check(&["convert", gvrs, s(&npy), "--element", name], 0);
        check(&["diff", gvrs, s(&npy), "--element-a", name], 0);
    }
    if names.len() > 1 {
        let first = dir.join(format!("{}.npy", names[0]));
        check(&["diff", gvrs, s(&first), "--element-a", &names[1]], 1);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn diff_stays_within_the_memory_bound_on_the_hostile_corpus() {
    let Some(dir) = rasterpack_common::testkit::corpus_dir("hostile") else {
        return;
    };
    // The top of hostile/ and hostile/more/ (huge directories, a 2^31-row grid of fill).
    let mut files: Vec<PathBuf> = [dir.clone(), dir.join("more")]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_none_or(|x| x != "md"))
        .collect();
    files.sort();
    assert!(files.len() >= 15);
    let fill = dir.join("more/gvrs_2147483647x10_declares_86GB.gvrs");
    assert!(files.contains(&fill), "{}", fill.display());
    for f in &files {
        // Each file against itself: both sides stream in step.
        let args = ["diff", s(f), s(f)];
        let r = run(&args);
        assert!(
            matches!(r.code(), Some(0..=3)),
            "{}: exit {:?} {}",
            f.display(),
            r.code(),
            r.stderr()
        );
        // Every file within the rule's 256 MiB, the UDF of 130,000 broken tables too (each
        // side once held ~137 MiB of table listing: 270 MiB; one fault kept per table).
        support::check_bound(&args, &r);
        assert!(r.elapsed.as_secs() < 60, "{}: {:?}", f.display(), r.elapsed);
    }
    // 330,000 NPZ members need more than half the working set: refused with the limit finding
    // (exit 1), not held twice.
    let zip = dir.join("more/fold_zip64_330000_empty_members.fold");
    let r = check(&["diff", s(&zip), s(&zip)], 1);
    assert!(r.stderr().contains("fold.limits.npz_directory"), "{}", r.stderr());
    // 21 billion cells of fill compared run against run, not cell by cell.
    let r = check(&["diff", "--json", s(&fill), s(&fill)], 0);
    let doc: Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(doc["diff"]["compared"], 2147483647u64 * 10, "{doc}");
    assert_eq!(doc["diff"]["equal"], true, "{doc}");
    assert!(r.elapsed.as_secs() < 10, "{:?}", r.elapsed);
}
