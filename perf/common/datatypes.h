// SPDX-License-Identifier: Apache-2.0
// perf harness: the 12 NCCL datatypes and 6 test ops by name, and exact conversions between double and each
// element format (half, bfloat16 and both fp8 formats included) so that data can be built on the host.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

namespace cfx::perf {

struct TypeInfo {
  ncclDataType_t type;
  const char* name;  // nccl-tests' spelling: int8 ... f8e5m2
  size_t size;       // bytes per element
  bool isFloat;
  bool isSigned;  // integers only; floating types are always signed
};

inline constexpr int kNumTypes = 12;

const TypeInfo& typeInfo(ncclDataType_t type);
// The nccl-tests op names: sum prod max min avg mulsum.
const char* opName(int opIndex);

// Table index of a -d/-o argument, kAll for "all", kUnknownName for anything else (nccl-tests falls back to
// float / sum there; options.cc refuses it instead, so a typo cannot benchmark something else).
inline constexpr int kUnknownName = -2;
int parseTypeName(const char* name);
int parseOpName(const char* name);

// Writes value (rounded to nearest even, as a cast in the library would) as one element of type at dst.
// Integer types take the value truncated toward zero, which is exact for the integers the harness uses.
void storeElement(ncclDataType_t type, double value, void* dst);
// Reads one element of type at src as a double (exact for every format here except 64-bit integers > 2^53).
double loadElement(ncclDataType_t type, const void* src);
// The raw bits of one element, zero-extended.
uint64_t elementBits(ncclDataType_t type, const void* src);

}  // namespace cfx::perf
