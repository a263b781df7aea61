// SPDX-License-Identifier: Apache-2.0
// A CPU stand-in for the CUDA driver (libcuda.so.1), for tests only: it lets the GPU tests run the device path's
// host-side logic (stream ordering, the stream flag, pinned staging, several ranks per device, abort releasing
// streams) in CI, where no GPU exists, between the rare sessions that have one.
//
// What it models, and how faithfully:
//   - One device (ordinal 0) with one primary context. Device memory is host memory the emulator allocated and
//     tracks, so cuPointerGetAttribute tells it from pinned host memory (cuMemHostAlloc) and from pageable memory
//     it never saw (CUDA_ERROR_INVALID_VALUE, as the real driver answers for plain malloc).
//   - A stream is a FIFO worker thread: copies, memsets, host functions, cuStreamWaitValue32/WriteValue32 and event
//     records run in enqueue order, each after the previous one finished, as on a GPU stream. A wait on a value
//     polls the host word (the real one polls it over PCIe). The legacy default stream (0) is one more such stream.
//   - A copy between device memory and pageable host memory returns only once the stream ran it: CUDA may do
//     exactly that (it stages pageable memory synchronously), so code that is correct on CUDA is correct here.
//   - Events: record, query, synchronize, cross-stream waits.
// What it does not model (calls return CUDA_ERROR_NOT_SUPPORTED, and the tests that need them skip): IPC handles,
// kernels (modules), graph capture. Timing is nothing like a GPU's; tests never assert timings anyway.
//
// Every entry point the library resolves is exported under its versioned name (common/cuda_driver.cc), with the
// driver API's C signatures. cfxCudaEmulator() lets a test tell the emulator from a real driver.
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/cuda_driver.h"

namespace {

namespace cuda = cfx::cuda;

// The driver's types, constants and CUDA_MEMCPY2D as the library declares them (tests/abi checks those against
// cuda.h), so that both sides of this stand-in agree on them.
using cuda::CUdeviceptr;
using cuda::CUhostFn;
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

struct Context {
  int device = 0;
};
Context gPrimary;
std::atomic<bool> gInitialised{false};
std::atomic<int> gPrimaryRefs{0};
thread_local std::vector<Context*> tlContexts;  // the current context is the back
thread_local int tlCaptureMode = 0;             // CU_STREAM_CAPTURE_MODE_GLOBAL

// ---- allocations -------------------------------------------------------------------------------------------

struct Allocation {
  size_t bytes = 0;
  bool device = false;  // else pinned host memory
};

std::mutex gAllocMutex;
std::map<uintptr_t, Allocation> gAllocations;  // by base address

// The allocation holding `p`, if any: (base, allocation).
bool findAllocation(uintptr_t p, uintptr_t* base, Allocation* out) {
  std::lock_guard lk(gAllocMutex);
  auto it = gAllocations.upper_bound(p);
  if (it == gAllocations.begin()) return false;
  --it;
  if (p >= it->first + std::max<size_t>(it->second.bytes, 1)) return false;
  if (base != nullptr) *base = it->first;
  if (out != nullptr) *out = it->second;
  return true;
}

bool isTracked(const void* p) { return findAllocation(reinterpret_cast<uintptr_t>(p), nullptr, nullptr); }

CUresult allocate(void** p, size_t bytes, bool device) {
  if (p == nullptr) return kInvalidValue;
  // mmap, not malloc: zero-filled like fresh device memory, and never adjacent to the heap the tests check.
  const size_t length = bytes == 0 ? 1 : bytes;
  void* m = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return kOutOfMemory;
  std::lock_guard lk(gAllocMutex);
  gAllocations[reinterpret_cast<uintptr_t>(m)] = Allocation{length, device};
  *p = m;
  return kSuccess;
}

CUresult release(void* p, bool device) {
  Allocation a;
  {
    std::lock_guard lk(gAllocMutex);
    auto it = gAllocations.find(reinterpret_cast<uintptr_t>(p));
    if (it == gAllocations.end() || it->second.device != device) return kInvalidValue;
    a = it->second;
    gAllocations.erase(it);
  }
  ::munmap(p, a.bytes);
  return kSuccess;
}

// ---- streams and events ---------------------------------------------------------------------------------------

struct Event {
  std::mutex mutex;
  std::condition_variable cv;
  uint64_t recorded = 0;   // records enqueued
  uint64_t completed = 0;  // records the stream got to
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

