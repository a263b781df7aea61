// SPDX-License-Identifier: Apache-2.0
// Bit-exact conversions between float and the narrow floating types Conflux reduces: IEEE binary16, bfloat16 and
// OCP FP8 E4M3FN / E5M2 (common layer). Rounding, saturation and NaN handling follow CUDA's conversion functions,
// which are what NCCL's device kernels use, so host reductions give the bits a GPU run of NCCL gives.
//
// Encodings (float -> narrow) all round to nearest, ties to even, and handle subnormals exactly:
//   floatToHalf   overflow -> +-inf; NaN -> 0x7FFF            (as __float2half_rn)
//   floatToBf16   overflow -> +-inf; NaN -> 0x7FFF            (as __float2bfloat16_rn)
//   floatToE4M3   |x| > 448 and +-inf -> +-448 (0x7E/0xFE); NaN -> 0x7F
//   floatToE5M2   |x| >= 61440 and +-inf -> +-57344 (0x7B/0xFB); NaN -> 0x7F
// The FP8 rules are __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...): SATFINITE clamps every finite overflow *and*
// infinity to the largest finite value of the sign, and turns any NaN into the canonical, positive 0x7F.
// A NaN stays a NaN through every conversion, but like CUDA we do not keep its payload or sign: half, E4M3 and E5M2
// NaNs decode to the canonical float NaN 0x7FFFFFFF (as __half2float and __nv_cvt_fp8_to_halfraw), and a bf16
// decode is a plain shift (as __bfloat162float). All other decodings are exact.
// Everything is branch-free and constexpr, so loops over these functions vectorise. The subnormal paths use float
// additions and assume the default round-to-nearest-even mode (the reductions assume it too); flush-to-zero and
// denormals-are-zero do not change any result.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

