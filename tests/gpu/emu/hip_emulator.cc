// SPDX-License-Identifier: Apache-2.0
// A CPU stand-in for AMD's HIP runtime (libamdhip64.so.5), for tests only: the HIP entry points the library
// resolves (common/hip_driver.cc), defined against ROCm's own header (hip/hip_runtime_api.h, from Debian's
// libamdhip64-dev) and run on the CUDA driver stand-in (cuda_emulator.cc) underneath. No AMD GPU has been lent to
// this project, so this is what runs the library's HIP adapters: every translation they make (attribute numbers,
// memory type values, the IPC flag, the wait mask, deviceptr-as-void* signatures, which kernel image is loaded)
// meets the header's definitions here, and a wrong one fails the device tests (ctest EmulatedHip.*).
//
// It reports the header's runtime version (ROCm 5.2 on Debian 12), so the library takes its ROCm 5 branches, and
// answers in ROCm 5.2's terms: hipMemoryType host 0 / device 1, hipIpcMemLazyEnablePeerAccess 0. It also offers
// the graph user objects of ROCm 5.3 and later (not in the 5.2 header), so graph capture runs too. Error codes are
// CUDA's numbers, which HIP kept.
#include <hip/hip_runtime_api.h>

#include <cstring>

#include "cuda_emulator.h"
#include "emu_internal.h"

namespace {

using cfx::cuda::CUresult;
using cfx::emu::CUdeviceptr;

hipError_t rc(CUresult r) { return static_cast<hipError_t>(r); }

CUdeviceptr dptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// HIP initialises itself on first use.
void ensureInit() { cuInit(0); }

// A HIP thread always has a current device (0 until hipSetDevice); the driver underneath wants a context.
void ensureContext() {
  ensureInit();
  void* ctx = nullptr;
  if (cuCtxGetCurrent(&ctx) == 0 && ctx != nullptr) return;
  if (cuDevicePrimaryCtxRetain(&ctx, 0) == 0) cuCtxSetCurrent(ctx);
}

// A HIP device attribute as the CUDA attribute the driver stand-in answers; -1 for one it does not model.
int cudaAttribute(hipDeviceAttribute_t a) {
  switch (a) {
    case hipDeviceAttributeMultiprocessorCount: return cfx::cuda::kDeviceAttrMultiprocessorCount;
    case hipDeviceAttributeComputeCapabilityMajor: return cfx::cuda::kDeviceAttrComputeCapabilityMajor;
    case hipDeviceAttributeComputeCapabilityMinor: return cfx::cuda::kDeviceAttrComputeCapabilityMinor;
    case hipDeviceAttributePciBusId: return cfx::cuda::kDeviceAttrPciBusId;
    case hipDeviceAttributePciDeviceId: return cfx::cuda::kDeviceAttrPciDeviceId;
    case hipDeviceAttributePciDomainID: return cfx::cuda::kDeviceAttrPciDomainId;
    default: return -1;
  }
}

// ROCm documents its GTE wait as a plain compare of the masked word, (*ptr & mask) >= value, where CUDA's GEQ is
// cyclic; the stand-in compares as ROCm says, so a library that counted on CUDA's wrap-around here would misorder
// (the library's stream flag starts just below 2^32 to make every test cross the wrap: core/device_stream.h).
template <typename T>
hipError_t waitAtLeast(hipStream_t stream, void* ptr, T value, unsigned flags, T mask) {
  if (flags != hipStreamWaitValueGte) return hipErrorNotSupported;  // the only compare the library uses
  if (!cfx::emu::isTracked(ptr)) return hipErrorInvalidValue;
  const T* word = static_cast<const T*>(ptr);
  cfx::emu::submit(cfx::emu::streamOf(stream), [=] {
    cfx::emu::pollUntil([=] { return (__atomic_load_n(word, __ATOMIC_ACQUIRE) & mask) >= value; });
  });
  return hipSuccess;
}
}  // namespace

