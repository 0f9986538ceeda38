//! `rasterpack preview`: the PNG decoded (png crate) and its pixels checked against the
//! colormaps' published colours for small known arrays, sampling, slicing, fill/NaN
//! transparency, levels of detail, deterministic bytes, `--force`, and bounded cost on hostile
//! files.

mod support;

use std::path::{Path, PathBuf};

use rasterpack_common::{npy, NdArray};
use support::{check, run, s, scratch};

fn testdata(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata").join(rel)
}

fn save(dir: &Path, name: &str, a: &NdArray) -> PathBuf {
    let p = dir.join(name);
    let mut bytes = Vec::new();
    npy::write(&mut bytes, a).unwrap();
    std::fs::write(&p, bytes).unwrap();
    p
}

/// `(width, height, RGBA pixels)` of a PNG file.
fn decode(p: &Path) -> (u32, u32, Vec<[u8; 4]>) {
    let dec = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(p).unwrap()));
    let mut reader = dec.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgba);
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let px = buf[..info.buffer_size()]
        .chunks_exact(4)
        .map(|c| [c[0], c[1], c[2], c[3]])
        .collect();
    (info.width, info.height, px)
}

fn gray(t: f64) -> [u8; 4] {
    let v = (t * 255.0).round() as u8;
    [v, v, v, 255]
}

#[test]
fn gray_pixels_follow_the_values_and_nan_is_transparent() {
    let dir = scratch("preview", "gray");
    // 3 x 4, values 0..11 with a NaN and an infinity.
    let mut v: Vec<f32> = (0..12).map(|i| i as f32).collect();
    v[5] = f32::NAN;
    v[6] = f32::INFINITY;
    let a = save(&dir, "a.npy", &NdArray::from_vec(vec![3, 4], v.clone()).unwrap());
    let out = dir.join("a.png");
    check(&["preview", s(&a), s(&out)], 0);
    let (w, h, px) = decode(&out);
    assert_eq!((w, h), (4, 3));
    for (i, &x) in v.iter().enumerate() {
        if x.is_finite() {
            assert_eq!(px[i], gray(x as f64 / 11.0), "cell {i} = {x}");
        } else {
            assert_eq!(px[i][3], 0, "cell {i} = {x} must be transparent");
        }
    }
    // --range: values outside take the end colours.
    let out2 = dir.join("r.png");
    check(&["preview", s(&a), s(&out2), "--range", "2,4"], 0);
    let (_, _, px) = decode(&out2);
    assert_eq!(px[0], [0, 0, 0, 255]);
    assert_eq!(px[3], gray(0.5));
    assert_eq!(px[11], [255, 255, 255, 255]);
}

#[test]
fn seismic_is_symmetric_around_zero_and_viridis_ends_are_viridis() {
    let dir = scratch("preview", "seismic");
    let a = save(
        &dir,
        "s.npy",
        &NdArray::from_vec(vec![1, 4], vec![-2.0f64, 0.0, 1.0, 2.0]).unwrap(),
    );
    let out = dir.join("s.png");
    check(&["preview", s(&a), s(&out), "--colormap", "seismic"], 0);
    let (_, _, px) = decode(&out);
    // matplotlib's seismic: (0, 0, 0.3) at -max, white at 0, red at half of max, (0.5, 0, 0) at max.
    assert_eq!(px[0], [0, 0, 77, 255]);
    assert_eq!(px[1], [255, 255, 255, 255]);
    assert_eq!(px[2], [255, 0, 0, 255]);
    assert_eq!(px[3], [128, 0, 0, 255]);
    let out = dir.join("v.png");
    check(&["preview", s(&a), s(&out), "--colormap", "viridis"], 0);
    let (_, _, px) = decode(&out);
    assert_eq!(px[0], [68, 1, 84, 255]);
    assert_eq!(px[3], [253, 231, 37, 255]);
    // viridis at 0.5 of its range: (38, 130, 142) (-2..2, value 0).
    assert_eq!(px[1], [38, 130, 142, 255]);
}

