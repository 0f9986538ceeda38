//! A tour of `rasterpack-gvrs` through its public API: write a grid to a file as its rows
//! arrive, open it, list and validate it, read it whole and by window, and stream it through
//! a sink of your own without holding it in memory.
//!
//! ```text
//! cargo run -p rasterpack-gvrs --example gvrs_tour [FILE.gvrs]
//! ```
//!
//! With a file argument, the tour reads that file instead of writing its own.

use std::fs::File;

use rasterpack_gvrs::{
    ArrayFile, ArrayInfo, ArrayRequest, ArraySink, DType, GvrsCellValue, GvrsCompression, GvrsFile, GvrsWriter,
    GvrsWriterOptions, Output, Region, Result,
};

/// Write a 1000 x 1500 float32 terrain, 200 rows at a time, with Gridfour 2026's codecs.
fn write_sample(path: &std::path::Path) -> Result<()> {
    let (rows, cols) = (1000u64, 1500u64);
    let file = File::create(path).map_err(|e| rasterpack_gvrs::Error::io("creating the sample", &e))?;
    let options = GvrsWriterOptions::default()
        .with_tile(100, 150)
        .with_compression(GvrsCompression::gridfour_2026())
        .with_element_name("elevation");
    let mut writer = GvrsWriter::new(Output::File(&file), options);
    writer.begin(&ArrayInfo::new(DType::F32, vec![rows, cols]))?;
    for first in (0..rows).step_by(200) {
        let mut band = Vec::with_capacity((200 * cols * 4) as usize);
        for r in first..first + 200 {
            for c in 0..cols {
                let h = 800.0 + 300.0 * ((r as f32) / 90.0).sin() * ((c as f32) / 140.0).cos();
                band.extend_from_slice(&h.to_le_bytes());
            }
        }
        writer.write_at(first * cols * 4, &band)?;
    }
    writer.finish()
}

/// A sink that never holds the grid: it keeps the minimum, maximum and count of the values.
#[derive(Default)]
struct Extremes {
    min: f32,
    max: f32,
    count: u64,
}

impl ArraySink for Extremes {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        if info.dtype != DType::F32 {
            return Err(rasterpack_gvrs::Error::usage("this sink takes float32 values"));
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

fn main() -> Result<()> {
    let path = match std::env::args_os().nth(1) {
        Some(p) => p.into(),
        None => {
            let p = std::env::temp_dir().join("gvrs_tour.gvrs");
            write_sample(&p)?;
            println!("wrote {}", p.display());
            p
        }
    };

    let file = GvrsFile::open(&path)?;
    let g = file.geometry;
    println!(
        "{} x {} cells in {} x {} tiles; codecs {:?}",
        g.rows,
        g.cols,
        g.tile_rows,
        g.tile_cols,
        file.header.codecs.iter().map(|c| c.lossy()).collect::<Vec<_>>()
    );
    for array in file.arrays()? {
        println!(
            "  element {:?}: {} {:?}",
            array.name.unwrap_or_default(),
            array.dtype.name(),
            array.shape
        );
    }

    let report = file.validate();
    println!("valid: {} ({} findings)", report.is_valid(true), report.findings.len());

    let name = file.elements[0].name();
    // A window of 3 x 4 cells at row 10, column 20, in memory and typed.
    let window = Region::from_start_size(&[10, 20], &[3, 4])?;
    let part = file.read(&ArrayRequest::for_element(&name).with_region(window))?;
    match part.dtype {
        DType::F32 => println!("window {:?}: {:?}", part.shape, part.to_vec::<f32>()?),
        DType::I32 => println!("window {:?}: {:?}", part.shape, part.to_vec::<i32>()?),
        DType::I16 => println!("window {:?}: {:?}", part.shape, part.to_vec::<i16>()?),
        other => println!("window of {}", other.name()),
    }
    match file.cell(&name, 10, 20)? {
        GvrsCellValue::Float(v) => println!("cell (10, 20) = {v}"),
        other => println!("cell (10, 20) = {other:?}"),
    }

    // The whole element through a sink: bands of tile rows, never the whole grid.
    if file.elements[0].dtype(false) == DType::F32 {
        let mut extremes = Extremes::default();
        file.stream(&ArrayRequest::for_element(&name), &mut extremes)?;
        extremes.finish()?;
        println!(
            "{} values streamed, from {} to {}",
            extremes.count, extremes.min, extremes.max
        );
    }

    // The same through the format-independent interface every rasterpack format offers.
    let any: &dyn ArrayFile = &file;
    println!(
        "as an ArrayFile: format {}, {} array(s)",
        any.format_name(),
        any.arrays()?.len()
    );
    Ok(())
}
