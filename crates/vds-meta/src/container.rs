//! The single-file `.vds` container ("HueDataStore"; the repository's `docs/formats/vds.md` describes it): header, file
//! table, page directories with their copy-on-write revision chain, index pages, and the chunk
//! extents they point at. Parsing never trusts a size: every offset and count is checked against
//! the file and the limits before use; problems that leave a file unreadable become findings.

use std::collections::{HashMap, HashSet};

use rasterpack_common::{ByteReader, Error, Finding, Findings, Input, Limits, Result, Severity};
use serde_json::{json, Value};

use crate::raw::*;
use crate::store::ObjectStore;

/// One file of the container with its head revision resolved.
#[derive(Debug, Clone)]
pub struct ContainerFile {
    /// The file table entry.
    pub entry: FileEntry,
    /// The head page directory (`None` when it could not be read).
    pub page_dir: Option<PageDirectory>,
    /// Raw index pages of the head revision (`None`: never written, every entry zero). Kept
    /// as read so memory follows the file's size, not the declared chunk count.
    pub pages: Vec<Option<Vec<u8>>>,
    /// Chunks in the head revision (0 when the page directory is unusable).
    pub chunk_count: usize,
    /// Parsed layer file metadata (`VDS ` files with 12- or 152-byte metadata).
    pub layer_meta: Option<LayerFileMetadata>,
    /// Number of page directories in the revision chain (head included).
    pub revisions: u32,
    /// Whether every index page of the head could be read.
    pub usable: bool,
    /// Why the file is not usable: its first error finding (a layer file the container holds
    /// but cannot locate the chunks of; reads of its channel fail with it).
    pub fault: Option<Finding>,
}

impl ContainerFile {
    /// Whether the file is a wavelet layer with adaptive level sizes (24-byte chunk metadata, 152-byte file metadata).
    pub fn is_wavelet_adaptive(&self) -> bool {
        self.entry.chunk_metadata_length == 24 && self.entry.file_metadata_length == 152
    }
    fn entry_len(&self) -> usize {
        INDEX_ENTRY_FIXED as usize + self.entry.chunk_metadata_length.max(0) as usize
    }
    fn raw_entry(&self, i: usize) -> Option<(&[u8], u64)> {
        let per = self.entry.index_page_entry_count.max(1) as usize;
        let page = self.pages.get(i / per)?.as_ref()?;
        let el = self.entry_len();
        let s = (i % per) * el;
        let po = self
            .page_dir
            .as_ref()
            .and_then(|pd| pd.index_page_offsets.get(i / per))
            .copied()
            .unwrap_or(0);
        Some((page.get(s..s + el)?, po as u64 + s as u64))
    }
    /// Index entry of chunk `i` (all zero when its page was never written).
    pub fn entry_at(&self, i: usize) -> Option<IndexEntry> {
        if i >= self.chunk_count {
            return None;
        }
        Some(match self.raw_entry(i) {
            None => IndexEntry {
                metadata: vec![0; self.entry.chunk_metadata_length.max(0) as usize],
                ..Default::default()
            },
            Some((b, at)) => IndexEntry {
                offset: le_i64(b, 0),
                length: le_i32(b, 8),
                reserved: le_i32(b, 12),
                metadata: b[16..].to_vec(),
                entry_offset: at,
            },
        })
    }
    /// Entries of the written index pages: `(chunk, entry)`.
    pub fn written_entries(&self) -> impl Iterator<Item = (usize, IndexEntry)> + '_ {
        let per = self.entry.index_page_entry_count.max(1) as usize;
        self.pages
            .iter()
            .enumerate()
            .filter(|(_, p)| p.is_some())
            .flat_map(move |(p, _)| {
                (p * per..((p + 1) * per).min(self.chunk_count)).filter_map(move |i| self.entry_at(i).map(|e| (i, e)))
            })
    }
    /// The hash of chunk `chunk` (0, unwritten, past the chunk count or on a page never written).
    pub fn hash(&self, chunk: usize) -> u64 {
        if chunk >= self.chunk_count {
            return 0;
        }
        self.raw_entry(chunk).map(|(b, _)| le_i64(b, 16) as u64).unwrap_or(0)
    }
    /// `(offset, length)` of chunk `i`'s bytes.
    pub fn extent(&self, i: usize) -> (i64, i32) {
        self.raw_entry(i)
            .map(|(b, _)| (le_i64(b, 0), le_i32(b, 8)))
            .unwrap_or((0, 0))
    }
}

