// SPDX-License-Identifier: Apache-2.0
// The int8 inner loops every int8-valued format shares (compress layer): absmax of a block's finite values, and a
// block's payload and its decode. Int8 (absmax scale) and MxInt8 (power-of-two scale) differ only in the multiplier.
//
// These decide whether compression pays on a fast link: a 10 Gbit/s link moves 1.25 GB/s of fp32, and the encoder
// must not be the narrower pipe (PCCL's CPU encoder is why its quantised traffic reaches only 74-80 % of line rate).
// So each has an AVX2 version beside the portable one, picked once per process, and both give the same bytes:
//   t = x * inv, plus (x - x), which is 0 for finite x and NaN otherwise, so a non-finite input poisons t;
//   clamped to [-127, 127] with min/max ordered so that NaN passes through; rounded to nearest even (the default
//   MXCSR mode, as the portable magic-number rounding); a NaN converts to INT_MIN and saturates to -128, the NaN code.
#include <algorithm>
#include <cstring>
#include <limits>

#include "compress/formats.h"
#include "compress/quantize_math.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace cfx::compress::detail {

namespace {

float absmaxPortable(const float* v, size_t n) {
  float m = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    const float a = quant::absFloat(v[i]);
    m = a <= std::numeric_limits<float>::max() && a > m ? a : m;
  }
  return m;
}

void encodePortable(const float* v, size_t n, float inv, uint8_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = quant::quantizeOne(quant::Codec::Int8, v[i], inv);
}

void decodePortable(const uint8_t* q, size_t n, float scale, float* out, bool accumulate) {
  for (size_t i = 0; i < n; ++i) {
    const float v = q[i] == quant::kInt8NanCode ? quant::nanFloat() : static_cast<float>(static_cast<int8_t>(q[i])) * scale;
    out[i] = accumulate ? out[i] + v : v;
  }
}

#if defined(__x86_64__)

[[gnu::target("avx2")]] float absmaxAvx2(const float* v, size_t n) {
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 maxFinite = _mm256_set1_ps(std::numeric_limits<float>::max());
  __m256 m0 = _mm256_setzero_ps();
  __m256 m1 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a0 = _mm256_and_ps(_mm256_loadu_ps(v + i), absMask);
    const __m256 a1 = _mm256_and_ps(_mm256_loadu_ps(v + i + 8), absMask);
    // Non-finite lanes (inf, and NaN, which compares false) become 0 before the max.
    m0 = _mm256_max_ps(m0, _mm256_and_ps(a0, _mm256_cmp_ps(a0, maxFinite, _CMP_LE_OQ)));
    m1 = _mm256_max_ps(m1, _mm256_and_ps(a1, _mm256_cmp_ps(a1, maxFinite, _CMP_LE_OQ)));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_max_ps(m0, m1));
  float m = absmaxPortable(v + i, n - i);
  for (float l : lanes) m = std::max(m, l);
  return m;
}

[[gnu::target("avx2")]] inline __m256i toInt32(__m256 x, __m256 inv) {
  const __m256 hi = _mm256_set1_ps(127.0f);
  const __m256 lo = _mm256_set1_ps(-127.0f);
  __m256 t = _mm256_add_ps(_mm256_mul_ps(x, inv), _mm256_sub_ps(x, x));
  t = _mm256_min_ps(hi, t);  // minps returns its second operand when either is NaN: NaN stays NaN
  t = _mm256_max_ps(lo, t);
  return _mm256_cvtps_epi32(t);  // NaN -> INT_MIN
}

[[gnu::target("avx2")]] void encodeAvx2(const float* v, size_t n, float invScalar, uint8_t* out) {
  const __m256 inv = _mm256_set1_ps(invScalar);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i q0 = toInt32(_mm256_loadu_ps(v + i), inv);
    const __m256i q1 = toInt32(_mm256_loadu_ps(v + i + 8), inv);
    const __m256i q2 = toInt32(_mm256_loadu_ps(v + i + 16), inv);
    const __m256i q3 = toInt32(_mm256_loadu_ps(v + i + 24), inv);
    const __m256i w01 = _mm256_packs_epi32(q0, q1);  // saturating: INT_MIN -> -32768
    const __m256i w23 = _mm256_packs_epi32(q2, q3);
    const __m256i b = _mm256_packs_epi16(w01, w23);  // -32768 -> -128
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_permutevar8x32_epi32(b, order));
  }
  encodePortable(v + i, n - i, invScalar, out + i);
}

[[gnu::target("avx2")]] void decodeAvx2(const uint8_t* q, size_t n, float scaleScalar, float* out, bool accumulate) {
  const __m256 scale = _mm256_set1_ps(scaleScalar);
  const __m256i nanCode = _mm256_set1_epi32(-128);
  const __m256 nan = _mm256_set1_ps(quant::nanFloat());
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    int64_t bytes;
    std::memcpy(&bytes, q + i, 8);
    const __m256i wide = _mm256_cvtepi8_epi32(_mm_cvtsi64_si128(bytes));
    __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(wide), scale);
    v = _mm256_blendv_ps(v, nan, _mm256_castsi256_ps(_mm256_cmpeq_epi32(wide, nanCode)));
    if (accumulate) v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
    _mm256_storeu_ps(out + i, v);
  }
  decodePortable(q + i, n - i, scaleScalar, out + i, accumulate);
}

bool haveAvx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

#endif

}  // namespace

float absmaxFinite(const float* v, size_t n) {
#if defined(__x86_64__)
  if (haveAvx2()) return absmaxAvx2(v, n);
#endif
  return absmaxPortable(v, n);
}

void int8Encode(const float* v, size_t n, float inv, uint8_t* out) {
#if defined(__x86_64__)
  if (haveAvx2()) return encodeAvx2(v, n, inv, out);
#endif
  encodePortable(v, n, inv, out);
}

void int8Decode(const uint8_t* q, size_t n, float scale, float* out, bool accumulate) {
#if defined(__x86_64__)
  if (haveAvx2()) return decodeAvx2(q, n, scale, out, accumulate);
#endif
  decodePortable(q, n, scale, out, accumulate);
}

}  // namespace cfx::compress::detail
