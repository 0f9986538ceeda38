//! Interop with datasets written by openvds 3.4.9 (`$RASTERPACK_CORPUS/vds`): layouts,
//! metadata, layers, every chunk's extents and status, samples, statistics, full LOD0 dumps,
//! wavelet datasets included, and OpenVDS's chunk test vectors.

use std::path::{Path, PathBuf};

use rasterpack_common::{Format, Input, Limits, Severity, ValidateOptions};
use rasterpack_vds_meta::chunk::{self, ChunkSpec};
use rasterpack_vds_meta::layout::{VdsCompression, VdsMetaValue, VdsSampleFormat};
use rasterpack_vds_meta::{VdsDataset, VdsFormat, VdsValues};
use serde_json::Value;
use sha2::{Digest, Sha256};

mod util;
use util::{read_box, read_channel};

fn corpus() -> Option<PathBuf> {
    rasterpack_common::testkit::corpus_dir("vds")
}

fn truths(dir: &Path) -> Vec<(PathBuf, Value)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".truth.json"))
        .collect();
    v.sort();
    assert!(v.len() >= 13, "expected the 13 VDS samples, found {}", v.len());
    v.into_iter()
        .map(|p| {
            let t: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            (p, t)
        })
        .collect()
}

fn jf(v: &Value) -> f64 {
    match v {
        Value::String(s) if s == "NaN" => f64::NAN,
        Value::String(s) if s == "Infinity" => f64::INFINITY,
        Value::String(s) if s == "-Infinity" => f64::NEG_INFINITY,
        _ => v.as_f64().unwrap_or_else(|| panic!("not a number: {v}")),
    }
}

fn same_f64(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect()
}

fn is_legacy(t: &Value) -> bool {
    t["name"].as_str().unwrap().starts_with("real_openvds_subset")
}

#[test]
fn datasets_match_truth() {
    let Some(dir) = corpus() else { return };
    for (_, t) in truths(&dir) {
        let name = t["name"].as_str().unwrap().to_string();
        eprintln!("checking {name}");
        let input = Input::open(dir.join(t["path"].as_str().unwrap())).unwrap();
        let limits = Limits::default();
        if is_legacy(&t) {
            // The layout comes from the legacy VDSObject text (ERRATA: a goal to read).
            assert_eq!(t["expected_verdict"], "valid");
        }
        let ds = VdsDataset::from_input(input.clone(), limits).unwrap_or_else(|e| panic!("{name}: {e}"));
        check_layout(&name, &ds, &t);
        check_metadata(&name, &ds, &t);
        let wavelet = ds.layers().iter().any(|l| l.is_wavelet());
        let tl = t["layers"].as_array().unwrap();
        let mut names: Vec<String> = tl
            .iter()
            .map(|l| l["layerName"].as_str().unwrap().to_string())
            .collect();
        let mut mine: Vec<String> = ds.layers().iter().map(|l| l.name().to_string()).collect();
        names.sort();
        mine.sort();
        assert_eq!(mine, names, "{name}: layer list");
        for tlayer in tl {
            check_layer(&name, &ds, tlayer);
        }
        // Validation verdict.
        let r = VdsFormat.validate(&input, &ValidateOptions::default());
        let bad: Vec<_> = r.findings.iter().filter(|f| f.severity != Severity::Info).collect();
        assert!(bad.is_empty(), "{name}: unexpected findings {bad:?}");
        assert_eq!(r.findings.has_code("vds.legacy_layout.used"), is_legacy(&t), "{name}");
        assert!(!r.unsupported, "{name}: validate must not be unsupported");
        // Full LOD0 dumps.
        let raw = std::fs::read(dir.join(format!("{name}.lod0.raw"))).unwrap();
        // Wavelet datasets too: their dumps are OpenVDS reads, matched bit for bit.
        let _ = wavelet;
        let a = read_channel(&ds, None, true).unwrap_or_else(|e| panic!("{name}: {e}"));
        let shape = u64s(&t["lod0_primary"]["shape"]);
        assert_eq!(a.shape, shape, "{name}");
        assert!(a.data == raw, "{name}: float32 LOD0 dump differs");
        let native = &t["lod0_primary"]["native"];
        if native.is_object() {
            let nraw = std::fs::read(dir.join(native["file"].as_str().unwrap())).unwrap();
            let a = read_channel(&ds, None, false).unwrap();
            assert!(a.data == nraw, "{name}: native LOD0 dump differs");
        }
        if let Some(h) = t["lod0_primary"]["float32"]["sha256"].as_str() {
            assert_eq!(format!("{:x}", Sha256::digest(&a.data)), h);
        }
    }
}

