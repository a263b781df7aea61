#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Checks cfxrun's --bind: each rank reports the CPUs it may run on (/proc/self/status), and the lists must match
# the binding rule for this machine's allowed CPUs. Usage: bind_test.sh <cfxrun>
set -eu
cfxrun=$1
allowed=$(grep Cpus_allowed_list /proc/self/status | cut -f2)
ncpu=$(nproc)
fail=0

# Prints "rank cpus" per rank, sorted by rank.
cpus_of_ranks() {
  "$cfxrun" --all-output "$@" sh -c 'echo "$RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2)"' | sort -n
}

expect() {
  if [ "$2" != "$3" ]; then
    echo "FAIL: $1: expected [$3], got [$2]"
    fail=1
  else
    echo "ok: $1"
  fi
}

# auto with as many ranks as CPUs: one distinct CPU per rank, the k-th allowed CPU for rank k.
got=$(cpus_of_ranks -n "$ncpu" | cut -d' ' -f2 | tr '\n' ' ')
want=$(python3 -c "
import os; print(' '.join(str(c) for c in sorted(os.sched_getaffinity(0))) + ' ')")
expect "auto, $ncpu ranks on $ncpu CPUs" "$got" "$want"

# auto with more ranks than CPUs: nobody is pinned.
n=$((ncpu + 1))
got=$(cpus_of_ranks -n "$n" | cut -d' ' -f2 | sort -u | tr '\n' ' ')
expect "auto, $n ranks on $ncpu CPUs" "$got" "$allowed "

# core with more ranks than CPUs: round-robin over the allowed CPUs.
got=$(cpus_of_ranks -n "$n" --bind core | cut -d' ' -f2 | tr '\n' ' ')
want=$(python3 -c "
import os; c = sorted(os.sched_getaffinity(0)); print(' '.join(str(c[r % len(c)]) for r in range($n)) + ' ')")
expect "core, $n ranks on $ncpu CPUs" "$got" "$want"

# none: every rank keeps cfxrun's own mask.
got=$(cpus_of_ranks -n 2 --bind none | cut -d' ' -f2 | sort -u | tr '\n' ' ')
expect "none" "$got" "$allowed "

# A bad mode is a usage error (exit 2).
if "$cfxrun" -n 1 --bind sideways true 2>/dev/null; then rc=0; else rc=$?; fi
expect "bad --bind exits 2" "$rc" "2"
exit $fail
