"""Type stubs of the compiled core (rasterpack._rasterpack)."""

import os
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np
import numpy.typing as npt

_Path = Union[str, "os.PathLike[str]"]
_Index = Union[int, slice, "ellipsis", None, Tuple[Union[int, slice, "ellipsis", None], ...]]

__version__: str

class File:
    """An open file of any format rasterpack reads (see :func:`open`)."""

    @property
    def format(self) -> str:
        """``"volp"``, ``"gvrs"``, ``"udf"``, ``"fold"``, ``"vds"`` or ``"npy"``."""
    @property
    def path(self) -> str: ...
    @property
    def arrays(self) -> List[Optional[str]]:
        """Array names as ``convert --element`` takes them (None: the one unnamed array).

        Listed when first asked for, then kept: a FOLD listing verifies every NPZ0 chunk,
        which ``File[name]`` and its read do not need."""
    @property
    def attrs(self) -> Dict[str, Any]:
        """The file's metadata: ``inspect --json``'s ``summary``."""
    @property
    def closed(self) -> bool: ...
    def array(self, name: Optional[str] = None) -> Array:
        """The array ``convert`` takes by default, or the one named (KeyError if none).

        Described without the listing where the format can (FOLD: from the member's ``.npy``
        header); nothing is verified until it is read, and the read verifies what it decodes."""
    def __getitem__(self, name: str) -> Array: ...
    def __contains__(self, name: str) -> bool: ...
    def __len__(self) -> int: ...
    def close(self) -> None: ...
    def __enter__(self) -> File: ...
    def __exit__(self, *args: Any) -> bool: ...

class Array:
    """One array of a File; values are read when indexed, read, or converted by numpy."""

    @property
    def name(self) -> Optional[str]: ...
    @property
    def file(self) -> File: ...
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def ndim(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def dtype(self) -> np.dtype[Any]: ...
    @property
    def chunks(self) -> Tuple[int, ...]:
        """The file's own tile/brick shape in numpy axis order (the shape when unblocked)."""
    @property
    def attrs(self) -> Dict[str, Any]: ...
    def __len__(self) -> int: ...
    def __getitem__(self, key: _Index) -> Any: ...
    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> npt.NDArray[Any]: ...
    def read(
        self,
        region: Union[str, _Index, None] = None,
        physical: bool = False,
        lod: int = 0,
        codes: bool = False,
    ) -> npt.NDArray[Any]:
        """Read with ``convert``'s meanings (``region`` as ``--region`` takes it)."""
    def read_into(
        self,
        out: npt.NDArray[Any],
        region: Union[str, _Index, None] = None,
        physical: bool = False,
        lod: int = 0,
        codes: bool = False,
    ) -> npt.NDArray[Any]:
        """``read`` into ``out`` (returned) instead of a new array: ``out`` must be a writeable
        C-contiguous ndarray of exactly the shape and dtype ``read`` would return (TypeError
        for another dtype, ValueError for another shape, non-contiguous or read-only). Reusing
        one buffer spares a new array's allocation and page faults per read. If the read fails,
        ``out`` may hold part of the values."""

def open(path: _Path) -> File:
    """Open a file (or VDS directory) of any format rasterpack reads, detected from content.

    Reads the headers and index only; arrays are listed (``File.arrays``) when asked for."""

def inspect(path: _Path, all: bool = False) -> Dict[str, Any]:
    """``rasterpack inspect --json``'s entry for the file."""

def _convert(
    src: _Path,
    dst: _Path,
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
    lod: Optional[int] = None,
    tile: Union[str, Tuple[int, int], None] = None,
    compress: Optional[str] = None,
    squeeze: bool = False,
    expand_dims: bool = False,
    chunks: Optional[str] = None,
    shard: Optional[str] = None,
    all: bool = False,
    channel: List[str] = ...,
    vds: Dict[str, Any] = ...,
) -> None:
    """``rasterpack convert SRC DST`` (see :func:`rasterpack.convert`, which packs the VDS
    flags into ``vds``)."""

def formats() -> List[str]:
    """The formats rasterpack detects, in detection order."""

def detect(path: _Path) -> Optional[str]:
    """The format of the file from its content, or None."""

def _validate(path: _Path, strict: bool = False) -> Dict[str, Any]: ...
def _write(
    format: str,
    path: _Path,
    arrays: List[Tuple[Optional[str], Any]],
    *,
    attrs: Optional[Dict[str, Any]] = None,
    metadata: Optional[Dict[str, Any]] = None,
    force: bool = False,
    tile: Optional[Tuple[int, int]] = None,
    compress: Optional[str] = None,
    many: bool = False,
    vds: Dict[str, Any] = ...,
) -> None: ...
def _write_zarr(
    path: _Path,
    arrays: List[Tuple[Optional[str], Any]],
    *,
    group: bool = False,
    chunks: Optional[str] = None,
    shard: Optional[str] = None,
    compress: Optional[str] = None,
    force: bool = False,
) -> None: ...
