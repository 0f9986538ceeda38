//! An array read from a FOLD file carries the index's file-level facts as its attributes
//! (`version`, `created_at_unix`, `metadata` without `chunk_hashes`/`manifest_hash`): what the
//! VDS writer turns into metadata of category `fold` and the Zarr writer keeps. A `metadata`
//! above 64 KiB of JSON is left out (`metadata_omitted`): its cost does not follow the array.

use rasterpack_common::{ArrayFile, ArrayRequest, Format, NdArray, WriteOptions};
use rasterpack_fold::{FoldFile, FoldFormat};
use serde_json::{json, Value};

fn file_with(metadata: Value) -> FoldFile {
    let mut a = NdArray::from_vec(vec![2, 3], vec![1f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    a.name = Some("grid".into());
    let mut out = Vec::new();
    FoldFormat
        .write_arrays(&[a], metadata.as_object().unwrap(), &WriteOptions::default(), &mut out)
        .unwrap();
    FoldFile::from_bytes(out).unwrap()
}

#[test]
fn reads_carry_the_index_metadata_without_its_hashes() {
    let f = file_with(json!({"model_type": "Sample", "tags": {"run": "a"}}));
    let req = ArrayRequest::for_element("nuclear_arrays/grid");
    let nd = f.read(&req).unwrap();
    let info = f.array_info(Some("nuclear_arrays/grid")).unwrap();
    for attrs in [&nd.attrs, &info.attrs] {
        assert_eq!(attrs["metadata"]["model_type"], "Sample", "{attrs:?}");
        assert_eq!(attrs["metadata"]["tags"], json!({"run": "a"}));
        assert_eq!(attrs["version"], "1.2.0");
        assert!(attrs["created_at_unix"].is_f64(), "{attrs:?}");
        let md = attrs["metadata"].as_object().unwrap();
        assert!(
            !md.contains_key("chunk_hashes") && !md.contains_key("manifest_hash"),
            "{md:?}"
        );
    }
    // The listing carries none (one copy per array of a file that may list thousands).
    assert!(f.arrays().unwrap()[0].attrs.is_empty());
}

#[test]
fn a_large_metadata_is_left_out() {
    let f = file_with(json!({"blob": "x".repeat(70 * 1024)}));
    let nd = f.read(&ArrayRequest::for_element("nuclear_arrays/grid")).unwrap();
    assert!(
        nd.attrs.get("metadata").is_none(),
        "{:?}",
        nd.attrs.keys().collect::<Vec<_>>()
    );
    assert!(nd.attrs["metadata_omitted"].as_str().unwrap().contains("bytes"));
    assert_eq!(nd.data.len(), 24);
}
