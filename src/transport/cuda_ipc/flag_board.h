// SPDX-License-Identifier: Apache-2.0
// Arrival words in host memory that every rank of a host maps and its GPU reaches (transport layer, cuda_ipc): the
// device-side barriers of the device programs (collectives/device_program.h), with no host thread on the way.
//
// One shared segment per communicator (a memfd made by rank 0, passed as a descriptor to the other processes over a
// Unix socket, as the IPC scratch is) holds a row per rank: row r has a word per peer p, which p's stream sets to b
// when it reaches barrier b (cuStreamWriteValue32, whose default fences the stream's earlier writes), and two words
// of r's own: `arrived` (set before r's stream waits) and `passed` (after). Rank r's stream waits until every peer's
// word in its row reaches b (cuStreamWaitValue32, GEQ: 32-bit counters may wrap). Every process registers its
// mapping with CUDA (cuMemHostRegister), so its device addresses the same pages.
//
// Only host memory lets a host thread release a waiting stream with a plain store and no CUDA call (a CUDA call on
// our threads can deadlock on the context lock a user thread holds): release() sets this rank's row past every
// barrier handed out, on abort, on a peer's failure, or when the watchdog gives up on a peer that never arrived.
//
// No kernel waits on another process's kernel: the waits are stream memory operations of the GPU's front end. Where
// ranks share a GPU, a waiting stream's context still holds its time slice until the scheduler moves on, which no
// GPU has measured yet (docs/gpu_proof.md): CFX_CUDA_IPC_DEVICE_SYNC decides.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/cuda_driver.h"
#include "common/status.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/transport.h"

namespace cfx::transport::cuda_ipc {

class FlagBoard {
 public:
  // Collective over the bootstrap, all or nothing: null (not an error) when any rank cannot make, map or register
  // the board (said at INFO); errors only when the bootstrap fails. `ctx` is this rank's device context.
  static Result<std::unique_ptr<FlagBoard>> create(Bootstrap& bootstrap, const std::vector<PeerInfo>& peers, int rank,
                                                   cuda::CUcontext ctx, std::chrono::milliseconds timeout);
  // Unmaps only when this rank's stream has passed every barrier handed out (passed() == the last one): a stream
  // may still poll the row otherwise, and freeing memory under a waiting stream faults the GPU; the pages are then
  // left mapped, a page per communicator.
  ~FlagBoard();
  FlagBoard(const FlagBoard&) = delete;
  FlagBoard& operator=(const FlagBoard&) = delete;

  int rank() const { return rank_; }
  int nRanks() const { return n_; }
  // Device addresses: where this rank's stream says it reached a barrier to peer p (p's row, this rank's word), and
  // where it waits for p (this row, p's word); self(): this row's arrived and passed words.
  cuda::CUdeviceptr tell(int p) const { return dev_ + wordOffset(p, rank_); }
  cuda::CUdeviceptr from(int p) const { return dev_ + wordOffset(rank_, p); }
  cuda::CUdeviceptr arrivedWord() const { return dev_ + wordOffset(rank_, n_); }
  cuda::CUdeviceptr passedWord() const { return dev_ + wordOffset(rank_, n_ + 1); }

  // The next barrier's number (call order: the same on every rank for the same ops). User thread.
  uint32_t nextBarrier() { return ++issued_; }
  uint32_t issued() const { return issued_.load(std::memory_order_acquire); }
  // Host views of this row, read atomically (they pair with the GPU's writes through the registered mapping).
  uint32_t fromPeer(int p) const;
  uint32_t arrived() const;
  uint32_t passed() const;
  // Lets this rank's stream past every barrier handed out so far: its row's words become issued(). Any thread.
  void release();

 private:
  FlagBoard() = default;
  size_t wordOffset(int row, int word) const {
    return (static_cast<size_t>(row) * static_cast<size_t>(n_ + 2) + static_cast<size_t>(word)) * sizeof(uint32_t);
  }
  uint32_t* word(int row, int w) const {
    return reinterpret_cast<uint32_t*>(static_cast<char*>(host_) + wordOffset(row, w));
  }

  int rank_ = 0;
  int n_ = 0;
  void* host_ = nullptr;       // this process's mapping of the segment
  size_t bytes_ = 0;
  bool registered_ = false;    // this object registered host_ (ranks of rank 0's process use its mapping)
  bool owner_ = false;         // this object mapped host_ (and unmaps it)
  cuda::CUdeviceptr dev_ = 0;  // host_ as the device addresses it
  cuda::CUcontext ctx_ = nullptr;
  std::atomic<uint32_t> issued_{0};
};

}  // namespace cfx::transport::cuda_ipc
