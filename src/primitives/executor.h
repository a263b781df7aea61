// SPDX-License-Identifier: Apache-2.0
// Executor (primitives layer): runs Works — root algorithm coroutines — on the calling thread until they
// finish, fail, time out or are aborted.
//
// Waiting: the executor spins for a short while when no transfer can move, then sleeps on the rank's
// Doorbell, which every transport rings when it makes progress possible. Users run more ranks than cores,
// so a waiting rank must give its core to the peer it waits for.
//
// Failure: while sleeping, the executor asks the ends it waits on whether their peers are still alive
// (every checkInterval) and watches the abort flag; past the deadline it fails with Timeout naming the
// peer and the verb each Work waits on. A failed Work fails the whole run: the communicator is then broken.
// With a health monitor, every failure is named by the failed rank rather than by whichever neighbour this rank
// happened to wait on: any failure the monitor knows of ends the run at once (it rings the doorbell), and a peer
// the data path finds gone is first checked against notices already queued (it may have closed only because it
// saw another rank fail) before it is reported to the monitor as the failed rank.
#pragma once

#include <atomic>
#include <chrono>
#include <coroutine>
#include <string>
#include <vector>

#include "common/doorbell.h"
#include "common/status.h"
#include "faulttol/health_monitor.h"
#include "primitives/prims.h"
#include "primitives/coro.h"

namespace cfx::prims {

// One independent stream of algorithm code, e.g. the collectives of one group on one communicator.
struct Work {
  Coro task;
  // What this Work is, for timeout messages only, so nothing is formatted on the fast path:
  // "<what> opCount <opCount> on rank <rank>" or, with peer >= 0, "<what> between rank <rank> and rank <peer>".
  const char* what = "";
  uint64_t opCount = 0;
  int rank = -1;
  int peer = -1;
  std::string describe() const;
  Transfer* waiting = nullptr;           // the verb the innermost coroutine is parked on
  std::vector<Work>* children = nullptr; // or the strands it awaits (prims::Parallel); never both
  std::coroutine_handle<> resumeAt;      // the coroutine to resume when `waiting` or `children` finish
  bool started = false;

  bool finished() const { return task.done(); }
};

// Starts `w`'s task on this thread; it runs until it parks on a verb or on children, or ends.
void startWork(Work& w);
// True once every child finished, or one of them failed (the parent then resumes without waiting for the rest).
bool joinDone(const std::vector<Work>& children);

struct ExecOptions {
  Doorbell* doorbell = nullptr;                 // this rank's doorbell
  const std::atomic<bool>* abortFlag = nullptr; // set by ncclCommAbort/Revoke from any thread
  int spins = 2000;                             // failed polls before sleeping
  int yieldEvery = 64;                          // failed polls between sched_yield()s; 1 when a peer may need our
                                                // CPU, 0 never (yieldInterval)
  std::chrono::milliseconds checkInterval{200}; // how often a sleeping rank checks that its peers live
  std::chrono::milliseconds timeout{0};         // fail after this long without any progress; 0 = never
  ft::HealthMonitor* health = nullptr;          // the communicator's; null in unit tests without one
  // The communicator's ends, whose collective channel a stalled rank scans for messages of ops it finished or of a
  // different kind of op (strays): a mismatch the receives it waits on may never see. Null: no scan.
  transport::Endpoints* endpoints = nullptr;
};

// Where a rank runs, for the waiting policy: `pinnedCpu` is the one CPU this rank may run on (-1 when it may run on
// several), `allowedCpus` how many CPUs its affinity mask holds, `peerPinnedCpus` the same for every other rank on
// this host, `localRanks` how many ranks this host runs (this one included).
struct Placement {
  int pinnedCpu = -1;
  int allowedCpus = 1;
  std::vector<int> peerPinnedCpus;
  int localRanks = 1;
};

// ExecOptions::yieldEvery for a placement: 1 (yield on every failed poll) when a peer is pinned to our CPU, or when
// we are not pinned and this host runs more ranks than we have CPUs, so the peer we wait for may be waiting for our
// CPU; 0 (never) when we are pinned and no peer shares our CPU; otherwise 64 (the scheduler may still put a peer
// on our CPU now and then).
int yieldInterval(const Placement& placement);

// Runs `works` to completion. Returns the first failure (Timeout after options.timeout without progress,
// RemoteError, InvalidUsage for mismatched calls, SystemError) or Ok.
Status execute(std::vector<Work*>& works, const ExecOptions& options);

}  // namespace cfx::prims
