// SPDX-License-Identifier: Apache-2.0
// The documented error bounds of every format (compress layer), element by element, for checking results: codec.h
// states them, the unit tests hold every encoding to them, and the perf tools' -c 1 sums them over the ranks of a
// compressed collective.
#include <algorithm>
#include <cmath>
#include <limits>

#include "compress/codec.h"

namespace cfx::compress {

namespace {

float finiteAbsmax(const float* x, size_t n) {
  float m = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (a <= std::numeric_limits<float>::max()) m = std::max(m, a);
  }
  return m;
}

// Slack for the fp32 arithmetic of the bound itself and of the decode (q * scale rounds once).
constexpr float kSlack = 1.0f + 1e-4f;

}  // namespace

void Codec::elementBounds(const float* x, size_t count, float* out) const {
  const Format f = spec_.format;
  const bool sr = spec_.rounding == Rounding::Stochastic;
  const size_t block = spec_.block;
  for (size_t first = 0; first < count; first += block) {
    const size_t n = std::min(block, count - first);
    const float* v = x + first;
    float* b = out + first;
    const float m = finiteAbsmax(v, n);
    // TopK's value scale comes from the kept values' absmax, which is the block's (the largest is always kept).
    const float keptScale = m / (spec_.values == SparseValues::Int8 ? 127.0f : 3.0f);
    for (size_t i = 0; i < n; ++i) {
      const float a = std::fabs(v[i]);
      if (!(a <= std::numeric_limits<float>::max())) {
        b[i] = std::numeric_limits<float>::infinity();
        continue;
      }
      float e = 0.0f;
      switch (f) {
        case Format::Bf16: e = std::ldexp(a, sr ? -7 : -8); break;
        case Format::Fp16: e = a > 65504.0f ? std::numeric_limits<float>::infinity() : std::ldexp(a, -11) + std::ldexp(1.0f, -25); break;
        case Format::Int8: e = m / 127.0f * (sr ? 1.0f : 0.5f); break;
        case Format::Int4: e = m / 7.0f * (sr ? 1.0f : 0.5f); break;
        case Format::Fp8: e = std::ldexp(a, -4) + std::ldexp(m / 448.0f, -10); break;
        case Format::MxInt8: {
          if (m < std::ldexp(1.0f, -100)) {
            e = m;
            break;
          }
          // Elements reach 127/64 X: the few larger values clamp there, losing less than one unit of X / 64.
          const float unit = std::ldexp(1.0f, std::ilogb(m));
          e = sr ? unit / 64.0f : std::max(unit / 128.0f, a - 127.0f / 64.0f * unit);
          break;
        }
        case Format::MxFp8: {
          if (m < std::ldexp(1.0f, -100)) {
            e = m;
            break;
          }
          const float unit = std::ldexp(1.0f, std::ilogb(m) - 8);
          e = a <= 448.0f * unit ? std::ldexp(a, -4) + std::ldexp(unit, -10) : a - 448.0f * unit;
          break;
        }
        case Format::TopK: {
          float valueErr = 0.0f;
          if (spec_.values == SparseValues::Bf16) valueErr = std::ldexp(a, -8);
          if (spec_.values == SparseValues::Int8) valueErr = keptScale / 2.0f;
          if (spec_.values == SparseValues::Bits2) valueErr = keptScale;
          e = std::max(a, valueErr);
          break;
        }
        case Format::None: break;
      }
      b[i] = e * kSlack;
    }
  }
}

}  // namespace cfx::compress
