#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the libFuzzer targets, each for a bounded time and FUZZ_JOBS of them at once (default: one per CPU, as each
# fuzzer is single-threaded), and prints one summary line per target, in the order given.
#   tests/fuzz/run_fuzzers.sh BUILD_DIR SECONDS [TARGET...]      (default: every cfx_fuzz_* in BUILD_DIR)
# Seeds come from cfx_fuzz_seeds (regenerated each run) plus tests/fuzz/regressions/<target>/ (inputs that once
# found a bug, kept so the bug stays fixed); new coverage accumulates in BUILD_DIR/fuzz-corpus/<target>/.
# A crash, a hang (-timeout) or a leak is a finding: its input lands in BUILD_DIR/fuzz-artifacts/ and the script
# exits non-zero after running the remaining targets. FUZZ_FLAGS adds libFuzzer flags, e.g. FUZZ_FLAGS=-runs=10000000
# to stop each target after that many executions (SECONDS still caps it).
set -u
build=${1:?usage: run_fuzzers.sh BUILD_DIR SECONDS [TARGET...]}
seconds=${2:?usage: run_fuzzers.sh BUILD_DIR SECONDS [TARGET...]}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
bin="$build/tests/fuzz"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for exe in "$bin"/cfx_fuzz_*; do
    name=${exe##*/cfx_fuzz_}
    [ "$name" = seeds ] || targets+=("$name")
  done
fi
[ ${#targets[@]} -gt 0 ] || { echo "run_fuzzers: no cfx_fuzz_* targets in $bin (configure with -DCFX_FUZZ=ON)" >&2; exit 2; }

"$bin/cfx_fuzz_seeds" "$build/fuzz-seeds" || { echo "run_fuzzers: the seed generator failed" >&2; exit 2; }
mkdir -p "$build/fuzz-artifacts" "$build/fuzz-logs"
jobs=${FUZZ_JOBS:-$(nproc)}

# Runs target $1 and writes its summary line to fuzz-logs/$1.summary.
run_one() {
  local t=$1 corpus="$build/fuzz-corpus/$1" log="$build/fuzz-logs/$1.log" start rc elapsed execs rate result
  mkdir -p "$corpus" "$build/fuzz-seeds/$t"
  local dirs=("$corpus" "$build/fuzz-seeds/$t")
  [ -d "$here/regressions/$t" ] && dirs+=("$here/regressions/$t")
  start=$(date +%s)
  "$bin/cfx_fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$build/fuzz-artifacts/$t-" ${FUZZ_FLAGS:-} "${dirs[@]}" >"$log" 2>&1
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  if [ $rc -eq 0 ]; then result="no finding"; else result="FINDING (exit $rc), see $log"; fi
  printf '%-22s %12s %10s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$elapsed" "$result" >"$build/fuzz-logs/$t.summary"
}

status=0
rm -f "$build"/fuzz-logs/*.summary
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  run_one "$t" &
done
wait
printf '%-22s %12s %10s %8s  %s\n' target executions exec/s seconds result
for t in "${targets[@]}"; do
  # A target that died without its summary (the script itself killed) counts as a finding too.
  if [ -f "$build/fuzz-logs/$t.summary" ]; then cat "$build/fuzz-logs/$t.summary"; else echo "$t: no summary"; status=1; fi
  grep -q FINDING "$build/fuzz-logs/$t.summary" 2>/dev/null && status=1
done
exit $status
