// SPDX-License-Identifier: Apache-2.0
// Device memory that same-host peers map in place (transport layer, cuda_ipc): what ncclMemAlloc hands out on a
// GPU, and this process's mappings of peers' blocks.
//
// Why the virtual memory API and not cudaMalloc with legacy IPC handles: CUDA documents that freeing memory whose
// IPC handle a peer still has open is undefined, and NCCL's deregistration is not a barrier (a program may free one
// rank's buffer while a peer still maps it). A block made with cuMemCreate and exported as a file descriptor lives
// until its last mapping goes, in whichever process: a rank may free its buffer whenever it likes, and a peer's
// mapping only keeps the pages alive until that peer unmaps.
//
// A block is reserved and mapped at the recommended granularity (2 MiB on an H100), readable and writable by the
// device that made it; peers import its descriptor and map it for their own device. Descriptors go between
// processes over a Unix socket with SCM_RIGHTS (FdServer, FdClient), which needs no ptrace permission.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/cuda_driver.h"
#include "common/status.h"

namespace cfx::transport::cuda_ipc {

// One block of this process, as a window registration describes it.
struct ShareableBlock {
  uint64_t id = 0;  // > 0, never reused in this process
  cuda::CUdeviceptr base = 0;
  size_t bytes = 0;  // the mapped size: the request rounded up to the granularity
  int fd = -1;       // the exported descriptor, open until freeShareable
};

// `bytes` (> 0) of device memory of the current context's device, exported as a descriptor. Errors name the call;
// Errc::InvalidUsage when the driver or device has no virtual memory management or descriptor export (HIP, old
// drivers), where the caller uses cuMemAlloc instead.
Result<void*> allocShareable(size_t bytes);
// Frees a block returned by allocShareable: unmapped here at once, its pages freed once no peer maps them. False
// (nothing done) when `p` is not the start of one.
Result<bool> freeShareable(void* p);
// The block holding all of [p, p + bytes), if there is one.
std::optional<ShareableBlock> findShareable(const void* p, size_t bytes);

// A peer's block mapped into this process for the device of the current context: unmapped on destruction.
class PeerBlock {
 public:
  // Imports `fd` (a peer's exported block of `bytes` bytes; the caller keeps and closes `fd`).
  static Result<std::unique_ptr<PeerBlock>> map(int fd, size_t bytes);
  ~PeerBlock();
  PeerBlock(const PeerBlock&) = delete;
  PeerBlock& operator=(const PeerBlock&) = delete;
  cuda::CUdeviceptr base() const { return base_; }

 private:
  PeerBlock() = default;
  cuda::CUdeviceptr base_ = 0;
  size_t bytes_ = 0;
};

// A peer's block mapped for the current context's device, shared by every window over it: a block registered in
// several windows, or by several communicators, is imported and mapped once per device. Keyed by the exporter's pid
// and processToken() and the block's id, which no process reuses. `fd` is the block's descriptor (the caller keeps
// and closes it; unused when the mapping exists already).
Result<std::shared_ptr<PeerBlock>> mapPeerBlockOnce(int pid, uint64_t token, uint64_t blockId, int fd, size_t bytes);
// Random per process, fixed for its lifetime: tells a process from an earlier one with the same pid.
uint64_t processToken();

// A listening Unix socket (abstract namespace, private to this process's user) from which peers fetch descriptors.
class FdServer {
 public:
  static Result<std::unique_ptr<FdServer>> listen();
  ~FdServer();
  FdServer(const FdServer&) = delete;
  FdServer& operator=(const FdServer&) = delete;
  // The name peers connect to (without the leading NUL of the abstract namespace).
  const std::string& name() const { return name_; }
  // Accepts `clients` connections and sends `fd` on each, with `tag` as the payload. Each client is checked to run
  // as this process's user. Fails naming the cause once `deadline` passes, or with `alive`'s error as soon as it
  // reports one (checked every 100 ms: a peer known to have died will never come).
  Status serve(int clients, int fd, uint64_t tag, std::chrono::steady_clock::time_point deadline,
               const std::function<Status()>& alive);

 private:
  FdServer() = default;
  int sock_ = -1;
  std::string name_;
};

// Connects to a peer's FdServer (`name`) and returns the descriptor it sends, after checking its payload is `tag`.
// The connection is made at once and the descriptor read by receive(), so a rank can connect to all its peers
// before serving any of them.
class FdClient {
 public:
  static Result<std::unique_ptr<FdClient>> connect(const std::string& name);
  ~FdClient();
  FdClient(const FdClient&) = delete;
  FdClient& operator=(const FdClient&) = delete;
  Result<int> receive(uint64_t tag, std::chrono::steady_clock::time_point deadline,
                      const std::function<Status()>& alive);

 private:
  FdClient() = default;
  int sock_ = -1;
};

}  // namespace cfx::transport::cuda_ipc
