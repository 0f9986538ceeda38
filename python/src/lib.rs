//! The compiled core of the Python package `rasterpack` (`rasterpack._rasterpack`).
//!
//! It holds no format logic: every call goes to the same library calls the CLI makes
//! (the `rasterpack` facade's open and registry, the CLI's reports and convert; each format's
//! `ArrayFile`), and this layer
//! only converts arguments, errors and buffers. Reads decode into a numpy buffer that is made
//! when the source announces the array (`ArraySink::begin`), with the GIL released; between
//! pieces the sink checks for signals so Ctrl-C interrupts a long read. A Rust panic is caught
//! here and raised as `rasterpack.Error`, never as pyo3's `PanicException`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use numpy::{PyArray1, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PySlice, PyTuple};

use rasterpack::args::ConvertArgs;
use rasterpack::convert as cli_convert;
use rasterpack::report::{self, Mode};
use rasterpack_common::{
    ArrayFile, ArrayInfo, ArrayRequest, ArraySink, DType, Error, ErrorKind, Limits, NdArray, RegionSpec, WriteOptions,
};

/// Arrays up to this size may be decoded straight into the numpy buffer in one call
/// (`ArraySink::direct_buffer`); larger ones arrive piece by piece through `write_at`, where the
/// sink checks for Ctrl-C, so no single uninterruptible stretch outlasts about a second.
const DIRECT_MAX: usize = 32 << 20;

/// How often a read checks for pending signals (Ctrl-C) between pieces.
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// Run library code, turning a panic into an error: a bug must never abort the interpreter
/// or cross into Python as `PanicException` (a `BaseException` that `except Exception` misses).
fn guarded<T>(f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(Error::new(
                ErrorKind::Invalid,
                "internal.panic",
                None,
                format!("internal error in rasterpack (please report it): {what}"),
            ))
        }
    }
}

/// A library error as the matching Python exception, built by `rasterpack._errors` (which owns
/// the class hierarchy): InvalidFileError, UnsupportedError, UsageError, OSError.
fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let made = (|| -> PyResult<PyErr> {
        let errors = py.import("rasterpack._errors")?;
        // The OS error behind an I/O error, as the library kept it: its kind's name, errno
        // and path (Python picks the OSError subclass from them).
        let os = e.os.as_ref();
        let exc = errors.call_method1(
            "_from_library",
            (
                e.kind.as_str(),
                e.code.to_string(),
                e.offset,
                e.message.clone(),
                e.to_string(),
                os.map(|o| format!("{:?}", o.kind)),
                os.and_then(|o| o.code),
                os.and_then(|o| o.path.as_ref())
                    .map(|p| p.to_string_lossy().into_owned()),
            ),
        )?;
        Ok(PyErr::from_value(exc))
    })();
    made.unwrap_or_else(|err| err)
}

/// `str` or `os.PathLike` to a path string.
fn fspath(path: &Bound<'_, PyAny>) -> PyResult<String> {
    let os = path.py().import("os")?;
    let p = os.call_method1("fspath", (path,))?;
    p.extract::<String>()
        .map_err(|_| PyTypeError::new_err("path must be str or os.PathLike[str]"))
}

fn json_to_py(py: Python<'_>, value: &serde_json::Value) -> PyResult<PyObject> {
    let text = serde_json::to_string(value).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(py.import("json")?.call_method1("loads", (text,))?.unbind())
}

fn np_dtype<'py>(py: Python<'py>, dtype: DType) -> PyResult<Bound<'py, PyAny>> {
    py.import("numpy")?.call_method1("dtype", (dtype.npy_descr(),))
}

/// Lets Python run its signal handlers (Ctrl-C raises KeyboardInterrupt) from library code
/// running without the GIL, at most every [`SIGNAL_CHECK`]; the raised exception is kept for
/// the caller to raise once the library call has returned, and stops the call.
struct SignalPoll {
    last_check: Mutex<Instant>,
    raised: Mutex<Option<PyErr>>,
}

impl SignalPoll {
    fn new() -> SignalPoll {
        SignalPoll {
            last_check: Mutex::new(Instant::now()),
            raised: Mutex::new(None),
        }
    }

    fn check(&self) -> Result<(), Error> {
        {
            let mut last = self.last_check.lock().unwrap_or_else(|e| e.into_inner());
            if last.elapsed() < SIGNAL_CHECK {
                return Ok(());
            }
            *last = Instant::now();
        }
        if let Err(e) = Python::with_gil(|py| py.check_signals()) {
            *self.raised.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
            return Err(Error::new(
                ErrorKind::Usage,
                "interrupted",
                None,
                "interrupted by a signal",
            ));
        }
        Ok(())
    }

    /// A new poll and the library's interrupt hook over it.
    fn hook() -> (Arc<SignalPoll>, rasterpack_common::Interrupt) {
        let poll = Arc::new(SignalPoll::new());
        let polled = Arc::clone(&poll);
        (poll, Arc::new(move || polled.check()))
    }

