// SPDX-License-Identifier: Apache-2.0
// ncclMemAlloc and ncclMemFree's policy (core layer).
#include "core/memory.h"

#include "common/cuda_driver.h"
#include "common/log.h"
#include "transport/peer_memory.h"

namespace cfx::core {

Result<void*> allocMemory(size_t size) {
  // As in NCCL: memory of the calling thread's current device when it has one (a CUDA program), else host
  // memory for host-only programs. On a device, a block peers can map and read in place whenever the driver
  // can export one (transport/peer_memory.h), else plain cuMemAlloc memory.
  if (const cuda::Driver* d = cuda::driver()) {
    cuda::CUcontext ctx = nullptr;
    if (d->ctxGetCurrent(&ctx) == cuda::kSuccess && ctx != nullptr) {
      Result<void*> shareable = transport::allocDeviceShareable(size);
      if (shareable.ok()) {
        CFX_INFO(log::Sys::Alloc, "ncclMemAlloc %p size %zu (device, shareable with same-host peers)",
                 shareable.value(), size);
        return shareable;
      }
      // Any failure (no virtual memory API, a driver or container that cannot export descriptors, no room)
      // falls back to plain device memory, which only loses the zero-copy; cuMemAlloc reports real exhaustion.
      CFX_INFO(log::Sys::Alloc, "ncclMemAlloc: %s; using cuMemAlloc", shareable.status().message().c_str());
      cuda::CUdeviceptr dp = 0;
      CFX_TRY(cuda::check(d->memAlloc(&dp, size), strprintf("ncclMemAlloc: cuMemAlloc(%zu bytes)", size).c_str()));
      void* ptr = reinterpret_cast<void*>(dp);
      CFX_INFO(log::Sys::Alloc, "ncclMemAlloc %p size %zu (device)", ptr, size);
      return ptr;
    }
  }
  // Host memory that same-host peers can map, so direct messages from it cost one plain copy.
  auto p = transport::allocHostExported(size);
  if (!p.ok()) return Status::error(p.status().code(), "ncclMemAlloc: " + p.status().message());
  CFX_INFO(log::Sys::Alloc, "ncclMemAlloc %p size %zu (host, exported to same-host peers)", *p, size);
  return *p;
}

Status freeMemory(void* ptr) {
  if (transport::freeHostExported(ptr)) return Status();
  CFX_TRY_ASSIGN(const bool shareable, transport::freeDeviceShareable(ptr));
  if (shareable) return Status();
  if (cuda::classify(ptr).kind == cuda::MemKind::Device) {
    return cuda::check(cuda::driver()->memFree(reinterpret_cast<cuda::CUdeviceptr>(ptr)), "ncclMemFree: cuMemFree");
  }
  return Status::error(Errc::InvalidArgument, strprintf("ncclMemFree: %p was not returned by ncclMemAlloc", ptr));
}

}  // namespace cfx::core
