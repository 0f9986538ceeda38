//! `convert IN out.zarr`: the array `convert IN out.npy` would write, as a Zarr v3 array (or,
//! with `--all`, a group of every array of IN), streamed chunk by chunk through
//! [`rasterpack_zarr::write::ZarrArrayWriter`]. The store is written into a sibling temporary
//! directory that is renamed onto OUT on success and removed on failure.

use std::path::{Path, PathBuf};

use rasterpack_common::{shown, Error, Format, Limits};
use rasterpack_zarr::write::{self, Compression, ZarrArrayWriter, ZarrOptions};
use serde_json::{Map, Value};

use crate::args::ConvertArgs;
use crate::convert::Job;
use crate::signals;

/// Is OUT a Zarr store: `--to zarr`, or an OUT ending in `.zarr` without `--to`?
pub fn wanted(to: Option<&str>, out: &Path) -> bool {
    match to {
        Some(t) => t.trim_start_matches('.').eq_ignore_ascii_case("zarr"),
        None => out
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("zarr")),
    }
}

/// The `.npy` format: a Zarr output holds exactly the array a `.npy` output would, so the
/// source is asked for the array it gives `.npy`.
pub fn npy() -> &'static dyn Format {
    crate::format_by_name("npy").unwrap_or(&rasterpack_common::NpyFormat)
}

/// The Zarr-only flags given for another output are refused, not ignored (`--all` also
/// applies to VDS output: one channel per array).
pub fn refuse_zarr_flags(args: &ConvertArgs, target: &str) -> Result<(), Error> {
    for (given, flag) in [
        (args.chunks.is_some(), "--chunks"),
        (args.shard.is_some(), "--shard"),
        (args.all && target != "vds", "--all"),
    ] {
        if given {
            return Err(Error::usage(format!(
                "{flag} applies only to Zarr output (OUT.zarr or --to zarr)"
            )));
        }
    }
    Ok(())
}

/// The layout options of a Zarr output, from the flags; `--tile` is refused.
pub fn options(args: &ConvertArgs, limits: Limits) -> Result<ZarrOptions, Error> {
    if args.tile.is_some() {
        return Err(Error::usage(
            "--tile does not apply to zarr output (zarr output takes --chunks, --shard, --compress, --all)",
        ));
    }
    let shape = |flag: &str, spec: &Option<String>| {
        spec.as_deref()
            .map(|s| write::parse_shape(s).map_err(|e| Error::usage(format!("{flag} {e}"))))
            .transpose()
    };
    Ok(ZarrOptions {
        chunks: shape("--chunks", &args.chunks)?,
        shard: shape("--shard", &args.shard)?,
        compress: Compression::parse(args.compress.as_deref())?,
        limits,
    })
}

/// Refuse an OUT that exists unless `--force` (a Zarr store is a directory: an existing one is
/// replaced whole, and so is a file of that name).
pub fn check_destination(out: &Path, force: bool) -> Result<(), Error> {
    if out.as_os_str() == "-" {
        return Err(Error::usage(
            "a Zarr store is a directory: it cannot go to standard output",
        ));
    }
    if let Some(url) = remote_url(out)? {
        rasterpack_store::ZarrTarget::check(&url, &crate::detect::store_options(), force)?;
        return Ok(());
    }
    match std::fs::symlink_metadata(out) {
        Ok(_) if !force => Err(Error::usage(format!(
            "{} exists; pass --force to overwrite it",
            shown(out)
        ))),
        Ok(_) | Err(_) => Ok(()),
    }
}

/// Write the store for `job` at `out`: into a temporary directory beside it, renamed onto it
/// when every array is written (replacing what was there with `force`), removed otherwise.
pub(crate) fn write(job: &Job, args: &ConvertArgs, opts: ZarrOptions) -> Result<(), Error> {
    let out = args.output.as_path();
    if let Some(url) = remote_url(out)? {
        return write_remote(job, args, opts, &url);
    }
    let out = local_path(out)?;
    let tmp = TempDir::create(&out)?;
    let store = write::open_store(&tmp.path)?;
    write_job_arrays(job, args, opts, store.clone())?;
    // The store's threads write the files: all of them before the rename.
    store.finish()?;
    tmp.persist(&out, args.force)
}

