// SPDX-License-Identifier: Apache-2.0
// Device scratch shared by the ranks of one host through CUDA IPC (transport layer, cuda_ipc).
//
// Each rank allocates one block of device memory and every rank maps every peer's block, so a copy engine or a
// kernel on any rank reads and writes any peer's block directly: over the GPU's own memory when ranks share a GPU,
// over NVLink or PCIe peer access when they do not. Peers in the same process use the pointer as is.
//
// The block is made with CUDA's virtual memory API and passed as a file descriptor (vmm_memory.h,
// block_exchange.h), whose memory lives until its last mapping goes: a rank that dies or aborts mid-op leaves its
// block valid for the peers' device work still queued. Where any rank cannot (HIP, an old driver, a container that
// refuses), every rank uses legacy CUDA IPC handles instead, for which CUDA does not say what an exporter's exit
// does to its importers.
//
// Setup is collective over the bootstrap and all-or-nothing: a rank that cannot allocate or map says so in an
// exchange, and then no rank uses the scratch. So the choice of the device-direct path is the same on every rank.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "common/cuda_driver.h"
#include "common/status.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/cuda_ipc/vmm_memory.h"
#include "transport/transport.h"

namespace cfx::transport::cuda_ipc {

class IpcScratch {
 public:
  // Collective. `ctx` is this rank's device context; `bytes` the block size on every rank. Returns null (not an
  // error) when any rank could not take part; errors only when the bootstrap itself fails.
  static Result<std::unique_ptr<IpcScratch>> create(Bootstrap& bootstrap, const std::vector<PeerInfo>& peers, int rank,
                                                    cuda::CUcontext ctx, size_t bytes,
                                                    std::chrono::milliseconds timeout);
  ~IpcScratch();
  IpcScratch(const IpcScratch&) = delete;
  IpcScratch& operator=(const IpcScratch&) = delete;

  size_t bytes() const { return bytes_; }
  cuda::CUcontext context() const { return ctx_; }
  // Rank r's block as mapped in this process (r == own rank: the local block).
  cuda::CUdeviceptr block(int r) const { return blocks_[static_cast<size_t>(r)]; }
  // Whether two or more ranks run on one GPU (the same PCI address), where each wait for the GPU's work costs a
  // switch between their contexts. The same on every rank.
  bool ranksShareDevice() const { return ranksShareDevice_; }
  // Whether the blocks are virtual-memory blocks passed as descriptors (else legacy IPC handles).
  bool shareable() const { return shareable_; }

 private:
  IpcScratch() = default;
  // The virtual-memory form: true when every rank set it up (the same on every rank); false, with nothing left
  // allocated, when any rank could not and the legacy form must be tried. Errors only when the bootstrap fails.
  Result<bool> setupShareable(Bootstrap& bootstrap, std::chrono::milliseconds timeout);
  Status setupLegacy(Bootstrap& bootstrap);
  void releaseLegacy();  // closes the peers' handles and frees this rank's block
  void decideSharing(const std::vector<int64_t>& pciAddresses);

  cuda::CUcontext ctx_ = nullptr;
  size_t bytes_ = 0;
  int rank_ = -1;
  bool ranksShareDevice_ = false;
  std::vector<cuda::CUdeviceptr> blocks_;
  std::vector<bool> opened_;  // mapped with cuIpcOpenMemHandle: closed on destruction
  bool shareable_ = false;
  std::vector<std::shared_ptr<PeerBlock>> mapped_;  // the shareable form's peer blocks
};

}  // namespace cfx::transport::cuda_ipc
