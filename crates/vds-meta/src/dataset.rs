//! The friendly API: open a dataset of either storage kind, list its layers with their
//! geometry and chunk metadata, and read any box of any layer assembled from bricks.

use rasterpack_common::{Error, ErrorKind, Findings, Input, Limits, Result, Severity};
use rayon::prelude::*;
use serde_json::Value;

use crate::chunk::{self, ChunkSpec, ChunkStatus};
use crate::container::Container;
use crate::geometry::{parse_layer_name, DimKind, LayerGeometry};
use crate::layout::{
    parse_json_text, parse_layer_status, parse_layout, Channel, LayerStatus, SampleFormat, VolumeDataLayout,
};
use crate::raw::FILE_TYPE_OBJ;
use crate::store::{DirStore, ObjectStore};

/// Per-chunk metadata from the chunk-metadata pages (or container index pages).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChunkMeta {
    pub hash: u64,
    /// Wavelet adaptive levels (zeros for other layers).
    pub levels: [u8; 16],
    /// Wavelet entries of object-store pages carry the serialized size.
    pub serialized_size: Option<u32>,
    /// Set (to the finding's code) when the page holding this entry is missing or not of its
    /// full length: reads of the chunk fail instead of treating it as unwritten.
    pub page_damaged: Option<&'static str>,
}

impl ChunkMeta {
    pub fn status(&self) -> ChunkStatus {
        ChunkStatus::from_hash(self.hash)
    }
}

/// One stored layer.
#[derive(Debug, Clone)]
pub struct Layer {
    pub status: LayerStatus,
    /// `None` when the name does not fit the layout (a finding says why).
    pub geometry: Option<LayerGeometry>,
    pub chunks: Vec<ChunkMeta>,
}

impl Layer {
    pub fn name(&self) -> &str {
        &self.status.layer_name
    }
    pub fn is_wavelet(&self) -> bool {
        self.status.compression.is_wavelet()
    }
    /// Wavelet layers whose chunk metadata keeps the adaptive-level table (24/28-byte entries).
    pub fn adaptive(&self) -> bool {
        self.is_wavelet() && self.status.metadata_byte_size == 28
    }
}

/// Which values a read produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Values {
    /// The stored format (U8/U16 codes, 1-bit as 0/1 bytes).
    Native,
    /// f32 values (U8/U16 dequantized, NoValue codes -> noValue).
    Physical,
}

/// An open VDS dataset.
pub struct Dataset {
    store: Box<dyn ObjectStore>,
    container: Option<std::sync::Arc<Container>>,
    pub layout: VolumeDataLayout,
    /// The `VolumeDataLayout` document as read.
    pub layout_json: Value,
    pub layers: Vec<Layer>,
    /// Findings made while opening (container structure, JSON, pages).
    pub findings: Findings,
    pub limits: Limits,
    cache: Option<BrickCache>,
}

/// An optional cache of decoded bricks for repeated box reads (slices, tiles of a view):
/// FIFO eviction within a byte budget. Constant bricks are never cached (they cost nothing).
struct BrickCache {
    budget: usize,
    inner: std::sync::Mutex<CacheInner>,
}

#[derive(Default)]
struct CacheInner {
    map: std::collections::HashMap<(usize, u64, bool), std::sync::Arc<Vec<u8>>>,
    order: std::collections::VecDeque<(usize, u64, bool)>,
    bytes: usize,
    hits: u64,
    misses: u64,
}

impl BrickCache {
    fn get(&self, key: (usize, u64, bool)) -> Option<std::sync::Arc<Vec<u8>>> {
        let mut c = self.inner.lock().ok()?;
        let hit = c.map.get(&key).cloned();
        if hit.is_some() {
            c.hits += 1;
        } else {
            c.misses += 1;
        }
        hit
    }
    fn put(&self, key: (usize, u64, bool), v: std::sync::Arc<Vec<u8>>) {
        if v.len() > self.budget {
            return;
        }
        let Ok(mut c) = self.inner.lock() else { return };
        if c.map.contains_key(&key) {
            return;
        }
        while c.bytes + v.len() > self.budget {
            let Some(old) = c.order.pop_front() else { break };
            if let Some(o) = c.map.remove(&old) {
                c.bytes -= o.len();
            }
        }
        c.bytes += v.len();
        c.order.push_back(key);
        c.map.insert(key, v);
    }
}

/// A container shared between the dataset (as its object store) and validation (structure).
struct SharedContainer(std::sync::Arc<Container>);

impl ObjectStore for SharedContainer {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.0.get(key)
    }
    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        self.0.list(prefix)
    }
    fn kind(&self) -> &'static str {
        "vds-file"
    }
    fn object_size(&self, key: &str) -> Result<Option<u64>> {
        self.0.object_size(key)
    }
    fn get_into(&self, key: &str, buf: &mut Vec<u8>) -> Result<bool> {
        self.0.get_into(key, buf)
    }
}

