//! The small trait each format crate implements so the CLI can detect, inspect, validate and
//! convert any input without knowing its format.

use std::io::Write;
use std::path::Path;

use serde_json::{Map, Value};

use crate::any::ArrayFile;
use crate::array::NdArray;
use crate::error::{Error, Result};
use crate::finding::{Findings, Severity};
use crate::limits::Limits;
use crate::output::Output;
use crate::source::Input;
use crate::stream::{ArrayInfo, ArraySink, MemorySink, Region, RegionSpec};

/// A piece of human-readable output; the CLI renders it as a table.
#[derive(Debug, Clone, PartialEq)]
pub enum Section {
    /// Two-column "field | value" table.
    Fields {
        /// Heading shown above the table.
        title: String,
        /// `(field, value)` pairs.
        rows: Vec<(String, String)>,
    },
    /// A table with a header row.
    Table {
        /// Heading shown above the table.
        title: String,
        /// Column names.
        headers: Vec<String>,
        /// One entry per row, one string per column.
        rows: Vec<Vec<String>>,
    },
    /// Pre-formatted text (JSON documents, previews).
    Text {
        /// Heading shown above the text.
        title: String,
        /// The text, shown as is.
        text: String,
    },
}

/// What `inspect` and `validate` produce for one input.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Format name (`volp`, `gvrs`, ...).
    pub format: &'static str,
    /// Format-specific facts as JSON (the `summary` member of the `--json` output).
    pub summary: Map<String, Value>,
    /// Findings in the order they were found: [`Report::new`] lists at most
    /// [`crate::LISTED_PER_CODE`] of each code and counts the rest ([`Findings::omitted`]).
    pub findings: Findings,
    /// The same facts laid out for people.
    pub sections: Vec<Section>,
    /// Set when the file uses a feature rasterpack does not implement (exit code 3).
    pub unsupported: bool,
}

impl Report {
    /// An empty report for `format`, listing at most [`crate::LISTED_PER_CODE`] findings of
    /// each code.
    pub fn new(format: &'static str) -> Self {
        Report {
            format,
            findings: Findings::listing_at_most(crate::LISTED_PER_CODE),
            ..Default::default()
        }
    }

    /// Valid: no error finding (and, when `strict`, no warning either), counted ones included.
    pub fn is_valid(&self, strict: bool) -> bool {
        !(self.findings.has_severity(Severity::Error) || (strict && self.findings.has_severity(Severity::Warning)))
    }

    /// List at most `cap` findings of each code, counting the rest: for reports whose format
    /// filled [`Report::findings`] with a collection of its own (fronts call it with
    /// [`crate::LISTED_PER_CODE`] before showing a report).
    pub fn cap_findings(&mut self, cap: usize) {
        self.findings = std::mem::take(&mut self.findings).capped(cap);
    }

    /// Add a "field | value" section.
    pub fn fields(&mut self, title: impl Into<String>, rows: Vec<(String, String)>) {
        self.sections.push(Section::Fields {
            title: title.into(),
            rows,
        });
    }

    /// Add a table section with a header row.
    pub fn table(&mut self, title: impl Into<String>, headers: &[&str], rows: Vec<Vec<String>>) {
        self.sections.push(Section::Table {
            title: title.into(),
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows,
        });
    }

    /// Add a section of pre-formatted text.
    pub fn text(&mut self, title: impl Into<String>, text: impl Into<String>) {
        self.sections.push(Section::Text {
            title: title.into(),
            text: text.into(),
        });
    }

    /// Record an error that stopped the work as a finding (its kind decides `unsupported`).
    pub fn fail(&mut self, err: &Error) {
        if err.kind == crate::ErrorKind::Unsupported {
            self.unsupported = true;
            self.findings
                .push(Severity::Info, err.code.to_string(), err.offset, err.message.clone());
        } else {
            self.findings.push_error(err);
        }
    }
}

/// How `inspect` should work (flags of `rasterpack inspect`).
#[derive(Debug, Clone, Default)]
pub struct InspectOptions {
    /// Show everything (every chunk, whole JSON documents) instead of a truncated view.
    pub all: bool,
    /// Bounds on what the input may make the reader allocate.
    pub limits: Limits,
}

/// How `validate` should work.
#[derive(Debug, Clone, Default)]
pub struct ValidateOptions {
    /// Bounds on what the input may make the validator allocate.
    pub limits: Limits,
    /// Told how far a long check has come (for a progress bar); `None` for silence.
    pub progress: Option<Progress>,
}

