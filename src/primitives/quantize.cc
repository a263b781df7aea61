// SPDX-License-Identifier: Apache-2.0
// Blockwise quantisation, host reference (primitives layer). One pass per block: absmax of the finite values, then
// each element divided by the scale and rounded. Cost: two reads and one write of the block, all in cache.
#include "primitives/quantize.h"

#include <algorithm>
#include <cstring>

namespace cfx::prims::quant {

namespace {

float loadAsFloat(DataType t, const void* in, size_t i) {
  const auto* p = static_cast<const unsigned char*>(in);
  if (t == DataType::Float32) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return t == DataType::Bfloat16 ? fp::bf16ToFloat(h) : fp::halfToFloat(h);
}

}  // namespace

size_t scaleCount(size_t count, size_t block) { return block == 0 ? 0 : (count + block - 1) / block; }

size_t payloadBytes(Codec codec, size_t count) { return codec == Codec::Int4 ? (count + 1) / 2 : count; }

size_t quantizedBytes(Codec codec, size_t count, size_t block) {
  return scaleCount(count, block) * sizeof(float) + payloadBytes(codec, count);
}

Status checkQuantize(Codec codec, DataType inType, size_t block) {
  if (codec != Codec::Int8 && codec != Codec::Fp8E4M3 && codec != Codec::Int4) {
    return Status::error(Errc::InvalidArgument, strprintf("unknown quantisation codec %d", static_cast<int>(codec)));
  }
  if (block == 0 || block > (1u << 20) || (codec == Codec::Int4 && block % 2 != 0)) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("quantisation block of %zu elements: must be 1..2^20, and even for int4", block));
  }
  if (inType != DataType::Float32 && inType != DataType::Bfloat16 && inType != DataType::Float16) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("quantisation input must be fp32, bf16 or fp16, not %s", dataTypeName(inType)));
  }
  return Status();
}

Status quantize(Codec codec, DataType inType, const void* in, size_t count, size_t block, void* out) {
  CFX_TRY(checkQuantize(codec, inType, block));
  auto* scales = static_cast<unsigned char*>(out);
  unsigned char* payload = scales + scaleCount(count, block) * sizeof(float);
  const float qmax = codecMax(codec);
  if (codec == Codec::Int4) std::memset(payload, 0, payloadBytes(codec, count));
  for (size_t b = 0, first = 0; first < count; ++b, first += block) {
    const size_t n = std::min(block, count - first);
    float absmax = 0.0f;
    for (size_t i = 0; i < n; ++i) {
      const float x = loadAsFloat(inType, in, first + i);
      if (isFiniteBits(x)) absmax = std::max(absmax, absFloat(x));
    }
    const float scale = absmax / qmax;
    std::memcpy(scales + b * sizeof(float), &scale, sizeof(float));
    for (size_t i = 0; i < n; ++i) {
      const size_t e = first + i;
      const uint8_t v = quantizeOne(codec, loadAsFloat(inType, in, e), scale);
      if (codec == Codec::Int4) payload[e / 2] |= static_cast<uint8_t>(e % 2 == 0 ? v : v << 4);
      else payload[e] = v;
    }
  }
  return Status();
}

Status dequantize(Codec codec, const void* in, size_t count, size_t block, float* out, bool accumulate) {
  CFX_TRY(checkQuantize(codec, DataType::Float32, block));
  const auto* scales = static_cast<const unsigned char*>(in);
  const unsigned char* payload = scales + scaleCount(count, block) * sizeof(float);
  for (size_t e = 0; e < count; ++e) {
    float scale;
    std::memcpy(&scale, scales + (e / block) * sizeof(float), sizeof(float));
    const uint8_t stored = codec == Codec::Int4 ? static_cast<uint8_t>(e % 2 == 0 ? payload[e / 2] & 0x0F : payload[e / 2] >> 4)
                                                : payload[e];
    const float v = dequantizeOne(codec, stored, scale);
    out[e] = accumulate ? out[e] + v : v;
  }
  return Status();
}

}  // namespace cfx::prims::quant
