//! A tour of the `rasterpack-volp` API, using only what its documentation shows: open a VOLP
//! file, look at its header, validate it, read the first level as physical values, compute
//! statistics as the body streams, and stream that level into a new VOLP file.
//!
//! `cargo run -p rasterpack-volp --example volp_tour -- FILE.volp` (without a file, the tour
//! writes a small demo volume into the system's temporary directory and uses that).

use rasterpack_volp::{ArrayRequest, ArraySink, NdArray, Output, Region, VolpFile, VolpWriteOptions, VolpWriter};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = match std::env::args().nth(1) {
        Some(p) => std::path::PathBuf::from(p),
        None => write_demo()?,
    };

    // Open: the prefix and header are read and every header rule is checked.
    let file = VolpFile::open(&path)?;
    let h = file.header();
    println!("{}", path.display());
    println!("  dtype {}, shape [levels, lat, lon] {:?}", h.dtype.name(), h.shape);
    println!("  physical = stored * {} + {}", h.scale, h.offset);
    if let Some(v) = h.metadata.variable_name() {
        println!("  variable {v}");
    }
    if let Some(levels) = h.metadata.level_values() {
        println!("  levels {levels:?}");
    }

    // Validate: every rule, the whole body decoded as it streams.
    let report = file.validate();
    println!("  {}", if report.is_valid(false) { "valid" } else { "INVALID" });
    for f in report.findings.iter() {
        println!("    {} {} {}", f.severity.as_str(), f.code, f.message);
    }
    if !report.is_valid(false) {
        return Ok(());
    }

    // Read the first level (a region) as float64 physical values.
    let first_level = Region::from_start_size(&[0, 0, 0], &[1, h.shape[1], h.shape[2]])?;
    let level = file.read(
        &ArrayRequest::default()
            .with_region(first_level.clone())
            .with_physical(true),
    )?;
    let values = level.to_vec::<f64>()?;
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let mean = finite.iter().sum::<f64>() / finite.len().max(1) as f64;
    println!("  level 0: {} values, mean {mean:.3} (physical)", values.len());

    // Statistics of every stored value, without holding the volume.
    let stats = file.stats()?;
    println!(
        "  all levels: {} values, stored min {:?} max {:?}",
        stats.count, stats.min, stats.max
    );

    // Stream the first level into a new VOLP file as it decodes.
    let out_path = std::env::temp_dir().join("volp_tour_level0.volp");
    let out = std::fs::File::create(&out_path)?;
    let mut writer = VolpWriter::new(Output::File(&out), VolpWriteOptions::default());
    file.stream(&ArrayRequest::default().with_region(first_level), &mut writer)?;
    writer.finish()?;
    let copy = VolpFile::open(&out_path)?;
    println!(
        "  wrote {} ({:?}, {} bytes of body)",
        out_path.display(),
        copy.header().shape,
        copy.body_len()
    );
    Ok(())
}

/// A 3-level float32 volume with scale 0.5, written with `VolpWriter::encode`.
fn write_demo() -> Result<std::path::PathBuf, Box<dyn std::error::Error>> {
    let (levels, rows, cols) = (3u64, 40u64, 60u64);
    let values: Vec<f32> = (0..levels * rows * cols)
        .map(|i| ((i % cols) as f32 * 0.1).sin() * 10.0 + (i / (rows * cols)) as f32)
        .collect();
    let volume = NdArray::from_vec(vec![levels, rows, cols], values)?;
    let mut options = VolpWriteOptions {
        scale: Some(0.5),
        ..VolpWriteOptions::default()
    };
    options.metadata.insert("variable".into(), "demo".into());
    options.metadata.insert("levels".into(), vec![1000, 850, 500].into());
    let path = std::env::temp_dir().join("volp_tour_demo.volp");
    std::fs::write(&path, VolpWriter::encode(&volume, &options)?)?;
    Ok(path)
}
