// SPDX-License-Identifier: Apache-2.0
// The CUDA driver, loaded with dlopen (common layer).
//
// libnccl.so.2 must load and run where no GPU and no CUDA exist, so nothing links against CUDA: the first call
// that needs the driver opens libcuda.so.1 and resolves the few entry points Conflux uses, by their versioned
// names. Only the types and constants those calls take are declared here, with the values the driver API
// documents; they are part of the driver's stable ABI.
//
// Everything else asks one question first: is this pointer device memory? `classify` answers Host whenever the
// driver is absent, so host-only machines never pay more than one failed dlopen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace cfx::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphNode = struct CUgraphNode_st*;
using CUuserObject = struct CUuserObject_st*;
using CUhostFn = void (*)(void* userData);

struct CUipcMemHandle {
  unsigned char reserved[64];
};
struct CUipcEventHandle {
  unsigned char reserved[64];
};

constexpr CUresult kSuccess = 0;
constexpr CUresult kErrorNotReady = 600;
constexpr CUresult kErrorInvalidValue = 1;

// Pointer attributes (CUpointer_attribute) and memory types (CUmemorytype).
constexpr int kPointerAttrContext = 1;
constexpr int kPointerAttrMemoryType = 2;
constexpr int kPointerAttrIsManaged = 8;
constexpr int kPointerAttrDeviceOrdinal = 9;
constexpr int kPointerAttrRangeStart = 11;
constexpr int kPointerAttrRangeSize = 12;
constexpr unsigned kMemoryTypeHost = 1;
constexpr unsigned kMemoryTypeDevice = 2;
constexpr unsigned kMemoryTypeUnified = 4;

constexpr unsigned kStreamNonBlocking = 1;
constexpr unsigned kEventBlockingSync = 1;
constexpr unsigned kEventDisableTiming = 2;
constexpr unsigned kEventInterprocess = 4;
constexpr unsigned kHostAllocPortable = 1;
constexpr unsigned kHostAllocDeviceMap = 2;
// cuMemHostRegister's flags (CU_MEMHOSTREGISTER_PORTABLE, _DEVICEMAP).
constexpr unsigned kHostRegisterPortable = 1;
constexpr unsigned kHostRegisterDeviceMap = 2;
constexpr unsigned kStreamWaitValueGeq = 0;
constexpr unsigned kIpcLazyEnablePeerAccess = 1;
constexpr int kStreamCaptureNone = 0;  // CUstreamCaptureStatus
constexpr int kStreamCaptureActive = 1;
constexpr int kStreamCaptureModeRelaxed = 2;  // CUstreamCaptureMode
constexpr unsigned kUserObjectNoDestructorSync = 1;
constexpr unsigned kGraphUserObjectMove = 1;
constexpr int kDeviceAttrPciBusId = 33;
constexpr int kDeviceAttrPciDeviceId = 34;
constexpr int kDeviceAttrPciDomainId = 50;
constexpr int kDeviceAttrComputeCapabilityMajor = 75;
constexpr int kDeviceAttrComputeCapabilityMinor = 76;
constexpr int kDeviceAttrMultiprocessorCount = 16;
constexpr int kDeviceAttrVirtualMemoryManagement = 102;
constexpr int kDeviceAttrHandleTypePosixFd = 103;

// The virtual memory management API (cuMemCreate and friends): CUmemGenericAllocationHandle, and the values
// ncclMemAlloc passes (transport/cuda_ipc/vmm_memory.h).
using CUmemGenericAllocationHandle = unsigned long long;
constexpr int kMemAllocationTypePinned = 1;
constexpr int kMemHandleTypePosixFd = 1;
constexpr int kMemLocationTypeDevice = 1;
constexpr int kMemAccessReadWrite = 3;
constexpr int kMemAllocGranularityRecommended = 1;
// CUmemLocation, CUmemAllocationProp and CUmemAccessDesc (cuda.h); tests/abi checks them against the toolkit.
struct MemLocation {
  int type = 0;
  int id = 0;
};
struct MemAllocationProp {
  int type = 0;
  int requestedHandleTypes = 0;
  MemLocation location;
  void* win32HandleMetaData = nullptr;
  struct {
    unsigned char compressionType = 0;
    unsigned char gpuDirectRDMACapable = 0;
    unsigned short usage = 0;
    unsigned char reserved[4] = {};
  } allocFlags;
};
struct MemAccessDesc {
  MemLocation location;
  int flags = 0;
};

// CUDA_MEMCPY2D (cuda.h), for cuMemcpy2DAsync; tests/abi checks the layout against the toolkit's header.
struct Memcpy2D {
  size_t srcXInBytes = 0;
  size_t srcY = 0;
  unsigned srcMemoryType = 0;  // kMemoryType*
  const void* srcHost = nullptr;
  CUdeviceptr srcDevice = 0;
  void* srcArray = nullptr;
  size_t srcPitch = 0;
  size_t dstXInBytes = 0;
  size_t dstY = 0;
  unsigned dstMemoryType = 0;
  void* dstHost = nullptr;
  CUdeviceptr dstDevice = 0;
  void* dstArray = nullptr;
  size_t dstPitch = 0;
  size_t WidthInBytes = 0;
  size_t Height = 0;
};

