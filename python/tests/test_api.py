"""The Python API over testdata/: indexing, read options, exceptions, pickling, threads, writers,
convert, context managers."""

from __future__ import annotations

import os
import pickle
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import rasterpack
from conftest import TESTDATA, run_cli

VDS = TESTDATA / "vds" / "small_r32_zip.vds"
VDS4 = TESTDATA / "vds" / "small_4d_r32_none_lod1.vds"
GVRS = TESTDATA / "gvrs" / "crafted_all_types.gvrs"
VOLP = TESTDATA / "volp" / "temperature_4x32x32_int16.volp"
UDF = TESTDATA / "udf" / "sample.udf"
FOLD = TESTDATA / "fold" / "sample.fold"


def test_file_basics():
    with rasterpack.open(GVRS) as f:
        assert f.format == "gvrs"
        assert f.arrays == ["a", "b", "c", "d"]
        assert "a" in f and "zz" not in f and len(f) == 4
        assert f.array().name == "a"
        assert f["c"].dtype == np.dtype("float32")
        assert f["a"].shape == (7, 9) and f["a"].chunks == (4, 5)
        assert f.attrs["tile_rows"] == 4
    assert f.closed
    with pytest.raises(ValueError, match="closed"):
        f.array()
    # VDS: BrickSize_32 with margins 2/2 owns 28 samples per brick; Dim3 is outside the dimension
    # group 012, so one voxel per chunk; short axes are clamped to their length.
    assert rasterpack.open(VDS4).array().chunks == (1, 4, 3, 28)
    assert rasterpack.open(TESTDATA / "vds" / "small_u8_rle_novalue.vds").array().chunks == (6, 10, 32)
    assert rasterpack.open(UDF)["root/grid"].chunks == (3, 4)
    assert rasterpack.open(VOLP).arrays == [None]
    assert rasterpack.open(VOLP).array().attrs["scale"] is not None


def test_closed_file_refuses_reads():
    f = rasterpack.open(VOLP)
    a = f.array()
    f.close()
    with pytest.raises(ValueError, match="closed"):
        np.asarray(a)


@pytest.mark.parametrize("path", [VDS, VDS4, VOLP, GVRS])
def test_basic_indexing_equals_numpy(path):
    a = rasterpack.open(path).array()
    full = np.asarray(a)
    nd = full.ndim
    keys = [
        0,
        -1,
        slice(1, 3),
        (Ellipsis, 1),
        (slice(None, None, 2),),
        (slice(None, None, -1),),
        (slice(5, 1, -2),),
        (None, 0),
        (slice(3, 3),),
        tuple(slice(1, None) for _ in range(nd)),
        tuple(-1 for _ in range(nd)),
        (Ellipsis,),
        (slice(-100, 100),),
        (np.int64(1),),
    ]
    for key in keys:
        want = full[key]
        got = a[key]
        assert np.shape(got) == np.shape(want), key
        assert np.array_equal(got, want, equal_nan=True), key


def test_indexing_reads_only_the_box(monkeypatch):
    # A region read returns just the box (shape), through the library's region path: compare a
    # one-brick slice with the CLI's --region output.
    a = rasterpack.open(VDS).array()
    out = run_cli("convert", str(VDS), "-", "--to", "npy", "--region", "2:4,1:5,3")
    assert out.returncode == 0
    import io

    want = np.load(io.BytesIO(out.stdout))
    assert np.array_equal(a.read(region="2:4,1:5,3"), want)
    assert np.array_equal(a.read(region=(slice(2, 4), slice(1, 5), 3)), want)
    assert np.array_equal(a[2:4, 1:5, 3], want)  # an integer drops its axis, as in numpy
    assert a.read(region="2:4,1:5,3").shape == a[2:4, 1:5, 3].shape == want.shape