#[test]
fn slices_pick_one_index_and_sampling_takes_centre_cells() {
    let dir = scratch("preview", "slice");
    // 3 x 20 x 30, value = 1000 * z + 30 * y + x (distinct everywhere).
    let v: Vec<f64> = (0..3 * 20 * 30).map(|i| i as f64 + 400.0 * (i / 600) as f64).collect();
    let a = save(&dir, "c.npy", &NdArray::from_vec(vec![3, 20, 30], v.clone()).unwrap());
    // A 3-D array needs a slice.
    let r = check(&["preview", s(&a), s(&dir.join("x.png"))], 2);
    assert!(r.stderr().contains("--slice"), "{}", r.stderr());
    // --slice 0=-1 (the last z), sampled to 10 x 5: pixel (r, c) shows cell (4r + 2, 3c + 1).
    let out = dir.join("z.png");
    check(
        &[
            "preview",
            s(&a),
            s(&out),
            "--slice",
            "0=-1",
            "--size",
            "10x5",
            "--range",
            "0,2599",
        ],
        0,
    );
    let (w, h, px) = decode(&out);
    assert_eq!((w, h), (10, 5));
    for r in 0..5usize {
        for c in 0..10usize {
            let cell = v[2 * 600 + (4 * r + 2) * 30 + 3 * c + 1];
            assert_eq!(px[r * 10 + c], gray(cell / 2599.0), "pixel {r},{c}");
        }
    }
    // --slice on the last axis shows z down and y across; --size W keeps the aspect ratio.
    let out = dir.join("x.png");
    check(&["preview", s(&a), s(&out), "--slice", "2=7", "--size", "40"], 0);
    let (w, h, _) = decode(&out);
    assert_eq!((w, h), (40, 6), "3 x 20 stretched to 40 wide");
    // Axis names exist only where the file names its axes.
    let r = check(&["preview", s(&a), s(&dir.join("n.png")), "--slice", "Inline=1"], 2);
    assert!(r.stderr().contains("names no axes"), "{}", r.stderr());
    for bad in [
        ["--slice", "5=0"],
        ["--slice", "0=3"],
        ["--colormap", "jet"],
        ["--size", "0"],
    ] {
        let mut args = vec!["preview", s(&a), "b.png"];
        args.extend(bad);
        check(&args, 2);
    }
}

#[test]
fn novalue_cells_are_transparent() {
    // A VDS U8 channel with NoValue: its code 255 cells read as NoValue.
    let dir = scratch("preview", "novalue");
    let src = testdata("vds/small_u8_rle_novalue.vds");
    let npy_out = dir.join("v.npy");
    check(&["convert", s(&src), s(&npy_out)], 0);
    let a = rasterpack::open(&npy_out).unwrap().read(&Default::default()).unwrap();
    let shape = a.shape.clone();
    assert_eq!(shape.len(), 3, "{shape:?}");
    let codes = a.to_vec::<u8>().unwrap();
    let out = dir.join("v.png");
    let size = format!("{}x{}", shape[2], shape[1]);
    check(&["preview", s(&src), s(&out), "--slice", "0=0", "--size", &size], 0);
    let (_, _, px) = decode(&out);
    let plane = &codes[..(shape[1] * shape[2]) as usize];
    let nv = plane.iter().filter(|&&c| c == 255).count();
    assert!(nv > 0, "the test file has NoValue cells in slice 0");
    for (i, (&c, p)) in plane.iter().zip(&px).enumerate() {
        assert_eq!(p[3] == 0, c == 255, "cell {i} code {c}: {p:?}");
    }
}