    /// The exception a signal handler raised, if one did.
    fn take(&self) -> Option<PyErr> {
        self.raised.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// Receives a decoded array into a numpy buffer made at `begin` (zeroed, so no byte is ever
/// uninitialised even if a source misbehaves), or into the caller's array (`Array.read_into`),
/// checked at `begin` against the array the source announces.
struct NumpySink {
    limits: Limits,
    info: Option<ArrayInfo>,
    /// The array written: the sink's own `uint8` buffer, or the caller's `target`.
    buffer: Option<Py<PyAny>>,
    /// The caller's array to read into, when there is one.
    target: Option<Py<PyAny>>,
    /// Why `begin` refused the caller's array (a TypeError/ValueError to raise as it is).
    refused: Option<PyErr>,
    /// The buffer's address and length, written without the GIL: only this sink holds the
    /// array until the read returns it to Python.
    ptr: usize,
    len: usize,
    signals: Arc<SignalPoll>,
}

impl NumpySink {
    fn new(limits: Limits) -> NumpySink {
        NumpySink {
            limits,
            info: None,
            buffer: None,
            target: None,
            refused: None,
            ptr: 0,
            len: 0,
            signals: Arc::new(SignalPoll::new()),
        }
    }

    /// A sink that writes into `out` (checked at `begin`) instead of a new array.
    fn into_target(limits: Limits, out: Py<PyAny>) -> NumpySink {
        NumpySink {
            target: Some(out),
            ..NumpySink::new(limits)
        }
    }

    /// The caller's array, if it is exactly what the source announced (`len` bytes of `info`):
    /// a writeable C-contiguous ndarray of that shape and dtype. Its address and length.
    fn check_target(py: Python<'_>, out: &Bound<'_, PyAny>, info: &ArrayInfo, len: usize) -> PyResult<(usize, usize)> {
        let arr = out.downcast::<PyUntypedArray>().map_err(|_| {
            PyTypeError::new_err(format!(
                "read_into needs a numpy.ndarray, got {}",
                out.get_type().name().map(|n| n.to_string()).unwrap_or_default()
            ))
        })?;
        let want = np_dtype(py, info.dtype)?;
        if !arr.getattr("dtype")?.eq(&want)? {
            return Err(PyTypeError::new_err(format!(
                "read_into: out has dtype {}, the array is {}",
                arr.getattr("dtype")?.str()?,
                want.str()?
            )));
        }
        let shape: Vec<u64> = arr.shape().iter().map(|&n| n as u64).collect();
        if shape != info.shape {
            return Err(PyValueError::new_err(format!(
                "read_into: out has shape {:?}, the array read is {:?}",
                shape, info.shape
            )));
        }
        if !arr.is_c_contiguous() {
            return Err(PyValueError::new_err("read_into: out must be C-contiguous"));
        }
        if !arr.getattr("flags")?.getattr("writeable")?.extract::<bool>()? {
            return Err(PyValueError::new_err("read_into: out is read-only"));
        }
        let nbytes: usize = arr.getattr("nbytes")?.extract()?;
        if nbytes != len {
            return Err(PyValueError::new_err(format!(
                "read_into: out holds {nbytes} bytes, the array {len}"
            )));
        }
        // SAFETY: `arr` is a live ndarray; its data pointer is read, not dereferenced here.
        let ptr = unsafe { (*arr.as_array_ptr()).data } as usize;
        Ok((ptr, len))
    }

    /// Ctrl-C between pieces: a raised KeyboardInterrupt stops the read.
    fn check_signals(&mut self) -> Result<(), Error> {
        self.signals.check()
    }

    fn range(&self, offset: u64, len: u64) -> Result<usize, Error> {
        let end = offset.checked_add(len).filter(|&e| e <= self.len as u64);
        match end {
            Some(_) if self.buffer.is_some() => Ok(offset as usize),
            _ => Err(Error::usage(format!(
                "the source wrote {len} bytes at {offset}, outside the {}-byte array",
                self.len
            ))),
        }
    }

    fn slice(&mut self, start: usize, len: usize) -> &mut [u8] {
        if len == 0 {
            return &mut [];
        }
        // SAFETY: `range` checked start + len <= self.len; the buffer is alive (held in
        // `self.buffer`) and no one else can reach it before the read returns it.
        unsafe { std::slice::from_raw_parts_mut((self.ptr as *mut u8).add(start), len) }
    }

    /// The array as numpy sees it: the bytes viewed as the dtype, in the shape.
    fn into_array(self, py: Python<'_>) -> PyResult<PyObject> {
        let (Some(info), Some(buffer)) = (self.info, self.buffer) else {
            return Err(to_py(py, Error::usage("the source delivered no array")));
        };
        if self.target.is_some() {
            return Ok(buffer);
        }
        let shape = PyTuple::new(py, info.shape.iter().copied())?;
        let typed = buffer
            .bind(py)
            .call_method1("view", (np_dtype(py, info.dtype)?,))?
            .call_method1("reshape", (shape,))?;
        Ok(typed.unbind())
    }
}

impl ArraySink for NumpySink {
    fn begin(&mut self, info: &ArrayInfo) -> Result<(), Error> {
        let len = info.in_memory_len(&self.limits)?;
        if let Some(target) = &self.target {
            let checked = Python::with_gil(|py| Self::check_target(py, target.bind(py), info, len));
            return match checked {
                Ok((ptr, len)) => {
                    self.buffer = Python::with_gil(|py| Some(target.clone_ref(py)));
                    self.ptr = ptr;
                    self.len = len;
                    self.info = Some(info.clone());
                    Ok(())
                }
                Err(e) => {
                    self.refused = Some(e);
                    Err(Error::usage("read_into: the output array does not fit the array read"))
                }
            };
        }
        let made = Python::with_gil(|py| -> PyResult<(Py<PyAny>, usize)> {
            let a = PyArray1::<u8>::zeros(py, len, false);
            let ptr = a.data() as usize;
            Ok((a.into_any().unbind(), ptr))
        });
        let (buffer, ptr) = made.map_err(|e| {
            Error::limit(
                "limit.memory",
                None,
                format!("could not allocate {len} bytes for the array: {e}"),
            )
        })?;
        self.buffer = Some(buffer);
        self.ptr = ptr;
        self.len = len;
        self.info = Some(info.clone());
        Ok(())
    }

    fn random_access(&self) -> bool {
        true
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), Error> {
        self.check_signals()?;
        let start = self.range(offset, data.len() as u64)?;
        self.slice(start, data.len()).copy_from_slice(data);
        Ok(())
    }

    fn fill_at(&mut self, offset: u64, len: u64, pattern: &[u8]) -> Result<(), Error> {
        self.check_signals()?;
        if pattern.is_empty() || !len.is_multiple_of(pattern.len() as u64) {
            return Err(Error::usage(format!(
                "fill of {len} bytes is not a whole number of {}-byte values",
                pattern.len()
            )));
        }
        let start = self.range(offset, len)?;
        let n = pattern.len();
        for value in self.slice(start, len as usize).chunks_exact_mut(n) {
            value.copy_from_slice(pattern);
        }
        Ok(())
    }

    fn direct_buffer(&mut self) -> Option<&mut [u8]> {
        if self.buffer.is_none() || self.len > DIRECT_MAX {
            return None;
        }
        let len = self.len;
        Some(self.slice(0, len))
    }

    /// Any size: the source checks for Ctrl-C between its pieces (`interrupt`).
    fn direct_buffer_polled(&mut self) -> Option<&mut [u8]> {
        self.buffer.as_ref()?;
        let len = self.len;
        Some(self.slice(0, len))
    }

    fn interrupt(&self) -> Option<rasterpack_common::Interrupt> {
        let signals = Arc::clone(&self.signals);
        Some(Arc::new(move || signals.check()))
    }

    fn finish(&mut self) -> Result<(), Error> {
        Ok(())
    }
}

/// An open file of any format rasterpack reads.
#[pyclass(module = "rasterpack", name = "File", frozen)]
struct File {
    path: String,
    format: &'static str,
    /// The listing, made when first asked for (a FOLD listing verifies every NPZ0 chunk, which
    /// `File[name]` and its read do not need).
    listed: std::sync::OnceLock<Vec<ArrayInfo>>,
    /// `None` once closed.
    inner: RwLock<Option<Arc<dyn ArrayFile>>>,
}

impl File {
    fn reader(&self) -> PyResult<Arc<dyn ArrayFile>> {
        let guard = self
            .inner
            .read()
            .map_err(|_| PyValueError::new_err("file lock poisoned"))?;
        guard
            .clone()
            .ok_or_else(|| PyValueError::new_err(format!("I/O operation on closed file {:?}", self.path)))
    }

    fn open_path(py: Python<'_>, path: String) -> PyResult<File> {
        let opened = py.allow_threads(|| guarded(|| rasterpack::open(&path)));
        let file = opened.map_err(|e| to_py(py, e))?;
        Ok(File {
            format: file.format_name(),
            path,
            listed: std::sync::OnceLock::new(),
            inner: RwLock::new(Some(Arc::from(file))),
        })
    }

    /// The arrays, listed when first asked for (with the GIL released).
    fn listing(&self, py: Python<'_>) -> PyResult<&Vec<ArrayInfo>> {
        if let Some(listed) = self.listed.get() {
            return Ok(listed);
        }
        let reader = self.reader()?;
        // A FOLD listing verifies (and may repair) every NPZ0 chunk: seconds that Ctrl-C stops.
        let signals = SignalPoll::hook();
        let arrays = py.allow_threads(|| guarded(|| reader.arrays_interruptible(Some(&signals.1))));
        if let Some(e) = signals.0.take() {
            return Err(e);
        }
        let arrays = arrays.map_err(|e| to_py(py, e))?;
        Ok(self.listed.get_or_init(|| arrays))
    }

    fn index_of(&self, py: Python<'_>, name: Option<&str>) -> PyResult<Option<usize>> {
        Ok(self.listing(py)?.iter().position(|a| a.name.as_deref() == name))
    }

    /// The array `name` names (the first one for `None`): from the listing once it is made,
    /// before that from the reader's description of that one array (`ArrayFile::array_info`).
    fn info_of(&self, py: Python<'_>, name: Option<&str>) -> PyResult<ArrayInfo> {
        let missing = |me: &File, py: Python<'_>, n: Option<&str>| -> PyResult<PyErr> {
            let known: Vec<String> = me.listing(py)?.iter().filter_map(|a| a.name.clone()).collect();
            Ok(match n {
                None => PyValueError::new_err(format!("{} holds no array", me.path)),
                Some(n) => pyo3::exceptions::PyKeyError::new_err(format!(
                    "{}: no array {n:?}; the file holds {}",
                    me.path,
                    if known.is_empty() {
                        "one unnamed array".to_string()
                    } else {
                        known.join(", ")
                    }
                )),
            })
        };
        if let Some(listed) = self.listed.get() {
            let found = match name {
                None => listed.first(),
                Some(n) => listed.iter().find(|a| a.name.as_deref() == Some(n)),
            };
            return match found {
                Some(info) => Ok(info.clone()),
                None => Err(missing(self, py, name)?),
            };
        }
        let reader = self.reader()?;
        let signals = SignalPoll::hook();
        let info = py.allow_threads(|| guarded(|| reader.array_info_interruptible(name, Some(&signals.1))));
        if let Some(e) = signals.0.take() {
            return Err(e);
        }
        match info {
            Ok(info) => Ok(info),
            Err(e) if e.code == "request.no_such_element" => Err(missing(self, py, name)?),
            Err(e) => Err(to_py(py, e)),
        }
    }
}

#[pymethods]
impl File {
    /// The format's short name: "volp", "gvrs", "udf", "fold", "vds" or "npy".
    #[getter]
    fn format(&self) -> &'static str {
        self.format
    }

