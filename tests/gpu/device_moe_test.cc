// SPDX-License-Identifier: Apache-2.0
// All-to-all-v and MoE dispatch/combine on device buffers (staged through host memory), on a GPU or the CPU
// stand-in of tests/gpu/emu (ctest Emulated.*): all-to-all-v keeping the gaps between its blocks, the normal mode with
// ids in device memory (the exchange synchronizes its stream), and the bounded mode captured into a CUDA graph and
// replayed with a new routing every time, its counts reported in stream order.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "conflux.h"
#include "conflux_nccl_ext.h"
#include "gpu/device_test_util.h"
#include "integration/dtypes.h"
#include "moe_reference.h"

namespace cfx::itest {
namespace {

TEST(GpuMoe, AllToAllvOnDeviceBuffersKeepsTheGapsBetweenBlocks) {
  SKIP_WITHOUT_GPU();
  runRanks(3, RunOptions{}, [&](RankContext& ctx) {
    RankOnDevice rk(ctx);
    const auto r = static_cast<size_t>(ctx.rank());
    const size_t n = 3;
    auto count = [](size_t from, size_t to) { return (from * 5 + to * 3) % 4 * 1000; };  // some pairs send nothing
    std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
    size_t sendAt = 0, recvAt = 0;
    for (size_t p = 0; p < n; ++p) {
      sc[p] = count(r, p);
      sd[p] = sendAt;
      sendAt += sc[p] + 16;
      rc[p] = count(p, r);
      rd[p] = recvAt + 16;
      recvAt = rd[p] + rc[p];
    }
    std::vector<int32_t> send(sendAt), recv(recvAt, -1);
    for (size_t p = 0; p < n; ++p) {
      for (size_t i = 0; i < sc[p]; ++i) send[sd[p] + i] = static_cast<int32_t>(r * 1000000 + p * 10000 + i);
    }
    DevBuf dSend(rk.d, send.size() * 4), dRecv(rk.d, recv.size() * 4);
    CU_OK(rk.d.memcpyHtoDAsync(dSend.ptr, send.data(), send.size() * 4, rk.stream));
    CU_OK(rk.d.memcpyHtoDAsync(dRecv.ptr, recv.data(), recv.size() * 4, rk.stream));
    NCCL_OK(ncclAllToAllv(dSend.p(), sc.data(), sd.data(), dRecv.p(), rc.data(), rd.data(), ncclInt32, rk.comm,
                          reinterpret_cast<cudaStream_t>(rk.stream)));
    CU_OK(rk.d.memcpyDtoHAsync(recv.data(), dRecv.ptr, recv.size() * 4, rk.stream));
    CU_OK(rk.d.streamSynchronize(rk.stream));
    for (size_t p = 0; p < n; ++p) {
      for (size_t i = 0; i < rc[p]; ++i) ASSERT_EQ(recv[rd[p] + i], static_cast<int32_t>(p * 1000000 + r * 10000 + i));
      ASSERT_EQ(recv[rd[p] - 1], -1) << "the gap before rank " << p << "'s block";
    }
  });
}

// ids of every rank's tokens for one routing, the same on every rank.
std::vector<std::vector<int64_t>> routing(const moetest::Setup& s, const std::vector<size_t>& tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int64_t>> ids(tokens.size());
  for (size_t r = 0; r < tokens.size(); ++r) {
    for (size_t i = 0; i < tokens[r] * static_cast<size_t>(s.topk); ++i) ids[r].push_back(rng() % static_cast<uint32_t>(s.nExperts));
  }
  return ids;
}

float tokenValue(size_t r, size_t t, size_t h, int salt) {
  return static_cast<float>((r * 7 + t * 3 + h + static_cast<size_t>(salt)) % 17) * 0.25f - 2.0f;
}
float weightOf(size_t i, int salt) { return 0.125f * static_cast<float>((i + static_cast<size_t>(salt)) % 7 + 1); }

// out[t] = sum over k (not dropped) of weight x factor x token: every term a multiple of 1/32, exact in fp32.
void expectCombined(const std::vector<float>& out, const moetest::Setup& s, const std::vector<std::vector<int64_t>>& ids,
                    size_t r, size_t tokens, size_t hidden, int salt, float factor) {
  const auto where = moetest::positions(s, ids);
  const auto k = static_cast<size_t>(s.topk);
  for (size_t t = 0; t < tokens; ++t) {
    for (size_t h = 0; h < hidden; ++h) {
      double sum = 0;
      for (size_t j = 0; j < k; ++j) {
        if (where[r][t * k + j] >= 0) sum += double{weightOf(t * k + j, salt)} * factor * tokenValue(r, t, h, salt);
      }
      ASSERT_EQ(out[t * hidden + h], static_cast<float>(sum)) << "token " << t << " value " << h;
    }
  }
}

TEST(GpuMoe, NormalModeWithDeviceIdsAndBuffers) {
  SKIP_WITHOUT_GPU();
  runRanks(3, RunOptions{}, [&](RankContext& ctx) {
    RankOnDevice rk(ctx);
    const auto r = static_cast<size_t>(ctx.rank());
    const auto stream = reinterpret_cast<cudaStream_t>(rk.stream);
    moetest::Setup s{3, 7, 2, {}, false, 0};
    const size_t hidden = 32;
    const std::vector<size_t> tokens = {20, 0, 13};
    const auto ids = routing(s, tokens, 11);
    const size_t t = tokens[r];
    const cfxMoeConfig config = {s.nExperts, s.topk, hidden, ncclBfloat16, ncclFloat32, ncclInt64, nullptr,
                                 cfxMoeNormal, 0};
    cfxMoe_t moe = nullptr;
    NCCL_OK(cfxMoeCreate(rk.comm, &config, &moe));
    const auto& bf16 = dtypeInfo(ncclBfloat16);
    std::vector<uint16_t> x(t * hidden);
    std::vector<float> w(t * 2);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint16_t>(encodeValue(bf16, tokenValue(r, i / hidden, i % hidden, 0)));
    for (size_t i = 0; i < w.size(); ++i) w[i] = weightOf(i, 0);
    DevBuf dIds(rk.d, ids[r].size() * 8), dX(rk.d, x.size() * 2), dW(rk.d, w.size() * 4);
    CU_OK(rk.d.memcpyHtoDAsync(dIds.ptr, ids[r].data(), ids[r].size() * 8, rk.stream));
    CU_OK(rk.d.memcpyHtoDAsync(dX.ptr, x.data(), x.size() * 2, rk.stream));
    CU_OK(rk.d.memcpyHtoDAsync(dW.ptr, w.data(), w.size() * 4, rk.stream));
    size_t rows = 0;
    NCCL_OK(cfxMoeExchangeCounts(moe, dIds.p(), t, &rows, stream));
    std::vector<long long> perLocal;
    const auto want = moetest::expertMajor(s, ids, ctx.rank(), nullptr, &perLocal);
    ASSERT_EQ(rows, want.size());
    DevBuf dRecv(rk.d, rows * hidden * 2), dCounts(rk.d, (perLocal.size() + 1) * 4), dY(rk.d, rows * hidden * 4),
        dOut(rk.d, t * hidden * 4);
    NCCL_OK(cfxMoeDispatch(moe, dX.p(), nullptr, nullptr, reinterpret_cast<const float*>(dW.p()), t, dRecv.p(),
                           nullptr, static_cast<int*>(dCounts.p()), stream));
    std::vector<uint16_t> recv(rows * hidden);
    std::vector<int> counts(perLocal.size() + 1);
    CU_OK(rk.d.memcpyDtoHAsync(recv.data(), dRecv.ptr, recv.size() * 2, rk.stream));
    CU_OK(rk.d.memcpyDtoHAsync(counts.data(), dCounts.ptr, counts.size() * 4, rk.stream));
    CU_OK(rk.d.streamSynchronize(rk.stream));
    for (size_t e = 0; e < perLocal.size(); ++e) EXPECT_EQ(counts[e], perLocal[e]);
    std::vector<float> y(rows * hidden);
    for (size_t i = 0; i < rows; ++i) {
      for (size_t h = 0; h < hidden; ++h) {
        const float v = tokenValue(static_cast<size_t>(want[i].source), want[i].token, h, 0);
        ASSERT_EQ(recv[i * hidden + h], static_cast<uint16_t>(encodeValue(bf16, v))) << "row " << i;
        y[i * hidden + h] = 3.0f * v;  // the "experts"
      }
    }
    CU_OK(rk.d.memcpyHtoDAsync(dY.ptr, y.data(), y.size() * 4, rk.stream));
    NCCL_OK(cfxMoeCombine(moe, dY.p(), dOut.p(), 0, stream));
    std::vector<float> out(t * hidden);
    CU_OK(rk.d.memcpyDtoHAsync(out.data(), dOut.ptr, out.size() * 4, rk.stream));
    CU_OK(rk.d.streamSynchronize(rk.stream));
    expectCombined(out, s, ids, r, t, hidden, 0, 3.0f);
    NCCL_OK(cfxMoeDestroy(moe));
  });
}

// The bounded mode's point: no host synchronization, so dispatch and combine go into a graph. The "experts" are the
// identity (the combine reads the dispatch's receive buffer), and every replay routes new ids.
TEST(GpuMoe, BoundedModeCapturedInAGraphReplaysNewRoutings) {
  SKIP_WITHOUT_GPU();
  runRanks(2, RunOptions{}, [&](RankContext& ctx) {
    RankOnDevice rk(ctx);
    const GraphApi& g = graphApi();
    const auto r = static_cast<size_t>(ctx.rank());
    const auto stream = reinterpret_cast<cudaStream_t>(rk.stream);
    moetest::Setup s{2, 8, 3, {}, true, 64};
    const size_t hidden = 16;
    const std::vector<size_t> tokens = {17, 11};
    const size_t t = tokens[r];
    const cfxMoeConfig config = {s.nExperts, s.topk, hidden, ncclFloat32, ncclFloat32, ncclInt32, nullptr,
                                 cfxMoeBounded, s.capacity};
    cfxMoe_t moe = nullptr;
    NCCL_OK(cfxMoeCreate(rk.comm, &config, &moe));
    DevBuf dIds(rk.d, t * 3 * 4), dX(rk.d, t * hidden * 4), dW(rk.d, t * 3 * 4), dRecv(rk.d, s.capacity * hidden * 4),
        dCounts(rk.d, 5 * 4), dOut(rk.d, t * hidden * 4);
    ASSERT_EQ(g.beginCapture(rk.stream, 2), cuda::kSuccess);
    NCCL_OK(cfxMoeDispatch(moe, dX.p(), nullptr, dIds.p(), reinterpret_cast<const float*>(dW.p()), t, dRecv.p(),
                           nullptr, static_cast<int*>(dCounts.p()), stream));
    NCCL_OK(cfxMoeCombine(moe, dRecv.p(), dOut.p(), 0, stream));
    cuda::CUgraph graph = nullptr;
    ASSERT_EQ(g.endCapture(rk.stream, &graph), cuda::kSuccess);
    void* exec = nullptr;
    ASSERT_EQ(g.instantiate(&exec, graph, 0), cuda::kSuccess);
    for (int replay = 0; replay < 4; ++replay) {
      const auto ids = routing(s, tokens, 100 + static_cast<uint32_t>(replay));
      std::vector<int32_t> id32(ids[r].begin(), ids[r].end());
      std::vector<float> x(t * hidden), w(t * 3);
      for (size_t i = 0; i < x.size(); ++i) x[i] = tokenValue(r, i / hidden, i % hidden, replay);
      for (size_t i = 0; i < w.size(); ++i) w[i] = weightOf(i, replay);
      CU_OK(rk.d.memcpyHtoDAsync(dIds.ptr, id32.data(), id32.size() * 4, rk.stream));
      CU_OK(rk.d.memcpyHtoDAsync(dX.ptr, x.data(), x.size() * 4, rk.stream));
      CU_OK(rk.d.memcpyHtoDAsync(dW.ptr, w.data(), w.size() * 4, rk.stream));
      ASSERT_EQ(g.launch(exec, rk.stream), cuda::kSuccess);
      std::vector<float> out(t * hidden);
      std::vector<int> counts(5);
      CU_OK(rk.d.memcpyDtoHAsync(out.data(), dOut.ptr, out.size() * 4, rk.stream));
      CU_OK(rk.d.memcpyDtoHAsync(counts.data(), dCounts.ptr, counts.size() * 4, rk.stream));
      CU_OK(rk.d.streamSynchronize(rk.stream));
      std::vector<long long> perLocal;
      size_t dropped = 0;
      moetest::expertMajor(s, ids, ctx.rank(), &dropped, &perLocal);
      for (size_t e = 0; e < 4; ++e) EXPECT_EQ(counts[e], perLocal[e]) << "replay " << replay << " expert " << e;
      EXPECT_EQ(counts[4], static_cast<int>(dropped)) << "replay " << replay;
      expectCombined(out, s, ids, r, t, hidden, replay, 1.0f);
    }
    EXPECT_EQ(g.execDestroy(exec), cuda::kSuccess);
    EXPECT_EQ(g.destroy(graph), cuda::kSuccess);
    NCCL_OK(cfxMoeDestroy(moe));
  });
}

}  // namespace
}  // namespace cfx::itest
