//! `rasterpack convert IN out.vds` and `convert IN dir --to vds` (issue 21): what is written
//! passes `validate --strict` and converts back to the same `.npy`; a bad request is exit 2
//! with nothing left at the target; a 4 GiB volume is written within the 256 MiB bound.

mod support;

use std::path::Path;

use support::{check, s, scratch};

/// A `.npy` of `dtype` (numpy descr) and `shape` holding `data`.
fn npy(path: &Path, descr: &str, shape: &[u64], data: &[u8]) {
    let shape_s = match shape {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_s}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(header.len() as u16).to_le_bytes());
    b.extend_from_slice(header.as_bytes());
    b.extend_from_slice(data);
    std::fs::write(path, b).unwrap();
}

fn floats(n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|i| {
            let v = if i % 97 < 40 {
                0.5
            } else {
                ((i * 7919) % 1013) as f32 / 17.0 - 30.0
            };
            v.to_le_bytes()
        })
        .collect()
}

fn npy_data(path: &Path) -> Vec<u8> {
    let b = std::fs::read(path).unwrap();
    let hl = u16::from_le_bytes([b[8], b[9]]) as usize;
    b[10 + hl..].to_vec()
}

#[test]
fn container_and_directory_round_trip_through_the_cli() {
    let dir = scratch("vds_write", "round_trip");
    let data = floats(6 * 50 * 70);
    let input = dir.join("in.npy");
    npy(&input, "<f4", &[6, 50, 70], &data);
    for comp in ["none", "rle", "zip"] {
        for (out, extra) in [
            (dir.join(format!("{comp}.vds")), vec![]),
            (dir.join(format!("{comp}_dir")), vec!["--to", "vds"]),
        ] {
            let mut args = vec![
                "convert",
                s(&input),
                s(&out),
                "--compress",
                comp,
                "--brick-size",
                "32",
                "--margin",
                "2",
                "--lods",
                "2",
            ];
            args.extend(extra);
            check(&args, 0);
            check(&["validate", "--strict", s(&out)], 0);
            for lod in ["0", "2"] {
                let back = dir.join(format!("back_{comp}_{lod}.npy"));
                check(&["convert", s(&out), s(&back), "--lod", lod, "--force"], 0);
                if lod == "0" {
                    assert!(npy_data(&back) == data, "{}: values differ", out.display());
                } else {
                    // LOD 2: every 4th sample along each axis.
                    let got = npy_data(&back);
                    assert_eq!(got.len(), 2 * 13 * 18 * 4);
                    assert_eq!(
                        &got[4 * (13 * 18 + 18 + 1)..][..4],
                        &data[4 * (4 * 50 * 70 + 4 * 70 + 4)..][..4]
                    );
                }
            }
        }
    }
    // A VDS source keeps its axes and no-value when converted to VDS again.
    let src = dir.join("axes.vds");
    check(
        &[
            "convert",
            s(&input),
            s(&src),
            "--axis",
            "Time:ms:0:138",
            "--axis",
            "Crossline::1:50",
            "--axis",
            "Inline::10:15",
            "--no-value",
            "-999",
            "--metadata",
            "Survey/Name=test",
        ],
        0,
    );
    let again = dir.join("again");
    check(&["convert", s(&src), s(&again), "--to", "vds"], 0);
    let inspect = check(&["inspect", "--json", s(&again)], 0).stdout();
    assert!(
        inspect.contains("\"Time\"") && inspect.contains("\"ms\"") && inspect.contains("138"),
        "{inspect}"
    );
    assert!(inspect.contains("-999"), "{inspect}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_requests_exit_2_and_leave_nothing() {
    let dir = scratch("vds_write", "bad");
    let input = dir.join("in.npy");
    npy(&input, "<f4", &[4, 10, 10], &floats(400));
    let int16 = dir.join("i16.npy");
    npy(&int16, "<i2", &[4, 10], &[0u8; 80]);
    let five = dir.join("five.npy");
    npy(&five, "<f4", &[1, 2, 1, 2, 2], &floats(8));
    let out = dir.join("out.vds");
    let outdir = dir.join("outdir");
    for (args, says) in [
        (vec!["convert", s(&int16), s(&out)], "int16"),
        (vec!["convert", s(&int16), s(&outdir), "--to", "vds"], "int16"),
        (vec!["convert", s(&five), s(&out)], "1-D to 4-D"),
        (vec!["convert", s(&input), s(&out), "--margin", "17"], "--margin"),
        (
            vec![
                "convert",
                s(&input),
                s(&outdir),
                "--to",
                "vds",
                "--margin",
                "40",
                "--brick-size",
                "128",
            ],
            "--margin",
        ),
        (
            vec!["convert", s(&input), s(&out), "--brick-size", "48"],
            "--brick-size",
        ),
        (
            vec!["convert", s(&input), s(&out), "--compress", "wavelet"],
            "none, rle or zip",
        ),
        (vec!["convert", s(&input), s(&out), "--lods", "13"], "--lods"),
        (
            vec!["convert", s(&input), s(&out), "--value-range", "1,1"],
            "--value-range",
        ),
        (vec!["convert", s(&input), s(&out), "--axis", "Sample:ms:0:1"], "--axis"),
        (
            vec!["convert", s(&input), s(&dir.join("x.npy")), "--brick-size", "64"],
            "VDS output only",
        ),
    ] {
        let r = check(&args, 2);
        assert!(r.stderr().contains(says), "{args:?}: {}", r.stderr());
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.ends_with(".npy"))
            .collect();
        assert!(left.is_empty(), "{args:?} left {left:?}");
    }
    // An existing output needs --force (a file, and a directory).
    check(&["convert", s(&input), s(&out)], 0);
    check(&["convert", s(&input), s(&outdir), "--to", "vds"], 0);
    check(&["convert", s(&input), s(&out)], 2);
    check(&["convert", s(&input), s(&outdir), "--to", "vds"], 2);
    check(
        &[
            "convert",
            s(&input),
            s(&outdir),
            "--to",
            "vds",
            "--force",
            "--compress",
            "rle",
        ],
        0,
    );
    check(&["validate", "--strict", s(&outdir)], 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A 4 GiB float32 volume (16384 x 256 x 256) converts to a Zip `.vds` within 256 MiB of peak
/// RSS: the writer holds one brick row (64 x 256 x 256 floats) and its encoded bricks. Needs
/// about 7 GiB of free disk and a minute; run with `--ignored`.
#[test]
#[ignore]
fn a_4_gib_volume_writes_within_the_memory_bound() {
    use std::io::Write;
    let dir = scratch("vds_write", "big");
    let input = dir.join("big.npy");
    let (z, y, x) = (16384u64, 256u64, 256u64);
    {
        let mut f = std::io::BufWriter::with_capacity(1 << 22, std::fs::File::create(&input).unwrap());
        let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({z}, {y}, {x}), }}");
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        f.write_all(b"\x93NUMPY\x01\x00").unwrap();
        f.write_all(&(header.len() as u16).to_le_bytes()).unwrap();
        f.write_all(header.as_bytes()).unwrap();
        let mut row = vec![0u8; (x * 4) as usize];
        for k in 0..z * y {
            for (i, c) in row.chunks_exact_mut(4).enumerate() {
                let v = (((k * 31 + i as u64 * 17) % 4093) as f32) * 0.01;
                c.copy_from_slice(&v.to_le_bytes());
            }
            f.write_all(&row).unwrap();
        }
        f.flush().unwrap();
    }
    let out = dir.join("big.vds");
    check(&["convert", s(&input), s(&out), "--compress", "zip"], 0);
    std::fs::remove_file(&input).unwrap();
    check(&["validate", s(&out)], 0);
    let _ = std::fs::remove_dir_all(&dir);
}

