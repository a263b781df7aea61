// SPDX-License-Identifier: Apache-2.0
// Host streams and generalized requests behind the non-blocking MPI collectives (interpose layer).
//
// Lifetime of one request's state (Pending): created by start(); the waiter completes the request once the
// stream has run the op; Open MPI calls freeFn when the request has been both completed and freed by the program
// (MPI_Wait/Test or MPI_Request_free, in either order), and freeFn deletes it. So the waiter must not touch a
// Pending after PMPI_Grequest_complete.
#include "interpose/mpi_async.h"

#include <pthread.h>

#include <cstring>

#include "common/log.h"

namespace cfx::interpose {

struct AsyncLane::Pending {
  RoutedOp op;
  MPI_Request request = MPI_REQUEST_NULL;
  int error = MPI_SUCCESS;
};

namespace {

int queryFn(void* state, MPI_Status* status) {
  const int error = static_cast<const AsyncLane::Pending*>(state)->error;
  // MPI leaves a collective's source and tag undefined and its count zero. Open MPI 4.1 reports source 0 and
  // tag 0 for its own non-blocking collectives; so do we, so that a program that prints them sees no change.
  PMPI_Status_set_elements(status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(status, 0);
  status->MPI_SOURCE = 0;
  status->MPI_TAG = 0;
  status->MPI_ERROR = error;
  return error;
}

int freeFn(void* state) {
  delete static_cast<AsyncLane::Pending*>(state);
  return MPI_SUCCESS;
}

// Cancelling a collective is erroneous in MPI; the op runs to completion and MPI_Test_cancelled says false.
int cancelFn(void*, int) { return MPI_SUCCESS; }

}  // namespace

void RoutedOp::finish() const {
  if (moveBytes != 0 && moveTo != moveFrom) std::memmove(moveTo, moveFrom, moveBytes);
}

std::unique_ptr<AsyncLane> AsyncLane::create() {
  cfxHostStream_t stream = nullptr;
  if (ncclResult_t res = cfxHostStreamCreate(&stream); res != ncclSuccess) {
    CFX_WARN("libconflux_mpi: cannot create a host stream for non-blocking collectives: %s", ncclGetErrorString(res));
    return nullptr;
  }
  return std::unique_ptr<AsyncLane>(new AsyncLane(stream));
}

AsyncLane::~AsyncLane() {
  drain();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (waiter_.joinable()) waiter_.join();
  (void)cfxHostStreamDestroy(stream_);
}

ncclResult_t AsyncLane::start(RoutedOp op, MPI_Request* request) {
  auto* p = new Pending{std::move(op)};
  if (ncclResult_t res = p->op.launch(reinterpret_cast<cudaStream_t>(stream_)); res != ncclSuccess) {
    delete p;
    return res;
  }
  if (PMPI_Grequest_start(queryFn, freeFn, cancelFn, p, &p->request) != MPI_SUCCESS) {
    // No request to hand the op to: finish it here so its buffers are released in a defined state.
    ncclResult_t res = cfxHostStreamSynchronize(stream_);
    delete p;
    CFX_WARN("libconflux_mpi: MPI_Grequest_start failed; the non-blocking collective ran to completion");
    return res == ncclSuccess ? ncclSystemError : res;
  }
  *request = p->request;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.fetch_add(1, std::memory_order_relaxed);  // Every access holds mutex_, which orders them.
    queue_.push_back(p);
    if (!waiter_.joinable()) waiter_ = std::thread([this] { waiterLoop(); });
  }
  cv_.notify_all();
  return ncclSuccess;
}

void AsyncLane::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return pending_.load(std::memory_order_relaxed) == 0; });
}

void AsyncLane::waiterLoop() {
  pthread_setname_np(pthread_self(), "cfx-mpi-wait");
  for (;;) {
    std::deque<Pending*> batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      batch.swap(queue_);
    }
    // Everything in the batch was enqueued before this call, so it has finished when the call returns. The wait
    // sleeps after a short spin and is bounded by the communicator's timeout (CFX_TIMEOUT_MS), which fails the
    // ops of a peer that never joins.
    const ncclResult_t res = cfxHostStreamSynchronize(stream_);
    if (res != ncclSuccess) {
      CFX_WARN("libconflux_mpi: %zu non-blocking collective(s) failed in Conflux: %s (%s)", batch.size(),
               ncclGetErrorString(res), ncclGetLastError(nullptr));
    }
    const size_t n = batch.size();
    for (Pending* p : batch) {
      if (res == ncclSuccess) {
        p->op.finish();
      } else {
        p->error = MPI_ERR_INTERN;
      }
      const MPI_Request request = p->request;
      PMPI_Grequest_complete(request);  // May run freeFn, which deletes p.
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pending_.fetch_sub(n, std::memory_order_relaxed);  // under mutex_, as drain() reads it
    }
    cv_.notify_all();
  }
}

}  // namespace cfx::interpose
