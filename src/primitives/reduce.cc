// SPDX-License-Identifier: Apache-2.0
// Reduction kernels on host memory (primitives layer): one templated loop per (type, combine), chosen once per call.
//
// What NCCL 2.28 computes, and so what we compute (src/device/reduce_kernel.h; src/enqueue.cc, hostToDevRedOp):
//  * Integers: sum and product wrap (we compute them unsigned to avoid UB). Min/max compare as the signed or
//    unsigned type (NCCL's xormask trick is exactly that comparison).
//  * float, double: IEEE add and multiply, never contracted to FMA. Min/max are fminf/fmaxf: a NaN operand is
//    ignored (both NaN -> NaN). Like __hmax we order -0 below +0, so the bits never depend on operand order.
//  * half, bfloat16 (the sm_80+ path: __hadd2, __hmul2, __hmax2 on the type): the exact result rounded once to the
//    type. We compute in float and round; rounding twice is harmless because float keeps more than 2p+2 bits
//    (p = 11 for half, 8 for bf16), and the sum or product of two halves is exact in float anyway. A NaN result is
//    the canonical 0x7FFF, as on the GPU. Min/max follow __hmax/__hmin: NaN ignored, +0 > -0.
//  * FP8 (NCCL reduces FP8 only on sm_90+): each operand widens to half, __hadd2/__hmul2/__hmax2 work in half, and
//    __nv_fp8_e4m3(__half) converts back with SATFINITE: finite overflow and E5M2 infinities become +-max finite,
//    and any NaN becomes 0x7F. The result is rounded twice (to half, then FP8), but for one sum or product of two
//    FP8 values (PreMulSum's scalar is an FP8 value too) the rounding to half never changes the final bits; the
//    unit test checks that over every pair. So we round once, from float, which is several times faster.
//  * PreMulSum: x * scalar in the element type, rounded once to the type (__hmul for half/bf16; FP8 as above).
//    Float Avg is PreMulSum by 1/nRanks stored as one element (ReduceOp::builtin does that, as hostToDevRedOp).
//  * SumPostDiv (integer Avg): the sum wraps, then the final value is divided by nRanks, truncating toward zero:
//    NCCL divides |x| and restores the sign, which for signed types is C++'s '/'.
//
// Speed: for the native types the combine is a plain loop over memcpy loads that GCC and Clang vectorise (memcpy
// keeps unaligned user pointers well-defined); pre and post run blockwise over a block that stays in L1 so memory
// traffic does not grow. Narrow float types are widened to float a block at a time (F16C where available), combined
// in float, and narrowed back. Everything is compiled twice, portable and AVX2+F16C, and picked at run time.
#include "primitives/reduce.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cassert>
#include <cstring>
#include <type_traits>

#include "common/float_types.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace cfx::prims {
namespace {

using Combine = ReduceOp::Combine;

// ---- element types ----

// Tags for the narrow floating types; their values are widened to float for arithmetic.
struct Half {
  using Storage = uint16_t;
  static float widen(Storage v) { return fp::halfToFloat(v); }
};
struct Bf16 {
  using Storage = uint16_t;
  static float widen(Storage v) { return fp::bf16ToFloat(v); }
};
struct E4M3 {
  using Storage = uint8_t;
  static float widen(Storage v) { return fp::e4m3ToFloat(v); }
};
struct E5M2 {
  using Storage = uint8_t;
  static float widen(Storage v) { return fp::e5m2ToFloat(v); }
};

template <class T>
inline constexpr bool kIsNarrow =
    std::is_same_v<T, Half> || std::is_same_v<T, Bf16> || std::is_same_v<T, E4M3> || std::is_same_v<T, E5M2>;

template <class T>
[[gnu::always_inline]] inline T loadAt(const unsigned char* p, size_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
[[gnu::always_inline]] inline void storeAt(unsigned char* p, size_t i, T v) {
  std::memcpy(p + i * sizeof(T), &v, sizeof(T));
}

// ---- combine operators, on the native type or on float for the narrow types ----

template <class F>
using BitsOf = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;

struct OpSum {
  template <class T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else {
      return a + b;
    }
  }
};

struct OpProd {
  template <class T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;  // uint8 promotes to int, where 255 * 255 cannot overflow
      return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    } else {
      return a * b;
    }
  }
};

