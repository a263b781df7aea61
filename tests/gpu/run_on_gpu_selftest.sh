#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run_on_gpu.sh's own logic where no GPU is: a bundle of stand-ins (nccl-tests binaries that print a made-up table,
# gtest binaries that pass, nvidia-smi naming one GPU) and the real cfxrun, through --quick and then --figures.
# Checks the summary rows (one per step, the failure of a binary that reports wrong values, the skip of torch where
# python3 has none), the hang runs at the three size rules, and the summary table of the figures.
#
#   run_on_gpu_selftest.sh BUILD_DIR
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:?usage: run_on_gpu_selftest.sh BUILD_DIR}" && pwd)
WORK=$(mktemp -d /tmp/cfx-gpu-selftest.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
B="$WORK/bundle"
mkdir -p "$B/lib" "$B/rt" "$B/bin" "$WORK/path"
cp "$BUILD/src/libnccl.so.2" "$B/lib/"
cp "$BUILD/tests/gpu/minimpi/lib/libmpi.so" "$B/rt/"
cp "$BUILD/perf/cfxrun" "$B/bin/"
touch "$B/test_nccl.conf"
for b in all_reduce all_gather broadcast reduce reduce_scatter alltoall alltoallv gather scatter sendrecv hypercube; do
  cp "$ROOT/tests/gpu/fixtures/stub_perf.sh" "$B/bin/${b}_perf"
done
printf '#!/bin/sh\necho "[==========] 3 tests from 1 test suite ran."\necho "[  PASSED  ] 3 tests."\n' > "$B/bin/cfx_gpu_stub"
chmod +x "$B/bin/cfx_gpu_stub"
printf '#!/bin/sh\necho "GPU 0: stand-in (UUID: GPU-0)"\n' > "$WORK/path/nvidia-smi"
# No torch: the runner must say so rather than fail.
printf '#!/bin/sh\ncase "$*" in *torch*) exit 1 ;; esac\nexec %s "$@"\n' "$(command -v python3)" > "$WORK/path/python3"
chmod +x "$WORK/path/nvidia-smi" "$WORK/path/python3"
export PATH="$WORK/path:$PATH"

failed=0
expect() {  # expect FILE PATTERN WHAT
  if ! grep -qE "$2" "$1"; then echo "FAIL: $3 (no line matching '$2' in $1)"; failed=1; fi
}

STUB_PERF_FAIL=alltoallv_perf "$ROOT/tests/gpu/run_on_gpu.sh" --bundle "$B" --quick --out "$WORK/quick" \
  --nvidia-nccl "$B/lib" > "$WORK/quick.out" 2>&1 && rc=0 || rc=$?
[ "$rc" = 1 ] || { echo "FAIL: --quick with a failing binary exited $rc, expected 1"; failed=1; }
s="$WORK/quick/summary.txt"
for rule in default 0 4096; do expect "$s" "^nccl-tests hang-all_reduce-4ranks-rule-$rule +pass" "hang run at rule $rule"; done
expect "$s" "^gtest cfx_gpu_stub +pass" "gtest step"
expect "$s" "^nccl-tests all_reduce-4ranks-1gpu +pass" "default all_reduce"
expect "$s" "^nccl-tests alltoallv-4ranks-1gpu +FAIL" "a binary reporting wrong values fails its step"
expect "$s" "^nccl-tests all_gather-4ranks-1gpu-symmetric +pass" "symmetric windows"
expect "$s" "^nccl-tests all_reduce-4ranks-1gpu-graph +pass" "graph run"
expect "$s" "^nccl-tests all_reduce-4ranks-1gpu-staged +pass" "staged fallback"
expect "$s" "^nccl-tests all_reduce-4ranks-1gpu-devicesync +pass" "device-side barriers"
expect "$s" "^torch +skip +no torch" "torch skipped without torch"
if grep -q '^nccl-tests fig-' "$s"; then echo "FAIL: --quick ran figures"; failed=1; fi
expect "$WORK/quick/nccl-tests-hang-all_reduce-4ranks-rule-4096.log" "^(\[rank 0\])? +1073741824 " \
  "the hang run reached 1 GiB"

# A hang: the hang runs time out one by one and the proof goes on; the first ordinary run that times out skips the
# other nccl-tests runs.
STEP_TIMEOUT=4 STUB_PERF_HANG=all_reduce_perf "$ROOT/tests/gpu/run_on_gpu.sh" --bundle "$B" --quick --out "$WORK/hang" \
  > "$WORK/hang.out" 2>&1 && rc=0 || rc=$?
[ "$rc" = 1 ] || { echo "FAIL: --quick with a hanging binary exited $rc, expected 1"; failed=1; }
s="$WORK/hang/summary.txt"
for rule in default 0 4096; do
  expect "$s" "^nccl-tests hang-all_reduce-4ranks-rule-$rule +FAIL \(rc 124\)" "a hang run that times out"
done
expect "$s" "^nccl-tests all_reduce-4ranks-1gpu +FAIL \(rc 124\)" "the first ordinary run timing out"
expect "$s" "^nccl-tests all_gather-4ranks-1gpu +skip +skipped: an earlier run timed out" "the runs after it skipped"

"$ROOT/tests/gpu/run_on_gpu.sh" --bundle "$B" --figures --out "$WORK/figures" --nvidia-nccl "$B/lib" \
  > "$WORK/figures.out" 2>&1 && rc=0 || rc=$?
[ "$rc" = 0 ] || { echo "FAIL: --figures exited $rc"; failed=1; }
s="$WORK/figures/summary.txt"
if grep -qE '^(gtest|nccl-tests [a-z_]+-4ranks-1gpu )' "$s"; then echo "FAIL: --figures ran the proof"; failed=1; fi
expect "$s" "^\| out-of-place time \(us\) \| 8 B \| 64 KiB \| 16 MiB \| 1 GiB \|" "the table's header"
expect "$s" "^\| NVIDIA 1 rank \| 10\.00 \| 10\.00 \| 26\.00 \| 1083\.00 \|" "NVIDIA's row"
expect "$s" "^\| 4 ranks, symmetric windows / NVIDIA 1 rank \| 1\.00x" "a ratio row"
expect "$s" "^\| 4 ranks, device-side barriers \| 10\.00" "the device-side barriers' row"
if [ $failed = 1 ]; then
  for o in quick hang figures; do echo "--- $o:"; cat "$WORK/$o.out"; done
  exit 1
fi
echo "run_on_gpu.sh self-test: --quick and --figures as expected"
