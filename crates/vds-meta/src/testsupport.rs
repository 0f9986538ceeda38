//! A small VDS writer for tests, benchmarks and sample files (feature `testsupport`): one
//! channel, None / RLE / Zip bricks, optional LODs (by subsampling, not OpenVDS's filter),
//! written as a `.vds` container or an object-store directory. It writes the storage layout the
//! crate reads (see the repository's `docs/formats/vds.md`) but is not a supported writer: it exists so tests can make datasets of any shape and corrupt them.

use std::path::Path;

use serde_json::{json, Value};

use crate::geometry::{ChunkExtent, LayerGeometry};
use crate::layout::{parse_layout, VdsCompression, VdsSampleFormat, VolumeDataLayout};
use crate::raw::CONTAINER_MAGIC;
// The writer's own encoders: test files are made the way rasterpack writes them.
use crate::write::{pack_bits, rle_encode};

/// What to write.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Samples per axis (dim 0 first), 1..6 axes.
    pub dims: Vec<u64>,
    /// Brick edge in voxels (a power of two, 32..=4096).
    pub brick_size: u32,
    /// Margin voxels before each brick.
    pub negative_margin: u32,
    /// Margin voxels after each brick.
    pub positive_margin: u32,
    /// LOD levels (0: LOD0 only).
    pub lod_levels: u32,
    /// Sample format.
    pub format: VdsSampleFormat,
    /// Components per voxel.
    pub components: u32,
    /// Compression (None, RLE or Zip).
    pub compression: VdsCompression,
    /// Integer scale of the channel.
    pub integer_scale: f64,
    /// Integer offset of the channel.
    pub integer_offset: f64,
    /// Whether `no_value` marks missing samples.
    pub use_no_value: bool,
    /// The no-value.
    pub no_value: f64,
    /// Index-page / chunk-metadata page entries.
    pub page_entries: u32,
    /// Store all-equal chunks as constant hashes (as OpenVDS does).
    pub detect_constants: bool,
    /// Chunks (LOD0 indices) to leave unwritten.
    pub unwritten: Vec<u64>,
    /// Name of the channel.
    pub channel_name: String,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            dims: vec![40, 24, 20],
            brick_size: 32,
            negative_margin: 0,
            positive_margin: 0,
            lod_levels: 0,
            format: VdsSampleFormat::R32,
            components: 1,
            compression: VdsCompression::None,
            integer_scale: 1.0,
            integer_offset: 0.0,
            use_no_value: false,
            no_value: 0.0,
            page_entries: 1024,
            detect_constants: true,
            unwritten: Vec::new(),
            channel_name: "Amplitude".into(),
        }
    }
}

impl Spec {
    /// The `VolumeDataLayout` document.
    pub fn layout_json(&self) -> Value {
        let names = ["Sample", "Crossline", "Inline", "Dim3", "Dim4", "Dim5"];
        let axes: Vec<Value> = self
            .dims
            .iter()
            .enumerate()
            .map(|(i, &n)| json!({"name": names[i % 6], "unit": "", "numSamples": n, "coordinateMin": 0.0, "coordinateMax": (n - 1) as f64}))
            .collect();
        json!({
            "axisDescriptors": axes,
            "channelDescriptors": [{
                "format": self.format.name(),
                "components": format!("Components_{}", self.components),
                "name": self.channel_name, "unit": "",
                "valueRange": [-1.0, 1.0],
                "channelMapping": "Direct", "mappedValues": 1,
                "discrete": false, "renderable": true, "allowLossyCompression": true,
                "useNoValue": self.use_no_value, "noValue": self.no_value,
                "integerScale": self.integer_scale, "integerOffset": self.integer_offset,
            }],
            "layoutDescriptor": {
                "brickSize": format!("BrickSize_{}", self.brick_size),
                "negativeMargin": self.negative_margin, "positiveMargin": self.positive_margin,
                "brickSize2DMultiplier": 4,
                "lodLevels": if self.lod_levels == 0 { "LODLevels_None".to_string() } else { format!("LODLevels_{}", self.lod_levels) },
                "create2DLODs": false, "forceFullResolutionDimension": false, "fullResolutionDimension": -1,
            },
            "metadata": [
                {"category": "Test", "name": "Writer", "type": "String", "value": "rasterpack testsupport"},
                {"category": "Test", "name": "Blob", "type": "BLOB", "value": "AAEC/f7/"},
                {"category": "Test", "name": "Range", "type": "FloatVector2", "value": [-1.0, 1.0]},
            ],
        })
    }

