#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs an MPI program under mpirun twice, plainly and with LD_PRELOAD=libconflux_mpi.so and CFX_MPI_STATS=1,
# and fails unless both print the same stdout. Each EXPECT is an extended regex that the interposed run's stderr
# must match (the stats lines prove which calls were routed and which passed through).
#
#   run_compare.sh MPIEXEC NP PRELOAD_LIB [EXPECT ...] -- PROGRAM [ARGS ...]
set -u
mpiexec=$1 np=$2 lib=$3
shift 3
expects=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  expects="$expects
$1"
  shift
done
[ $# -gt 0 ] && shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Loopback only: these runs must not touch the machine's other interfaces.
set -- --mca btl self,vader,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x NCCL_SOCKET_IFNAME=lo \
  -np "$np" "$@"
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  set -- --allow-run-as-root --oversubscribe "$@"
else
  set -- --oversubscribe "$@"
fi
for knob in $(env | sed -n 's/^\(CFX_MPI_[A-Z_]*\)=.*/\1/p'); do
  set -- -x "$knob" "$@"
done
export NCCL_SOCKET_IFNAME=lo CFX_TIMEOUT_MS=${CFX_TIMEOUT_MS:-30000}

"$mpiexec" "$@" >"$work/plain.out" 2>"$work/plain.err" || {
  echo "FAIL: plain run exited $?"; cat "$work/plain.out" "$work/plain.err"; exit 1; }
"$mpiexec" -x LD_PRELOAD="$lib" -x CFX_MPI_STATS=1 "$@" >"$work/cfx.out" 2>"$work/cfx.err" || {
  echo "FAIL: interposed run exited $?"; cat "$work/cfx.out" "$work/cfx.err"; exit 1; }
cat "$work/cfx.err"
if ! cmp -s "$work/plain.out" "$work/cfx.out"; then
  echo "FAIL: outputs differ (plain vs interposed):"
  diff "$work/plain.out" "$work/cfx.out"
  exit 1
fi
echo "identical output: $(wc -l <"$work/cfx.out") lines"
status=0
echo "$expects" | while IFS= read -r pattern; do
  [ -z "$pattern" ] && continue
  if ! grep -Eq "$pattern" "$work/cfx.err"; then
    echo "FAIL: stderr of the interposed run lacks /$pattern/"
    exit 1
  fi
done || status=1
exit $status