namespace cfx::fp {

namespace detail {

constexpr uint32_t floatBits(float f) { return std::bit_cast<uint32_t>(f); }
constexpr float bitsFloat(uint32_t u) { return std::bit_cast<float>(u); }
constexpr bool isNanBits(uint32_t absBits) { return absBits > 0x7F800000u; }

// condition ? a : b as a bit blend. A plain ?: lets the compiler sink the unused arm's float arithmetic into a branch,
// which it then may not vectorise (it will not speculate a possibly trapping FP operation); a blend has no branch.
constexpr uint32_t blend(bool condition, uint32_t a, uint32_t b) { return b ^ ((a ^ b) & (0u - condition)); }

// Rounds the magnitude of a non-NaN float (its bits with the sign cleared) to a binary format with kManBits fraction
// bits and exponent bias kBias, to nearest even, and returns the format's magnitude encoding. A value past the largest
// finite comes back with an exponent field at or beyond all ones; each caller clamps for its own overflow rule.
//
// Both ranges are computed and one is selected, without branches, so loops over this vectorise. Normal range: rebias
// the exponent and round the dropped fraction bits; a carry moves into the exponent, which is the correct round-up.
// Subnormal range: add a constant whose ulp is the target's subnormal step, so the FPU rounds at that step (this
// assumes the default round-to-nearest-even mode; constant evaluation always uses it), and read the step count from
// the sum's fraction bits.
template <int kManBits, int kBias>
constexpr uint32_t roundMagnitude(uint32_t absBits) {
  constexpr uint32_t kShift = 23u - kManBits;
  constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(127 + 1 - kBias) << 23;  // 2^(1-bias)
  constexpr uint32_t kRebias = static_cast<uint32_t>(127 - kBias) << 23;
  constexpr uint32_t kMagicBits = static_cast<uint32_t>(127 + 24 - kBias - kManBits) << 23;  // ulp = subnormal step
  const uint32_t normal = (absBits - kRebias + ((1u << (kShift - 1u)) - 1u) + ((absBits >> kShift) & 1u)) >> kShift;
  const uint32_t subnormal = floatBits(bitsFloat(absBits) + bitsFloat(kMagicBits)) - kMagicBits;
  return blend(absBits >= kMinNormalBits, normal, subnormal);
}

}  // namespace detail

// ---- IEEE binary16 ----

constexpr uint16_t floatToHalf(float f) {
  const uint32_t bits = detail::floatBits(f);
  const uint32_t absBits = bits & 0x7FFFFFFFu;
  const uint32_t sign = (bits >> 16) & 0x8000u;
  // Anything that rounds to 2^16 or more, infinity included, becomes infinity.
  const uint32_t rounded = sign | std::min<uint32_t>(detail::roundMagnitude<10, 15>(absBits), 0x7C00u);
  return static_cast<uint16_t>(detail::blend(detail::isNanBits(absBits), 0x7FFFu, rounded));
}

constexpr float halfToFloat(uint16_t h) {
  constexpr uint32_t kHalfBits = 0x3F000000u;  // 0.5f: its ulp is 2^-24, the half subnormal step
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t absBits = h & 0x7FFFu;
  const uint32_t normal = (absBits << 13) + (112u << 23);
  // Zero or subnormal: (0.5 + m * 2^-24) - 0.5 is exact.
  const uint32_t subnormal = detail::floatBits(detail::bitsFloat(kHalfBits | absBits) - detail::bitsFloat(kHalfBits));
  const uint32_t infinity = 0x7F800000u;
  const uint32_t magnitude =
      detail::blend(absBits < 0x400u, subnormal, detail::blend(absBits < 0x7C00u, normal, infinity));
  return detail::bitsFloat(detail::blend(absBits > 0x7C00u, 0x7FFFFFFFu, sign | magnitude));
}

// ---- bfloat16 ----

constexpr uint16_t floatToBf16(float f) {
  const uint32_t bits = detail::floatBits(f);
  // Round the low 16 bits away, ties to even; the carry may reach the exponent (and infinity), which is right.
  const uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>(detail::blend(detail::isNanBits(bits & 0x7FFFFFFFu), 0x7FFFu, rounded));
}

constexpr float bf16ToFloat(uint16_t b) { return detail::bitsFloat(static_cast<uint32_t>(b) << 16); }

// ---- OCP FP8 E4M3FN: bias 7, no infinities, max 448, NaN = 0x7F / 0xFF ----

constexpr uint8_t floatToE4M3(float f) {
  const uint32_t bits = detail::floatBits(f);
  const uint32_t absBits = bits & 0x7FFFFFFFu;
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t rounded = sign | std::min<uint32_t>(detail::roundMagnitude<3, 7>(absBits), 0x7Eu);
  return static_cast<uint8_t>(detail::blend(detail::isNanBits(absBits), 0x7Fu, rounded));
}

// ---- OCP FP8 E5M2: bias 15, has infinities (0x7C/0xFC), max finite 57344 ----

constexpr uint8_t floatToE5M2(float f) {
  const uint32_t bits = detail::floatBits(f);
  const uint32_t absBits = bits & 0x7FFFFFFFu;
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t rounded = sign | std::min<uint32_t>(detail::roundMagnitude<2, 15>(absBits), 0x7Bu);
  return static_cast<uint8_t>(detail::blend(detail::isNanBits(absBits), 0x7Fu, rounded));
}

// Half -> FP8 with SATFINITE, i.e. __nv_fp8_e4m3(__half) / __nv_fp8_e5m2(__half): how NCCL converts its half-precision
// FP8 arithmetic back to FP8.
constexpr uint8_t halfToE4M3(uint16_t h) { return floatToE4M3(halfToFloat(h)); }

constexpr uint8_t halfToE5M2(uint16_t h) {
  // E5M2 is binary16 with the low 8 fraction bits dropped, so this is a rounding shift on the half's bits.
  const uint32_t absBits = h & 0x7FFFu;
  const uint32_t rounded = (absBits + 0x7Fu + ((absBits >> 8) & 1u)) >> 8;
  const uint32_t result = ((h >> 8) & 0x80u) | std::min<uint32_t>(rounded, 0x7Bu);
  return static_cast<uint8_t>(absBits > 0x7C00u ? 0x7Fu : result);
}

constexpr float e4m3ToFloat(uint8_t b) {
  constexpr uint32_t kMagicBits = 0x46800000u;  // 2^14: its ulp is 2^-9, the E4M3 subnormal step
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t absBits = b & 0x7Fu;
  const uint32_t normal = (absBits << 20) + (120u << 23);
  // Zero or subnormal: (2^14 + m * 2^-9) - 2^14 is exact.
  const uint32_t subnormal = detail::floatBits(detail::bitsFloat(kMagicBits | absBits) - detail::bitsFloat(kMagicBits));
  const uint32_t magnitude = detail::blend(absBits < 8u, subnormal, normal);
  return detail::bitsFloat(detail::blend(absBits == 0x7Fu, 0x7FFFFFFFu, sign | magnitude));
}

constexpr float e5m2ToFloat(uint8_t b) { return halfToFloat(static_cast<uint16_t>(b << 8)); }

// FP8 -> half is exact (every FP8 value is a half), NaN -> 0x7FFF as __nv_cvt_fp8_to_halfraw does.
constexpr uint16_t e4m3ToHalf(uint8_t b) { return floatToHalf(e4m3ToFloat(b)); }
constexpr uint16_t e5m2ToHalf(uint8_t b) { return floatToHalf(e5m2ToFloat(b)); }

}  // namespace cfx::fp