    fn layout(&self) -> VolumeDataLayout {
        parse_layout(&self.layout_json(), &mut Default::default()).expect("testsupport layout is valid")
    }

    fn elem(&self) -> usize {
        self.format.native_bytes() * self.components as usize
    }
}

/// One serialized layer: name, per-chunk `(hash, bytes)` (`None` = nothing stored).
pub struct WrittenLayer {
    /// Layer name.
    pub name: String,
    /// Per chunk: its hash and its serialized bytes (`None`: nothing stored).
    pub chunks: Vec<(u64, Option<Vec<u8>>)>,
    /// Chunks with stored bytes.
    pub valid: u64,
    /// Decoded payload bytes of the stored (non-constant) chunks.
    pub uncompressed: u64,
}

fn fnv(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= x as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    // Keep clear of the special values.
    if h == 0 || h == u64::MAX || (h >> 32) as u32 == 0x0101_0101 {
        h ^= 0x5555_0000_0000_0000;
    }
    h
}

/// Serialize every layer (LOD0..=lod_levels) of `data` (native values, dim 0 fastest).
pub fn layers(spec: &Spec, data: &[u8]) -> Vec<WrittenLayer> {
    let layout = spec.layout();
    let n = spec.dims.len();
    let group: Vec<usize> = (0..n.min(3)).collect();
    let elem = spec.elem();
    let mut full = [1u64; 6];
    full[..n].copy_from_slice(&spec.dims);
    assert_eq!(
        data.len() as u64,
        full.iter().product::<u64>() * elem as u64,
        "data size"
    );
    let mut out = Vec::new();
    for lod in 0..=spec.lod_levels {
        let g = LayerGeometry::new(&layout, 0, &group, lod).expect("geometry");
        let mut chunks = Vec::new();
        let mut valid = 0;
        let mut uncompressed = 0u64;
        for i in 0..g.chunk_count {
            if lod == 0 && spec.unwritten.contains(&i) {
                chunks.push((0, None));
                continue;
            }
            let e = g.chunk_extent(i);
            // Gather the stored box (LOD voxel v <- LOD0 voxel v << lod in scaled dims).
            let mut payload = Vec::new();
            let mut p = e.stored_origin;
            let end: Vec<u64> = (0..6).map(|d| e.stored_origin[d] + e.stored_size[d]).collect();
            loop {
                let mut idx = 0u64;
                let mut mul = 1u64;
                for d in 0..6 {
                    let c = if g.scaled[d] {
                        (p[d] << lod).min(full[d] - 1)
                    } else {
                        p[d]
                    };
                    idx += c * mul;
                    mul *= full[d];
                }
                let s = idx as usize * elem;
                payload.extend_from_slice(&data[s..s + elem]);
                let mut d = 0;
                while d < 6 {
                    p[d] += 1;
                    if p[d] < end[d] {
                        break;
                    }
                    p[d] = e.stored_origin[d];
                    d += 1;
                }
                if d == 6 {
                    break;
                }
            }
            valid += 1;
            let (hash, obj, body_len) = serialize_chunk(spec, &g, &e, payload);
            uncompressed += body_len;
            chunks.push((hash, Some(obj)));
        }
        out.push(WrittenLayer {
            name: g.name.clone(),
            chunks,
            valid,
            uncompressed,
        });
    }
    out
}

