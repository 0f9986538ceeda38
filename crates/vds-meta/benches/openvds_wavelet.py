#!/usr/bin/env python3
"""Wavelet data and reference timings from OpenVDS 3.4.9 (`pip install openvds==3.4.9 numpy`).

rasterpack reads wavelet chunks but cannot write them, so its wavelet bench and oracle tests
take data written by OpenVDS itself:

  openvds_wavelet.py make DIR      the 256 x 256 x 512 float32 pair (BrickSize_64, Wavelet and
                                   WaveletLossless, tolerance 1) for benches/read_wavelet.rs
  openvds_wavelet.py matrix DIR    small datasets over methods / formats / NoValue / shapes,
                                   each with OpenVDS's own LOD0 reads (X.vds.native.raw in the
                                   channel's format, X.vds.r32.raw as float32): the input of
                                   tests/wavelet.rs with RASTERPACK_VDS_ORACLE=DIR
  openvds_wavelet.py sweep DIR     NaN / +-inf values next to finite ones (positions, margins
                                   0-4, bricks 32-128, the four methods), with OpenVDS's reads
                                   like `matrix` (its datasets are part of `matrix` too)
  openvds_wavelet.py time FILE...  OpenVDS's full LOD0 float32 read + np.save, timed

Nothing here is needed to build or test rasterpack.
"""
import os
import sys
import time

import numpy as np
import openvds
from openvds import VolumeDataChannelDescriptor as CD, VolumeDataLayoutDescriptor as LD

FORMATS = {'R32': (CD.Format_R32, np.float32), 'U8': (CD.Format_U8, np.uint8), 'U16': (CD.Format_U16, np.uint16)}


def field(shape_c, kind, rng):
    """Test values in numpy C order (last axis = VDS dim 0)."""
    idx = np.indices(shape_c).astype(np.float64)
    if kind == 'noise':
        return rng.standard_normal(shape_c)
    if kind == 'spiky':
        v = np.zeros(shape_c)
        m = rng.random(shape_c) < 0.01
        v[m] = rng.standard_normal(m.sum()) * 5
        return v
    v = sum(np.sin(idx[k] * (0.07 + 0.05 * k)) for k in range(len(shape_c))) / len(shape_c)
    if kind == 'zerorows':  # rows that start with zeros along dim 0
        cut = rng.integers(0, shape_c[-1] + 1, size=shape_c[:-1])
        v[idx[-1] < cut[..., None]] = 0.0
        return v
    if kind == 'tiny':
        return rng.standard_normal(shape_c) * 1e-39
    return v + 0.05 * rng.standard_normal(shape_c)


