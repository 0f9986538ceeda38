//! Per-chunk metadata of a layer (hashes, wavelet adaptive levels, serialized sizes), read from
//! its chunk-metadata pages (object store) or index pages (container) and kept per stored page:
//! memory follows the pages a dataset stores, never the chunk count its layers declare, so a
//! huge layout with a few written bricks stays small. A chunk on no stored page is unwritten.

use rasterpack_common::{ErrorKind, Findings, Result};

use crate::chunk::VdsChunkStatus;
use crate::layout::LayerStatus;
use crate::store::ObjectStore;

/// Metadata of one chunk, from its layer's chunk-metadata page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VdsChunkMeta {
    /// The chunk's hash: 0 unwritten, all ones NoValue, `0x01010101` in the high half a
    /// constant (the low half its f32), anything else stored data.
    pub hash: u64,
    /// Wavelet adaptive levels (zeros for other layers).
    pub levels: [u8; 16],
    /// Wavelet entries of object-store pages carry the serialized size.
    pub serialized_size: Option<u32>,
    /// Set (to the finding's code) when the page holding this entry is missing or not of its
    /// full length: reads of the chunk fail instead of treating it as unwritten.
    pub page_damaged: Option<&'static str>,
}

impl VdsChunkMeta {
    /// What the hash says about the chunk.
    pub fn status(&self) -> VdsChunkStatus {
        VdsChunkStatus::from_hash(self.hash)
    }
}

/// One page of entries as stored (or a page known to be damaged).
#[derive(Debug, Clone, PartialEq, Eq)]
struct MetaPage {
    number: u64,
    hashes: Vec<u64>,
    /// Adaptive levels and serialized sizes, for 28-byte (wavelet) entries only.
    levels: Vec<[u8; 16]>,
    sizes: Vec<u32>,
    damaged: Option<&'static str>,
}

/// The chunk metadata of one layer: `len()` chunks, of which those on stored pages are kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VdsChunkTable {
    count: u64,
    page_size: u64,
    /// Stored (or damaged) pages, ascending by page number.
    pages: Vec<MetaPage>,
    /// Pages from this number on are damaged (past a short page directory), with the code.
    damaged_from: Option<(u64, &'static str)>,
}

impl VdsChunkTable {
    /// Number of chunks the table describes (0 when the layer's metadata was not loaded).
    pub fn len(&self) -> u64 {
        self.count
    }

    /// True when the table describes no chunk.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Metadata of chunk `index` (all zero, i.e. unwritten, when its page is not stored);
    /// `None` past the end.
    pub fn get(&self, index: u64) -> Option<VdsChunkMeta> {
        if index >= self.count {
            return None;
        }
        let number = index / self.page_size;
        let Ok(p) = self.pages.binary_search_by_key(&number, |p| p.number) else {
            let page_damaged = self
                .damaged_from
                .filter(|&(from, _)| number >= from)
                .map(|(_, code)| code);
            return Some(VdsChunkMeta {
                page_damaged,
                ..VdsChunkMeta::default()
            });
        };
        let page = &self.pages[p];
        let k = (index % self.page_size) as usize;
        Some(VdsChunkMeta {
            hash: page.hashes.get(k).copied().unwrap_or(0),
            levels: page.levels.get(k).copied().unwrap_or_default(),
            serialized_size: page.sizes.get(k).copied(),
            page_damaged: page.damaged,
        })
    }

    /// Every chunk with an entry on a stored page, ascending: the only chunks whose hash can
    /// be other than 0 (every other chunk is unwritten, or on a damaged page).
    pub fn stored(&self) -> impl Iterator<Item = (u64, VdsChunkMeta)> + '_ {
        self.pages.iter().flat_map(move |page| {
            let first = page.number.saturating_mul(self.page_size);
            (first..first + page.hashes.len() as u64).filter_map(move |i| self.get(i).map(|m| (i, m)))
        })
    }

    /// Whether some page is damaged (missing though listed, short, unreadable, past a short
    /// page directory): reads of its chunks fail with the page's code.
    pub fn has_damaged_pages(&self) -> bool {
        self.damaged_from.is_some() || self.pages.iter().any(|p| p.damaged.is_some())
    }

    /// Number of chunks [`VdsChunkTable::stored`] yields.
    pub fn stored_len(&self) -> u64 {
        self.pages.iter().map(|p| p.hashes.len() as u64).sum()
    }
}

