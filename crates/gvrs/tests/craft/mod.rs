//! Byte-by-byte construction of small GVRS files for tests (independent of rasterpack's writer):
//! the layout follows gvrs-errata.md. Blocks are given as stored (uncompressed bytes, or a
//! compressed block starting with its codec index).
#![allow(dead_code)]

/// One element specification.
#[derive(Clone)]
pub struct El {
    pub ty: u8,
    pub name: String,
    /// Range bytes exactly as stored (12, 32 or 6 bytes).
    pub range: Vec<u8>,
    pub label: String,
    pub unit: String,
}

impl El {
    pub fn int(name: &str, fill: i32) -> El {
        let mut r = Vec::new();
        for v in [i32::MIN + 1, i32::MAX, fill] {
            r.extend_from_slice(&v.to_le_bytes());
        }
        El {
            ty: 0,
            name: name.into(),
            range: r,
            label: "lbl".into(),
            unit: "m".into(),
        }
    }
    pub fn short(name: &str, fill: i16) -> El {
        let mut r = Vec::new();
        for v in [i16::MIN + 1, i16::MAX, fill] {
            r.extend_from_slice(&v.to_le_bytes());
        }
        El {
            ty: 3,
            name: name.into(),
            range: r,
            label: String::new(),
            unit: String::new(),
        }
    }
    pub fn float(name: &str, fill: f32) -> El {
        let mut r = Vec::new();
        for v in [f32::NEG_INFINITY, f32::INFINITY, fill] {
            r.extend_from_slice(&v.to_le_bytes());
        }
        El {
            ty: 2,
            name: name.into(),
            range: r,
            label: String::new(),
            unit: String::new(),
        }
    }
    pub fn icf(name: &str, scale: f32, offset: f32) -> El {
        let mut r = Vec::new();
        for v in [-1000.0f32, 1000.0, f32::NAN, scale, offset] {
            r.extend_from_slice(&v.to_le_bytes());
        }
        for v in [i32::MIN + 1, i32::MAX, i32::MIN] {
            r.extend_from_slice(&v.to_le_bytes());
        }
        El {
            ty: 1,
            name: name.into(),
            range: r,
            label: String::new(),
            unit: String::new(),
        }
    }
    /// Uncompressed block for `cells` values given as i64 (ints/shorts/codes) or f32 bits.
    pub fn block(&self, values: &[i64]) -> Vec<u8> {
        let mut b = Vec::new();
        for &v in values {
            match self.ty {
                3 => b.extend_from_slice(&(v as i16).to_le_bytes()),
                2 => b.extend_from_slice(&(v as u32).to_le_bytes()),
                _ => b.extend_from_slice(&(v as i32).to_le_bytes()),
            }
        }
        while b.len() % 4 != 0 {
            b.push(0);
        }
        b
    }
}

pub struct Meta {
    pub name: String,
    pub id: i32,
    pub ty: u8,
    pub content: Vec<u8>,
    pub description: String,
}

pub struct Craft {
    pub rows: i32,
    pub cols: i32,
    pub tile_rows: i32,
    pub tile_cols: i32,
    pub elements: Vec<El>,
    pub checksums: bool,
    pub codecs: Vec<String>,
    pub metadata: Vec<Meta>,
    /// (tile index, per-element stored blocks).
    pub tiles: Vec<(u32, Vec<Vec<u8>>)>,
    /// Sizes of free-space records (each listed in a file-space directory).
    pub free: Vec<u32>,
    pub label: String,
    pub levels: i16,
    pub opened_for_writing: i64,
    pub standard_references: bool,
}

impl Craft {
    pub fn new(rows: i32, cols: i32, tile_rows: i32, tile_cols: i32, elements: Vec<El>) -> Craft {
        Craft {
            rows,
            cols,
            tile_rows,
            tile_cols,
            elements,
            checksums: true,
            codecs: Vec::new(),
            metadata: Vec::new(),
            tiles: Vec::new(),
            free: Vec::new(),
            label: "crafted".into(),
            levels: 1,
            opened_for_writing: 0,
            standard_references: false,
        }
    }

    pub fn grid_cols(&self) -> u32 {
        (self.cols as u32).div_ceil(self.tile_cols as u32)
    }
    pub fn grid_rows(&self) -> u32 {
        (self.rows as u32).div_ceil(self.tile_rows as u32)
    }
    pub fn cells(&self) -> usize {
        (self.tile_rows * self.tile_cols) as usize
    }

