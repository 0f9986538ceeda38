//! Zarr stores for rasterpack, through the [`zarrs`] crate.
//!
//! Writing (`write`) turns any rasterpack array into a Zarr v3 array or group; reading (`read`)
//! opens Zarr v3 and v2 stores as a rasterpack format, so `inspect`, `validate` and `convert`
//! take them like any other input.

pub mod read;
pub mod write;

use std::path::Path;

use rasterpack_common::{
    ArrayFile, ArrayRequest, ArraySink, Format, Input, InspectOptions, Limits, NdArray, Report, RequestFlag, Result,
    ValidateOptions,
};

pub use read::ZarrFile;

/// The Zarr format: a directory store, or one under an object-store prefix, detected by its
/// metadata documents.
#[derive(Debug, Clone, Copy, Default)]
pub struct ZarrFormat;

impl Format for ZarrFormat {
    fn name(&self) -> &'static str {
        read::NAME
    }
    fn description(&self) -> &'static str {
        "Zarr v3/v2 array store (a directory with zarr.json, .zarray or .zgroup)"
    }
    fn extensions(&self) -> &'static [&'static str] {
        &["zarr"]
    }
    fn honours(&self) -> &'static [RequestFlag] {
        &[RequestFlag::Element, RequestFlag::Region]
    }
    fn detect(&self, _head: &[u8]) -> bool {
        false
    }
    fn detect_dir(&self, dir: &Path) -> bool {
        read::is_store(dir)
    }
    fn detect_objects(&self, objects: &dyn rasterpack_common::ObjectSource) -> bool {
        read::is_object_store(objects)
    }
    fn inspect(&self, input: &Input, opts: &InspectOptions) -> Result<Report> {
        read::inspect(input, opts)
    }
    fn validate(&self, input: &Input, opts: &ValidateOptions) -> Report {
        read::validate(input, opts)
    }
    fn read_array(&self, input: &Input, req: &ArrayRequest) -> Result<NdArray> {
        rasterpack_common::read_by_streaming(self, input, req)
    }
    fn stream_array(&self, input: &Input, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        read::open_input(input, req.limits)?.stream_request(req, sink)
    }
    fn open(&self, input: Input, limits: Limits) -> Result<Box<dyn ArrayFile>> {
        Ok(Box::new(read::open_input(&input, limits)?))
    }
}
