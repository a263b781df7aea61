#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Issue 40: many ranks on one host. Runs every collective once on PROCS processes x THREADS ranks each (64 by
# default, oversubscribed), with tiny sizes and -c 1, so every pair of processes talks over shm FIFOs shrunk to
# the host bound (CFX_SHM_HOST_BYTES, docs/notes/scale.md); a wrong element exits 7, a hang is killed by
# --timeout. After each run /dev/shm must hold no segment of ours: communicators of several sizes come and go.
# Usage: scale_test.sh <cfxrun> <perf dir> [procs] [threads]
set -u
cfxrun=$1
dir=$2
procs=${3:-8}
threads=${4:-8}
prefix="cfxscale$$"
export CFX_SHM_PREFIX="$prefix" NCCL_SOCKET_IFNAME=lo
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; rm -f /dev/shm/"$prefix"-*' EXIT
fail=0

# run NAME PROCS THREADS ARGS...: one communicator of PROCS x THREADS ranks.
run() {
  name=$1 p=$2 t=$3
  shift 3
  if ! "$cfxrun" -n "$p" --timeout 120 "$dir/${name}_perf" -t "$t" -c 1 -n 1 -w 0 "$@" >"$tmp/out" 2>&1; then
    echo "FAIL: $name on $p x $t ranks:"; tail -20 "$tmp/out"; fail=1
    return
  fi
  left=$(ls /dev/shm | grep -c "^$prefix-")
  if [ "$left" != 0 ]; then
    echo "FAIL: $name on $p x $t ranks left $left segment(s) in /dev/shm"; fail=1
  else
    echo "ok: $name on $p x $t ranks"
  fi
}

for coll in all_reduce all_gather reduce_scatter alltoall sendrecv hypercube; do
  run "$coll" "$procs" "$threads" -b 64 -e 4K -f 64
done
for coll in broadcast reduce gather scatter; do
  run "$coll" "$procs" "$threads" -b 64 -e 4K -f 64 -r -1
done
run scan "$procs" "$threads" -b 64 -e 4K -f 64
# Sizes that come and go: a communicator with the default FIFOs, then shrunk ones of other sizes.
run all_reduce 4 1 -b 64 -e 64K -f 32
run alltoall 24 1 -b 64 -e 64K -f 32
run all_reduce 9 3 -b 64 -e 64K -f 32
exit $fail
