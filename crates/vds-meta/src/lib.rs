//! OpenVDS (VDS) volumes for rasterpack: read and validate both storage kinds (the single-file
//! `.vds` container and the object-store layout in a directory), decode None / RLE / Zip bricks
//! of every sample format and wavelet bricks (all four wavelet methods, bit-identical with
//! OpenVDS 3.4.9, [`wavelet`]), and assemble any region of any level of detail; write arrays as
//! either storage kind, None / RLE / Zip, for OpenVDS to read ([`mod@write`]).
//!
//! A VDS dataset is a volume of 1 to 6 axes (axis 0 varies fastest) holding one or more
//! *channels* (named arrays, e.g. `Amplitude`), each stored as *layers* (one per level of
//! detail) cut into bricks of 32 to 4096 voxels per edge; a JSON document, `VolumeDataLayout`,
//! describes the axes, channels and bricks, and `LayerStatus` the layers. The format is
//! OpenVDS's ([documentation](https://osdu.pages.opengroup.org/platform/domain-data-mgmt-services/seismic/open-vds/)); what rasterpack
//! accepts is written down in the repository's `docs/formats/vds.md`.
//!
//! [`VdsDataset`] opens a dataset (a path, bytes, or an [`Input`]); channels are its arrays, by
//! name, in C axis order (the reverse of VDS's: the slowest axis first, as `.npy` files and
//! numpy hold them). Read a channel whole or a [`Region`] of it into memory
//! ([`VdsDataset::read`], typed through [`NdArray::to_vec`] / [`NdArray::as_slice`], or
//! `ndarray::ArrayD` with the `ndarray` feature), or stream it into any [`ArraySink`] with
//! memory bounded by [`Limits::working_set`]: only the bricks a region meets are decoded.
//! [`VdsDataset::validate`] checks every rule, chunk-metadata page and brick.
//!
//! ```
//! use rasterpack_vds_meta::{ArrayRequest, Region, VdsDataset};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A 4 x 3 x 2 float32 volume as an object-store dataset: the layout, the layer status,
//! // one page of chunk hashes and one uncompressed brick (made here; real ones come from
//! // OpenVDS). Value (x, y, z) = 100 z + 10 y + x, with x the fastest axis.
//! let dir = std::env::temp_dir().join(format!("vds-doc-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! std::fs::create_dir_all(dir.join("Dimensions_012LOD0/ChunkMetadata"))?;
//! let axis = |name: &str, n: u32| {
//!     format!(r#"{{"name":"{name}","unit":"","numSamples":{n},"coordinateMin":0,"coordinateMax":{}}}"#, n - 1)
//! };
//! let layout = format!(
//!     r#"{{"axisDescriptors":[{},{},{}],
//!        "channelDescriptors":[{{"format":"Format_R32","components":"Components_1","name":"Amplitude",
//!          "unit":"","valueRange":[0,300],"channelMapping":"Direct","mappedValues":1,"discrete":false,
//!          "renderable":true,"allowLossyCompression":true,"useNoValue":false,"noValue":0,
//!          "integerScale":1,"integerOffset":0}}],
//!        "layoutDescriptor":{{"brickSize":"BrickSize_32","negativeMargin":0,"positiveMargin":0,
//!          "brickSize2DMultiplier":4,"lodLevels":"LODLevels_None","create2DLODs":false,
//!          "forceFullResolutionDimension":false,"fullResolutionDimension":-1}},
//!        "metadata":[]}}"#,
//!     axis("Sample", 4), axis("Crossline", 3), axis("Inline", 2)
//! );
//! std::fs::write(dir.join("VolumeDataLayout"), layout)?;
//! let values: Vec<f32> = (0..24).map(|i| (100 * (i / 12) + 10 * (i / 4 % 3) + i % 4) as f32).collect();
//! // A brick: dimensionality, size x/y/z, format code (3 = R32), components; then the values.
//! let mut brick: Vec<u8> = [3i32, 4, 3, 2, 3, 1].iter().flat_map(|v| v.to_le_bytes()).collect();
//! brick.extend(values.iter().flat_map(|v| v.to_le_bytes()));
//! std::fs::write(dir.join("Dimensions_012LOD0/0"), &brick)?;
//! // Its hash (any value but the reserved 0, all-ones and constant tags).
//! std::fs::write(dir.join("Dimensions_012LOD0/ChunkMetadata/0"), 0x1234_5678u64.to_le_bytes())?;
//! std::fs::write(
//!     dir.join("LayerStatus"),
//!     format!(
//!         r#"[{{"layerName":"Dimensions_012LOD0","channelName":"Amplitude","dimensionGroup":"Dimensions_012",
//!          "lod":0,"produceStatus":"Normal","compressionMethod":"None","compressionTolerance":0,
//!          "chunkCount":1,"validChunkCount":1,"chunkMetadataPageSize":1,"chunkMetadataByteSize":8,
//!          "hasChunkMetadataPages":true,"pageDirectory":[0],"serializedSize":{},"uncompressedSize":96,
//!          "adaptiveLevelSizes":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}}]"#,
//!         brick.len()
//!     ),
//! )?;
//!
//! // Open it (a `.vds` file opens the same way) and check every rule and brick.
//! let dataset = VdsDataset::open(&dir)?;
//! let report = dataset.validate();
//! assert!(report.is_valid(false), "{:?}", report.findings);
//!
//! // Channels are arrays by name, in C order: [inline, crossline, sample].
//! let arrays = dataset.arrays()?;
//! assert_eq!(arrays[0].name.as_deref(), Some("Amplitude"));
//! assert_eq!(arrays[0].shape, vec![2, 3, 4]);
//! let whole = dataset.read(&ArrayRequest::for_element("Amplitude"))?;
//! assert_eq!(whole.to_vec::<f32>()?, values);
//!
//! // A region: inline 1, crosslines 1..3, samples 2..4.
//! let region = Region::from_start_size(&[1, 1, 2], &[1, 2, 2])?;
//! let part = dataset.read(&ArrayRequest::for_element("Amplitude").with_region(region))?;
//! assert_eq!(part.shape, vec![1, 2, 2]);
//! assert_eq!(part.as_slice::<f32>()?, &[112.0, 113.0, 122.0, 123.0]);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```
//!
//! Layers: [`raw`] (on-disk structs) -> [`container`] / [`store`] (checked parsing and object
//! access) -> [`layout`] (JSON documents), [`geometry`] (bricks), [`chunk`] (serialization),
//! [`chunk_table`] (chunk metadata) -> [`dataset`] ([`VdsDataset`]), reads ([`ArrayFile`]) and
//! [`validate`]. [`VdsFormat`] is what the `rasterpack` command line drives.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
// 6-D voxel arithmetic indexes several parallel arrays by dimension.
#![allow(clippy::needless_range_loop)]

