//! [`FoldFile`]: a FOLD file opened for reading, the one type a library user needs.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use rasterpack_common::{
    ArrayFile, ArrayInfo, ArrayRequest, ArraySink, Error, Findings, Input, Interrupt, Limits, NdArray, Report, Result,
    ValidateOptions,
};

use crate::element::{element_labels, npz_chunks};
use crate::parse::{self, FoldContainer, FoldEntry};
use crate::pjson::Value;
use crate::read::VerifiedChunks;
use crate::validate::{analyze, FoldAnalysis, FoldAnalyzeOptions};
use crate::FoldFormat;

/// A FOLD (`.fold` / `.mind`) file opened for reading: its header and JSON index are read and
/// checked; chunks stay on disk until they are read, and every read runs the checks that
/// protect the bytes it returns (see the crate docs).
///
/// Arrays are the `.npy` members of NPZ0 chunks, named as [`ArrayRequest::for_element`] takes
/// them: `CHUNK/ARRAY`, or `["CHUNK","ARRAY"]` when a name holds a `/` that makes the short
/// form ambiguous.
#[derive(Debug, Clone)]
pub struct FoldFile {
    input: Input,
    limits: Limits,
    container: FoldContainer,
    findings: Findings,
    /// Every NPZ0 chunk as [`ArrayFile::arrays`] verified it: a later read of a sink that
    /// takes bytes in any order then verifies the chunk it reads while it reads it (one pass,
    /// see `read::stream_array`) instead of verifying the file's chunks again first.
    verified: Arc<OnceLock<VerifiedChunks>>,
    /// What [`ArrayFile::arrays`] listed: the listing verifies every NPZ0 chunk, so it runs
    /// when first asked for, once.
    listed: Arc<OnceLock<Vec<ArrayInfo>>>,
    /// What the listing left out, as read errors (see [`ArrayFile::unlisted`]): set with
    /// `listed`.
    unlisted: Arc<OnceLock<Vec<(String, Error)>>>,
}

impl FoldFile {
    /// Open the file at `path` with default [`Limits`].
    pub fn open(path: impl AsRef<Path>) -> Result<FoldFile> {
        FoldFile::from_input(Input::open(path.as_ref())?, Limits::default())
    }

    /// Read a FOLD file held in memory, with default [`Limits`].
    pub fn from_bytes(bytes: Vec<u8>) -> Result<FoldFile> {
        FoldFile::from_input(Input::from_bytes("<memory>", bytes), Limits::default())
    }

    /// Read from an [`Input`] with the given limits. Fails (with the finding's code and
    /// offset) when the file header or the index cannot be read.
    pub fn from_input(input: Input, limits: Limits) -> Result<FoldFile> {
        let mut findings = Findings::new();
        let Some(container) = parse::open(&input, &limits, &mut findings)? else {
            let f = findings.iter().next();
            return Err(Error::invalid_at(
                f.map(|f| f.code.clone()).unwrap_or_else(|| "fold.invalid".into()),
                f.and_then(|f| f.offset),
                f.map(|f| f.message.clone())
                    .unwrap_or_else(|| "not a readable FOLD file".into()),
            ));
        };
        Ok(FoldFile {
            input,
            limits,
            container,
            findings,
            verified: Arc::default(),
            listed: Arc::default(),
            unlisted: Arc::default(),
        })
    }

    /// The file header and the parsed index.
    pub fn container(&self) -> &FoldContainer {
        &self.container
    }

    /// The index entries, one per chunk, in index order.
    pub fn chunks(&self) -> &[FoldEntry] {
        &self.container.index.entries
    }

    /// The index's `metadata` object, as Python's `json` module reads it.
    pub fn metadata(&self) -> &Value {
        &self.container.index.metadata
    }

    /// Findings about the header and index found while opening (e.g. an unknown version).
    pub fn open_findings(&self) -> &Findings {
        &self.findings
    }

    /// Every check of every layer (see [`crate::validate`]), as a report: findings and summary.
    pub fn validate(&self) -> Report {
        FoldFormat.validate_input(
            &self.input,
            &ValidateOptions {
                limits: self.limits,
                ..Default::default()
            },
        )
    }

