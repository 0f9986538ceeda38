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
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from ._errors import (
    Error,
    Finding,
    InvalidFileError,
    Report,
    UnsupportedError,
    UsageError,
)
from ._rasterpack import Array, File, __version__, detect, formats, inspect, open
from ._rasterpack import _convert, _validate, _write, _write_zarr

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
    "write_vds",
    "write_volp",
    "write_zarr",
]


def validate(path: PathLike, strict: bool = False) -> Report:
    """Check every rule, checksum and payload of a file, as ``rasterpack validate`` does.

    Never raises for what the file holds: a broken file is a Report with ``valid`` False and
    its findings. A path that cannot be opened raises the matching ``OSError``.
    """
    return Report(_validate(path, strict))


def _shape_text(value: Any, what: str) -> Optional[str]:
    """A shape as ``convert --chunks/--shard`` takes it: ``"64x64x64"`` or a tuple of ints."""
    if value is None or isinstance(value, str):
        return value
    try:
        return "x".join(str(int(v)) for v in value)
    except TypeError:
        raise TypeError(f"{what} must be a str like '64x64' or a tuple of ints") from None


def _vds_options(
    brick_size: Optional[int],
    margin: Optional[int],
    lods: Optional[int],
    value_range: Optional[Tuple[float, float]],
    no_value: Optional[float],
    axis: Any,
    metadata: Any,
) -> Dict[str, Any]:
    """The VDS writer's flags (``convert --brick-size ... --metadata``) as the core takes them:
    ``axis`` a list of ``"NAME:UNIT:MIN:MAX"`` strings or (name, unit, min, max) tuples, dimension
    0 (the array's last axis) first; ``metadata`` a dict ``{"CATEGORY/NAME": value}`` or a list
    of ``"CATEGORY/NAME=VALUE"`` strings."""
    axes = []
    for a in axis or []:
        axes.append(a if isinstance(a, str) else ":".join(str(v) for v in a))
    if isinstance(metadata, Mapping):
        items = [f"{k}={v}" for k, v in metadata.items()]
    else:
        items = list(metadata or [])
    return {
        "brick_size": brick_size,
        "margin": margin,
        "lods": lods,
        "value_range": tuple(value_range) if value_range is not None else None,
        "no_value": no_value,
        "axes": axes,
        "metadata": items,
    }


def convert(
    src: PathLike,
    dst: PathLike,
    *,
    force: bool = False,
    allow_expansion: bool = False,
    to: Optional[str] = None,
    element: Optional[str] = None,
    physical: bool = False,
    codes: bool = False,
    region: Optional[str] = None,
    window: Optional[str] = None,
    box: Optional[str] = None,
    levels: Optional[str] = None,
    squeeze: bool = False,
    expand_dims: bool = False,
    lod: Optional[int] = None,
    tile: Union[str, Tuple[int, int], None] = None,
    compress: Optional[str] = None,
    chunks: Union[str, Tuple[int, ...], None] = None,
    shard: Union[str, Tuple[int, ...], None] = None,
    all: bool = False,
    brick_size: Optional[int] = None,
    margin: Optional[int] = None,
    lods: Optional[int] = None,
    value_range: Optional[Tuple[float, float]] = None,
    no_value: Optional[float] = None,
    axis: Any = None,
    metadata: Any = None,
    channel: Any = None,
) -> None:
    """``rasterpack convert SRC DST`` with every flag of the CLI as a keyword (``box`` is
    ``--box``, ``axis`` the repeated ``--axis``, ``metadata`` the repeated ``--metadata``,
    ``channel`` the repeated ``--channel NAME=PATH[:ELEMENT]``, also as a dict ``{name: path}``;
    ``chunks``/``shard`` also take tuples). The CLI's rules apply: a flag the output format
    does not take is refused. Ctrl-C stops it within a second (KeyboardInterrupt), leaving no
    output."""
    _convert(
        src,
        dst,
        force=force,
        allow_expansion=allow_expansion,
        to=to,
        element=element,
        physical=physical,
        codes=codes,
        region=region,
        window=window,
        box=box,
        levels=levels,
        squeeze=squeeze,
        expand_dims=expand_dims,
        lod=lod,
        tile=tile,
        compress=compress,
        chunks=_shape_text(chunks, "chunks"),
        shard=_shape_text(shard, "shard"),
        all=all,
        channel=[f"{k}={os.fspath(v)}" for k, v in channel.items()] if isinstance(channel, Mapping) else list(channel or []),
        vds=_vds_options(brick_size, margin, lods, value_range, no_value, axis, metadata),
    )


def _named(arrays: Any, name: Optional[str], writer: str) -> List[Tuple[Optional[str], Any]]:
    """One array (named ``name``) or a mapping of names to arrays, as (name, array) pairs."""
    if isinstance(arrays, Mapping):
        if name is not None:
            raise TypeError(f"{writer}: name= names a single array; a dict names its arrays by its keys")
        if not arrays:
            raise ValueError(f"{writer}: the dict holds no array")
        pairs = []
        for key, value in arrays.items():
            if not isinstance(key, str):
                raise TypeError(f"{writer}: array names must be str, not {type(key).__name__}")
            pairs.append((key, value))
        return pairs
    return [(name, arrays)]


def write_npy(path: PathLike, array: Any, *, force: bool = False) -> None:
    """Write a numpy array as a ``.npy`` file (little-endian, C order)."""
    _write("npy", path, [(None, array)], force=force)


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
    _write("volp", path, [(None, array)], attrs=dict(attrs) if attrs else None, compress=compress, force=force)


