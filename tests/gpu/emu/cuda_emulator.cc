// SPDX-License-Identifier: Apache-2.0
// A CPU stand-in for the CUDA driver (libcuda.so.1), for tests only: it lets the GPU tests run the device path's
// host-side logic (stream ordering, the stream flag, pinned staging, several ranks per device, abort releasing
// streams) in CI, where no GPU exists, between the rare sessions that have one.
//
// What it models, and how faithfully:
//   - One device (ordinal 0; CFX_EMU_DEVICES=N makes N, each with its own PCI address), with one primary context
//     each. Device memory is host memory the emulator allocated and tracks, so cuPointerGetAttribute tells it from
//     pinned host memory (cuMemHostAlloc) and from pageable memory it never saw (CUDA_ERROR_INVALID_VALUE, as the
//     real driver answers for plain malloc), and names the device it belongs to.
//   - A stream is a FIFO worker thread: copies, memsets, host functions, cuStreamWaitValue32/WriteValue32 and event
//     records run in enqueue order, each after the previous one finished, as on a GPU stream. A wait on a value
//     polls the host word (the real one polls it over PCIe). The legacy default stream (0, CU_STREAM_LEGACY) is one
//     more such stream, and CU_STREAM_PER_THREAD one more per thread.
//   - A copy between device memory and pageable host memory returns only once the stream ran it: CUDA may do
//     exactly that (it stages pageable memory synchronously), so code that is correct on CUDA is correct here.
//   - Events: record, query, synchronize, cross-stream waits.
//   - Graph capture (see "graphs" below): the captured streams' work with its fork and join dependencies, user
//     objects, and CUDA's global capture mode refusing allocations.
//   - IPC and kernels (emu_ipc_kernels.cc): device memory is a memfd shared mapping that other processes map
//     through a handle; the reduce-copy kernels run on the stream as the host reduce functions.
//   - The virtual memory API (emu_vmm.cc): cuMemCreate blocks exported as real file descriptors, reservations,
//     mappings that stay inaccessible until cuMemSetAccess and keep their pages after the exporter frees them.
//   - fork() after cuInit: the child cannot use the driver (every call that would start using it fails with
//     CUDA_ERROR_NOT_INITIALIZED), as on a real GPU, where it cannot use the device at all. A test whose parent
//     touched CUDA before forking its ranks fails here as it does on a GPU instead of passing only here.
// What it does not model (calls return CUDA_ERROR_NOT_SUPPORTED): the quantisation kernels (they resolve, but a
// launch fails), captured waits on work outside the capture, graphs launched into a capture. Timing is nothing
// like a GPU's; tests never assert timings anyway.
//
// Every entry point the library resolves is exported under its versioned name (common/cuda_driver.cc), with the
// driver API's C signatures (cuda_emulator.h). cfxCudaEmulator() lets a test tell the emulator from a real driver.
#include "cuda_emulator.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/cuda_driver.h"
#include "common/types.h"
#include "emu_internal.h"
#include "primitives/device/reduce_args.h"
#include "primitives/reduce.h"

namespace cfx::emu {

struct Context {
  int device = 0;
};
// CFX_EMU_DEVICES devices (1 to kMaxDevices, default 1), read at cuInit: each with its own primary context and PCI
// address, so code for ranks on different GPUs runs too. Their memory is all the same host memory.
constexpr int kMaxDevices = 8;
Context gPrimary[kMaxDevices] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};
std::atomic<int> gDevices{1};
std::atomic<bool> gInitialised{false};
// Set in a child forked after this process initialised the driver (pthread_atfork, registered at load).
std::atomic<bool> gForkedAfterInit{false};

void markForkedChild() {
  if (gInitialised.load()) gForkedAfterInit.store(true);
}
[[maybe_unused]] const int gAtFork = pthread_atfork(nullptr, nullptr, markForkedChild);
bool forkedAfterInit() { return gForkedAfterInit.load(); }


bool validDevice(int device) { return device >= 0 && device < gDevices.load(); }
bool validContext(const void* ctx) {
  for (int i = 0; i < gDevices.load(); ++i) {
    if (ctx == &gPrimary[i]) return true;
  }
  return false;
}
thread_local std::vector<Context*> tlContexts;  // the current context is the back

// The calling thread's current device; 0 without a current context.
int currentDevice() { return tlContexts.empty() ? 0 : tlContexts.back()->device; }

// ---- streams and events ---------------------------------------------------------------------------------------

struct Capture;

struct Event {
  std::mutex mutex;
  std::condition_variable cv;
  uint64_t recorded = 0;   // records enqueued
  uint64_t completed = 0;  // records the stream got to
  // Its last record was captured (gCaptureMutex): into this capture, as that capture's event `capturedSlot`.
  Capture* capturedIn = nullptr;
  int capturedSlot = -1;

