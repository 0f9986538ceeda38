"""Zarr stores read from S3 through `rasterpack.open` (the URL open of issue 19, the same library
call the CLI makes): a moto S3 server on loopback, started here, holds uploaded copies of a store
rasterpack writes and of zarr-python 3's (v3 zstd, v2). From its `s3://` URL each store opens,
lists and reads as its local directory does, equal to the values written; a prefix with no store
raises what the CLI's exit 2 says; a damaged chunk raises the error naming its key.

Without moto or zarr-python in the venv (`.ci/requirements.txt`) the tests skip visibly; under
`CI=true` they fail instead."""

from __future__ import annotations

import importlib
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import rasterpack
from conftest import cli_entry, run_cli


def needs(module: str):
    """`module`, or a visible skip; CI=true does not allow the skip."""
    try:
        return importlib.import_module(module)
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {module} is not installed (the venv of .ci/venv.sh)")
        pytest.skip(f"needs {module} (the venv of .ci/venv.sh)")


BUCKET = "zarr"
# The values every store holds: partial edge chunks on each axis, no two values alike.
CUBE = (np.arange(37 * 23 * 11, dtype="float64").reshape(37, 23, 11) * 0.25 - 900).astype("float32")
E2 = (np.arange(25 * 19, dtype="float64").reshape(25, 19) * 1.5 - 7).astype("float64")


class S3:
    """A moto S3 server on loopback (a child process) and a boto3 client of it."""

    def __init__(self, tmp: Path):
        boto3 = needs("boto3")
        needs("moto.server")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.log = open(tmp / "moto.log", "wb")
        self.child = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                assert self.child.poll() is None, f"moto.server exited: {(tmp / 'moto.log').read_text()}"
                assert time.monotonic() < deadline, f"moto.server did not start on {self.port}"
                time.sleep(0.1)
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        self.client.create_bucket(Bucket=BUCKET)

    def env(self) -> dict:
        """What a user sets to reach this server (read by rasterpack and the CLI alike)."""
        return {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
        }

    def upload(self, local: Path, name: str) -> str:
        """Every file under the store `local` as `s3://zarr/<name>/...`; the store's URL."""
        for path in sorted(p for p in local.rglob("*") if p.is_file()):
            key = f"{name}/{path.relative_to(local).as_posix()}"
            self.client.put_object(Bucket=BUCKET, Key=key, Body=path.read_bytes())
        return f"s3://{BUCKET}/{name}"

    def stop(self):
        self.child.kill()
        self.child.wait()
        self.log.close()


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    server = S3(tmp_path_factory.mktemp("moto"))
    with pytest.MonkeyPatch.context() as mp:
        for k, v in server.env().items():
            mp.setenv(k, v)
        try:
            yield server
        finally:
            server.stop()


def make_store(kind: str, path: Path) -> np.ndarray:
    """The store `kind` at `path`, written by rasterpack or by zarr-python; the values it holds."""
    if kind == "ours":
        rasterpack.write_zarr(path, CUBE, chunks=(8, 8, 4))
        return CUBE
    zarr = needs("zarr")
    if kind == "v3_zstd":
        from zarr.codecs import ZstdCodec

        z = zarr.create_array(
            str(path),
            shape=CUBE.shape,
            chunks=(8, 8, 4),
            dtype="float32",
            compressors=ZstdCodec(level=3),
            dimension_names=["z", "y", "x"],
            attributes={"units": "m"},
        )
        z[:] = CUBE
        return CUBE
    assert kind == "v2"
    z = zarr.create_array(str(path), shape=E2.shape, chunks=(10, 10), dtype="float64", zarr_format=2)
    z[:] = E2
    return E2