fn check_layout(name: &str, ds: &VdsDataset, t: &Value) {
    let tl = &t["layout"];
    let lo = &ds.layout();
    assert_eq!(
        lo.dimensionality() as u64,
        tl["dimensionality"].as_u64().unwrap(),
        "{name}"
    );
    for (a, ta) in lo.axes.iter().zip(tl["axes"].as_array().unwrap()) {
        assert_eq!(a.name, ta["name"].as_str().unwrap());
        assert_eq!(a.unit, ta["unit"].as_str().unwrap());
        assert_eq!(a.num_samples, ta["numSamples"].as_u64().unwrap());
        assert!(same_f64(a.coordinate_min, jf(&ta["coordinateMin"])), "{name}");
        assert!(same_f64(a.coordinate_max, jf(&ta["coordinateMax"])), "{name}");
    }
    let tc = tl["channels"].as_array().unwrap();
    assert_eq!(lo.channels.len(), tc.len());
    for (c, x) in lo.channels.iter().zip(tc) {
        assert_eq!(c.name, x["name"].as_str().unwrap());
        assert_eq!(c.unit, x["unit"].as_str().unwrap());
        assert_eq!(c.format.name(), x["format"].as_str().unwrap());
        assert_eq!(c.components as u64, x["components"].as_u64().unwrap());
        assert_eq!(format!("{:?}", c.mapping), x["mapping"].as_str().unwrap());
        assert_eq!(c.mapped_values, x["mappedValues"].as_u64().unwrap());
        assert_eq!(c.discrete, x["discrete"].as_bool().unwrap());
        assert_eq!(c.renderable, x["renderable"].as_bool().unwrap());
        assert_eq!(c.allow_lossy_compression, x["allowLossyCompression"].as_bool().unwrap());
        assert_eq!(c.use_no_value, x["useNoValue"].as_bool().unwrap());
        assert!(same_f64(c.no_value, jf(&x["noValue"])), "{name} noValue");
        assert!(same_f64(c.integer_scale, jf(&x["integerScale"])), "{name}");
        assert!(same_f64(c.integer_offset, jf(&x["integerOffset"])), "{name}");
        assert!(
            same_f64(c.value_range[0], jf(&x["valueRange"][0])) && same_f64(c.value_range[1], jf(&x["valueRange"][1]))
        );
    }
    let l = &lo.layout;
    assert_eq!(l.brick_size as u64, tl["brickSize"].as_u64().unwrap());
    assert_eq!(l.brick_size_enum, tl["brickSizeEnum"].as_str().unwrap());
    assert_eq!(l.negative_margin as u64, tl["negativeMargin"].as_u64().unwrap());
    assert_eq!(l.positive_margin as u64, tl["positiveMargin"].as_u64().unwrap());
    assert_eq!(
        l.brick_size_2d_multiplier as u64,
        tl["brickSize2DMultiplier"].as_u64().unwrap()
    );
    assert_eq!(l.lod_levels as u64, tl["lodLevels"].as_u64().unwrap());
    assert_eq!(l.create_2d_lods, tl["create2DLODs"].as_bool().unwrap());
    assert_eq!(
        l.force_full_resolution_dimension,
        tl["forceFullResolutionDimension"].as_bool().unwrap()
    );
    assert_eq!(
        l.full_resolution_dimension as i64,
        tl["fullResolutionDimension"].as_i64().unwrap()
    );
}

