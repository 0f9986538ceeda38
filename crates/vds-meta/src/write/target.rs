//! Where the bricks go: a `.vds` container (the header, the bricks as they are encoded, then
//! the layout JSON, each layer's index pages and page directory and the file table, the
//! header's offsets written last) or an object-store directory (`<layer>/<chunk>` objects,
//! `<layer>/ChunkMetadata/<page>` pages of hashes, `LayerStatus`, `VolumeDataLayout`), laid out
//! as [`crate::container`] and [`crate::store`] read them.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use rasterpack_common::{shown, Error, Output, Result};

use super::encode::Encoded;
use super::PAGE_ENTRIES;
use crate::geometry::LayerGeometry;
use crate::layout::VdsCompression;
use crate::raw::{CONTAINER_MAGIC, CONTAINER_VERSION, HEADER_LEN};

/// One layer's chunk table as it is written.
pub struct LayerTable {
    name: String,
    /// The channel it stores (`LayerStatus`'s `channelName`).
    channel: String,
    lod: u32,
    group: String,
    /// Per chunk: hash, container offset (0 for none) and object size.
    entries: Vec<(u64, u64, u32)>,
    valid: u64,
    serialized: u64,
    uncompressed: u64,
}

impl LayerTable {
    pub fn new(g: &LayerGeometry, channel: &str) -> LayerTable {
        LayerTable {
            name: g.name.clone(),
            channel: channel.to_string(),
            lod: g.lod,
            group: crate::geometry::group_name(&g.group),
            entries: vec![(0, 0, 0); g.chunk_count as usize],
            valid: 0,
            serialized: 0,
            uncompressed: 0,
        }
    }
}

/// A file table row: page directory offset, entry count, entries per page, file type, chunk
/// and file metadata lengths, name.
type FileRow = (u64, i32, i32, [u8; 4], i32, i32, String);

pub enum Target<'a> {
    Container(Container<'a>),
    Directory(Directory),
}

pub struct Container<'a> {
    out: ContainerOut<'a>,
    pos: u64,
}

enum ContainerOut<'a> {
    File(std::io::BufWriter<&'a File>),
    /// A stream gets the container at the end (its header names the file table's offset).
    Memory {
        buf: Vec<u8>,
        limit: u64,
        out: &'a mut dyn Write,
    },
}

pub struct Directory {
    tmp: PathBuf,
    dest: PathBuf,
    force: bool,
    done: bool,
}

fn io(what: &str, e: std::io::Error) -> Error {
    Error::io(what, &e)
}

impl<'a> Target<'a> {
    pub fn container(out: Output<'a>, limit: u64) -> Target<'a> {
        let out = match out {
            Output::File(f) => ContainerOut::File(std::io::BufWriter::with_capacity(1 << 20, f)),
            Output::Stream(w) => ContainerOut::Memory {
                buf: Vec::new(),
                limit,
                out: w,
            },
        };
        Target::Container(Container { out, pos: 0 })
    }

    /// A directory target: `dest` must not exist unless `force` (then a directory it
    /// replaces). The objects go to a sibling `.NAME.rasterpack-PID.tmp` first.
    pub fn directory(dest: &Path, force: bool) -> Result<Target<'static>> {
        match std::fs::symlink_metadata(dest) {
            Ok(m) if !force => {
                let _ = m;
                return Err(Error::usage(format!(
                    "{} exists; pass --force to overwrite it",
                    shown(dest)
                )));
            }
            Ok(m) if !m.is_dir() => {
                return Err(Error::usage(format!(
                    "{} exists and is not a directory: a VDS directory cannot replace it",
                    shown(dest)
                )))
            }
            _ => {}
        }
        let name = dest
            .file_name()
            .ok_or_else(|| Error::usage(format!("{}: not a directory name", shown(dest))))?;
        let parent = dest
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".rasterpack-{}.tmp", std::process::id()));
        Ok(Target::Directory(Directory {
            tmp: parent.join(tmp_name),
            dest: dest.to_path_buf(),
            force,
            done: false,
        }))
    }

    /// Everything before the first brick: the container's header space, the directory's
    /// folders.
    pub fn begin(&mut self, layers: &[&LayerGeometry]) -> Result<()> {
        match self {
            Target::Container(c) => c.write(&[0u8; HEADER_LEN as usize]),
            Target::Directory(d) => {
                let _ = std::fs::remove_dir_all(&d.tmp);
                self.add_layers(layers)
            }
        }
    }

    /// The folders of more layers (a channel after the primary); nothing in a container.
    pub fn add_layers(&mut self, layers: &[&LayerGeometry]) -> Result<()> {
        if let Target::Directory(d) = self {
            for g in layers {
                let dir = d.tmp.join(&g.name).join("ChunkMetadata");
                std::fs::create_dir_all(&dir).map_err(|e| io(&format!("creating {}", shown(&dir)), e))?;
            }
        }
        Ok(())
    }

    /// Store one encoded brick (constant bricks: the hash, and an empty object in a directory,
    /// as OpenVDS leaves them).
    pub fn put(&mut self, layer: &mut LayerTable, index: u64, enc: Encoded) -> Result<()> {
        let i = index as usize;
        layer.valid += 1;
        layer.serialized += enc.bytes.len() as u64;
        layer.uncompressed += enc.payload;
        match self {
            Target::Container(c) => {
                let at = if enc.bytes.is_empty() { 0 } else { c.pos };
                c.write(&enc.bytes)?;
                layer.entries[i] = (enc.hash, at, enc.bytes.len() as u32);
            }
            Target::Directory(d) => {
                let path = d.tmp.join(&layer.name).join(index.to_string());
                std::fs::write(&path, &enc.bytes).map_err(|e| io(&format!("writing {}", shown(&path)), e))?;
                layer.entries[i] = (enc.hash, 0, enc.bytes.len() as u32);
            }
        }
        Ok(())
    }

    /// Write the layout and the chunk tables, and put the dataset in place.
    pub fn finish(self, layout: &Value, compression: VdsCompression, layers: Vec<LayerTable>) -> Result<()> {
        let json = serde_json::to_vec_pretty(layout).map_err(|e| Error::usage(format!("internal: {e}")))?;
        match self {
            Target::Container(c) => c.finish(&json, compression, &layers),
            Target::Directory(d) => d.finish(&json, compression, &layers),
        }
    }
}