impl Dataset {
    /// Open a `.vds` file or an object-store directory.
    pub fn open(input: &Input, limits: &Limits) -> Result<Dataset> {
        match input {
            Input::Dir { path } => {
                let store = DirStore::open(path, limits)?;
                Self::open_store(Box::new(store), None, Findings::new(), limits)
            }
            _ => {
                let c = std::sync::Arc::new(Container::open(input, limits)?);
                let findings = c.findings.clone();
                if c.file("VolumeDataLayout").is_none() {
                    let legacy = c
                        .files
                        .iter()
                        .find(|f| f.entry.file_type == FILE_TYPE_OBJ && f.entry.name == b"VDSObject");
                    let Some(obj) = legacy else {
                        return Err(Error::invalid_at(
                            "vds.container.no_layout",
                            None,
                            "the container holds no VolumeDataLayout file",
                        ));
                    };
                    if !obj.usable || obj.chunk_count == 0 {
                        return Err(Error::invalid_at(
                            "vds.container.layout_file",
                            Some(obj.entry.entry_offset),
                            "the VDSObject file cannot be read",
                        ));
                    }
                    let text = c.chunk_bytes(obj, 0)?;
                    if text.len() as u64 > limits.max_text {
                        return Err(Error::limit(
                            "limit.text",
                            None,
                            "VDSObject is larger than the text limit",
                        ));
                    }
                    let mut findings = findings;
                    let layout = crate::legacy::parse_vdsobject(&text, &mut findings)?;
                    findings.info(
                        "vds.legacy_layout.used",
                        None,
                        "no VolumeDataLayout: the layout was read from the legacy 'OBJ ' VDSObject file",
                    );
                    let json = serde_json::to_value(&layout).unwrap_or(Value::Null);
                    return Self::open_parts(
                        Box::new(SharedContainer(c.clone())),
                        Some(c),
                        findings,
                        limits,
                        Some((layout, json)),
                    );
                }
                Self::open_store(Box::new(SharedContainer(c.clone())), Some(c), findings, limits)
            }
        }
    }

    /// Open a dataset from any object store.
    pub fn open_store(
        store: Box<dyn ObjectStore>,
        container: Option<std::sync::Arc<Container>>,
        findings: Findings,
        limits: &Limits,
    ) -> Result<Dataset> {
        Self::open_parts(store, container, findings, limits, None)
    }

    fn open_parts(
        store: Box<dyn ObjectStore>,
        container: Option<std::sync::Arc<Container>>,
        mut findings: Findings,
        limits: &Limits,
        given: Option<(VolumeDataLayout, Value)>,
    ) -> Result<Dataset> {
        let (layout, layout_json) = match given {
            Some(g) => g,
            None => {
                let lbytes = store
                    .get("VolumeDataLayout")?
                    .ok_or_else(|| Error::invalid_at("vds.layout.missing", None, "no VolumeDataLayout object"))?;
                if lbytes.len() as u64 > limits.max_text {
                    return Err(Error::limit(
                        "limit.text",
                        None,
                        "VolumeDataLayout is larger than the text limit",
                    ));
                }
                let layout_json = parse_json_text(&lbytes, "VolumeDataLayout", limits.max_depth)?;
                let layout = parse_layout(&layout_json, &mut findings)?;
                (layout, layout_json)
            }
        };
        let statuses = match store.get("LayerStatus")? {
            Some(b) => {
                if b.len() as u64 > limits.max_text {
                    return Err(Error::limit(
                        "limit.text",
                        None,
                        "LayerStatus is larger than the text limit",
                    ));
                }
                parse_layer_status(&parse_json_text(&b, "LayerStatus", limits.max_depth)?, &mut findings)?
            }
            None => {
                findings.error(
                    "vds.layer_status.missing",
                    None,
                    "no LayerStatus object: no layer can be found",
                );
                Vec::new()
            }
        };
        let mut layers = Vec::new();
        // One budget for every layer's per-chunk metadata (it is held in memory).
        let total: u64 = statuses
            .iter()
            .map(|s| s.chunk_count)
            .fold(0u64, |a, c| a.saturating_add(c));
        if total > limits.max_entries {
            return Err(Error::limit(
                "limit.entries",
                None,
                format!(
                    "the layers declare {total} chunks in all, above the limit of {}",
                    limits.max_entries
                ),
            ));
        }
        for st in statuses {
            let geometry = match parse_layer_name(&st.layer_name) {
                None => {
                    findings.error(
                        "vds.layer.name",
                        None,
                        format!("layer name {:?} is not <channel>Dimensions_<dims>LOD<n>", st.layer_name),
                    );
                    None
                }
                Some((prefix, group, lod)) => {
                    let ch = if prefix.is_empty() {
                        Some(0)
                    } else {
                        layout.channel_index(&prefix).filter(|&i| i > 0)
                    };
                    match ch {
                        None => {
                            findings.error(
                                "vds.layer.unknown_channel",
                                None,
                                format!("layer {:?} names no channel of the layout", st.layer_name),
                            );
                            None
                        }
                        Some(c) => {
                            if let Some(why) = crate::geometry::layer_allowed(&layout, c, &group, lod) {
                                findings.error(
                                    "vds.layer.not_in_layout",
                                    None,
                                    format!("layer {:?}: {why}", st.layer_name),
                                );
                            }
                            let g = LayerGeometry::new(&layout, c, &group, lod);
                            if g.is_none() {
                                findings.error(
                                    "vds.layer.geometry",
                                    None,
                                    format!("layer {:?} has no valid geometry", st.layer_name),
                                );
                            }
                            g
                        }
                    }
                }
            };
            if st.chunk_count > limits.max_entries {
                return Err(Error::limit(
                    "limit.entries",
                    None,
                    format!("layer {:?} declares {} chunks", st.layer_name, st.chunk_count),
                ));
            }
            // Per-chunk metadata is loaded only for layers whose declared chunk count agrees with
            // their geometry, so a count in a tiny LayerStatus cannot make us allocate (validation
            // reports the disagreement as vds.layer.chunk_count).
            let chunks = match &geometry {
                Some(g) if g.chunk_count == st.chunk_count => load_chunk_meta(store.as_ref(), &st, &mut findings)?,
                _ => Vec::new(),
            };
            layers.push(Layer {
                status: st,
                geometry,
                chunks,
            });
        }
        Ok(Dataset {
            store,
            container,
            layout,
            layout_json,
            layers,
            findings,
            limits: *limits,
            cache: None,
        })
    }