mod arrays;
pub mod chunk;
pub mod chunk_table;
pub mod container;
pub mod dataset;
pub mod geometry;
pub mod layout;
pub mod legacy;
pub mod raw;
mod read;
mod report;
pub mod store;
#[cfg(feature = "testsupport")]
pub mod testsupport;
pub mod validate;
pub mod wavelet;
pub mod write;

use std::path::Path;

use rasterpack_common::{Format, InspectOptions, Output, RequestFlag, ValidateOptions, WriteOptions};

pub use crate::arrays::channel_dtype;
pub use crate::chunk::VdsChunkStatus;
pub use crate::chunk_table::{VdsChunkMeta, VdsChunkTable};
pub use crate::dataset::{VdsDataset, VdsLayer, VdsValues};
pub use crate::layout::{
    VdsAxis, VdsChannel, VdsChannelMapping, VdsCompression, VdsLayoutDescriptor, VdsMetaValue, VdsMetadataItem,
    VdsSampleFormat, VolumeDataLayout,
};
pub use rasterpack_common::{
    ArrayFile, ArrayInfo, ArrayRequest, ArraySink, DType, Element, Error, ErrorKind, Finding, Findings, Input, Limits,
    NdArray, Region, Report, Result, Severity,
};

/// The VDS format behind the format-independent [`Format`] interface (what the CLI and
/// [`rasterpack_common::open_any`] use).
pub struct VdsFormat;