/// One written chunk: its hash, its object (empty for a constant chunk) and the decoded bytes
/// it stores (0 for a constant). `payload` holds native values, X fastest over the stored box.
fn serialize_chunk(spec: &Spec, g: &LayerGeometry, e: &ChunkExtent, payload: Vec<u8>) -> (u64, Vec<u8>, u64) {
    let elem = spec.elem();
    let first = &payload[..elem];
    if spec.detect_constants && spec.components == 1 && payload.chunks_exact(elem).all(|c| c == first) {
        if let Some(v) = constant_value(spec, first) {
            return (0x0101_0101_0000_0000 | v.to_bits() as u64, Vec::new(), 0);
        }
    }
    let size = g.descriptor_size(e);
    let body = if spec.format == VdsSampleFormat::Bit1 {
        pack_bits(&payload, size)
    } else {
        payload
    };
    let mut obj = Vec::new();
    for v in [
        g.chunk_dims.len() as i32,
        size[0] as i32,
        size[1] as i32,
        size[2] as i32,
        spec.format.code(),
        spec.components as i32,
    ] {
        obj.extend_from_slice(&v.to_le_bytes());
    }
    match spec.compression {
        VdsCompression::None => obj.extend_from_slice(&body),
        VdsCompression::Zip => obj.extend_from_slice(&miniz_oxide::deflate::compress_to_vec_zlib(&body, 6)),
        VdsCompression::RLE => {
            let unit = crate::chunk::ChunkSpec {
                format: spec.format,
                components: spec.components,
                dims: 3,
                size,
                compression: VdsCompression::RLE,
            }
            .rle_unit() as usize;
            let runs = rle_encode(&body, unit);
            obj.extend_from_slice(&((12 + runs.len()) as i32).to_le_bytes());
            obj.extend_from_slice(&(body.len() as i32).to_le_bytes());
            obj.extend_from_slice(&(unit as i32).to_le_bytes());
            obj.extend_from_slice(&runs);
        }
        other => panic!("testsupport cannot write {other:?}"),
    }
    (fnv(&obj), obj, body.len() as u64)
}

/// A file table row: name, page directory offset, chunk count, entries per index page, file
/// type, chunk and file metadata lengths.
type FileRow<'a> = (&'a str, i64, i32, i32, [u8; 4], i32, i32);