    /// The path the file was opened from.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// The names of the arrays the file holds, as `convert --element` takes them (None for
    /// the one unnamed array of a VOLP or .npy file), in the library's order.
    #[getter]
    fn arrays(&self, py: Python<'_>) -> PyResult<Vec<Option<String>>> {
        Ok(self.listing(py)?.iter().map(|a| a.name.clone()).collect())
    }

    /// The file's metadata: the `summary` of `rasterpack inspect --json`, as a dict.
    #[getter]
    fn attrs(&self, py: Python<'_>) -> PyResult<PyObject> {
        let entry = check(py, &self.path, Mode::Inspect { all: false })?;
        json_to_py(py, entry.get("summary").unwrap_or(&serde_json::Value::Null))
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.read().map(|g| g.is_none()).unwrap_or(true)
    }

    /// The array `rasterpack convert` takes by default (the first one), or the one named.
    #[pyo3(signature = (name=None))]
    fn array(slf: &Bound<'_, Self>, name: Option<&str>) -> PyResult<Array> {
        let me = slf.get();
        me.reader()?;
        let info = me.info_of(slf.py(), name)?;
        let chunks = me.reader()?.chunk_shape(info.name.as_deref());
        Ok(Array {
            file: slf.clone().unbind(),
            chunks: chunks.unwrap_or_else(|| info.shape.clone()),
            info,
        })
    }

