// SPDX-License-Identifier: Apache-2.0
// All-to-all-v and MoE dispatch/combine through the public API, one process per rank, over shared memory and TCP:
// ncclAllToAllv against a reference built from the counts (random, with zeros; in place), dispatch and combine in both
// modes against tests/moe_reference.h (every row, every count, the combined values bit for bit), and every bad input
// refused by name.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "conflux.h"
#include "conflux_nccl_ext.h"
#include "integration/dtypes.h"
#include "moe_reference.h"
#include "multiproc.h"
#include "nccl.h"

namespace {

using cfx::itest::RankContext;
using cfx::itest::RunOptions;
using cfx::itest::runRanks;

RunOptions overTcp() {
  RunOptions o;
  o.env = {{"NCCL_SHM_DISABLE", "1"}, {"NCCL_SOCKET_IFNAME", "lo"}};
  return o;
}

// counts[s][d] (int32 elements) for every pair, the same on every rank (one seed); about a third are zero.
std::vector<std::vector<size_t>> countMatrix(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<size_t>> c(static_cast<size_t>(n), std::vector<size_t>(static_cast<size_t>(n)));
  for (auto& row : c) {
    for (size_t& v : row) v = rng() % 3 == 0 ? 0 : rng() % 5000;
  }
  return c;
}

int32_t element(size_t from, size_t to, size_t i) { return static_cast<int32_t>(from * 100000 + to * 1000 + i % 997); }

void allToAllvAgainstTheReference(int n, const RunOptions& options) {
  const auto result = runRanks(n, options, [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const auto r = static_cast<size_t>(ctx.rank());
    const auto un = static_cast<size_t>(n);
    for (uint32_t seed : {1u, 2u, 3u}) {
      const auto counts = countMatrix(n, seed);
      std::vector<size_t> sc(un), sd(un), rc(un), rd(un);
      size_t sendAt = 0, recvAt = 0;
      for (size_t p = 0; p < un; ++p) {  // blocks in reverse rank order with a gap of 3 elements: displacements matter
        const size_t q = un - 1 - p;
        sc[q] = counts[r][q];
        sd[q] = sendAt + 3;
        sendAt = sd[q] + sc[q];
        rc[q] = counts[q][r];
        rd[q] = recvAt + 3;
        recvAt = rd[q] + rc[q];
      }
      std::vector<int32_t> send(sendAt, -7), recv(recvAt, -7);
      for (size_t p = 0; p < un; ++p) {
        for (size_t i = 0; i < sc[p]; ++i) send[sd[p] + i] = element(r, p, i);
      }
      auto* fn = seed == 2 ? cfxAllToAllv : ncclAllToAllv;
      ASSERT_EQ(fn(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(), ncclInt32, comm, nullptr),
                ncclSuccess)
          << ncclGetLastError(comm);
      for (size_t p = 0; p < un; ++p) {
        for (size_t i = 0; i < rc[p]; ++i) ASSERT_EQ(recv[rd[p] + i], element(p, r, i)) << "from " << p << " at " << i;
        ASSERT_EQ(recv[rd[p] - 1], -7) << "the gap before rank " << p << "'s block was written";
      }
    }
    // In place (MPI_IN_PLACE's meaning): the same blocks both ways.
    std::vector<size_t> c(un, 500), d(un);
    for (size_t p = 0; p < un; ++p) d[p] = p * 500;
    std::vector<int32_t> buf(un * 500);
    for (size_t p = 0; p < un; ++p) {
      for (size_t i = 0; i < 500; ++i) buf[p * 500 + i] = element(r, p, i);
    }
    ASSERT_EQ(ncclAllToAllv(buf.data(), c.data(), d.data(), buf.data(), c.data(), d.data(), ncclInt32, comm, nullptr),
              ncclSuccess)
        << ncclGetLastError(comm);
    for (size_t p = 0; p < un; ++p) ASSERT_EQ(buf[p * 500 + 17], element(p, r, 17));
    ncclCommDestroy(comm);
  });
  ASSERT_TRUE(result.ok());
}

TEST(AllToAllv, RandomCountsOverSharedMemory) { allToAllvAgainstTheReference(4, RunOptions{}); }
TEST(AllToAllv, RandomCountsOverTcp) { allToAllvAgainstTheReference(3, overTcp()); }

// ids of rank r's tokens, the same on every rank (so every rank can build the reference).
std::vector<std::vector<int64_t>> idsOf(const cfx::moetest::Setup& s, const std::vector<size_t>& tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int64_t>> ids(tokens.size());
  for (size_t r = 0; r < tokens.size(); ++r) {
    for (size_t i = 0; i < tokens[r] * static_cast<size_t>(s.topk); ++i) ids[r].push_back(rng() % static_cast<uint32_t>(s.nExperts));
  }
  return ids;
}

float tokenValue(size_t r, size_t t, size_t h) { return static_cast<float>((r * 7 + t * 3 + h) % 17) * 0.25f - 2.0f; }

void dispatchAndCombine(int n, int mode, const RunOptions& options) {
  const auto result = runRanks(n, options, [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const auto r = static_cast<size_t>(ctx.rank());
    cfx::moetest::Setup s;
    s.nRanks = n;
    s.nExperts = 2 * n + 1;
    s.topk = 3;
    s.bounded = mode == cfxMoeBounded;
    s.capacity = 40;
    const size_t hidden = 64;
    const size_t k = 3;
    const std::vector<size_t> tokens = {0, 25, 7, 31, 12, 9}; // rank 0 has none
    const auto ids = idsOf(s, std::vector<size_t>(tokens.begin(), tokens.begin() + n), 5);
    const size_t t = tokens[r];
    cfxMoeConfig config = {s.nExperts, s.topk, hidden, ncclBfloat16, ncclFloat32, ncclInt64, nullptr, mode, s.capacity};
    cfxMoe_t moe = nullptr;
    ASSERT_EQ(cfxMoeCreate(comm, &config, &moe), ncclSuccess) << ncclGetLastError(comm);
    const auto& bf16 = cfx::itest::dtypeInfo(ncclBfloat16);
    std::vector<uint16_t> x(t * hidden);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint16_t>(cfx::itest::encodeValue(bf16, tokenValue(r, i / hidden, i % hidden)));
    std::vector<float> w(t * k);
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.125f * static_cast<float>(i % 7 + 1);
    size_t rows = s.capacity;
    if (!s.bounded) {
      ASSERT_EQ(cfxMoeExchangeCounts(moe, ids[r].data(), t, &rows, nullptr), ncclSuccess) << ncclGetLastError(comm);
    }
    std::vector<long long> perLocal;
    size_t dropped = 0;
    const auto want = cfx::moetest::expertMajor(s, ids, static_cast<int>(r), &dropped, &perLocal);
    if (!s.bounded) {
      ASSERT_EQ(rows, want.size());
    }
    std::vector<uint16_t> recv(rows * hidden);
    std::vector<int> counts(perLocal.size() + 1);
    ASSERT_EQ(cfxMoeDispatch(moe, x.data(), nullptr, ids[r].data(), w.data(), t, recv.data(), nullptr, counts.data(),
                             nullptr),
              ncclSuccess)
        << ncclGetLastError(comm);
    for (size_t e = 0; e < perLocal.size(); ++e) EXPECT_EQ(counts[e], perLocal[e]);
    EXPECT_EQ(counts.back(), static_cast<int>(dropped));
    std::vector<long long> got(perLocal.size());
    cfxMoeCounts info{};
    info.perLocalExpert = got.data();
    ASSERT_EQ(cfxMoeGetCounts(moe, &info), ncclSuccess);
    EXPECT_EQ(info.recvTokens, want.size());
    EXPECT_EQ(info.droppedTokens, dropped);
    EXPECT_EQ(got, perLocal);
    // Every row is its token's; the experts double it, in fp32.
    std::vector<float> y(rows * hidden);
    for (size_t i = 0; i < want.size(); ++i) {
      for (size_t h = 0; h < hidden; ++h) {
        const auto bits = recv[i * hidden + h];
        ASSERT_EQ(bits, static_cast<uint16_t>(cfx::itest::encodeValue(bf16, tokenValue(static_cast<size_t>(want[i].source), want[i].token, h))));
        y[i * hidden + h] = 2.0f * static_cast<float>(cfx::itest::decodeValue(bf16, bits));
      }
    }
    std::vector<float> out(t * hidden);
    for (int flags : {0, CFX_MOE_UNWEIGHTED}) {
      ASSERT_EQ(cfxMoeCombine(moe, y.data(), out.data(), flags, nullptr), ncclSuccess) << ncclGetLastError(comm);
      // Values 2x(k/4 - 2) times weights k/8: every sum is exact in fp32, so any order gives these bits.
      const auto where = cfx::moetest::positions(s, ids);
      for (size_t tok = 0; tok < t; ++tok) {
        for (size_t h = 0; h < hidden; h += 7) {
          double sum = 0;
          for (size_t j = 0; j < k; ++j) {
            const double weight = flags ? 1.0 : w[tok * k + j];
            if (where[r][tok * k + j] >= 0) sum += weight * 2.0 * cfx::itest::decodeValue(bf16, cfx::itest::encodeValue(bf16, tokenValue(r, tok, h)));
          }
          ASSERT_EQ(out[tok * hidden + h], static_cast<float>(sum)) << "token " << tok << " value " << h << " flags " << flags;
        }
      }
    }
    ASSERT_EQ(cfxMoeDestroy(moe), ncclSuccess);
    ncclCommDestroy(comm);
  });
  ASSERT_TRUE(result.ok());
}

TEST(Moe, NormalModeOverSharedMemory) { dispatchAndCombine(4, cfxMoeNormal, RunOptions{}); }
TEST(Moe, BoundedModeOverTcpDropsAndCounts) { dispatchAndCombine(3, cfxMoeBounded, overTcp()); }
TEST(Moe, SixRanksNormalModeOverTcp) { dispatchAndCombine(6, cfxMoeNormal, overTcp()); }

TEST(BadInput, AllToAllvAndMoeRefuseByName) {
  const auto result = runRanks(2, [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    auto refused = [&](ncclResult_t got, const char* word) {
      EXPECT_EQ(got, ncclInvalidArgument) << word;
      EXPECT_NE(std::string(ncclGetLastError(comm)).find(word), std::string::npos) << ncclGetLastError(comm);
    };
    std::vector<int32_t> a(100), b(100);
    const size_t me = static_cast<size_t>(ctx.rank());
    std::vector<size_t> c = {10, 10}, d = {0, 10};
    auto v = [&](std::vector<size_t> sc, std::vector<size_t> sd, std::vector<size_t> rc, std::vector<size_t> rd) {
      return ncclAllToAllv(a.data(), sc.data(), sd.data(), b.data(), rc.data(), rd.data(), ncclInt32, comm, nullptr);
    };
    refused(v({10, static_cast<size_t>(-5)}, d, c, d), "is negative (-5)");
    refused(v(c, {0, static_cast<size_t>(-1)}, c, d), "sdispls[1] is negative");
    refused(v(c, d, {10, size_t{1} << 62}, d), "overflows");
    refused(v(c, d, c, {0, (size_t{1} << 61) - 5}), "overflows");
    refused(v(c, d, c, {0, 5}), "overlap");
    refused(ncclAllToAllv(a.data(), nullptr, d.data(), b.data(), c.data(), d.data(), ncclInt32, comm, nullptr), "NULL");
    std::vector<size_t> self = c;
    self[me] = 3;
    refused(v(c, d, self, d), "to itself");
    refused(ncclAllToAllv(a.data(), c.data(), d.data(), a.data() + 5, c.data(), d.data(), ncclInt32, comm, nullptr),
            "overlaps the receive region");
    cfxMoeConfig config = {8, 2, 64, ncclBfloat16, ncclBfloat16, ncclInt32, nullptr, cfxMoeNormal, 0};
    cfxMoe_t moe = nullptr;
    cfxMoeConfig bad = config;
    bad.topk = 9;
    refused(cfxMoeCreate(comm, &bad, &moe), "topk 9");
    bad = config;
    bad.tokenType = ncclInt8;
    refused(cfxMoeCreate(comm, &bad, &moe), "tokenType");
    bad = config;
    bad.tokenType = ncclFloat8e4m3;
    bad.hidden = 100;
    refused(cfxMoeCreate(comm, &bad, &moe), "multiple of 128");
    int table[8] = {0, 1, 0, 1, 0, 1, 0, 2};
    bad = config;
    bad.expertToRank = table;
    refused(cfxMoeCreate(comm, &bad, &moe), "expertToRank[7] = 2");
    refused(cfxMoeDestroy(reinterpret_cast<cfxMoe_t>(a.data())), "not a live");
    EXPECT_EQ(v(c, d, c, d), ncclSuccess) << ncclGetLastError(comm);  // refusals at the call leave it usable
    // Ranks that disagree on hidden: every rank fails the exchange by name. A failed operation leaves its
    // communicator broken (its async error), so the next case runs on a new one.
    cfxMoeConfig mine = config;
    if (ctx.rank() == 1) mine.hidden = 128;
    ASSERT_EQ(cfxMoeCreate(comm, &mine, &moe), ncclSuccess);
    std::vector<int32_t> ids = {0, 5, 7, 2};
    size_t rows = 0;
    refused(cfxMoeExchangeCounts(moe, ids.data(), 2, &rows, nullptr), "hidden");
    ncclResult_t async = ncclSuccess;
    EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    EXPECT_EQ(async, ncclInvalidArgument);
    ASSERT_EQ(cfxMoeDestroy(moe), ncclSuccess);
    ncclCommAbort(comm);
    // Ids out of range on rank 0: every rank fails, naming rank 0.
    const ncclUniqueId id = ctx.newUniqueId();
    ASSERT_EQ(ncclCommInitRank(&comm, 2, id, ctx.rank()), ncclSuccess);
    ASSERT_EQ(cfxMoeCreate(comm, &config, &moe), ncclSuccess);
    refused(cfxMoeExchangeCounts(moe, ids.data(), size_t{1} << 31, &rows, nullptr), "above 2^31 - 1");
    if (ctx.rank() == 0) ids[3] = 8;
    refused(cfxMoeExchangeCounts(moe, ids.data(), 2, &rows, nullptr), "rank 0's expert ids are out of range");
    std::vector<uint16_t> x(2 * 64), y(64 * 64);
    EXPECT_EQ(cfxMoeDispatch(moe, x.data(), nullptr, nullptr, nullptr, 2, y.data(), nullptr, nullptr, nullptr),
              ncclInvalidUsage);  // no counted routing after the failed exchange
    EXPECT_EQ(cfxMoeCombine(moe, y.data(), x.data(), 0, nullptr), ncclInvalidUsage);
    ASSERT_EQ(cfxMoeDestroy(moe), ncclSuccess);
    ncclCommAbort(comm);
  });
  ASSERT_TRUE(result.ok());
}

}  // namespace