/// Write a LOD0-only `.vds` container into `file` brick by brick, holding one brick at a time
/// (for datasets larger than memory): `brick(i, extent)` gives chunk `i`'s native values
/// (X fastest over its stored box, `extent.stored_size` voxels) or `None` to leave it
/// unwritten. Index pages without a written chunk are left out, as OpenVDS does.
pub fn write_container_bricks(
    spec: &Spec,
    file: &mut std::fs::File,
    mut brick: impl FnMut(u64, &ChunkExtent) -> Option<Vec<u8>>,
) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    let layout = spec.layout();
    let group: Vec<usize> = (0..spec.dims.len().min(3)).collect();
    let g = LayerGeometry::new(&layout, 0, &group, 0).expect("geometry");
    let mut w = std::io::BufWriter::with_capacity(1 << 20, &mut *file);
    w.write_all(&[0u8; 32])?;
    let mut at = 32u64;
    let mut entries: Vec<(i64, i32, u64)> = Vec::with_capacity(g.chunk_count as usize);
    let mut valid = 0i32;
    for i in 0..g.chunk_count {
        let e = g.chunk_extent(i);
        let Some(payload) = brick(i, &e) else {
            entries.push((0, 0, 0));
            continue;
        };
        valid += 1;
        let (hash, obj, _) = serialize_chunk(spec, &g, &e, payload);
        if obj.is_empty() {
            entries.push((0, 0, hash));
        } else {
            w.write_all(&obj)?;
            entries.push((at as i64, obj.len() as i32, hash));
            at += obj.len() as u64;
        }
    }
    let json = serde_json::to_vec_pretty(&spec.layout_json()).expect("json");
    let json_at = at;
    w.write_all(&json)?;
    at += json.len() as u64;
    // The JSON file: one chunk, one page.
    let json_page = at;
    w.write_all(&(json_at as i64).to_le_bytes())?;
    w.write_all(&(json.len() as i32).to_le_bytes())?;
    w.write_all(&0i32.to_le_bytes())?;
    at += 16;
    let json_dir = at;
    w.write_all(&[0u8; 16])?;
    w.write_all(&(json_page as i64).to_le_bytes())?;
    at += 24;
    // The layer's index pages (pages with nothing written are left out).
    let per = spec.page_entries as usize;
    let mut page_offsets = Vec::new();
    for page in entries.chunks(per) {
        if page.iter().all(|e| e.1 == 0 && e.2 == 0) {
            page_offsets.push(0i64);
            continue;
        }
        page_offsets.push(at as i64);
        for k in 0..per {
            let (o, n, h) = page.get(k).copied().unwrap_or((0, 0, 0));
            w.write_all(&o.to_le_bytes())?;
            w.write_all(&n.to_le_bytes())?;
            w.write_all(&0i32.to_le_bytes())?;
            w.write_all(&h.to_le_bytes())?;
            at += 24;
        }
    }
    let layer_dir = at;
    w.write_all(&[0u8; 16])?;
    w.write_all(&spec.compression.code().to_le_bytes())?;
    w.write_all(&0.0f32.to_le_bytes())?;
    w.write_all(&valid.to_le_bytes())?;
    for o in &page_offsets {
        w.write_all(&o.to_le_bytes())?;
    }
    at += 28 + 8 * page_offsets.len() as u64;
    let table = at;
    let name_len = g.name.len().max("VolumeDataLayout".len()).div_ceil(8) * 8;
    let files: [FileRow; 2] = [
        ("VolumeDataLayout", json_dir as i64, 1, 1, *b"JSON", 0, 0),
        (
            &g.name,
            layer_dir as i64,
            entries.len() as i32,
            per as i32,
            *b"VDS ",
            8,
            12,
        ),
    ];
    for (name, dir, count, per_page, ftype, cml, fml) in files {
        w.write_all(&dir.to_le_bytes())?;
        w.write_all(&count.to_le_bytes())?;
        w.write_all(&0i32.to_le_bytes())?;
        w.write_all(&per_page.to_le_bytes())?;
        w.write_all(&ftype)?;
        w.write_all(&cml.to_le_bytes())?;
        w.write_all(&fml.to_le_bytes())?;
        let mut n = name.as_bytes().to_vec();
        n.resize(name_len, 0);
        w.write_all(&n)?;
    }
    w.flush()?;
    drop(w);
    let mut header = Vec::with_capacity(32);
    header.extend_from_slice(CONTAINER_MAGIC);
    header.extend_from_slice(&0x0001_0000i32.to_le_bytes());
    header.extend_from_slice(&(table as i64).to_le_bytes());
    header.extend_from_slice(&2i32.to_le_bytes());
    header.extend_from_slice(&(name_len as i32).to_le_bytes());
    file.seek(SeekFrom::Start(0))?;
    file.write_all(&header)?;
    file.flush()
}

/// The f32 a constant chunk stores, for formats where it round-trips.
fn constant_value(spec: &Spec, v: &[u8]) -> Option<f32> {
    match spec.format {
        VdsSampleFormat::R32 => {
            let x = f32::from_le_bytes(v.try_into().ok()?);
            // NaN payloads and -0.0 would not survive the hash; store them as data.
            (x.is_finite() && x.to_bits() != (-0.0f32).to_bits()).then_some(x)
        }
        VdsSampleFormat::U8 if !spec.use_no_value => {
            Some(spec.integer_offset as f32 + spec.integer_scale as f32 * v[0] as f32).filter(|x| {
                let ch = &spec.layout().channels[0];
                crate::chunk::quantize(ch, *x) == v[0] as u32
            })
        }
        _ => None,
    }
}

fn compression_code(c: VdsCompression) -> i32 {
    c.code()
}

/// A `.vds` container holding the layout and every layer.
pub fn write_container(spec: &Spec, data: &[u8]) -> Vec<u8> {
    write_container_with(spec, data, false)
}

