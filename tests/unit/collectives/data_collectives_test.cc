// SPDX-License-Identifier: Apache-2.0
// Ranks as threads: Broadcast (Chain, Direct), AllGather (Ring, BiRing, Hier, Direct), AlltoAll, Gather and
// Scatter (Direct) against
// closed-form results, across rank counts, element counts, types, in-place layouts, roots and misalignment;
// plus collectives back to back in one Work, and dispatch errors.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include "coll_harness.h"
#include "collectives/planner.h"
#include "loopback.h"

namespace cfx::testing {
namespace {

using coll::Algorithm;
using coll::Collective;

constexpr size_t kMisalign[] = {0, 1, 4, 3};

template <typename Roots>
void sweep(Collective coll, Algorithm algorithm, Roots roots) {
  size_t index = 0;
  for (int n : kSweepRanks) {
    for (DataType type : kSweepTypes) {
      const std::vector<size_t> counts = sweepCounts(n, type, 256);
      for (size_t k = 0; k < counts.size(); ++k) {
        const size_t count = counts[k];
        for (bool inPlace : {false, true}) {
          if (placementSkippedInQuickRuns(k, inPlace)) continue;
          for (int root : roots(n)) {
            CollCase c;
            c.coll = coll;
            c.algorithm = algorithm;
            c.nRanks = n;
            c.count = count;
            c.type = type;
            c.inPlace = inPlace;
            c.root = root;
            c.misalign = kMisalign[index++ % std::size(kMisalign)];
            runCase(c);
            if (::testing::Test::HasFailure()) return;
          }
        }
      }
    }
  }
}

std::vector<int> noRoot(int) { return {0}; }

TEST(BroadcastChain, DeliversTheRootsDataForEveryShapeAndRoot) {
  sweep(Collective::Broadcast, Algorithm::Chain, sweepRoots);
}

TEST(AllGatherRing, AssemblesEveryRanksBlockForEveryShape) { sweep(Collective::AllGather, Algorithm::Ring, noRoot); }

TEST(AllGatherBiRing, AssemblesEveryRanksBlockForEveryShape) { sweep(Collective::AllGather, Algorithm::BiRing, noRoot); }

// Hier over hosts of several sizes, including uneven ones and one rank per host (where it is the flat ring), and
// blocks large enough for several pipelined segments.
TEST(AllGatherHier, AssemblesEveryRanksBlockOnEveryHostLayout) {
  sweepHostLayouts(Collective::AllGather, Algorithm::Hier, {RedOpKind::Sum}, {3001});
}

// Hier3 on 3-level layouts (in rank order, interleaved, 3 x 2 x 2) and on those where it is Hier, with blocks of
// several pipelined segments.
TEST(AllGatherHier3, AssemblesEveryRanksBlockOnEveryDeviceLayout) {
  sweepDeviceLayouts(Collective::AllGather, Algorithm::Hier3, {RedOpKind::Sum}, {3001});
}

// Hier's broadcast on the device layouts, whose host chains go device by device (interleaved numbering included).
TEST(BroadcastHier, DeliversTheRootsDataOnEveryDeviceLayoutAndRoot) {
  sweepDeviceLayouts(Collective::Broadcast, Algorithm::Hier, {RedOpKind::Sum}, {3001}, /*everyRoot=*/true);
}

// Every host layout above (uneven hosts, interleaved ranks, one rank per host) and roots at both ends and the
// middle, with messages of many pieces.
TEST(BroadcastHier, DeliversTheRootsDataOnEveryHostLayoutAndRoot) {
  // The sanitizer runs (CFX_TEST_QUICK) leave out the many-piece message.
  const std::vector<size_t> big = std::getenv("CFX_TEST_QUICK") ? std::vector<size_t>{} : std::vector<size_t>{70001};
  sweepHostLayouts(Collective::Broadcast, Algorithm::Hier, {RedOpKind::Sum}, big, /*everyRoot=*/true);
}

TEST(AllGatherDirect, AssemblesEveryRanksBlockForEveryShape) { sweep(Collective::AllGather, Algorithm::Direct, noRoot); }

TEST(BroadcastDirect, DeliversTheRootsDataForEveryShapeAndRoot) {
  sweep(Collective::Broadcast, Algorithm::Direct, sweepRoots);
}

// The Direct algorithms send whole blocks, so over transports with direct messages every block larger than a FIFO
// is read straight out of its sender's buffer; the results must not change, in place or not, and for
// ReduceScatter with ops that scale the inputs first (avg of floats, premulsum), whose blocks travel as slices.
TEST(DirectAlgorithms, ReadWholeBlocksStraightFromTheSendersBuffers) {
  for (Collective coll : {Collective::AllGather, Collective::Broadcast, Collective::ReduceScatter, Collective::AllReduce}) {
    for (int n : {2, 3, 5, 8}) {
      for (DataType type : {DataType::Float32, DataType::Int8, DataType::Float16}) {
        for (RedOpKind op : {RedOpKind::Sum, RedOpKind::Avg, RedOpKind::PreMulSum}) {
          if (coll != Collective::ReduceScatter && coll != Collective::AllReduce && op != RedOpKind::Sum) continue;
          for (bool inPlace : {false, true}) {
            CollCase c;
            c.coll = coll;
            c.algorithm = Algorithm::Direct;
            c.nRanks = n;
            c.count = 3 * 256 + 5;  // several FIFOs of 256 x 2 bytes, whatever the type
            c.type = type;
            c.op = op;
            c.inPlace = inPlace;
            c.root = n / 2;
            c.misalign = inPlace ? 0 : 3;
            c.directThreshold = 1;
            const CaseStats stats = runCase(c);
            if (op == RedOpKind::Sum) {  // avg and premulsum scale the blocks first: slices
              EXPECT_GT(stats.directReads, 0u) << c.describe();
            }
            if (::testing::Test::HasFailure()) return;
          }
        }
      }
    }
  }
}

TEST(AlltoAllDirect, DeliversEveryBlockForEveryShape) { sweep(Collective::AlltoAll, Algorithm::Direct, noRoot); }

TEST(GatherDirect, AssemblesEveryBlockAtTheRootForEveryShapeAndRoot) {
  sweep(Collective::Gather, Algorithm::Direct, sweepRoots);
}

TEST(ScatterDirect, DeliversEveryBlockFromTheRootForEveryShapeAndRoot) {
  sweep(Collective::Scatter, Algorithm::Direct, sweepRoots);
}

// Transports with direct (single-copy) messages: large whole-block verbs (Gather, Scatter, out-of-place AlltoAll)
// go direct, every other algorithm the planner picks without directMinBytes keeps its verbs within a FIFO; all
// must still deliver the same results.
TEST(Collectives, MatchClosedFormWithDirectMessages) {
  const Collective colls[] = {Collective::AllReduce, Collective::Broadcast,     Collective::Reduce,
                              Collective::AllGather, Collective::ReduceScatter, Collective::AlltoAll,
                              Collective::Gather,    Collective::Scatter};
  // The sanitizer runs (CFX_TEST_QUICK) take 3 and 8 ranks: odd blocks and the most peers (15 s under TSan for 4).
  const std::vector<int> ranks = std::getenv("CFX_TEST_QUICK") ? std::vector<int>{3, 8} : std::vector<int>{2, 3, 5, 8};
  for (Collective coll : colls) {
    for (int n : ranks) {
      for (DataType type : {DataType::Float32, DataType::Int8}) {
        for (size_t count : {size_t{3 * 256 + 1}, 3 * 2 * 256 * static_cast<size_t>(n) + 7}) {
          for (bool inPlace : {false, true}) {
            CollCase c;
            c.coll = coll;
            c.algorithm = coll::choosePlan({coll, count * dataTypeSize(type), n, 256}, {}).algorithm;
            c.nRanks = n;
            c.count = count;
            c.type = type;
            c.inPlace = inPlace;
            c.root = n - 1;
            c.misalign = inPlace ? 0 : 1;
            c.directThreshold = 1;
            const CaseStats stats = runCase(c);
            if (coll == Collective::Gather || coll == Collective::Scatter || (coll == Collective::AlltoAll && !inPlace)) {
              EXPECT_GT(stats.directReads, 0u) << c.describe();
            } else {
              EXPECT_EQ(stats.directReads, 0u) << c.describe() << ": a verb larger than a FIFO";
            }
            if (HasFailure()) return;
          }
        }
      }
    }
  }
}

// Blocks of many FIFOs' worth through two-slot FIFOs: a plain send-then-receive exchange would deadlock here.
TEST(AlltoAllDirect, LargeBlocksThroughTwoSlotFifosDoNotDeadlock) {
  for (int n : {2, 3, 5, 8}) {
    for (bool inPlace : {false, true}) {
      CollCase c;
      c.coll = Collective::AlltoAll;
      c.algorithm = Algorithm::Direct;
      c.nRanks = n;
      c.count = 64 * 37 + 5;  // 37 slices and a bit of float32 per block
      c.inPlace = inPlace;
      runCase(c);
    }
  }
}

TEST(ChainsAndDirect, LargeMessagesThroughTwoSlotFifos) {
  for (Collective coll : {Collective::Broadcast, Collective::Reduce, Collective::Gather, Collective::Scatter,
                          Collective::AllGather, Collective::ReduceScatter}) {
    CollCase c;
    c.coll = coll;
    c.algorithm = coll::choosePlan({coll, 1 << 20, 5, 256}, {}).algorithm;
    c.nRanks = 5;
    c.count = 20'011;
    c.root = 3;
    runCase(c);
  }
}

// Every collective back to back in one Work per rank, through tiny FIFOs: a fast rank runs ahead into the next
// operation while its peers still drain the previous one.
prims::Coro runAll(const std::vector<coll::CollArgs>& ops, prims::Prims& prims) {
  uint32_t seq = 100;
  for (const coll::CollArgs& a : ops) {
    prims.setOpSeq(++seq);
    const coll::Plan plan = coll::choosePlan(
        {a.coll, a.count * dataTypeSize(a.type), prims.nRanks(), prims.sliceBytes()}, coll::PlannerOptions{});
    CFX_CO_TRY(co_await coll::runCollective(a, plan, prims));
  }
  co_return Status();
}

TEST(Collectives, RunBackToBackInOneWork) {
  const int n = 5;
  const size_t count = 333;
  const Collective order[] = {Collective::AllReduce, Collective::Broadcast,     Collective::AlltoAll,
                              Collective::Reduce,    Collective::Gather,        Collective::AllGather,
                              Collective::Scatter,   Collective::ReduceScatter, Collective::AllReduce};
  const size_t k = std::size(order);
  std::vector<std::vector<std::vector<int32_t>>> in(n), out(n);
  std::vector<std::vector<coll::CollArgs>> ops(n);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < k; ++i) {
      in[r].emplace_back(count * n);
      out[r].emplace_back(count * n, -1);
      for (size_t e = 0; e < count * n; ++e) in[r][i][e] = static_cast<int32_t>(1000 * r + e + 7 * i);
      coll::CollArgs a;
      a.coll = order[i];
      a.sendbuff = in[r][i].data();
      a.recvbuff = out[r][i].data();
      a.count = order[i] == Collective::AllReduce && i == 0 ? 3 : count;  // the first one small: RecDouble
      a.type = DataType::Int32;
      a.op = ReduceOp::builtin(DataType::Int32, RedOpKind::Sum, n);
      a.root = static_cast<int>(i) % n;
      ops[r].push_back(a);
    }
  }
  LoopbackWorld world(n, {64, 2});
  for (const Status& s : world.runRanks([&](int r, prims::Prims&prims) { return runAll(ops[r], prims); })) {
    ASSERT_TRUE(s.ok()) << s.message();
  }
  auto sumOver = [&](size_t i, size_t e) {
    int64_t s = 0;
    for (int q = 0; q < n; ++q) s += in[q][i][e];
    return static_cast<int32_t>(s);
  };
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(out[r][0][2], sumOver(0, 2));
    EXPECT_EQ(out[r][1][count - 1], in[1][1][count - 1]);          // Broadcast from root 1
    EXPECT_EQ(out[r][2][3 * count + 5], in[3][2][r * count + 5]);  // AlltoAll block 3
    if (r == 3) {
      EXPECT_EQ(out[r][3][10], sumOver(3, 10));  // Reduce to root 3
    }
    if (r == 4) {
      EXPECT_EQ(out[r][4][2 * count + 1], in[2][4][1]);  // Gather to root 4
    }
    EXPECT_EQ(out[r][5][4 * count + 9], in[4][5][9]);                    // AllGather
    EXPECT_EQ(out[r][6][12], in[1][6][r * count + 12]);                  // Scatter from root 6 % 5 = 1
    EXPECT_EQ(out[r][7][count - 1], sumOver(7, r * count + count - 1));  // ReduceScatter
    EXPECT_EQ(out[r][8][count - 1], sumOver(8, count - 1));              // AllReduce, Ring
  }
}

