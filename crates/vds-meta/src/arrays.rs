//! Channels as arrays: which layer a request reads (a channel by name, a level of detail), the
//! array's dtype, shape and attributes, and the request's region as a box of the layer.
//!
//! Axis order: a VDS addresses voxels with dimension 0 fastest; arrays are C order, so their
//! shape is the dimensions reversed (`[dim N-1, ..., dim 0]`), with a last axis for the
//! components of channels that have more than one. Regions use that same order.

use std::borrow::Cow;
use std::ops::Range;

use rasterpack_common::json::f64_value;
use rasterpack_common::{ArrayInfo, ArrayRequest, ArraySink, DType, Error, MemorySink, NdArray, Region, Result};
use serde_json::Value;

use crate::dataset::{VdsDataset, VdsValues};
use crate::geometry::{layer_allowed, LayerGeometry};
use crate::layout::{VdsChannel, VdsSampleFormat};
use crate::read::{BoxRequest, Plan};

/// The dtype reads of `channel` produce: the channel's own format (1-bit as `uint8` 0/1), or
/// `float32` for physical values.
pub fn channel_dtype(channel: &VdsChannel, values: VdsValues) -> DType {
    if values == VdsValues::Physical {
        return DType::F32;
    }
    match channel.format {
        VdsSampleFormat::Bit1 | VdsSampleFormat::U8 => DType::U8,
        VdsSampleFormat::U16 => DType::U16,
        VdsSampleFormat::R32 => DType::F32,
        VdsSampleFormat::U32 => DType::U32,
        VdsSampleFormat::R64 => DType::F64,
        VdsSampleFormat::U64 => DType::U64,
    }
}

/// One channel at one level of detail, ready to be read whole or by region.
pub(crate) struct ChannelArray<'a> {
    ds: &'a VdsDataset,
    channel: usize,
    lod: u32,
    /// The stored layer; `None` for a channel declared but never written.
    layer_index: Option<usize>,
    geometry: Cow<'a, LayerGeometry>,
    values: VdsValues,
}

impl VdsDataset {
    /// The index of the channel named `name` (the primary channel for `None`).
    pub(crate) fn channel_named(&self, name: Option<&str>) -> Result<usize> {
        let channels = &self.layout().channels;
        match name {
            None => Ok(0),
            Some(n) => channels.iter().position(|c| c.name == n).ok_or_else(|| {
                let names: Vec<&str> = channels.iter().map(|c| c.name.as_str()).collect();
                Error::usage(format!("no channel {n:?}; channels: {}", names.join(", ")))
            }),
        }
    }

