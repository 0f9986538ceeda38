//! Reading Zarr v3 and v2 stores as rasterpack arrays.
