#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU proof of Conflux, for a machine with an NVIDIA GPU and the CUDA toolkit (see tests/gpu/README.md).
#
# It shows, in one run and one log folder, that our libnccl.so.2 does on a real GPU what NVIDIA's does, and what
# NVIDIA's refuses:
#   1. the gtest GPU tests (label gpu): every datatype and op on device buffers, stream semantics, several ranks
#      on one GPU in one process and in many, ncclMemAlloc, graph capture refused, the CUDA IPC path;
#   2. all 11 nccl-tests binaries with -c 1 (results checked by nccl-tests itself), 4 ranks on ONE GPU
#      (MPI build, NCCL_TESTS_DEVICE=0), staged and (all-reduce, all-gather, broadcast) over CUDA IPC: NVIDIA's NCCL
#      stops these with "Duplicate GPU detected";
#   3. a torch.distributed job with backend "nccl" and our library in LD_PRELOAD at 2 and 4 ranks on one GPU, and
#      at 1 rank with each library (tests/gpu/torch_collectives.py: exact checks and a timed DDP step);
#   4. figures: all_reduce_perf and all_gather_perf 8 B - 1 GiB with 4 ranks on one GPU (CUDA IPC path and staged
#      path), and 1 rank with both libraries side by side.
# Every step has a timeout, failures do not stop later steps, and the exit status is non-zero if any step failed.
# Without a GPU it exits 77 (skip) with the reason.
#
# Usage: tests/gpu/run_on_gpu.sh [--build-dir DIR] [--nccl-tests-bin DIR | --nccl-tests-src DIR]
#                                [--nvidia-nccl DIR] [--out DIR] [--quick]
set -u -o pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=""
NCT_BIN=""
NCT_SRC=""
NV_NCCL=""
OUT="$ROOT/gpu-proof"
QUICK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --nccl-tests-bin) NCT_BIN=$(cd "$2" && pwd); shift 2 ;;
    --nccl-tests-src) NCT_SRC=$(cd "$2" && pwd); shift 2 ;;
    --nvidia-nccl) NV_NCCL=$(cd "$2" && pwd); shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
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

# record NAME RC DETAIL: one summary row.
record() {
  local verdict=pass
  if [ "$2" -eq 77 ]; then verdict=skip; elif [ "$2" -ne 0 ]; then verdict="FAIL (rc $2)"; FAILED=1; fi
  SUMMARY+=("$(printf '%-44s %-12s %s' "$1" "$verdict" "$3")")
  echo "== $1: $verdict $3"
}

echo "== environment"
{
  nvidia-smi -L
  nvidia-smi --query-gpu=driver_version,memory.total --format=csv,noheader
  command -v nvcc > /dev/null && nvcc --version | tail -1
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>&1
  uname -r; nproc
} 2>&1 | tee "$OUT/environment.txt"

# ---- 0. build ----
if [ -z "$BUILD" ]; then
  BUILD="$ROOT/build-gpu"
  echo "== building Conflux in $BUILD"
  if cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 &&
     cmake --build "$BUILD" -j "$(nproc)" >> "$OUT/build.log" 2>&1; then
    record build 0 "$BUILD"
  else
    record build 1 "see build.log"
    printf '%s\n' "${SUMMARY[@]}"
    exit 1
  fi
fi
LIB=$(find "$BUILD/src" -maxdepth 2 -name 'libnccl.so.2' | head -1)
if [ -z "$LIB" ]; then echo "no libnccl.so.2 under $BUILD/src" >&2; exit 1; fi
LIBDIR=$(dirname "$LIB")
# nccl-tests needs libcudart.so.13: the toolkit's, or the one beside torch.
CUDART=/usr/local/cuda/lib64
TORCH_CU=$(python3 -c "import nvidia.cu13, os; print(os.path.join(list(nvidia.cu13.__path__)[0], 'lib'))" 2>/dev/null || true)
[ -n "$TORCH_CU" ] && CUDART="$CUDART:$TORCH_CU"
if [ -z "$NV_NCCL" ]; then
  NV_NCCL=$(python3 -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0] + '/lib')" 2>/dev/null || true)
fi

# ---- 1. gtest GPU tests ----
for t in "$BUILD"/tests/gpu/cfx_gpu_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  NCCL_CONF_FILE="$BUILD/tests/test_nccl.conf" LD_LIBRARY_PATH="$LIBDIR" timeout $((STEP_TIMEOUT * 2)) "$t" > "$OUT/$name.log" 2>&1
  rc=$?
  record "gtest $name" $rc "$(grep -E '^\[  (PASSED|FAILED)  \]|tests? ran' "$OUT/$name.log" | tr -s ' ' | tr '\n' ' ')"
done