// fmaxf with a total order on zeros: equal operands are +-0 or identical bits, so AND picks +0 (OR, for min, -0).
struct OpMax {
  template <class T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? b : a;
    } else {
      T r = a > b ? a : b;  // b when equal or unordered
      if (a == b) r = std::bit_cast<T>(std::bit_cast<BitsOf<T>>(a) & std::bit_cast<BitsOf<T>>(b));
      if (b != b) r = a;  // a NaN operand loses; both NaN gives a NaN
      return r;
    }
  }
};

struct OpMin {
  template <class T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return b < a ? b : a;
    } else {
      T r = a < b ? a : b;
      if (a == b) r = std::bit_cast<T>(std::bit_cast<BitsOf<T>>(a) | std::bit_cast<BitsOf<T>>(b));
      if (b != b) r = a;
      return r;
    }
  }
};

// Integer division by the rank count, truncating toward zero (ncclDevSumPostDiv). Types up to 32 bits divide by
// multiplying with a reciprocal plus one correction, which vectorises; 64-bit types use the divide instruction.
template <class T>
struct Divider {
  using U = std::make_unsigned_t<T>;
  uint64_t divisor = 1;
  uint32_t divisor32 = 1;
  uint32_t reciprocal = 0;
  bool quotientIsZero = false;  // divisor exceeds every |x|

  explicit Divider(uint64_t d) : divisor(d == 0 ? 1 : d) {
    assert(d != 0);
    if constexpr (sizeof(T) <= 4) {
      quotientIsZero = divisor > 0xFFFFFFFFull;
      divisor32 = quotientIsZero ? 1u : static_cast<uint32_t>(divisor);
      reciprocal = 0xFFFFFFFFu / divisor32;
    }
  }

  [[gnu::always_inline]] T apply(T x) const {
    const bool negative = std::is_signed_v<T> && x < 0;
    const U magnitude = negative ? static_cast<U>(U(0) - static_cast<U>(x)) : static_cast<U>(x);
    U quotient;
    if constexpr (sizeof(T) <= 4) {
      // floor(m * floor((2^32-1)/d) / 2^32) is floor(m/d) or one less.
      const uint32_t m = magnitude;
      uint32_t q = static_cast<uint32_t>((static_cast<uint64_t>(m) * reciprocal) >> 32);
      if (m - q * divisor32 >= divisor32) ++q;
      quotient = static_cast<U>(q);
    } else {
      quotient = static_cast<U>(magnitude / divisor);
    }
    return negative ? static_cast<T>(static_cast<U>(U(0) - quotient)) : static_cast<T>(quotient);
  }
};

// Floating types have no post-division; this stands in for Divider so the loops below need no special case.
struct NoDivider {
  explicit NoDivider(uint64_t) {}
};

template <class T>
using DividerFor = std::conditional_t<std::is_integral_v<T>, Divider<T>, NoDivider>;

// ---- one call, decoded ----

struct Call {
  unsigned char* out;
  const unsigned char* a;  // the partial (reduceLocal), first partial (combinePartials) or the input (prepareLocal)
  const unsigned char* b;  // the local input (reduceLocal), second partial, or null (prepareLocal)
  const unsigned char* scalar;
  size_t count;
  uint64_t divisor;
  Combine combine;
  bool twoInputs;
  bool pre;   // pre-multiply b (or a, with one input)
  bool post;  // divide the result
};

// Bytes of scratch a blocked loop keeps in L1 per input.
constexpr size_t kBlockBytes = 4096;

// ---- native types ----

template <class T, class Op>
[[gnu::always_inline]] inline void combineLoop(unsigned char* out, const unsigned char* a, const unsigned char* b,
                                               size_t n) {
  for (size_t i = 0; i < n; ++i) storeAt<T>(out, i, Op::apply(loadAt<T>(a, i), loadAt<T>(b, i)));
}