/// A parsed `.vds` container.
#[derive(Debug)]
pub struct Container {
    input: Input,
    limits: Limits,
    /// The container header.
    pub header: ContainerHeader,
    /// Every file of the file table, in table order.
    pub files: Vec<ContainerFile>,
    /// Structural findings met while parsing (all of them, not only the first).
    pub findings: Findings,
    /// File name -> index of its first entry in `files` (lookups stay O(1) however many
    /// files a container declares).
    by_name: HashMap<Vec<u8>, usize>,
}

/// Does `head` start with the container magic?
pub fn is_container(head: &[u8]) -> bool {
    head.len() >= 12 && &head[..12] == CONTAINER_MAGIC
}

fn le_i64(b: &[u8], at: usize) -> i64 {
    b.get(at..at + 8)
        .map(|s| i64::from_le_bytes(s.try_into().unwrap_or([0; 8])))
        .unwrap_or(0)
}
fn le_i32(b: &[u8], at: usize) -> i32 {
    b.get(at..at + 4)
        .map(|s| i32::from_le_bytes(s.try_into().unwrap_or([0; 4])))
        .unwrap_or(0)
}

impl Container {
    /// Parse the header, file table, head page directories and index pages.
    pub fn open(input: &Input, limits: &Limits) -> Result<Container> {
        let len = input.len();
        let mut f = Findings::new();
        let hb = input.read_vec(0, HEADER_LEN.min(len), "container header", limits)?;
        if hb.len() < 12 || &hb[..12] != CONTAINER_MAGIC {
            return Err(Error::invalid(
                "vds.container.magic",
                0,
                "not a HueDataStore container (magic)",
            ));
        }
        if (hb.len() as u64) < HEADER_LEN {
            return Err(Error::truncated("container header", 0, HEADER_LEN, len).in_format("vds.container"));
        }
        let mut r = ByteReader::new(&hb);
        let header = ContainerHeader {
            magic: r.array("magic")?,
            version: r.i32_le("version")?,
            file_table_offset: r.i64_le("fileTableOffset")?,
            file_count: r.i32_le("fileCount")?,
            file_name_length: r.i32_le("fileNameLength")?,
        };
        if header.version != CONTAINER_VERSION {
            f.warning(
                "vds.container.version",
                Some(12),
                format!("version {:#x}, expected 0x10000", header.version),
            );
        }
        if header.file_count < 0 || header.file_name_length < 0 || header.file_table_offset < HEADER_LEN as i64 {
            return Err(Error::invalid(
                "vds.container.file_table",
                16,
                format!(
                    "file table offset {} / count {} / name length {} out of range",
                    header.file_table_offset, header.file_count, header.file_name_length
                ),
            ));
        }
        if header.file_name_length % 8 != 0 {
            f.warning(
                "vds.container.name_length",
                Some(28),
                format!("fileNameLength {} is not a multiple of 8", header.file_name_length),
            );
        }
        let entry_len = FILE_ENTRY_FIXED + header.file_name_length as u64;
        let table_len = entry_len
            .checked_mul(header.file_count as u64)
            .ok_or_else(|| Error::invalid("vds.container.file_table", 24, "file table size overflows"))?;
        if header.file_count as u64 > limits.max_entries {
            return Err(Error::limit(
                "limit.entries",
                Some(24),
                format!("{} files in the container", header.file_count),
            ));
        }
        let table = input
            .read_vec(header.file_table_offset as u64, table_len, "file table", limits)
            .map_err(|e| {
                if e.code == "truncated" {
                    Error {
                        code: "vds.container.file_table".into(),
                        ..e
                    }
                } else {
                    e
                }
            })?;
        let mut files = Vec::new();
        let mut names = HashSet::new();
        for i in 0..header.file_count as u64 {
            let at = (i * entry_len) as usize;
            let b = &table[at..at + entry_len as usize];
            let entry_offset = header.file_table_offset as u64 + i * entry_len;
            let raw_name = &b[32..];
            let name = raw_name
                .iter()
                .position(|&c| c == 0)
                .map(|p| &raw_name[..p])
                .unwrap_or(raw_name)
                .to_vec();
            let entry = FileEntry {
                entry_offset,
                head_page_directory_offset: le_i64(b, 0),
                head_chunk_count: le_i32(b, 8),
                head_revision: le_i32(b, 12),
                index_page_entry_count: le_i32(b, 16),
                file_type: [b[20], b[21], b[22], b[23]],
                chunk_metadata_length: le_i32(b, 24),
                file_metadata_length: le_i32(b, 28),
                name,
            };
            if !names.insert(entry.name.clone()) {
                f.error(
                    "vds.container.duplicate_name",
                    Some(entry_offset + 32),
                    format!("file name {:?} used twice", entry.name_lossy()),
                );
            }
            let before = f.len();
            let mut file = Self::open_file(input, limits, entry, &mut f);
            if !file.usable {
                file.fault = f.iter().skip(before).find(|x| x.severity == Severity::Error).cloned();
            }
            files.push(file);
        }
        let mut by_name = HashMap::with_capacity(files.len());
        for (i, file) in files.iter().enumerate() {
            by_name.entry(file.entry.name.clone()).or_insert(i);
        }
        let c = Container {
            input: input.clone(),
            limits: *limits,
            header,
            files,
            findings: f,
            by_name,
        };
        Ok(c)
    }

