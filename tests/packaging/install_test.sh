#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `cmake --install` into a temporary prefix, then what a user does with it: the layout and SONAME links are as
# NVIDIA's packages lay them out (libnccl.so.2 -> libnccl.so.2.X.Y, libnccl.so -> libnccl.so.2), installed
# programs carry no build-tree path, and the two consumer projects of examples/ (pkg-config, find_package) build
# against the prefix and run at 2 ranks under the installed cfxrun.
#   install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
lib=$prefix/lib/conflux
nccl_version=$(sed -n 's/^NCCL_API //p' "$src/VERSION")

# --- layout and links ---
for f in lib/conflux/libnccl.so.$nccl_version include/conflux/nccl.h include/conflux/conflux.h \
         include/conflux/conflux_nccl_ext.h lib/pkgconfig/conflux.pc lib/conflux/pkgconfig/nccl.pc \
         lib/cmake/Conflux/ConfluxConfig.cmake lib/cmake/Conflux/ConfluxConfigVersion.cmake \
         lib/cmake/Conflux/ConfluxTargets.cmake bin/cfxrun bin/all_reduce_perf bin/sendrecv_perf \
         share/doc/libconflux2/copyright; do
  [[ -e $prefix/$f ]] && ok "installed $f" || bad "missing $f"
done
[[ $(readlink "$lib/libnccl.so.2") == libnccl.so.$nccl_version ]] && ok "libnccl.so.2 -> libnccl.so.$nccl_version" \
  || bad "libnccl.so.2 links to '$(readlink "$lib/libnccl.so.2")'"
[[ $(readlink "$lib/libnccl.so") == libnccl.so.2 ]] && ok "libnccl.so -> libnccl.so.2" \
  || bad "libnccl.so links to '$(readlink "$lib/libnccl.so")'"
[[ $(readlink "$lib/libconflux.so") == libnccl.so.2 ]] && ok "libconflux.so -> libnccl.so.2" \
  || bad "libconflux.so links to '$(readlink "$lib/libconflux.so")'"
soname=$(readelf -d "$lib/libnccl.so.$nccl_version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ $soname == libnccl.so.2 ]] && ok "SONAME libnccl.so.2" || bad "SONAME '$soname'"
if [[ -e $lib/libconflux_mpi.so ]]; then
  ok "installed lib/conflux/libconflux_mpi.so"
  [[ -e $prefix/lib/cmake/Conflux/ConfluxMpiTargets.cmake ]] && ok "Conflux::mpi_interpose exported" \
    || bad "ConfluxMpiTargets.cmake missing"
fi
# Nothing that NVIDIA's packages install may be shadowed: no libnccl* and no nccl.h in the standard directories.
stray=$(cd "$prefix" && ls lib/libnccl* include/nccl.h lib/pkgconfig/nccl.pc 2>/dev/null || true)
[[ -z $stray ]] && ok "nothing in NVIDIA's places" || bad "installed where NVIDIA's NCCL lives: $stray"
# Installed programs find the library relative to themselves, never in the build tree.
for f in "$prefix"/bin/* "$lib"/*.so*; do
  [[ -L $f ]] && continue
  paths=$(readelf -d "$f" | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]/\2/p')
  if [[ $paths == *"$build"* || $paths == *"$(cd "$build" && pwd -P)"* ]]; then bad "$f has a build-tree RUNPATH: $paths"; fi
done
[[ $(readelf -d "$prefix/bin/all_reduce_perf" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p') == '$ORIGIN/../lib/conflux' ]] \
  && ok "all_reduce_perf RUNPATH \$ORIGIN/../lib/conflux" || bad "all_reduce_perf RUNPATH is wrong"
grep -q "^prefix=$prefix\$" "$prefix/lib/pkgconfig/conflux.pc" && ok "conflux.pc names the prefix" \
  || bad "conflux.pc: $(grep ^prefix= "$prefix/lib/pkgconfig/conflux.pc")"

# --- the installed perf tools run from the prefix ---
"$prefix/bin/cfxrun" -n 2 --timeout 120 all_reduce_perf -b 8 -e 64K -f 4 -c 1 -n 2 -w 1 >"$tmp/perf.log" 2>&1 \
  && ok "installed cfxrun + all_reduce_perf at 2 ranks" || { bad "installed all_reduce_perf"; cat "$tmp/perf.log"; }
grep -q "Out of bounds values : 0 OK" "$tmp/perf.log" || bad "all_reduce_perf checked nothing"

# run_at_2 WHAT PROGRAM: runs it at 2 ranks, checks it loaded the prefix's libnccl.so.2 and succeeded.
run_at_2() {
  local what=$1 prog=$2
  local loaded
  loaded=$(ldd "$prog" | sed -n 's/.*libnccl.so.2 => \([^ ]*\).*/\1/p')
  [[ $(readlink -f "$loaded") == "$(readlink -f "$lib/libnccl.so.$nccl_version")" ]] \
    && ok "$what loads the prefix's libnccl.so.2" || bad "$what loads libnccl.so.2 from '$loaded'"
  if "$prefix/bin/cfxrun" -n 2 --all-output --timeout 120 "$prog" >"$tmp/run.log" 2>&1; then
    ok "$what at 2 ranks: $(head -1 "$tmp/run.log")"
  else
    bad "$what at 2 ranks"; cat "$tmp/run.log"
  fi
}

# --- consumer 1: pkg-config (nccl.pc for the C program, conflux.pc for the C++ one) ---
mkdir -p "$tmp/pc"
PKG_CONFIG_PATH=$prefix/lib/pkgconfig:$prefix/lib/conflux/pkgconfig \
  make -s -C "$src/examples/pkgconfig" OUT="$tmp/pc" CFLAGS="-O2 -Wall -Wextra -Werror" \
  CXXFLAGS="-O2 -Wall -Wextra -Werror" >"$tmp/pc.log" 2>&1 || { bad "pkg-config consumer build"; cat "$tmp/pc.log"; }
run_at_2 "pkg-config host_allreduce" "$tmp/pc/host_allreduce"
run_at_2 "pkg-config membership" "$tmp/pc/membership"

# --- consumer 2: find_package(Conflux) ---
cmake -S "$src/examples/cmake" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" -DCMAKE_CXX_FLAGS="-Wall -Wextra -Werror" >"$tmp/cm.log" 2>&1 \
  && cmake --build "$tmp/cm" >>"$tmp/cm.log" 2>&1 || { bad "CMake consumer build"; cat "$tmp/cm.log"; }
grep -q "Conflux .* from $prefix/lib/cmake/Conflux" "$tmp/cm.log" && ok "find_package found the prefix" \
  || bad "find_package did not report the prefix"
if [[ -e $lib/libconflux_mpi.so ]]; then
  grep -q "MPI interposer for LD_PRELOAD: $lib/libconflux_mpi.so" "$tmp/cm.log" \
    && ok "find_package(Conflux COMPONENTS mpi_interpose)" || bad "Conflux::mpi_interpose not found"
fi
run_at_2 "CMake host_allreduce" "$tmp/cm/host_allreduce"
run_at_2 "CMake membership" "$tmp/cm/membership"

[[ $fail == 0 ]] && echo "install test: all checks passed" || echo "install test: FAILED"
exit $fail