  void destroy() {
    {
      std::lock_guard lk(mutex_);
      stopping_ = true;
    }
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

Stream* streamOf(void* s) { return s == nullptr ? defaultStream() : static_cast<Stream*>(s); }

// Waits until *word >= value in the wrap-around sense CU_STREAM_WAIT_VALUE_GEQ uses. The word is read atomically:
// its writers (the library's progress thread) store it atomically, and a thread sanitizer must see the pair.
void waitValue(uint32_t* word, uint32_t value) {
  auto pause = std::chrono::microseconds(1);
  while (static_cast<int32_t>(__atomic_load_n(word, __ATOMIC_ACQUIRE) - value) < 0) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(200));
  }
}

// A copy the stream runs. One whose host side is pageable (memory this emulator never allocated) returns only once
// the stream ran it, as CUDA may.
CUresult copyAsync(void* dst, const void* src, size_t bytes, void* stream, bool hostSideTracked) {
  if (bytes == 0) return kSuccess;
  if (dst == nullptr || src == nullptr) return kInvalidValue;
  Stream* s = streamOf(stream);
  const uint64_t ticket = s->enqueue([=] { std::memmove(dst, src, bytes); });
  if (!hostSideTracked) s->waitFor(ticket);
  return kSuccess;
}

void* ptr(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

}  // namespace

// ---- the driver API --------------------------------------------------------------------------------------------

extern "C" {

// Tells tests they run on the emulator.
__attribute__((visibility("default"))) int cfxCudaEmulator() { return 1; }

#define CFX_EMU_API __attribute__((visibility("default"))) CUresult

CFX_EMU_API cuInit(unsigned flags) {
  if (flags != 0) return kInvalidValue;
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
    default:
      *text = "unknown error";
      return kInvalidValue;
  }
  return kSuccess;
}

CFX_EMU_API cuDeviceGet(int* device, int ordinal) {
  if (!gInitialised.load()) return kNotInitialized;
  if (device == nullptr || ordinal != 0) return kInvalidValue;
  *device = 0;
  return kSuccess;
}

CFX_EMU_API cuDeviceGetCount(int* count) {
  if (!gInitialised.load()) return kNotInitialized;
  if (count == nullptr) return kInvalidValue;
  *count = 1;
  return kSuccess;
}

CFX_EMU_API cuDeviceGetAttribute(int* value, int attr, int device) {
  if (value == nullptr || device != 0) return kInvalidValue;
  switch (attr) {
    case 16:
      *value = 132;
      break;  // multiprocessors, as an H100 SXM
    case 33:
      *value = 0x19;
      break;  // PCI bus
    case 34:
      *value = 0;
      break;  // PCI device
    case 50:
      *value = 0;
      break;  // PCI domain
    case 75:
      *value = 9;
      break;  // compute capability 9.0
    case 76:
      *value = 0;
      break;
    default:
      *value = 0;
      break;
  }
  return kSuccess;
}

CFX_EMU_API cuDevicePrimaryCtxRetain(void** ctx, int device) {
  if (ctx == nullptr || device != 0) return kInvalidValue;
  gPrimaryRefs.fetch_add(1);
  *ctx = &gPrimary;
  return kSuccess;
}

CFX_EMU_API cuDevicePrimaryCtxRelease_v2(int device) {
  if (device != 0) return kInvalidValue;
  gPrimaryRefs.fetch_sub(1);
  return kSuccess;
}

CFX_EMU_API cuCtxGetCurrent(void** ctx) {
  if (ctx == nullptr) return kInvalidValue;
  *ctx = tlContexts.empty() ? nullptr : tlContexts.back();
  return kSuccess;
}

CFX_EMU_API cuCtxSetCurrent(void* ctx) {
  if (ctx != nullptr && ctx != &gPrimary) return kInvalidContext;
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
  if (ctx != &gPrimary) return kInvalidContext;
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
  *device = 0;
  return kSuccess;
}

CFX_EMU_API cuPointerGetAttribute(void* data, int attr, CUdeviceptr p) {
  if (data == nullptr) return kInvalidValue;
  uintptr_t base = 0;
  Allocation a;
  if (!findAllocation(static_cast<uintptr_t>(p), &base, &a)) return kInvalidValue;
  switch (attr) {
    case 1:
      *static_cast<void**>(data) = &gPrimary;
      break;  // context
    case 2:
      *static_cast<unsigned*>(data) = a.device ? kMemoryTypeDevice : kMemoryTypeHost;
      break;  // memory type
    case 8:
      *static_cast<int*>(data) = 0;
      break;  // is managed
    case 9:
      *static_cast<int*>(data) = 0;
      break;  // device ordinal
    case 11:
      *static_cast<CUdeviceptr*>(data) = base;
      break;  // range start
    case 12:
      *static_cast<size_t*>(data) = a.bytes;
      break;  // range size
    default:
      return kInvalidValue;
  }
  return kSuccess;
}

CFX_EMU_API cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  if (p == nullptr || bytes == 0) return kInvalidValue;
  void* m = nullptr;
  const CUresult rc = allocate(&m, bytes, true);
  if (rc == kSuccess) *p = reinterpret_cast<CUdeviceptr>(m);
  return rc;
}

