// SPDX-License-Identifier: Apache-2.0
// Futex-backed doorbell and spin-then-block backoff (common layer).
#include "common/doorbell.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
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
  // Both operations are seq_cst and pair with wait()'s: in their single total order either this increment
  // comes before the waiter's re-read of seq (it does not sleep) or its sleepers increment comes before our
  // load (we wake it). The increment also releases the data published before ring() to read()'s acquire.
  // (No std::atomic_thread_fence: ThreadSanitizer cannot model fences, and on x86 these cost the same.)
  seq.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers.load(std::memory_order_seq_cst) != 0) futex(&seq, FUTEX_WAKE, INT_MAX, nullptr);
}

void Doorbell::wait(uint32_t observed, std::chrono::microseconds timeout) {
  if (timeout.count() <= 0) return;
  sleepers.fetch_add(1, std::memory_order_seq_cst);  // pairs with ring()'s seq_cst load: see there
  if (seq.load(std::memory_order_seq_cst) == observed) {
    struct timespec ts;
    ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000);
    ts.tv_nsec = static_cast<long>((timeout.count() % 1000000) * 1000);
    futex(&seq, FUTEX_WAIT, observed, &ts);
  }
  sleepers.fetch_sub(1, std::memory_order_relaxed);
}

int SpinBudget::next(int limit) {
  probing_ = ++waits_ % kProbeEvery == 0;
  given_ = probing_ ? limit : std::clamp(budget_, std::min(kMinSpins, limit), limit);
  return given_;
}

void SpinBudget::ended(bool ranOut) {
  if (probing_) {
    // A probe that ran out says what the budget already says; one that did not says the waits are short again.
    if (!ranOut) budget_ = given_;
    return;
  }
  budget_ = ranOut ? std::max(kMinSpins, given_ / 2) : std::min(given_, INT32_MAX / 2) * 2;
}

bool Backoff::spin() {
  if (count_ >= limit_) {  // ended: stays so until reset(), and the count never overflows
    ranOut_ = true;
    return true;
  }
  ++count_;
  if (count_ < limit_) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
    // With more ranks than cores the peer we wait for may need our core: yield now and then.
    if (yieldEvery_ > 0 && count_ % yieldEvery_ == 0) {
      sched_yield();
      const auto now = std::chrono::steady_clock::now();
      if (count_ == yieldEvery_) {
        firstYield_ = now;
      } else if (now - firstYield_ >= kMaxYieldingSpin) {
        count_ = limit_;
        ranOut_ = true;
        return true;
      }
    }
    return false;
  }
  ranOut_ = true;
  return true;
}

std::chrono::microseconds Deadline::remaining(std::chrono::microseconds cap) const {
  if (isNever()) return cap;
  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(at_ - Clock::now());
  if (left.count() <= 0) return std::chrono::microseconds(0);
  return left < cap ? left : cap;
}

}  // namespace cfx
