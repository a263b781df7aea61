#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU proof of Conflux, for a machine with an NVIDIA GPU and the CUDA toolkit (see tests/gpu/README.md).
#
# It shows, in one run and one log folder, that our libnccl.so.2 does on a real GPU what NVIDIA's does, and what
# NVIDIA's refuses:
#   1. the gtest GPU tests (label gpu): every datatype and op on device buffers, stream semantics, several ranks
#      on one GPU in one process and in many, ncclMemAlloc, collectives captured in CUDA graphs, the CUDA IPC path;
#   2. all 11 nccl-tests binaries with -c 1 (results checked by nccl-tests itself), 4 ranks on ONE GPU
#      (MPI build, NCCL_TESTS_DEVICE=0), staged and over CUDA IPC, and the four with zero-copy forms over CUDA IPC
#      on symmetric windows (-R 2): NVIDIA's NCCL stops these with "Duplicate GPU detected"; all-reduce and
#      all-gather as two "hosts" of two ranks
#      (as_hosts.sh: device buffers staged onto TCP, then UCX, between them), and with a rank on each GPU where
#      there are several (both libraries); then six of them again with -G (every op captured into a CUDA graph by
#      nccl-tests and replayed);
#   3. a torch.distributed job with backend "nccl" and our library in LD_PRELOAD at 2 and 4 ranks on one GPU, and
#      at 1 rank with each library (tests/gpu/torch_collectives.py: exact checks and a timed DDP step), and its
#      --graph form (collectives captured with torch.cuda.graph and replayed) likewise;
#   4. figures: all_reduce_perf and all_gather_perf 8 B - 1 GiB with 4 ranks on one GPU (CUDA IPC path with and
#      without symmetric windows, and staged path), and 1 rank with both libraries side by side.
# Every step has a timeout, failures do not stop later steps, and the exit status is non-zero if any step failed.
# Without a GPU it exits 77 (skip) with the reason. Ranks are processes started by cfxrun; nccl-tests is its MPI
# build against minimpi (tests/gpu/minimpi), so the machine needs no MPI.
#
# Usage: tests/gpu/run_on_gpu.sh --bundle DIR|FILE.tar.xz [--quick | --figures] [--nvidia-nccl DIR] [--out DIR]
#                                [--tar FILE]
#        tests/gpu/run_on_gpu.sh [--build-dir DIR] --nccl-tests-src DIR [...]
# --quick: the proof only, sized for one call of a few minutes (TIME_BUDGET 230 s, STEP_TIMEOUT 60 s unless set):
#   issue 35's hang command (all_reduce_perf 8 B - 1 GiB on 4 ranks) at the default size rule and at two others,
#   with INIT/PROXY/TUNING logs and a 20 s timeout per wait, so a hang names its step; the gtests (150 s at most);
#   all 11 nccl-tests binaries with the defaults across the 8 MiB rule, symmetric windows, a graph run, device-side
#   barriers on the shared GPU (CFX_CUDA_IPC_DEVICE_SYNC=1) and the staged fallback; the torch job at 2 ranks (its
#   RESULT has the 64 MiB all-reduce time).
# --figures: only the figures, for a second call: all_reduce_perf 8 B - 1 GiB with 4 ranks on one GPU by each path
#   (the default, staged, CUDA IPC scratch at every size, symmetric windows, device-side barriers), all_gather_perf
#   by the default and
#   staged, and both libraries at 1 rank; then summary_table.md: out-of-place times at 8 B, 64 KiB, 16 MiB and 1 GiB
#   per path beside NVIDIA's 1-rank figures (tests/gpu/nct_table.py).
# Neither: the full proof, then the figures.
# --bundle: what tests/gpu/pack_for_gpu.sh made elsewhere (nothing is built here; the lent GPU machines have no
# toolchain for our dependencies); without it, Conflux is built here (or --build-dir used) and packed first.
# --tar FILE: all logs in one archive at the end (for tools that bring back only a few files).
# STEP_TIMEOUT (seconds, default 300) bounds each step and TIME_BUDGET the whole run; a first nccl-tests run or a
# torch job that times out skips the rest of its kind, so one hang cannot eat the session.
set -u -o pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=""
BUNDLE=""
NCT_SRC=""
TAR=""
NV_NCCL=""
OUT="$ROOT/gpu-proof"
QUICK=0
FIGURES=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --bundle) BUNDLE="$2"; shift 2 ;;
    --tar) TAR="$2"; shift 2 ;;
    --nccl-tests-src) NCT_SRC=$(cd "$2" && pwd); shift 2 ;;
    --nvidia-nccl) NV_NCCL=$(cd "$2" && pwd); shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --figures) FIGURES=1; shift ;;
    -h|--help) sed -n '2,38p' "$0"; exit 0 ;;
    *) echo "run_on_gpu.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

