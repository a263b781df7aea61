// SPDX-License-Identifier: Apache-2.0
// Ranks as threads: AllReduce (Ring, RecDouble, Exchange), Reduce (Chain) and ReduceScatter (Ring) against closed-form
// results, across rank counts, element counts, types, operators, in-place layouts, roots and misalignment.
#include <gtest/gtest.h>

#include <cstdlib>

#include "coll_harness.h"
#include "loopback.h"

namespace cfx::testing {
namespace {

using coll::Algorithm;
using coll::Collective;

constexpr size_t kMisalign[] = {0, 1, 4, 3};

// Every (n, type, op, count, in-place) combination; `roots(n, op)` picks the roots (one for unrooted ops).
template <typename Roots>
void sweep(Collective coll, Algorithm algorithm, Roots roots, size_t maxBytes = SIZE_MAX, bool powerOfTwoRanks = false) {
  size_t index = 0;
  for (int n : kSweepRanks) {
    if (powerOfTwoRanks && (n & (n - 1)) != 0) continue;
    for (DataType type : kSweepTypes) {
      for (RedOpKind op : kSweepOps) {
        // Min shares Max's code path everywhere but in the kernel; AllReduce covers it, the others skip it.
        if (op == RedOpKind::Min && coll != Collective::AllReduce) continue;
        if (skippedInQuickRuns(type, op)) continue;
        const std::vector<size_t> counts = sweepCounts(n, type, 256);
        for (size_t k = 0; k < counts.size(); ++k) {
          const size_t count = counts[k];
          if (count * dataTypeSize(type) > maxBytes) continue;
          for (bool inPlace : {false, true}) {
            if (placementSkippedInQuickRuns(k, inPlace)) continue;
            for (int root : roots(n, op)) {
              CollCase c;
              c.coll = coll;
              c.algorithm = algorithm;
              c.nRanks = n;
              c.count = count;
              c.type = type;
              c.op = op;
              c.inPlace = inPlace;
              c.root = root;
              c.misalign = kMisalign[index++ % std::size(kMisalign)];
              runCase(c);
              if (::testing::Test::HasFailure()) return;  // the first failing case says enough
            }
          }
        }
      }
    }
  }
}

std::vector<int> noRoot(int, RedOpKind) { return {0}; }

// Every root for the operators whose lowering differs (pre-multiply, post-divide, plain); the middle otherwise.
std::vector<int> reduceRoots(int n, RedOpKind op) {
  if (op == RedOpKind::Sum || op == RedOpKind::Avg || op == RedOpKind::PreMulSum) return sweepRoots(n);
  return {n / 2};
}

TEST(AllReduceRing, MatchesClosedFormForEveryShape) { sweep(Collective::AllReduce, Algorithm::Ring, noRoot); }

TEST(AllReduceRecDouble, MatchesClosedFormForEveryShapeThatFitsOneSlice) {
  sweep(Collective::AllReduce, Algorithm::RecDouble, noRoot, 256);
}

// Every count, also those spanning many slices of two-slot FIFOs (the planner only gives it one slice).
TEST(AllReduceExchange, MatchesClosedFormForEveryShapeOnPowerOfTwoRanks) {
  sweep(Collective::AllReduce, Algorithm::Exchange, noRoot, SIZE_MAX, /*powerOfTwoRanks=*/true);
}

TEST(AllReduceExchange, RefusesRankCountsThatAreNotPowersOfTwo) {
  LoopbackWorld world(3, {256, 2});
  std::vector<float> buf(5, 1.0f);
  coll::CollArgs args;
  args.sendbuff = args.recvbuff = buf.data();
  args.count = buf.size();
  args.op = ReduceOp::builtin(DataType::Float32, RedOpKind::Sum, 3);
  const std::vector<Status> st = world.runRanks(
      [&](int, prims::Prims& prims) { return coll::runCollective(args, coll::Plan{Algorithm::Exchange}, prims); });
  for (const Status& s : st) {
    EXPECT_EQ(s.code(), Errc::InvalidUsage);
    EXPECT_NE(s.message().find("power-of-two"), std::string::npos) << s.message();
  }
}

TEST(ReduceChain, MatchesClosedFormForEveryShapeAndRoot) { sweep(Collective::Reduce, Algorithm::Chain, reduceRoots); }

TEST(ReduceScatterRing, MatchesClosedFormForEveryShape) { sweep(Collective::ReduceScatter, Algorithm::Ring, noRoot); }

TEST(AllReduceRabenseifner, MatchesClosedFormForEveryShape) {
  sweep(Collective::AllReduce, Algorithm::Rabenseifner, noRoot);
}

// Every shape, also halves spanning many slices (the tree walks them segment by segment); the sanitizer runs
// (CFX_TEST_QUICK) keep to counts of one slice.
TEST(AllReduceTree, MatchesClosedFormForEveryShape) {
  sweep(Collective::AllReduce, Algorithm::Tree, noRoot, std::getenv("CFX_TEST_QUICK") ? 4096 : SIZE_MAX);
}

TEST(AllReduceBiRing, MatchesClosedFormForEveryShape) { sweep(Collective::AllReduce, Algorithm::BiRing, noRoot); }

TEST(AllReduceDirect, MatchesClosedFormForEveryShape) { sweep(Collective::AllReduce, Algorithm::Direct, noRoot); }

TEST(ReduceScatterDirect, MatchesClosedFormForEveryShape) {
  sweep(Collective::ReduceScatter, Algorithm::Direct, noRoot);
}

TEST(ReduceScatterBiRing, MatchesClosedFormForEveryShape) {
  sweep(Collective::ReduceScatter, Algorithm::BiRing, noRoot);
}

// Hier over hosts of several sizes, including uneven ones and one rank per host (where it is the flat ring), and
// counts large enough for 2 to 8 pipelined segments (8 slices per rank and segment). The sanitizer runs
// (CFX_TEST_QUICK) keep the 2-segment count only: the 8-segment one took a minute under TSan.
TEST(AllReduceHier, MatchesClosedFormOnEveryHostLayout) {
  const std::vector<size_t> big = std::getenv("CFX_TEST_QUICK") ? std::vector<size_t>{5000} : std::vector<size_t>{5000, 40009};
  sweepHostLayouts(Collective::AllReduce, Algorithm::Hier, {std::begin(kSweepOps), std::end(kSweepOps)}, big);
}

// Hier3 on 3-level layouts (2 x 2 x 2 in rank order and interleaved, 3 x 2 x 2) and on those where it is Hier, with
// counts for 2 to 8 pipelined segments; the sanitizer runs keep the 2-segment count.
TEST(AllReduceHier3, MatchesClosedFormOnEveryDeviceLayout) {
  const std::vector<size_t> big =
      std::getenv("CFX_TEST_QUICK") ? std::vector<size_t>{5000} : std::vector<size_t>{5000, 40009};
  sweepDeviceLayouts(Collective::AllReduce, Algorithm::Hier3, {std::begin(kSweepOps), std::end(kSweepOps)}, big);
}

// Hier over the same host layouts: the interleaved one ({5, 9, 5, 9, 5, 9}) checks that blocks are found by global
// rank; uneven hosts and one rank per host run the flat ring. The sweep counts already reach 1 to 8 pipelined
// segments (8 slices per rank and segment); 3001 adds segments of several slices per block. Min is left out as in
// the sweeps above. The sanitizer runs (CFX_TEST_QUICK; 17 s under TSan with every type) keep the sweep counts, one
// op per lowering (plain, post-divide for Int8's average, pre-multiply) and one type per element size that matters
// (4 bytes, and 1 for odd offsets); the plain op is Max: the harness's sum inputs repeat every 3 elements, so they
// would not see a block taken from the wrong rank.
TEST(ReduceScatterHier, MatchesClosedFormOnEveryHostLayout) {
  using enum RedOpKind;
  if (std::getenv("CFX_TEST_QUICK")) {
    sweepHostLayouts(Collective::ReduceScatter, Algorithm::Hier, {Max, Avg, PreMulSum}, {}, /*everyRoot=*/false,
                     {DataType::Float32, DataType::Int8});
  } else {
    sweepHostLayouts(Collective::ReduceScatter, Algorithm::Hier, {Sum, Prod, Max, Avg, PreMulSum}, {3001});
  }
}

// Hier3's reduce-scatter on the 3-level layouts and those where it is Hier. Min is left out as for Hier; the
// sanitizer runs keep Max, Avg (post-divide for integers) and PreMulSum.
TEST(ReduceScatterHier3, MatchesClosedFormOnEveryDeviceLayout) {
  using enum RedOpKind;
  const std::vector<RedOpKind> ops = std::getenv("CFX_TEST_QUICK")
                                         ? std::vector<RedOpKind>{Max, Avg, PreMulSum}
                                         : std::vector<RedOpKind>{Sum, Prod, Max, Avg, PreMulSum};
  sweepDeviceLayouts(Collective::ReduceScatter, Algorithm::Hier3, ops, {3001});
}

// The same configuration gives the same bits from run to run where rounding makes the order matter: the interleaved
// 2 x 3 layout, 3 pipelined segments, inputs with many significant bits.
TEST(ReduceScatterHier, FloatAverageIsReproducibleAcrossRuns) {
  const coll::Layout layout = coll::Layout::fromHostIds({5, 9, 5, 9, 5, 9});
  const int n = layout.nRanks();
  const size_t count = 1000;
  std::vector<std::vector<float>> first;
  for (int run = 0; run < 3; ++run) {
    LoopbackWorld world(n, {256, 2});
    std::vector<std::vector<float>> in(n), out(n, std::vector<float>(count));
    std::vector<coll::CollArgs> args(n);
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < n * count; ++i) in[r].push_back(0.1f * static_cast<float>(r + 1) + 1e-3f * i);
      args[r].coll = Collective::ReduceScatter;
      args[r].sendbuff = in[r].data();
      args[r].recvbuff = out[r].data();
      args[r].count = count;
      args[r].op = ReduceOp::builtin(DataType::Float32, RedOpKind::Avg, n);
    }
    const coll::Plan plan{Algorithm::Hier, &layout};
    for (const Status& s :
         world.runRanks([&](int r, prims::Prims& prims) { return coll::runCollective(args[r], plan, prims); })) {
      ASSERT_TRUE(s.ok()) << s.message();
    }
    for (int r = 0; r < n; ++r) {
      for (size_t j = 0; j < count; j += 97) {  // the average of 0.1 (q + 1) + 1e-3 i over ranks q, i = r count + j
        EXPECT_NEAR(out[r][j], 0.35f + 1e-3f * static_cast<float>(r * count + j), 1e-4f) << "rank " << r << " " << j;
      }
    }
    if (run == 0) first = out;
    EXPECT_EQ(out, first) << "run " << run;
  }
}

