// SPDX-License-Identifier: Apache-2.0
// The arithmetic of RowFold (primitives layer): a row piece times a weight, folded into fp32 sums and rounded once into
// the output row. Compiled twice, portable and AVX2, picked at run time like the reduction kernels (reduce.cc); both
// give the same bits, since every value is one fp32 multiply and one fp32 add in the same order (no fused multiply-add:
// neither variant's target enables FMA).
#include <cstring>

#include "common/float_types.h"
#include "primitives/prims.h"
#include "primitives/reduce.h"

namespace cfx::prims {
namespace {

using Step = RowFold::Step;

template <class S>
S loadAt(const char* p, size_t i) {
  S v;
  std::memcpy(&v, p + i * sizeof(S), sizeof(S));
  return v;
}

template <class S>
void storeAt(char* p, size_t i, S v) {
  std::memcpy(p + i * sizeof(S), &v, sizeof(S));
}

// The three value types, each with its storage and conversions.
struct F32 {
  using S = float;
  static float widen(float v) { return v; }
  static float narrow(float v) { return v; }
};
struct Bf16 {
  using S = uint16_t;
  static float widen(uint16_t v) { return fp::bf16ToFloat(v); }
  static uint16_t narrow(float v) { return fp::floatToBf16(v); }
};
struct Half {
  using S = uint16_t;
  static float widen(uint16_t v) { return fp::halfToFloat(v); }
  static uint16_t narrow(float v) { return fp::floatToHalf(v); }
};

// One loop per step, so each one vectorises without a branch per element.
template <class T>
[[gnu::always_inline]] inline void foldTyped(const char* in, size_t n, float w, Step step, float* acc, char* out) {
  using S = typename T::S;
  switch (step) {
    case Step::First:
      for (size_t i = 0; i < n; ++i) acc[i] = w * T::widen(loadAt<S>(in, i));
      break;
    case Step::Middle:
      for (size_t i = 0; i < n; ++i) acc[i] = acc[i] + w * T::widen(loadAt<S>(in, i));
      break;
    case Step::Last:
      for (size_t i = 0; i < n; ++i) storeAt<S>(out, i, T::narrow(acc[i] + w * T::widen(loadAt<S>(in, i))));
      break;
    case Step::Only:
      for (size_t i = 0; i < n; ++i) storeAt<S>(out, i, T::narrow(w * T::widen(loadAt<S>(in, i))));
      break;
  }
}

using FoldFn = void (*)(const char*, size_t, float, Step, float*, char*);

template <class T>
void foldPortable(const char* in, size_t n, float w, Step step, float* acc, char* out) {
  foldTyped<T>(in, n, w, step, acc, out);
}

#if defined(__x86_64__)
template <class T>
[[gnu::target("avx2,f16c")]] void foldAvx2(const char* in, size_t n, float w, Step step, float* acc, char* out) {
  foldTyped<T>(in, n, w, step, acc, out);
}
#endif

FoldFn pick(DataType type) {
  const bool avx2 = activeReduceIsa() == ReduceIsa::Avx2;
  (void)avx2;
  switch (type) {
#if defined(__x86_64__)
    case DataType::Bfloat16: return avx2 ? foldAvx2<Bf16> : foldPortable<Bf16>;
    case DataType::Float16: return avx2 ? foldAvx2<Half> : foldPortable<Half>;
    default: return avx2 ? foldAvx2<F32> : foldPortable<F32>;
#else
    case DataType::Bfloat16: return foldPortable<Bf16>;
    case DataType::Float16: return foldPortable<Half>;
    default: return foldPortable<F32>;
#endif
  }
}

}  // namespace

void RowFold::foldPiece(size_t i, size_t first, size_t n, const char* in) const {
  const auto token = static_cast<size_t>(tokens[i]);
  const float w = weights != nullptr ? weights[i] : 1.0f;
  float* a = acc != nullptr ? acc + static_cast<size_t>(tokens[i] - accFirstToken) * accStride + first : nullptr;
  char* o = out + token * outStride + first * dataTypeSize(valueType);
  pick(valueType)(in, n, w, steps[i], a, o);
}

}  // namespace cfx::prims
