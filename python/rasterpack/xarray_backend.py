"""The xarray backend ``engine="rasterpack"``: every format rasterpack reads, lazily.

``xr.open_dataset(path, engine="rasterpack")`` makes one data variable per array of the file
(``File.arrays``; an unnamed array is called ``data``), backed by a lazy array that reads only
what is indexed (through ``Array``'s region reads). Dimensions are named from the file:

- VDS: the axis names reversed into numpy order (e.g. ``Inline, Crossline, Sample``), with
  coordinates from each axis' coordinate range; channels with several components get a last
  ``component`` dimension.
- GVRS: ``rows, columns`` with ``y``/``x`` coordinates from the file's raster-to-model transform.
- VOLP: ``level, y, x`` (``level`` coordinates from the metadata's ``levels`` when it has them).
- FOLD, UDF, .npy: ``dim_0, dim_1, ...`` (prefixed with the variable's name where two arrays
  disagree on a dimension's size).

``chunks={}`` gives dask arrays on the file's own tiles/bricks (``preferred_chunks``).
"""

from __future__ import annotations

import os
import threading
from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np

try:
    from xarray.backends import BackendArray, BackendEntrypoint
    from xarray.core import indexing
except ImportError:  # pragma: no cover - xarray is optional
    raise ImportError("rasterpack's xarray backend needs xarray: pip install xarray") from None

import xarray as xr

import rasterpack

_local = threading.local()


def _open_cached(path: str) -> "rasterpack.File":
    """One open File per path, process and thread: reopened after unpickling in a worker."""
    files = getattr(_local, "files", None)
    if files is None or getattr(_local, "pid", None) != os.getpid():
        files = _local.files = {}
        _local.pid = os.getpid()
    f = files.get(path)
    if f is None or f.closed:
        f = files[path] = rasterpack.open(path)
    return f


class RasterpackBackendArray(BackendArray):
    """A lazy array of one rasterpack array: indexing reads only the box it needs."""

    def __init__(self, path: str, name: Optional[str], shape: Tuple[int, ...], dtype: np.dtype):
        self.path = path
        self.name = name
        self.shape = shape
        self.dtype = dtype

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.BASIC, self._getitem
        )

    def _getitem(self, key: Tuple[Any, ...]) -> np.ndarray:
        array = _open_cached(self.path).array(self.name)
        return np.asarray(array[key])


def _scalar_attrs(attrs: Dict[str, Any]) -> Dict[str, Any]:
    """The attributes xarray can show and most writers keep: scalars and flat lists of them."""
    out: Dict[str, Any] = {}
    for key, value in attrs.items():
        if isinstance(value, (str, int, float, bool)):
            out[key] = value
        elif isinstance(value, list) and value and all(isinstance(v, (int, float)) for v in value):
            out[key] = list(value)
    return out


def _vds_dims(summary: Dict[str, Any], ndim: int) -> Tuple[List[str], Dict[str, Any]]:
    axes = list(reversed(summary.get("axes") or []))
    names = [str(a.get("name") or f"dim_{i}") for i, a in enumerate(axes)]
    coords: Dict[str, Any] = {}
    for axis, name in zip(axes, names):
        n = int(axis.get("num_samples", 0))
        lo, hi = axis.get("coordinate_min"), axis.get("coordinate_max")
        if n > 0 and isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
            attrs = {"unit": axis["unit"]} if axis.get("unit") else {}
            coords[name] = xr.Variable((name,), np.linspace(lo, hi, n), attrs)
    if ndim == len(names) + 1:
        names.append("component")
    return names, coords


def _gvrs_dims(summary: Dict[str, Any]) -> Tuple[List[str], Dict[str, Any]]:
    dims = ["rows", "columns"]
    coords: Dict[str, Any] = {}
    cs = summary.get("coordinate_system") or {}
    r2m = cs.get("r2m_00_01_02_10_11_12")
    rows, cols = summary.get("rows"), summary.get("cols")
    # Only an axis-aligned transform gives one coordinate per row and per column.
    if r2m and len(r2m) == 6 and r2m[1] == 0 and r2m[3] == 0 and rows and cols:
        coords["x"] = xr.Variable(("columns",), r2m[0] * np.arange(cols) + r2m[2])
        coords["y"] = xr.Variable(("rows",), r2m[4] * np.arange(rows) + r2m[5])
    return dims, coords


