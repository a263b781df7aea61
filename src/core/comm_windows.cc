// SPDX-License-Identifier: Apache-2.0
// A communicator's zero-copy windows (core layer): the collective half of ncclCommWindowRegister and the lookup the
// device-direct path makes at each call (core/device_direct.cc).
#include <algorithm>

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
  if (ipc_ == nullptr) return Status();  // no rank maps anything: the same on every rank, so none takes part
  CFX_TRY(checkUsable());
  const ft::HealthMonitor* health = health_.get();
  auto window = transport::cuda_ipc::IpcWindow::create(*bootstrap_, rank_, nRanks_, ipc_->context(), buff, bytes,
                                                       options_.timeout, [health] { return failedRanks(health); });
  if (!window.ok()) {
    // A peer that died makes the bootstrap fail on whichever neighbour noticed first (on its ring, the dead rank's
    // neighbour, which then gave up too). The health monitor names the rank that failed: wait for its verdict, as
    // long as it takes to declare a silent peer hung.
    Status st = window.status();
    if (st.code() == Errc::RemoteError && health_ != nullptr &&
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