    fn __getitem__(slf: &Bound<'_, Self>, name: &str) -> PyResult<Array> {
        File::array(slf, Some(name))
    }

    fn __contains__(&self, py: Python<'_>, name: &str) -> PyResult<bool> {
        Ok(self.index_of(py, Some(name))?.is_some())
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.listing(py)?.len())
    }

    /// Release the reader (open file handles, mapped or cached bytes). Arrays taken from the
    /// file can no longer be read afterwards.
    fn close(&self) {
        if let Ok(mut g) = self.inner.write() {
            *g = None;
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> bool {
        self.close();
        false
    }

    /// Pickles as its path: the unpickled File reopens it (in a Dask worker, say).
    fn __reduce__(&self, py: Python<'_>) -> PyResult<(PyObject, (String,))> {
        let open = py.import("rasterpack")?.getattr("open")?.unbind();
        Ok((open, (self.path.clone(),)))
    }

    fn __repr__(&self) -> String {
        // The listing only when it was made: a repr must not verify a file.
        let names = match self.listed.get() {
            Some(listed) => listed
                .iter()
                .map(|a| a.name.clone().unwrap_or_else(|| "<unnamed>".into()))
                .collect::<Vec<_>>()
                .join(", "),
            None => "...".into(),
        };
        format!(
            "<rasterpack.File {:?} format={} arrays=[{}]{}>",
            self.path,
            self.format,
            names,
            if self.closed() { " closed" } else { "" }
        )
    }
}

/// One array of a File: metadata now, values when indexed or read.
#[pyclass(module = "rasterpack", name = "Array", frozen)]
struct Array {
    file: Py<File>,
    info: ArrayInfo,
    chunks: Vec<u64>,
}

/// One axis of a basic numpy index: the box to read and what to apply to the box read.
struct AxisPick {
    start: u64,
    size: u64,
}

impl Array {
    fn read_request(&self, py: Python<'_>, req: ArrayRequest) -> PyResult<PyObject> {
        let sink = NumpySink::new(req.limits);
        self.read_into_sink(py, req, sink)
    }

    fn read_into_sink(&self, py: Python<'_>, req: ArrayRequest, mut sink: NumpySink) -> PyResult<PyObject> {
        let reader = self.file.get().reader()?;
        let streamed = py.allow_threads(|| {
            rasterpack::on_this_thread_when_alone(|| {
                guarded(|| rasterpack::common::stream_view(&req, false, 0, &mut sink, |r, s| reader.stream(r, s)))
            })
        });
        if let Some(e) = sink.signals.take() {
            return Err(e);
        }
        if let Some(e) = sink.refused.take() {
            return Err(e);
        }
        streamed.map_err(|e| to_py(py, e))?;
        sink.into_array(py)
    }

    /// The request `read` and `read_into` make from their keywords, with `convert`'s meanings.
    fn keyword_request(
        &self,
        py: Python<'_>,
        region: Option<&Bound<'_, PyAny>>,
        physical: bool,
        lod: u32,
        codes: bool,
    ) -> PyResult<ArrayRequest> {
        let mut req = self.request().with_physical(physical).with_codes(codes);
        req.lod = lod;
        if let Some(region) = region {
            let spec = match region.extract::<String>() {
                Ok(text) => RegionSpec::parse(&text),
                Err(_) => RegionSpec::parse(&region_text(region)?),
            };
            req.region = Some(spec.map_err(|e| to_py(py, e))?);
        }
        // Options the format does not honour are refused (the library's rule, as in convert).
        let reader = self.file.get().reader()?;
        if let Some(format) = rasterpack::format_by_name(reader.format_name()) {
            req.check_honoured(format).map_err(|e| to_py(py, e))?;
        }
        Ok(req)
    }

    fn request(&self) -> ArrayRequest {
        ArrayRequest {
            element: self.info.name.clone(),
            ..ArrayRequest::default()
        }
    }

    /// A basic numpy index (ints, slices, Ellipsis, None) as the box to read and the index that
    /// picks the answer out of that box (steps, dropped axes, new axes).
    fn plan<'py>(&self, key: &Bound<'py, PyAny>) -> PyResult<(Vec<AxisPick>, Vec<Bound<'py, PyAny>>)> {
        let py = key.py();
        let items: Vec<Bound<'py, PyAny>> = match key.downcast::<PyTuple>() {
            Ok(t) => t.iter().collect(),
            Err(_) => vec![key.clone()],
        };
        let ndim = self.info.shape.len();
        let ellipses = items.iter().filter(|i| i.is(py.Ellipsis())).count();
        if ellipses > 1 {
            return Err(PyIndexError::new_err(
                "an index can only have a single ellipsis ('...')",
            ));
        }
        let consuming = items.iter().filter(|i| !i.is_none() && !i.is(py.Ellipsis())).count();
        if consuming > ndim {
            return Err(PyIndexError::new_err(format!(
                "too many indices for array: array is {ndim}-dimensional, but {consuming} were indexed"
            )));
        }
        let mut picks = Vec::with_capacity(ndim);
        let mut post = Vec::with_capacity(items.len() + ndim);
        let whole = |picks: &mut Vec<AxisPick>, post: &mut Vec<Bound<'py, PyAny>>, axis: usize| -> PyResult<()> {
            picks.push(AxisPick {
                start: 0,
                size: self.info.shape[axis],
            });
            post.push(PySlice::full(py).into_any());
            Ok(())
        };
        for item in &items {
            if item.is(py.Ellipsis()) {
                for _ in 0..(ndim - consuming) {
                    let axis = picks.len();
                    whole(&mut picks, &mut post, axis)?;
                }
            } else if item.is_none() {
                post.push(item.clone());
            } else if let Ok(slice) = item.downcast::<PySlice>() {
                let axis = picks.len();
                let n = self.info.shape[axis];
                let len = isize::try_from(n).map_err(|_| PyIndexError::new_err("axis too long"))?;
                let ix = slice.indices(len)?;
                let count = ix.slicelength as i64;
                let (start, step) = (ix.start as i64, ix.step as i64);
                if count == 0 {
                    picks.push(AxisPick { start: 0, size: 0 });
                    post.push(PySlice::full(py).into_any());
                } else {
                    let last = start + (count - 1) * step;
                    let lo = start.min(last) as u64;
                    let hi = start.max(last) as u64;
                    picks.push(AxisPick {
                        start: lo,
                        size: hi - lo + 1,
                    });
                    // The box holds both ends; walk it with the slice's step (from its far end
                    // when the step is negative, to its start: `None` as the stop).
                    let from: i64 = if step > 0 { 0 } else { (hi - lo) as i64 };
                    let builtin_slice = py.import("builtins")?.getattr("slice")?;
                    post.push(builtin_slice.call1((from, py.None(), step))?);
                }
            } else if let Ok(i) = item.call_method0("__index__").and_then(|v| v.extract::<i64>()) {
                if item.is_instance_of::<pyo3::types::PyBool>() {
                    return Err(PyIndexError::new_err(
                        "boolean indices are not supported; use np.asarray(a)[...]",
                    ));
                }
                let axis = picks.len();
                let n = self.info.shape[axis] as i64;
                let j = if i < 0 { i + n } else { i };
                if j < 0 || j >= n {
                    return Err(PyIndexError::new_err(format!(
                        "index {i} is out of bounds for axis {axis} with size {n}"
                    )));
                }
                picks.push(AxisPick {
                    start: j as u64,
                    size: 1,
                });
                post.push(0i64.into_pyobject(py)?.into_any());
            } else {
                return Err(PyIndexError::new_err(format!(
                    "only integers, slices, Ellipsis and None index a rasterpack.Array (got {}); \
                     read it with np.asarray(a) for advanced indexing",
                    item.get_type().name()?
                )));
            }
        }
        while picks.len() < ndim {
            let axis = picks.len();
            whole(&mut picks, &mut post, axis)?;
        }
        Ok((picks, post))
    }
}