    /// Keep up to `bytes` of decoded bricks between box reads (0 turns the cache off).
    pub fn set_brick_cache(&mut self, bytes: usize) {
        self.cache = (bytes > 0).then(|| BrickCache {
            budget: bytes,
            inner: Default::default(),
        });
    }

    /// `(hits, misses)` of the brick cache.
    pub fn brick_cache_stats(&self) -> (u64, u64) {
        self.cache
            .as_ref()
            .and_then(|c| c.inner.lock().ok().map(|i| (i.hits, i.misses)))
            .unwrap_or((0, 0))
    }

    /// A brick through the cache when there is one: `(fill element, cached data)`.
    fn cached_brick(&self, layer_index: usize, i: u64, values: Values, bufs: &mut Bufs) -> Result<Option<Owned>> {
        let Some(cache) = &self.cache else { return Ok(None) };
        let key = (layer_index, i, values == Values::Physical);
        if let Some(v) = cache.get(key) {
            return Ok(Some(Owned::Data(v)));
        }
        let layer = &self.layers[layer_index];
        Ok(Some(match self.brick(layer, i, values, bufs)? {
            Brick::Fill(v) => Owned::Fill(v),
            other => {
                let v = std::sync::Arc::new(bufs.slice(&other).to_vec());
                cache.put(key, v.clone());
                Owned::Data(v)
            }
        }))
    }

    pub fn store(&self) -> &dyn ObjectStore {
        self.store.as_ref()
    }

    pub fn container(&self) -> Option<&Container> {
        self.container.as_deref()
    }

