//! A tour of the VDS reader through its public API: open a dataset (a `.vds` file or an
//! object-store directory given on the command line, or a small one made here), list its axes
//! and channels, validate it, read a channel whole and a region of it, and stream a channel
//! through a sink of your own.
//!
//! ```console
//! $ cargo run -p rasterpack-vds-meta --example vds_tour [DATASET]
//! ```

use std::path::{Path, PathBuf};

use rasterpack_vds_meta::{ArrayInfo, ArrayRequest, ArraySink, DType, Error, Region, Result, Severity, VdsDataset};

/// Smallest and largest value of a float32 channel, seen as it streams (no array in memory).
#[derive(Default)]
struct Extremes {
    min: f32,
    max: f32,
    count: u64,
}

impl ArraySink for Extremes {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        if info.dtype != DType::F32 {
            return Err(Error::usage("this sink takes float32 values"));
        }
        (self.min, self.max) = (f32::INFINITY, f32::NEG_INFINITY);
        Ok(())
    }

    fn write_at(&mut self, _offset: u64, data: &[u8]) -> Result<()> {
        for v in data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
            self.count += 1;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let path: PathBuf = match std::env::args_os().nth(1) {
        Some(p) => p.into(),
        None => {
            let dir = std::env::temp_dir().join("vds_tour_dataset");
            make_small_dataset(&dir)?;
            println!("no dataset given: made {}", dir.display());
            dir
        }
    };

    // Open: a `.vds` container or an object-store directory, with default limits.
    let dataset = VdsDataset::open(&path)?;
    let layout = dataset.layout();
    println!("storage: {}", dataset.storage_kind());
    for (d, axis) in layout.axes.iter().enumerate() {
        println!(
            "axis {d} ({}): {} samples, {} .. {} {}",
            axis.name, axis.num_samples, axis.coordinate_min, axis.coordinate_max, axis.unit
        );
    }

    // Validate: every rule, chunk-metadata page and brick.
    let report = dataset.validate();
    let errors = report.findings.iter().filter(|f| f.severity == Severity::Error).count();
    println!(
        "valid: {} ({} findings, {errors} errors)",
        report.is_valid(false),
        report.findings.len()
    );

    // Channels are arrays by name, in C axis order (slowest axis first, as in `.npy`).
    for array in dataset.arrays()? {
        println!(
            "channel {:?}: {} {:?}",
            array.name.unwrap_or_default(),
            array.dtype.name(),
            array.shape
        );
    }
    let channel = &layout.channels[0];
    println!("lods of {:?}: {:?}", channel.name, dataset.lods(0));

    // Read the first channel whole (within Limits::max_array_bytes) and a region of it: the
    // middle half of every axis. Only the bricks the region meets are decoded.
    let request = ArrayRequest::for_element(&channel.name);
    let whole = dataset.read(&request)?;
    println!("read {:?}: {} bytes", whole.shape, whole.data.len());
    let start: Vec<u64> = whole.shape.iter().map(|&n| n / 4).collect();
    let size: Vec<u64> = whole.shape.iter().map(|&n| (n / 2).max(1)).collect();
    let part = dataset.read(&request.clone().with_region(Region::from_start_size(&start, &size)?))?;
    println!("region at {start:?} of size {size:?}: shape {:?}", part.shape);
    if part.dtype == DType::F32 {
        let values: Vec<f32> = part.to_vec()?;
        println!("first value of the region: {}", values[0]);
    }

    // Stream the channel through our own sink: memory stays within Limits::working_set,
    // whatever the dataset's size.
    if whole.dtype == DType::F32 {
        let mut extremes = Extremes::default();
        dataset.stream(&request, &mut extremes)?;
        println!("{} values from {} to {}", extremes.count, extremes.min, extremes.max);
    }
    Ok(())
}

/// A 30 x 20 x 10 float32 volume (one brick) as an object-store directory: the layout, the layer
/// status, one page of chunk hashes and one uncompressed brick. Value (x, y, z) = 100 z + y + x / 100.
fn make_small_dataset(dir: &Path) -> std::io::Result<()> {
    let (nx, ny, nz) = (30u32, 20u32, 10u32);
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir.join("Dimensions_012LOD0/ChunkMetadata"))?;
    let axis = |name: &str, n: u32| {
        format!(
            r#"{{"name":"{name}","unit":"","numSamples":{n},"coordinateMin":0,"coordinateMax":{}}}"#,
            n - 1
        )
    };
    let layout = format!(
        r#"{{"axisDescriptors":[{},{},{}],
           "channelDescriptors":[{{"format":"Format_R32","components":"Components_1","name":"Amplitude",
             "unit":"","valueRange":[0,1000],"channelMapping":"Direct","mappedValues":1,"discrete":false,
             "renderable":true,"allowLossyCompression":true,"useNoValue":false,"noValue":0,
             "integerScale":1,"integerOffset":0}}],
           "layoutDescriptor":{{"brickSize":"BrickSize_32","negativeMargin":0,"positiveMargin":0,
             "brickSize2DMultiplier":4,"lodLevels":"LODLevels_None","create2DLODs":false,
             "forceFullResolutionDimension":false,"fullResolutionDimension":-1}},
           "metadata":[]}}"#,
        axis("Sample", nx),
        axis("Crossline", ny),
        axis("Inline", nz)
    );
    std::fs::write(dir.join("VolumeDataLayout"), layout)?;
    // Brick header: dimensionality, size x/y/z, format code (3 = R32), components; then values.
    let mut brick: Vec<u8> = [3, nx as i32, ny as i32, nz as i32, 3, 1]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    for z in 0..nz {
        for y in 0..ny {
            for x in 0..nx {
                brick.extend_from_slice(&(100.0 * z as f32 + y as f32 + x as f32 / 100.0).to_le_bytes());
            }
        }
    }
    std::fs::write(dir.join("Dimensions_012LOD0/0"), &brick)?;
    std::fs::write(
        dir.join("Dimensions_012LOD0/ChunkMetadata/0"),
        0x1234_5678u64.to_le_bytes(),
    )?;
    let status = format!(
        r#"[{{"layerName":"Dimensions_012LOD0","channelName":"Amplitude","dimensionGroup":"Dimensions_012",
             "lod":0,"produceStatus":"Normal","compressionMethod":"None","compressionTolerance":0,
             "chunkCount":1,"validChunkCount":1,"chunkMetadataPageSize":1,"chunkMetadataByteSize":8,
             "hasChunkMetadataPages":true,"pageDirectory":[0],"serializedSize":{},"uncompressedSize":{},
             "adaptiveLevelSizes":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}}]"#,
        brick.len(),
        brick.len() - 24
    );
    std::fs::write(dir.join("LayerStatus"), status)
}