impl ValidateOptions {
    /// Report that `done` of `total` units (bytes of input, usually) are checked.
    pub fn report_progress(&self, done: u64, total: u64) {
        if let Some(p) = &self.progress {
            p.report(done, total);
        }
    }
}

/// A progress callback: `(done, total)` in units the caller and the format agree on (bytes of
/// input). Called from the validating thread(s), so it must be cheap and thread-safe.
#[derive(Clone)]
pub struct Progress(pub std::sync::Arc<dyn Fn(u64, u64) + Send + Sync>);

impl Progress {
    /// A progress callback from a closure.
    pub fn new(report: impl Fn(u64, u64) + Send + Sync + 'static) -> Progress {
        Progress(std::sync::Arc::new(report))
    }

    /// Tell the callback that `done` of `total` units are through.
    pub fn report(&self, done: u64, total: u64) {
        (self.0)(done, total)
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress(..)")
    }
}

/// Which array `read_array` should produce.
#[derive(Debug, Clone, Default)]
pub struct ArrayRequest {
    /// Element / table / channel / `CHUNK/ARRAY` name (`--element`).
    pub element: Option<String>,
    /// Physical values (scale and offset applied) instead of stored ones (`--physical`).
    pub physical: bool,
    /// Stored integer codes instead of decoded values (`--codes`, GVRS integer-coded floats).
    pub codes: bool,
    /// Name of the format the array is headed for, for sources that shape output per target
    /// (GVRS elements become VOLP levels).
    pub target: Option<&'static str>,
    /// Only this box of the array, in the output's C axis order (`--region`, `--window`, `--box`,
    /// `--levels`). Sources read only the tiles/bricks/frames it meets.
    pub region: Option<RegionSpec>,
    /// Level of detail (VDS `--lod N`; 0 is full resolution). `region` is in the coordinates
    /// of that level's array.
    pub lod: u32,
    /// Bounds on what the read may allocate ([`Limits::max_array_bytes`] for in-memory reads).
    pub limits: Limits,
}

impl ArrayRequest {
    /// The region asked for, resolved against the array's full `shape` (the whole array when
    /// none was asked for).
    pub fn region_of(&self, shape: &[u64]) -> Result<Region> {
        match &self.region {
            Some(spec) => spec.resolve(shape),
            None => Ok(Region::full(shape)),
        }
    }
}

impl ArrayRequest {
    /// Is the option behind `flag` set to something other than its default? (Target-side
    /// flags never are: they live in [`WriteOptions`].)
    pub fn sets(&self, flag: RequestFlag) -> bool {
        match flag {
            RequestFlag::Element => self.element.is_some(),
            RequestFlag::Physical => self.physical,
            RequestFlag::Codes => self.codes,
            RequestFlag::Region => self.region.is_some(),
            RequestFlag::Lod => self.lod != 0,
            RequestFlag::Tile | RequestFlag::Compress => false,
        }
    }

    /// Refuse an option `format` does not honour (`request.option_not_honoured`) instead of
    /// silently ignoring it: every reader calls this before it reads.
    pub fn check_honoured<F: Format + ?Sized>(&self, format: &F) -> Result<()> {
        refuse_unhonoured(format, "reader", |f| f.is_source_flag() && self.sets(f))
    }
}

impl WriteOptions {
    /// Is the option behind `flag` set? (Source-side flags never are.)
    pub fn sets(&self, flag: RequestFlag) -> bool {
        match flag {
            RequestFlag::Tile => self.tile.is_some(),
            RequestFlag::Compress => self.compress.is_some(),
            _ => false,
        }
    }

    /// Refuse an option `format`'s writer does not honour (`request.option_not_honoured`).
    pub fn check_honoured<F: Format + ?Sized>(&self, format: &F) -> Result<()> {
        refuse_unhonoured(format, "writer", |f| !f.is_source_flag() && self.sets(f))
    }
}