fn bytes_u16(n: usize) -> Vec<u8> {
    (0..n).flat_map(|i| ((i * 37 % 65535) as u16).to_le_bytes()).collect()
}

/// `--channel NAME=PATH[:ELEMENT]`: channels beside IN's array, each its own format, read back
/// by name (`--element`), every LOD, in both storage kinds; a channel of another shape or an
/// unstorable dtype is exit 2 naming it, with nothing at the target.
#[test]
fn channels_from_other_inputs_round_trip_and_are_checked_first() {
    let dir = scratch("vds_write", "channels");
    let shape = [5u64, 30, 44];
    let n = 5 * 30 * 44;
    let primary = floats(n);
    let vel = bytes_u16(n);
    let mask: Vec<u8> = (0..n).map(|i| (i % 3 == 0) as u8).collect();
    let (a, b, c) = (dir.join("a.npy"), dir.join("vel.npy"), dir.join("mask.npy"));
    npy(&a, "<f4", &shape, &primary);
    npy(&b, "<u2", &shape, &vel);
    npy(&c, "|b1", &shape, &mask);
    let vel_spec = format!("Velocity={}", s(&b));
    let mask_spec = format!("Mask={}", s(&c));
    for (out, extra) in [
        (dir.join("multi.vds"), vec![]),
        (dir.join("multi_dir"), vec!["--to", "vds"]),
    ] {
        let mut args = vec![
            "convert",
            s(&a),
            s(&out),
            "--channel",
            &vel_spec,
            "--channel",
            &mask_spec,
            "--brick-size",
            "32",
            "--lods",
            "1",
        ];
        args.extend(extra);
        check(&args, 0);
        check(&["validate", "--strict", s(&out)], 0);
        for (name, want) in [("Amplitude", &primary), ("Velocity", &vel), ("Mask", &mask)] {
            let back = dir.join(format!("back_{name}.npy"));
            check(&["convert", s(&out), s(&back), "--element", name, "--force"], 0);
            assert!(npy_data(&back) == *want, "{}: channel {name} differs", s(&out));
            // LOD 1 is every other voxel of the channel's own array.
            check(
                &["convert", s(&out), s(&back), "--element", name, "--lod", "1", "--force"],
                0,
            );
            let e = want.len() / n;
            let mut half = Vec::new();
            for z in (0..5).step_by(2) {
                for y in (0..30).step_by(2) {
                    for x in (0..44).step_by(2) {
                        let i = (z * 30 + y) * 44 + x;
                        half.extend_from_slice(&want[i * e..i * e + e]);
                    }
                }
            }
            assert!(npy_data(&back) == half, "{}: channel {name} LOD 1 differs", s(&out));
        }
    }
    // Refused before anything is written: another shape, a dtype VDS does not store, a name
    // given twice, a path that is not there.
    let other = dir.join("other.npy");
    npy(&other, "<f4", &[5, 30, 43], &floats(5 * 30 * 43));
    let i16s = dir.join("i16.npy");
    npy(&i16s, "<i2", &shape, &vec![0u8; n * 2]);
    for (spec, says) in [
        (format!("Other={}", s(&other)), "\"Other\""),
        (format!("Codes={}", s(&i16s)), "int16"),
        (format!("Amplitude={}", s(&b)), "Amplitude"),
        ("Gone=/nonexistent/x.npy".to_string(), "x.npy"),
    ] {
        for (out, extra) in [
            (dir.join("refused.vds"), vec![]),
            (dir.join("refused_dir"), vec!["--to", "vds"]),
        ] {
            let mut args = vec!["convert", s(&a), s(&out), "--channel", &spec];
            args.extend(extra);
            let r = check(&args, 2);
            assert!(r.stderr().contains(says), "{spec}: {}", r.stderr());
            assert!(!out.exists(), "{spec}: {} was written", s(&out));
        }
    }
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".rasterpack-"))
        .collect();
    assert!(left.is_empty(), "left {left:?}");
    // --channel is a VDS flag; a stream output is refused.
    check(&["convert", s(&a), s(&dir.join("x.npy")), "--channel", &vel_spec], 2);
    check(&["convert", s(&a), "-", "--to", "vds", "--channel", &vel_spec], 2);
}