impl Container<'_> {
    fn write(&mut self, b: &[u8]) -> Result<()> {
        match &mut self.out {
            ContainerOut::File(w) => w.write_all(b).map_err(|e| io("writing the VDS container", e))?,
            ContainerOut::Memory { buf, limit, .. } => {
                if buf.len() as u64 + b.len() as u64 > *limit {
                    return Err(Error::limit(
                        "limit.array",
                        None,
                        format!(
                            "a VDS container written to a stream is held in memory until its end, and this one passes {limit} bytes: write it to a file"
                        ),
                    ));
                }
                buf.extend_from_slice(b);
            }
        }
        self.pos += b.len() as u64;
        Ok(())
    }

    fn finish(mut self, json: &[u8], compression: VdsCompression, layers: &[LayerTable]) -> Result<()> {
        let json_at = self.pos;
        self.write(json)?;
        let mut files: Vec<FileRow> = Vec::new();
        // The layout document: one chunk on one page.
        let json_page = self.pos;
        let mut e = Vec::with_capacity(16);
        e.extend_from_slice(&(json_at as i64).to_le_bytes());
        e.extend_from_slice(&(json.len() as i32).to_le_bytes());
        e.extend_from_slice(&0i32.to_le_bytes());
        self.write(&e)?;
        let json_dir = self.pos;
        let mut d = vec![0u8; 16];
        d.extend_from_slice(&(json_page as i64).to_le_bytes());
        self.write(&d)?;
        files.push((json_dir, 1, 1, *b"JSON", 0, 0, "VolumeDataLayout".into()));
        for l in layers {
            let mut pages = Vec::new();
            for page in l.entries.chunks(PAGE_ENTRIES) {
                // A page with no chunk written is left out (offset 0), as OpenVDS does.
                if page.iter().all(|e| e.0 == 0) {
                    pages.push(0i64);
                    continue;
                }
                pages.push(self.pos as i64);
                let mut b = Vec::with_capacity(PAGE_ENTRIES * 24);
                for k in 0..PAGE_ENTRIES {
                    let (hash, at, len) = page.get(k).copied().unwrap_or((0, 0, 0));
                    b.extend_from_slice(&(at as i64).to_le_bytes());
                    b.extend_from_slice(&(len as i32).to_le_bytes());
                    b.extend_from_slice(&0i32.to_le_bytes());
                    b.extend_from_slice(&hash.to_le_bytes());
                }
                self.write(&b)?;
            }
            let dir = self.pos;
            let mut b = vec![0u8; 16];
            b.extend_from_slice(&compression.code().to_le_bytes());
            b.extend_from_slice(&0f32.to_le_bytes());
            b.extend_from_slice(&(l.valid as i32).to_le_bytes());
            for p in &pages {
                b.extend_from_slice(&p.to_le_bytes());
            }
            self.write(&b)?;
            files.push((
                dir,
                l.entries.len() as i32,
                PAGE_ENTRIES as i32,
                *b"VDS ",
                8,
                12,
                l.name.clone(),
            ));
        }
        let table = self.pos;
        let name_len = files.iter().map(|f| f.6.len()).max().unwrap_or(8).div_ceil(8) * 8;
        let mut b = Vec::new();
        for (dir, count, per, ftype, cml, fml, name) in &files {
            b.extend_from_slice(&(*dir as i64).to_le_bytes());
            b.extend_from_slice(&count.to_le_bytes());
            b.extend_from_slice(&0i32.to_le_bytes());
            b.extend_from_slice(&per.to_le_bytes());
            b.extend_from_slice(ftype);
            b.extend_from_slice(&cml.to_le_bytes());
            b.extend_from_slice(&fml.to_le_bytes());
            let mut n = name.as_bytes().to_vec();
            n.resize(name_len, 0);
            b.extend_from_slice(&n);
        }
        self.write(&b)?;
        let mut header = Vec::with_capacity(HEADER_LEN as usize);
        header.extend_from_slice(CONTAINER_MAGIC);
        header.extend_from_slice(&CONTAINER_VERSION.to_le_bytes());
        header.extend_from_slice(&(table as i64).to_le_bytes());
        header.extend_from_slice(&(files.len() as i32).to_le_bytes());
        header.extend_from_slice(&(name_len as i32).to_le_bytes());
        match self.out {
            ContainerOut::File(mut w) => {
                w.flush().map_err(|e| io("writing the VDS container", e))?;
                let mut f = w
                    .into_inner()
                    .map_err(|e| io("writing the VDS container", e.into_error()))?;
                f.seek(SeekFrom::Start(0))
                    .and_then(|_| f.write_all(&header))
                    .and_then(|_| f.flush())
                    .map_err(|e| io("writing the VDS container header", e))
            }
            ContainerOut::Memory { mut buf, out, .. } => {
                buf[..header.len()].copy_from_slice(&header);
                out.write_all(&buf)
                    .and_then(|_| out.flush())
                    .map_err(|e| io("writing the VDS container", e))
            }
        }
    }
}

