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
# Usage: tests/gpu/run_on_gpu.sh --bundle DIR|FILE.tar.xz [--nvidia-nccl DIR] [--out DIR] [--quick] [--tar FILE]
#        tests/gpu/run_on_gpu.sh [--build-dir DIR] --nccl-tests-src DIR [...]
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
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --bundle) BUNDLE="$2"; shift 2 ;;
    --tar) TAR="$2"; shift 2 ;;
    --nccl-tests-src) NCT_SRC=$(cd "$2" && pwd); shift 2 ;;
    --nvidia-nccl) NV_NCCL=$(cd "$2" && pwd); shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "run_on_gpu.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

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
# NVIDIA's library for the side-by-side runs: the NCCL wheel beside torch.
if [ -z "$NV_NCCL" ]; then
  NV_NCCL=$(python3 -c "
import glob, os, nvidia
hits = [h for p in nvidia.__path__ for h in glob.glob(os.path.join(p, '**', 'libnccl.so.2'), recursive=True)]
print(os.path.dirname(sorted(hits)[0]) if hits else '')" 2> /dev/null || true)
fi
echo "bundle $BUNDLE; NVIDIA's NCCL: ${NV_NCCL:-none found}" | tee -a "$OUT/environment.txt"

# ---- 1. gtest GPU tests ----
for t in "$BUNDLE"/bin/cfx_gpu_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  t_limit=$(budget $((STEP_TIMEOUT * 2)))
  if [ "$t_limit" = 0 ]; then record "gtest $name" 77 "skipped: time budget spent"; continue; fi
  NCCL_CONF_FILE="$BUNDLE/test_nccl.conf" LD_LIBRARY_PATH="$LIBDIR" timeout "$t_limit" "$t" > "$OUT/$name.log" 2>&1
  rc=$?
  record "gtest $name" $rc "$(grep -E '^\[  (PASSED|FAILED)  \]|tests? ran' "$OUT/$name.log" | tr -s ' ' | tr '\n' ' ')"
done

# ---- 2. nccl-tests ----
export NCCL_DEBUG="${NCCL_DEBUG:-WARN}" NCCL_TESTS_DEVICE=0 NCCL_SOCKET_IFNAME=lo
NCT_GAVE_UP=0
GRAPH_GAVE_UP=0
# nct NAME NP LIBPATH ARGS...: one nccl-tests run, summarised by its own verdict and average bus bandwidth.
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
  # Over CUDA IPC, the library's INIT lines say which form the scratch took and which windows went zero-copy.
  local debug=$NCCL_DEBUG subsys=${NCCL_DEBUG_SUBSYS:-}
  if [ "${CFX_CUDA_IPC:-0}" = 1 ]; then debug=INFO; subsys=INIT; fi
  NCCL_DEBUG=$debug NCCL_DEBUG_SUBSYS=$subsys LD_LIBRARY_PATH="$libpath:$RT" timeout "$limit" "$CFXRUN" -n "$np" \
    --timeout $((limit - 5)) "$@" >> "$log" 2>&1
  local rc=$?
  local ipc=""
  if [ "${CFX_CUDA_IPC:-0}" = 1 ]; then
    ipc="IPC scratch per rank: $(grep -c 'shared as file descriptors' "$log") shareable, $(grep -c 'legacy IPC handles' "$log") legacy, $(grep -c 'path off' "$log") off; zero-copy windows: $(grep -c 'mapped by all .*: zero-copy' "$log")"
  fi
  if [ $rc -eq 124 ] && [ "$FIRST_NCT" = 1 ]; then NCT_GAVE_UP=1; fi
  case "$name" in *-graph*) if [ $rc -eq 124 ]; then GRAPH_GAVE_UP=1; fi ;; esac
  FIRST_NCT=0
  if [ $rc -eq 0 ] && ! grep -q 'Out of bounds values : 0 OK' "$log"; then rc=1; fi
  record "nccl-tests $name" $rc "$(grep -hE 'nccl-library|Out of bounds|Avg bus' "$log" | tr -s ' ' | tr '\n' ' ')$ipc"
}
FIRST_NCT=1
if [ $QUICK = 1 ]; then RANGE=(-b 8 -e 1M -f 8); else RANGE=(-b 8 -e 32M -f 4); fi
# The library's defaults: every op staged through pinned host memory.
for b in all_reduce all_gather broadcast reduce reduce_scatter alltoall alltoallv gather scatter sendrecv hypercube; do
  nct "${b}-4ranks-1gpu" 4 "$LIBDIR" "$NCT_BIN/${b}_perf" "${RANGE[@]}" -g 1 -c 1 -n 5 -w 2
