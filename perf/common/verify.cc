// SPDX-License-Identifier: Apache-2.0
// perf harness: generators and comparison for -c; the rules are explained in verify.h.
#include "verify.h"

#include <conflux.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "datatypes.h"
#include "options.h"

namespace cfx::perf {
namespace {

// Per-type bounds that keep reductions exact (see verify.h).
struct TypeLimits {
  double sumCap;      // largest |partial sum| that is an exactly representable integer
  int64_t magnitude;  // bound of one sum/avg contribution
  int maxTwos;        // most factors of 2 a product may collect
  int64_t range;      // magnitude bound for max/min and for moved data of floating types
};

const TypeLimits& limitsOf(ncclDataType_t type) {
  static const TypeLimits kLimits[kNumTypes] = {
      {127.0, 3, 6, 100},                        // int8
      {255.0, 3, 7, 200},                        // uint8
      {2147483647.0, 1000, 30, 1000000},         // int32
      {4294967295.0, 1000, 31, 1000000},         // uint32
      {9007199254740992.0, 1000, 62, 1000000},   // int64
      {9007199254740992.0, 1000, 63, 1000000},   // uint64
      {2048.0, 8, 15, 1000},                     // half: 11 significant bits, max 65504
      {16777216.0, 1000, 100, 1000000},          // float
      {9007199254740992.0, 1000, 500, 1000000},  // double
      {256.0, 4, 100, 200},                      // bfloat16: 8 significant bits
      {16.0, 2, 8, 16},                          // f8e4m3: 4 significant bits, max 448
      {8.0, 2, 15, 8},                           // f8e5m2: 3 significant bits, max 57344
  };
  return kLimits[static_cast<int>(type)];
}

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hashOf(uint64_t seed, uint64_t a, uint64_t b) {
  return mix64(seed ^ mix64(a * 0x632be59bd9b4e019ull ^ mix64(b)));
}

// Signed distance in units in the last place between two floating values of the same format, via the usual
// sign-magnitude to two's-complement mapping of their bits.
int64_t ulpDistance(uint64_t a, uint64_t b, size_t size) {
  const int bits = static_cast<int>(size * 8);
  auto ordered = [bits](uint64_t v) -> int64_t {
    uint64_t signMask = 1ull << (bits - 1);
    uint64_t magnitude = v & (signMask - 1);
    return (v & signMask) ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
  };
  return std::llabs(ordered(a) - ordered(b));
}

}  // namespace

ReductionData::ReductionData(ncclDataType_t type, int opIndex, int nRanks, uint64_t seed)
    : type_(type), opIndex_(opIndex), nRanks_(nRanks), seed_(seed) {
  const TypeLimits& lim = limitsOf(type);
  const TypeInfo& info = typeInfo(type);
  signedValues_ = info.isFloat || info.isSigned;
  switch (opIndex) {
    case ncclProd:
      maxShare_ = lim.maxTwos;
      maxValue_ = 2;
      break;
    case ncclMax:
    case ncclMin:
      maxShare_ = nRanks;
      maxValue_ = lim.range;
      break;
    case ncclAvg:
      // Non-negative so that integer truncation is unambiguous; one contributor on floating types.
      signedValues_ = false;
      maxValue_ = lim.magnitude;
      maxShare_ = info.isFloat ? 1 : static_cast<int>(std::min<double>(nRanks, lim.sumCap / lim.magnitude));
      break;
    case kMulSum:
      maxValue_ = lim.magnitude;
      maxShare_ = static_cast<int>(std::min<double>(nRanks, lim.sumCap / (2.0 * lim.magnitude)));
      break;
    default:  // sum
      maxValue_ = lim.magnitude;
      maxShare_ = static_cast<int>(std::min<double>(nRanks, lim.sumCap / lim.magnitude));
      break;
  }
  maxShare_ = std::max(1, std::min(maxShare_, nRanks));
}

uint64_t ReductionData::hash(int rank, size_t index) const { return hashOf(seed_, static_cast<uint64_t>(rank), index); }

ReductionData::Share ReductionData::share(size_t index) const {
  uint64_t h = hashOf(seed_ ^ 0x5bd1e995ull, ~0ull, index);
  Share s;
  s.first = static_cast<int>(h % static_cast<uint64_t>(nRanks_));
  if (opIndex_ == ncclProd) {
    s.count = static_cast<int>((h >> 32) % static_cast<uint64_t>(maxShare_ + 1));  // 0..maxShare twos
  } else if (maxShare_ >= nRanks_) {
    s.count = nRanks_;
  } else {
    s.count = 1 + static_cast<int>((h >> 32) % static_cast<uint64_t>(maxShare_));
  }
  return s;
}

double ReductionData::input(int rank, size_t index) const {
  Share s = share(index);
  bool in = contributes(rank, s);
  if (opIndex_ == ncclProd) return in ? 2.0 : 1.0;
  if (!in) return 0.0;
  uint64_t h = hash(rank, index);
  if (opIndex_ == ncclAvg && typeInfo(type_).isFloat) return 1.0 + static_cast<double>(h % maxValue_);
  if (signedValues_) {
    return static_cast<double>(static_cast<int64_t>(h % static_cast<uint64_t>(2 * maxValue_ + 1)) - maxValue_);
  }
  return static_cast<double>(h % static_cast<uint64_t>(maxValue_ + 1));
}

double ReductionData::expected(size_t index) const {
  double acc = input(0, index);
  if (opIndex_ == kMulSum) acc *= preMulScalar(0);
  for (int r = 1; r < nRanks_; ++r) {
    double v = input(r, index);
    switch (opIndex_) {
      case ncclProd:
        acc *= v;
        break;
      case ncclMax:
        acc = std::max(acc, v);
        break;
      case ncclMin:
        acc = std::min(acc, v);
        break;
      case kMulSum:
        acc += preMulScalar(r) * v;
        break;
      default:
        acc += v;
        break;
    }
  }
  if (opIndex_ == ncclAvg) {
    if (typeInfo(type_).isFloat) return acc / nRanks_;
    return static_cast<double>(static_cast<int64_t>(acc) / nRanks_);
  }
  return acc;
}

void fillReductionInput(const ReductionData& data, int rank, size_t firstIndex, size_t count, void* dst) {
  const size_t size = typeInfo(data.type()).size;
  char* out = static_cast<char*>(dst);
  for (size_t i = 0; i < count; ++i) storeElement(data.type(), data.input(rank, firstIndex + i), out + i * size);
}

void fillReductionExpected(const ReductionData& data, size_t firstIndex, size_t count, void* dst) {
  const size_t size = typeInfo(data.type()).size;
  char* out = static_cast<char*>(dst);
  for (size_t i = 0; i < count; ++i) storeElement(data.type(), data.expected(firstIndex + i), out + i * size);
}

void fillPattern(ncclDataType_t type, uint64_t seed, int owner, size_t firstIndex, size_t count, void* dst) {
  const TypeInfo& info = typeInfo(type);
  const int64_t range = limitsOf(type).range;
  char* out = static_cast<char*>(dst);
  for (size_t i = 0; i < count; ++i) {
    uint64_t h = hashOf(seed, static_cast<uint64_t>(owner) + 0x10000, firstIndex + i);
    if (info.isFloat) {
      double v = static_cast<double>(static_cast<int64_t>(h % static_cast<uint64_t>(2 * range + 1)) - range);
      storeElement(type, v, out + i * info.size);
    } else {
      memcpy(out + i * info.size, &h, info.size);  // little-endian: the low bytes
    }
  }
}

int64_t countWrong(ncclDataType_t type, const void* got, const void* expected, size_t count, bool ulpTolerance) {
  const size_t size = typeInfo(type).size;
  const char* g = static_cast<const char*>(got);
  const char* e = static_cast<const char*>(expected);
  if (!ulpTolerance) {
    if (memcmp(g, e, count * size) == 0) return 0;
  }
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    uint64_t a = elementBits(type, g + i * size);
    uint64_t b = elementBits(type, e + i * size);
    if (a == b) continue;
    if (ulpTolerance && ulpDistance(a, b, size) <= 2) continue;
    ++wrong;
  }
  return wrong;
}