// Long fat paths (communicator.cc): every FIFO deeper than two slots and chunks of several slices per ring loop.
// Counts span part of a chunk, whole loops and loops plus a remainder; every rank count, in place and not.
TEST(AllReduceRing, ChunksOfSeveralSlicesOnDeepFifos) {
  size_t index = 0;
  for (int n : kSweepRanks) {
    for (DataType type : {DataType::Float32, DataType::Int32}) {
      for (RedOpKind op : {RedOpKind::Sum, RedOpKind::Max}) {
        for (size_t count : {size_t{1}, size_t{97}, size_t{193 * static_cast<size_t>(n)}, size_t{5 * 192 * 3 + 11}}) {
          for (bool inPlace : {false, true}) {
            CollCase c;
            c.nRanks = n;
            c.count = count;
            c.type = type;
            c.op = op;
            c.inPlace = inPlace;
            c.geometry = {256, 4};
            c.ringChunkSlices = 3;
            c.misalign = (index++ % 3) * 4;
            runCase(c);
            if (::testing::Test::HasFailure()) return;
          }
        }
      }
    }
  }
}

TEST(AllReduceRing, LargeMessageThroughTwoSlotFifos) {
  for (int n : {3, 8}) {
    CollCase c;
    c.nRanks = n;
    c.count = 100'003;
    c.op = RedOpKind::Sum;
    c.misalign = 4;
    runCase(c);
  }
}

