// SPDX-License-Identifier: Apache-2.0
// What the device tests (device_collectives_test.cc, device_semantics_test.cc) share: finding a device without
// initialising CUDA in the parent, making one current in a rank, device buffers, a word that holds a stream back,
// and what the CPU stand-ins of tests/gpu/emu report.
#pragma once

#include <gtest/gtest.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/cuda_driver.h"
#include "integration/multiproc.h"

namespace cfx::itest {

using cuda::CUdeviceptr;

// The CPU stand-in for the driver (libcuda.so.1) or for HIP (libamdhip64.so.5) that tests/gpu/emu builds for CI,
// if this process loaded one (through LD_LIBRARY_PATH); null for a real driver or none.
void* loadedEmulator();

// Null when a throwaway child process finds a CUDA device (a real one, or a stand-in), else a reason. The parent
// never initialises CUDA: a process that forks after cuInit leaves its children unable to use the GPU.
const char* gpuMissingReason();
// True when that device is a stand-in (tests/gpu/emu), which tests can make fail or die where a GPU cannot.
bool onEmulator();
// True when the library runs that device through HIP rather than CUDA. Like the two above, asked of a throwaway
// child: cuda::backend() in the test process would initialise CUDA there, and its forked ranks could then not use
// the device ("cannot use device 0" on a GPU and on the stand-in alike).
bool deviceRuntimeIsHip();

#define SKIP_WITHOUT_GPU()                                         \
  do {                                                             \
    if (const char* why = gpuMissingReason()) GTEST_SKIP() << why; \
  } while (0)

#define CU_OK(call) ASSERT_EQ((call), cuda::kSuccess) << #call
#define NCCL_OK(call) ASSERT_EQ((call), ncclSuccess) << #call << ": " << ncclGetLastError(nullptr)

// In a child: makes device `ordinal`'s primary context current, as cudaSetDevice does.
const cuda::Driver& useDevice(int ordinal);
inline const cuda::Driver& useDevice0() { return useDevice(0); }

// The devices a throwaway child finds with `env` set (the emulator reads CFX_EMU_DEVICES); 0 when none.
int deviceCount(const std::vector<std::pair<std::string, std::string>>& env);

// A device buffer with its host mirror.
struct DevBuf {
  const cuda::Driver* d;
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  DevBuf(const cuda::Driver& drv, size_t n) : d(&drv), bytes(n) {
    if (d->memAlloc(&ptr, n == 0 ? 1 : n) != cuda::kSuccess) throw std::runtime_error("cuMemAlloc failed");
  }
  ~DevBuf() { d->memFree(ptr); }
  void* p() const { return reinterpret_cast<void*>(ptr); }
};

// A word of pinned host memory that holds a stream back (a wait for it to reach 1) the way a long kernel would,
// until the test releases it. Stored atomically: the GPU reads it over PCIe, the CPU stand-in from another thread.
struct StreamHold {
  const cuda::Driver* d;
  void* host = nullptr;
  CUdeviceptr dev = 0;
  explicit StreamHold(const cuda::Driver& drv) : d(&drv) {
    if (d->memHostAlloc(&host, 64, cuda::kHostAllocPortable | cuda::kHostAllocDeviceMap) != cuda::kSuccess ||
        d->memHostGetDevicePointer(&dev, host, 0) != cuda::kSuccess) {
      throw std::runtime_error("cannot make a mapped pinned word");
    }
    word().store(0);
  }
  ~StreamHold() { d->memFreeHost(host); }
  StreamHold(const StreamHold&) = delete;
  StreamHold& operator=(const StreamHold&) = delete;
  std::atomic_ref<uint32_t> word() const { return std::atomic_ref<uint32_t>(*static_cast<uint32_t*>(host)); }
  cuda::CUresult hold(cuda::CUstream stream) const {
    return d->streamWaitValue32(stream, dev, 1, cuda::kStreamWaitValueGeq);
  }
  void release() const { word().store(1, std::memory_order_release); }
  // Releases the stream from a thread of its own after `delay`, while the caller goes on into the call under test;
  // the caller joins it.
  std::thread releaseAfter(std::chrono::milliseconds delay) const {
    return std::thread([this, delay] {
      std::this_thread::sleep_for(delay);
      release();
    });
  }
};

// One rank of a device test, in its child: device 0 current, a communicator, a non-blocking stream; the stream and
// then the communicator are destroyed at the end (a test that aborts instead releases `comm` and sets it null).
struct RankOnDevice {
  const cuda::Driver& d;
  ncclComm_t comm = nullptr;
  cuda::CUstream stream = nullptr;
  explicit RankOnDevice(RankContext& ctx) : d(useDevice0()), comm(ctx.initComm()) {
    if (comm == nullptr) throw std::runtime_error("ncclCommInitRank failed");
    if (d.streamCreate(&stream, cuda::kStreamNonBlocking) != cuda::kSuccess) throw std::runtime_error("no stream");
  }
  ~RankOnDevice() {
    d.streamDestroy(stream);
    if (comm != nullptr) {
      EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    }
  }
  RankOnDevice(const RankOnDevice&) = delete;
  RankOnDevice& operator=(const RankOnDevice&) = delete;
};

// The graph entry points a program uses (the runtime's cudaStreamBeginCapture, cudaGraphLaunch, ...), from the
// driver: the library itself only reads the capture state.
struct GraphApi {
  int (*beginCapture)(cuda::CUstream, int mode);
  int (*endCapture)(cuda::CUstream, cuda::CUgraph*);
  int (*instantiate)(void** exec, cuda::CUgraph, unsigned long long flags);
  int (*launch)(void* exec, cuda::CUstream);
  int (*execDestroy)(void* exec);
  int (*destroy)(cuda::CUgraph);
};
// From the CUDA driver, or from the HIP runtime where the library runs on HIP (same signatures and mode values).
const GraphApi& graphApi();

// What the CPU emulation of the driver did in this process ("ipc_opens", "peer_copies", "module_loads",
// "kernel_launches"); -1 on a real driver.
long long emulatorCount(const char* what);

// The environment of the tests that run the CUDA IPC path in small windows: on, with 1 MiB of scratch per rank, for
// ops of every size.
inline std::vector<std::pair<std::string, std::string>> ipcInSmallWindows() {
  return {{"CFX_CUDA_IPC", "1"}, {"CFX_CUDA_IPC_BYTES", "1048576"}, {"CFX_CUDA_IPC_MIN_BYTES", "0"}};
}

// Whether the library under test has reduce kernels for the stand-in it runs on (the CUDA or the HIP one). The
// sanitizer builds have none: their reductions on device buffers stage, where a kernel build's take the IPC path.
bool reduceKernelsBuilt();

// In a rank run with CFX_CUDA_IPC=1 on the emulator, after its ops: the device-direct path was taken (it copied
// from or to its peers' scratch) with all its device work enqueued on the user's streams, not from the progress
// thread, not silently replaced by staging, and it launched reduce kernels for its
// all-reduces. A build without device kernels stages all-reduces, so then only the other ops are held to the
// path. A real driver does not say, so nothing is checked there.
enum class IpcOps { Copies, CopiesAndReductions, Reductions };
void expectIpcPathTaken(IpcOps ops);

}  // namespace cfx::itest
