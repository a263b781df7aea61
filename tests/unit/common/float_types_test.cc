// SPDX-License-Identifier: Apache-2.0
// Unit tests for the narrow floating-point conversions: exhaustive round trips, rounding against a brute-force
// nearest-value reference, ties, subnormals, overflow/saturation and NaN rules (CUDA SATFINITE semantics).
#include "common/float_types.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace cfx::fp {
namespace {

// Compile-time use works: the scalar conversions are constexpr.
static_assert(floatToHalf(1.0f) == 0x3C00);
static_assert(halfToFloat(0x3C00) == 1.0f);
static_assert(floatToBf16(1.0f) == 0x3F80);
static_assert(floatToE4M3(448.0f) == 0x7E);
static_assert(e4m3ToFloat(0x7E) == 448.0f);
static_assert(floatToE5M2(57344.0f) == 0x7B);

uint32_t bitsOf(float f) { return std::bit_cast<uint32_t>(f); }
float floatOf(uint32_t u) { return std::bit_cast<float>(u); }

bool halfIsNan(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0; }
bool bf16IsNan(uint16_t b) { return (b & 0x7F80) == 0x7F80 && (b & 0x7F) != 0; }
bool e4m3IsNan(uint8_t b) { return (b & 0x7F) == 0x7F; }
bool e5m2IsNan(uint8_t b) { return (b & 0x7F) > 0x7C; }

// Brute-force round-to-nearest-even over a format's sorted non-negative finite values (value, code).
struct Format {
  std::vector<std::pair<double, uint32_t>> values;  // ascending
  uint32_t signBit;
  double overflowAt;  // |x| >= this rounds to overflowCode (infinity); 0 for a saturating format
  uint32_t overflowCode;

  // Rounds x (not NaN) to the nearest value, ties to the even code; beyond the range: saturate or overflow.
  uint32_t round(double x) const {
    const uint32_t sign = std::signbit(x) ? signBit : 0;
    const double a = std::fabs(x);
    if (overflowAt > 0 && a >= overflowAt) return sign | overflowCode;
    auto hi = std::lower_bound(values.begin(), values.end(), std::make_pair(a, 0u),
                               [](const auto& l, const auto& r) { return l.first < r.first; });
    if (hi == values.end()) return sign | values.back().second;  // past the largest finite: saturate
    if (hi->first == a || hi == values.begin()) return sign | hi->second;
    auto lo = hi - 1;
    const double dLo = a - lo->first;
    const double dHi = hi->first - a;
    if (dLo < dHi) return sign | lo->second;
    if (dHi < dLo) return sign | hi->second;
    return sign | ((lo->second & 1) == 0 ? lo->second : hi->second);
  }
};

template <class Decode, class IsNan>
Format makeFormat(uint32_t signBit, Decode decode, IsNan isNan, double overflowAt, uint32_t overflowCode) {
  Format f{{}, signBit, overflowAt, overflowCode};
  for (uint32_t c = 0; c < signBit; ++c) {
    const double v = decode(c);
    if (!isNan(c) && std::isfinite(v)) f.values.emplace_back(v, c);
  }
  return f;
}

const Format& halfFormat() {
  // 65504 + half an ulp (16) and beyond round to infinity.
  static const Format f = makeFormat(
      0x8000, [](uint32_t c) { return double(halfToFloat(uint16_t(c))); },
      [](uint32_t c) { return halfIsNan(uint16_t(c)); }, 65520.0, 0x7C00);
  return f;
}
const Format& e4m3Format() {
  static const Format f = makeFormat(
      0x80, [](uint32_t c) { return double(e4m3ToFloat(uint8_t(c))); },
      [](uint32_t c) { return e4m3IsNan(uint8_t(c)); }, 0, 0);
  return f;
}
const Format& e5m2Format() {
  static const Format f = makeFormat(
      0x80, [](uint32_t c) { return double(e5m2ToFloat(uint8_t(c))); },
      [](uint32_t c) { return e5m2IsNan(uint8_t(c)); }, 0, 0);
  return f;
}

// Floats worth checking for a format: every midpoint between neighbours, one float ulp either side of it, every
// representable value, plus a strided sweep over all float bit patterns.
std::vector<float> probesFor(const Format& format) {
  std::vector<float> probes;
  for (size_t i = 0; i + 1 < format.values.size(); ++i) {
    const float lo = float(format.values[i].first);
    const float mid = float((format.values[i].first + format.values[i + 1].first) / 2);  // exact in float
    for (float v : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      probes.push_back(v);
      probes.push_back(-v);
    }
  }
  const float top = float(format.values.back().first);
  for (float v : {top, std::nextafter(top, 1e30f), top * 1.03125f, top * 1.0625f, top * 2, 1e30f}) {
    probes.push_back(v);
    probes.push_back(-v);
  }
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 65521) {
    if (!std::isnan(floatOf(uint32_t(u)))) probes.push_back(floatOf(uint32_t(u)));
  }
  return probes;
}

