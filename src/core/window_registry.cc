// SPDX-License-Identifier: Apache-2.0
// A communicator's zero-copy windows and its queue of non-blocking registrations (core layer).
#include "core/window_registry.h"

#include <pthread.h>

#include <algorithm>

#include "common/log.h"

namespace cfx::core {

void WindowRegistry::add(const void* key, transport::DeviceIpc::Window window) {
  std::lock_guard<std::mutex> lock(mutex_);
  windows_.emplace_back(key, std::move(window));
}

std::pair<bool, bool> WindowRegistry::lookup(const void* key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(windows_.begin(), windows_.end(), [key](const auto& e) { return e.first == key; });
  if (it == windows_.end()) return {false, false};
  return {true, it->second.zeroCopy};
}

transport::DeviceIpc::Window WindowRegistry::remove(const void* key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(windows_.begin(), windows_.end(), [key](const auto& e) { return e.first == key; });
  if (it == windows_.end()) return {};
  transport::DeviceIpc::Window gone = std::move(it->second);
  windows_.erase(it);
  return gone;
}

WindowRegistry::Span WindowRegistry::find(const void* p, size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [key, w] : windows_) {
    if (!w.zeroCopy) continue;
    if (a >= w.base && a + bytes <= w.base + w.bytes) return Span{w.mapping.get(), static_cast<size_t>(a - w.base)};
  }
  return Span{};
}

void WindowRegistry::clear() {
  std::vector<std::pair<const void*, transport::DeviceIpc::Window>> gone;
  std::lock_guard<std::mutex> lock(mutex_);
  gone.swap(windows_);
}

Status WindowRegistry::queue(const void* key, const void* buff, size_t bytes,
                             const std::function<Result<bool>()>& start, MapFn map) {
  std::lock_guard<std::mutex> lock(setupMutex_);
  if (setups_.empty()) {
    // Nothing queued: the worker, if there was one, has left its last critical section and is returning.
    CFX_TRY_ASSIGN(const bool go, start());
    if (!go) return Status();
    if (setupThread_.joinable()) setupThread_.join();
    setups_.push_back(Setup{key, buff, bytes});
    pending_.store(true, std::memory_order_release);
    setupThread_ = std::thread([this, map = std::move(map)] { runSetups(map); });
  } else {
    // A second registration before the first finished (two in one group): the same communicator's registrations
    // are collective steps every rank takes in the same order, so they queue behind each other.
    setups_.push_back(Setup{key, buff, bytes});
  }
  return Status::error(Errc::InProgress, "non-blocking window registration started");
}

void WindowRegistry::runSetups(const MapFn& map) {
  pthread_setname_np(pthread_self(), "cfx-window");
  log::setThreadRank(rank_);
  for (;;) {
    Setup next{};
    {
      std::lock_guard<std::mutex> lock(setupMutex_);
      next = setups_.front();
    }
    const Status st = map(next.key, next.buff, next.bytes);  // a failure is the async error already
    std::lock_guard<std::mutex> lock(setupMutex_);
    setups_.pop_front();
    if (!st.ok()) setups_.clear();  // the communicator is broken: the rest would only fail too
    if (setups_.empty()) {
      // Release pairs with the communicator's userAsyncError()'s acquire: whoever sees the queue done sees its
      // outcome.
      pending_.store(false, std::memory_order_release);
      return;
    }
  }
}

void WindowRegistry::wait() {
  if (setupThread_.joinable()) setupThread_.join();
}

}  // namespace cfx::core
