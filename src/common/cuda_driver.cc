// SPDX-License-Identifier: Apache-2.0
// The dlopen'd CUDA driver (common layer).
#include "common/cuda_driver.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "common/hip_driver.h"
#include "common/log.h"
#include "common/param.h"

namespace cfx::cuda {

CFX_PARAM(int, cudaEnableParam, "CFX_CUDA", 1,
          "0 never loads the CUDA driver, so every buffer is taken for host memory (device buffers are then not "
          "supported). For host-only runs on a GPU machine.",
          param::inRange(0, 1));

CFX_PARAM(int, hipEnableParam, "CFX_HIP", 1,
          "0 never loads the HIP runtime. Where no CUDA device exists but an AMD GPU does (/dev/kfd), device buffers "
          "on it go through HIP (libamdhip64, ROCm 5.3 or later) behind the same code as CUDA's.",
          param::inRange(0, 1));

CFX_PARAM(std::string, hipDeviceNodeParam, "CFX_HIP_DEVICE_NODE", "/dev/kfd",
          "The AMD kernel driver's device node: HIP is tried only where it exists. Tests name a file of their own to "
          "run the HIP path on a CPU stand-in for the runtime (tests/gpu/emu).");

namespace {

Backend gBackend = Backend::None;

// The HIP fallback, tried only where the AMD kernel driver is (/dev/kfd): loading ROCm elsewhere costs time and
// threads for nothing.
const Driver* loadHip(Driver* table, const char* cudaWhy) {
  if (hipEnableParam.get() == 0 || access(hipDeviceNodeParam.get().c_str(), R_OK | W_OK) != 0) return nullptr;
  std::string why;
  const Driver* d = loadHipDriver(table, &why);
  if (d == nullptr) {
    CFX_INFO(log::Sys::Init, "CUDA: %s; HIP: %s; all buffers are host memory", cudaWhy, why.c_str());
    return nullptr;
  }
  int count = 0;
  d->deviceGetCount(&count);
  table->capturable = table->userObjectCreate != nullptr;
  gBackend = Backend::Hip;
  CFX_INFO(log::Sys::Init, "HIP: runtime loaded, %d AMD GPU(s) (%s); device buffers run through it", count, cudaWhy);
  return d;
}

// Resolves `name` into `slot`; false (and the missing name in `missing`) when the driver lacks it.
template <typename Fn>
bool resolve(void* lib, Fn* slot, const char* name, const char** missing) {
  *slot = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*slot == nullptr && *missing == nullptr) *missing = name;
  return *slot != nullptr;
}

const Driver* load() {
  if (cudaEnableParam.get() == 0) {
    CFX_INFO(log::Sys::Init, "CUDA: CFX_CUDA=0, not loading the driver; all buffers are host memory");
    return nullptr;
  }
  static Driver d;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const std::string why = strprintf("no driver (libcuda.so.1: %s)", dlerror());
    if (const Driver* hip = loadHip(&d, why.c_str())) return hip;
    CFX_INFO(log::Sys::Init, "CUDA: %s; all buffers are host memory", why.c_str());
    return nullptr;
  }
  const char* missing = nullptr;
  // The versioned names are the ones cuda.h maps the plain names to; the plain (legacy default stream) forms
  // are used on purpose, since every call here names its stream explicitly.
  resolve(lib, &d.init, "cuInit", &missing);
  resolve(lib, &d.getErrorString, "cuGetErrorString", &missing);
  resolve(lib, &d.deviceGet, "cuDeviceGet", &missing);
  resolve(lib, &d.deviceGetCount, "cuDeviceGetCount", &missing);
  resolve(lib, &d.deviceGetAttribute, "cuDeviceGetAttribute", &missing);
  resolve(lib, &d.primaryCtxRetain, "cuDevicePrimaryCtxRetain", &missing);
  resolve(lib, &d.primaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", &missing);
  resolve(lib, &d.ctxGetCurrent, "cuCtxGetCurrent", &missing);
  resolve(lib, &d.ctxSetCurrent, "cuCtxSetCurrent", &missing);
  resolve(lib, &d.ctxPushCurrent, "cuCtxPushCurrent_v2", &missing);
  resolve(lib, &d.ctxPopCurrent, "cuCtxPopCurrent_v2", &missing);
  resolve(lib, &d.ctxGetDevice, "cuCtxGetDevice", &missing);
  resolve(lib, &d.pointerGetAttribute, "cuPointerGetAttribute", &missing);
  resolve(lib, &d.memAlloc, "cuMemAlloc_v2", &missing);
  resolve(lib, &d.memFree, "cuMemFree_v2", &missing);
  resolve(lib, &d.memHostAlloc, "cuMemHostAlloc", &missing);
  resolve(lib, &d.memFreeHost, "cuMemFreeHost", &missing);
  resolve(lib, &d.memHostGetDevicePointer, "cuMemHostGetDevicePointer_v2", &missing);
  resolve(lib, &d.memHostRegister, "cuMemHostRegister_v2", &missing);
  resolve(lib, &d.memHostUnregister, "cuMemHostUnregister", &missing);
  resolve(lib, &d.memGetAddressRange, "cuMemGetAddressRange_v2", &missing);
  resolve(lib, &d.memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", &missing);
  resolve(lib, &d.memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", &missing);
  resolve(lib, &d.memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", &missing);
  resolve(lib, &d.memcpyAsync, "cuMemcpyAsync", &missing);
  resolve(lib, &d.memsetD8Async, "cuMemsetD8Async", &missing);
  resolve(lib, &d.memcpy2DAsync, "cuMemcpy2DAsync_v2", &missing);
  resolve(lib, &d.streamCreate, "cuStreamCreate", &missing);
  resolve(lib, &d.streamDestroy, "cuStreamDestroy_v2", &missing);
  resolve(lib, &d.streamSynchronize, "cuStreamSynchronize", &missing);
  resolve(lib, &d.streamGetCtx, "cuStreamGetCtx", &missing);
  resolve(lib, &d.streamIsCapturing, "cuStreamIsCapturing", &missing);
  resolve(lib, &d.streamGetCaptureInfo, "cuStreamGetCaptureInfo_v2", &missing);
  resolve(lib, &d.threadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode", &missing);
  resolve(lib, &d.userObjectCreate, "cuUserObjectCreate", &missing);
  resolve(lib, &d.userObjectRelease, "cuUserObjectRelease", &missing);
  resolve(lib, &d.graphRetainUserObject, "cuGraphRetainUserObject", &missing);
  resolve(lib, &d.streamWaitValue32, "cuStreamWaitValue32_v2", &missing);
  resolve(lib, &d.streamWriteValue32, "cuStreamWriteValue32_v2", &missing);
  resolve(lib, &d.streamWaitEvent, "cuStreamWaitEvent", &missing);
  resolve(lib, &d.launchHostFunc, "cuLaunchHostFunc", &missing);
  resolve(lib, &d.eventCreate, "cuEventCreate", &missing);
  resolve(lib, &d.eventDestroy, "cuEventDestroy_v2", &missing);
  resolve(lib, &d.eventRecord, "cuEventRecord", &missing);
  resolve(lib, &d.eventQuery, "cuEventQuery", &missing);
  resolve(lib, &d.eventSynchronize, "cuEventSynchronize", &missing);
  resolve(lib, &d.ipcGetMemHandle, "cuIpcGetMemHandle", &missing);
  resolve(lib, &d.ipcOpenMemHandle, "cuIpcOpenMemHandle_v2", &missing);
  resolve(lib, &d.ipcCloseMemHandle, "cuIpcCloseMemHandle", &missing);
  resolve(lib, &d.moduleLoadData, "cuModuleLoadData", &missing);
  resolve(lib, &d.moduleUnload, "cuModuleUnload", &missing);
  resolve(lib, &d.moduleGetFunction, "cuModuleGetFunction", &missing);
  resolve(lib, &d.launchKernel, "cuLaunchKernel", &missing);
  resolve(lib, &d.memGetAllocationGranularity, "cuMemGetAllocationGranularity", &missing);
  resolve(lib, &d.memCreate, "cuMemCreate", &missing);
  resolve(lib, &d.memRelease, "cuMemRelease", &missing);
  resolve(lib, &d.memAddressReserve, "cuMemAddressReserve", &missing);
  resolve(lib, &d.memAddressFree, "cuMemAddressFree", &missing);
  resolve(lib, &d.memMap, "cuMemMap", &missing);
  resolve(lib, &d.memUnmap, "cuMemUnmap", &missing);
  resolve(lib, &d.memSetAccess, "cuMemSetAccess", &missing);
  resolve(lib, &d.memExportToShareableHandle, "cuMemExportToShareableHandle", &missing);
  resolve(lib, &d.memImportFromShareableHandle, "cuMemImportFromShareableHandle", &missing);
  if (missing != nullptr) {
    CFX_WARN("CUDA: libcuda.so.1 lacks %s (driver too old?); all buffers are treated as host memory", missing);
    return nullptr;  // the library stays loaded: unloading a driver is never worth the risk
  }
  const CUresult rc = d.init(0);
  if (rc != kSuccess) {
    const char* text = nullptr;
    d.getErrorString(rc, &text);
    const std::string why = strprintf("cuInit failed (CUDA error %d: %s)", rc, text != nullptr ? text : "unknown");
    if (const Driver* hip = loadHip(&d, why.c_str())) return hip;
    CFX_INFO(log::Sys::Init, "CUDA: %s; all buffers are host memory", why.c_str());
    return nullptr;
  }
  int count = 0;
  d.deviceGetCount(&count);
  gBackend = Backend::Cuda;
  CFX_INFO(log::Sys::Init, "CUDA: driver loaded, %d device(s)", count);
  return &d;
}

}  // namespace

const Driver* driver() {
  static std::once_flag once;
  static const Driver* table = nullptr;
  std::call_once(once, [] { table = load(); });
  return table;
}

Backend backend() {
  driver();
  return gBackend;
}

const char* backendName() {
  switch (backend()) {
    case Backend::Cuda:
      return "CUDA";
    case Backend::Hip:
      return "HIP";
    case Backend::None:
      break;
  }
  return "no GPU runtime";
}

Status check(CUresult rc, const char* what) {
  if (rc == kSuccess) return Status();
  const char* text = nullptr;
  const Driver* d = driver();
  if (d != nullptr) d->getErrorString(rc, &text);
  return Status::error(Errc::UnhandledCudaError, strprintf("%s failed: %s error %d (%s)", what, backendName(), rc,
                                                           text != nullptr ? text : "unknown"));
}

size_t smallCopyRows(size_t bytes) {
  if (bytes < 2 || bytes > 1024) return 0;
  size_t rows = 2;
  while (bytes % rows != 0) ++rows;
  return rows;
}

Status copyHtoDAsync(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream, const char* what) {
  const Driver* d = driver();
  const size_t rows = d->memcpy2DAsync != nullptr ? smallCopyRows(bytes) : 0;
  if (rows == 0) return check(d->memcpyHtoDAsync(dst, src, bytes, stream), what);
  Memcpy2D m;
  m.srcMemoryType = kMemoryTypeHost;
  m.srcHost = src;
  m.srcPitch = bytes / rows;
  m.dstMemoryType = kMemoryTypeDevice;
  m.dstDevice = dst;
  m.dstPitch = bytes / rows;
  m.WidthInBytes = bytes / rows;
  m.Height = rows;
  return check(d->memcpy2DAsync(&m, stream), what);
}

PointerInfo classify(const void* p) {
  PointerInfo info;
  const Driver* d = driver();
  if (d == nullptr || p == nullptr) return info;
  const auto ptr = reinterpret_cast<CUdeviceptr>(p);
  unsigned memType = 0;
  // Memory the driver has never seen (plain malloc) fails with CUDA_ERROR_INVALID_VALUE: that is host memory.
  if (d->pointerGetAttribute(&memType, kPointerAttrMemoryType, ptr) != kSuccess) return info;
  int managed = 0;
  d->pointerGetAttribute(&managed, kPointerAttrIsManaged, ptr);
  if (memType == kMemoryTypeHost && !managed) {  // pinned or registered host memory
    info.pinned = true;
    return info;
  }
  int ordinal = -1;
  d->pointerGetAttribute(&ordinal, kPointerAttrDeviceOrdinal, ptr);
  info.device = ordinal;
  info.kind = managed ? MemKind::Managed : MemKind::Device;
  CUcontext ctx = nullptr;
  d->pointerGetAttribute(&ctx, kPointerAttrContext, ptr);
  // cuMemCreate/cuMemMap allocations (ncclMemAlloc's, PyTorch's expandable segments) belong to no context: the
  // device's primary one.
  if (ctx == nullptr && ordinal >= 0) ctx = primaryContext(ordinal);
  info.context = ctx;
  return info;
}

CUcontext primaryContext(int ordinal) {
  const Driver* d = driver();
  if (d == nullptr || ordinal < 0) return nullptr;
  // Retained once per device, not once per buffer of every op.
  constexpr int kCached = 64;
  static std::atomic<CUcontext> primary[kCached] = {};
  CUcontext ctx = ordinal < kCached ? primary[ordinal].load(std::memory_order_acquire) : nullptr;
  CUdevice dev = 0;
  if (ctx == nullptr && d->deviceGet(&dev, ordinal) == kSuccess && d->primaryCtxRetain(&ctx, dev) == kSuccess &&
      ordinal < kCached) {
    CUcontext expected = nullptr;
    if (!primary[ordinal].compare_exchange_strong(expected, ctx, std::memory_order_acq_rel)) {
      d->primaryCtxRelease(dev);  // another thread cached it first
      ctx = expected;
    }
  }
  return ctx;
}

namespace {
// Sets the calling thread's stream capture mode to relaxed; the mode it had, or -1 where that failed (or there is no
// driver).
int exchangeForRelaxedCaptureMode() {
  const Driver* d = driver();
  if (d == nullptr) return -1;
  int mode = kStreamCaptureModeRelaxed;
  return d->threadExchangeStreamCaptureMode(&mode) == kSuccess ? mode : -1;
}
}  // namespace

RelaxedCaptureMode::RelaxedCaptureMode() : previous_(exchangeForRelaxedCaptureMode()) {}

RelaxedCaptureMode::~RelaxedCaptureMode() {
  if (previous_ < 0) return;
  int mode = previous_;
  driver()->threadExchangeStreamCaptureMode(&mode);
}

void relaxCaptureModeOfThisThread() {
  thread_local bool relaxed = false;
  if (!relaxed) relaxed = exchangeForRelaxedCaptureMode() >= 0;
}

ScopedContext::ScopedContext(CUcontext ctx) {
  const Driver* d = driver();
  if (d == nullptr || ctx == nullptr) return;
  pushed_ = d->ctxPushCurrent(ctx) == kSuccess;
}

ScopedContext::~ScopedContext() {
  if (!pushed_) return;
  CUcontext popped = nullptr;
  driver()->ctxPopCurrent(&popped);
}

}  // namespace cfx::cuda
