// SPDX-License-Identifier: Apache-2.0
// Device scratch shared by the ranks of one host through CUDA IPC (transport layer, cuda_ipc).
//
// Each rank allocates one block of device memory and exports it with a CUDA IPC handle; every rank maps every
// peer's block, so a copy engine or a kernel on any rank reads and writes any peer's block directly: over the
// GPU's own memory when ranks share a GPU, over NVLink or PCIe peer access when they do not. Peers in the same
// process use the pointer as is (CUDA refuses to open a handle in the process that exported it).
//
// Setup is collective over the bootstrap and all-or-nothing: a rank that cannot allocate or map says so in a second
// exchange, and then no rank uses the scratch. So the choice of the device-direct path is the same on every rank.
#pragma once

#include <memory>
#include <vector>

#include "common/cuda_driver.h"
#include "common/status.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/transport.h"

namespace cfx::transport::cuda_ipc {

class IpcScratch {
 public:
  // Collective. `ctx` is this rank's device context; `bytes` the block size on every rank. Returns null (not an
  // error) when any rank could not take part; errors only when the bootstrap itself fails.
  static Result<std::unique_ptr<IpcScratch>> create(Bootstrap& bootstrap, const std::vector<PeerInfo>& peers, int rank,
                                                    cuda::CUcontext ctx, size_t bytes);
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

 private:
  IpcScratch() = default;

  cuda::CUcontext ctx_ = nullptr;
  size_t bytes_ = 0;
  int rank_ = -1;
  bool ranksShareDevice_ = false;
  std::vector<cuda::CUdeviceptr> blocks_;
  std::vector<bool> opened_;  // mapped with cuIpcOpenMemHandle: closed on destruction
};

}  // namespace cfx::transport::cuda_ipc