    /// Fill every tile with `f(element, row, col)` (cells beyond the grid get 0), uncompressed.
    pub fn fill_tiles(&mut self, f: impl Fn(usize, u32, u32) -> i64) {
        for tr in 0..self.grid_rows() {
            for tc in 0..self.grid_cols() {
                let mut blocks = Vec::new();
                for (e, el) in self.elements.iter().enumerate() {
                    let mut vals = Vec::new();
                    for r in 0..self.tile_rows as u32 {
                        for c in 0..self.tile_cols as u32 {
                            let (gr, gc) = (tr * self.tile_rows as u32 + r, tc * self.tile_cols as u32 + c);
                            vals.push(if gr < self.rows as u32 && gc < self.cols as u32 {
                                f(e, gr, gc)
                            } else {
                                0
                            });
                        }
                    }
                    blocks.push(el.block(&vals));
                }
                self.tiles.push((tr * self.grid_cols() + tc, blocks));
            }
        }
    }

    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(&(s.len() as u16).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    }

    fn pad4(out: &mut Vec<u8>) {
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
    }

    /// Append a record (prefix, content, zero padding, CRC); returns its start.
    fn record(&self, out: &mut Vec<u8>, ty: u8, content: &[u8]) -> u64 {
        let start = out.len();
        let len = (8 + content.len() + 4).div_ceil(8) * 8;
        out.extend_from_slice(&(len as i32).to_le_bytes());
        out.extend_from_slice(&[ty, 0, 0, 0]);
        out.extend_from_slice(content);
        out.resize(start + len - 4, 0);
        let crc = if self.checksums {
            let n = if ty == 0 { start + 8 } else { out.len() };
            crc32c::crc32c(&out[start..n])
        } else {
            0
        };
        out.extend_from_slice(&crc.to_le_bytes());
        start as u64
    }

