//! Where the bricks go: a `.vds` container (the header, the bricks as they are encoded, then
//! the layout JSON, each layer's index pages and page directory and the file table, the
//! header's offsets written last) or OpenVDS's object-store layout (`<layer>/<chunk>` objects,
//! each with its `vdschunkmetadata` header, `<layer>/ChunkMetadata/<page>` pages of hashes,
//! `LayerStatus`, `VolumeDataLayout`), laid out as [`crate::container`] and [`crate::store`]
//! read them. The object layout goes through an [`ObjectSink`]: a local directory ([`DirSink`])
//! or an object-store prefix (`rasterpack-store`), the same objects in the same order.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use rasterpack_common::{shown, Error, ObjectSink, Output, Result};

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
    Objects(Objects<'a>),
}

/// The object layout, put through a sink.
pub struct Objects<'a> {
    sink: Box<dyn ObjectSink + 'a>,
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

/// A local directory as an [`ObjectSink`]: the objects are files under a sibling temporary
/// directory, renamed onto the destination by [`ObjectSink::commit`].
pub struct DirSink {
    tmp: PathBuf,
    dest: PathBuf,
    force: bool,
    done: bool,
    /// Folders made so far (one `create_dir_all` per layer folder, not per object).
    made: std::collections::HashSet<PathBuf>,
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

    /// The object layout through `sink`.
    pub fn objects(sink: Box<dyn ObjectSink + 'a>) -> Target<'a> {
        Target::Objects(Objects { sink })
    }

    /// Everything before the first brick: the container's header space, the directory's
    /// folders.
    pub fn begin(&mut self, layers: &[&LayerGeometry]) -> Result<()> {
        match self {
            Target::Container(c) => c.write(&[0u8; HEADER_LEN as usize]),
            Target::Objects(o) => {
                // Folders are made as objects are put (a sink that has folders at all).
                let _ = layers;
                o.sink.begin()
            }
        }
    }

    /// More layers (a channel after the primary): nothing to prepare, in a container or
    /// through a sink (which makes folders as objects are put).
    pub fn add_layers(&mut self, layers: &[&LayerGeometry]) -> Result<()> {
        let _ = layers;
        Ok(())
    }

    /// The local directory being written into before it is renamed into place (a directory
    /// sink only).
    pub fn temp_dir(&self) -> Option<&Path> {
        match self {
            Target::Objects(o) => o.sink.local_temp(),
            Target::Container(_) => None,
        }
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
            Target::Objects(o) => {
                // OpenVDS's S3 writer puts the chunk's metadata (its hash) on the object too;
                // readers compare it with the chunk-metadata page.
                let header = crate::layout::base64_encode(&enc.hash.to_le_bytes());
                let key = format!("{}/{index}", layer.name);
                layer.entries[i] = (enc.hash, 0, enc.bytes.len() as u32);
                o.sink
                    .put(&key, enc.bytes, &[(crate::store::CHUNK_METADATA_HEADER, header)])?;
            }
        }
        Ok(())
    }

    /// Write the layout and the chunk tables, and put the dataset in place.
    pub fn finish(self, layout: &Value, compression: VdsCompression, layers: Vec<LayerTable>) -> Result<()> {
        let json = serde_json::to_vec_pretty(layout).map_err(|e| Error::usage(format!("internal: {e}")))?;
        match self {
            Target::Container(c) => c.finish(&json, compression, &layers),
            Target::Objects(o) => o.finish(json, compression, &layers),
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

impl Objects<'_> {
    fn write(&mut self, key: &str, bytes: Vec<u8>) -> Result<()> {
        self.sink.put(key, bytes, &[])
    }

    /// The chunk-metadata pages, then `LayerStatus`, then `VolumeDataLayout`, each step only
    /// once the previous objects are stored: a prefix without the layout is not a dataset
    /// (detection looks for it), and a layout is never visible before what it refers to.
    fn finish(mut self, json: Vec<u8>, compression: VdsCompression, layers: &[LayerTable]) -> Result<()> {
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
                self.write(&format!("{}/ChunkMetadata/{p}", l.name), b)?;
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
        self.sink.barrier()?;
        self.write("LayerStatus", status)?;
        self.sink.barrier()?;
        self.write("VolumeDataLayout", json)?;
        self.sink.commit()
    }
}

impl DirSink {
    /// A directory at `dest`, which must not exist unless `force` (then a directory it
    /// replaces). The objects go to a sibling `.NAME.rasterpack-PID.tmp` first.
    pub fn new(dest: &Path, force: bool) -> Result<DirSink> {
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
        Ok(DirSink {
            tmp: parent.join(tmp_name),
            dest: dest.to_path_buf(),
            force,
            done: false,
            made: std::collections::HashSet::new(),
        })
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

impl ObjectSink for DirSink {
    fn name(&self) -> String {
        shown(&self.dest)
    }

    fn local_temp(&self) -> Option<&Path> {
        Some(&self.tmp)
    }

    fn begin(&mut self) -> Result<()> {
        let _ = std::fs::remove_dir_all(&self.tmp);
        std::fs::create_dir_all(&self.tmp).map_err(|e| io(&format!("creating {}", shown(&self.tmp)), e))
    }

    fn put(&mut self, key: &str, bytes: Vec<u8>, _metadata: &[(&str, String)]) -> Result<()> {
        let path = self.tmp.join(key);
        if let Some(dir) = path.parent() {
            if !self.made.contains(dir) {
                std::fs::create_dir_all(dir).map_err(|e| io(&format!("creating {}", shown(dir)), e))?;
                self.made.insert(dir.to_path_buf());
            }
        }
        std::fs::write(&path, bytes).map_err(|e| io(&format!("writing {}", shown(&path)), e))
    }

    fn barrier(&mut self) -> Result<()> {
        Ok(())
    }

    fn commit(&mut self) -> Result<()> {
        self.place()
    }
}

impl Drop for DirSink {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}
