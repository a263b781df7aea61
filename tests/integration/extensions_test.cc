// SPDX-License-Identifier: Apache-2.0
// The cfx extensions through the public API: asynchronous host streams. (Communicators created from a launcher's
// environment: user_env_test.cc.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "conflux.h"
#include "nccl.h"

namespace {

TEST(HostStream, QueuedAllReducesCompleteInOrderAndSynchronize) {
  constexpr int kRanks = 3;
  constexpr size_t kCount = 300007;
  constexpr int kOps = 4;
  std::vector<ncclComm_t> comms(kRanks);
  ASSERT_EQ(ncclCommInitAll(comms.data(), kRanks, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::vector<float>> bufs(kRanks, std::vector<float>(kCount));
  std::vector<ncclResult_t> results(kRanks, ncclInternalError);
  std::vector<int> wrong(kRanks, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      cfxHostStream_t stream = nullptr;
      if (cfxHostStreamCreate(&stream) != ncclSuccess) return;
      for (size_t i = 0; i < kCount; ++i) bufs[r][i] = static_cast<float>(r + 1);
      // Every in-place sum over ranks leaves the same value on all ranks, so after k ops an element is
      // (1 + 2 + 3) * kRanks^(k-1): an op that ran early, late or twice would show.
      for (int k = 0; k < kOps; ++k) {
        if (ncclAllReduce(bufs[r].data(), bufs[r].data(), kCount, ncclFloat, ncclSum, comms[r],
                          reinterpret_cast<cudaStream_t>(stream)) != ncclSuccess) {
          return;
        }
      }
      results[r] = cfxHostStreamSynchronize(stream);
      EXPECT_EQ(cfxHostStreamQuery(stream), ncclSuccess);
      float expected = 6.0f;
      for (int k = 1; k < kOps; ++k) expected *= kRanks;
      int bad = 0;
      for (size_t i = 0; i < kCount; ++i) bad += bufs[r][i] != expected;
      wrong[r] = bad;
      EXPECT_EQ(cfxHostStreamDestroy(stream), ncclSuccess);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(results[r], ncclSuccess) << "rank " << r << ": " << ncclGetLastError(nullptr);
    EXPECT_EQ(wrong[r], 0) << "rank " << r;
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  }
}

TEST(HostStream, InvalidHandlesAreRejected) {
  EXPECT_EQ(cfxHostStreamCreate(nullptr), ncclInvalidArgument);
  int notAStream = 0;
  EXPECT_EQ(cfxHostStreamQuery(reinterpret_cast<cfxHostStream_t>(&notAStream)), ncclInvalidArgument);
  EXPECT_EQ(cfxHostStreamSynchronize(reinterpret_cast<cfxHostStream_t>(&notAStream)), ncclInvalidArgument);
  EXPECT_EQ(cfxHostStreamDestroy(nullptr), ncclSuccess);
}

}  // namespace
