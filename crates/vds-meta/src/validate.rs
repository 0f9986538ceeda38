//! Validation: every rule of the VDS storage format this reader knows (see
//! `docs/formats/vds.md` in the repository), collected as findings (never stopping at the
//! first): container structure and extents, layout model, layer names and counts against the
//! geometry, chunk metadata, every chunk decoded to exactly its descriptor's size, and object
//! metadata against the pages. Bricks are checked as they stream, a batch at a time: memory
//! stays within a few bricks per thread whatever the dataset's size.

use rasterpack_common::{Error, ErrorKind, Findings, Report, Severity, ValidateOptions};
use rayon::prelude::*;

use crate::chunk::{self, VdsChunkStatus};
use crate::chunk_table::VdsChunkMeta;
use crate::dataset::{VdsDataset, VdsLayer};
use crate::layout::VdsSampleFormat;
use crate::raw::{FILE_TYPE_JSON, FILE_TYPE_OBJ, FILE_TYPE_VDS};
use crate::wavelet::WaveletScratch;

/// Bricks checked per parallel batch (their findings are collected, then the next batch runs).
const BATCH: usize = 256;

/// Validate an open dataset; the open-time findings are included. Progress is reported in
/// bytes of stored chunk objects checked.
pub fn validate_dataset(ds: &VdsDataset, opts: &ValidateOptions, report: &mut Report) {
    report.findings.extend(ds.findings().clone());
    if let Some(c) = ds.container() {
        container_checks(c, &mut report.findings);
    }
    let totals: Vec<Option<LayerTotals>> = ds
        .layers()
        .iter()
        .map(|l| layer_header_checks(ds, l, &mut report.findings))
        .collect();
    let total: u64 = totals.iter().flatten().map(|t| t.serialized).sum();
    let mut done = 0u64;
    opts.report_progress(0, total);
    for (layer, totals) in ds.layers().iter().zip(&totals) {
        if totals.is_some() {
            check_chunks(ds, layer, opts, &mut done, total, &mut report.findings);
            object_store_checks(ds, layer, &mut report.findings);
        }
    }
    for (ci, ch) in ds.layout().channels.iter().enumerate() {
        if ds.lod0_layer(ci).is_none() {
            if let Some(e) = ds.unlocatable_error(ci) {
                report.findings.error(
                    "vds.channel.unlocatable",
                    e.offset,
                    format!("{} ({})", e.message, e.code),
                );
                continue;
            }
        }
        if ci > 0 && !ds.channel_has_layers(ci) {
            report.findings.warning(
                "vds.channel.unwritten",
                None,
                format!(
                    "channel {:?} is declared but none of its layers is stored: it reads as unwritten bricks",
                    ch.name
                ),
            );
        }
    }
    if ds.lod0_layer(0).is_none() && ds.unlocatable_error(0).is_none() {
        report.findings.warning(
            "vds.layer.no_primary",
            None,
            "no LOD0 layer of the primary channel is stored",
        );
    }
}

pub(crate) fn container_checks(c: &crate::container::Container, f: &mut Findings) {
    let mut ext = c.extents();
    ext.sort_by_key(|e| (e.0, e.1));
    // Any two referenced extents that share bytes are a corrupt allocation.
    let mut reach: Option<(u64, String)> = None;
    for (s, e, what) in &ext {
        if s == e {
            continue;
        }
        if let Some((end, owner)) = &reach {
            if *s < *end {
                f.error(
                    "vds.container.overlap",
                    Some(*s),
                    format!("{what} [{s}, {e}) overlaps {owner} (ends at {end})"),
                );
            }
        }
        if reach.as_ref().is_none_or(|(end, _)| *e > *end) {
            reach = Some((*e, what.clone()));
        }
    }
    for file in &c.files {
        let t = file.entry.file_type;
        let name = file.entry.name_lossy();
        if t == FILE_TYPE_JSON {
            if file.entry.head_chunk_count != 1 {
                f.warning(
                    "vds.container.json_file",
                    Some(file.entry.entry_offset + 8),
                    format!(
                        "JSON file {name:?} has {} chunks, expected 1",
                        file.entry.head_chunk_count
                    ),
                );
            }
        } else if t == FILE_TYPE_OBJ && c.file("VolumeDataLayout").is_some() {
            f.info(
                "vds.container.legacy_object",
                Some(file.entry.entry_offset + 20),
                format!("legacy 'OBJ ' file {name:?} ignored (a VolumeDataLayout exists)"),
            );
        } else if t != FILE_TYPE_VDS && t != FILE_TYPE_OBJ {
            f.info(
                "vds.container.unknown_file_type",
                Some(file.entry.entry_offset + 20),
                format!(
                    "file {name:?} of unknown type {:?} ignored",
                    String::from_utf8_lossy(&t)
                ),
            );
        }
        if t == FILE_TYPE_VDS && file.usable {
            if let Some(lm) = &file.layer_meta {
                if crate::layout::VdsCompression::from_code(lm.compression_method).is_none() {
                    f.error(
                        "vds.container.compression",
                        file.page_dir.as_ref().map(|p| p.offset + 16),
                        format!(
                            "layer file {name:?}: unknown compression method {}",
                            lm.compression_method
                        ),
                    );
                }
            }
        }
    }
}