  // The last record so far (0: never recorded), which CUDA's waits on an event wait for.
  uint64_t lastRecord() {
    std::lock_guard lk(mutex);
    return recorded;
  }
  // Until the stream got to record `target`.
  void waitFor(uint64_t target) {
    std::unique_lock lk(mutex);
    cv.wait(lk, [&] { return completed >= target; });
  }
};

// One in-order queue of work, run by its own (detached) thread. destroy() returns at once, as cuStreamDestroy does:
// the thread runs what was enqueued before it, then deletes the stream.
class Stream {
 public:
  Stream() {
    std::thread([this] { run(); }).detach();
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int device = 0;  // set by cuStreamCreate
  // The capture this stream records into, and its lane there (under gCaptureMutex).
  Capture* capture = nullptr;
  int lane = 0;

  void destroy() {
    // Notified under the lock: once it is released the worker may finish and delete the stream.
    std::lock_guard lk(mutex_);
    stopping_ = true;
    cv_.notify_all();
  }
  // Enqueues `task`; returns its ticket.
  uint64_t enqueue(std::function<void()> task) {
    uint64_t ticket;
    {
      std::lock_guard lk(mutex_);
      queue_.push_back(std::move(task));
      ticket = ++enqueued_;
    }
    cv_.notify_all();
    return ticket;
  }
  void waitFor(uint64_t ticket) {
    std::unique_lock lk(mutex_);
    doneCv_.wait(lk, [&] { return done_ >= ticket; });
  }
  void synchronize() {
    uint64_t ticket;
    {
      std::lock_guard lk(mutex_);
      ticket = enqueued_;
    }
    waitFor(ticket);
  }

 private:
  ~Stream() = default;

  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lk(mutex_);
        cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) break;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
      {
        std::lock_guard lk(mutex_);
        ++done_;
      }
      doneCv_.notify_all();
    }
    delete this;
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::condition_variable doneCv_;
  std::deque<std::function<void()>> queue_;
  uint64_t enqueued_ = 0;
  uint64_t done_ = 0;
  bool stopping_ = false;
};

Stream* defaultStream() {
  static Stream* s = new Stream();  // never destroyed, as the legacy default stream
  return s;
}

// CUDA's special handles: 0 and CU_STREAM_LEGACY (1) name the legacy default stream, CU_STREAM_PER_THREAD (2) the
// calling thread's own default stream, a different stream in every thread under one handle.
bool isSpecialStream(const void* s) { return reinterpret_cast<uintptr_t>(s) <= 2; }

Stream* streamOf(void* s) {
  if (reinterpret_cast<uintptr_t>(s) == 2) {
    thread_local Stream* mine = [] {  // never destroyed, as CUDA's outlives nothing the tests look at
      auto* made = new Stream();
      made->device = currentDevice();
      return made;
    }();
    return mine;
  }
  return isSpecialStream(s) ? defaultStream() : static_cast<Stream*>(s);
}

void pollUntil(const std::function<bool()>& done) {
  auto pause = std::chrono::microseconds(1);
  while (!done()) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(200));
  }
}

// Waits until *word >= value in the wrap-around sense CU_STREAM_WAIT_VALUE_GEQ uses, (int32_t)(*word - value) >= 0.
// The word is read atomically: its writers (the library's progress thread) store it atomically, and a thread
// sanitizer must see the pair.
void waitValue(uint32_t* word, uint32_t value) {
  pollUntil([=] { return static_cast<int32_t>(__atomic_load_n(word, __ATOMIC_ACQUIRE) - value) >= 0; });
}

// ---- graphs ------------------------------------------------------------------------------------------------
//
// Capture records what a stream would run into a graph instead. A graph is a list of nodes, each on a lane: lane 0
// is the stream the capture began on, and a stream joins as a new lane by waiting on an event recorded in the
// capture (the fork); the origin waits on events the other lanes record (the join). A launch runs lane 0 on the
// launch stream and every other lane on a stream of its own, with the captured records and waits between them, so
// a graph runs with the same dependencies it was captured with. Captures in CUDA's global mode make allocations
// from threads not in relaxed mode fail and invalidate the capture, as CUDA does.

constexpr int kCaptureModeGlobal = 0;
constexpr int kCaptureModeRelaxed = cuda::kStreamCaptureModeRelaxed;

struct UserObject {
  std::atomic<unsigned> refs;
  void* ptr;
  CUhostFn destroy;
};

// Drops `count` references; the last one runs the destructor on a thread of its own, as CUDA runs it on one of its
// threads, never inside the call that dropped it.
void releaseUserObject(UserObject* o, unsigned count) {
  if (o->refs.fetch_sub(count) != count) return;
  std::thread([o] {
    o->destroy(o->ptr);
    delete o;
  }).detach();
}