/// The first option `is_set` that `format` does not honour, as an error in the library's terms.
fn refuse_unhonoured<F: Format + ?Sized>(format: &F, side: &str, is_set: impl Fn(RequestFlag) -> bool) -> Result<()> {
    let Some(flag) = RequestFlag::ALL
        .into_iter()
        .find(|f| is_set(*f) && !format.honours_flag(*f))
    else {
        return Ok(());
    };
    let source = flag.is_source_flag();
    let honoured: Vec<&str> = RequestFlag::ALL
        .into_iter()
        .filter(|f| f.is_source_flag() == source && format.honours_flag(*f))
        .map(RequestFlag::option_name)
        .collect();
    let takes = if honoured.is_empty() {
        "none".to_string()
    } else {
        honoured.join(", ")
    };
    Err(Error::new(
        crate::ErrorKind::Usage,
        "request.option_not_honoured",
        None,
        format!(
            "the {} {side} does not honour {} (it honours: {takes})",
            format.name(),
            flag.option_name()
        ),
    ))
}

/// How `write_array` should encode (flags of `convert`).
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Tile size `[rows, cols]` (`--tile`, GVRS).
    pub tile: Option<(u32, u32)>,
    /// Compression name (`--compress`); `None` means the format's default.
    pub compress: Option<String>,
    /// Bounds on what the writer may buffer.
    pub limits: Limits,
    /// VDS: brick edge (`--brick-size`: 32, 64, 128, 256).
    pub brick_size: Option<u32>,
    /// VDS: margin voxels around each brick (`--margin`).
    pub margin: Option<u32>,
    /// VDS: levels of detail beyond full resolution (`--lods`).
    pub lods: Option<u32>,
    /// VDS: the channel's value range (`--value-range MIN,MAX`).
    pub value_range: Option<(f64, f64)>,
    /// VDS: the channel's no-value (`--no-value`).
    pub no_value: Option<f64>,
    /// VDS: axes as `NAME:UNIT:MIN:MAX`, dimension 0 first (`--axis`).
    pub axes: Vec<String>,
    /// VDS: metadata items as `CATEGORY/NAME=VALUE` (`--metadata`).
    pub metadata: Vec<String>,
}

/// A flag of `convert` that shapes what is read ([`ArrayRequest`]) or written ([`WriteOptions`]).
/// Each format lists the ones it honours ([`Format::honours`]) so the CLI can refuse the others
/// by name instead of silently ignoring them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestFlag {
    /// `--element`: which element / table / channel / array to read (source side).
    Element,
    /// `--physical`: physical values instead of stored ones (source side).
    Physical,
    /// `--codes`: stored integer codes instead of decoded values (source side).
    Codes,
    /// `--tile`: output tile size (target side).
    Tile,
    /// `--compress`: output compression (target side).
    Compress,
    /// `--region` (and its spellings `--window`, `--box`, `--levels`): a box of the array,
    /// [`ArrayRequest::region`] (source side). Honoured by every format (see
    /// [`Format::honours_flag`]): the default [`Format::stream_array`] cuts the box out of the
    /// whole array in memory, so it works for any array within [`Limits::max_array_bytes`];
    /// formats that stream read only the blocks the box meets, whatever the array's size.
    Region,
    /// `--lod`: a level of detail other than full resolution, [`ArrayRequest::lod`] (source
    /// side). Only formats that store levels of detail (VDS) declare it.
    Lod,
}

impl RequestFlag {
    /// Every flag, in the order `--help` lists them.
    pub const ALL: [RequestFlag; 7] = [
        RequestFlag::Element,
        RequestFlag::Physical,
        RequestFlag::Codes,
        RequestFlag::Region,
        RequestFlag::Lod,
        RequestFlag::Tile,
        RequestFlag::Compress,
    ];

    /// The command-line spelling (`--element`).
    pub fn as_str(self) -> &'static str {
        match self {
            RequestFlag::Element => "--element",
            RequestFlag::Physical => "--physical",
            RequestFlag::Codes => "--codes",
            RequestFlag::Tile => "--tile",
            RequestFlag::Compress => "--compress",
            RequestFlag::Region => "--region",
            RequestFlag::Lod => "--lod",
        }
    }

    /// The library's name for the option (`ArrayRequest::element`), for library errors.
    pub fn option_name(self) -> &'static str {
        match self {
            RequestFlag::Element => "ArrayRequest::element",
            RequestFlag::Physical => "ArrayRequest::physical",
            RequestFlag::Codes => "ArrayRequest::codes",
            RequestFlag::Tile => "WriteOptions::tile",
            RequestFlag::Compress => "WriteOptions::compress",
            RequestFlag::Region => "ArrayRequest::region",
            RequestFlag::Lod => "ArrayRequest::lod",
        }
    }

    /// Does the flag concern reading the source (true) or writing the target (false)?
    pub fn is_source_flag(self) -> bool {
        matches!(
            self,
            RequestFlag::Element | RequestFlag::Physical | RequestFlag::Codes | RequestFlag::Region | RequestFlag::Lod
        )
    }
}

