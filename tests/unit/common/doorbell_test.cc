// SPDX-License-Identifier: Apache-2.0
// Doorbell event count: no lost wake-ups, bounded waits; Deadline arithmetic.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "common/doorbell.h"

namespace cfx {
namespace {

TEST(Doorbell, WaitReturnsAtOnceWhenRungAfterRead) {
  Doorbell bell;
  const uint32_t seq = bell.read();
  bell.ring();
  bell.wait(seq, std::chrono::seconds(30));  // must not sleep: seq already moved
  EXPECT_NE(bell.read(), seq);
}

TEST(Doorbell, SleeperIsWokenByAnotherThread) {
  Doorbell bell;
  std::atomic<bool> flag{false};
  std::thread producer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    flag.store(true, std::memory_order_release);
    bell.ring();
  });
  // Event-count loop: read, check, wait. A lost wake-up would make this spin until the 30 s bound.
  const auto start = std::chrono::steady_clock::now();
  while (!flag.load(std::memory_order_acquire)) {
    const uint32_t seq = bell.read();
    if (flag.load(std::memory_order_acquire)) break;
    bell.wait(seq, std::chrono::seconds(30));
  }
  producer.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(25));
}

TEST(Doorbell, ManyRingsManyWaits) {
  Doorbell bell;
  std::atomic<int> produced{0};
  constexpr int kN = 20000;
  std::thread producer([&] {
    for (int i = 0; i < kN; ++i) {
      produced.fetch_add(1, std::memory_order_release);
      bell.ring();
    }
  });
  int seen = 0;
  while (seen < kN) {
    const uint32_t seq = bell.read();
    const int now = produced.load(std::memory_order_acquire);
    if (now > seen) {
      seen = now;
      continue;
    }
    bell.wait(seq, std::chrono::seconds(30));
  }
  producer.join();
  EXPECT_EQ(seen, kN);
}

TEST(Deadline, NeverAndExpiry) {
  EXPECT_FALSE(Deadline::never().expired());
  EXPECT_EQ(Deadline::never().remaining(std::chrono::microseconds(5)), std::chrono::microseconds(5));
  Deadline d(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(d.expired());
  EXPECT_EQ(d.remaining(std::chrono::microseconds(100)), std::chrono::microseconds(0));
  EXPECT_TRUE(Deadline(std::chrono::milliseconds(0)).isNever());
}

}  // namespace
}  // namespace cfx