def test_read_options_match_cli():
    v = rasterpack.open(VOLP).array()
    phys = v.read(physical=True)
    out = run_cli("convert", str(VOLP), "-", "--to", "npy", "--physical")
    import io

    assert phys.tobytes() == np.load(io.BytesIO(out.stdout)).tobytes()
    lod1 = rasterpack.open(VDS4).array().read(lod=1)
    out = run_cli("convert", str(VDS4), "-", "--to", "npy", "--lod", "1")
    assert lod1.tobytes() == np.load(io.BytesIO(out.stdout)).tobytes()
    with pytest.raises(rasterpack.UsageError):
        rasterpack.open(UDF).array().read(physical=True)
    with pytest.raises(rasterpack.UsageError):
        v.read(lod=1)
    with pytest.raises(rasterpack.UsageError):
        v.read(region="0:9")


def test_exceptions(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        rasterpack.open(tmp_path / "missing.volp")
    assert e.value.filename == str(tmp_path / "missing.volp")
    with pytest.raises(FileNotFoundError):
        rasterpack.validate(tmp_path / "missing.volp")
    # A directory that holds no dataset: unsupported, as the CLI's exit 3.
    with pytest.raises(rasterpack.UnsupportedError) as e:
        rasterpack.open(tmp_path)
    assert isinstance(e.value, NotImplementedError) and isinstance(e.value, rasterpack.Error)
    # Truncated: opens (the header is whole) but the read fails with the finding.
    with pytest.raises(rasterpack.InvalidFileError) as e:
        np.asarray(rasterpack.open(TESTDATA / "volp" / "invalid_truncated_body.volp").array())
    assert isinstance(e.value, ValueError)
    assert e.value.code == "volp.body.decompress" and e.value.offset is not None
    assert e.value.findings[0].code == e.value.code
    cut = tmp_path / "cut.gvrs"
    cut.write_bytes(GVRS.read_bytes()[:100])
    with pytest.raises(rasterpack.InvalidFileError):
        rasterpack.open(cut)
    empty = tmp_path / "empty.volp"
    empty.write_bytes(b"")
    with pytest.raises(rasterpack.InvalidFileError, match="empty"):
        rasterpack.open(empty)
    with pytest.raises(rasterpack.InvalidFileError):
        rasterpack.open(TESTDATA / "volp" / "invalid_bad_magic.volp")
    with pytest.raises(KeyError):
        rasterpack.open(GVRS)["nope"]
    a = rasterpack.open(VDS).array()
    with pytest.raises(IndexError):
        a[8]
    with pytest.raises(IndexError):
        a[0, 0, 0, 0]
    with pytest.raises(IndexError):
        a[[1, 2]]
    with pytest.raises(TypeError):
        rasterpack.open(12)  # type: ignore[arg-type]


def test_validate_report():
    r = rasterpack.validate(TESTDATA / "volp" / "invalid_bad_magic.volp")
    assert not r.valid and r.exit_code == 1 and r.findings[0].code == "format.unknown"
    assert r.findings[0].severity == "error" and r.findings[0].offset == 0
    ok = rasterpack.validate(VOLP)
    assert ok.valid and ok.exit_code == 0 and ok.format == "volp"
    assert ok.to_dict()["checked"] == "full"


def test_pickling():
    f = rasterpack.open(GVRS)
    g = pickle.loads(pickle.dumps(f))
    assert g.path == f.path and g.arrays == f.arrays
    a = f["c"]
    b = pickle.loads(pickle.dumps(a))
    assert b.name == "c" and np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
    e = rasterpack.InvalidFileError("x at offset 3 [c.d]", "c.d", 3, "invalid", "x")
    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.code, e2.offset, e2.message) == ("c.d", 3, "x")


def test_threads_read_the_same_values():
    a = rasterpack.open(VDS4).array()
    want = np.asarray(a)
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda i: a[i % a.shape[0]], range(64)))
    for i, g in enumerate(got):
        assert np.array_equal(g, want[i % a.shape[0]])


def test_gil_is_released_during_reads():
    # While one thread reads, another thread must make progress in Python.
    a = rasterpack.open(VOLP).array()
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(1)

    t = threading.Thread(target=tick)
    t.start()
    for _ in range(200):
        np.asarray(a)
    stop.set()
    t.join()
    assert ticks


