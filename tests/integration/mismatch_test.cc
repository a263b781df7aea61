// SPDX-License-Identifier: Apache-2.0
// Ranks that call different things at the same point of their op sequence (issue 38, item 5): every rank gets
// ncclInvalidUsage, from the call or as the communicator's async error, with a message that names the calls; no
// rank hangs and none returns a result as if nothing were wrong (integration layer; ranks are forked processes).
#include "integration/multiproc.h"
#include "integration/nccl_checks.h"

#include <gtest/gtest.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "conflux.h"

namespace cfx::itest {
namespace {

using namespace std::chrono_literals;

// Runs `call` on every rank (it receives the rank and returns the call's result) and expects the mismatch on all.
// `mine` is what this rank's message must say about its own call.
// With `checkCalls` (CFX_CHECK_CALLS=1) the call itself must fail on every rank, naming every distinct call in
// `calls`; without, each rank's message names at least the kind of its own call, `mine(rank)`, and a rank whose
// part of the call only sent (and so finished) learns it from the communicator's async error or, where nobody
// waited on a mismatched message (ranks that disagree on a root each broadcast and finish), at its next call: the
// unread messages are strays then (docs/DESIGN.md, "Mismatched calls").
void expectMismatchOnEveryRank(int nRanks, std::function<ncclResult_t(int rank, ncclComm_t comm)> call,
                               std::function<std::string(int rank)> mine, std::vector<std::string> calls,
                               bool checkCalls) {
  RunOptions options;
  options.timeout = 60s;
  options.env = {{"CFX_TIMEOUT_MS", "20000"}, {"CFX_CHECK_CALLS", checkCalls ? "1" : "0"}};
  runRanks(nRanks, options, [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const auto start = std::chrono::steady_clock::now();
    ncclResult_t rc = call(ctx.rank(), comm);
    if (rc == ncclSuccess || rc == ncclInProgress) rc = waitWhileInProgress(comm, 2s);
    if (rc == ncclSuccess && !checkCalls) {
      // This rank's part finished before a peer found the mismatch (or nobody could): the next call finds the strays,
      // or fails on a peer's revoke notice, which also makes it the communicator's error. Waits only for that notice.
      float one = 1.0f;
      rc = ncclAllReduce(&one, &one, 1, ncclFloat32, ncclSum, comm, nullptr);
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      while (rc == ncclSuccess && std::chrono::steady_clock::now() < deadline) {
        ncclResult_t state = ncclSuccess;
        EXPECT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
        rc = state;
        std::this_thread::sleep_for(1ms);
      }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string last = ncclGetLastError(comm);
    EXPECT_EQ(rc, ncclInvalidUsage) << "rank " << ctx.rank() << ": " << last;
    EXPECT_NE(last.find("mismatched operation across ranks"), std::string::npos) << "rank " << ctx.rank() << ": " << last;
    EXPECT_NE(last.find(mine(ctx.rank())), std::string::npos) << "rank " << ctx.rank() << ": " << last;
    if (checkCalls) {
      for (const std::string& c : calls) EXPECT_NE(last.find(c), std::string::npos) << "rank " << ctx.rank() << ": " << last;
    }
    EXPECT_LT(seconds, 15) << "the mismatch took too long to surface";
    EXPECT_TRUE(succeeded(ncclCommAbort(comm)));
  });
}

class MismatchTest : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(Modes, MismatchTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "CheckCalls" : "Stamps"; });

TEST_P(MismatchTest, DifferentCollectivesFailOnEveryRank) {
  std::vector<float> send(4096, 1.0f), recv(4096);
  expectMismatchOnEveryRank(
      3,
      [&](int rank, ncclComm_t comm) {
        if (rank == 1) return ncclReduce(send.data(), recv.data(), 4096, ncclFloat32, ncclSum, 0, comm, nullptr);
        return ncclAllReduce(send.data(), recv.data(), 4096, ncclFloat32, ncclSum, comm, nullptr);
      },
      [](int rank) { return std::string(rank == 1 ? "Reduce(sum, float" : "AllReduce(sum, float"); },
      {"rank 1: Reduce(sum, float, count 4096, root 0)", "ranks 0,2: AllReduce(sum, float, count 4096)"}, GetParam());
}

TEST_P(MismatchTest, DifferentRootsFailOnEveryRank) {
  std::vector<int32_t> buf(1000, 7);
  expectMismatchOnEveryRank(
      3, [&](int rank, ncclComm_t comm) {
        return ncclBroadcast(buf.data(), buf.data(), buf.size(), ncclInt32, rank == 2 ? 2 : 0, comm, nullptr);
      },
      [](int) { return std::string("Broadcast(int32"); },
      {"ranks 0,1: Broadcast(int32, count 1000, root 0)", "rank 2: Broadcast(int32, count 1000, root 2)"}, GetParam());
}

TEST_P(MismatchTest, DifferentDatatypesOfOneSizeFailOnEveryRank) {
  std::vector<int32_t> send(3000, 1), recv(3000);
  expectMismatchOnEveryRank(
      2, [&](int rank, ncclComm_t comm) {
        return ncclAllReduce(send.data(), recv.data(), send.size(), rank == 0 ? ncclInt32 : ncclFloat32, ncclSum, comm,
                             nullptr);
      },
      [](int rank) { return std::string(rank == 0 ? "AllReduce(sum, int32" : "AllReduce(sum, float"); },
      {"rank 0: AllReduce(sum, int32, count 3000)", "rank 1: AllReduce(sum, float, count 3000)"}, GetParam());
}

TEST_P(MismatchTest, DifferentReductionOpsFailOnEveryRank) {
  std::vector<float> send(1 << 18, 1.0f), recv(1 << 18);  // large enough for the direct path on one host
  expectMismatchOnEveryRank(
      4, [&](int rank, ncclComm_t comm) {
        return ncclAllReduce(send.data(), recv.data(), send.size(), ncclFloat32, rank == 3 ? ncclMax : ncclSum, comm,
                             nullptr);
      },
      [](int rank) { return std::string(rank == 3 ? "AllReduce(max, float" : "AllReduce(sum, float"); },
      {"ranks 0,1,2: AllReduce(sum, float, count 262144)", "rank 3: AllReduce(max, float, count 262144)"}, GetParam());
}

TEST_P(MismatchTest, DifferentCodecsFailOnEveryRank) {
  std::vector<float> send(1 << 16, 1.0f), recv(1 << 16);
  expectMismatchOnEveryRank(
      3,
      [&](int rank, ncclComm_t comm) {
        cfxCodec codec;
        if (cfxCodecParse(rank == 0 ? "bf16" : "int8", &codec) != ncclSuccess) return ncclInternalError;
        codec.mode = cfxCompressAlways;
        return cfxAllReduceCompressed(send.data(), recv.data(), send.size(), ncclFloat32, ncclSum, &codec, comm,
                                      nullptr);
      },
      [](int) { return std::string("AllReduce(sum, float"); },
      {"rank 0: AllReduce(sum, float, count 65536)", "ranks 1,2: AllReduce(sum, float, count 65536)"}, GetParam());
}

TEST_P(MismatchTest, AllToAllvAndMoeAgainstOtherCollectivesFailOnEveryRank) {
  std::vector<int32_t> send(300, 1), recv(300);
  const std::vector<size_t> counts(3, 100), displs = {0, 100, 200};
  expectMismatchOnEveryRank(
      3,
      [&](int rank, ncclComm_t comm) {
        if (rank == 1) return ncclAlltoAll(send.data(), recv.data(), 100, ncclInt32, comm, nullptr);
        return cfxAllToAllv(send.data(), counts.data(), displs.data(), recv.data(), counts.data(), displs.data(),
                            ncclInt32, comm, nullptr);
      },
      [](int rank) { return std::string(rank == 1 ? "AlltoAll(int32" : "AllToAllv(int32"); },
      {"rank 1: AlltoAll(int32, count 100)", "ranks 0,2: AllToAllv(int32)"}, GetParam());
  std::vector<float> x(64, 1.0f), y(64);
  expectMismatchOnEveryRank(
      2,
      [&](int rank, ncclComm_t comm) {
        if (rank == 1) return ncclAllReduce(x.data(), y.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr);
        const cfxMoeConfig config = {4, 1, 64, ncclFloat32, ncclFloat32, ncclInt32, nullptr, cfxMoeNormal, 0};
        cfxMoe_t moe = nullptr;
        ncclResult_t rc = cfxMoeCreate(comm, &config, &moe);
        const int32_t ids[2] = {0, 3};
        size_t rows = 0;
        if (rc == ncclSuccess) rc = cfxMoeExchangeCounts(moe, ids, 2, &rows, nullptr);
        cfxMoeDestroy(moe);
        return rc;
      },
      [](int rank) { return std::string(rank == 1 ? "AllReduce(sum, float" : "MoeDispatch(float, exchange, 2 tokens)"); },
      {"rank 0: MoeDispatch(float)", "rank 1: AllReduce(sum, float, count 64)"}, GetParam());
}

}  // namespace
}  // namespace cfx::itest
