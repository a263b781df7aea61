#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Packs everything tests/gpu/run_on_gpu.sh needs into one folder that can travel to a GPU machine which has the
# CUDA driver, PyTorch and NVIDIA's NCCL wheel but no compiler toolchain for Conflux's dependencies and no MPI
# (the machines this project is lent), so that no GPU time goes into building:
#   lib/   our libnccl.so.2
#   deps/  the shared libraries it needs beyond glibc and libstdc++ (UCX, hwloc, OpenSSL's libcrypto, ...); the
#          runner links into lib/ only those the GPU machine lacks, so a Python that loads its own libcrypto there
#          keeps it
#   rt/    minimpi's libmpi.so (tests/gpu/minimpi) and the CUDA runtime the nccl-tests binaries were linked with
#   bin/   the gtest GPU binaries, the small-op probe, cfxrun, and nccl-tests' 11 *_perf binaries built here with
#          nvcc against NVIDIA's nccl.h (its MPI build, against minimpi, so that cfxrun can start one process per rank
#          on one GPU)
#   test_nccl.conf
#   nvidia/ NVIDIA's libnccl.so.2 (the one nccl-tests was built against), with --with-nvidia-nccl only: ~220 MB, most
#          of a bundle's transfer limit; without it run_on_gpu.sh takes the NCCL wheel beside the GPU machine's torch
# Then: tests/gpu/run_on_gpu.sh --bundle DIR.
#
# Usage: tests/gpu/pack_for_gpu.sh --build-dir DIR --nccl-tests-src DIR [--out DIR] [--nccl-home DIR] [--tar FILE]
#                                  [--with-nvidia-nccl]
# --tar FILE also writes the folder as FILE (xz; the GPU binaries shrink ~15x), whose top folder is gpu-bundle.
# NVCC_GENCODE picks nccl-tests' GPU targets (default sm_90, the H100/H200); the build dir's CFX_CUDA_ARCHS must
# cover the same GPU.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=""
NCT_SRC=""
OUT="$ROOT/.gpu-bundle"
NCCL_HOME_DIR=""
TAR=""
WITH_NV=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --nccl-tests-src) NCT_SRC=$(cd "$2" && pwd); shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --nccl-home) NCCL_HOME_DIR=$(cd "$2" && pwd); shift 2 ;;
    --tar) TAR="$2"; shift 2 ;;
    --with-nvidia-nccl) WITH_NV=1; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "pack_for_gpu.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
die() { echo "pack_for_gpu.sh: $*" >&2; exit 1; }
[ -n "$BUILD" ] || die "--build-dir is required"
[ -n "$NCT_SRC" ] || die "--nccl-tests-src is required (nccl-tests' public source, fetched into an ignored folder)"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$NVCC" ] || die "no nvcc: the CUDA toolkit is needed to build nccl-tests"
CUDA_HOME=$(dirname "$(dirname "$NVCC")")
# NVIDIA's headers and library to build against: the toolkit's copy unless told otherwise.
if [ -z "$NCCL_HOME_DIR" ]; then
  NCCL_HOME_DIR="$CUDA_HOME"
fi
[ -f "$NCCL_HOME_DIR/include/nccl.h" ] || die "no NVIDIA nccl.h under $NCCL_HOME_DIR/include"
[ -e "$NCCL_HOME_DIR/lib/libnccl.so" ] || [ -e "$NCCL_HOME_DIR/lib64/libnccl.so" ] ||
  die "no NVIDIA libnccl.so under $NCCL_HOME_DIR/lib or lib64"
LIB="$BUILD/src/libnccl.so.2"
MPILIB="$BUILD/tests/gpu/minimpi/lib/libmpi.so"
for f in "$LIB" "$MPILIB" "$BUILD/perf/cfxrun" "$BUILD/tests/gpu/cfx_gpu_device_collectives"; do
  [ -e "$f" ] || die "$f is missing: build the tree first (ninja -C $BUILD)"