if [ $QUICK = 1 ] && [ $FIGURES = 1 ]; then echo "run_on_gpu.sh: --quick and --figures are two calls" >&2; exit 2; fi
if [ $QUICK = 1 ]; then
  : "${TIME_BUDGET:=230}" "${STEP_TIMEOUT:=60}"
fi
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "run_on_gpu.sh: SKIP: no NVIDIA GPU here (nvidia-smi lists no device)"
  exit 77
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SUMMARY=()
FAILED=0
STEP_TIMEOUT=${STEP_TIMEOUT:-300}  # seconds per step: a hung collective must not eat the GPU session
# TIME_BUDGET (seconds): the whole run's; steps shrink to fit and are skipped once it is spent, so that the
# summary and the archive are still written inside a lease.
END_AT=$((SECONDS + ${TIME_BUDGET:-1000000}))
# budget SECONDS: prints the timeout for a step that wants SECONDS, or 0 when the budget is spent.
budget() {
  local left=$((END_AT - SECONDS - 20))
  if [ $left -lt 15 ]; then echo 0; elif [ "$1" -lt $left ]; then echo "$1"; else echo $left; fi
}

# finish: the summary, the optional archive of every log, and the exit status.
finish() {
  echo
  echo "== summary (logs in $OUT)"
  printf '%s\n' "${SUMMARY[@]}" | tee "$OUT/summary.txt"
  if [ -f "$OUT/summary_table.md" ]; then echo; cat "$OUT/summary_table.md" | tee -a "$OUT/summary.txt"; fi
  if [ -n "$TAR" ]; then tar -C "$(dirname "$OUT")" --exclude=bundle -cJf "$TAR" "$(basename "$OUT")"; fi
  exit $FAILED
}

# record NAME RC DETAIL: one summary row.
record() {
  local verdict=pass
  if [ "$2" -eq 77 ]; then verdict=skip; elif [ "$2" -ne 0 ]; then verdict="FAIL (rc $2)"; FAILED=1; fi
  SUMMARY+=("$(printf '%-44s %-12s %s' "$1" "$verdict" "$3")")
  echo "== $1: $verdict $3 (at ${SECONDS} s)"
}

echo "== environment"
{
  nvidia-smi -L
  nvidia-smi --query-gpu=driver_version,memory.total --format=csv,noheader
  command -v nvcc > /dev/null && nvcc --version | tail -1
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>&1
  uname -r; nproc
} 2>&1 | tee "$OUT/environment.txt"

