#!/bin/sh
# Seeds for the npz_file fuzz target: small valid .npz archives written by rasterpack's own
# writer from the files in testdata/ (stored and deflated members, one or several arrays,
# every dtype testdata holds, regions that make tiny and empty-ish arrays), so the fuzzer
# starts inside the ZIP central directory instead of spending its time finding one.
#
#   fuzz/seeds/npz.sh [OUT_DIR]    (default fuzz/corpus/npz_file; RASTERPACK=path/to/binary,
#                                   default target/release/rasterpack, built if missing)
#   cd fuzz && cargo fuzz run -s none npz_file corpus/npz_file -- -max_total_time=300
#
# Nothing here is committed: the seeds are made again from testdata whenever needed.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/fuzz/corpus/npz_file}
bin=${RASTERPACK:-$root/target/release/rasterpack}
if [ ! -x "$bin" ]; then
    (cd "$root" && cargo build --release -p rasterpack --bin rasterpack)
fi
mkdir -p "$out"
n=0
seed() {
    # seed NAME SOURCE [convert flags...]: both member compressions; a source or flag the
    # writer refuses is skipped (and said), not fatal.
    name=$1
    src=$2
    shift 2
    for c in none deflate; do
        if "$bin" convert "$src" "$out/$name.$c.npz" --compress "$c" --force "$@" 2>/dev/null; then
            n=$((n + 1))
        else
            echo "npz seeds: skipped $name ($c): convert $src $* refused" >&2
        fi
    done
}
t=$root/testdata
# Every array of a file in one archive (several members, several dtypes).
seed gvrs_all "$t/gvrs/crafted_all_types.gvrs"
seed gvrs_compressed "$t/gvrs/crafted_compressed.gvrs"
seed fold "$t/fold/sample.fold"
seed udf "$t/udf/sample.udf"
# Single arrays, small regions (short members, 1-D after an index).
seed volp_cloud "$t/volp/cloud_2x8x8_float32.volp"
seed volp_int16 "$t/volp/temperature_4x32x32_int16.volp" --region 0:2,0:4,0:4
seed volp_row "$t/volp/temperature_4x32x32_int16.volp" --region 1,3,:
seed vds_u8 "$t/vds/small_u8_rle_novalue.vds" --region 0:2,0:3,0:4
seed vds_4d "$t/vds/small_4d_r32_none_lod1.vds" --lod 1
seed vds_r32 "$t/vds/small_r32_zip.vds" --region 0:3,0:3,0:3
# Written to a pipe: members with data descriptors (flag bit 3) after their data.
for c in none deflate; do
    if "$bin" convert "$t/gvrs/crafted_all_types.gvrs" - --to npz --compress "$c" >"$out/stream.$c.npz" 2>/dev/null; then
        n=$((n + 1))
    else
        echo "npz seeds: skipped stream ($c)" >&2
        rm -f "$out/stream.$c.npz"
    fi
done
echo "npz seeds: $n archives in $out" >&2
