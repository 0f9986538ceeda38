#!/usr/bin/env python3
"""rasterpack's Python reads against the reference readers, both sides in this process.

    python python/benches/bench_read.py DIR [--repeat N]

Makes its inputs in DIR (kept between runs), then prints best-of-N wall times:

- VDS: np.asarray(rasterpack.open(p).array()) vs OpenVDS 3.4.9 requestVolumeSubset + np.asarray
  on 256 x 256 x 512 float32 datasets written by OpenVDS (None, Zip, Wavelet; BrickSize_64).
- FOLD: np.asarray of a 64 MiB float32 array in a FOLD file (NPZ0 chunk, written by rasterpack:
  read + CRC32C + SHA-256 + zip CRC-32 checks) vs pyfolds 1.0.2 read_chunk_bytes (CRC32C,
  SHA-256, zstd) + np.load of the array.
- VOLP: np.asarray of a 64 MiB body vs the reference reader's way (numpy + zstandard: parse the
  header, decompress the body, np.frombuffer).
- A 1% slice (a[:, :, k:k+w] of the VDS None/Zip volumes, a few of the 4096 bricks) vs the whole
  read; `--only slices`: 1% boxes of the VOLP volume (first and last) and of a 4096 x 4096
  GVRS grid (128 x 128 tiles); and peak RSS of a whole read in a child process against the
  array's size (VDS, VOLP, FOLD, GVRS).

Needs: numpy, zstandard, openvds==3.4.9, pyfolds==1.0.2 (with a stub `torch` module: pyfolds
imports it but the chunk read does not use it), and rasterpack installed (release build:
`maturin develop --release` in python/ or the wheel).
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

import rasterpack

REPO = Path(__file__).resolve().parents[2]


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        del out
    return min(times)


def line(what, ours, theirs, mb, theirs_name):
    ratio = theirs / ours if ours else float("inf")
    print(
        f"{what:38s} rasterpack {ours * 1e3:8.1f} ms ({mb / ours:6.0f} MB/s)   "
        f"{theirs_name} {theirs * 1e3:8.1f} ms ({mb / theirs:6.0f} MB/s)   x{ratio:.2f}"
    )


# --- VDS -------------------------------------------------------------------------------------


def make_vds(d: Path):
    spec = importlib.util.spec_from_file_location("ovw", REPO / "crates/vds-meta/benches/openvds_wavelet.py")
    ovw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ovw)
    paths = {}
    for method in ("None", "Zip", "Wavelet"):
        p = d / f"v256_{method}.vds"
        if not p.exists():
            ovw.write(str(p), [256, 256, 512], method=method, brick=64, vrange=(-1.5, 1.5))
            for raw in d.glob(p.name + ".*.raw"):
                raw.unlink()
        paths[method] = p
    return paths


def openvds_read(path):
    import openvds

    h = openvds.open(str(path), "")
    am = openvds.getAccessManager(h)
    lay = am.volumeDataLayout
    dims = [lay.getDimensionNumSamples(i) for i in range(lay.dimensionality)]
    r = am.requestVolumeSubset((0,) * 6, tuple(dims) + (1,) * (6 - len(dims)), format=openvds.VolumeDataFormat.Format_R32)
    a = np.asarray(r.data).reshape(tuple(reversed(dims)))
    openvds.close(h)
    return a


def bench_vds(d, repeat):
    for method, p in make_vds(d).items():
        ours = best(lambda: np.asarray(rasterpack.open(p).array()), repeat)
        theirs = best(lambda: openvds_read(p), repeat)
        a = np.asarray(rasterpack.open(p).array())
        same = "equal" if np.array_equal(a, openvds_read(p)) else "DIFFER"
        line(f"VDS 256x256x512 R32 {method} ({same})", ours, theirs, a.nbytes / 1e6, "OpenVDS 3.4.9")
        if method in ("None", "Zip"):
            arr = rasterpack.open(p).array()
            # 1% of the volume: 5 of the 512 samples of every trace... crosses every brick; a box
            # of whole bricks is the fair 1%: 64 x 64 x 64 bricks are 1/256 each, so ~2.6 bricks.
            k = arr.shape[0] // 100 + 1
            sl = best(lambda: arr[:k, :, :], repeat)
            sl_bricks = best(lambda: arr[:64, :64, :164], repeat)
            whole = best(lambda: np.asarray(arr), repeat)
            print(
                f"  1% slices of {method}: a[:{k}] (one brick layer deep) {sl * 1e3:.1f} ms = {100 * sl / whole:.1f}% "
                f"of the whole read ({whole * 1e3:.1f} ms); a[:64, :64, :164] (1.0%, 3 bricks) "
                f"{sl_bricks * 1e3:.1f} ms = {100 * sl_bricks / whole:.1f}%"
            )


# --- FOLD ------------------------------------------------------------------------------------


class _Anything:
    """Stands for any torch name pyfolds touches at import (classes to subclass, decorators)."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return args[0] if len(args) == 1 and callable(args[0]) else _Anything()

    def __getattr__(self, name):
        return _Anything()