    /// The full analysis (per-chunk status, content when `opts.content`).
    pub fn analyze(&self, opts: &FoldAnalyzeOptions) -> Result<FoldAnalysis> {
        analyze(&self.input, opts)
    }

    /// The decoded payload of chunk `name`, after every check that protects it (bounded by the
    /// limits: for JSON and small chunks; arrays stream with [`ArrayFile::stream`]).
    pub fn read_chunk(&self, name: &str) -> Result<Vec<u8>> {
        crate::validate::read_chunk(&self.input, &self.container, name, &self.limits)
    }

    /// The JSON document of a `JSON` chunk.
    pub fn read_json(&self, name: &str) -> Result<Value> {
        let bytes = self.read_chunk(name)?;
        crate::pjson::parse(&bytes, crate::parse::JSON_MAX_DEPTH).map_err(|e| {
            Error::invalid_at(
                "fold.payload.bad_json",
                None,
                format!(
                    "chunk {name:?}: JSON payload invalid at decoded byte {}: {}",
                    e.offset, e.message
                ),
            )
        })
    }

    /// One array (or a region of it) in memory: shorthand for [`ArrayFile::read`].
    pub fn read_array(&self, req: &ArrayRequest) -> Result<NdArray> {
        ArrayFile::read(self, req)
    }
}

impl ArrayFile for FoldFile {
    fn format_name(&self) -> &'static str {
        "fold"
    }

    /// The readable arrays of every NPZ0 chunk that passes its checks (each such chunk is
    /// verified, as a read would). Damaged chunks and members, and dtypes rasterpack does not
    /// decode, are left out: [`FoldFile::validate`] reports them. Verified when first asked
    /// for; later calls give the same list (a read still checks the bytes it decodes).
    fn arrays(&self) -> Result<Vec<ArrayInfo>> {
        self.arrays_interruptible(None)
    }

    /// The listing's verification (and ECC repair) polls `interrupt` as a read does.
    fn arrays_interruptible(&self, interrupt: Option<&Interrupt>) -> Result<Vec<ArrayInfo>> {
        if let Some(listed) = self.listed.get() {
            return Ok(listed.clone());
        }
        let verified =
            crate::read::verify_candidates(&self.input, &self.container, None, &self.limits, interrupt.cloned())?;
        if let Some(keep) = VerifiedChunks::keep(&self.limits, &verified) {
            let _ = self.verified.set(keep);
        }
        let _ = self.unlisted.set(left_out(&verified.0));
        Ok(self.listed.get_or_init(|| listing(&verified.0)).clone())
    }

    /// NPZ0 chunks that fail their checks (the first error finding of each) and members that
    /// are damaged or of a dtype rasterpack does not decode.
    fn unlisted(&self) -> Result<Vec<(String, Error)>> {
        self.arrays()?;
        Ok(self.unlisted.get().cloned().unwrap_or_default())
    }

    /// The array `element` names from its member's `.npy` header when the element can only
    /// mean one NPZ0 chunk (as the one-pass read, `read_riding`) that has no ECC: the chunk is
    /// decoded only as far as that header and nothing is verified (the read is). Otherwise,
    /// or when the header is not found there, from the listing.
    fn array_info(&self, element: Option<&str>) -> Result<ArrayInfo> {
        self.array_info_interruptible(element, None)
    }

    /// As [`ArrayFile::array_info`]; when it needs the listing, that polls `interrupt`.
    fn array_info_interruptible(&self, element: Option<&str>, interrupt: Option<&Interrupt>) -> Result<ArrayInfo> {
        if self.listed.get().is_none() {
            if let Some(info) = crate::read::peek_array(&self.input, &self.container, element, &self.limits)? {
                return Ok(info);
            }
        }
        let arrays = self.arrays_interruptible(interrupt)?;
        let found = match element {
            None => arrays.into_iter().next(),
            Some(name) => arrays.into_iter().find(|a| a.name.as_deref() == Some(name)),
        };
        // The listing leaves the file's attributes out (one copy per array of a file that may
        // hold thousands); the one array asked for carries them, as its read does.
        found
            .map(|mut info| {
                info.attrs = crate::read::file_attrs(&self.container);
                info
            })
            .ok_or_else(|| {
                Error::new(
                    rasterpack_common::ErrorKind::Usage,
                    "request.no_such_element",
                    None,
                    match element {
                        Some(name) => format!("no NPZ0 array {name:?} in the file"),
                        None => "the file holds no NPZ0 array".to_string(),
                    },
                )
            })
    }

    fn validate(&self) -> Report {
        FoldFile::validate(self)
    }

    fn stream(&self, req: &ArrayRequest, sink: &mut dyn ArraySink) -> Result<()> {
        req.check_honoured(&FoldFormat)?;
        let mut seen = None;
        let read = crate::read::stream_array(&self.input, &self.container, req, sink, self.verified.get(), &mut seen);
        // A read that verified every NPZ0 chunk (the file's only one) in its own pass did what
        // the listing does: keep it, so `arrays()` (and a second pass of `stats`) does not
        // verify the chunk again.
        if let Some((statuses, repaired)) = seen.filter(|_| req.limits == self.limits) {
            if let Some(keep) = VerifiedChunks::keep_statuses(&self.limits, &statuses, repaired) {
                let _ = self.verified.set(keep);
            }
            let _ = self.unlisted.set(left_out(&statuses));
            let _ = self.listed.get_or_init(|| listing(&statuses));
        }
        read
    }
}

