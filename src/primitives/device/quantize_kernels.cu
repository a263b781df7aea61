// SPDX-License-Identifier: Apache-2.0
// Blockwise quantisation kernels (primitives layer, device code): int8, fp8 (E4M3) and int4 with one fp32 scale per
// block of B elements, from fp32, bf16 or fp16; and dequantisation to fp32, optionally accumulating. The layout and
// the per-element arithmetic are device/quantize_math.h, shared with the host reference (primitives/quantize.cc), so
// both write the same bytes.
//
// One thread block per quantisation block (grid-stride over blocks): the block's absmax by a shared-memory max
// reduction (max is exact, so the order does not matter), then every thread quantises its elements. Cost: the
// block is read twice (from L1/L2 the second time) and written once at 1 B (or 0.5 B) per element plus 4 B per
// block. Plain data-parallel kernels: nothing waits on another process.
#include <cstdint>

#include "primitives/device/device_compat.h"
#include "primitives/device/quantize_args.h"
#include "compress/quantize_math.h"

namespace {

using cfx::prims::device::QuantizeArgs;
using namespace cfx::compress::quant;

__device__ inline float loadIn(const QuantizeArgs& a, uint64_t i) {
  if (a.inType == 0) return static_cast<const float*>(a.in)[i];
  const uint16_t h = static_cast<const uint16_t*>(a.in)[i];
  return a.inType == 1 ? cfx::fp::bf16ToFloat(h) : cfx::fp::halfToFloat(h);
}

template <int kCodec>
__device__ void quantizeBlocks(const QuantizeArgs& a) {
  constexpr Codec codec = static_cast<Codec>(kCodec);
  __shared__ float partial[256];
  const uint64_t nBlocks = (a.count + a.block - 1) / a.block;
  auto* scales = static_cast<float*>(a.out);
  auto* payload = reinterpret_cast<uint8_t*>(scales + nBlocks);
  for (uint64_t b = blockIdx.x; b < nBlocks; b += gridDim.x) {
    const uint64_t first = b * a.block;
    const uint64_t n = min(static_cast<uint64_t>(a.block), a.count - first);
    float m = 0.0f;
    for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const float x = loadIn(a, first + i);
      if (isFiniteBits(x)) m = fmaxf(m, absFloat(x));
    }
    partial[threadIdx.x] = m;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
      if (threadIdx.x < s) partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + s]);
      __syncthreads();
    }
    const float scale = __fdiv_rn(partial[0], codecMax(codec));
    const float inv = scale == 0.0f ? 0.0f : __frcp_rn(scale);  // reciprocalScale, correctly rounded as on the host
    if (threadIdx.x == 0) scales[b] = scale;
    if constexpr (codec == Codec::Int4) {
      // Pairs of elements share a byte; blocks are even-sized, so a pair never straddles two blocks.
      for (uint64_t j = 2 * threadIdx.x; j < n; j += 2 * blockDim.x) {
        const uint8_t lo = quantizeOne(codec, loadIn(a, first + j), inv);
        const uint8_t hi = j + 1 < n ? quantizeOne(codec, loadIn(a, first + j + 1), inv) : 0;
        payload[(first + j) / 2] = static_cast<uint8_t>(lo | (hi << 4));
      }
    } else {
      for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) payload[first + i] = quantizeOne(codec, loadIn(a, first + i), inv);
    }
    __syncthreads();  // partial[] is reused by the next block
  }
}

template <int kCodec>
__device__ void dequantizeAll(const QuantizeArgs& a) {
  constexpr Codec codec = static_cast<Codec>(kCodec);
  const uint64_t nBlocks = (a.count + a.block - 1) / a.block;
  const auto* scales = static_cast<const float*>(a.in);
  const auto* payload = reinterpret_cast<const uint8_t*>(scales + nBlocks);
  auto* out = static_cast<float*>(a.out);
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t e = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < a.count; e += stride) {
    const uint8_t stored = codec == Codec::Int4 ? static_cast<uint8_t>(e % 2 == 0 ? payload[e / 2] & 0x0F : payload[e / 2] >> 4)
                                                : payload[e];
    const float v = dequantizeOne(codec, stored, scales[e / a.block]);
    out[e] = a.accumulate ? __fadd_rn(out[e], v) : v;
  }
}

}  // namespace

extern "C" __global__ void cfx_quantize_int8(QuantizeArgs a) { quantizeBlocks<0>(a); }
extern "C" __global__ void cfx_quantize_fp8(QuantizeArgs a) { quantizeBlocks<1>(a); }
extern "C" __global__ void cfx_quantize_int4(QuantizeArgs a) { quantizeBlocks<2>(a); }
extern "C" __global__ void cfx_dequantize_int8(QuantizeArgs a) { dequantizeAll<0>(a); }
extern "C" __global__ void cfx_dequantize_fp8(QuantizeArgs a) { dequantizeAll<1>(a); }
extern "C" __global__ void cfx_dequantize_int4(QuantizeArgs a) { dequantizeAll<2>(a); }