done
# Over CUDA IPC at every size (CFX_CUDA_IPC_MIN_BYTES=0): every collective, and the binaries that are groups of sends
# and receives (alltoallv, sendrecv, hypercube).
for b in all_reduce all_gather broadcast reduce reduce_scatter alltoall alltoallv gather scatter sendrecv hypercube; do
  CFX_CUDA_IPC=1 CFX_CUDA_IPC_MIN_BYTES=0 nct "${b}-4ranks-1gpu-ipc" 4 "$LIBDIR" "$NCT_BIN/${b}_perf" "${RANGE[@]}" -g 1 -c 1 -n 5 -w 2
done
# Zero-copy: nccl-tests' buffers come from ncclMemAlloc; -R 2 registers them as symmetric windows, which every rank
# maps, and the four collectives with a zero-copy form read peers' buffers in place (the others ignore the windows).
for b in all_reduce all_gather reduce_scatter alltoall; do
  CFX_CUDA_IPC=1 CFX_CUDA_IPC_MIN_BYTES=0 nct "${b}-4ranks-1gpu-ipc-symmetric" 4 "$LIBDIR" "$NCT_BIN/${b}_perf" "${RANGE[@]}" -g 1 -c 1 -n 5 -w 2 -R 2
done
# Device buffers between hosts: ranks in pairs with their own NCCL_HOSTID (as_hosts.sh), shared memory within a
# pair and the network transport between, every op staged through pinned host memory.
for net in tcp ucx; do
  for b in all_reduce all_gather; do
    CFX_NET=$net CFX_CUDA_IPC=0 nct "${b}-4ranks-1gpu-2hosts-$net" 4 "$LIBDIR" "$ROOT/tests/gpu/as_hosts.sh" 2 \
      "$NCT_BIN/${b}_perf" "${RANGE[@]}" -g 1 -c 1 -n 5 -w 2
  done
done
# Ranks on GPUs of their own, where the machine has several (none lent so far has): each rank on GPU LOCAL_RANK
# (NCCL_TESTS_DEVICE unset), ours staged and over CUDA IPC (peer access between GPUs), and NVIDIA's beside them.
NGPU=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ')
if [ "$NGPU" -ge 2 ]; then
  NP=$((NGPU < 4 ? NGPU : 4))
  for b in all_reduce all_gather; do
    CFX_CUDA_IPC=0 nct "${b}-${NP}ranks-${NP}gpus" "$NP" "$LIBDIR" env -u NCCL_TESTS_DEVICE "$NCT_BIN/${b}_perf" \
      "${RANGE[@]}" -g 1 -c 1 -n 5 -w 2
    CFX_CUDA_IPC=1 nct "${b}-${NP}ranks-${NP}gpus-ipc" "$NP" "$LIBDIR" env -u NCCL_TESTS_DEVICE "$NCT_BIN/${b}_perf" \
      "${RANGE[@]}" -g 1 -c 1 -n 5 -w 2
    if [ -n "$NV_NCCL" ]; then
      nct "${b}-${NP}ranks-${NP}gpus-nvidia" "$NP" "$NV_NCCL" env -u NCCL_TESTS_DEVICE "$NCT_BIN/${b}_perf" \
        "${RANGE[@]}" -g 1 -c 1 -n 5 -w 2
    fi
  done
else
  record "nccl-tests ranks-on-own-gpus" 77 "skipped: one GPU here (needs two or more)"
fi
# CUDA graphs: nccl-tests captures its timed ops (and the checked one) and replays the graph -G times.
for b in all_reduce all_gather reduce_scatter broadcast alltoall sendrecv; do
  CFX_CUDA_IPC=0 nct "${b}-4ranks-1gpu-graph" 4 "$LIBDIR" "$NCT_BIN/${b}_perf" "${RANGE[@]}" -g 1 -c 1 -n 4 -w 2 -G 3
