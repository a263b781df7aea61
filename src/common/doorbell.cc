// SPDX-License-Identifier: Apache-2.0
// Futex-backed doorbell and spin-then-block backoff (common layer).
#include "common/doorbell.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace cfx {

namespace {
// Shared (not FUTEX_PRIVATE) futexes: the word may live in a mapping shared with other processes.
long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const struct timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}
}  // namespace

void Doorbell::ring() {
  // Release pairs with read()'s acquire: data published before ring() is visible to the woken waiter.
  seq.fetch_add(1, std::memory_order_release);
  // seq_cst fence pairs with the one in wait(): either we see the sleeper, or it sees the new seq.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleepers.load(std::memory_order_relaxed) != 0) futex(&seq, FUTEX_WAKE, INT_MAX, nullptr);
}

void Doorbell::wait(uint32_t observed, std::chrono::microseconds timeout) {
  if (timeout.count() <= 0) return;
  sleepers.fetch_add(1, std::memory_order_relaxed);
  // seq_cst fence pairs with ring()'s: see the comment there.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (seq.load(std::memory_order_acquire) == observed) {
    struct timespec ts;
    ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000);
    ts.tv_nsec = static_cast<long>((timeout.count() % 1000000) * 1000);
    futex(&seq, FUTEX_WAIT, observed, &ts);
  }
  sleepers.fetch_sub(1, std::memory_order_relaxed);
}

bool Backoff::spin() {
  ++count_;
  if (count_ < limit_) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
    // With more ranks than cores the peer we wait for may need our core: yield now and then.
    if ((count_ & 63) == 0) sched_yield();
    return false;
  }
  return true;
}

std::chrono::microseconds Deadline::remaining(std::chrono::microseconds cap) const {
  if (isNever()) return cap;
  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(at_ - Clock::now());
  if (left.count() <= 0) return std::chrono::microseconds(0);
  return left < cap ? left : cap;
}

}  // namespace cfx