template <class T>
[[gnu::always_inline]] inline void premulLoop(unsigned char* out, const unsigned char* in, size_t n, T scalar) {
  for (size_t i = 0; i < n; ++i) storeAt<T>(out, i, OpProd::apply(loadAt<T>(in, i), scalar));
}

template <class T>
[[gnu::always_inline]] inline void postLoop(unsigned char* out, size_t n, const Divider<T>& divider) {
  if (divider.quotientIsZero) {
    std::memset(out, 0, n * sizeof(T));
    return;
  }
  for (size_t i = 0; i < n; ++i) storeAt<T>(out, i, divider.apply(loadAt<T>(out, i)));
}

template <class T, class Op>
[[gnu::always_inline]] inline void twoNative(const Call& c) {
  constexpr bool kHasPost = std::is_integral_v<T>;  // post-division exists only for integer average
  const bool post = kHasPost && c.post;
  if (!c.pre && !post) {
    combineLoop<T, Op>(c.out, c.a, c.b, c.count);
    return;
  }
  const T scalar = loadAt<T>(c.scalar, 0);
  const DividerFor<T> divider(post ? c.divisor : 1);
  constexpr size_t kBlock = kBlockBytes / sizeof(T);
  alignas(64) unsigned char scaled[kBlockBytes];
  for (size_t first = 0; first < c.count; first += kBlock) {
    const size_t n = std::min(kBlock, c.count - first);
    unsigned char* out = c.out + first * sizeof(T);
    const unsigned char* b = c.b + first * sizeof(T);
    if (c.pre) {
      premulLoop<T>(scaled, b, n, scalar);
      b = scaled;
    }
    combineLoop<T, Op>(out, c.a + first * sizeof(T), b, n);
    if constexpr (kHasPost) {
      if (post) postLoop<T>(out, n, divider);
    }
  }
}

template <class T>
[[gnu::always_inline]] inline void oneNative(const Call& c) {
  constexpr bool kHasPost = std::is_integral_v<T>;
  const bool post = kHasPost && c.post;
  const T scalar = loadAt<T>(c.scalar, 0);
  if (!post) {
    if (c.pre) {
      premulLoop<T>(c.out, c.a, c.count, scalar);
    } else if (c.out != c.a) {
      std::memcpy(c.out, c.a, c.count * sizeof(T));
    }
    return;
  }
  if constexpr (kHasPost) {
    const Divider<T> divider(c.divisor);
    constexpr size_t kBlock = kBlockBytes / sizeof(T);
    for (size_t first = 0; first < c.count; first += kBlock) {
      const size_t n = std::min(kBlock, c.count - first);
      unsigned char* out = c.out + first * sizeof(T);
      const unsigned char* in = c.a + first * sizeof(T);
      if (c.pre) {
        premulLoop<T>(out, in, n, scalar);
      } else if (out != in) {
        std::memcpy(out, in, n * sizeof(T));
      }
      postLoop<T>(out, n, divider);
    }
  }
}

// ---- narrow floating types: widen a block to float, work there, narrow back ----

// Elements per block: two float blocks plus one narrow scratch block stay well inside L1.
constexpr size_t kNarrowBlock = 512;

struct PortableIsa {};
struct Avx2Isa {};

// Portable codecs: per element, through the scalar conversions.
template <class N>
void widenPortable(const unsigned char* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = N::widen(loadAt<typename N::Storage>(src, i));
}

template <class N>
void narrowPortable(const float* src, unsigned char* dst, size_t n) {
  using S = typename N::Storage;
  for (size_t i = 0; i < n; ++i) {
    S v;
    if constexpr (std::is_same_v<N, Half>) v = fp::floatToHalf(src[i]);
    if constexpr (std::is_same_v<N, Bf16>) v = fp::floatToBf16(src[i]);
    if constexpr (std::is_same_v<N, E4M3>) v = fp::floatToE4M3(src[i]);
    if constexpr (std::is_same_v<N, E5M2>) v = fp::floatToE5M2(src[i]);
    storeAt<S>(dst, i, v);
  }
}

