//! Every file any rasterpack writer produces passes `validate` with strict semantics (no error,
//! no warning, nothing unsupported) and reads back identically (issue 11, item 8).
//!
//! Properties over random inputs, names and values included: arrays of every dtype and rank
//! through each format's `Format::write_array` (npy, VOLP, GVRS, UDF, FOLD, from the CLI's own
//! registry), and the writer APIs where names and values matter (FOLD chunk names, ctypes,
//! JSON chunks, metadata and NPZ member names; UDF table names, texts and JSON; GVRS element
//! names and metadata records). A writer may refuse an input, but only with a usage error, and
//! never an input its format documents as supported. Cases are few and small so the suite runs
//! in seconds on a 2-core CI machine; `PROPTEST_CASES` raises them.

use proptest::prelude::*;
use proptest::test_runner::Config;
use rasterpack_common::{ArrayRequest, DType, ErrorKind, Format, Input, NdArray, ValidateOptions, WriteOptions};
use serde_json::{Map, Value};

fn config(cases: u32) -> Config {
    Config {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(cases),
        failure_persistence: None,
        ..Config::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Generators

/// Characters writers get wrong: separators, quotes, escapes, controls, NUL, non-ASCII, astral,
/// the replacement character, noncharacters.
fn tricky_char() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => prop::char::range('a', 'z'),
        2 => prop::sample::select(vec![
            '/', '\\', '"', '\'', '[', ']', ',', ':', ' ', '.', '%', '\0', '\u{1}', '\n', '\t', '\u{7f}',
            '\u{80}', '\u{e9}', '\u{2028}', '\u{fffd}', '\u{ffff}', '\u{6e29}', '\u{1F600}', '\u{10ffff}',
        ]),
        1 => any::<char>(),
    ]
}

fn text(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(tricky_char(), 0..=max).prop_map(|v| v.into_iter().collect())
}

const DTYPES: [DType; 14] = [
    DType::Bool,
    DType::U8,
    DType::I8,
    DType::U16,
    DType::I16,
    DType::U32,
    DType::I32,
    DType::U64,
    DType::I64,
    DType::F32,
    DType::F64,
    DType::F16,
    DType::C64,
    DType::C128,
];

/// The dtypes UDF has a primitive for (its spec ends at f64: no float16, no complex).
fn udf_holds(d: DType) -> bool {
    !matches!(d, DType::F16 | DType::C64 | DType::C128)
}

/// An array of any dtype and rank 0..=4 with at most ~60 elements and any bit patterns
/// (NaN payloads, -0.0, infinities included). Bools hold 0 or 1.
fn ndarray() -> impl Strategy<Value = NdArray> {
    ndarray_in(DTYPES.to_vec(), 0..=4, 0)
}

/// An array of one of `dtypes`, of a rank in `ranks`, each axis `min_axis..=4` long.
fn ndarray_in(
    dtypes: Vec<DType>,
    ranks: std::ops::RangeInclusive<usize>,
    min_axis: u64,
) -> impl Strategy<Value = NdArray> {
    (prop::sample::select(dtypes), prop::collection::vec(min_axis..=4, ranks))
        .prop_flat_map(|(dtype, shape)| {
            let n: u64 = shape.iter().product();
            let bytes = n as usize * dtype.size();
            (Just(dtype), Just(shape), prop::collection::vec(any::<u8>(), bytes))
        })
        .prop_map(|(dtype, shape, mut data)| {
            if dtype == DType::Bool {
                data.iter_mut().for_each(|b| *b &= 1);
            }
            NdArray::new(dtype, shape, data).unwrap()
        })
}