/// The layout as a legacy Hue text object (what old tools stored as the `'OBJ '` `VDSObject`).
pub fn legacy_vdsobject(spec: &Spec) -> String {
    let names = ["Sample", "Crossline", "Inline", "Dim3", "Dim4", "Dim5"];
    let mut t = String::from("CreateObj(\"HueVDSSubset\", \"\", 1)\n{\nName=\"Subset\";\n");
    t += &format!(
        "VoxelFormat=\"HUEVOXELFORMAT_{}\";\n",
        spec.format.name().trim_start_matches("Format_")
    );
    t += &format!("VoxelComponents=\"HUEVOXELCOMPONENTS_{}\";\n", spec.components);
    t += &format!(
        "ValueName=\"{}\";\nValueUnit=\"\";\nValueRange:\n{{\n  Min=-1;\n  Max=1;\n}}\n",
        spec.channel_name
    );
    t += &format!(
        "IntegerScale={};\nIntegerOffset={};\n",
        spec.integer_scale, spec.integer_offset
    );
    t += &format!(
        "UseNoValue=\"{}\";\nNoValue={};\n",
        if spec.use_no_value { "TRUE" } else { "FALSE" },
        spec.no_value
    );
    t += &format!(
        "FullVCSize=\"HUEVCSIZE_{}\";\nNegativeMargin={};\nPositiveMargin={};\n",
        spec.brick_size, spec.negative_margin, spec.positive_margin
    );
    t += &format!(
        "LODLevels=\"{}\";\n",
        if spec.lod_levels == 0 {
            "LODLevelNone".to_string()
        } else {
            format!("LODLevel{}", spec.lod_levels)
        }
    );
    t += &format!("Dimensions=\"HUEDIMENSION_{}\";\n", spec.dims.len());
    for (d, n) in spec.dims.iter().enumerate() {
        t += &format!("Dimension{d}Name=\"{}\";\nDimension{d}Unit=\"\";\nDimension{d}Size={n};\nDimension{d}Coordinate:\n{{\n  Min=0;\n  Max={};\n}}\n", names[d % 6], n - 1);
    }
    t += "VolumeDataChannelDescriptor:\n{\n  0\n}\nHistogramBLOB=N:0:;\n";
    t += "CreateObj(\"MetadataString\", \"MetadataList\", 2)\n{\n  Name=\"Writer\";\n  Category=\"Test\";\n  Type=\"String\";\n  Value=\"rasterpack testsupport\";\n}\n";
    t += "CreateObj(\"MetadataDoubleVector2\", \"MetadataList\", 3)\n{\n  Name=\"Origin\";\n  Category=\"Test\";\n  Type=\"DoubleVector2\";\n  Value:\n  {\n    X=1.5;\n    Y=-2.25;\n  }\n}\n}\n";
    t
}

/// A container whose layout is only the legacy `'OBJ '` `VDSObject` text.
pub fn write_legacy_container(spec: &Spec, data: &[u8]) -> Vec<u8> {
    write_container_with(spec, data, true)
}

