// SPDX-License-Identifier: Apache-2.0
// Device scratch shared through CUDA IPC (transport layer, cuda_ipc).
#include "transport/cuda_ipc/ipc_scratch.h"

#include <unistd.h>

#include <cstring>
#include <optional>

#include "common/log.h"
#include "transport/cuda_ipc/block_exchange.h"

namespace cfx::transport::cuda_ipc {

namespace {

struct Export {
  cuda::CUipcMemHandle handle;
  uint64_t address;  // for peers in this process
  uint64_t token;    // processToken(): with the pid, tells this process from one of the same pid in another namespace
  int32_t pid;
  int32_t ok;
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
                                                       int rank, cuda::CUcontext ctx, size_t bytes,
                                                       std::chrono::milliseconds timeout) {
  const size_t n = peers.size();
  std::unique_ptr<IpcScratch> s(new IpcScratch());
  s->ctx_ = ctx;
  s->bytes_ = bytes;
  s->rank_ = rank;
  s->blocks_.assign(n, 0);
  s->opened_.assign(n, false);

  // Every rank's GPU, to tell whether ranks share one.
  std::vector<int64_t> pci(n, -1);
  if (const cuda::Driver* d = cuda::driver(); d != nullptr && ctx != nullptr) {
    cuda::ScopedContext scope(ctx);
    pci[static_cast<size_t>(rank)] = pciAddressOf(*d);
  }
  CFX_TRY(bootstrap.allGather(pci.data(), sizeof(int64_t)));
  CFX_TRY_ASSIGN(const bool shareable, s->setupShareable(bootstrap, timeout));
  if (!shareable) CFX_TRY(s->setupLegacy(bootstrap));
  if (s->blocks_[static_cast<size_t>(rank)] == 0) return std::unique_ptr<IpcScratch>();  // not every rank could
  s->decideSharing(pci);
  CFX_INFO(log::Sys::Init, "rank %d: device-direct (CUDA IPC) path on: %zu ranks%s, %zu B of scratch each (%s)", rank,
           n, s->ranksShareDevice_ ? " (some share a GPU)" : " on their own GPUs", bytes,
           shareable ? "shared as file descriptors" : "legacy IPC handles");
  return s;
}

Result<bool> IpcScratch::setupShareable(Bootstrap& bootstrap, std::chrono::milliseconds timeout) {
  const size_t n = blocks_.size();
  const size_t me = static_cast<size_t>(rank_);
  void* mine = nullptr;
  std::optional<ShareableBlock> block;
  if (ctx_ != nullptr) {
    cuda::ScopedContext scope(ctx_);
    Result<void*> p = allocShareable(bytes_);
    if (p.ok()) {
      mine = p.value();
      block = findShareable(mine, bytes_);
    } else {
      CFX_INFO(log::Sys::Init, "rank %d: IPC scratch as a shareable block: %s", rank_, p.status().message().c_str());
    }
  }
  // Freed on every way out but success, a failed bootstrap exchange included.
  struct Release {
    void*& block;
    cuda::CUcontext ctx;
    ~Release() {
      if (block == nullptr) return;
      cuda::ScopedContext scope(ctx);
      (void)freeShareable(block);
    }
  } release{mine, ctx_};
  std::unique_ptr<FdServer> server;
  std::vector<BlockOffer> offers(n);
  offers[me] = offerBlock(block ? &*block : nullptr, &server);
  CFX_TRY(bootstrap.allGather(offers.data(), sizeof(BlockOffer)));
  bool all = true;
  for (const BlockOffer& o : offers) all = all && o.ok;
  if (!all) return false;
  std::vector<cuda::CUdeviceptr> bases;
  const Status local = mapPeerBlocks(rank_, offers, *server, *block, ctx_, std::chrono::steady_clock::now() + timeout,
                                     nullptr, &mapped_, &bases);
  server.reset();
  if (!local.ok()) {
    CFX_INFO(log::Sys::Init, "rank %d: cannot map the IPC scratch of %s", rank_, local.message().c_str());
  }
  CFX_TRY_ASSIGN(const int notMapped, firstRankNotOk(bootstrap, rank_, static_cast<int>(n), local.ok()));
  if (notMapped >= 0) {
    mapped_.clear();
    return false;
  }
  blocks_ = bases;
  shareable_ = true;
  mine = nullptr;  // the scratch's own block from here on, freed by the destructor
  return true;
}

Status IpcScratch::setupLegacy(Bootstrap& bootstrap) {
  const cuda::Driver* d = cuda::driver();
  const size_t n = blocks_.size();
  const size_t me = static_cast<size_t>(rank_);
  std::vector<Export> exports(n);
  Export& mine = exports[me];
  std::memset(&mine, 0, sizeof(mine));
  mine.pid = static_cast<int32_t>(getpid());
  mine.token = processToken();
  Status local;
  if (d == nullptr || ctx_ == nullptr) {
    local = Status::error(Errc::UnhandledCudaError, "no CUDA device context on this rank");
  } else {
    cuda::ScopedContext scope(ctx_);
    local = cuda::check(d->memAlloc(&blocks_[me], bytes_), "cuMemAlloc (IPC scratch)");
    if (local.ok())
      local = cuda::check(d->ipcGetMemHandle(&mine.handle, blocks_[me]), "cuIpcGetMemHandle (IPC scratch)");
  }
  mine.address = blocks_[me];
  mine.ok = local.ok() ? 1 : 0;
  CFX_TRY(bootstrap.allGather(exports.data(), sizeof(Export)));

  int32_t mapped = mine.ok;
  for (size_t p = 0; p < n && mapped; ++p) {
    if (p == me) continue;
    if (!exports[p].ok) {
      mapped = 0;
      break;
    }
    if (exports[p].pid == mine.pid && exports[p].token == mine.token) {
      blocks_[p] = exports[p].address;
      continue;
    }
    cuda::ScopedContext scope(ctx_);
    local = cuda::check(d->ipcOpenMemHandle(&blocks_[p], exports[p].handle, cuda::kIpcLazyEnablePeerAccess),
                        "cuIpcOpenMemHandle (IPC scratch)");
    if (!local.ok()) {
      CFX_INFO(log::Sys::Init, "rank %d: cannot map rank %zu's device memory: %s", rank_, p, local.message().c_str());
      mapped = 0;
      break;
    }
    opened_[p] = true;
  }
  CFX_TRY_ASSIGN(const int notMapped, firstRankNotOk(bootstrap, rank_, static_cast<int>(n), mapped != 0));
  if (notMapped >= 0) {
    CFX_INFO(log::Sys::Init, "rank %d: device-direct (CUDA IPC) path off: rank %d could not share device memory", rank_,
             notMapped);
    releaseLegacy();
  }
  return Status();
}

void IpcScratch::decideSharing(const std::vector<int64_t>& pci) {
  for (size_t p = 0; p < pci.size(); ++p) {
    // An unknown address counts as shared: the costly case is the shared GPU's, so it is assumed.
    if (pci[p] < 0) ranksShareDevice_ = true;
    for (size_t q = p + 1; q < pci.size(); ++q) {
      if (pci[p] == pci[q]) ranksShareDevice_ = true;
    }
  }
}

void IpcScratch::releaseLegacy() {
  const cuda::Driver* d = cuda::driver();
  if (d == nullptr) return;
  cuda::ScopedContext scope(ctx_);
  for (size_t p = 0; p < blocks_.size(); ++p) {
    if (opened_[p]) d->ipcCloseMemHandle(blocks_[p]);
    opened_[p] = false;
  }
  if (rank_ >= 0 && rank_ < static_cast<int>(blocks_.size()) && blocks_[static_cast<size_t>(rank_)] != 0) {
    d->memFree(blocks_[static_cast<size_t>(rank_)]);
  }
  blocks_.assign(blocks_.size(), 0);
}

IpcScratch::~IpcScratch() {
  if (!shareable_) {
    releaseLegacy();
    return;
  }
  cuda::ScopedContext scope(ctx_);
  mapped_.clear();  // peers' blocks: unmapped here; each lives on while its owner or another rank maps it
  (void)freeShareable(reinterpret_cast<void*>(blocks_[static_cast<size_t>(rank_)]));
}

}  // namespace cfx::transport::cuda_ipc
