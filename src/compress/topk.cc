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

// The kept indices of v[0..n), ascending, in `idx` (k of them): the k largest keys, ties to the lower index.
// A counting select: one pass histograms the keys' top 11 bits (a quarter of a binade a bin), the bin holding the
// k-th largest is found from the top, the few keys in it are partially sorted to find the threshold T itself, and
// one last pass takes every key above T and the first equal ones. Three branch-light passes over the block, no sort
// of the whole block and no indirection: the nth_element over indices this replaces ran at 0.3 GB/s.
void selectTopK(const float* v, size_t n, size_t k, std::vector<uint32_t>& idx) {
  idx.clear();
  if (k >= n) {
    for (size_t i = 0; i < n; ++i) idx.push_back(static_cast<uint32_t>(i));
    return;
  }
  constexpr int kShift = 20;
  thread_local std::vector<uint32_t> hist(size_t{1} << (31 - kShift));
  thread_local std::vector<uint32_t> cand;
  std::fill(hist.begin(), hist.end(), 0u);
  for (size_t i = 0; i < n; ++i) ++hist[magnitudeKey(v[i]) >> kShift];
  size_t above = 0;  // keys in bins above the threshold's bin
  size_t b = hist.size() - 1;
  while (above + hist[b] < k) above += hist[b--];
  cand.clear();
  for (size_t i = 0; i < n; ++i) {
    const uint32_t key = magnitudeKey(v[i]);
    if ((key >> kShift) == b) cand.push_back(key);
  }
  const size_t need = k - above;  // to take from the threshold's bin, 1 <= need <= cand.size()
  std::nth_element(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(need - 1), cand.end(), std::greater<>());
  const uint32_t threshold = cand[need - 1];
  size_t equal = need;
  for (size_t j = 0; j < need - 1; ++j) equal -= cand[j] > threshold ? 1 : 0;  // of the first need, those equal
  for (size_t i = 0; i < n && idx.size() < k; ++i) {
    const uint32_t key = magnitudeKey(v[i]);
    if (key > threshold || (key == threshold && equal-- > 0)) idx.push_back(static_cast<uint32_t>(i));
  }
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
  thread_local std::vector<uint32_t> idx;
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
  if (!accumulate && count != 0) std::memset(out, 0, count * sizeof(float));  // out may be null when empty
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
