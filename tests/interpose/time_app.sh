#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Times an unmodified MPI application under mpirun, plainly and with LD_PRELOAD=libconflux_mpi.so, REPS times
# each, interleaved so that load from other processes hits both alike. Prints every run's wall time, the
# medians, the interposed run's CFX_MPI_STATS counts, and whether the numerical results agree: RESULTS is a
# shell command run after each run in the current directory, with the run's stdout on its stdin, that prints
# the run's results without timings; all runs must print the same.
#
#   time_app.sh MPIEXEC NP PRELOAD_LIB REPS RESULTS -- PROGRAM [ARGS ...]
set -eu
mpiexec=$1 np=$2 lib=$3 reps=$4 results=$5
shift 5
[ "${1:-}" = "--" ] && shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

set -- --mca btl self,vader,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x NCCL_SOCKET_IFNAME=lo \
  --oversubscribe -np "$np" "$@"
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  set -- --allow-run-as-root "$@"
fi

now() { date +%s.%N; }
i=1
while [ "$i" -le "$reps" ]; do
  for kind in plain cfx; do
    if [ "$kind" = plain ]; then pre=""; else pre="-x LD_PRELOAD=$lib -x CFX_MPI_STATS=1"; fi
    t0=$(now)
    # shellcheck disable=SC2086  # $pre is two words or none
    "$mpiexec" $pre "$@" >"$work/$kind.$i.out" 2>"$work/$kind.$i.err"
    t1=$(now)
    echo "$t0 $t1" | awk '{ printf "%.2f\n", $2 - $1 }' >"$work/$kind.$i.time"
    sh -c "$results" <"$work/$kind.$i.out" >"$work/$kind.$i.results"
    echo "$kind run $i: $(cat "$work/$kind.$i.time") s"
  done
  i=$((i + 1))
done
for kind in plain cfx; do
  echo "$kind median: $(cat "$work/$kind".*.time | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }') s"
done
grep -h CFX_MPI_STATS "$work/cfx.1.err" "$work/cfx.1.out" || true
echo "results ($(wc -l <"$work/plain.1.results") lines):"
cat "$work/plain.1.results"
status=0
for f in "$work"/*.results; do
  if ! cmp -s "$work/plain.1.results" "$f"; then
    echo "RESULTS DIFFER: $(basename "$f")"
    diff "$work/plain.1.results" "$f" || true
    status=1
  fi
done
[ $status = 0 ] && echo "results identical in all $((reps * 2)) runs"
exit $status
