#!/usr/bin/env python3
"""Reads from several Python threads at once: how the package scales with threads.

    python python/benches/bench_threads.py DIR [--formats gvrs,volp,udf,fold,vds]
        [--threads 1,2] [--reads 8] [--repeats 7]

Makes its inputs in DIR once (64 MiB of float32 each: a 4096 x 4096 GVRS grid, deflate in
128 x 128 tiles; a 16 x 1024 x 1024 zstd VOLP volume; a 4096 x 4096 UDF grid; a 4096 x 4096
zstd FOLD member; a 256 x 256 x 256 Zip VDS volume), then, per format, times rounds of R whole
reads of the array (default 8) spread over N threads of this process, for each N in --threads
in turn (1, 2, 1, 2, ...: the counts see the same machine load), and prints the min and median
wall time of a round per N, the speed-up of the medians and of the minima against the first N,
and the process CPU time of a round (all threads; CPU / wall says how many cores were busy).

What it measures is the read, not the allocator: each thread reads into its own array made and
written once before the timing (`Array.read_into`), where `np.asarray` would make, and the
kernel fault in, a new 64 MiB array per read (0.4 to 1.5 s of system time per 8 reads that swung
from run to run and hid the scaling). One untimed round per N warms the page cache and the
buffers first. RAYON_NUM_THREADS defaults to 1 here (set it to override) so each read decodes
on its own calling thread and the figure is about the Python threads, not the library's own
parallel decode.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from pathlib import Path

# Before the first read builds rayon's global pool.
os.environ.setdefault("RAYON_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import rasterpack  # noqa: E402

FORMATS = ("volp", "gvrs", "udf", "fold", "vds")


def make(d: Path, fmt: str) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"threads.{fmt}"
    if path.exists():
        return path
    rng = np.random.default_rng(7)
    if fmt == "volp":
        cube = np.cumsum(rng.normal(0, 1, (16, 1024, 1024)).astype("float32"), axis=2)
        rasterpack.write_volp(path, cube, compress="zstd:3")
    elif fmt == "vds":
        z, y, x = np.mgrid[0:256, 0:256, 0:256].astype("float32")
        cube = (np.sin(z / 17.0) * np.cos(y / 23.0) + np.sin(x / 11.0)).astype("float32")
        cube += rng.normal(0, 0.01, cube.shape).astype("float32")
        rasterpack.write_vds(path, cube, compress="zip")
    else:
        y, x = np.mgrid[0:4096, 0:4096].astype("float32")
        grid = (np.sin(y / 97.0) * np.cos(x / 61.0) * 1000).astype("float32")
        grid += rng.normal(0, 0.5, grid.shape).astype("float32")
        if fmt == "gvrs":
            rasterpack.write_gvrs(path, grid, name="z", tile=(128, 128), compress="default")
        elif fmt == "udf":
            rasterpack.write_udf(path, grid, name="z")
        else:
            rasterpack.write_fold(path, {"z": grid}, compress="zstd")
    return path


def one_round(a, outs, reads: int):
    """Wall and process CPU time of `reads` reads spread over len(outs) threads, each into its
    own buffer."""
    n = len(outs)
    share = [reads // n + (1 if i < reads % n else 0) for i in range(n)]
    start = threading.Barrier(n + 1)

    def work(i: int) -> None:
        start.wait()
        for _ in range(share[i]):
            a.read_into(outs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    start.wait()
    t0, c0 = time.perf_counter(), time.process_time()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, time.process_time() - c0


def bench(path: Path, counts, reads: int, repeats: int) -> None:
    a = rasterpack.open(path).array()
    want = np.asarray(a)
    # Made and written before any timing: the rounds reuse them.
    outs = {n: [np.ones(a.shape, a.dtype) for _ in range(n)] for n in counts}
    for n in counts:
        one_round(a, outs[n], n)  # warm-up
    times = {n: [] for n in counts}
    cpu = {n: [] for n in counts}
    for _ in range(repeats):
        for n in counts:
            wall, used = one_round(a, outs[n], reads)
            times[n].append(wall)
            cpu[n].append(used)
    for n in counts:
        for o in outs[n]:
            assert np.array_equal(o, want, equal_nan=True), f"{path}: {n}-thread read differs"
    base = counts[0]
    mb = reads * want.nbytes / 1e6
    for n in counts:
        med, lo = statistics.median(times[n]), min(times[n])
        print(
            f"{a.file.format:5} {n} thread(s), {reads} reads x {repeats}: "
            f"median {med:.3f} s, min {lo:.3f} s ({mb / med:.0f} MB/s median); "
            f"x{statistics.median(times[base]) / med:.2f} median, "
            f"x{min(times[base]) / lo:.2f} min vs {base}; "
            f"CPU median {statistics.median(cpu[n]):.3f} s ({statistics.median(cpu[n]) / med:.2f} cores busy)",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", type=Path)
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reads", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    counts = [int(n) for n in args.threads.split(",")]
    print(f"RAYON_NUM_THREADS={os.environ['RAYON_NUM_THREADS']}, load {os.getloadavg()[0]:.2f}", flush=True)
    for fmt in args.formats.split(","):
        if fmt not in FORMATS:
            raise SystemExit(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
        bench(make(args.dir, fmt), counts, args.reads, args.repeats)
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
