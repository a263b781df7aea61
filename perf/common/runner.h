// SPDX-License-Identifier: Apache-2.0
// perf harness: what one rank does from communicator creation to the footer (internal to perf/common).
#pragma once

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "harness.h"
#include "options.h"
#include "report.h"
#include "status.h"
#include "world.h"

namespace cfx::perf {

// Process-wide state, written before the rank threads start and read-only afterwards (except comms[t], which
// thread t fills itself with -p 1, and progress[t], which only thread t writes).
struct ProcessContext {
  const Options* options;
  const World* world;
  const Collective* collective;
  const char* programName;
  Report* report;  // prints only on global rank 0
  ncclUniqueId id;
  int ncclVersion;
  std::vector<ncclComm_t> comms;                   // one per thread
  std::vector<std::atomic<int64_t>>* progress;  // per thread: a count of steps taken, bumped as it goes
  long long rssAtStart;
};

// The verdict of a finished run, identical on every rank.
struct RankOutcome {
  int outOfBounds = 0;           // job-wide count of (rank, check) pairs that found wrong elements
  bool bandwidthFailed = false;  // average busbw < 0.9 * NCCL_TESTS_MIN_BW
};

// Runs every test of this rank, footer included (printed by global rank 0).
TestResult runRank(ProcessContext* ctx, int thread, RankOutcome* outcome);

}  // namespace cfx::perf
