//! `convert IN OUT`: read one array (or let the source format convert itself, e.g. a FOLD
//! repair) and write it. A regular OUT is written through a temporary file beside it that is
//! renamed only on success; `-` is standard output; with `--force`, an existing device or FIFO
//! is written in place and a symlink is followed to the file it names.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, IsTerminal, Read, Seek, Write};
use std::path::{Path, PathBuf};

use rasterpack_common::{
    ArrayInfo, ArrayRequest, ArraySink, Error, ErrorKind, Format, Input, InspectOptions, Interrupt, Limits, Output,
    ProgressSink, RequestFlag, Severity, WriteOptions,
};

use rasterpack_common::shown;

use crate::args::ConvertArgs;
use crate::budget::{self, Budget, Checked};
use crate::progress::Meter;
use crate::report::{exit_code_for, Outcome};
use crate::subset::{Subset, SubsetGuard};
use crate::{detect, signals, subset, vds_out, zarr_out};

/// `rasterpack convert`: convert, say what failed on stderr, and end with the exit code.
pub fn run(args: &ConvertArgs) -> Outcome {
    match convert(args, true) {
        Ok(()) => Outcome::Code(0),
        Err(e) => {
            eprintln!(
                "rasterpack: convert {} -> {}: {e}{}",
                shown(&args.input),
                shown(&args.output),
                flag_hint(&e)
            );
            Outcome::Code(exit_code_for(e.kind))
        }
    }
}

/// The command-line spelling of what a library error asks for: the library names the option
/// (`ArrayRequest::element`), the CLI names its flag.
fn flag_hint(e: &Error) -> &'static str {
    match &*e.code {
        "request.element_required" => "; choose one with --element",
        "request.element_ambiguous" => "; name it with --element '[\"CHUNK\",\"ARRAY\"]'",
        _ => "",
    }
}

/// Where the output goes, decided before anything is read or written.
enum Destination {
    /// `-`: standard output, written as it is produced.
    Stdout,
    /// An existing device, FIFO or socket (with `--force`): opened and written in place.
    InPlace(PathBuf),
    /// A regular file (new, or replaced with `--force`), written atomically: a temporary file
    /// in the same folder, renamed onto `path` on success.
    Atomic { path: PathBuf, replace: bool },
    /// An object-store URL: a multipart upload, completed only on success.
    Upload(rasterpack_store::UploadTarget),
}

/// Convert `args.input` to `args.output` as `rasterpack convert` does. With `signals`, SIGINT,
/// SIGTERM and SIGHUP remove the temporary output and end the process (the CLI); a host with its
/// own signal handling (Python) passes false, and [`convert_with`] to be able to stop it.
pub fn convert(args: &ConvertArgs, signals: bool) -> Result<(), Error> {
    convert_with(args, signals, std::sync::Arc::new(|| Ok(())))
}

