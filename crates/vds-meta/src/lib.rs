//! OpenVDS (VDS) for rasterpack: reads and validates both storage kinds (the single-file `.vds`
//! "HueDataStore" container and the object-store layout in a directory), decodes None / RLE /
//! Zip bricks of every format, and assembles any box of any layer. Wavelet data is recognised
//! and validated structurally but not decoded (unsupported, exit 3).
//!
//! Layers: [`raw`] (on-disk structs) -> [`container`] / [`store`] (checked parsing and object
//! access) -> [`layout`] (JSON documents), [`geometry`] (bricks), [`chunk`] (serialization) ->
//! [`dataset`] (friendly API) and [`validate`].
#![forbid(unsafe_code)]
// 6-D voxel arithmetic indexes several parallel arrays by dimension.
#![allow(clippy::needless_range_loop)]

pub mod chunk;
pub mod container;
pub mod dataset;
pub mod geometry;
pub mod layout;
pub mod legacy;
pub mod raw;
pub mod store;
#[cfg(feature = "testsupport")]
pub mod testsupport;
pub mod validate;

use std::path::Path;

use rasterpack_common::json::{f64_value, fmt_bytes};
use rasterpack_common::{
    ArrayRequest, DType, Error, Format, Input, InspectOptions, NdArray, Report, Result, ValidateOptions,
};
use serde_json::{json, Map, Value};

use crate::chunk::ChunkStatus;
pub use crate::dataset::{Dataset, Values};
use crate::layout::SampleFormat;

/// The VDS format for the CLI.
pub struct VdsFormat;

impl Format for VdsFormat {
    fn name(&self) -> &'static str {
        "vds"
    }
    fn honours(&self) -> &'static [rasterpack_common::RequestFlag] {
        use rasterpack_common::RequestFlag;
        &[RequestFlag::Element, RequestFlag::Physical]
    }
    fn description(&self) -> &'static str {
        "OpenVDS volume data store (.vds container or object-store directory)"
    }
    fn extensions(&self) -> &'static [&'static str] {
        &["vds"]
    }
    fn detect(&self, head: &[u8]) -> bool {
        container::is_container(head)
    }
    fn detect_dir(&self, dir: &Path) -> bool {
        dir.join("VolumeDataLayout").is_file()
    }

    fn inspect(&self, input: &Input, opts: &InspectOptions) -> Result<Report> {
        let ds = Dataset::open(input, &opts.limits).map_err(|e| e.in_format("vds"))?;
        let mut report = Report::new("vds");
        report.findings.extend(ds.findings.clone());
        describe(&ds, opts.all, &mut report);
        Ok(report)
    }

    fn validate(&self, input: &Input, opts: &ValidateOptions) -> Report {
        let mut report = Report::new("vds");
        match Dataset::open(input, &opts.limits) {
            Err(e) => {
                // A container that fails at its layout or layers still gets its structural
                // findings (the dataset could not be opened to collect them).
                if input.dir().is_none() && e.code != "vds.container.magic" {
                    if let Ok(c) = container::Container::open(input, &opts.limits) {
                        report.findings.extend(c.findings.clone());
                        validate::container_checks(&c, &mut report.findings);
                    }
                }
                report.fail(&e.in_format("vds"));
            }
            Ok(ds) => {
                validate::validate_dataset(&ds, &mut report);
                describe(&ds, false, &mut report);
                if ds
                    .layers
                    .iter()
                    .any(|l| l.is_wavelet() && l.chunks.iter().any(|c| c.status() == ChunkStatus::Data))
                {
                    report.summary.insert("wavelet_data_decoded".into(), Value::Bool(false));
                }
            }
        }
        report
    }

    fn read_array(&self, input: &Input, req: &ArrayRequest) -> Result<NdArray> {
        let ds = Dataset::open(input, &req.limits).map_err(|e| e.in_format("vds"))?;
        read_channel(&ds, req.element.as_deref(), req.physical)
    }
}