TEST(FloatTypes, HalfRoundTripsEveryPatternAndCanonicalisesNan) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const auto h = uint16_t(c);
    const float f = halfToFloat(h);
    if (halfIsNan(h)) {
      EXPECT_TRUE(std::isnan(f));
      EXPECT_EQ(floatToHalf(f), 0x7FFF) << std::hex << c;
    } else {
      ASSERT_EQ(floatToHalf(f), h) << std::hex << c;
    }
  }
}

TEST(FloatTypes, Bf16RoundTripsEveryPatternAndCanonicalisesNan) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const auto b = uint16_t(c);
    const float f = bf16ToFloat(b);
    EXPECT_EQ(bitsOf(f), c << 16);
    ASSERT_EQ(floatToBf16(f), bf16IsNan(b) ? 0x7FFF : b) << std::hex << c;
  }
}

TEST(FloatTypes, E4M3RoundTripsEveryPattern) {
  for (uint32_t c = 0; c < 256; ++c) {
    const auto b = uint8_t(c);
    const float f = e4m3ToFloat(b);
    if (e4m3IsNan(b)) {
      EXPECT_TRUE(std::isnan(f));
      EXPECT_EQ(floatToE4M3(f), 0x7F);
    } else {
      EXPECT_EQ(floatToE4M3(f), b) << std::hex << c;
      EXPECT_EQ(halfToE4M3(floatToHalf(f)), b) << std::hex << c;
      EXPECT_EQ(e4m3ToHalf(b), floatToHalf(f));  // exact widening
    }
  }
}

TEST(FloatTypes, E5M2RoundTripsEveryFinitePatternAndSaturatesInfinity) {
  for (uint32_t c = 0; c < 256; ++c) {
    const auto b = uint8_t(c);
    const float f = e5m2ToFloat(b);
    if (e5m2IsNan(b)) {
      EXPECT_TRUE(std::isnan(f));
      EXPECT_EQ(floatToE5M2(f), 0x7F);
    } else if (std::isinf(f)) {
      EXPECT_EQ(floatToE5M2(f), (b & 0x80) | 0x7B);  // SATFINITE: infinity becomes the largest finite
    } else {
      EXPECT_EQ(floatToE5M2(f), b) << std::hex << c;
      EXPECT_EQ(e5m2ToHalf(b), uint16_t(b << 8));  // E5M2 is the top byte of a half
    }
  }
}

