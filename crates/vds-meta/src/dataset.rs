//! An open dataset: either storage kind, its layout and layers with their geometry and chunk
//! metadata, and brick decoding (what the reads assemble into arrays and regions).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use rasterpack_common::{Error, Findings, Input, Limits, Result, Severity};

use crate::chunk::{self, ChunkSpec, VdsChunkStatus};
use crate::chunk_table::{load_chunk_meta, VdsChunkTable};
use crate::container::{Container, ContainerFile};
use crate::geometry::{parse_layer_name, LayerGeometry};
use crate::layout::{
    parse_json_text, parse_layer_status, parse_layout, LayerStatus, VdsChannel, VdsSampleFormat, VolumeDataLayout,
};
use crate::raw::FILE_TYPE_OBJ;
use crate::store::{DirStore, ObjectStore, RemoteStore};

/// One stored layer: its status (compression, chunk count, pages), its geometry, the chunk
/// metadata.
#[derive(Debug, Clone)]
pub struct VdsLayer {
    /// What `LayerStatus` (or the container's layer file) says about the layer.
    pub status: LayerStatus,
    /// `None` when the name does not fit the layout (a finding says why).
    pub geometry: Option<LayerGeometry>,
    /// Per-chunk metadata (empty when the declared chunk count disagrees with the geometry).
    pub chunks: VdsChunkTable,
}

impl VdsLayer {
    /// The layer's name (`Dimensions_012LOD0`, `<channel>Dimensions_012LOD1`).
    pub fn name(&self) -> &str {
        &self.status.layer_name
    }
    /// Whether the layer's chunks are wavelet-compressed.
    pub fn is_wavelet(&self) -> bool {
        self.status.compression.is_wavelet()
    }
    /// Wavelet layers whose chunk metadata keeps the adaptive-level table (24/28-byte entries).
    pub fn adaptive(&self) -> bool {
        self.is_wavelet() && self.status.metadata_byte_size == 28
    }
}

/// Which values a read produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum VdsValues {
    /// The stored format (U8/U16 codes, 1-bit as 0/1 bytes).
    #[default]
    Native,
    /// f32 values (U8/U16 dequantized, NoValue codes -> noValue).
    Physical,
}

/// An open VDS dataset: a `.vds` container or an object-store directory.
///
/// Opening reads the layout, the layer list and the chunk metadata; bricks are read and decoded
/// only when an array or a region of one is read (see [`crate::ArrayFile`]).
pub struct VdsDataset {
    store: Box<dyn ObjectStore>,
    container: Option<Arc<Container>>,
    layout: VolumeDataLayout,
    layers: Vec<VdsLayer>,
    findings: Findings,
    limits: Limits,
    /// The layer each `(channel, lod)` is read from.
    read_layers: HashMap<(usize, u32), usize>,
    /// Channels with at least one stored layer.
    stored_channels: HashSet<usize>,
    /// Layers the dataset says are stored but whose chunks cannot be located.
    unlocatable: Vec<Unlocatable>,
    cache: Option<BrickCache>,
}

/// A layer the dataset says is stored whose chunks cannot be located (a container layer file
/// whose index pages or chunk extents lie outside the file, a layer whose chunk count or
/// metadata disagrees with the layout, a missing `LayerStatus`). Its channel must not read as
/// never written: reads of it fail with this.
#[derive(Debug, Clone)]
struct Unlocatable {
    /// The channel it stores; `None` when that cannot be told (it may be any channel's).
    channel: Option<usize>,
    /// The layer (or the document) that cannot be located.
    what: String,
    code: String,
    offset: Option<u64>,
    why: String,
}

impl std::fmt::Debug for VdsDataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VdsDataset")
            .field("storage", &self.storage_kind())
            .field("layout", &self.layout)
            .field("layers", &self.layers.iter().map(VdsLayer::name).collect::<Vec<_>>())
            .field("findings", &self.findings.len())
            .finish()
    }
}