    /// One file of the container, in stages: the entry's own fields, the revision chain of
    /// page directories, the head's index pages, the chunk extents they list, and (for layer
    /// files) the layer metadata. A stage that fails leaves the file unusable, with findings.
    fn open_file(input: &Input, limits: &Limits, entry: FileEntry, f: &mut Findings) -> ContainerFile {
        let mut file = ContainerFile {
            entry,
            page_dir: None,
            pages: Vec::new(),
            chunk_count: 0,
            layer_meta: None,
            revisions: 0,
            usable: false,
            fault: None,
        };
        if !check_file_entry(&file.entry, limits, f) {
            return file;
        }
        let (head, revisions) = walk_revision_chain(input, limits, &file.entry, f);
        file.revisions = revisions;
        let Some(pd) = head else { return file };
        let Some((pages, mut usable)) = read_index_pages(input, limits, &file.entry, &pd, f) else {
            return file;
        };
        file.pages = pages;
        file.chunk_count = file.entry.head_chunk_count as usize;
        file.page_dir = Some(pd);
        if usable {
            usable = check_chunk_extents(&file, input.len(), f);
        }
        if file.entry.file_type == FILE_TYPE_VDS {
            let (meta, ok) = parse_layer_metadata(&file, f);
            file.layer_meta = meta;
            usable &= ok;
        }
        file.usable = usable;
        file
    }

    /// The first file named `name`.
    pub fn file(&self, name: &str) -> Option<&ContainerFile> {
        self.by_name.get(name.as_bytes()).and_then(|&i| self.files.get(i))
    }

    /// The input the container was read from.
    pub fn input(&self) -> &Input {
        &self.input
    }

    /// Bytes of chunk `i` of `file` (length checked at open).
    pub fn chunk_bytes(&self, file: &ContainerFile, i: usize) -> Result<Vec<u8>> {
        if i >= file.chunk_count {
            return Err(Error::invalid_at(
                "vds.container.chunk_extent",
                None,
                "chunk index out of range",
            ));
        }
        let (offset, length) = file.extent(i);
        if length <= 0 || offset < 0 {
            return Ok(Vec::new());
        }
        self.input.read_vec(offset as u64, length as u64, "chunk", &self.limits)
    }

    /// Extents of everything the head revisions reference, for the overlap check:
    /// `(start, end, what)`.
    pub fn extents(&self) -> Vec<(u64, u64, String)> {
        let mut v = vec![(0, HEADER_LEN, "header".to_string())];
        // Saturating: the declared numbers are only range-checked where they were read.
        let entry_len = FILE_ENTRY_FIXED + self.header.file_name_length.max(0) as u64;
        let table_at = self.header.file_table_offset.max(0) as u64;
        v.push((
            table_at,
            table_at.saturating_add(entry_len.saturating_mul(self.header.file_count.max(0) as u64)),
            "file table".into(),
        ));
        for file in &self.files {
            let name = file.entry.name_lossy();
            let Some(pd) = &file.page_dir else { continue };
            v.push((
                pd.offset,
                pd.index_offsets_at
                    .saturating_add(8 * pd.index_page_offsets.len() as u64),
                format!("page directory of {name}"),
            ));
            let page_len = (INDEX_ENTRY_FIXED + file.entry.chunk_metadata_length.max(0) as u64)
                .saturating_mul(file.entry.index_page_entry_count.max(0) as u64);
            for (p, &po) in pd.index_page_offsets.iter().enumerate() {
                if po > 0 {
                    v.push((
                        po as u64,
                        (po as u64).saturating_add(page_len),
                        format!("index page {p} of {name}"),
                    ));
                }
            }
            if file.usable {
                for (i, ie) in file.written_entries() {
                    if ie.length > 0 {
                        v.push((
                            ie.offset as u64,
                            (ie.offset as u64).saturating_add(ie.length as u64),
                            format!("chunk {i} of {name}"),
                        ));
                    }
                }
            }
        }
        v
    }

