// SPDX-License-Identifier: Apache-2.0
// Device kernels (primitives layer): the reduce-copy kernels of primitives/device/, from the fatbin embedded at build
// time, loaded into a CUDA context through the dlopen'd driver and launched on a stream.
#pragma once

#include <string>

#include "common/cuda_driver.h"
#include "common/status.h"
#include "common/types.h"
#include "compress/quantize_math.h"

namespace cfx::prims {

namespace quant = compress::quant;

class DeviceKernels {
 public:
  // Whether this build holds device kernels (nvcc was found), and for which architectures ("90").
  static bool built();
  static const char* archs();
  // The HIP (AMD) build of the same kernels: code object bundles ("__CLANG_OFFLOAD_BUNDLE__") for the targets in
  // hipArchs(), which get() loads through hipModuleLoadData when the driver table runs on HIP
  // (common/hip_driver.h). Null/empty when hipcc was not found at build time. `which`: 0 reduce, 1 quantize.
  static const unsigned char* hipBundle(int which, size_t* bytes);
  static const char* hipArchs();
  // Whether this build's kernels cover `type` (CFX_KERNEL_TYPES may filter types out).
  static bool covers(DataType type);
  // The kernels loaded into `ctx`, loading them on first use (thread-safe; one module per context, kept for the
  // process's life). Loading creates a CUDA module: call it from the thread that issues the operation, never from a
  // progress thread (see core/device_stream.h: object creation takes a context-wide lock).
  static Result<const DeviceKernels*> get(cuda::CUcontext ctx);

  // dst[i] = post(pre(srcs[0][i]) (+) pre(srcs[1][i]) ...), as the host reduce functions compute it (bit-identical):
  // every source gets `op`'s pre-multiplier, the integer post-division applies when applyPost. 1 <= nSrc <= 8.
  // Asynchronous on `stream`. Fails (InvalidUsage, naming it) for a datatype this build filtered out.
  Status reduceCopy(const ReduceOp& op, cuda::CUdeviceptr dst, const cuda::CUdeviceptr* srcs, int nSrc, size_t count,
                    bool applyPost, cuda::CUstream stream) const;

  // Blockwise quantisation (layout: compress/quantize_math.h), byte-identical to compress::quant::quantize /
  // dequantize on the host. `out` of quantize holds quant::quantizedBytes(codec, count, block) bytes; dequantize
  // writes (or adds into, when accumulate) count fp32 values. Asynchronous on `stream`.
  Status quantize(quant::Codec codec, DataType inType, cuda::CUdeviceptr in, size_t count, size_t block,
                  cuda::CUdeviceptr out, cuda::CUstream stream) const;
  Status dequantize(quant::Codec codec, cuda::CUdeviceptr in, size_t count, size_t block, cuda::CUdeviceptr out,
                    bool accumulate, cuda::CUstream stream) const;

 private:
  DeviceKernels() = default;
  cuda::CUmodule module_ = nullptr;
  cuda::CUmodule quantModule_ = nullptr;
  cuda::CUfunction quantize_[3] = {};
  cuda::CUfunction dequantize_[3] = {};
  cuda::CUfunction reduce_[kNumDataTypes][4] = {};
  int multiprocessors_ = 132;
};

}  // namespace cfx::prims
