//! Reads the VDS tests share: a box of a layer as bytes, a channel as an array.
#![allow(dead_code)]

use rasterpack_vds_meta::{VdsDataset, VdsValues};

/// A box of a layer (dims 0..6, dim 0 fastest) as bytes, read through a region in C axis order.
pub fn read_box(
    ds: &VdsDataset,
    li: usize,
    lo: [u64; 6],
    hi: [u64; 6],
    values: VdsValues,
) -> rasterpack_vds_meta::Result<Vec<u8>> {
    let n = ds.layout().dimensionality();
    let mut ranges: Vec<_> = (0..n).rev().map(|d| lo[d]..hi[d]).collect();
    let g = ds.layers()[li].geometry.as_ref().unwrap();
    let comps = ds.layout().channels[g.channel].components;
    if comps > 1 {
        ranges.push(0..comps as u64);
    }
    Ok(ds
        .read_layer_region(li, Some(&rasterpack_vds_meta::Region { ranges }), values)?
        .data)
}

/// The array of a channel (the primary one for `None`), as `read_channel` gave it.
pub fn read_channel(
    ds: &VdsDataset,
    channel: Option<&str>,
    physical: bool,
) -> rasterpack_vds_meta::Result<rasterpack_vds_meta::NdArray> {
    use rasterpack_vds_meta::ArrayRequest;
    ds.read(&ArrayRequest {
        element: channel.map(str::to_string),
        physical,
        ..ArrayRequest::default()
    })
}
