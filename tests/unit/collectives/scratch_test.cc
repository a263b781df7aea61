// SPDX-License-Identifier: Apache-2.0
// The scratch pool: blocks come back for the next op, are never shared by two holders, and the pool keeps at most
// kScratchKeepBytes.
#include "collectives/scratch.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <thread>
#include <vector>

namespace cfx::coll {
namespace {

TEST(Scratch, AReturnedBlockServesTheNextRequestThatFits) {
  char* first = nullptr;
  {
    Result<ScratchBlock> a = takeScratch(3000);
    ASSERT_TRUE(a.ok());
    EXPECT_GE(a.value().capacity(), 3000u);
    std::memset(a.value().data(), 7, 3000);  // writable over the whole request
    first = a.value().data();
  }
  Result<ScratchBlock> b = takeScratch(4096);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.value().data(), first);  // 3000 was rounded up to 4096
  // While b is held, a second request gets another block.
  Result<ScratchBlock> c = takeScratch(4096);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c.value().data(), first);
}

TEST(Scratch, ConcurrentHoldersNeverShareABlock) {
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::vector<int> bad(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &bad] {
      for (int i = 0; i < 200; ++i) {
        Result<ScratchBlock> s = takeScratch(size_t{1} << (10 + i % 6));
        if (!s.ok()) {
          ++bad[t];
          continue;
        }
        std::memset(s.value().data(), t, 1024);
        for (int k = 0; k < 1024; ++k) bad[t] += s.value().data()[k] != static_cast<char>(t);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}

TEST(Scratch, ThePoolKeepsNoMoreThanItsCap) {
  std::vector<ScratchBlock> held;
  for (int i = 0; i < 5; ++i) {
    Result<ScratchBlock> s = takeScratch(kScratchKeepBytes / 4);
    ASSERT_TRUE(s.ok());
    held.push_back(std::move(s).value());
  }
  held.clear();  // five quarters returned: one of them is freed
  EXPECT_LE(scratchKeptBytes(), kScratchKeepBytes);
  EXPECT_GE(scratchKeptBytes(), kScratchKeepBytes / 2);
}

}  // namespace
}  // namespace cfx::coll