fn write_container_with(spec: &Spec, data: &[u8], legacy: bool) -> Vec<u8> {
    let layers = layers(spec, data);
    let json = if legacy {
        legacy_vdsobject(spec).into_bytes()
    } else {
        serde_json::to_vec_pretty(&spec.layout_json()).expect("json")
    };
    let mut buf = vec![0u8; 32];
    // Per file: name, type, chunk extents + metadata, page entries, file metadata.
    struct F {
        name: String,
        ftype: [u8; 4],
        entries: Vec<(i64, i32, Vec<u8>)>,
        per_page: usize,
        cml: usize,
        fmeta: Vec<u8>,
    }
    let mut files = Vec::new();
    let jo = buf.len() as i64;
    buf.extend_from_slice(&json);
    let (jname, jtype) = if legacy {
        ("VDSObject", *b"OBJ ")
    } else {
        ("VolumeDataLayout", *b"JSON")
    };
    files.push(F {
        name: jname.into(),
        ftype: jtype,
        entries: vec![(jo, json.len() as i32, Vec::new())],
        per_page: 1,
        cml: 0,
        fmeta: Vec::new(),
    });
    for l in &layers {
        let mut entries = Vec::new();
        for (hash, bytes) in &l.chunks {
            let (o, n) = match bytes {
                Some(b) if !b.is_empty() => {
                    let o = buf.len() as i64;
                    buf.extend_from_slice(b);
                    (o, b.len() as i32)
                }
                _ => (0, 0),
            };
            entries.push((o, n, hash.to_le_bytes().to_vec()));
        }
        let mut fmeta = Vec::new();
        fmeta.extend_from_slice(&compression_code(spec.compression).to_le_bytes());
        fmeta.extend_from_slice(&0.0f32.to_le_bytes());
        fmeta.extend_from_slice(&(l.valid as i32).to_le_bytes());
        files.push(F {
            name: l.name.clone(),
            ftype: *b"VDS ",
            entries,
            per_page: spec.page_entries as usize,
            cml: 8,
            fmeta,
        });
    }
    let mut heads = Vec::new();
    for f in &files {
        // Index pages (the last zero-padded; a page with no written chunk is left out: offset 0).
        let mut page_offs = Vec::new();
        for page in f.entries.chunks(f.per_page) {
            if page.iter().all(|e| e.2.iter().all(|&b| b == 0) && e.1 == 0) && f.cml > 0 {
                page_offs.push(0i64);
                continue;
            }
            page_offs.push(buf.len() as i64);
            for k in 0..f.per_page {
                match page.get(k) {
                    Some((o, n, m)) => {
                        buf.extend_from_slice(&o.to_le_bytes());
                        buf.extend_from_slice(&n.to_le_bytes());
                        buf.extend_from_slice(&0i32.to_le_bytes());
                        buf.extend_from_slice(m);
                    }
                    None => buf.extend(std::iter::repeat_n(0u8, 16 + f.cml)),
                }
            }
        }
        let pd = buf.len() as i64;
        buf.extend_from_slice(&[0u8; 16]);
        buf.extend_from_slice(&f.fmeta);
        for o in page_offs {
            buf.extend_from_slice(&o.to_le_bytes());
        }
        heads.push(pd);
    }
    let name_len = files.iter().map(|f| f.name.len()).max().unwrap_or(8).div_ceil(8) * 8;
    let ft = buf.len() as i64;
    for (f, pd) in files.iter().zip(&heads) {
        buf.extend_from_slice(&pd.to_le_bytes());
        buf.extend_from_slice(&(f.entries.len() as i32).to_le_bytes());
        buf.extend_from_slice(&0i32.to_le_bytes());
        buf.extend_from_slice(&(f.per_page as i32).to_le_bytes());
        buf.extend_from_slice(&f.ftype);
        buf.extend_from_slice(&(f.cml as i32).to_le_bytes());
        buf.extend_from_slice(&(f.fmeta.len() as i32).to_le_bytes());
        let mut name = f.name.as_bytes().to_vec();
        name.resize(name_len, 0);
        buf.extend_from_slice(&name);
    }
    buf[..12].copy_from_slice(CONTAINER_MAGIC);
    buf[12..16].copy_from_slice(&0x0001_0000i32.to_le_bytes());
    buf[16..24].copy_from_slice(&ft.to_le_bytes());
    buf[24..28].copy_from_slice(&(files.len() as i32).to_le_bytes());
    buf[28..32].copy_from_slice(&(name_len as i32).to_le_bytes());
    buf
}