#if defined(__x86_64__)
// AVX2 + F16C codecs. They are out-of-line calls (one per block) because they carry the target attribute.

// Rounds 8 floats to half (RNE), with any NaN made the canonical 0x7FFF first as floatToHalf does.
[[gnu::target("avx2,f16c"), gnu::always_inline]] inline __m128i roundToHalf8(__m256 v) {
  const __m256 isNan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  v = _mm256_blendv_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF)), isNan);
  return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

[[gnu::target("avx2,f16c"), gnu::noinline]] void widenHalfF16c(const unsigned char* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = fp::halfToFloat(loadAt<uint16_t>(src, i));
}

[[gnu::target("avx2,f16c"), gnu::noinline]] void narrowHalfF16c(const float* src, unsigned char* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), roundToHalf8(_mm256_loadu_ps(src + i)));
  }
  for (; i < n; ++i) storeAt<uint16_t>(dst, i, fp::floatToHalf(src[i]));
}

// bfloat16 and FP8 use the portable loops (branch-free conversions), compiled for AVX2 so they vectorise at 256 bits.
template <class N>
[[gnu::target("avx2,f16c"), gnu::noinline]] void widenAvx2(const unsigned char* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = N::widen(loadAt<typename N::Storage>(src, i));
}

template <class N>
[[gnu::target("avx2,f16c"), gnu::noinline]] void narrowAvx2(const float* src, unsigned char* dst, size_t n) {
  using S = typename N::Storage;
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<N, Bf16>) storeAt<S>(dst, i, fp::floatToBf16(src[i]));
    if constexpr (std::is_same_v<N, E4M3>) storeAt<S>(dst, i, fp::floatToE4M3(src[i]));
    if constexpr (std::is_same_v<N, E5M2>) storeAt<S>(dst, i, fp::floatToE5M2(src[i]));
  }
}

#endif  // __x86_64__

template <class Isa, class N>
[[gnu::always_inline]] inline void widen(const unsigned char* src, float* dst, size_t n) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<Isa, Avx2Isa>) {
    if constexpr (std::is_same_v<N, Half>) {
      widenHalfF16c(src, dst, n);
    } else {
      widenAvx2<N>(src, dst, n);
    }
    return;
  }
#endif
  widenPortable<N>(src, dst, n);
}

template <class Isa, class N>
[[gnu::always_inline]] inline void narrow(const float* src, unsigned char* dst, size_t n) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<Isa, Avx2Isa>) {
    if constexpr (std::is_same_v<N, Half>) {
      narrowHalfF16c(src, dst, n);
    } else {
      narrowAvx2<N>(src, dst, n);
    }
    return;
  }
#endif
  narrowPortable<N>(src, dst, n);
}

// Rounds block values to the type: x -> narrow(x) -> float.
template <class Isa, class N>
[[gnu::always_inline]] inline void roundThroughType(float* values, size_t n) {
  alignas(64) unsigned char scratch[kNarrowBlock * sizeof(typename N::Storage)];
  narrow<Isa, N>(values, scratch, n);
  widen<Isa, N>(scratch, values, n);
}

template <class Isa, class N, class Op>
[[gnu::always_inline]] inline void twoNarrow(const Call& c) {
  constexpr size_t kSize = sizeof(typename N::Storage);
  const float scalar = N::widen(loadAt<typename N::Storage>(c.scalar, 0));
  alignas(64) float x[kNarrowBlock];
  alignas(64) float y[kNarrowBlock];
  for (size_t first = 0; first < c.count; first += kNarrowBlock) {
    const size_t n = std::min(kNarrowBlock, c.count - first);
    widen<Isa, N>(c.a + first * kSize, x, n);
    widen<Isa, N>(c.b + first * kSize, y, n);
    if (c.pre) {
      for (size_t i = 0; i < n; ++i) y[i] *= scalar;
      roundThroughType<Isa, N>(y, n);
    }
    for (size_t i = 0; i < n; ++i) x[i] = Op::apply(x[i], y[i]);
    narrow<Isa, N>(x, c.out + first * kSize, n);
  }
}

