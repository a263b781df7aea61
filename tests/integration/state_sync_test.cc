// SPDX-License-Identifier: Apache-2.0
// cfxSharedStateSync and cfxStateHash through the public C API, ranks as forked processes (integration layer):
// out-of-date ranks receive the majority's bytes, ties and layouts behave as documented, bad input is refused.
#include "integration/multiproc.h"
#include "integration/nccl_checks.h"

#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "conflux.h"

namespace cfx::itest {
namespace {

// A model-like state of odd sizes and several datatypes, including an empty entry. `flavour` changes every byte.
struct State {
  std::vector<float> weights = std::vector<float>(4099);
  std::vector<int64_t> moments = std::vector<int64_t>(1001);
  std::vector<uint8_t> step = std::vector<uint8_t>(3);
  std::vector<double> empty;

  explicit State(int flavour) {
    for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<float>(i) * 0.25f + static_cast<float>(flavour);
    for (size_t i = 0; i < moments.size(); ++i) moments[i] = static_cast<int64_t>(i) * 7 - flavour;
    for (size_t i = 0; i < step.size(); ++i) step[i] = static_cast<uint8_t>(40 + flavour + i);
  }
  std::vector<cfxStateEntry> entries() {
    return {{weights.data(), weights.size(), ncclFloat32},
            {moments.data(), moments.size(), ncclInt64},
            {step.data(), step.size(), ncclUint8},
            {empty.data(), 0, ncclFloat64}};
  }
  bool operator==(const State& o) const {
    return weights == o.weights && moments == o.moments && step == o.step;
  }
};

std::string hashText(const unsigned long long h[2]) { return std::to_string(h[0]) + ":" + std::to_string(h[1]); }

// Syncs a State whose flavour per rank is given, and checks every rank ends with the expected flavour's bytes.
void syncAndCheck(RankContext& ctx, const std::vector<int>& flavours, int expectFlavour, int expectOutdated) {
  ncclComm_t comm = ctx.initComm();
  ASSERT_NE(comm, nullptr);
  const int me = ctx.rank();
  State state(flavours[static_cast<size_t>(me)]);
  const bool outOfDate = flavours[static_cast<size_t>(me)] != expectFlavour;
  std::vector<cfxStateEntry> entries = state.entries();
  cfxStateSyncInfo info{};
  ASSERT_TRUE(succeeded(cfxSharedStateSync(comm, entries.data(), static_cast<int>(entries.size()), &info)));
  EXPECT_TRUE(state == State(expectFlavour)) << "rank " << me << " does not hold the majority's bytes";
  EXPECT_EQ(info.replaced, outOfDate ? 1 : 0);
  EXPECT_EQ(info.nOutdated, expectOutdated);
  EXPECT_EQ(info.bytesReceived, outOfDate ? 4099 * 4 + 1001 * 8 + 3 : 0u);
  if (outOfDate) {
    ASSERT_GE(info.sourceRank, 0);
    EXPECT_EQ(flavours[static_cast<size_t>(info.sourceRank)], expectFlavour) << "a source must hold the majority's bytes";
  } else {
    EXPECT_EQ(info.sourceRank, -1);
  }
  unsigned long long local[2] = {};
  ASSERT_TRUE(succeeded(cfxStateHash(entries.data(), static_cast<int>(entries.size()), local)));
  EXPECT_EQ(hashText(local), hashText(info.hash)) << "the reported digest is that of the state now held";
  const std::vector<std::string> digests = ctx.allGather(hashText(info.hash));
  for (const std::string& d : digests) EXPECT_EQ(d, digests[0]) << "every rank reports the same digest";
  // A second call finds everyone agreeing and moves nothing.
  ASSERT_TRUE(succeeded(cfxSharedStateSync(comm, entries.data(), static_cast<int>(entries.size()), &info)));
  EXPECT_EQ(info.nOutdated, 0);
  EXPECT_EQ(info.replaced, 0);
  EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
}

TEST(SharedStateSync, AgreeingRanksMoveNothing) {
  runRanks(4, [](RankContext& ctx) { syncAndCheck(ctx, {5, 5, 5, 5}, 5, 0); });
}

TEST(SharedStateSync, OutOfDateRanksReceiveTheMajoritysBytesFromSeveralSources) {
  // Ranks 1, 3 and 4 missed updates (each a different way); 0, 2 and 5 agree and share the sending.
  runRanks(6, [](RankContext& ctx) { syncAndCheck(ctx, {9, 1, 9, 2, 3, 9}, 9, 3); });
}

TEST(SharedStateSync, ATieGoesToTheStateOfTheLowestRank) {
  runRanks(4, [](RankContext& ctx) { syncAndCheck(ctx, {7, 8, 8, 7}, 7, 2); });
}

TEST(SharedStateSync, AllDifferentFollowsRankZero) {
  runRanks(3, [](RankContext& ctx) { syncAndCheck(ctx, {4, 5, 6}, 4, 2); });
}

TEST(SharedStateSync, OneRankIsItsOwnMajority) {
  runRanks(1, [](RankContext& ctx) { syncAndCheck(ctx, {2}, 2, 0); });
}

TEST(SharedStateSync, ALargeStateArrivesIntact) {
  runRanks(3, [](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const size_t count = (size_t{24} << 20) / sizeof(float) + 5;  // 24 MiB and a tail
    std::vector<float> big(count);
    const float salt = ctx.rank() == 1 ? 0.5f : 0.0f;  // rank 1 is out of date
    for (size_t i = 0; i < count; ++i) big[i] = static_cast<float>(i % 65521) + salt;
    cfxStateEntry entry{big.data(), count, ncclFloat32};
    cfxStateSyncInfo info{};
    ASSERT_TRUE(succeeded(cfxSharedStateSync(comm, &entry, 1, &info)));
    EXPECT_EQ(info.nOutdated, 1);
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(big[i], static_cast<float>(i % 65521)) << "element " << i;
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

TEST(SharedStateSync, DifferentLayoutsFailOnEveryRankAndWriteNothing) {
  runRanks(3, [](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    State state(ctx.rank());
    std::vector<cfxStateEntry> entries = state.entries();
    if (ctx.rank() == 2) entries[1].count -= 1;  // one element short
    EXPECT_EQ(cfxSharedStateSync(comm, entries.data(), static_cast<int>(entries.size()), nullptr), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("rank 2's state has another layout"), std::string::npos)
        << ncclGetLastError(comm);
    EXPECT_TRUE(state == State(ctx.rank())) << "nothing may be written when the layouts differ";
    expectAllReduceSum(comm, 1, 3);  // the communicator is still fine
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

TEST(SharedStateSync, BadArgumentsAreRefusedLocally) {
  runRanks(1, [](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    float x = 1.0f;
    cfxStateEntry good{&x, 1, ncclFloat32};
    cfxStateEntry nullBuffer{nullptr, 4, ncclFloat32};
    cfxStateEntry badType{&x, 1, static_cast<ncclDataType_t>(99)};
    unsigned long long h[2];
    EXPECT_EQ(cfxSharedStateSync(nullptr, &good, 1, nullptr), ncclInvalidArgument);
    EXPECT_EQ(cfxSharedStateSync(comm, &good, -1, nullptr), ncclInvalidArgument);
    EXPECT_EQ(cfxSharedStateSync(comm, nullptr, 1, nullptr), ncclInvalidArgument);
    EXPECT_EQ(cfxSharedStateSync(comm, &nullBuffer, 1, nullptr), ncclInvalidArgument);
    EXPECT_EQ(cfxSharedStateSync(comm, &badType, 1, nullptr), ncclInvalidArgument);
    EXPECT_EQ(cfxStateHash(&good, 1, nullptr), ncclInvalidArgument);
    ASSERT_TRUE(succeeded(ncclGroupStart()));
    EXPECT_EQ(cfxSharedStateSync(comm, &good, 1, nullptr), ncclInvalidUsage);
    ASSERT_TRUE(succeeded(ncclGroupEnd()));
    EXPECT_TRUE(succeeded(cfxSharedStateSync(comm, nullptr, 0, nullptr))) << "an empty state is a valid state";
    EXPECT_TRUE(succeeded(cfxStateHash(&good, 1, h)));
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

}  // namespace
}  // namespace cfx::itest