@pytest.mark.parametrize(
    "writer,ext,kwargs,shape,dtype",
    [
        (rasterpack.write_npy, "npy", {}, (3, 4, 5), "float64"),
        (rasterpack.write_volp, "volp", {"compress": "zstd:3"}, (2, 8, 8), "float32"),
        (rasterpack.write_gvrs, "gvrs", {"name": "z", "tile": (4, 4), "compress": "default"}, (9, 7), "float32"),
        (rasterpack.write_gvrs, "gvrs", {"name": "i"}, (5, 6), "int32"),
        (rasterpack.write_udf, "udf", {"name": "t"}, (4, 3), "uint16"),
        (rasterpack.write_fold, "fold", {"name": "w", "compress": "zstd+rs16"}, (6, 2), "int64"),
    ],
)
def test_writers_round_trip(tmp_path, writer, ext, kwargs, shape, dtype):
    values = (np.arange(np.prod(shape)) % 97).reshape(shape).astype(dtype)
    path = tmp_path / f"out.{ext}"
    writer(path, values, **kwargs)
    assert rasterpack.validate(path).valid
    f = rasterpack.open(path)
    assert f.format == ext
    got = np.asarray(f.array())
    assert got.dtype == values.dtype and np.array_equal(got.reshape(values.shape), values)
    # The CLI reads the same file to the same values.
    out = run_cli("convert", str(path), str(tmp_path / "cli.npy"))
    assert out.returncode == 0, out.stderr
    assert np.array_equal(np.load(tmp_path / "cli.npy"), got)
    with pytest.raises(rasterpack.UsageError, match="exists"):
        writer(path, values, **kwargs)
    writer(path, values, force=True, **kwargs)


def test_writer_refuses_options_the_format_lacks(tmp_path):
    with pytest.raises(rasterpack.UsageError):
        rasterpack._write("npy", tmp_path / "x.npy", [(None, np.zeros(3))], tile=(2, 2))


def test_convert_like_cli(tmp_path):
    rasterpack.convert(GVRS, tmp_path / "a.npy", element="c", window="1,2,3,4")
    out = run_cli("convert", str(GVRS), str(tmp_path / "b.npy"), "--element", "c", "--window", "1,2,3,4")
    assert out.returncode == 0
    assert (tmp_path / "a.npy").read_bytes() == (tmp_path / "b.npy").read_bytes()
    rasterpack.convert(UDF, tmp_path / "t.gvrs", element="root/grid", tile="2x2")
    assert rasterpack.open(tmp_path / "t.gvrs").format == "gvrs"
    with pytest.raises(rasterpack.UsageError, match="exists"):
        rasterpack.convert(VOLP, tmp_path / "a.npy")
    with pytest.raises(rasterpack.UsageError):
        rasterpack.convert(VOLP, tmp_path / "c.npy", region="0:1", levels="0:1")
    with pytest.raises(FileNotFoundError):
        rasterpack.convert(tmp_path / "nope.volp", tmp_path / "d.npy")
    with pytest.raises(rasterpack.InvalidFileError):
        rasterpack.convert(TESTDATA / "volp" / "invalid_truncated_body.volp", tmp_path / "e.npy")
    assert not (tmp_path / "e.npy").exists()


def test_formats_and_detect(tmp_path):
    assert rasterpack.formats() == ["npy", "volp", "gvrs", "udf", "fold", "npz", "vds", "zarr"]
    assert rasterpack.detect(VDS) == "vds"
    assert rasterpack.detect(TESTDATA / "vds" / "small_objdir") == "vds"
    (tmp_path / "x.txt").write_text("hello")
    assert rasterpack.detect(tmp_path / "x.txt") is None


def _fold_file(tmp_path, compress):
    values = np.arange(64 * 1024, dtype="<f4").reshape(256, 256) * 0.5
    p = tmp_path / f"one_{compress}.fold"
    rasterpack.write_fold(p, {"v": values}, compress=compress)
    return p, values


