// SPDX-License-Identifier: Apache-2.0
// The parameter block of the reduce-copy kernels (primitives layer), shared by the device code and the host launcher.
// Plain data with a fixed layout: it is passed by value through cuLaunchKernel.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cfx::prims::device {

inline constexpr int kMaxReduceSources = 8;

struct ReduceArgs {
  void* dst;
  const void* src[kMaxReduceSources];  // folded in this order
  int32_t nSrc;                        // 1..kMaxReduceSources
  int32_t preMultiply;                 // every source is multiplied by `scalar` first (PreMulSum, float Avg)
  int32_t postDivide;                  // the result is divided by `divisor`, truncating (integer Avg)
  int32_t reserved;
  uint64_t divisor;
  uint64_t count;                      // elements
  unsigned char scalar[8];             // one element of the type
};

}  // namespace cfx::prims::device
