// SPDX-License-Identifier: Apache-2.0
// Self-tests of the integration harness: the fork launcher's failure, crash and timeout reporting, and the
// element codecs the sweep builds its expected values with. No library calls.
#include "integration/dtypes.h"
#include "integration/multiproc.h"
#include "integration/sweep_model.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <thread>

namespace cfx::itest {
namespace {

RunOptions judgeMyself(std::chrono::milliseconds timeout = 20s) {
  RunOptions o;
  o.failOnChildError = false;
  o.timeout = timeout;
  return o;
}

TEST(LauncherTest, PassingRanksReportTheirBlobs) {
  const RunResult r = runRanks(4, [](RankContext& ctx) {
    EXPECT_TRUE(ctx.barrier());
    const auto all = ctx.allGather(std::to_string(ctx.rank() * 10));
    ASSERT_EQ(all.size(), 4u);
    EXPECT_EQ(all[3], "30");
    EXPECT_EQ(ctx.broadcast(2, ctx.rank() == 2 ? "from two" : ""), "from two");
    ctx.report("same", "abc");
    ctx.report("rank", std::to_string(ctx.rank()));
  });
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.allReportsEqual("same"));
  EXPECT_FALSE(r.allReportsEqual("rank"));
  EXPECT_EQ(r.report(3, "rank"), "3");
}

TEST(LauncherTest, ChildExpectationFailuresAreAttributedToTheirRank) {
  const RunResult r = runRanks(3, judgeMyself(), [](RankContext& ctx) {
    if (ctx.rank() == 1) {
      std::printf("(rank 1 now fails on purpose; the failure below belongs to the harness self-test)\n");
      EXPECT_EQ(1 + 1, 3) << "deliberate";
    }
  });
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.ranks[0].ok());
  EXPECT_TRUE(r.ranks[2].ok());
  ASSERT_EQ(r.ranks[1].failures.size(), 1u);
  EXPECT_NE(r.ranks[1].failures[0].find("deliberate"), std::string::npos);
  EXPECT_EQ(r.ranks[1].exitCode, 1);
  EXPECT_NE(r.ranks[1].describe().find("rank 1"), std::string::npos);
}

TEST(LauncherTest, CrashesAreReportedWithTheSignal) {
  const RunResult r = runRanks(2, judgeMyself(), [](RankContext& ctx) {
    if (ctx.rank() == 0) ::raise(SIGABRT);
  });
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.terminationSignal(0), SIGABRT);
  EXPECT_TRUE(r.ranks[1].ok());
}

TEST(LauncherTest, AnnouncedDeathIsNotAFailure) {
  const RunResult r = runRanks(2, judgeMyself(), [](RankContext& ctx) {
    if (ctx.rank() == 1) ctx.killSelf(SIGKILL);
  });
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.terminationSignal(1), SIGKILL);
}

