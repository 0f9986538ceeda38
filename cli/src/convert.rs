//! `convert IN OUT`: read one array (or let the source format convert itself, e.g. a FOLD
//! repair) and write it through a temporary file that is renamed only on success.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use rasterpack_common::{ArrayRequest, Error, Limits, WriteOptions};

use crate::output::{exit_code_for, Outcome};
use crate::{detect, ConvertArgs};

pub fn run(args: &ConvertArgs) -> Outcome {
    match convert(args) {
        Ok(()) => Outcome::Code(0),
        Err(e) => {
            eprintln!("rasterpack: convert {} -> {}: {e}", args.input, args.output);
            Outcome::Code(exit_code_for(e.kind))
        }
    }
}

fn convert(args: &ConvertArgs) -> Result<(), Error> {
    let target = detect::target(args.to.as_deref(), &args.output)?;
    let out_path = Path::new(&args.output);
    if out_path.exists() && !args.force {
        return Err(Error::usage(format!(
            "{} exists; pass --force to overwrite it",
            out_path.display()
        )));
    }
    let limits = Limits::default();
    let input = detect::open(&args.input, &limits)?;
    let source = detect::detect(&input).map_err(|e| e.in_format("convert"))?;
    let req = ArrayRequest {
        element: args.element.clone(),
        physical: args.physical,
        codes: args.codes,
        target: Some(target.name()),
        limits,
    };
    let opts = WriteOptions {
        tile: args.tile,
        compress: args.compress.clone(),
        limits,
    };

    let tmp = TempFile::create(out_path)?;
    {
        let mut w = BufWriter::with_capacity(1 << 20, &tmp.file);
        match source.convert_special(&input, target, &req, &opts, &mut w) {
            Some(result) => result?,
            None => {
                let mut array = source.read_array(&input, &req)?;
                // Readers may attach warnings about what they read (attrs "warnings"): say them
                // on stderr rather than carry them into the output's metadata.
                if let Some(serde_json::Value::Array(ws)) = array.attrs.remove("warnings") {
                    for w in ws.iter().filter_map(|w| w.as_str()) {
                        eprintln!("rasterpack: {}: warning: {w}", args.input);
                    }
                }
                target.write_array(&array, &opts, &mut w)?;
            }
        }
        w.flush()
            .map_err(|e| Error::io(&format!("writing {}", tmp.path.display()), &e))?;
    }
    tmp.persist(out_path, args.force)
}

/// A file beside the destination, removed on drop unless persisted.
struct TempFile {
    path: PathBuf,
    file: File,
    done: bool,
}

impl TempFile {
    fn create(dest: &Path) -> Result<TempFile, Error> {
        let dir = dest
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "out".into());
        for attempt in 0..100u32 {
            let path = dir.join(format!(".{name}.rasterpack-{}-{attempt}.tmp", std::process::id()));
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => {
                    return Ok(TempFile {
                        path,
                        file,
                        done: false,
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(Error::io(
                        &format!("creating a temporary file in {}", dir.display()),
                        &e,
                    ))
                }
            }
        }
        Err(Error::usage(format!(
            "could not create a temporary file in {}",
            dir.display()
        )))
    }

    fn persist(mut self, dest: &Path, force: bool) -> Result<(), Error> {
        self.file
            .sync_all()
            .map_err(|e| Error::io(&format!("syncing {}", self.path.display()), &e))?;
        if force {
            std::fs::rename(&self.path, dest).map_err(|e| Error::io(&format!("renaming to {}", dest.display()), &e))?;
        } else {
            // A hard link fails if `dest` appeared meanwhile: never clobber without --force.
            match std::fs::hard_link(&self.path, dest) {
                Ok(()) => {
                    let _ = std::fs::remove_file(&self.path);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    return Err(Error::usage(format!(
                        "{} exists; pass --force to overwrite it",
                        dest.display()
                    )));
                }
                Err(_) => {
                    // Filesystems without hard links: fall back to a checked rename.
                    if dest.exists() {
                        return Err(Error::usage(format!(
                            "{} exists; pass --force to overwrite it",
                            dest.display()
                        )));
                    }
                    std::fs::rename(&self.path, dest)
                        .map_err(|e| Error::io(&format!("renaming to {}", dest.display()), &e))?;
                }
            }
        }
        self.done = true;
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
