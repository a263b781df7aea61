// SPDX-License-Identifier: Apache-2.0
// Communicator creation (blocking, nonblocking, grouped, InitAll, scalable, NCCL_COMM_ID), queries, split, shrink,
// grow, finalize, destroy and abort through the public C API, with ranks as forked processes (integration layer).
#include "free_port.h"
#include "integration/multiproc.h"
#include "integration/nccl_checks.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nccl.h>

#include "conflux_nccl_ext.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace cfx::itest {
namespace {

TEST(CommTest, VersionIs22809) {
  int version = 0;
  ASSERT_TRUE(succeeded(ncclGetVersion(&version)));
  EXPECT_EQ(version, 22809);
  EXPECT_EQ(version, NCCL_VERSION_CODE);
}

TEST(CommTest, ErrorStringsMatchNccl) {
  EXPECT_STREQ(ncclGetErrorString(ncclSuccess), "no error");
  EXPECT_STREQ(ncclGetErrorString(ncclUnhandledCudaError),
               "unhandled cuda error (run with NCCL_DEBUG=INFO for details)");
  EXPECT_STREQ(ncclGetErrorString(ncclSystemError), "unhandled system error (run with NCCL_DEBUG=INFO for details)");
  EXPECT_STREQ(ncclGetErrorString(ncclInternalError), "internal error - please report this issue to the NCCL developers");
  EXPECT_STREQ(ncclGetErrorString(ncclInvalidArgument), "invalid argument (run with NCCL_DEBUG=WARN for details)");
  EXPECT_STREQ(ncclGetErrorString(ncclInvalidUsage), "invalid usage (run with NCCL_DEBUG=WARN for details)");
  EXPECT_STREQ(ncclGetErrorString(ncclRemoteError), "remote process exited or there was a network error");
  EXPECT_STREQ(ncclGetErrorString(ncclInProgress), "NCCL operation in progress");
  for (int code : {static_cast<int>(ncclNumResults), 9, 100, -1}) {
    EXPECT_STREQ(ncclGetErrorString(static_cast<ncclResult_t>(code)), "unknown result code") << "code " << code;
  }
}

TEST(CommTest, LastErrorIsNeverNull) {
  runRanks(1, [](RankContext&) {
    const char* before = ncclGetLastError(nullptr);
    ASSERT_NE(before, nullptr);
    int count = 0;
    EXPECT_EQ(ncclCommCount(nullptr, &count), ncclInvalidArgument);
    const char* after = ncclGetLastError(nullptr);
    ASSERT_NE(after, nullptr);
    EXPECT_STRNE(after, "") << "an invalid-argument error should leave its WARN text behind";
  });
}

TEST(CommTest, QueriesReportSizeRankAndDevice) {
  runRanks(3, [](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    int count = -1, rank = -1, device = -2;
    EXPECT_TRUE(succeeded(ncclCommCount(comm, &count)));
    EXPECT_TRUE(succeeded(ncclCommUserRank(comm, &rank)));
    EXPECT_TRUE(succeeded(ncclCommCuDevice(comm, &device)));
    EXPECT_EQ(count, 3);
    EXPECT_EQ(rank, ctx.rank());
    EXPECT_GE(device, -1) << "a host communicator may report -1, never garbage";
    ncclResult_t async = ncclInternalError;
    EXPECT_TRUE(succeeded(ncclCommGetAsyncError(comm, &async)));
    EXPECT_EQ(async, ncclSuccess);
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

// Splits the parent with color(rank)/key(rank) and checks the child's size, rank order (via AllGather of
// parent ranks) and an AllReduce over exactly its members.
void splitAndCheck(RankContext& ctx, ncclComm_t parent, const std::function<int(int)>& color,
                   const std::function<int(int)>& key) {
  const int me = ctx.rank();
  std::vector<int> members;
  for (int r = 0; r < ctx.nRanks(); ++r) {
    if (color(me) != NCCL_SPLIT_NOCOLOR && color(r) == color(me)) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return key(a) < key(b); });
  ncclComm_t child = reinterpret_cast<ncclComm_t>(0x1);  // must be overwritten, NULL included
  ASSERT_TRUE(succeeded(ncclCommSplit(parent, color(me), key(me), &child, nullptr)));
  if (color(me) == NCCL_SPLIT_NOCOLOR) {
    EXPECT_EQ(child, nullptr) << "NCCL_SPLIT_NOCOLOR must give a NULL communicator";
    return;
  }
  ASSERT_NE(child, nullptr);
  int count = -1, rank = -1;
  EXPECT_TRUE(succeeded(ncclCommCount(child, &count)));
  EXPECT_TRUE(succeeded(ncclCommUserRank(child, &rank)));
  EXPECT_EQ(count, static_cast<int>(members.size()));
  const int expectedRank = static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
  EXPECT_EQ(rank, expectedRank);
  std::vector<int32_t> order(members.size(), -1);
  const int32_t mine = me;
  EXPECT_TRUE(succeeded(ncclAllGather(&mine, order.data(), 1, ncclInt32, child, nullptr)));
  EXPECT_EQ(order, std::vector<int32_t>(members.begin(), members.end())) << "child ranks are not ordered by key";
  int total = 0;
  for (int r : members) total += r + 1;
  expectAllReduceSum(child, me + 1, total);
  EXPECT_TRUE(succeeded(ncclCommDestroy(child)));
}

void runSplit(int nRanks, std::function<int(int)> color, std::function<int(int)> key) {
  runRanks(nRanks, [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    splitAndCheck(ctx, comm, color, key);
    expectAllReduceSum(comm, 1, ctx.nRanks());  // the parent still works after the split
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

TEST(CommSplitTest, HalvesWorkAsIndependentCommunicators) {
  runSplit(6, [](int r) { return r < 3 ? 0 : 1; }, [](int r) { return r; });
}

TEST(CommSplitTest, OddAndEvenRanksFormTwoCommunicators) {
  runSplit(7, [](int r) { return r % 2; }, [](int r) { return r; });
}

TEST(CommSplitTest, ReversedKeysReverseTheRankOrder) {
  runSplit(5, [](int) { return 0; }, [](int r) { return 100 - r; });
}

TEST(CommSplitTest, EqualKeysKeepTheParentOrder) {
  runSplit(4, [](int r) { return r == 2 ? 7 : 3; }, [](int) { return 0; });
}

TEST(CommSplitTest, NoColorGivesNullAndTheOthersProceed) {
  runSplit(4, [](int r) { return r == 0 ? NCCL_SPLIT_NOCOLOR : 5; }, [](int r) { return r; });
}

TEST(CommSplitTest, ChildOfAChildWorks) {
  runRanks(8, [](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const int me = ctx.rank();
    ncclComm_t half = nullptr, quarter = nullptr;
    ASSERT_TRUE(succeeded(ncclCommSplit(comm, me / 4, me, &half, nullptr)));
    ASSERT_NE(half, nullptr);
    ASSERT_TRUE(succeeded(ncclCommSplit(half, me % 2, -me, &quarter, nullptr)));
    ASSERT_NE(quarter, nullptr);
    int rank = -1;
    EXPECT_TRUE(succeeded(ncclCommUserRank(quarter, &rank)));
    EXPECT_EQ(rank, (me % 4) < 2 ? 1 : 0) << "keys -me order the pair by descending parent rank";
    // Members of my quarter: same me/4 and same parity.
    const int base = (me / 4) * 4 + me % 2;
    expectAllReduceSum(quarter, me + 1, (base + 1) + (base + 3));
    expectAllReduceSum(half, me + 1, (me / 4) * 16 + 10);
    EXPECT_TRUE(succeeded(ncclCommDestroy(quarter)));
    EXPECT_TRUE(succeeded(ncclCommDestroy(half)));
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

TEST(CommInitTest, NonBlockingInitCompletesThroughAsyncErrorPolling) {
  runRanks(3, [](RankContext& ctx) {
    const ncclUniqueId id = ctx.uniqueId();
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    const ncclResult_t rc = ncclCommInitRankConfig(&comm, ctx.nRanks(), id, ctx.rank(), &config);
    ASSERT_TRUE(rc == ncclSuccess || rc == ncclInProgress) << resultName(rc);
    ASSERT_NE(comm, nullptr) << "a nonblocking init must hand out the communicator at once";
    ASSERT_EQ(waitWhileInProgress(comm), ncclSuccess);

    std::vector<float> send(1000), recv(1000, -1.0f);
    for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<float>(ctx.rank() + i % 5);
    const ncclResult_t arc = ncclAllReduce(send.data(), recv.data(), send.size(), ncclFloat32, ncclSum, comm, nullptr);
    ASSERT_TRUE(arc == ncclSuccess || arc == ncclInProgress) << resultName(arc);
    ASSERT_EQ(waitWhileInProgress(comm), ncclSuccess);
    for (size_t i = 0; i < recv.size(); ++i) {
      ASSERT_EQ(recv[i], static_cast<float>(0 + 1 + 2 + 3 * (i % 5))) << "element " << i;
    }
    const ncclResult_t frc = ncclCommFinalize(comm);
    ASSERT_TRUE(frc == ncclSuccess || frc == ncclInProgress) << resultName(frc);
    ASSERT_EQ(waitWhileInProgress(comm), ncclSuccess);
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

TEST(CommInitTest, InitAllDrivesEveryRankFromOneThreadInAGroup) {
  runRanks(1, [](RankContext&) {
    constexpr int kDevs = 4;
    constexpr size_t kCount = 70001;
    ncclComm_t comms[kDevs] = {};
    ASSERT_TRUE(succeeded(ncclCommInitAll(comms, kDevs, nullptr)));
    for (int i = 0; i < kDevs; ++i) {
      ASSERT_NE(comms[i], nullptr);
      int count = -1, rank = -1;
      EXPECT_TRUE(succeeded(ncclCommCount(comms[i], &count)));
      EXPECT_TRUE(succeeded(ncclCommUserRank(comms[i], &rank)));
      EXPECT_EQ(count, kDevs);
      EXPECT_EQ(rank, i) << "devlist order is rank order";
    }
    std::vector<std::vector<int64_t>> send(kDevs, std::vector<int64_t>(kCount)), recv = send;
    for (int r = 0; r < kDevs; ++r) {
      for (size_t i = 0; i < kCount; ++i) send[r][i] = static_cast<int64_t>(i) * (r + 1);
    }
    ASSERT_TRUE(succeeded(ncclGroupStart()));
    for (int r = 0; r < kDevs; ++r) {
      ASSERT_TRUE(succeeded(
          ncclAllReduce(send[r].data(), recv[r].data(), kCount, ncclInt64, ncclSum, comms[r], nullptr)));
    }
    ASSERT_TRUE(succeeded(ncclGroupEnd()));
    for (int r = 0; r < kDevs; ++r) {
      for (size_t i = 0; i < kCount; ++i) {
        ASSERT_EQ(recv[r][i], static_cast<int64_t>(i) * 10) << "rank " << r << " element " << i;
      }
    }
    // A broadcast from rank 2, also grouped.
    ASSERT_TRUE(succeeded(ncclGroupStart()));
    for (int r = 0; r < kDevs; ++r) {
      ASSERT_TRUE(succeeded(ncclBroadcast(send[r].data(), recv[r].data(), kCount, ncclInt64, 2, comms[r], nullptr)));
    }
    ASSERT_TRUE(succeeded(ncclGroupEnd()));
    for (int r = 0; r < kDevs; ++r) EXPECT_EQ(recv[r], send[2]) << "rank " << r;
    for (auto* comm : comms) EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

TEST(CommInitTest, GroupedInitOfTwoCommunicatorsFromOneThread) {
  runRanks(2, [](RankContext& ctx) {
    const ncclUniqueId idA = ctx.newUniqueId();
    const ncclUniqueId idB = ctx.newUniqueId();
    ncclComm_t a = nullptr, b = nullptr;
    ASSERT_TRUE(succeeded(ncclGroupStart()));
    ASSERT_TRUE(succeeded(ncclCommInitRank(&a, 2, idA, ctx.rank())));
    ASSERT_TRUE(succeeded(ncclCommInitRank(&b, 2, idB, 1 - ctx.rank())));
    ASSERT_TRUE(succeeded(ncclGroupEnd()));
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    int rank = -1;
    EXPECT_TRUE(succeeded(ncclCommUserRank(b, &rank)));
    EXPECT_EQ(rank, 1 - ctx.rank());
    expectAllReduceSum(a, 1, 2);
    expectAllReduceSum(b, ctx.rank() + 2, 5);
    EXPECT_TRUE(succeeded(ncclCommDestroy(a)));
    EXPECT_TRUE(succeeded(ncclCommDestroy(b)));
  });
}

TEST(CommInitTest, TwoCommunicatorsUsedConcurrentlyFromTwoThreads) {
  runRanks(3, [](RankContext& ctx) {
    ncclComm_t a = ctx.initComm();
    ASSERT_NE(a, nullptr);
    const ncclUniqueId idB = ctx.newUniqueId();
    ncclComm_t b = nullptr;
    ASSERT_TRUE(succeeded(ncclCommInitRank(&b, ctx.nRanks(), idB, ctx.rank())));
    std::thread other([&] {
      for (int i = 0; i < 20; ++i) expectAllReduceSum(b, 2, 6, 5000 + i);
    });
    for (int i = 0; i < 20; ++i) expectAllReduceSum(a, 1, 3, 3000 + 7 * i);
    other.join();
    EXPECT_TRUE(succeeded(ncclCommDestroy(a)));
    EXPECT_TRUE(succeeded(ncclCommDestroy(b)));
  });
}

// Every id's root serves the ranks r with r * nId / nranks == its index; the roots combine their groups (each
// rank only ever reaches its own group's root, so a communicator that forms proves every root took part).
TEST(CommInitTest, ScalableInitWithSeveralRootsWorks) {
  runRanks(5, [](RankContext& ctx) {
    for (int nId : {1, 2, 3, 5}) {
      std::vector<ncclUniqueId> ids;
      for (int i = 0; i < nId; ++i) ids.push_back(ctx.newUniqueId());
      ncclComm_t comm = nullptr;
      ASSERT_TRUE(succeeded(ncclCommInitRankScalable(&comm, ctx.nRanks(), ctx.rank(), nId, ids.data(), nullptr)))
          << "nId " << nId;
      expectAllReduceSum(comm, ctx.rank() + 1, 15);
      EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
    }
  });
}

// A bad set of ids is refused before any root is contacted, naming what is wrong. In a rank process: the knobs
// ncclGetUniqueId reads are cached per process, and later tests fork their ranks from this one.
TEST(CommInitTest, ScalableInitRejectsABadIdSet) {
  runRanks(1, [](RankContext&) {
    std::vector<ncclUniqueId> ids(3);
    for (auto& id : ids) ASSERT_TRUE(succeeded(ncclGetUniqueId(&id)));
    const auto refused = [](int nranks, int nId, ncclUniqueId* commIds, const char* words) {
      ncclComm_t comm = nullptr;
      EXPECT_EQ(ncclCommInitRankScalable(&comm, nranks, 0, nId, commIds, nullptr), ncclInvalidArgument) << words;
      EXPECT_NE(std::string(ncclGetLastError(nullptr)).find(words), std::string::npos) << ncclGetLastError(nullptr);
      EXPECT_EQ(comm, nullptr);
    };
    refused(2, 3, ids.data(), "nId 3 exceeds nranks 2");
    std::vector<ncclUniqueId> repeated = {ids[0], ids[1], ids[0]};
    refused(4, 3, repeated.data(), "commIds[0] and commIds[2] are the same id");
    std::vector<ncclUniqueId> garbled = {ids[0], ids[1]};
    garbled[1].internal[20] ^= 0x5a;
    refused(4, 2, garbled.data(), "commIds[1]");
    refused(4, 0, ids.data(), "invalid nId 0");
  });
}

// NCCL_COMM_ID: every rank builds the id itself from the address; rank 0 serves the root inside init.
TEST(CommInitTest, CommIdEnvironmentLetsEveryRankBuildTheId) {
  const int port = testports::freeLoopbackPort();
  RunOptions options;
  options.env = {{"NCCL_COMM_ID", "127.0.0.1:" + std::to_string(port)}};
  runRanks(3, options, [](RankContext& ctx) {
    ncclUniqueId id{};
    ASSERT_TRUE(succeeded(ncclGetUniqueId(&id)));
    ncclComm_t comm = nullptr;
    ASSERT_TRUE(succeeded(ncclCommInitRank(&comm, ctx.nRanks(), id, ctx.rank())));
    expectAllReduceSum(comm, ctx.rank() + 1, 6);
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

TEST(CommShrinkTest, HealthyShrinkRenumbersTheSurvivors) {
  runRanks(5, [](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const int me = ctx.rank();
    int excluded[] = {3, 1};  // unsorted on purpose
    if (me != 1 && me != 3) {
      ncclComm_t shrunk = nullptr;
      ASSERT_TRUE(succeeded(ncclCommShrink(comm, excluded, 2, &shrunk, nullptr, NCCL_SHRINK_DEFAULT)));
      ASSERT_NE(shrunk, nullptr);
      int count = -1, rank = -1;
      EXPECT_TRUE(succeeded(ncclCommCount(shrunk, &count)));
      EXPECT_TRUE(succeeded(ncclCommUserRank(shrunk, &rank)));
      EXPECT_EQ(count, 3);
      EXPECT_EQ(rank, me == 0 ? 0 : me == 2 ? 1 : 2);
      expectAllReduceSum(shrunk, me + 1, 1 + 3 + 5);
      EXPECT_TRUE(succeeded(ncclCommDestroy(shrunk)));
    }
    // The excluded ranks never call shrink; everyone keeps the parent until the survivors are done with it.
    ctx.barrier();
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

// The ranks of a 3-rank communicator: ranks 0..2 of the job. Collective over the whole job.
ncclComm_t initFirstThree(RankContext& ctx) {
  const ncclUniqueId id = ctx.newUniqueId();
  if (ctx.rank() >= 3) return nullptr;
  ncclComm_t comm = nullptr;
  EXPECT_TRUE(succeeded(ncclCommInitRank(&comm, 3, id, ctx.rank())));
  return comm;
}

// ncclCommGetUniqueId on rank 0, handed to everyone through the test's own channel (the "out of band" of NCCL).
ncclUniqueId growIdFromRankZero(RankContext& ctx, ncclComm_t comm) {
  ncclUniqueId id{};
  if (ctx.rank() == 0) {
    EXPECT_TRUE(succeeded(ncclCommGetUniqueId(comm, &id)));
  }
  const std::string bytes =
      ctx.broadcast(0, std::string_view(reinterpret_cast<const char*>(&id), ctx.rank() == 0 ? sizeof(id) : 0));
  EXPECT_EQ(bytes.size(), sizeof(id));
  std::memcpy(&id, bytes.data(), std::min(bytes.size(), sizeof(id)));
  return id;
}

TEST(CommGrowTest, ThreeRanksGrowToFiveAndKeepTheirNumbers) {
  runRanks(5, [](RankContext& ctx) {
    const int me = ctx.rank();
    ncclComm_t comm = initFirstThree(ctx);
    if (me < 3) {
      ASSERT_NE(comm, nullptr);
      expectAllReduceSum(comm, me + 1, 1 + 2 + 3);
    }
    const ncclUniqueId growId = growIdFromRankZero(ctx, comm);
    ncclComm_t grown = nullptr;
    if (me < 3) {
      ASSERT_TRUE(succeeded(ncclCommGrow(comm, 5, me == 0 ? &growId : nullptr, -1, &grown, nullptr)));
    } else {
      ASSERT_TRUE(succeeded(ncclCommGrow(nullptr, 5, &growId, me, &grown, nullptr)));
    }
    ASSERT_NE(grown, nullptr);
    int count = -1, rank = -1;
    EXPECT_TRUE(succeeded(ncclCommCount(grown, &count)));
    EXPECT_TRUE(succeeded(ncclCommUserRank(grown, &rank)));
    EXPECT_EQ(count, 5);
    EXPECT_EQ(rank, me) << "existing ranks keep their numbers, new ones take the rank they asked for";
    expectAllReduceSum(grown, me + 1, 1 + 2 + 3 + 4 + 5);
    if (me < 3) {
      expectAllReduceSum(comm, 1, 3);  // the parent is untouched and still works
      // The id was consumed, so rank 0 may ask for another.
      if (me == 0) {
        ncclUniqueId next{};
        EXPECT_TRUE(succeeded(ncclCommGetUniqueId(comm, &next)));
      }
    }
    EXPECT_TRUE(succeeded(ncclCommDestroy(grown)));
    if (comm != nullptr) {
      EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
    }
  });
}

TEST(CommGrowTest, MisuseFailsOnEveryRankAndLeavesTheParentWorking) {
  runRanks(3, [](RankContext& ctx) {
    const int me = ctx.rank();
    ncclComm_t comm = initFirstThree(ctx);
    ASSERT_NE(comm, nullptr);
    ncclComm_t grown = nullptr;
    ncclUniqueId growId = growIdFromRankZero(ctx, comm);
    if (me == 0) {
      ncclUniqueId second{};
      EXPECT_EQ(ncclCommGetUniqueId(comm, &second), ncclInvalidUsage) << "one grow id is outstanding at a time";
      EXPECT_EQ(ncclCommGetUniqueId(comm, nullptr), ncclInvalidArgument);
    }
    EXPECT_EQ(ncclCommGrow(comm, 3, &growId, -1, &grown, nullptr), ncclInvalidArgument) << "nRanks must grow";
    EXPECT_EQ(ncclCommGrow(comm, 5, nullptr, -1, nullptr, nullptr), ncclInvalidArgument) << "newcomm NULL";
    EXPECT_EQ(ncclCommGrow(comm, 5, nullptr, me + 1, &grown, nullptr), ncclInvalidArgument) << "existing ranks keep theirs";
    EXPECT_EQ(ncclCommGrow(nullptr, 5, nullptr, 4, &grown, nullptr), ncclInvalidArgument) << "a new rank needs the id";

    // Nobody passes the id: every rank fails, and the id stays outstanding.
    EXPECT_EQ(ncclCommGrow(comm, 5, nullptr, -1, &grown, nullptr), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("no existing rank passed"), std::string::npos)
        << ncclGetLastError(comm);
    // Two ranks pass it (only rank 0 made it): every rank fails and names rank 1.
    EXPECT_EQ(ncclCommGrow(comm, 5, me <= 1 ? &growId : nullptr, -1, &grown, nullptr), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("rank 1 passed a unique id"), std::string::npos)
        << ncclGetLastError(comm);
    // That attempt consumed rank 0's id: using it again is refused everywhere.
    EXPECT_EQ(ncclCommGrow(comm, 5, me == 0 ? &growId : nullptr, -1, &grown, nullptr), ncclInvalidUsage);
    // Different sizes: refused everywhere.
    growId = growIdFromRankZero(ctx, comm);
    EXPECT_EQ(ncclCommGrow(comm, me == 2 ? 6 : 5, me == 0 ? &growId : nullptr, -1, &grown, nullptr), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("same nRanks"), std::string::npos) << ncclGetLastError(comm);
    EXPECT_EQ(grown, nullptr);
    expectAllReduceSum(comm, me + 1, 6);
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

TEST(CommGrowTest, NonBlockingGrowCompletesThroughAsyncErrorPolling) {
  runRanks(4, [](RankContext& ctx) {
    const int me = ctx.rank();
    ncclComm_t comm = initFirstThree(ctx);
    const ncclUniqueId growId = growIdFromRankZero(ctx, comm);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t grown = nullptr;
    const ncclResult_t rc = me < 3 ? ncclCommGrow(comm, 4, me == 0 ? &growId : nullptr, -1, &grown, &config)
                                   : ncclCommGrow(nullptr, 4, &growId, me, &grown, &config);
    ASSERT_TRUE(rc == ncclSuccess || rc == ncclInProgress) << resultName(rc);
    ASSERT_NE(grown, nullptr) << "a non-blocking grow hands out the communicator at once";
    ASSERT_EQ(waitWhileInProgress(grown), ncclSuccess);
    std::vector<int32_t> send(999, me + 1), recv(999, -1);
    const ncclResult_t arc = ncclAllReduce(send.data(), recv.data(), send.size(), ncclInt32, ncclSum, grown, nullptr);
    ASSERT_TRUE(arc == ncclSuccess || arc == ncclInProgress) << resultName(arc);
    ASSERT_EQ(waitWhileInProgress(grown), ncclSuccess);
    EXPECT_EQ(recv, std::vector<int32_t>(999, 1 + 2 + 3 + 4));
    EXPECT_TRUE(succeeded(ncclCommDestroy(grown)));
    if (comm != nullptr) {
      EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
    }
  });
}

TEST(CommGrowTest, OneThreadGrowsEveryRankInAGroup) {
  runRanks(1, [](RankContext&) {
    ncclComm_t comms[2] = {};
    ASSERT_TRUE(succeeded(ncclCommInitAll(comms, 2, nullptr)));
    ncclUniqueId growId{};
    ASSERT_TRUE(succeeded(ncclCommGetUniqueId(comms[0], &growId)));
    ncclComm_t grown[4] = {};
    ASSERT_TRUE(succeeded(ncclGroupStart()));
    for (int r = 0; r < 4; ++r) {
      const bool existing = r < 2;
      ASSERT_TRUE(succeeded(ncclCommGrow(existing ? comms[r] : nullptr, 4, r == 0 || !existing ? &growId : nullptr,
                                         existing ? -1 : r, &grown[r], nullptr)));
    }
    ASSERT_TRUE(succeeded(ncclGroupEnd()));
    std::vector<std::vector<int64_t>> send(4, std::vector<int64_t>(5003)), recv = send;
    for (int r = 0; r < 4; ++r) {
      ASSERT_NE(grown[r], nullptr);
      for (size_t i = 0; i < send[r].size(); ++i) send[r][i] = static_cast<int64_t>(i) * (r + 1);
    }
    ASSERT_TRUE(succeeded(ncclGroupStart()));
    for (int r = 0; r < 4; ++r) {
      ASSERT_TRUE(succeeded(
          ncclAllReduce(send[r].data(), recv[r].data(), send[r].size(), ncclInt64, ncclSum, grown[r], nullptr)));
    }
    ASSERT_TRUE(succeeded(ncclGroupEnd()));
    for (int r = 0; r < 4; ++r) {
      for (size_t i = 0; i < recv[r].size(); ++i) ASSERT_EQ(recv[r][i], static_cast<int64_t>(i) * 10) << "rank " << r;
    }
    for (auto* c : grown) EXPECT_TRUE(succeeded(ncclCommDestroy(c)));
    for (auto* c : comms) EXPECT_TRUE(succeeded(ncclCommDestroy(c)));
  });
}

TEST(CommLifecycleTest, FinalizeThenDestroySucceeds) {
  runRanks(4, [](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    expectAllReduceSum(comm, 1, 4);
    EXPECT_TRUE(succeeded(ncclCommFinalize(comm)));
    ncclResult_t state = ncclInternalError;
    EXPECT_TRUE(succeeded(ncclCommGetAsyncError(comm, &state)));
    EXPECT_EQ(state, ncclSuccess) << "a blocking finalize returns once the communicator is quiescent";
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

TEST(CommLifecycleTest, AbortAfterWorkAndRightAfterInitSucceeds) {
  runRanks(3, [](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    expectAllReduceSum(comm, 1, 3);
    EXPECT_TRUE(succeeded(ncclCommAbort(comm)));
    ncclComm_t second = nullptr;
    ASSERT_TRUE(succeeded(ncclCommInitRank(&second, ctx.nRanks(), ctx.newUniqueId(), ctx.rank())));
    EXPECT_TRUE(succeeded(ncclCommAbort(second)));
  });
}

size_t countEntries(const char* dir) {
  size_t n = 0;
  if (DIR* d = ::opendir(dir)) {
    while (::readdir(d) != nullptr) ++n;
    ::closedir(d);
  }
  return n;
}

// Creating and destroying communicators (and split children) many times must return every file descriptor
// and thread: long jobs re-create process groups.
TEST(CommLifecycleTest, RepeatedInitAndDestroyLeaksNoDescriptorsOrThreads) {
  runRanks(3, [](RankContext& ctx) {
    auto cycle = [&] {
      ncclComm_t comm = nullptr;
      ASSERT_TRUE(succeeded(ncclCommInitRank(&comm, ctx.nRanks(), ctx.newUniqueId(), ctx.rank())));
      ncclComm_t child = nullptr;
      ASSERT_TRUE(succeeded(ncclCommSplit(comm, ctx.rank() % 2, 0, &child, nullptr)));
      expectAllReduceSum(comm, 1, 3, 70000);
      EXPECT_TRUE(succeeded(ncclCommDestroy(child)));
      EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
      ctx.barrier();
    };
    cycle();  // the first cycle may set up process-wide state
    const size_t fds = countEntries("/proc/self/fd");
    const size_t threads = countEntries("/proc/self/task");
    for (int i = 0; i < 8; ++i) cycle();
    // Let threads that are already exiting finish.
    for (int i = 0; i < 200 && countEntries("/proc/self/task") > threads; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(countEntries("/proc/self/fd"), fds) << "file descriptors leaked";
    EXPECT_EQ(countEntries("/proc/self/task"), threads) << "threads leaked";
  });
}

TEST(CommLifecycleTest, DestroyAndAbortAcceptNull) {
  runRanks(1, [](RankContext&) {
    EXPECT_TRUE(succeeded(ncclCommDestroy(nullptr)));
    EXPECT_TRUE(succeeded(ncclCommAbort(nullptr)));
  });
}

}  // namespace
}  // namespace cfx::itest