template <class Isa, class N>
[[gnu::always_inline]] inline void oneNarrow(const Call& c) {
  constexpr size_t kSize = sizeof(typename N::Storage);
  if (!c.pre) {
    if (c.out != c.a) std::memcpy(c.out, c.a, c.count * kSize);
    return;
  }
  const float scalar = N::widen(loadAt<typename N::Storage>(c.scalar, 0));
  alignas(64) float x[kNarrowBlock];
  for (size_t first = 0; first < c.count; first += kNarrowBlock) {
    const size_t n = std::min(kNarrowBlock, c.count - first);
    widen<Isa, N>(c.a + first * kSize, x, n);
    for (size_t i = 0; i < n; ++i) x[i] *= scalar;
    narrow<Isa, N>(x, c.out + first * kSize, n);
  }
}

// ---- dispatch ----

template <class Isa, class T, class Op>
[[gnu::always_inline]] inline void twoInputs(const Call& c) {
  if constexpr (kIsNarrow<T>) {
    twoNarrow<Isa, T, Op>(c);
  } else {
    twoNative<T, Op>(c);
  }
}

template <class Isa, class T>
[[gnu::always_inline]] inline void runTyped(const Call& c) {
  if (!c.twoInputs) {
    if constexpr (kIsNarrow<T>) {
      oneNarrow<Isa, T>(c);
    } else {
      oneNative<T>(c);
    }
    return;
  }
  switch (c.combine) {
    case Combine::Sum:
      twoInputs<Isa, T, OpSum>(c);
      break;
    case Combine::Prod:
      twoInputs<Isa, T, OpProd>(c);
      break;
    case Combine::Max:
      twoInputs<Isa, T, OpMax>(c);
      break;
    case Combine::Min:
      twoInputs<Isa, T, OpMin>(c);
      break;
    case Combine::Affine:
    case Combine::User:
      break;  // ordered combines never come here: the verbs route them to ordered_combine.h
  }
}

using RunFn = void (*)(const Call&);

template <class T>
void runPortable(const Call& c) {
  runTyped<PortableIsa, T>(c);
}

// Indexed by DataType.
constexpr RunFn kPortable[kNumDataTypes] = {
    runPortable<int8_t>,  runPortable<uint8_t>,  runPortable<int32_t>, runPortable<uint32_t>,
    runPortable<int64_t>, runPortable<uint64_t>, runPortable<Half>,    runPortable<float>,
    runPortable<double>,  runPortable<Bf16>,     runPortable<E4M3>,    runPortable<E5M2>,
};

#if defined(__x86_64__)
// The same loops, inlined into an AVX2 + F16C function so the compiler vectorises them at 256 bits.
template <class T>
[[gnu::target("avx2,f16c")]] void runAvx2(const Call& c) {
  runTyped<Avx2Isa, T>(c);
}

constexpr RunFn kAvx2[kNumDataTypes] = {
    runAvx2<int8_t>, runAvx2<uint8_t>, runAvx2<int32_t>, runAvx2<uint32_t>, runAvx2<int64_t>, runAvx2<uint64_t>,
    runAvx2<Half>,   runAvx2<float>,   runAvx2<double>,  runAvx2<Bf16>,     runAvx2<E4M3>,    runAvx2<E5M2>,
};
#endif

