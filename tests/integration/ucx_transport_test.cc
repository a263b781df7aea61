// SPDX-License-Identifier: Apache-2.0
// The UCX transport through the public C API (integration layer): every rank pair talks UCX (NCCL_NET=UCX with
// NCCL_SHM_DISABLE=1), over UCX's tcp and over its shared-memory transports (sm, cma), with collectives at odd
// counts and several datatypes, grouped send/recv, a killed peer, and how the transport is selected.
#include "integration/multiproc.h"
#include "integration/nccl_checks.h"

#include <gtest/gtest.h>
#include <nccl.h>

#include <csignal>
#include <cstdlib>
#include <cstdint>
#include <string>
#include <vector>

namespace cfx::itest {
namespace {

struct Tls {
  const char* name;
  const char* value;  // UCX_TLS; the names are UCX 1.13's (ucx_info -d lists them)
  // CFX_UCX_EAGER: auto sends slots eagerly on this host (no RDMA device); 0 keeps UCX's rendezvous above its
  // threshold (8 KiB here), the path RDMA fabrics take.
  const char* eager = "auto";
};
void PrintTo(const Tls& t, std::ostream* os) { *os << t.name; }

std::vector<std::pair<std::string, std::string>> ucxEnv(const char* tls, const char* eager = "auto") {
  return {{"NCCL_NET", "UCX"}, {"NCCL_SHM_DISABLE", "1"}, {"UCX_TLS", tls}, {"CFX_UCX_EAGER", eager}};
}

RunOptions ucxOptions(const Tls& tls) {
  RunOptions o;
  o.timeout = std::chrono::seconds(90);
  o.env = ucxEnv(tls.value, tls.eager);
  return o;
}

// UCX patches mmap/munmap when its library loads, for its RDMA registration cache; under ThreadSanitizer, whose
// interceptors own those calls, that crashes in ucp_init. UCX_MEM_EVENTS=no turns the hooks off, but only when it
// is in the environment the process started with (setting it in a forked rank is too late).
#if defined(__SANITIZE_THREAD__)
constexpr bool kUnderTsan = true;
#else
constexpr bool kUnderTsan = false;
#endif

bool ucxUsableHere(std::string* why) {
#if !CFX_TEST_HAVE_UCX
  *why = "built without UCX (CFX_WITH_UCX found no ucx): the UCX transport is not in this library";
  return false;
#else
  const char* memEvents = std::getenv("UCX_MEM_EVENTS");
  if (kUnderTsan && (memEvents == nullptr || std::string(memEvents) != "no")) {
    *why = "ThreadSanitizer build: run with UCX_MEM_EVENTS=no in the environment (UCX's memory hooks crash under TSan)";
    return false;
  }
  return true;
#endif
}

class UcxTransportTest : public ::testing::TestWithParam<Tls> {
 protected:
  void SetUp() override {
    std::string why;
    if (!ucxUsableHere(&why)) GTEST_SKIP() << why;
  }
};

// All-reduce (int32 sum, float max), broadcast (uint8 from rank 1), all-gather (int64), reduce-scatter (double
// sum) and reduce (int32 sum to the last rank), at counts that straddle the slot size. Closed-form results.
TEST_P(UcxTransportTest, CollectivesAtOddCountsMatchClosedForm) {
  runRanks(3, ucxOptions(GetParam()), [](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const int me = ctx.rank(), n = ctx.nRanks();
    for (size_t count : {size_t{1}, size_t{7}, size_t{1021}, size_t{65537}, size_t{300007}}) {
      SCOPED_TRACE("count " + std::to_string(count));
      std::vector<int32_t> si(count), ri(count, -1);
      for (size_t i = 0; i < count; ++i) si[i] = (me + 1) * static_cast<int32_t>(i % 1000 + 1);
      ASSERT_TRUE(succeeded(ncclAllReduce(si.data(), ri.data(), count, ncclInt32, ncclSum, comm, nullptr)));
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(ri[i], 6 * static_cast<int32_t>(i % 1000 + 1)) << i;

      std::vector<float> sf(count), rf(count, -1.0f);
      for (size_t i = 0; i < count; ++i) sf[i] = static_cast<float>((static_cast<int>(i) + me) % n) + 0.5f;
      ASSERT_TRUE(succeeded(ncclAllReduce(sf.data(), rf.data(), count, ncclFloat, ncclMax, comm, nullptr)));
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(rf[i], static_cast<float>(n - 1) + 0.5f) << i;

      std::vector<uint8_t> b(count);
      for (size_t i = 0; i < count; ++i) b[i] = me == 1 ? static_cast<uint8_t>(i * 31 + 7) : 0;
      ASSERT_TRUE(succeeded(ncclBroadcast(b.data(), b.data(), count, ncclUint8, 1, comm, nullptr)));
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(b[i], static_cast<uint8_t>(i * 31 + 7)) << i;

      std::vector<int64_t> g(count), ga(count * n, -1);
      for (size_t i = 0; i < count; ++i) g[i] = (int64_t{me} << 40) + static_cast<int64_t>(i);
      ASSERT_TRUE(succeeded(ncclAllGather(g.data(), ga.data(), count, ncclInt64, comm, nullptr)));
      for (int r = 0; r < n; ++r) {
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(ga[r * count + i], (int64_t{r} << 40) + static_cast<int64_t>(i));
      }

      std::vector<double> rs(count * n), rr(count, -1.0);
      for (size_t i = 0; i < rs.size(); ++i) rs[i] = static_cast<double>(i % 4096) + me * 0.25;
      ASSERT_TRUE(succeeded(ncclReduceScatter(rs.data(), rr.data(), count, ncclFloat64, ncclSum, comm, nullptr)));
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(rr[i], 3.0 * static_cast<double>((me * count + i) % 4096) + 0.75) << i;
      }

      std::vector<int32_t> red(count, -1);
      ASSERT_TRUE(succeeded(ncclReduce(si.data(), red.data(), count, ncclInt32, ncclSum, n - 1, comm, nullptr)));
      if (me == n - 1) {
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(red[i], 6 * static_cast<int32_t>(i % 1000 + 1)) << i;
      }
    }
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

// Two ranks on this 2-CPU machine fit its CPUs, so their owners run the worker's progress themselves between the
// proxy's rounds (ucx_proxy.h, "Inline progress"; the 3-rank tests here leave it to the proxies). Back-to-back
// all-reduces of short and long messages make owner and proxy take the worker from each other mid-transfer.
TEST_P(UcxTransportTest, TwoRanksPollingInlineGetClosedFormResults) {
  runRanks(2, ucxOptions(GetParam()), [](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const int me = ctx.rank();
    const size_t counts[] = {1, 7, 1021, 16411, 65537, 300007};
    for (int round = 0; round < 60; ++round) {
      const size_t count = counts[static_cast<size_t>(round) % std::size(counts)];
      SCOPED_TRACE("round " + std::to_string(round) + ", count " + std::to_string(count));
      std::vector<int32_t> s(count), r(count, -1);
      for (size_t i = 0; i < count; ++i) s[i] = (me + 1) * static_cast<int32_t>(i % 977 + static_cast<size_t>(round));
      ASSERT_TRUE(succeeded(ncclAllReduce(s.data(), r.data(), count, ncclInt32, ncclSum, comm, nullptr)));
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(r[i], 3 * static_cast<int32_t>(i % 977 + static_cast<size_t>(round))) << i;
      }
    }
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

// Every rank sends to and receives from every other rank in one group, two messages per pair, which must match
// in call order; the p2p channel and a collective run back to back on the same endpoints.
TEST_P(UcxTransportTest, GroupedSendRecvBetweenAllPairs) {
  runRanks(3, ucxOptions(GetParam()), [](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const int me = ctx.rank(), n = ctx.nRanks();
    auto value = [](int from, int to, size_t i, int which) {
      return static_cast<int32_t>(from * 1000003 + to * 1009 + which * 77 + static_cast<int>(i % 1013));
    };
    for (size_t count : {size_t{3}, size_t{70001}}) {
      std::vector<std::vector<int32_t>> s1(n), s2(n), r1(n), r2(n);
      ASSERT_TRUE(succeeded(ncclGroupStart()));
      for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        s1[p].resize(count);
        s2[p].resize(count + 5);
        r1[p].assign(count, -1);
        r2[p].assign(count + 5, -1);
        for (size_t i = 0; i < s1[p].size(); ++i) s1[p][i] = value(me, p, i, 1);
        for (size_t i = 0; i < s2[p].size(); ++i) s2[p][i] = value(me, p, i, 2);
        EXPECT_TRUE(succeeded(ncclSend(s1[p].data(), s1[p].size(), ncclInt32, p, comm, nullptr)));
        EXPECT_TRUE(succeeded(ncclRecv(r1[p].data(), r1[p].size(), ncclInt32, p, comm, nullptr)));
        EXPECT_TRUE(succeeded(ncclSend(s2[p].data(), s2[p].size(), ncclInt32, p, comm, nullptr)));
        EXPECT_TRUE(succeeded(ncclRecv(r2[p].data(), r2[p].size(), ncclInt32, p, comm, nullptr)));
      }
      ASSERT_TRUE(succeeded(ncclGroupEnd()));
      for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(r1[p][i], value(p, me, i, 1)) << "from " << p << " i " << i;
        for (size_t i = 0; i < count + 5; ++i) ASSERT_EQ(r2[p][i], value(p, me, i, 2)) << "from " << p << " i " << i;
      }
      expectAllReduceSum(comm, me + 1, 6);
    }
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

// A rank SIGKILLed between all-reduces: every survivor's next all-reduce fails with a RemoteError well before
// CFX_TIMEOUT_MS, and ncclCommAbort then returns. A survivor blocked on the victim names it (the endpoint's error
// handler over tcp, the process probe over shared memory); one blocked on another survivor may name that
// survivor instead, which failed and left first, so the victim must be named by at least one survivor.
TEST_P(UcxTransportTest, KilledPeerGivesANamedErrorNotAHang) {
  constexpr int kVictim = 2;
  RunOptions o = ucxOptions(GetParam());
  o.failOnChildError = false;
  o.env.emplace_back("CFX_TIMEOUT_MS", "30000");
  const RunResult result = runRanks(3, o, [](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    expectAllReduceSum(comm, ctx.rank() + 1, 6, 100003);
    ASSERT_TRUE(ctx.barrier());
    if (ctx.rank() == kVictim) ctx.killSelf(SIGKILL);
    std::vector<float> send(1 << 20, 1.0f), recv(1 << 20);
    const auto start = std::chrono::steady_clock::now();
    ncclResult_t rc = ncclAllReduce(send.data(), recv.data(), send.size(), ncclFloat, ncclSum, comm, nullptr);
    if (rc == ncclSuccess) rc = ncclAllReduce(send.data(), recv.data(), send.size(), ncclFloat, ncclSum, comm, nullptr);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
    const char* last = ncclGetLastError(comm);
    const std::string text = last ? last : "";
    EXPECT_EQ(rc, ncclRemoteError) << resultName(rc) << ": " << text;
    EXPECT_LT(ms, 20000) << "the failure took " << ms << " ms to surface: " << text;
    std::printf("[rank %d] %s after %lld ms: %s\n", ctx.rank(), resultName(rc), static_cast<long long>(ms),
                text.c_str());
    ctx.report("text", text);
    EXPECT_TRUE(succeeded(ncclCommAbort(comm)));
  });
  int named = 0;
  for (const RankOutcome& r : result.ranks) {
    if (r.rank == kVictim) {
      EXPECT_EQ(r.termSignal, SIGKILL) << r.describe();
      continue;
    }
    EXPECT_TRUE(r.ok()) << r.describe();
    named += namesRank(result.report(r.rank, "text"), kVictim) ? 1 : 0;
  }
  EXPECT_GE(named, 1) << "no survivor's error names the killed rank " << kVictim;
}

INSTANTIATE_TEST_SUITE_P(Tls, UcxTransportTest,
                         ::testing::Values(Tls{"tcp", "tcp"}, Tls{"sm_cma", "sm,cma"},
                                           Tls{"tcp_rendezvous", "tcp", "0"}, Tls{"sm_cma_rendezvous", "sm,cma", "0"}),
                         [](const ::testing::TestParamInfo<Tls>& p) { return std::string(p.param.name); });

// Case-insensitive names, NCCL's IB mapped to UCX, and CFX_NET when NCCL_NET is unset; unknown names are a
// clear InvalidUsage.
TEST(UcxSelectionTest, NamesSelectTheTransportOrFailClearly) {
  std::string why;
  if (!ucxUsableHere(&why) && CFX_TEST_HAVE_UCX) GTEST_SKIP() << why;
#if CFX_TEST_HAVE_UCX
  for (auto [var, value] : {std::pair{"CFX_NET", "ucx"}, std::pair{"NCCL_NET", "ib"}}) {
    RunOptions o;
    o.env = ucxEnv("tcp");
    o.env.erase(o.env.begin());  // not NCCL_NET=UCX: the name under test selects it
    o.env.emplace_back(var, value);
    runRanks(2, o, [](RankContext& ctx) {
      ncclComm_t comm = ctx.initComm();
      ASSERT_NE(comm, nullptr);
      expectAllReduceSum(comm, ctx.rank() + 1, 3, 5);
      EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
    });
  }
#endif
  RunOptions bad;
  bad.env = {{"NCCL_NET", "Carrier-Pigeon"}};
  runRanks(1, bad, [](RankContext& ctx) {
    ncclComm_t comm = nullptr;
    const ncclResult_t rc = ncclCommInitRank(&comm, 1, ctx.uniqueId(), 0);
    EXPECT_EQ(rc, ncclInvalidUsage);
    const char* last = ncclGetLastError(nullptr);
    EXPECT_NE(std::string(last ? last : "").find("Carrier-Pigeon"), std::string::npos) << (last ? last : "");
  });
}

// ucx seals no frames: asking for protected frames over it fails on every rank saying so, not silently unprotected.
TEST(UcxSelectionTest, ProtectedFramesOverUcxAreRefusedSayingSo) {
  std::string why;
  if (!ucxUsableHere(&why)) GTEST_SKIP() << why;
  RunOptions o = ucxOptions(Tls{"tcp", "tcp"});
  o.env.emplace_back("CFX_WIRE_PROTECTION", "integrity");
  runRanks(2, o, [](RankContext& ctx) {
    ncclComm_t comm = nullptr;
    EXPECT_EQ(ncclCommInitRank(&comm, ctx.nRanks(), ctx.uniqueId(), ctx.rank()), ncclInvalidUsage);
    const std::string last = ncclGetLastError(nullptr);
    EXPECT_NE(last.find("not implemented for the ucx transport"), std::string::npos) << last;
  });
}

#if !CFX_TEST_HAVE_UCX
// Without UCX, asking for it says so instead of silently using tcp.
TEST(UcxSelectionTest, BuiltWithoutUcxSaysSo) {
  RunOptions o;
  o.env = {{"NCCL_NET", "UCX"}};
  runRanks(1, o, [](RankContext& ctx) {
    ncclComm_t comm = nullptr;
    const ncclResult_t rc = ncclCommInitRank(&comm, 1, ctx.uniqueId(), 0);
    EXPECT_EQ(rc, ncclInvalidUsage);
    const char* last = ncclGetLastError(nullptr);
    EXPECT_NE(std::string(last ? last : "").find("built without UCX"), std::string::npos) << (last ? last : "");
  });
}
#endif

}  // namespace
}  // namespace cfx::itest