/// An optional cache of decoded bricks for repeated box reads (slices, tiles of a view):
/// FIFO eviction within a byte budget. Constant bricks are never cached (they cost nothing).
struct BrickCache {
    budget: usize,
    inner: std::sync::Mutex<CacheInner>,
}

#[derive(Default)]
struct CacheInner {
    map: std::collections::HashMap<(usize, u64, bool), Arc<Vec<u8>>>,
    order: std::collections::VecDeque<(usize, u64, bool)>,
    bytes: usize,
    hits: u64,
    misses: u64,
}

impl BrickCache {
    fn get(&self, key: (usize, u64, bool)) -> Option<Arc<Vec<u8>>> {
        let mut c = self.inner.lock().ok()?;
        let hit = c.map.get(&key).cloned();
        if hit.is_some() {
            c.hits += 1;
        } else {
            c.misses += 1;
        }
        hit
    }
    fn put(&self, key: (usize, u64, bool), v: Arc<Vec<u8>>) {
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
struct SharedContainer(Arc<Container>);

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
    fn stored_metadata_pages(&self, layer: &str, pages: u64) -> Result<Option<Vec<u64>>> {
        self.0.stored_metadata_pages(layer, pages)
    }
    fn prefetch(&self, keys: &[String]) {
        self.0.prefetch(keys)
    }
}

impl VdsDataset {
    /// Open a `.vds` file or an object-store directory with default [`Limits`].
    pub fn open(path: impl AsRef<Path>) -> Result<VdsDataset> {
        VdsDataset::from_input(Input::open(path.as_ref())?, Limits::default())
    }

    /// Open a `.vds` container held in memory, with default [`Limits`].
    pub fn from_bytes(bytes: Vec<u8>) -> Result<VdsDataset> {
        VdsDataset::from_input(Input::from_bytes("<memory>", bytes), Limits::default())
    }

    /// Open an [`Input`] (a file, bytes, or a directory holding an object-store dataset).
    pub fn from_input(input: Input, limits: Limits) -> Result<VdsDataset> {
        Self::open_input(&input, &limits)
    }

    /// [`VdsDataset::from_input`] without giving up the input.
    pub(crate) fn open_input(input: &Input, limits: &Limits) -> Result<VdsDataset> {
        match input {
            Input::Dir { path } => {
                let store = DirStore::open(path, limits)?;
                Self::open_store(Box::new(store), None, Findings::new(), limits)
            }
            Input::Objects { source } => {
                let store = RemoteStore::new(source.clone(), limits);
                Self::open_store(Box::new(store), None, Findings::new(), limits)
            }
            _ => Self::open_container(Arc::new(Container::open(input, limits)?), limits),
        }
    }

    /// A container holds either a `VolumeDataLayout` JSON file or, from older tools, only the
    /// legacy `VDSObject` text.
    fn open_container(c: Arc<Container>, limits: &Limits) -> Result<VdsDataset> {
        let mut findings = c.findings.clone();
        let store = Box::new(SharedContainer(c.clone()));
        if c.file("VolumeDataLayout").is_some() {
            return Self::open_parts(store, Some(c), findings, limits, None);
        }
        let legacy = c
            .file("VDSObject")
            .filter(|f| f.entry.file_type == FILE_TYPE_OBJ)
            .ok_or_else(|| {
                Error::invalid_at(
                    "vds.container.no_layout",
                    None,
                    "the container holds no VolumeDataLayout file",
                )
            })?;
        let layout = Self::legacy_layout(&c, legacy, limits, &mut findings)?;
        Self::open_parts(store, Some(c.clone()), findings, limits, Some(layout))
    }

    fn legacy_layout(
        c: &Container,
        obj: &ContainerFile,
        limits: &Limits,
        findings: &mut Findings,
    ) -> Result<VolumeDataLayout> {
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
        let layout = crate::legacy::parse_vdsobject(&text, findings)?;
        findings.info(
            "vds.legacy_layout.used",
            None,
            "no VolumeDataLayout: the layout was read from the legacy 'OBJ ' VDSObject file",
        );
        Ok(layout)
    }

