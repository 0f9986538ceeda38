//! A tour of `rasterpack-udf` through its public API: write a UDF file, open it, list its
//! arrays, read a table whole and by region with typed access, read text and JSON, validate.
//!
//! `cargo run -p rasterpack-udf --example udf_tour` (writes a file in the temporary
//! directory), or `cargo run -p rasterpack-udf --example udf_tour -- FILE.udf` to look at a
//! file of your own.

use rasterpack_udf::{ArrayRequest, Hint, Region, Result, TableSpec, UdfEncoding, UdfFile, UdfWriter};
use serde_json::json;

fn main() -> Result<()> {
    let path = match std::env::args().nth(1) {
        Some(p) => std::path::PathBuf::from(p),
        None => write_example()?,
    };

    // Open: the structure is walked, the data stays on disk until read.
    let file = UdfFile::open(&path)?;
    println!("{}: {} dataset(s)", path.display(), file.datasets().len());
    for info in file.arrays()? {
        println!(
            "  {:<24} {:<8} {:?}",
            info.name.unwrap_or_default(),
            info.dtype.name(),
            info.shape
        );
    }

    // Validate: every rule and every table's content, all findings.
    let report = file.validate();
    println!(
        "valid: {} ({} finding(s))",
        report.is_valid(false),
        report.findings.len()
    );
    for f in report.findings.iter().take(5) {
        println!("  {} {} at {:?}: {}", f.severity.as_str(), f.code, f.offset, f.message);
    }

    if let Ok((_, grid)) = file.find("root/elevation") {
        // A table whole, with typed access (the dtype must match: f32 here).
        let whole = file.read(&ArrayRequest::for_element("root/elevation"))?;
        let values = whole.as_slice::<f32>()?;
        println!(
            "elevation {:?}: first row {:?}",
            whole.shape,
            &values[..whole.shape[1] as usize]
        );
        // A region: rows 1..3, columns 2..5, in the same (C) axis order as the shape. Only
        // the bytes of the region are read.
        let region = Region::from_start_size(&[1, 2], &[2, 3])?;
        let part = file.read(&ArrayRequest::for_element("root/elevation").with_region(region))?;
        println!("elevation[1:3, 2:5] = {:?}", part.to_vec::<f32>()?);
        println!("stored as {} (hint {})", grid.prim.name(), grid.hint.name());
    }
    if let Ok((_, title)) = file.find("root/title") {
        println!("title: {:?}", file.text(title)?);
    }
    if let Ok((_, meta)) = file.find("root/meta") {
        println!("meta: {}", file.json(meta)?);
    }
    Ok(())
}

/// A small file: a 4 x 6 float32 grid, a text title, JSON metadata, and a child dataset with
/// points and an INDEX table into them.
fn write_example() -> Result<std::path::PathBuf> {
    let mut w = UdfWriter::new("TOUR")?;
    let root = w.add_dataset("ROOT")?;
    let child = w.add_dataset("MESH")?;
    w.set_root(root);
    let grid: Vec<f32> = (0..24).map(|i| i as f32 * 0.5).collect();
    w.add(root, TableSpec::array("elevation", &[4, 6], &grid))?;
    w.add(root, TableSpec::text("title", "a tour of UDF", UdfEncoding::Utf8))?;
    w.add(
        root,
        TableSpec::json("meta", &json!({"units": "m", "source": "udf_tour"})),
    )?;
    w.add(root, TableSpec::link("mesh", Some(child)))?;
    let points = [0.0f32, 0.0, 1.0, 0.0, 0.0, 1.0];
    w.add(
        child,
        TableSpec::array("points", &[3], &points).with_hint(Hint::Coord, &[2]),
    )?;
    w.add(
        child,
        TableSpec::array("triangle", &[3], &[0u16, 1, 2])
            .with_hint(Hint::Index, &[])
            .index_into("points"),
    )?;
    let path = std::env::temp_dir().join("rasterpack-udf-tour.udf");
    std::fs::write(&path, w.to_bytes()?).map_err(|e| rasterpack_udf::Error::io("writing the example", &e))?;
    Ok(path)
}