/// Arrays of any kind, and arrays shaped for the formats with narrow domains (VOLP 3-D, GVRS
/// 2-D), so every writer sees inputs it must accept in every case.
fn arrays() -> impl Strategy<Value = [NdArray; 3]> {
    (
        ndarray(),
        ndarray_in(
            vec![DType::U8, DType::I16, DType::I32, DType::F32, DType::F64],
            3..=3,
            1,
        ),
        ndarray_in(vec![DType::I32, DType::I16, DType::F32], 2..=2, 1),
    )
        .prop_map(|(a, b, c)| [a, b, c])
}

/// JSON values serde can hold (finite numbers), nested a little.
fn serde_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        text(8).prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((text(6), inner), 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Array attributes, with the keys formats give meaning to.
fn attrs() -> impl Strategy<Value = Map<String, Value>> {
    let key = prop_oneof![
        prop::sample::select(vec![
            "scale",
            "offset",
            "bbox",
            "levels",
            "variable",
            "valid_time",
            "units"
        ])
        .prop_map(String::from),
        text(6),
    ];
    prop::collection::vec((key, serde_value()), 0..4).prop_map(|m| m.into_iter().collect())
}

// ---------------------------------------------------------------------------------------------
// Checks

fn strictly_valid(fmt: &dyn Format, bytes: &[u8], what: &str) -> Input {
    let input = Input::from_bytes(format!("written.{}", fmt.name()), bytes.to_vec());
    assert!(
        fmt.detect(&bytes[..bytes.len().min(64)]),
        "{what}: {} does not detect its own output",
        fmt.name()
    );
    let r = fmt.validate(&input, &ValidateOptions::default());
    assert!(
        r.is_valid(true) && !r.unsupported,
        "{what}: {} writes a file its own strict validation rejects: {:?}",
        fmt.name(),
        r.findings
    );
    input
}

/// Inputs a format documents it can store (a refusal of one of these is a bug).
fn supported(fmt: &str, a: &NdArray, compress: Option<&str>) -> bool {
    let no_empty_axis = !a.shape.contains(&0);
    match fmt {
        "npy" => true,
        "npz" => compress.is_none_or(|c| ["none", "deflate"].contains(&c)),
        "udf" => udf_holds(a.dtype),
        "fold" => compress.is_none_or(|c| ["zstd", "none", "zstd+rs16", "none+rs64", "zstd+rs32"].contains(&c)),
        "volp" => {
            a.shape.len() == 3
                && no_empty_axis
                && [DType::U8, DType::I16, DType::I32, DType::F32, DType::F64].contains(&a.dtype)
                && ["scale", "offset"]
                    .iter()
                    .all(|k| a.attrs.get(*k).is_none_or(|v| v.is_number()))
        }
        "gvrs" => a.shape.len() == 2 && no_empty_axis && [DType::I32, DType::I16, DType::F32].contains(&a.dtype),
        "vds" => {
            (1..=4).contains(&a.shape.len())
                && no_empty_axis
                && [
                    DType::U8,
                    DType::U16,
                    DType::U32,
                    DType::U64,
                    DType::F32,
                    DType::F64,
                    DType::Bool,
                ]
                .contains(&a.dtype)
        }
        _ => false,
    }
}

/// The compression options each writer offers (`None` = its default).
fn compress_choices(fmt: &str) -> &'static [Option<&'static str>] {
    match fmt {
        "fold" => &[
            None,
            Some("none"),
            Some("zstd+rs16"),
            Some("none+rs64"),
            Some("zstd+rs32"),
        ],
        "gvrs" => &[
            None,
            Some("none"),
            Some("deflate"),
            Some("huffman"),
            Some("float"),
            Some("lsop"),
        ],
        "volp" => &[None, Some("zstd:1"), Some("zstd:19")],
        "npz" => &[None, Some("none"), Some("deflate")],
        "vds" => &[None, Some("none"), Some("rle"), Some("zip")],
        _ => &[None],
    }
}

