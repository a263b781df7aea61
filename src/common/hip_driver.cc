// SPDX-License-Identifier: Apache-2.0
// The HIP runtime behind the Driver table (common layer). Every adapter below keeps the CUDA driver's signature
// and meaning and says what it translates.
#include "common/hip_driver.h"

#include <dlfcn.h>

#include <cstdint>

namespace cfx::cuda {

namespace {

using HipFn = void (*)(void*);

// HIP's entry points, with HIP's own signatures (hipDeviceptr_t, hipStream_t, ... are pointers; enums are int).
struct Hip {
  int (*init)(unsigned);
  const char* (*getErrorString)(int);
  int (*runtimeGetVersion)(int*);
  int (*deviceGet)(int*, int);
  int (*getDeviceCount)(int*);
  int (*deviceGetAttribute)(int*, int, int);
  int (*primaryCtxRetain)(void**, int);
  int (*primaryCtxRelease)(int);
  int (*ctxGetCurrent)(void**);
  int (*ctxSetCurrent)(void*);
  int (*ctxPushCurrent)(void*);
  int (*ctxPopCurrent)(void**);
  int (*ctxGetDevice)(int*);
  int (*pointerGetAttribute)(void*, int, void*);
  int (*malloc)(void**, size_t);
  int (*free)(void*);
  int (*hostMalloc)(void**, size_t, unsigned);
  int (*hostFree)(void*);
  int (*hostGetDevicePointer)(void**, void*, unsigned);
  int (*memGetAddressRange)(void**, size_t*, void*);
  int (*memcpyDtoHAsync)(void*, void*, size_t, void*);
  int (*memcpyHtoDAsync)(void*, void*, size_t, void*);
  int (*memcpyDtoDAsync)(void*, void*, size_t, void*);
  int (*memcpyAsync)(void*, const void*, size_t, int, void*);
  int (*memsetD8Async)(void*, unsigned char, size_t, void*);
  int (*streamCreateWithFlags)(void**, unsigned);
  int (*streamDestroy)(void*);
  int (*streamSynchronize)(void*);
  int (*streamIsCapturing)(void*, int*);
  int (*streamGetCaptureInfo)(void*, int*, unsigned long long*, void**, const void**, size_t*);
  int (*threadExchangeStreamCaptureMode)(int*);
  int (*streamWaitValue32)(void*, void*, uint32_t, unsigned, uint32_t);
  int (*streamWaitValue64)(void*, void*, uint64_t, unsigned, uint64_t);
  int (*streamWriteValue32)(void*, void*, uint32_t, unsigned);
  int (*streamWaitEvent)(void*, void*, unsigned);
  int (*eventCreateWithFlags)(void**, unsigned);
  int (*eventDestroy)(void*);
  int (*eventRecord)(void*, void*);
  int (*eventQuery)(void*);
  int (*eventSynchronize)(void*);
  int (*ipcGetMemHandle)(CUipcMemHandle*, void*);
  int (*ipcOpenMemHandle)(void**, CUipcMemHandle, unsigned);
  int (*ipcCloseMemHandle)(void*);
  int (*moduleLoadData)(void**, const void*);
  int (*moduleUnload)(void*);
  int (*moduleGetFunction)(void**, void*, const char*);
  int (*moduleLaunchKernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                            void**);
  // Optional: ROCm 5.3+ (hipLaunchHostFunc) and graph user objects.
  int (*launchHostFunc)(void*, HipFn, void*);
  int (*userObjectCreate)(void**, void*, HipFn, unsigned, unsigned);
  int (*userObjectRelease)(void*, unsigned);
  int (*graphRetainUserObject)(void*, void*, unsigned, unsigned);
};

Hip H;
int gRuntimeVersion = 0;  // hipRuntimeGetVersion: 50221153 for ROCm 5.2, 60000000 and up for ROCm 6

constexpr int kHipErrorInvalidValue = 1;
constexpr int kHipMemcpyDefault = 4;
constexpr int kCudaMemoryTypeArray = 3;

bool rocm6() { return gRuntimeVersion >= 60000000; }

template <typename Fn>
void resolveInto(void* lib, Fn* slot, const char* name) {
  *slot = reinterpret_cast<Fn>(dlsym(lib, name));
}

// Resolves every entry point; returns the names of the required ones that are missing.
std::vector<std::string> resolveAll(void* lib) {
  std::vector<std::string> missing;
  auto need = [&](auto* slot, const char* name) {
    resolveInto(lib, slot, name);
    if (*slot == nullptr) missing.emplace_back(name);
  };
  need(&H.init, "hipInit");
  need(&H.getErrorString, "hipGetErrorString");
  need(&H.runtimeGetVersion, "hipRuntimeGetVersion");
  need(&H.deviceGet, "hipDeviceGet");
  need(&H.getDeviceCount, "hipGetDeviceCount");
  need(&H.deviceGetAttribute, "hipDeviceGetAttribute");
  need(&H.primaryCtxRetain, "hipDevicePrimaryCtxRetain");
  need(&H.primaryCtxRelease, "hipDevicePrimaryCtxRelease");
  need(&H.ctxGetCurrent, "hipCtxGetCurrent");
  need(&H.ctxSetCurrent, "hipCtxSetCurrent");
  need(&H.ctxPushCurrent, "hipCtxPushCurrent");
  need(&H.ctxPopCurrent, "hipCtxPopCurrent");
  need(&H.ctxGetDevice, "hipCtxGetDevice");
  need(&H.pointerGetAttribute, "hipPointerGetAttribute");
  need(&H.malloc, "hipMalloc");
  need(&H.free, "hipFree");
  need(&H.hostMalloc, "hipHostMalloc");
  need(&H.hostFree, "hipHostFree");
  need(&H.hostGetDevicePointer, "hipHostGetDevicePointer");
  need(&H.memGetAddressRange, "hipMemGetAddressRange");
  need(&H.memcpyDtoHAsync, "hipMemcpyDtoHAsync");
  need(&H.memcpyHtoDAsync, "hipMemcpyHtoDAsync");
  need(&H.memcpyDtoDAsync, "hipMemcpyDtoDAsync");
  need(&H.memcpyAsync, "hipMemcpyAsync");
  need(&H.memsetD8Async, "hipMemsetD8Async");
  need(&H.streamCreateWithFlags, "hipStreamCreateWithFlags");
  need(&H.streamDestroy, "hipStreamDestroy");
  need(&H.streamSynchronize, "hipStreamSynchronize");
  need(&H.streamIsCapturing, "hipStreamIsCapturing");
  need(&H.streamGetCaptureInfo, "hipStreamGetCaptureInfo_v2");
  need(&H.threadExchangeStreamCaptureMode, "hipThreadExchangeStreamCaptureMode");
  need(&H.streamWaitValue32, "hipStreamWaitValue32");
  need(&H.streamWaitValue64, "hipStreamWaitValue64");
  need(&H.streamWriteValue32, "hipStreamWriteValue32");
  need(&H.streamWaitEvent, "hipStreamWaitEvent");
  need(&H.eventCreateWithFlags, "hipEventCreateWithFlags");
  need(&H.eventDestroy, "hipEventDestroy");
  need(&H.eventRecord, "hipEventRecord");
  need(&H.eventQuery, "hipEventQuery");
  need(&H.eventSynchronize, "hipEventSynchronize");
  need(&H.ipcGetMemHandle, "hipIpcGetMemHandle");
  need(&H.ipcOpenMemHandle, "hipIpcOpenMemHandle");
  need(&H.ipcCloseMemHandle, "hipIpcCloseMemHandle");
  need(&H.moduleLoadData, "hipModuleLoadData");
  need(&H.moduleUnload, "hipModuleUnload");
  need(&H.moduleGetFunction, "hipModuleGetFunction");
  need(&H.moduleLaunchKernel, "hipModuleLaunchKernel");
  resolveInto(lib, &H.launchHostFunc, "hipLaunchHostFunc");
  resolveInto(lib, &H.userObjectCreate, "hipUserObjectCreate");
  resolveInto(lib, &H.userObjectRelease, "hipUserObjectRelease");
  resolveInto(lib, &H.graphRetainUserObject, "hipGraphRetainUserObject");
  return missing;
}

void* ptr(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

// ---- adapters: CUDA driver signatures over HIP ----

CUresult aGetErrorString(CUresult rc, const char** text) {
  *text = H.getErrorString(rc);
  return kSuccess;
}
CUresult aDeviceGetAttribute(int* value, int attr, CUdevice dev) {
  // CUDA's attribute numbers to HIP's (hipDeviceAttribute_t, stable since ROCm 5.0).
  int hip = -1;
  switch (attr) {
    case kDeviceAttrMultiprocessorCount: hip = 63; break;
    case kDeviceAttrComputeCapabilityMajor: hip = 23; break;
    case kDeviceAttrComputeCapabilityMinor: hip = 61; break;
    case kDeviceAttrPciBusId: hip = 67; break;
    case kDeviceAttrPciDeviceId: hip = 68; break;
    case kDeviceAttrPciDomainId: hip = 69; break;
    default: return kHipErrorInvalidValue;
  }
  return H.deviceGetAttribute(value, hip, dev);
}
CUresult aPrimaryCtxRetain(CUcontext* ctx, CUdevice dev) { return H.primaryCtxRetain(reinterpret_cast<void**>(ctx), dev); }
CUresult aCtxGetCurrent(CUcontext* ctx) { return H.ctxGetCurrent(reinterpret_cast<void**>(ctx)); }
CUresult aCtxSetCurrent(CUcontext ctx) { return H.ctxSetCurrent(ctx); }
CUresult aCtxPushCurrent(CUcontext ctx) { return H.ctxPushCurrent(ctx); }
CUresult aCtxPopCurrent(CUcontext* ctx) { return H.ctxPopCurrent(reinterpret_cast<void**>(ctx)); }
CUresult aPointerGetAttribute(void* data, int attr, CUdeviceptr p) {
  const int rc = H.pointerGetAttribute(data, attr, ptr(p));  // attribute numbers are CUDA's in HIP too
  if (rc != kSuccess || attr != kPointerAttrMemoryType) return rc;
  // hipMemoryType to CUmemorytype. ROCm 5: host 0, device 1, array 2, unified 3. ROCm 6 took CUDA's order:
  // unregistered 0, host 1, device 2, managed 3, array 10, unified 11.
  auto* type = static_cast<unsigned*>(data);
  if (rocm6()) {
    switch (*type) {
      case 0: return kHipErrorInvalidValue;  // memory HIP never saw: host memory to classify()
      case 1: *type = kMemoryTypeHost; break;
      case 2: case 3: *type = kMemoryTypeDevice; break;  // managed memory is told apart by IS_MANAGED
      case 10: *type = kCudaMemoryTypeArray; break;
      default: *type = kMemoryTypeUnified; break;
    }
  } else {
    switch (*type) {
      case 0: *type = kMemoryTypeHost; break;
      case 1: *type = kMemoryTypeDevice; break;
      case 2: *type = kCudaMemoryTypeArray; break;
      default: *type = kMemoryTypeUnified; break;
    }
  }
  return kSuccess;
}
CUresult aMemAlloc(CUdeviceptr* p, size_t bytes) { return H.malloc(reinterpret_cast<void**>(p), bytes); }
CUresult aMemFree(CUdeviceptr p) { return H.free(ptr(p)); }
CUresult aMemHostGetDevicePointer(CUdeviceptr* dev, void* host, unsigned flags) {
  return H.hostGetDevicePointer(reinterpret_cast<void**>(dev), host, flags);
}
CUresult aMemGetAddressRange(CUdeviceptr* base, size_t* size, CUdeviceptr p) {
  return H.memGetAddressRange(reinterpret_cast<void**>(base), size, ptr(p));
}
CUresult aMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream s) { return H.memcpyDtoHAsync(dst, ptr(src), n, s); }
CUresult aMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  return H.memcpyHtoDAsync(ptr(dst), const_cast<void*>(src), n, s);
}
CUresult aMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return H.memcpyDtoDAsync(ptr(dst), ptr(src), n, s);
}
CUresult aMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return H.memcpyAsync(ptr(dst), ptr(src), n, kHipMemcpyDefault, s);
}
CUresult aMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream s) { return H.memsetD8Async(ptr(p), v, n, s); }
CUresult aStreamCreate(CUstream* s, unsigned flags) { return H.streamCreateWithFlags(reinterpret_cast<void**>(s), flags); }
CUresult aStreamDestroy(CUstream s) { return H.streamDestroy(s); }
CUresult aStreamSynchronize(CUstream s) { return H.streamSynchronize(s); }
CUresult aStreamGetCtx(CUstream, CUcontext* ctx) {
  // HIP has no per-stream context query; a stream belongs to the device current where it was made.
  return H.ctxGetCurrent(reinterpret_cast<void**>(ctx));
}
CUresult aStreamIsCapturing(CUstream s, int* status) { return H.streamIsCapturing(s, status); }
CUresult aStreamGetCaptureInfo(CUstream s, int* status, unsigned long long* id, CUgraph* graph, const CUgraphNode** deps,
                               size_t* numDeps) {
  return H.streamGetCaptureInfo(s, status, id, reinterpret_cast<void**>(graph), reinterpret_cast<const void**>(deps),
                                numDeps);
}
CUresult aUserObjectCreate(CUuserObject* object, void* p, CUhostFn destroy, unsigned refs, unsigned flags) {
  if (H.userObjectCreate == nullptr) return kHipErrorInvalidValue;  // refused by the capture path (hip_driver.h)
  return H.userObjectCreate(reinterpret_cast<void**>(object), p, destroy, refs, flags);
}
CUresult aUserObjectRelease(CUuserObject object, unsigned count) {
  return H.userObjectRelease == nullptr ? kHipErrorInvalidValue : H.userObjectRelease(object, count);
}
CUresult aGraphRetainUserObject(CUgraph graph, CUuserObject object, unsigned count, unsigned flags) {
  return H.graphRetainUserObject == nullptr ? kHipErrorInvalidValue : H.graphRetainUserObject(graph, object, count, flags);
}
CUresult aStreamWaitValue32(CUstream s, CUdeviceptr addr, uint32_t value, unsigned flags) {
  return H.streamWaitValue32(s, ptr(addr), value, flags, 0xffffffffu);  // HIP adds a mask
}
CUresult aStreamWaitValue64(CUstream s, CUdeviceptr addr, uint64_t value, unsigned flags) {
  return H.streamWaitValue64(s, ptr(addr), value, flags, ~uint64_t{0});
}
CUresult aStreamWriteValue32(CUstream s, CUdeviceptr addr, uint32_t value, unsigned flags) {
  return H.streamWriteValue32(s, ptr(addr), value, flags);
}
CUresult aStreamWaitEvent(CUstream s, CUevent e, unsigned flags) { return H.streamWaitEvent(s, e, flags); }
CUresult aLaunchHostFunc(CUstream s, CUhostFn fn, void* data) { return H.launchHostFunc(s, fn, data); }
CUresult aEventCreate(CUevent* e, unsigned flags) { return H.eventCreateWithFlags(reinterpret_cast<void**>(e), flags); }
CUresult aEventDestroy(CUevent e) { return H.eventDestroy(e); }
CUresult aEventRecord(CUevent e, CUstream s) { return H.eventRecord(e, s); }
CUresult aEventQuery(CUevent e) { return H.eventQuery(e); }
CUresult aEventSynchronize(CUevent e) { return H.eventSynchronize(e); }
CUresult aIpcGetMemHandle(CUipcMemHandle* h, CUdeviceptr p) { return H.ipcGetMemHandle(h, ptr(p)); }
CUresult aIpcOpenMemHandle(CUdeviceptr* p, CUipcMemHandle h, unsigned flags) {
  // hipIpcMemLazyEnablePeerAccess is 0 before ROCm 6 and 1 from it; CUDA's is 1.
  const unsigned hipFlags = (flags & kIpcLazyEnablePeerAccess) != 0 && rocm6() ? 1u : 0u;
  return H.ipcOpenMemHandle(reinterpret_cast<void**>(p), h, hipFlags);
}
CUresult aIpcCloseMemHandle(CUdeviceptr p) { return H.ipcCloseMemHandle(ptr(p)); }
CUresult aModuleLoadData(CUmodule* m, const void* image) { return H.moduleLoadData(reinterpret_cast<void**>(m), image); }
CUresult aModuleUnload(CUmodule m) { return H.moduleUnload(m); }
CUresult aModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  return H.moduleGetFunction(reinterpret_cast<void**>(f), m, name);
}
CUresult aLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                       unsigned shared, CUstream s, void** params, void** extra) {
  return H.moduleLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, s, params, extra);
}

}  // namespace

