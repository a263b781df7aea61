// SPDX-License-Identifier: Apache-2.0
// The CUDA driver stand-in's IPC handles and kernels (see cuda_emulator.cc for the whole of what it models).
//
// IPC: device memory is a shared mapping of a memfd of its own; a handle names the exporting process and that fd,
// and another process maps the same pages through /proc/<pid>/fd, so ranks in different processes see each
// other's writes as through CUDA IPC. Kernels: the reduce-copy kernels of primitives/device, by name, run on the
// stream as the host reduce functions they match bit for bit; the quantisation kernels resolve but do not run.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/types.h"
#include "emu_internal.h"
#include "primitives/device/reduce_args.h"
#include "primitives/reduce.h"

namespace cfx::emu {
namespace {

constexpr CUresult kNotFound = 500;
constexpr uint32_t kIpcMagic = 0x43465845;  // "CFXE"

struct IpcHandle {
  uint32_t magic;
  int32_t pid;      // the exporting process
  int32_t fd;       // its memfd of the allocation
  int32_t ordinal;  // the device the memory is on
  uint64_t bytes;
};

using cfx::prims::device::ReduceArgs;

// A kernel the library resolves by name: a reduce-copy of one type and combine, or one that does not run here.
struct Kernel {
  bool runs = false;
  cfx::DataType type = cfx::DataType::Float32;
  cfx::ReduceOp::Combine combine = cfx::ReduceOp::Combine::Sum;
};

struct Module {
  std::mutex mutex;
  std::vector<std::unique_ptr<Kernel>> kernels;  // the functions handed out, alive as long as the module
};

// The names primitives/device/reduce_kernels.cu gives its kernels (cfx_reduce_<type>_<op>), the quantisation
// kernels' (cfx_quantize_<codec>, cfx_dequantize_<codec>).
bool kernelNamed(const std::string& name, Kernel* k) {
  static constexpr const char* kTypes[cfx::kNumDataTypes] = {"i8",  "u8",  "i32", "u32",  "i64",  "u64",
                                                             "f16", "f32", "f64", "bf16", "e4m3", "e5m2"};
  static constexpr const char* kCombines[4] = {"sum", "prod", "max", "min"};
  if (name.rfind("cfx_quantize_", 0) == 0 || name.rfind("cfx_dequantize_", 0) == 0) {
    k->runs = false;
    return true;
  }
  for (int t = 0; t < cfx::kNumDataTypes; ++t) {
    for (int c = 0; c < 4; ++c) {
      if (name == std::string("cfx_reduce_") + kTypes[t] + "_" + kCombines[c]) {
        *k = Kernel{true, static_cast<cfx::DataType>(t), static_cast<cfx::ReduceOp::Combine>(c)};
        return true;
      }
    }
  }
  return false;
}

// dst = post(pre(src[0]) (+) pre(src[1]) ...), folded in source order as the device kernel does.
void runReduce(const Kernel& k, const ReduceArgs& a) {
  cfx::ReduceOp op;
  op.type = k.type;
  op.combine = k.combine;
  op.preMultiply = a.preMultiply != 0;
  op.postDivide = a.postDivide != 0;
  op.divisor = a.divisor;
  std::memcpy(op.scalar, a.scalar, sizeof(op.scalar));
  const bool post = a.postDivide != 0;
  // The device kernel reads every source of an element before it stores that element, so dst may be one of the
  // sources (an in-place zero-copy all-reduce). Folding into dst source by source would clobber a later source
  // that is dst: fold into a copy then.
  const size_t bytes = a.count * cfx::dataTypeSize(k.type);
  const auto* lo = static_cast<const char*>(a.dst);
  bool aliased = false;
  for (int i = 1; i < a.nSrc; ++i) {
    const auto* s = static_cast<const char*>(a.src[i]);
    aliased = aliased || (s < lo + bytes && lo < s + bytes);
  }
  std::vector<char> scratch(aliased ? bytes : 0);
  void* dst = aliased ? scratch.data() : a.dst;
  cfx::prims::prepareLocal(op, dst, a.src[0], a.count, post && a.nSrc == 1);
  for (int i = 1; i < a.nSrc; ++i) cfx::prims::reduceLocal(op, dst, dst, a.src[i], a.count, post && i == a.nSrc - 1);
  if (aliased) std::memcpy(a.dst, dst, bytes);
}

}  // namespace
}  // namespace cfx::emu

using namespace cfx::emu;  // NOLINT(google-build-using-namespace): the entry points below use the internals

