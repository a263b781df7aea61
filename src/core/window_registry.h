// SPDX-License-Identifier: Apache-2.0
// A communicator's zero-copy windows (core layer): the windows every rank mapped at ncclCommWindowRegister, in
// registration order, and the queue of non-blocking registrations with the thread that runs them. The collective
// mapping itself is the communicator's (core/comm_windows.cc, transport/device_ipc.h); this class keeps the result.
//
// Threading: every member may be called from any thread; the setup thread is joined by wait() and the destructor.
#pragma once

#include <atomic>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"
#include "transport/device_ipc.h"

namespace cfx::core {

class WindowRegistry {
 public:
  explicit WindowRegistry(int rank) : rank_(rank) {}
  ~WindowRegistry() { wait(); }
  WindowRegistry(const WindowRegistry&) = delete;
  WindowRegistry& operator=(const WindowRegistry&) = delete;

  // A window this rank mapped, under its handle `key`.
  void add(const void* key, transport::DeviceIpc::Window window);
  // Whether `key` names a window, and whether that one is zero-copy (peers' streams may read through it).
  std::pair<bool, bool> lookup(const void* key);
  // Forgets `key`'s window; its mappings go once the caller lets go of what this returns (after the lock).
  transport::DeviceIpc::Window remove(const void* key);
  // The first zero-copy window holding all of [p, p + bytes) on this rank, and p's offset in it; null when none.
  struct Span {
    const transport::cuda_ipc::IpcWindow* window = nullptr;
    size_t offset = 0;
  };
  Span find(const void* p, size_t bytes);
  void clear();

  // Non-blocking registrations: `map` runs on a thread of this registry's, in call order, for each queued one;
  // after a failure the rest are dropped (the communicator is broken). `start` runs under the queue's lock when
  // the queue was empty (nothing running): it says whether to queue at all (its error is returned, an Ok without
  // queueing when it returns false).
  using MapFn = std::function<Status(const void* key, const void* buff, size_t bytes)>;
  Status queue(const void* key, const void* buff, size_t bytes, const std::function<Result<bool>()>& start,
               MapFn map);
  // True while a non-blocking registration is queued or running.
  bool pending() const { return pending_.load(std::memory_order_acquire); }
  // Joins the setup thread (a registration still running waits on its peers at most the timeout).
  void wait();

 private:
  struct Setup {
    const void* key;
    const void* buff;
    size_t bytes;
  };
  void runSetups(const MapFn& map);

  const int rank_;
  std::mutex mutex_;
  // In registration order, which is every rank's (registration is collective): where windows overlap, every rank
  // finds an op's buffer in the same one. Each with its window handle.
  std::vector<std::pair<const void*, transport::DeviceIpc::Window>> windows_;
  // Non-blocking registrations: the front one is running on setupThread_.
  std::mutex setupMutex_;
  std::deque<Setup> setups_;
  std::atomic<bool> pending_{false};
  std::thread setupThread_;
};

}  // namespace cfx::core