    /// Open a dataset from any object store.
    pub fn open_store(
        store: Box<dyn ObjectStore>,
        container: Option<Arc<Container>>,
        findings: Findings,
        limits: &Limits,
    ) -> Result<VdsDataset> {
        Self::open_parts(store, container, findings, limits, None)
    }

    fn open_parts(
        store: Box<dyn ObjectStore>,
        container: Option<Arc<Container>>,
        mut findings: Findings,
        limits: &Limits,
        given: Option<VolumeDataLayout>,
    ) -> Result<VdsDataset> {
        let layout = match given {
            Some(layout) => layout,
            None => {
                let text = read_text(store.as_ref(), "VolumeDataLayout", limits)?
                    .ok_or_else(|| Error::invalid_at("vds.layout.missing", None, "no VolumeDataLayout object"))?;
                parse_layout(
                    &parse_json_text(&text, "VolumeDataLayout", limits.max_depth)?,
                    &mut findings,
                )?
            }
        };
        let text = read_text(store.as_ref(), "LayerStatus", limits)?;
        let status_missing = text.is_none();
        let statuses = match text {
            Some(text) => parse_layer_status(&parse_json_text(&text, "LayerStatus", limits.max_depth)?, &mut findings)?,
            None => {
                findings.error(
                    "vds.layer_status.missing",
                    None,
                    "no LayerStatus object: no layer can be found",
                );
                Vec::new()
            }
        };
        let layers = load_layers(store.as_ref(), &layout, statuses, limits, &mut findings)?;
        let unlocatable = unlocatable_layers(container.as_deref(), &layout, &layers, status_missing);
        let read_layers = choose_read_layers(&layers, &unlocatable);
        let stored_channels = read_layers.keys().map(|&(c, _)| c).collect();
        Ok(VdsDataset {
            store,
            container,
            layout,
            layers,
            findings,
            limits: *limits,
            read_layers,
            stored_channels,
            unlocatable,
            cache: None,
        })
    }

    /// The layout: axes, channels, brick size and margins, LOD levels, metadata.
    pub fn layout(&self) -> &VolumeDataLayout {
        &self.layout
    }

    /// The stored layers (every channel, dimension group and LOD), in `LayerStatus` order.
    pub fn layers(&self) -> &[VdsLayer] {
        &self.layers
    }

    /// Findings made while opening (container structure, JSON, chunk-metadata pages); a full
    /// check is [`VdsDataset::validate`].
    pub fn findings(&self) -> &Findings {
        &self.findings
    }

    /// The limits the dataset was opened with (reads use them too).
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Keep up to `bytes` of decoded bricks between reads (0 turns the cache off): repeated
    /// region reads over the same bricks (slices of a viewer) then decode each brick once.
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

    /// A brick through the cache when there is one: `None` without a cache.
    pub(crate) fn cached_brick(
        &self,
        layer_index: usize,
        i: u64,
        values: VdsValues,
        bufs: &mut Bufs,
    ) -> Result<Option<Owned>> {
        let Some(cache) = &self.cache else { return Ok(None) };
        let key = (layer_index, i, values == VdsValues::Physical);
        if let Some(v) = cache.get(key) {
            return Ok(Some(Owned::Data(v)));
        }
        let layer = &self.layers[layer_index];
        Ok(Some(match self.brick(layer, i, values, bufs)? {
            Brick::Fill(v) => Owned::Fill(v),
            other => {
                let v = Arc::new(bufs.slice(&other).to_vec());
                cache.put(key, v.clone());
                Owned::Data(v)
            }
        }))
    }

    /// Whether reads go through a brick cache.
    pub(crate) fn has_cache(&self) -> bool {
        self.cache.is_some()
    }

    /// The object store the dataset reads from.
    pub fn store(&self) -> &dyn ObjectStore {
        self.store.as_ref()
    }

    /// The parsed container, for `.vds` files.
    pub fn container(&self) -> Option<&Container> {
        self.container.as_deref()
    }