def stub_torch():
    """pyfolds imports torch (for its neural-network half) but reading a chunk never uses it:
    a stand-in package whose every submodule and name exists."""
    import importlib.abc
    import importlib.machinery

    class StubModule(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return type(name, (_Anything,), {})

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, fullname, path, target=None):
            if fullname == "torch" or fullname.startswith("torch."):
                return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
            return None

        def create_module(self, spec):
            m = StubModule(spec.name)
            m.__path__ = []
            return m

        def exec_module(self, module):
            pass

    if "torch" not in sys.modules:
        sys.meta_path.insert(0, Finder())


def bench_fold(d, repeat):
    p = d / "noisy64.fold"
    x = np.random.default_rng(12).standard_normal(16 * 1024 * 1024).astype(np.float32).reshape(4096, 4096)
    if not p.exists():
        rasterpack.write_fold(p, x, name="field")
    f = rasterpack.open(p)
    name = f.arrays[0]
    ours = best(lambda: np.asarray(rasterpack.open(p)[name]), repeat)
    stub_torch()
    from pyfolds.serialization.foldio import FoldReader

    chunk = name.split("/")[0]

    def theirs_read():
        with FoldReader(str(p)) as r:
            raw = r.read_chunk_bytes(chunk)
        z = np.load(io.BytesIO(raw))
        return {k: z[k] for k in z.files}

    theirs = best(theirs_read, repeat)
    got = np.asarray(f[name])
    same = "equal" if np.array_equal(got, list(theirs_read().values())[0]) else "DIFFER"
    line(f"FOLD 64 MiB NPZ0 read+verify ({same})", ours, theirs, x.nbytes / 1e6, "pyfolds 1.0.2")


# --- VOLP ------------------------------------------------------------------------------------


def reference_volp_read(path):
    import zstandard

    with open(path, "rb") as fh:
        blob = fh.read()
    (n,) = struct.unpack_from("<I", blob, 4)
    header = json.loads(blob[8 : 8 + n])
    body = zstandard.ZstdDecompressor().decompressobj().decompress(blob[8 + n :])
    return np.frombuffer(body, dtype=np.dtype(header["dtype"]).newbyteorder("<")).reshape(header["shape"])


def bench_volp(d, repeat):
    p = d / "body64.volp"
    rng = np.random.default_rng(5)
    x = (np.cumsum(rng.standard_normal((16, 1024, 1024)), axis=2) * 10).astype(np.float32)
    if not p.exists():
        rasterpack.write_volp(p, x)
    ours = best(lambda: np.asarray(rasterpack.open(p).array()), repeat)
    theirs = best(lambda: reference_volp_read(p), repeat)
    same = "equal" if np.array_equal(np.asarray(rasterpack.open(p).array()), reference_volp_read(p)) else "DIFFER"
    line(f"VOLP 64 MiB body ({same})", ours, theirs, x.nbytes / 1e6, "numpy+zstandard")


# --- 1% slices of VOLP and GVRS --------------------------------------------------------------