/// One container format.
pub trait Format: Send + Sync {
    /// Short name used in reports and `--to` (`volp`).
    fn name(&self) -> &'static str;
    /// One line for `--help` and reports.
    fn description(&self) -> &'static str;
    /// File extensions (without dot) that select this format as a `convert` target.
    fn extensions(&self) -> &'static [&'static str];
    /// Does a file starting with `head` (up to 64 bytes) belong to this format?
    fn detect(&self, head: &[u8]) -> bool;
    /// The `convert` flags this format honours: source flags in `read_array`/`stream_array`,
    /// target flags in `write_array`/`array_writer`. The default is none, so a flag a format has
    /// not declared is refused ([`RequestFlag::Region`] excepted: see
    /// [`Format::honours_flag`]).
    fn honours(&self) -> &'static [RequestFlag] {
        &[]
    }
    /// Whether the format honours `flag`: [`RequestFlag::Region`] always (every
    /// `stream_array` must honour `req.region`, and the default one does, in memory), any
    /// other flag when [`Format::honours`] lists it.
    fn honours_flag(&self, flag: RequestFlag) -> bool {
        flag == RequestFlag::Region || self.honours().contains(&flag)
    }
    /// Does a directory hold a dataset of this format?
    fn detect_dir(&self, _dir: &Path) -> bool {
        false
    }
    /// Do the objects under a store prefix hold a dataset of this format?
    fn detect_objects(&self, _objects: &dyn crate::ObjectSource) -> bool {
        false
    }
    /// Describe what the input holds; cheap structural findings may be included.
    fn inspect(&self, input: &Input, opts: &InspectOptions) -> Result<Report>;
    /// Check every rule, checksum and payload; never stops at the first finding.
    fn validate(&self, input: &Input, opts: &ValidateOptions) -> Report;
    /// Decode one array into memory (bounded by `req.limits.max_array_bytes`).
    fn read_array(&self, input: &Input, req: &ArrayRequest) -> Result<NdArray>;
    /// Decode one array (or `req.region` of it) into `sink`, following the protocol of
    /// [`crate::stream`]: `begin`, then every byte once; the caller calls `finish`.
    ///
    /// The default reads the whole array into memory first (bounded by the limits) and is
    /// replaced by formats that stream.
    fn stream_array(&self, input: &Input, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        let whole = ArrayRequest {
            region: None,
            ..req.clone()
        };
        let mut array = self.read_array(input, &whole)?;
        if let Some(spec) = &req.region {
            array = array.region(&spec.resolve(&array.shape)?)?;
        }
        sink.begin(&ArrayInfo::of(&array))?;
        sink.write_at(0, &array.data)
    }
    /// Encode one array as a complete file of this format.
    fn write_array(&self, _array: &NdArray, _opts: &WriteOptions, _out: &mut dyn Write) -> Result<()> {
        Err(Error::usage(format!("rasterpack cannot write {} files", self.name())))
    }
    /// Write `array` to the file at `path` as this format: the one way to save an [`NdArray`]
    /// with any format that writes (`VolpFormat.save(&array, "x.volp", &opts)`). Options the
    /// format does not honour are refused. The file appears only when complete: it is written
    /// beside `path` under a temporary name and renamed over it (replacing a file there).
    fn save(&self, array: &NdArray, path: &Path, opts: &WriteOptions) -> Result<()> {
        opts.check_honoured(self)?;
        crate::output::write_file_atomically(path, |out| self.write_array(array, opts, out))
    }
    /// Encode several arrays, with `metadata` as the file's own metadata, as one complete file
    /// of this format: GVRS writes one element per array (one grid), FOLD one NPZ chunk of the
    /// named arrays with `metadata` in its index. The default, for formats that hold one array
    /// per file, writes one array without metadata through [`Format::write_array`] and refuses
    /// anything more.
    fn write_arrays(
        &self,
        arrays: &[NdArray],
        metadata: &Map<String, Value>,
        opts: &WriteOptions,
        out: &mut dyn Write,
    ) -> Result<()> {
        match arrays {
            [one] if metadata.is_empty() => self.write_array(one, opts, out),
            [_] => Err(Error::usage(format!(
                "the {} writer takes no file metadata",
                self.name()
            ))),
            _ => Err(Error::usage(format!(
                "a {} file holds one array; {} given",
                self.name(),
                arrays.len()
            ))),
        }
    }
    /// [`Format::write_arrays`] to the file at `path`, atomically as [`Format::save`] writes.
    fn save_arrays(
        &self,
        arrays: &[NdArray],
        metadata: &Map<String, Value>,
        path: &Path,
        opts: &WriteOptions,
    ) -> Result<()> {
        opts.check_honoured(self)?;
        crate::output::write_file_atomically(path, |out| self.write_arrays(arrays, metadata, opts, out))
    }
    /// A sink that encodes the array it receives as a complete file of this format on `out`.
    ///
    /// The default collects the array in memory (bounded by `opts.limits`) and calls
    /// [`Format::write_array`] at `finish`; formats that can write as data arrives override it.
    fn array_writer<'a>(&'a self, opts: &WriteOptions, out: Output<'a>) -> Result<Box<dyn ArraySink + 'a>> {
        Ok(Box::new(CollectThenWrite {
            format: self,
            opts: opts.clone(),
            out,
            collected: Some(MemorySink::new(opts.limits)),
        }))
    }
    /// Whether [`Format::array_writer`] on an [`Output::Stream`] writes the file as the data
    /// arrives (true), or holds the whole file in memory until `finish` (false: the default
    /// writer, and formats whose header points at a directory written last). A front writing to
    /// a stream it cannot seek or hold (an object-store upload) spools to a local file when false.
    fn streams_output(&self) -> bool {
        false
    }
    /// Open `input` as this format's reader, behind the format-independent [`ArrayFile`]
    /// interface (what [`crate::open_any`] returns).
    fn open(&self, _input: Input, _limits: Limits) -> Result<Box<dyn ArrayFile>> {
        Err(Error::unsupported(
            "format.open",
            None,
            format!("the {} reader does not offer the ArrayFile interface yet", self.name()),
        ))
    }
    /// A conversion this source format does itself (e.g. FOLD -> FOLD repair); `None` means
    /// "use the generic read_array -> write_array path". `interrupt` (Ctrl-C in the CLI's and
    /// Python's convert) is asked at least every ~100 ms of its work; an `Err` stops it.
    fn convert_special(
        &self,
        _input: &Input,
        _target: &dyn Format,
        _req: &ArrayRequest,
        _opts: &WriteOptions,
        _interrupt: Option<&crate::stream::Interrupt>,
        _out: &mut dyn Write,
    ) -> Option<Result<()>> {
        None
    }
}