/// The layer's own rules (counts, metadata sizes, LayerStatus against its name, totals);
/// `Some` with the layer's totals when its chunks can be checked.
fn layer_header_checks(ds: &VdsDataset, layer: &VdsLayer, f: &mut Findings) -> Option<LayerTotals> {
    let name = layer.name().to_owned();
    let st = &layer.status;
    let written = layer.chunks.stored().filter(|(_, c)| c.hash != 0).count() as u64;
    if written != st.valid_chunk_count {
        f.error(
            "vds.layer.valid_chunk_count",
            None,
            format!(
                "layer {name}: validChunkCount {} but {written} chunks have a non-zero hash",
                st.valid_chunk_count
            ),
        );
    }
    let wavelet_meta = st.metadata_byte_size == 28;
    if wavelet_meta && !layer.is_wavelet() {
        f.error(
            "vds.layer.metadata_size",
            None,
            format!(
                "layer {name}: wavelet (adaptive) chunk metadata with {} compression",
                st.compression.name()
            ),
        );
    } else if !wavelet_meta && layer.is_wavelet() {
        // OpenVDS then reads the layer as non-adaptive wavelet (no level table): allowed, noted.
        f.warning(
            "vds.layer.metadata_size",
            None,
            format!("layer {name}: wavelet layer without adaptive-level chunk metadata"),
        );
    }
    if let (Some(ch), Some(lod)) = (&st.channel_name, st.lod) {
        if let Some(g) = &layer.geometry {
            if ds.layout().channels[g.channel].name != *ch || lod != g.lod as i64 {
                f.error(
                    "vds.layer_status.mismatch",
                    None,
                    format!("layer {name}: LayerStatus says channel {ch:?} LOD {lod}, the name says otherwise"),
                );
            }
        }
    }
    let g = layer.geometry.as_ref()?;
    if st.chunk_count != g.chunk_count || layer.chunks.len() != g.chunk_count {
        f.error(
            "vds.layer.chunk_count",
            None,
            format!(
                "layer {name}: {} chunks stored, the geometry has {} ({:?} per dim)",
                st.chunk_count, g.chunk_count, g.chunks
            ),
        );
        return None;
    }
    Some(layer_totals(ds, layer, f))
}

/// Check every chunk of the layer that has an entry on a stored page (the others are
/// unwritten), `BATCH` at a time in parallel, reporting progress after each batch.
fn check_chunks(
    ds: &VdsDataset,
    layer: &VdsLayer,
    opts: &ValidateOptions,
    done: &mut u64,
    total: u64,
    f: &mut Findings,
) {
    let mut stored = layer.chunks.stored().peekable();
    let mut float_codes = 0u64;
    let mut batch: Vec<(u64, VdsChunkMeta)> = Vec::with_capacity(BATCH);
    while stored.peek().is_some() {
        batch.clear();
        batch.extend(stored.by_ref().take(BATCH));
        // A remote store fetches the batch's chunk objects concurrently.
        let keys: Vec<String> = batch
            .iter()
            .filter(|(_, m)| m.status() == VdsChunkStatus::Data)
            .map(|(i, _)| format!("{}/{i}", layer.name()))
            .collect();
        ds.store().prefetch(&keys);
        let results: Vec<(Findings, u64, bool)> = batch
            .par_iter()
            .map_init(CheckBufs::default, |bufs, &(i, meta)| {
                let mut cf = Findings::new();
                let mut float = false;
                let size = chunk_check(ds, layer, i, meta, bufs, &mut cf, &mut float);
                (cf, size, float)
            })
            .collect();
        for (r, size, float) in results {
            float_codes += u64::from(float);
            f.extend(r);
            *done += size;
        }
        opts.report_progress((*done).min(total), total);
    }
    if float_codes > 0 {
        let ch = layer
            .geometry
            .as_ref()
            .map_or("", |g| ds.layout().channels[g.channel].name.as_str());
        f.warning(
            FLOAT_CODES,
            None,
            format!(
                "layer {}: {float_codes} chunk(s) of the {} channel {ch:?} hold a float wavelet stream of its codes \
                 (as OpenVDS 3.4.9 writes WaveletNormalizeBlock[Lossless] U8/U16 layers): rasterpack reads the codes \
                 (physical = code x integerScale + integerOffset); OpenVDS 3.4.9 reads this channel differently \
                 (its float read returns the raw codes, its U8/U16 read a quantization over the value range)",
                layer.name(),
                layer
                    .geometry
                    .as_ref()
                    .map_or("", |g| ds.layout().channels[g.channel].format.name()),
            ),
        );
    }
}

