"""OpenVDS (openvds==3.4.9 from PyPI) against a loopback S3 server, for cli/tests/store_vds.rs
and the benchmark in docs/performance.md.

usage:
  python vds_s3.py create ENDPOINT BUCKET                  make the bucket (boto3)
  python vds_s3.py write ENDPOINT s3://BUCKET/PREFIX METHOD NX NY NZ BRICK [NOISE]
      OpenVDS writes a 3-D R32 dataset (X fastest, NX samples) in its cloud layout, compressed
      with METHOD (None, Zip, Wavelet, ...), from a smooth field with normal noise of standard
      deviation NOISE (default 0.05, seed 7); NOISE 0 rounds the field to steps of 1/16 instead
      (few distinct values: Zip makes it small, a quick upload for the request-log test)
  python vds_s3.py sizes ENDPOINT BUCKET PREFIX
      prints {key: size} of the objects under PREFIX/ as JSON (keys relative to PREFIX/)
  python vds_s3.py read ENDPOINT s3://BUCKET/PREFIX OUT.npy [LOD]
      OpenVDS reads level of detail LOD (default 0) of channel 0 of a 3-D dataset whole
      (requestVolumeSubset; LOD k has ceil(n / 2^k) samples per axis) and np.save's it in C
      order (slowest axis first, as rasterpack's .npy)
"""
import sys

import numpy as np


def connection(endpoint):
    return (f"Region=us-east-1;EndpointOverride={endpoint};"
            "AccessKeyId=testing;SecretKey=testing")


def create(endpoint, bucket):
    import boto3
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.create_bucket(Bucket=bucket)


def sizes(endpoint, bucket, prefix):
    import json
    import boto3
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        for o in page.get("Contents", []):
            out[o["Key"][len(prefix) + 1:]] = o["Size"]
    print(json.dumps(out))


def field(nx, ny, nz, noise):
    rng = np.random.default_rng(7)
    # Broadcast axes (no full-size coordinate grids), f32 throughout.
    x = np.arange(nx, dtype=np.float32)[None, None, :]
    y = np.arange(ny, dtype=np.float32)[None, :, None]
    z = np.arange(nz, dtype=np.float32)[:, None, None]
    f = np.sin(x / 9.0) * np.cos(y / 7.0) + np.float32(0.25) * np.sin(z / 3.0)
    if noise > 0:
        f = f + rng.normal(0, noise, f.shape).astype(np.float32)
    else:
        f = np.round(f * 16) / 16
    return f.astype(np.float32)


def write(endpoint, url, method, nx, ny, nz, brick, noise):
    import openvds
    L = openvds.VolumeDataLayoutDescriptor
    C = openvds.VolumeDataChannelDescriptor
    data = field(nx, ny, nz, noise)
    layout = L(getattr(L.BrickSize, f"BrickSize_{brick}"), 0, 0, 4, L.LODLevels.LODLevels_None,
               L.Options.Options_None)
    axes = [
        openvds.VolumeDataAxisDescriptor(nx, "Sample", "ms", 0.0, float(nx - 1) * 4),
        openvds.VolumeDataAxisDescriptor(ny, "Crossline", "", 1.0, float(ny)),
        openvds.VolumeDataAxisDescriptor(nz, "Inline", "", 1.0, float(nz)),
    ]
    lo, hi = float(data.min()), float(data.max())
    channel = C(C.Format.Format_R32, C.Components.Components_1, "Amplitude", "", lo, hi)
    vds = openvds.create(url, connection(endpoint), layout, axes, [channel],
                         openvds.MetadataContainer(), getattr(openvds.CompressionMethod, method),
                         0.01 if method.startswith("Wavelet") else 0.0)
    access = openvds.getAccessManager(vds)
    pages = access.createVolumeDataPageAccessor(openvds.DimensionsND.Dimensions_012, 0, 0, 8,
                                                access.AccessMode.AccessMode_Create)
    for c in range(pages.getChunkCount()):
        page = pages.createPage(c)
        buf = np.array(page.getWritableBuffer(), copy=False)
        a, b = page.getMinMax()
        buf[...] = data[a[2]:b[2], a[1]:b[1], a[0]:b[0]]
        page.release()
    pages.commit()
    pages.setMaxPages(0)
    openvds.close(vds)


def read(endpoint, url, out, lod=0):
    import openvds
    vds = openvds.open(url, connection(endpoint))
    layout = openvds.getLayout(vds)
    access = openvds.getAccessManager(vds)
    dims = [layout.getDimensionNumSamples(d) for d in range(layout.getDimensionality())]
    hi = tuple(dims) + (1,) * (6 - len(dims))
    req = access.requestVolumeSubset((0,) * 6, hi, lod=lod, channel=0,
                                     dimensionsND=openvds.DimensionsND.Dimensions_012)
    step = 1 << lod
    data = req.data.reshape([(d + step - 1) // step for d in dims[::-1]])
    np.save(out, data)
    openvds.close(vds)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "create":
        create(sys.argv[2], sys.argv[3])
    elif cmd == "write":
        e, u, m = sys.argv[2:5]
        nx, ny, nz, brick = (int(v) for v in sys.argv[5:9])
        noise = float(sys.argv[9]) if len(sys.argv) > 9 else 0.05
        write(e, u, m, nx, ny, nz, brick, noise)
    elif cmd == "sizes":
        sizes(*sys.argv[2:5])
    elif cmd == "read":
        read(*sys.argv[2:5], *(int(v) for v in sys.argv[5:6]))
    else:
        sys.exit(f"unknown command {cmd}")
