// SPDX-License-Identifier: Apache-2.0
// The cast formats and the value conversions every codec shares (compress layer).
//
// Casts: bf16 and fp16, two bytes an element, rounded to nearest even (common/float_types.h, the GPU's rules), so a
// cast piece is exactly what a bf16 or fp16 buffer would hold. Stochastic rounding (bf16) adds 16 random bits below
// the kept ones before truncating: rounding up with probability equal to the dropped fraction. Inf and NaN are kept.
#include <cstring>

#include "common/float_types.h"
#include "compress/formats.h"
#include "compress/quantize_math.h"

namespace cfx::compress::detail {

// An empty share may come with null pointers, which memcpy may not be given even for zero bytes.
void loadFloats(DataType type, const void* in, size_t n, float* out) {
  if (n == 0) return;
  const auto* p = static_cast<const unsigned char*>(in);
  if (type == DataType::Float32) {
    std::memcpy(out, p, n * sizeof(float));
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    out[i] = type == DataType::Bfloat16 ? fp::bf16ToFloat(h) : fp::halfToFloat(h);
  }
}

void storeFloats(DataType type, const float* v, size_t n, void* out) {
  if (n == 0) return;
  auto* p = static_cast<unsigned char*>(out);
  if (type == DataType::Float32) {
    std::memcpy(p, v, n * sizeof(float));
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = type == DataType::Bfloat16 ? fp::floatToBf16(v[i]) : fp::floatToHalf(v[i]);
    std::memcpy(p + 2 * i, &h, 2);
  }
}

void castEncode(Format f, const float* v, size_t n, const BlockOut& o) {
  unsigned char* out = o.wire + 2 * o.first;
  if (f == Format::Bf16 && o.stochastic) {
    for (size_t i = 0; i < n; ++i) {
      const uint32_t bits = fp::detail::floatBits(v[i]);
      uint16_t h;
      if ((bits & 0x7F800000u) == 0x7F800000u) {
        h = fp::floatToBf16(v[i]);  // inf stays inf, NaN the canonical NaN
      } else {
        const auto noise =
            static_cast<uint32_t>(quant::stochasticUnit(o.seed, o.firstElem + o.first + i) * 65536.0f) & 0xFFFFu;
        h = static_cast<uint16_t>((bits + noise) >> 16);  // a carry into the exponent is the right round-up
      }
      std::memcpy(out + 2 * i, &h, 2);
    }
    return;
  }
  storeFloats(f == Format::Bf16 ? DataType::Bfloat16 : DataType::Float16, v, n, out);
}

void castDecode(Format f, const unsigned char* wire, size_t first, size_t n, float* out, bool accumulate) {
  const unsigned char* p = wire + 2 * first;
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    const float v = f == Format::Bf16 ? fp::bf16ToFloat(h) : fp::halfToFloat(h);
    out[i] = accumulate ? out[i] + v : v;
  }
}

}  // namespace cfx::compress::detail

namespace cfx::compress {
void toFloat(DataType type, const void* in, size_t n, float* out) { detail::loadFloats(type, in, n, out); }
void fromFloat(DataType type, const float* v, size_t n, void* out) { detail::storeFloats(type, v, n, out); }
}  // namespace cfx::compress