/// `--all`: every array of a multi-array input (here a GVRS of three float elements) is a
/// channel, the first the primary, each read back by its element name.
#[test]
fn all_writes_every_array_of_the_input_as_a_channel() {
    use rasterpack_common::{DType, NdArray, WriteOptions};
    let dir = scratch("vds_write", "all");
    let gvrs = dir.join("three.gvrs");
    let arrays: Vec<NdArray> = ["depth", "dip", "azimuth"]
        .iter()
        .enumerate()
        .map(|(k, name)| {
            let data: Vec<u8> = (0..40 * 50)
                .flat_map(|i| ((i * (k + 3)) as f32 / 7.0).to_le_bytes())
                .collect();
            let mut a = NdArray::new(DType::F32, vec![40, 50], data).unwrap();
            a.name = Some(name.to_string());
            a
        })
        .collect();
    rasterpack::format_by_name("gvrs")
        .unwrap()
        .save_arrays(&arrays, &Default::default(), &gvrs, &WriteOptions::default())
        .unwrap();
    let out = dir.join("all.vds");
    check(&["convert", s(&gvrs), s(&out), "--all"], 0);
    check(&["validate", "--strict", s(&out)], 0);
    let inspect = check(&["inspect", "--json", s(&out)], 0).stdout();
    for a in &arrays {
        let name = a.name.as_deref().unwrap();
        assert!(inspect.contains(&format!("\"{name}\"")), "{name} not in {inspect}");
        let back = dir.join(format!("{name}.npy"));
        check(&["convert", s(&out), s(&back), "--element", name], 0);
        assert!(npy_data(&back) == a.data, "channel {name} differs");
    }
    // --all names the channels itself: no --element.
    check(
        &["convert", s(&gvrs), s(&dir.join("e.vds")), "--all", "--element", "dip"],
        2,
    );
}