/// The LOD0 array of a channel (primary when `channel` is `None`), numpy shape = dims reversed
/// (components last when more than one).
pub fn read_channel(ds: &Dataset, channel: Option<&str>, physical: bool) -> Result<NdArray> {
    let ci = match channel {
        None => 0,
        Some(n) => ds.layout.channel_index(n).ok_or_else(|| {
            let names: Vec<&str> = ds.layout.channels.iter().map(|c| c.name.as_str()).collect();
            Error::usage(format!("no channel {n:?}; channels: {}", names.join(", ")))
        })?,
    };
    let ch = &ds.layout.channels[ci];
    let li = ds.lod0_layer(ci).ok_or_else(|| {
        Error::invalid_at(
            "vds.layer.missing",
            None,
            format!("channel {:?} has no readable LOD0 layer", ch.name),
        )
    })?;
    let g = ds.layers[li]
        .geometry
        .as_ref()
        .ok_or_else(|| Error::invalid_at("vds.layer.geometry", None, "no geometry"))?;
    let values = if physical { Values::Physical } else { Values::Native };
    let data = ds.read_layer(li, values)?;
    let n = ds.layout.dimensionality();
    let mut shape: Vec<u64> = g.shape[..n].iter().rev().copied().collect();
    if ch.components > 1 {
        shape.push(ch.components as u64);
    }
    let dtype = if physical {
        DType::F32
    } else {
        match ch.format {
            SampleFormat::Bit1 | SampleFormat::U8 => DType::U8,
            SampleFormat::U16 => DType::U16,
            SampleFormat::R32 => DType::F32,
            SampleFormat::U32 => DType::U32,
            SampleFormat::R64 => DType::F64,
            SampleFormat::U64 => DType::U64,
        }
    };
    let mut a = NdArray::new(dtype, shape, data)?;
    a.name = Some(ch.name.clone());
    a.attrs
        .insert("channel".into(), serde_json::to_value(ch).unwrap_or(Value::Null));
    a.attrs.insert("layer".into(), Value::from(ds.layers[li].name()));
    a.attrs.insert(
        "axes".into(),
        Value::Array(
            ds.layout
                .axes
                .iter()
                .map(|a| serde_json::to_value(a).unwrap_or(Value::Null))
                .collect(),
        ),
    );
    if matches!(ch.format, SampleFormat::U8 | SampleFormat::U16) && !physical {
        a.attrs.insert("scale".into(), f64_value(ch.integer_scale));
        a.attrs.insert("offset".into(), f64_value(ch.integer_offset));
    }
    Ok(a)
}

/// Per-layer counts for reports.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    data: u64,
    constant: u64,
    novalue: u64,
    unwritten: u64,
    stored_bytes: u64,
}

fn layer_counts(ds: &Dataset, l: &dataset::Layer) -> Counts {
    let mut c = Counts::default();
    for (i, m) in l.chunks.iter().enumerate() {
        match m.status() {
            ChunkStatus::Data => {
                c.data += 1;
                if let Ok(Some(s)) = ds.store().object_size(&format!("{}/{i}", l.name())) {
                    c.stored_bytes += s;
                }
            }
            ChunkStatus::Constant(_) => c.constant += 1,
            ChunkStatus::NoValue => c.novalue += 1,
            ChunkStatus::Unwritten => c.unwritten += 1,
        }
    }
    c
}