def write(path, shape, fmt='R32', method='Wavelet', tol=1.0, brick=64, nov=None, kind='smooth', seed=1,
          vrange=(-1.25, 1.25), margin=0, nonfinite=()):
    rng = np.random.default_rng(seed)
    nd = len(shape)
    layout = LD(getattr(LD.BrickSize, f'BrickSize_{brick}'), margin, margin, 4, LD.LODLevels.LODLevels_None,
                LD.Options.Options_None, 0)
    names = ['Sample', 'Crossline', 'Inline', 'Dim3', 'Dim4', 'Dim5']
    axes = [openvds.VolumeDataAxisDescriptor(shape[k], names[k], 'unitless', 0.0, float(shape[k] - 1))
            for k in range(nd)]
    vformat, dtype = FORMATS[fmt]
    direct, flags = openvds.VolumeDataMapping.Direct, CD.Flags.Default
    if fmt == 'R32':
        ch = (CD(vformat, CD.Components_1, 'Amplitude', '', vrange[0], vrange[1], nov, direct, flags)
              if nov is not None else CD(vformat, CD.Components_1, 'Amplitude', '', vrange[0], vrange[1]))
    else:
        scale = (vrange[1] - vrange[0]) / (254.0 if fmt == 'U8' else 65534.0)
        args = (vformat, CD.Components_1, 'Amplitude', '', vrange[0], vrange[1], direct, 1, flags)
        ch = CD(*args, nov, scale, vrange[0]) if nov is not None else CD(*args, scale, vrange[0])
    if os.path.exists(path):
        os.remove(path)
    vds = openvds.create(path, '', layout, axes, [ch], openvds.MetadataContainer(),
                         getattr(openvds.CompressionMethod, method), tol)
    am = openvds.getAccessManager(vds)
    shape_c = tuple(reversed(shape))
    v = field(shape_c, kind, rng)
    if fmt == 'R32':
        data = (v if kind == 'tiny' else np.clip(v, -3, 3)).astype(np.float32)
        if nov is not None:
            data[rng.random(shape_c) < 0.02] = np.float32(nov)
        # (index along dim 0, value) pairs, set on every line along dim 0; random lines get
        # more at random places.
        flat = data.reshape(-1, shape_c[-1])
        for at, val in nonfinite:
            flat[:, at] = np.float32(val)
        if nonfinite:
            for _ in range(max(1, flat.shape[0] // 8)):
                r, c = rng.integers(flat.shape[0]), rng.integers(shape_c[-1])
                flat[r, c] = np.float32(rng.choice([np.nan, np.inf, -np.inf]))
    else:
        top = 254 if fmt == 'U8' else 65534
        data = np.clip(np.round((v - vrange[0]) / (vrange[1] - vrange[0]) * top), 0, top).astype(dtype)
        if nov is not None:
            data[rng.random(shape_c) < 0.02] = np.iinfo(dtype).max
    dims_nd = openvds.DimensionsND.Dimensions_01 if nd == 2 else openvds.DimensionsND.Dimensions_012
    acc = am.createVolumeDataPageAccessor(dims_nd, 0, 0, 8, openvds.IVolumeDataAccessManager.AccessMode.AccessMode_Create)
    for c in range(acc.getChunkCount()):
        page = acc.createPage(c)
        lo, hi = page.getMinMax()
        buf = np.array(page.getWritableBuffer(), copy=False)
        box = data[tuple(slice(lo[k], hi[k]) for k in reversed(range(nd)))]
        # The page buffer is strided when the brick is cut by the volume's edge: a flat view
        # of it would be a copy, and the values would never reach the file.
        buf[...] = box.reshape(buf.shape)
        page.release()
    acc.commit()
    acc.setMaxPages(0)
    am.flush()
    openvds.close(vds)
    # OpenVDS's own reads of what it wrote.
    h = openvds.open(path, '')
    am = openvds.getAccessManager(h)
    hi = tuple(shape) + (1,) * (6 - nd)
    for suffix, f in (('r32', openvds.VolumeDataFormat.Format_R32), ('native', vformat)):
        r = am.requestVolumeSubset((0,) * 6, hi, dimensionsND=dims_nd, format=f)
        r.data.reshape(shape_c).tofile(f'{path}.{suffix}.raw')
    openvds.close(h)


MATRIX = [
    ('r32_3d_wav', dict(shape=[64, 48, 40], brick=32)),
    ('r32_3d_wavll', dict(shape=[64, 48, 40], method='WaveletLossless', brick=32, kind='noise')),
    ('r32_3d_norm', dict(shape=[70, 33, 21], method='WaveletNormalizeBlock', tol=2.0)),
    ('r32_3d_normll', dict(shape=[70, 33, 21], method='WaveletNormalizeBlockLossless')),
    ('r32_3d_normll_nov', dict(shape=[64, 48, 40], method='WaveletNormalizeBlockLossless', brick=32, nov=-999.25)),
    ('r32_3d_odd_wav', dict(shape=[97, 45, 23], tol=4.0, kind='spiky')),
    ('r32_3d_odd_wavll', dict(shape=[97, 45, 23], method='WaveletLossless')),
    ('r32_3d_zero_wav', dict(shape=[64, 40, 30], kind='zerorows')),
    ('r32_3d_zero_wavll', dict(shape=[300, 20, 10], method='WaveletLossless', brick=128, kind='zerorows')),
    ('r32_3d_tiny_wavll', dict(shape=[40, 40, 40], method='WaveletLossless', kind='tiny')),
    ('r32_3d_nov_wav', dict(shape=[64, 48, 40], brick=32, nov=-999.25)),
    ('r32_3d_nov_wavll', dict(shape=[64, 48, 40], method='WaveletLossless', brick=32, nov=-999.25)),
    ('r32_3d_margin_wav', dict(shape=[90, 70, 50], brick=32, margin=4)),
    ('r32_3d_b128_wavll', dict(shape=[150, 140, 130], method='WaveletLossless', brick=128)),
    ('r32_3d_b256_wav', dict(shape=[260, 40, 30], brick=256)),
    ('r32_3d_9x9x9_wav', dict(shape=[9, 9, 9], brick=32, kind='noise')),
    ('r32_3d_7x7x7_wavll', dict(shape=[7, 7, 7], method='WaveletLossless', brick=32, kind='noise')),
    ('r32_2d_wav', dict(shape=[200, 150])),
    ('r32_2d_wavll', dict(shape=[200, 150], method='WaveletLossless', kind='noise')),
    ('r32_2d_norm', dict(shape=[130, 90], method='WaveletNormalizeBlock', brick=32)),
    ('r32_4d_wav', dict(shape=[40, 30, 20, 3], brick=32)),
    ('r32_4d_wavll', dict(shape=[40, 30, 20, 3], method='WaveletLossless', brick=32)),
    ('odd_32x8x100_wav', dict(shape=[32, 8, 100], brick=128, kind='noise')),
    ('odd_8x64x100_wavll', dict(shape=[8, 64, 100], method='WaveletLossless', brick=128)),
    ('odd_100x3x60_wavll', dict(shape=[100, 3, 60], method='WaveletLossless', brick=128, kind='noise')),
    ('odd_5x70x90_wav', dict(shape=[5, 70, 90], brick=128)),
    ('odd_2d_7x300_wavll', dict(shape=[7, 300], method='WaveletLossless', kind='noise')),
    ('u8_3d_wav', dict(shape=[64, 48, 40], fmt='U8', brick=32)),
    ('u8_3d_wavll', dict(shape=[64, 48, 40], fmt='U8', method='WaveletLossless', brick=32, kind='noise')),
    ('u8_3d_nov_wavll', dict(shape=[64, 48, 40], fmt='U8', method='WaveletLossless', brick=32, nov=-5.0)),
    # NoValue 3.0: OpenVDS also maps decoded code 3 to the NoValue code.
    ('u8_3d_nov3_wavll', dict(shape=[64, 48, 40], fmt='U8', method='WaveletLossless', brick=32, nov=3.0, kind='noise')),
    # A float stream in a U8 channel: OpenVDS's R32 read is raw, its U8 read quantizes it.
    ('u8_3d_norm', dict(shape=[64, 48, 40], fmt='U8', method='WaveletNormalizeBlock', brick=32)),
    ('u16_3d_wav', dict(shape=[64, 48, 40], fmt='U16', brick=32)),
    ('u16_3d_nov_wav', dict(shape=[64, 48, 40], fmt='U16', brick=32, nov=-5.0)),
    ('u16_3d_nov_wavll', dict(shape=[64, 48, 40], fmt='U16', method='WaveletLossless', brick=32, nov=-5.0)),
    ('u16_3d_normll', dict(shape=[64, 48, 40], fmt='U16', method='WaveletNormalizeBlockLossless', brick=32, nov=-5.0)),
    ('u16_2d_nov_wav', dict(shape=[150, 130], fmt='U16', nov=-5.0)),
]

METHODS = ('Wavelet', 'WaveletLossless', 'WaveletNormalizeBlock', 'WaveletNormalizeBlockLossless')
SHORT = dict(zip(METHODS, ('wav', 'wavll', 'norm', 'normll')))


def sweep():
    """NaN and +-inf among finite values: OpenVDS's transform spreads them over their
    neighbours, so what the decoder must reproduce is which NaN bits come out of each lifting
    step (a NaN's sign reaches finite voxels through the lossless residual)."""
    out = []
    for m in METHODS:
        # 1-D lines (2-D datasets of one row), like edges/vds/wnbl_nan_inf_margin4.vds.
        for margin in range(5):
            for brick, n in ((32, 150), (64, 424), (128, 300)):
                for k, nf in enumerate((
                        [(n // 2 + 9, np.nan), (n // 2 + 21, np.inf)],
                        [(3, -np.inf), (n - 5, np.nan)],
                        [(n // 3, np.inf), (n // 3 + 1, -np.inf)],
                        [(n // 4, np.nan)])):
                    if (margin + brick // 32 + k) % 2:  # half of the grid keeps the run short
                        continue
                    out.append((f'nf_{SHORT[m]}_line{n}_b{brick}_m{margin}_{k}',
                                dict(shape=[n, 1], method=m, brick=brick, margin=margin, tol=0.0 if 'Lossless' in m else 1.0,
                                     kind='noise', seed=7 + margin + k, nonfinite=nf, vrange=(-1.5, 1.5))))
        # 2-D and 3-D bricks.
        out.append((f'nf_{SHORT[m]}_2d', dict(shape=[90, 70], method=m, brick=32, margin=2, kind='noise',
                                              nonfinite=[(40, np.nan), (47, np.inf)])))
        out.append((f'nf_{SHORT[m]}_3d', dict(shape=[40, 36, 20], method=m, brick=32, margin=1,
                                              nonfinite=[(10, -np.inf), (21, np.nan)])))
        # Odd sizes: rows whose length is not a multiple of 4 reach OpenVDS's scalar loops.
        out.append((f'nf_{SHORT[m]}_2d_odd', dict(shape=[75, 37], method=m, brick=32, margin=3, kind='noise',
                                                  nonfinite=[(20, -np.inf), (21, np.nan), (60, np.inf)])))
        out.append((f'nf_{SHORT[m]}_3d_odd', dict(shape=[45, 23, 13], method=m, brick=64, kind='noise',
                                                  nonfinite=[(7, np.nan), (30, np.inf), (31, -np.inf)])))
    return out


def time_read(path):
    out = path + '.openvds.npy'
    t0 = time.perf_counter()
    h = openvds.open(path, '')
    am = openvds.getAccessManager(h)
    lay = am.volumeDataLayout
    dims = [lay.getDimensionNumSamples(d) for d in range(lay.dimensionality)]
    r = am.requestVolumeSubset((0,) * 6, tuple(dims) + (1,) * (6 - len(dims)), format=openvds.VolumeDataFormat.Format_R32)
    a = r.data.reshape(tuple(reversed(dims)))
    t1 = time.perf_counter()
    np.save(out, a)
    t2 = time.perf_counter()
    openvds.close(h)
    os.remove(out)
    mb = a.nbytes / 1e6
    print(f'openvds {openvds.getOpenVDSVersion()} {path}: read {t1 - t0:.3f} s ({mb / (t1 - t0):.0f} MB/s), '
          f'read + np.save {t2 - t0:.3f} s ({mb / (t2 - t0):.0f} MB/s)')


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ('make', 'matrix', 'sweep', 'time'):
        sys.exit(__doc__)
    cmd, rest = sys.argv[1], sys.argv[2:]
    if cmd == 'time':
        for p in rest:
            time_read(p)
        return
    os.makedirs(rest[0], exist_ok=True)
    if cmd == 'make':
        for m in ('Wavelet', 'WaveletLossless'):
            p = os.path.join(rest[0], f'wav256_{m}.vds')
            write(p, [256, 256, 512], method=m, brick=64, vrange=(-1.5, 1.5))
            print(p, os.path.getsize(p))
    else:
        for name, kw in (MATRIX if cmd == 'matrix' else []) + sweep():
            write(os.path.join(rest[0], name + '.vds'), **kw)
            print('wrote', name)


if __name__ == '__main__':
    main()
