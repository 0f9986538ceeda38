//! Gridfour Virtual Raster Store (GVRS) 1.4.

pub mod codec;
pub mod write;