struct Node {
  enum Kind { Coro, Record, Wait } kind = Coro;
  int lane = 0;
  int event = -1;  // Record, Wait: the graph's event slot
  std::function<void()> task;
};

struct Graph {
  std::vector<Node> nodes;
  int lanes = 1;
  int events = 0;
  std::vector<std::pair<UserObject*, unsigned>> owned;  // user-object references the graph holds
  ~Graph() {
    for (auto [o, n] : owned) releaseUserObject(o, n);
  }
};

struct Capture {
  Graph* graph = nullptr;
  uint64_t id = 0;
  int mode = kCaptureModeGlobal;
  bool ended = false;
  bool invalid = false;
  std::vector<Stream*> streams;
};

std::mutex gCaptureMutex;
uint64_t gCaptureIds = 0;
std::vector<Capture*> gActiveCaptures;  // captures are never freed: events may still name them
thread_local int tlCaptureMode = 0;     // CU_STREAM_CAPTURE_MODE_GLOBAL

// Whether this thread may make an allocation now (CUDA's "potentially unsafe" calls); invalidates the captures it
// would break when not. A thread in thread-local mode is held to the global rule (stricter than CUDA, which checks
// only that thread's own captures); the library never uses that mode.
bool allocationAllowed() {
  if (tlCaptureMode == kCaptureModeRelaxed) return true;
  std::lock_guard lk(gCaptureMutex);
  bool allowed = true;
  for (Capture* c : gActiveCaptures) {
    if (c->mode == kCaptureModeGlobal) {
      c->invalid = true;
      allowed = false;
    }
  }
  return allowed;
}

// Runs `task` on the stream, or records it into the stream's capture. The stream's ticket, 0 when captured.
uint64_t submit(Stream* s, std::function<void()> task) {
  {
    std::lock_guard lk(gCaptureMutex);
    if (s->capture != nullptr) {
      s->capture->graph->nodes.push_back(Node{Node::Coro, s->lane, -1, std::move(task)});
      return 0;
    }
  }
  return s->enqueue(std::move(task));
}

bool capturing(Stream* s) {
  std::lock_guard lk(gCaptureMutex);
  return s->capture != nullptr;
}

// One launch's events, shared by the tasks of its lanes.
struct LaunchEvents {
  explicit LaunchEvents(int n) : done(static_cast<size_t>(n), false) {}
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<bool> done;
};

// An instantiated graph. `hold` keeps the graph's user objects alive while the exec or any task of a launch does.
struct Exec {
  struct Hold {
    std::vector<std::pair<UserObject*, unsigned>> refs;
    ~Hold() {
      for (auto [o, n] : refs) releaseUserObject(o, n);
    }
  };
  std::vector<Node> nodes;
  int lanes = 1;
  int events = 0;
  std::shared_ptr<Hold> hold;
};

// A copy the stream runs. One whose host side is pageable (memory this emulator never allocated) returns only once
// the stream ran it, as CUDA may; during capture that is an error, as in CUDA.
CUresult copyAsync(void* dst, const void* src, size_t bytes, void* stream, bool hostSideTracked) {
  if (bytes == 0) return kSuccess;
  if (dst == nullptr || src == nullptr) return kInvalidValue;
  if (isPeerMemory(dst) || isPeerMemory(src)) gCounters.peerCopies.fetch_add(1);
  if (isImportedVmm(dst) || isImportedVmm(src)) gCounters.vmmPeerCopies.fetch_add(1);
  if (onProgressThread()) gCounters.progressThreadWork.fetch_add(1);
  Stream* s = streamOf(stream);
  if (!hostSideTracked && capturing(s)) return kCaptureUnsupported;
  // CFX_EMU_COPY_DELAY_US: every copy takes that much longer on the stream, as on a busy GPU (tests set it in one
  // rank to make it the slow one).
  const char* delay = std::getenv("CFX_EMU_COPY_DELAY_US");
  const auto extra = std::chrono::microseconds(delay != nullptr ? std::atoll(delay) : 0);
  const uint64_t ticket = submit(s, [=] {
    if (extra.count() > 0) std::this_thread::sleep_for(extra);
    std::memmove(dst, src, bytes);
  });
  if (!hostSideTracked) s->waitFor(ticket);
  return kSuccess;
}

}  // namespace cfx::emu

using namespace cfx::emu;  // NOLINT(google-build-using-namespace): the entry points below use the internals

// ---- the driver API --------------------------------------------------------------------------------------------

