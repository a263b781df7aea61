// SPDX-License-Identifier: Apache-2.0
// Device buffers on a cudaStream_t (core layer): NCCL's stream semantics over the host algorithms.
//
// An op on device memory returns as soon as it is enqueued. Its place in the user's stream is held by two
// stream operations enqueued at call time:
//   1. a host function (cuLaunchHostFunc) that opens a gate when the stream reaches the op, i.e. when every
//      kernel and copy enqueued before it has finished. It only sets a flag and wakes a waiter: it never blocks
//      the driver's callback thread and never calls CUDA.
//   2. cuStreamWaitValue32 on a word of pinned host memory: the stream (not a kernel) stalls until the
//      communicator's progress thread writes the op's sequence number there.
// In between, the progress thread copies the op's device inputs into pinned host staging, runs the same host
// algorithm as for host buffers (so every transport, every collective and bit-identical results come for free),
// copies the outputs back, and writes the sequence number. No kernel ever waits for another process's kernel, so
// any number of ranks may share one GPU, in one process or in many.
//
// Cost per op: two PCIe copies of the op's bytes (about 25 GB/s each way on PCIe 5) plus ~100 us of stream
// signalling, on top of the host algorithm. Device-resident transports (CUDA IPC with reduction kernels) replace
// the staging for peers on one host later; the stream protocol above stays.
//
// Failure: a failed or aborted op still writes its sequence number (the stream must never stall forever on a
// dead peer); the error is the communicator's async error, as with NCCL's ncclCommGetAsyncError.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "common/cuda_driver.h"
#include "common/status.h"

namespace cfx::core {

// One device range of an op, mirrored in pinned host memory for the op's duration.
struct StagedRange {
  cuda::CUdeviceptr device = 0;
  void* host = nullptr;
  size_t bytes = 0;
  bool copyIn = false;   // device -> host before the op runs (the op reads it)
  bool copyOut = false;  // host -> device after the op ran (the op wrote it)
};

// Opened by the stream's host functions once the stream has reached the op.
class ReadyGate {
 public:
  explicit ReadyGate(int streams) : pending_(streams) {}
  void open();                      // from the CUDA callback thread; never blocks for long
  void fail(Status st);             // the stream operations could not be enqueued
  // Waits until every stream reached the op, or `abort` is set. Blocks (no spinning): streams may stay busy for
  // as long as the user's kernels run, so there is no deadline here.
  // rank and seq name the op in the INFO line logged every 10 s of waiting.
  Status wait(const std::atomic<bool>& abort, int rank, uint32_t seq);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int pending_;
  Status failure_;
};

// A communicator's device-side state: its stream flag, pinned staging and copy stream.
class DeviceState {
 public:
  explicit DeviceState(int rank) : rank_(rank) {}
  ~DeviceState();  // releases every stream still waiting on this communicator
  DeviceState(const DeviceState&) = delete;
  DeviceState& operator=(const DeviceState&) = delete;

  // Staging: one pinned block per communicator, shared by all its device jobs, which run one at a time on the
  // progress thread. The user thread grows it (reserveStaging, before enqueueing a job that needs `bytes`); a job
  // takes the current block when it starts (stagingBase). A replaced block is kept until destroy, since the running
  // job may still use it; doubling bounds that waste to the size of the current block.
  Status reserveStaging(size_t bytes);
  void* stagingBase();

  // User thread, before enqueueStreamOps: creates the copy stream and event in `ctx` on first use. They must be
  // created here: cuStreamCreate takes a context-wide write lock, and the user's thread may later sit in a
  // synchronous CUDA call (a copy to pageable memory) that holds that lock for reading until this op completes.
  Status prepare(cuda::CUcontext ctx);
  // User thread: enqueues the ready host function and the flag wait for one op on each stream, in `ctx`.
  // Sets *seq to the op's sequence number once a stream may wait for it (0 before that): from then on the op must
  // be run and completed even if this returns an error. On an error before that, the gate has been failed.
  Status enqueueStreamOps(cuda::CUcontext ctx, const std::vector<cuda::CUstream>& streams,
                          const std::shared_ptr<ReadyGate>& gate, uint32_t* seq);
  // Progress thread: staging copies in `ctx` on this communicator's copy stream, waited for without spinning.
  // Nothing here creates or destroys a CUDA object (see prepare).
  Status copyIn(cuda::CUcontext ctx, const std::vector<StagedRange>& ranges);
  Status copyOut(cuda::CUcontext ctx, const std::vector<StagedRange>& ranges);
  // Progress thread: a device-to-device copy on the copy stream (any mapped pointers), and the wait for all copies
  // enqueued so far. For the device-direct path.
  Status copyAsync(cuda::CUdeviceptr dst, cuda::CUdeviceptr src, size_t bytes);
  Status waitCopies();
  cuda::CUstream copyStream() const { return copyStream_; }
  cuda::CUcontext copyContext() const { return copyCtx_; }
  // Progress thread: the op with this sequence number is over; its streams may go on.
  void complete(uint32_t seq);
  // Releases every stream waiting on this communicator (abort, destroy).
  void releaseAll();

 private:
  Status ensureFlag();
  Status copy(cuda::CUcontext ctx, const std::vector<StagedRange>& ranges, bool in);

  int rank_;
  std::mutex mutex_;
  uint32_t* flag_ = nullptr;          // pinned, mapped; never freed (a stream may still poll it after destroy)
  cuda::CUdeviceptr flagDevice_ = 0;
  std::atomic<uint32_t> issued_{0};   // last sequence number handed to a stream
  cuda::CUcontext copyCtx_ = nullptr;
  cuda::CUstream copyStream_ = nullptr;
  cuda::CUevent copyDone_ = nullptr;
  void* staging_ = nullptr;
  size_t stagingBytes_ = 0;
  std::vector<void*> retiredStaging_;
};

}  // namespace cfx::core
