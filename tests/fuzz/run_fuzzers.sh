#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the libFuzzer targets one after another, each for a bounded time, and prints one summary line per target.
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
status=0
printf '%-22s %12s %10s %8s  %s\n' target executions exec/s seconds result
for t in "${targets[@]}"; do
  corpus="$build/fuzz-corpus/$t"
  mkdir -p "$corpus" "$build/fuzz-seeds/$t"
  dirs=("$corpus" "$build/fuzz-seeds/$t")
  [ -d "$here/regressions/$t" ] && dirs+=("$here/regressions/$t")
  log="$build/fuzz-logs/$t.log"
  start=$(date +%s)
  "$bin/cfx_fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$build/fuzz-artifacts/$t-" ${FUZZ_FLAGS:-} "${dirs[@]}" >"$log" 2>&1
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  if [ $rc -eq 0 ]; then
    result="no finding"
  else
    result="FINDING (exit $rc), see $log"
    status=1
  fi
  printf '%-22s %12s %10s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$elapsed" "$result"
done
exit $status
