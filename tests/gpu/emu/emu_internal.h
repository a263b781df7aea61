// SPDX-License-Identifier: Apache-2.0
// What the parts of the CUDA driver stand-in share (cuda_emulator.cc: contexts, memory, streams, graphs and the
// driver API; emu_ipc_kernels.cc: IPC handles and kernels), and what the HIP stand-in (hip_emulator.cc) needs of
// them for the waits HIP compares otherwise. Test tool internals, hidden in the library.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

#include "cuda_emulator.h"

namespace cfx::emu {

// The driver's types, constants and CUDA_MEMCPY2D as the library declares them (tests/abi checks those against
// cuda.h), so that both sides of this stand-in agree on them.
using cuda::CUresult;
using cuda::kMemoryTypeDevice;
using cuda::kMemoryTypeHost;
using cuda::kSuccess;
using cuda::Memcpy2D;
constexpr CUresult kInvalidValue = cuda::kErrorInvalidValue;
constexpr CUresult kNotReady = cuda::kErrorNotReady;
constexpr CUresult kOutOfMemory = 2;
constexpr CUresult kNotInitialized = 3;
constexpr CUresult kInvalidContext = 201;
constexpr CUresult kInvalidHandle = 400;
constexpr CUresult kNotSupported = 801;
constexpr CUresult kIllegalState = 401;
constexpr CUresult kCaptureUnsupported = 900;
constexpr CUresult kCaptureInvalidated = 901;
constexpr CUresult kCaptureMerge = 902;
constexpr CUresult kCaptureUnmatched = 903;
constexpr CUresult kHostMemoryAlreadyRegistered = 712;
constexpr CUresult kHostMemoryNotRegistered = 713;

// ---- allocations ----

struct Allocation {
  size_t bytes = 0;
  bool device = false;  // else pinned host memory
  int fd = -1;          // device memory: the memfd behind it, which IPC handles name
  bool opened = false;  // a peer's device memory mapped by cuIpcOpenMemHandle
  int ordinal = 0;      // the device it is memory of (device memory), or whose context made it
  bool vmm = false;     // a cuMemMap mapping (emu_vmm.cc); opened: of memory imported from another process
  bool registered = false;  // host memory the process mapped itself, pinned by cuMemHostRegister
};

// The allocation holding `p`, if any: (base, allocation).
bool findAllocation(uintptr_t p, uintptr_t* base, Allocation* out);
// Whether `p` is memory the emulator made or mapped (device or pinned); false for pageable memory it never saw.
bool isTracked(const void* p);
// Records memory mapped outside allocate() (a peer's, through an IPC handle).
void trackAllocation(uintptr_t base, const Allocation& a);
// Frees an allocation of this process (opened: false) or unmaps a peer's (opened: true).
CUresult release(void* p, bool device, bool opened = false);
// Stops tracking the allocation at `base` without unmapping it (cuMemUnmap replaces the pages itself).
void untrackAllocation(uintptr_t base);
// Whether allocations are allowed now (not while a stream is captured in CUDA's global mode).
bool allocationAllowed();
// The calling thread's current device; 0 without a current context.
int currentDevice();
bool validDevice(int device);
// Another process's device memory, mapped through a legacy IPC handle or imported and mapped with cuMemMap.
bool isPeerMemory(const void* p);
// Memory another process exported with cuMemExportToShareableHandle, mapped here with cuMemMap.
bool isImportedVmm(const void* p);
// Device memory (a memfd of its own, so peers can map it) or pinned host memory, page-aligned and tracked.
CUresult allocate(void** p, size_t bytes, bool device);

// What the emulator did in this process (cfxCudaEmulatorCount).
// Creating or freeing a CUDA object takes a context-wide lock that a thread sitting in a synchronous pageable copy
// holds until its stream is done; on the library's progress thread ("cfx-prog-N"), whose work that stream may be
// waiting for, it deadlocked on an H100 (docs/DESIGN.md). The stand-in refuses such calls there, with a line on
// stderr naming the call, so a test fails here instead of a GPU machine hanging.
bool refusedOnProgressThread(const char* call);
// Whether this process is a child forked after its parent initialised the driver: such a child cannot use it.
bool forkedAfterInit();
// Whether the calling thread is one of the library's progress threads.
bool onProgressThread();

struct Counters {
  std::atomic<uint64_t> ipcOpens{0};
  std::atomic<uint64_t> peerCopies{0};  // copies from or to memory mapped through an IPC handle
  std::atomic<uint64_t> moduleLoads{0};
  std::atomic<uint64_t> kernelLaunches{0};
  std::atomic<uint64_t> progressThreadWork{0};  // copies and kernels enqueued from a library progress thread
  std::atomic<uint64_t> vmmImports{0};          // cuMemImportFromShareableHandle
  std::atomic<uint64_t> vmmPeerCopies{0};       // copies from or to imported memory (also in peerCopies)
  std::atomic<uint64_t> vmmPeerKernelReads{0};  // kernel launches reading imported memory
  std::atomic<uint64_t> hostRegisters{0};       // cuMemHostRegister
  std::atomic<uint64_t> hostFunctions{0};       // cuLaunchHostFunc: a host round trip on a stream
};
extern Counters gCounters;

// ---- streams ----

class Stream;
// The stream behind a handle (null: the legacy default stream).
Stream* streamOf(void* s);
// Runs `task` on the stream in order, or records it into the stream's capture. The stream's ticket, 0 when captured.
uint64_t submit(Stream* s, std::function<void()> task);

// Returns once done() holds, polling as a GPU polls a word it waits on (backing off to 200 us between looks).
void pollUntil(const std::function<bool()>& done);

inline void* ptr(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

}  // namespace cfx::emu