/// An object-store dataset in directory `dir` (created), with a `<dir>.objmeta.json` sidecar.
pub fn write_dir(spec: &Spec, data: &[u8], dir: &Path) -> std::io::Result<()> {
    let layers = layers(spec, data);
    std::fs::create_dir_all(dir)?;
    std::fs::write(
        dir.join("VolumeDataLayout"),
        serde_json::to_vec_pretty(&spec.layout_json())?,
    )?;
    let mut status = Vec::new();
    let mut objmeta = serde_json::Map::new();
    for l in &layers {
        let ld = dir.join(&l.name);
        std::fs::create_dir_all(ld.join("ChunkMetadata"))?;
        let ps = spec.page_entries as usize;
        let mut page_dir = Vec::new();
        for (p, page) in l.chunks.chunks(ps).enumerate() {
            let mut b = vec![0u8; ps * 8];
            for (k, (h, _)) in page.iter().enumerate() {
                b[k * 8..k * 8 + 8].copy_from_slice(&h.to_le_bytes());
            }
            std::fs::write(ld.join("ChunkMetadata").join(p.to_string()), b)?;
            page_dir.push(p as i64);
        }
        for (i, (h, bytes)) in l.chunks.iter().enumerate() {
            if let Some(b) = bytes {
                std::fs::write(ld.join(i.to_string()), b)?;
                objmeta.insert(
                    format!("{}/{i}", l.name),
                    json!({"x-amz-meta-vdschunkmetadata": crate::layout::base64_encode(&h.to_le_bytes())}),
                );
            }
        }
        let lod: u32 = l.name.rsplit("LOD").next().and_then(|s| s.parse().ok()).unwrap_or(0);
        status.push(json!({
            "layerName": l.name, "channelName": spec.channel_name, "dimensionGroup": "Dimensions_012", "lod": lod,
            "produceStatus": "Normal", "compressionMethod": spec.compression.name(), "compressionTolerance": 0.0,
            "chunkCount": l.chunks.len(), "validChunkCount": l.valid, "chunkMetadataPageSize": ps,
            "chunkMetadataByteSize": 8, "hasChunkMetadataPages": true, "pageDirectory": page_dir,
            "serializedSize": l.chunks.iter().map(|(_, b)| b.as_ref().map_or(0, |b| b.len())).sum::<usize>(),
            "uncompressedSize": l.uncompressed, "adaptiveLevelSizes": vec![0; 16],
        }));
    }
    std::fs::write(
        dir.join("LayerStatus"),
        serde_json::to_vec_pretty(&Value::Array(status))?,
    )?;
    let mut side = dir.as_os_str().to_owned();
    side.push(".objmeta.json");
    std::fs::write(side, serde_json::to_vec_pretty(&json!({"objects": objmeta}))?)?;
    Ok(())
}

/// Deterministic pseudo-random native data for `spec` (floats in [-1, 1]).
pub fn sample_data(spec: &Spec, seed: u64) -> Vec<u8> {
    let n: u64 = spec.dims.iter().product::<u64>() * spec.components as u64;
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut out = Vec::with_capacity(n as usize * spec.format.native_bytes());
    for i in 0..n {
        // Smooth-ish values with runs, so RLE has something to do.
        let r = next();
        let smooth = ((i as f64) * 0.01).sin() as f32;
        match spec.format {
            VdsSampleFormat::Bit1 => out.push((r & 1) as u8),
            VdsSampleFormat::U8 => out.push(if r % 4 == 0 { 7 } else { (r >> 8) as u8 }),
            VdsSampleFormat::U16 => out.extend_from_slice(&((r >> 8) as u16).to_le_bytes()),
            VdsSampleFormat::R32 => out.extend_from_slice(
                &(if r % 3 == 0 {
                    0.25
                } else {
                    smooth + (r % 1000) as f32 * 1e-4
                })
                .to_le_bytes(),
            ),
            VdsSampleFormat::U32 => out.extend_from_slice(&(r as u32).to_le_bytes()),
            VdsSampleFormat::R64 => out.extend_from_slice(&((smooth as f64) + (r % 1000) as f64 * 1e-7).to_le_bytes()),
            VdsSampleFormat::U64 => out.extend_from_slice(&r.to_le_bytes()),
        }
    }
    out
}

