"""rasterpack's exception classes, findings and reports (pure Python: the compiled core builds
its exceptions through :func:`_from_library`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional


@dataclass(frozen=True)
class Finding:
    """One finding of ``validate`` (or the error that stopped a read), as the CLI reports it."""

    severity: str
    """``"error"``, ``"warning"`` or ``"info"``."""
    code: str
    """Stable machine code, e.g. ``"volp.magic"``."""
    offset: Optional[int]
    """Byte offset in the file the finding is about, when there is one."""
    message: str
    """What is wrong, for people."""

    def to_dict(self) -> Dict[str, Any]:
        """The finding as the ``--json`` document writes it."""
        return {"severity": self.severity, "code": self.code, "offset": self.offset, "message": self.message}


class Error(Exception):
    """Base of every error rasterpack raises about a file's content or a request.

    ``code`` is the library's stable error code, ``offset`` the byte offset (or None) and
    ``kind`` one of ``invalid``, ``truncated``, ``limit_exceeded``, ``unsupported``, ``usage``.
    """

    def __init__(
        self,
        text: str,
        code: str = "error",
        offset: Optional[int] = None,
        kind: str = "invalid",
        message: Optional[str] = None,
    ):
        super().__init__(text)
        self.code = code
        self.offset = offset
        self.kind = kind
        self.message = text if message is None else message
        """The message alone (``str(e)`` adds the offset and code, as the CLI prints it)."""

    def __reduce__(self):  # keep the attributes across processes (Dask workers)
        return (type(self), (str(self), self.code, self.offset, self.kind, self.message))


class InvalidFileError(Error, ValueError):
    """The file breaks a rule of its format, is truncated, or asks for more than the limits
    allow (the CLI's exit code 1). ``findings`` lists what was found."""

    @property
    def findings(self) -> List[Finding]:
        return [Finding("error", self.code, self.offset, self.message)]


class UnsupportedError(Error, NotImplementedError):
    """The file uses a feature rasterpack does not implement (the CLI's exit code 3)."""


class UsageError(Error, ValueError):
    """A request the file cannot answer: an option the format does not honour, a bad region."""


# std::io::ErrorKind names (as the library keeps them) whose OSError subclass Python picks from
# an errno: used when the OS gave no errno (e.g. an output path that is a directory).
_IO_KIND_ERRNO = {
    "NotFound": "ENOENT",
    "PermissionDenied": "EACCES",
    "IsADirectory": "EISDIR",
    "NotADirectory": "ENOTDIR",
    "AlreadyExists": "EEXIST",
    "BrokenPipe": "EPIPE",
    "TimedOut": "ETIMEDOUT",
    "Interrupted": "EINTR",
    "ConnectionRefused": "ECONNREFUSED",
    "ConnectionReset": "ECONNRESET",
    "ConnectionAborted": "ECONNABORTED",
}


# Object-store errors (a URL's object or prefix) and the OSError subclass a local path's gives.
_STORE_CODES = {
    "store.not_found": FileNotFoundError,
    "store.permission_denied": PermissionError,
}


def _os_error(text: str, os_kind: Optional[str], os_errno: Optional[int], filename: Optional[str]) -> OSError:
    """The OSError for an I/O error: ``OSError(errno, ...)`` makes the matching subclass
    (FileNotFoundError, PermissionError, IsADirectoryError, ...) from the errno, as ``open()``
    does; the library's message (what was being done, and the OS's words) is the strerror."""
    import errno as _errno

    number = os_errno
    if number is None and os_kind in _IO_KIND_ERRNO:
        number = getattr(_errno, _IO_KIND_ERRNO[os_kind], None)
    if number is None:
        return OSError(text)
    if filename is None:
        return OSError(number, text)
    return OSError(number, text, filename)


def _from_library(
    kind: str,
    code: str,
    offset: Optional[int],
    message: str,
    text: str,
    os_kind: Optional[str] = None,
    os_errno: Optional[int] = None,
    filename: Optional[str] = None,
) -> BaseException:
    """The exception for a library error (called by the compiled core)."""
    if code == "internal.panic":
        return Error(text, code, offset, kind, message)
    if kind == "io":
        # An object store's answers have no errno: the one open() would raise, from the code.
        if code in _STORE_CODES and os_kind is None and os_errno is None:
            return _STORE_CODES[code](text)
        return _os_error(text, os_kind, os_errno, filename)
    if kind == "unsupported":
        return UnsupportedError(text, code, offset, kind, message)
    if kind == "usage":
        return UsageError(text, code, offset, kind, message)
    return InvalidFileError(text, code, offset, kind, message)


class Report:
    """What ``rasterpack validate`` says about one file.

    ``valid`` is the verdict, ``findings`` every finding in order, ``exit_code`` the CLI's exit
    code for it (0 valid, 1 invalid, 3 unsupported), ``format`` the detected format (or None).
    """

    def __init__(self, entry: Dict[str, Any]):
        self._entry = entry
        self.path: str = entry["path"]
        self.format: Optional[str] = entry["format"]
        self.valid: bool = bool(entry.get("valid", False))
        self.unsupported: bool = bool(entry["unsupported"])
        self.exit_code: int = int(entry["exit_code"])
        self.findings: List[Finding] = [
            Finding(f["severity"], f["code"], f["offset"], f["message"]) for f in entry["findings"]
        ]
        self.findings_omitted: List[Dict[str, Any]] = entry.get("findings_omitted", [])
        """Findings past the per-code cap, counted: code, severity, count."""
        self.summary: Dict[str, Any] = entry.get("summary", {})

    def to_dict(self) -> Dict[str, Any]:
        """The file's entry of ``rasterpack validate --json`` (the same document)."""
        import copy

        return copy.deepcopy(self._entry)

    def __bool__(self) -> bool:
        return self.valid

    def __repr__(self) -> str:
        verdict = "valid" if self.valid else ("unsupported" if self.unsupported else "invalid")
        return f"<rasterpack.Report {self.path!r} {self.format} {verdict}, {len(self.findings)} findings>"


def _open_array(path: str, name: Optional[str]):
    """Unpickle an Array: reopen its file and take the array by name."""
    from . import open as _open

    return _open(path).array(name)