bool cpuHasAvx2() {
#if defined(__x86_64__)
  // __builtin_cpu_supports("avx2") also checks that the OS saves YMM state. Not every compiler knows "f16c" there,
  // so that bit comes from CPUID leaf 1 directly.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  return f16c && __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

std::atomic<ReduceIsa>& isaSetting() {
  // Read relaxed on every call and written only by setReduceIsa: the value is self-contained (both variants are
  // always ready), so no other memory is published with it.
  static std::atomic<ReduceIsa> setting{cpuHasAvx2() ? ReduceIsa::Avx2 : ReduceIsa::Portable};
  return setting;
}

#if defined(CFX_REDUCE_ASAN_RANGES) || defined(CFX_REDUCE_TSAN_ENDS)
// The sanitizer builds compile this file uninstrumented (CMakeLists.txt): their checks of every load and store of
// these loops were most of those builds' time in the collective sweeps (two thirds under TSan, three quarters under
// ASan). Each call reports what it reads and writes instead. ASan checks the whole ranges, so every error its
// instrumentation found is found here, once per call. TSan is told of each range's first and last element: an op
// that reads or writes a buffer out of its order with another thread touches those too.
extern "C" {
void* __asan_region_is_poisoned(void* addr, size_t size);  // NOLINT(bugprone-reserved-identifier)
void __asan_load1(void* addr);                             // NOLINT(bugprone-reserved-identifier)
void __asan_store1(void* addr);                            // NOLINT(bugprone-reserved-identifier)
void __tsan_read_range(void* addr, size_t size);           // NOLINT(bugprone-reserved-identifier)
void __tsan_write_range(void* addr, size_t size);          // NOLINT(bugprone-reserved-identifier)
}

void reportRange(const unsigned char* p, size_t bytes, [[maybe_unused]] size_t elem, bool write) {
  auto* q = const_cast<unsigned char*>(p);
#if defined(CFX_REDUCE_ASAN_RANGES)
  // The first bad byte, reported as the access the loop would have made there (overflow, use after free, ...).
  if (void* bad = __asan_region_is_poisoned(q, bytes)) (write ? __asan_store1 : __asan_load1)(bad);
#else
  const auto report = write ? __tsan_write_range : __tsan_read_range;
  report(q, elem);
  if (bytes > elem) report(q + bytes - elem, elem);
#endif
}

void reportAccesses(DataType type, const Call& c) {
  const size_t elem = dataTypeSize(type);
  const size_t bytes = c.count * elem;
  reportRange(c.a, bytes, elem, false);
  if (c.twoInputs) reportRange(c.b, bytes, elem, false);
  reportRange(c.out, bytes, elem, true);
}
#endif

void run(DataType type, const Call& c) {
  if (c.count == 0) return;
  const auto index = static_cast<unsigned>(type);
  assert(index < static_cast<unsigned>(kNumDataTypes));
#if defined(CFX_REDUCE_ASAN_RANGES) || defined(CFX_REDUCE_TSAN_ENDS)
  reportAccesses(type, c);
#endif
#if defined(__x86_64__)
  if (isaSetting().load(std::memory_order_relaxed) == ReduceIsa::Avx2) {
    kAvx2[index](c);
    return;
  }
#endif
  kPortable[index](c);
}

}  // namespace

void reduceLocal(const ReduceOp& op, void* out, const void* partial, const void* local, size_t count, bool applyPost) {
  run(op.type, Call{static_cast<unsigned char*>(out), static_cast<const unsigned char*>(partial),
                    static_cast<const unsigned char*>(local), op.scalar, count, op.divisor, op.combine,
                    /*twoInputs=*/true, op.preMultiply, applyPost && op.postDivide});
}

void prepareLocal(const ReduceOp& op, void* out, const void* local, size_t count, bool applyPost) {
  run(op.type, Call{static_cast<unsigned char*>(out), static_cast<const unsigned char*>(local), nullptr, op.scalar,
                    count, op.divisor, op.combine, /*twoInputs=*/false, op.preMultiply, applyPost && op.postDivide});
}

void combinePartials(const ReduceOp& op, void* out, const void* a, const void* b, size_t count, bool applyPost) {
  run(op.type, Call{static_cast<unsigned char*>(out), static_cast<const unsigned char*>(a),
                    static_cast<const unsigned char*>(b), op.scalar, count, op.divisor, op.combine,
                    /*twoInputs=*/true, /*pre=*/false, applyPost && op.postDivide});
}

bool reduceIsaSupported(ReduceIsa isa) { return isa == ReduceIsa::Portable || cpuHasAvx2(); }

ReduceIsa activeReduceIsa() { return isaSetting().load(std::memory_order_relaxed); }

void setReduceIsa(ReduceIsa isa) {
  if (reduceIsaSupported(isa)) isaSetting().store(isa, std::memory_order_relaxed);
}

}  // namespace cfx::prims
