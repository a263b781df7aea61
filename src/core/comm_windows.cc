// SPDX-License-Identifier: Apache-2.0
// A communicator's zero-copy windows (core layer): the collective half of ncclCommWindowRegister and the lookup the
// device-direct path makes at each call (core/device_direct.cc); the windows themselves are kept by
// core/window_registry.h.
#include "common/log.h"
#include "core/communicator.h"

namespace cfx::core {

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
    if (health == nullptr || health->failedCount() == 0) return Status();
    return Status::error(Errc::RemoteError, health->describeFailures());
  };
  auto window = ipc_->mapWindow(*bootstrap_, rank_, nRanks_, buff, bytes, options_.timeout, alive);
  if (!window.ok()) {
    // A peer that died makes the bootstrap fail on whichever neighbour noticed first (on its ring, the dead rank's
    // neighbour, which then gave up too).
    Status st = blameFailedRank(window.status());
    setAsyncError(st);
    return st;
  }
  windows_.add(key, std::move(window.value()));
  return Status();
}

Status Communicator::registerWindowAsync(const void* key, const void* buff, size_t bytes) {
  return windows_.queue(
      key, buff, bytes,
      [this]() -> Result<bool> {
        CFX_TRY(checkUsable());
        return ipc_ != nullptr;
      },
      [this](const void* k, const void* b, size_t n) { return mapWindow(k, b, n); });
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
  const auto [found, mapped] = windows_.lookup(key);
  if (!found) return;
  // An op queued on a stream that has not reached it yet reads peers' blocks through this window's mappings: unmapped
  // under it, the GPU would fault, and a GPU fault ends the context. Each op's last host step comes after its last
  // read, so once the queued jobs are done the mappings are free. (A failed op releases its stream at once, which may
  // then still run its remaining copies: the known gap of docs/gpu_proof.md, on a communicator broken anyway.)
  if (mapped) (void)drain();
  (void)windows_.remove(key);  // unmapped here, outside the registry's lock
}

Communicator::WindowSpan Communicator::findWindow(const void* p, size_t bytes) { return windows_.find(p, bytes); }

}  // namespace cfx::core
