// SPDX-License-Identifier: Apache-2.0
// Blockwise int8 / fp8 / int4 quantisation on the host (primitives layer): the reference the device kernels match
// byte for byte, and the host path of compressed collectives. Layout and rounding: primitives/device/quantize_math.h.
#pragma once

#include <cstddef>

#include "common/status.h"
#include "common/types.h"
#include "primitives/device/quantize_math.h"

namespace cfx::prims::quant {

size_t scaleCount(size_t count, size_t block);
size_t payloadBytes(Codec codec, size_t count);
// Bytes of a quantised buffer: the scales, then the payload.
size_t quantizedBytes(Codec codec, size_t count, size_t block);
// Checks what both the host and the device implementations require: a known codec, block >= 1 (even for int4),
// input fp32, bf16 or fp16.
Status checkQuantize(Codec codec, DataType inType, size_t block);

Status quantize(Codec codec, DataType inType, const void* in, size_t count, size_t block, void* out);
// out[i] = value (or out[i] += value when accumulate), fp32.
Status dequantize(Codec codec, const void* in, size_t count, size_t block, float* out, bool accumulate);

}  // namespace cfx::prims::quant