#[pymethods]
impl Array {
    /// The array's name in its file (None for a VOLP/.npy file's one array).
    #[getter]
    fn name(&self) -> Option<String> {
        self.info.name.clone()
    }

    /// The File this array belongs to.
    #[getter]
    fn file(&self, py: Python<'_>) -> Py<File> {
        self.file.clone_ref(py)
    }

    /// Shape in numpy (C) axis order, as `convert` to .npy writes it.
    #[getter]
    fn shape(&self, py: Python<'_>) -> PyResult<PyObject> {
        Ok(PyTuple::new(py, self.info.shape.iter().copied())?.into_any().unbind())
    }

    /// Number of axes.
    #[getter]
    fn ndim(&self) -> usize {
        self.info.shape.len()
    }

    /// Number of values.
    #[getter]
    fn size(&self) -> u64 {
        self.info.len()
    }

    /// Bytes of the whole array in memory.
    #[getter]
    fn nbytes(&self) -> PyResult<u64> {
        self.info.byte_len().map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// The stored values' numpy dtype (little-endian).
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        np_dtype(py, self.info.dtype)
    }

    /// The file's own block shape for this array (GVRS tile, VDS brick), in numpy axis order;
    /// the whole shape for formats that store an array in one piece.
    #[getter]
    fn chunks(&self, py: Python<'_>) -> PyResult<PyObject> {
        Ok(PyTuple::new(py, self.chunks.iter().copied())?.into_any().unbind())
    }

    /// The array's attributes from the library (units, fill/NoValue, scale/offset, ...).
    #[getter]
    fn attrs(&self, py: Python<'_>) -> PyResult<PyObject> {
        json_to_py(py, &serde_json::Value::Object(self.info.attrs.clone()))
    }

    fn __len__(&self) -> PyResult<usize> {
        match self.info.shape.first() {
            Some(&n) => usize::try_from(n).map_err(|_| PyValueError::new_err("axis too long")),
            None => Err(PyTypeError::new_err("len() of a 0-d array")),
        }
    }

    /// `a[10:20, :, 5]`: reads only the blocks the box meets, then applies steps and drops the
    /// integer-indexed axes as numpy does.
    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<PyObject> {
        let (picks, post) = self.plan(key)?;
        let post = PyTuple::new(py, post)?;
        let shape: Vec<u64> = picks.iter().map(|p| p.size).collect();
        if shape.contains(&0) || shape.is_empty() {
            let full = if shape.is_empty() {
                self.read_request(py, self.request())?
            } else {
                let np = py.import("numpy")?;
                np.call_method1("empty", (PyTuple::new(py, shape)?, np_dtype(py, self.info.dtype)?))?
                    .unbind()
            };
            return Ok(full.bind(py).get_item(post)?.unbind());
        }
        let start: Vec<u64> = picks.iter().map(|p| p.start).collect();
        let spec = RegionSpec::from_start_size(&start, &shape).map_err(|e| to_py(py, e))?;
        let boxed = self.read_request(py, self.request().with_region(spec))?;
        Ok(boxed.bind(py).get_item(post)?.unbind())
    }

