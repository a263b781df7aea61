// SPDX-License-Identifier: Apache-2.0
// Compressed collectives through the public API, one process per rank over shared memory and over TCP: bit-identical
// results on every rank and from run to run, within the codec's bound; the wire bytes the statistics report; the
// default codec on the nccl* calls; error feedback kept by the library; and every kind of bad input refused by name,
// on every rank, without a hang.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "conflux.h"
#include "multiproc.h"
#include "nccl.h"

namespace {

using cfx::itest::RankContext;
using cfx::itest::RunOptions;
using cfx::itest::runRanks;

std::vector<float> input(int rank, size_t n, uint32_t salt) {
  std::mt19937 rng(1000u * salt + static_cast<uint32_t>(rank));
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::string bytesOf(const std::vector<float>& v) { return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4); }

cfxCodec codec(const char* text, int mode = cfxCompressAlways) {
  cfxCodec c;
  EXPECT_EQ(cfxCodecParse(text, &c), ncclSuccess) << text;
  c.mode = mode;
  return c;
}

void compressedAllReduceAcross(int nRanks, const RunOptions& options) {
  const size_t count = 1000003;
  const auto result = runRanks(nRanks, options, [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const std::vector<float> in = input(ctx.rank(), count, 1);
    std::vector<float> out(count), again(count);
    const cfxCodec int8 = codec("int8");
    ASSERT_EQ(cfxAllReduceCompressed(in.data(), out.data(), count, ncclFloat, ncclSum, &int8, comm, nullptr), ncclSuccess)
        << ncclGetLastError(comm);
    cfxCompressStats stats;
    ASSERT_EQ(cfxCommGetCompressStats(comm, &stats), ncclSuccess);
    EXPECT_EQ(stats.compressed, 1);
    EXPECT_STREQ(stats.algorithm, "QuantOnce");
    // Quantise-once sends (n - 1) / n of the buffer twice, at about a quarter of its bytes.
    const double plainBytes = 2.0 * (nRanks - 1) / nRanks * count * 4;
    EXPECT_LT(static_cast<double>(stats.wireBytes), 0.27 * plainBytes) << stats.wireBytes;
    EXPECT_GT(static_cast<double>(stats.wireBytes), 0.24 * plainBytes) << stats.wireBytes;
    ASSERT_EQ(cfxAllReduceCompressed(in.data(), again.data(), count, ncclFloat, ncclSum, &int8, comm, nullptr), ncclSuccess);
    EXPECT_EQ(out, again) << "the same bits from run to run";
    ctx.report("result", bytesOf(out));
    ncclCommDestroy(comm);
  });
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result.allReportsEqual("result")) << "every rank holds the same bits";
  // Against the exact sum, checked once here rather than on every rank: each contribution's encoding and the
  // result's are within half a step, a step being the block's absmax / 127.
  const std::string& got = result.report(0, "result");
  std::vector<float> out(count);
  std::memcpy(out.data(), got.data(), got.size());
  std::vector<std::vector<float>> ins;
  for (int r = 0; r < nRanks; ++r) ins.push_back(input(r, count, 1));
  for (size_t b = 0; b < count; b += 256) {
    const size_t e = std::min(count, b + 256);
    double bound = 0;
    double sumAbsmax = 0;
    for (int r = 0; r < nRanks; ++r) {
      double m = 0;
      for (size_t i = b; i < e; ++i) m = std::max(m, std::fabs(static_cast<double>(ins[static_cast<size_t>(r)][i])));
      sumAbsmax += m;
      bound += m / 254.0;
    }
    bound += sumAbsmax / 254.0;  // the result's block absmax is at most the sum of the contributions'
    for (size_t i = b; i < e; ++i) {
      double exact = 0;
      for (int r = 0; r < nRanks; ++r) exact += ins[static_cast<size_t>(r)][i];
      ASSERT_LE(std::fabs(out[i] - exact), bound * 1.001 + 1e-6) << "element " << i;
    }
  }
}

TEST(Compress, QuantOnceAllReduceOverSharedMemoryIsBitIdenticalAndWithinBound) {
  compressedAllReduceAcross(4, RunOptions{});
}

TEST(Compress, QuantOnceAllReduceOverTcpIsBitIdenticalAndWithinBound) {
  RunOptions o;
  o.env = {{"NCCL_SHM_DISABLE", "1"}, {"NCCL_SOCKET_IFNAME", "lo"}};
  compressedAllReduceAcross(3, o);
}