extern "C" {

// Tells tests they run on the emulator.
__attribute__((visibility("default"))) int cfxCudaEmulator() { return 1; }

CFX_EMU_API cuInit(unsigned flags) {
  if (forkedAfterInit()) return kNotInitialized;
  if (flags != 0) return kInvalidValue;
  if (!gInitialised.load()) {
    const char* n = std::getenv("CFX_EMU_DEVICES");
    const int devices = n == nullptr ? 1 : std::atoi(n);
    gDevices.store(devices >= 1 && devices <= kMaxDevices ? devices : 1);
  }
  gInitialised.store(true);
  return kSuccess;
}

CFX_EMU_API cuGetErrorString(CUresult rc, const char** text) {
  if (text == nullptr) return kInvalidValue;
  switch (rc) {
    case kSuccess:
      *text = "no error";
      break;
    case kInvalidValue:
      *text = "invalid argument";
      break;
    case kOutOfMemory:
      *text = "out of memory";
      break;
    case kNotInitialized:
      *text = "initialization error";
      break;
    case kInvalidContext:
      *text = "invalid device context";
      break;
    case kInvalidHandle:
      *text = "invalid resource handle";
      break;
    case kNotReady:
      *text = "device not ready";
      break;
    case kNotSupported:
      *text = "operation not supported (by the CPU emulation of the driver)";
      break;
    case kIllegalState:
      *text = "the operation cannot be performed in the present state";
      break;
    case kCaptureUnsupported:
      *text = "operation not permitted when stream is capturing";
      break;
    case kCaptureInvalidated:
      *text = "operation failed due to a previous error during capture";
      break;
    case kCaptureMerge:
      *text = "operation would result in a merge of separate capture sequences";
      break;
    case kCaptureUnmatched:
      *text = "capture was not initiated in this stream";
      break;
    default:
      *text = "unknown error";
      return kInvalidValue;
  }
  return kSuccess;
}

CFX_EMU_API cuDeviceGet(int* device, int ordinal) {
  if (forkedAfterInit()) return kNotInitialized;
  if (!gInitialised.load()) return kNotInitialized;
  if (device == nullptr || !validDevice(ordinal)) return kInvalidValue;
  *device = ordinal;
  return kSuccess;
}

CFX_EMU_API cuDeviceGetCount(int* count) {
  if (forkedAfterInit()) return kNotInitialized;
  if (!gInitialised.load()) return kNotInitialized;
  if (count == nullptr) return kInvalidValue;
  *count = gDevices.load();
  return kSuccess;
}

CFX_EMU_API cuDeviceGetAttribute(int* value, int attr, int device) {
  if (value == nullptr || !validDevice(device)) return kInvalidValue;
  switch (attr) {
    case cfx::cuda::kDeviceAttrMultiprocessorCount:
      *value = 132;
      break;  // as an H100 SXM
    case cfx::cuda::kDeviceAttrPciBusId:
      *value = 0x19 + device;
      break;  // one per device
    case cfx::cuda::kDeviceAttrPciDeviceId:
    case cfx::cuda::kDeviceAttrPciDomainId:
      *value = 0;
      break;
    case cfx::cuda::kDeviceAttrComputeCapabilityMajor:
      *value = 9;
      break;  // compute capability 9.0
    case cfx::cuda::kDeviceAttrComputeCapabilityMinor:
      *value = 0;
      break;
    case cfx::cuda::kDeviceAttrVirtualMemoryManagement:  // emu_vmm.cc
    case cfx::cuda::kDeviceAttrHandleTypePosixFd:
      *value = 1;
      break;
    default:
      *value = 0;
      break;
  }
  return kSuccess;
}

CFX_EMU_API cuDevicePrimaryCtxRetain(void** ctx, int device) {
  if (forkedAfterInit()) return kNotInitialized;
  if (ctx == nullptr || !validDevice(device)) return kInvalidValue;
  *ctx = &gPrimary[device];
  return kSuccess;
}

CFX_EMU_API cuDevicePrimaryCtxRelease_v2(int device) {
  if (!validDevice(device)) return kInvalidValue;
  return kSuccess;
}

CFX_EMU_API cuCtxGetCurrent(void** ctx) {
  if (ctx == nullptr) return kInvalidValue;
  *ctx = tlContexts.empty() ? nullptr : tlContexts.back();
  return kSuccess;
}

CFX_EMU_API cuCtxSetCurrent(void* ctx) {
  if (forkedAfterInit()) return kNotInitialized;
  if (ctx != nullptr && !validContext(ctx)) return kInvalidContext;
  if (tlContexts.empty()) {
    if (ctx != nullptr) tlContexts.push_back(static_cast<Context*>(ctx));
  } else if (ctx == nullptr) {
    tlContexts.pop_back();
  } else {
    tlContexts.back() = static_cast<Context*>(ctx);
  }
  return kSuccess;
}

CFX_EMU_API cuCtxPushCurrent_v2(void* ctx) {
  if (forkedAfterInit()) return kNotInitialized;
  if (!validContext(ctx)) return kInvalidContext;
  tlContexts.push_back(static_cast<Context*>(ctx));
  return kSuccess;
}

CFX_EMU_API cuCtxPopCurrent_v2(void** ctx) {
  if (tlContexts.empty()) return kInvalidContext;
  if (ctx != nullptr) *ctx = tlContexts.back();
  tlContexts.pop_back();
  return kSuccess;
}

CFX_EMU_API cuCtxGetDevice(int* device) {
  if (device == nullptr) return kInvalidValue;
  if (tlContexts.empty()) return kInvalidContext;
  *device = tlContexts.back()->device;
  return kSuccess;
}

CFX_EMU_API cuPointerGetAttribute(void* data, int attr, CUdeviceptr p) {
  if (forkedAfterInit()) return kNotInitialized;
  if (data == nullptr) return kInvalidValue;
  uintptr_t base = 0;
  Allocation a;
  if (!findAllocation(static_cast<uintptr_t>(p), &base, &a)) return kInvalidValue;
  switch (attr) {
    case cfx::cuda::kPointerAttrContext:  // cuMemMap memory belongs to no context, as in CUDA
      *static_cast<void**>(data) = a.vmm ? nullptr : &gPrimary[a.ordinal];
      break;
    case cfx::cuda::kPointerAttrMemoryType:
      *static_cast<unsigned*>(data) = a.device ? kMemoryTypeDevice : kMemoryTypeHost;
      break;
    case cfx::cuda::kPointerAttrIsManaged:
      *static_cast<int*>(data) = 0;
      break;
    case cfx::cuda::kPointerAttrDeviceOrdinal:
      *static_cast<int*>(data) = a.ordinal;
      break;
    case cfx::cuda::kPointerAttrRangeStart:
      *static_cast<CUdeviceptr*>(data) = base;
      break;
    case cfx::cuda::kPointerAttrRangeSize:
      *static_cast<size_t*>(data) = a.bytes;
      break;
    default:
      return kInvalidValue;
  }
  return kSuccess;
}

CFX_EMU_API cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  if (forkedAfterInit()) return kNotInitialized;
  if (refusedOnProgressThread("cuMemAlloc")) return kNotSupported;
  if (p == nullptr || bytes == 0) return kInvalidValue;
  void* m = nullptr;
  const CUresult rc = allocate(&m, bytes, true);
  if (rc == kSuccess) *p = reinterpret_cast<CUdeviceptr>(m);
  return rc;
}