/// OUT as an object-store URL (`None` for a path or a `file://` URL, which is a path).
fn remote_url(out: &Path) -> Result<Option<String>, Error> {
    match out.to_str().filter(|u| rasterpack_store::is_url(u)) {
        Some(url) if rasterpack_store::local_path(url)?.is_none() => Ok(Some(url.to_string())),
        _ => Ok(None),
    }
}

/// OUT as a local path (a `file://` URL's path).
fn local_path(out: &Path) -> Result<PathBuf, Error> {
    match out.to_str().filter(|u| rasterpack_store::is_url(u)) {
        Some(url) => Ok(rasterpack_store::local_path(url)?.unwrap_or_else(|| out.to_path_buf())),
        None => Ok(out.to_path_buf()),
    }
}

/// Write the store to an object-store prefix through zarrs' object_store adapter: chunks as
/// they are encoded, the metadata documents last; a failure or a signal deletes every key put.
fn write_remote(job: &Job, args: &ConvertArgs, opts: ZarrOptions, url: &str) -> Result<(), Error> {
    let target = rasterpack_store::ZarrTarget::check(url, &crate::detect::store_options(), args.force)?;
    let upload = std::sync::Arc::new(target.start()?);
    let cleanup = upload.cleanup();
    signals::track_remote(Box::new(move || cleanup.run()));
    let written = write_job_arrays(job, args, opts, upload.clone()).and_then(|()| upload.commit());
    // On failure the last reference's drop deletes what was put.
    drop(upload);
    signals::untrack_remote();
    written
}

/// Write the arrays of `job` into `store`.
fn write_job_arrays(
    job: &Job,
    args: &ConvertArgs,
    opts: ZarrOptions,
    store: std::sync::Arc<write::OutStore>,
) -> Result<(), Error> {
    let file = job.source.open(job.input.clone(), job.req.limits)?;
    if args.all {
        let arrays = file.arrays_complete()?;
        let mut root = Map::new();
        let mut meta = Map::new();
        meta.insert("source_format".into(), Value::from(job.source.name()));
        root.insert("rasterpack".into(), Value::Object(meta));
        write::write_group(&store, "/", root)?;
        let mut taken = std::collections::HashMap::new();
        for (k, info) in arrays.iter().enumerate() {
            let name = info.name.clone().unwrap_or_else(|| format!("array{k}"));
            let path = node_path(&name)?;
            if let Some(other) = taken.insert(path.clone(), name.clone()) {
                return Err(Error::unsupported(
                    "zarr.name",
                    None,
                    format!("the arrays {other:?} and {name:?} would both be the Zarr array {path}"),
                ));
            }
            let mut req = job.req.clone();
            req.element = info.name.clone();
            let chunks = file.chunk_shape_at(info.name.as_deref(), job.req.lod);
            let mut sink = ZarrArrayWriter::new(store.clone(), &path, opts.clone(), job.source.name(), chunks)
                .with_name(info.name.clone());
            job.with_request(&req).stream_into(&mut sink)?;
        }
    } else {
        // The source's blocks for the array it is asked for: the one named, else its only one
        // (formats list block shapes by array name, as the Python package's `Array.chunks`
        // asks), at the level of detail read (a VDS LOD's bricks). With a region the grid
        // starts at the region's corner: Zarr's regular grid has no offset, so the chunks are
        // the source's blocks exactly when the region starts on a block boundary.
        let element = match (&job.req.element, file.arrays()?.as_slice()) {
            (Some(e), _) => Some(e.clone()),
            (None, [only]) => only.name.clone(),
            (None, _) => None,
        };
        let chunks = file.chunk_shape_at(element.as_deref(), job.req.lod);
        let mut sink = ZarrArrayWriter::new(store, "/", opts, job.source.name(), chunks);
        job.stream_into(&mut sink)?;
    }
    Ok(())
}