/// [`convert`] that calls `interrupt` before each piece of the array is written, and hands it
/// to the source for the work it does before or without writing (a FOLD chunk's ECC repair
/// before its array is read, the FOLD -> FOLD repair copy, VDS brick groups), which polls it at
/// least every ~100 ms: an `Err` stops the conversion with that error, the temporary output
/// removed and nothing renamed into place. A host with its own signal handling (Python's
/// Ctrl-C) polls for it there.
pub fn convert_with(args: &ConvertArgs, signals: bool, interrupt: Interrupt) -> Result<(), Error> {
    let interrupt = &interrupt;
    let to_stdout = args.output.as_os_str() == "-";
    if to_stdout && args.to.is_none() {
        return Err(Error::usage(
            "OUT is - (standard output): give its format with --to FORMAT",
        ));
    }
    // Zarr holds the array `.npy` would: the source is asked for that one (see zarr_out).
    let zarr = zarr_out::wanted(args.to.as_deref(), &args.output);
    let target = match zarr {
        true => zarr_out::npy(),
        false => detect::target(args.to.as_deref(), &args.output)?,
    };
    let subset = subset::from_args(args)?;
    let zarr_opts = match zarr {
        true => {
            zarr_out::check_destination(&args.output, args.force)?;
            Some(zarr_out::options(args, Limits::default())?)
        }
        false => {
            zarr_out::refuse_zarr_flags(args, target.name())?;
            check_flags(args, target, "output", |f| !f.is_source_flag())?;
            None
        }
    };
    if let Some(flag) = args.vds_flags().first().filter(|_| target.name() != "vds") {
        return Err(Error::usage(format!(
            "{flag} applies to VDS output only (this output is {})",
            target.name()
        )));
    }
    // The VDS object-store layout is a directory: OUT without the .vds extension (or ending
    // in /), written beside itself and renamed into place whole.
    let vds_dir = target.name() == "vds" && !to_stdout && is_vds_dir(&args.output);
    let destination = if zarr || vds_dir {
        // A Zarr store or a VDS directory is written by its own writer.
        None
    } else if to_stdout {
        if std::io::stdout().is_terminal() {
            return Err(Error::usage(format!(
                "refusing to write {} data to a terminal: redirect standard output or name a file",
                target.name()
            )));
        }
        Some(Destination::Stdout)
    } else {
        Some(destination(&args.output, args.force)?)
    };

    let limits = Limits::default();
    let input = detect::open(&args.input, &limits)?;
    let source = detect::detect(&input).map_err(|e| e.in_format("convert"))?;
    check_flags(args, source, "input", RequestFlag::is_source_flag)?;
    // A .npz takes every array of IN, or each `--element` given, as a member of its own.
    let npz = target.name() == "npz" && !zarr;
    let mut req = ArrayRequest {
        element: if npz { None } else { args.one_element()? },
        physical: args.physical,
        codes: args.codes,
        target: Some(target.name()),
        region: subset.as_ref().map(|s| s.spec.clone()),
        lod: args.lod.unwrap_or(0),
        limits,
    };
    let opts = WriteOptions {
        tile: args.tile,
        compress: args.compress.clone(),
        limits,
        brick_size: args.brick_size,
        margin: args.margin,
        lods: args.lods,
        value_range: args.value_range,
        no_value: args.no_value,
        axes: args.axes.clone(),
        metadata: args.metadata.clone(),
    };
    // A bad VDS option is refused before anything is written, and so are channels (--channel,
    // --all) of another shape or a dtype VDS does not store.
    let (vds_opts, channels) = if target.name() == "vds" {
        let mut o = rasterpack_vds_meta::write::VdsWriteOptions::from_write_options(&opts)?;
        let whole = subset.is_none() && args.lod.is_none() && !args.squeeze && !args.expand_dims;
        let channels = vds_out::channels(args, &input, source, &mut req, &limits, whole)?;
        o.channels = channels.iter().map(vds_out::Channel::spec).collect();
        // The source's attributes become metadata under its format's name.
        o.source_format = Some(source.name().to_string());
        (Some(o), channels)
    } else {
        (None, Vec::new())
    };
    if !channels.is_empty() && !vds_dir && !matches!(destination, Some(Destination::Atomic { .. })) {
        return Err(Error::usage(
            "a VDS of several channels (--channel, --all) is written to a file or a directory",
        ));
    }
    // A `.vds` file's writer gets the checked options (channels, the source format).
    let file_vds_opts = vds_opts.clone().filter(|_| !vds_dir);
    let vds_writer = match vds_opts {
        Some(vds_opts) if vds_dir => Some(vds_dir_writer(&args.output, args.force, vds_opts)?),
        _ => None,
    };
    let source_bytes = match input.dir() {
        Some(dir) => budget::dir_bytes(dir),
        None => input.len(),
    };
    let budget = Budget {
        source_bytes,
        allow_expansion: args.allow_expansion,
        free: None,
        // .npy stores the values as they are: its size is known before writing.
        exact_size: target.name() == "npy" && !zarr,
    };
    let label = shown(&args.input);
    let base = Job {
        source,
        target,
        input: &input,
        req: &req,
        opts: &opts,
        // A subset is one array cut out of the source: never the source's own whole-file
        // conversion (the FOLD repair), which would ignore it.
        special: subset.is_none() && args.lod.is_none() && !args.squeeze && !args.expand_dims && !npz,
        squeeze: args.squeeze,
        expand_dims: args.expand_dims,
        subset: subset.as_ref(),
        label: &label,
        budget: &budget,
        interrupt,
        elements: if npz { &args.element } else { &[] },
        vds: file_vds_opts.as_ref(),
        channels: &[],
    };
    // Each channel beside the primary is the same conversion of another array.
    let channel_jobs: Vec<Job> = channels
        .iter()
        .map(|c| Job {
            source: c.source,
            input: &c.input,
            req: &c.req,
            label: &c.label,
            special: false,
            ..base.clone()
        })
        .collect();
    let job = Job {
        channels: &channel_jobs,
        ..base.clone()
    };

    if signals {
        signals::install();
    }
    if let Some(opts) = zarr_opts {
        zarr_out::write(&job, args, opts)?;
        note_findings(source, &input, &label, &limits);
        return Ok(());
    }
    if let Some(mut writer) = vds_writer {
        // A signal removes the directory being written (the rename into place is under the
        // same lock as the removal, see signals); an upload to a prefix is tracked by
        // `vds_dir_writer` (the signal deletes its objects).
        if let Some(tmp) = writer.temp_dir().map(Path::to_path_buf) {
            let _ = signals::track(|| Ok((tmp, ())));
        }
        let result = write_vds_channels(&job, &mut writer);
        // Dropping the writer ends an upload: on failure, its objects are deleted.
        signals::untrack(|| drop(writer));
        signals::untrack_remote();
        result?;
        note_findings(source, &input, &label, &limits);
        return Ok(());
    }
    let Some(destination) = destination else {
        return Err(Error::usage("internal: a file output without a destination"));
    };
    let written = match destination {
        Destination::Stdout => {
            let stdout = std::io::stdout();
            let mut sink = Recorder::new(stdout.lock());
            let result = write_stream(&mut sink, "standard output", &job);
            // Unlike a report, data cut short by a reader that closed the pipe is data lost.
            if sink
                .error
                .as_ref()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            {
                return Err(Error::new(
                    ErrorKind::Io,
                    "output.closed_pipe",
                    None,
                    "writing standard output: the reader closed the pipe before all the data was written \
                     (Broken pipe)",
                ));
            }
            result
        }
        Destination::InPlace(path) => {
            // A FIFO blocks here until a reader opens it, as `cat > fifo` would.
            let file = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| Error::io(&format!("opening {}", shown(&path)), &e))?;
            let mut sink = Recorder::new(file);
            write_stream(&mut sink, &shown(&path), &job)
        }
        Destination::Atomic { path, replace } => {
            let tmp = TempFile::create(&path)?;
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let mut sized = budget.clone();
            sized.free = budget::free_space(&tmp.file).map(|free| (free, shown(dir)));
            let job = Job { budget: &sized, ..job };
            // Errors are reported as `convert IN -> OUT: ...`, so they name OUT already.
            let written = if replace {
                tmp.sync_ahead(|| write_file(&job, &tmp))
            } else {
                write_file(&job, &tmp)
            };
            written.and_then(|()| tmp.persist(&path, replace, args.force))
        }
        Destination::Upload(target) => write_upload(&job, &target),
    };
    written?;
    note_findings(source, &input, &label, &limits);
    Ok(())
}