    /// Channel `channel` at level of detail `lod`: a usage error for a LOD the dataset lacks.
    pub(crate) fn channel_array(&self, channel: usize, lod: u32, values: VdsValues) -> Result<ChannelArray<'_>> {
        let ch = self
            .layout()
            .channels
            .get(channel)
            .ok_or_else(|| Error::usage(format!("no channel {channel}")))?;
        if let Some(li) = self.lod_layer(channel, lod) {
            let g = self.layers()[li]
                .geometry
                .as_ref()
                .ok_or_else(|| Error::invalid_at("vds.layer.geometry", None, "no geometry"))?;
            return Ok(ChannelArray {
                ds: self,
                channel,
                lod,
                layer_index: Some(li),
                geometry: Cow::Borrowed(g),
                values,
            });
        }
        // A layer of the channel that is stored but cannot be located fails the read: only a
        // layer the dataset itself says was never written reads as unwritten bricks.
        if let Some(e) = self.unlocatable_error(channel) {
            return Err(e);
        }
        if self.channel_has_layers(channel) {
            let lods: Vec<String> = self.lods(channel).iter().map(u32::to_string).collect();
            if lod == 0 {
                return Err(Error::invalid_at(
                    "vds.layer.missing",
                    None,
                    format!("channel {:?} has no readable LOD0 layer", ch.name),
                ));
            }
            return Err(Error::usage(format!(
                "channel {:?} has no LOD {lod}; its stored levels of detail: {}",
                ch.name,
                lods.join(", ")
            )));
        }
        // Declared but never written: it reads as unwritten bricks (a warning says so), in the
        // dimension group of the primary channel's layer.
        let layout = self.layout();
        let n = layout.dimensionality();
        let group: Vec<usize> = match self.lod0_layer(0).and_then(|li| self.layers()[li].geometry.as_ref()) {
            Some(g) => g.group.clone(),
            None => (0..n.min(3)).collect(),
        };
        if lod > 0 {
            if let Some(why) = layer_allowed(layout, channel, &group, lod) {
                return Err(Error::usage(format!("channel {:?} has no LOD {lod}: {why}", ch.name)));
            }
        }
        let g = LayerGeometry::new(layout, channel, &group, lod).ok_or_else(|| {
            Error::invalid_at(
                "vds.layer.geometry",
                None,
                format!("channel {:?} has no LOD{lod} geometry", ch.name),
            )
        })?;
        Ok(ChannelArray {
            ds: self,
            channel,
            lod,
            layer_index: None,
            geometry: Cow::Owned(g),
            values,
        })
    }

    /// Layer `layer_index` as an array (any stored layer: another dimension group, a LOD).
    pub(crate) fn layer_array(&self, layer_index: usize, values: VdsValues) -> Result<ChannelArray<'_>> {
        let layer = self
            .layers()
            .get(layer_index)
            .ok_or_else(|| Error::usage(format!("no layer {layer_index}")))?;
        if let Some(e) = self.layer_unlocatable_error(layer) {
            return Err(e);
        }
        let g = layer
            .geometry
            .as_ref()
            .ok_or_else(|| Error::invalid_at("vds.layer.geometry", None, "layer has no valid geometry"))?;
        Ok(ChannelArray {
            ds: self,
            channel: g.channel,
            lod: g.lod,
            layer_index: Some(layer_index),
            geometry: Cow::Borrowed(g),
            values,
        })
    }

    /// Read layer `layer_index` (of [`VdsDataset::layers`]), or `region` of it (C axis order:
    /// the layer's dimensions reversed, components last), in memory within the limits. Reading
    /// channels by name ([`crate::ArrayFile::read`]) picks their layer itself; this reads any
    /// stored layer, e.g. another dimension group.
    pub fn read_layer_region(&self, layer_index: usize, region: Option<&Region>, values: VdsValues) -> Result<NdArray> {
        let array = self.layer_array(layer_index, values)?;
        let region = match region {
            Some(r) => r.clone(),
            None => Region::full(&array.shape()),
        };
        let mut sink = MemorySink::new(*self.limits());
        let mut plan = Plan::new(array.box_request(&region)?, true, self.limits())?;
        sink.begin(&array.info(region.shape()))?;
        plan.check_coverage()?;
        plan.run(&mut sink)?;
        sink.into_array()
    }

    /// The whole of layer `layer_index` (see [`VdsDataset::read_layer_region`]).
    pub fn read_layer(&self, layer_index: usize, values: VdsValues) -> Result<NdArray> {
        self.read_layer_region(layer_index, None, values)
    }

    /// The array a request asks for: channel by name (`req.element`), `req.lod`, physical or
    /// stored values.
    pub(crate) fn requested_array(&self, req: &ArrayRequest) -> Result<ChannelArray<'_>> {
        let channel = self.channel_named(req.element.as_deref())?;
        let values = if req.physical {
            VdsValues::Physical
        } else {
            VdsValues::Native
        };
        self.channel_array(channel, req.lod, values)
    }

    /// Stream `req` (channel, LOD, region, values) into `sink`: `begin`, then the bricks the
    /// region meets (see [`crate::read`]).
    pub(crate) fn stream_request(&self, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        req.check_honoured(&crate::VdsFormat)?;
        let array = self.requested_array(req)?;
        let region = req.region_of(&array.shape())?;
        // The plan refuses a working set that cannot fit before the sink begins; the sink
        // refuses an output beyond its limits before the plan walks the chunks along each axis
        // (a declared 2^53-sample axis would otherwise be walked first).
        let mut plan = Plan::new(array.box_request(&region)?, sink.random_access(), &req.limits)?;
        sink.begin(&array.info(region.shape()))?;
        plan.check_coverage()?;
        plan.run(sink)
    }
}