fn check_metadata(name: &str, ds: &VdsDataset, t: &Value) {
    let tm = t["metadata"].as_array().unwrap();
    assert_eq!(ds.layout().metadata.len(), tm.len(), "{name}: metadata count");
    for (m, x) in ds.layout().metadata.iter().zip(tm) {
        assert_eq!(m.category, x["category"].as_str().unwrap());
        assert_eq!(m.name, x["name"].as_str().unwrap());
        assert_eq!(m.type_name, x["type"].as_str().unwrap());
        let v = &x["value"];
        match &m.value {
            VdsMetaValue::Int(i) => {
                let want: Vec<i64> = if v.is_array() {
                    v.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect()
                } else {
                    vec![v.as_i64().unwrap()]
                };
                assert_eq!(*i, want, "{name} {}", m.name);
            }
            VdsMetaValue::Float(f) | VdsMetaValue::Double(f) => {
                let want: Vec<f64> = if v.is_array() {
                    v.as_array().unwrap().iter().map(jf).collect()
                } else {
                    vec![jf(v)]
                };
                assert_eq!(f.len(), want.len());
                for (a, b) in f.iter().zip(&want) {
                    assert!(same_f64(*a, *b), "{name} {}: {a} vs {b}", m.name);
                }
            }
            VdsMetaValue::String(s) => assert_eq!(s, v.as_str().unwrap()),
            VdsMetaValue::Blob(b) => assert_eq!(rasterpack_vds_meta::layout::base64_encode(b), v.as_str().unwrap()),
        }
    }
}

