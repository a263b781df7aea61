// SPDX-License-Identifier: Apache-2.0
// Lossless sparse deltas (compress layer): the elements of a buffer that changed since a previous state, encoded as
// whichever is smallest of an index list, a bitmap, or the whole buffer (SparseRL-Sync style weight updates).
//
// Elements are compared as bytes (any datatype, and -0/+0 or NaN payloads count as changes), so applying a delta to
// the previous state gives the new state bit for bit. Encodings, for n changed elements of e bytes out of count:
//   Indices  n indices (u32, or u64 when count >= 2^32), ascending, then the n new values      n (4|8 + e) bytes
//   Bitmap   ceil(count / 8) bytes, bit i of byte i / 8 (LSB first) set where element i changed, then the n values
//   Full     the whole new state                                                                count e bytes
// At 1 % changed fp32 an index list is 0.08 bytes per element, 1/50 of the buffer; a bitmap wins from about 3 %.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace cfx::compress {

enum class DeltaMode : uint8_t { Full = 0, Indices = 1, Bitmap = 2 };
const char* deltaModeName(DeltaMode mode);  // "full", "indices", "bitmap"

struct DeltaPlan {
  DeltaMode mode = DeltaMode::Full;
  uint64_t changed = 0;  // elements that differ
  uint64_t bytes = 0;    // of the chosen encoding
};

// Encoded bytes of each mode for `changed` of `count` elements of `eltSize` bytes.
uint64_t deltaBytes(DeltaMode mode, uint64_t changed, uint64_t count, size_t eltSize);

// Compares `state` with `previous` (count elements of eltSize bytes) and picks the smallest encoding.
DeltaPlan planDelta(const void* state, const void* previous, size_t count, size_t eltSize);
// Writes the encoding `plan` chose (plan.bytes bytes) into `out`.
void encodeDelta(const DeltaPlan& plan, const void* state, const void* previous, size_t count, size_t eltSize,
                 void* out);
// Applies an encoding of `changed` elements to `state` (the previous state, count elements), in place.
// InvalidArgument, with `state` unchanged, when the bytes cannot be such an encoding: a size that does not match
// (mode, changed, count), an index out of range or not ascending, or a bitmap whose bits do not count `changed`.
Status applyDelta(DeltaMode mode, const void* encoded, uint64_t encodedBytes, uint64_t changed, void* state,
                  size_t count, size_t eltSize);

}  // namespace cfx::compress
