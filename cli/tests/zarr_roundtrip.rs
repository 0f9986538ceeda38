//! Round trips `X -> Zarr -> X` (issue 20) for every format rasterpack writes: the values come
//! back bit for bit, and the metadata the target holds comes back too, because the Zarr reader
//! hands a rasterpack-written store's `rasterpack` attribute (the source's name and metadata)
//! to the writer the way the source itself would. Each result is checked three ways:
//! - its values equal the source's (both read through rasterpack, dtype, shape and bytes);
//! - its `inspect --json` summary equals that of the direct conversion `X -> X` (the one path
//!   metadata takes from a source to a writer), apart from the fields a writer stamps anew
//!   (GVRS uuid and time, FOLD creation time);
//! - the fields the target holds equal the source's own (VOLP header, VDS axes and channel,
//!   GVRS element, UDF and FOLD names and attributes);
//!
//! and `validate --strict` passes on it.

mod support;

use std::path::{Path, PathBuf};

use rasterpack::{ArrayRequest, NdArray};
use serde_json::Value;
use support::{check, s, scratch};

fn testdata(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata").join(rel)
}

fn read(path: &Path, element: Option<&str>) -> NdArray {
    let f = rasterpack::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let req = ArrayRequest {
        element: element.map(str::to_string),
        ..ArrayRequest::default()
    };
    f.read(&req).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `files[0].summary` of `inspect --json`.
fn summary(path: &Path) -> Value {
    let r = check(&["inspect", "--json", s(path)], 0);
    let mut doc: Value = serde_json::from_str(&r.stdout()).unwrap();
    doc["files"][0]["summary"].take()
}

/// Drop the fields a writer stamps anew on every file, wherever they are: GVRS uuid and time,
/// FOLD creation time (and, for FOLD, the index length and file size, which follow the digits
/// of that time in the index).
fn without_stamps(mut v: Value, ext: &str) -> Value {
    fn strip(v: &mut Value, keys: &[&str]) {
        match v {
            Value::Object(o) => {
                for k in keys {
                    o.remove(*k);
                }
                o.values_mut().for_each(|v| strip(v, keys));
            }
            Value::Array(a) => a.iter_mut().for_each(|v| strip(v, keys)),
            _ => {}
        }
    }
    let mut keys = vec!["uuid", "time_modified_ms", "created_at_unix"];
    if ext == "fold" {
        keys.extend(["index_len", "file_size"]);
    }
    strip(&mut v, &keys);
    v
}

fn at<'a>(v: &'a Value, pointer: &str, what: &str) -> &'a Value {
    v.pointer(pointer).unwrap_or_else(|| {
        panic!(
            "{what}: no {pointer} in {}",
            v.to_string().chars().take(3000).collect::<String>()
        )
    })
}

struct Case {
    /// The source, in the target's own format.
    source: &'static str,
    /// The array converted (`--element`).
    element: Option<&'static str>,
    /// The element of that array in the converted file.
    out_element: Option<&'static str>,
    ext: &'static str,
    /// Flags of the direct `X -> X` conversion that keep it on the streaming path (FOLD ->
    /// FOLD is otherwise the source's own whole-file copy).
    direct_flags: &'static [&'static str],
    /// Summary fields the target holds, equal in the round trip's result and the source:
    /// (field in the result, field in the source).
    kept: &'static [(&'static str, &'static str)],
}

