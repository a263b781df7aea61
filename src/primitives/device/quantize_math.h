// SPDX-License-Identifier: Apache-2.0
// Blockwise quantisation arithmetic shared by the host reference (primitives/quantize.cc) and the device kernels
// (device/quantize_kernels.cu): one definition, so both produce the same bytes.
//
// Wire layout of a quantised buffer of `count` elements in blocks of B: nBlocks = ceil(count / B) fp32 scales, then
// the payload: int8 and fp8 (E4M3) one byte per element, int4 two per byte (element i in byte i / 2, the low nibble
// when i is even; two's complement, -7..7). scale = absmax / Q of the block's finite values (Q = 127, 448, 7); a
// block with absmax 0 has scale 0 and all-zero payload. q = round-half-even(x / scale) clamped to [-Q, Q] (for fp8
// the saturating E4M3 rounding of x / scale); +-inf quantise to +-Q, NaN to 0. Dequantised: q * scale in fp32.
#pragma once

#include <cstdint>

#include "common/float_types.h"

#if defined(__CUDACC__) || defined(__HIPCC__)
#define CFX_HD __host__ __device__
#else
#define CFX_HD
#endif

namespace cfx::prims::quant {

enum class Codec : int32_t { Int8 = 0, Fp8E4M3 = 1, Int4 = 2 };

CFX_HD constexpr float codecMax(Codec c) { return c == Codec::Int8 ? 127.0f : c == Codec::Fp8E4M3 ? 448.0f : 7.0f; }

CFX_HD inline bool isFiniteBits(float x) { return (fp::detail::floatBits(x) & 0x7F800000u) != 0x7F800000u; }

CFX_HD inline float absFloat(float x) { return fp::detail::bitsFloat(fp::detail::floatBits(x) & 0x7FFFFFFFu); }

// Round half to even of a float that is within int range, without depending on the FPU rounding mode.
CFX_HD inline int32_t roundHalfEven(float v) {
  // 2^23 + magic: adding and subtracting 1.5 * 2^23 rounds to an integer with round-to-nearest-even in IEEE
  // arithmetic (valid for |v| < 2^22, far above any quantised value here).
  const float magic = 12582912.0f;
  const float r = (v + magic) - magic;
  return static_cast<int32_t>(r);
}

// The byte (int8 / fp8) or nibble value (int4, in the low 4 bits) of one element.
CFX_HD inline uint8_t quantizeOne(Codec c, float x, float scale) {
  const float q = codecMax(c);
  if (x != x || scale == 0.0f) return 0;  // NaN, or an all-zero block
  if (!isFiniteBits(x)) {
    if (c == Codec::Fp8E4M3) return fp::floatToE4M3(x > 0 ? q : -q);
    const auto clamped = static_cast<uint8_t>(static_cast<int8_t>(x > 0 ? q : -q));
    return c == Codec::Int4 ? static_cast<uint8_t>(clamped & 0x0F) : clamped;
  }
  const float v = x / scale;
  if (c == Codec::Fp8E4M3) return fp::floatToE4M3(v);
  const int32_t r = roundHalfEven(v > q ? q : v < -q ? -q : v);
  const uint8_t byte = static_cast<uint8_t>(static_cast<int8_t>(r));
  return c == Codec::Int4 ? static_cast<uint8_t>(byte & 0x0F) : byte;
}

CFX_HD inline float dequantizeOne(Codec c, uint8_t stored, float scale) {
  float q;
  if (c == Codec::Fp8E4M3) {
    q = fp::e4m3ToFloat(stored);
  } else if (c == Codec::Int4) {
    const int32_t v = (stored & 0x08) ? static_cast<int32_t>(stored & 0x0F) - 16 : static_cast<int32_t>(stored & 0x0F);
    q = static_cast<float>(v);
  } else {
    q = static_cast<float>(static_cast<int8_t>(stored));
  }
  return q * scale;
}

}  // namespace cfx::prims::quant
