// SPDX-License-Identifier: Apache-2.0
// A communicator's zero-copy windows (core layer): the collective half of ncclCommWindowRegister and the lookup the
// device-direct path makes at each call (core/device_direct.cc).
#include <pthread.h>

#include <algorithm>

#include "common/log.h"
#include "core/communicator.h"
#include "transport/cuda_ipc/ipc_scratch.h"
#include "transport/cuda_ipc/ipc_window.h"

namespace cfx::core {

namespace {

// The ranks the health monitor knows to have failed, as an error naming each and its cause; Ok when none.
Status failedRanks(const ft::HealthMonitor* health) {
  if (health == nullptr || health->failedCount() == 0) return Status();
  return Status::error(Errc::RemoteError, health->describeFailures());
}

}  // namespace

Status Communicator::registerWindow(const void* key, const void* buff, size_t bytes) {
  // Usable first: while a non-blocking init still runs, ipc_ is being set on its thread.
  CFX_TRY(checkUsable());
  if (ipc_ == nullptr) return Status();  // no rank maps anything: the same on every rank, so none takes part
  return mapWindow(key, buff, bytes);
}

Status Communicator::mapWindow(const void* key, const void* buff, size_t bytes) {
  const ft::HealthMonitor* health = health_.get();
  // An abort (a watchdog's, while a non-blocking registration waits for a peer that never registers) ends the wait
  // at the next poll; the bootstrap's own waits end on abort() as well.
  auto alive = [this, health]() -> Status {
    if (abortFlag_.load(std::memory_order_acquire)) return Status::error(Errc::RemoteError, stopCause());
    return failedRanks(health);
  };
  auto window = transport::cuda_ipc::IpcWindow::create(*bootstrap_, rank_, nRanks_, ipc_->context(), buff, bytes,
                                                       options_.timeout, alive);
  if (!window.ok()) {
    // A peer that died makes the bootstrap fail on whichever neighbour noticed first (on its ring, the dead rank's
    // neighbour, which then gave up too). The health monitor names the rank that failed: wait for its verdict, as
    // long as it takes to declare a silent peer hung.
    Status st = window.status();
    if (st.code() == Errc::RemoteError && health_ != nullptr && !abortFlag_.load(std::memory_order_acquire) &&
        health_->awaitFailure(options_.health.hungAfter() + options_.health.period)) {
      st = Status::error(Errc::RemoteError, failedRanks(health).message() + " (" + st.message() + ")");
    }
    setAsyncError(st);
    return st;
  }
  std::lock_guard<std::mutex> lock(windowsMutex_);
  windows_.emplace_back(key, std::move(window.value()));
  return Status();
}

Status Communicator::registerWindowAsync(const void* key, const void* buff, size_t bytes) {
  std::lock_guard<std::mutex> lock(windowSetupMutex_);
  if (windowSetups_.empty()) {
    // Nothing queued: the worker, if there was one, has left its last critical section and is returning.
    CFX_TRY(checkUsable());
    if (ipc_ == nullptr) return Status();
    if (windowSetupThread_.joinable()) windowSetupThread_.join();
    windowSetups_.push_back(WindowSetup{key, buff, bytes});
    windowSetupPending_.store(true, std::memory_order_release);
    windowSetupThread_ = std::thread([this] { runWindowSetups(); });
  } else {
    // A second registration before the first finished (two in one group): the same communicator's registrations
    // are collective steps every rank takes in the same order, so they queue behind each other.
    windowSetups_.push_back(WindowSetup{key, buff, bytes});
  }
  return Status::error(Errc::InProgress, "non-blocking window registration started");
}

void Communicator::runWindowSetups() {
  pthread_setname_np(pthread_self(), "cfx-window");
  log::setThreadRank(rank_);
  for (;;) {
    WindowSetup next{};
    {
      std::lock_guard<std::mutex> lock(windowSetupMutex_);
      next = windowSetups_.front();
    }
    const Status st = mapWindow(next.key, next.buff, next.bytes);  // a failure is the async error already
    std::lock_guard<std::mutex> lock(windowSetupMutex_);
    windowSetups_.pop_front();
    if (!st.ok()) windowSetups_.clear();  // the communicator is broken: the rest would only fail too
    if (windowSetups_.empty()) {
      // Release pairs with userAsyncError()'s acquire: whoever sees the queue done sees its outcome.
      windowSetupPending_.store(false, std::memory_order_release);
      return;
    }
  }
}

Status Communicator::checkNoWindowSetup() const {
  if (!windowSetupPending()) return Status();
  return Status::error(Errc::InvalidUsage,
                       "a non-blocking ncclCommWindowRegister is still in progress: poll "
                       "ncclCommGetAsyncError until it returns ncclSuccess first");
}

Errc Communicator::userAsyncError() const {
  // The pending flag first: a failed registration sets the error before it clears the flag.
  if (windowSetupPending()) return asyncError() == Errc::Ok ? Errc::InProgress : asyncError();
  return asyncError();
}

void Communicator::deregisterWindow(const void* key) {
  bool mapped = false;
  {
    std::lock_guard<std::mutex> lock(windowsMutex_);
    auto it = std::find_if(windows_.begin(), windows_.end(), [key](const auto& e) { return e.first == key; });
    if (it == windows_.end()) return;
    mapped = it->second->zeroCopy();
  }
  // An op queued on a stream that has not reached it yet reads peers' blocks through this window's mappings: unmapped
  // under it, the GPU would fault, and a GPU fault ends the context. Each op's last host step comes after its last
  // read, so once the queued jobs are done the mappings are free. (A failed op releases its stream at once, which may
  // then still run its remaining copies: the known gap of docs/gpu_proof.md, on a communicator broken anyway.)
  if (mapped) (void)drain();
  std::unique_ptr<transport::cuda_ipc::IpcWindow> gone;
  std::lock_guard<std::mutex> lock(windowsMutex_);
  auto it = std::find_if(windows_.begin(), windows_.end(), [key](const auto& e) { return e.first == key; });
  if (it == windows_.end()) return;
  gone = std::move(it->second);  // unmapped after the lock is released
  windows_.erase(it);
}

Communicator::WindowSpan Communicator::findWindow(const void* p, size_t bytes) {
  const auto a = reinterpret_cast<cuda::CUdeviceptr>(p);
  std::lock_guard<std::mutex> lock(windowsMutex_);
  for (const auto& [key, w] : windows_) {
    if (!w->zeroCopy()) continue;
    const cuda::CUdeviceptr base = w->base(rank_);
    if (a >= base && a + bytes <= base + w->bytes(rank_)) return WindowSpan{w.get(), static_cast<size_t>(a - base)};
  }
  return WindowSpan{};
}

}  // namespace cfx::core