std::vector<std::string> hipMissingEntryPoints(void* lib) { return resolveAll(lib); }

const Driver* loadHipDriver(Driver* d, std::string* why) {
  void* lib = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) lib = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    *why = "no HIP runtime (libamdhip64.so.6 or .5)";
    return nullptr;
  }
  const std::vector<std::string> missing = resolveAll(lib);
  if (!missing.empty()) {
    *why = "libamdhip64 lacks " + missing.front() + " (ROCm too old?)";
    return nullptr;
  }
  if (H.launchHostFunc == nullptr) {
    // The stream protocol (core/device_stream.h) marks its place in a stream with a host function.
    *why = "libamdhip64 lacks hipLaunchHostFunc (ROCm 5.3 or later is needed for device buffers)";
    return nullptr;
  }
  if (H.init(0) != kSuccess) {
    *why = "hipInit failed";
    return nullptr;
  }
  int count = 0;
  if (H.getDeviceCount(&count) != kSuccess || count == 0) {
    *why = "hipInit found no AMD GPU";
    return nullptr;
  }
  H.runtimeGetVersion(&gRuntimeVersion);
  d->init = H.init;
  d->getErrorString = aGetErrorString;
  d->deviceGet = H.deviceGet;
  d->deviceGetCount = H.getDeviceCount;
  d->deviceGetAttribute = aDeviceGetAttribute;
  d->primaryCtxRetain = aPrimaryCtxRetain;
  d->primaryCtxRelease = H.primaryCtxRelease;
  d->ctxGetCurrent = aCtxGetCurrent;
  d->ctxSetCurrent = aCtxSetCurrent;
  d->ctxPushCurrent = aCtxPushCurrent;
  d->ctxPopCurrent = aCtxPopCurrent;
  d->ctxGetDevice = H.ctxGetDevice;
  d->pointerGetAttribute = aPointerGetAttribute;
  d->memAlloc = aMemAlloc;
  d->memFree = aMemFree;
  d->memHostAlloc = H.hostMalloc;  // hipHostMallocPortable / Mapped have CUDA's values
  d->memFreeHost = H.hostFree;
  d->memHostGetDevicePointer = aMemHostGetDevicePointer;
  d->memGetAddressRange = aMemGetAddressRange;
  d->memcpyDtoHAsync = aMemcpyDtoHAsync;
  d->memcpyHtoDAsync = aMemcpyHtoDAsync;
  d->memcpy2DAsync = nullptr;  // the table may hold CUDA's from a failed cuInit; small copies go in one piece
  // No VMM under HIP (the table may hold CUDA's entries): ncclMemAlloc uses hipMalloc.
  d->memGetAllocationGranularity = nullptr;
  d->memCreate = nullptr;
  d->memRelease = nullptr;
  d->memAddressReserve = nullptr;
  d->memAddressFree = nullptr;
  d->memMap = nullptr;
  d->memUnmap = nullptr;
  d->memSetAccess = nullptr;
  d->memExportToShareableHandle = nullptr;
  d->memImportFromShareableHandle = nullptr;
  d->memcpyDtoDAsync = aMemcpyDtoDAsync;
  d->memcpyAsync = aMemcpyAsync;
  d->memsetD8Async = aMemsetD8Async;
  d->streamCreate = aStreamCreate;
  d->streamDestroy = aStreamDestroy;
  d->streamSynchronize = aStreamSynchronize;
  d->streamGetCtx = aStreamGetCtx;
  d->streamIsCapturing = aStreamIsCapturing;
  d->streamGetCaptureInfo = aStreamGetCaptureInfo;
  d->threadExchangeStreamCaptureMode = H.threadExchangeStreamCaptureMode;
  d->userObjectCreate = aUserObjectCreate;
  d->userObjectRelease = aUserObjectRelease;
  d->graphRetainUserObject = aGraphRetainUserObject;
  d->streamWaitValue32 = aStreamWaitValue32;  // hipStreamWaitValueGte has CUDA's GEQ number (0), not its compare
  d->streamWaitValue64 = aStreamWaitValue64;  // so counters are waited on as 64 bits (cuda_driver.h)
  d->streamWriteValue32 = aStreamWriteValue32;
  d->streamWaitEvent = aStreamWaitEvent;
  d->launchHostFunc = aLaunchHostFunc;
  d->eventCreate = aEventCreate;  // hipEventBlockingSync / DisableTiming / Interprocess have CUDA's values
  d->eventDestroy = aEventDestroy;
  d->eventRecord = aEventRecord;
  d->eventQuery = aEventQuery;  // hipErrorNotReady is CUDA's 600
  d->eventSynchronize = aEventSynchronize;
  d->ipcGetMemHandle = aIpcGetMemHandle;  // HIP's handle is 64 bytes, as CUDA's
  d->ipcOpenMemHandle = aIpcOpenMemHandle;
  d->ipcCloseMemHandle = aIpcCloseMemHandle;
  d->moduleLoadData = aModuleLoadData;
  d->moduleUnload = aModuleUnload;
  d->moduleGetFunction = aModuleGetFunction;
  d->launchKernel = aLaunchKernel;
  return d;
}

}  // namespace cfx::cuda