    /// The whole array as a numpy array (`np.asarray(a)`).
    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__(&self, py: Python<'_>, dtype: Option<&Bound<'_, PyAny>>, copy: Option<bool>) -> PyResult<PyObject> {
        let _ = copy; // every read makes a new array
        let a = self.read_request(py, self.request())?;
        match dtype {
            Some(d) => Ok(a.bind(py).call_method1("astype", (d,))?.unbind()),
            None => Ok(a),
        }
    }

    /// Read the array, or a region of it, with `rasterpack convert`'s meanings: `region` as
    /// `convert --region` takes it (`"0:2,100:200"`, `"::2,-1"`, or a tuple of slices/ints, in
    /// numpy axis order, with numpy's meanings: negative positions count from the end, steps,
    /// an integer drops its axis), `physical` values (scale and offset
    /// applied), a VDS level of detail `lod`, or GVRS stored integer `codes`.
    #[pyo3(signature = (region=None, physical=false, lod=0, codes=false))]
    fn read(
        &self,
        py: Python<'_>,
        region: Option<&Bound<'_, PyAny>>,
        physical: bool,
        lod: u32,
        codes: bool,
    ) -> PyResult<PyObject> {
        let req = self.keyword_request(py, region, physical, lod, codes)?;
        self.read_request(py, req)
    }

    /// `read` into the caller's array `out` instead of a new one, and return `out`: the same
    /// library read, so the values are `read`'s. `out` must be a writeable C-contiguous
    /// ndarray of exactly the shape and dtype `read` would return (TypeError for another
    /// dtype or a non-array, ValueError for another shape, a non-contiguous or read-only
    /// array). Reusing one buffer over many reads spares the allocation and page faults of a
    /// new array each time. If the read fails, `out` may hold part of the values.
    #[pyo3(signature = (out, region=None, physical=false, lod=0, codes=false))]
    fn read_into(
        &self,
        py: Python<'_>,
        out: &Bound<'_, PyAny>,
        region: Option<&Bound<'_, PyAny>>,
        physical: bool,
        lod: u32,
        codes: bool,
    ) -> PyResult<PyObject> {
        let req = self.keyword_request(py, region, physical, lod, codes)?;
        let sink = NumpySink::into_target(req.limits, out.clone().unbind());
        self.read_into_sink(py, req, sink)
    }

    /// Pickles as (path, name): the unpickled Array reopens its file.
    fn __reduce__(&self, py: Python<'_>) -> PyResult<(PyObject, (String, Option<String>))> {
        let f = py.import("rasterpack._errors")?.getattr("_open_array")?.unbind();
        Ok((f, (self.file.get().path.clone(), self.info.name.clone())))
    }

    fn __repr__(&self) -> String {
        format!(
            "<rasterpack.Array {} shape={:?} dtype={} chunks={:?}>",
            self.info.name.as_deref().unwrap_or("<unnamed>"),
            self.info.shape,
            self.info.dtype.name(),
            self.chunks
        )
    }
}

/// A tuple of slices/ints as `--region` text (non-negative bounds, step 1).
fn region_text(region: &Bound<'_, PyAny>) -> PyResult<String> {
    let items: Vec<Bound<'_, PyAny>> = match region.downcast::<PyTuple>() {
        Ok(t) => t.iter().collect(),
        Err(_) => vec![region.clone()],
    };
    let mut parts = Vec::new();
    for item in items {
        if let Ok(s) = item.downcast::<PySlice>() {
            let get = |name: &str| -> PyResult<Option<i64>> {
                let v = s.getattr(name)?;
                if v.is_none() {
                    return Ok(None);
                }
                v.extract::<i64>()
                    .map(Some)
                    .map_err(|_| PyValueError::new_err("region bounds and steps must be integers"))
            };
            let a = get("start")?.map(|v| v.to_string()).unwrap_or_default();
            let b = get("stop")?.map(|v| v.to_string()).unwrap_or_default();
            match get("step")? {
                Some(st) => parts.push(format!("{a}:{b}:{st}")),
                None => parts.push(format!("{a}:{b}")),
            }
        } else {
            let i: i64 = item
                .extract()
                .map_err(|_| PyValueError::new_err("a region is slices and integers"))?;
            parts.push(i.to_string());
        }
    }
    Ok(parts.join(","))
}

/// The `--json` file entry of `inspect`/`validate` for one path.
fn check(py: Python<'_>, path: &str, mode: Mode) -> PyResult<serde_json::Value> {
    let path = path.to_string();
    let result = py.allow_threads(|| {
        guarded(|| {
            // A path that cannot be opened is the report's `io` finding in the CLI (exit 2);
            // here it is the OSError the library's error names, as `open()` raises.
            if let Err(e) = rasterpack::detect::open(std::path::Path::new(&path), &Limits::default()) {
                if e.kind == ErrorKind::Io {
                    return Err(e);
                }
            }
            Ok(report::check(
                &mode,
                std::path::Path::new(&path),
                &Limits::default(),
                None,
            ))
        })
    });
    let result = result.map_err(|e| to_py(py, e))?;
    Ok(report::file_json(&result))
}

