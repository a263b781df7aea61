// SPDX-License-Identifier: Apache-2.0
// Device scratch shared through CUDA IPC (transport layer, cuda_ipc).
#include "transport/cuda_ipc/ipc_scratch.h"

#include <unistd.h>

#include <cstring>

#include "common/log.h"

namespace cfx::transport::cuda_ipc {

namespace {

struct Export {
  cuda::CUipcMemHandle handle;
  uint64_t address;  // for peers in this process
  int32_t pid;
  int32_t ok;
  int64_t pciAddress;  // domain, bus and device of this rank's GPU; -1 when unknown
};

// The device's PCI address as one number (CUDA_VISIBLE_DEVICES may give one GPU different ordinals in different
// processes, so ordinals do not tell whether ranks share it).
int64_t pciAddressOf(const cuda::Driver& d) {
  cuda::CUdevice dev = 0;
  int domain = 0, bus = 0, device = 0;
  if (d.ctxGetDevice(&dev) != cuda::kSuccess ||
      d.deviceGetAttribute(&domain, cuda::kDeviceAttrPciDomainId, dev) != cuda::kSuccess ||
      d.deviceGetAttribute(&bus, cuda::kDeviceAttrPciBusId, dev) != cuda::kSuccess ||
      d.deviceGetAttribute(&device, cuda::kDeviceAttrPciDeviceId, dev) != cuda::kSuccess) {
    return -1;
  }
  return (int64_t{domain} << 16) | (int64_t{bus} << 8) | device;
}

}  // namespace

Result<std::unique_ptr<IpcScratch>> IpcScratch::create(Bootstrap& bootstrap, const std::vector<PeerInfo>& peers,
                                                       int rank, cuda::CUcontext ctx, size_t bytes) {
  const cuda::Driver* d = cuda::driver();
  const size_t n = peers.size();
  std::unique_ptr<IpcScratch> s(new IpcScratch());
  s->ctx_ = ctx;
  s->bytes_ = bytes;
  s->rank_ = rank;
  s->blocks_.assign(n, 0);
  s->opened_.assign(n, false);

  std::vector<Export> exports(n);
  Export& mine = exports[static_cast<size_t>(rank)];
  std::memset(&mine, 0, sizeof(mine));
  mine.pid = static_cast<int32_t>(getpid());
  mine.pciAddress = -1;
  Status local;
  if (d == nullptr || ctx == nullptr) {
    local = Status::error(Errc::UnhandledCudaError, "no CUDA device context on this rank");
  } else {
    cuda::ScopedContext scope(ctx);
    mine.pciAddress = pciAddressOf(*d);
    local = cuda::check(d->memAlloc(&s->blocks_[static_cast<size_t>(rank)], bytes), "cuMemAlloc (IPC scratch)");
    if (local.ok()) local = cuda::check(d->ipcGetMemHandle(&mine.handle, s->blocks_[static_cast<size_t>(rank)]),
                                        "cuIpcGetMemHandle (IPC scratch)");
  }
  mine.address = s->blocks_[static_cast<size_t>(rank)];
  mine.ok = local.ok() ? 1 : 0;
  CFX_TRY(bootstrap.allGather(exports.data(), sizeof(Export)));

  int32_t mapped = mine.ok;
  for (size_t p = 0; p < n && mapped; ++p) {
    if (static_cast<int>(p) == rank) continue;
    if (!exports[p].ok) {
      mapped = 0;
      break;
    }
    if (exports[p].pid == mine.pid) {
      s->blocks_[p] = exports[p].address;
      continue;
    }
    cuda::ScopedContext scope(ctx);
    local = cuda::check(d->ipcOpenMemHandle(&s->blocks_[p], exports[p].handle, cuda::kIpcLazyEnablePeerAccess),
                        "cuIpcOpenMemHandle (IPC scratch)");
    if (!local.ok()) {
      CFX_INFO(log::Sys::Init, "rank %d: cannot map rank %d's device memory: %s", rank, static_cast<int>(p),
               local.message().c_str());
      mapped = 0;
      break;
    }
    s->opened_[p] = true;
  }
  std::vector<int32_t> all(n);
  all[static_cast<size_t>(rank)] = mapped;
  CFX_TRY(bootstrap.allGather(all.data(), sizeof(int32_t)));
  for (size_t p = 0; p < n; ++p) {
    if (!all[p]) {
      CFX_INFO(log::Sys::Init, "rank %d: device-direct (CUDA IPC) path off: rank %d could not share device memory",
               rank, static_cast<int>(p));
      return std::unique_ptr<IpcScratch>();  // the destructor unmaps and frees what this rank set up
    }
  }
  for (size_t p = 0; p < n; ++p) {
    // An unknown address counts as shared: the costly case is the shared GPU's, so it is assumed.
    if (exports[p].pciAddress < 0) s->ranksShareDevice_ = true;
    for (size_t q = p + 1; q < n; ++q) {
      if (exports[p].pciAddress == exports[q].pciAddress) s->ranksShareDevice_ = true;
    }
  }
  CFX_INFO(log::Sys::Init, "rank %d: device-direct (CUDA IPC) path on: %zu ranks%s, %zu B of scratch each", rank, n,
           s->ranksShareDevice_ ? " (some share a GPU)" : " on their own GPUs", bytes);
  return s;
}

IpcScratch::~IpcScratch() {
  const cuda::Driver* d = cuda::driver();
  if (d == nullptr) return;
  cuda::ScopedContext scope(ctx_);
  for (size_t p = 0; p < blocks_.size(); ++p) {
    if (opened_[p]) d->ipcCloseMemHandle(blocks_[p]);
  }
  if (rank_ >= 0 && rank_ < static_cast<int>(blocks_.size()) && blocks_[static_cast<size_t>(rank_)] != 0) {
    d->memFree(blocks_[static_cast<size_t>(rank_)]);
  }
}

}  // namespace cfx::transport::cuda_ipc