/// Read every stored chunk-metadata page of a layer. Pages that should be there but are not
/// (listed in a page directory, or short) are findings and mark their chunks damaged.
pub(crate) fn load_chunk_meta(store: &dyn ObjectStore, st: &LayerStatus, f: &mut Findings) -> Result<VdsChunkTable> {
    let n = st.chunk_count;
    let ps = st.page_size.max(1);
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
    let mut table = VdsChunkTable {
        count: n,
        page_size: ps,
        pages: Vec::new(),
        damaged_from: None,
    };
    let damaged = |number: u64, code: &'static str| MetaPage {
        number,
        hashes: Vec::new(),
        levels: Vec::new(),
        sizes: Vec::new(),
        damaged: Some(code),
    };
    // The pages to look at: the page directory's, else those the store holds (a listing
    // instead of a lookup per declared page).
    let numbers: Vec<u64> = match &st.page_directory {
        Some(pd) => (0..pages.min(pd.len() as u64 + 1)).collect(),
        None => match store.stored_metadata_pages(&st.layer_name, pages)? {
            Some(v) => v,
            None => (0..pages).collect(),
        },
    };
    // A remote store fetches the first pages concurrently (the loop below then takes them in
    // order); a store's prefetch window is smaller than 64 anyway.
    let keys: Vec<String> = numbers
        .iter()
        .take(64)
        .filter_map(|&p| match &st.page_directory {
            Some(pd) => pd.get(p as usize).copied().filter(|&k| k >= 0),
            None => Some(p as i64),
        })
        .map(|k| format!("{}/ChunkMetadata/{k}", st.layer_name))
        .collect();
    store.prefetch(&keys);
    for p in numbers {
        let key_n: i64 = match &st.page_directory {
            Some(pd) => match pd.get(p as usize) {
                Some(&k) => k,
                None => {
                    // Every page past a short directory is damaged (one mark, not one per page).
                    table.damaged_from = Some((p, "vds.layer_status.page_directory"));
                    break;
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
                    table.pages.push(damaged(p, "vds.layer.metadata_page_missing"));
                }
                continue;
            }
            Err(e) if e.kind == ErrorKind::Io || e.kind == ErrorKind::LimitExceeded => return Err(e),
            Err(e) => {
                f.push_error(&e);
                table.pages.push(damaged(p, "vds.layer.metadata_page"));
                continue;
            }
        };
        let full = page.len() as u64 == ps.saturating_mul(esz);
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
        table.pages.push(parse_page(
            p,
            &page,
            ps,
            n,
            esz,
            (!full).then_some("vds.layer.metadata_page_size"),
        ));
    }
    // Page numbers come ascending from every source; keep the lookup's invariant regardless.
    table.pages.sort_by_key(|p| p.number);
    table.pages.dedup_by_key(|p| p.number);
    Ok(table)
}

/// The entries of page `number` that fall inside the layer and the page's bytes.
fn parse_page(number: u64, page: &[u8], ps: u64, n: u64, esz: u64, damaged: Option<&'static str>) -> MetaPage {
    let first = number.saturating_mul(ps);
    let entries = ps.min(n.saturating_sub(first)).min(page.len() as u64 / esz.max(1)) as usize;
    let wavelet = esz == 28;
    let mut out = MetaPage {
        number,
        hashes: Vec::with_capacity(entries),
        levels: Vec::new(),
        sizes: Vec::new(),
        damaged,
    };
    for e in page.chunks_exact(esz as usize).take(entries) {
        if wavelet {
            let mut levels = [0u8; 16];
            levels.copy_from_slice(&e[12..28]);
            out.sizes.push(u32::from_le_bytes([e[0], e[1], e[2], e[3]]));
            out.hashes
                .push(u64::from_le_bytes(e[4..12].try_into().unwrap_or([0; 8])));
            out.levels.push(levels);
        } else {
            out.hashes.push(u64::from_le_bytes(e[..8].try_into().unwrap_or([0; 8])));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unstored_pages_read_unwritten() {
        let mut page = Vec::new();
        for h in [5u64, 0, 7] {
            page.extend_from_slice(&h.to_le_bytes());
        }
        let t = VdsChunkTable {
            count: 10,
            page_size: 3,
            pages: vec![
                parse_page(1, &page, 3, 10, 8, None),
                MetaPage {
                    number: 2,
                    hashes: vec![],
                    levels: vec![],
                    sizes: vec![],
                    damaged: Some("x"),
                },
            ],
            damaged_from: Some((3, "y")),
        };
        assert_eq!(t.get(0), Some(VdsChunkMeta::default()));
        assert_eq!(t.get(3).map(|m| m.hash), Some(5));
        assert_eq!(t.get(5).map(|m| m.hash), Some(7));
        assert_eq!(t.get(7).and_then(|m| m.page_damaged), Some("x"));
        assert_eq!(t.get(9).and_then(|m| m.page_damaged), Some("y"));
        assert_eq!(t.get(10), None);
        let stored: Vec<u64> = t.stored().map(|(i, _)| i).collect();
        assert_eq!(stored, vec![3, 4, 5]);
        assert_eq!(t.stored_len(), 3);
    }
}
