// SPDX-License-Identifier: Apache-2.0
// Reduce-copy kernels (primitives layer, device code): dst[i] = post(pre(src0[i]) (+) pre(src1[i]) (+) ...), up to 8
// sources folded in a fixed order, for the 12 NCCL datatypes and the four combines (sum, prod, max, min); PreMulSum
// and Avg arrive lowered as a pre-multiplier and an integer post-divisor, as on the host (common/types.h ReduceOp).
//
// Bit-identical to the host: every step is the host's arithmetic, not an intrinsic's. The first source enters as is
// (pre-multiplied when there is a pre-multiplier), as the host's prepareLocal takes it; each source after it is
// folded as reduceLocal folds a local input into a partial (primitives/reduce.cc): pre-multiplied (rounded once to
// the type), combined in float for the narrow types, and rounded back to the type after every step; the integer
// post-division comes last. The conversions are the same constexpr functions the host uses (common/float_types.h).
// Built with -fmad=false (a fused multiply-add would round x * scalar + acc once instead of twice) and without
// flush-to-zero, so float arithmetic is the host's IEEE arithmetic.
//
// Cost: reads nSrc * count elements and writes count, one pass; memory-bound. These kernels never wait for anything:
// a host proxy launches them once every input is in place (core/device_direct.cc), so ranks sharing a GPU never
// need two kernels resident at once.
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/float_types.h"
#include "primitives/device/device_compat.h"
#include "primitives/device/reduce_args.h"

namespace {

using cfx::prims::device::ReduceArgs;

template <class T>
struct Native {
  using Storage = T;
  using Math = T;
  __device__ static Math widen(Storage v) { return v; }
  __device__ static Storage narrow(Math v) { return v; }
  static constexpr bool kNarrow = false;
};
struct Half {
  using Storage = uint16_t;
  using Math = float;
  __device__ static float widen(uint16_t v) { return cfx::fp::halfToFloat(v); }
  __device__ static uint16_t narrow(float v) { return cfx::fp::floatToHalf(v); }
  static constexpr bool kNarrow = true;
};
struct Bf16 {
  using Storage = uint16_t;
  using Math = float;
  __device__ static float widen(uint16_t v) { return cfx::fp::bf16ToFloat(v); }
  __device__ static uint16_t narrow(float v) { return cfx::fp::floatToBf16(v); }
  static constexpr bool kNarrow = true;
};
struct E4M3 {
  using Storage = uint8_t;
  using Math = float;
  __device__ static float widen(uint8_t v) { return cfx::fp::e4m3ToFloat(v); }
  __device__ static uint8_t narrow(float v) { return cfx::fp::floatToE4M3(v); }
  static constexpr bool kNarrow = true;
};
struct E5M2 {
  using Storage = uint8_t;
  using Math = float;
  __device__ static float widen(uint8_t v) { return cfx::fp::e5m2ToFloat(v); }
  __device__ static uint8_t narrow(float v) { return cfx::fp::floatToE5M2(v); }
  static constexpr bool kNarrow = true;
};

template <class F>
__device__ inline auto bitsOf(F v) {
  if constexpr (sizeof(F) == 4) return __float_as_uint(v);
  else return static_cast<unsigned long long>(__double_as_longlong(v));
}
template <class F, class B>
__device__ inline F fromBits(B b) {
  if constexpr (sizeof(F) == 4) return __uint_as_float(b);
  else return __longlong_as_double(static_cast<long long>(b));
}

// IEEE add and multiply with round-to-nearest, never contracted (the explicit intrinsics make that certain even if
// a build forgot -fmad=false).
__device__ inline float addRn(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double addRn(double a, double b) { return __dadd_rn(a, b); }
__device__ inline float mulRn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mulRn(double a, double b) { return __dmul_rn(a, b); }

struct Sum {
  template <class T>
  __device__ static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else {
      return addRn(a, b);
    }
  }
};
struct Prod {
  template <class T>
  __device__ static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    } else {
      return mulRn(a, b);
    }
  }
};
// As the host's OpMax/OpMin: a NaN operand loses (both NaN give NaN), and +0 > -0 whatever the operand order.
struct Max {
  template <class T>
  __device__ static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? b : a;
    } else {
      T r = a > b ? a : b;
      if (a == b) r = fromBits<T>(bitsOf(a) & bitsOf(b));
      if (b != b) r = a;
      return r;
    }
  }
};
struct Min {
  template <class T>
  __device__ static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return b < a ? b : a;
    } else {
      T r = a < b ? a : b;
      if (a == b) r = fromBits<T>(bitsOf(a) | bitsOf(b));
      if (b != b) r = a;
      return r;
    }
  }
};

