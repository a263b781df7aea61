#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Debian packages `make package` builds (cpack, into a temporary directory here): each has its expected files
# (dpkg-deb -c) and fields (dpkg-deb -I); each one's Depends names exactly the Debian packages that dpkg-shlibdeps
# finds for its ELF files, plus libconflux2 at this version; nothing collides with NVIDIA's libnccl2/libnccl-dev.
# Then all four are unpacked with dpkg -x into a temporary root (nothing is installed on the machine) and the
# tools and a consumer build run from there.
#   package_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

version=$(sed -n 's/^CONFLUX //p' "$src/VERSION")
nccl_version=$(sed -n 's/^NCCL_API //p' "$src/VERSION")
arch=$(dpkg --print-architecture)
(cd "$build" && cpack -G DEB -B "$tmp/out" -D CPACK_OUTPUT_FILE_PREFIX="$tmp/out/packages") >"$tmp/cpack.log" 2>&1 || { cat "$tmp/cpack.log"; exit 1; }

packages=(libconflux2 libconflux-dev conflux-tools)
[[ -e $build/src/interpose/libconflux_mpi.so ]] && packages+=(conflux-mpi)
deb() { echo "$tmp/out/packages/${1}_${version}_${arch}.deb"; }
field() { dpkg-deb -f "$(deb "$1")" "$2"; }

for p in "${packages[@]}"; do
  [[ -f $(deb "$p") ]] && ok "built $(basename "$(deb "$p")")" || { bad "no $(deb "$p")"; ls -R "$tmp/out"; exit 1; }
  dpkg-deb -I "$(deb "$p")" >/dev/null || bad "dpkg-deb -I $p"
  [[ $(field "$p" Package) == "$p" && $(field "$p" Version) == "$version" ]] && ok "$p: Package and Version" \
    || bad "$p: Package '$(field "$p" Package)' Version '$(field "$p" Version)'"
done

# --- contents ---
# expect_files PACKAGE PATH...: each path is in the package.
expect_files() {
  local p=$1; shift
  local list
  list=$(dpkg-deb -c "$(deb "$p")" | awk '{print $6}' | sed 's|^\./|/|')
  for f in "$@"; do grep -qxF "$f" <<<"$list" && ok "$p has $f" || bad "$p lacks $f"; done
}
expect_files libconflux2 /usr/lib/conflux/libnccl.so.$nccl_version /usr/lib/conflux/libnccl.so.2 \
  /usr/share/doc/libconflux2/copyright
expect_files libconflux-dev /usr/lib/conflux/libnccl.so /usr/lib/conflux/libconflux.so \
  /usr/include/conflux/nccl.h /usr/include/conflux/conflux.h /usr/include/conflux/conflux_nccl_ext.h \
  /usr/lib/pkgconfig/conflux.pc /usr/lib/conflux/pkgconfig/nccl.pc /usr/lib/cmake/Conflux/ConfluxConfig.cmake
expect_files conflux-tools /usr/bin/cfxrun /usr/bin/all_reduce_perf /usr/bin/alltoall_perf
[[ " ${packages[*]} " == *" conflux-mpi "* ]] && expect_files conflux-mpi /usr/lib/conflux/libconflux_mpi.so \
  /usr/lib/cmake/Conflux/ConfluxMpiTargets.cmake
# NVIDIA's libnccl2 and libnccl-dev own these paths; none of our packages may.
for p in "${packages[@]}"; do
  clash=$(dpkg-deb -c "$(deb "$p")" | awk '{print $6}' | grep -E '^\./usr/(lib/[^/]*-linux-gnu/libnccl|include/nccl\.h|lib/libnccl)' || true)
  [[ -z $clash ]] && ok "$p leaves NVIDIA's paths alone" || bad "$p installs $clash"
done

