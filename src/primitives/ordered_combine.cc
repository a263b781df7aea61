// SPDX-License-Identifier: Apache-2.0
// Ordered combines (primitives layer): Affine (decayed state, ZeCO's linear-attention carry) and User (a caller's
// MPI-style function). See ordered_combine.h for the operand order the verbs keep.
//
// Affine arithmetic: per group [g (D values)][S (R x C)], lower (ga, Sa) and upper (gb, Sb):
//   g' = ga * gb                       elementwise over the decays
//   S'[i][j] = gb[i] * Sa[i][j] + Sb[i][j]   (gb[0] for a scalar decay)
// in fp32, rounded once to the element type: a product then a sum, no FMA, so every platform rounds alike.
#include "primitives/ordered_combine.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/float_types.h"
#include "common/log.h"

namespace cfx::prims {

namespace {

// Element access by type, inlined into each instantiation of the loops below (memcpy keeps unaligned user pointers
// well-defined and compiles to plain loads).
struct F32Elt {
  static float load(const unsigned char* p, size_t i) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  static void store(unsigned char* p, size_t i, float v) { std::memcpy(p + 4 * i, &v, 4); }
};
struct Bf16Elt {
  static float load(const unsigned char* p, size_t i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    return fp::bf16ToFloat(h);
  }
  static void store(unsigned char* p, size_t i, float v) {
    const uint16_t h = fp::floatToBf16(v);
    std::memcpy(p + 2 * i, &h, 2);
  }
};
struct F16Elt {
  static float load(const unsigned char* p, size_t i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    return fp::halfToFloat(h);
  }
  static void store(unsigned char* p, size_t i, float v) {
    const uint16_t h = fp::floatToHalf(v);
    std::memcpy(p + 2 * i, &h, 2);
  }
};

// Forbid contraction of gb * Sa + Sb into an FMA on the host compiler too: the value is rounded after the product.
template <class T>
[[gnu::optimize("fp-contract=off")]] void scaleAdd(unsigned char* out, const unsigned char* lower,
                                                   const unsigned char* upper, size_t first, size_t n, float gb) {
  for (size_t k = first; k < first + n; ++k) {
    const float scaled = gb * T::load(lower, k);
    T::store(out, k, scaled + T::load(upper, k));
  }
}

template <class T>
void combineAffineTyped(const ReduceOp& op, unsigned char* out, const unsigned char* lower, const unsigned char* upper,
                        size_t count, size_t upperElem, const unsigned char* origin) {
  const size_t decays = op.scalarDecay ? 1 : op.rows;
  const size_t group = op.groupElems();
  // Runs that share one rule: the decays of a group, or one state row (the whole state for a scalar decay).
  for (size_t i = 0; i < count;) {
    const size_t e = upperElem + i;
    const size_t g = e / group;
    const size_t pos = e % group;
    if (pos < decays) {
      const size_t n = std::min(decays - pos, count - i);
      for (size_t k = i; k < i + n; ++k) T::store(out, k, T::load(lower, k) * T::load(upper, k));
      i += n;
      continue;
    }
    const size_t inState = pos - decays;
    const size_t row = op.scalarDecay ? 0 : inState / op.cols;
    const size_t runLeft = op.scalarDecay ? group - pos : op.cols - inState % op.cols;
    const size_t n = std::min(runLeft, count - i);
    scaleAdd<T>(out, lower, upper, i, n, T::load(origin, g * group + row));
    i += n;
  }
}

void combineAffine(const ReduceOp& op, unsigned char* out, const unsigned char* lower, const unsigned char* upper,
                   size_t count, size_t upperElem, const unsigned char* origin) {
  switch (op.type) {
    case DataType::Bfloat16: return combineAffineTyped<Bf16Elt>(op, out, lower, upper, count, upperElem, origin);
    case DataType::Float16: return combineAffineTyped<F16Elt>(op, out, lower, upper, count, upperElem, origin);
    default: return combineAffineTyped<F32Elt>(op, out, lower, upper, count, upperElem, origin);
  }
}

// out = lower (+) upper through the caller's inout convention, with a copy wherever `out` is not `upper`.
void combineUser(const ReduceOp& op, unsigned char* out, const unsigned char* lower, const unsigned char* upper,
                 size_t count) {
  const size_t bytes = count * dataTypeSize(op.type);
  if (out == upper) {
    op.userFn(lower, out, count, static_cast<int>(op.type), op.userCtx);
    return;
  }
  if (out == lower) {
    // The function writes its second argument, which must start as the upper operand; the lower one would be lost.
    std::vector<unsigned char> tmp(upper, upper + bytes);
    op.userFn(lower, tmp.data(), count, static_cast<int>(op.type), op.userCtx);
    std::memcpy(out, tmp.data(), bytes);
    return;
  }
  std::memmove(out, upper, bytes);
  op.userFn(lower, out, count, static_cast<int>(op.type), op.userCtx);
}

}  // namespace

void combineOrdered(const ReduceOp& op, void* out, const void* lower, const void* upper, size_t count,
                    size_t upperElem, const void* upperOrigin) {
  auto* o = static_cast<unsigned char*>(out);
  const auto* lo = static_cast<const unsigned char*>(lower);
  const auto* up = static_cast<const unsigned char*>(upper);
  if (op.combine == ReduceOp::Combine::Affine) {
    combineAffine(op, o, lo, up, count, upperElem, static_cast<const unsigned char*>(upperOrigin));
  } else {
    combineUser(op, o, lo, up, count);
  }
}

Status combineOrderedLowerInMemory(const ReduceOp& op, void* out, const void* lowerLocal, const void* upperSlot,
                                   size_t count) {
  if (op.combine != ReduceOp::Combine::User) {
    return Status::error(Errc::InternalError,
                         "an affine combine needs the upper operand's decays in memory, but the algorithm passed the "
                         "upper operand in the slot");
  }
  combineUser(op, static_cast<unsigned char*>(out), static_cast<const unsigned char*>(lowerLocal),
              static_cast<const unsigned char*>(upperSlot), count);
  return Status();
}

Status writeIdentity(const ReduceOp& op, void* out, size_t count) {
  if (op.combine != ReduceOp::Combine::Affine) {
    return Status::error(Errc::InvalidUsage, "this combine has no identity");
  }
  auto* o = static_cast<unsigned char*>(out);
  const size_t decays = op.scalarDecay ? 1 : op.rows;
  const size_t group = op.groupElems();
  for (size_t i = 0; i < count; ++i) {
    const float v = i % group < decays ? 1.0f : 0.0f;
    if (op.type == DataType::Float32) F32Elt::store(o, i, v);
    else if (op.type == DataType::Bfloat16) Bf16Elt::store(o, i, v);
    else F16Elt::store(o, i, v);
  }
  return Status();
}

}  // namespace cfx::prims
