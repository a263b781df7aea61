// SPDX-License-Identifier: Apache-2.0
// The waiting policy alone: how often a waiting rank yields its CPU for a given placement of ranks on CPUs.
#include <gtest/gtest.h>

#include <chrono>
#include <climits>

#include "primitives/executor.h"

namespace cfx::prims {
namespace {

Placement pinned(int cpu, std::vector<int> peers) {
  Placement p;
  p.pinnedCpu = cpu;
  p.allowedCpus = 1;
  p.peerPinnedCpus = std::move(peers);
  p.localRanks = static_cast<int>(p.peerPinnedCpus.size()) + 1;
  return p;
}

Placement unpinned(int allowedCpus, int localRanks) {
  Placement p;
  p.allowedCpus = allowedCpus;
  p.localRanks = localRanks;
  p.peerPinnedCpus.assign(static_cast<size_t>(localRanks - 1), -1);
  return p;
}

TEST(WaitPolicy, RanksPinnedToDistinctCpusNeverYield) {
  EXPECT_EQ(yieldInterval(pinned(0, {1})), 0);
  EXPECT_EQ(yieldInterval(pinned(3, {0, 1, 2})), 0);
  EXPECT_EQ(yieldInterval(pinned(0, {})), 0);
}

TEST(WaitPolicy, APeerPinnedToOurCpuMakesEveryFailedPollYield) {
  EXPECT_EQ(yieldInterval(pinned(0, {0})), 1);
  EXPECT_EQ(yieldInterval(pinned(1, {0, 1, 0})), 1);
  // An unpinned peer may run anywhere: no reason to give up a CPU we own alone.
  EXPECT_EQ(yieldInterval(pinned(1, {-1})), 0);
}

TEST(WaitPolicy, UnpinnedRanksYieldOnEveryPollOnlyWhenTheyOutnumberCpus) {
  EXPECT_EQ(yieldInterval(unpinned(2, 2)), 64);
  EXPECT_EQ(yieldInterval(unpinned(2, 4)), 1);
  EXPECT_EQ(yieldInterval(unpinned(16, 8)), 64);
  EXPECT_EQ(yieldInterval(unpinned(1, 2)), 1);
}

// A spin that yields may also end on time (kMaxYieldingSpin after its first yield, which a loaded machine can take
// within a few yields), so only the spins that never yield before their limit must reach it exactly.
TEST(WaitPolicy, BackoffBlocksAfterItsLimitWhateverItsYieldInterval) {
  for (int yieldEvery : {0, 1, 64}) {
    Backoff b(5, yieldEvery);
    int polls = 0;
    while (!b.spin()) ++polls;
    if (yieldEvery == 1) {
      EXPECT_GE(polls, 1) << "the first poll only starts the clock";
      EXPECT_LE(polls, 4);
    } else {
      EXPECT_EQ(polls, 4) << "yield every " << yieldEvery;
    }
    EXPECT_TRUE(b.spin());
    b.reset();
    EXPECT_FALSE(b.spin());
  }
}

// Under oversubscription every yield may cost a time slice, so a yielding spin must end on time, not only on count:
// with a count of 2^31 it would otherwise spin for hours instead of blocking on its doorbell.
TEST(WaitPolicy, AYieldingSpinEndsOnTimeWhateverItsCount) {
  Backoff b(INT_MAX, 1);
  const auto start = std::chrono::steady_clock::now();
  long spins = 0;
  while (!b.spin()) ++spins;
  EXPECT_GE(std::chrono::steady_clock::now() - start, Backoff::kMaxYieldingSpin);
  EXPECT_LT(spins, INT_MAX - 1);
  EXPECT_TRUE(b.spin()) << "once ended, the spin stays ended until reset";
  b.reset();
  EXPECT_FALSE(b.spin());
}

}  // namespace
}  // namespace cfx::prims