/// Readers read whatever they can read exactly, even from a file `validate` rejects; after a
/// successful conversion, say on stderr when the source has findings. The source's `inspect`
/// (its cheap structural check) decides: `validate` is the full gate.
fn note_findings(source: &dyn Format, input: &Input, name: &str, limits: &Limits) {
    let opts = InspectOptions {
        all: false,
        limits: *limits,
    };
    match source.inspect(input, &opts) {
        Ok(report) => {
            let count = |s: Severity| report.findings.count(s);
            let (errors, warnings) = (count(Severity::Error), count(Severity::Warning));
            if errors + warnings > 0 {
                let plural = |n: u64, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
                eprintln!(
                    "note: {name} has findings ({}, {}); run `rasterpack validate {name}`",
                    plural(errors, "error"),
                    plural(warnings, "warning")
                );
            }
        }
        Err(e) => eprintln!("note: {name}: its structural check failed ({e}); run `rasterpack validate {name}`"),
    }
}

/// One conversion, decided before anything is written.
#[derive(Clone)]
pub(crate) struct Job<'a> {
    pub(crate) source: &'static dyn Format,
    target: &'static dyn Format,
    pub(crate) input: &'a Input,
    pub(crate) req: &'a ArrayRequest,
    opts: &'a WriteOptions,
    /// Whether the source's own conversion (`Format::convert_special`) may be used.
    special: bool,
    /// `--squeeze` and `--expand-dims`, applied with the region's numpy view.
    squeeze: bool,
    expand_dims: bool,
    subset: Option<&'a Subset>,
    /// What the progress bar is labelled with (IN as given).
    label: &'a str,
    /// What the output may cost, checked when the array's shape is known.
    budget: &'a Budget,
    /// Called before each piece is written, and by the source during its own work; an `Err`
    /// stops the conversion.
    interrupt: &'a Interrupt,
    /// `.npz` output: the arrays asked for (`--element`, repeated), or none for every array.
    elements: &'a [String],
    /// A `.vds` file: its writer's options, checked (else the target's own writer).
    vds: Option<&'a rasterpack_vds_meta::write::VdsWriteOptions>,
    /// The channels beside the primary (VDS output), streamed after it into the same writer.
    channels: &'a [Job<'a>],
}

impl<'a> Job<'a> {
    /// The same conversion of another array of the source (`--all`).
    pub(crate) fn with_request<'b>(&self, req: &'b ArrayRequest) -> Job<'b>
    where
        'a: 'b,
    {
        Job { req, ..self.clone() }
    }

    /// The source's own conversion into `out`, when it has one for this target.
    fn convert_special(&self, out: &mut dyn Write) -> Option<Result<(), Error>> {
        if !self.special {
            return None;
        }
        self.source
            .convert_special(self.input, self.target, self.req, self.opts, Some(self.interrupt), out)
    }

    /// Write the output file onto `out`: the array through the target's writer, or, for a
    /// `.npz`, each array asked for (every array of the source when none is named) as a member
    /// of its own, one after the other, named as [`rasterpack_fold::npz::member_name`] says.
    fn write_to(&self, out: Output) -> Result<(), Error> {
        if self.target.name() != "npz" {
            let mut sink = self.target.array_writer(self.opts, out)?;
            return self.stream_into(&mut *sink);
        }
        use rasterpack_fold::npz::{member_name, NpzCompression, NpzWriter};
        let compression = NpzCompression::parse(self.opts.compress.as_deref())?;
        let names: Vec<Option<String>> = if self.elements.is_empty() {
            let file = self.source.open(self.input.clone(), self.req.limits)?;
            file.arrays_complete()?.into_iter().map(|a| a.name).collect()
        } else {
            self.elements.iter().cloned().map(Some).collect()
        };
        if names.is_empty() {
            return Err(Error::usage(format!("{} holds no array to write", self.label)));
        }
        let mut writer = NpzWriter::new(out, compression);
        for (k, name) in names.iter().enumerate() {
            let req = ArrayRequest {
                element: name.clone(),
                ..self.req.clone()
            };
            let mut member = writer.member(&member_name(name.as_deref(), k))?;
            self.with_request(&req).stream_into(&mut member)?;
        }
        writer.finish()
    }

    /// Stream the array into `target` and finish it: through a check that the source honoured
    /// the subset, and a progress bar when stderr is a terminal.
    pub(crate) fn stream_into(&self, target: &mut dyn ArraySink) -> Result<(), Error> {
        let meter = Meter::on_stderr(self.label);
        // Readers may attach warnings about what they read (`attrs["warnings"]`, e.g. a VDS
        // channel never written): they are said on stderr, not carried into the output.
        let mut said = SayReaderWarnings {
            inner: target,
            source: self.input.name(),
        };
        let mut sink: &mut dyn ArraySink = &mut said;
        let mut interruptible = Interruptible {
            inner: sink,
            interrupt: self.interrupt,
        };
        sink = &mut interruptible;
        let mut checked = Checked {
            inner: sink,
            budget: self.budget,
        };
        sink = &mut checked;
        let mut counted;
        if let Some(meter) = &meter {
            counted = ProgressSink::new(sink, meter.progress());
            sink = &mut counted;
        }
        // Steps, integer indices, --squeeze and --expand-dims are applied to the box the
        // source reads (after the guard checked it is the box asked for).
        let streamed = rasterpack_common::stream_view(
            self.req,
            self.squeeze,
            self.expand_dims as usize,
            sink,
            |r, s| match self.subset {
                Some(subset) => {
                    let mut guarded = SubsetGuard::new(s, subset, self.source.name());
                    self.source.stream_array(self.input, r, &mut guarded)
                }
                None => self.source.stream_array(self.input, r, s),
            },
        );
        let result = match (streamed, self.subset) {
            (Err(e), Some(subset)) => Err(subset::explain(subset, e)),
            (Err(e), None) => Err(e),
            (Ok(()), _) => sink.finish(),
        };
        if let Some(meter) = &meter {
            meter.finish();
        }
        result
    }
}

