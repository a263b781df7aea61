// SPDX-License-Identifier: Apache-2.0
// perf harness: the environment variables the perf tools read (besides the launcher's, which the library reads
// for them through cfxGetLaunchInfo). Declared here once: the harness reads them by these names, and
// tools/env_doc.cc lists them in docs/ENV.md.
#pragma once

namespace cfx::perf {

inline constexpr const char* kMinBwVariable = "NCCL_TESTS_MIN_BW";
inline constexpr const char* kRotateVariable = "CFX_PERF_ROTATE";

struct PerfVariable {
  const char* name;
  const char* meaning;
};

inline constexpr PerfVariable kPerfVariables[] = {
    {kMinBwVariable,
     "nccl-tests' gate, read as nccl-tests reads it: the run exits 7 when the average bus bandwidth is below 90 % of "
     "this many GB/s."},
    {kRotateVariable,
     "0 keeps every timed iteration at the start of the buffers, as MPI and Gloo benchmarks do (perf/compare sets "
     "it); anything else, or unset, moves on through the buffers as nccl-tests does."},
};

}  // namespace cfx::perf
