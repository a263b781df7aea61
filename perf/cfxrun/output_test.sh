#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Checks what cfxrun passes through and what it sets: by default rank 0's stdout and every rank's stderr, as they
# are; with NCCL_DEBUG set (or --tag-output) every rank's stdout and stderr, each line prefixed "[rank R] ", and a
# line without its newline still arrives whole. Each rank also prints the variables cfxrun documents it sets.
# Usage: output_test.sh <cfxrun>
set -eu
cfxrun=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

expect_line() {  # FILE LINE WHAT
  if grep -qxF -- "$2" "$1"; then echo "ok: $3"; else echo "FAIL: $3: no line [$2] in:"; cat "$1"; fail=1; fi
}
expect_none() {  # FILE PATTERN WHAT
  if grep -q -- "$2" "$1"; then echo "FAIL: $3:"; cat "$1"; fail=1; else echo "ok: $3"; fi
}

rank_prog='echo "out $RANK of $WORLD_SIZE local $LOCAL_RANK/$LOCAL_WORLD_SIZE at $MASTER_ADDR:$MASTER_PORT"
echo "err $RANK" >&2
printf "tail $RANK"'

env -u NCCL_DEBUG "$cfxrun" -n 2 --host-port 127.0.0.1:29999 sh -c "$rank_prog" >"$tmp/out" 2>"$tmp/err"
expect_line "$tmp/out" "out 0 of 2 local 0/2 at 127.0.0.1:29999" "default: rank 0's stdout, with the variables set"
expect_none "$tmp/out" "out 1" "default: no stdout from rank 1"
expect_line "$tmp/err" "err 1" "default: rank 1's stderr as it is"

NCCL_DEBUG=WARN "$cfxrun" -n 2 --host-port 127.0.0.1:29999 sh -c "$rank_prog" >"$tmp/out" 2>"$tmp/err"
for r in 0 1; do
  expect_line "$tmp/out" "[rank $r] out $r of 2 local $r/2 at 127.0.0.1:29999" "NCCL_DEBUG: rank $r's stdout tagged"
  expect_line "$tmp/out" "[rank $r] tail $r" "NCCL_DEBUG: rank $r's unfinished last line tagged"
  expect_line "$tmp/err" "[rank $r] err $r" "NCCL_DEBUG: rank $r's stderr tagged, on stderr"
done

env -u NCCL_DEBUG "$cfxrun" -n 2 --tag-output sh -c 'echo "x $RANK"; exit $RANK' >"$tmp/out" 2>"$tmp/err" && rc=0 || rc=$?
expect_line "$tmp/out" "[rank 1] x 1" "--tag-output: the failing rank's output still arrives"
[ "$rc" = 1 ] && echo "ok: exit status of the failing rank" || { echo "FAIL: exit status $rc, expected 1"; fail=1; }

exit $fail