    /// A LayerStatus document equivalent to what the container's layer files say, so the
    /// dataset code reads both storage kinds the same way.
    fn layer_status_json(&self) -> Value {
        let mut arr = Vec::new();
        for file in &self.files {
            if file.entry.file_type != FILE_TYPE_VDS || !file.usable {
                continue;
            }
            let Some(lm) = &file.layer_meta else { continue };
            let comp = crate::layout::VdsCompression::from_code(lm.compression_method)
                .map(|c| c.name())
                .unwrap_or("Unknown");
            let wavelet = file.is_wavelet_adaptive();
            let mut o = json!({
                "layerName": file.entry.name_lossy(),
                "compressionMethod": comp,
                "compressionTolerance": lm.tolerance as f64,
                "chunkCount": file.entry.head_chunk_count,
                "validChunkCount": lm.valid_chunk_count.max(0),
                "chunkMetadataPageSize": file.entry.index_page_entry_count,
                "chunkMetadataByteSize": if wavelet { 28 } else { 8 },
                "hasChunkMetadataPages": true,
            });
            if let (Some(u), Some(a)) = (lm.uncompressed_size, lm.adaptive_level_sizes) {
                o["uncompressedSize"] = json!(u.max(0));
                o["adaptiveLevelSizes"] = json!(a.to_vec());
            }
            arr.push(o);
        }
        Value::Array(arr)
    }

    fn layer_file(&self, layer: &str) -> Result<&ContainerFile> {
        let f = self
            .file(layer)
            .filter(|f| f.entry.file_type == FILE_TYPE_VDS)
            .ok_or_else(|| {
                Error::invalid_at("vds.container.missing_layer", None, format!("no layer file {layer:?}"))
            })?;
        if !f.usable {
            return Err(Error::invalid_at(
                "vds.container.layer_unusable",
                None,
                format!("layer file {layer:?} cannot be read"),
            ));
        }
        Ok(f)
    }
}

/// The file entry's counts and lengths are in range, it has a page directory, and its chunk
/// count is within the limits.
fn check_file_entry(e: &FileEntry, limits: &Limits, f: &mut Findings) -> bool {
    let eo = e.entry_offset;
    let name = e.name_lossy();
    if e.head_chunk_count < 0
        || e.index_page_entry_count < 1
        || e.chunk_metadata_length < 0
        || e.file_metadata_length < 0
    {
        f.error(
            "vds.container.file_entry",
            Some(eo),
            format!(
                "file {name:?}: chunk count {}, index page entries {}, metadata lengths {}/{} out of range",
                e.head_chunk_count, e.index_page_entry_count, e.chunk_metadata_length, e.file_metadata_length
            ),
        );
        return false;
    }
    if e.head_page_directory_offset == 0 {
        f.error(
            "vds.container.page_directory",
            Some(eo),
            format!("file {name:?} has no page directory (cannot be opened)"),
        );
        return false;
    }
    let count = e.head_chunk_count as u64;
    if count > limits.max_entries {
        f.push_error(&Error::limit(
            "limit.entries",
            Some(eo + 8),
            format!("file {name:?} declares {count} chunks"),
        ));
        return false;
    }
    true
}