/// Convert into the temporary file: the source's own conversion when it has one (FOLD repair),
/// else source to target as the data decodes, the target writing into the file with positioned
/// writes allowed, so memory stays within the working set.
fn write_file(job: &Job, tmp: &TempFile) -> Result<(), Error> {
    let mut w = BufWriter::with_capacity(1 << 20, &tmp.file);
    if let Some(result) = job.convert_special(&mut w) {
        result?;
        return w.flush().map_err(|e| Error::io("writing", &e));
    }
    drop(w);
    if let Some(o) = job.vds {
        let mut w = rasterpack_vds_meta::write::VdsWriter::container(Output::File(&tmp.file), o.clone());
        return write_vds_channels(job, &mut w);
    }
    job.write_to(Output::File(&tmp.file))
}

/// The primary array, then each channel's, into one VDS writer (which writes the dataset as
/// the last one finishes). The last `finish` puts a directory in place: it runs under the
/// signal lock, so a signal either finds the dataset in place or removes it whole.
fn write_vds_channels(job: &Job, w: &mut rasterpack_vds_meta::write::VdsWriter) -> Result<(), Error> {
    let mut last = LastFinishLocked {
        inner: w,
        left: job.channels.len(),
    };
    job.stream_into(&mut last)?;
    for c in job.channels {
        last.left -= 1;
        c.stream_into(&mut last)?;
    }
    Ok(())
}

/// Passes everything through; the finish of the last array runs under the signal lock.
struct LastFinishLocked<'a> {
    inner: &'a mut dyn ArraySink,
    /// Arrays still to come after the one being written.
    left: usize,
}

impl<'a> rasterpack_common::SinkWrapper for LastFinishLocked<'a> {
    type Inner = dyn ArraySink + 'a;
    fn inner(&mut self) -> &mut (dyn ArraySink + 'a) {
        self.inner
    }
    fn inner_ref(&self) -> &(dyn ArraySink + 'a) {
        self.inner
    }
    fn finish(&mut self) -> Result<(), Error> {
        match self.left {
            0 => signals::locked(|| self.inner.finish()),
            _ => self.inner.finish(),
        }
    }
}

/// Convert into an object. A target that writes as the data arrives (npy, VOLP, UDF) streams
/// into the multipart upload, parts sent while the source decodes; the others (GVRS, FOLD, which
/// hold a stream's whole file in memory until their directory is written) are spooled to a local
/// temporary file and uploaded from it. Any failure drops the upload, which aborts it: no object
/// appears under the name.
fn write_upload(job: &Job, target: &rasterpack_store::UploadTarget) -> Result<(), Error> {
    let name = target.url();
    if job.target.streams_output() {
        let mut sink = Recorder::new(target.start()?);
        signals::track_upload(sink.inner.aborter());
        let result = write_stream(&mut sink, name, job);
        if let Some(e) = sink.inner.error() {
            return Err(e.clone());
        }
        result?;
        return sink.inner.finish();
    }
    let tmp = TempFile::create(&std::env::temp_dir().join(target.file_name()))?;
    let mut sized = job.budget.clone();
    sized.free = budget::free_space(&tmp.file).map(|free| (free, shown(&std::env::temp_dir())));
    write_file(&Job { budget: &sized, ..*job }, &tmp)?;
    let mut up = target.start()?;
    signals::track_upload(up.aborter());
    let mut buf = vec![0u8; 1 << 20];
    let mut spooled = &tmp.file;
    let reading = |e: std::io::Error| Error::io(&format!("reading the spooled output {}", shown(&tmp.path)), &e);
    spooled.seek(std::io::SeekFrom::Start(0)).map_err(reading)?;
    loop {
        let n = spooled.read(&mut buf).map_err(reading)?;
        if n == 0 {
            break;
        }
        if let Err(e) = up.write_all(&buf[..n]) {
            return Err(up
                .error()
                .cloned()
                .unwrap_or_else(|| Error::io(&format!("writing {name}"), &e)));
        }
    }
    up.finish()
}

/// Passes everything through, asking `interrupt` first whether to go on; hands it to the
/// source for the work it does between pieces ([`ArraySink::interrupt`]).
struct Interruptible<'a> {
    inner: &'a mut dyn ArraySink,
    interrupt: &'a Interrupt,
}