fn describe(ds: &Dataset, all: bool, report: &mut Report) {
    let lo = &ds.layout;
    let s = &mut report.summary;
    s.insert("storage".into(), Value::from(ds.storage_kind()));
    s.insert("dimensionality".into(), Value::from(lo.dimensionality()));
    s.insert("axes".into(), serde_json::to_value(&lo.axes).unwrap_or(Value::Null));
    s.insert(
        "channels".into(),
        serde_json::to_value(&lo.channels).unwrap_or(Value::Null),
    );
    s.insert("layout".into(), serde_json::to_value(&lo.layout).unwrap_or(Value::Null));
    let md: Vec<Value> = lo
        .metadata
        .iter()
        .map(|m| json!({"category": m.category, "name": m.name, "type": m.type_name, "value": m.value_json(all)}))
        .collect();
    s.insert("metadata".into(), Value::Array(md));
    let mut layers_json = Vec::new();
    let mut layer_rows = Vec::new();
    for l in &ds.layers {
        let c = layer_counts(ds, l);
        let g = l.geometry.as_ref();
        let mut o = Map::new();
        o.insert("name".into(), Value::from(l.name()));
        if let Some(g) = g {
            o.insert("channel".into(), Value::from(lo.channels[g.channel].name.clone()));
            o.insert("dimensionGroup".into(), Value::from(geometry::group_name(&g.group)));
            o.insert("lod".into(), Value::from(g.lod));
            o.insert("shape".into(), json!(g.shape[..lo.dimensionality()]));
            o.insert("chunksPerDim".into(), json!(g.chunks[..lo.dimensionality()]));
        }
        o.insert("compression".into(), Value::from(l.status.compression.name()));
        o.insert("compressionTolerance".into(), f64_value(l.status.tolerance));
        o.insert("chunkCount".into(), Value::from(l.status.chunk_count));
        o.insert("validChunkCount".into(), Value::from(l.status.valid_chunk_count));
        o.insert("written".into(), Value::from(c.data));
        o.insert("constant".into(), Value::from(c.constant));
        o.insert("novalue".into(), Value::from(c.novalue));
        o.insert("unwritten".into(), Value::from(c.unwritten));
        o.insert("storedBytes".into(), Value::from(c.stored_bytes));
        if let Some(a) = &l.status.adaptive_level_sizes {
            if l.is_wavelet() {
                o.insert("adaptiveLevelSizes".into(), json!(a));
            }
        }
        if all {
            if let Some(g) = g {
                let chunks: Vec<Value> = l
                    .chunks
                    .iter()
                    .enumerate()
                    .map(|(i, m)| {
                        let e = g.chunk_extent(i as u64);
                        let n = lo.dimensionality();
                        let mut v = json!({"index": i, "min": e.min[..n], "max": e.max[..n],
                            "minExcludingMargin": e.min_excl[..n], "maxExcludingMargin": e.max_excl[..n],
                            "hash": format!("{:016x}", m.hash), "status": m.status().name()});
                        if let ChunkStatus::Constant(x) = m.status() {
                            v["constantValue"] = f64_value(x as f64);
                        }
                        if l.is_wavelet() {
                            v["adaptiveLevels"] = json!(m.levels.iter().take_while(|&&b| b != 0).collect::<Vec<_>>());
                            if m.status() == ChunkStatus::Data {
                                let mut buf = Vec::new();
                                if let Ok(true) = ds.store().get_into(&format!("{}/{i}", l.name()), &mut buf) {
                                    v["adaptiveLevelSizes"] = json!(chunk::adaptive_level_sizes(buf.len() as u64, &m.levels));
                                    if let Ok(h) = chunk::parse_wavelet_header(&buf) {
                                        v["waveletHeader"] = json!({"version": h.version, "compressedSize": h.compressed_size,
                                            "size": h.size, "dimensions": h.dimensions, "integerInfo": h.integer_info});
                                    }
                                }
                            }
                        }
                        v
                    })
                    .collect();
                o.insert("chunks".into(), Value::Array(chunks));
            }
        }
        layers_json.push(Value::Object(o));
        layer_rows.push(vec![
            l.name().to_string(),
            l.status.compression.name().to_string(),
            g.map(|g| format!("{:?}", &g.shape[..lo.dimensionality()]))
                .unwrap_or_default(),
            l.status.chunk_count.to_string(),
            c.data.to_string(),
            c.constant.to_string(),
            c.novalue.to_string(),
            c.unwritten.to_string(),
            fmt_bytes(c.stored_bytes),
        ]);
    }
    s.insert("layers".into(), Value::Array(layers_json));
    if let Some(c) = ds.container() {
        let files: Vec<Value> = c
            .files
            .iter()
            .map(|f| {
                json!({"name": f.entry.name_lossy(), "type": String::from_utf8_lossy(&f.entry.file_type),
                       "chunkCount": f.entry.head_chunk_count, "indexPageEntryCount": f.entry.index_page_entry_count,
                       "chunkMetadataLength": f.entry.chunk_metadata_length, "fileMetadataLength": f.entry.file_metadata_length,
                       "revisions": f.revisions})
            })
            .collect();
        s.insert("containerFiles".into(), Value::Array(files));
    }
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
                    if c.mapping == layout::ChannelMapping::PerTrace {
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
