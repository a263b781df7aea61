// SPDX-License-Identifier: Apache-2.0
// Top-k sparse format (compress layer): per block, the k entries of largest magnitude as (index, value) pairs.
//
// A block of n elements keeps k = ceil(fraction * n) of them, so a record's size depends on n alone and both ends of
// a transfer know every record's size without a length on the wire. Record layout, back to back per block:
//   [scale: fp32, int8 and 2-bit values only][k indices: u16 if the codec's block is <= 65536, else u32][k values]
// Indices are ascending within the record. Values: fp32 or bf16 as they are; int8 in units of s = absmax / 127 of the
// kept values (NaN code -128); 2-bit codes c in 0..3 for the levels (2c - 3) * s with s = absmax / 3 of the kept
// values, four to a byte, low bits first (a kept NaN makes s NaN: the block decodes to NaN).
//
// Selection order is total, so every platform keeps the same entries: larger magnitude first (compared as the
// magnitude's bits, so NaN ranks above inf above every finite value), then the lower index.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/float_types.h"
#include "compress/formats.h"
#include "compress/quantize_math.h"

namespace cfx::compress::detail {

namespace {

size_t indexBytes(const CodecSpec& spec) { return spec.block <= 65536 ? 2 : 4; }

size_t valueBytesOf(SparseValues v, size_t k) {
  switch (v) {
    case SparseValues::Fp32: return 4 * k;
    case SparseValues::Bf16: return 2 * k;
    case SparseValues::Int8: return k;
    case SparseValues::Bits2: return (k + 3) / 4;
  }
  return 0;
}

bool hasScale(SparseValues v) { return v == SparseValues::Int8 || v == SparseValues::Bits2; }

uint32_t magnitudeKey(float x) { return fp::detail::floatBits(x) & 0x7FFFFFFFu; }

struct Scratch {
  std::vector<uint32_t> order;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// The kept indices of v[0..n), ascending, in `idx` (k of them).
void selectTopK(const float* v, size_t n, size_t k, std::vector<uint32_t>& idx) {
  idx.resize(n);
  for (size_t i = 0; i < n; ++i) idx[i] = static_cast<uint32_t>(i);
  auto before = [v](uint32_t a, uint32_t b) {
    const uint32_t ka = magnitudeKey(v[a]);
    const uint32_t kb = magnitudeKey(v[b]);
    return ka != kb ? ka > kb : a < b;
  };
  if (k < n) std::nth_element(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(), before);
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
}

}  // namespace

size_t topkKept(float fraction, size_t n) {
  if (n == 0) return 0;
  const auto k = static_cast<size_t>(std::ceil(static_cast<double>(fraction) * static_cast<double>(n)));
  return std::clamp<size_t>(k, 1, n);
}

size_t topkBlockBytes(const CodecSpec& spec, size_t n) {
  const size_t k = topkKept(spec.fraction, n);
  if (k == 0) return 0;
  return (hasScale(spec.values) ? sizeof(float) : 0) + k * indexBytes(spec) + valueBytesOf(spec.values, k);
}

size_t topkPieceBytes(const CodecSpec& spec, size_t count) {
  const size_t full = count / spec.block;
  const size_t tail = count % spec.block;
  return full * topkBlockBytes(spec, spec.block) + topkBlockBytes(spec, tail);
}

size_t topkEncodeBlock(const CodecSpec& spec, const float* v, size_t n, unsigned char* record) {
  const size_t k = topkKept(spec.fraction, n);
  if (k == 0) return 0;
  std::vector<uint32_t>& idx = scratch().order;
  selectTopK(v, n, k, idx);
  unsigned char* p = record;
  float scale = 0.0f;
  if (hasScale(spec.values)) {
    float m = 0.0f;
    bool nan = false;
    for (uint32_t i : idx) {
      const float a = quant::absFloat(v[i]);
      nan = nan || !quant::isFiniteBits(v[i]);
      m = a > m && a <= std::numeric_limits<float>::max() ? a : m;
    }
    scale = m / (spec.values == SparseValues::Int8 ? 127.0f : 3.0f);
    if (nan && spec.values == SparseValues::Bits2) scale = quant::nanFloat();
    std::memcpy(p, &scale, sizeof(float));
    p += sizeof(float);
  }
  const size_t ib = indexBytes(spec);
  for (size_t j = 0; j < k; ++j) {
    if (ib == 2) {
      const auto i16 = static_cast<uint16_t>(idx[j]);
      std::memcpy(p + 2 * j, &i16, 2);
    } else {
      std::memcpy(p + 4 * j, &idx[j], 4);
    }
  }
  p += ib * k;
  switch (spec.values) {
    case SparseValues::Fp32:
      for (size_t j = 0; j < k; ++j) std::memcpy(p + 4 * j, &v[idx[j]], 4);
      break;
    case SparseValues::Bf16:
      for (size_t j = 0; j < k; ++j) {
        const uint16_t h = fp::floatToBf16(v[idx[j]]);
        std::memcpy(p + 2 * j, &h, 2);
      }
      break;
    case SparseValues::Int8:
      for (size_t j = 0; j < k; ++j) {
        p[j] = quant::quantizeOne(quant::Codec::Int8, v[idx[j]], quant::reciprocalScale(scale));
      }
      break;
    case SparseValues::Bits2:
      std::memset(p, 0, (k + 3) / 4);
      for (size_t j = 0; j < k; ++j) {
        // Nearest of the levels (2c - 3) s: c = round((x / s + 3) / 2) clamped to 0..3; s = 0 sends code 1 or 2.
        const float x = v[idx[j]];
        int32_t c = scale == 0.0f || scale != scale ? (x < 0.0f ? 1 : 2) : quant::roundHalfEven(((x / scale) + 3.0f) / 2.0f);
        c = std::clamp(c, 0, 3);
        p[j / 4] = static_cast<unsigned char>(p[j / 4] | (c << (2 * (j % 4))));
      }
      break;
  }
  return topkBlockBytes(spec, n);
}

void topkDecode(const CodecSpec& spec, const unsigned char* wire, size_t count, float* out, bool accumulate) {
  if (!accumulate) std::memset(out, 0, count * sizeof(float));
  const size_t ib = indexBytes(spec);
  for (size_t first = 0; first < count; first += spec.block) {
    const size_t n = std::min<size_t>(spec.block, count - first);
    const size_t k = topkKept(spec.fraction, n);
    const unsigned char* p = wire;
    float scale = 0.0f;
    if (hasScale(spec.values)) {
      std::memcpy(&scale, p, sizeof(float));
      p += sizeof(float);
    }
    const unsigned char* vals = p + ib * k;
    float* o = out + first;
    for (size_t j = 0; j < k; ++j) {
      uint32_t i = 0;
      if (ib == 2) {
        uint16_t i16;
        std::memcpy(&i16, p + 2 * j, 2);
        i = i16;
      } else {
        std::memcpy(&i, p + 4 * j, 4);
      }
      if (i >= n) continue;  // only a corrupted record can say so; never write outside the block
      float x = 0.0f;
      switch (spec.values) {
        case SparseValues::Fp32: std::memcpy(&x, vals + 4 * j, 4); break;
        case SparseValues::Bf16: {
          uint16_t h;
          std::memcpy(&h, vals + 2 * j, 2);
          x = fp::bf16ToFloat(h);
          break;
        }
        case SparseValues::Int8: x = quant::dequantizeOne(quant::Codec::Int8, vals[j], scale); break;
        case SparseValues::Bits2: {
          const int c = (vals[j / 4] >> (2 * (j % 4))) & 3;
          x = static_cast<float>(2 * c - 3) * scale;
          break;
        }
      }
      o[i] += x;
    }
    wire += topkBlockBytes(spec, n);
  }
}

}  // namespace cfx::compress::detail