impl<'a> rasterpack_common::SinkWrapper for Interruptible<'a> {
    type Inner = dyn ArraySink + 'a;
    fn inner(&mut self) -> &mut (dyn ArraySink + 'a) {
        self.inner
    }
    fn inner_ref(&self) -> &(dyn ArraySink + 'a) {
        self.inner
    }
    fn begin(&mut self, info: &ArrayInfo) -> Result<(), Error> {
        (self.interrupt)()?;
        self.inner.begin(info)
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), Error> {
        (self.interrupt)()?;
        self.inner.write_at(offset, data)
    }
    fn fill_at(&mut self, offset: u64, len: u64, pattern: &[u8]) -> Result<(), Error> {
        (self.interrupt)()?;
        self.inner.fill_at(offset, len, pattern)
    }
    // A buffer filled in place asks nothing between pieces: only a source that polls
    // `interrupt` (`direct_buffer_polled`) gets one.
    fn direct_buffer(&mut self) -> Option<&mut [u8]> {
        None
    }
    // Polled as each group written by the decoding threads is reported.
    fn written_elsewhere(&mut self, len: u64) -> Result<(), Error> {
        (self.interrupt)()?;
        self.inner.written_elsewhere(len)
    }
    fn interrupt(&self) -> Option<Interrupt> {
        Some(Interrupt::clone(self.interrupt))
    }
    fn finish(&mut self) -> Result<(), Error> {
        (self.interrupt)()?;
        self.inner.finish()
    }
}

/// Passes everything through, but takes the reader's warnings out of the array's attributes.
struct SayReaderWarnings<'a> {
    inner: &'a mut dyn ArraySink,
    source: String,
}

impl<'a> rasterpack_common::SinkWrapper for SayReaderWarnings<'a> {
    type Inner = dyn ArraySink + 'a;
    fn inner(&mut self) -> &mut (dyn ArraySink + 'a) {
        self.inner
    }
    fn inner_ref(&self) -> &(dyn ArraySink + 'a) {
        self.inner
    }
    fn begin(&mut self, info: &ArrayInfo) -> Result<(), Error> {
        let mut info = info.clone();
        if let Some(serde_json::Value::Array(warnings)) = info.attrs.remove("warnings") {
            for w in warnings.iter().filter_map(|w| w.as_str()) {
                eprintln!("rasterpack: {}: warning: {w}", self.source);
            }
        }
        self.inner.begin(&info)
    }
}

/// The writer of a VDS in its object-store layout at OUT: a local directory (written beside
/// itself, renamed into place), or a prefix URL (the objects uploaded concurrently, the
/// layout's visible objects last; a failure or a signal deletes what was uploaded).
fn vds_dir_writer(
    out: &Path,
    force: bool,
    opts: rasterpack_vds_meta::write::VdsWriteOptions,
) -> Result<rasterpack_vds_meta::write::VdsWriter<'static>, Error> {
    use rasterpack_vds_meta::write::VdsWriter;
    if let Some(url) = out.to_str().filter(|u| rasterpack_store::is_url(u)) {
        if let Some(path) = rasterpack_store::local_path(url)? {
            return VdsWriter::directory(&path, force, opts);
        }
        let target = rasterpack_store::PrefixTarget::check(url, &detect::store_options(), force)?;
        let upload = target.start();
        let cleanup = upload.cleanup();
        signals::track_remote(Box::new(move || cleanup.run()));
        return Ok(VdsWriter::objects(Box::new(upload), opts));
    }
    VdsWriter::directory(out, force, opts)
}

/// Whether a VDS OUT is the object-store directory layout rather than a `.vds` file: it ends
/// in `/` or does not have the `.vds` extension.
fn is_vds_dir(out: &Path) -> bool {
    let ends_in_slash = out.as_os_str().as_encoded_bytes().last() == Some(&b'/');
    ends_in_slash || !out.extension().is_some_and(|e| e.eq_ignore_ascii_case("vds"))
}

/// Refuse the flags given on the command line that `format` does not honour on this side.
fn check_flags(
    args: &ConvertArgs,
    format: &dyn Format,
    side: &str,
    on_this_side: impl Fn(RequestFlag) -> bool,
) -> Result<(), Error> {
    let given = |flag: RequestFlag| match flag {
        RequestFlag::Element => !args.element.is_empty(),
        RequestFlag::Physical => args.physical,
        RequestFlag::Codes => args.codes,
        RequestFlag::Region => {
            args.region.is_some() || args.window.is_some() || args.box_ranges.is_some() || args.levels.is_some()
        }
        RequestFlag::Lod => args.lod.is_some(),
        RequestFlag::Tile => args.tile.is_some(),
        RequestFlag::Compress => args.compress.is_some(),
    };
    let honoured: Vec<&str> = RequestFlag::ALL
        .into_iter()
        .filter(|f| on_this_side(*f) && format.honours_flag(*f))
        .map(RequestFlag::as_str)
        .collect();
    for flag in RequestFlag::ALL {
        if on_this_side(flag) && given(flag) && !format.honours_flag(flag) {
            let takes = if honoured.is_empty() {
                let all: Vec<&str> = RequestFlag::ALL
                    .into_iter()
                    .filter(|f| on_this_side(*f))
                    .map(RequestFlag::as_str)
                    .collect();
                format!("{} {side} takes none of {}", format.name(), all.join(", "))
            } else {
                format!("{} {side} takes {}", format.name(), honoured.join(", "))
            };
            return Err(Error::usage(format!(
                "{} does not apply to {} {side} ({takes})",
                flag.as_str(),
                format.name()
            )));
        }
    }
    Ok(())
}

