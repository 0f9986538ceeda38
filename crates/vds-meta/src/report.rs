//! What `inspect` and `validate` show: the JSON summary (snake_case keys, numpy dtype names, the
//! `arrays` list every format gives) and the tables for people.

use rasterpack_common::json::{f64_value, fmt_bytes};
use rasterpack_common::Report;
use serde_json::{json, Map, Value};

use crate::arrays::channel_dtype;
use crate::chunk::{self, VdsChunkStatus};
use crate::chunk_table::VdsChunkMeta;
use crate::dataset::{VdsDataset, VdsLayer, VdsValues};
use crate::geometry;
use crate::layout;

/// Layers with more chunks than this list only the chunks on stored metadata pages under
/// `--all` (the others are unwritten), so a huge declared layout does not make a huge report.
const LIST_EVERY_CHUNK_UP_TO: u64 = 1 << 16;

/// Per-layer counts for reports.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    data: u64,
    constant: u64,
    novalue: u64,
    unwritten: u64,
    stored_bytes: u64,
}

fn layer_counts(ds: &VdsDataset, l: &VdsLayer) -> Counts {
    let mut c = Counts::default();
    for (i, m) in l.chunks.stored() {
        match m.status() {
            VdsChunkStatus::Data => {
                c.data += 1;
                if let Ok(Some(s)) = ds.store().object_size(&format!("{}/{i}", l.name())) {
                    c.stored_bytes += s;
                }
            }
            VdsChunkStatus::Constant(_) => c.constant += 1,
            VdsChunkStatus::NoValue => c.novalue += 1,
            VdsChunkStatus::Unwritten => {}
        }
    }
    c.unwritten = l.chunks.len() - c.data - c.constant - c.novalue;
    c
}

/// Fill `report` with the dataset's summary and tables (`all`: every chunk and whole BLOBs).
pub(crate) fn describe(ds: &VdsDataset, all: bool, report: &mut Report) {
    summarize_layout(ds, all, &mut report.summary);
    let mut layers_json = Vec::new();
    let mut layer_rows = Vec::new();
    for l in ds.layers() {
        let c = layer_counts(ds, l);
        layers_json.push(Value::Object(layer_json(ds, l, &c, all)));
        layer_rows.push(vec![
            l.name().to_string(),
            l.status.compression.name().to_string(),
            l.geometry
                .as_ref()
                .map(|g| format!("{:?}", &g.shape[..ds.layout().dimensionality()]))
                .unwrap_or_default(),
            l.status.chunk_count.to_string(),
            c.data.to_string(),
            c.constant.to_string(),
            c.novalue.to_string(),
            c.unwritten.to_string(),
            fmt_bytes(c.stored_bytes),
        ]);
    }
    report.summary.insert("layers".into(), Value::Array(layers_json));
    if let Some(c) = ds.container() {
        let files: Vec<Value> = c
            .files
            .iter()
            .map(|f| {
                json!({"name": f.entry.name_lossy(), "type": String::from_utf8_lossy(&f.entry.file_type),
                       "chunk_count": f.entry.head_chunk_count, "index_page_entry_count": f.entry.index_page_entry_count,
                       "chunk_metadata_length": f.entry.chunk_metadata_length, "file_metadata_length": f.entry.file_metadata_length,
                       "revisions": f.revisions})
            })
            .collect();
        report.summary.insert("container_files".into(), Value::Array(files));
    }
    tables(ds, all, layer_rows, report);
}

