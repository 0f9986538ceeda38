//! OpenVDS (VDS) for rasterpack: reads and validates both storage kinds (the single-file `.vds`
//! "HueDataStore" container and the object-store layout in a directory), decodes None / RLE /
//! Zip bricks of every format, decodes wavelet bricks (all four wavelet methods, bit-identical
//! with OpenVDS 3.4.9, [`wavelet`]), and assembles any region of any level of detail.
//!
//! Layers: [`raw`] (on-disk structs) -> [`container`] / [`store`] (checked parsing and object
//! access) -> [`layout`] (JSON documents), [`geometry`] (bricks), [`chunk`] (serialization),
//! [`chunk_table`] (chunk metadata) -> [`dataset`] ([`VdsDataset`]), reads ([`ArrayFile`]) and
//! [`validate`].
#![forbid(unsafe_code)]
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

use std::path::Path;

use rasterpack_common::{Format, InspectOptions, RequestFlag, ValidateOptions};

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
}

impl VdsDataset {
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

    fn stream(&self, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        self.stream_request(req, sink)
    }
}