/// Refuse `out` before any work when it exists and `force` is not given (as `convert` does).
pub fn check_output(out: &Path, force: bool) -> Result<(), Error> {
    if out.as_os_str() != "-" {
        destination(out, force)?;
    }
    Ok(())
}

/// Write `bytes`, made in memory (a `preview` PNG), to `out` by `convert`'s rules: a new or
/// `--force`-replaced regular file through a temporary file and a rename, an existing device
/// or FIFO in place, `-` to standard output when that is not a terminal.
pub fn write_bytes(out: &Path, force: bool, bytes: &[u8]) -> Result<(), Error> {
    let destination = if out.as_os_str() == "-" {
        if std::io::stdout().is_terminal() {
            return Err(Error::usage(
                "refusing to write binary data to a terminal: redirect standard output or name a file",
            ));
        }
        Destination::Stdout
    } else {
        destination(out, force)?
    };
    match destination {
        Destination::Stdout => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(bytes)
                .and_then(|()| stdout.flush())
                .map_err(|e| Error::io("writing standard output", &e))
        }
        Destination::InPlace(path) => OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|mut f| f.write_all(bytes))
            .map_err(|e| Error::io(&shown(&path), &e)),
        Destination::Atomic { path, replace } => {
            let mut tmp = TempFile::create(&path)?;
            tmp.file
                .write_all(bytes)
                .map_err(|e| Error::io(&format!("writing {}", shown(&tmp.path)), &e))?;
            tmp.persist(&path, replace, force)
        }
        // A URL: one multipart upload, completed only when every byte is sent.
        Destination::Upload(target) => {
            let mut up = target.start()?;
            signals::track_upload(up.aborter());
            if let Err(e) = up.write_all(bytes) {
                return Err(up
                    .error()
                    .cloned()
                    .unwrap_or_else(|| Error::io(&format!("writing {}", target.url()), &e)));
            }
            up.finish()
        }
    }
}

/// Decide where a named OUT is written, refusing to replace anything without `--force`.
fn destination(out: &Path, force: bool) -> Result<Destination, Error> {
    if let Some(url) = out.to_str().filter(|u| rasterpack_store::is_url(u)) {
        match rasterpack_store::local_path(url)? {
            Some(path) => return destination(&path, force),
            None => {
                return rasterpack_store::UploadTarget::check(url, &detect::store_options(), force)
                    .map(Destination::Upload)
            }
        }
    }
    let exists = match std::fs::symlink_metadata(out) {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(Error::io_path(out, &e)),
    };
    if !exists {
        return Ok(Destination::Atomic {
            path: out.to_path_buf(),
            replace: false,
        });
    }
    if !force {
        return Err(exists_error(out));
    }
    // Write where a symlink points, so the link itself stays.
    let path = follow_links(out)?;
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        // A dangling link: create the file it names.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Destination::Atomic { path, replace: true }),
        Err(e) => return Err(Error::io_path(&path, &e)),
    };
    if meta.is_dir() {
        // An I/O error of the OS's kind, so a caller can tell it (Python: IsADirectoryError).
        let e = std::io::Error::new(std::io::ErrorKind::IsADirectory, "is a directory");
        return Err(Error::io_path(out, &e));
    }
    if meta.is_file() {
        Ok(Destination::Atomic { path, replace: true })
    } else {
        // Devices, FIFOs and sockets are written to, never replaced by a regular file.
        Ok(Destination::InPlace(path))
    }
}

/// The path a chain of symlinks ends at (the path itself when it is not a link). Relative
/// link targets are taken relative to the link's folder, as the kernel does.
fn follow_links(path: &Path) -> Result<PathBuf, Error> {
    let mut at = path.to_path_buf();
    // Linux gives up after 40 links (ELOOP); so does this.
    for _ in 0..40 {
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&at).map_err(|e| Error::io(&shown(&at), &e))?;
                at = match at.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(at),
        }
    }
    Err(Error::usage(format!(
        "{}: too many levels of symbolic links",
        shown(path)
    )))
}

fn exists_error(dest: &Path) -> Error {
    Error::usage(format!("{} exists; pass --force to overwrite it", shown(dest)))
}

/// `dest` was not there when the conversion began, and is now (another process made it).
fn appeared_error(dest: &Path) -> Error {
    Error::usage(format!(
        "{} appeared while converting (another process created it) and was left as it is; \
         pass --force to overwrite it",
        shown(dest)
    ))
}

/// Longest file name most filesystems take (NAME_MAX of ext4, XFS, btrfs, tmpfs).
const NAME_MAX: usize = 255;

/// The temporary file's name beside `name`: `.NAME.rasterpack-PID-N.tmp`, or, when that would
/// pass [`NAME_MAX`] (names of 236 bytes and more), `.rasterpack-HASH-PID-N.tmp` with a hash of
/// the name, so any name the filesystem takes can be written.
fn temp_name(name: &std::ffi::OsStr, pid: u32, attempt: u32) -> std::ffi::OsString {
    let mut full = std::ffi::OsString::from(".");
    full.push(name);
    full.push(format!(".rasterpack-{pid}-{attempt}.tmp"));
    if full.len() <= NAME_MAX {
        return full;
    }
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    format!(".rasterpack-{:016x}-{pid}-{attempt}.tmp", h.finish()).into()
}

