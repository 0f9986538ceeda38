"""Zarr stores written by zarr-python 3, with the values each holds saved beside it as .npy:
the oracle of cli/tests/zarr_in.rs, which runs this with $RASTERPACK_PYTHON into a temporary
folder (nothing here is committed output). Usage: python make_python_stores.py OUT_DIR
Prints the names of the cases as a JSON list."""
import sys, json, numpy as np, zarr
from zarr.codecs import GzipCodec, ZstdCodec, BytesCodec, ShardingCodec, BloscCodec
out = sys.argv[1]
cases = []
def save(name, arr, fill=None):
    np.save(f"{out}/{name}.npy", arr)
    cases.append(name)
rng = np.random.default_rng(7)
a = (rng.standard_normal((37, 23, 11)) * 100).astype("float32")
# v3, zstd, partial edge chunks
z = zarr.create_array(f"{out}/v3_zstd.zarr", shape=a.shape, chunks=(8, 8, 4), dtype="float32",
                      compressors=ZstdCodec(level=3), dimension_names=["z", "y", "x"], attributes={"units": "m"})
z[:] = a; save("v3_zstd", a)
z = zarr.create_array(f"{out}/v3_gzip.zarr", shape=a.shape, chunks=(5, 23, 11), dtype="float32",
                      compressors=GzipCodec(level=5))
z[:] = a; save("v3_gzip", a)
b = rng.integers(-30000, 30000, size=(50, 41)).astype("int16")
z = zarr.create_array(f"{out}/v3_none.zarr", shape=b.shape, chunks=(7, 9), dtype="int16", compressors=None)
z[:] = b; save("v3_none", b)
# blosc
z = zarr.create_array(f"{out}/v3_blosc.zarr", shape=b.shape, chunks=(16, 16), dtype="int16", compressors=BloscCodec())
z[:] = b; save("v3_blosc", b)
# sharding
c = rng.integers(0, 65535, size=(40, 36)).astype("uint16")
z = zarr.create_array(f"{out}/v3_shard.zarr", shape=c.shape, shards=(16, 18), chunks=(8, 6), dtype="uint16",
                      compressors=ZstdCodec())
z[:] = c; save("v3_shard", c)
# missing chunks = fill
d = np.full((30, 20), -7.5, dtype="float64")
z = zarr.create_array(f"{out}/v3_fill.zarr", shape=d.shape, chunks=(10, 10), dtype="float64", fill_value=-7.5)
z[0:10, 0:10] = np.arange(100, dtype="float64").reshape(10, 10)
d[0:10, 0:10] = np.arange(100, dtype="float64").reshape(10, 10)
save("v3_fill", d)
# v2
e = (rng.standard_normal((25, 19)) * 10).astype("float64")
z = zarr.create_array(f"{out}/v2_zlib.zarr", shape=e.shape, chunks=(10, 10), dtype="float64", zarr_format=2)
z[:] = e; save("v2_default", e)
import numcodecs
z = zarr.create_array(f"{out}/v2_gzip.zarr", shape=e.shape, chunks=(6, 19), dtype=">f8", zarr_format=2,
                      compressors=numcodecs.GZip(level=4), fill_value=0)
z[:] = e; save("v2_gzip", e)
z = zarr.create_array(f"{out}/v2_blosc.zarr", shape=e.shape, chunks=(8, 8), dtype="<f8", zarr_format=2,
                      compressors=numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.BITSHUFFLE))
z[:] = e; save("v2_blosc", e)
f = rng.integers(0, 255, size=(33, 17)).astype("uint8")
z = zarr.create_array(f"{out}/v2_none.zarr", shape=f.shape, chunks=(8, 8), dtype="uint8", zarr_format=2, compressors=None)
z[:] = f; save("v2_none", f)
# group
g = zarr.open_group(f"{out}/group.zarr", mode="w")
ga = g.create_array("amp", shape=a.shape, chunks=(16, 16, 16), dtype="float32")
ga[:] = a
sub = g.create_group("sub")
gb = sub.create_array("codes", shape=b.shape, chunks=(25, 41), dtype="int16")
gb[:] = b
save("group_amp", a); save("group_sub_codes", b)
# strings: unsupported
try:
    zarr.create_array(f"{out}/v3_string.zarr", shape=(4,), chunks=(2,), dtype=str)[:] = np.array(["a", "bb", "c", "d"])
except Exception as ex:
    print("string:", ex, file=sys.stderr)
print(json.dumps(cases))