CFX_EMU_API cuMemFree_v2(CUdeviceptr p) {
  if (refusedOnProgressThread("cuMemFree")) return kNotSupported;
  return p == 0 ? kSuccess : release(ptr(p), true);
}

CFX_EMU_API cuMemHostAlloc(void** p, size_t bytes, unsigned) {
  if (forkedAfterInit()) return kNotInitialized;
  if (refusedOnProgressThread("cuMemHostAlloc")) return kNotSupported;
  return allocate(p, bytes, false);
}

CFX_EMU_API cuMemFreeHost(void* p) {
  if (refusedOnProgressThread("cuMemFreeHost")) return kNotSupported;
  return release(p, false);
}

CFX_EMU_API cuMemHostGetDevicePointer_v2(CUdeviceptr* d, void* p, unsigned flags) {
  if (d == nullptr || flags != 0 || !isTracked(p)) return kInvalidValue;
  *d = reinterpret_cast<CUdeviceptr>(p);  // mapped pinned memory has one address on host and device (UVA)
  return kSuccess;
}

// Memory the process mapped itself (a shared segment) becomes pinned host memory the device reaches at the same
// address; registering a range twice, or one the emulator allocated, fails as CUDA's does.
CFX_EMU_API cuMemHostRegister_v2(void* p, size_t bytes, unsigned flags) {
  if (forkedAfterInit()) return kNotInitialized;
  if (p == nullptr || bytes == 0 || (flags & ~3u) != 0) return kInvalidValue;
  if (isTracked(p)) return kHostMemoryAlreadyRegistered;
  Allocation a;
  a.bytes = bytes;
  a.ordinal = currentDevice();
  a.registered = true;
  trackAllocation(reinterpret_cast<uintptr_t>(p), a);
  gCounters.hostRegisters.fetch_add(1);
  return kSuccess;
}

CFX_EMU_API cuMemHostUnregister(void* p) {
  uintptr_t base = 0;
  Allocation a;
  if (!findAllocation(reinterpret_cast<uintptr_t>(p), &base, &a) || base != reinterpret_cast<uintptr_t>(p) ||
      !a.registered) {
    return kHostMemoryNotRegistered;
  }
  untrackAllocation(base);
  return kSuccess;
}

CFX_EMU_API cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr p) {
  uintptr_t b = 0;
  Allocation a;
  if (!findAllocation(static_cast<uintptr_t>(p), &b, &a) || !a.device) return kInvalidValue;
  if (base != nullptr) *base = b;
  if (size != nullptr) *size = a.bytes;
  return kSuccess;
}

