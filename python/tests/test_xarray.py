"""The xarray backend: lazy, named dimensions, coordinates, attributes, preferred chunks."""

from __future__ import annotations

import numpy as np
import pytest

xr = pytest.importorskip("xarray")

import rasterpack
from conftest import TESTDATA, data_inputs, ids
from rasterpack import xarray_backend

VDS = TESTDATA / "vds" / "small_4d_r32_none_lod1.vds"
GVRS = TESTDATA / "gvrs" / "crafted_all_types.gvrs"
VOLP = TESTDATA / "volp" / "temperature_4x32x32_int16.volp"

READABLE = [p for p in data_inputs() if "invalid" not in p.name]


@pytest.mark.parametrize("path", READABLE, ids=ids(READABLE))
def test_every_format_opens_and_equals_the_api(path):
    ds = xr.open_dataset(path, engine="rasterpack")
    f = rasterpack.open(path)
    assert list(ds.data_vars) == [n if n is not None else "data" for n in f.arrays]
    for name in f.arrays:
        var = ds[name if name is not None else "data"]
        assert var.values.tobytes() == np.asarray(f.array(name)).tobytes()
    ds.close()


def test_lazy_until_indexed(monkeypatch):
    calls = []
    real = xarray_backend.RasterpackBackendArray._getitem

    def spy(self, key):
        calls.append(key)
        return real(self, key)

    monkeypatch.setattr(xarray_backend.RasterpackBackendArray, "_getitem", spy)
    ds = xr.open_dataset(VDS, engine="rasterpack")
    assert calls == []
    part = ds["Amplitude"].isel({ds["Amplitude"].dims[0]: 1})[:2].values
    assert len(calls) == 1
    assert np.array_equal(part, np.asarray(rasterpack.open(VDS).array())[1, :2])


def test_named_dimensions_and_coordinates():
    vds = xr.open_dataset(TESTDATA / "vds" / "small_r32_zip.vds", engine="rasterpack")
    assert vds["Amplitude"].dims == ("Inline", "Crossline", "Sample")
    axes = {a["name"]: a for a in rasterpack.open(TESTDATA / "vds" / "small_r32_zip.vds").attrs["axes"]}
    assert float(vds["Sample"][-1]) == axes["Sample"]["coordinate_max"]
    g = xr.open_dataset(GVRS, engine="rasterpack")
    assert g["a"].dims == ("rows", "columns")
    cs = rasterpack.open(GVRS).attrs["coordinate_system"]
    # Cell (row, col) sits at model (x0 + col*dx, y0 + row*dy) for this axis-aligned file.
    assert float(g["x"][0]) == cs["x0"] and float(g["x"][1]) == cs["x0"] + cs["cell_size_x"]
    assert float(g["y"][0]) == cs["y0"] and float(g["y"][1]) == cs["y0"] + cs["cell_size_y"]
    assert g["c"].attrs["unit"] is not None and g.attrs["format"] == "gvrs"
    v = xr.open_dataset(VOLP, engine="rasterpack")
    assert v["data"].dims == ("level", "y", "x")
    assert list(v["level"].values) == rasterpack.open(VOLP).attrs["metadata"]["levels"]
    u = xr.open_dataset(TESTDATA / "fold" / "sample.fold", engine="rasterpack")
    assert u["nuclear_arrays/grid"].dims == ("nuclear_arrays/grid_dim_0", "nuclear_arrays/grid_dim_1")


def test_preferred_chunks_follow_the_file():
    pytest.importorskip("dask")
    ds = xr.open_dataset(VDS, engine="rasterpack", chunks={})
    a = rasterpack.open(VDS).array()
    assert ds["Amplitude"].data.chunksize == tuple(min(c, n) for c, n in zip(a.chunks, a.shape))
    assert float(ds["Amplitude"].mean()) == pytest.approx(float(np.asarray(a).mean()), rel=1e-6)
    g = xr.open_dataset(GVRS, engine="rasterpack", chunks={})
    assert g["a"].data.chunksize == (4, 5)


def test_guess_can_open_by_content(tmp_path):
    entry = xarray_backend.RasterpackBackendEntrypoint()
    for p in READABLE:
        assert entry.guess_can_open(p), p
    disguised = tmp_path / "data.nc"
    disguised.write_bytes(GVRS.read_bytes())
    assert entry.guess_can_open(disguised)
    (tmp_path / "x.volp").write_text("not a volume")
    assert not entry.guess_can_open(tmp_path / "x.volp")
    assert xr.open_dataset(disguised)["a"].shape == (7, 9)
    # A Zarr store is rasterpack's too, but the guess leaves it to xarray's zarr engine.
    store = tmp_path / "s.zarr"
    store.mkdir()
    (store / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group", "attributes": {}}')
    assert rasterpack.detect(store) == "zarr"
    assert not entry.guess_can_open(store)
