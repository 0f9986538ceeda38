"""Write U8/U16 datasets with OpenVDS (openvds==3.4.9 from PyPI) from known codes, for
tests/float_codes.rs: OpenVDS 3.4.9 stores U8/U16 channels compressed with
WaveletNormalizeBlock[Lossless] as float wavelet streams of the written codes.

usage: python float_codes.py OUT_DIR
Writes OUT_DIR/<name>.vds, OUT_DIR/<name>.codes (the codes written, C order = the read's
order, little-endian) and OUT_DIR/cases.json (name, format, scale, offset per case).
"""
import json
import sys

import numpy as np
import openvds

out = sys.argv[1]
L = openvds.VolumeDataLayoutDescriptor
C = openvds.VolumeDataChannelDescriptor
cases = []
rng = np.random.default_rng(17)
for fmt, bits in (("U8", 8), ("U16", 16)):
    # The lossy WaveletNormalizeBlock makes float streams too, but reads back only near the codes.
    for method in ("WaveletNormalizeBlockLossless",):
        for brick, dims in ((32, (40, 36, 9)), (64, (70, 33, 5)), (128, (130, 3, 2))):
            name = f"{fmt.lower()}_{method}_{brick}"
            top = (1 << bits) - 1
            scale, offset = 3.0 / top, -1.5
            # A smooth field with noise: codes over most of the range, 0 and top included.
            z, y, x = np.meshgrid(*(np.arange(n) for n in dims[::-1]), indexing="ij")
            f = np.sin(x / 7.0) * np.cos(y / 5.0) + 0.3 * np.sin(z / 2.0)
            f = (f - f.min()) / (f.max() - f.min())
            codes = np.clip(np.round(f * top + rng.normal(0, top / 60.0, f.shape)), 0, top)
            codes = codes.astype(np.uint8 if bits == 8 else np.uint16)
            layout = L(getattr(L.BrickSize, f"BrickSize_{brick}"), 0, 0, 4, L.LODLevels.LODLevels_None, L.Options.Options_None)
            axes = [
                openvds.VolumeDataAxisDescriptor(dims[0], "Sample", "ms", 0.0, float(dims[0] - 1)),
                openvds.VolumeDataAxisDescriptor(dims[1], "Crossline", "", 1.0, float(dims[1])),
                openvds.VolumeDataAxisDescriptor(dims[2], "Inline", "", 1.0, float(dims[2])),
            ]
            channel = C(getattr(C.Format, f"Format_{fmt}"), C.Components.Components_1, "Amplitude", "",
                        offset, offset + scale * top, openvds.VolumeDataMapping.Direct, 1, C.Flags.Default,
                        0.0, scale, offset)
            path = f"{out}/{name}.vds"
            vds = openvds.create(path, "", layout, axes, [channel], openvds.MetadataContainer(),
                                 getattr(openvds.CompressionMethod, method), 0.0)
            access = openvds.getAccessManager(vds)
            pages = access.createVolumeDataPageAccessor(openvds.DimensionsND.Dimensions_012, 0, 0, 8,
                                                        access.AccessMode.AccessMode_Create)
            for c in range(pages.getChunkCount()):
                page = pages.createPage(c)
                buf = np.array(page.getWritableBuffer(), copy=False)
                lo, hi = page.getMinMax()
                buf[...] = codes[lo[2]:hi[2], lo[1]:hi[1], lo[0]:hi[0]]
                page.release()
            pages.commit()
            pages.setMaxPages(0)
            openvds.close(vds)
            codes.astype(codes.dtype.newbyteorder("<")).tofile(f"{out}/{name}.codes")
            cases.append({"name": name, "format": fmt, "scale": scale, "offset": offset})
with open(f"{out}/cases.json", "w") as fh:
    json.dump(cases, fh)
