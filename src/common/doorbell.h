// SPDX-License-Identifier: Apache-2.0
// Doorbell: the one way a rank waits for "something changed" without burning a core (common layer).
//
// A Doorbell is a 32-bit sequence in memory that may be shared between processes (it lives in a shared
// mapping for shm peers). Whoever makes progress possible for the owner rings it; the owner spins briefly,
// then sleeps in FUTEX_WAIT on the sequence. It is an event count: read seq(), re-check your condition,
// then wait(seq) — a ring between the two makes wait() return at once, so no wake-up is ever lost.
//
// Threading: any thread of any process may ring(); one or more threads may wait().
// Lifetime: the memory must stay mapped in every process that rings or waits.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace cfx {

struct Doorbell {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> sleepers{0};

  uint32_t read() const {
    // Acquire pairs with ring()'s release increment: a waiter that sees the new value also sees the data.
    return seq.load(std::memory_order_acquire);
  }
  void ring();
  // Sleeps until seq != observed, the timeout passes, or a spurious wake. Never longer than `timeout`.
  void wait(uint32_t observed, std::chrono::microseconds timeout);
};
static_assert(sizeof(Doorbell) == 8, "Doorbell is placed in shared memory; its layout is part of the shm format");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex needs a plain 32-bit word");

// What a waiting thread's next spin may cost, learnt from its last waits (the executor keeps one per thread). A wait
// that outlasts its spin pays for the spin and gets nothing: a network peer's next slot comes a slot's time later
// (a millisecond at 1 Gbit/s), and a peer still computing takes as long as it takes, while the spin holds a CPU that
// the rank's own compute or that peer may need. So a spin that runs out halves the next one, down to kMinSpins, and
// a wait that ends while spinning doubles it again, up to the limit. Every kProbeEvery-th wait may spin the whole
// limit, so that waits which turned short again (the next op over shared memory) win their spin back.
class SpinBudget {
 public:
  static constexpr int kMinSpins = 16;
  static constexpr unsigned kProbeEvery = 16;

  // The spins the next wait may take, at most `limit`.
  int next(int limit);
  // How the wait that next() was asked for ended: its spin ran out (the caller went to block), or it did not.
  void ended(bool ranOut);

 private:
  int budget_ = INT32_MAX;  // what a wait that is no probe may spin, before next() clamps it to the limit
  int given_ = 0;           // what next() gave the wait under way
  bool probing_ = false;
  unsigned waits_ = 0;
};

// Spin-then-block helper: call spin() when no progress was made; it returns true when the caller should
// block on its doorbell now. reset() after progress. Every `yieldEvery` failed polls it yields the CPU: 1 when the
// peer waited for may need this very CPU (it shares it, or ranks outnumber CPUs), so the handoff costs one
// context switch instead of a time slice of spinning; 0 never yields (the peer has a CPU of its own). With a
// SpinBudget each wait (from one reset() to the next, or to the end) spins what the budget allows of `spins`, and
// tells it how the wait ended.
//
// A yielding spin also ends after kMaxYieldingSpin of wall time: where CPUs are oversubscribed each sched_yield
// may hand over a whole time slice, and 2000 of them once ran past a 3 s operation timeout before the caller got to
// check its deadline or its peers (a clean peer exit reported as a timeout under load). The clock is read only
// at a yield, which costs a system call anyway.
class Backoff {
 public:
  static constexpr std::chrono::microseconds kMaxYieldingSpin{1000};

  explicit Backoff(int spins = 2000, int yieldEvery = 64, SpinBudget* budget = nullptr)
      : cap_(spins), limit_(budget != nullptr ? budget->next(spins) : spins),
        yieldEvery_(yieldEvery < 0 ? 0 : yieldEvery), budget_(budget) {}
  ~Backoff() { endWait(); }
  Backoff(const Backoff&) = delete;
  Backoff& operator=(const Backoff&) = delete;
  bool spin();
  void reset() {
    if (count_ == 0) return;
    endWait();
    if (budget_ != nullptr) limit_ = budget_->next(cap_);
    count_ = 0;
    ranOut_ = false;
  }

 private:
  void endWait() {
    if (budget_ != nullptr && count_ > 0) budget_->ended(ranOut_);
  }

  int cap_;
  int limit_;
  int yieldEvery_;
  SpinBudget* budget_;
  int count_ = 0;
  bool ranOut_ = false;
  std::chrono::steady_clock::time_point firstYield_{};
};

// A monotonic deadline; the default is "never".
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  Deadline() : at_(Clock::time_point::max()) {}
  explicit Deadline(std::chrono::milliseconds in) : at_(in.count() <= 0 ? Clock::time_point::max() : Clock::now() + in) {}
  static Deadline never() { return Deadline(); }
  bool expired() const { return at_ != Clock::time_point::max() && Clock::now() >= at_; }
  bool isNever() const { return at_ == Clock::time_point::max(); }
  // Time left, clamped to [0, cap].
  std::chrono::microseconds remaining(std::chrono::microseconds cap) const;
  Clock::time_point at() const { return at_; }

 private:
  Clock::time_point at_;
};

}  // namespace cfx
