"""Side by side, whole processes: `rasterpack convert X.vds out.npy` vs OpenVDS (Python, from
PyPI) reading the whole LOD0 as float32 and `np.save`-ing it, as a user converting to .npy would.

usage: python openvds_convert.py RASTERPACK_BINARY N FILE.vds [FILE.vds ...]

Alternates the two tools, N rounds; prints every pair and the best of N of each: rasterpack as a
whole process, OpenVDS as a whole process (interpreter start, `import openvds`, read, save) and
its in-process read + save time alone (measured inside the process, from `openvds.open` to the
end of `np.save`). Outputs go to the temporary directory and are compared byte for byte.
Peak RSS of each process comes from wait4.
"""
import os, re, subprocess, sys, tempfile, time, filecmp

INNER = r'''
import sys, time, numpy as np, openvds
path, out = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
h = openvds.open(path, '')
am = openvds.getAccessManager(h)
lay = am.volumeDataLayout
dims = [lay.getDimensionNumSamples(d) for d in range(lay.dimensionality)]
req = am.requestVolumeSubset((0,) * 6, tuple(dims) + (1,) * (6 - len(dims)), format=openvds.VolumeDataFormat.Format_R32)
a = req.data.reshape(tuple(reversed(dims)))
np.save(out, a)
t1 = time.perf_counter()
openvds.close(h)
print(f"inner {t1 - t0:.6f} {a.nbytes}")
'''


def run(cmd):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        sys.exit(f"{cmd} failed: {out.decode(errors='replace')}")
    return wall, ru.ru_maxrss // 1024, out.decode()


def main():
    rasterpack, rounds, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    tmp = tempfile.mkdtemp(prefix="openvds-convert-")
    best = {}
    for i in range(rounds):
        for path in files:
            name = os.path.basename(path)
            rp_out, ov_out = os.path.join(tmp, "rp.npy"), os.path.join(tmp, "ov.npy")
            for f in (rp_out, ov_out):
                if os.path.exists(f):
                    os.remove(f)
            os.sync()
            rp, rp_rss, _ = run([rasterpack, "convert", path, rp_out, "--force"])
            os.sync()
            ov, ov_rss, out = run([sys.executable, "-c", INNER, path, ov_out])
            m = re.search(r"inner ([0-9.]+) ([0-9]+)", out)
            inner, nbytes = float(m.group(1)), int(m.group(2))
            same = filecmp.cmp(rp_out, ov_out, shallow=False)
            load = open("/proc/loadavg").read().split()[0]
            print(f"round {i + 1} {name} (load {load}): rasterpack {rp * 1e3:.1f} ms ({rp_rss} MiB) | "
                  f"OpenVDS process {ov * 1e3:.1f} ms ({ov_rss} MiB), read + save {inner * 1e3:.1f} ms | "
                  f"outputs {'identical' if same else 'DIFFER'}", flush=True)
            b = best.setdefault(name, [nbytes, [], [], []])
            b[1].append(rp), b[2].append(ov), b[3].append(inner)
    print(f"best of {rounds}:")
    for name, (nbytes, rp, ov, inner) in best.items():
        mb = nbytes / 1e6
        r, o, n = min(rp), min(ov), min(inner)
        print(f"{name}: rasterpack {r * 1e3:.1f} ms = {mb / r:.0f} MB/s | OpenVDS whole process "
              f"{o * 1e3:.1f} ms = {mb / o:.0f} MB/s, read + save {n * 1e3:.1f} ms = {mb / n:.0f} MB/s")


if __name__ == "__main__":
    main()