    /// `"vds-file"` (a container), `"object-dir"` (a directory) or `"object-store"` (a prefix
    /// of a cloud store).
    pub fn storage_kind(&self) -> &'static str {
        self.store.kind()
    }

    /// The layer named `name`.
    pub fn layer(&self, name: &str) -> Option<&VdsLayer> {
        self.layers.iter().find(|l| l.name() == name)
    }

    /// The LOD0 layer a channel is read from (see [`VdsDataset::lod_layer`]).
    pub fn lod0_layer(&self, channel: usize) -> Option<usize> {
        self.lod_layer(channel, 0)
    }

    /// The layer a channel's level of detail `lod` is read from: its geometry exists; among
    /// several partitionings, the one with most dims (bricks before 2-D tiles).
    pub fn lod_layer(&self, channel: usize, lod: u32) -> Option<usize> {
        self.read_layers.get(&(channel, lod)).copied()
    }

    /// Whether any layer of `channel` is stored.
    pub fn channel_has_layers(&self, channel: usize) -> bool {
        self.stored_channels.contains(&channel)
    }

    /// The error a read of `channel` fails with when the dataset says some layer of it (or a
    /// layer that may be its) is stored but its chunks cannot be located; `None` when every
    /// layer of the channel the dataset stores can be located. Only then may a channel without
    /// readable layers read as never written.
    pub fn unlocatable_error(&self, channel: usize) -> Option<Error> {
        let u = self
            .unlocatable
            .iter()
            .find(|u| u.channel.is_none_or(|c| c == channel))?;
        Some(self.unlocatable_to_error(u, channel))
    }

    /// The error a read of stored layer `layer` fails with when its chunks cannot be located.
    pub(crate) fn layer_unlocatable_error(&self, layer: &VdsLayer) -> Option<Error> {
        let what = format!("layer {}", layer.name());
        let u = self.unlocatable.iter().find(|u| u.what == what)?;
        Some(self.unlocatable_to_error(u, u.channel.unwrap_or(0)))
    }

    fn unlocatable_to_error(&self, u: &Unlocatable, channel: usize) -> Error {
        let name = self.layout.channels.get(channel).map_or("", |c| c.name.as_str());
        Error::invalid_at(
            u.code.clone(),
            u.offset,
            format!(
                "channel {name:?}: {} is stored but cannot be located, so the channel is not read as never written: {}",
                u.what, u.why
            ),
        )
    }