impl Format for VdsFormat {
    fn name(&self) -> &'static str {
        "vds"
    }
    fn honours(&self) -> &'static [RequestFlag] {
        &[
            RequestFlag::Element,
            RequestFlag::Physical,
            RequestFlag::Region,
            RequestFlag::Lod,
            RequestFlag::Compress,
        ]
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

    fn detect_objects(&self, objects: &dyn rasterpack_common::ObjectSource) -> bool {
        matches!(objects.size("VolumeDataLayout"), Ok(Some(_)))
    }

    fn inspect(&self, input: &Input, opts: &InspectOptions) -> Result<Report> {
        let ds = VdsDataset::open_input(input, &opts.limits).map_err(|e| e.in_format("vds"))?;
        let mut report = Report::new("vds");
        report.findings.extend(ds.findings().clone());
        report::describe(&ds, opts.all, &mut report);
        Ok(report)
    }

    fn validate(&self, input: &Input, opts: &ValidateOptions) -> Report {
        match VdsDataset::open_input(input, &opts.limits) {
            Ok(ds) => ds.validate_with(opts),
            Err(e) => {
                let mut report = Report::new("vds");
                // A container that fails at its layout or layers still gets its structural
                // findings (the dataset could not be opened to collect them).
                if input.dir().is_none() && e.code != "vds.container.magic" {
                    if let Ok(c) = container::Container::open(input, &opts.limits) {
                        report.findings.extend(c.findings.clone());
                        validate::container_checks(&c, &mut report.findings);
                    }
                }
                report.fail(&e.in_format("vds"));
                report
            }
        }
    }

    fn read_array(&self, input: &Input, req: &ArrayRequest) -> Result<NdArray> {
        rasterpack_common::read_by_streaming(self, input, req)
    }

    /// Streams the channel `req.element` (the primary one by default) at level of detail
    /// `req.lod`, or `req.region` of it: only the bricks the region meets are decoded.
    fn stream_array(&self, input: &Input, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        let ds = VdsDataset::open_input(input, &req.limits).map_err(|e| e.in_format("vds"))?;
        ds.stream_request(req, sink)
    }

    fn open(&self, input: Input, limits: Limits) -> Result<Box<dyn ArrayFile>> {
        Ok(Box::new(VdsDataset::from_input(input, limits)?))
    }

    /// A `.vds` container written brick by brick as the array arrives ([`write::VdsWriter`]);
    /// the object-store directory layout is [`write::VdsWriter::directory`].
    fn array_writer<'a>(&'a self, opts: &WriteOptions, out: Output<'a>) -> Result<Box<dyn ArraySink + 'a>> {
        Ok(Box::new(write::VdsWriter::container(
            out,
            write::VdsWriteOptions::from_write_options(opts)?,
        )))
    }

    fn write_array(&self, array: &NdArray, opts: &WriteOptions, out: &mut dyn std::io::Write) -> Result<()> {
        let mut w = write::VdsWriter::container(
            Output::Stream(out),
            write::VdsWriteOptions {
                limits: Limits::unlimited(),
                ..write::VdsWriteOptions::from_write_options(opts)?
            },
        );
        w.begin(&ArrayInfo::of(array))?;
        w.write_at(0, &array.data)?;
        w.finish()
    }

    /// One channel per array, the first the primary, each named by its array's name (the
    /// others must have one), all of the first's shape (checked before anything is written:
    /// an error names both channels); `metadata` must be empty (metadata items come from
    /// `opts.metadata`). The same writer, one `begin`..`finish` per channel, as `convert
    /// --channel`.
    fn write_arrays(
        &self,
        arrays: &[NdArray],
        metadata: &serde_json::Map<String, serde_json::Value>,
        opts: &WriteOptions,
        out: &mut dyn std::io::Write,
    ) -> Result<()> {
        if arrays.is_empty() {
            return Err(Error::usage("a VDS holds at least one channel; no array given"));
        }
        if !metadata.is_empty() {
            return Err(Error::usage(
                "the vds writer takes metadata items as CATEGORY/NAME=VALUE (WriteOptions::metadata), not a JSON map",
            ));
        }
        let channels = arrays
            .iter()
            .enumerate()
            .skip(1)
            .map(|(k, a)| {
                let name = a.name.clone().filter(|n| !n.is_empty()).ok_or_else(|| {
                    Error::usage(format!(
                        "array {k} has no name: a VDS channel beside the primary needs one"
                    ))
                })?;
                Ok(write::ChannelSpec {
                    name,
                    ..Default::default()
                })
            })
            .collect::<Result<Vec<_>>>()?;
        // Every channel's shape and format are checked before anything is written (the writer
        // checks each again as it begins, after the channels before it are written).
        let primary = |a: &NdArray| a.name.clone().unwrap_or_else(|| "Amplitude".into());
        for (a, spec) in arrays.iter().skip(1).zip(&channels) {
            write::sample_format(a.dtype)
                .map_err(|e| Error::usage(format!("the VDS channel {:?}: {}", spec.name, e.message)))?;
            if a.shape != arrays[0].shape {
                return Err(Error::usage(format!(
                    "the VDS channel {:?} has shape {:?}, not the primary channel {:?}'s {:?}: every channel of a VDS spans the whole volume",
                    spec.name,
                    a.shape,
                    primary(&arrays[0]),
                    arrays[0].shape
                )));
            }
        }
        let mut w = write::VdsWriter::container(
            Output::Stream(out),
            write::VdsWriteOptions {
                limits: Limits::unlimited(),
                channels,
                ..write::VdsWriteOptions::from_write_options(opts)?
            },
        );
        for a in arrays {
            w.begin(&ArrayInfo::of(a))?;
            w.write_at(0, &a.data)?;
            w.finish()?;
        }
        Ok(())
    }
}

