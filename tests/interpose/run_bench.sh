#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Times MPI_Allreduce of doubles (mpi_allreduce_bench) under mpirun plainly, with libconflux_mpi.so at its
# default thresholds, and with libconflux_mpi.so routing every size (CFX_MPI_ALLREDUCE_MIN_BYTES=0), the three
# runs interleaved REPS times so that load from other processes hits all of them alike. Prints a Markdown
# table of the per-size medians (microseconds per call; each run already reports the median of 5 timings).
#
#   run_bench.sh MPIEXEC NP PRELOAD_LIB BENCH [MAX_BYTES [REPS]]
set -eu
mpiexec=$1 np=$2 lib=$3 bench=$4 max=${5:-268435456} reps=${6:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

set -- --mca btl self,vader,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x NCCL_SOCKET_IFNAME=lo \
  --oversubscribe -np "$np" "$bench" "$max"
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  set -- --allow-run-as-root "$@"
fi
i=1
while [ "$i" -le "$reps" ]; do
  "$mpiexec" "$@" >"$work/plain.$i"
  "$mpiexec" -x LD_PRELOAD="$lib" "$@" >"$work/cfx.$i"
  "$mpiexec" -x LD_PRELOAD="$lib" -x CFX_MPI_ALLREDUCE_MIN_BYTES=0 "$@" >"$work/all.$i"
  i=$((i + 1))
done

# Median over the runs of one kind for each size (column 2 of the bench's rows).
median() {
  cat "$work/$1".* | awk '$1 ~ /^[0-9]+$/ { print $1, $2 }' | sort -k1,1n -k2,2g |
    awk '{ n[$1]++; v[$1, n[$1]] = $2 } END { for (b in n) print b, v[b, int((n[b] + 1) / 2)] }' | sort -n
}
median plain >"$work/m.plain"
median cfx >"$work/m.cfx"
median all >"$work/m.all"
echo "| bytes | Open MPI (us) | interposer, default thresholds (us) | speed-up | interposer, every size routed (us) |"
echo "|---:|---:|---:|---:|---:|"
join "$work/m.plain" "$work/m.cfx" | join - "$work/m.all" |
  awk '{ printf "| %s | %.1f | %.1f | %.2fx | %.1f |\n", $1, $2, $3, $2 / $3, $4 }'