/// What [`listing`] leaves out of `statuses`, as the errors a read of each gives: the first
/// [`rasterpack_common::LISTED_PER_CODE`] (a directory of 330 000 damaged members must not
/// cost an error each; a report lists that many per code too).
fn left_out(statuses: &[crate::validate::FoldChunkStatus]) -> Vec<(String, Error)> {
    let mut out = Vec::new();
    for chunk in npz_chunks(statuses) {
        if out.len() >= rasterpack_common::LISTED_PER_CODE {
            break;
        }
        let name = &chunk.status.entry.name;
        let Some(arrays) = chunk.arrays else {
            // A chunk with an error finding is never read: its first finding says why.
            let why = chunk.status.errors.first();
            out.push((
                name.clone(),
                match why {
                    // Its findings name the chunk already.
                    Some(f) => Error::invalid_at(f.code.clone(), f.offset, f.message.clone()),
                    None => Error::invalid_at(
                        "fold.payload.bad_npz",
                        None,
                        format!("chunk {name:?}: its arrays could not be listed"),
                    ),
                },
            ));
            continue;
        };
        let room = rasterpack_common::LISTED_PER_CODE - out.len();
        for a in arrays.iter().filter(|a| !a.is_readable()).take(room) {
            let what = format!("chunk {name:?}, array {:?}", a.name);
            let unsupported = if a.zip_method_unsupported {
                "fold.payload.npz_unsupported"
            } else {
                "fold.payload.npz_dtype_unsupported"
            };
            out.push((
                format!("{name}/{}", a.name),
                match (&a.damaged, &a.unsupported) {
                    (Some(d), _) => Error::invalid_at(d.code, None, format!("{what}: {}", d.message)),
                    (None, Some(u)) => Error::unsupported(unsupported, None, format!("{what}: {u}")),
                    (None, None) => {
                        Error::unsupported(unsupported, None, format!("{what}: dtype {} is not decoded", a.descr))
                    }
                },
            ));
        }
    }
    out
}

/// The readable arrays of verified NPZ0 chunks (see [`ArrayFile::arrays`]).
fn listing(statuses: &[crate::validate::FoldChunkStatus]) -> Vec<ArrayInfo> {
    element_labels(&npz_chunks(statuses))
        .into_iter()
        .filter_map(|(label, info)| {
            let mut out = ArrayInfo::new(info.dtype?, info.shape.clone());
            out.name = Some(label);
            Some(out)
        })
        .collect()
}

// The reader API every format shares (no trait import needed).
rasterpack_common::reader_api!(FoldFile, crate::FoldFormat, delegate);
