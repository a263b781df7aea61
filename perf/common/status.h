// SPDX-License-Identifier: Apache-2.0
// perf harness: result codes and the two checking macros shared by every benchmark.
// The numeric values are nccl-tests' testResult_t, because scripts read them as exit statuses.
#pragma once

#include <nccl.h>

namespace cfx::perf {

enum class TestResult : int {
  Success = 0,
  InternalError = 1,
  CudaError = 2,
  NcclError = 3,
  Timeout = 4,
  NotImplemented = 5,
  InvalidUsage = 6,
  NumResults = 7,  // some #wrong was non-zero, or the bandwidth gate failed
};

// Prints nccl-tests' failure line: "<host>: Test NCCL failure <file>:<line> '<string> / <last error>'".
void reportNcclFailure(ncclResult_t result, const char* file, int line);
// Prints " .. <host> pid <pid>: Test failure <file>:<line>", the trail nccl-tests prints per frame.
void reportFailureTrail(const char* file, int line);

}  // namespace cfx::perf

// Call an NCCL function; on failure print where and return TestResult::NcclError.
#define CFX_PERF_NCCL(call)                                            \
  do {                                                                 \
    ncclResult_t cfxPerfRes_ = (call);                                 \
    if (cfxPerfRes_ != ncclSuccess) {                                  \
      ::cfx::perf::reportNcclFailure(cfxPerfRes_, __FILE__, __LINE__); \
      return ::cfx::perf::TestResult::NcclError;                       \
    }                                                                  \
  } while (0)

// Propagate a failed TestResult, adding one trail line.
#define CFX_PERF_TRY(expr)                                 \
  do {                                                     \
    ::cfx::perf::TestResult cfxPerfRes_ = (expr);          \
    if (cfxPerfRes_ != ::cfx::perf::TestResult::Success) { \
      ::cfx::perf::reportFailureTrail(__FILE__, __LINE__); \
      return cfxPerfRes_;                                  \
    }                                                      \
  } while (0)