/// Walk the copy-on-write revision chain from the head page directory to the oldest (bounded,
/// cycle-checked); only the head is parsed whole, with its index page offsets. Returns the head
/// (if it could be read) and the number of page directories met.
fn walk_revision_chain(
    input: &Input,
    limits: &Limits,
    e: &FileEntry,
    f: &mut Findings,
) -> (Option<PageDirectory>, u32) {
    let eo = e.entry_offset;
    let name = e.name_lossy();
    let pages = (e.head_chunk_count as u64).div_ceil(e.index_page_entry_count as u64);
    let fml = e.file_metadata_length as u64;
    let mut seen = HashSet::new();
    let mut at = e.head_page_directory_offset;
    let mut head: Option<PageDirectory> = None;
    let mut depth = 0u32;
    while at != 0 {
        if at < 0 || !seen.insert(at) || depth >= limits.max_depth.max(1) * 16 {
            f.error(
                "vds.container.revision_chain",
                Some(eo),
                format!("file {name:?}: page directory chain loops or is too long at offset {at}"),
            );
            break;
        }
        depth += 1;
        let is_head = head.is_none();
        let fixed = match input.read_vec(at as u64, PAGE_DIR_FIXED + fml, "page directory", limits) {
            Ok(b) => b,
            Err(err) => {
                let code = if is_head {
                    "vds.container.page_directory"
                } else {
                    "vds.container.revision_chain"
                };
                f.error(
                    code,
                    Some(at as u64),
                    format!(
                        "file {name:?}: page directory at {at} is outside the file ({})",
                        err.message
                    ),
                );
                break;
            }
        };
        let pd_prev = le_i64(&fixed, 0);
        if is_head {
            let idx_at = at as u64 + PAGE_DIR_FIXED + fml;
            let offs = match input.read_vec(idx_at, pages * 8, "index page offsets", limits) {
                Ok(b) => b
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                    .collect(),
                Err(err) => {
                    f.error(
                        "vds.container.page_directory",
                        Some(idx_at),
                        format!("file {name:?}: index page offsets outside the file ({})", err.message),
                    );
                    break;
                }
            };
            head = Some(PageDirectory {
                offset: at as u64,
                prev_page_dir_offset: pd_prev,
                prev_chunk_count: le_i32(&fixed, 8),
                prev_revision: le_i32(&fixed, 12),
                file_metadata: fixed[16..].to_vec(),
                index_page_offsets: offs,
                index_offsets_at: idx_at,
            });
        }
        at = pd_prev;
    }
    (head, depth)
}

/// Read the head's index pages as stored (`None` for a page never written); the last page's
/// padding past the chunk count should be zero. Returns the pages and whether all could be
/// read, or `None` when the page size overflows.
fn read_index_pages(
    input: &Input,
    limits: &Limits,
    e: &FileEntry,
    pd: &PageDirectory,
    f: &mut Findings,
) -> Option<(Vec<Option<Vec<u8>>>, bool)> {
    let name = e.name_lossy();
    let per_page = e.index_page_entry_count as u64;
    let entry_len = INDEX_ENTRY_FIXED + e.chunk_metadata_length as u64;
    let Some(page_len) = entry_len.checked_mul(per_page) else {
        f.error(
            "vds.container.index_page",
            Some(e.entry_offset),
            format!("file {name:?}: index page size overflows"),
        );
        return None;
    };
    let mut pages = Vec::with_capacity(pd.index_page_offsets.len());
    let mut usable = true;
    for (p, &po) in pd.index_page_offsets.iter().enumerate() {
        let page = if po == 0 {
            None
        } else if po < 0 {
            f.error(
                "vds.container.index_page",
                Some(pd.index_offsets_at + p as u64 * 8),
                format!("file {name:?}: index page {p} offset {po} is negative"),
            );
            usable = false;
            None
        } else {
            match input.read_vec(po as u64, page_len, "index page", limits) {
                Ok(b) => Some(b),
                Err(err) => {
                    f.error(
                        "vds.container.index_page",
                        Some(pd.index_offsets_at + p as u64 * 8),
                        format!(
                            "file {name:?}: index page {p} at {po} lies outside the file ({})",
                            err.message
                        ),
                    );
                    usable = false;
                    None
                }
            }
        };
        pages.push(page);
    }
    // The last page is zero-padded past the chunk count.
    if let Some(Some(last)) = pages.last() {
        let count = e.head_chunk_count as u64;
        let used = (count - (pages.len() as u64 - 1) * per_page) * entry_len;
        if (used as usize) < last.len() && last[used as usize..].iter().any(|&b| b != 0) {
            let po = pd.index_page_offsets.last().copied().unwrap_or(0) as u64;
            f.warning(
                "vds.container.index_padding",
                Some(po + used),
                format!("file {name:?}: the last index page's padding entries are not zero"),
            );
        }
    }
    Some((pages, usable))
}