fn write_array_round_trip(fmt: &dyn Format, array: &NdArray, compress: Option<&str>, tile: Option<(u32, u32)>) {
    let opts = WriteOptions {
        compress: compress.map(String::from),
        tile,
        ..Default::default()
    };
    let what = format!(
        "{} {:?} {:?} name {:?} compress {compress:?} tile {tile:?}",
        array.dtype.name(),
        array.shape,
        array.attrs,
        array.name
    );
    let mut out = Vec::new();
    if let Err(e) = fmt.write_array(array, &opts, &mut out) {
        assert_eq!(e.kind, ErrorKind::Usage, "{what}: {} refused with {e}", fmt.name());
        assert!(
            !supported(fmt.name(), array, compress),
            "{what}: {} refused a supported array: {e}",
            fmt.name()
        );
        return;
    }
    let input = strictly_valid(fmt, &out, &what);
    let back = fmt
        .read_array(&input, &ArrayRequest::default())
        .unwrap_or_else(|e| panic!("{what}: {} cannot read its own file: {e}", fmt.name()));
    // UDF has no bool primitive: the writer stores u8 (tagged "bool" in type_name, which the
    // reader does not turn back into bool). Every other dtype is kept.
    // VDS reads 1-bit channels as uint8 0/1, and holds a 1-D array as one trace of a 2-D
    // volume (OpenVDS cannot open 1-D layouts).
    let dtype = match (fmt.name(), array.dtype) {
        ("udf" | "vds", DType::Bool) => DType::U8,
        (_, d) => d,
    };
    let shape = match (fmt.name(), &array.shape[..]) {
        ("vds", [n]) => vec![1, *n],
        (_, s) => s.to_vec(),
    };
    assert_eq!(back.dtype, dtype, "{what}: {}", fmt.name());
    assert_eq!(back.shape, shape, "{what}: {}", fmt.name());
    assert!(back.data == array.data, "{what}: {} values differ", fmt.name());
    match fmt.name() {
        "fold" => {
            let kept = array
                .name
                .clone()
                .filter(|n| !n.is_empty() && n.len() <= 200 && !n.contains(['/', '\0']));
            assert_eq!(back.name, Some(kept.unwrap_or_else(|| "arr_0".into())), "{what}");
        }
        // One member, named after the array (unnamed: `arr_0`, as np.savez names it).
        "npz" => {
            let member = rasterpack::fold::npz::member_name(array.name.as_deref(), 0);
            assert_eq!(back.name, Some(member), "{what}");
        }
        "volp" => {
            for k in ["bbox", "levels", "valid_time"] {
                assert_eq!(back.attrs.get(k), array.attrs.get(k), "{what}: VOLP attr {k}");
            }
            for k in ["scale", "offset"] {
                let want = array
                    .attrs
                    .get(k)
                    .and_then(Value::as_f64)
                    .unwrap_or(if k == "scale" { 1.0 } else { 0.0 });
                let got = back.attrs.get(k).and_then(Value::as_f64);
                assert_eq!(got.map(f64::to_bits), Some(want.to_bits()), "{what}: VOLP {k}");
            }
        }
        _ => {}
    }
}