CFX_EMU_API cuMemFree_v2(CUdeviceptr p) { return p == 0 ? kSuccess : release(ptr(p), true); }

CFX_EMU_API cuMemHostAlloc(void** p, size_t bytes, unsigned) { return allocate(p, bytes, false); }

CFX_EMU_API cuMemFreeHost(void* p) { return release(p, false); }

CFX_EMU_API cuMemHostGetDevicePointer_v2(CUdeviceptr* d, void* p, unsigned flags) {
  if (d == nullptr || flags != 0 || !isTracked(p)) return kInvalidValue;
  *d = reinterpret_cast<CUdeviceptr>(p);  // mapped pinned memory has one address on host and device (UVA)
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
  streamOf(stream)->enqueue([=] { std::memset(ptr(dst), value, bytes); });
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
  const uint64_t ticket = s->enqueue([=] {
    for (size_t row = 0; row < c.Height; ++row)
      std::memmove(dst + row * c.dstPitch, src + row * c.srcPitch, c.WidthInBytes);
  });
  if (!isTracked(src) || !isTracked(dst)) s->waitFor(ticket);
  return kSuccess;
}

CFX_EMU_API cuStreamCreate(void** stream, unsigned) {
  if (stream == nullptr) return kInvalidValue;
  *stream = new Stream();
  return kSuccess;
}

CFX_EMU_API cuStreamDestroy_v2(void* stream) {
  if (stream == nullptr) return kInvalidHandle;
  static_cast<Stream*>(stream)->destroy();
  return kSuccess;
}

CFX_EMU_API cuStreamSynchronize(void* stream) {
  streamOf(stream)->synchronize();
  return kSuccess;
}

CFX_EMU_API cuStreamGetCtx(void*, void** ctx) {
  if (ctx == nullptr) return kInvalidValue;
  *ctx = &gPrimary;
  return kSuccess;
}

CFX_EMU_API cuStreamIsCapturing(void*, int* status) {
  if (status == nullptr) return kInvalidValue;
  *status = 0;  // never capturing: capture is not emulated
  return kSuccess;
}

CFX_EMU_API cuStreamGetCaptureInfo_v2(void*, int* status, unsigned long long* id, void** graph, const void** deps,
                                      size_t* numDeps) {
  if (status == nullptr) return kInvalidValue;
  *status = 0;
  if (id != nullptr) *id = 0;
  if (graph != nullptr) *graph = nullptr;
  if (deps != nullptr) *deps = nullptr;
  if (numDeps != nullptr) *numDeps = 0;
  return kSuccess;
}

CFX_EMU_API cuThreadExchangeStreamCaptureMode(int* mode) {
  if (mode == nullptr || *mode < 0 || *mode > 2) return kInvalidValue;
  std::swap(*mode, tlCaptureMode);
  return kSuccess;
}