/// Open a file of any format rasterpack reads (detected from content).
#[pyfunction]
fn open(py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<File> {
    File::open_path(py, fspath(path)?)
}

/// `rasterpack validate --json`'s entry for one file, as a dict.
#[pyfunction]
#[pyo3(signature = (path, strict=false))]
fn _validate(py: Python<'_>, path: &Bound<'_, PyAny>, strict: bool) -> PyResult<PyObject> {
    let entry = check(py, &fspath(path)?, Mode::Validate { strict })?;
    json_to_py(py, &entry)
}

/// `rasterpack inspect --json`'s entry for one file, as a dict.
#[pyfunction]
#[pyo3(signature = (path, all=false))]
fn inspect(py: Python<'_>, path: &Bound<'_, PyAny>, all: bool) -> PyResult<PyObject> {
    let entry = check(py, &fspath(path)?, Mode::Inspect { all })?;
    json_to_py(py, &entry)
}

/// `rasterpack convert SRC DST` with its options as keywords (`rasterpack.convert` packs the
/// VDS flags into `vds`).
#[pyfunction]
#[pyo3(signature = (src, dst, *, force=false, allow_expansion=false, to=None, element=None, physical=false, codes=false,
    region=None, window=None, r#box=None, levels=None, lod=None, tile=None, compress=None, squeeze=false,
    expand_dims=false, chunks=None, shard=None, all=false, channel=Vec::new(), vds=VdsOptions::default()))]
#[allow(clippy::too_many_arguments)]
fn _convert(
    py: Python<'_>,
    src: &Bound<'_, PyAny>,
    dst: &Bound<'_, PyAny>,
    force: bool,
    allow_expansion: bool,
    to: Option<String>,
    element: Option<String>,
    physical: bool,
    codes: bool,
    region: Option<String>,
    window: Option<String>,
    r#box: Option<String>,
    levels: Option<String>,
    lod: Option<u32>,
    tile: Option<&Bound<'_, PyAny>>,
    compress: Option<String>,
    squeeze: bool,
    expand_dims: bool,
    chunks: Option<String>,
    shard: Option<String>,
    all: bool,
    channel: Vec<String>,
    vds: VdsOptions,
) -> PyResult<()> {
    let input = fspath(src)?;
    let output = fspath(dst)?;
    if input == "-" || output == "-" {
        return Err(PyValueError::new_err(
            "convert takes paths; - (standard input/output) is the CLI's",
        ));
    }
    let tile = match tile {
        None => None,
        Some(t) => Some(match t.extract::<(u32, u32)>() {
            Ok(rc) => rc,
            Err(_) => rasterpack::args::parse_tile(&t.extract::<String>()?).map_err(PyValueError::new_err)?,
        }),
    };
    let args = ConvertArgs {
        storage_option: Vec::new(),
        input: PathBuf::from(input),
        output: PathBuf::from(output),
        force,
        allow_expansion,
        to,
        element: element.into_iter().collect(),
        physical,
        codes,
        region,
        window,
        box_ranges: r#box,
        levels,
        squeeze,
        expand_dims,
        lod,
        tile,
        compress,
        chunks,
        shard,
        all,
        brick_size: vds.brick_size,
        margin: vds.margin,
        lods: vds.lods,
        value_range: vds.value_range,
        no_value: vds.no_value,
        axes: vds.axes,
        metadata: vds.metadata,
        channels: channel,
    };
    let given = [&args.region, &args.window, &args.box_ranges, &args.levels]
        .iter()
        .filter(|v| v.is_some())
        .count();
    if given > 1 {
        return Err(to_py(
            py,
            Error::usage("give at most one of region, window, box and levels"),
        ));
    }
    // Ctrl-C: the conversion polls for signals between the pieces it writes and during the
    // source's own work (a FOLD repair); a raised KeyboardInterrupt stops it (the library removes the temporary output) and is raised here.
    let poll = Arc::new(SignalPoll::new());
    let hook = Arc::clone(&poll);
    let done = py.allow_threads(|| guarded(|| cli_convert::convert_with(&args, false, Arc::new(move || hook.check()))));
    if let Some(e) = poll.take() {
        return Err(e);
    }
    done.map_err(|e| to_py(py, e))
}

/// Write numpy arrays as a file of `format` through the format's library writer: one array
/// without file metadata through `Format::save` (what `convert` writes), several named arrays
/// or file metadata through `Format::save_arrays` (GVRS elements, FOLD arrays and metadata).
/// `many` takes the several-array writer even for one array (names kept exactly as given).
/// Refuses to replace an existing file unless `force`, and options the format does not honour.
#[pyfunction]
#[pyo3(signature = (format, path, arrays, *, attrs=None, metadata=None, force=false, tile=None, compress=None, many=false,
    vds=VdsOptions::default()))]
