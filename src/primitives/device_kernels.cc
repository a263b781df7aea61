// SPDX-License-Identifier: Apache-2.0
// Device kernels: loading and launching (primitives layer).
#include "primitives/device_kernels.h"

#include <cstring>
#include <map>
#include <mutex>

#include "common/log.h"
#include "primitives/device/quantize_args.h"
#include "primitives/device/reduce_args.h"
#include "compress/block_quant.h"

#if CFX_HAVE_DEVICE_KERNELS
extern "C" const unsigned char cfx_fatbin_reduce_kernels[];
extern "C" const unsigned char cfx_fatbin_quantize_kernels[];
#endif

#if CFX_HAVE_HIP_KERNELS
extern "C" const unsigned char cfx_hip_bundle_reduce_kernels[];
extern "C" const unsigned char cfx_hip_bundle_reduce_kernels_end[];
extern "C" const unsigned char cfx_hip_bundle_quantize_kernels[];
extern "C" const unsigned char cfx_hip_bundle_quantize_kernels_end[];
#endif

namespace cfx::prims {

namespace {

constexpr const char* kTypeNames[kNumDataTypes] = {"i8", "u8", "i32", "u32", "i64", "u64",
                                                   "f16", "f32", "f64", "bf16", "e4m3", "e5m2"};
constexpr const char* kCombineNames[4] = {"sum", "prod", "max", "min"};

#if CFX_HAVE_DEVICE_KERNELS
constexpr unsigned kTypeMask = CFX_KERNEL_TYPE_MASK;
#else
constexpr unsigned kTypeMask = 0;
#endif

// The datatypes the loaded runtime's kernels cover: the CUDA build may filter types (CFX_KERNEL_TYPES); the HIP
// bundles hold all of them.
unsigned typeMask() {
  if (cuda::backend() == cuda::Backend::Hip) return CFX_HAVE_HIP_KERNELS ? (1u << kNumDataTypes) - 1 : 0;
  return kTypeMask;
}

}  // namespace

bool DeviceKernels::built() { return typeMask() != 0; }

const unsigned char* DeviceKernels::hipBundle(int which, size_t* bytes) {
#if CFX_HAVE_HIP_KERNELS
  const unsigned char* begin = which == 0 ? cfx_hip_bundle_reduce_kernels : cfx_hip_bundle_quantize_kernels;
  const unsigned char* end = which == 0 ? cfx_hip_bundle_reduce_kernels_end : cfx_hip_bundle_quantize_kernels_end;
  *bytes = static_cast<size_t>(end - begin);
  return begin;
#else
  (void)which;
  *bytes = 0;
  return nullptr;
#endif
}

const char* DeviceKernels::hipArchs() {
#if CFX_HAVE_HIP_KERNELS
  return CFX_HIP_ARCHS;
#else
  return "";
#endif
}

bool DeviceKernels::covers(DataType type) { return (typeMask() >> static_cast<unsigned>(type)) & 1u; }

const char* DeviceKernels::archs() {
  if (cuda::backend() == cuda::Backend::Hip) return hipArchs();
#if CFX_HAVE_DEVICE_KERNELS
  return CFX_KERNEL_ARCHS;
#else
  return "";
#endif
}

Result<const DeviceKernels*> DeviceKernels::get(cuda::CUcontext ctx) {
  static std::mutex m;
  static auto* loaded = new std::map<cuda::CUcontext, DeviceKernels*>();  // leaked: modules live with the process
  std::lock_guard<std::mutex> lock(m);
  if (auto it = loaded->find(ctx); it != loaded->end()) return static_cast<const DeviceKernels*>(it->second);
  const cuda::Driver* d = cuda::driver();
  if (d == nullptr) return Status::error(Errc::InvalidUsage, "device kernels need the CUDA driver, which is not loaded");
  const bool hip = cuda::backend() == cuda::Backend::Hip;
  if (!built()) {
    return Status::error(Errc::InvalidUsage, hip ? "this build of Conflux has no HIP kernels (hipcc was not found when "
                                                   "it was built; see CFX_HIP_KERNELS)"
                                                 : "this build of Conflux has no device kernels (nvcc was not found "
                                                   "when it was built; see CFX_CUDA_KERNELS)");
  }
  const void* reduceImage = nullptr;
  const void* quantImage = nullptr;
  if (hip) {
    size_t bytes = 0;
    reduceImage = hipBundle(0, &bytes);
    quantImage = hipBundle(1, &bytes);
  } else {
#if CFX_HAVE_DEVICE_KERNELS
    reduceImage = cfx_fatbin_reduce_kernels;
    quantImage = cfx_fatbin_quantize_kernels;
#endif
  }
  cuda::ScopedContext scope(ctx);
  auto* k = new DeviceKernels();
  Status st = cuda::check(d->moduleLoadData(&k->module_, reduceImage), "module load (reduce kernels)");
  if (st.ok()) st = cuda::check(d->moduleLoadData(&k->quantModule_, quantImage), "module load (quantize kernels)");
  if (!st.ok()) {
    delete k;
    return Status::error(st.code(),
                         st.message() + strprintf(" - this build holds kernels for %s%s only; rebuild "
                                                  "with %s naming this GPU's",
                                                  hip ? "" : "sm ", archs(), hip ? "CFX_HIP_ARCHS" : "CFX_CUDA_ARCHS"));
  }
  const unsigned mask = typeMask();
  for (int t = 0; t < kNumDataTypes; ++t) {
    if (!(mask & (1u << t))) continue;
    for (int c = 0; c < 4; ++c) {
      const std::string name = strprintf("cfx_reduce_%s_%s", kTypeNames[t], kCombineNames[c]);
      CFX_TRY(cuda::check(d->moduleGetFunction(&k->reduce_[t][c], k->module_, name.c_str()), name.c_str()));
    }
  }
  constexpr const char* kCodecNames[3] = {"int8", "fp8", "int4"};
  for (int c = 0; c < 3; ++c) {
    const std::string q = strprintf("cfx_quantize_%s", kCodecNames[c]);
    const std::string dq = strprintf("cfx_dequantize_%s", kCodecNames[c]);
    CFX_TRY(cuda::check(d->moduleGetFunction(&k->quantize_[c], k->quantModule_, q.c_str()), q.c_str()));
    CFX_TRY(cuda::check(d->moduleGetFunction(&k->dequantize_[c], k->quantModule_, dq.c_str()), dq.c_str()));
  }
  cuda::CUdevice dev = 0;
  if (d->ctxGetDevice(&dev) == cuda::kSuccess) {
    d->deviceGetAttribute(&k->multiprocessors_, cuda::kDeviceAttrMultiprocessorCount, dev);
  }
  CFX_INFO(log::Sys::Init, "device kernels loaded (%s, %s, type mask 0x%x)", cuda::backendName(), archs(), mask);
  (*loaded)[ctx] = k;
  return static_cast<const DeviceKernels*>(k);
}

Status DeviceKernels::reduceCopy(const ReduceOp& op, cuda::CUdeviceptr dst, const cuda::CUdeviceptr* srcs, int nSrc,
                                 size_t count, bool applyPost, cuda::CUstream stream) const {
  const int t = static_cast<int>(op.type);
  const int c = static_cast<int>(op.combine);
  if (op.ordered()) {
    return Status::error(Errc::InvalidUsage, "ordered (affine or user) combines have no device kernel");
  }
  if (nSrc < 1 || nSrc > device::kMaxReduceSources) {
    return Status::error(Errc::InternalError, strprintf("reduceCopy with %d sources (1..%d)", nSrc,
                                                        device::kMaxReduceSources));
  }
  if (reduce_[t][c] == nullptr) {
    return Status::error(Errc::InvalidUsage, strprintf("this build's device kernels leave out %s (CFX_KERNEL_TYPES)",
                                                       dataTypeName(op.type)));
  }
  if (count == 0) return Status();
  device::ReduceArgs args;
  std::memset(&args, 0, sizeof(args));
  args.dst = reinterpret_cast<void*>(dst);
  for (int i = 0; i < nSrc; ++i) args.src[i] = reinterpret_cast<const void*>(srcs[i]);
  args.nSrc = nSrc;
  args.preMultiply = op.preMultiply ? 1 : 0;
  args.postDivide = op.postDivide && applyPost ? 1 : 0;
  args.divisor = op.divisor == 0 ? 1 : op.divisor;
  args.count = count;
  std::memcpy(args.scalar, op.scalar, sizeof(args.scalar));
  constexpr unsigned kThreads = 256;
  const size_t blocksNeeded = (count + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(std::min<size_t>(blocksNeeded, static_cast<size_t>(multiprocessors_) * 8));
  void* params[] = {&args};
  return cuda::check(cuda::driver()->launchKernel(reduce_[t][c], blocks, 1, 1, kThreads, 1, 1, 0, stream, params,
                                                  nullptr),
                     "cuLaunchKernel (reduce-copy)");
}

namespace {

// The arguments quantize and dequantize share, and one launch of 256 threads (the quantize kernel's shared-memory
// reduction is sized for that) on `grid` blocks.
device::QuantizeArgs quantArgs(quant::Codec codec, cuda::CUdeviceptr in, size_t count, size_t block,
                               cuda::CUdeviceptr out) {
  device::QuantizeArgs args{};
  args.in = reinterpret_cast<const void*>(in);
  args.out = reinterpret_cast<void*>(out);
  args.count = count;
  args.block = static_cast<uint32_t>(block);
  args.codec = static_cast<int32_t>(codec);
  return args;
}

Status launchQuant(cuda::CUfunction fn, device::QuantizeArgs args, size_t grid, cuda::CUstream stream, const char* what) {
  void* params[] = {&args};
  return cuda::check(cuda::driver()->launchKernel(fn, static_cast<unsigned>(grid), 1, 1, 256, 1, 1, 0, stream, params,
                                                  nullptr),
                     what);
}

}  // namespace

Status DeviceKernels::quantize(quant::Codec codec, DataType inType, cuda::CUdeviceptr in, size_t count, size_t block,
                               cuda::CUdeviceptr out, cuda::CUstream stream) const {
  CFX_TRY(quant::checkQuantize(codec, inType, block));
  if (count == 0) return Status();
  device::QuantizeArgs args = quantArgs(codec, in, count, block, out);
  args.inType = inType == DataType::Float32 ? 0 : inType == DataType::Bfloat16 ? 1 : 2;
  const size_t grid = std::min<size_t>(quant::scaleCount(count, block), static_cast<size_t>(multiprocessors_) * 16);
  return launchQuant(quantize_[static_cast<int>(codec)], args, grid, stream, "cuLaunchKernel (quantize)");
}

Status DeviceKernels::dequantize(quant::Codec codec, cuda::CUdeviceptr in, size_t count, size_t block,
                                 cuda::CUdeviceptr out, bool accumulate, cuda::CUstream stream) const {
  CFX_TRY(quant::checkQuantize(codec, DataType::Float32, block));
  if (count == 0) return Status();
  device::QuantizeArgs args = quantArgs(codec, in, count, block, out);
  args.accumulate = accumulate ? 1 : 0;
  const size_t grid = std::min<size_t>((count + 255) / 256, static_cast<size_t>(multiprocessors_) * 8);
  return launchQuant(dequantize_[static_cast<int>(codec)], args, grid, stream, "cuLaunchKernel (dequantize)");
}

}  // namespace cfx::prims