/// The arrays (channels at LOD0, in `.npy` axis order) and the layout: axes, channels,
/// brick layout, metadata.
fn summarize_layout(ds: &VdsDataset, all: bool, s: &mut Map<String, Value>) {
    let lo = ds.layout();
    s.insert("storage".into(), Value::from(ds.storage_kind()));
    s.insert("dimensionality".into(), Value::from(lo.dimensionality()));
    let arrays: Vec<Value> = (0..lo.channels.len())
        .filter_map(|ci| ds.channel_array(ci, 0, VdsValues::Native).ok())
        .map(|a| json!({"name": a.name(), "dtype": a.dtype().name(), "shape": a.shape()}))
        .collect();
    s.insert("arrays".into(), Value::Array(arrays));
    s.insert("axes".into(), serde_json::to_value(&lo.axes).unwrap_or(Value::Null));
    let channels: Vec<Value> = lo
        .channels
        .iter()
        .map(|ch| {
            let mut v = serde_json::to_value(ch).unwrap_or(Value::Null);
            if let Value::Object(o) = &mut v {
                o.insert("dtype".into(), Value::from(channel_dtype(ch, VdsValues::Native).name()));
            }
            v
        })
        .collect();
    s.insert("channels".into(), Value::Array(channels));
    s.insert("layout".into(), serde_json::to_value(&lo.layout).unwrap_or(Value::Null));
    let md: Vec<Value> = lo
        .metadata
        .iter()
        .map(|m| json!({"category": m.category, "name": m.name, "type": m.type_name, "value": m.value_json(all)}))
        .collect();
    s.insert("metadata".into(), Value::Array(md));
}

/// One layer of the summary: geometry, compression, counts and (with `all`) its chunks.
fn layer_json(ds: &VdsDataset, l: &VdsLayer, c: &Counts, all: bool) -> Map<String, Value> {
    let lo = ds.layout();
    let n = lo.dimensionality();
    let mut o = Map::new();
    o.insert("name".into(), Value::from(l.name()));
    if let Some(g) = &l.geometry {
        o.insert("channel".into(), Value::from(lo.channels[g.channel].name.clone()));
        o.insert("dimension_group".into(), Value::from(geometry::group_name(&g.group)));
        o.insert("lod".into(), Value::from(g.lod));
        o.insert("shape".into(), json!(g.shape[..n]));
        o.insert("chunks_per_dim".into(), json!(g.chunks[..n]));
    }
    o.insert("compression".into(), Value::from(l.status.compression.name()));
    o.insert("compression_tolerance".into(), f64_value(l.status.tolerance));
    o.insert("chunk_count".into(), Value::from(l.status.chunk_count));
    o.insert("valid_chunk_count".into(), Value::from(l.status.valid_chunk_count));
    o.insert("written".into(), Value::from(c.data));
    o.insert("constant".into(), Value::from(c.constant));
    o.insert("novalue".into(), Value::from(c.novalue));
    o.insert("unwritten".into(), Value::from(c.unwritten));
    o.insert("stored_bytes".into(), Value::from(c.stored_bytes));
    if let Some(a) = &l.status.adaptive_level_sizes {
        if l.is_wavelet() {
            o.insert("adaptive_level_sizes".into(), json!(a));
        }
    }
    if all && l.geometry.is_some() {
        let every = l.chunks.len() <= LIST_EVERY_CHUNK_UP_TO;
        let listed: Box<dyn Iterator<Item = (u64, VdsChunkMeta)>> = if every {
            Box::new((0..l.chunks.len()).filter_map(|i| l.chunks.get(i).map(|m| (i, m))))
        } else {
            Box::new(l.chunks.stored())
        };
        let chunks: Vec<Value> = listed.map(|(i, m)| chunk_json(ds, l, i, &m)).collect();
        if !every {
            o.insert(
                "unlisted_chunks".into(),
                Value::from(l.chunks.len() - chunks.len() as u64),
            );
        }
        o.insert("chunks".into(), Value::Array(chunks));
    }
    o
}