TEST(FloatTypes, Fp8DecodesKnownValues) {
  EXPECT_EQ(e4m3ToFloat(0x7E), 448.0f);
  EXPECT_EQ(e4m3ToFloat(0xFE), -448.0f);
  EXPECT_EQ(e4m3ToFloat(0x08), 0x1p-6f);  // smallest normal
  EXPECT_EQ(e4m3ToFloat(0x01), 0x1p-9f);  // smallest subnormal
  EXPECT_EQ(e4m3ToFloat(0x07), 7 * 0x1p-9f);
  EXPECT_EQ(e4m3ToFloat(0x38), 1.0f);
  EXPECT_TRUE(std::signbit(e4m3ToFloat(0x80)) && e4m3ToFloat(0x80) == 0.0f);
  EXPECT_TRUE(std::isnan(e4m3ToFloat(0xFF)));
  EXPECT_EQ(e5m2ToFloat(0x7B), 57344.0f);
  EXPECT_EQ(e5m2ToFloat(0x7C), std::numeric_limits<float>::infinity());
  EXPECT_EQ(e5m2ToFloat(0xFC), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(e5m2ToFloat(0x01), 0x1p-16f);
  EXPECT_EQ(e5m2ToFloat(0x3C), 1.0f);
}

TEST(FloatTypes, HalfRoundsLikeNearestEvenReference) {
  const Format& format = halfFormat();
  for (float x : probesFor(format)) {
    ASSERT_EQ(floatToHalf(x), format.round(x)) << std::hexfloat << x;
  }
}

TEST(FloatTypes, E4M3RoundsLikeNearestEvenReferenceWithSaturation) {
  const Format& format = e4m3Format();
  for (float x : probesFor(format)) {
    ASSERT_EQ(floatToE4M3(x), format.round(x)) << std::hexfloat << x;
  }
}

TEST(FloatTypes, E5M2RoundsLikeNearestEvenReferenceWithSaturation) {
  const Format& format = e5m2Format();
  for (float x : probesFor(format)) {
    ASSERT_EQ(floatToE5M2(x), format.round(x)) << std::hexfloat << x;
  }
}

TEST(FloatTypes, Bf16RoundsToNearestEven) {
  std::mt19937 rng(12345);
  for (int i = 0; i < 2000000; ++i) {
    const float x = floatOf(uint32_t(rng()));
    if (!std::isfinite(x)) continue;
    // Reference: pick the nearer of the two bf16 neighbours by exact double distance.
    const uint32_t down = bitsOf(x) >> 16;
    const double lo = bf16ToFloat(uint16_t(down));
    const double hi = bf16ToFloat(uint16_t(down + 1));
    // Past the largest finite the next step up is infinity, which sits where 2^128 would.
    const double hiValue = std::isinf(hi) ? std::copysign(0x1p128, hi) : hi;
    const double hiDistance = std::fabs(hiValue - double(x));
    const double loDistance = std::fabs(double(x) - lo);
    const uint32_t expected =
        loDistance < hiDistance ? down : (hiDistance < loDistance ? down + 1 : ((down & 1) != 0 ? down + 1 : down));
    ASSERT_EQ(floatToBf16(x), expected) << std::hexfloat << x;
  }
}

TEST(FloatTypes, HalfToFp8RoundsThroughTheHalfValue) {
  const Format& e4m3 = e4m3Format();
  const Format& e5m2 = e5m2Format();
  for (uint32_t c = 0; c < 65536; ++c) {
    const auto h = uint16_t(c);
    const float f = halfToFloat(h);
    if (std::isnan(f)) {
      EXPECT_EQ(halfToE4M3(h), 0x7F);
      EXPECT_EQ(halfToE5M2(h), 0x7F);
      continue;
    }
    ASSERT_EQ(halfToE4M3(h), e4m3.round(f)) << std::hex << c;
    ASSERT_EQ(halfToE5M2(h), e5m2.round(f)) << std::hex << c;
    ASSERT_EQ(halfToE5M2(h), floatToE5M2(f)) << std::hex << c;
  }
}

TEST(FloatTypes, HalfTiesGoToEven) {
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f), 0x3C00);      // halfway 1 .. 1+2^-10 -> 1
  EXPECT_EQ(floatToHalf(1.0f + 3 * 0x1p-11f), 0x3C02);  // halfway 1+2^-10 .. 1+2^-9 -> even
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f + 0x1p-20f), 0x3C01);
  EXPECT_EQ(floatToHalf(-(1.0f + 0x1p-11f)), 0xBC00);
}

TEST(FloatTypes, HalfSubnormalsRoundCorrectly) {
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001);
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);  // tie with 0 -> 0
  EXPECT_EQ(floatToHalf(0x1.000002p-25f), 0x0001);
  EXPECT_EQ(floatToHalf(3 * 0x1p-25f), 0x0002);         // tie 1 .. 2 -> 2
  EXPECT_EQ(floatToHalf(-0x1p-26f), 0x8000);            // underflow keeps the sign
  EXPECT_EQ(floatToHalf(0x1p-14f - 0x1p-26f), 0x0400);  // rounds up into the smallest normal
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(halfToFloat(0x03FF), 1023 * 0x1p-24f);
  EXPECT_EQ(halfToFloat(0x8001), -0x1p-24f);
}