CFX_EMU_API cuStreamBeginCapture_v2(void*, int) { return kNotSupported; }
CFX_EMU_API cuUserObjectCreate(void**, void*, CUhostFn, unsigned, unsigned) { return kNotSupported; }
CFX_EMU_API cuUserObjectRelease(void*, unsigned) { return kNotSupported; }
CFX_EMU_API cuGraphRetainUserObject(void*, void*, unsigned, unsigned) { return kNotSupported; }

CFX_EMU_API cuStreamWaitValue32_v2(void* stream, CUdeviceptr addr, uint32_t value, unsigned flags) {
  if (flags != 0 || !isTracked(ptr(addr))) return kInvalidValue;  // only GEQ, on pinned memory the driver knows
  auto* word = static_cast<uint32_t*>(ptr(addr));
  streamOf(stream)->enqueue([=] { waitValue(word, value); });
  return kSuccess;
}

CFX_EMU_API cuStreamWriteValue32_v2(void* stream, CUdeviceptr addr, uint32_t value, unsigned flags) {
  if (flags != 0 || !isTracked(ptr(addr))) return kInvalidValue;
  auto* word = static_cast<uint32_t*>(ptr(addr));
  streamOf(stream)->enqueue([=] { __atomic_store_n(word, value, __ATOMIC_RELEASE); });
  return kSuccess;
}

CFX_EMU_API cuLaunchHostFunc(void* stream, CUhostFn fn, void* userData) {
  if (fn == nullptr) return kInvalidValue;
  streamOf(stream)->enqueue([=] { fn(userData); });
  return kSuccess;
}

CFX_EMU_API cuEventCreate(void** event, unsigned) {
  if (event == nullptr) return kInvalidValue;
  *event = new Event();
  return kSuccess;
}

CFX_EMU_API cuEventDestroy_v2(void* event) {
  if (event == nullptr) return kInvalidHandle;
  // CUDA lets a recorded event be destroyed before the stream reaches it; keep it until then.
  auto* e = static_cast<Event*>(event);
  uint64_t target;
  {
    std::lock_guard lk(e->mutex);
    target = e->recorded;
  }
  if (target == 0) {
    delete e;
    return kSuccess;
  }
  std::thread([e, target] {
    std::unique_lock lk(e->mutex);
    e->cv.wait(lk, [&] { return e->completed >= target; });
    lk.unlock();
    delete e;
  }).detach();
  return kSuccess;
}

CFX_EMU_API cuEventRecord(void* event, void* stream) {
  if (event == nullptr) return kInvalidHandle;
  auto* e = static_cast<Event*>(event);
  uint64_t gen;
  {
    std::lock_guard lk(e->mutex);
    gen = ++e->recorded;
  }
  streamOf(stream)->enqueue([e, gen] {
    {
      std::lock_guard lk(e->mutex);
      e->completed = std::max(e->completed, gen);
    }
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
  std::unique_lock lk(e->mutex);
  const uint64_t target = e->recorded;
  e->cv.wait(lk, [&] { return e->completed >= target; });
  return kSuccess;
}

CFX_EMU_API cuStreamWaitEvent(void* stream, void* event, unsigned) {
  if (event == nullptr) return kInvalidHandle;
  auto* e = static_cast<Event*>(event);
  uint64_t target;
  {
    std::lock_guard lk(e->mutex);
    target = e->recorded;  // the last record before this call, as CUDA waits on
  }
  if (target == 0) return kSuccess;
  streamOf(stream)->enqueue([e, target] {
    std::unique_lock lk(e->mutex);
    e->cv.wait(lk, [&] { return e->completed >= target; });
  });
  return kSuccess;
}

CFX_EMU_API cuIpcGetMemHandle(void*, CUdeviceptr) { return kNotSupported; }
CFX_EMU_API cuIpcOpenMemHandle_v2(CUdeviceptr*, cuda::CUipcMemHandle, unsigned) { return kNotSupported; }
CFX_EMU_API cuIpcCloseMemHandle(CUdeviceptr) { return kNotSupported; }
CFX_EMU_API cuModuleLoadData(void**, const void*) { return kNotSupported; }
CFX_EMU_API cuModuleUnload(void*) { return kNotSupported; }
CFX_EMU_API cuModuleGetFunction(void**, void*, const char*) { return kNotSupported; }
CFX_EMU_API cuLaunchKernel(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                           void**) {
  return kNotSupported;
}

}  // extern "C"
