"""OpenVDS (openvds==3.4.9 from PyPI) reads the datasets rasterpack's VDS writer wrote, for
tests/write_oracle.rs: every LOD of every dataset through requestVolumeSubset, in the
channel's own format (bit for bit the input, decimated by 2^lod along the brick axes) and, for
U8/U16 channels, as float32 (code * integerScale + integerOffset in float32; the top code is
noValue when the channel has one).

usage: python write_check.py DIR
DIR/cases.json lists the datasets: name, path (a .vds file, or a directory served here over
HTTP, which OpenVDS reads like a cloud bucket), shape (C order), lods, and channels: per channel
its index, name, dtype, raw (the input, little-endian C order), scale, offset, no_value; and
optionally axes (name, unit, min, max per dimension, dimension 0 first) and metadata (category,
name, type Int/Double/String, value) OpenVDS must see. Prints one line per dataset, channel and
LOD, axis and metadata item; exits 1 when any differs.
"""
import functools
import http.server
import json
import os
import sys
import threading

import numpy as np
import openvds

out = sys.argv[1]
cases = json.load(open(os.path.join(out, "cases.json")))


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=out))
threading.Thread(target=server.serve_forever, daemon=True).start()
port = server.server_address[1]

F = openvds.VolumeDataFormat
NATIVE = {"uint8": F.Format_U8, "uint16": F.Format_U16, "uint32": F.Format_U32, "uint64": F.Format_U64,
          "float32": F.Format_R32, "float64": F.Format_R64, "bool": F.Format_U8}
failed = 0
for case in cases:
    path = case["path"]
    url = os.path.join(out, path) if path.endswith(".vds") else f"http://127.0.0.1:{port}/{path}"
    # A 1-D array is written as a 2-D volume of one trace (OpenVDS 3.4.9 crashes on 1-D).
    shape = case["shape"] if len(case["shape"]) > 1 else [1] + case["shape"]
    n = len(shape)
    handle = openvds.open(url, "")
    access = openvds.getAccessManager(handle)
    layout = access.volumeDataLayout
    dims = [layout.getDimensionNumSamples(d) for d in range(layout.dimensionality)]
    assert dims == list(reversed(shape)), (case["name"], dims)
    assert layout.channelCount == len(case["channels"]), (case["name"], layout.channelCount)
    # The axis descriptors and metadata items the case expects, as OpenVDS sees them.
    for d, want in enumerate(case.get("axes", [])):
        ad = layout.getAxisDescriptor(d)
        got = {"name": ad.name, "unit": ad.unit, "min": ad.coordinateMin, "max": ad.coordinateMax}
        same = got == want
        print(f"{case['name']} axis {d}: {'equal' if same else f'DIFFERS {got} != {want}'}", flush=True)
        failed += not same
    for m in case.get("metadata", []):
        cat, name = m["category"], m["name"]
        available = getattr(layout, f"isMetadata{m['type']}Available")(cat, name)
        got = getattr(layout, f"getMetadata{m['type']}")(cat, name) if available else None
        same = available and got == m["value"]
        print(f"{case['name']} metadata {cat}/{name}: {'equal' if same else f'DIFFERS {got!r}'}", flush=True)
        failed += not same
    for chan in case["channels"]:
        c = chan["channel"]
        assert layout.getChannelName(c) == chan["name"], (case["name"], c, layout.getChannelName(c))
        dtype = np.dtype(chan["dtype"]).newbyteorder("<")
        a = np.fromfile(os.path.join(out, chan["raw"]), dtype=dtype).reshape(shape)
        for lod in range(case["lods"] + 1):
            # LOD k keeps every 2^k-th sample along the brick axes (not a 4-D array's first axis).
            want = a[tuple(slice(None) if (n == 4 and ax == 0) else slice(None, None, 1 << lod) for ax in range(n))]
            group = openvds.DimensionsND.Dimensions_012 if n >= 3 else openvds.DimensionsND.Dimensions_01
            # A 4-D volume is read one dimension-3 index at a time: that dimension is outside the
            # brick group (every index stored at every LOD), but a box request at LOD k > 0 would
            # step it by 2^k too.
            outer = dims[3] if n == 4 else 1

            def read(fmt):
                parts = []
                for t in range(outer):
                    lo = (0, 0, 0, t, 0, 0) if n == 4 else (0,) * 6
                    hi = tuple(dims[:3]) + (t + 1, 1, 1) if n == 4 else tuple(dims) + (1,) * (6 - n)
                    parts.append(access.requestVolumeSubset(lo, hi, lod=lod, channel=c, dimensionsND=group,
                                                            format=fmt).data)
                return np.concatenate(parts).reshape(want.shape)

            got = read(NATIVE[chan["dtype"]])
            if chan["dtype"] == "bool":
                # OpenVDS gives 1-bit samples as 0/1 bytes in U8.
                same = np.array_equal(got, want.astype(np.uint8))
            else:
                same = np.array_equal(got.view(np.uint8), np.ascontiguousarray(want).view(np.uint8))
            line = f"{case['name']} channel {c} ({chan['name']}) LOD {lod}: native {'equal' if same else 'DIFFERS'}"
            if chan["dtype"] in ("uint8", "uint16"):
                top = 255 if chan["dtype"] == "uint8" else 65535
                phys = want.astype(np.float32) * np.float32(chan["scale"]) + np.float32(chan["offset"])
                if chan["no_value"] is not None:
                    phys[want == top] = np.float32(chan["no_value"])
                f = read(F.Format_R32)
                fsame = np.array_equal(f.view(np.uint32), phys.view(np.uint32))
                line += f", float32 {'equal' if fsame else 'DIFFERS'}"
                same = same and fsame
            print(line, flush=True)
            failed += not same
    openvds.close(handle)
server.shutdown()
print(f"{len(cases)} datasets, {failed} reads differ")
sys.exit(1 if failed else 0)