def _volp_dims(summary: Dict[str, Any], shape: Tuple[int, ...]) -> Tuple[List[str], Dict[str, Any]]:
    coords: Dict[str, Any] = {}
    levels = (summary.get("metadata") or {}).get("levels")
    if isinstance(levels, list) and len(shape) == 3 and len(levels) == shape[0]:
        coords["level"] = xr.Variable(("level",), np.asarray(levels))
    return ["level", "y", "x"], coords


def open_rasterpack_dataset(path: str, drop_variables: Iterable[str] = ()) -> xr.Dataset:
    """The Dataset for ``path`` (what ``engine="rasterpack"`` returns)."""
    f = rasterpack.open(path)
    summary = f.attrs
    fmt = f.format
    drop = set(drop_variables or ())
    variables: Dict[str, xr.Variable] = {}
    coords: Dict[str, Any] = {}
    plain: List[Tuple[str, Tuple[int, ...]]] = []
    for name in f.arrays:
        a = f.array(name)
        var = name if name is not None else "data"
        if var in drop:
            continue
        shape = tuple(int(n) for n in a.shape)
        if fmt == "vds":
            dims, extra = _vds_dims(summary, len(shape))
        elif fmt == "gvrs" and len(shape) == 2:
            dims, extra = _gvrs_dims(summary)
        elif fmt == "volp" and len(shape) == 3:
            dims, extra = _volp_dims(summary, shape)
        else:
            dims, extra = [f"dim_{i}" for i in range(len(shape))], {}
            plain.append((var, shape))
        if len(dims) != len(shape):
            dims, extra = [f"dim_{i}" for i in range(len(shape))], {}
        coords.update(extra)
        lazy = indexing.LazilyIndexedArray(RasterpackBackendArray(path, name, shape, np.dtype(a.dtype)))
        v = xr.Variable(tuple(dims), lazy, _scalar_attrs(a.attrs or {}))
        v.encoding["preferred_chunks"] = dict(zip(dims, (int(c) for c in a.chunks)))
        v.encoding["chunksizes"] = tuple(int(c) for c in a.chunks)
        variables[var] = v
    # dim_0.. are shared only where every plain array agrees on their sizes.
    sizes: Dict[str, set] = {}
    for _, shape in plain:
        for i, n in enumerate(shape):
            sizes.setdefault(f"dim_{i}", set()).add(n)
    for var, shape in plain:
        if any(len(sizes[f"dim_{i}"]) > 1 for i in range(len(shape))):
            old = variables[var]
            dims = tuple(f"{var}_dim_{i}" for i in range(len(shape)))
            new = xr.Variable(dims, old._data, old.attrs)
            new.encoding["preferred_chunks"] = dict(zip(dims, old.encoding["preferred_chunks"].values()))
            variables[var] = new
    attrs = {"format": fmt, "source": str(path)}
    attrs.update({f"rasterpack_{k}": v for k, v in _scalar_attrs(summary).items()})
    ds = xr.Dataset(variables, coords=coords, attrs=attrs)
    ds.set_close(f.close)
    return ds


class RasterpackBackendEntrypoint(BackendEntrypoint):
    """``xr.open_dataset(path, engine="rasterpack")`` for VOLP, GVRS, UDF, FOLD, VDS and .npy."""

    description = "Read VOLP, GVRS, UDF, FOLD, OpenVDS and .npy files with rasterpack"
    url = "https://github.com/rasterpack/rasterpack"
    open_dataset_parameters = ("filename_or_obj", "drop_variables")

    def open_dataset(self, filename_or_obj: Any, *, drop_variables: Any = None) -> xr.Dataset:
        return open_rasterpack_dataset(os.fspath(filename_or_obj), drop_variables or ())

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        """By content: the file (or VDS directory) is one of the formats rasterpack detects.
        Zarr stores are left to xarray's own zarr engine (they open with open_rasterpack_dataset
        or engine="rasterpack" when asked for by name)."""
        try:
            path = os.fspath(filename_or_obj)
        except TypeError:
            return False
        try:
            return rasterpack.detect(path) not in (None, "zarr")
        except Exception:
            return False
