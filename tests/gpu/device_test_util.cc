// SPDX-License-Identifier: Apache-2.0
// Helpers of the device tests (device_test_util.h).
#include "gpu/device_test_util.h"

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <type_traits>

namespace cfx::itest {

void* loadedEmulator() {
  for (const char* name : {"libcuda.so.1", "libamdhip64.so.5"}) {
    void* lib = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr) continue;
    if (dlsym(lib, "cfxCudaEmulator") != nullptr) return lib;  // the reference is kept: the library stays loaded
    dlclose(lib);
  }
  return nullptr;
}

namespace {

// What a throwaway child process finds: a device (a real one, or a stand-in) and the runtime behind it, or neither.
// Asked in a child because a process that initialised CUDA and then forks leaves its children unable to use the
// device (the CUDA stand-in models that too): the test process itself never initialises CUDA.
struct Probe {
  enum class Device { None, Real, Emulated } device = Device::None;
  bool hip = false;
};
Probe probeDevice() {
  static const Probe found = [] {
    const pid_t pid = fork();
    if (pid == 0) {
      const cuda::Driver* d = cuda::driver();
      int n = 0;
      if (d == nullptr || d->deviceGetCount(&n) != cuda::kSuccess || n <= 0) _exit(1);
      const int hip = cuda::backend() == cuda::Backend::Hip ? 4 : 0;
      _exit((loadedEmulator() != nullptr ? 2 : 0) + hip + 8);
    }
    int status = 0;
    Probe p;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) < 8) return p;
    const int code = WEXITSTATUS(status) - 8;
    p.device = (code & 2) != 0 ? Probe::Device::Emulated : Probe::Device::Real;
    p.hip = (code & 4) != 0;
    return p;
  }();
  return found;
}

}  // namespace

const char* gpuMissingReason() {
  return probeDevice().device == Probe::Device::None ? "no CUDA driver or no CUDA device on this machine" : nullptr;
}

bool onEmulator() { return probeDevice().device == Probe::Device::Emulated; }

bool deviceRuntimeIsHip() { return probeDevice().hip; }

const GraphApi& graphApi() {
  static const GraphApi api = [] {
    const bool hip = cuda::backend() == cuda::Backend::Hip;
    const char* name = hip ? "libamdhip64.so.5" : "libcuda.so.1";
    void* lib = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr && hip) lib = dlopen(name = "libamdhip64.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr) throw std::runtime_error(std::string(name) + " is not loaded");
    auto get = [&](auto* slot, const char* cudaName, const char* hipName) {
      *slot = reinterpret_cast<std::remove_pointer_t<decltype(slot)>>(dlsym(lib, hip ? hipName : cudaName));
      if (*slot == nullptr) throw std::runtime_error(std::string(name) + " lacks " + (hip ? hipName : cudaName));
    };
    GraphApi g{};
    get(&g.beginCapture, "cuStreamBeginCapture_v2", "hipStreamBeginCapture");
    get(&g.endCapture, "cuStreamEndCapture", "hipStreamEndCapture");
    get(&g.instantiate, "cuGraphInstantiateWithFlags", "hipGraphInstantiateWithFlags");
    get(&g.launch, "cuGraphLaunch", "hipGraphLaunch");
    get(&g.execDestroy, "cuGraphExecDestroy", "hipGraphExecDestroy");
    get(&g.destroy, "cuGraphDestroy", "hipGraphDestroy");
    return g;
  }();
  return api;
}

const cuda::Driver& useDevice(int ordinal) {
  const cuda::Driver* d = cuda::driver();
  if (d == nullptr) throw std::runtime_error("no CUDA driver in the rank process");
  cuda::CUdevice dev = 0;
  cuda::CUcontext ctx = nullptr;
  if (d->deviceGet(&dev, ordinal) != cuda::kSuccess || d->primaryCtxRetain(&ctx, dev) != cuda::kSuccess ||
      d->ctxSetCurrent(ctx) != cuda::kSuccess) {
    throw std::runtime_error("cannot use device " + std::to_string(ordinal));
  }
  return *d;
}

int deviceCount(const std::vector<std::pair<std::string, std::string>>& env) {
  const pid_t pid = fork();
  if (pid == 0) {
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    const cuda::Driver* d = cuda::driver();
    int n = 0;
    if (d == nullptr || d->deviceGetCount(&n) != cuda::kSuccess) _exit(0);
    _exit(std::min(n, 100));
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return 0;
  return WEXITSTATUS(status);
}

long long emulatorCount(const char* what) {
  using Fn = long long (*)(const char*);
  // The library loads the driver privately (dlopen, local symbols), so it is looked up in that library.
  void* lib = loadedEmulator();
  const auto fn = lib == nullptr ? nullptr : reinterpret_cast<Fn>(dlsym(lib, "cfxCudaEmulatorCount"));
  return fn == nullptr ? -1 : fn(what);
}

bool reduceKernelsBuilt() {
  void* hip = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_NOLOAD);
  const bool onHip = hip != nullptr && dlsym(hip, "cfxCudaEmulator") != nullptr;
  if (hip != nullptr) dlclose(hip);
  return onHip ? CFX_TEST_HIP_KERNELS : CFX_TEST_CUDA_KERNELS;
}

void expectIpcPathTaken(IpcOps ops) {
  if (emulatorCount("ipc_opens") < 0) return;
  // Shareable blocks on the CUDA stand-in, legacy handles on the HIP one (which has no virtual memory API).
  EXPECT_GT(emulatorCount("ipc_opens") + emulatorCount("vmm_imports"), 0)
      << "the CUDA IPC path mapped no peer's scratch";
  // Every GPU step of the path rides the user's stream: a copy or kernel enqueued from the progress thread on a
  // stream of its own can sit behind the user's stalled stream in a shared hardware queue.
  EXPECT_EQ(emulatorCount("progress_thread_work"), 0)
      << "the CUDA IPC path enqueued device work from the progress thread";
  const bool kernels = reduceKernelsBuilt();
  if (ops == IpcOps::Reductions && !kernels) return;
  EXPECT_GT(emulatorCount("peer_copies"), 0) << "the CUDA IPC path copied nothing through peers' scratch";
  if (ops != IpcOps::Copies && kernels) {
    EXPECT_GT(emulatorCount("kernel_launches"), 0) << "the CUDA IPC all-reduce launched no reduce kernel";
  }
}

}  // namespace cfx::itest