# ---- 2. nccl-tests ----
if [ -z "$NCT_BIN" ] && [ -n "$NCT_SRC" ]; then
  NCT_BIN="$OUT/nccl-tests-build"
  MPI_INC=$(mpicc -showme:incdirs 2>/dev/null | awk '{print $1}')
  CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")")
  NV_HOME=$(dirname "$NV_NCCL")
  if make -C "$NCT_SRC" -j "$(nproc)" MPI=1 MPI_HOME="$(dirname "$MPI_INC")" NCCL_HOME="$NV_HOME" CUDA_HOME="$CUDA_HOME" \
       NVCC_GENCODE="${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}" BUILDDIR="$NCT_BIN" > "$OUT/nccl-tests-build.log" 2>&1; then
    record "nccl-tests build" 0 "$NCT_BIN"
  else
    record "nccl-tests build" 1 "see nccl-tests-build.log"
    NCT_BIN=""
  fi
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_DEBUG="${NCCL_DEBUG:-WARN}" CFX_CUDA_IPC="${CFX_CUDA_IPC:-0}"
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl "self,tcp"
        -x NCCL_TESTS_DEVICE=0 -x LD_LIBRARY_PATH -x NCCL_SOCKET_IFNAME=lo -x CFX_CUDA_IPC -x NCCL_DEBUG)
# nct NAME NP LIBPATH ARGS...: one nccl-tests run, summarised by its own verdict and average bus bandwidth.
nct() {
  local name=$1 np=$2 libpath=$3; shift 3
  local log="$OUT/nccl-tests-$name.log"
  if [ "$np" -gt 1 ]; then
    LD_LIBRARY_PATH="$libpath:$CUDART" timeout "$STEP_TIMEOUT" "${MPIRUN[@]}" -np "$np" "$@" > "$log" 2>&1
  else
    LD_LIBRARY_PATH="$libpath:$CUDART" timeout "$STEP_TIMEOUT" "$@" > "$log" 2>&1
  fi
  local rc=$?
  if [ $rc -eq 0 ] && ! grep -q 'Out of bounds values : 0 OK' "$log"; then rc=1; fi
  record "nccl-tests $name" $rc "$(grep -hE 'Out of bounds|Avg bus' "$log" | tr -s ' ' | tr '\n' ' ')"
}
if [ -n "$NCT_BIN" ]; then
  if [ $QUICK = 1 ]; then RANGE=(-b 8 -e 1M -f 8); else RANGE=(-b 8 -e 32M -f 4); fi
  for b in all_reduce all_gather broadcast reduce reduce_scatter alltoall alltoallv gather scatter sendrecv hypercube; do
    CFX_CUDA_IPC=0 nct "${b}-4ranks-1gpu" 4 "$LIBDIR" "$NCT_BIN/${b}_perf" "${RANGE[@]}" -g 1 -c 1 -n 5 -w 2
  done
  for b in all_reduce all_gather broadcast; do
    CFX_CUDA_IPC=1 nct "${b}-4ranks-1gpu-ipc" 4 "$LIBDIR" "$NCT_BIN/${b}_perf" "${RANGE[@]}" -g 1 -c 1 -n 5 -w 2
  done
else
  record "nccl-tests" 77 "no --nccl-tests-bin or --nccl-tests-src given"
fi

# ---- 3. torch.distributed ----
# torch_job NAME NPROC PRELOAD: the job's RESULT line is the summary.
torch_job() {
  local name=$1 np=$2 preload=$3
  local log="$OUT/torch-$name.log"
  LD_PRELOAD="$preload" PYTHONUNBUFFERED=1 timeout "$STEP_TIMEOUT" python3 -m torch.distributed.run --standalone \
    --nproc_per_node "$np" "$ROOT/tests/gpu/torch_collectives.py" > "$log" 2>&1
  record "torch $name" $? "$(grep -h '^RESULT' "$log" | cut -c8- | tr -d '\n')"
}
if python3 -c "import torch, torch.distributed" 2> /dev/null; then
  torch_job "conflux-1rank" 1 "$LIB"
  torch_job "conflux-2ranks-1gpu" 2 "$LIB"
  torch_job "conflux-4ranks-1gpu" 4 "$LIB"
  torch_job "nvidia-1rank" 1 ""
else
  record "torch" 77 "no torch in python3"
fi

# ---- 4. figures (last: the longest step) ----
if [ -n "$NCT_BIN" ]; then
  if [ $QUICK = 1 ]; then BIG=(-b 8 -e 64M -f 8); else BIG=(-b 8 -e 1G -f 2); fi
  for b in all_reduce all_gather; do
    CFX_CUDA_IPC=1 nct "fig-$b-4ranks-1gpu-conflux-ipc" 4 "$LIBDIR" "$NCT_BIN/${b}_perf" "${BIG[@]}" -g 1 -c 1 -n 5 -w 1
    CFX_CUDA_IPC=0 nct "fig-$b-4ranks-1gpu-conflux-staged" 4 "$LIBDIR" "$NCT_BIN/${b}_perf" "${BIG[@]}" -g 1 -c 1 -n 5 -w 1
    nct "fig-$b-1rank-conflux" 1 "$LIBDIR" "$NCT_BIN/${b}_perf" "${BIG[@]}" -g 1 -c 1 -n 10 -w 2
    if [ -n "$NV_NCCL" ]; then nct "fig-$b-1rank-nvidia" 1 "$NV_NCCL" "$NCT_BIN/${b}_perf" "${BIG[@]}" -g 1 -c 1 -n 10 -w 2; fi
  done
fi

echo
echo "== summary (logs in $OUT)"
printf '%s\n' "${SUMMARY[@]}" | tee "$OUT/summary.txt"
exit $FAILED