/// Deterministic, platform-independent native data (integer arithmetic only): a ramp with
/// plateaus, for sample files whose content tests can recompute.
pub fn ramp_data(spec: &Spec) -> Vec<u8> {
    let mut full = [1u64; 6];
    full[..spec.dims.len()].copy_from_slice(&spec.dims);
    let mut out = Vec::new();
    let total: u64 = full.iter().product();
    for i in 0..total {
        let x = i % full[0];
        let y = (i / full[0]) % full[1];
        let z = i / (full[0] * full[1]);
        let k = (x * 7 + y * 3 + z * 5) % 64;
        let k = if (x / 4 + y) % 5 == 0 { 32 } else { k };
        for _ in 0..spec.components {
            match spec.format {
                VdsSampleFormat::Bit1 => out.push((k & 1) as u8),
                VdsSampleFormat::U8 => out.push(k as u8 * 3),
                VdsSampleFormat::U16 => out.extend_from_slice(&(k as u16 * 1000).to_le_bytes()),
                VdsSampleFormat::R32 => out.extend_from_slice(&(k as f32 / 32.0 - 1.0).to_le_bytes()),
                VdsSampleFormat::U32 => out.extend_from_slice(&(k as u32 * 65537).to_le_bytes()),
                VdsSampleFormat::R64 => out.extend_from_slice(&(k as f64 / 32.0 - 1.0).to_le_bytes()),
                VdsSampleFormat::U64 => out.extend_from_slice(&(k << 40).to_le_bytes()),
            }
        }
    }
    out
}

/// The sample files of `testdata/vds`: `(file name, bytes)`. Directory datasets are written by
/// [`write_testdata`].
pub fn testdata_specs() -> Vec<(&'static str, Spec)> {
    vec![
        (
            "small_r32_zip.vds",
            Spec {
                dims: vec![20, 12, 8],
                compression: VdsCompression::Zip,
                page_entries: 4,
                ..Default::default()
            },
        ),
        (
            "small_u8_rle_novalue.vds",
            Spec {
                dims: vec![40, 10, 6],
                format: VdsSampleFormat::U8,
                compression: VdsCompression::RLE,
                integer_scale: 0.01,
                integer_offset: -1.0,
                use_no_value: true,
                no_value: -999.25,
                unwritten: vec![1],
                page_entries: 4,
                ..Default::default()
            },
        ),
        (
            "small_4d_r32_none_lod1.vds",
            Spec {
                dims: vec![36, 3, 4, 2],
                lod_levels: 1,
                negative_margin: 2,
                positive_margin: 2,
                page_entries: 2,
                ..Default::default()
            },
        ),
    ]
}

/// Write every sample of `testdata/vds` into `dir`.
pub fn write_testdata(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (name, spec) in testdata_specs() {
        std::fs::write(dir.join(name), write_container(&spec, &ramp_data(&spec)))?;
    }
    // An invalid one: the first RLE run of chunk 0 overruns the chunk.
    let (_, spec) = &testdata_specs()[1];
    let mut bad = write_container(spec, &ramp_data(spec));
    let c = crate::container::Container::open(
        &rasterpack_common::Input::from_bytes("x", bad.clone()),
        &Default::default(),
    )
    .map_err(|e| std::io::Error::other(e.to_string()))?;
    let f = c
        .files
        .iter()
        .find(|f| f.entry.file_type == *b"VDS ")
        .ok_or_else(|| std::io::Error::other("no layer"))?;
    let o = f.extent(0).0 as usize;
    bad[o + 36] = 0xBF;
    bad[o + 37] = 0xFF;
    std::fs::write(dir.join("invalid_rle_overrun.vds"), bad)?;
    std::fs::write(
        dir.join("small_legacy_vdsobject.vds"),
        write_legacy_container(&testdata_specs()[0].1, &ramp_data(&testdata_specs()[0].1)),
    )?;
    let spec = Spec {
        dims: vec![20, 8, 6],
        compression: VdsCompression::None,
        page_entries: 4,
        ..Default::default()
    };
    let d = dir.join("small_objdir");
    let _ = std::fs::remove_dir_all(&d);
    write_dir(&spec, &ramp_data(&spec), &d)
}
