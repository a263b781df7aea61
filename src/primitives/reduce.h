// SPDX-License-Identifier: Apache-2.0
// Element-wise reduction kernels on host memory: the arithmetic behind recvReduceSend and recvReduceCopySend
// (primitives layer). Results are bit-identical to NCCL 2.28's device kernels (see reduce.cc for each rule).
//
// Vocabulary: a *partial* is data that has already been combined from one or more ranks' inputs (it never gets the
// pre-multiplier again); a *local* input is one rank's raw contribution, which gets pre(x) before it is combined.
// post(x) is the last step of a reduction (integer average's division) and is applied only when applyPost is true,
// by whichever rank finishes the reduction.
//
// Contract shared by the three functions:
//   - count elements of op.type; count may be 0.
//   - Pointers need no alignment at all (user buffers may be offset by any byte count).
//   - out may be exactly the same pointer as either input (in-place); partially overlapping ranges are not allowed.
//   - The same inputs always give the same bits, on every thread and every call: no data-dependent order.
//   - Thread-safe and non-blocking; no allocation, no error path (inputs are validated at the api boundary).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/types.h"

namespace cfx::prims {

// out[i] = post(partial[i] (+) pre(local[i])): folds this rank's own input into a partial from upstream.
void reduceLocal(const ReduceOp& op, void* out, const void* partial, const void* local, size_t count, bool applyPost);

// out[i] = post(pre(local[i])): this rank's contribution alone (first hop of a chain, or nRanks == 1).
// With nothing to apply this is a copy.
void prepareLocal(const ReduceOp& op, void* out, const void* local, size_t count, bool applyPost);

// out[i] = post(a[i] (+) b[i]): combines two partials (tree and recursive-halving steps).
void combinePartials(const ReduceOp& op, void* out, const void* a, const void* b, size_t count, bool applyPost);

// The instruction-set variant the kernels run with. Both give identical bits; Avx2 (AVX2 + F16C) is faster.
enum class ReduceIsa : uint8_t { Portable, Avx2 };

// Whether this CPU (and OS) can run `isa`.
bool reduceIsaSupported(ReduceIsa isa);
// The variant in use: the best supported one, unless setReduceIsa chose another.
ReduceIsa activeReduceIsa();
// Test and benchmark hook, process-wide: makes the functions above run `isa`. An unsupported isa is ignored.
void setReduceIsa(ReduceIsa isa);

}  // namespace cfx::prims
