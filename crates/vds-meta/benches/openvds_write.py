#!/usr/bin/env python3
"""OpenVDS 3.4.9's own write of a .npy volume, the reference for `rasterpack convert X.npy
Y.vds` (docs/performance.md): np.load, openvds.create (BrickSize_64, no margins, no LODs), a
page accessor over Dimensions_012 LOD0 filling every page from the array, commit, close.

usage: python openvds_write.py IN.npy OUT.vds none|rle|zip
       python openvds_write.py --make OUT.npy     the 256 x 256 x 512 float32 test volume

Nothing here is needed to build or test rasterpack.
"""
import os
import sys

import numpy as np


def make(path):
    # A smooth field with noise and a flat part: compressible like seismic, not trivially.
    rng = np.random.default_rng(21)
    z, y, x = np.meshgrid(np.arange(256), np.arange(256), np.arange(512), indexing="ij")
    a = np.sin(x / 9.0) * np.cos(y / 13.0) + 0.2 * np.sin(z / 5.0)
    a += 0.05 * rng.standard_normal(a.shape)
    a[:, :, :64] = 0.0
    np.save(path, a.astype(np.float32))


def write(src, dst, method):
    import openvds
    L = openvds.VolumeDataLayoutDescriptor
    C = openvds.VolumeDataChannelDescriptor
    a = np.load(src)
    dims = list(reversed(a.shape))
    layout = L(L.BrickSize.BrickSize_64, 0, 0, 4, L.LODLevels.LODLevels_None, L.Options.Options_None)
    names = ["Sample", "Crossline", "Inline"]
    axes = [openvds.VolumeDataAxisDescriptor(dims[d], names[d], "", 0.0, float(dims[d] - 1)) for d in range(3)]
    channel = C(C.Format.Format_R32, C.Components.Components_1, "Amplitude", "", float(a.min()), float(a.max()))
    comp = {"none": "None", "rle": "RLE", "zip": "Zip"}[method]
    if os.path.exists(dst):
        os.remove(dst)
    vds = openvds.create(dst, "", layout, axes, [channel], openvds.MetadataContainer(),
                         getattr(openvds.CompressionMethod, comp), 0.0)
    access = openvds.getAccessManager(vds)
    pages = access.createVolumeDataPageAccessor(openvds.DimensionsND.Dimensions_012, 0, 0, 8,
                                                access.AccessMode.AccessMode_Create)
    for c in range(pages.getChunkCount()):
        page = pages.createPage(c)
        buf = np.array(page.getWritableBuffer(), copy=False)
        lo, hi = page.getMinMax()
        buf[...] = a[lo[2]:hi[2], lo[1]:hi[1], lo[0]:hi[0]]
        page.release()
    pages.commit()
    pages.setMaxPages(0)
    openvds.close(vds)


if __name__ == "__main__":
    if sys.argv[1] == "--make":
        make(sys.argv[2])
    else:
        write(sys.argv[1], sys.argv[2], sys.argv[3])