// The other collectives, top-k, the default codec, library feedback and the error measurement, on 3 ranks.
TEST(Compress, EveryCompressedCallAndTheDefaultCodec) {
  const size_t count = 4099;
  const auto result = runRanks(3, [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const int me = ctx.rank();
    const std::vector<float> in = input(me, 3 * count, 2);
    std::vector<float> rs(count), ag(3 * count), bc(3 * count), ar(count);
    const cfxCodec mx = codec("mxfp8");
    ASSERT_EQ(cfxReduceScatterCompressed(in.data(), rs.data(), count, ncclFloat, ncclAvg, &mx, comm, nullptr), ncclSuccess);
    ASSERT_EQ(cfxAllGatherCompressed(in.data(), ag.data(), count, ncclFloat, &mx, comm, nullptr), ncclSuccess);
    if (me == 1) bc = in;
    ASSERT_EQ(cfxBroadcastCompressed(bc.data(), bc.data(), 3 * count, ncclFloat, 1, &mx, comm, nullptr), ncclSuccess);
    ctx.report("ag", bytesOf(ag));
    ctx.report("bc", bytesOf(bc));
    std::vector<std::vector<float>> all;
    for (int r = 0; r < 3; ++r) all.push_back(input(r, 3 * count, 2));
    for (size_t i = 0; i < count; ++i) {
      double mean = 0;
      for (int r = 0; r < 3; ++r) mean += all[static_cast<size_t>(r)][static_cast<size_t>(me) * count + i] / 3.0;
      ASSERT_NEAR(rs[i], mean, 0.1 * (1 + std::fabs(mean))) << i;
    }
    // Top-k with the library's error feedback: what was not sent is sent later, so two calls carry more.
    cfxCodec topk = codec("topk:0.01:values=fp32");
    topk.feedback = cfxFeedbackLibrary;
    topk.measureError = 1;
    ASSERT_EQ(cfxAllReduceCompressed(in.data(), ar.data(), count, ncclFloat, ncclSum, &topk, comm, nullptr), ncclSuccess);
    cfxCompressStats stats;
    ASSERT_EQ(cfxCommGetCompressStats(comm, &stats), ncclSuccess);
    EXPECT_STREQ(stats.algorithm, "SparseGather");
    EXPECT_GT(stats.relL2Error, 0.5) << "1 % of the entries carries little of the sum";
    EXPECT_LT(stats.relL2Error, 1.0);
    ctx.report("topk", bytesOf(ar));
    EXPECT_EQ(cfxCommFreeFeedback(comm, in.data()), ncclSuccess);
    // The default codec: float sums compress, integers and max stay exact.
    cfxCodec def = codec("int8");
    ASSERT_EQ(cfxCommSetCodec(comm, &def), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(in.data(), ar.data(), count, ncclFloat, ncclSum, comm, nullptr), ncclSuccess);
    ASSERT_EQ(cfxCommGetCompressStats(comm, &stats), ncclSuccess);
    EXPECT_EQ(stats.compressed, 1);
    EXPECT_STREQ(stats.codec, "int8:block=256");
    std::vector<int> ints(count, me + 1), intsOut(count);
    ASSERT_EQ(ncclAllReduce(ints.data(), intsOut.data(), count, ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
    for (int v : intsOut) ASSERT_EQ(v, 6);
    ASSERT_EQ(cfxCommSetCodec(comm, nullptr), ncclSuccess);
    ncclCommDestroy(comm);
  });
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result.allReportsEqual("ag"));
  EXPECT_TRUE(result.allReportsEqual("bc"));
  EXPECT_TRUE(result.allReportsEqual("topk"));
}

TEST(Compress, NaNAndInfinityBecomeNaNNeverAFiniteValue) {
  const auto result = runRanks(2, [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    std::vector<float> in(1000, 1.0f), out(1000);
    if (ctx.rank() == 0) in[7] = std::numeric_limits<float>::quiet_NaN();
    if (ctx.rank() == 1) in[500] = std::numeric_limits<float>::infinity();
    const cfxCodec int8 = codec("int8");
    ASSERT_EQ(cfxAllReduceCompressed(in.data(), out.data(), 1000, ncclFloat, ncclSum, &int8, comm, nullptr), ncclSuccess);
    EXPECT_TRUE(std::isnan(out[7]));
    EXPECT_TRUE(std::isnan(out[500]));
    EXPECT_FLOAT_EQ(out[0], 2.0f);
    ncclCommDestroy(comm);
  });
  ASSERT_TRUE(result.ok());
}

TEST(Compress, BadCodecsAreRefusedByNameOnEveryRank) {
  const auto result = runRanks(2, [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    std::vector<float> f(512, 1.0f), g(512);
    std::vector<int> i(512, 1), j(512);
    auto refused = [&](ncclResult_t got, ncclResult_t want, const char* word) {
      EXPECT_EQ(got, want);
      EXPECT_NE(std::string(ncclGetLastError(comm)).find(word), std::string::npos) << ncclGetLastError(comm);
    };
    cfxCodec c = codec("int8");
    c.format = 42;
    refused(cfxAllReduceCompressed(f.data(), g.data(), 512, ncclFloat, ncclSum, &c, comm, nullptr), ncclInvalidArgument, "format");
    c = codec("int8:block=1048576");
    refused(cfxAllReduceCompressed(f.data(), g.data(), 512, ncclFloat, ncclSum, &c, comm, nullptr), ncclInvalidArgument, "fit");
    c = codec("int8");
    refused(cfxAllReduceCompressed(i.data(), j.data(), 512, ncclInt32, ncclSum, &c, comm, nullptr), ncclInvalidArgument, "int32");
    refused(cfxAllReduceCompressed(f.data(), g.data(), 512, ncclFloat, ncclMax, &c, comm, nullptr), ncclInvalidArgument, "ncclSum");
    c.feedback = cfxFeedbackCaller;
    refused(cfxAllReduceCompressed(f.data(), g.data(), 512, ncclFloat, ncclSum, &c, comm, nullptr), ncclInvalidArgument, "residual");
    c = codec("fp16:sr");  // fp16 has no stochastic rounding
    c.rounding = cfxRoundStochastic;
    refused(cfxAllReduceCompressed(f.data(), g.data(), 512, ncclFloat, ncclSum, &c, comm, nullptr), ncclInvalidArgument, "stochastic");
    EXPECT_EQ(cfxCodecParse("int9", &c), ncclInvalidArgument);
    // The communicator still works after every refusal.
    c = codec("bf16");
    EXPECT_EQ(cfxAllReduceCompressed(f.data(), g.data(), 512, ncclFloat, ncclSum, &c, comm, nullptr), ncclSuccess);
    EXPECT_FLOAT_EQ(g[0], 2.0f);
    ncclCommDestroy(comm);
  });
  ASSERT_TRUE(result.ok());
}

// Ranks that disagree on the codec fail with a named mismatch instead of decoding garbage or hanging.
TEST(Compress, RanksDisagreeingOnTheCodecFailByName) {
  RunOptions o;
  o.env = {{"CFX_TIMEOUT_MS", "10000"}};
  const auto result = runRanks(2, o, [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    std::vector<float> f(4096, 1.0f), g(4096);
    const cfxCodec c = codec(ctx.rank() == 0 ? "int8" : "int8:block=128");
    const ncclResult_t st = cfxAllReduceCompressed(f.data(), g.data(), 4096, ncclFloat, ncclSum, &c, comm, nullptr);
    EXPECT_NE(st, ncclSuccess);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("codec"), std::string::npos) << ncclGetLastError(comm);
    ncclCommAbort(comm);
  });
  ASSERT_TRUE(result.ok());
}

