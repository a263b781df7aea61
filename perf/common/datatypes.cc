// SPDX-License-Identifier: Apache-2.0
// perf harness: datatype tables and the small-float codecs. The codecs are generic over (exponent bits,
// mantissa bits) with IEEE-style subnormals; NaN and infinity never occur in generated data, so values past
// the largest finite number saturate instead of encoding infinity.
#include "datatypes.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "options.h"

namespace cfx::perf {
namespace {

const TypeInfo kTypes[kNumTypes] = {
    {ncclInt8, "int8", 1, false, true},        {ncclUint8, "uint8", 1, false, false},
    {ncclInt32, "int32", 4, false, true},      {ncclUint32, "uint32", 4, false, false},
    {ncclInt64, "int64", 8, false, true},      {ncclUint64, "uint64", 8, false, false},
    {ncclFloat16, "half", 2, true, true},      {ncclFloat32, "float", 4, true, true},
    {ncclFloat64, "double", 8, true, true},    {ncclBfloat16, "bfloat16", 2, true, true},
    {ncclFloat8e4m3, "f8e4m3", 1, true, true}, {ncclFloat8e5m2, "f8e5m2", 1, true, true},
};

const char* const kOpNames[kNumTestOps + 1] = {"sum", "prod", "max", "min", "avg", "mulsum", "affine"};

struct SmallFloat {
  int expBits;
  int manBits;
  uint32_t maxFinite;  // bit pattern of the largest finite positive value
};

constexpr SmallFloat kHalf{5, 10, 0x7bff};
constexpr SmallFloat kBf16{8, 7, 0x7f7f};
constexpr SmallFloat kE4m3{4, 3, 0x7e};  // e4m3fn: no infinity, 0x7f is NaN, max 448
constexpr SmallFloat kE5m2{5, 2, 0x7b};

uint32_t encodeSmall(const SmallFloat& f, double x) {
  uint32_t sign = (x < 0) ? 1u : 0u;
  uint32_t signBit = sign << (f.expBits + f.manBits);
  double a = std::fabs(x);
  if (a == 0) return signBit;
  const int bias = (1 << (f.expBits - 1)) - 1;
  const int minNormalExp = 1 - bias;
  int e2 = 0;
  double frac = std::frexp(a, &e2);  // a = frac * 2^e2, frac in [0.5, 1)
  int e = e2 - 1;                    // a = (2*frac) * 2^e
  uint32_t bits;
  if (e < minNormalExp) {
    // Subnormal: count units of 2^(minNormalExp - manBits); a carry into the exponent field is still right.
    double q = std::nearbyint(std::ldexp(a, f.manBits - minNormalExp));
    bits = static_cast<uint32_t>(q);
  } else {
    double q = std::nearbyint((2 * frac - 1) * std::ldexp(1.0, f.manBits));
    if (q >= std::ldexp(1.0, f.manBits)) {
      q = 0;
      e += 1;
    }
    bits = (static_cast<uint32_t>(e + bias) << f.manBits) | static_cast<uint32_t>(q);
  }
  if (bits > f.maxFinite) bits = f.maxFinite;
  return signBit | bits;
}

double decodeSmall(const SmallFloat& f, uint32_t bits) {
  const int bias = (1 << (f.expBits - 1)) - 1;
  uint32_t man = bits & ((1u << f.manBits) - 1);
  uint32_t expField = (bits >> f.manBits) & ((1u << f.expBits) - 1);
  bool negative = (bits >> (f.expBits + f.manBits)) & 1u;
  double v = (expField == 0) ? std::ldexp(static_cast<double>(man), 1 - bias - f.manBits)
                             : std::ldexp(1.0 + std::ldexp(static_cast<double>(man), -f.manBits),
                                          static_cast<int>(expField) - bias);
  return negative ? -v : v;
}

template <typename T>
void storeAs(T v, void* dst) {
  memcpy(dst, &v, sizeof(T));
}

template <typename T>
T loadAs(const void* src) {
  T v;
  memcpy(&v, src, sizeof(T));
  return v;
}

}  // namespace

const TypeInfo& typeInfo(ncclDataType_t type) { return kTypes[static_cast<int>(type)]; }

const char* opName(int opIndex) { return kOpNames[opIndex]; }

int parseTypeName(const char* name) {
  for (const TypeInfo& t : kTypes) {
    if (strcmp(name, t.name) == 0) return static_cast<int>(t.type);
  }
  if (strcmp(name, "all") == 0) return kAll;
  return kUnknownName;
}

int parseOpName(const char* name) {
  for (int i = 0; i <= kAffine; ++i) {
    if (strcmp(name, kOpNames[i]) == 0) return i;
  }
  if (strcmp(name, "all") == 0) return kAll;
  return kUnknownName;
}

void storeElement(ncclDataType_t type, double value, void* dst) {
  switch (type) {
    case ncclInt8:
      storeAs<int8_t>(static_cast<int8_t>(value), dst);
      break;
    case ncclUint8:
      storeAs<uint8_t>(static_cast<uint8_t>(value), dst);
      break;
    case ncclInt32:
      storeAs<int32_t>(static_cast<int32_t>(value), dst);
      break;
    case ncclUint32:
      storeAs<uint32_t>(static_cast<uint32_t>(value), dst);
      break;
    case ncclInt64:
      storeAs<int64_t>(static_cast<int64_t>(value), dst);
      break;
    case ncclUint64:
      storeAs<uint64_t>(static_cast<uint64_t>(value), dst);
      break;
    case ncclFloat16:
      storeAs<uint16_t>(static_cast<uint16_t>(encodeSmall(kHalf, value)), dst);
      break;
    case ncclFloat32:
      storeAs<float>(static_cast<float>(value), dst);
      break;
    case ncclFloat64:
      storeAs<double>(value, dst);
      break;
    case ncclBfloat16:
      storeAs<uint16_t>(static_cast<uint16_t>(encodeSmall(kBf16, value)), dst);
      break;
    case ncclFloat8e4m3:
      storeAs<uint8_t>(static_cast<uint8_t>(encodeSmall(kE4m3, value)), dst);
      break;
    case ncclFloat8e5m2:
      storeAs<uint8_t>(static_cast<uint8_t>(encodeSmall(kE5m2, value)), dst);
      break;
    default:
      break;
  }
}

double loadElement(ncclDataType_t type, const void* src) {
  switch (type) {
    case ncclInt8:
      return loadAs<int8_t>(src);
    case ncclUint8:
      return loadAs<uint8_t>(src);
    case ncclInt32:
      return loadAs<int32_t>(src);
    case ncclUint32:
      return loadAs<uint32_t>(src);
    case ncclInt64:
      return static_cast<double>(loadAs<int64_t>(src));
    case ncclUint64:
      return static_cast<double>(loadAs<uint64_t>(src));
    case ncclFloat16:
      return decodeSmall(kHalf, loadAs<uint16_t>(src));
    case ncclFloat32:
      return loadAs<float>(src);
    case ncclFloat64:
      return loadAs<double>(src);
    case ncclBfloat16:
      return decodeSmall(kBf16, loadAs<uint16_t>(src));
    case ncclFloat8e4m3:
      return decodeSmall(kE4m3, loadAs<uint8_t>(src));
    case ncclFloat8e5m2:
      return decodeSmall(kE5m2, loadAs<uint8_t>(src));
    default:
      return 0;
  }
}

uint64_t elementBits(ncclDataType_t type, const void* src) {
  switch (typeInfo(type).size) {
    case 1:
      return loadAs<uint8_t>(src);
    case 2:
      return loadAs<uint16_t>(src);
    case 4:
      return loadAs<uint32_t>(src);
    default:
      return loadAs<uint64_t>(src);
  }
}

}  // namespace cfx::perf
