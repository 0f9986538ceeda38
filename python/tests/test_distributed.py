"""Dask distributed across processes: Files and Arrays pickle and reopen by path in workers."""

from __future__ import annotations

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
distributed = pytest.importorskip("dask.distributed")

import rasterpack
from conftest import TESTDATA

VDS = TESTDATA / "vds" / "small_4d_r32_none_lod1.vds"
GVRS = TESTDATA / "gvrs" / "crafted_all_types.gvrs"


def test_local_cluster_of_processes():
    cluster = distributed.LocalCluster(
        processes=True, n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None
    )
    try:
        with distributed.Client(cluster) as client:
            for path, var in [(VDS, "Amplitude"), (GVRS, "c")]:
                ds = xr.open_dataset(path, engine="rasterpack", chunks={})
                lazy = ds[var]
                assert lazy.chunks is not None
                whole = np.asarray(rasterpack.open(path)[var])
                # xarray skips NaN (GVRS fill) by default, as numpy's nan* reductions do.
                assert float(lazy.mean().compute()) == pytest.approx(float(np.nanmean(whole)), rel=1e-6)
                assert float(lazy.max().compute()) == float(np.nanmax(whole))
                part = lazy[..., 1:3].compute().values
                assert part.tobytes() == whole[..., 1:3].tobytes()
                # Work really ran in the worker processes.
                pids = set(client.run(lambda: __import__("os").getpid()).values())
                assert len(pids) == 2
            # An Array pickles to a worker and reads there.
            a = rasterpack.open(VDS).array()
            fut = client.submit(lambda arr: np.asarray(arr).sum(dtype="float64"), a)
            assert fut.result() == pytest.approx(np.asarray(a).sum(dtype="float64"))
    finally:
        cluster.close()