def make_gvrs(d: Path) -> Path:
    p = d / "grid64.gvrs"
    if not p.exists():
        y, x = np.mgrid[0:4096, 0:4096].astype(np.float32)
        rng = np.random.default_rng(9)
        z = (np.sin(y / 97.0) * np.cos(x / 61.0) * 1000 + rng.normal(0, 0.5, y.shape)).astype(np.float32)
        rasterpack.write_gvrs(p, z, name="z", tile=(128, 128), compress="default")
    return p


def bench_slices(d, repeat):
    """A box of about 1% of the values against the whole read (same process, best of N)."""
    volp = d / "body64.volp"
    if not volp.exists():
        bench_volp(d, 1)
    cases = [
        # VOLP: one zstd stream; decoding stops after the box, so where the box is matters.
        (volp, (slice(0, 1), slice(0, 168), slice(None)), "VOLP 64 MiB, a[0:1, :168] (first 1.0%)"),
        (volp, (slice(15, 16), slice(856, 1024), slice(None)), "VOLP 64 MiB, a[15:16, 856:] (last 1.0%)"),
        # GVRS 4096x4096 in 128x128 tiles: a 410x410 box meets 4x4 of the 1024 tiles.
        (make_gvrs(d), (slice(0, 410), slice(0, 410)), "GVRS 4096^2 f32, a[:410, :410] (1.0%)"),
        (make_gvrs(d), (slice(1800, 2210), slice(1800, 2210)), "GVRS 4096^2 f32, a[1800:2210, 1800:2210] (1.0%)"),
    ]
    for path, box, what in cases:
        a = rasterpack.open(path).array()
        whole = best(lambda: np.asarray(a), repeat)
        part = best(lambda: a[box], repeat)
        share = a[box].size / a.size
        assert np.array_equal(a[box], np.asarray(a)[box], equal_nan=True)
        print(
            f"{what:48s} {part * 1e3:8.1f} ms of {whole * 1e3:8.1f} ms whole: {100 * part / whole:5.1f}% "
            f"(box {100 * share:.2f}% of the values)"
        )


# --- peak memory -----------------------------------------------------------------------------

# VmHWM (the process's own peak RSS; ru_maxrss would carry the parent's over exec).
CHILD = """
import sys, numpy as np, rasterpack
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
base = hwm()
a = np.asarray(rasterpack.open(sys.argv[1]).array(sys.argv[2] if len(sys.argv) > 2 else None))
print(a.nbytes, base, hwm())
"""


def bench_memory(d):
    for p in [d / "v256_Wavelet.vds", d / "v256_Zip.vds", d / "body64.volp", d / "noisy64.fold", d / "grid64.gvrs"]:
        if not p.exists():
            continue
        args = [sys.executable, "-c", CHILD, str(p)]
        if p.suffix == ".fold":
            args.append(rasterpack.open(p).arrays[0])
        out = subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()
        nbytes, base, peak = map(int, out)
        extra = (peak - base - nbytes) / 2**20
        print(
            f"peak RSS {p.name:20s} array {nbytes / 2**20:6.1f} MiB, peak {peak / 2**20:6.1f} MiB "
            f"(interpreter + imports {base / 2**20:.1f} MiB): {extra:+.1f} MiB beyond the array"
        )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", choices=["vds", "fold", "volp", "slices", "memory"])
    a = ap.parse_args()
    d = Path(a.dir)
    d.mkdir(parents=True, exist_ok=True)
    print(f"rasterpack {rasterpack.__version__}, load {os.getloadavg()[0]:.1f}, best of {a.repeat}")
    if a.only in (None, "volp"):
        bench_volp(d, a.repeat)
    if a.only in (None, "fold"):
        bench_fold(d, a.repeat)
    if a.only in (None, "vds"):
        bench_vds(d, a.repeat)
    if a.only in (None, "slices"):
        bench_slices(d, a.repeat)
    if a.only in (None, "memory"):
        bench_memory(d)


if __name__ == "__main__":
    main()