/// One chunk of a layer (`--all`): extents, hash, status, wavelet levels and header.
fn chunk_json(ds: &VdsDataset, l: &VdsLayer, i: u64, m: &VdsChunkMeta) -> Value {
    let n = ds.layout().dimensionality();
    let Some(g) = &l.geometry else { return Value::Null };
    let e = g.chunk_extent(i);
    let mut v = json!({"index": i, "min": e.min[..n], "max": e.max[..n],
        "min_excluding_margin": e.min_excl[..n], "max_excluding_margin": e.max_excl[..n],
        "hash": format!("{:016x}", m.hash), "status": m.status().name()});
    if let VdsChunkStatus::Constant(x) = m.status() {
        v["constant_value"] = f64_value(x as f64);
    }
    if l.is_wavelet() {
        v["adaptive_levels"] = json!(m.levels.iter().take_while(|&&b| b != 0).collect::<Vec<_>>());
        if m.status() == VdsChunkStatus::Data {
            let mut buf = Vec::new();
            if let Ok(true) = ds.store().get_into(&format!("{}/{i}", l.name()), &mut buf) {
                v["adaptive_level_sizes"] = json!(chunk::adaptive_level_sizes(buf.len() as u64, &m.levels));
                if let Ok(h) = chunk::parse_wavelet_header(&buf) {
                    v["wavelet_header"] = json!({"version": h.version, "compressed_size": h.compressed_size,
                        "size": h.size, "dimensions": h.dimensions, "integer_info": h.integer_info});
                }
            }
        }
    }
    v
}

/// The tables people read.
fn tables(ds: &VdsDataset, all: bool, layer_rows: Vec<Vec<String>>, report: &mut Report) {
    let lo = ds.layout();
    report.fields(
        "VDS dataset",
        vec![
            ("storage".into(), ds.storage_kind().into()),
            ("dimensionality".into(), lo.dimensionality().to_string()),
            (
                "brick size".into(),
                format!(
                    "{} (margins -{} / +{})",
                    lo.layout.brick_size, lo.layout.negative_margin, lo.layout.positive_margin
                ),
            ),
            ("2-D multiplier".into(), lo.layout.brick_size_2d_multiplier.to_string()),
            (
                "LOD levels".into(),
                format!(
                    "{} (create 2-D LODs: {})",
                    lo.layout.lod_levels, lo.layout.create_2d_lods
                ),
            ),
            (
                "full-resolution dim".into(),
                lo.layout.full_resolution_dimension.to_string(),
            ),
        ],
    );
    report.table(
        "Axes",
        &["dim", "name", "unit", "samples", "min", "max"],
        lo.axes
            .iter()
            .enumerate()
            .map(|(i, a)| {
                vec![
                    i.to_string(),
                    a.name.clone(),
                    a.unit.clone(),
                    a.num_samples.to_string(),
                    a.coordinate_min.to_string(),
                    a.coordinate_max.to_string(),
                ]
            })
            .collect(),
    );
    report.table(
        "Channels",
        &[
            "#",
            "name",
            "format",
            "comp",
            "mapping",
            "value range",
            "scale / offset",
            "noValue",
        ],
        lo.channels
            .iter()
            .enumerate()
            .map(|(i, c)| {
                vec![
                    i.to_string(),
                    c.name.clone(),
                    c.format.name().trim_start_matches("Format_").to_string(),
                    c.components.to_string(),
                    if c.mapping == layout::VdsChannelMapping::PerTrace {
                        format!("PerTrace x{}", c.mapped_values)
                    } else {
                        "Direct".into()
                    },
                    format!("{} .. {}", c.value_range[0], c.value_range[1]),
                    format!("{} / {}", c.integer_scale, c.integer_offset),
                    if c.use_no_value {
                        c.no_value.to_string()
                    } else {
                        "-".into()
                    },
                ]
            })
            .collect(),
    );
    report.table(
        "Layers",
        &[
            "layer",
            "compression",
            "shape",
            "chunks",
            "data",
            "const",
            "novalue",
            "unwritten",
            "stored",
        ],
        layer_rows,
    );
    let shown = if all {
        lo.metadata.len()
    } else {
        lo.metadata.len().min(40)
    };
    report.table(
        "Metadata",
        &["category", "name", "type", "value"],
        lo.metadata[..shown]
            .iter()
            .map(|m| {
                let mut v = m.value_text();
                if !all && v.chars().count() > 80 {
                    v = v.chars().take(77).collect::<String>() + "...";
                }
                vec![m.category.clone(), m.name.clone(), m.type_name.clone(), v]
            })
            .collect(),
    );
}