TEST(AllReduceRecDouble, RefusesMessagesLargerThanOneSlice) {
  LoopbackWorld world(3, {256, 2});
  std::vector<float> buf(65, 1.0f);
  coll::CollArgs args;
  args.sendbuff = args.recvbuff = buf.data();
  args.count = buf.size();
  args.op = ReduceOp::builtin(DataType::Float32, RedOpKind::Sum, 3);
  const std::vector<Status> st = world.runRanks(
      [&](int, prims::Prims& prims) { return coll::runCollective(args, coll::Plan{Algorithm::RecDouble}, prims); });
  for (const Status& s : st) {
    EXPECT_EQ(s.code(), Errc::InvalidUsage);
    EXPECT_NE(s.message().find("ring"), std::string::npos) << s.message();
  }
}

// The same configuration gives the same bits from run to run, also where rounding makes the order matter.
TEST(AllReduce, FloatAverageIsReproducibleAcrossRuns) {
  for (Algorithm algorithm : {Algorithm::Ring, Algorithm::RecDouble, Algorithm::Exchange}) {
    const int n = algorithm == Algorithm::Exchange ? 8 : 7;
    const size_t count = algorithm == Algorithm::Ring ? 1000 : 64;
    std::vector<std::vector<float>> first;
    for (int run = 0; run < 3; ++run) {
      LoopbackWorld world(n, {256, 2});
      std::vector<std::vector<float>> in(n), out(n, std::vector<float>(count));
      std::vector<coll::CollArgs> args(n);
      for (int r = 0; r < n; ++r) {
        for (size_t i = 0; i < count; ++i) in[r].push_back(0.1f * static_cast<float>(r + 1) + 1e-3f * i);
        args[r].sendbuff = in[r].data();
        args[r].recvbuff = out[r].data();
        args[r].count = count;
        args[r].op = ReduceOp::builtin(DataType::Float32, RedOpKind::Avg, n);
      }
      for (const Status& s : world.runRanks(
               [&](int r, prims::Prims&prims) { return coll::runCollective(args[r], coll::Plan{algorithm}, prims); })) {
        ASSERT_TRUE(s.ok()) << s.message();
      }
      for (int r = 0; r < n; ++r) ASSERT_EQ(out[r], out[0]) << "rank " << r;
      if (run == 0) first = out;
      EXPECT_EQ(out[0], first[0]) << "run " << run << " of " << coll::algorithmName(algorithm);
    }
  }
}