done
# With CUDA IPC on, captured ops stage while the uncaptured ones (warm-up) take the path, on one communicator.
for b in all_reduce all_gather reduce_scatter alltoall; do
  CFX_CUDA_IPC=1 CFX_CUDA_IPC_MIN_BYTES=0 nct "${b}-4ranks-1gpu-graph-ipc" 4 "$LIBDIR" "$NCT_BIN/${b}_perf" "${RANGE[@]}" -g 1 -c 1 -n 4 -w 2 -G 3
done

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
if python3 -c "import torch, torch.distributed" 2> /dev/null; then
  torch_job "conflux-1rank" 1 "$LIB" "$LIBDIR"
  torch_job "nvidia-1rank" 1 "" ""
  torch_job "conflux-2ranks-1gpu" 2 "$LIB" "$LIBDIR"
  torch_job "conflux-4ranks-1gpu" 4 "$LIB" "$LIBDIR"
  # The CUDA IPC path under PyTorch's many streams (its device work rides the user's stream: the order whose
  # absence hung PyTorch when staging copied on a stream of the library's), for every size.
  CFX_CUDA_IPC=1 CFX_CUDA_IPC_MIN_BYTES=0 torch_job "conflux-2ranks-1gpu-ipc" 2 "$LIB" "$LIBDIR"
  CFX_CUDA_IPC=1 CFX_CUDA_IPC_MIN_BYTES=0 torch_job "conflux-4ranks-1gpu-ipc" 4 "$LIB" "$LIBDIR"
  torch_job "nvidia-1rank-graph" 1 "" "" --graph
  torch_job "conflux-1rank-graph" 1 "$LIB" "$LIBDIR" --graph
  torch_job "conflux-2ranks-1gpu-graph" 2 "$LIB" "$LIBDIR" --graph
  torch_job "conflux-4ranks-1gpu-graph" 4 "$LIB" "$LIBDIR" --graph
else
  record "torch" 77 "no torch in python3"
fi

# ---- 4. figures (last: the longest step); 1 rank side by side first, they are short ----
if [ $QUICK = 1 ]; then BIG=(-b 8 -e 64M -f 8); else BIG=(-b 8 -e 1G -f 2); fi
for b in all_reduce all_gather; do
  nct "fig-$b-1rank-conflux" 1 "$LIBDIR" "$NCT_BIN/${b}_perf" "${BIG[@]}" -g 1 -c 1 -n 10 -w 2
  if [ -n "$NV_NCCL" ]; then
    nct "fig-$b-1rank-nvidia" 1 "$NV_NCCL" "$NCT_BIN/${b}_perf" "${BIG[@]}" -g 1 -c 1 -n 10 -w 2
  else
    record "nccl-tests fig-$b-1rank-nvidia" 77 "NVIDIA's libnccl.so.2 not found (--nvidia-nccl DIR)"
  fi
done
for b in all_reduce all_gather; do
  CFX_CUDA_IPC=1 CFX_CUDA_IPC_MIN_BYTES=0 nct "fig-$b-4ranks-1gpu-conflux-ipc-symmetric" 4 "$LIBDIR" "$NCT_BIN/${b}_perf" "${BIG[@]}" -g 1 -c 1 -n 5 -w 1 -R 2
  CFX_CUDA_IPC=1 CFX_CUDA_IPC_MIN_BYTES=0 nct "fig-$b-4ranks-1gpu-conflux-ipc" 4 "$LIBDIR" "$NCT_BIN/${b}_perf" "${BIG[@]}" -g 1 -c 1 -n 5 -w 1
  CFX_CUDA_IPC=0 nct "fig-$b-4ranks-1gpu-conflux-staged" 4 "$LIBDIR" "$NCT_BIN/${b}_perf" "${BIG[@]}" -g 1 -c 1 -n 5 -w 1
done
# CUDA IPC with its default size rule: staged below 8 MiB and IPC from there (the better of the two rows above).
CFX_CUDA_IPC=1 nct "fig-all_reduce-4ranks-1gpu-conflux-ipc-auto" 4 "$LIBDIR" "$NCT_BIN/all_reduce_perf" "${BIG[@]}" -g 1 \
  -c 1 -n 5 -w 1
finish