/// Every written chunk's extent lies inside the file (after the header), and its reserved
/// field is zero. Returns whether every extent is usable.
fn check_chunk_extents(file: &ContainerFile, file_len: u64, f: &mut Findings) -> bool {
    let name = file.entry.name_lossy();
    let mut bad = Vec::new();
    for (i, ie) in file.written_entries() {
        let bad_len = ie.length < 0 || ie.offset < 0 || (ie.length == 0 && ie.offset != 0);
        let end = (ie.offset as u64).checked_add(ie.length.max(0) as u64);
        if bad_len || end.is_none_or(|e| e > file_len) || (ie.length > 0 && (ie.offset as u64) < HEADER_LEN) {
            bad.push((
                ie.entry_offset,
                format!(
                    "file {name:?} chunk {i}: extent [{}, +{}) lies outside the file ({file_len} bytes)",
                    ie.offset, ie.length
                ),
            ));
        }
        if ie.reserved != 0 {
            f.warning(
                "vds.container.reserved",
                Some(ie.entry_offset + 12),
                format!("file {name:?} chunk {i}: reserved field is {}", ie.reserved),
            );
        }
    }
    let usable = bad.is_empty();
    for (at, msg) in bad {
        f.error("vds.container.chunk_extent", Some(at), msg);
    }
    usable
}

/// A layer file's metadata: 12 bytes (compression method, tolerance, valid chunk count), or
/// 152 for wavelet-adaptive layers (plus the uncompressed size and 16 adaptive level sizes);
/// its chunk metadata entries are 8 or 24 bytes. Returns the metadata and whether it is usable.
fn parse_layer_metadata(file: &ContainerFile, f: &mut Findings) -> (Option<LayerFileMetadata>, bool) {
    let e = &file.entry;
    let eo = e.entry_offset;
    let name = e.name_lossy();
    let mut usable = true;
    let mut meta = None;
    let m = file
        .page_dir
        .as_ref()
        .map(|pd| pd.file_metadata.as_slice())
        .unwrap_or(&[]);
    if m.len() == 12 || m.len() == 152 {
        let mut lm = LayerFileMetadata {
            compression_method: le_i32(m, 0),
            tolerance: f32::from_bits(le_i32(m, 4) as u32),
            valid_chunk_count: le_i32(m, 8),
            uncompressed_size: None,
            adaptive_level_sizes: None,
        };
        if m.len() == 152 {
            lm.uncompressed_size = Some(le_i64(m, 16));
            let mut a = [0i64; 16];
            for (k, v) in a.iter_mut().enumerate() {
                *v = le_i64(m, 24 + 8 * k);
            }
            lm.adaptive_level_sizes = Some(a);
        }
        meta = Some(lm);
    } else {
        f.error(
            "vds.container.layer_metadata",
            Some(eo + 28),
            format!(
                "layer file {name:?}: file metadata is {} bytes (expected 12, or 152 for wavelet)",
                m.len()
            ),
        );
        usable = false;
    }
    let cml = e.chunk_metadata_length;
    if cml != 8 && cml != 24 {
        f.error(
            "vds.container.layer_metadata",
            Some(eo + 24),
            format!("layer file {name:?}: chunk metadata length {cml} (expected 8 or 24)"),
        );
        usable = false;
    }
    (meta, usable)
}