TEST(FloatTypes, HalfOverflowsToInfinity) {
  EXPECT_EQ(floatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65519.996f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7C00);  // tie with 2^16 -> even -> infinity
  EXPECT_EQ(floatToHalf(-1e10f), 0xFC00);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(floatToHalf(-std::numeric_limits<float>::quiet_NaN()), 0x7FFF);
  EXPECT_EQ(floatToHalf(floatOf(0x7F800001)), 0x7FFF);  // signalling NaN
}

TEST(FloatTypes, Bf16EdgeCases) {
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds up to infinity
  EXPECT_EQ(floatToBf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(floatToBf16(floatOf(0x3F808000)), 0x3F80);  // tie -> even
  EXPECT_EQ(floatToBf16(floatOf(0x3F818000)), 0x3F82);  // tie -> even (up)
  EXPECT_EQ(floatToBf16(floatOf(0x00008000)), 0x0000);  // subnormal tie -> even
  EXPECT_EQ(floatToBf16(floatOf(0x00018000)), 0x0002);
  EXPECT_EQ(floatToBf16(floatOf(0xFFC00001)), 0x7FFF);  // NaN of either sign -> canonical
}

TEST(FloatTypes, E4M3SaturatesAndRoundsSmallValues) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(floatToE4M3(448.0f), 0x7E);
  EXPECT_EQ(floatToE4M3(463.99f), 0x7E);
  EXPECT_EQ(floatToE4M3(464.0f), 0x7E);  // tie 448 .. (480) -> even 448
  EXPECT_EQ(floatToE4M3(464.1f), 0x7E);  // finite overflow saturates (SATFINITE)
  EXPECT_EQ(floatToE4M3(1e30f), 0x7E);
  EXPECT_EQ(floatToE4M3(-1e30f), 0xFE);
  EXPECT_EQ(floatToE4M3(kInf), 0x7E);  // SATFINITE clamps infinity too
  EXPECT_EQ(floatToE4M3(-kInf), 0xFE);
  EXPECT_EQ(floatToE4M3(std::numeric_limits<float>::quiet_NaN()), 0x7F);
  EXPECT_EQ(floatToE4M3(-std::numeric_limits<float>::quiet_NaN()), 0x7F);  // sign dropped, as CUDA
  EXPECT_EQ(floatToE4M3(0x1p-10f), 0x00);                                  // tie 0 .. 2^-9 -> 0
  EXPECT_EQ(floatToE4M3(-0x1p-10f), 0x80);
  EXPECT_EQ(floatToE4M3(0x1.01p-10f), 0x01);
  EXPECT_EQ(floatToE4M3(3 * 0x1p-10f), 0x02);        // tie 1 .. 2 units -> 2
  EXPECT_EQ(floatToE4M3(0x1p-6f - 0x1p-12f), 0x08);  // rounds up into the smallest normal
  EXPECT_EQ(floatToE4M3(1.0625f), 0x38);             // tie 1 .. 1.125 -> even 1
  EXPECT_EQ(floatToE4M3(1.1875f), 0x3A);             // tie 1.125 .. 1.25 -> even 1.25
}

TEST(FloatTypes, E5M2SaturatesAndRoundsSmallValues) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(floatToE5M2(57344.0f), 0x7B);
  EXPECT_EQ(floatToE5M2(61439.0f), 0x7B);
  EXPECT_EQ(floatToE5M2(61440.0f), 0x7B);  // would round to infinity; SATFINITE keeps the largest finite
  EXPECT_EQ(floatToE5M2(1e30f), 0x7B);
  EXPECT_EQ(floatToE5M2(kInf), 0x7B);
  EXPECT_EQ(floatToE5M2(-kInf), 0xFB);
  EXPECT_EQ(floatToE5M2(-std::numeric_limits<float>::quiet_NaN()), 0x7F);
  EXPECT_EQ(floatToE5M2(0x1p-17f), 0x00);  // tie 0 .. 2^-16 -> 0
  EXPECT_EQ(floatToE5M2(-0x1p-18f), 0x80);
  EXPECT_EQ(floatToE5M2(3 * 0x1p-17f), 0x02);
  EXPECT_EQ(floatToE5M2(1.125f), 0x3C);  // tie 1 .. 1.25 -> even 1
  EXPECT_EQ(floatToE5M2(1.375f), 0x3E);  // tie 1.25 .. 1.5 -> even 1.5
}

}  // namespace
}  // namespace cfx::fp