    pub fn storage_kind(&self) -> &'static str {
        self.store.kind()
    }

    pub fn layer(&self, name: &str) -> Option<&Layer> {
        self.layers.iter().find(|l| l.name() == name)
    }

    /// The LOD0 layer a channel is read from: its geometry exists and its chunk count agrees;
    /// among several partitionings, the one with most dims (bricks before tiles).
    pub fn lod0_layer(&self, channel: usize) -> Option<usize> {
        let mut best: Option<(usize, &LayerGeometry)> = None;
        for (i, l) in self.layers.iter().enumerate() {
            let Some(g) = &l.geometry else { continue };
            if g.channel != channel || g.lod != 0 {
                continue;
            }
            let better = match best {
                None => true,
                Some((_, b)) => g.group.len() > b.group.len() || (g.group.len() == b.group.len() && g.group < b.group),
            };
            if better {
                best = Some((i, g));
            }
        }
        best.map(|(i, _)| i)
    }

    /// The chunk spec (what its descriptor must say) of chunk `index` of a layer.
    pub fn chunk_spec(&self, layer: &Layer, index: u64) -> Option<ChunkSpec> {
        let g = layer.geometry.as_ref()?;
        let ch = self.layout.channels.get(g.channel)?;
        let ext = g.chunk_extent(index);
        Some(ChunkSpec {
            format: ch.format,
            components: ch.components,
            dims: g.chunk_dims.len(),
            size: g.descriptor_size(&ext),
            compression: layer.status.compression,
        })
    }

    /// The stored bytes of a chunk (`None`: no object).
    pub fn chunk_bytes(&self, layer: &Layer, index: u64) -> Result<Option<Vec<u8>>> {
        self.store.get(&format!("{}/{index}", layer.name()))
    }

    /// Decode chunk `index` into its stored box (margins included), in `values` form, using
    /// the worker's reusable buffers. Returns where the result is: a fill element or one of
    /// the buffers, laid out X fastest over the chunk dims.
    /// Read a written chunk's stored object into `io` and return its spec; a written chunk
    /// without an object is invalid.
    fn fetch_chunk(&self, layer: &Layer, index: u64, io: &mut Vec<u8>) -> Result<ChunkSpec> {
        let key = format!("{}/{index}", layer.name());
        if !self.store.get_into(&key, io)? {
            return Err(Error::invalid_at(
                "vds.chunk.missing",
                None,
                format!("chunk {index} of {} is written but has no stored object", layer.name()),
            ));
        }
        if let Some((_, code, msg)) = self
            .chunk_object_checks(layer, index, io.len())
            .into_iter()
            .find(|c| c.0 == Severity::Error)
        {
            return Err(Error::invalid_at(code, None, msg));
        }
        self.chunk_spec(layer, index)
            .ok_or_else(|| Error::invalid_at("vds.layer.geometry", None, "no chunk spec"))
    }

    /// Checks of a written chunk's object against its chunk-metadata entry, made by reads and
    /// by validation alike: the object's own metadata header (object stores keep the hash,
    /// and the levels of wavelet chunks, there too) and the serialized size of 28-byte wavelet
    /// entries. A page that could not be read in full fails every chunk it describes.
    pub fn chunk_object_checks(
        &self,
        layer: &Layer,
        index: u64,
        object_len: usize,
    ) -> Vec<(Severity, &'static str, String)> {
        let mut out = Vec::new();
        let key = format!("{}/{index}", layer.name());
        let Some(meta) = layer.chunks.get(index as usize) else {
            out.push((
                Severity::Error,
                "vds.layer.chunk_count",
                format!("chunk {key} has no metadata entry"),
            ));
            return out;
        };
        if let Some(code) = meta.page_damaged {
            out.push((
                Severity::Error,
                code,
                format!("chunk {key}: its chunk-metadata page is damaged, the entry cannot be trusted"),
            ));
        }
        if meta.status() != ChunkStatus::Data {
            return out;
        }
        if self.store.has_object_metadata() {
            match self.store.chunk_metadata_header(&key) {
                None => out.push((
                    Severity::Warning,
                    "vds.object_metadata.missing",
                    format!("chunk {key}: no x-amz-meta-vdschunkmetadata header (the page is used)"),
                )),
                Some(h) => match crate::layout::base64_decode(&h) {
                    None => out.push((
                        Severity::Error,
                        "vds.object_metadata.base64",
                        format!("chunk {key}: chunk metadata header is not base64"),
                    )),
                    Some(b) => {
                        let mut want = meta.hash.to_le_bytes().to_vec();
                        if layer.is_wavelet() {
                            want.extend_from_slice(&meta.levels);
                        }
                        if b != want {
                            out.push((
                                Severity::Error,
                                "vds.object_metadata.mismatch",
                                format!(
                                    "chunk {key}: inconsistent metadata: the object's header disagrees with the chunk-metadata page"
                                ),
                            ));
                        }
                    }
                },
            }
        }
        if let Some(sz) = meta.serialized_size {
            if sz as usize != object_len {
                out.push((
                    Severity::Error,
                    "vds.chunk.serialized_size",
                    format!("chunk {key}: metadata says {sz} bytes, {object_len} stored"),
                ));
            }
        }
        out
    }

    fn brick(&self, layer: &Layer, index: u64, values: Values, bufs: &mut Bufs) -> Result<Brick> {
        let g = layer
            .geometry
            .as_ref()
            .ok_or_else(|| Error::invalid_at("vds.layer.geometry", None, "layer without geometry"))?;
        let ch = &self.layout.channels[g.channel];
        let meta = layer.chunks.get(index as usize).copied().unwrap_or_default();
        if let Some(code) = meta.page_damaged {
            return Err(Error::invalid_at(
                code,
                None,
                format!(
                    "{} chunk {index}: its chunk-metadata page is damaged, the chunk's status is unknown",
                    layer.name()
                ),
            ));
        }
        let fill = |native: Vec<u8>, phys: f32| -> Brick {
            match values {
                Values::Native => Brick::Fill(native),
                Values::Physical => Brick::Fill(phys.to_le_bytes().repeat(ch.components as usize)),
            }
        };
        match meta.status() {
            ChunkStatus::Unwritten => Ok(Brick::Fill(chunk::unwritten_element(ch, values == Values::Physical))),
            ChunkStatus::NoValue => Ok(fill(chunk::novalue_native(ch), ch.no_value as f32)),
            ChunkStatus::Constant(v) => Ok(fill(chunk::constant_native(ch, v), v)),
            ChunkStatus::Data => {
                let spec = self.fetch_chunk(layer, index, &mut bufs.io)?;
                let ctx = |e: Error| Error {
                    message: format!("{} chunk {index}: {}", layer.name(), e.message),
                    offset: None,
                    ..e
                };
                let mut at = if spec.compression.is_wavelet() {
                    let info = chunk::decode_wavelet(
                        &bufs.io,
                        &spec,
                        ch,
                        values == Values::Physical,
                        None,
                        self.limits.max_alloc,
                        &mut bufs.wavelet,
                        &mut bufs.scratch,
                    )
                    .map_err(ctx)?;
                    // Float streams of U8/U16 channels come out raw when R32 is asked for,
                    // as OpenVDS returns them; integer streams come as codes, converted below.
                    if info.format == SampleFormat::R32 {
                        return Ok(Brick::Scratch);
                    }
                    if info.format != ch.format {
                        return Err(Error::unsupported(
                            "vds.wavelet.format",
                            None,
                            format!(
                                "{} chunk {index}: {} wavelet codes in a {} channel",
                                layer.name(),
                                info.format.name(),
                                ch.format.name()
                            ),
                        ));
                    }
                    Brick::Scratch
                } else {
                    match chunk::decode_payload(&bufs.io, &spec, self.limits.max_alloc, &mut bufs.scratch)
                        .map_err(ctx)?
                    {
                        Some(s) => Brick::Io(s),
                        None => Brick::Scratch,
                    }
                };
                if ch.format == SampleFormat::Bit1 {
                    let mut conv = std::mem::take(&mut bufs.conv);
                    chunk::unpack_bits(bufs.slice(&at), spec.size, &mut conv);
                    bufs.conv = conv;
                    at = Brick::Conv;
                }
                if values == Values::Physical && ch.format != SampleFormat::R32 {
                    let (dst_is_conv, mut dst) = match at {
                        Brick::Conv => (false, std::mem::take(&mut bufs.scratch)),
                        _ => (true, std::mem::take(&mut bufs.conv)),
                    };
                    chunk::native_to_f32(ch, bufs.slice(&at), &mut dst);
                    if dst_is_conv {
                        bufs.conv = dst;
                        at = Brick::Conv;
                    } else {
                        bufs.scratch = dst;
                        at = Brick::Scratch;
                    }
                }
                Ok(at)
            }
        }
    }

    /// Element size of a read.
    pub fn element_size(&self, channel: &Channel, values: Values) -> usize {
        match values {
            Values::Native => channel.format.native_bytes() * channel.components as usize,
            Values::Physical => 4 * channel.components as usize,
        }
    }

    /// Read the box `[min, max)` (in the layer's voxel space, 6 dims) of a layer. The result is
    /// laid out dim 0 fastest (components interleaved). Memory: the box plus one decoded brick
    /// per worker thread.
    pub fn read_box(&self, layer_index: usize, min: [u64; 6], max: [u64; 6], values: Values) -> Result<Vec<u8>> {
        let total = self.box_bytes(layer_index, &min, &max, values)?;
        let total = self.limits.check_alloc(total, "box", None)?;
        let mut out = vec![0u8; total];
        self.read_box_into(layer_index, min, max, values, &mut out)?;
        Ok(out)
    }

    /// Bytes a box read produces (checked against the array limit).
    pub fn box_bytes(&self, layer_index: usize, min: &[u64; 6], max: &[u64; 6], values: Values) -> Result<u64> {
        let layer = self
            .layers
            .get(layer_index)
            .ok_or_else(|| Error::usage("no such layer"))?;
        let g = layer
            .geometry
            .as_ref()
            .ok_or_else(|| Error::invalid_at("vds.layer.geometry", None, "layer has no valid geometry"))?;
        let mut total = self.element_size(&self.layout.channels[g.channel], values) as u64;
        for d in 0..6 {
            if min[d] >= max[d] || max[d] > g.shape[d] {
                return Err(Error::usage(format!(
                    "box [{min:?}, {max:?}) is not inside the layer shape {:?}",
                    g.shape
                )));
            }
            total = total
                .checked_mul(max[d] - min[d])
                .ok_or_else(|| Error::limit("limit.array", None, "box size overflows"))?;
        }
        if total > self.limits.max_array_bytes {
            return Err(Error::limit(
                "limit.array",
                None,
                format!("the box holds {total} bytes, above the array limit"),
            ));
        }
        Ok(total)
    }

    /// [`Dataset::read_box`] into a caller's buffer of exactly [`Dataset::box_bytes`] bytes
    /// (reused across reads, it saves the page faults of a fresh allocation).
    pub fn read_box_into(
        &self,
        layer_index: usize,
        min: [u64; 6],
        max: [u64; 6],
        values: Values,
        out: &mut [u8],
    ) -> Result<()> {
        let want = self.box_bytes(layer_index, &min, &max, values)?;
        if out.len() as u64 != want {
            return Err(Error::usage(format!(
                "output buffer holds {} bytes, the box needs {want}",
                out.len()
            )));
        }
        let layer = self
            .layers
            .get(layer_index)
            .ok_or_else(|| Error::usage("no such layer"))?;
        let g = layer
            .geometry
            .as_ref()
            .ok_or_else(|| Error::invalid_at("vds.layer.geometry", None, "layer has no valid geometry"))?;
        let ch = &self.layout.channels[g.channel];
        if layer.chunks.len() as u64 != g.chunk_count {
            return Err(Error::invalid_at(
                "vds.layer.chunk_count",
                None,
                format!(
                    "layer {} stores {} chunks, its geometry has {}",
                    layer.name(),
                    layer.chunks.len(),
                    g.chunk_count
                ),
            ));
        }
        for d in 0..6 {
            if min[d] >= max[d] || max[d] > g.shape[d] {
                return Err(Error::usage(format!(
                    "box [{min:?}, {max:?}) is not inside the layer shape {:?}",
                    g.shape
                )));
            }
        }
        let elem = self.element_size(ch, values);
        let mut ostride = [0u64; 6];
        let mut acc = elem as u64;
        for d in 0..6 {
            ostride[d] = acc;
            acc *= max[d] - min[d];
        }
        let total = out.len();
        // Chunk coordinates whose owned part meets the box, per dim.
        let mut per_dim: Vec<Vec<u64>> = Vec::with_capacity(6);
        for d in 0..6 {
            let mut v = Vec::new();
            match g.kinds[d] {
                DimKind::PerIndex => v.extend(min[d]..max[d]),
                DimKind::Bricked => {
                    for i in 0..g.chunks[d] {
                        let mut c = [0u64; 6];
                        c[d] = i;
                        let e = g.chunk_extent(g.chunk_index(&c));
                        if e.owned_min[d] < max[d] && e.owned_max[d] > min[d] {
                            v.push(i);
                        }
                    }
                }
                _ => v.push(0),
            }
            per_dim.push(v);
        }
        // Slabs along the slowest dim with more than one voxel: contiguous in the output.
        let s = (0..6).rev().find(|&d| max[d] - min[d] > 1).unwrap_or(0);
        let mut slabs: Vec<(u64, u64, Vec<u64>)> = Vec::new(); // (lo, hi) in dim s, chunk indices
        for &cs in &per_dim[s] {
            let mut idx = Vec::new();
            let mut coords = [0usize; 6];
            'odo: loop {
                let mut c = [0u64; 6];
                for d in 0..6 {
                    c[d] = if d == s { cs } else { per_dim[d][coords[d]] };
                }
                idx.push(g.chunk_index(&c));
                for d in 0..6 {
                    if d == s {
                        continue;
                    }
                    coords[d] += 1;
                    if coords[d] < per_dim[d].len() {
                        continue 'odo;
                    }
                    coords[d] = 0;
                }
                break;
            }
            let Some(&first) = idx.first() else { continue };
            let e = g.chunk_extent(first);
            let lo = e.owned_min[s].max(min[s]);
            let hi = e.owned_max[s].min(max[s]);
            if lo < hi {
                slabs.push((lo, hi, idx));
            }
        }
        // Split the output into the slabs' disjoint byte ranges.
        let mut parts: Vec<(&mut [u8], u64, Vec<u64>)> = Vec::new();
        let mut rest: &mut [u8] = out;
        let mut pos = 0u64;
        for (lo, hi, idx) in slabs {
            let a = (lo - min[s]) * ostride[s];
            let b = (hi - min[s]) * ostride[s];
            if a < pos || b as usize > total {
                return Err(Error::invalid_at(
                    "vds.layer.geometry",
                    None,
                    "chunks overlap in the layer",
                ));
            }
            let (_, tail) = std::mem::take(&mut rest).split_at_mut((a - pos) as usize);
            let (mine, tail) = tail.split_at_mut((b - a) as usize);
            rest = tail;
            pos = b;
            parts.push((mine, a, idx));
        }
        let few_slabs = parts.len() < rayon::current_num_threads();
        parts.into_par_iter().try_for_each(|(buf, base, idx)| -> Result<()> {
            let copy = |buf: &mut [u8], i: u64, src: Option<&[u8]>, fill: Option<&[u8]>| {
                let e = g.chunk_extent(i);
                copy_brick(g, &e, src, fill, elem, buf, base, &min, &max, &ostride);
            };
            if few_slabs && idx.len() > 1 {
                // Too few slabs to keep every thread busy: decode this slab's bricks in parallel.
                let bricks: Vec<(u64, Owned)> = idx
                    .par_iter()
                    .map_init(Bufs::default, |bufs, &i| -> Result<(u64, Owned)> {
                        if let Some(o) = self.cached_brick(layer_index, i, values, bufs)? {
                            return Ok((i, o));
                        }
                        Ok((
                            i,
                            match self.brick(layer, i, values, bufs)? {
                                Brick::Fill(v) => Owned::Fill(v),
                                other => Owned::Data(std::sync::Arc::new(bufs.slice(&other).to_vec())),
                            },
                        ))
                    })
                    .collect::<Result<_>>()?;
                for (i, o) in &bricks {
                    match o {
                        Owned::Fill(v) => copy(buf, *i, None, Some(v)),
                        Owned::Data(v) => copy(buf, *i, Some(v), None),
                    }
                }
            } else {
                let mut bufs = Bufs::default();
                for &i in &idx {
                    if self.cache.is_none()
                        && self.direct_rle(layer, i, values, &mut bufs, buf, base, &min, &max, &ostride, elem)?
                    {
                        continue;
                    }
                    if let Some(o) = self.cached_brick(layer_index, i, values, &mut bufs)? {
                        match o {
                            Owned::Fill(v) => copy(buf, i, None, Some(&v)),
                            Owned::Data(v) => copy(buf, i, Some(&v), None),
                        }
                        continue;
                    }
                    match self.brick(layer, i, values, &mut bufs)? {
                        Brick::Fill(v) => copy(buf, i, None, Some(&v)),
                        other => copy(buf, i, Some(bufs.slice(&other)), None),
                    }
                }
            }
            Ok(())
        })?;
        Ok(())
    }

    /// Decode an RLE brick that lies wholly inside the box straight into the output rows
    /// (no intermediate buffer). `Ok(false)`: not applicable, use the general path.
    #[allow(clippy::too_many_arguments)]
    fn direct_rle(
        &self,
        layer: &Layer,
        i: u64,
        values: Values,
        bufs: &mut Bufs,
        out: &mut [u8],
        base: u64,
        bmin: &[u64; 6],
        bmax: &[u64; 6],
        ostride: &[u64; 6],
        elem: usize,
    ) -> Result<bool> {
        let Some(g) = layer.geometry.as_ref() else {
            return Ok(false);
        };
        let ch = &self.layout.channels[g.channel];
        if values != Values::Native
            || layer.status.compression != crate::layout::Compression::RLE
            || ch.format == SampleFormat::Bit1
            || layer.chunks.get(i as usize).map(|m| m.status()) != Some(ChunkStatus::Data)
        {
            return Ok(false);
        }
        let e = g.chunk_extent(i);
        for d in 0..6 {
            let end = e.stored_origin[d] + e.stored_size[d];
            if e.owned_min[d].max(bmin[d]) != e.stored_origin[d] || e.owned_max[d].min(bmax[d]) != end {
                return Ok(false);
            }
        }
        let Some(&x) = g.chunk_dims.first() else {
            return Ok(false);
        };
        if ostride[x] != elem as u64 {
            return Ok(false);
        }
        let size = |k: usize| g.chunk_dims.get(k).map_or(1, |&d| e.stored_size[d]);
        let (sx, sy, sz) = (size(0), size(1), size(2));
        let mut origin = 0u64;
        for d in 0..6 {
            origin += (e.stored_origin[d] - bmin[d]) * ostride[d];
        }
        let sy_stride = g.chunk_dims.get(1).map_or(0, |&d| ostride[d]);
        let sz_stride = g.chunk_dims.get(2).map_or(0, |&d| ostride[d]);
        let mut starts = Vec::with_capacity((sy * sz) as usize);
        for z in 0..sz {
            for y in 0..sy {
                starts.push((origin + y * sy_stride + z * sz_stride - base) as usize);
            }
        }
        let spec = self.fetch_chunk(layer, i, &mut bufs.io)?;
        let ctx = |e: Error| Error {
            message: format!("{} chunk {i}: {}", layer.name(), e.message),
            offset: None,
            ..e
        };
        if spec.compression.is_wavelet() {
            return Ok(false);
        }
        chunk::decode_rle_rows(&bufs.io, &spec, out, sx as usize * elem, &starts).map_err(ctx)?;
        Ok(true)
    }

    /// The whole layer.
    pub fn read_layer(&self, layer_index: usize, values: Values) -> Result<Vec<u8>> {
        let g = self
            .layers
            .get(layer_index)
            .and_then(|l| l.geometry.as_ref())
            .ok_or_else(|| Error::usage("no such layer"))?;
        let shape = g.shape;
        self.read_box(layer_index, [0; 6], shape, values)
    }
}

