//! A numpy `.npz` file as a [`Format`]: the archive reader FOLD's NPZ0 chunks use, on a file of
//! its own. `inspect` lists the members (the central directory and each `.npy` header),
//! `validate` walks every member (local header against the directory, sizes, CRC-32, `.npy`
//! header), reads stream one member (`--element NAME`, the array's name without `.npy`) with
//! its CRC-32 checked, and the writer is [`super::out`]'s.
//!
//! Findings carry `npz.` codes: the member rules are FOLD's (`fold.payload.npz_member_damaged`
//! is `npz.member_damaged` here).

use std::sync::Arc;

use serde_json::{json, Value};

use rasterpack_common::{
    read_by_streaming, ArrayFile, ArrayInfo, ArrayRequest, ArraySink, Error, ErrorKind, Format, Input, InspectOptions,
    Limits, NdArray, Output, Report, RequestFlag, Result, Severity, ValidateOptions, WriteOptions,
};

use super::out::{NpzCompression, SingleNpz};
use super::walk::{ArrayTarget, CdWalk, WalkMode};
use super::zip::{Directory, LOCAL_SIG};
use super::{array_name, NpzArrayInfo};
use crate::scan::Flow;

/// Bytes read from the file at a time.
const PIECE: u64 = 4 << 20;

/// The `.npz` format (see the module docs).
pub struct NpzFormat;

/// The `npz.` code of a FOLD NPZ0 code (`fold.payload.npz_member_damaged` ->
/// `npz.member_damaged`, `fold.payload.bad_zip` -> `npz.bad_zip`).
pub fn npz_code(code: &str) -> String {
    for (from, to) in [
        ("fold.payload.npz_", "npz."),
        ("fold.limits.npz_", "npz.limits."),
        ("fold.payload.", "npz."),
    ] {
        if let Some(rest) = code.strip_prefix(from) {
            return format!("{to}{rest}");
        }
    }
    code.to_string()
}

fn recoded(e: Error) -> Error {
    let code = npz_code(&e.code);
    Error { code: code.into(), ..e }
}

/// The central directory of the archive `input` holds.
fn directory(input: &Input, limits: &Limits) -> Result<Arc<Directory>> {
    let dir = super::directory_at(input.len(), limits, &mut |at, buf| {
        input.read_at(at, buf, "npz archive")
    })
    .map_err(recoded)?;
    Ok(Arc::new(dir))
}

/// Feed `walk` the archive's bytes it asks for, `progress` told how far it is.
fn feed<T: ArrayTarget>(walk: &mut CdWalk<T>, input: &Input, progress: &dyn Fn(u64)) -> Result<()> {
    let total = input.len();
    let mut buf = vec![0u8; total.clamp(1, PIECE) as usize];
    while let Some(at) = walk.wants_from() {
        let n = (total - at).min(buf.len() as u64) as usize;
        input.read_at(at, &mut buf[..n], "npz archive")?;
        progress(at + n as u64);
        if walk.feed_at(at, &buf[..n]) == Flow::Stop {
            break;
        }
    }
    Ok(())
}

/// Every member's verdict: decoded whole (`Verify`) or to its `.npy` header (`List`).
fn walk_members(input: &Input, limits: &Limits, mode: WalkMode, progress: &dyn Fn(u64)) -> Result<Vec<NpzArrayInfo>> {
    let dir = directory(input, limits)?;
    let mut walk: CdWalk = CdWalk::new(dir, input.len(), limits, mode, None);
    walk.any_member_size();
    feed(&mut walk, input, progress)?;
    walk.finish().map_err(recoded)
}

/// The report of an archive whose members were walked.
fn report(arrays: Result<Vec<NpzArrayInfo>>) -> Report {
    let mut r = Report::new("npz");
    let arrays = match arrays {
        Ok(a) => a,
        Err(e) => {
            r.fail(&e);
            return r;
        }
    };
    let listed: Vec<Value> = arrays
        .iter()
        .map(|a| json!({"name": a.name, "dtype": a.dtype.map(|d| d.name()), "shape": a.shape, "descr": a.descr}))
        .collect();
    r.summary.insert("members".into(), Value::from(arrays.len()));
    r.summary.insert("arrays".into(), Value::Array(listed));
    let rows = arrays
        .iter()
        .map(|a| {
            let state = match (&a.damaged, &a.unsupported) {
                (Some(_), _) => "damaged",
                (None, Some(_)) => "unsupported",
                _ => "ok",
            };
            vec![
                a.name.clone(),
                a.descr.clone(),
                format!("{:?}", a.shape),
                state.to_string(),
            ]
        })
        .collect();
    r.table("npz members", &["array", "dtype", "shape", "state"], rows);
    for a in &arrays {
        if let Some(d) = &a.damaged {
            r.findings.push(
                Severity::Error,
                npz_code(d.code),
                None,
                format!("member of array {:?} is not readable: {}", a.name, d.message),
            );
        } else if let Some(why) = &a.unsupported {
            r.unsupported = true;
            let code = if a.zip_method_unsupported {
                "npz.unsupported"
            } else {
                "npz.dtype_unsupported"
            };
            r.findings.push(
                Severity::Info,
                code.to_string(),
                None,
                format!("array {:?} cannot be decoded by rasterpack: {why}", a.name),
            );
        }
    }
    r
}