/// A U8/U16 channel stored as a float wavelet stream of its codes (ERRATA, VDS rows).
const FLOAT_CODES: &str = "vds.compat.wavelet_float_codes";

/// Objects of an object store that no written chunk accounts for.
fn object_store_checks(ds: &VdsDataset, layer: &VdsLayer, f: &mut Findings) {
    let store = ds.store();
    if store.kind() == "vds-file" {
        return;
    }
    let name = layer.name();
    let Ok(keys) = store.list(&format!("{name}/")) else {
        return;
    };
    for k in keys {
        let rest = &k[name.len() + 1..];
        if rest.starts_with("ChunkMetadata/") {
            continue;
        }
        match rest.parse::<u64>() {
            Ok(i) if i < layer.chunks.len() => {
                if layer.chunks.get(i).is_some_and(|m| m.hash == 0) {
                    f.warning(
                        "vds.chunk.orphan",
                        None,
                        format!("object {k} exists but its chunk is unwritten (hash 0)"),
                    );
                }
            }
            _ => f.warning(
                "vds.store.unknown_object",
                None,
                format!("object {k} is not a chunk of the layer"),
            ),
        }
    }
}

/// Buffers a validating thread reuses from chunk to chunk.
#[derive(Default)]
struct CheckBufs {
    wavelet: WaveletScratch,
    object: Vec<u8>,
    decoded: Vec<u8>,
}

/// Check chunk `i`: its object against its metadata, and its payload decoded to exactly its
/// descriptor's size. Returns the object's size (for progress); `float_codes` says whether it
/// is a U8/U16 chunk holding a float wavelet stream of its codes.
fn chunk_check(
    ds: &VdsDataset,
    layer: &VdsLayer,
    i: u64,
    meta: VdsChunkMeta,
    bufs: &mut CheckBufs,
    f: &mut Findings,
    float_codes: &mut bool,
) -> u64 {
    let name = layer.name();
    let status = meta.status();
    let key = format!("{name}/{i}");
    let fail = |f: &mut Findings, e: &Error| {
        let sev = if e.kind == ErrorKind::Unsupported {
            Severity::Info
        } else {
            Severity::Error
        };
        f.push(sev, e.code.to_string(), None, format!("chunk {key}: {}", e.message));
    };
    if !layer.is_wavelet() && meta.levels.iter().any(|&b| b != 0) {
        f.warning(
            "vds.chunk.levels",
            None,
            format!("chunk {key}: adaptive levels set in a non-wavelet layer"),
        );
    }
    if status == VdsChunkStatus::Unwritten {
        return 0;
    }
    let stored = match ds.store().get_into(&key, &mut bufs.object) {
        Ok(s) => s,
        Err(e) => {
            fail(f, &e);
            return 0;
        }
    };
    let bytes = &bufs.object;
    if stored {
        // The object checks reads make too (object metadata header, serialized size); damaged
        // pages are reported once, with the page.
        for (sev, code, msg) in ds.chunk_object_checks(layer, i, bytes.len()) {
            if !code.starts_with("vds.layer") {
                f.push(sev, code.to_string(), None, msg);
            }
        }
    }
    let size = if stored { bytes.len() as u64 } else { 0 };
    match status {
        VdsChunkStatus::NoValue | VdsChunkStatus::Constant(_) => {
            if stored && !bytes.is_empty() {
                f.warning(
                    "vds.chunk.constant_stored",
                    None,
                    format!("chunk {key} is {} but {} bytes are stored", status.name(), bytes.len()),
                );
            }
            if status == VdsChunkStatus::NoValue {
                let g = layer.geometry.as_ref();
                if g.is_some_and(|g| !ds.layout().channels[g.channel].use_no_value) {
                    f.warning(
                        "vds.chunk.novalue_unused",
                        None,
                        format!("chunk {key} is all-NoValue in a channel without useNoValue"),
                    );
                }
            }
        }
        VdsChunkStatus::Data => {
            if !stored {
                f.error(
                    "vds.chunk.missing",
                    None,
                    format!(
                        "chunk {key} is written (hash {:016x}) but no object is stored",
                        meta.hash
                    ),
                );
                return 0;
            }
            let Some(spec) = ds.chunk_spec(layer, i) else {
                return size;
            };
            let max_alloc = ds.limits().max_alloc;
            let result = if layer.is_wavelet() {
                if meta.levels[0] == 0 && layer.adaptive() {
                    f.warning(
                        "vds.chunk.levels",
                        None,
                        format!("chunk {key}: wavelet chunk without adaptive levels"),
                    );
                }
                let Some(ch) = layer.geometry.as_ref().map(|g| &ds.layout().channels[g.channel]) else {
                    return size;
                };
                let levels = layer.adaptive().then_some(&meta.levels);
                chunk::decode_wavelet(
                    bytes,
                    &spec,
                    ch,
                    false,
                    levels,
                    max_alloc,
                    &mut bufs.wavelet,
                    &mut bufs.decoded,
                )
                .map(|info| {
                    // Counted per layer by check_chunks (one warning, not one per chunk).
                    *float_codes =
                        matches!(ch.format, VdsSampleFormat::U8 | VdsSampleFormat::U16) && info.integer_info & 1 == 0;
                    // bit 0: an integer stream
                })
            } else {
                chunk::decode_payload(bytes, &spec, max_alloc, &mut bufs.decoded).map(|_| ())
            };
            if let Err(e) = result {
                fail(f, &e);
            }
        }
        VdsChunkStatus::Unwritten => {}
    }
    size
}

