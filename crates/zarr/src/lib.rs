//! Zarr stores for rasterpack, through the [`zarrs`] crate.
//!
//! Writing (`write`) turns any rasterpack array into a Zarr v3 array or group; reading (`read`)
//! opens Zarr v3 and v2 stores as a rasterpack format, so `inspect`, `validate` and `convert`
//! take them like any other input.

pub mod read;
pub mod write;