def same_bytes(a, b) -> bool:
    """Equal to the bit (NaN payloads, signed zeros), dtype and shape included."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("kind", ["ours", "v3_zstd", "v2"])
def test_an_s3_zarr_store_reads_as_its_directory(s3, tmp_path, kind):
    local = tmp_path / f"{kind}.zarr"
    want = make_store(kind, local)
    url = s3.upload(local, f"{kind}.zarr")
    remote, here = rasterpack.open(url), rasterpack.open(local)
    assert remote.format == here.format == "zarr"
    assert rasterpack.detect(url) == "zarr"
    # The reports of the CLI for the same URL.
    assert rasterpack.validate(url).to_dict() == cli_entry("validate", url)
    assert rasterpack.inspect(url) == cli_entry("inspect", url)
    assert remote.arrays == here.arrays
    assert remote.attrs == here.attrs
    ra, la = remote.array(), here.array()
    assert (ra.shape, ra.dtype) == (la.shape, la.dtype) == (want.shape, want.dtype)
    assert ra.chunks == la.chunks == ((8, 8, 4) if want.ndim == 3 else (10, 10))
    assert ra.attrs == la.attrs
    if kind == "v3_zstd":
        assert ra.attrs["attributes"] == {"units": "m"}, ra.attrs
    whole = np.asarray(ra)
    assert same_bytes(whole, np.asarray(la))
    assert same_bytes(whole, want)
    # A box across chunk edges, with a step: only its chunks are fetched, the values the same.
    box = (slice(3, 19, 2), slice(5, 17)) + ((slice(1, 10),) if want.ndim == 3 else ())
    assert same_bytes(ra[box], la[box])
    assert same_bytes(ra[box], want[box])
    assert same_bytes(ra.read(region="1:5,2:9"), want[1:5, 2:9])


def without_timings(text: str) -> str:
    """`text` with the request times object_store puts in its messages (`in 1.8ms`) taken out."""
    return re.sub(r" in [0-9.]+(ns|µs|us|ms|s)\b", " in <time>", text)


def test_a_missing_s3_store_raises_what_the_cli_says_with_exit_2(s3, tmp_path):
    url = f"s3://{BUCKET}/nothing.zarr"
    out = tmp_path / "x.npy"
    r = run_cli("convert", url, str(out))
    said = r.stderr.decode().strip()
    assert r.returncode == 2, f"exit {r.returncode}: {said}"
    prefix = f"rasterpack: convert {url} -> {out}: "
    assert said.startswith(prefix) and url in said[len(prefix) :], said
    with pytest.raises(OSError) as raised:
        rasterpack.open(url)
    # An OSError is the CLI's exit 2 (docs/python.md), with the message the CLI prints.
    e = raised.value
    assert not isinstance(e, rasterpack.Error), type(e).__mro__
    # As open() of a missing local path: FileNotFoundError.
    assert isinstance(e, FileNotFoundError), type(e).__mro__
    assert without_timings(str(e)) == without_timings(said[len(prefix) :])
    assert "store.not_found" in str(e)
    assert not out.exists()


def test_a_damaged_s3_chunk_raises_naming_its_key(s3, tmp_path):
    local = tmp_path / "bad.zarr"
    rasterpack.write_zarr(local, CUBE, chunks=(8, 8, 4))
    # Chunk c/1/2/0 cut to half its zstd frame: its decode fails, the others read. (Bytes
    # changed inside the frame may decode to other values unnoticed: the store's zstd has no
    # checksum, as zarr-python's default has none, so nothing in it could tell.)
    chunk = local / "c" / "1" / "2" / "0"
    data = chunk.read_bytes()
    assert len(data) > 40, f"chunk c/1/2/0 is {len(data)} bytes"
    chunk.write_bytes(data[: len(data) // 2])
    url = s3.upload(local, "bad.zarr")
    remote, here = rasterpack.open(url).array(), rasterpack.open(local).array()
    with pytest.raises(rasterpack.InvalidFileError) as from_s3:
        np.asarray(remote)
    with pytest.raises(rasterpack.InvalidFileError) as from_disk:
        np.asarray(here)
    assert "c/1/2/0" in str(from_s3.value), str(from_s3.value)
    assert (from_s3.value.code, from_s3.value.message) == (from_disk.value.code, from_disk.value.message)
    # A box the damaged chunk is not in reads.
    assert same_bytes(remote[0:8], CUBE[0:8])
    r = run_cli("convert", url, str(tmp_path / "bad.npy"))
    assert r.returncode == 1 and b"c/1/2/0" in r.stderr, r.stderr