/// Totals of a layer's stored chunks.
struct LayerTotals {
    /// Bytes of the chunk objects (what validation reads).
    serialized: u64,
}

/// A layer's `serializedSize` (object store) is the sum of its chunk objects' sizes, its
/// `uncompressedSize` the decoded bytes of its stored (non-constant) chunks, and for wavelet
/// layers `adaptiveLevelSizes[k]` the sum of the chunks' level-k byte sizes.
fn layer_totals(ds: &VdsDataset, layer: &VdsLayer, f: &mut Findings) -> LayerTotals {
    let name = layer.name();
    let mut uncompressed = 0u64;
    let mut serialized = 0u64;
    let mut levels = [0u64; 16];
    for (i, m) in layer.chunks.stored() {
        if m.status() != VdsChunkStatus::Data {
            continue;
        }
        let Some(spec) = ds.chunk_spec(layer, i) else {
            break;
        };
        uncompressed = uncompressed.saturating_add(spec.payload_len().unwrap_or(0));
        // A missing object is reported on its own (vds.chunk.missing); it counts 0 here.
        let size = ds
            .store()
            .object_size(&format!("{name}/{i}"))
            .ok()
            .flatten()
            .unwrap_or(0);
        serialized = serialized.saturating_add(size);
        if layer.is_wavelet() {
            for (k, s) in chunk::adaptive_level_sizes(size, &m.levels).into_iter().enumerate() {
                levels[k] = levels[k].saturating_add(s);
            }
        }
    }
    if let Some(u) = layer.status.uncompressed_size {
        if u != uncompressed {
            f.warning(
                "vds.layer.uncompressed_size",
                None,
                format!("layer {name}: uncompressedSize {u}, its stored chunks decode to {uncompressed} bytes"),
            );
        }
    }
    if let Some(u) = layer.status.serialized_size {
        if u != serialized {
            f.warning(
                "vds.layer.serialized_size",
                None,
                format!("layer {name}: serializedSize {u}, its chunk objects hold {serialized} bytes"),
            );
        }
    }
    if let (Some(a), true) = (&layer.status.adaptive_level_sizes, layer.is_wavelet()) {
        let want: Vec<i64> = levels.iter().map(|&x| x as i64).collect();
        if a.len() == 16 && *a != want {
            f.warning(
                "vds.layer.adaptive_level_sizes",
                None,
                format!("layer {name}: adaptiveLevelSizes {a:?}, the chunks' levels sum to {want:?}"),
            );
        }
    }
    LayerTotals { serialized }
}