extern "C" {

// Declared by ROCm 5.3 and later only.
__attribute__((visibility("default"))) hipError_t hipUserObjectCreate(void** object, void* ptr, hipHostFn_t destroy,
                                                                     unsigned initialRefcount, unsigned flags);
__attribute__((visibility("default"))) hipError_t hipUserObjectRelease(void* object, unsigned count);
__attribute__((visibility("default"))) hipError_t hipGraphRetainUserObject(hipGraph_t graph, void* object,
                                                                          unsigned count, unsigned flags);

#define CFX_HIP_API __attribute__((visibility("default"))) hipError_t

CFX_HIP_API hipInit(unsigned flags) { return rc(cuInit(flags)); }

__attribute__((visibility("default"))) const char* hipGetErrorString(hipError_t error) {
  const char* text = nullptr;
  return cuGetErrorString(error, &text) == 0 ? text : "unknown error";
}

CFX_HIP_API hipRuntimeGetVersion(int* version) {
  if (version == nullptr) return hipErrorInvalidValue;
  *version = HIP_VERSION;
  return hipSuccess;
}

CFX_HIP_API hipDeviceGet(hipDevice_t* device, int ordinal) {
  ensureInit();
  return rc(cuDeviceGet(device, ordinal));
}

CFX_HIP_API hipGetDeviceCount(int* count) {
  ensureInit();
  return rc(cuDeviceGetCount(count));
}

CFX_HIP_API hipDeviceGetAttribute(int* value, hipDeviceAttribute_t attr, int device) {
  const int cudaAttr = cudaAttribute(attr);
  if (cudaAttr < 0) return hipErrorInvalidValue;
  return rc(cuDeviceGetAttribute(value, cudaAttr, device));
}

CFX_HIP_API hipDevicePrimaryCtxRetain(hipCtx_t* ctx, hipDevice_t device) {
  return rc(cuDevicePrimaryCtxRetain(reinterpret_cast<void**>(ctx), device));
}
CFX_HIP_API hipDevicePrimaryCtxRelease(hipDevice_t device) { return rc(cuDevicePrimaryCtxRelease_v2(device)); }
CFX_HIP_API hipCtxGetCurrent(hipCtx_t* ctx) { return rc(cuCtxGetCurrent(reinterpret_cast<void**>(ctx))); }
CFX_HIP_API hipCtxSetCurrent(hipCtx_t ctx) { return rc(cuCtxSetCurrent(ctx)); }
CFX_HIP_API hipCtxPushCurrent(hipCtx_t ctx) { return rc(cuCtxPushCurrent_v2(ctx)); }
CFX_HIP_API hipCtxPopCurrent(hipCtx_t* ctx) { return rc(cuCtxPopCurrent_v2(reinterpret_cast<void**>(ctx))); }
CFX_HIP_API hipCtxGetDevice(hipDevice_t* device) { return rc(cuCtxGetDevice(device)); }

// Pointer attribute numbers are CUDA's in HIP; the memory type values are ROCm 5's own (host 0, device 1).
CFX_HIP_API hipPointerGetAttribute(void* data, hipPointer_attribute attribute, hipDeviceptr_t ptr) {
  const CUresult r = cuPointerGetAttribute(data, attribute, dptr(ptr));
  if (r != 0 || attribute != HIP_POINTER_ATTRIBUTE_MEMORY_TYPE) return rc(r);
  auto* type = static_cast<unsigned*>(data);
  *type = *type == cfx::cuda::kMemoryTypeDevice ? hipMemoryTypeDevice : hipMemoryTypeHost;
  return hipSuccess;
}

CFX_HIP_API hipMalloc(void** ptr, size_t size) {
  if (ptr == nullptr) return hipErrorInvalidValue;
  ensureContext();
  CUdeviceptr p = 0;
  const CUresult r = cuMemAlloc_v2(&p, size);
  *ptr = reinterpret_cast<void*>(p);
  return rc(r);
}
CFX_HIP_API hipFree(void* ptr) { return rc(cuMemFree_v2(dptr(ptr))); }
CFX_HIP_API hipHostMalloc(void** ptr, size_t size, unsigned flags) {
  ensureContext();
  return rc(cuMemHostAlloc(ptr, size, flags));
}
CFX_HIP_API hipHostFree(void* ptr) { return rc(cuMemFreeHost(ptr)); }
CFX_HIP_API hipHostGetDevicePointer(void** devPtr, void* hostPtr, unsigned flags) {
  if (devPtr == nullptr) return hipErrorInvalidValue;
  CUdeviceptr p = 0;
  const CUresult r = cuMemHostGetDevicePointer_v2(&p, hostPtr, flags);
  *devPtr = reinterpret_cast<void*>(p);
  return rc(r);
}
CFX_HIP_API hipMemGetAddressRange(hipDeviceptr_t* base, size_t* size, hipDeviceptr_t ptr) {
  CUdeviceptr b = 0;
  const CUresult r = cuMemGetAddressRange_v2(base == nullptr ? nullptr : &b, size, dptr(ptr));
  if (base != nullptr) *base = reinterpret_cast<void*>(b);
  return rc(r);
}

CFX_HIP_API hipMemcpyDtoHAsync(void* dst, hipDeviceptr_t src, size_t bytes, hipStream_t stream) {
  return rc(cuMemcpyDtoHAsync_v2(dst, dptr(src), bytes, stream));
}
CFX_HIP_API hipMemcpyHtoDAsync(hipDeviceptr_t dst, void* src, size_t bytes, hipStream_t stream) {
  return rc(cuMemcpyHtoDAsync_v2(dptr(dst), src, bytes, stream));
}
CFX_HIP_API hipMemcpyDtoDAsync(hipDeviceptr_t dst, hipDeviceptr_t src, size_t bytes, hipStream_t stream) {
  return rc(cuMemcpyDtoDAsync_v2(dptr(dst), dptr(src), bytes, stream));
}
CFX_HIP_API hipMemcpyAsync(void* dst, const void* src, size_t bytes, hipMemcpyKind kind, hipStream_t stream) {
  if (kind != hipMemcpyDefault) return hipErrorInvalidValue;  // the library lets the runtime tell the kinds apart
  return rc(cuMemcpyAsync(dptr(dst), dptr(src), bytes, stream));
}
CFX_HIP_API hipMemsetD8Async(hipDeviceptr_t dst, unsigned char value, size_t bytes, hipStream_t stream) {
  return rc(cuMemsetD8Async(dptr(dst), value, bytes, stream));
}

CFX_HIP_API hipStreamCreateWithFlags(hipStream_t* stream, unsigned flags) {
  ensureContext();
  return rc(cuStreamCreate(reinterpret_cast<void**>(stream), flags));
}
CFX_HIP_API hipStreamDestroy(hipStream_t stream) { return rc(cuStreamDestroy_v2(stream)); }
CFX_HIP_API hipStreamSynchronize(hipStream_t stream) { return rc(cuStreamSynchronize(stream)); }
CFX_HIP_API hipStreamIsCapturing(hipStream_t stream, hipStreamCaptureStatus* status) {
  int s = 0;
  const CUresult r = cuStreamIsCapturing(stream, status == nullptr ? nullptr : &s);
  if (status != nullptr) *status = static_cast<hipStreamCaptureStatus>(s);
  return rc(r);
}
CFX_HIP_API hipStreamGetCaptureInfo_v2(hipStream_t stream, hipStreamCaptureStatus* status, unsigned long long* id,
                                       hipGraph_t* graph, const hipGraphNode_t** deps, size_t* numDeps) {
  int s = 0;
  const CUresult r = cuStreamGetCaptureInfo_v2(stream, status == nullptr ? nullptr : &s, id,
                                               reinterpret_cast<void**>(graph), reinterpret_cast<const void**>(deps),
                                               numDeps);
  if (status != nullptr) *status = static_cast<hipStreamCaptureStatus>(s);
  return rc(r);
}
CFX_HIP_API hipThreadExchangeStreamCaptureMode(hipStreamCaptureMode* mode) {
  if (mode == nullptr) return hipErrorInvalidValue;
  int m = *mode;
  const CUresult r = cuThreadExchangeStreamCaptureMode(&m);
  *mode = static_cast<hipStreamCaptureMode>(m);
  return rc(r);
}
CFX_HIP_API hipStreamBeginCapture(hipStream_t stream, hipStreamCaptureMode mode) {
  return rc(cuStreamBeginCapture_v2(stream, mode));
}
CFX_HIP_API hipStreamEndCapture(hipStream_t stream, hipGraph_t* graph) {
  return rc(cuStreamEndCapture(stream, reinterpret_cast<void**>(graph)));
}
CFX_HIP_API hipGraphInstantiateWithFlags(hipGraphExec_t* exec, hipGraph_t graph, unsigned long long flags) {
  return rc(cuGraphInstantiateWithFlags(reinterpret_cast<void**>(exec), graph, flags));
}
CFX_HIP_API hipGraphLaunch(hipGraphExec_t exec, hipStream_t stream) { return rc(cuGraphLaunch(exec, stream)); }
CFX_HIP_API hipGraphExecDestroy(hipGraphExec_t exec) { return rc(cuGraphExecDestroy(exec)); }
CFX_HIP_API hipGraphDestroy(hipGraph_t graph) { return rc(cuGraphDestroy(graph)); }
CFX_HIP_API hipUserObjectCreate(void** object, void* ptr, hipHostFn_t destroy, unsigned initialRefcount,
                                unsigned flags) {
  return rc(cuUserObjectCreate(object, ptr, destroy, initialRefcount, flags));
}
CFX_HIP_API hipUserObjectRelease(void* object, unsigned count) { return rc(cuUserObjectRelease(object, count)); }
CFX_HIP_API hipGraphRetainUserObject(hipGraph_t graph, void* object, unsigned count, unsigned flags) {
  return rc(cuGraphRetainUserObject(graph, object, count, flags));
}

CFX_HIP_API hipStreamWaitValue32(hipStream_t stream, void* ptr, uint32_t value, unsigned flags, uint32_t mask) {
  return waitAtLeast(stream, ptr, value, flags, mask);
}
CFX_HIP_API hipStreamWaitValue64(hipStream_t stream, void* ptr, uint64_t value, unsigned flags, uint64_t mask) {
  return waitAtLeast(stream, ptr, value, flags, mask);
}
CFX_HIP_API hipStreamWriteValue32(hipStream_t stream, void* ptr, uint32_t value, unsigned flags) {
  return rc(cuStreamWriteValue32_v2(stream, dptr(ptr), value, flags));
}
CFX_HIP_API hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned flags) {
  return rc(cuStreamWaitEvent(stream, event, flags));
}
CFX_HIP_API hipLaunchHostFunc(hipStream_t stream, hipHostFn_t fn, void* userData) {
  return rc(cuLaunchHostFunc(stream, fn, userData));
}