const CASES: &[Case] = &[
    Case {
        source: "volp/temperature_4x32x32_int16.volp",
        element: None,
        out_element: None,
        ext: "volp",
        direct_flags: &[],
        kept: &[
            ("/dtype", "/dtype"),
            ("/shape", "/shape"),
            ("/scale", "/scale"),
            ("/offset", "/offset"),
            ("/metadata", "/metadata"),
        ],
    },
    Case {
        source: "volp/cloud_2x8x8_float32.volp",
        element: None,
        out_element: None,
        ext: "volp",
        direct_flags: &[],
        kept: &[
            ("/dtype", "/dtype"),
            ("/shape", "/shape"),
            ("/scale", "/scale"),
            ("/offset", "/offset"),
            ("/metadata", "/metadata"),
        ],
    },
    Case {
        source: "gvrs/crafted_compressed.gvrs",
        element: Some("v"),
        out_element: None,
        ext: "gvrs",
        direct_flags: &[],
        // The GVRS writer names the element after the source's and keeps its fill, range,
        // unit and texts, and the grid's coordinates (`carry.rs`).
        kept: &[
            ("/rows", "/rows"),
            ("/cols", "/cols"),
            ("/elements/0/name", "/elements/0/name"),
            ("/elements/0/type", "/elements/0/type"),
            ("/elements/0/fill", "/elements/0/fill"),
            ("/elements/0/min", "/elements/0/min"),
            ("/elements/0/max", "/elements/0/max"),
            ("/elements/0/unit", "/elements/0/unit"),
            ("/elements/0/label", "/elements/0/label"),
            ("/elements/0/description", "/elements/0/description"),
            ("/elements/0/continuous", "/elements/0/continuous"),
            ("/coordinate_system", "/coordinate_system"),
            ("/raster_space", "/raster_space"),
        ],
    },
    Case {
        source: "gvrs/crafted_compressed.gvrs",
        element: Some("f"),
        out_element: None,
        ext: "gvrs",
        direct_flags: &[],
        kept: &[
            ("/rows", "/rows"),
            ("/cols", "/cols"),
            ("/elements/0/name", "/elements/1/name"),
            ("/elements/0/type", "/elements/1/type"),
            ("/elements/0/fill", "/elements/1/fill"),
            ("/elements/0/fill_bits", "/elements/1/fill_bits"),
            ("/elements/0/unit", "/elements/1/unit"),
            ("/elements/0/label", "/elements/1/label"),
            ("/coordinate_system", "/coordinate_system"),
            ("/raster_space", "/raster_space"),
        ],
    },
    Case {
        source: "vds/small_u8_rle_novalue.vds",
        element: None,
        out_element: None,
        ext: "vds",
        direct_flags: &[],
        // Axis names, units, sample counts and coordinate ranges; the channel's name, unit,
        // format, NoValue and code offset. (The VDS writer derives a U8 channel's value range
        // from its code mapping, 255 codes less the NoValue one, from any source.)
        kept: &[
            ("/axes", "/axes"),
            ("/dimensionality", "/dimensionality"),
            ("/channels/0/name", "/channels/0/name"),
            ("/channels/0/unit", "/channels/0/unit"),
            ("/channels/0/format", "/channels/0/format"),
            ("/channels/0/use_no_value", "/channels/0/use_no_value"),
            ("/channels/0/no_value", "/channels/0/no_value"),
            ("/channels/0/integer_offset", "/channels/0/integer_offset"),
        ],
    },
    Case {
        source: "vds/small_r32_zip.vds",
        element: None,
        out_element: None,
        ext: "vds",
        direct_flags: &[],
        // (The VDS writer takes an R32 channel's value range from the values written, from
        // any source.)
        kept: &[
            ("/axes", "/axes"),
            ("/dimensionality", "/dimensionality"),
            ("/channels/0/name", "/channels/0/name"),
            ("/channels/0/unit", "/channels/0/unit"),
            ("/channels/0/format", "/channels/0/format"),
            ("/channels/0/use_no_value", "/channels/0/use_no_value"),
        ],
    },
    Case {
        source: "udf/sample.udf",
        element: Some("root/child/temps"),
        out_element: None,
        ext: "udf",
        direct_flags: &[],
        kept: &[],
    },
    Case {
        source: "fold/sample.fold",
        element: Some("nuclear_arrays/grid"),
        out_element: None,
        ext: "fold",
        direct_flags: &["--box", ":,:"],
        kept: &[],
    },
];

