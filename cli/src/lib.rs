//! The CLI's format registry, shared by the `rasterpack` binary and its tests.

pub mod registry;
