//! The small sample files committed under `testdata/volp/`, generated deterministically so a
//! test can check the committed bytes (`examples/make_volp_testdata.rs` writes them).

use rasterpack_common::{DType, NdArray};
use serde_json::{json, Map, Value};

use crate::write::{VolpWriteOptions, VolpWriter};

/// A VOLP file of stored little-endian `data`, or empty when the arguments are inconsistent.
fn encode(
    dtype: DType,
    shape: [u64; 3],
    data: &[u8],
    scale: f64,
    offset: f64,
    metadata: &Map<String, Value>,
) -> Vec<u8> {
    let opts = VolpWriteOptions {
        scale: Some(scale),
        offset: Some(offset),
        metadata: metadata.clone(),
        ..VolpWriteOptions::default()
    };
    NdArray::new(dtype, shape.to_vec(), data.to_vec())
        .and_then(|array| VolpWriter::encode(&array, &opts))
        .unwrap_or_default()
}

/// A deterministic pseudo-random sequence (xorshift64*), so samples need no RNG crate.
struct Noise(u64);
impl Noise {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let v = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (v >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    }
}

/// `temperature_4x32x32_int16.volp`: air temperature on 4 pressure levels over Europe,
/// int16 with scale 0.01 and offset 250 (physical kelvin), all common metadata keys.
pub fn temperature() -> Vec<u8> {
    let levels = [1000.0, 850.0, 500.0, 250.0];
    let (nlat, nlon) = (32usize, 32usize);
    let mut noise = Noise(0x005E_ED0F_7E4D);
    let mut data = Vec::with_capacity(4 * nlat * nlon * 2);
    for (l, p) in levels.iter().enumerate() {
        // Colder aloft: ~288 K at 1000 hPa down to ~220 K at 250 hPa.
        let base = 288.0 - 68.0 * (1.0 - p / 1000.0) / 0.75;
        for y in 0..nlat {
            let lat = 35.0 + 35.0 * y as f64 / (nlat - 1) as f64;
            for x in 0..nlon {
                let lon = -10.0 + 40.0 * x as f64 / (nlon - 1) as f64;
                let wave = 3.0 * ((lon / 8.0 + l as f64).sin() * (lat / 6.0).cos());
                let t = base - 0.6 * (lat - 35.0) + wave + 0.05 * noise.next();
                let stored = ((t - 250.0) / 0.01).round() as i16;
                data.extend_from_slice(&stored.to_le_bytes());
            }
        }
    }
    let mut meta = Map::new();
    meta.insert(
        "bbox".into(),
        json!({"west": -10, "south": 35, "east": 30, "north": 70, "bottom": 1000, "top": 250}),
    );
    meta.insert("levels".into(), json!([1000, 850, 500, 250]));
    meta.insert("variable".into(), json!("air_temperature"));
    meta.insert("valid_time".into(), json!("2026-01-15T12:00:00Z"));
    meta.insert("units".into(), json!("K"));
    encode(DType::I16, [4, nlat as u64, nlon as u64], &data, 0.01, 250.0, &meta)
}

/// `cloud_2x8x8_float32.volp`: a tiny unscaled float32 field (one NaN for "no data").
pub fn cloud() -> Vec<u8> {
    let mut data = Vec::new();
    for i in 0..2 * 8 * 8 {
        let v = if i == 17 {
            f32::NAN
        } else {
            ((i as f32) * 0.37).sin().abs()
        };
        data.extend_from_slice(&v.to_le_bytes());
    }
    let mut meta = Map::new();
    meta.insert("variable".into(), json!("cloud_density"));
    meta.insert("levels".into(), json!([850, 700]));
    encode(DType::F32, [2, 8, 8], &data, 1.0, 0.0, &meta)
}

/// `invalid_bad_magic.volp`: the cloud sample with magic `VOLX`.
pub fn invalid_bad_magic() -> Vec<u8> {
    let mut d = cloud();
    if let Some(b) = d.get_mut(3) {
        *b = b'X';
    }
    d
}

/// `invalid_truncated_body.volp`: the temperature sample cut in the middle of its zstd frame.
pub fn invalid_truncated_body() -> Vec<u8> {
    let mut d = temperature();
    let header_len = d
        .get(4..8)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .unwrap_or(0);
    let body = d.len().saturating_sub(8 + header_len);
    d.truncate(8 + header_len + body / 2);
    d
}

/// Every sample: file name and bytes.
pub fn all() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("temperature_4x32x32_int16.volp", temperature()),
        ("cloud_2x8x8_float32.volp", cloud()),
        ("invalid_bad_magic.volp", invalid_bad_magic()),
        ("invalid_truncated_body.volp", invalid_truncated_body()),
    ]
}

/// The benchmark volume: `[mib / 4, 1024, 1024]` float32 (`mib` MiB of values), a smooth field
/// (waves over lat/lon, a lapse with level) plus small noise, as a weather model writes it.
pub fn bench_volume(mib: u64) -> NdArray {
    let (levels, lat, lon) = ((mib / 4).max(1), 1024u64, 1024u64);
    let mut values = Vec::with_capacity((levels * lat * lon) as usize);
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for l in 0..levels {
        for y in 0..lat {
            for x in 0..lon {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let noise = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                values.push(
                    280.0 - 0.5 * l as f32
                        + 10.0 * ((x as f32) * 0.01).sin() * ((y as f32) * 0.013).cos()
                        + 0.05 * noise,
                );
            }
        }
    }
    NdArray::from_vec(vec![levels, lat, lon], values).unwrap_or_else(|_| NdArray {
        dtype: DType::F32,
        shape: vec![0],
        data: Vec::new(),
        name: None,
        attrs: Map::new(),
    })
}
