#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Times the collectives of mpi_coll_bench under mpirun plainly and with libconflux_mpi.so routing every size
# (every CFX_MPI_<COLL>_MIN_BYTES=0 and no pass-through band), so that Conflux itself is measured, not the
# routing rule. MODES (default plain,routed) picks the runs, plain first: "default" uses the library's default
# rules (the check that the defaults are never slower than plain MPI). The runs are interleaved REPS times so
# that load from other processes hits all of them alike. Prints one Markdown table per collective of the
# per-size medians (microseconds per call; each run already reports the median of its own timings).
#
#   run_coll_bench.sh MPIEXEC NP PRELOAD_LIB BENCH [MAX_BYTES [REPS [COLLS]]]
set -eu
mpiexec=$1 np=$2 lib=$3 bench=$4 max=${5:-268435456} reps=${6:-3} colls=${7:-}
modes=${MODES:-plain,routed}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

set -- --mca btl self,vader,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x NCCL_SOCKET_IFNAME=lo \
  --oversubscribe -np "$np"
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  set -- --allow-run-as-root "$@"
fi
routeAll=""
for k in ALLREDUCE REDUCE BCAST ALLGATHER REDUCE_SCATTER ALLTOALL GATHER SCATTER SCAN ALLTOALLV; do
  routeAll="$routeAll -x CFX_MPI_${k}_MIN_BYTES=0 -x CFX_MPI_${k}_MPI_BAND=none"
done
i=1
while [ "$i" -le "$reps" ]; do
  for mode in $(echo "$modes" | tr , ' '); do
    case $mode in
      plain) "$mpiexec" "$@" "$bench" "$max" $colls >"$work/plain.$i" ;;
      # shellcheck disable=SC2086
      routed) "$mpiexec" -x LD_PRELOAD="$lib" $routeAll "$@" "$bench" "$max" $colls >"$work/routed.$i" ;;
      default) "$mpiexec" -x LD_PRELOAD="$lib" "$@" "$bench" "$max" $colls >"$work/default.$i" ;;
      *) echo "run_coll_bench.sh: unknown mode $mode" >&2; exit 2 ;;
    esac
  done
  i=$((i + 1))
done

# Median over the runs of one mode for each (collective, size).
median() {
  cat "$work/$1".* | awk '$2 ~ /^[0-9]+$/ { print $1, $2, $3 }' | sort -k1,1 -k2,2n -k3,3g |
    awk '{ k = $1 " " $2; n[k]++; v[k, n[k]] = $3 } END { for (k in n) print k, v[k, int((n[k] + 1) / 2)] }' |
    sort -k1,1 -k2,2n
}
for mode in $(echo "$modes" | tr , ' '); do median "$mode" >"$work/m.$mode"; done
for c in $(cut -d' ' -f1 "$work/m.plain" | uniq); do
  echo
  echo "$c, $np ranks ($modes):"
  for mode in $(echo "$modes" | tr , ' '); do grep "^$c " "$work/m.$mode" | cut -d' ' -f2,3 >"$work/c.$mode"; done
  # plain first, then every other mode with its speed-up over plain.
  hdr="| bytes | MPI (us) |" sep="|---:|---:|" table="$work/c.plain"
  for mode in $(echo "$modes" | tr , ' '); do
    [ "$mode" = plain ] && continue
    hdr="$hdr $mode (us) | MPI / $mode |" sep="$sep---:|---:|"
    join "$table" "$work/c.$mode" >"$work/t.$mode"
    table="$work/t.$mode"
  done
  echo "$hdr"
  echo "$sep"
  awk '{ printf "| %s | %.1f |", $1, $2
         for (i = 3; i <= NF; ++i) printf " %.1f | %.2f |", $i, $2 / $i
         print "" }' "$table"
done
