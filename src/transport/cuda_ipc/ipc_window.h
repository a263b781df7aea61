// SPDX-License-Identifier: Apache-2.0
// A registered window mapped by every rank of one host (transport layer, cuda_ipc): the zero-copy half of
// ncclCommWindowRegister.
//
// When every rank registers a block from ncclMemAlloc (vmm_memory.h), each rank maps every peer's block, so the
// device-direct collectives read a peer's buffer where it lies instead of copying it through the peer's scratch
// first. Registration is collective over the bootstrap and all-or-nothing, as the scratch's setup is: a rank whose
// buffer is not such a block, or that cannot map a peer's, says so in the exchange, and then no rank uses the
// window's mappings (its ops take the scratch path). So the choice of path is the same on every rank.
//
// Lifetime: a peer's mapping holds its pages until this window is destroyed (ncclCommWindowDeregister, or the
// communicator's end), even if the peer freed its buffer first; so deregistration needs no barrier.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "common/cuda_driver.h"
#include "common/status.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/cuda_ipc/vmm_memory.h"

namespace cfx::transport::cuda_ipc {

class IpcWindow {
 public:
  // Collective. `ctx` is this rank's device context; [buff, buff + bytes) this rank's window. Errors only when the
  // bootstrap fails; a window that cannot be shared comes back with zeroCopy() false on every rank. Waits for
  // peers' descriptors end after `timeout`, or as soon as `alive` reports an error (a peer known to be dead).
  static Result<std::unique_ptr<IpcWindow>> create(Bootstrap& bootstrap, int rank, int nRanks, cuda::CUcontext ctx,
                                                   const void* buff, size_t bytes, std::chrono::milliseconds timeout,
                                                   const std::function<Status()>& alive);
  ~IpcWindow();
  IpcWindow(const IpcWindow&) = delete;
  IpcWindow& operator=(const IpcWindow&) = delete;

  bool zeroCopy() const { return zeroCopy_; }
  // Rank r's window as this process addresses it (r == own rank: the registered buffer), and its size.
  cuda::CUdeviceptr base(int r) const { return bases_[static_cast<size_t>(r)]; }
  size_t bytes(int r) const { return sizes_[static_cast<size_t>(r)]; }

 private:
  IpcWindow() = default;
  bool zeroCopy_ = false;
  std::vector<cuda::CUdeviceptr> bases_;
  std::vector<size_t> sizes_;
  std::vector<std::shared_ptr<PeerBlock>> mapped_;  // peers' blocks this process imported (mapPeerBlockOnce)
  cuda::CUcontext ctx_ = nullptr;
};

}  // namespace cfx::transport::cuda_ipc