CFX_EMU_API cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes, void* stream) {
  return copyAsync(dst, ptr(src), bytes, stream, isTracked(dst));
}

CFX_EMU_API cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes, void* stream) {
  return copyAsync(ptr(dst), src, bytes, stream, isTracked(src));
}

CFX_EMU_API cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, void* stream) {
  return copyAsync(ptr(dst), ptr(src), bytes, stream, true);
}

CFX_EMU_API cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, void* stream) {
  return copyAsync(ptr(dst), ptr(src), bytes, stream, isTracked(ptr(dst)) && isTracked(ptr(src)));
}

CFX_EMU_API cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t bytes, void* stream) {
  if (bytes == 0) return kSuccess;
  if (!isTracked(ptr(dst))) return kInvalidValue;
  submit(streamOf(stream), [=] { std::memset(ptr(dst), value, bytes); });
  return kSuccess;
}

CFX_EMU_API cuMemcpy2DAsync_v2(const Memcpy2D* m, void* stream) {
  if (m == nullptr || m->srcArray != nullptr || m->dstArray != nullptr) return kInvalidValue;
  auto* src = static_cast<const char*>(m->srcMemoryType == kMemoryTypeHost ? m->srcHost : ptr(m->srcDevice));
  auto* dst = static_cast<char*>(m->dstMemoryType == kMemoryTypeHost ? m->dstHost : ptr(m->dstDevice));
  if (src == nullptr || dst == nullptr || m->WidthInBytes > m->srcPitch || m->WidthInBytes > m->dstPitch) {
    return kInvalidValue;
  }
  src += m->srcY * m->srcPitch + m->srcXInBytes;
  dst += m->dstY * m->dstPitch + m->dstXInBytes;
  const Memcpy2D c = *m;
  Stream* s = streamOf(stream);
  const bool pageable = !isTracked(src) || !isTracked(dst);
  if (pageable && capturing(s)) return kCaptureUnsupported;
  const uint64_t ticket = submit(s, [=] {
    for (size_t row = 0; row < c.Height; ++row)
      std::memmove(dst + row * c.dstPitch, src + row * c.srcPitch, c.WidthInBytes);
  });
  if (pageable) s->waitFor(ticket);
  return kSuccess;
}

CFX_EMU_API cuStreamCreate(void** stream, unsigned) {
  if (forkedAfterInit()) return kNotInitialized;
  if (stream == nullptr) return kInvalidValue;
  if (refusedOnProgressThread("cuStreamCreate")) return kNotSupported;
  if (tlContexts.empty()) return kInvalidContext;
  auto* s = new Stream();
  s->device = currentDevice();
  *stream = s;
  return kSuccess;
}

CFX_EMU_API cuStreamDestroy_v2(void* stream) {
  if (isSpecialStream(stream)) return kInvalidHandle;
  static_cast<Stream*>(stream)->destroy();
  return kSuccess;
}

CFX_EMU_API cuStreamSynchronize(void* stream) {
  streamOf(stream)->synchronize();
  return kSuccess;
}

// A stream belongs to the device current where it was made; the legacy default stream to the current one.
CFX_EMU_API cuStreamGetCtx(void* stream, void** ctx) {
  if (ctx == nullptr) return kInvalidValue;
  if (isSpecialStream(stream) && tlContexts.empty()) return kInvalidContext;
  *ctx = &gPrimary[isSpecialStream(stream) ? currentDevice() : static_cast<Stream*>(stream)->device];
  return kSuccess;
}

CFX_EMU_API cuStreamGetCaptureInfo_v2(void* stream, int* status, unsigned long long* id, void** graph,
                                      const void** deps, size_t* numDeps) {
  if (status == nullptr) return kInvalidValue;
  std::lock_guard lk(gCaptureMutex);
  const Capture* c = streamOf(stream)->capture;
  *status = c == nullptr ? 0 : c->invalid ? 2 : 1;  // none, active, invalidated
  if (id != nullptr) *id = c == nullptr ? 0 : c->id;
  if (graph != nullptr) *graph = c == nullptr ? nullptr : c->graph;
  if (deps != nullptr) *deps = nullptr;
  if (numDeps != nullptr) *numDeps = 0;
  return kSuccess;
}

CFX_EMU_API cuStreamIsCapturing(void* stream, int* status) {
  return cuStreamGetCaptureInfo_v2(stream, status, nullptr, nullptr, nullptr, nullptr);
}

CFX_EMU_API cuThreadExchangeStreamCaptureMode(int* mode) {
  if (mode == nullptr || *mode < 0 || *mode > 2) return kInvalidValue;
  std::swap(*mode, tlCaptureMode);
  return kSuccess;
}