/// SIGINT, SIGTERM and SIGHUP in the middle of writing the directory layout: the process ends
/// by the signal, and neither the dataset nor its temporary directory is left.
#[cfg(unix)]
#[test]
fn a_signal_mid_write_of_a_directory_leaves_nothing() {
    use std::os::unix::process::ExitStatusExt;
    use std::time::{Duration, Instant};
    let dir = scratch("vds_write", "signal");
    let input = dir.join("noise.npy");
    // 64 MiB of noise through Zip with two LODs: about a second of work even on a fast build.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let n = 64 * 512 * 512;
    let data: Vec<u8> = (0..n)
        .flat_map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / 16_777_216.0).to_le_bytes()
        })
        .collect();
    npy(&input, "<f4", &[64, 512, 512], &data);
    drop(data);
    let temps = || -> Vec<String> {
        std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".rasterpack-"))
            .collect()
    };
    for (name, signo) in [("INT", 2), ("TERM", 15), ("HUP", 1)] {
        let out = dir.join(format!("out-{name}"));
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_rasterpack"))
            .args([
                "convert",
                s(&input),
                s(&out),
                "--to",
                "vds",
                "--brick-size",
                "32",
                "--lods",
                "2",
            ])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // The temporary directory exists from the first brick until the rename.
        let start = Instant::now();
        while temps().is_empty() {
            assert!(
                child.try_wait().unwrap().is_none(),
                "SIG{name}: convert ended before its temporary directory was seen"
            );
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no temporary directory appeared"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(50));
        let sent = std::process::Command::new("kill")
            .args([format!("-{name}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let status = child.wait().unwrap();
        assert_eq!(
            status.signal(),
            Some(signo),
            "SIG{name}: ended by the signal ({status:?})"
        );
        assert_eq!(temps(), Vec::<String>::new(), "SIG{name} left a temporary directory");
        assert!(!out.exists(), "SIG{name}: a partial dataset at the target");
    }
}

/// A brick row larger than the working set (a 2^20 x 2^20 x 64 volume, brick 256: one row of
/// bricks is 256 x 2^20 x 2^20 bytes) is a request the writer cannot serve: exit 2 before
/// anything is written, in both storage kinds. The source is a Zarr array with no chunk
/// written (every value the fill value), so the test reads a few hundred bytes.
#[test]
fn a_brick_row_larger_than_the_working_set_is_refused_first() {
    let dir = scratch("vds_write", "brick_row");
    let zarr = dir.join("huge.zarr");
    std::fs::create_dir_all(&zarr).unwrap();
    std::fs::write(
        zarr.join("zarr.json"),
        r#"{"zarr_format":3,"node_type":"array","shape":[64,1048576,1048576],"data_type":"uint8",
"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[64,256,256]}},
"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},
"fill_value":0,"codecs":[{"name":"bytes"}],"attributes":{}}"#,
    )
    .unwrap();
    for (out, extra) in [
        (dir.join("huge.vds"), vec![]),
        (dir.join("huge_dir"), vec!["--to", "vds"]),
    ] {
        let mut args = vec!["convert", s(&zarr), s(&out), "--brick-size", "256", "--allow-expansion"];
        args.extend(extra);
        let r = check(&args, 2);
        assert!(r.stderr().contains("working set"), "{}", r.stderr());
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != "huge.zarr")
            .collect();
        assert!(left.is_empty(), "left {left:?}");
    }
}

/// The summary of `inspect --json` of a VDS: (axes, metadata).
fn vds_summary(path: &Path) -> (serde_json::Value, serde_json::Value) {
    let out = check(&["inspect", "--json", s(path)], 0).stdout();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let sm = &v["files"][0]["summary"];
    (sm["axes"].clone(), sm["metadata"].clone())
}

fn has_item(metadata: &serde_json::Value, category: &str, name: &str, value: serde_json::Value) -> bool {
    metadata
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["category"] == category && m["name"] == name && m["value"] == value)
}