impl<'a> ChannelArray<'a> {
    fn ch(&self) -> &'a VdsChannel {
        &self.ds.layout().channels[self.channel]
    }

    /// The channel's name (the array's name).
    pub fn name(&self) -> &'a str {
        &self.ch().name
    }

    /// The array's shape: the layer's dimensions reversed, components last when more than one.
    pub fn shape(&self) -> Vec<u64> {
        let n = self.ds.layout().dimensionality();
        let mut shape: Vec<u64> = self.geometry.shape[..n].iter().rev().copied().collect();
        if self.ch().components > 1 {
            shape.push(self.ch().components as u64);
        }
        shape
    }

    /// The brick stride (what one brick owns, margins excluded) in the array's axis order,
    /// clamped to the shape; components last. Regions aligned to it decode each brick once.
    pub fn chunk_shape(&self) -> Vec<u64> {
        let n = self.ds.layout().dimensionality();
        let g = &self.geometry;
        let mut chunks: Vec<u64> = (0..n)
            .rev()
            .map(|d| {
                let stride = if g.scaled[d] {
                    // The LOD 0 extent of a brick, cut at the axis' end: rounded up at the LOD
                    // as the axis is (3 samples at LOD 1 are 2, in one brick).
                    let lod = self.lod.min(63);
                    g.brick[d].div_ceil(1u64.checked_shl(lod).unwrap_or(u64::MAX))
                } else {
                    g.brick[d]
                };
                stride.clamp(1, g.shape[d].max(1))
            })
            .collect();
        if self.ch().components > 1 {
            chunks.push(self.ch().components as u64);
        }
        chunks
    }

    /// The dtype of the delivered values.
    pub fn dtype(&self) -> DType {
        channel_dtype(self.ch(), self.values)
    }

    /// What a read of `shape` (the whole array or a region of it) announces: name, dtype and
    /// the channel's attributes (and a warning for a channel that was never written).
    pub fn info(&self, shape: Vec<u64>) -> ArrayInfo {
        let ch = self.ch();
        let mut info = ArrayInfo::new(self.dtype(), shape);
        info.name = Some(ch.name.clone());
        let attrs = &mut info.attrs;
        attrs.insert("channel".into(), serde_json::to_value(ch).unwrap_or(Value::Null));
        attrs.insert(
            "axes".into(),
            serde_json::to_value(&self.ds.layout().axes).unwrap_or(Value::Null),
        );
        if matches!(ch.format, VdsSampleFormat::U8 | VdsSampleFormat::U16) && self.values == VdsValues::Native {
            attrs.insert("scale".into(), f64_value(ch.integer_scale));
            attrs.insert("offset".into(), f64_value(ch.integer_offset));
        }
        attrs.insert("lod".into(), Value::from(self.lod));
        match self.layer_index {
            Some(li) => {
                attrs.insert("layer".into(), Value::from(self.ds.layers()[li].name()));
            }
            None => {
                attrs.insert(
                    "warnings".into(),
                    Value::Array(vec![Value::from(format!(
                        "vds.channel.unwritten: channel {:?} is declared but none of its layers is stored; it reads as unwritten bricks",
                        ch.name
                    ))]),
                );
            }
        }
        info
    }

    /// The box of the layer a region (in the array's C axis order) covers.
    pub fn box_request(&self, region: &Region) -> Result<BoxRequest<'_>> {
        let shape = self.shape();
        region.check_within(&shape)?;
        let n = self.ds.layout().dimensionality();
        let mut min = [0u64; 6];
        let mut max = self.geometry.shape;
        for d in 0..n {
            let r = &region.ranges[n - 1 - d];
            min[d] = r.start;
            max[d] = r.end;
        }
        for d in n..6 {
            min[d] = 0;
            max[d] = self.geometry.shape[d].max(1);
        }
        let comps: Range<u32> = match region.ranges.get(n) {
            Some(r) => r.start as u32..r.end as u32,
            None => 0..self.ch().components,
        };
        Ok(BoxRequest {
            ds: self.ds,
            layer_index: self.layer_index,
            geometry: &self.geometry,
            channel: self.ch(),
            values: self.values,
            min,
            max,
            comps,
        })
    }
}