// Delta broadcast: exact after 100 random sparse edits (one of them to every element), sending only the changes;
// a rank that forgot its state gets the whole buffer, and everyone is still exact.
TEST(Compress, DeltaBroadcastIsExactAfterEveryEditAndSendsOnlyTheChanges) {
  const size_t count = 50000;
  const auto result = runRanks(3, [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const int root = 1;
    std::mt19937 rng(77);  // the same stream on every rank: every rank knows the root's edits
    std::vector<float> state(count);
    for (float& v : state) v = static_cast<float>(rng() % 1000);
    std::vector<float> recv(count, -1.0f);
    for (int edit = 0; edit < 100; ++edit) {
      const bool everything = edit == 50;
      const size_t edits = everything ? count : 1 + rng() % (count / 100);
      for (size_t e = 0; e < edits; ++e) {
        const size_t i = everything ? e : rng() % count;
        state[i] = static_cast<float>(rng() % 100000) * 0.5f;
      }
      if (edit == 70 && ctx.rank() == 2) {
        ASSERT_EQ(cfxCommResetDelta(comm, recv.data()), ncclSuccess);
      }
      const void* send = ctx.rank() == root ? state.data() : nullptr;
      ASSERT_EQ(cfxBroadcastDelta(send, recv.data(), count, ncclFloat, root, comm, nullptr), ncclSuccess)
          << ncclGetLastError(comm);
      ASSERT_EQ(0, std::memcmp(recv.data(), state.data(), count * 4)) << "edit " << edit;
      cfxCompressStats stats;
      ASSERT_EQ(cfxCommGetCompressStats(comm, &stats), ncclSuccess);
      if (edit == 0 || everything || edit == 70) {
        EXPECT_STREQ(stats.codec, "delta:full") << "edit " << edit;
      } else {
        EXPECT_STREQ(stats.codec, "delta:indices") << "edit " << edit;
        // The root sends the changes (at most 1 % of the elements, 8 bytes each) and a few small messages.
        if (ctx.rank() == root) {
          EXPECT_LT(stats.wireBytes, count * 4 / 25) << "edit " << edit;
        }
      }
    }
    ncclCommDestroy(comm);
  });
  ASSERT_TRUE(result.ok());
}

}  // namespace
