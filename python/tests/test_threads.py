"""Reads from several threads at once: four threads reading every array of a file of each
format (whole arrays and slices, from one shared File) get exactly the single-thread values."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import rasterpack
from conftest import TESTDATA

FILES = [
    TESTDATA / "volp" / "temperature_4x32x32_int16.volp",
    TESTDATA / "gvrs" / "crafted_all_types.gvrs",
    TESTDATA / "udf" / "sample.udf",
    TESTDATA / "fold" / "sample.fold",
    TESTDATA / "vds" / "small_r32_zip.vds",
    TESTDATA / "vds" / "small_4d_r32_none_lod1.vds",
]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_four_threads_read_equal_values(path):
    f = rasterpack.open(path)
    arrays = [f.array(n) for n in f.arrays]
    want = [np.asarray(a).tobytes() for a in arrays]
    halves = [a[: max(1, a.shape[0] // 2)].tobytes() if a.ndim else None for a in arrays]
    start = threading.Barrier(4)

    def work(_):
        start.wait()  # all four read at the same moment
        got = []
        for _ in range(5):
            for i, a in enumerate(arrays):
                got.append((i, "whole", np.asarray(a).tobytes()))
                if a.ndim:
                    got.append((i, "half", a[: max(1, a.shape[0] // 2)].tobytes()))
        return got

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(work, range(4)))
    for got in results:
        for i, what, value in got:
            assert value == (want[i] if what == "whole" else halves[i]), (path.name, i, what)
