// SPDX-License-Identifier: Apache-2.0
// Non-blocking MPI collectives served by Conflux (interpose layer). A routed MPI_I* call enqueues its op on the
// host stream of the communicator's mirror and returns an MPI generalized request (MPI_Grequest_start), so
// Open MPI itself owns the request: MPI_Wait/Test/Waitall/Waitany/Waitsome/Testall/..., MPI_Request_free,
// MPI_Test_cancelled, the MPI_Status fields, the Fortran bindings and mpi4py all work unchanged. A waiter thread
// per mirror completes the requests (MPI_Grequest_complete) when the stream has finished them.
//
// Calling MPI from a thread of our own is allowed only under MPI_THREAD_MULTIPLE, so non-blocking calls are
// routed only on communicators whose every rank runs at that level (decided when the mirror is built), and pass
// through to MPI otherwise. Open MPI has no hook to poll a generalized request from MPI_Wait's progress loop,
// which would have allowed the lower levels.
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "conflux.h"
#include "nccl.h"

namespace cfx::interpose {

// What one routed call needs besides its arguments: the op to enqueue (on the NULL stream for a blocking call,
// on a host stream otherwise), and what must live or happen until the op has completed.
struct RoutedOp {
  std::function<ncclResult_t(cudaStream_t)> launch;
  std::vector<char> scratch;  // Buffers the op reads or writes besides the user's (in-place all-to-all copy).
  // A move done once the op completed (MPI's in-place reduce-scatter keeps the rank's block at the start).
  void* moveTo = nullptr;
  const void* moveFrom = nullptr;
  size_t moveBytes = 0;

  void finish() const;
};

// The host stream of one mirror and the requests waiting on it. Created on a mirror's first non-blocking call;
// destroyed with the mirror, after every request has been completed.
class AsyncLane {
 public:
  // nullptr when the host stream cannot be created (the WARN says why).
  static std::unique_ptr<AsyncLane> create();
  ~AsyncLane();
  AsyncLane(const AsyncLane&) = delete;
  AsyncLane& operator=(const AsyncLane&) = delete;

  // Enqueues op on the stream and returns its generalized request in *request. Call from the thread that
  // issues collectives on this communicator.
  ncclResult_t start(RoutedOp op, MPI_Request* request);
  // Waits until every started op has completed and its request has been completed. Bounded like the waiter's
  // cfxHostStreamSynchronize: by the communicator's timeout (CFX_TIMEOUT_MS), which fails the ops of a peer that
  // never joins, naming it.
  void drain();

  // One started op and its request (defined in mpi_async.cc; public for the MPI callbacks there).
  struct Pending;

 private:
  explicit AsyncLane(cfxHostStream_t stream) : stream_(stream) {}
  void waiterLoop();

  cfxHostStream_t stream_;
  // Started ops whose requests are not complete yet. Written by the issuing thread, decremented by the waiter,
  // read by drain().
  std::atomic<size_t> pending_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Pending*> queue_;  // Started, not yet handed to the waiter.
  bool stopping_ = false;
  std::thread waiter_;
};

}  // namespace cfx::interpose
