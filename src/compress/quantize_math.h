// SPDX-License-Identifier: Apache-2.0
// Blockwise quantisation arithmetic shared by the host codecs (compress/block_quant.cc, compress/mx_quant.cc) and the
// device kernels (primitives/device/quantize_kernels.cu): one definition, so both produce the same bytes (compress
// layer; included by device code, so it depends on nothing but common/float_types.h).
//
// Absmax formats (Int8, Fp8E4M3, Int4): a piece of `count` elements in blocks of B holds nBlocks = ceil(count / B)
// fp32 scales, then the payload: int8 and fp8 (E4M3) one byte per element, int4 two per byte (element i in byte i / 2,
// the low nibble when i is even). scale = absmax / Q of the block's finite values (Q = 127, 448, 7); a block with
// absmax 0 has scale 0 and all-zero payload. With inv = 1 / scale (0 when scale is 0), both correctly rounded fp32,
// q = round-half-even(x * inv) clamped to [-Q, Q] (for fp8 the saturating E4M3 rounding of x * inv): a multiply per
// element, not a division, which is what lets the host encoder vectorise. Dequantised: q * scale in fp32.
//
// Non-finite inputs: NaN and +-inf both become the format's NaN code (int8 -128, int4 -8, E4M3 0x7F), which decodes
// to NaN. A sum that holds such an element is NaN where the exact sum would be NaN or infinite: never a finite
// number made up from a clamp. The codes -128 and -8 are otherwise unused (values stay within [-Q, Q]).
//
// Stochastic rounding (int formats): q = floor(x / scale + u) with u uniform in [0, 1) from stochasticUnit(), a
// counter hash of (seed, element index): the same bits on every run and on host and device.
#pragma once

#include <cstdint>

#include "common/float_types.h"

#if defined(__CUDACC__) || defined(__HIPCC__)
#define CFX_HD __host__ __device__
#else
#define CFX_HD
#endif

namespace cfx::compress::quant {

enum class Codec : int32_t { Int8 = 0, Fp8E4M3 = 1, Int4 = 2 };

inline constexpr uint8_t kInt8NanCode = 0x80;  // -128
inline constexpr uint8_t kInt4NanCode = 0x08;  // -8 in the nibble
inline constexpr uint8_t kE4M3NanCode = 0x7F;

CFX_HD constexpr float codecMax(Codec c) { return c == Codec::Int8 ? 127.0f : c == Codec::Fp8E4M3 ? 448.0f : 7.0f; }

CFX_HD inline bool isFiniteBits(float x) { return (fp::detail::floatBits(x) & 0x7F800000u) != 0x7F800000u; }

CFX_HD inline float absFloat(float x) { return fp::detail::bitsFloat(fp::detail::floatBits(x) & 0x7FFFFFFFu); }

CFX_HD inline float nanFloat() { return fp::detail::bitsFloat(0x7FC00000u); }

// Round half to even of a float that is within int range, without depending on the FPU rounding mode.
CFX_HD inline int32_t roundHalfEven(float v) {
  // Adding and subtracting 1.5 * 2^23 rounds to an integer with round-to-nearest-even in IEEE arithmetic (valid for
  // |v| < 2^22, far above any quantised value here).
  const float magic = 12582912.0f;
  const float r = (v + magic) - magic;
  return static_cast<int32_t>(r);
}

// A uniform number in [0, 1) from (seed, index): splitmix64's finaliser, 24 bits of it. The same on every platform.
CFX_HD inline float stochasticUnit(uint64_t seed, uint64_t index) {
  uint64_t z = seed + (index + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(static_cast<uint32_t>(z >> 40)) * (1.0f / 16777216.0f);
}

// floor(v + u) for |v| within int range, u in [0, 1): stochastic rounding to an integer.
CFX_HD inline int32_t roundStochastic(float v, float u) {
  const float t = v + u;
  const int32_t i = static_cast<int32_t>(t);  // toward zero
  return (t < 0.0f && static_cast<float>(i) != t) ? i - 1 : i;
}

// The multiplier of a block's elements: 1 / scale, or 0 for an all-zero block (whose elements then encode as 0).
CFX_HD inline float reciprocalScale(float scale) { return scale == 0.0f ? 0.0f : 1.0f / scale; }

// The byte (int8 / fp8) or nibble value (int4, in the low 4 bits) of one element, given inv = reciprocalScale(scale).
// `dither` < 0: round to nearest even; else stochastic rounding with that uniform number (int formats only; fp8
// always rounds to nearest).
CFX_HD inline uint8_t quantizeOne(Codec c, float x, float inv, float dither = -1.0f) {
  if (!isFiniteBits(x)) return c == Codec::Int8 ? kInt8NanCode : c == Codec::Int4 ? kInt4NanCode : kE4M3NanCode;
  const float q = codecMax(c);
  const float v = x * inv;
  if (c == Codec::Fp8E4M3) return fp::floatToE4M3(v);
  const float clamped = v > q ? q : v < -q ? -q : v;
  int32_t r = dither < 0.0f ? roundHalfEven(clamped) : roundStochastic(clamped, dither);
  r = r > static_cast<int32_t>(q) ? static_cast<int32_t>(q) : r;  // v = q with any dither stays q
  const uint8_t byte = static_cast<uint8_t>(static_cast<int8_t>(r));
  return c == Codec::Int4 ? static_cast<uint8_t>(byte & 0x0F) : byte;
}

CFX_HD inline float dequantizeOne(Codec c, uint8_t stored, float scale) {
  float q;
  if (c == Codec::Fp8E4M3) {
    q = fp::e4m3ToFloat(stored);  // 0x7F / 0xFF decode to NaN
  } else if (c == Codec::Int4) {
    if ((stored & 0x0F) == kInt4NanCode) return nanFloat();
    const int32_t v = (stored & 0x08) ? static_cast<int32_t>(stored & 0x0F) - 16 : static_cast<int32_t>(stored & 0x0F);
    q = static_cast<float>(v);
  } else {
    if (stored == kInt8NanCode) return nanFloat();
    q = static_cast<float>(static_cast<int8_t>(stored));
  }
  return q * scale;
}

}  // namespace cfx::compress::quant