done
ls "$BUILD"/src/primitives/*.fatbin > /dev/null 2>&1 || die "$BUILD has no CUDA kernels (no nvcc, or CFX_CUDA_KERNELS=OFF)"
grep -q '^CFX_KERNEL_TYPES:STRING=all$' "$BUILD/CMakeCache.txt" ||
  die "$BUILD builds kernels for some datatypes only (CFX_KERNEL_TYPES): the proof needs all of them"

rm -rf "$OUT"
mkdir -p "$OUT/lib" "$OUT/deps" "$OUT/rt" "$OUT/bin"
OUT=$(cd "$OUT" && pwd)

# nccl-tests, MPI build against minimpi, linked against NVIDIA's library (swapped for ours at run time).
MPI_HOME_DIR="$BUILD/nccl-tests-mpi"
mkdir -p "$MPI_HOME_DIR/include" "$MPI_HOME_DIR/lib"
cp "$ROOT/tests/gpu/minimpi/mpi.h" "$MPI_HOME_DIR/include/"
cp "$MPILIB" "$MPI_HOME_DIR/lib/"
NCT_BUILD="$BUILD/nccl-tests-build"  # kept: the next pack rebuilds only what changed
echo "pack: building nccl-tests in $NCT_BUILD (log $OUT/nccl-tests-build.log)"
make -C "$NCT_SRC" -j "$(nproc)" MPI=1 MPI_HOME="$MPI_HOME_DIR" NCCL_HOME="$NCCL_HOME_DIR" CUDA_HOME="$CUDA_HOME" \
  NVCC_GENCODE="${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}" BUILDDIR="$NCT_BUILD" \
  > "$OUT/nccl-tests-build.log" 2>&1 || die "nccl-tests build failed: see $OUT/nccl-tests-build.log"
n=0
for b in "$NCT_BUILD"/*_perf; do
  cp "$b" "$OUT/bin/"
  n=$((n + 1))
done
[ "$n" -eq 11 ] || die "expected 11 nccl-tests binaries, built $n"
# The binaries look for their verifiable library beside them when it is shared.
if [ -d "$NCT_BUILD/verifiable" ] && ls "$NCT_BUILD"/verifiable/*.so > /dev/null 2>&1; then
  mkdir -p "$OUT/bin/verifiable"
  cp "$NCT_BUILD"/verifiable/*.so "$OUT/bin/verifiable/"
fi

# Our library and what it needs beyond the C and C++ runtimes (which the GPU machine has, newer).
cp -L "$LIB" "$OUT/lib/libnccl.so.2"
ln -s libnccl.so.2 "$OUT/lib/libnccl.so"
ldd "$LIB" | awk '/=> \// {print $1, $3}' | while read -r name path; do
  case "$name" in
    libc.so.*|libm.so.*|libstdc++.so.*|libgcc_s.so.*|ld-linux*|libpthread.so.*|libdl.so.*|librt.so.*) ;;
    *) cp -L "$path" "$OUT/deps/$name" ;;
  esac
done
cp "$MPILIB" "$OUT/rt/"
cudart=$(ls "$CUDA_HOME"/lib64/libcudart.so.[0-9]* 2>/dev/null | grep -E 'libcudart\.so\.[0-9]+$' | head -1)
[ -n "$cudart" ] || die "no libcudart.so.N in $CUDA_HOME/lib64"
cp -L "$cudart" "$OUT/rt/"

cp "$BUILD"/tests/gpu/cfx_gpu_device_collectives "$BUILD"/tests/gpu/cfx_gpu_device_kernels "$BUILD/perf/cfxrun" \
  "$BUILD"/tests/gpu/gpu_small_op_probe "$OUT/bin/"
cp "$BUILD/tests/test_nccl.conf" "$OUT/test_nccl.conf"
if [ $WITH_NV = 1 ]; then
  mkdir -p "$OUT/nvidia"
  nv=$(ls "$NCCL_HOME_DIR"/lib64/libnccl.so.2 "$NCCL_HOME_DIR"/lib/libnccl.so.2 2> /dev/null | head -1)
  [ -n "$nv" ] || die "--with-nvidia-nccl: no libnccl.so.2 under $NCCL_HOME_DIR/lib64 or lib"
  cp -L "$nv" "$OUT/nvidia/libnccl.so.2"
fi
strip --strip-debug "$OUT"/bin/* 2> /dev/null || true
du -sh "$OUT"
if [ -n "$TAR" ]; then
  tar -C "$(dirname "$OUT")" --transform "s,^$(basename "$OUT"),gpu-bundle," -cJf "$TAR" "$(basename "$OUT")"
  du -sh "$TAR"
  OUT=$TAR
fi
echo "pack: done; on the GPU machine: tests/gpu/run_on_gpu.sh --bundle ${OUT#"$ROOT"/}"
