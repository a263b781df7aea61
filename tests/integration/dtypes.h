// SPDX-License-Identifier: Apache-2.0
// Element codecs for the 12 NCCL datatypes, written independently of the library so tests can build inputs
// and expected results as raw bits (fp16, bf16, fp8 e4m3/e5m2 included).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace cfx::itest {

enum class Kind { Signed, Unsigned, Float };

struct DtypeInfo {
  ncclDataType_t type;
  const char* name;
  size_t size;  // bytes per element
  Kind kind;
  int expBits = 0;  // floats only
  int manBits = 0;  // explicit mantissa bits, floats only
  bool hasInf = true;  // e4m3 (the "fn" variant) has no infinity
};

const std::vector<DtypeInfo>& allDtypes();
const DtypeInfo& dtypeInfo(ncclDataType_t type);

// Bits of value v in the element type. Integers wrap to the element width; floats round to nearest even
// (tests only pass values that are exactly representable, or expected averages).
uint64_t encodeValue(const DtypeInfo& dt, double v);
// The value an element's bits stand for (integers sign- or zero-extended).
double decodeValue(const DtypeInfo& dt, uint64_t bits);
// Distance between v and the next representable value away from zero (floats only).
double ulpAt(const DtypeInfo& dt, double v);

// One fixed-size copy per element width: the compiler turns each into a single load or store. A memcpy of a
// variable size stays a call, which the sanitizers intercept and check byte range by byte range: the verification
// loops of the sweeps spent most of their time under TSan there.
template <size_t N>
inline uint64_t loadFixed(const char* p) {
  uint64_t bits = 0;
  std::memcpy(&bits, p, N);  // little endian
  return bits;
}
inline uint64_t loadBits(const void* base, size_t index, size_t eltSize) {
  const char* p = static_cast<const char*>(base) + index * eltSize;
  switch (eltSize) {
    case 1: return loadFixed<1>(p);
    case 2: return loadFixed<2>(p);
    case 4: return loadFixed<4>(p);
    case 8: return loadFixed<8>(p);
  }
  uint64_t bits = 0;
  std::memcpy(&bits, p, eltSize < 8 ? eltSize : 8);
  return bits;
}
template <size_t N>
inline void storeFixed(char* p, uint64_t bits) {
  std::memcpy(p, &bits, N);
}
inline void storeBits(void* base, size_t index, size_t eltSize, uint64_t bits) {
  char* p = static_cast<char*>(base) + index * eltSize;
  switch (eltSize) {
    case 1: return storeFixed<1>(p, bits);
    case 2: return storeFixed<2>(p, bits);
    case 4: return storeFixed<4>(p, bits);
    case 8: return storeFixed<8>(p, bits);
  }
  std::memcpy(p, &bits, eltSize < 8 ? eltSize : 8);
}

}  // namespace cfx::itest
