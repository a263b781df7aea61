// SPDX-License-Identifier: Apache-2.0
// Element codecs for tests: generic IEEE-style encode/decode for the narrow float formats.
#include "integration/dtypes.h"

#include <cmath>
#include <cstdlib>

namespace cfx::itest {

const std::vector<DtypeInfo>& allDtypes() {
  static const std::vector<DtypeInfo> kAll = {
      {ncclInt8, "int8", 1, Kind::Signed},
      {ncclUint8, "uint8", 1, Kind::Unsigned},
      {ncclInt32, "int32", 4, Kind::Signed},
      {ncclUint32, "uint32", 4, Kind::Unsigned},
      {ncclInt64, "int64", 8, Kind::Signed},
      {ncclUint64, "uint64", 8, Kind::Unsigned},
      {ncclFloat16, "float16", 2, Kind::Float, 5, 10, true},
      {ncclFloat32, "float32", 4, Kind::Float, 8, 23, true},
      {ncclFloat64, "float64", 8, Kind::Float, 11, 52, true},
      {ncclBfloat16, "bfloat16", 2, Kind::Float, 8, 7, true},
      {ncclFloat8e4m3, "float8e4m3", 1, Kind::Float, 4, 3, false},
      {ncclFloat8e5m2, "float8e5m2", 1, Kind::Float, 5, 2, true},
  };
  return kAll;
}

const DtypeInfo& dtypeInfo(ncclDataType_t type) {
  for (const auto& d : allDtypes()) {
    if (d.type == type) return d;
  }
  std::abort();
}

namespace {

uint64_t widthMask(size_t size) { return size >= 8 ? ~0ULL : ((1ULL << (8 * size)) - 1); }

uint64_t encodeNarrowFloat(const DtypeInfo& dt, double v) {
  const int e = dt.expBits;
  const int m = dt.manBits;
  const int bias = (1 << (e - 1)) - 1;
  const uint64_t sign = std::signbit(v) ? (1ULL << (e + m)) : 0;
  const double a = std::fabs(v);
  if (a == 0) return sign;
  int exp2 = 0;
  std::frexp(a, &exp2);  // a = f * 2^exp2, f in [0.5, 1)
  int unbiased = exp2 - 1;
  if (unbiased < 1 - bias) unbiased = 1 - bias;  // subnormal: fixed scale
  // q counts units of the last place; nearbyint rounds half to even in the default rounding mode.
  double q = std::nearbyint(std::ldexp(a, m - unbiased));
  uint64_t field;
  if (q < std::ldexp(1.0, m)) {
    field = static_cast<uint64_t>(q);  // subnormal (exponent field 0)
  } else {
    if (q >= std::ldexp(1.0, m + 1)) {
      q = std::ldexp(1.0, m);
      ++unbiased;
    }
    field = (static_cast<uint64_t>(unbiased + bias) << m) | (static_cast<uint64_t>(q) - (1ULL << m));
  }
  return sign | field;
}

double decodeNarrowFloat(const DtypeInfo& dt, uint64_t bits) {
  const int e = dt.expBits;
  const int m = dt.manBits;
  const int bias = (1 << (e - 1)) - 1;
  const bool negative = (bits >> (e + m)) & 1;
  const uint64_t expField = (bits >> m) & ((1ULL << e) - 1);
  const uint64_t man = bits & ((1ULL << m) - 1);
  double v;
  const uint64_t expMax = (1ULL << e) - 1;
  if (expField == expMax && dt.hasInf) {
    v = man == 0 ? INFINITY : NAN;
  } else if (expField == expMax && !dt.hasInf && man == (1ULL << m) - 1) {
    v = NAN;
  } else if (expField == 0) {
    v = std::ldexp(static_cast<double>(man), 1 - bias - m);
  } else {
    v = std::ldexp(static_cast<double>(man | (1ULL << m)), static_cast<int>(expField) - bias - m);
  }
  return negative ? -v : v;
}

}  // namespace

uint64_t encodeValue(const DtypeInfo& dt, double v) {
  switch (dt.kind) {
    case Kind::Signed:
      return static_cast<uint64_t>(static_cast<int64_t>(v)) & widthMask(dt.size);
    case Kind::Unsigned:
      return static_cast<uint64_t>(v) & widthMask(dt.size);
    case Kind::Float:
      break;
  }
  if (dt.type == ncclFloat32) {
    const float f = static_cast<float>(v);
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
  }
  if (dt.type == ncclFloat64) {
    uint64_t b;
    std::memcpy(&b, &v, 8);
    return b;
  }
  return encodeNarrowFloat(dt, v);
}

double decodeValue(const DtypeInfo& dt, uint64_t bits) {
  switch (dt.kind) {
    case Kind::Signed: {
      const int shift = static_cast<int>(64 - 8 * dt.size);
      return static_cast<double>(static_cast<int64_t>(bits << shift) >> shift);
    }
    case Kind::Unsigned:
      return static_cast<double>(bits);
    case Kind::Float:
      break;
  }
  if (dt.type == ncclFloat32) {
    float f;
    const uint32_t b = static_cast<uint32_t>(bits);
    std::memcpy(&f, &b, 4);
    return f;
  }
  if (dt.type == ncclFloat64) {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  return decodeNarrowFloat(dt, bits);
}

double ulpAt(const DtypeInfo& dt, double v) {
  const int bias = (1 << (dt.expBits - 1)) - 1;
  const double a = std::fabs(v);
  int exp2 = 0;
  std::frexp(a, &exp2);
  int unbiased = a == 0 ? 1 - bias : exp2 - 1;
  if (unbiased < 1 - bias) unbiased = 1 - bias;
  return std::ldexp(1.0, unbiased - dt.manBits);
}

}  // namespace cfx::itest