/// Convert into a forward-only stream (standard output, a FIFO, a device) through a 1 MiB
/// buffer. When the stream itself failed (closed pipe, EFBIG, EIO), that OS error is what is
/// reported, as an I/O error, whatever the format's writer made of it.
fn write_stream<W: Write>(sink: &mut Recorder<W>, name: &str, job: &Job) -> Result<(), Error> {
    let result = {
        let mut w = BufWriter::with_capacity(1 << 20, &mut *sink);
        let converted = match job.convert_special(&mut w) {
            Some(result) => result,
            None => match job.vds {
                Some(o) => {
                    let mut v = rasterpack_vds_meta::write::VdsWriter::container(Output::Stream(&mut w), o.clone());
                    job.stream_into(&mut v)
                }
                None => job.write_to(Output::Stream(&mut w)),
            },
        };
        converted.and_then(|()| w.flush().map_err(|e| Error::io(&format!("writing {name}"), &e)))
    };
    match (&sink.error, result) {
        (Some(e), _) => Err(Error::io(&format!("writing {name}"), e)),
        (None, result) => result,
    }
}

/// A writer that remembers the first error of the writer it wraps.
struct Recorder<W> {
    inner: W,
    error: Option<std::io::Error>,
}

impl<W: Write> Recorder<W> {
    fn new(inner: W) -> Self {
        Recorder { inner, error: None }
    }

    fn record<T>(&mut self, r: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &r {
            if self.error.is_none() && e.kind() != std::io::ErrorKind::Interrupted {
                self.error = Some(std::io::Error::new(e.kind(), e.to_string()));
            }
        }
        r
    }
}

impl<W: Write> Write for Recorder<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = self.inner.write(buf);
        self.record(r)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let r = self.inner.flush();
        self.record(r)
    }
}

/// How much a replacing output grows between the syncs of [`TempFile::sync_ahead`], and how
/// often its size is looked at.
const SYNC_STEP: u64 = 16 << 20;
const SYNC_POLL: std::time::Duration = std::time::Duration::from_millis(5);

/// Run `write` while a second thread calls `sync` on `file` whenever it has grown by `step`
/// since the last call (looking every `poll`). Errors: `write`'s (`Ok`), else the first of
/// `sync` (`Err`).
fn sync_while(
    file: File,
    step: u64,
    poll: std::time::Duration,
    sync: impl Fn(&File) -> std::io::Result<()> + Send,
    write: impl FnOnce() -> Result<(), Error>,
) -> Result<(), Result<Error, std::io::Error>> {
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let syncer = scope.spawn(move || {
            let mut synced = 0u64;
            loop {
                match stopped.recv_timeout(poll) {
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                    _ => return Ok(()),
                }
                let len = file.metadata()?.len();
                if len >= synced.saturating_add(step) {
                    sync(&file)?;
                    synced = len;
                }
            }
        });
        let written = write();
        drop(stop);
        let synced: std::io::Result<()> = syncer.join().unwrap_or(Ok(()));
        written.map_err(Ok)?;
        synced.map_err(Err)
    })
}