# --- dependencies: what dpkg-shlibdeps finds, and libconflux2 at this version ---
mkdir -p "$tmp/root"
for p in "${packages[@]}"; do dpkg -x "$(deb "$p")" "$tmp/root"; done
# shlibdeps_of PACKAGE: the Debian package names dpkg-shlibdeps derives for the package's ELF files.
shlibdeps_of() {
  local files
  files=$(dpkg-deb -c "$(deb "$1")" | awk '$1 ~ /^-/ {print $6}' | sed "s|^\./|$tmp/root/|" |
    while read -r f; do file -b "$f" | grep -q ^ELF && echo "$f"; done)
  [[ -z $files ]] && return 0
  mkdir -p "$tmp/shlib/$1/debian"
  touch "$tmp/shlib/$1/debian/control"
  # shellcheck disable=SC2086
  (cd "$tmp/shlib/$1" && dpkg-shlibdeps -O --ignore-missing-info -l"$tmp/root/usr/lib/conflux" $files 2>/dev/null) |
    sed -n 's/^shlibs:Depends=//p' | tr ',' '\n' | sed 's/^ *//; s/ .*//; s/|.*//' | grep -v '^$' | sort -u
}
names_of() { tr ',' '\n' | sed 's/^ *//; s/ .*//' | grep -v '^$' | sort -u; }
for p in "${packages[@]}"; do
  depends=$(field "$p" Depends)
  want=$(shlibdeps_of "$p")
  [[ $p != libconflux2 ]] && want=$(printf '%s\nlibconflux2\n' "$want" | grep -v '^$' | sort -u)
  got=$(names_of <<<"$depends")
  if [[ $got == "$want" ]]; then ok "$p Depends: $depends"; else
    bad "$p Depends '$depends' names [$(echo $got)], dpkg-shlibdeps finds [$(echo $want)]"; fi
  if [[ $p != libconflux2 ]]; then
    grep -qF "libconflux2 (= $version)" <<<"$depends" && ok "$p needs libconflux2 (= $version)" \
      || bad "$p does not pin libconflux2 (= $version)"
  fi
done
grep -qw libc6 <<<"$(field libconflux2 Depends)" && ok "libconflux2 depends on libc6" || bad "libconflux2 lacks libc6"
[[ " ${packages[*]} " == *" conflux-mpi "* ]] && { grep -q libopenmpi <<<"$(field conflux-mpi Depends)" \
  && ok "conflux-mpi depends on Open MPI's library" || bad "conflux-mpi lacks Open MPI"; }

# --- run from the unpacked root ---
root=$tmp/root
loaded=$(ldd "$root/usr/bin/all_reduce_perf" | sed -n 's/.*libnccl.so.2 => \([^ ]*\).*/\1/p')
[[ -n $loaded && $(readlink -f "$loaded") == $(readlink -f "$root/usr/lib/conflux/libnccl.so.2") ]] && ok "unpacked all_reduce_perf loads the unpacked library" \
  || bad "unpacked all_reduce_perf loads '$loaded'"
"$root/usr/bin/cfxrun" -n 2 --timeout 120 all_reduce_perf -b 8 -e 64K -f 4 -c 1 -n 2 -w 1 >"$tmp/perf.log" 2>&1 \
  && grep -q "Out of bounds values : 0 OK" "$tmp/perf.log" && ok "unpacked tools at 2 ranks" \
  || { bad "unpacked tools at 2 ranks"; cat "$tmp/perf.log"; }
# A consumer built from the unpacked -dev package: pkg-config's sysroot maps /usr into the root.
mkdir -p "$tmp/pc"
PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_LIBDIR=$root/usr/lib/pkgconfig:$root/usr/lib/conflux/pkgconfig \
  make -s -C "$src/examples/pkgconfig" OUT="$tmp/pc" >"$tmp/pc.log" 2>&1 \
  && LD_LIBRARY_PATH=$root/usr/lib/conflux "$root/usr/bin/cfxrun" -n 2 --all-output --timeout 120 "$tmp/pc/host_allreduce" \
    >"$tmp/run.log" 2>&1 && grep -q "correct" "$tmp/run.log" && ok "consumer of the unpacked -dev package at 2 ranks" \
  || { bad "consumer of the unpacked -dev package"; cat "$tmp/pc.log" "$tmp/run.log" 2>/dev/null; }

[[ $fail == 0 ]] && echo "package test: all checks passed" || echo "package test: FAILED"
exit $fail
