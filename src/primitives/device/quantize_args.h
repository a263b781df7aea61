// SPDX-License-Identifier: Apache-2.0
// The parameter block of the quantisation kernels (primitives layer), shared by device code and the host launcher.
#pragma once

#include <cstdint>

namespace cfx::prims::device {

struct QuantizeArgs {
  const void* in;     // quantize: count elements of inType; dequantize: the quantised buffer
  void* out;          // quantize: the quantised buffer; dequantize: count fp32
  uint64_t count;
  uint32_t block;     // elements per scale
  int32_t codec;      // quant::Codec
  int32_t inType;     // 0 fp32, 1 bf16, 2 fp16 (quantize only)
  int32_t accumulate; // dequantize: out += value instead of out = value
};

}  // namespace cfx::prims::device
