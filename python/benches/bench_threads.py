#!/usr/bin/env python3
"""Reads from several Python threads at once: how the package scales with threads.

    python python/benches/bench_threads.py DIR --threads N [--reads R] [--format gvrs|volp]

Makes its input in DIR once (a 4096 x 4096 float32 GVRS grid, deflate-compressed in 128 x 128
tiles; or a 16 x 1024 x 1024 float32 zstd VOLP volume: 64 MiB either way), then reads the whole
array R times (default 8) spread over N threads of one process, and prints the wall time. Run it
as a whole process with N = 1 and N = 2 (and RAYON_NUM_THREADS=1 to keep each read on one core,
so the figure is about the threads, not the library's own parallel decode).
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import rasterpack


def make(d: Path, fmt: str) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"threads.{fmt}"
    if not path.exists():
        rng = np.random.default_rng(7)
        if fmt == "gvrs":
            y, x = np.mgrid[0:4096, 0:4096].astype("float32")
            grid = (np.sin(y / 97.0) * np.cos(x / 61.0) * 1000).astype("float32")
            grid += rng.normal(0, 0.5, grid.shape).astype("float32")
            rasterpack.write_gvrs(path, grid, name="z", tile=(128, 128), compress="default")
        else:
            cube = np.cumsum(rng.normal(0, 1, (16, 1024, 1024)).astype("float32"), axis=2)
            rasterpack.write_volp(path, cube, compress="zstd:3")
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", type=Path)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reads", type=int, default=8)
    ap.add_argument("--format", choices=["gvrs", "volp"], default="gvrs")
    args = ap.parse_args()
    a = rasterpack.open(make(args.dir, args.format)).array()
    want = np.asarray(a)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.threads) as pool:
        got = list(pool.map(lambda _: np.asarray(a), range(args.reads)))
    wall = time.perf_counter() - t0
    assert all(np.array_equal(g, want, equal_nan=True) for g in got)
    mb = args.reads * want.nbytes / 1e6
    print(f"{args.format} {args.threads} thread(s), {args.reads} reads: {wall:.3f} s ({mb / wall:.0f} MB/s)")


if __name__ == "__main__":
    main()