extern "C" {

// IPC: a handle names the exporting process and the memfd behind the allocation; the opener maps the same pages
// through /proc/<pid>/fd (the ranks of a test are processes of one user, as a job's are). As in CUDA, the handle is
// of an allocation's base, and a process cannot open its own.
CFX_EMU_API cuIpcGetMemHandle(void* handle, CUdeviceptr p) {
  if (handle == nullptr) return kInvalidValue;
  uintptr_t base = 0;
  Allocation a;
  // As in CUDA, cuMemCreate memory has no legacy IPC handle.
  if (!findAllocation(static_cast<uintptr_t>(p), &base, &a) || !a.device || a.opened || a.vmm || base != p) {
    return kInvalidValue;
  }
  IpcHandle h{kIpcMagic, static_cast<int32_t>(::getpid()), a.fd, a.ordinal, a.bytes};
  static_assert(sizeof(IpcHandle) <= sizeof(cfx::cuda::CUipcMemHandle));
  std::memset(handle, 0, sizeof(cfx::cuda::CUipcMemHandle));
  std::memcpy(handle, &h, sizeof(h));
  return kSuccess;
}

CFX_EMU_API cuIpcOpenMemHandle_v2(CUdeviceptr* p, cfx::cuda::CUipcMemHandle handle, unsigned) {
  if (p == nullptr) return kInvalidValue;
  if (refusedOnProgressThread("cuIpcOpenMemHandle")) return kNotSupported;
  IpcHandle h;
  std::memcpy(&h, handle.reserved, sizeof(h));
  if (h.magic != kIpcMagic || h.pid == ::getpid()) return kInvalidValue;
  const std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return kInvalidValue;
  struct stat st {};
  void* m = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) == h.bytes) {
    m = ::mmap(nullptr, h.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (m == MAP_FAILED) {
    ::close(fd);
    return kInvalidValue;
  }
  trackAllocation(reinterpret_cast<uintptr_t>(m), Allocation{h.bytes, true, fd, true, h.ordinal});
  gCounters.ipcOpens.fetch_add(1);
  *p = reinterpret_cast<CUdeviceptr>(m);
  return kSuccess;
}

CFX_EMU_API cuIpcCloseMemHandle(CUdeviceptr p) { return release(ptr(p), true, true); }

// Kernels: a module is a name table; cfx_reduce_<type>_<op> runs on the stream as the host reduce functions, which
// the real kernels match bit for bit (tests/gpu/device_kernels_test.cc checks that on a GPU). The quantisation
// kernels resolve but do not run (the library launches them only from tests that need a GPU).
CFX_EMU_API cuModuleLoadData(void** module, const void* image) {
  if (module == nullptr || image == nullptr) return kInvalidValue;
  if (refusedOnProgressThread("cuModuleLoadData")) return kNotSupported;
  *module = new Module();
  gCounters.moduleLoads.fetch_add(1);
  return kSuccess;
}

CFX_EMU_API cuModuleUnload(void* module) {
  if (module == nullptr) return kInvalidHandle;
  delete static_cast<Module*>(module);
  return kSuccess;
}

CFX_EMU_API cuModuleGetFunction(void** fn, void* module, const char* name) {
  if (fn == nullptr || module == nullptr || name == nullptr) return kInvalidValue;
  Kernel k;
  if (!kernelNamed(name, &k)) return kNotFound;
  auto* m = static_cast<Module*>(module);
  std::lock_guard lk(m->mutex);
  m->kernels.push_back(std::make_unique<Kernel>(k));
  *fn = m->kernels.back().get();
  return kSuccess;
}

CFX_EMU_API cuLaunchKernel(void* fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                           unsigned, void* stream, void** params, void** extra) {
  if (fn == nullptr) return kInvalidHandle;
  if (onProgressThread()) gCounters.progressThreadWork.fetch_add(1);
  if (gx * gy * gz == 0 || bx * by * bz == 0 || bx * by * bz > 1024 || params == nullptr || extra != nullptr) {
    return kInvalidValue;
  }
  const Kernel k = *static_cast<const Kernel*>(fn);
  if (!k.runs) return kNotSupported;
  ReduceArgs args;  // by value, as the kernel takes it: the caller's block may change once this returns
  std::memcpy(&args, params[0], sizeof(args));
  if (args.nSrc < 1 || args.nSrc > cfx::prims::device::kMaxReduceSources) return kInvalidValue;
  gCounters.kernelLaunches.fetch_add(1);
  for (int i = 0; i < args.nSrc; ++i) {
    if (isImportedVmm(args.src[i])) {
      gCounters.vmmPeerKernelReads.fetch_add(1);
      break;
    }
  }
  submit(streamOf(stream), [k, args] { runReduce(k, args); });
  return kSuccess;
}

// What the emulator did in this process, for tests that must tell a path taken from one fallen back from:
// "ipc_opens", "peer_copies", "module_loads", "kernel_launches", "progress_thread_work", "vmm_imports",
// "vmm_peer_copies", "vmm_peer_kernel_reads", "host_registers", "host_functions". -1 for an unknown name.
__attribute__((visibility("default"))) long long cfxCudaEmulatorCount(const char* what) {
  if (what == nullptr) return -1;
  const std::string w = what;
  if (w == "ipc_opens") return static_cast<long long>(gCounters.ipcOpens.load());
  if (w == "peer_copies") return static_cast<long long>(gCounters.peerCopies.load());
  if (w == "module_loads") return static_cast<long long>(gCounters.moduleLoads.load());
  if (w == "kernel_launches") return static_cast<long long>(gCounters.kernelLaunches.load());
  if (w == "progress_thread_work") return static_cast<long long>(gCounters.progressThreadWork.load());
  if (w == "vmm_imports") return static_cast<long long>(gCounters.vmmImports.load());
  if (w == "vmm_peer_copies") return static_cast<long long>(gCounters.vmmPeerCopies.load());
  if (w == "vmm_peer_kernel_reads") return static_cast<long long>(gCounters.vmmPeerKernelReads.load());
  if (w == "host_registers") return static_cast<long long>(gCounters.hostRegisters.load());
  if (w == "host_functions") return static_cast<long long>(gCounters.hostFunctions.load());
  return -1;
}

}  // extern "C"