CFX_HIP_API hipEventCreateWithFlags(hipEvent_t* event, unsigned flags) {
  return rc(cuEventCreate(reinterpret_cast<void**>(event), flags));
}
CFX_HIP_API hipEventDestroy(hipEvent_t event) { return rc(cuEventDestroy_v2(event)); }
CFX_HIP_API hipEventRecord(hipEvent_t event, hipStream_t stream) { return rc(cuEventRecord(event, stream)); }
CFX_HIP_API hipEventQuery(hipEvent_t event) { return rc(cuEventQuery(event)); }
CFX_HIP_API hipEventSynchronize(hipEvent_t event) { return rc(cuEventSynchronize(event)); }

CFX_HIP_API hipIpcGetMemHandle(hipIpcMemHandle_t* handle, void* ptr) {
  static_assert(sizeof(hipIpcMemHandle_t) == sizeof(cfx::cuda::CUipcMemHandle));
  return rc(cuIpcGetMemHandle(handle, dptr(ptr)));
}
// ROCm 5 defines one flag, hipIpcMemLazyEnablePeerAccess, as 0 (CUDA's is 1).
CFX_HIP_API hipIpcOpenMemHandle(void** ptr, hipIpcMemHandle_t handle, unsigned flags) {
  if (ptr == nullptr || flags != hipIpcMemLazyEnablePeerAccess) return hipErrorInvalidValue;
  cfx::cuda::CUipcMemHandle h;
  std::memcpy(&h, &handle, sizeof(h));
  CUdeviceptr p = 0;
  const CUresult r = cuIpcOpenMemHandle_v2(&p, h, 1);
  *ptr = reinterpret_cast<void*>(p);
  return rc(r);
}
CFX_HIP_API hipIpcCloseMemHandle(void* ptr) { return rc(cuIpcCloseMemHandle(dptr(ptr))); }

// A HIP module is a clang offload bundle (hipcc's code objects); a CUDA fatbin here means the library loaded the
// wrong image.
CFX_HIP_API hipModuleLoadData(hipModule_t* module, const void* image) {
  static constexpr char kBundleMagic[] = "__CLANG_OFFLOAD_BUNDLE__";
  if (image == nullptr || std::memcmp(image, kBundleMagic, sizeof(kBundleMagic) - 1) != 0) {
    return hipErrorInvalidImage;
  }
  return rc(cuModuleLoadData(reinterpret_cast<void**>(module), image));
}
CFX_HIP_API hipModuleUnload(hipModule_t module) { return rc(cuModuleUnload(module)); }
CFX_HIP_API hipModuleGetFunction(hipFunction_t* fn, hipModule_t module, const char* name) {
  return rc(cuModuleGetFunction(reinterpret_cast<void**>(fn), module, name));
}
CFX_HIP_API hipModuleLaunchKernel(hipFunction_t fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                  unsigned bz, unsigned sharedBytes, hipStream_t stream, void** params, void** extra) {
  return rc(cuLaunchKernel(fn, gx, gy, gz, bx, by, bz, sharedBytes, stream, params, extra));
}

}  // extern "C"
