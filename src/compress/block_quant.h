// SPDX-License-Identifier: Apache-2.0
// Absmax block quantisation of a whole buffer, one piece (compress layer): the reference the device kernels
// (primitives/device/quantize_kernels.cu) match byte for byte. Layout and rounding: compress/quantize_math.h. The
// collectives reach these formats through Codec (codec.h), which adds pieces, error feedback and stochastic rounding.
#pragma once

#include <cstddef>

#include "common/status.h"
#include "common/types.h"
#include "compress/quantize_math.h"

namespace cfx::compress::quant {

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

}  // namespace cfx::compress::quant