impl Directory {
    fn write(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let path = self.tmp.join(key);
        std::fs::write(&path, bytes).map_err(|e| io(&format!("writing {}", shown(&path)), e))
    }

    /// The directory written into before it is renamed into place.
    pub fn tmp(&self) -> &Path {
        &self.tmp
    }

    fn finish(mut self, json: &[u8], compression: VdsCompression, layers: &[LayerTable]) -> Result<()> {
        let mut status = Vec::new();
        for l in layers {
            let mut page_dir = Vec::new();
            for (p, page) in l.entries.chunks(PAGE_ENTRIES).enumerate() {
                // Pages with nothing written are not stored: -1 in the page directory.
                if page.iter().all(|e| e.0 == 0) {
                    page_dir.push(-1i64);
                    continue;
                }
                let mut b = vec![0u8; PAGE_ENTRIES * 8];
                for (k, e) in page.iter().enumerate() {
                    b[k * 8..k * 8 + 8].copy_from_slice(&e.0.to_le_bytes());
                }
                self.write(&format!("{}/ChunkMetadata/{p}", l.name), &b)?;
                page_dir.push(p as i64);
            }
            status.push(json!({
                "layerName": l.name, "channelName": l.channel, "dimensionGroup": l.group, "lod": l.lod,
                "produceStatus": "Normal", "compressionMethod": compression.name(), "compressionTolerance": 0.0,
                "chunkCount": l.entries.len(), "validChunkCount": l.valid, "chunkMetadataPageSize": PAGE_ENTRIES,
                "chunkMetadataByteSize": 8, "hasChunkMetadataPages": true, "pageDirectory": page_dir,
                "serializedSize": l.serialized, "uncompressedSize": l.uncompressed, "adaptiveLevelSizes": vec![0; 16],
            }));
        }
        let status =
            serde_json::to_vec_pretty(&Value::Array(status)).map_err(|e| Error::usage(format!("internal: {e}")))?;
        self.write("LayerStatus", &status)?;
        // The layout last: a directory without it is not a dataset (detection looks for it).
        self.write("VolumeDataLayout", json)?;
        self.place()
    }

    /// Put the finished directory at `dest`; with `force`, an existing directory there is
    /// moved aside first and removed once the new one is in place.
    fn place(&mut self) -> Result<()> {
        let mut old = None;
        if std::fs::symlink_metadata(&self.dest).is_ok() {
            if !self.force {
                return Err(Error::usage(format!(
                    "{} appeared while converting (another process created it) and was left as it is; pass --force to overwrite it",
                    shown(&self.dest)
                )));
            }
            let mut aside = self.tmp.clone().into_os_string();
            aside.push(".old");
            let aside = PathBuf::from(aside);
            std::fs::rename(&self.dest, &aside).map_err(|e| io(&format!("moving {} aside", shown(&self.dest)), e))?;
            old = Some(aside);
        }
        if let Err(e) = std::fs::rename(&self.tmp, &self.dest) {
            if let Some(aside) = &old {
                let _ = std::fs::rename(aside, &self.dest);
            }
            return Err(io(&format!("renaming to {}", shown(&self.dest)), e));
        }
        self.done = true;
        if let Some(aside) = old {
            let _ = std::fs::remove_dir_all(aside);
        }
        Ok(())
    }
}

impl Drop for Directory {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}
