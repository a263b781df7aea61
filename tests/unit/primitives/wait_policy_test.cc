// SPDX-License-Identifier: Apache-2.0
// The waiting policy alone: how often a waiting rank yields its CPU for a given placement of ranks on CPUs, and how
// long its spins are as its waits teach it (SpinBudget).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <vector>

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

// Polls one wait takes before its spin says block (never yielding, so only the count ends it), then ends that wait
// with progress, as the executor's next progress does.
int pollsOfOneWait(Backoff& b) {
  int polls = 0;
  while (!b.spin()) ++polls;
  b.reset();
  return polls;
}

// A wait that outlasts its spin paid for nothing: the next spins halve down to the floor; waits that end while
// spinning double them back up to the limit. Probes (every kProbeEvery-th wait) spin the whole limit and leave a
// shrunk budget alone when they run out too.
TEST(SpinBudget, RunOutsHalveTheSpinAndWaitsThatEndWhileSpinningDoubleIt) {
  constexpr int kLimit = 1000;
  SpinBudget budget;
  std::vector<int> given;
  for (int i = 0; i < 10; ++i) {
    given.push_back(budget.next(kLimit));
    budget.ended(/*ranOut=*/true);
  }
  const unsigned probe = SpinBudget::kProbeEvery;
  ASSERT_GE(probe, 12u) << "the sequences below assume no probe among the first 11 waits";
  EXPECT_EQ(given, (std::vector<int>{1000, 500, 250, 125, 62, 31, 16, 16, 16, 16}));
  EXPECT_EQ(budget.next(kLimit), 16);
  budget.ended(/*ranOut=*/false);
  std::vector<int> grown;
  for (unsigned wait = 12; wait < probe; ++wait) {
    grown.push_back(budget.next(kLimit));
    budget.ended(/*ranOut=*/false);
  }
  for (size_t i = 0; i < grown.size(); ++i) EXPECT_EQ(grown[i], std::min(kLimit, 32 << i)) << "wait " << 12 + i;
  EXPECT_EQ(budget.next(kLimit), kLimit) << "a probe";
}

TEST(SpinBudget, AProbeThatRunsOutLeavesTheShrunkBudgetAndOneThatEndsInTimeRestoresTheLimit) {
  constexpr int kLimit = 2000;
  SpinBudget budget;
  for (unsigned wait = 1; wait < SpinBudget::kProbeEvery; ++wait) {
    (void)budget.next(kLimit);
    budget.ended(/*ranOut=*/true);
  }
  EXPECT_EQ(budget.next(kLimit), kLimit) << "the probe";
  budget.ended(/*ranOut=*/true);
  EXPECT_EQ(budget.next(kLimit), SpinBudget::kMinSpins);
  budget.ended(/*ranOut=*/true);
  for (unsigned wait = SpinBudget::kProbeEvery + 2; wait < 2 * SpinBudget::kProbeEvery; ++wait) {
    (void)budget.next(kLimit);
    budget.ended(/*ranOut=*/true);
  }
  EXPECT_EQ(budget.next(kLimit), kLimit) << "the second probe";
  budget.ended(/*ranOut=*/false);
  EXPECT_EQ(budget.next(kLimit), kLimit) << "the waits are short again";
  EXPECT_EQ(budget.next(10), 10) << "never more than the limit the caller has now";
}

// The Backoff asks its budget at each wait: a wait that ran out makes the next one spin half as long, and one that
// ended while spinning (progress after a few polls) lets the one after spin longer again.
TEST(SpinBudget, BackoffSpinsWhatItsBudgetAllowsWaitByWait) {
  SpinBudget budget;
  Backoff b(400, /*yieldEvery=*/0, &budget);
  EXPECT_EQ(pollsOfOneWait(b), 399);
  EXPECT_EQ(pollsOfOneWait(b), 199);
  EXPECT_EQ(pollsOfOneWait(b), 99);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(b.spin());
  b.reset();  // progress while this wait of 50 spun: the next wait may spin 2 x 50
  EXPECT_EQ(pollsOfOneWait(b), 99);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(b.spin());
}

}  // namespace
}  // namespace cfx::prims