/// Where a decoded brick is: one repeated element, or in one of the worker's buffers.
enum Brick {
    Fill(Vec<u8>),
    /// The raw object, payload from this offset (uncompressed chunks: no copy).
    Io(usize),
    Scratch,
    Conv,
}

/// A decoded brick that outlives the worker's buffers.
enum Owned {
    Fill(Vec<u8>),
    Data(std::sync::Arc<Vec<u8>>),
}

/// Per-worker buffers, reused from brick to brick so large chunks cost no new allocations.
#[derive(Default)]
struct Bufs {
    io: Vec<u8>,
    scratch: Vec<u8>,
    conv: Vec<u8>,
    wavelet: crate::wavelet::WaveletScratch,
}

impl Bufs {
    fn slice<'a>(&'a self, b: &'a Brick) -> &'a [u8] {
        match b {
            Brick::Io(s) => self.io.get(*s..).unwrap_or(&[]),
            Brick::Scratch => &self.scratch,
            Brick::Conv => &self.conv,
            Brick::Fill(v) => v,
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn copy_brick(
    g: &LayerGeometry,
    e: &crate::geometry::ChunkExtent,
    src_buf: Option<&[u8]>,
    fill: Option<&[u8]>,
    elem: usize,
    out: &mut [u8],
    base: u64,
    bmin: &[u64; 6],
    bmax: &[u64; 6],
    ostride: &[u64; 6],
) {
    let mut rmin = [0u64; 6];
    let mut rmax = [0u64; 6];
    for d in 0..6 {
        rmin[d] = e.owned_min[d].max(bmin[d]);
        rmax[d] = e.owned_max[d].min(bmax[d]);
        if rmin[d] >= rmax[d] {
            return;
        }
    }
    // Brick strides: chunk dims in order X, Y, Z; other dims have extent 1.
    let mut bstride = [0u64; 6];
    let mut acc = elem as u64;
    for &d in &g.chunk_dims {
        bstride[d] = acc;
        acc *= e.stored_size[d];
    }
    let row = (rmax[0] - rmin[0]) as usize;
    let mut p = rmin;
    loop {
        let mut dst = 0u64;
        let mut src = 0u64;
        for d in 0..6 {
            dst += (p[d] - bmin[d]) * ostride[d];
            src += (p[d] - e.stored_origin[d]) * bstride[d];
        }
        let dst = (dst - base) as usize;
        let dst_row = &mut out[dst..dst + row * elem];
        if let Some(v) = fill {
            for c in dst_row.chunks_exact_mut(elem) {
                c.copy_from_slice(v);
            }
        } else if let Some(buf) = src_buf {
            let src = src as usize;
            if bstride[0] as usize == elem {
                dst_row.copy_from_slice(&buf[src..src + row * elem]);
            } else {
                // dim 0 is not a chunk dim: its extent is 1.
                dst_row.copy_from_slice(&buf[src..src + elem]);
            }
        }
        // Next row.
        let mut d = 1;
        loop {
            if d == 6 {
                return;
            }
            p[d] += 1;
            if p[d] < rmax[d] {
                break;
            }
            p[d] = rmin[d];
            d += 1;
        }
    }
}

/// Read every chunk-metadata page of a layer.
fn load_chunk_meta(store: &dyn ObjectStore, st: &LayerStatus, f: &mut Findings) -> Result<Vec<ChunkMeta>> {
    let n = st.chunk_count;
    let ps = st.page_size;
    let esz = st.metadata_byte_size;
    let pages = if n == 0 { 0 } else { (n - 1) / ps + 1 };
    if let Some(pd) = &st.page_directory {
        if pd.len() as u64 != pages {
            f.error(
                "vds.layer_status.page_directory",
                None,
                format!(
                    "layer {}: pageDirectory has {} entries, {} pages expected",
                    st.layer_name,
                    pd.len(),
                    pages
                ),
            );
        }
    }
    let mut out = vec![ChunkMeta::default(); n as usize];
    // Without a page directory, a directory store is asked only for the pages it holds (one
    // listing instead of a lookup per declared page).
    let listed: Option<Vec<u64>> = if st.page_directory.is_none() && store.kind() == "object-dir" {
        let prefix = format!("{}/ChunkMetadata/", st.layer_name);
        let mut v: Vec<u64> = store
            .list(&prefix)?
            .iter()
            .filter_map(|k| k[prefix.len()..].parse().ok())
            .filter(|&p| p < pages)
            .collect();
        v.sort_unstable();
        Some(v)
    } else {
        None
    };
    let page_iter: Box<dyn Iterator<Item = u64>> = match listed {
        Some(v) => Box::new(v.into_iter()),
        None => Box::new(0..pages),
    };
    // Every chunk of a page that could not be read in full is marked, so reads fail on it
    // rather than taking its chunks for unwritten ones.
    let damage = |out: &mut Vec<ChunkMeta>, p: u64, code: &'static str| {
        let lo = (p.saturating_mul(ps)).min(n) as usize;
        let hi = (p.saturating_add(1).saturating_mul(ps)).min(n) as usize;
        for m in &mut out[lo..hi] {
            m.page_damaged = Some(code);
        }
    };
    for p in page_iter {
        let key_n: i64 = match &st.page_directory {
            Some(pd) => match pd.get(p as usize) {
                Some(&k) => k,
                None => {
                    damage(&mut out, p, "vds.layer_status.page_directory");
                    continue;
                }
            },
            None => p as i64,
        };
        if key_n < 0 {
            continue;
        }
        let key = format!("{}/ChunkMetadata/{key_n}", st.layer_name);
        let page = match store.get(&key) {
            Ok(Some(b)) => b,
            Ok(None) => {
                if st.page_directory.is_some() {
                    f.error(
                        "vds.layer.metadata_page_missing",
                        None,
                        format!("chunk metadata page {key} is listed but missing"),
                    );
                    damage(&mut out, p, "vds.layer.metadata_page_missing");
                }
                continue;
            }
            Err(e) if e.kind == ErrorKind::Io || e.kind == ErrorKind::LimitExceeded => return Err(e),
            Err(e) => {
                f.push_error(&e);
                damage(&mut out, p, "vds.layer.metadata_page");
                continue;
            }
        };
        let full = page.len() as u64 == ps * esz;
        if !full {
            f.error(
                "vds.layer.metadata_page_size",
                None,
                format!(
                    "chunk metadata page {key} holds {} bytes, {} x {esz} expected",
                    page.len(),
                    ps
                ),
            );
        }
        for k in 0..ps {
            let i = p * ps + k;
            if i >= n {
                break;
            }
            let o = (k * esz) as usize;
            let Some(e) = page.get(o..o + esz as usize) else { break };
            let m = if esz == 28 {
                let mut levels = [0u8; 16];
                levels.copy_from_slice(&e[12..28]);
                ChunkMeta {
                    serialized_size: Some(u32::from_le_bytes([e[0], e[1], e[2], e[3]])),
                    hash: u64::from_le_bytes(e[4..12].try_into().unwrap_or([0; 8])),
                    levels,
                    page_damaged: None,
                }
            } else {
                ChunkMeta {
                    hash: u64::from_le_bytes(e[..8].try_into().unwrap_or([0; 8])),
                    ..Default::default()
                }
            };
            out[i as usize] = m;
        }
        if !full {
            damage(&mut out, p, "vds.layer.metadata_page_size");
        }
    }
    Ok(out)
}
