"""rasterpack: read, validate and convert VOLP, GVRS, UDF, FOLD, OpenVDS and .npy files.

>>> import rasterpack, numpy as np
>>> f = rasterpack.open("testdata/volp/cloud_2x8x8_float32.volp")
>>> a = f.array()
>>> a.shape, a.dtype
((2, 8, 8), dtype('float32'))
>>> np.asarray(a)[1, 2, 3] == a[1, 2, 3]
True

Every call runs the same library code as the ``rasterpack`` CLI: values equal
``rasterpack convert ... x.npy``, verdicts equal ``rasterpack validate``.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from ._errors import (
    Error,
    Finding,
    InvalidFileError,
    Report,
    UnsupportedError,
    UsageError,
)
from ._rasterpack import Array, File, __version__, convert, detect, formats, inspect, open
from ._rasterpack import _validate, _write

PathLike = Union[str, "os.PathLike[str]"]

__all__ = [
    "Array",
    "Error",
    "File",
    "Finding",
    "InvalidFileError",
    "Report",
    "UnsupportedError",
    "UsageError",
    "__version__",
    "convert",
    "detect",
    "formats",
    "inspect",
    "open",
    "validate",
    "write_fold",
    "write_gvrs",
    "write_npy",
    "write_udf",
    "write_volp",
]


def validate(path: PathLike, strict: bool = False) -> Report:
    """Check every rule, checksum and payload of a file, as ``rasterpack validate`` does.

    Never raises for what the file holds: a broken file is a Report with ``valid`` False and
    its findings. A path that cannot be opened raises the matching ``OSError``.
    """
    return Report(_validate(path, strict))


def write_npy(path: PathLike, array: Any, *, force: bool = False) -> None:
    """Write a numpy array as a ``.npy`` file (little-endian, C order)."""
    _write("npy", path, array, force=force)


def write_volp(
    path: PathLike,
    array: Any,
    *,
    compress: Optional[str] = None,
    attrs: Optional[Mapping[str, Any]] = None,
    force: bool = False,
) -> None:
    """Write a 3-D array (levels, y, x) as a VOLP file; ``compress`` as ``convert --compress``
    takes it (``"zstd"`` or ``"zstd:LEVEL"``); ``attrs`` as VOLP metadata (scale, offset...)."""
    _write("volp", path, array, attrs=dict(attrs) if attrs else None, compress=compress, force=force)


def write_gvrs(
    path: PathLike,
    array: Any,
    *,
    name: Optional[str] = None,
    tile: Optional[Tuple[int, int]] = None,
    compress: Optional[str] = None,
    attrs: Optional[Mapping[str, Any]] = None,
    force: bool = False,
) -> None:
    """Write a 2-D grid as a GVRS file with one element ``name``; ``tile`` and ``compress`` as
    ``convert --tile/--compress`` take them. A 3-D array writes one element per level, as
    ``convert`` does with a VOLP source."""
    _write("gvrs", path, array, name=name, attrs=dict(attrs) if attrs else None, tile=tile, compress=compress, force=force)


def write_udf(path: PathLike, array: Any, *, name: Optional[str] = None, force: bool = False) -> None:
    """Write an array as a UDF file holding one table."""
    _write("udf", path, array, name=name, force=force)


def write_fold(
    path: PathLike,
    array: Any,
    *,
    name: Optional[str] = None,
    compress: Optional[str] = None,
    force: bool = False,
) -> None:
    """Write an array as a FOLD file, as ``convert --to fold`` does; ``compress`` is ``"zstd"``
    or ``"none"``, optionally with ``+rs16``/``+rs32``/``+rs64`` (Reed-Solomon ECC)."""
    _write("fold", path, array, name=name, compress=compress, force=force)