fn check_layer(name: &str, ds: &VdsDataset, tl: &Value) {
    let lname = tl["layerName"].as_str().unwrap();
    let li = ds.layers().iter().position(|l| l.name() == lname).unwrap();
    let layer = &ds.layers()[li];
    let g = layer
        .geometry
        .as_ref()
        .unwrap_or_else(|| panic!("{name} {lname}: no geometry"));
    let n = ds.layout().dimensionality();
    assert_eq!(g.chunk_count, tl["chunkCount"].as_u64().unwrap(), "{name} {lname}");
    assert_eq!(layer.chunks.len(), g.chunk_count);
    assert_eq!(g.shape[..n].to_vec(), u64s(&tl["layerShape"]), "{name} {lname} shape");
    let cd: Vec<usize> = g.chunk_dims.clone();
    assert_eq!(
        cd,
        u64s(&tl["chunkDimensions"])
            .iter()
            .map(|&x| x as usize)
            .collect::<Vec<_>>(),
        "{name} {lname} chunk dims"
    );
    assert_eq!(
        ds.layout().channels[g.channel].name,
        tl["channelName"].as_str().unwrap()
    );
    assert_eq!(g.lod as u64, tl["lod"].as_u64().unwrap());
    for c in tl["chunks"].as_array().unwrap() {
        let i = c["index"].as_u64().unwrap();
        let e = g.chunk_extent(i);
        assert_eq!(e.min[..n].to_vec(), u64s(&c["min"]), "{name} {lname} chunk {i} min");
        assert_eq!(e.max[..n].to_vec(), u64s(&c["max"]), "{name} {lname} chunk {i} max");
        assert_eq!(
            e.min_excl[..n].to_vec(),
            u64s(&c["minExcludingMargin"]),
            "{name} {lname} chunk {i}"
        );
        assert_eq!(
            e.max_excl[..n].to_vec(),
            u64s(&c["maxExcludingMargin"]),
            "{name} {lname} chunk {i}"
        );
        let m = layer.chunks.get(i).unwrap();
        assert_eq!(
            format!("{:016x}", m.hash),
            c["hash"].as_str().unwrap(),
            "{name} {lname} chunk {i} hash"
        );
        assert_eq!(
            m.status().name(),
            c["status"].as_str().unwrap(),
            "{name} {lname} chunk {i} status"
        );
        if let Some(cv) = c.get("constantValue") {
            assert_eq!(m.status(), chunk::VdsChunkStatus::Constant(jf(cv) as f32));
        }
    }
    if layer.is_wavelet() {
        // Headers and levels parse (the data is read below like any other layer's).
        for (i, m) in layer.chunks.stored() {
            if m.status() == chunk::VdsChunkStatus::Data {
                let b = ds.chunk_bytes(layer, i).unwrap().unwrap();
                let h = chunk::parse_wavelet_header(&b).unwrap();
                assert!((671..=673).contains(&h.version));
                assert_eq!(h.compressed_size as usize, b.len());
                assert!(!chunk::adaptive_level_sizes(b.len() as u64, &m.levels).is_empty());
            }
        }
    }
    // Every layer read whole, as f32 and natively, against samples and statistics.
    let ch = &ds.layout().channels[g.channel];
    let phys = ds
        .read_layer(li, VdsValues::Physical)
        .unwrap_or_else(|e| panic!("{name} {lname}: {e}"))
        .data;
    let nat = ds.read_layer(li, VdsValues::Native).unwrap().data;
    let f: Vec<f32> = phys
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let shape = g.shape;
    let at = |pos: &[u64]| -> usize {
        let mut idx = 0u64;
        let mut mul = 1u64;
        for d in 0..n {
            idx += pos[d] * mul;
            mul *= shape[d];
        }
        idx as usize
    };
    for s in tl["samples"].as_array().unwrap() {
        let pos = u64s(&s["pos"]);
        let k = at(&pos);
        let want = jf(&s["value"]) as f32;
        assert!(
            f[k].to_bits() == want.to_bits() || (f[k].is_nan() && want.is_nan()),
            "{name} {lname} sample {pos:?}: {} vs {want}",
            f[k]
        );
        if let Some(r) = s.get("raw") {
            match ch.format {
                VdsSampleFormat::U8 | VdsSampleFormat::Bit1 => assert_eq!(nat[k] as u64, r.as_u64().unwrap()),
                VdsSampleFormat::U16 => assert_eq!(
                    u16::from_le_bytes([nat[2 * k], nat[2 * k + 1]]) as u64,
                    r.as_u64().unwrap()
                ),
                VdsSampleFormat::U32 => assert_eq!(
                    u32::from_le_bytes(nat[4 * k..4 * k + 4].try_into().unwrap()) as u64,
                    r.as_u64().unwrap()
                ),
                VdsSampleFormat::U64 => assert_eq!(
                    u64::from_le_bytes(nat[8 * k..8 * k + 8].try_into().unwrap()),
                    r.as_u64().unwrap()
                ),
                VdsSampleFormat::R64 => assert!(same_f64(
                    f64::from_le_bytes(nat[8 * k..8 * k + 8].try_into().unwrap()),
                    jf(r)
                )),
                VdsSampleFormat::R32 => {}
            }
        }
    }
    let st = &tl["stats_r32"];
    assert_eq!(f.len() as u64, st["count"].as_u64().unwrap());
    let mn = f.iter().copied().fold(f32::INFINITY, f32::min);
    let mx = f.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    assert_eq!(mn as f64, jf(&st["min"]), "{name} {lname} min");
    assert_eq!(mx as f64, jf(&st["max"]), "{name} {lname} max");
    let sum: f64 = f.iter().map(|&x| x as f64).sum();
    let want = jf(&st["sum"]);
    assert!(
        (sum - want).abs() <= 1e-9 * jf(&st["sum_abs"]).max(1.0),
        "{name} {lname} sum {sum} vs {want}"
    );
    if let Some(sn) = tl.get("stats_native") {
        let vals: Vec<f64> = match ch.format {
            VdsSampleFormat::U8 | VdsSampleFormat::Bit1 => nat.iter().map(|&b| b as f64).collect(),
            VdsSampleFormat::U16 => nat
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]) as f64)
                .collect(),
            VdsSampleFormat::U32 => nat
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()) as f64)
                .collect(),
            VdsSampleFormat::U64 => nat
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap()) as f64)
                .collect(),
            VdsSampleFormat::R64 => nat
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                .collect(),
            VdsSampleFormat::R32 => f.iter().map(|&x| x as f64).collect(),
        };
        assert_eq!(vals.len() as u64, sn["count"].as_u64().unwrap());
        assert_eq!(
            vals.iter().copied().fold(f64::INFINITY, f64::min),
            jf(&sn["min"]),
            "{name} {lname} native min"
        );
        assert_eq!(
            vals.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            jf(&sn["max"]),
            "{name} {lname} native max"
        );
        let s: f64 = vals.iter().sum();
        assert!(
            (s - jf(&sn["sum"])).abs() <= 1e-9 * jf(&sn["sum_abs"]).max(1.0),
            "{name} {lname} native sum"
        );
    }
    // A sub-box read agrees with the whole-layer read.
    let mut lo = [0u64; 6];
    let mut hi = shape;
    for d in 0..n {
        lo[d] = shape[d] / 3;
        hi[d] = (shape[d] * 3 / 4).max(lo[d] + 1);
    }
    let sub = read_box(ds, li, lo, hi, VdsValues::Physical).unwrap();
    let mut k = 0usize;
    let mut p = lo;
    loop {
        let w = at(&p);
        assert_eq!(
            &sub[4 * k..4 * k + 4],
            &phys[4 * w..4 * w + 4],
            "{name} {lname} box at {p:?}"
        );
        k += 1;
        let mut d = 0;
        loop {
            if d == 6 {
                break;
            }
            p[d] += 1;
            if p[d] < hi[d] {
                break;
            }
            p[d] = lo[d];
            d += 1;
        }
        if d == 6 {
            break;
        }
    }
    assert_eq!(k * 4, sub.len());
}