// The entry points. Every member is non-null in a loaded table, except where its comment says otherwise.
struct Driver {
  CUresult (*init)(unsigned flags);
  CUresult (*getErrorString)(CUresult, const char**);
  CUresult (*deviceGet)(CUdevice*, int ordinal);
  CUresult (*deviceGetCount)(int*);
  CUresult (*deviceGetAttribute)(int*, int attr, CUdevice);
  CUresult (*primaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*primaryCtxRelease)(CUdevice);
  CUresult (*ctxGetCurrent)(CUcontext*);
  CUresult (*ctxSetCurrent)(CUcontext);
  CUresult (*ctxPushCurrent)(CUcontext);
  CUresult (*ctxPopCurrent)(CUcontext*);
  CUresult (*ctxGetDevice)(CUdevice*);
  CUresult (*pointerGetAttribute)(void* data, int attr, CUdeviceptr);
  CUresult (*memAlloc)(CUdeviceptr*, size_t);
  CUresult (*memFree)(CUdeviceptr);
  CUresult (*memHostAlloc)(void**, size_t, unsigned flags);
  CUresult (*memFreeHost)(void*);
  CUresult (*memHostGetDevicePointer)(CUdeviceptr*, void*, unsigned);
  // cuMemHostRegister_v2 / cuMemHostUnregister: pins memory the process mapped (a shared segment) for the device.
  // Null under HIP (the device-side barriers of CUDA IPC programs, which need them, are then off).
  CUresult (*memHostRegister)(void*, size_t, unsigned flags) = nullptr;
  CUresult (*memHostUnregister)(void*) = nullptr;
  CUresult (*memGetAddressRange)(CUdeviceptr* base, size_t* size, CUdeviceptr);
  CUresult (*memcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
  CUresult (*memcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*memcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*memcpyAsync)(CUdeviceptr dst, CUdeviceptr src, size_t, CUstream);
  CUresult (*memsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  // cuMemcpy2DAsync_v2; null under HIP (copyHtoDAsync then copies in one piece).
  CUresult (*memcpy2DAsync)(const Memcpy2D*, CUstream) = nullptr;
  CUresult (*streamCreate)(CUstream*, unsigned flags);
  CUresult (*streamDestroy)(CUstream);
  CUresult (*streamSynchronize)(CUstream);
  CUresult (*streamGetCtx)(CUstream, CUcontext*);
  CUresult (*streamIsCapturing)(CUstream, int* status);
  // cuStreamGetCaptureInfo_v2 (CUDA 11.3): the capture's status, id and graph.
  CUresult (*streamGetCaptureInfo)(CUstream, int* status, unsigned long long* id, CUgraph* graph,
                                   const CUgraphNode** deps, size_t* numDeps);
  CUresult (*threadExchangeStreamCaptureMode)(int* mode);
  CUresult (*userObjectCreate)(CUuserObject*, void* ptr, CUhostFn destroy, unsigned initialRefcount, unsigned flags);
  CUresult (*userObjectRelease)(CUuserObject, unsigned count);
  CUresult (*graphRetainUserObject)(CUgraph, CUuserObject, unsigned count, unsigned flags);
  // GEQ: CUDA compares cyclically, (int32_t)(*addr - value) >= 0, so a 32-bit counter may wrap.
  CUresult (*streamWaitValue32)(CUstream, CUdeviceptr, uint32_t value, unsigned flags);
  // Only where GEQ is a plain `*addr >= value` (HIP): a counter is then waited on as 64 bits, which never wraps.
  // Null on CUDA.
  CUresult (*streamWaitValue64)(CUstream, CUdeviceptr, uint64_t value, unsigned flags);
  CUresult (*streamWriteValue32)(CUstream, CUdeviceptr, uint32_t value, unsigned flags);
  CUresult (*streamWaitEvent)(CUstream, CUevent, unsigned flags);
  CUresult (*launchHostFunc)(CUstream, CUhostFn, void* userData);
  CUresult (*eventCreate)(CUevent*, unsigned flags);
  CUresult (*eventDestroy)(CUevent);
  CUresult (*eventRecord)(CUevent, CUstream);
  CUresult (*eventQuery)(CUevent);
  CUresult (*eventSynchronize)(CUevent);
  CUresult (*ipcGetMemHandle)(CUipcMemHandle*, CUdeviceptr);
  CUresult (*ipcOpenMemHandle)(CUdeviceptr*, CUipcMemHandle, unsigned flags);
  CUresult (*ipcCloseMemHandle)(CUdeviceptr);
  CUresult (*moduleLoadData)(CUmodule*, const void* image);
  CUresult (*moduleUnload)(CUmodule);
  CUresult (*moduleGetFunction)(CUfunction*, CUmodule, const char* name);
  CUresult (*launchKernel)(CUfunction, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                           unsigned sharedBytes, CUstream, void** params, void** extra);
  // Virtual memory management: memory exported as a file descriptor, which lives until its last mapping goes.
  // Null under HIP (ncclMemAlloc then uses memAlloc).
  CUresult (*memGetAllocationGranularity)(size_t*, const MemAllocationProp*, int option) = nullptr;
  CUresult (*memCreate)(CUmemGenericAllocationHandle*, size_t, const MemAllocationProp*,
                        unsigned long long flags) = nullptr;
  CUresult (*memRelease)(CUmemGenericAllocationHandle) = nullptr;
  CUresult (*memAddressReserve)(CUdeviceptr*, size_t, size_t alignment, CUdeviceptr addr,
                                unsigned long long flags) = nullptr;
  CUresult (*memAddressFree)(CUdeviceptr, size_t) = nullptr;
  CUresult (*memMap)(CUdeviceptr, size_t, size_t offset, CUmemGenericAllocationHandle,
                     unsigned long long flags) = nullptr;
  CUresult (*memUnmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*memSetAccess)(CUdeviceptr, size_t, const MemAccessDesc*, size_t count) = nullptr;
  CUresult (*memExportToShareableHandle)(void* shareable, CUmemGenericAllocationHandle, int type,
                                         unsigned long long flags) = nullptr;
  CUresult (*memImportFromShareableHandle)(CUmemGenericAllocationHandle*, void* osHandle, int type) = nullptr;
  // Whether ops may be captured into graphs (user objects exist): always with CUDA, not with every HIP.
  bool capturable = true;
};

// Which runtime fills the table: CUDA's driver where a CUDA device exists, else HIP where an AMD GPU does.
enum class Backend { None, Cuda, Hip };
Backend backend();          // loads the table first, as driver() does
const char* backendName();  // "CUDA", "HIP" or "no GPU runtime"

// The process's driver table, loaded and cuInit'ed on first use (thread-safe); null when CFX_CUDA=0, when
// libcuda.so.1 is missing or lacks an entry point, or when cuInit fails (no device, driver mismatch), and no AMD GPU
// is usable through HIP either (common/hip_driver.h; CFX_HIP=0 never tries). The reason is logged once at INFO.
const Driver* driver();

// "cuMemAlloc (2 MiB) failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory" style Status from a CUresult.
Status check(CUresult rc, const char* what);

// A host-to-device copy on `stream`. On an H100 shared by 4 processes a one-piece copy of 1 KiB or less cost
// ~550 us (it waits for the GPU's time slices, the other copies do not) where the same bytes as a 2-D copy of two
// or more rows cost ~10 us (docs/gpu_proof.md); so such copies go as rows.
Status copyHtoDAsync(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream, const char* what);
// The rows of that 2-D copy: the fewest (at least 2) that divide `bytes`; 0 where a one-piece copy is used.
size_t smallCopyRows(size_t bytes);

enum class MemKind { Host, Device, Managed };
struct PointerInfo {
  MemKind kind = MemKind::Host;
  bool pinned = false;  // Host memory the driver knows (cuMemHostAlloc, cuMemHostRegister): a stream can write it
  int device = -1;              // ordinal, for Device and Managed
  CUcontext context = nullptr;  // the context the allocation belongs to (Device, Managed)
};
// What `p` points to. Host for null, for host memory (pageable, pinned or registered) and whenever the driver is
// unavailable. Managed memory is reported apart: the host can read it, but the stream may still be writing it.
PointerInfo classify(const void* p);
// Device `ordinal`'s primary context (the one cudaSetDevice makes current), retained once per process and never
// released: primary contexts live as long as the process anyway. Null without a driver or that device.
CUcontext primaryContext(int ordinal);

// Sets this thread's stream capture mode to relaxed for the scope (cuThreadExchangeStreamCaptureMode), so that
// allocations and object creation are allowed while some thread captures a graph in CUDA's default (global) mode,
// which would otherwise fail them and invalidate that capture. No-op without a driver.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode();
  ~RelaxedCaptureMode();
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  int previous_ = -1;
};

// Sets the calling thread's capture mode to relaxed for good (once per thread): for threads of ours that make CUDA
// calls while the user's threads may be capturing (progress threads).
void relaxCaptureModeOfThisThread();

// Makes `ctx` current on this thread for the scope, restoring the previous one after.
class ScopedContext {
 public:
  explicit ScopedContext(CUcontext ctx);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  bool pushed_ = false;
};

}  // namespace cfx::cuda
