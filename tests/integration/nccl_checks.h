// SPDX-License-Identifier: Apache-2.0
// gtest helpers for the public C API: readable ncclResult_t values and small collective checks used by
// several integration tests.
#pragma once

#include "integration/multiproc.h"

#include <gtest/gtest.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <ostream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

// gtest finds this through argument-dependent lookup (ncclResult_t lives in the global namespace).
inline void PrintTo(ncclResult_t rc, std::ostream* os) { *os << cfx::itest::resultName(rc) << " (" << int(rc) << ")"; }

namespace cfx::itest {

// EXPECT_TRUE(succeeded(ncclX(...))) prints the code and ncclGetLastError on failure.
inline ::testing::AssertionResult succeeded(ncclResult_t rc) {
  if (rc == ncclSuccess) return ::testing::AssertionSuccess();
  const char* last = ncclGetLastError(nullptr);
  return ::testing::AssertionFailure() << "returned " << resultName(rc) << "; last error: " << (last ? last : "(null)");
}

// "rank 2" as a word in an error text: it names that rank (not rank 21, not only "rank 2x").
inline bool namesRank(const std::string& text, int rank) {
  return std::regex_search(text, std::regex("\\brank " + std::to_string(rank) + "\\b"));
}

// Polls ncclCommGetAsyncError until it reports an error (NCCL's way to report a failed enqueued op), or the limit
// passes: what it last reported, so that a missing error fails the caller's check instead of hanging it.
inline ncclResult_t waitForAsyncError(ncclComm_t comm, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  ncclResult_t async = ncclSuccess;
  while (std::chrono::steady_clock::now() < deadline && ncclCommGetAsyncError(comm, &async) == ncclSuccess &&
         (async == ncclSuccess || async == ncclInProgress)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return async;
}

// Polls ncclCommGetAsyncError until the communicator leaves ncclInProgress (or the limit passes).
inline ncclResult_t waitWhileInProgress(ncclComm_t comm, std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  ncclResult_t state = ncclInProgress;
  while (std::chrono::steady_clock::now() < deadline) {
    const ncclResult_t rc = ncclCommGetAsyncError(comm, &state);
    if (rc != ncclSuccess) return rc;
    if (state != ncclInProgress) return state;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return ncclInProgress;
}

// Every rank contributes contribution * (i % 7 + 1) as int32; each element must come back as total * (i % 7 + 1).
inline void expectAllReduceSum(ncclComm_t comm, int contribution, int total, size_t count = 4099) {
  std::vector<int32_t> send(count), recv(count, -1);
  for (size_t i = 0; i < count; ++i) send[i] = contribution * static_cast<int32_t>(i % 7 + 1);
  ASSERT_TRUE(succeeded(ncclAllReduce(send.data(), recv.data(), count, ncclInt32, ncclSum, comm, nullptr)));
  for (size_t i = 0; i < count; ++i) {
    if (recv[i] != total * static_cast<int32_t>(i % 7 + 1)) {
      ADD_FAILURE() << "AllReduce element " << i << ": got " << recv[i] << ", expected "
                    << total * static_cast<int32_t>(i % 7 + 1);
      return;
    }
  }
}

}  // namespace cfx::itest