/// Axes and metadata from the input's attributes: a GVRS grid's coordinates become the axes
/// (x0/y0 and the cell size of testdata/gvrs/crafted_compressed.gvrs: 100 + 0.5 per column,
/// 50 - 0.5 per row over 8 x 8 cells) and its element attributes metadata of category `gvrs`;
/// VOLP header fields metadata of category `volp`; a Zarr array's `dimension_names` the axis
/// names; `--axis` and `--metadata` override them.
#[test]
fn axes_and_metadata_come_from_the_source_attributes() {
    use serde_json::json;
    let dir = scratch("vds_write", "attrs");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let gvrs = root.join("testdata/gvrs/crafted_compressed.gvrs");
    let out = dir.join("g.vds");
    check(&["convert", s(&gvrs), s(&out), "--element", "f"], 0);
    check(&["validate", "--strict", s(&out)], 0);
    let (axes, md) = vds_summary(&out);
    assert_eq!(
        axes,
        json!([
            {"name": "X", "unit": "", "num_samples": 8, "coordinate_min": 100.0, "coordinate_max": 103.5},
            {"name": "Y", "unit": "", "num_samples": 8, "coordinate_min": 50.0, "coordinate_max": 46.5},
        ])
    );
    assert!(has_item(&md, "gvrs", "type", json!("FLOAT")), "{md}");
    assert!(has_item(&md, "gvrs", "fill", json!("NaN")), "{md}");
    // --axis and --metadata win.
    let over = dir.join("g2.vds");
    check(
        &[
            "convert",
            s(&gvrs),
            s(&over),
            "--element",
            "f",
            "--axis",
            "Easting:m:0:7",
            "--axis",
            "Northing:m:0:7",
            "--metadata",
            "gvrs/type=mine",
        ],
        0,
    );
    let (axes, md) = vds_summary(&over);
    assert_eq!(axes[0]["name"], "Easting");
    assert_eq!(axes[1]["unit"], "m");
    assert!(has_item(&md, "gvrs", "type", json!("mine")), "{md}");
    assert!(!has_item(&md, "gvrs", "type", json!("FLOAT")), "{md}");
    // VOLP header fields.
    let volp = root.join("testdata/volp/cloud_2x8x8_float32.volp");
    let out = dir.join("v.vds");
    check(&["convert", s(&volp), s(&out)], 0);
    let (_, md) = vds_summary(&out);
    assert!(has_item(&md, "volp", "variable", json!("cloud_density")), "{md}");
    assert!(has_item(&md, "volp", "levels", json!("[850,700]")), "{md}");
    // A Zarr array's dimension names (C order; a null one keeps the default) and attributes.
    let zarr = dir.join("named.zarr");
    std::fs::create_dir_all(&zarr).unwrap();
    std::fs::write(
        zarr.join("zarr.json"),
        r#"{"zarr_format":3,"node_type":"array","shape":[3,4,5],"data_type":"float32",
"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[3,4,5]}},
"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},
"fill_value":1.5,"codecs":[{"name":"bytes","configuration":{"endian":"little"}}],
"dimension_names":["depth",null,"x"],"attributes":{"survey":"North Sea"}}"#,
    )
    .unwrap();
    let out = dir.join("z.vds");
    check(&["convert", s(&zarr), s(&out)], 0);
    let (axes, md) = vds_summary(&out);
    let names: Vec<&str> = axes
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["x", "Crossline", "depth"]);
    assert!(has_item(&md, "zarr", "survey", json!("North Sea")), "{md}");
    assert!(
        !md.as_array().unwrap().iter().any(|m| m["name"] == "codecs"),
        "storage facts are not metadata: {md}"
    );
}