fn round_trip(dir: &Path, k: usize, case: &Case) {
    let src = testdata(case.source);
    let what = format!("{} ({:?}) -> zarr -> {}", case.source, case.element, case.ext);
    let direct = dir.join(format!("c{k}.direct.{}", case.ext));
    let store = dir.join(format!("c{k}.zarr"));
    let back = dir.join(format!("c{k}.back.{}", case.ext));
    let with_element = |mut a: Vec<&'static str>| {
        if let Some(e) = case.element {
            a.extend(["--element", e]);
        }
        a
    };
    let mut a = vec!["convert", s(&src), s(&direct)];
    a.extend(with_element(vec![]));
    a.extend_from_slice(case.direct_flags);
    check(&a, 0);
    let mut a = vec!["convert", s(&src), s(&store)];
    a.extend(with_element(vec![]));
    check(&a, 0);
    check(&["convert", s(&store), s(&back)], 0);

    // Values: bit for bit.
    let want = read(&src, case.element);
    let got = read(&back, case.out_element);
    assert_eq!((got.dtype, &got.shape), (want.dtype, &want.shape), "{what}");
    assert!(got.data == want.data, "{what}: values differ");

    // Metadata: what the direct conversion carries, and the source's own fields.
    let (direct_sum, back_sum) = (summary(&direct), summary(&back));
    assert_eq!(
        without_stamps(back_sum.clone(), case.ext),
        without_stamps(direct_sum, case.ext),
        "{what}: the round trip's inspect differs from the direct conversion's"
    );
    if !case.kept.is_empty() {
        let source_sum = summary(&src);
        for (p, q) in case.kept {
            assert_eq!(at(&back_sum, p, &what), at(&source_sum, q, &what), "{what}: {p}");
        }
    }
    check(&["validate", "--strict", s(&back)], 0);
}

#[test]
fn every_writable_format_round_trips_through_zarr() {
    let dir = scratch("zarr-rt", "formats");
    for (k, case) in CASES.iter().enumerate() {
        round_trip(&dir, k, case);
    }
}

/// `.npy` holds no metadata: its values and dtype, shape and order round-trip (float, integer
/// and a 4-D array).
#[test]
fn npy_round_trips_through_zarr() {
    let dir = scratch("zarr-rt", "npy");
    for (k, (file, flags)) in [
        ("volp/cloud_2x8x8_float32.volp", &[][..]),
        ("volp/temperature_4x32x32_int16.volp", &[]),
        ("vds/small_4d_r32_none_lod1.vds", &[]),
        ("fold/sample.fold", &["--element", "nuclear_arrays/counts"]),
    ]
    .into_iter()
    .enumerate()
    {
        let npy = dir.join(format!("n{k}.npy"));
        let src = testdata(file);
        let mut a = vec!["convert", s(&src), s(&npy)];
        a.extend_from_slice(flags);
        check(&a, 0);
        let store = dir.join(format!("n{k}.zarr"));
        let back = dir.join(format!("n{k}.back.npy"));
        check(&["convert", s(&npy), s(&store)], 0);
        check(&["convert", s(&store), s(&back)], 0);
        assert!(
            std::fs::read(&back).unwrap() == std::fs::read(&npy).unwrap(),
            "{file}: .npy -> zarr -> .npy differs"
        );
        check(&["validate", "--strict", s(&back)], 0);
    }
}