impl Format for NpzFormat {
    fn name(&self) -> &'static str {
        "npz"
    }
    fn description(&self) -> &'static str {
        "numpy .npz archive (np.savez / np.savez_compressed)"
    }
    fn extensions(&self) -> &'static [&'static str] {
        &["npz"]
    }
    /// A zip whose first member is a `.npy` (or whose first name runs past the bytes seen).
    fn detect(&self, head: &[u8]) -> bool {
        if !head.starts_with(&LOCAL_SIG.to_le_bytes()) || head.len() < 30 {
            return false;
        }
        let len = u16::from_le_bytes([head[26], head[27]]) as usize;
        match head.get(30..30 + len) {
            Some(name) => name.ends_with(b".npy"),
            None => len > 0,
        }
    }
    fn honours(&self) -> &'static [RequestFlag] {
        &[RequestFlag::Element, RequestFlag::Compress]
    }
    fn inspect(&self, input: &Input, opts: &InspectOptions) -> Result<Report> {
        let arrays = walk_members(input, &opts.limits, WalkMode::List, &|_| {});
        if let Err(e) = &arrays {
            if e.kind != ErrorKind::Invalid {
                return Err(e.clone());
            }
        }
        Ok(report(arrays))
    }
    fn validate(&self, input: &Input, opts: &ValidateOptions) -> Report {
        let total = input.len();
        report(walk_members(input, &opts.limits, WalkMode::Verify, &|done| {
            opts.report_progress(done, total)
        }))
    }
    fn read_array(&self, input: &Input, req: &ArrayRequest) -> Result<NdArray> {
        read_by_streaming(self, input, req)
    }
    fn stream_array(&self, input: &Input, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        req.check_honoured(self)?;
        let dir = directory(input, &req.limits)?;
        let name = match &req.element {
            Some(e) => e.clone(),
            None => match dir.members.as_slice() {
                [one] => array_name(&one.name).to_string(),
                [] => return Err(Error::usage("the .npz holds no array")),
                several => {
                    let names: Vec<&str> = several.iter().map(|m| array_name(&m.name)).take(20).collect();
                    return Err(Error::new(
                        ErrorKind::Usage,
                        "request.element_required",
                        None,
                        format!(
                            "the .npz holds {} arrays; name the one to read: {}{}",
                            several.len(),
                            names.join(", "),
                            if several.len() > 20 { ", ..." } else { "" }
                        ),
                    ));
                }
            },
        };
        let Some(idx) = dir.members.iter().position(|m| array_name(&m.name) == name) else {
            return Err(Error::usage(format!("no array {name:?} in the .npz")));
        };
        crate::read::stream_npz_member(input, 0, input.len(), dir, idx, &name, req, sink).map_err(recoded)
    }
    fn write_array(&self, array: &NdArray, opts: &WriteOptions, out: &mut dyn std::io::Write) -> Result<()> {
        let mut sink = self.array_writer(opts, Output::Stream(out))?;
        sink.begin(&ArrayInfo::of(array))?;
        sink.write_at(0, &array.data)?;
        sink.finish()
    }
    fn array_writer<'a>(&'a self, opts: &WriteOptions, out: Output<'a>) -> Result<Box<dyn ArraySink + 'a>> {
        Ok(Box::new(SingleNpz::new(
            out,
            NpzCompression::parse(opts.compress.as_deref())?,
        )))
    }
    /// Members are written as the values arrive (a data descriptor after each on a stream).
    fn streams_output(&self) -> bool {
        true
    }
    fn open(&self, input: Input, limits: Limits) -> Result<Box<dyn ArrayFile>> {
        Ok(Box::new(NpzFile::from_input(input, limits)?))
    }
}

/// A `.npz` file opened for reading: its central directory is read, members stay on disk
/// until read.
#[derive(Debug, Clone)]
pub struct NpzFile {
    input: Input,
    limits: Limits,
}

impl NpzFile {
    /// Open a `.npz` file with default limits.
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<NpzFile> {
        NpzFile::from_input(Input::open(path.as_ref())?, Limits::default())
    }

    /// Read from an [`Input`] with the given limits (the central directory must read).
    pub fn from_input(input: Input, limits: Limits) -> Result<NpzFile> {
        directory(&input, &limits)?;
        Ok(NpzFile { input, limits })
    }
}

impl ArrayFile for NpzFile {
    fn format_name(&self) -> &'static str {
        "npz"
    }
    /// The readable members, as their `.npy` headers describe them.
    fn arrays(&self) -> Result<Vec<ArrayInfo>> {
        let arrays = walk_members(&self.input, &self.limits, WalkMode::List, &|_| {})?;
        Ok(arrays
            .into_iter()
            .filter_map(|a| {
                let dtype = a.dtype?;
                let mut info = ArrayInfo::new(dtype, a.shape);
                info.name = Some(a.name);
                Some(info)
            })
            .collect())
    }
    fn validate(&self) -> Report {
        NpzFormat.validate(
            &self.input,
            &ValidateOptions {
                limits: self.limits,
                ..Default::default()
            },
        )
    }
    fn stream(&self, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        NpzFormat.stream_array(&self.input, req, sink)
    }
}

impl NpzFile {
    /// Every finding of this file.
    pub fn validate(&self) -> Report {
        ArrayFile::validate(self)
    }
}

rasterpack_common::reader_api!(NpzFile, NpzFormat, delegate);
