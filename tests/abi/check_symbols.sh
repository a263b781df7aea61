#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The dynamic symbol table of our libnccl.so.2 against NVIDIA's (tests/abi).
#
#   check_symbols.sh OUR_LIB [NVIDIA_LIB]
#
# Checks of our library alone (always run):
#   - SONAME is libnccl.so.2, and no DT_NEEDED entry names a CUDA library (CUDA is loaded with dlopen);
#   - every exported name is nccl*, pnccl* or cfx* (plus the linker's own _init/_fini/_edata/_end/__bss_start);
#   - the profiling pairs: each pnccl<X> is a strong function (T) and nccl<X> a weak alias (W) at the same address,
#     and no nccl<X> exists without its pnccl<X> (ncclResetDebugInitInternal excepted: NVIDIA exports it that way).
# Against NVIDIA's library (skipped, exit 77, when NVIDIA_LIB does not exist):
#   - every nccl*/pnccl* name NVIDIA exports, ours exports too.
# Exit status: 0 pass, 1 fail, 77 own checks passed but the reference comparison was skipped, 2 usage error.
set -euo pipefail

ours=${1:-}
reference=${2:-/usr/local/cuda/lib64/libnccl.so.2}
if [[ -z "$ours" ]]; then
  echo "usage: $0 OUR_LIB [NVIDIA_LIB]" >&2
  exit 2
fi
for tool in nm readelf; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not found (install binutils)" >&2; exit 2; }
done
if [[ ! -f "$ours" ]]; then
  echo "FAIL: $ours does not exist; build the nccl target first" >&2
  exit 1
fi

failed=0
fail() {
  echo "FAIL: $*"
  failed=1
}

# "TYPE NAME ADDRESS" for each defined dynamic symbol, version suffixes (name@@VER) stripped.
defined_symbols() {
  nm -D --defined-only "$1" | awk 'NF == 3 { sub(/@.*/, "", $3); print $2, $3, $1 }'
}

# --- our library alone --------------------------------------------------------------------------------------

soname=$(readelf -d "$ours" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
[[ "$soname" == "libnccl.so.2" ]] || fail "SONAME is '${soname}', expected 'libnccl.so.2'"

cuda_needed=$(readelf -d "$ours" | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p' | grep -E '^lib(cuda|cudart|nvidia-ml)' || true)
[[ -z "$cuda_needed" ]] || fail "links CUDA at build time (must dlopen it instead): ${cuda_needed//$'\n'/ }"

our_table=$(defined_symbols "$ours")
if [[ -z "$our_table" ]]; then
  fail "$ours exports no symbols"
fi

foreign=$(awk '$2 !~ /^(nccl|pnccl|cfx)/ && $2 !~ /^(_init|_fini|_edata|_end|__bss_start)$/ { print "  " $1, $2 }' \
  <<<"$our_table")
[[ -z "$foreign" ]] || fail "exported names outside nccl*/pnccl*/cfx* (missing visibility or version-script rule?):
$foreign"

pairing=$(awk '
  { type[$2] = $1; addr[$2] = $3 }
  END {
    for (name in type) {
      if (name ~ /^pnccl/) {
        pub = substr(name, 2)
        if (type[name] != "T") printf "  %s is %s, expected T (strong function)\n", name, type[name]
        if (!(pub in type)) printf "  %s has no weak alias %s\n", name, pub
        else if (type[pub] != "W") printf "  %s is %s, expected W (weak alias of %s)\n", pub, type[pub], name
        else if (addr[pub] != addr[name]) printf "  %s and %s are at different addresses\n", pub, name
      } else if (name ~ /^nccl/ && !(("p" name) in type) && name != "ncclResetDebugInitInternal") {
        printf "  %s has no pnccl twin\n", name
      }
    }
  }' <<<"$our_table" | sort)
[[ -z "$pairing" ]] || fail "nccl/pnccl pairs broken:
$pairing"

echo "ours: $(grep -c ' pnccl' <<<"$our_table" || true) pnccl/nccl pairs, $(grep -c ' cfx' <<<"$our_table" || true) cfx symbols"

# --- against NVIDIA's library -------------------------------------------------------------------------------

if [[ ! -f "$reference" ]]; then
  if ((failed)); then exit 1; fi
  echo "SKIP: reference library $reference not found; only our own checks ran"
  exit 77
fi

missing=$(comm -23 \
  <(defined_symbols "$reference" | awk '$2 ~ /^p?nccl/ { print $2 }' | sort -u) \
  <(awk '{ print $2 }' <<<"$our_table" | sort -u))
if [[ -n "$missing" ]]; then
  fail "$(wc -l <<<"$missing") symbol(s) exported by $reference are missing from ours:
$(sed 's/^/  /' <<<"$missing")"
fi

if ((failed)); then exit 1; fi
echo "PASS: $ours exports every nccl*/pnccl* symbol of $reference, and nothing outside nccl*/pnccl*/cfx*"