impl ObjectStore for Container {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        if key == "VolumeDataLayout" {
            let Some(f) = self
                .file("VolumeDataLayout")
                .filter(|f| f.entry.file_type == FILE_TYPE_JSON)
            else {
                return Ok(None);
            };
            if !f.usable || f.chunk_count == 0 {
                return Err(Error::invalid_at(
                    "vds.container.layout_file",
                    Some(f.entry.entry_offset),
                    "the VolumeDataLayout file cannot be read",
                ));
            }
            return self.chunk_bytes(f, 0).map(Some);
        }
        if key == "LayerStatus" {
            return Ok(Some(self.layer_status_json().to_string().into_bytes()));
        }
        let Some((layer, rest)) = key.split_once('/') else {
            return Ok(None);
        };
        let file = self.layer_file(layer)?;
        if let Some(p) = rest.strip_prefix("ChunkMetadata/") {
            let Ok(p) = p.parse::<u64>() else { return Ok(None) };
            let per = file.entry.index_page_entry_count as u64;
            let first = p.saturating_mul(per);
            if first >= file.chunk_count as u64 {
                return Ok(None);
            }
            let pd = file.page_dir.as_ref();
            if pd
                .and_then(|pd| pd.index_page_offsets.get(p as usize))
                .copied()
                .unwrap_or(0)
                == 0
            {
                return Ok(None);
            }
            let wavelet = file.is_wavelet_adaptive();
            let esz = if wavelet { 28 } else { 8 };
            let mut page = vec![0u8; (per as usize).saturating_mul(esz)];
            for k in 0..per as usize {
                let Some(ie) = file.entry_at(first as usize + k) else {
                    break;
                };
                let o = k * esz;
                if wavelet {
                    page[o..o + 4].copy_from_slice(&(ie.length.max(0) as u32).to_le_bytes());
                    let m = ie.metadata.len().min(24);
                    page[o + 4..o + 4 + m].copy_from_slice(&ie.metadata[..m]);
                } else {
                    let m = ie.metadata.len().min(8);
                    page[o..o + m].copy_from_slice(&ie.metadata[..m]);
                }
            }
            return Ok(Some(page));
        }
        let Ok(i) = rest.parse::<usize>() else { return Ok(None) };
        if i >= file.chunk_count || file.hash(i) == 0 {
            return Ok(None);
        }
        self.chunk_bytes(file, i).map(Some)
    }

    fn get_into(&self, key: &str, buf: &mut Vec<u8>) -> Result<bool> {
        // Chunk objects are read straight into the reused buffer (no zeroing, no allocation).
        if let Some((layer, rest)) = key.split_once('/') {
            if let Ok(i) = rest.parse::<usize>() {
                let file = self.layer_file(layer)?;
                if i >= file.chunk_count || file.hash(i) == 0 {
                    return Ok(false);
                }
                let (offset, length) = file.extent(i);
                let len = length.max(0) as u64;
                let n = self.limits.check_alloc(len, "chunk", Some(offset.max(0) as u64))?;
                buf.resize(n, 0);
                self.input.read_at(offset.max(0) as u64, &mut buf[..n], "chunk")?;
                return Ok(true);
            }
        }
        match self.get(key)? {
            Some(v) => {
                *buf = v;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let mut v: Vec<String> = Vec::new();
        for f in &self.files {
            let n = f.entry.name_lossy();
            if f.entry.file_type == FILE_TYPE_VDS {
                for (i, _) in f.written_entries() {
                    if f.hash(i) != 0 {
                        v.push(format!("{n}/{i}"));
                    }
                }
            } else {
                v.push(n);
            }
        }
        v.retain(|k| k.starts_with(prefix));
        v.sort();
        Ok(v)
    }

    fn kind(&self) -> &'static str {
        "vds-file"
    }

    /// The chunks' extents in the file, announced to a remote input: bricks stored end to end
    /// are fetched in one request (see `Input::prefetch`). Local files: nothing.
    fn prefetch(&self, keys: &[String]) {
        if !self.input.is_remote() {
            return;
        }
        let ranges: Vec<std::ops::Range<u64>> = keys
            .iter()
            .filter_map(|key| {
                let (layer, rest) = key.split_once('/')?;
                let i = rest.parse::<usize>().ok()?;
                let file = self.layer_file(layer).ok()?;
                if i >= file.chunk_count || file.hash(i) == 0 {
                    return None;
                }
                let (offset, length) = file.extent(i);
                let start = u64::try_from(offset).ok()?;
                let len = u64::try_from(length).ok().filter(|&n| n > 0)?;
                Some(start..start.checked_add(len)?)
            })
            .collect();
        self.input.prefetch(&ranges);
    }

    fn stored_metadata_pages(&self, layer: &str, pages: u64) -> Result<Option<Vec<u64>>> {
        let file = self.layer_file(layer)?;
        let written = file.page_dir.as_ref().map(|pd| {
            pd.index_page_offsets
                .iter()
                .enumerate()
                .filter(|&(p, &o)| o != 0 && (p as u64) < pages)
                .map(|(p, _)| p as u64)
                .collect()
        });
        Ok(Some(written.unwrap_or_default()))
    }

    fn object_size(&self, key: &str) -> Result<Option<u64>> {
        if let Some((layer, rest)) = key.split_once('/') {
            if let Ok(i) = rest.parse::<usize>() {
                let file = self.layer_file(layer)?;
                if i >= file.chunk_count || file.hash(i) == 0 {
                    return Ok(None);
                }
                return Ok(Some(file.extent(i).1.max(0) as u64));
            }
        }
        Ok(self.get(key)?.map(|b| b.len() as u64))
    }
}