#[test]
fn coarser_lod_is_read_when_the_picture_is_small_and_bytes_are_deterministic() {
    let dir = scratch("preview", "lod");
    let src = testdata("vds/small_4d_r32_none_lod1.vds");
    // numpy shape (2, 4, 3, 36): slice Dim3=0, Inline=0 leaves 3 x 36, shown in 9 x 1.
    let auto = dir.join("auto.png");
    let r = check(
        &[
            "preview",
            s(&src),
            s(&auto),
            "--slice",
            "Dim3=0",
            "--slice",
            "Inline=0",
            "--size",
            "9x1",
        ],
        0,
    );
    assert!(r.stderr().contains("at LOD 1"), "{}", r.stderr());
    let lod1 = dir.join("lod1.png");
    let r = check(
        &[
            "preview",
            s(&src),
            s(&lod1),
            "--slice",
            "0=0",
            "--slice",
            "1=0",
            "--size",
            "9x1",
            "--lod",
            "1",
        ],
        0,
    );
    assert!(r.stderr().contains("at LOD 1"), "{}", r.stderr());
    assert_eq!(std::fs::read(&auto).unwrap(), std::fs::read(&lod1).unwrap());
    // The same picture again: the same bytes; over an existing file only with --force.
    let r = check(
        &[
            "preview",
            s(&src),
            s(&auto),
            "--slice",
            "Dim3=0",
            "--slice",
            "Inline=0",
            "--size",
            "9x1",
        ],
        2,
    );
    assert!(r.stderr().contains("--force"), "{}", r.stderr());
    let before = std::fs::read(&auto).unwrap();
    check(
        &[
            "preview",
            s(&src),
            s(&auto),
            "--slice",
            "Dim3=0",
            "--slice",
            "Inline=0",
            "--size",
            "9x1",
            "--force",
        ],
        0,
    );
    assert_eq!(std::fs::read(&auto).unwrap(), before);
    // A full-resolution picture differs from the LOD 1 one.
    let lod0 = dir.join("lod0.png");
    let r = check(
        &[
            "preview",
            s(&src),
            s(&lod0),
            "--slice",
            "0=0",
            "--slice",
            "1=0",
            "--size",
            "9x1",
            "--lod",
            "0",
        ],
        0,
    );
    assert!(r.stderr().contains("at LOD 0"), "{}", r.stderr());
}

#[test]
fn hillshade_follows_the_usual_formula() {
    let dir = scratch("preview", "hillshade");
    // A ramp rising to the east, lit from the north-west.
    let v: Vec<f32> = (0..8 * 8).map(|i| (i % 8) as f32 * 2.0).collect();
    let a = save(&dir, "r.npy", &NdArray::from_vec(vec![8, 8], v).unwrap());
    let flat = dir.join("f.png");
    let shaded = dir.join("h.png");
    check(&["preview", s(&a), s(&flat), "--range", "0,0.0001"], 0);
    check(&["preview", s(&a), s(&shaded), "--range", "0,0.0001", "--hillshade"], 0);
    let (_, _, f) = decode(&flat);
    let (_, _, h) = decode(&shaded);
    // Every cell but the first column is white without shading; with it, a slope of 2 per cell
    // (63.4°) with its aspect at 180° (the math angle of atan2(dz/dy, -dz/dx)), lit from
    // azimuth 315° (math angle 135°) at altitude 45°: cos45 cos63.4 + sin45 sin63.4 cos(135° -
    // 180°) = 0.3162 + 0.4472 of white (ESRI's formula), i.e. 195.
    let expected = (45f64.to_radians().cos() * 2f64.atan().cos()
        + 45f64.to_radians().sin() * 2f64.atan().sin() * (135f64 - 180.0).to_radians().cos())
        * 255.0;
    assert_eq!(f[3], [255, 255, 255, 255]);
    assert_eq!(h[3][0], expected.round() as u8, "{:?}", h[3]);
}

#[test]
fn hostile_files_preview_within_the_bounds() {
    let Some(dir) = rasterpack_common::testkit::corpus_dir("hostile") else {
        return;
    };
    let out = scratch("preview", "hostile");
    // A 2^31-row grid of 10-row tiles shown in 1024 rows reads 1024 rows, not 2^31.
    let big = dir.join("more/gvrs_2147483647x10_declares_86GB.gvrs");
    let r = check(&["preview", s(&big), s(&out.join("g.png"))], 0);
    assert!(r.elapsed.as_secs_f64() < 10.0, "{:?}", r.elapsed);
    // The top of hostile/ and hostile/more/ (huge directories, a 2^31-row grid).
    for name in [dir.clone(), dir.join("more")]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap())
    {
        let p = name.unwrap().path();
        if p.extension().is_none_or(|e| e == "md") || p.is_dir() {
            continue;
        }
        let png = out.join("h.png");
        let _ = std::fs::remove_file(&png);
        let r = run(&["preview", s(&p), s(&png), "--slice", "0=0"]);
        assert!(matches!(r.code(), Some(0..=3)), "{p:?}: {:?}\n{}", r.code(), r.stderr());
        support::check_bound(&["preview", s(&p)], &r);
    }
}