impl VdsDataset {
    /// The channels as arrays (at LOD0): name, dtype and shape in C axis order.
    pub fn arrays(&self) -> Result<Vec<ArrayInfo>> {
        ArrayFile::arrays(self)
    }

    /// Read what `req` asks for into memory: the channel `req.element` (the primary one when
    /// `None`), at level of detail `req.lod`, whole or `req.region` of it, within
    /// `req.limits.max_array_bytes`.
    pub fn read(&self, req: &ArrayRequest) -> Result<NdArray> {
        ArrayFile::read(self, req)
    }

    /// Stream what `req` asks for into `sink` (see [`ArraySink`]): only the bricks the region
    /// meets are decoded, within `req.limits.working_set`.
    pub fn stream(&self, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        self.stream_request(req, sink)
    }

    /// Check every rule, every chunk-metadata page and every brick (decoded to exactly its
    /// descriptor's size): all findings, with the dataset's summary.
    pub fn validate(&self) -> Report {
        self.validate_with(&ValidateOptions {
            limits: *self.limits(),
            ..Default::default()
        })
    }

    /// [`VdsDataset::validate`] with other limits and a progress callback (called as bricks
    /// are checked, in bytes of stored bricks).
    pub fn validate_with(&self, opts: &ValidateOptions) -> Report {
        let mut report = Report::new("vds");
        validate::validate_dataset(self, opts, &mut report);
        report::describe(self, false, &mut report);
        report
    }
}

/// Channels are the arrays, by name, at LOD0 unless the request asks for another level of
/// detail ([`ArrayRequest::lod`]); shapes are the VDS dimensions reversed (C order, the axis
/// order of `.npy` output), with the components last for channels that have several.
impl ArrayFile for VdsDataset {
    fn format_name(&self) -> &'static str {
        "vds"
    }

    fn arrays(&self) -> Result<Vec<ArrayInfo>> {
        (0..self.layout().channels.len())
            .map(|ci| {
                let a = self.channel_array(ci, 0, VdsValues::Native)?;
                let mut info = a.info(a.shape());
                info.attrs.clear();
                Ok(info)
            })
            .collect()
    }

    fn validate(&self) -> Report {
        VdsDataset::validate(self)
    }

    fn chunk_shape(&self, element: Option<&str>) -> Option<Vec<u64>> {
        self.chunk_shape_at(element, 0)
    }

    fn chunk_shape_at(&self, element: Option<&str>, lod: u32) -> Option<Vec<u64>> {
        let channel = self.channel_named(element).ok()?;
        Some(self.channel_array(channel, lod, VdsValues::Native).ok()?.chunk_shape())
    }

    fn stream(&self, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        self.stream_request(req, sink)
    }
}

// The reader API every format shares (no trait import needed).
rasterpack_common::reader_api!(VdsDataset, crate::VdsFormat);

/// The README's examples, compiled as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