# ---- 0. the bundle: built elsewhere, or built and packed here ----
if [ -z "$BUNDLE" ]; then
  if [ -z "$BUILD" ]; then
    BUILD="$ROOT/build-gpu"
    echo "== building Conflux in $BUILD"
    if cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 &&
       cmake --build "$BUILD" -j "$(nproc)" >> "$OUT/build.log" 2>&1; then
      record build 0 "$BUILD"
    else
      record build 1 "see build.log"
      finish
    fi
  fi
  if [ -z "$NCT_SRC" ]; then echo "run_on_gpu.sh: --bundle or --nccl-tests-src is required" >&2; exit 2; fi
  BUNDLE="$OUT/bundle"
  "$ROOT/tests/gpu/pack_for_gpu.sh" --build-dir "$BUILD" --nccl-tests-src "$NCT_SRC" --out "$BUNDLE" > "$OUT/pack.log" 2>&1
  rc=$?
  record pack $rc "see pack.log"
  [ $rc -eq 0 ] || finish
elif [ -f "$BUNDLE" ]; then
  unpacked=$(mktemp -d /tmp/cfx-bundle.XXXXXX)
  tar -xJf "$BUNDLE" -C "$unpacked" || { echo "run_on_gpu.sh: cannot unpack $BUNDLE" >&2; exit 1; }
  BUNDLE="$unpacked/gpu-bundle"
fi
BUNDLE=$(cd "$BUNDLE" && pwd)
LIB="$BUNDLE/lib/libnccl.so.2"
LIBDIR="$BUNDLE/lib"
RT="$BUNDLE/rt"          # minimpi's libmpi.so and the CUDA runtime the nccl-tests binaries were linked with
NCT_BIN="$BUNDLE/bin"
CFXRUN="$BUNDLE/bin/cfxrun"
for f in "$LIB" "$RT/libmpi.so" "$CFXRUN"; do
  [ -e "$f" ] || { echo "run_on_gpu.sh: $f missing from the bundle" >&2; exit 1; }
