// SPDX-License-Identifier: Apache-2.0
// Names and lowering of datatypes and reduction operators (common layer).
#include "common/types.h"

#include "common/float_types.h"

namespace cfx {

const char* dataTypeName(DataType t) {
  static const char* const kNames[] = {"int8",   "uint8", "int32",  "uint32",   "int64",  "uint64",
                                       "half",   "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  const auto i = static_cast<unsigned>(t);
  return i < kNumDataTypes ? kNames[i] : "unknown";
}

const char* redOpName(RedOpKind k) {
  switch (k) {
    case RedOpKind::Sum: return "sum";
    case RedOpKind::Prod: return "prod";
    case RedOpKind::Max: return "max";
    case RedOpKind::Min: return "min";
    case RedOpKind::Avg: return "avg";
    case RedOpKind::PreMulSum: return "mulsum";
  }
  return "unknown";
}

// Stores `value` as one element of `type`, rounding to nearest even for the narrow floating types.
static void storeScalar(DataType type, double value, unsigned char* out) {
  switch (type) {
    case DataType::Float16: {
      const uint16_t h = fp::floatToHalf(static_cast<float>(value));
      std::memcpy(out, &h, 2);
      break;
    }
    case DataType::Bfloat16: {
      const uint16_t b = fp::floatToBf16(static_cast<float>(value));
      std::memcpy(out, &b, 2);
      break;
    }
    case DataType::Fp8E4M3: out[0] = fp::floatToE4M3(static_cast<float>(value)); break;
    case DataType::Fp8E5M2: out[0] = fp::floatToE5M2(static_cast<float>(value)); break;
    case DataType::Float32: {
      const float f = static_cast<float>(value);
      std::memcpy(out, &f, 4);
      break;
    }
    case DataType::Float64: std::memcpy(out, &value, 8); break;
    default: break;  // integers never pre-multiply by a fraction
  }
}

ReduceOp ReduceOp::builtin(DataType type, RedOpKind kind, int nRanks) {
  ReduceOp op;
  op.type = type;
  switch (kind) {
    case RedOpKind::Sum: op.combine = Combine::Sum; break;
    case RedOpKind::Prod: op.combine = Combine::Prod; break;
    case RedOpKind::Max: op.combine = Combine::Max; break;
    case RedOpKind::Min: op.combine = Combine::Min; break;
    case RedOpKind::Avg:
      op.combine = Combine::Sum;
      if (isFloating(type)) {
        op.preMultiply = nRanks > 1;
        storeScalar(type, 1.0 / nRanks, op.scalar);
      } else {
        op.postDivide = nRanks > 1;
        op.divisor = static_cast<uint64_t>(nRanks);
      }
      break;
    case RedOpKind::PreMulSum: op.combine = Combine::Sum; break;
  }
  return op;
}

ReduceOp ReduceOp::preMulSum(DataType type, const void* scalarElement) {
  ReduceOp op;
  op.type = type;
  op.combine = Combine::Sum;
  op.preMultiply = true;
  std::memcpy(op.scalar, scalarElement, dataTypeSize(type));
  return op;
}

}  // namespace cfx
