#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Checks that a mistyped command line fails loudly once: exit 6 (InvalidUsage) and exactly one line on stderr,
# also with two ranks under cfxrun (only rank 0 prints), where nccl-tests prints its usage and exits 0. The
# nccl-tests forms that are right must still work. Usage: flags_test.sh <cfxrun> <all_reduce_perf>
set -u
cfxrun=$1
perf=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# refused WHAT ARGS...: 1 rank and 2 ranks each exit 6 with one stderr line mentioning WHAT, nothing on stdout.
refused() {
  what=$1
  shift
  for launch in "" "$cfxrun -n 2"; do
    # shellcheck disable=SC2086
    env -u NCCL_DEBUG $launch "$perf" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    # cfxrun adds its own line naming the failed rank; the benchmark's message must be there once.
    lines=$(grep -c -- "$what" "$tmp/err")
    if [ "$rc" = 6 ] && [ "$lines" = 1 ] && [ ! -s "$tmp/out" ]; then
      echo "ok: ${launch:-1 rank}: $* -> 6, one line"
    else
      echo "FAIL: ${launch:-1 rank}: $*: exit $rc, $lines line(s) with [$what]; stderr:"; cat "$tmp/err"; cat "$tmp/out"
      fail=1
    fi
  done
}

refused "unknown or ambiguous option '--max-bytes'" -b 8 --max-bytes 1K
refused "unknown option '-Q'" -b 8 -Q 1
refused "unexpected argument '1K'" -b 8 1K
refused "invalid value '2x' for -n" -n 2x
refused "invalid datatype 'flaot'" -d flaot
refused "invalid op 'summ'" -o summ
refused "needs a value" -b 8 -e
refused "unknown or ambiguous option '--c'" --c 1

# The accepted forms still run: unique long prefixes, --name=value, hex, negative root.
if "$perf" -b 8 --maxb=64 --stepf 2 -n 0x2 -w 1 -c 1 -r -1 >"$tmp/out" 2>"$tmp/err" &&
   grep -q "Out of bounds values : 0 OK" "$tmp/out"; then
  echo "ok: nccl-tests' forms still run"
else
  echo "FAIL: nccl-tests' forms:"; cat "$tmp/out" "$tmp/err"; fail=1
fi
"$perf" -h >"$tmp/out" 2>&1 && grep -q "USAGE" "$tmp/out" && echo "ok: -h prints usage, exit 0" || {
  echo "FAIL: -h"; fail=1; }
exit $fail