CFX_EMU_API cuStreamBeginCapture_v2(void* stream, int mode) {
  // The legacy stream cannot be captured; a thread's per-thread stream can.
  if (stream == nullptr || stream == reinterpret_cast<void*>(uintptr_t{1}) || mode < 0 || mode > 2) {
    return kInvalidValue;
  }
  Stream* s = streamOf(stream);
  std::lock_guard lk(gCaptureMutex);
  if (s->capture != nullptr) return kIllegalState;
  auto* c = new Capture;
  c->graph = new Graph;
  c->id = ++gCaptureIds;
  c->mode = mode;
  c->streams.push_back(s);
  s->capture = c;
  s->lane = 0;
  gActiveCaptures.push_back(c);
  return kSuccess;
}

CFX_EMU_API cuStreamEndCapture(void* stream, void** graph) {
  if (stream == nullptr || stream == reinterpret_cast<void*>(uintptr_t{1}) || graph == nullptr) return kInvalidValue;
  Stream* s = streamOf(stream);
  std::lock_guard lk(gCaptureMutex);
  Capture* c = s->capture;
  if (c == nullptr || s->lane != 0) return kCaptureUnmatched;
  for (Stream* joined : c->streams) joined->capture = nullptr;
  c->ended = true;
  gActiveCaptures.erase(std::find(gActiveCaptures.begin(), gActiveCaptures.end(), c));
  if (c->invalid) {
    delete c->graph;
    *graph = nullptr;
    return kCaptureInvalidated;
  }
  *graph = c->graph;
  return kSuccess;
}

CFX_EMU_API cuGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long) {
  if (exec == nullptr || graph == nullptr) return kInvalidValue;
  const auto* g = static_cast<const Graph*>(graph);
  auto* e = new Exec;
  e->nodes = g->nodes;
  e->lanes = g->lanes;
  e->events = g->events;
  e->hold = std::make_shared<Exec::Hold>();
  for (auto [o, n] : g->owned) {
    o->refs.fetch_add(n);
    e->hold->refs.emplace_back(o, n);
  }
  *exec = e;
  return kSuccess;
}

CFX_EMU_API cuGraphLaunch(void* exec, void* stream) {
  if (exec == nullptr) return kInvalidValue;
  const auto* e = static_cast<const Exec*>(exec);
  Stream* origin = streamOf(stream);
  if (capturing(origin)) return kNotSupported;  // a graph launched into a capture: not emulated
  auto events = std::make_shared<LaunchEvents>(e->events);
  std::vector<Stream*> lanes(static_cast<size_t>(e->lanes), origin);
  for (size_t l = 1; l < lanes.size(); ++l) lanes[l] = new Stream();
  for (const Node& n : e->nodes) {
    Stream* s = lanes[static_cast<size_t>(n.lane)];
    const size_t slot = static_cast<size_t>(n.event);
    switch (n.kind) {
      case Node::Coro:
        s->enqueue([task = n.task, hold = e->hold] { task(); });
        break;
      case Node::Record:
        s->enqueue([events, slot] {
          {
            std::lock_guard lk(events->mutex);
            events->done[slot] = true;
          }
          events->cv.notify_all();
        });
        break;
      case Node::Wait:
        s->enqueue([events, slot] {
          std::unique_lock lk(events->mutex);
          events->cv.wait(lk, [&] { return events->done[slot]; });
        });
        break;
    }
  }
  for (size_t l = 1; l < lanes.size(); ++l) lanes[l]->destroy();  // each runs its lane, then goes
  return kSuccess;
}

CFX_EMU_API cuGraphExecDestroy(void* exec) {
  if (exec == nullptr) return kInvalidValue;
  delete static_cast<Exec*>(exec);  // launches still running hold the user objects themselves
  return kSuccess;
}

CFX_EMU_API cuGraphDestroy(void* graph) {
  if (graph == nullptr) return kInvalidValue;
  delete static_cast<Graph*>(graph);
  return kSuccess;
}

CFX_EMU_API cuUserObjectCreate(void** object, void* p, CUhostFn destroy, unsigned initialRefcount, unsigned flags) {
  if (object == nullptr || destroy == nullptr || initialRefcount == 0 || flags != 1) return kInvalidValue;
  *object = new UserObject{{initialRefcount}, p, destroy};
  return kSuccess;
}

CFX_EMU_API cuUserObjectRelease(void* object, unsigned count) {
  if (object == nullptr || count == 0) return kInvalidValue;
  releaseUserObject(static_cast<UserObject*>(object), count);
  return kSuccess;
}

CFX_EMU_API cuGraphRetainUserObject(void* graph, void* object, unsigned count, unsigned flags) {
  if (graph == nullptr || object == nullptr || count == 0 || flags > 1) return kInvalidValue;
  auto* o = static_cast<UserObject*>(object);
  if (flags == 0) o->refs.fetch_add(count);  // CU_GRAPH_USER_OBJECT_MOVE takes the caller's references instead
  std::lock_guard lk(gCaptureMutex);
  static_cast<Graph*>(graph)->owned.emplace_back(o, count);
  return kSuccess;
}