    /// The levels of detail stored for `channel`, ascending.
    pub fn lods(&self, channel: usize) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .read_layers
            .keys()
            .filter(|&&(c, _)| c == channel)
            .map(|&(_, lod)| lod)
            .collect();
        v.sort_unstable();
        v
    }

    /// The chunk spec (what its descriptor must say) of chunk `index` of a layer.
    pub fn chunk_spec(&self, layer: &VdsLayer, index: u64) -> Option<ChunkSpec> {
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
    pub fn chunk_bytes(&self, layer: &VdsLayer, index: u64) -> Result<Option<Vec<u8>>> {
        self.store.get(&format!("{}/{index}", layer.name()))
    }

    /// Read a written chunk's stored object into `io` and return its spec; a written chunk
    /// without an object is invalid.
    pub(crate) fn fetch_chunk(&self, layer: &VdsLayer, index: u64, io: &mut Vec<u8>) -> Result<ChunkSpec> {
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
        layer: &VdsLayer,
        index: u64,
        object_len: usize,
    ) -> Vec<(Severity, &'static str, String)> {
        let mut out = Vec::new();
        let key = format!("{}/{index}", layer.name());
        let Some(meta) = layer.chunks.get(index) else {
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
        if meta.status() != VdsChunkStatus::Data {
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

    /// Decode chunk `index` into its stored box (margins included), in `values` form, using
    /// the worker's reusable buffers. Returns where the result is: a fill element or one of
    /// the buffers, laid out X fastest over the chunk dims.
    pub(crate) fn brick(&self, layer: &VdsLayer, index: u64, values: VdsValues, bufs: &mut Bufs) -> Result<Brick> {
        let g = layer
            .geometry
            .as_ref()
            .ok_or_else(|| Error::invalid_at("vds.layer.geometry", None, "layer without geometry"))?;
        let ch = &self.layout.channels[g.channel];
        let meta = layer.chunks.get(index).unwrap_or_default();
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
                VdsValues::Native => Brick::Fill(native),
                VdsValues::Physical => Brick::Fill(phys.to_le_bytes().repeat(ch.components as usize)),
            }
        };
        match meta.status() {
            VdsChunkStatus::Unwritten => Ok(Brick::Fill(chunk::unwritten_element(ch, values == VdsValues::Physical))),
            VdsChunkStatus::NoValue => Ok(fill(chunk::novalue_native(ch), ch.no_value as f32)),
            VdsChunkStatus::Constant(v) => Ok(fill(chunk::constant_native(ch, v), v)),
            VdsChunkStatus::Data => {
                let spec = self.fetch_chunk(layer, index, &mut bufs.io)?;
                let ctx = |e: Error| Error {
                    message: format!("{} chunk {index}: {}", layer.name(), e.message),
                    offset: None,
                    ..e
                };
                let mut at = if spec.compression.is_wavelet() {
                    let coded = matches!(ch.format, VdsSampleFormat::U8 | VdsSampleFormat::U16);
                    let decode = |as_r32: bool, bufs: &mut Bufs| {
                        chunk::decode_wavelet(
                            &bufs.io,
                            &spec,
                            ch,
                            as_r32,
                            None,
                            self.limits.max_alloc,
                            &mut bufs.wavelet,
                            &mut bufs.scratch,
                        )
                        .map_err(ctx)
                    };
                    // U8/U16 channels are decoded as R32: a float stream (OpenVDS 3.4.9 stores
                    // some U8/U16 layers so) then comes out as the written codes, as floats;
                    // integer streams come out as their codes either way.
                    let mut info = decode(values == VdsValues::Physical || coded, bufs)?;
                    if coded && info.format == VdsSampleFormat::R32 {
                        let mut conv = std::mem::take(&mut bufs.conv);
                        chunk::float_codes_to_native(ch, &bufs.scratch, &mut conv);
                        bufs.conv = conv;
                        Brick::Conv
                    } else if info.format == VdsSampleFormat::R32 {
                        return Ok(Brick::Scratch);
                    } else {
                        // A U16 integer stream in a U8 channel: its native read is OpenVDS's
                        // U8 quantization of the stream (asked for as U8).
                        if info.format != ch.format && values == VdsValues::Native {
                            info = decode(false, bufs)?;
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
                    }
                } else {
                    match chunk::decode_payload(&bufs.io, &spec, self.limits.max_alloc, &mut bufs.scratch)
                        .map_err(ctx)?
                    {
                        Some(s) => Brick::Io(s),
                        None => Brick::Scratch,
                    }
                };
                if ch.format == VdsSampleFormat::Bit1 {
                    let mut conv = std::mem::take(&mut bufs.conv);
                    chunk::unpack_bits(bufs.slice(&at), spec.size, &mut conv);
                    bufs.conv = conv;
                    at = Brick::Conv;
                }
                if values == VdsValues::Physical && ch.format != VdsSampleFormat::R32 {
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
    pub fn element_size(&self, channel: &VdsChannel, values: VdsValues) -> usize {
        match values {
            VdsValues::Native => channel.format.native_bytes() * channel.components as usize,
            VdsValues::Physical => 4 * channel.components as usize,
        }
    }
}

/// Where a decoded brick is: one repeated element, or in one of the worker's buffers.
pub(crate) enum Brick {
    Fill(Vec<u8>),
    /// The raw object, payload from this offset (uncompressed chunks: no copy).
    Io(usize),
    Scratch,
    Conv,
}

/// A decoded brick that outlives the worker's buffers.
pub(crate) enum Owned {
    Fill(Vec<u8>),
    Data(std::sync::Arc<Vec<u8>>),
}

/// Per-worker buffers, reused from brick to brick so large chunks cost no new allocations.
#[derive(Default)]
pub(crate) struct Bufs {
    pub(crate) io: Vec<u8>,
    pub(crate) scratch: Vec<u8>,
    pub(crate) conv: Vec<u8>,
    pub(crate) wavelet: crate::wavelet::WaveletScratch,
}

impl Bufs {
    pub(crate) fn slice<'a>(&'a self, b: &'a Brick) -> &'a [u8] {
        match b {
            Brick::Io(s) => self.io.get(*s..).unwrap_or(&[]),
            Brick::Scratch => &self.scratch,
            Brick::Conv => &self.conv,
            Brick::Fill(v) => v,
        }
    }
}

/// A JSON document object, within the text limit (`None`: no such object).
fn read_text(store: &dyn ObjectStore, key: &str, limits: &Limits) -> Result<Option<Vec<u8>>> {
    let Some(bytes) = store.get(key)? else { return Ok(None) };
    if bytes.len() as u64 > limits.max_text {
        return Err(Error::limit(
            "limit.text",
            None,
            format!("{key} is larger than the text limit"),
        ));
    }
    Ok(Some(bytes))
}

/// Every layer of `LayerStatus` with its geometry and (when the declared chunk count agrees with
/// the geometry) its chunk metadata.
fn load_layers(
    store: &dyn ObjectStore,
    layout: &VolumeDataLayout,
    statuses: Vec<LayerStatus>,
    limits: &Limits,
    findings: &mut Findings,
) -> Result<Vec<VdsLayer>> {
    // One budget for every layer's declared chunks.
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
    // Channel names are looked up once per layer: a map keeps that linear.
    let mut channel_of: HashMap<&str, usize> = HashMap::with_capacity(layout.channels.len());
    for (i, c) in layout.channels.iter().enumerate() {
        channel_of.entry(c.name.as_str()).or_insert(i);
    }
    let mut layers = Vec::with_capacity(statuses.len());
    for st in statuses {
        let geometry = layer_geometry(layout, &channel_of, &st.layer_name, findings);
        // Per-chunk metadata is loaded only for layers whose declared chunk count agrees with
        // their geometry (validation reports the disagreement as vds.layer.chunk_count).
        let chunks = match &geometry {
            Some(g) if g.chunk_count == st.chunk_count => load_chunk_meta(store, &st, findings)?,
            _ => VdsChunkTable::default(),
        };
        layers.push(VdsLayer {
            status: st,
            geometry,
            chunks,
        });
    }
    Ok(layers)
}

/// The geometry a layer's name gives (`<channel>Dimensions_<dims>LOD<n>`), or `None` with a
/// finding saying why there is none.
fn layer_geometry(
    layout: &VolumeDataLayout,
    channel_of: &HashMap<&str, usize>,
    name: &str,
    findings: &mut Findings,
) -> Option<LayerGeometry> {
    let Some((prefix, group, lod)) = parse_layer_name(name) else {
        findings.error(
            "vds.layer.name",
            None,
            format!("layer name {name:?} is not <channel>Dimensions_<dims>LOD<n>"),
        );
        return None;
    };
    let channel = if prefix.is_empty() {
        Some(0)
    } else {
        channel_of.get(prefix.as_str()).copied().filter(|&i| i > 0)
    };
    let Some(c) = channel else {
        findings.error(
            "vds.layer.unknown_channel",
            None,
            format!("layer {name:?} names no channel of the layout"),
        );
        return None;
    };
    if let Some(why) = crate::geometry::layer_allowed(layout, c, &group, lod) {
        findings.error("vds.layer.not_in_layout", None, format!("layer {name:?}: {why}"));
    }
    let g = LayerGeometry::new(layout, c, &group, lod);
    if g.is_none() {
        findings.error(
            "vds.layer.geometry",
            None,
            format!("layer {name:?} has no valid geometry"),
        );
    }
    g
}

/// The layers the dataset says are stored but that cannot be located ("cannot locate" is never
/// "never written"): the container's layer files that could not be opened, `LayerStatus`
/// layers without a geometry or whose chunk metadata does not match it, layers with fewer
/// written chunks on their metadata pages than their `validChunkCount`, and a missing
/// `LayerStatus` (then no channel can be shown never written).
fn unlocatable_layers(
    container: Option<&Container>,
    layout: &VolumeDataLayout,
    layers: &[VdsLayer],
    status_missing: bool,
) -> Vec<Unlocatable> {
    let channel_of = |name: &str| -> Option<usize> {
        let (prefix, _, _) = parse_layer_name(name)?;
        if prefix.is_empty() {
            return Some(0);
        }
        layout.channels.iter().position(|c| c.name == prefix).filter(|&i| i > 0)
    };
    let mut out = Vec::new();
    if status_missing {
        out.push(Unlocatable {
            channel: None,
            what: "LayerStatus".into(),
            code: "vds.layer_status.missing".into(),
            offset: None,
            why: "no LayerStatus object lists the stored layers".into(),
        });
    }
    for file in container.iter().flat_map(|c| &c.files) {
        if file.entry.file_type != crate::raw::FILE_TYPE_VDS || (file.usable && file.layer_meta.is_some()) {
            continue;
        }
        let name = file.entry.name_lossy();
        let (code, offset, why) = match &file.fault {
            Some(f) => (f.code.clone(), f.offset, f.message.clone()),
            None => (
                "vds.container.layer_unusable".to_string(),
                Some(file.entry.entry_offset),
                format!("layer file {name:?} cannot be read"),
            ),
        };
        out.push(Unlocatable {
            channel: channel_of(&name),
            what: format!("layer {name}"),
            code,
            offset,
            why,
        });
    }
    for l in layers {
        let st = &l.status;
        let (code, why) = match &l.geometry {
            None if parse_layer_name(l.name()).is_none() => (
                "vds.layer.name",
                "its name is not <channel>Dimensions_<dims>LOD<n>, so it may be any channel's".to_string(),
            ),
            None => ("vds.layer.geometry", "the layout gives it no geometry".to_string()),
            Some(g) if g.chunk_count != st.chunk_count => (
                "vds.layer.chunk_count",
                format!(
                    "it declares {} chunks, its geometry has {}",
                    st.chunk_count, g.chunk_count
                ),
            ),
            // Chunks on damaged pages already fail their reads with the page's code; the
            // intact pages stay readable.
            Some(_) if l.chunks.has_damaged_pages() => continue,
            Some(_) => {
                let written = l.chunks.stored().filter(|(_, c)| c.hash != 0).count() as u64;
                if written >= st.valid_chunk_count {
                    continue;
                }
                (
                    "vds.layer.valid_chunk_count",
                    format!(
                        "validChunkCount {} but only {written} written chunks are on its metadata pages",
                        st.valid_chunk_count
                    ),
                )
            }
        };
        out.push(Unlocatable {
            channel: l.geometry.as_ref().map(|g| g.channel).or_else(|| channel_of(l.name())),
            what: format!("layer {}", l.name()),
            code: code.into(),
            offset: None,
            why,
        });
    }
    out
}

/// For each `(channel, lod)`, the layer reads use: among several partitionings, the one with
/// most dims (bricks before tiles), then the lowest dims.
fn choose_read_layers(layers: &[VdsLayer], unlocatable: &[Unlocatable]) -> HashMap<(usize, u32), usize> {
    let mut best: HashMap<(usize, u32), usize> = HashMap::new();
    for (i, l) in layers.iter().enumerate() {
        let Some(g) = &l.geometry else { continue };
        if unlocatable.iter().any(|u| u.what == format!("layer {}", l.name())) {
            continue;
        }
        best.entry((g.channel, g.lod))
            .and_modify(|b| {
                let Some(bg) = layers[*b].geometry.as_ref() else { return };
                if g.group.len() > bg.group.len() || (g.group.len() == bg.group.len() && g.group < bg.group) {
                    *b = i;
                }
            })
            .or_insert(i);
    }
    best
}