TEST(LauncherTest, HungRanksAreKilledAtTheTimeoutAndNamed) {
  const auto start = std::chrono::steady_clock::now();
  const RunResult r = runRanks(3, judgeMyself(1500ms), [](RankContext& ctx) {
    ctx.note("sleeping forever");
    if (ctx.rank() != 0) {
      for (;;) ::pause();
    }
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
  EXPECT_TRUE(r.timedOut);
  EXPECT_FALSE(r.ranks[0].timedOut);
  EXPECT_TRUE(r.ranks[1].timedOut);
  EXPECT_TRUE(r.ranks[2].timedOut);
  EXPECT_EQ(r.ranks[2].lastNote, "sleeping forever");
}

TEST(LauncherTest, BarrierFailsInsteadOfHangingWhenAPeerIsGone) {
  const RunResult r = runRanks(3, judgeMyself(), [](RankContext& ctx) {
    if (ctx.rank() == 2) ::_exit(0);
    const bool ok = ctx.barrier();
    ctx.report("barrier", ok ? "ok" : "broken");
  });
  EXPECT_EQ(r.report(0, "barrier"), "broken");
  EXPECT_EQ(r.report(1, "barrier"), "broken");
}

#if defined(__SANITIZE_THREAD__)
volatile int gRacy = 0;  // volatile: the racing stores must not be optimized away

TEST(LauncherTest, SanitizerReportsInAChildFailTheRank) {
  const RunResult r = runRanks(1, judgeMyself(), [](RankContext&) {
    std::printf("(a deliberate data race follows; the report belongs to the harness self-test)\n");
    std::thread t([] { gRacy = 1; });
    gRacy = 2;
    t.join();
  });
  ASSERT_FALSE(r.ranks[0].failures.empty());
  EXPECT_NE(r.ranks[0].failures[0].find("ThreadSanitizer"), std::string::npos) << r.ranks[0].failures[0];
  EXPECT_EQ(r.ranks[0].exitCode, 1);
}
#endif

TEST(DtypeCodecTest, KnownEncodings) {
  EXPECT_EQ(encodeValue(dtypeInfo(ncclFloat16), 1.0), 0x3c00u);
  EXPECT_EQ(encodeValue(dtypeInfo(ncclFloat16), -2.0), 0xc000u);
  EXPECT_EQ(encodeValue(dtypeInfo(ncclFloat16), 65504.0), 0x7bffu);
  EXPECT_EQ(encodeValue(dtypeInfo(ncclFloat16), std::ldexp(1.0, -24)), 0x0001u);
  EXPECT_EQ(encodeValue(dtypeInfo(ncclBfloat16), 1.0), 0x3f80u);
  EXPECT_EQ(encodeValue(dtypeInfo(ncclBfloat16), 3.0), 0x4040u);
  EXPECT_EQ(encodeValue(dtypeInfo(ncclFloat8e4m3), 1.0), 0x38u);
  EXPECT_EQ(encodeValue(dtypeInfo(ncclFloat8e4m3), 448.0), 0x7eu);
  EXPECT_EQ(encodeValue(dtypeInfo(ncclFloat8e4m3), -0.5), 0xb0u);
  EXPECT_EQ(encodeValue(dtypeInfo(ncclFloat8e4m3), std::ldexp(1.0, -9)), 0x01u);
  EXPECT_EQ(encodeValue(dtypeInfo(ncclFloat8e5m2), 1.0), 0x3cu);
  EXPECT_EQ(encodeValue(dtypeInfo(ncclFloat8e5m2), 57344.0), 0x7bu);
  EXPECT_EQ(encodeValue(dtypeInfo(ncclFloat8e5m2), std::ldexp(1.0, -16)), 0x01u);
  EXPECT_EQ(encodeValue(dtypeInfo(ncclInt8), -1.0), 0xffu);
  EXPECT_EQ(encodeValue(dtypeInfo(ncclInt64), -2.0), 0xfffffffffffffffeULL);
  EXPECT_EQ(encodeValue(dtypeInfo(ncclFloat32), 1.5), 0x3fc00000u);
}

TEST(DtypeCodecTest, SmallIntegersRoundTripExactly) {
  for (const auto& dt : allDtypes()) {
    const int limit = dt.type == ncclFloat8e5m2 ? 8 : dt.type == ncclFloat8e4m3 ? 16 : 100;
    for (int v = dt.kind == Kind::Unsigned ? 0 : -limit; v <= limit; ++v) {
      EXPECT_EQ(decodeValue(dt, encodeValue(dt, v)), v) << dt.name;
    }
  }
  EXPECT_TRUE(std::isnan(decodeValue(dtypeInfo(ncclFloat8e4m3), 0x7f)));
  EXPECT_TRUE(std::isinf(decodeValue(dtypeInfo(ncclFloat8e5m2), 0x7c)));
}

TEST(SweepModelTest, EveryPartialResultIsExactForEightRanks) {
  // The input bounds keep every partial result (ranks 0..r) representable, and the expected value is exact.
  for (const auto& dt : allDtypes()) {
    for (Op op : {Op::Sum, Op::Prod, Op::Max, Op::Min, Op::PreMulSum}) {
      const ValueModel model(dt, op, 8);
      for (size_t i = 0; i < 4099; ++i) {
        double acc = decodeValue(dt, model.input(0, i));
        for (int r = 1; r < 8; ++r) {
          const double x = decodeValue(dt, model.input(r, i));
          acc = op == Op::Prod ? acc * x : op == Op::Max ? std::max(acc, x) : op == Op::Min ? std::min(acc, x) : acc + x;
          const double scaled = op == Op::PreMulSum ? acc * preMulScalar(dt) : acc;
          ASSERT_EQ(decodeValue(dt, encodeValue(dt, scaled)), scaled) << dt.name << " partial over " << r + 1;
        }
        if (op == Op::PreMulSum) acc *= preMulScalar(dt);
        ASSERT_EQ(decodeValue(dt, model.expectedReduction(i)), acc) << dt.name << " " << opName(op) << " " << i;
      }
    }
  }
}

}  // namespace
}  // namespace cfx::itest