CFX_EMU_API cuStreamWaitValue32_v2(void* stream, CUdeviceptr addr, uint32_t value, unsigned flags) {
  if (flags != 0 || !isTracked(ptr(addr))) return kInvalidValue;  // only GEQ, on pinned memory the driver knows
  auto* word = static_cast<uint32_t*>(ptr(addr));
  submit(streamOf(stream), [=] { waitValue(word, value); });
  return kSuccess;
}

CFX_EMU_API cuStreamWriteValue32_v2(void* stream, CUdeviceptr addr, uint32_t value, unsigned flags) {
  if (flags != 0 || !isTracked(ptr(addr))) return kInvalidValue;
  auto* word = static_cast<uint32_t*>(ptr(addr));
  submit(streamOf(stream), [=] { __atomic_store_n(word, value, __ATOMIC_RELEASE); });
  return kSuccess;
}

CFX_EMU_API cuLaunchHostFunc(void* stream, CUhostFn fn, void* userData) {
  if (fn == nullptr) return kInvalidValue;
  gCounters.hostFunctions.fetch_add(1);
  submit(streamOf(stream), [=] { fn(userData); });
  return kSuccess;
}

CFX_EMU_API cuEventCreate(void** event, unsigned) {
  if (event == nullptr) return kInvalidValue;
  if (refusedOnProgressThread("cuEventCreate")) return kNotSupported;
  *event = new Event();
  return kSuccess;
}

CFX_EMU_API cuEventDestroy_v2(void* event) {
  if (event == nullptr) return kInvalidHandle;
  // CUDA lets a recorded event be destroyed before the stream reaches it; keep it until then.
  auto* e = static_cast<Event*>(event);
  const uint64_t target = e->lastRecord();
  if (target == 0) {
    delete e;
    return kSuccess;
  }
  std::thread([e, target] {
    e->waitFor(target);
    delete e;
  }).detach();
  return kSuccess;
}

CFX_EMU_API cuEventRecord(void* event, void* stream) {
  if (event == nullptr) return kInvalidHandle;
  auto* e = static_cast<Event*>(event);
  Stream* s = streamOf(stream);
  {
    std::lock_guard lk(gCaptureMutex);
    if (s->capture != nullptr) {  // a node of the graph, which other captured streams may wait on
      Graph* g = s->capture->graph;
      e->capturedIn = s->capture;
      e->capturedSlot = g->events++;
      g->nodes.push_back(Node{Node::Record, s->lane, e->capturedSlot, {}});
      return kSuccess;
    }
    e->capturedIn = nullptr;
  }
  uint64_t gen;
  {
    std::lock_guard lk(e->mutex);
    gen = ++e->recorded;
  }
  s->enqueue([e, gen] {
    // Notified under the lock: a destroyed event is deleted as soon as its waiter sees the record done, and that
    // waiter cannot return before the lock is released.
    std::lock_guard lk(e->mutex);
    e->completed = std::max(e->completed, gen);
    e->cv.notify_all();
  });
  return kSuccess;
}

CFX_EMU_API cuEventQuery(void* event) {
  if (event == nullptr) return kInvalidHandle;
  auto* e = static_cast<Event*>(event);
  std::lock_guard lk(e->mutex);
  return e->completed >= e->recorded ? kSuccess : kNotReady;
}

CFX_EMU_API cuEventSynchronize(void* event) {
  if (event == nullptr) return kInvalidHandle;
  auto* e = static_cast<Event*>(event);
  e->waitFor(e->lastRecord());
  return kSuccess;
}

CFX_EMU_API cuStreamWaitEvent(void* stream, void* event, unsigned) {
  if (event == nullptr) return kInvalidHandle;
  auto* e = static_cast<Event*>(event);
  Stream* s = streamOf(stream);
  {
    std::lock_guard lk(gCaptureMutex);
    if (e->capturedIn != nullptr && !e->capturedIn->ended) {
      Capture* c = e->capturedIn;
      if (s->capture == nullptr) {  // the fork: this stream joins the capture as a lane of its own
        s->capture = c;
        s->lane = c->graph->lanes++;
        c->streams.push_back(s);
      } else if (s->capture != c) {
        return kCaptureMerge;
      }
      c->graph->nodes.push_back(Node{Node::Wait, s->lane, e->capturedSlot, {}});
      return kSuccess;
    }
    if (s->capture != nullptr) return kNotSupported;  // a captured wait on outside work: not emulated
  }
  const uint64_t target = e->lastRecord();
  if (target == 0) return kSuccess;
  s->enqueue([e, target] { e->waitFor(target); });
  return kSuccess;
}

}  // extern "C"