// Where operand order shows in the bits (NaN payloads, signed zeros under max and min), every rank must still
// hold the same bytes.
TEST(AllReduce, RanksAgreeBitwiseOnNanPayloadsAndSignedZeros) {
  for (Algorithm algorithm : {Algorithm::Ring, Algorithm::RecDouble, Algorithm::Exchange}) {
    for (RedOpKind op : {RedOpKind::Sum, RedOpKind::Max, RedOpKind::Min}) {
      for (int n : {2, 3, 4, 6, 8}) {
        if (algorithm == Algorithm::Exchange && (n & (n - 1)) != 0) continue;
        const size_t count = 16;
        LoopbackWorld world(n, {256, 2});
        std::vector<std::vector<uint32_t>> in(n), out(n, std::vector<uint32_t>(count));
        std::vector<coll::CollArgs> args(n);
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count; ++i) {
            const uint32_t nan = 0x7FC00000u | static_cast<uint32_t>(r * 16 + i + 1);
            const uint32_t zero = (r + i) % 2 ? 0x80000000u : 0u;
            in[r].push_back(i % 2 ? nan : zero);
          }
          args[r].sendbuff = in[r].data();
          args[r].recvbuff = out[r].data();
          args[r].count = count;
          args[r].op = ReduceOp::builtin(DataType::Float32, op, n);
        }
        for (const Status& s : world.runRanks([&](int r, prims::Prims&prims) {
               return coll::runCollective(args[r], coll::Plan{algorithm}, prims);
             })) {
          ASSERT_TRUE(s.ok()) << s.message();
        }
        for (int r = 1; r < n; ++r) {
          EXPECT_EQ(out[r], out[0]) << coll::algorithmName(algorithm) << " " << redOpName(op) << " n=" << n << " rank "
                                    << r;
        }
      }
    }
  }
}

}  // namespace
}  // namespace cfx::testing
