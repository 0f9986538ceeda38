//! Every format the CLI knows. Detection asks each in turn; order matters only for formats
//! whose magics could overlap (none do today).

use rasterpack_common::Format;

pub fn formats() -> Vec<&'static dyn Format> {
    vec![
        &rasterpack_common::npy_format::NpyFormat,
        &rasterpack_volp::VolpFormat,
        &rasterpack_gvrs::GvrsFormat,
        &rasterpack_udf::UdfFormat,
        &rasterpack_fold::FoldFormat,
        &rasterpack_vds_meta::VdsFormat,
    ]
}