#[allow(clippy::too_many_arguments)]
fn _write(
    py: Python<'_>,
    format: &str,
    path: &Bound<'_, PyAny>,
    arrays: Vec<(Option<String>, Bound<'_, PyAny>)>,
    attrs: Option<&Bound<'_, PyAny>>,
    metadata: Option<&Bound<'_, PyAny>>,
    force: bool,
    tile: Option<(u32, u32)>,
    compress: Option<String>,
    many: bool,
    vds: VdsOptions,
) -> PyResult<()> {
    let path = PathBuf::from(fspath(path)?);
    let target = rasterpack::format_by_name(format)
        .ok_or_else(|| PyValueError::new_err(format!("rasterpack does not write {format:?} files")))?;
    let mut nds = Vec::with_capacity(arrays.len());
    for (name, array) in &arrays {
        let mut nd = to_ndarray(py, array)?;
        nd.name = name.clone();
        nds.push(nd);
    }
    if let (Some(attrs), [nd]) = (attrs, nds.as_mut_slice()) {
        nd.attrs = json_map(py, attrs, "attrs")?;
    }
    let metadata = match metadata {
        Some(m) => json_map(py, m, "metadata")?,
        None => serde_json::Map::new(),
    };
    let opts = WriteOptions {
        tile,
        compress,
        limits: Limits::default(),
        brick_size: vds.brick_size,
        margin: vds.margin,
        lods: vds.lods,
        value_range: vds.value_range,
        no_value: vds.no_value,
        axes: vds.axes,
        metadata: vds.metadata,
    };
    let written = py.allow_threads(|| {
        guarded(|| {
            if path.exists() && !force {
                return Err(Error::usage(format!(
                    "{} exists: pass force=True to replace it",
                    rasterpack_common::shown(&path)
                )));
            }
            match nds.as_slice() {
                [one] if !many && metadata.is_empty() => target.save(one, &path, &opts),
                _ => target.save_arrays(&nds, &metadata, &path, &opts),
            }
        })
    });
    written.map_err(|e| to_py(py, e))
}

/// The VDS writer's options (`convert`'s VDS flags), as `rasterpack._write_vds_options` packs
/// them: brick_size, margin, lods, value_range, no_value, axes and metadata in the CLI's text.
#[derive(Default, FromPyObject)]
struct VdsOptions {
    #[pyo3(item)]
    brick_size: Option<u32>,
    #[pyo3(item)]
    margin: Option<u32>,
    #[pyo3(item)]
    lods: Option<u32>,
    #[pyo3(item)]
    value_range: Option<(f64, f64)>,
    #[pyo3(item)]
    no_value: Option<f64>,
    #[pyo3(item)]
    axes: Vec<String>,
    #[pyo3(item)]
    metadata: Vec<String>,
}

/// Arrays as a Zarr v3 store, as `convert X.npy out.zarr` (one array) or `--all` (`group`)
/// writes it, through the CLI's Zarr writer (`rasterpack::zarr_out::write_arrays`).
#[pyfunction]
#[pyo3(signature = (path, arrays, *, group=false, chunks=None, shard=None, compress=None, force=false))]
#[allow(clippy::too_many_arguments)]
fn _write_zarr(
    py: Python<'_>,
    path: &Bound<'_, PyAny>,
    arrays: Vec<(Option<String>, Bound<'_, PyAny>)>,
    group: bool,
    chunks: Option<String>,
    shard: Option<String>,
    compress: Option<String>,
    force: bool,
) -> PyResult<()> {
    let path = PathBuf::from(fspath(path)?);
    let mut nds = Vec::with_capacity(arrays.len());
    for (name, array) in &arrays {
        let mut nd = to_ndarray(py, array)?;
        nd.name = name.clone();
        nds.push(nd);
    }
    let args = ConvertArgs {
        chunks,
        shard,
        compress,
        ..Default::default()
    };
    let written = py.allow_threads(|| {
        guarded(|| {
            let opts = rasterpack::zarr_out::options(&args, Limits::default())?;
            rasterpack::zarr_out::write_arrays(&path, force, &nds, group, opts)
        })
    });
    written.map_err(|e| to_py(py, e))
}

/// A numpy array (or anything `np.asarray` takes) as an `NdArray`: little-endian values in C
/// order, whatever the input's byte order and layout. (Not `np.ascontiguousarray`: it makes a
/// 0-d array 1-d.)
fn to_ndarray(py: Python<'_>, array: &Bound<'_, PyAny>) -> PyResult<NdArray> {
    let a = py.import("numpy")?.call_method1("asarray", (array,))?;
    let dtype_name: String = a.getattr("dtype")?.getattr("name")?.extract()?;
    let dtype = DType::from_name(&dtype_name)
        .ok_or_else(|| PyTypeError::new_err(format!("rasterpack stores no {dtype_name} arrays")))?;
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("order", "C")?;
    let le = a.call_method("astype", (dtype.npy_descr(),), Some(&kwargs))?;
    let shape: Vec<u64> = le.getattr("shape")?.extract()?;
    let bytes: Vec<u8> = le.call_method0("tobytes")?.extract()?;
    NdArray::new(dtype, shape, bytes).map_err(|e| to_py(py, e))
}

/// A dict of JSON values as a JSON object.
fn json_map(
    py: Python<'_>,
    value: &Bound<'_, PyAny>,
    what: &str,
) -> PyResult<serde_json::Map<String, serde_json::Value>> {
    let text: String = py.import("json")?.call_method1("dumps", (value,))?.extract()?;
    match serde_json::from_str(&text) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        _ => Err(PyTypeError::new_err(format!("{what} must be a dict of JSON values"))),
    }
}

/// The names of the formats rasterpack detects, in detection order.
#[pyfunction]
fn formats() -> Vec<&'static str> {
    rasterpack::formats().iter().map(|f| f.name()).collect()
}

/// The format of the file at `path` from its content, or None (for xarray's guess_can_open).
#[pyfunction]
fn detect(py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<Option<&'static str>> {
    let path = fspath(path)?;
    Ok(py.allow_threads(|| {
        guarded(|| {
            let input = rasterpack_common::Input::open(&path)?;
            Ok(rasterpack::detect(&input).ok().map(|f| f.name()))
        })
        .ok()
        .flatten()
    }))
}

#[pymodule]
fn _rasterpack(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<File>()?;
    m.add_class::<Array>()?;
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_function(wrap_pyfunction!(_validate, m)?)?;
    m.add_function(wrap_pyfunction!(inspect, m)?)?;
    m.add_function(wrap_pyfunction!(_convert, m)?)?;
    m.add_function(wrap_pyfunction!(_write, m)?)?;
    m.add_function(wrap_pyfunction!(_write_zarr, m)?)?;
    m.add_function(wrap_pyfunction!(formats, m)?)?;
    m.add_function(wrap_pyfunction!(detect, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