/// The carried metadata is the source's only while the array is what rasterpack wrote: a store
/// whose data type was changed since (here by hand) is read as any other store, its `rasterpack`
/// attribute not handed to the writer.
#[test]
fn metadata_of_an_edited_store_is_not_carried() {
    let dir = scratch("zarr-rt", "edited");
    let store = dir.join("t.zarr");
    check(
        &[
            "convert",
            s(&testdata("volp/temperature_4x32x32_int16.volp")),
            s(&store),
        ],
        0,
    );
    let f = rasterpack::open(&store).unwrap();
    let info = &f.arrays().unwrap()[0];
    assert_eq!(info.attrs["scale"], 0.01, "{:?}", info.attrs);
    assert!(info.attrs.get("zarr_format").is_none(), "{:?}", info.attrs);

    let meta_path = store.join("zarr.json");
    let mut meta: Value = serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    meta["attributes"]["rasterpack"]["dtype"] = Value::from("float32");
    std::fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();
    let f = rasterpack::open(&store).unwrap();
    let info = &f.arrays().unwrap()[0];
    assert_eq!(info.attrs["source_format"], "zarr", "{:?}", info.attrs);
    assert!(info.attrs.get("scale").is_none());
    let out = dir.join("t.volp");
    check(&["convert", s(&store), s(&out)], 0);
    let header = summary(&out);
    assert!(header.get("scale").is_none_or(|s| s == 1.0), "{header}");
    assert!(header.pointer("/metadata/bbox").is_none(), "{header}");
}

/// GVRS files Gridfour wrote (the corpus) keep, through `GVRS -> Zarr -> GVRS` and `GVRS ->
/// GVRS`, the metadata a GVRS file holds: each element's fill value, range, unit, label,
/// description and continuity, and the grid's coordinate system (x0, y0, x1, y1, cell sizes and
/// both transforms) and raster space, equal field for field in `inspect --json`; the values
/// come back bit for bit and `validate --strict` passes. (An integer-coded float is read as
/// float32 values and written as a Float element: its scale, offset and integer range are not
/// kept, its fill, range and texts are.)
#[test]
fn gvrs_corpus_keeps_fill_units_and_coordinates() {
    let Some(corpus) = rasterpack_common::testkit::corpus_dir("gvrs") else {
        return;
    };
    let dir = scratch("zarr-rt", "gvrs-corpus");
    let element_fields = [
        "name",
        "fill",
        "fill_bits",
        "min",
        "max",
        "unit",
        "label",
        "description",
        "continuous",
    ];
    for (k, (file, element, index)) in [
        ("int_plain.gvrs", None, 0),
        ("short_oddtile_checksum.gvrs", None, 0),
        ("float_cartesian.gvrs", None, 0),
        ("icf_geographic.gvrs", None, 0),
        ("empty_all_fill.gvrs", None, 0),
        ("two_elements.gvrs", Some("band_b"), 1usize),
    ]
    .into_iter()
    .enumerate()
    {
        let src = corpus.join(file);
        let source_sum = summary(&src);
        let name = at(&source_sum, &format!("/elements/{index}/name"), file).clone();
        if let Some(e) = element {
            assert_eq!(name, e, "{file}: the element picked");
        }
        let store = dir.join(format!("g{k}.zarr"));
        let back = dir.join(format!("g{k}.back.gvrs"));
        let direct = dir.join(format!("g{k}.direct.gvrs"));
        let pick: Vec<&str> = element.map(|e| vec!["--element", e]).unwrap_or_default();
        check(&[&["convert", s(&src), s(&store)][..], &pick].concat(), 0);
        check(&["convert", s(&store), s(&back)], 0);
        check(&[&["convert", s(&src), s(&direct)][..], &pick].concat(), 0);
        let want = read(&src, element);
        for out in [&back, &direct] {
            let what = format!("{file} -> {}", out.display());
            let got = read(out, None);
            assert_eq!((got.dtype, &got.shape), (want.dtype, &want.shape), "{what}");
            assert!(got.data == want.data, "{what}: values differ");
            let sum = summary(out);
            for f in element_fields {
                assert_eq!(
                    sum.pointer(&format!("/elements/0/{f}")),
                    source_sum.pointer(&format!("/elements/{index}/{f}")),
                    "{what}: element {f}"
                );
            }
            for p in ["/coordinate_system", "/raster_space", "/rows", "/cols"] {
                assert_eq!(at(&sum, p, &what), at(&source_sum, p, &what), "{what}: {p}");
            }
            check(&["validate", "--strict", s(out)], 0);
        }
    }
}
