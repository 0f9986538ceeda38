"""I/O errors reach Python as the OSError subclass of their OS error, with errno and filename,
from the kind the library's error keeps (never from its message)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import rasterpack
from conftest import TESTDATA

VOLP = TESTDATA / "volp" / "temperature_4x32x32_int16.volp"


def test_missing_file(tmp_path):
    missing = tmp_path / "missing.volp"
    for call in (rasterpack.open, rasterpack.validate, rasterpack.inspect):
        with pytest.raises(FileNotFoundError) as e:
            call(missing)
        assert e.value.errno == errno.ENOENT, call
        assert e.value.filename == str(missing), call
        assert "missing.volp" in str(e.value)
    with pytest.raises(FileNotFoundError) as e:
        rasterpack.convert(missing, tmp_path / "out.npy")
    assert e.value.errno == errno.ENOENT and e.value.filename == str(missing)


def test_not_a_directory(tmp_path):
    # A path through a regular file: ENOTDIR from the OS.
    inside = VOLP / "x.volp"
    with pytest.raises(NotADirectoryError) as e:
        rasterpack.open(inside)
    assert e.value.errno == errno.ENOTDIR and e.value.filename == str(inside)


def test_output_in_a_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        rasterpack.convert(VOLP, tmp_path / "no" / "such" / "out.npy")
    assert e.value.errno == errno.ENOENT
    with pytest.raises(FileNotFoundError):
        rasterpack.write_npy(tmp_path / "no" / "out.npy", np.zeros(3))


def test_output_is_a_directory(tmp_path):
    folder = tmp_path / "folder.npy"
    folder.mkdir()
    # Without force an existing path is a usage error, as `convert` without --force.
    with pytest.raises(rasterpack.UsageError, match="exists"):
        rasterpack.convert(VOLP, folder)
    with pytest.raises(IsADirectoryError) as e:
        rasterpack.convert(VOLP, folder, force=True)
    assert e.value.errno == errno.EISDIR and e.value.filename == str(folder)
    with pytest.raises(IsADirectoryError) as e:
        rasterpack.write_npy(folder, np.zeros(3), force=True)
    assert e.value.errno == errno.EISDIR
    assert folder.is_dir() and list(folder.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder.npy"], "no temporary file left"


PERMISSION = textwrap.dedent(
    """
    import errno, os, sys
    import numpy as np
    import rasterpack
    locked, folder = sys.argv[1], sys.argv[2]
    seen = []
    for call in (rasterpack.open, rasterpack.validate, rasterpack.inspect):
        try:
            call(locked)
        except PermissionError as e:
            assert e.errno == errno.EACCES and e.filename == locked, (e.errno, e.filename)
            seen.append(call.__name__)
    try:
        rasterpack.write_npy(os.path.join(folder, "out.npy"), np.zeros(3))
    except PermissionError as e:
        assert e.errno == errno.EACCES, e.errno
        seen.append("write_npy")
    print(",".join(seen))
    """
)


def test_permission_denied(tmp_path):
    locked = tmp_path / "locked.volp"
    shutil.copy(VOLP, locked)
    os.chmod(locked, 0o000)
    folder = tmp_path / "ro"
    folder.mkdir()
    os.chmod(folder, 0o555)
    command = [sys.executable, "-c", PERMISSION, str(locked), str(folder)]
    if os.geteuid() == 0:
        # Root reads anything: run the check without the capabilities that let it.
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv to drop CAP_DAC_OVERRIDE")
        command = [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--", *command]
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=120)
    finally:
        os.chmod(folder, 0o755)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["open,validate,inspect,write_npy"]