double codecUnit(int format, bool stochastic) {
  double unit = 1.0;  // top-k: a dropped entry loses its whole value
  switch (format) {
    case cfxCodecBf16: unit = 1.0 / 256; break;
    case cfxCodecFp16: unit = 1.0 / 2048; break;
    case cfxCodecInt8: unit = 1.0 / 254; break;
    case cfxCodecMxInt8: unit = 1.0 / 64; break;
    case cfxCodecMxFp8: unit = 1.0 / 8; break;
    case cfxCodecInt4: unit = 1.0 / 14; break;
    case cfxCodecFp8: unit = 1.0 / 16 + 1.0 / 448 / 1024; break;
    default: break;
  }
  return stochastic ? 2 * unit : unit;
}

int64_t countWrongWithin(ncclDataType_t type, const void* got, const void* expected, size_t count, double tolerance,
                         double* relL2) {
  const size_t size = typeInfo(type).size;
  // The result is rounded to its type after the codec's error: half an ulp more.
  const double typeRounding = type == ncclBfloat16 ? 1.0 / 256 : type == ncclFloat16 ? 1.0 / 2048 : 1.0 / (1 << 23);
  const char* g = static_cast<const char*>(got);
  const char* e = static_cast<const char*>(expected);
  int64_t wrong = 0;
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < count; ++i) {
    const double a = loadElement(type, g + i * size);
    const double b = loadElement(type, e + i * size);
    const double d = std::fabs(a - b);
    err2 += d * d;
    ref2 += b * b;
    if (!(d <= tolerance * (1 + 1e-6) + typeRounding * std::fabs(b) + 1e-30)) ++wrong;
  }
  *relL2 = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  return wrong;
}

double maxAbs(ncclDataType_t type, const void* values, size_t count) {
  const size_t size = typeInfo(type).size;
  double m = 0;
  for (size_t i = 0; i < count; ++i) m = std::max(m, std::fabs(loadElement(type, static_cast<const char*>(values) + i * size)));
  return m;
}

void storePreMulScalar(ncclDataType_t type, int rank, void* scalar) {
  memset(scalar, 0, 8);
  storeElement(type, ReductionData::preMulScalar(rank), scalar);
}

}  // namespace cfx::perf