/// Arrays in memory (the Python package's `write_zarr`) as the store `convert` writes for a
/// `.npy` source: one array at the root, or (`group`) a group with one array per named array,
/// as `--all` writes them; same temporary directory, rename and `force` rule.
pub fn write_arrays(
    out: &Path,
    force: bool,
    arrays: &[rasterpack_common::NdArray],
    group: bool,
    opts: ZarrOptions,
) -> Result<(), Error> {
    use rasterpack_common::{ArrayInfo, ArraySink};
    if remote_url(out)?.is_some() {
        return Err(Error::usage(format!(
            "{}: arrays in memory are written to a local Zarr store only (convert writes to URLs)",
            shown(out)
        )));
    }
    check_destination(out, force)?;
    if arrays.is_empty() || (!group && arrays.len() != 1) {
        return Err(Error::usage(
            "a Zarr store is written from one array, or from named arrays as a group",
        ));
    }
    let tmp = TempDir::create(out)?;
    let dir_store = write::open_store(&tmp.path)?;
    let store: std::sync::Arc<write::OutStore> = dir_store.clone();
    let source = npy().name();
    if group {
        let mut root = Map::new();
        let mut meta = Map::new();
        meta.insert("source_format".into(), Value::from(source));
        root.insert("rasterpack".into(), Value::Object(meta));
        write::write_group(&store, "/", root)?;
    }
    let mut taken = std::collections::HashMap::new();
    for (k, array) in arrays.iter().enumerate() {
        let path = match group {
            true => {
                let name = array.name.clone().unwrap_or_else(|| format!("array{k}"));
                let path = node_path(&name)?;
                if let Some(other) = taken.insert(path.clone(), name.clone()) {
                    return Err(Error::unsupported(
                        "zarr.name",
                        None,
                        format!("the arrays {other:?} and {name:?} would both be the Zarr array {path}"),
                    ));
                }
                path
            }
            false => "/".to_string(),
        };
        let mut sink =
            ZarrArrayWriter::new(store.clone(), &path, opts.clone(), source, None).with_name(array.name.clone());
        sink.begin(&ArrayInfo::of(array))?;
        // Pieces of the working set's size: the writer encodes chunks as they fill.
        let piece = (opts.limits.working_set as usize / 4).clamp(1 << 20, 64 << 20);
        for (i, part) in array.data.chunks(piece).enumerate() {
            sink.write_at((i * piece) as u64, part)?;
        }
        sink.finish()?;
    }
    dir_store.finish()?;
    tmp.persist(out, force)
}

/// The Zarr node path of an array name in the `--all` group: every array is a member of the
/// root group (a flat group, as xarray opens it), `/` in names (UDF `DATASET/TABLE`, FOLD
/// `CHUNK/ARRAY`) written as `.`, since a UDF table may share its path with a dataset holding
/// tables. The name as the source gives it stays in the `rasterpack.name` attribute. A name that
/// cannot be a node name (empty, only dots, starting with `__`, which Zarr v3 reserves) is
/// refused.
fn node_path(name: &str) -> Result<String, Error> {
    let node = name.replace('/', ".");
    if node.chars().all(|c| c == '.') || node.starts_with("__") {
        return Err(Error::unsupported(
            "zarr.name",
            None,
            format!("the array name {name:?} cannot be a Zarr node name"),
        ));
    }
    Ok(format!("/{node}"))
}

/// A directory beside the destination, removed on drop (or on a terminating signal) unless
/// persisted.
struct TempDir {
    path: PathBuf,
    done: bool,
}

impl TempDir {
    fn create(dest: &Path) -> Result<TempDir, Error> {
        let dir = dest
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let name = dest.file_name().unwrap_or(std::ffi::OsStr::new("out.zarr"));
        for attempt in 0..100u32 {
            let mut tmp = std::ffi::OsString::from(".");
            tmp.push(name);
            tmp.push(format!(".rasterpack-{}-{attempt}.tmp", std::process::id()));
            let path = dir.join(tmp);
            match signals::track(|| std::fs::create_dir(&path).map(|()| (path.clone(), ()))) {
                Ok((path, ())) => return Ok(TempDir { path, done: false }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(Error::io(
                        &format!("creating a temporary directory in {}", shown(dir)),
                        &e,
                    ))
                }
            }
        }
        Err(Error::usage(format!(
            "could not create a temporary directory in {}",
            shown(dir)
        )))
    }

