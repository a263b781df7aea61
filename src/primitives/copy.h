// SPDX-License-Identifier: Apache-2.0
// Large copies (primitives layer): plain memcpy for what fits in the caches, streaming (non-temporal) stores for
// what does not.
//
// Why: a memcpy with ordinary stores first reads every destination line into the cache (read-for-ownership) and
// then evicts it again, so a copy far larger than the last-level cache moves three bytes over the memory bus per
// byte copied. Non-temporal stores write whole lines without reading them: two bytes per byte. On this project's
// 2-core test machine (AMD EPYC, 32 MiB L3) that is 9-10 GB/s against 15-16 GB/s for a 64 MiB copy, while at
// 1-4 MiB memcpy is faster (47 GB/s from cache against 26 GB/s). Callers pass the size of the whole message, or of
// the whole operation when that is larger (Prims::setOpBytes), not of the piece, because that decides whether the
// destination will still be in the cache when it is read.
#pragma once

#include <cstddef>

namespace cfx::prims {

// Messages of at least this many bytes are written with streaming stores.
inline constexpr size_t kStreamingCopyBytes = size_t{8} << 20;

// dst = src for `bytes` bytes (the ranges must not overlap). `messageBytes` is the size of the whole message (or
// operation) this piece belongs to; at kStreamingCopyBytes and above the copy bypasses the cache where the CPU
// allows it.
void copyPiece(void* dst, const void* src, size_t bytes, size_t messageBytes);

}  // namespace cfx::prims