/// A file beside the destination, removed on drop (or on a terminating signal) unless
/// persisted.
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
        let name = dest.file_name().unwrap_or(std::ffi::OsStr::new("out"));
        for attempt in 0..100u32 {
            let path = dir.join(temp_name(name, std::process::id(), attempt));
            let made = signals::track(|| {
                OpenOptions::new()
                    // Read too: an upload is spooled here and then read back.
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .map(|file| (path.clone(), file))
            });
            match made {
                Ok((path, file)) => {
                    return Ok(TempFile {
                        path,
                        file,
                        done: false,
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(&format!("creating a temporary file in {}", shown(dir)), &e)),
            }
        }
        Err(Error::usage(format!(
            "could not create a temporary file in {}",
            shown(dir)
        )))
    }

    /// Run `write` (which writes this file) while a second thread syncs what it has written
    /// so far, each time the file has grown by [`SYNC_STEP`]: the data of a file that will
    /// replace another must reach the disk before the rename (`persist`), and writing it back
    /// as it comes, beside the conversion, leaves the final sync only the last bytes (a 128 MiB
    /// `.npy`: 7-29 ms after the last write instead of 87-115 ms, docs/performance.md). The
    /// first error of those syncs fails the conversion, as the final sync's would.
    fn sync_ahead(&self, write: impl FnOnce() -> Result<(), Error>) -> Result<(), Error> {
        // A file description of its own: a write-back error that a sync here reports is still
        // reported to the final sync through `self.file` (each open file samples errors).
        let Ok(file) = OpenOptions::new().write(true).open(&self.path) else {
            return write();
        };
        sync_while(file, SYNC_STEP, SYNC_POLL, File::sync_data, write)
            .map_err(|e| e.unwrap_or_else(|e| Error::io(&format!("syncing {}", shown(&self.path)), &e)))
    }

    /// Put the file in place as `dest`. `replace`: `dest` existed when the conversion began (its
    /// permission bits are kept); `force`: an existing `dest` may be replaced, also one that
    /// appeared while converting (another process writing the same new path).
    fn persist(mut self, dest: &Path, replace: bool, force: bool) -> Result<(), Error> {
        // Replacing a file puts its old data at stake: the new bytes reach the disk before the
        // rename, so a crash leaves the old file or the new one, whole. A new file risks nothing
        // of the user's, and is left to the page cache as cp, np.save and gdal_translate do
        // (a sync of a few GiB would double what users wait for).
        if replace {
            self.file
                .sync_all()
                .map_err(|e| Error::io(&format!("syncing {}", shown(&self.path)), &e))?;
        }
        let result = signals::untrack(|| {
            let r = self
                .keep_mode(dest, force)
                .and_then(|()| self.place(dest, replace || force));
            // Removed here, under the same lock a signal's cleanup takes, when placing failed.
            if r.is_err() {
                let _ = std::fs::remove_file(&self.path);
            }
            r
        });
        self.done = true;
        result
    }

    /// With `--force`, the file replaced keeps its permission bits (a 640 file stays 640, as
    /// `cp` over an existing file leaves it): the temporary file takes them before the rename.
    fn keep_mode(&self, dest: &Path, force: bool) -> Result<(), Error> {
        if !force {
            return Ok(());
        }
        match std::fs::metadata(dest) {
            Ok(old) if old.is_file() => self
                .file
                .set_permissions(old.permissions())
                .map_err(|e| Error::io(&format!("keeping the permissions of {}", shown(dest)), &e)),
            _ => Ok(()),
        }
    }

    fn place(&self, dest: &Path, replace: bool) -> Result<(), Error> {
        if replace {
            return std::fs::rename(&self.path, dest)
                .map_err(|e| Error::io(&format!("renaming to {}", shown(dest)), &e));
        }
        // A hard link fails if `dest` appeared meanwhile: never clobber without --force.
        match std::fs::hard_link(&self.path, dest) {
            Ok(()) => {
                let _ = std::fs::remove_file(&self.path);
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(appeared_error(dest)),
            Err(_) => {
                // Filesystems without hard links: fall back to a checked rename.
                if std::fs::symlink_metadata(dest).is_ok() {
                    return Err(appeared_error(dest));
                }
                std::fs::rename(&self.path, dest).map_err(|e| Error::io(&format!("renaming to {}", shown(dest)), &e))
            }
        }
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.done {
            signals::untrack(|| {
                let _ = std::fs::remove_file(&self.path);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    #[test]
    fn the_convert_wrappers_pass_on_every_hook_they_do_not_answer() {
        use rasterpack_common::testkit::{assert_forwards, call_every_hook, HookProbe};
        let info = ArrayInfo::new(rasterpack_common::DType::F32, vec![3, 5]);
        let mut probe = HookProbe::default();
        let interrupt: Interrupt = std::sync::Arc::new(|| Ok(()));
        let mut sink = Interruptible {
            inner: &mut probe,
            interrupt: &interrupt,
        };
        call_every_hook(&mut sink, &info);
        // Its own check goes to the source; a buffer filled unpolled would never ask it.
        assert_forwards("Interruptible", &probe, &["interrupt", "direct_buffer"]);
        let mut probe = HookProbe::default();
        let mut sink = SayReaderWarnings {
            inner: &mut probe,
            source: "test".into(),
        };
        call_every_hook(&mut sink, &info);
        assert_forwards("SayReaderWarnings", &probe, &[]);
        for left in [1, 0] {
            let mut probe = HookProbe::default();
            let mut sink = LastFinishLocked {
                inner: &mut probe,
                left,
            };
            call_every_hook(&mut sink, &info);
            assert_forwards(&format!("LastFinishLocked, {left} left"), &probe, &[]);
        }
    }

    fn scratch(name: &str) -> (PathBuf, File, File) {
        let path = std::env::temp_dir().join(format!("rasterpack-sync-{name}-{}", std::process::id()));
        let file = File::create(&path).unwrap();
        let other = OpenOptions::new().write(true).open(&path).unwrap();
        (path, file, other)
    }

    #[test]
    fn a_replacing_output_is_synced_as_it_grows_not_only_at_the_end() {
        let (path, file, watched) = scratch("grows");
        let seen = Mutex::new(Vec::<u64>::new());
        let count = || seen.lock().unwrap().len();
        sync_while(
            watched,
            1000,
            Duration::from_millis(1),
            |f| {
                seen.lock().unwrap().push(f.metadata()?.len());
                Ok(())
            },
            || {
                for k in 0..5 {
                    (&file).write_all(&[7u8; 1500]).unwrap();
                    // The next write waits for the sync of this one (bounded: a stuck syncer fails).
                    let asked = Instant::now();
                    while count() <= k && asked.elapsed() < Duration::from_secs(20) {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                // Less than a step more: no sync for it (the final one is persist's).
                (&file).write_all(&[7u8; 999]).unwrap();
                std::thread::sleep(Duration::from_millis(20));
                Ok(())
            },
        )
        .unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(*seen.lock().unwrap(), vec![1500, 3000, 4500, 6000, 7500]);
    }

    #[test]
    fn a_failed_early_sync_fails_the_conversion_and_a_write_error_comes_first() {
        let (path, file, watched) = scratch("fails");
        let failed = sync_while(
            watched,
            10,
            Duration::from_millis(1),
            |_| Err(std::io::Error::other("no space left for the write-back")),
            || {
                (&file).write_all(&[1u8; 100]).unwrap();
                let asked = Instant::now();
                while asked.elapsed() < Duration::from_millis(200) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(())
            },
        );
        match failed {
            Err(Err(e)) => assert!(e.to_string().contains("no space left"), "{e}"),
            other => panic!("the sync error was lost: {:?}", other.err()),
        }
        let (_, _, watched) = scratch("fails");
        let both = sync_while(
            watched,
            10,
            Duration::from_millis(1),
            |_| Err(std::io::Error::other("sync")),
            || Err(Error::usage("the source failed")),
        );
        match both {
            Err(Ok(e)) => assert_eq!(e.message, "the source failed"),
            other => panic!("the write error was not first: {:?}", other.err()),
        }
        std::fs::remove_file(&path).unwrap();
    }
}