@pytest.mark.parametrize("compress", ["zstd", "none"])
def test_fold_array_by_name_needs_no_listing(tmp_path, compress):
    # open and File[name] describe the array from its .npy header; the read verifies the chunk
    # in the pass that decodes it (crates/fold/tests/read_once.rs counts the bytes).
    p, values = _fold_file(tmp_path, compress)
    f = rasterpack.open(p)
    assert "arrays=[...]" in repr(f)  # nothing listed yet
    a = f["nuclear_arrays/v"]
    assert a.shape == values.shape and a.dtype == values.dtype
    assert np.array_equal(np.asarray(a), values)
    assert np.array_equal(a[10:20, 3], values[10:20, 3])
    assert np.array_equal(np.asarray(f.array()), values)
    # The listing when asked for, once, with the same names.
    assert f.arrays == ["nuclear_arrays/v"] and "nuclear_arrays/v" in f and len(f) == 1
    with pytest.raises(KeyError):
        rasterpack.open(p)["nuclear_arrays/nope"]


@pytest.mark.parametrize("compress", ["zstd", "none"])
def test_fold_damaged_chunk_read_by_name_fails_like_the_listing(tmp_path, compress):
    p, _ = _fold_file(tmp_path, compress)
    raw = bytearray(p.read_bytes())
    entry = rasterpack.inspect(p)
    raw[len(raw) // 2] ^= 0x10  # inside the chunk's payload
    p.write_bytes(bytes(raw))
    report = rasterpack.validate(p)
    codes = [f.code for f in report.findings if f.severity == "error"]
    assert codes and codes[0] == "fold.integrity.crc_mismatch", (codes, entry)
    a = rasterpack.open(p)["nuclear_arrays/v"]
    with pytest.raises(rasterpack.InvalidFileError) as err:
        np.asarray(a)
    assert err.value.code == codes[0]
    assert rasterpack.open(p).arrays == []


@pytest.mark.parametrize("path", [VDS, VOLP, GVRS, UDF, FOLD])
def test_read_into_fills_the_callers_array_with_reads_values(path):
    a = rasterpack.open(path).array()
    want = np.asarray(a)
    # Filled with a sentinel first: every byte must be overwritten by the read.
    out = np.full(a.shape, 7, dtype=a.dtype)
    out.view(np.uint8)[...] = 0xA5
    got = a.read_into(out)
    assert got is out
    np.testing.assert_array_equal(out, want)
    # Reused for a second read (the bench's pattern), and with a region as `read` takes it.
    out[...] = 0
    a.read_into(out)
    np.testing.assert_array_equal(out, want)
    box = tuple(slice(0, max(1, n // 2)) for n in a.shape)
    part = np.empty([max(1, n // 2) for n in a.shape], dtype=a.dtype)
    assert a.read_into(part, region=box) is part
    np.testing.assert_array_equal(part, want[box])


def test_read_into_refuses_an_array_that_does_not_fit():
    a = rasterpack.open(GVRS)["c"]  # float32, 7 x 9
    assert a.dtype == np.dtype("float32") and a.shape == (7, 9)
    with pytest.raises(TypeError, match="dtype"):
        a.read_into(np.empty((7, 9), dtype="float64"))
    with pytest.raises(TypeError, match="dtype"):
        a.read_into(np.empty((7, 9), dtype=">f4"))
    with pytest.raises(ValueError, match="shape"):
        a.read_into(np.empty((9, 7), dtype="float32"))
    with pytest.raises(ValueError, match="shape"):
        a.read_into(np.empty(63, dtype="float32"))
    with pytest.raises(ValueError, match="C-contiguous"):
        a.read_into(np.empty((9, 7), dtype="float32").T)
    with pytest.raises(ValueError, match="C-contiguous"):
        a.read_into(np.empty((7, 18), dtype="float32")[:, ::2])
    ro = np.empty((7, 9), dtype="float32")
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        a.read_into(ro)
    with pytest.raises(TypeError, match="ndarray"):
        a.read_into(bytearray(7 * 9 * 4))
    # A region's shape is what counts: the whole array's shape is refused for a 2 x 3 box.
    with pytest.raises(ValueError, match="shape"):
        a.read_into(np.empty((7, 9), dtype="float32"), region="0:2,0:3")
    # Refused arrays were not written: a refused read leaves `out` as it was.
    keep = np.full((9, 7), 3.5, dtype="float32")
    with pytest.raises(ValueError):
        a.read_into(keep)
    assert (keep == 3.5).all()
