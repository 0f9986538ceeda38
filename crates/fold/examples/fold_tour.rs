//! A tour of the public API: open a FOLD file (or build one in memory when no path is given),
//! validate it, list its chunks and arrays, read an array whole and a region of it, read a
//! JSON chunk, and write a new file with one more chunk.
//!
//! `cargo run -p rasterpack-fold --example fold_tour -- [FILE.fold]`

use rasterpack_fold::pjson::Value;
use rasterpack_fold::{
    ArrayRequest, FoldBuilder, FoldChunkOptions, FoldCompression, FoldFile, NdArray, Region, Result,
};

fn demo_file() -> Result<Vec<u8>> {
    let grid = NdArray::from_vec(vec![4, 5], (0..20).map(|v| v as f32 * 0.5).collect())?;
    let mut b = FoldBuilder::new();
    b.metadata("site", Value::str("demo"))?;
    b.add_json(
        "config",
        &Value::object(vec![("units", Value::str("m")), ("scale", Value::Float(0.5))]),
        FoldChunkOptions::default(),
    )?;
    b.add_npz(
        "nuclear_arrays",
        &[("grid", &grid)],
        FoldChunkOptions {
            compression: FoldCompression::Zstd(3),
            ecc: Some(16),
        },
    )?;
    b.to_bytes()
}

fn main() -> Result<()> {
    let file = match std::env::args().nth(1) {
        Some(path) => FoldFile::open(path)?,
        None => FoldFile::from_bytes(demo_file()?)?,
    };

    let report = file.validate();
    println!("valid: {}", report.is_valid(false));
    for f in report.findings.iter() {
        println!("  {} {}: {}", f.severity.as_str(), f.code, f.message);
    }

    for c in file.chunks() {
        println!(
            "chunk {:?}: {} {} stored / {} decoded bytes, ecc {}",
            c.name, c.ctype, c.comp_len, c.uncomp_len, c.ecc_algo
        );
        if c.ctype == "JSON" {
            match file.read_json(&c.name) {
                Ok(v) => println!("  {}", v.to_serde()),
                Err(e) => println!("  unreadable: {e}"),
            }
        }
    }

    let arrays = file.arrays()?;
    for a in &arrays {
        println!("array {:?}: {} {:?}", a.name, a.dtype.name(), a.shape);
    }
    let Some(first) = arrays.first() else {
        println!("no arrays");
        return Ok(());
    };
    let name = first.name.clone().unwrap_or_default();
    let whole = file.read(&ArrayRequest::for_element(name.clone()))?;
    let values = whole.to_f64();
    let (min, max) = values.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
        (lo.min(v), hi.max(v))
    });
    println!("{name}: {} values in {min}..={max}", values.len());

    // The first half of the first axis.
    if let Some(&rows) = whole.shape.first() {
        let mut start = vec![0; whole.shape.len()];
        let mut size = whole.shape.clone();
        size[0] = rows.div_ceil(2);
        start[0] = 0;
        let half =
            file.read(&ArrayRequest::for_element(name.clone()).with_region(Region::from_start_size(&start, &size)?))?;
        println!("first half: shape {:?}", half.shape);
    }

    // A new file holding the array again, uncompressed.
    let mut b = FoldBuilder::new();
    b.add_npz(
        "copy",
        &[("values", &whole)],
        FoldChunkOptions {
            compression: FoldCompression::None,
            ecc: None,
        },
    )?;
    let again = FoldFile::from_bytes(b.to_bytes()?)?;
    println!(
        "written again: {:?}",
        again.arrays()?.iter().map(|a| a.name.clone()).collect::<Vec<_>>()
    );
    Ok(())
}
