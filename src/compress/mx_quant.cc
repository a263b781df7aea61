// SPDX-License-Identifier: Apache-2.0
// OCP Microscaling formats, host side (compress layer): MXINT8 and MXFP8 (E4M3), 32 elements sharing one E8M0 scale.
//
// The scale is a power of two, X = 2^s, stored as the byte s + 127. From the block's largest finite magnitude m:
//   MXINT8  s = floor(log2 m): m / X lies in [1, 2), and elements are int8 in units of X / 64 (the format's 1.6 fixed
//           point), so m itself is at most 128 units and rounds within [-127, 127] after the clamp.
//   MXFP8   s = floor(log2 m) - 8 (E4M3's largest power of two): m / X lies in [256, 512), and elements are the
//           saturating E4M3 of x / X, so the few values above 448 X clamp to it (the specification's rule).
// Scaling by a power of two is exact, so the only rounding is the element's. A block whose m is below 2^-100 (or
// zero, or with no finite value) is stored as scale byte 0 with zero elements: what it loses is below 2^-100.
// Non-finite elements take the NaN code (int8 -128, E4M3 0x7F).
#include <cmath>
#include <cstring>
#include <limits>

#include "compress/formats.h"
#include "compress/quantize_math.h"

namespace cfx::compress::detail {

namespace {

constexpr float kTinyBlock = 7.8886090522101181e-31f;  // 2^-100

// floor(log2 m) for a normal, finite, positive m: its exponent field.
int floorLog2(float m) { return static_cast<int>((fp::detail::floatBits(m) >> 23) & 0xFF) - 127; }

float pow2(int s) { return std::ldexp(1.0f, s); }

}  // namespace

size_t mxPieceBytes(size_t count, size_t block) { return (count + block - 1) / block + count; }

void mxEncode(Format f, const float* v, size_t n, const BlockOut& o) {
  const float m = absmaxFinite(v, n);
  unsigned char* payload = o.wire + o.nBlocks + o.first;
  const bool isInt = f == Format::MxInt8;
  if (!(m >= kTinyBlock)) {
    o.wire[o.block] = 0;
    for (size_t i = 0; i < n; ++i) {
      const bool finite = quant::isFiniteBits(v[i]);
      payload[i] = finite ? 0 : (isInt ? quant::kInt8NanCode : quant::kE4M3NanCode);
    }
    return;
  }
  const int s = floorLog2(m) - (isInt ? 0 : 8);
  o.wire[o.block] = static_cast<unsigned char>(s + 127);
  // x / X as x * 2^-s (exact); for int8 in units of X / 64, so times 2^(6 - s). Both factors are normal floats
  // for m in [2^-100, 2^128).
  const float inv = isInt ? pow2(6 - s) : pow2(-s);
  if (isInt && !o.stochastic) {
    int8Encode(v, n, inv, payload);  // int8 of x * inv, clamped to +-127: the same arithmetic as Int8's
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const float x = v[i];
    if (!quant::isFiniteBits(x)) {
      payload[i] = isInt ? quant::kInt8NanCode : quant::kE4M3NanCode;
      continue;
    }
    const float t = x * inv;
    if (!isInt) {
      payload[i] = fp::floatToE4M3(t);
      continue;
    }
    const float c = t > 127.0f ? 127.0f : t < -127.0f ? -127.0f : t;
    int32_t q = o.stochastic ? quant::roundStochastic(c, quant::stochasticUnit(o.seed, o.firstElem + o.first + i))
                             : quant::roundHalfEven(c);
    q = q > 127 ? 127 : q;
    payload[i] = static_cast<uint8_t>(static_cast<int8_t>(q));
  }
}

void mxDecode(Format f, const unsigned char* wire, size_t count, size_t block, float* out, bool accumulate) {
  const size_t nBlocks = (count + block - 1) / block;
  const unsigned char* payload = wire + nBlocks;
  const bool isInt = f == Format::MxInt8;
  for (size_t b = 0, first = 0; b < nBlocks; ++b, first += block) {
    const size_t n = std::min(block, count - first);
    const int s = static_cast<int>(wire[b]) - 127;
    const float unit = wire[b] == 0 ? 0.0f : isInt ? pow2(s - 6) : pow2(s);
    if (isInt) {
      int8Decode(payload + first, n, unit, out + first, accumulate);
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      const uint8_t q = payload[first + i];
      const float e = fp::e4m3ToFloat(q);
      const float v = e != e ? e : e * unit;
      out[first + i] = accumulate ? out[first + i] + v : v;
    }
  }
}

}  // namespace cfx::compress::detail