    pub fn build(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(b"gvrs raster\0");
        out.extend_from_slice(&[1, 4, 0, 0]);
        // Header record (patched below).
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&[6, 0, 0, 0]);
        out.extend_from_slice(&[0x11; 16]); // UUID
        out.extend_from_slice(&1_700_000_000_000i64.to_le_bytes());
        out.extend_from_slice(&self.opened_for_writing.to_le_bytes());
        out.extend_from_slice(&[0; 16]); // file-space, metadata directory offsets
        out.extend_from_slice(&self.levels.to_le_bytes());
        out.extend_from_slice(&[0; 6]);
        out.extend_from_slice(&[0; 8]); // tile directory offset
        out.extend_from_slice(&[0; 16]);
        for v in [self.rows, self.cols, self.tile_rows, self.tile_cols] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&[self.checksums as u8, 1, 1, 0, 0, 0, 0, 0]);
        let (x0, y0, dx, dy) = (100.0f64, 50.0f64, 0.5f64, -0.5f64);
        let x1 = x0 + dx * (self.cols - 1) as f64;
        let y1 = y0 + dy * (self.rows - 1) as f64;
        for v in [
            x0,
            y0,
            x1,
            y1,
            dx,
            dy,
            1.0 / dx,
            0.0,
            -x0 / dx,
            0.0,
            1.0 / dy,
            -y0 / dy,
            dx,
            0.0,
            x0,
            0.0,
            dy,
            y0,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&(self.elements.len() as i32).to_le_bytes());
        for e in &self.elements {
            out.extend_from_slice(&[e.ty, 1, 0, 0, 0, 0, 0, 0]);
            Self::string(&mut out, &e.name);
            Self::pad4(&mut out);
            out.extend_from_slice(&e.range);
            Self::string(&mut out, &e.label);
            Self::string(&mut out, "");
            Self::string(&mut out, &e.unit);
            Self::pad4(&mut out);
        }
        out.extend_from_slice(&(self.codecs.len() as i32).to_le_bytes());
        for c in &self.codecs {
            Self::string(&mut out, c);
        }
        Self::string(&mut out, &self.label);
        out.extend_from_slice(&[0; 8]);
        while (out.len() + 4) % 8 != 0 {
            out.push(0);
        }
        out.extend_from_slice(&[0; 4]);
        let hlen = out.len() - 16;
        out[16..20].copy_from_slice(&(hlen as i32).to_le_bytes());

        let mut tile_offsets = vec![0u64; (self.grid_rows() * self.grid_cols()) as usize];
        for (idx, blocks) in &self.tiles {
            let mut c = Vec::new();
            c.extend_from_slice(&(*idx as i32).to_le_bytes());
            for b in blocks {
                c.extend_from_slice(&(b.len() as i32).to_le_bytes());
                c.extend_from_slice(b);
            }
            let start = self.record(&mut out, 2, &c);
            tile_offsets[*idx as usize] = start + 8;
        }
        let mut md_entries = Vec::new();
        for m in &self.metadata {
            let mut c = Vec::new();
            Self::string(&mut c, &m.name);
            c.extend_from_slice(&m.id.to_le_bytes());
            c.extend_from_slice(&[m.ty, 0, 0, 0]);
            c.extend_from_slice(&(m.content.len() as i32).to_le_bytes());
            c.extend_from_slice(&m.content);
            Self::string(&mut c, &m.description);
            let start = self.record(&mut out, 1, &c);
            md_entries.push((start + 8, m));
        }
        let mut md_offset = 0u64;
        if !self.metadata.is_empty() {
            let mut c = Vec::new();
            c.extend_from_slice(&(md_entries.len() as i32).to_le_bytes());
            for (off, m) in &md_entries {
                c.extend_from_slice(&off.to_le_bytes());
                Self::string(&mut c, &m.name);
                c.extend_from_slice(&m.id.to_le_bytes());
                c.push(m.ty);
            }
            md_offset = self.record(&mut out, 4, &c) + 8;
        }
        let mut fs_offset = 0u64;
        if !self.free.is_empty() {
            let mut entries = Vec::new();
            for &size in &self.free {
                let start = out.len();
                out.extend_from_slice(&(size as i32).to_le_bytes());
                out.extend_from_slice(&[0; 4]);
                out.resize(start + size as usize - 4, 0);
                let crc = if self.checksums {
                    crc32c::crc32c(&out[start..start + 8])
                } else {
                    0
                };
                out.extend_from_slice(&crc.to_le_bytes());
                entries.push((start as u64, size));
            }
            let mut c = Vec::new();
            c.extend_from_slice(&(entries.len() as i32).to_le_bytes());
            for (p, s) in entries {
                c.extend_from_slice(&p.to_le_bytes());
                c.extend_from_slice(&(s as i32).to_le_bytes());
            }
            fs_offset = self.record(&mut out, 3, &c) + 8;
        }
        let mut c = vec![0u8, self.standard_references as u8, 0, 0, 0, 0, 0, 0];
        for v in [0, 0, self.grid_rows() as i32, self.grid_cols() as i32] {
            c.extend_from_slice(&v.to_le_bytes());
        }
        for &o in &tile_offsets {
            if self.standard_references {
                c.extend_from_slice(&o.to_le_bytes());
            } else {
                c.extend_from_slice(&((o / 8) as u32).to_le_bytes());
            }
        }
        let td_offset = self.record(&mut out, 5, &c) + 8;
        out[56..64].copy_from_slice(&fs_offset.to_le_bytes());
        out[64..72].copy_from_slice(&md_offset.to_le_bytes());
        out[80..88].copy_from_slice(&td_offset.to_le_bytes());
        self.seal_header(&mut out);
        out
    }

    /// Recompute the header CRC (after patching header bytes).
    pub fn seal_header(&self, out: &mut [u8]) {
        let hlen = i32::from_le_bytes([out[16], out[17], out[18], out[19]]) as usize;
        let end = 16 + hlen;
        let crc = if self.checksums {
            crc32c::crc32c(&out[16..end - 4])
        } else {
            0
        };
        out[end - 4..end].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Recompute the CRC of the record starting at `start` (after patching it).
pub fn reseal(out: &mut [u8], start: usize) {
    let len = i32::from_le_bytes([out[start], out[start + 1], out[start + 2], out[start + 3]]) as usize;
    let crc = crc32c::crc32c(&out[start..start + len - 4]);
    out[start + len - 4..start + len].copy_from_slice(&crc.to_le_bytes());
}

/// A string metadata content in Gridfour's layout (i32 byte count + bytes).
pub fn text(s: &str) -> Vec<u8> {
    let mut c = (s.len() as i32).to_le_bytes().to_vec();
    c.extend_from_slice(s.as_bytes());
    c
}

/// A small file with every element type, partial edge tiles, one absent tile, metadata and
/// a free-space record; values are `e * 1000 + row * cols + col` (floats as their bits).
pub fn sample(checksums: bool) -> (Craft, Vec<u8>) {
    let mut c = Craft::new(
        7,
        9,
        4,
        5,
        vec![
            El::int("a", -9999),
            El::short("b", -1),
            El::float("c", f32::NAN),
            El::icf("d", 100.0, -2.0),
        ],
    );
    c.checksums = checksums;
    let cols = c.cols as i64;
    c.fill_tiles(|e, r, col| {
        let v = e as i64 * 1000 + r as i64 * cols + col as i64;
        if e == 2 {
            (v as f32).to_bits() as i64
        } else {
            v
        }
    });
    c.tiles.retain(|t| t.0 != 2);
    c.metadata.push(Meta {
        name: "Author".into(),
        id: 1,
        ty: 8,
        content: text("rasterpack tests"),
        description: "who".into(),
    });
    c.metadata.push(Meta {
        name: "Nums".into(),
        id: 0,
        ty: 4,
        content: [1i32, -2, 3].iter().flat_map(|v| v.to_le_bytes()).collect(),
        description: String::new(),
    });
    c.free.push(32);
    let bytes = c.build();
    (c, bytes)
}
