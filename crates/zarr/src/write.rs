//! Writing rasterpack arrays as Zarr v3 arrays and groups.
