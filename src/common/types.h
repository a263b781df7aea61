// SPDX-License-Identifier: Apache-2.0
// Element types and reduction operators as Conflux sees them internally (common layer).
// Values match ncclDataType_t / ncclRedOp_t so the api layer converts with a cast (checked there).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cfx {

enum class DataType : uint8_t {
  Int8 = 0,
  Uint8 = 1,
  Int32 = 2,
  Uint32 = 3,
  Int64 = 4,
  Uint64 = 5,
  Float16 = 6,
  Float32 = 7,
  Float64 = 8,
  Bfloat16 = 9,
  Fp8E4M3 = 10,
  Fp8E5M2 = 11,
};
inline constexpr int kNumDataTypes = 12;

constexpr size_t dataTypeSize(DataType t) {
  switch (t) {
    case DataType::Int8:
    case DataType::Uint8:
    case DataType::Fp8E4M3:
    case DataType::Fp8E5M2: return 1;
    case DataType::Float16:
    case DataType::Bfloat16: return 2;
    case DataType::Int32:
    case DataType::Uint32:
    case DataType::Float32: return 4;
    case DataType::Int64:
    case DataType::Uint64:
    case DataType::Float64: return 8;
  }
  return 0;
}

constexpr bool isFloating(DataType t) {
  return t == DataType::Float16 || t == DataType::Float32 || t == DataType::Float64 || t == DataType::Bfloat16 ||
         t == DataType::Fp8E4M3 || t == DataType::Fp8E5M2;
}

// nccl-tests' names: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2.
const char* dataTypeName(DataType t);

// The user-visible operator (ncclRedOp_t values for the built-ins).
enum class RedOpKind : uint8_t { Sum = 0, Prod = 1, Max = 2, Min = 3, Avg = 4, PreMulSum = 5 };

const char* redOpName(RedOpKind k);  // sum prod max min avg mulsum

// A reduction ready to execute: what every rank applies to its own input before combining (pre), how two
// partial results combine (combine), and what the rank that finishes a reduction applies last (post).
// Avg is lowered here: floating types pre-multiply by 1/nRanks in the element type and sum (NCCL's
// ncclDevPreMulSum), integer types sum and divide by nRanks at the end, truncating (ncclDevSumPostDiv).
//
// Ordered combines (All-Scan): Affine and User are associative but not commutative, and work on groups of elements
// rather than single ones. a (+) b then means "a, the lower ranks' value, followed by b", and every algorithm keeps
// that order (primitives/ordered_combine.h says how the verbs do).
//   Affine: one group is a decay part of D values followed by an R x C state, D = R (one decay per state row) or
//           D = 1 (scalarDecay); (ga, Sa) (+) (gb, Sb) = (ga * gb, gb * Sa + Sb), row i of Sa scaled by gb[i] (or gb).
//           fp32, bf16 or fp16 values, computed in fp32 and rounded once. Identity: g = 1, S = 0.
//   User:    inout = in (+) inout by a caller's function over units of unitElems elements (MPI_Op's convention:
//           `in` is the lower ranks' operand); host memory only.
using UserCombineFn = void (*)(const void* in, void* inout, size_t count, int datatype, void* ctx);

struct ReduceOp {
  enum class Combine : uint8_t { Sum, Prod, Max, Min, Affine, User };
  DataType type = DataType::Float32;
  Combine combine = Combine::Sum;
  bool preMultiply = false;  // local input *= scalar before it is combined
  bool postDivide = false;   // final result /= divisor (integer avg)
  uint64_t divisor = 1;
  alignas(8) unsigned char scalar[8] = {};  // the pre-multiplier, stored as one element of `type`
  // Affine: R, C and D (decays per group: R, or 1 with scalarDecay).
  uint32_t rows = 0;
  uint32_t cols = 0;
  bool scalarDecay = false;
  // User: the function, its context, and the elements of one unit it combines as a whole.
  UserCombineFn userFn = nullptr;
  void* userCtx = nullptr;
  uint32_t unitElems = 1;

  // Builds the executable form of a built-in op for nRanks ranks.
  static ReduceOp builtin(DataType type, RedOpKind kind, int nRanks);
  // A PreMulSum with a scalar given as one element of `type` (host-immediate residence).
  static ReduceOp preMulSum(DataType type, const void* scalarElement);
  bool identityPre() const { return !preMultiply; }
  // Affine or User: the order of operands matters and elements combine in groups.
  bool ordered() const { return combine == Combine::Affine || combine == Combine::User; }
  // Affine: elements of one group (D + R * C).
  size_t groupElems() const { return (scalarDecay ? 1 : static_cast<size_t>(rows)) + static_cast<size_t>(rows) * cols; }
  // The elements that must travel together in one slice: a User op's unit; 1 for every other op.
  size_t sliceUnitElems() const { return combine == Combine::User ? unitElems : 1; }
};

}  // namespace cfx