template <class T>
__device__ inline T loadAt(const void* base, size_t i) {
  T v;
  memcpy(&v, static_cast<const unsigned char*>(base) + i * sizeof(T), sizeof(T));
  return v;
}
template <class T>
__device__ inline void storeAt(void* base, size_t i, T v) {
  memcpy(static_cast<unsigned char*>(base) + i * sizeof(T), &v, sizeof(T));
}

// pre(x) for one source element: the host's premultiply, rounded once to the type.
template <class Ty>
__device__ inline typename Ty::Math pre(typename Ty::Storage x, const ReduceArgs& a, typename Ty::Math scalar) {
  if (!a.preMultiply) return Ty::widen(x);
  if constexpr (Ty::kNarrow) {
    return Ty::widen(Ty::narrow(mulRn(Ty::widen(x), scalar)));
  } else {
    return Prod::apply(x, scalar);
  }
}

template <class T>
__device__ inline T postDivide(T x, uint64_t divisor) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    const bool negative = std::is_signed_v<T> && x < 0;
    const U magnitude = negative ? static_cast<U>(U(0) - static_cast<U>(x)) : static_cast<U>(x);
    const U quotient = static_cast<U>(static_cast<uint64_t>(magnitude) / divisor);
    return negative ? static_cast<T>(static_cast<U>(U(0) - quotient)) : static_cast<T>(quotient);
  } else {
    return x;
  }
}

template <class Ty, class Op>
__device__ void reduceCopy(const ReduceArgs& a) {
  using S = typename Ty::Storage;
  using M = typename Ty::Math;
  const M scalar = Ty::widen(loadAt<S>(a.scalar, 0));
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.count; i += stride) {
    // Without a pre-multiplier the first source enters as it is, as the host's prepareLocal copies it: a
    // round trip through float would canonicalise a NaN payload and saturate an E5M2 infinity too early.
    const S first = loadAt<S>(a.src[0], i);
    S acc = a.preMultiply ? Ty::narrow(pre<Ty>(first, a, scalar)) : first;
    for (int k = 1; k < a.nSrc; ++k) {
      const M y = pre<Ty>(loadAt<S>(a.src[k], i), a, scalar);
      acc = Ty::narrow(Op::apply(Ty::widen(acc), y));
    }
    if (a.postDivide) acc = postDivide(acc, a.divisor);
    storeAt<S>(a.dst, i, acc);
  }
}

}  // namespace

// One entry point per (type, combine): cfx_reduce_<type>_<op>. The host looks them up by name.
#define CFX_REDUCE_KERNEL(tname, Ty, opname, Op) \
  extern "C" __global__ void cfx_reduce_##tname##_##opname(ReduceArgs a) { reduceCopy<Ty, Op>(a); }
#define CFX_REDUCE_KERNELS(tname, Ty)         \
  CFX_REDUCE_KERNEL(tname, Ty, sum, Sum)      \
  CFX_REDUCE_KERNEL(tname, Ty, prod, Prod)    \
  CFX_REDUCE_KERNEL(tname, Ty, max, Max)      \
  CFX_REDUCE_KERNEL(tname, Ty, min, Min)

#if CFX_KERNEL_I8
CFX_REDUCE_KERNELS(i8, Native<int8_t>)
#endif
#if CFX_KERNEL_U8
CFX_REDUCE_KERNELS(u8, Native<uint8_t>)
#endif
#if CFX_KERNEL_I32
CFX_REDUCE_KERNELS(i32, Native<int32_t>)
#endif
#if CFX_KERNEL_U32
CFX_REDUCE_KERNELS(u32, Native<uint32_t>)
#endif
#if CFX_KERNEL_I64
CFX_REDUCE_KERNELS(i64, Native<int64_t>)
#endif
#if CFX_KERNEL_U64
CFX_REDUCE_KERNELS(u64, Native<uint64_t>)
#endif
#if CFX_KERNEL_F16
CFX_REDUCE_KERNELS(f16, Half)
#endif
#if CFX_KERNEL_F32
CFX_REDUCE_KERNELS(f32, Native<float>)
#endif
#if CFX_KERNEL_F64
CFX_REDUCE_KERNELS(f64, Native<double>)
#endif
#if CFX_KERNEL_BF16
CFX_REDUCE_KERNELS(bf16, Bf16)
#endif
#if CFX_KERNEL_E4M3
CFX_REDUCE_KERNELS(e4m3, E4M3)
#endif
#if CFX_KERNEL_E5M2
CFX_REDUCE_KERNELS(e5m2, E5M2)
#endif
