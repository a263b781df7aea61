// SPDX-License-Identifier: Apache-2.0
// Shared by the bootstrap tests (transport layer): options for loopback, and ranks as threads of this process.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "transport/bootstrap/bootstrap.h"

namespace cfx::transport::testing {

inline BootstrapOptions bootstrapTestOptions(std::chrono::milliseconds timeout = std::chrono::milliseconds(30000)) {
  BootstrapOptions o;
  o.timeout = timeout;
  o.ifName = "lo";  // loopback only: tests never depend on the machine's other interfaces
  o.handshakeTimeout = std::chrono::milliseconds(500);
  return o;
}

// Runs fn(rank) on nRanks threads and joins them all.
inline void runRankThreads(int nRanks, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < nRanks; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

// Joins nRanks ranks concurrently; every one must succeed.
inline std::vector<std::unique_ptr<Bootstrap>> joinAll(const UniqueId& id, int nRanks,
                                                       const BootstrapOptions& options) {
  std::vector<std::unique_ptr<Bootstrap>> out(static_cast<size_t>(nRanks));
  runRankThreads(nRanks, [&](int r) {
    Result<std::unique_ptr<Bootstrap>> b = Bootstrap::init(id, r, nRanks, options);
    ASSERT_TRUE(b.ok()) << "rank " << r << ": " << b.status().message();
    out[static_cast<size_t>(r)] = std::move(*b);
  });
  return out;
}

}  // namespace cfx::transport::testing