/// `$RASTERPACK_PYTHON` (a Python with openvds==3.4.9, `.ci/venv.sh`), or a visible skip
/// (a failure under CI=true).
fn openvds_python() -> Option<std::path::PathBuf> {
    match std::env::var_os("RASTERPACK_PYTHON") {
        Some(p) if !p.is_empty() => Some(p.into()),
        _ => {
            assert!(
                std::env::var_os("CI").is_none_or(|v| v != "true"),
                "the OpenVDS check needs RASTERPACK_PYTHON (.ci/venv.sh), and CI=true does not allow the skip"
            );
            rasterpack_common::testkit::skip("needs openvds: RASTERPACK_PYTHON is not set (source .ci/venv.sh)");
            None
        }
    }
}

/// What OpenVDS reads of a VDS: `{"axes": [[name, unit, min, max], ...], "metadata":
/// {"CATEGORY/NAME": value}}` for the items `wanted` names as `[category, name, type]`.
fn openvds_view(python: &Path, vds: &Path, wanted: &serde_json::Value) -> serde_json::Value {
    let code = r#"
import json, sys, openvds
h = openvds.open(sys.argv[1], "")
layout = openvds.getAccessManager(h).volumeDataLayout
axes = [[a.name, a.unit, a.coordinateMin, a.coordinateMax]
        for a in (layout.getAxisDescriptor(d) for d in range(layout.dimensionality))]
md = {}
for cat, name, t in json.loads(sys.argv[2]):
    if getattr(layout, "isMetadata%sAvailable" % t)(cat, name):
        md[cat + "/" + name] = getattr(layout, "getMetadata%s" % t)(cat, name)
print(json.dumps({"axes": axes, "metadata": md}))
"#;
    let out = std::process::Command::new(python)
        .args(["-c", code, s(vds), &wanted.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A FOLD file's file-level metadata (the index's `metadata` object without its hashes,
/// `version`, `created_at_unix`) becomes VDS metadata of category `fold`, nested keys dotted,
/// as rasterpack's reader and OpenVDS's read it back; `--metadata` replaces an item.
#[test]
fn fold_file_metadata_becomes_vds_metadata() {
    use serde_json::json;
    let dir = scratch("vds_write", "fold_md");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let fold = root.join("testdata/fold/sample.fold");
    let out = dir.join("f.vds");
    check(
        &[
            "convert",
            s(&fold),
            s(&out),
            "--element",
            "nuclear_arrays/grid",
            "--metadata",
            "fold/metadata.tags.run=mine",
        ],
        0,
    );
    check(&["validate", "--strict", s(&out)], 0);
    let (_, md) = vds_summary(&out);
    assert!(
        has_item(&md, "fold", "metadata.model_type", json!("RasterpackSample")),
        "{md}"
    );
    assert!(has_item(&md, "fold", "metadata.protection", json!("off")), "{md}");
    assert!(has_item(&md, "fold", "metadata.tags.note", json!("café")), "{md}");
    assert!(has_item(&md, "fold", "metadata.tags.run", json!("mine")), "{md}");
    assert!(!has_item(&md, "fold", "metadata.tags.run", json!("sample")), "{md}");
    assert!(has_item(&md, "fold", "version", json!("1.2.0")), "{md}");
    assert!(has_item(&md, "fold", "created_at_unix", json!(1767225600.0)), "{md}");
    // The hashes protect the FOLD file's bytes: they are not carried.
    assert!(
        !md.as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"].as_str().unwrap().contains("hash")),
        "{md}"
    );
    let Some(python) = openvds_python() else {
        return;
    };
    let wanted = json!([
        ["fold", "metadata.model_type", "String"],
        ["fold", "metadata.tags.note", "String"],
        ["fold", "metadata.tags.run", "String"],
        ["fold", "version", "String"],
        ["fold", "created_at_unix", "Double"],
    ]);
    let seen = openvds_view(&python, &out, &wanted);
    assert_eq!(
        seen["metadata"],
        json!({
            "fold/metadata.model_type": "RasterpackSample",
            "fold/metadata.tags.note": "café",
            "fold/metadata.tags.run": "mine",
            "fold/version": "1.2.0",
            "fold/created_at_unix": 1767225600.0,
        })
    );
}

/// A VOLP volume's axes are named from its header (dimension 0 first: `x`, `y`, `levels`):
/// testdata/volp/temperature_4x32x32_int16.volp has `bbox` west -10, east 30, south 35, north
/// 70 (degrees) and uneven `levels` (1000, 850, 500, 250 stay metadata; the axis is the level
/// index). The VDS axes, as rasterpack's and OpenVDS's readers see them, and the Zarr
/// `dimension_names` come from the same attribute.
#[test]
fn volp_axes_are_named_from_the_header() {
    use serde_json::json;
    let dir = scratch("vds_write", "volp_axes");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let volp = root.join("testdata/volp/temperature_4x32x32_int16.volp");
    let out = dir.join("t.vds");
    // int16 has no VDS format: physical values (float64) keep the same axes.
    check(&["convert", s(&volp), s(&out), "--physical"], 0);
    check(&["validate", "--strict", s(&out)], 0);
    let (axes, _) = vds_summary(&out);
    assert_eq!(
        axes,
        json!([
            {"name": "x", "unit": "deg", "num_samples": 32, "coordinate_min": -10.0, "coordinate_max": 30.0},
            {"name": "y", "unit": "deg", "num_samples": 32, "coordinate_min": 35.0, "coordinate_max": 70.0},
            {"name": "levels", "unit": "", "num_samples": 4, "coordinate_min": 0.0, "coordinate_max": 3.0},
        ])
    );
    let zarr = dir.join("t.zarr");
    check(&["convert", s(&volp), s(&zarr), "--physical"], 0);
    let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(zarr.join("zarr.json")).unwrap()).unwrap();
    assert_eq!(meta["dimension_names"], json!(["levels", "y", "x"]));
    // The Zarr store carries the axes on: its VDS has the VOLP's.
    let again = dir.join("z.vds");
    check(&["convert", s(&zarr), s(&again)], 0);
    assert_eq!(vds_summary(&again).0, axes);
    let Some(python) = openvds_python() else {
        return;
    };
    let seen = openvds_view(&python, &out, &json!([]));
    assert_eq!(
        seen["axes"],
        json!([
            ["x", "deg", -10.0, 30.0],
            ["y", "deg", 35.0, 70.0],
            ["levels", "", 0.0, 3.0]
        ])
    );
}
