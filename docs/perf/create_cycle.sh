#!/bin/sh
# The file creations of a GVRS -> Zarr convert without rasterpack (docs/performance.md, "GVRS ->
# Zarr: what the system time is"): N times create BASE/sI holding 34 x 34 files of 5000 bytes in
# 34 directories (the 4000 x 4000 grid's chunk files), then, as `convert --force` does with the
# store it replaces, remove the previous one; with `keep`, never remove (a new name every time).
# Prints each creation's wall, user and system seconds (GNU time).
# usage: cc -O2 -pthread -o mkfiles mkfiles.c && ./create_cycle.sh BASE THREADS same|split N [keep]
B=$1; T=$2; M=$3; N=$4; KEEP=$5
rm -rf "$B"; mkdir -p "$B"
for i in $(seq 1 "$N"); do
  /usr/bin/time -f "%e s wall %U user %S sys" ./mkfiles "$B/s$i" 34 34 5000 "$T" "$M" 2>&1
  [ -z "$KEEP" ] && [ "$i" -gt 1 ] && rm -rf "$B/s$((i-1))"
done
rm -rf "$B"