done
# Our library's dependencies: the machine's own where it has them, the bundle's copies where it lacks them.
for dep in "$BUNDLE"/deps/*; do
  [ -e "$dep" ] || continue
  name=$(basename "$dep")
  if ! ldconfig -p | grep -q "^[[:space:]]*$name "; then ln -sf "../deps/$name" "$LIBDIR/$name"; fi
done
echo "libraries taken from the bundle: $(cd "$LIBDIR" && ls | grep -v '^libnccl' | tr '\n' ' ')" |
  tee -a "$OUT/environment.txt"
LD_LIBRARY_PATH="$LIBDIR" ldd "$LIB" | grep -E 'not found|=>' >> "$OUT/environment.txt"
# NVIDIA's library for the side-by-side runs: the bundle's copy (pack_for_gpu.sh --with-nvidia-nccl), else the NCCL
# wheel beside torch.
if [ -z "$NV_NCCL" ] && [ -e "$BUNDLE/nvidia/libnccl.so.2" ]; then NV_NCCL="$BUNDLE/nvidia"; fi
if [ -z "$NV_NCCL" ]; then
  NV_NCCL=$(python3 -c "
import glob, os, nvidia
hits = [h for p in nvidia.__path__ for h in glob.glob(os.path.join(p, '**', 'libnccl.so.2'), recursive=True)]
print(os.path.dirname(sorted(hits)[0]) if hits else '')" 2> /dev/null || true)
fi
echo "bundle $BUNDLE; NVIDIA's NCCL: ${NV_NCCL:-none found}" | tee -a "$OUT/environment.txt"

# ---- 1. gtest GPU tests ----
# run_gtests [SECONDS]: each gtest binary, with at most SECONDS (default twice STEP_TIMEOUT).
run_gtests() {
  local t name t_limit rc want=${1:-$((STEP_TIMEOUT * 2))}
  for t in "$BUNDLE"/bin/cfx_gpu_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    t_limit=$(budget "$want")
    if [ "$t_limit" = 0 ]; then record "gtest $name" 77 "skipped: time budget spent"; continue; fi
    NCCL_CONF_FILE="$BUNDLE/test_nccl.conf" LD_LIBRARY_PATH="$LIBDIR" timeout "$t_limit" "$t" > "$OUT/$name.log" 2>&1
    rc=$?
    record "gtest $name" $rc "$(grep -E '^\[  (PASSED|FAILED)  \]|tests? ran' "$OUT/$name.log" | tr -s ' ' | tr '\n' ' ')"
  done
}

# ---- 2. nccl-tests ----
export NCCL_DEBUG="${NCCL_DEBUG:-WARN}" NCCL_TESTS_DEVICE=0 NCCL_SOCKET_IFNAME=lo
NCT_GAVE_UP=0
GRAPH_GAVE_UP=0
FIRST_NCT=1
# nct NAME NP LIBPATH ARGS...: one nccl-tests run, summarised by its own verdict and average bus bandwidth. A first
# run that times out skips the other runs (something is wrong with every one of them), except the hang-* runs, which
# are there to find a hang.
nct() {
  local name=$1 np=$2 libpath=$3; shift 3
  local log="$OUT/nccl-tests-$name.log"
  if [ $NCT_GAVE_UP = 1 ]; then record "nccl-tests $name" 77 "skipped: an earlier run timed out"; return; fi
  case "$name" in *-graph*)
    if [ $GRAPH_GAVE_UP = 1 ]; then record "nccl-tests $name" 77 "skipped: an earlier graph run timed out"; return; fi ;;
  esac
  local limit
  limit=$(budget "$STEP_TIMEOUT")
  if [ "$limit" = 0 ]; then record "nccl-tests $name" 77 "skipped: time budget spent"; return; fi
  echo "# library folder: $libpath" > "$log"
  # Where the CUDA IPC path may be on (the default), the library's INIT lines say which form the scratch took, or
  # why the path is off, and which windows went zero-copy.
  local debug=$NCCL_DEBUG subsys=${NCCL_DEBUG_SUBSYS:-}
  if [ "${CFX_CUDA_IPC:--1}" != 0 ] && [ "$libpath" = "$LIBDIR" ] && [ "$debug" != INFO ]; then debug=INFO; subsys=INIT; fi
  NCCL_DEBUG=$debug NCCL_DEBUG_SUBSYS=$subsys LD_LIBRARY_PATH="$libpath:$RT" timeout "$limit" "$CFXRUN" -n "$np" \
    --timeout $((limit > 10 ? limit - 5 : limit)) "$@" >> "$log" 2>&1
  local rc=$?
  local ipc=""
  if [ "${CFX_CUDA_IPC:--1}" != 0 ] && [ "$libpath" = "$LIBDIR" ]; then
    ipc="IPC scratch per rank: $(grep -c 'shared as file descriptors' "$log") shareable, $(grep -c 'legacy IPC handles' "$log") legacy, $(grep -c 'path off' "$log") off; zero-copy windows: $(grep -c 'mapped by all .*: zero-copy' "$log")"
  fi
  case "$name" in
    hang-*) ;;
    *)
      if [ $rc -eq 124 ] && [ "$FIRST_NCT" = 1 ]; then NCT_GAVE_UP=1; fi
      FIRST_NCT=0 ;;
  esac
  case "$name" in *-graph*) if [ $rc -eq 124 ]; then GRAPH_GAVE_UP=1; fi ;; esac
  if [ $rc -eq 0 ] && ! grep -q 'Out of bounds values : 0 OK' "$log"; then rc=1; fi
  # A run that timed out: where each rank's device ops stood (the PROXY lines, when logged).
  local where=""
  if [ $rc -eq 124 ]; then where=" last device-op lines: $(grep -E 'device op [0-9]+ ' "$log" | tail -4 | tr -s ' ' | tr '\n' ' ')"; fi
  # With NCCL_DEBUG set cfxrun tags each rank's lines "[rank R] "; rank 0's verdict stands for the run's.
  record "nccl-tests $name" $rc "$(grep -hE 'nccl-library|Out of bounds|Avg bus' "$log" | grep -vE '^\[rank [1-9]' |
    tr -s ' ' | tr '\n' ' ')$ipc$where"
}

# ---- 3. torch.distributed ----
# torch_job NAME NPROC PRELOAD LIBPATH: the job's RESULT line is the summary.
# Our library's own dependencies (UCX, hwloc, ...) come from the bundle's lib folder; NVIDIA's run gets neither.
TORCH_GAVE_UP=0
torch_job() {
  local name=$1 np=$2 preload=$3 libpath=$4
  shift 4
  local log="$OUT/torch-$name.log"
  if [ $TORCH_GAVE_UP = 1 ]; then record "torch $name" 77 "skipped: an earlier job timed out"; return; fi
  local limit
  limit=$(budget "$STEP_TIMEOUT")
  if [ "$limit" = 0 ]; then record "torch $name" 77 "skipped: time budget spent"; return; fi
  LD_PRELOAD="$preload" LD_LIBRARY_PATH="$libpath" PYTHONUNBUFFERED=1 timeout "$limit" \
    python3 -m torch.distributed.run --standalone --nproc_per_node "$np" "$ROOT/tests/gpu/torch_collectives.py" "$@" \
    > "$log" 2>&1
  local rc=$?
  if [ $rc -eq 124 ]; then TORCH_GAVE_UP=1; fi
  record "torch $name" $rc "$(grep -h '^RESULT' "$log" | cut -c8- | tr -d '\n')"
}
have_torch() { python3 -c "import torch, torch.distributed" 2> /dev/null; }

ALL11="all_reduce all_gather broadcast reduce reduce_scatter alltoall alltoallv gather scatter sendrecv hypercube"

# The proof in a few minutes (--quick).
proof_quick() {
  # Issue 35's hang: 4 ranks, 8 B - 1 GiB by factors of 8, with the default size rule (8 MiB where ranks share a
  # GPU: the sweep crosses from staged ops to the IPC path) and two others. A wait of 20 s fails naming the peer, a
  # device op whose host step waits 10 s says which, and every op's plan is logged.
  local rule
  for rule in default 0 4096; do
    local env=(env)
    [ "$rule" = default ] || env+=("CFX_CUDA_IPC_MIN_BYTES=$rule")
    CFX_TIMEOUT_MS=20000 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,PROXY,TUNING nct "hang-all_reduce-4ranks-rule-$rule" 4 \
      "$LIBDIR" "${env[@]}" "$NCT_BIN/all_reduce_perf" -b 8 -e 1G -f 8 -g 1 -c 1 -n 5 -w 1
  done
  run_gtests 150
  # Every binary with the library's defaults across the size rule (all-gather's and the rooted ones' 16 MiB too).
  local b
  for b in $ALL11; do
    nct "${b}-4ranks-1gpu" 4 "$LIBDIR" "$NCT_BIN/${b}_perf" -b 8 -e 16M -f 8 -g 1 -c 1 -n 2 -w 1
  done
  for b in all_reduce all_gather; do
    nct "${b}-4ranks-1gpu-symmetric" 4 "$LIBDIR" "$NCT_BIN/${b}_perf" -b 8 -e 16M -f 8 -g 1 -c 1 -n 2 -w 1 -R 2
  done
  nct "all_reduce-4ranks-1gpu-graph" 4 "$LIBDIR" "$NCT_BIN/all_reduce_perf" -b 8 -e 16M -f 8 -g 1 -c 1 -n 2 -w 1 -G 2
  # Device-side barriers where ranks share the GPU (not the default there: this run says whether they work): small
  # all-reduces as one kernel (IpcOneShot), large ones through the scratch with no host step.
  CFX_CUDA_IPC_DEVICE_SYNC=1 CFX_TIMEOUT_MS=20000 nct "all_reduce-4ranks-1gpu-devicesync" 4 "$LIBDIR" \
    "$NCT_BIN/all_reduce_perf" -b 8 -e 16M -f 8 -g 1 -c 1 -n 5 -w 1
  CFX_CUDA_IPC=0 nct "all_reduce-4ranks-1gpu-staged" 4 "$LIBDIR" "$NCT_BIN/all_reduce_perf" -b 8 -e 16M -f 8 -g 1 -c 1 \
    -n 2 -w 1
  if have_torch; then
    torch_job "conflux-2ranks-1gpu" 2 "$LIB" "$LIBDIR" --steps 5
  else
    record "torch" 77 "no torch in python3"
  fi
}

# The full proof (neither --quick nor --figures).
proof_full() {
  local RANGE=(-b 8 -e 32M -f 4) b net
  # The library's defaults: the CUDA IPC path where ranks map each other's memory, from 8 MiB where they share a GPU.
  for b in $ALL11; do
    nct "${b}-4ranks-1gpu" 4 "$LIBDIR" "$NCT_BIN/${b}_perf" "${RANGE[@]}" -g 1 -c 1 -n 5 -w 2
  done
  # Every op staged through pinned host memory (the fallback where ranks cannot map each other's memory).
  for b in $ALL11; do
    CFX_CUDA_IPC=0 nct "${b}-4ranks-1gpu-staged" 4 "$LIBDIR" "$NCT_BIN/${b}_perf" "${RANGE[@]}" -g 1 -c 1 -n 5 -w 2
  done
  # Over CUDA IPC at every size (CFX_CUDA_IPC_MIN_BYTES=0): every collective, and the binaries that are groups of sends
  # and receives (alltoallv, sendrecv, hypercube).
  for b in $ALL11; do
    CFX_CUDA_IPC_MIN_BYTES=0 nct "${b}-4ranks-1gpu-ipc" 4 "$LIBDIR" "$NCT_BIN/${b}_perf" "${RANGE[@]}" -g 1 -c 1 -n 5 -w 2
  done
  # Zero-copy: nccl-tests' buffers come from ncclMemAlloc; -R 2 registers them as symmetric windows, which every rank
  # maps, and the four collectives with a zero-copy form read peers' buffers in place (the others ignore the windows).
  for b in all_reduce all_gather reduce_scatter alltoall; do
    CFX_CUDA_IPC_MIN_BYTES=0 nct "${b}-4ranks-1gpu-ipc-symmetric" 4 "$LIBDIR" "$NCT_BIN/${b}_perf" "${RANGE[@]}" -g 1 -c 1 \
      -n 5 -w 2 -R 2
  done
  # Device buffers between hosts: ranks in pairs with their own NCCL_HOSTID (as_hosts.sh), shared memory within a
  # pair and the network transport between, every op staged through pinned host memory (one INFO line says why).
  for net in tcp ucx; do
    for b in all_reduce all_gather; do
      CFX_NET=$net nct "${b}-4ranks-1gpu-2hosts-$net" 4 "$LIBDIR" "$ROOT/tests/gpu/as_hosts.sh" 2 \
        "$NCT_BIN/${b}_perf" "${RANGE[@]}" -g 1 -c 1 -n 5 -w 2
    done
  done
  # Ranks on GPUs of their own, where the machine has several (none lent so far has): each rank on GPU LOCAL_RANK
  # (NCCL_TESTS_DEVICE unset), ours staged and by default (CUDA IPC, peer access between GPUs), and NVIDIA's beside.
  local NGPU NP
  NGPU=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ')
  if [ "$NGPU" -ge 2 ]; then
    NP=$((NGPU < 4 ? NGPU : 4))
    for b in all_reduce all_gather; do
      CFX_CUDA_IPC=0 nct "${b}-${NP}ranks-${NP}gpus-staged" "$NP" "$LIBDIR" env -u NCCL_TESTS_DEVICE "$NCT_BIN/${b}_perf" \
        "${RANGE[@]}" -g 1 -c 1 -n 5 -w 2
      nct "${b}-${NP}ranks-${NP}gpus" "$NP" "$LIBDIR" env -u NCCL_TESTS_DEVICE "$NCT_BIN/${b}_perf" \
        "${RANGE[@]}" -g 1 -c 1 -n 5 -w 2
      if [ -n "$NV_NCCL" ]; then
        nct "${b}-${NP}ranks-${NP}gpus-nvidia" "$NP" "$NV_NCCL" env -u NCCL_TESTS_DEVICE "$NCT_BIN/${b}_perf" \
          "${RANGE[@]}" -g 1 -c 1 -n 5 -w 2
      fi
    done
  else
    record "nccl-tests ranks-on-own-gpus" 77 "skipped: one GPU here (needs two or more)"
  fi
  # CUDA graphs: nccl-tests captures its timed ops (and the checked one) and replays the graph -G times; captured ops
  # stage, while the uncaptured ones (warm-up) take the IPC path by the rules, on one communicator.
  for b in all_reduce all_gather reduce_scatter broadcast alltoall sendrecv; do
    CFX_CUDA_IPC=0 nct "${b}-4ranks-1gpu-graph-staged" 4 "$LIBDIR" "$NCT_BIN/${b}_perf" "${RANGE[@]}" -g 1 -c 1 -n 4 -w 2 -G 3
  done
  for b in all_reduce all_gather reduce_scatter alltoall; do
    CFX_CUDA_IPC_MIN_BYTES=0 nct "${b}-4ranks-1gpu-graph" 4 "$LIBDIR" "$NCT_BIN/${b}_perf" "${RANGE[@]}" -g 1 -c 1 -n 4 \
      -w 2 -G 3
  done
  if ! have_torch; then
    record "torch" 77 "no torch in python3"
    return
  fi
  torch_job "conflux-1rank" 1 "$LIB" "$LIBDIR"
  torch_job "nvidia-1rank" 1 "" ""
  torch_job "conflux-2ranks-1gpu" 2 "$LIB" "$LIBDIR"
  torch_job "conflux-4ranks-1gpu" 4 "$LIB" "$LIBDIR"
  CFX_CUDA_IPC=0 torch_job "conflux-2ranks-1gpu-staged" 2 "$LIB" "$LIBDIR"
  # The CUDA IPC path under PyTorch's many streams (its device work rides the user's stream: the order whose absence
  # hung PyTorch when staging copied on a stream of the library's), for every size.
  CFX_CUDA_IPC_MIN_BYTES=0 torch_job "conflux-4ranks-1gpu-ipc" 4 "$LIB" "$LIBDIR"
  torch_job "nvidia-1rank-graph" 1 "" "" --graph
  torch_job "conflux-1rank-graph" 1 "$LIB" "$LIBDIR" --graph
  torch_job "conflux-2ranks-1gpu-graph" 2 "$LIB" "$LIBDIR" --graph
  torch_job "conflux-4ranks-1gpu-graph" 4 "$LIB" "$LIBDIR" --graph
}

# ---- 4. figures (--figures, or after the full proof) ----
figures() {
  local BIG=(-b 8 -e 1G -f 2) b
  # 1 rank, both libraries, side by side: the column every 4-rank row is set beside.
  for b in all_reduce all_gather; do
    nct "fig-$b-1rank-conflux" 1 "$LIBDIR" "$NCT_BIN/${b}_perf" "${BIG[@]}" -g 1 -c 1 -n 20 -w 5
    if [ -n "$NV_NCCL" ]; then
      nct "fig-$b-1rank-nvidia" 1 "$NV_NCCL" "$NCT_BIN/${b}_perf" "${BIG[@]}" -g 1 -c 1 -n 20 -w 5
    else
      record "nccl-tests fig-$b-1rank-nvidia" 77 "NVIDIA's libnccl.so.2 not found (--nvidia-nccl DIR)"
    fi
  done
  # 4 ranks on one GPU, every path of all-reduce: the default (staged below 8 MiB, CUDA IPC from there), all staged,
  # CUDA IPC scratch at every size, and in symmetric windows (zero-copy).
  nct "fig-all_reduce-4ranks-1gpu-default" 4 "$LIBDIR" "$NCT_BIN/all_reduce_perf" "${BIG[@]}" -g 1 -c 1 -n 5 -w 1
  CFX_CUDA_IPC=0 nct "fig-all_reduce-4ranks-1gpu-staged" 4 "$LIBDIR" "$NCT_BIN/all_reduce_perf" "${BIG[@]}" -g 1 -c 1 \
    -n 5 -w 1
  CFX_CUDA_IPC_MIN_BYTES=0 nct "fig-all_reduce-4ranks-1gpu-ipc" 4 "$LIBDIR" "$NCT_BIN/all_reduce_perf" "${BIG[@]}" -g 1 \
    -c 1 -n 5 -w 1
  CFX_CUDA_IPC_MIN_BYTES=0 nct "fig-all_reduce-4ranks-1gpu-symmetric" 4 "$LIBDIR" "$NCT_BIN/all_reduce_perf" "${BIG[@]}" \
    -g 1 -c 1 -n 5 -w 1 -R 2
  CFX_CUDA_IPC_DEVICE_SYNC=1 CFX_CUDA_IPC_MIN_BYTES=0 CFX_TIMEOUT_MS=30000 nct "fig-all_reduce-4ranks-1gpu-devicesync" 4 \
    "$LIBDIR" "$NCT_BIN/all_reduce_perf" "${BIG[@]}" -g 1 -c 1 -n 5 -w 1
  nct "fig-all_gather-4ranks-1gpu-default" 4 "$LIBDIR" "$NCT_BIN/all_gather_perf" "${BIG[@]}" -g 1 -c 1 -n 5 -w 1
  CFX_CUDA_IPC=0 nct "fig-all_gather-4ranks-1gpu-staged" 4 "$LIBDIR" "$NCT_BIN/all_gather_perf" "${BIG[@]}" -g 1 -c 1 \
    -n 5 -w 1
  # The table: out-of-place times at 8 B, 64 KiB, 16 MiB and 1 GiB per path, NVIDIA's 1 rank beside.
  local f="$OUT/nccl-tests-fig"
  {
    echo "all_reduce_perf, out-of-place time (us); 4 ranks on one GPU by path, 1 rank by library"
    python3 "$ROOT/tests/gpu/nct_table.py" --ratio-to "NVIDIA 1 rank" \
      "NVIDIA 1 rank=$f-all_reduce-1rank-nvidia.log" "Conflux 1 rank=$f-all_reduce-1rank-conflux.log" \
      "4 ranks, default=$f-all_reduce-4ranks-1gpu-default.log" "4 ranks, staged=$f-all_reduce-4ranks-1gpu-staged.log" \
      "4 ranks, IPC scratch=$f-all_reduce-4ranks-1gpu-ipc.log" \
      "4 ranks, symmetric windows=$f-all_reduce-4ranks-1gpu-symmetric.log" \
      "4 ranks, device-side barriers=$f-all_reduce-4ranks-1gpu-devicesync.log"
    echo
    echo "all_gather_perf, out-of-place time (us)"
    python3 "$ROOT/tests/gpu/nct_table.py" --ratio-to "NVIDIA 1 rank" \
      "NVIDIA 1 rank=$f-all_gather-1rank-nvidia.log" "Conflux 1 rank=$f-all_gather-1rank-conflux.log" \
      "4 ranks, default=$f-all_gather-4ranks-1gpu-default.log" "4 ranks, staged=$f-all_gather-4ranks-1gpu-staged.log"
  } > "$OUT/summary_table.md" 2>&1
}

if [ $QUICK = 1 ]; then
  proof_quick
elif [ $FIGURES = 0 ]; then
  run_gtests
  proof_full
fi
if [ $QUICK = 0 ]; then figures; fi
finish