    /// Put the store in place as `dest`. An existing `dest` (with `force`) is moved aside first
    /// and removed after the rename, so a failure in between leaves the old store.
    fn persist(mut self, dest: &Path, force: bool) -> Result<(), Error> {
        let result = signals::untrack(|| {
            let aside = match std::fs::symlink_metadata(dest) {
                Ok(_) if !force => {
                    return Err(Error::usage(format!(
                        "{} appeared while converting (another process created it) and was left as it is; \
                         pass --force to overwrite it",
                        shown(dest)
                    )))
                }
                Ok(_) => {
                    let mut old = self.path.clone().into_os_string();
                    old.push(".old");
                    let old = PathBuf::from(old);
                    std::fs::rename(dest, &old).map_err(|e| Error::io(&format!("moving {} aside", shown(dest)), &e))?;
                    Some(old)
                }
                Err(_) => None,
            };
            match std::fs::rename(&self.path, dest) {
                Ok(()) => {
                    if let Some(old) = aside {
                        let _ = remove(&old);
                    }
                    Ok(())
                }
                Err(e) => {
                    if let Some(old) = aside {
                        let _ = std::fs::rename(&old, dest);
                    }
                    let _ = remove(&self.path);
                    Err(Error::io(&format!("renaming to {}", shown(dest)), &e))
                }
            }
        });
        self.done = true;
        result
    }
}

fn remove(path: &Path) -> std::io::Result<()> {
    if std::fs::symlink_metadata(path)?.is_dir() {
        remove_tree(path)
    } else {
        std::fs::remove_file(path)
    }
}

/// Remove the directory tree at `path` (the old store `--force` replaces, after the new one
/// is in place) with the files unlinked from several threads: a store of 1156 chunk files is
/// as many unlinks, which one thread does one after the other (issue 20). The tree is listed
/// first (a few `getdents` per directory), the files split into contiguous runs (mostly one
/// chunk directory each, so the threads seldom wait on the same directory's lock), the
/// directories removed last, deepest first. Symbolic links are removed, never followed.
fn remove_tree(path: &Path) -> std::io::Result<()> {
    let (mut files, mut dirs) = (Vec::new(), vec![path.to_path_buf()]);
    let mut next = 0;
    while let Some(dir) = dirs.get(next).cloned() {
        next += 1;
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                dirs.push(entry.path());
            } else {
                files.push(entry.path());
            }
        }
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
    if files.len() < 64 || threads < 2 {
        files.iter().try_for_each(std::fs::remove_file)?;
    } else {
        let run = files.len().div_ceil(threads);
        std::thread::scope(|s| {
            let workers: Vec<_> = files
                .chunks(run)
                .map(|part| s.spawn(move || part.iter().try_for_each(std::fs::remove_file)))
                .collect();
            workers.into_iter().try_for_each(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("a removal thread panicked")))
            })
        })?;
    }
    // Listed parents first: reversed, every directory comes after those inside it.
    dirs.iter().rev().try_for_each(std::fs::remove_dir)
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !self.done {
            signals::untrack(|| {
                let _ = std::fs::remove_dir_all(&self.path);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The old store goes whole, chunk files from several threads, and a symbolic link inside
    /// it is removed, not followed.
    #[test]
    fn remove_tree_removes_everything_and_follows_no_link() {
        let base = std::env::temp_dir().join(format!("rasterpack-remove-tree-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (store, outside) = (base.join("old.zarr"), base.join("outside"));
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("keep"), b"x").unwrap();
        std::fs::create_dir_all(&store).unwrap();
        std::fs::write(store.join("zarr.json"), b"{}").unwrap();
        for i in 0..12 {
            let d = store.join("c").join(i.to_string());
            std::fs::create_dir_all(&d).unwrap();
            for j in 0..12 {
                std::fs::write(d.join(j.to_string()), [i as u8, j as u8]).unwrap();
            }
        }
        #[cfg(unix)]
        std::os::unix::fs::symlink(&outside, store.join("c").join("link")).unwrap();
        remove(&store).unwrap();
        assert!(!store.exists(), "the store is gone");
        assert_eq!(
            std::fs::read(outside.join("keep")).unwrap(),
            b"x",
            "the link was not followed"
        );
        let _ = std::fs::remove_dir_all(&base);
    }
}