def write_gvrs(
    path: PathLike,
    arrays: Union[Any, Mapping[str, Any]],
    *,
    name: Optional[str] = None,
    tile: Optional[Tuple[int, int]] = None,
    compress: Optional[str] = None,
    attrs: Optional[Mapping[str, Any]] = None,
    force: bool = False,
) -> None:
    """Write 2-D grids as a GVRS file; ``tile`` and ``compress`` as ``convert --tile/--compress``
    take them.

    ``arrays`` is one 2-D array (one element, named ``name``, else after the array or ``z``,
    as ``convert`` names it) or a dict ``{"elev": a, "slope": b}``: one element per entry, in
    the dict's order, all of one shape (int32, int16 or float32 each); the names must be GVRS
    identifiers (an ASCII letter, then letters, digits or ``_``, at most 32).
    """
    pairs = _named(arrays, name, "write_gvrs")
    if attrs and len(pairs) > 1:
        raise TypeError("write_gvrs: attrs= describes a single array")
    many = isinstance(arrays, Mapping)
    _write(
        "gvrs",
        path,
        pairs,
        attrs=dict(attrs) if attrs else None,
        tile=tile,
        compress=compress,
        force=force,
        # A dict's names are the elements' names exactly: through the several-array writer
        # even for one entry (which refuses a name GVRS cannot hold instead of changing it).
        many=many,
    )


def write_udf(path: PathLike, array: Any, *, name: Optional[str] = None, force: bool = False) -> None:
    """Write an array as a UDF file holding one table."""
    _write("udf", path, [(name, array)], force=force)


def write_fold(
    path: PathLike,
    arrays: Union[Any, Mapping[str, Any]],
    *,
    name: Optional[str] = None,
    metadata: Optional[Mapping[str, Any]] = None,
    compress: Optional[str] = None,
    force: bool = False,
) -> None:
    """Write arrays and metadata as a FOLD file, as ``convert --to fold`` writes one array;
    ``compress`` is ``"zstd"`` or ``"none"``, optionally with ``+rs16``/``+rs32``/``+rs64``
    (Reed-Solomon ECC).

    ``arrays`` is one array (named ``name``, else ``arr_0``) or a dict ``{"name": array, ...}``
    of any shapes and dtypes, stored in one NPZ chunk in the dict's order; they read back as
    ``File["nuclear_arrays/NAME"]``. ``metadata`` (a dict of JSON values) becomes the file's
    metadata, beside the ``writer`` member rasterpack sets.
    """
    pairs = _named(arrays, name, "write_fold")
    if len(pairs) == 1 and pairs[0][0] is None and metadata:
        pairs = [("arr_0", pairs[0][1])]
    _write(
        "fold",
        path,
        pairs,
        metadata=dict(metadata) if metadata else None,
        compress=compress,
        force=force,
        many=isinstance(arrays, Mapping),
    )


def write_vds(
    path: PathLike,
    array: Union[Any, Mapping[str, Any]],
    *,
    name: Optional[str] = None,
    compress: Optional[str] = None,
    brick_size: Optional[int] = None,
    margin: Optional[int] = None,
    lods: Optional[int] = None,
    value_range: Optional[Tuple[float, float]] = None,
    no_value: Optional[float] = None,
    axis: Any = None,
    metadata: Any = None,
    force: bool = False,
) -> None:
    """Write an array (1-D to 4-D, numpy axis order: the last axis is VDS dimension 0) as a
    single-file OpenVDS ``.vds``, as ``convert --to vds`` writes one, with the VDS writer's
    flags as keywords: ``compress`` (``"none"``, ``"zip"``, ...), ``brick_size``, ``margin``,
    ``lods``, ``value_range=(min, max)``, ``no_value``, ``axis`` (one ``"NAME:UNIT:MIN:MAX"``
    or tuple per dimension, dimension 0 first) and ``metadata`` (``{"CATEGORY/NAME": value}``).

    ``array`` may be a dict ``{"amp": a, "vel": b, ...}``: one channel per entry, named by its
    key, the first the primary channel (channel 0), as ``convert --channel NAME=PATH`` writes
    them (the same library writer); every array must have the first's shape (a ValueError
    names both channels otherwise, before anything is written) and a dtype VDS stores, each
    channel its own format. ``value_range`` and ``no_value`` are the primary channel's.
    """
    pairs = _named(array, name, "write_vds")
    _write(
        "vds",
        path,
        pairs,
        compress=compress,
        force=force,
        # Several channels go through the several-array writer (Format::write_arrays).
        many=len(pairs) > 1,
        vds=_vds_options(brick_size, margin, lods, value_range, no_value, axis, metadata),
    )


def write_zarr(
    path: PathLike,
    arrays: Union[Any, Mapping[str, Any]],
    *,
    chunks: Union[str, Tuple[int, ...], None] = None,
    shard: Union[str, Tuple[int, ...], None] = None,
    compress: Optional[str] = None,
    force: bool = False,
) -> None:
    """Write a Zarr v3 store (a directory) as ``convert X.npy out.zarr`` writes one: one array
    at the root, or for a dict ``{"name": array, ...}`` a group of one array per entry (as
    ``convert --all`` writes them). ``chunks`` and ``shard`` as ``--chunks``/``--shard`` take
    them (``"64x64"`` or a tuple; default chunks of about 4 MiB), ``compress`` as ``--compress``
    for Zarr output. Written into a temporary directory beside ``path``, renamed when done."""
    pairs = _named(arrays, None, "write_zarr")
    _write_zarr(
        path,
        pairs,
        group=isinstance(arrays, Mapping),
        chunks=_shape_text(chunks, "chunks"),
        shard=_shape_text(shard, "shard"),
        compress=compress,
        force=force,
    )
