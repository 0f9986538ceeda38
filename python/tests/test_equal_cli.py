"""Every testdata/ file and every public corpus file: what Python reads equals the CLI's .npy
output value for value (bit for bit), verdicts equal the CLI's, failures raise the exception
that matches the CLI's exit code."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest

import rasterpack
from conftest import cli_entry, corpus_dir, corpus_inputs, ids, run_cli, data_inputs

EXCEPTION_FOR_EXIT = {1: rasterpack.InvalidFileError, 3: rasterpack.UnsupportedError}

TESTDATA = data_inputs()
CORPUS = corpus_inputs()


def check_reads_like_cli(path: Path) -> int:
    """Read every array through Python and through `rasterpack convert`; returns arrays compared."""
    try:
        f = rasterpack.open(path)
        # The listing is taken lazily (on first use), so a file whose arrays cannot be listed
        # fails here rather than at open.
        names = f.arrays
    except (rasterpack.InvalidFileError, rasterpack.UnsupportedError) as e:
        out = run_cli("convert", str(path), os.path.join(tempfile.mkdtemp(), "x.npy"))
        assert out.returncode in EXCEPTION_FOR_EXIT, (out.returncode, out.stderr)
        assert isinstance(e, EXCEPTION_FOR_EXIT[out.returncode]), (e, out.returncode)
        return 0
    compared = 0
    with f, tempfile.TemporaryDirectory() as tmp:
        for i, name in enumerate(names):
            dst = os.path.join(tmp, f"{i}.npy")
            args = ["convert", str(path), dst] + (["--element", name] if name is not None else [])
            out = run_cli(*args)
            if out.returncode == 0:
                a = f[name] if name is not None else f.array()
                want = np.load(dst)
                got = np.asarray(a)
                assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, want.dtype)
                assert got.tobytes() == want.tobytes(), f"{path} {name}: values differ from the CLI's"
                assert a.shape == want.shape and a.dtype == want.dtype
                compared += 1
            else:
                expected = EXCEPTION_FOR_EXIT.get(out.returncode)
                assert expected is not None, (out.returncode, out.stderr)
                # The array object or its read: a file whose array cannot be located fails
                # when the array is taken, as the CLI's convert fails before reading.
                with pytest.raises(expected):
                    np.asarray(f[name] if name is not None else f.array())
    return compared


@pytest.mark.parametrize("path", TESTDATA, ids=ids(TESTDATA))
def test_testdata_reads_equal_cli(path):
    check_reads_like_cli(path)


@pytest.mark.parametrize("path", TESTDATA, ids=ids(TESTDATA))
def test_testdata_verdicts_equal_cli(path):
    assert rasterpack.validate(path).to_dict() == cli_entry("validate", str(path))
    assert rasterpack.validate(path, strict=True).to_dict() == cli_entry("validate", str(path), "--strict")
    assert rasterpack.inspect(path) == cli_entry("inspect", str(path))


needs_corpus = pytest.mark.skipif(corpus_dir() is None, reason="RASTERPACK_CORPUS is not set (the shared corpus)")


@needs_corpus
def test_corpus_is_there():
    assert len(CORPUS) > 100, f"only {len(CORPUS)} inputs found under {corpus_dir()}"


def corpus_param(path):
    return pytest.param(path, id=ids([path])[0])


@needs_corpus
@pytest.mark.parametrize("path", [corpus_param(p) for p in CORPUS])
def test_corpus_reads_and_verdicts_equal_cli(path):
    check_reads_like_cli(path)
    report = rasterpack.validate(path)
    assert report.to_dict() == cli_entry("validate", str(path))
    assert report.valid == (report.exit_code in (0, 3)) or report.unsupported