fn writers() -> Vec<&'static dyn Format> {
    let all = rasterpack::formats().iter().copied();
    let writes: Vec<&'static dyn Format> = all
        .filter(|f| {
            let probe = NdArray::new(DType::F32, vec![1, 1, 1], vec![0; 4]).unwrap();
            !matches!(f.write_array(&probe, &WriteOptions::default(), &mut Vec::new()), Err(e) if e.message.contains("cannot write"))
        })
        .collect();
    let names: Vec<&str> = writes.iter().map(|f| f.name()).collect();
    assert_eq!(
        names,
        ["npy", "volp", "gvrs", "udf", "fold", "npz", "vds"],
        "the writers this test covers"
    );
    writes
}

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn every_writer_writes_what_it_validates_and_reads_back(
        arrays in arrays(),
        name in prop::option::of(text(10)),
        attrs in attrs(),
        pick in any::<prop::sample::Index>(),
        tile in (1u32..=5, 1u32..=5),
    ) {
        for mut array in arrays {
            array.name = name.clone();
            array.attrs = attrs.clone();
            for fmt in writers() {
                let compress = *pick.get(compress_choices(fmt.name()));
                let tile = (fmt.name() == "gvrs").then(|| {
                    let (r, c) = (array.shape.first().copied().unwrap_or(1), array.shape.get(1).copied().unwrap_or(1));
                    (tile.0.min(r.max(1) as u32), tile.1.min(c.max(1) as u32))
                });
                write_array_round_trip(fmt, &array, compress, tile);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// FOLD: chunk names, ctypes, JSON chunks, metadata, NPZ member names, ECC.

mod fold {
    use super::*;
    use rasterpack_fold::pjson::{self, JStr, Value as J};
    use rasterpack_fold::{analyze, AnalyzeOptions, ChunkOptions, Compression, Content, FoldBuilder, FoldFormat};

    /// JSON values as Python holds them: ints of any size, any float (NaN, infinities, -0.0),
    /// strings as UTF-16 (sometimes with a lone surrogate), objects (sometimes with a repeated
    /// key).
    fn pjson_value() -> impl Strategy<Value = J> {
        let string = prop_oneof![
            6 => text(8).prop_map(|s| J::Str(JStr::new(&s))),
            1 => (text(4), 0xD800u16..=0xDFFF).prop_map(|(s, lone)| {
                let mut u: Vec<u16> = s.encode_utf16().collect();
                u.push(lone);
                J::Str(JStr(u))
            }),
        ];
        let leaf = prop_oneof![
            Just(J::Null),
            any::<bool>().prop_map(J::Bool),
            any::<i128>().prop_map(J::int),
            "[1-9][0-9]{20,40}".prop_map(J::Int),
            any::<u64>().prop_map(|b| J::Float(f64::from_bits(b))),
            prop::sample::select(vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 1e-7, 1e16, 0.1])
                .prop_map(J::Float),
            string,
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(J::Array),
                prop::collection::vec((text(5), inner), 0..4)
                    .prop_map(|m| J::Object(m.into_iter().map(|(k, v)| (JStr::new(&k), v)).collect())),
            ]
        })
    }

    #[derive(Debug, Clone)]
    enum Chunk {
        Json(J),
        Npz(Vec<(String, NdArray)>),
        Opaque(String, Vec<u8>),
    }

    fn chunk() -> impl Strategy<Value = Chunk> {
        let ctype = prop::collection::vec(0u8..=127, 4)
            .prop_map(|b| b.into_iter().map(char::from).collect::<String>())
            .prop_filter("JSON and NPZ0 payloads are checked", |c| c != "JSON" && c != "NPZ0");
        prop_oneof![
            pjson_value().prop_map(Chunk::Json),
            prop::collection::vec((text(8), ndarray()), 0..4).prop_map(Chunk::Npz),
            (ctype, prop::collection::vec(any::<u8>(), 0..600)).prop_map(|(c, p)| Chunk::Opaque(c, p)),
        ]
    }

    fn options() -> impl Strategy<Value = ChunkOptions> {
        (
            prop_oneof![Just(Compression::None), Just(Compression::Zstd(3))],
            prop::option::of(prop::sample::select(vec![16u8, 32, 64, 2])),
        )
            .prop_map(|(compression, ecc)| ChunkOptions { compression, ecc })
    }

    fn same(a: &J, b: &J) -> bool {
        pjson::dumps(a, false, pjson::Ascii::Escape) == pjson::dumps(b, false, pjson::Ascii::Escape)
    }

    /// Does `v` hold something the writer must refuse (lone surrogate, repeated key)?
    fn unwritable(v: &J) -> bool {
        match v {
            J::Str(s) => s.as_string().is_none(),
            J::Array(items) => items.iter().any(unwritable),
            J::Object(m) => {
                let mut keys: Vec<&JStr> = m.iter().map(|(k, _)| k).collect();
                keys.sort_by(|a, b| a.0.cmp(&b.0));
                keys.windows(2).any(|w| w[0] == w[1]) || m.iter().any(|(k, v)| k.as_string().is_none() || unwritable(v))
            }
            _ => false,
        }
    }

    proptest! {
        #![proptest_config(config(64))]

        #[test]
        fn fold_builder_round_trips_names_and_values(
            chunks in prop::collection::vec((text(10), chunk(), options()), 0..4),
            metadata in prop::collection::vec((text(8), pjson_value()), 0..4),
        ) {
            let mut b = FoldBuilder::new();
            let mut kept_meta: Vec<(String, J)> = Vec::new();
            for (k, v) in metadata {
                let r = b.metadata(&k, v.clone());
                let reserved = k == "chunk_hashes" || k == "manifest_hash";
                prop_assert_eq!(r.is_err(), reserved || unwritable(&v), "metadata {:?}: {:?}", k, r);
                if r.is_ok() {
                    kept_meta.retain(|(o, _)| *o != k);
                    kept_meta.push((k, v));
                }
            }
            let mut kept: Vec<(String, Chunk, ChunkOptions)> = Vec::new();
            for (name, c, opts) in chunks {
                let dup = kept.iter().any(|(n, _, _)| *n == name);
                let r = match &c {
                    Chunk::Json(v) => b.add_json(&name, v, opts),
                    Chunk::Npz(arrays) => {
                        let refs: Vec<(&str, &NdArray)> = arrays.iter().map(|(n, a)| (n.as_str(), a)).collect();
                        b.add_npz(&name, &refs, opts)
                    }
                    Chunk::Opaque(ctype, payload) => b.add_chunk(&name, ctype, payload, opts),
                };
                let must_refuse = dup
                    || match &c {
                        Chunk::Json(v) => unwritable(v),
                        Chunk::Npz(arrays) => arrays.iter().enumerate().any(|(i, (n, _))| {
                            n.is_empty() || n.len() > 200 || n.contains('\0') || arrays[..i].iter().any(|(m, _)| m == n)
                        }),
                        Chunk::Opaque(..) => false,
                    };
                prop_assert_eq!(r.is_err(), must_refuse, "chunk {:?} {:?}: {:?}", name, c, r);
                if let Err(e) = r {
                    prop_assert_eq!(e.kind, ErrorKind::Usage);
                } else {
                    kept.push((name, c, opts));
                }
            }
            let bytes = b.to_bytes().unwrap();
            let input = strictly_valid(&FoldFormat, &bytes, "FoldBuilder");
            let a = analyze(&input, &AnalyzeOptions { content: true, keep_payload: true, ..Default::default() }).unwrap();
            prop_assert_eq!(a.manifest_ok, Some(true));
            let c = a.container.as_ref().unwrap();
            for (k, v) in &kept_meta {
                let got = c.index.metadata.get(k);
                prop_assert!(got.is_some_and(|g| same(g, v)), "metadata {:?}: {:?} vs {:?}", k, got, v);
            }
            prop_assert_eq!(a.chunks.len(), kept.len());
            for ((name, chunk, opts), st) in kept.iter().zip(&a.chunks) {
                prop_assert_eq!(&st.entry.name, name);
                let ecc = opts.ecc.map_or("none".to_string(), |n| format!("rs({n})"));
                prop_assert_eq!(&st.entry.ecc_algo, &ecc);
                match chunk {
                    Chunk::Json(v) => match &st.content {
                        Content::Json(got) => prop_assert!(same(got, v), "{:?} vs {:?}", got, v),
                        other => prop_assert!(false, "JSON chunk read as {:?}", other),
                    },
                    Chunk::Opaque(ctype, payload) => {
                        prop_assert_eq!(&st.entry.ctype, ctype);
                        prop_assert_eq!(st.payload.as_deref(), Some(payload.as_slice()));
                    }
                    Chunk::Npz(arrays) => {
                        for (array_name, want) in arrays {
                            let element = serde_json::to_string(&[name, array_name]).unwrap();
                            let got = FoldFormat
                                .read_array(&input, &ArrayRequest { element: Some(element), ..Default::default() })
                                .unwrap();
                            prop_assert_eq!((got.dtype, &got.shape), (want.dtype, &want.shape));
                            prop_assert!(got.data == want.data);
                            prop_assert_eq!(got.name.as_deref(), Some(array_name.as_str()));
                        }
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// UDF: table names, texts in every encoding, JSON documents, arrays.

mod udf {
    use super::*;
    use rasterpack_udf::UdfText as Text;
    use rasterpack_udf::{TableSpec, UdfEncoding as Encoding, UdfFile, UdfFormat, UdfWriter};

    #[derive(Debug, Clone)]
    enum Table {
        Text(String, Encoding),
        TextList(Vec<String>, Encoding),
        Json(Value),
        Array(NdArray),
    }

    fn encoding() -> impl Strategy<Value = Encoding> {
        prop::sample::select(vec![
            Encoding::Utf8,
            Encoding::Utf8Signed,
            Encoding::Utf16,
            Encoding::Utf32,
        ])
    }

    fn table() -> impl Strategy<Value = Table> {
        prop_oneof![
            (text(10), encoding()).prop_map(|(s, e)| Table::Text(s, e)),
            (prop::collection::vec(text(6), 0..4), encoding()).prop_map(|(v, e)| Table::TextList(v, e)),
            serde_value().prop_map(Table::Json),
            ndarray()
                .prop_filter("UDF holds up to 3 axes", |a| a.shape.len() <= 3)
                .prop_filter("UDF holds the dtypes it has primitives for", |a| udf_holds(a.dtype))
                .prop_map(Table::Array),
        ]
    }

    fn spec(name: &str, t: &Table) -> TableSpec {
        match t {
            Table::Text(s, e) => TableSpec::text(name, s, *e),
            Table::TextList(items, e) => {
                let refs: Vec<&str> = items.iter().map(String::as_str).collect();
                TableSpec::text_list(name, &refs, *e)
            }
            Table::Json(v) => TableSpec::json(name, v),
            Table::Array(a) => {
                let axes: Vec<u32> = a.shape.iter().map(|&x| x as u32).collect();
                let prim = match a.dtype {
                    DType::Bool | DType::U8 => rasterpack_udf::Prim::U8,
                    DType::I8 => rasterpack_udf::Prim::I8,
                    DType::U16 => rasterpack_udf::Prim::U16,
                    DType::I16 => rasterpack_udf::Prim::I16,
                    DType::U32 => rasterpack_udf::Prim::U32,
                    DType::I32 => rasterpack_udf::Prim::I32,
                    DType::U64 => rasterpack_udf::Prim::U64,
                    DType::I64 => rasterpack_udf::Prim::I64,
                    DType::F32 => rasterpack_udf::Prim::F32,
                    DType::F64 => rasterpack_udf::Prim::F64,
                    DType::F16 | DType::C64 | DType::C128 => unreachable!("filtered out by table()"),
                };
                TableSpec::raw(name, prim, rasterpack_udf::Hint::None, &axes, &[], a.data.clone())
            }
        }
    }

    proptest! {
        #![proptest_config(config(64))]

        #[test]
        fn udf_writer_round_trips_names_texts_and_json(
            tables in prop::collection::vec((text(10), table()), 0..5),
        ) {
            let mut w = UdfWriter::new("PROP").unwrap();
            let root = w.add_dataset("ROOT").unwrap();
            w.set_root(root);
            let mut kept: Vec<(String, Table)> = Vec::new();
            for (name, t) in tables {
                match w.add(root, spec(&name, &t)) {
                    Ok(()) => kept.push((name, t)),
                    Err(e) => prop_assert_eq!(e.kind, ErrorKind::Usage, "{:?}: {}", name, e),
                }
            }
            let bytes = w.to_bytes().unwrap();
            let input = strictly_valid(&UdfFormat, &bytes, "UdfWriter");
            let file = UdfFile::open_strict(&input, &Default::default()).unwrap();
            let ds = &file.datasets()[0];
            for (name, t) in &kept {
                let tab = ds.tables.iter().find(|x| x.name.as_deref() == Some(name.as_str()));
                prop_assert!(tab.is_some(), "table {:?} missing", name);
                let tab = tab.unwrap();
                match t {
                    Table::Text(s, _) => {
                        let got = file.text(tab).unwrap();
                        prop_assert_eq!(got, Text::Scalar(s.clone()), "table {:?}", name);
                    }
                    Table::TextList(items, _) => {
                        let got = file.text(tab).unwrap();
                        prop_assert_eq!(got, Text::List(items.clone()), "table {:?}", name);
                    }
                    Table::Json(v) => prop_assert_eq!(&file.json(tab).unwrap(), v, "table {:?}", name),
                    Table::Array(a) => {
                        let got = file.array(ds, tab).unwrap();
                        prop_assert!(got.data == a.data, "table {:?}", name);
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// GVRS: element names and metadata records.

mod gvrs {
    use super::*;
    use rasterpack_gvrs::write::{to_bytes, ElementRange, ElementSpec, ElementValues, GvrsSpec, Metadata};
    use rasterpack_gvrs::{GvrsFile, GvrsFormat};

    fn identifier() -> impl Strategy<Value = String> {
        "[A-Za-z][A-Za-z0-9_]{0,31}".prop_map(String::from)
    }

    proptest! {
        #![proptest_config(config(32))]

        #[test]
        fn gvrs_writer_round_trips_element_names_and_metadata(
            element in identifier(),
            label in text(12),
            unit in text(6),
            records in prop::collection::vec((identifier(), any::<i32>(), text(16), any::<bool>()), 0..4),
            cells in prop::collection::vec(any::<i32>(), 6),
        ) {
            let mut e = ElementSpec::new(&element, ElementRange::integer());
            e.label = label.clone();
            e.unit = unit.clone();
            let mut spec = GvrsSpec::new(2, 3, 2, 2, e);
            spec.product_label = label.clone();
            for (name, id, text, ascii) in &records {
                spec.metadata.push(Metadata::text(name, *id, text, *ascii));
            }
            let bytes = match to_bytes(&spec, &[ElementValues::Int(&cells)]) {
                Ok(b) => b,
                Err(e) => {
                    prop_assert_eq!(e.kind, ErrorKind::Usage, "{}", e);
                    return Ok(());
                }
            };
            let input = strictly_valid(&GvrsFormat, &bytes, "GvrsSpec");
            let file = GvrsFile::from_input(input, Default::default()).unwrap();
            prop_assert_eq!(file.elements[0].name(), element);
            let got = file.read_element(&file.elements[0].name()).unwrap();
            let want: Vec<u8> = cells.iter().flat_map(|v| v.to_le_bytes()).collect();
            prop_assert!(got.data == want);
            let stored: Vec<_> = file.metadata().unwrap().into_iter().map(Result::unwrap).collect();
            for (name, id, text, _) in &records {
                let r = stored.iter().rev().find(|r| r.name.bytes == name.as_bytes() && r.record_id == *id);
                prop_assert!(r.is_some(), "record {:?}/{} missing", name, id);
                let got = rasterpack_gvrs::model::metadata_text(&r.unwrap().content);
                prop_assert_eq!(got.as_deref(), Some(text.as_str()), "record {:?}", name);
            }
        }
    }
}