#[test]
fn chunk_test_vectors() {
    let Some(dir) = corpus() else { return };
    let m: Value = serde_json::from_slice(&std::fs::read(dir.join("chunks/MANIFEST.json")).unwrap()).unwrap();
    let mut none = 0;
    for v in m["vectors"].as_array().unwrap() {
        let file = v["file"].as_str().unwrap();
        let bytes = std::fs::read(dir.join("chunks").join(file)).unwrap();
        let h = &v["header"];
        let size: Vec<u64> = u64s(&h["size"]);
        let method = v["method"].as_str().unwrap();
        if h["kind"] == "wavelet" {
            let w = chunk::parse_wavelet_header(&bytes).unwrap();
            assert_eq!(w.version as i64, h["version"].as_i64().unwrap(), "{file}");
            assert_eq!(w.compressed_size as usize, bytes.len());
            assert_eq!(w.size.map(|s| s as u64).to_vec(), size);
            assert_eq!(w.dimensions as i64, h["dimensions"].as_i64().unwrap());
            assert_eq!(w.integer_info as i64, h["integerInfo"].as_i64().unwrap());
            // Decoded and compared in tests/wavelet.rs.
            continue;
        }
        let d = chunk::parse_descriptor(&bytes).unwrap();
        assert_eq!(d.format as i64, h["format_code"].as_i64().unwrap());
        let spec = ChunkSpec {
            format: VdsSampleFormat::R32,
            components: 1,
            dims: d.dimensionality as usize,
            size: [size[0], size[1], size[2]],
            compression: VdsCompression::from_name(method).unwrap(),
        };
        let mut out = Vec::new();
        let start = chunk::decode_payload(&bytes, &spec, 1 << 30, &mut out).unwrap();
        let payload: &[u8] = match start {
            Some(s) => &bytes[s..],
            None => &out,
        };
        assert_eq!(payload.len() as u64, v["expected"]["decoded_bytes"].as_u64().unwrap());
        assert_eq!(
            format!("{:x}", Sha256::digest(payload)),
            v["expected"]["sha256"].as_str().unwrap(),
            "{file}"
        );
        none += 1;
    }
    assert!(none >= 4);
}
