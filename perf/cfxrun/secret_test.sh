#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# cfxrun's secret: every job gets a fresh random CFX_SECRET unless it inherits one, and an intruder on the same
# machine who reaches the job's rendezvous port without the secret cannot join it as a rank.
#   secret_test.sh CFXRUN ALL_REDUCE_PERF
set -u
cfxrun=$1
perf=$2
fail() { echo "secret_test: $*" >&2; exit 1; }

a=$(env -u CFX_SECRET -u CFX_SECRET_FILE "$cfxrun" -n 1 sh -c 'echo "$CFX_SECRET"') || fail "cfxrun failed"
b=$(env -u CFX_SECRET -u CFX_SECRET_FILE "$cfxrun" -n 1 sh -c 'echo "$CFX_SECRET"') || fail "cfxrun failed"
[ ${#a} -eq 64 ] || fail "a job got CFX_SECRET '$a', not 32 random bytes in hex"
[ "$a" != "$b" ] || fail "two jobs got the same secret"
c=$(CFX_SECRET=mine "$cfxrun" -n 2 --all-output sh -c 'echo "$CFX_SECRET"' | sort -u) || fail "cfxrun failed"
[ "$c" = mine ] || fail "an inherited CFX_SECRET was replaced: '$c'"

# The intruder: rank 1 of the job, started before the real rank 1 (which waits 3 s), without the job's secret.
# The port is drawn as the Python tests draw theirs (python/tests/launcher.py: outside the kernel's ephemeral range).
port=$(cd "$(dirname "$0")/../../python/tests" && python3 -c 'import launcher; print(launcher.free_port())') ||
  fail "no free port"
log=$(mktemp)
env -u CFX_SECRET -u CFX_SECRET_FILE RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
  NCCL_SOCKET_IFNAME=lo CFX_BOOTSTRAP_TIMEOUT_MS=20000 timeout 60 "$perf" -b 8 -e 8 -n 1 -w 0 -c 1 >"$log" 2>&1 &
intruder=$!
env -u CFX_SECRET -u CFX_SECRET_FILE NCCL_SOCKET_IFNAME=lo "$cfxrun" -n 2 --host-port "127.0.0.1:$port" --timeout 60 \
  sh -c 'if [ "$RANK" = 1 ]; then sleep 3; fi; exec "$0" -b 8 -e 1K -f 4 -n 1 -w 0 -c 1' "$perf" >/dev/null
job=$?
wait $intruder
intruded=$?
if [ $job -ne 0 ]; then
  cat "$log" >&2
  fail "the job failed (exit $job): the intruder took a rank's place"
fi
[ $intruded -ne 0 ] || { cat "$log" >&2; fail "the intruder joined the job"; }
rm -f "$log"
echo "secret_test: ok"