/// The default [`Format::array_writer`]: collect, then [`Format::write_array`].
struct CollectThenWrite<'a, F: Format + ?Sized> {
    format: &'a F,
    opts: WriteOptions,
    out: Output<'a>,
    collected: Option<MemorySink>,
}

impl<F: Format + ?Sized> CollectThenWrite<'_, F> {
    fn sink(&mut self) -> Result<&mut MemorySink> {
        self.collected
            .as_mut()
            .ok_or_else(|| Error::usage("internal: the array was already written"))
    }
}

impl<F: Format + ?Sized> ArraySink for CollectThenWrite<'_, F> {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        self.sink()?.begin(info)
    }
    fn random_access(&self) -> bool {
        true
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.sink()?.write_at(offset, data)
    }
    fn fill_at(&mut self, offset: u64, len: u64, pattern: &[u8]) -> Result<()> {
        self.sink()?.fill_at(offset, len, pattern)
    }
    fn direct_buffer(&mut self) -> Option<&mut [u8]> {
        self.collected.as_mut()?.direct_buffer()
    }
    fn finish(&mut self) -> Result<()> {
        let array = self
            .collected
            .take()
            .ok_or_else(|| Error::usage("internal: the array was already written"))?
            .into_array()?;
        self.format.write_array(&array, &self.opts, self.out.as_write())
    }
}

/// Read an array by streaming it into memory: the `read_array` of formats that implement
/// [`Format::stream_array`].
pub fn read_by_streaming<F: Format + ?Sized>(format: &F, input: &Input, req: &ArrayRequest) -> Result<NdArray> {
    let mut sink = MemorySink::new(req.limits);
    format.stream_array(input, req, &mut sink)?;
    sink.finish()?;
    sink.into_array()
}