TEST(Collectives, UnknownPairIsInvalidUsage) {
  LoopbackWorld world(2, {256, 2});
  coll::CollArgs args;
  args.coll = Collective::Broadcast;
  for (const Status& s : world.runRanks(
           [&](int, prims::Prims& prims) { return coll::runCollective(args, coll::Plan{Algorithm::Ring}, prims); })) {
    EXPECT_EQ(s.code(), Errc::InvalidUsage);
    EXPECT_NE(s.message().find("Broadcast has no Ring algorithm"), std::string::npos) << s.message();
  }
}

TEST(Collectives, EveryImplementedPairIsDispatched) {
  int pairs = 0;
  for (int c = 0; c < coll::kNumCollectives; ++c) {
    for (int a = 0; a < coll::kNumAlgorithms; ++a) {
      pairs += coll::hasAlgorithm(static_cast<Collective>(c), static_cast<Algorithm>(a)) ? 1 : 0;
    }
  }
  // Each has a sweep: 29 in this file, reducing_collectives_test.cc, alltoallv_test.cc or moe_test.cc, the four
  // scans in scan_test.cc and the delta broadcast in compressed_collectives_test.cc.
  EXPECT_EQ(pairs, 34);
}

// A peer that posts its last message and exits between a waiting receiver's look at the FIFO and its check of the
// peer: the message counts, and the exit fails nothing (CI saw a 7-rank all-reduce over shared memory fail that way:
// "peer rank 2 has exited", its data already waiting). A peer that exits without posting still fails the receiver.
TEST(PeerExit, AMessagePostedJustBeforeTheSenderExitedIsStillReceived) {
  std::vector<int32_t> sent(50);
  for (size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<int32_t>(3 * i + 1);
  const size_t bytes = sent.size() * sizeof(int32_t);
  for (const bool posts : {true, false}) {
    SCOPED_TRACE(posts ? "the sender posted before it exited" : "the sender exited without posting");
    LoopbackWorld world(2, {256, 2});
    if (posts) {
      world.senderExitsAsItIsChecked(1, 0);
    } else {
      world.senderHasExited(1, 0);
    }
    std::vector<int32_t> got(sent.size(), -1);
    const auto st = world.runRanks(
        [&](int r, prims::Prims& p) -> prims::Coro {
          if (r == 0) return coll::verbStrand(p.recv(1, got.data(), bytes));
          if (posts) return coll::verbStrand(p.send(0, sent.data(), bytes));
          return []() -> prims::Coro { co_return Status(); }();
        },
        std::chrono::seconds(5));
    ASSERT_TRUE(st[1].ok()) << st[1].message();
    if (posts) {
      ASSERT_TRUE(st[0].ok()) << st[0].message();
      EXPECT_EQ(got, sent);
    } else {
      ASSERT_FALSE(st[0].ok());
      EXPECT_EQ(st[0].code(), Errc::RemoteError) << st[0].message();
      EXPECT_NE(st[0].message().find("the sender has exited"), std::string::npos) << st[0].message();
    }
  }
}

// A transport may read a message in while the receiver checks its peers (tcp's owner-driven I/O reads the socket on
// the owner's thread): nobody rings for it. The receiver must look again before it sleeps, not sleep through the
// check interval with the message in hand (host lanes across hosts stalled 200 ms a few times in a hundred ops).
TEST(PeerCheck, AMessageTheCheckReadsInIsTakenWithoutSleeping) {
  std::vector<int32_t> sent(50);
  for (size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<int32_t>(7 * i + 2);
  const size_t bytes = sent.size() * sizeof(int32_t);
  LoopbackWorld world(2, {256, 2});
  world.messagesShowOnlyWhenChecked(1, 0);
  // The watcher rings rank 0 until a check has shown the message (each ring makes the next sleep check its peers
  // first, as a ring from a transport does), then watches it: a receiver found asleep on the shown message is the
  // failure, and is woken so that the test ends at once instead of after the check interval.
  std::atomic<bool> done{false};
  std::atomic<bool> slept{false};
  std::thread watcher([&] {
    while (!done.load()) {
      if (world.asleepOnShownMessage(1, 0)) {
        slept.store(true);
        world.bell(0).ring();
      } else if (!world.shownByCheck(1, 0)) {
        world.bell(0).ring();
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      std::this_thread::yield();
    }
  });
  std::vector<int32_t> got(sent.size(), -1);
  const auto st = world.runRanks(
      [&](int r, prims::Prims& p) -> prims::Coro {
        if (r == 0) return coll::verbStrand(p.recv(1, got.data(), bytes));
        return coll::verbStrand(p.send(0, sent.data(), bytes));
      },
      std::chrono::seconds(60), std::chrono::seconds(2));
  done.store(true);
  watcher.join();
  ASSERT_TRUE(st[0].ok()) << st[0].message();
  ASSERT_TRUE(st[1].ok()) << st[1].message();
  EXPECT_EQ(got, sent);
  EXPECT_FALSE(slept.load()) << "rank 0 slept on its doorbell with the message its peer check read in";
}

}  // namespace
}  // namespace cfx::testing
