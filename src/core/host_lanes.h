// SPDX-License-Identifier: Apache-2.0
// A communicator's lanes for host-stream work (core layer): up to CFX_HOST_LANES communicators that carry its
// asynchronous host ops side by side, so that separate async ops of one communicator overlap one another.
//
// Why lanes: one communicator's links must carry its ops in the same order on every rank (a receiver that meets
// another op's message at a FIFO head fails the tag check, and buffering unexpected messages would be unbounded),
// and which queued jobs are ready at a given moment differs between ranks. So the progress queue runs one job at a
// time. Lane 0 is the communicator itself; lanes 1..K-1 are internal duplicates of it (like a split with every rank
// in one color and its own rank: their own bootstrap, transport connections, health monitor and progress thread). A
// host-stream launch takes lane n mod K, n counting the communicator's host-stream launches: every rank issues the
// same calls in the same order (NCCL's rule), so every rank picks the same lane for the same op, and each lane's
// links carry its ops in call order. Ops of one stream still run in stream order: a job depends on its stream's
// tail whatever lane that ran on.
//
// Lanes share the parent's compression state (residuals, default codec, statistics: Communicator::compression()),
// its stop cause (an op on a lane of an aborted or revoked parent fails with the parent's cause) and its async
// error (a lane's error becomes the parent's). Abort, revoke, finalize and destroy of the parent reach its lanes.
// Lanes are never handed to the user.
//
// Which launches take lanes (launchOps in group.cc, Communicator::takesHostLanes): a launch on a cfx host stream that
// holds collectives only, on one blocking communicator, on host memory. The rest keep the communicator's own queue:
// - membership communicators, whose launches must agree outcomes (they run on the calling thread anyway);
// - device ops, ordered on their CUDA streams through the queue's gates;
// - groups over several communicators, which one thread drives for several ranks, so it cannot block in a split;
// - sends and receives: one rank often posts its side on a host stream and the peer its side blocking, and such a
//   launch counted on one rank and not the other would send every later launch to different lanes on the two;
// - non-blocking communicators, whose calls must not block in a split.
// The counting thus asks one thing beyond NCCL's rule: every rank issues a given collective on a host stream or none
// does (SPMD programs do). Where ranks differ once the lanes exist, ops on lanes meet ops of other calls, whose
// numbers (nextCall, taken at launch) differ, and fail as mismatched calls; before, one rank makes lanes while
// another waits in an op, until the timeouts. CFX_HOST_LANES=1 keeps one queue.
//
// Threading: pick() and the state bookkeeping are called by the thread issuing calls on the parent (NCCL's one
// thread per communicator); stopWork(), abort() and announceExit() from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "common/status.h"
#include "core/progress_queue.h"

namespace cfx::core {

class Communicator;
struct Op;

// CFX_HOST_LANES, read when a communicator is created (CommOptions::hostLanes); 0 is "automatic".
int readHostLanes();

// The lanes an automatic CFX_HOST_LANES gives, and the round trip from which it gives them.
inline constexpr int kAutoHostLanes = 4;
inline constexpr double kAutoHostLanesRttSeconds = 1.5e-3;
// The lane count a communicator uses: `configured` when set (> 0); else kAutoHostLanes where the longest round trip
// between its hosts (`netRttSeconds`, the same on every rank) is kAutoHostLanesRttSeconds or more, and 1 otherwise.
// Why: an op that mostly waits on a long path leaves room for others beside it, but on one host or a short path
// an op is limited by the CPUs or the link, and lanes only add connections that sit idle between their turns
// (docs/notes/wan_training.md has the measurements).
int resolveHostLanes(int configured, double netRttSeconds);

class HostLanes {
 public:
  // Out of line: the lanes are held by unique_ptr, whose destructor needs Communicator complete.
  explicit HostLanes(Communicator& parent);
  ~HostLanes();
  HostLanes(const HostLanes&) = delete;
  HostLanes& operator=(const HostLanes&) = delete;

  // The communicator the parent's next host-stream launch runs on: lane n mod K. Lanes 1..K-1 are made together
  // the first time one is picked, on the calling thread and collectively (see host_lanes.cc). Errors: those of making
  // the lanes, which also break the parent (its async error), since its peers may have made theirs.
  Result<Communicator*> pick();

  // The next host collective's sequence number on the parent, whatever lane runs it (group.cc, hostCallSeq).
  uint32_t nextCall() { return ++calls_; }

  // Library state that ops touch beyond their buffers (an error-feedback residual, a delta broadcast's state): two
  // ops on different lanes must not use one at the same time, and must use it in call order, as one queue did.
  // The jobs that last used the state of `ops` and are not done; the next job on that state waits for them.
  std::vector<std::shared_ptr<JobState>> stateUsers(const std::vector<const Op*>& ops);
  // Records `job` as the last user of the state of `ops`.
  void noteStateUser(const std::vector<const Op*>& ops, const std::shared_ptr<JobState>& job);

  // The parent stopped (revoke, a peer's revoke, a mismatched call): every lane's running and queued work stops at
  // its next poll, and fails with the parent's cause. Never blocks for long.
  void stopWork();
  // The parent aborts: every lane stops its work first (so no lane's teardown waits on another's op), then aborts.
  void abort();
  // Waits until every lane's queued jobs have finished (finalize, destroy, revoke).
  void drain();
  // The process exits with the parent alive (Communicator::announceExit): the same for every lane.
  void announceExit();
  // Destroys the lanes: each lets its queued jobs finish first, as the parent's own queue does.
  void clear();

 private:
  Status makeAll(size_t k);
  // Calls fn on every lane, under the lock.
  template <class Fn>
  void forEach(Fn&& fn);

  Communicator& parent_;
  uint64_t launches_ = 0;  // the parent's host-stream launches so far; calling thread only
  uint32_t calls_ = 0;     // the parent's host collectives so far; calling thread only
  std::mutex mutex_;       // guards lanes_ against stopWork/abort/announceExit from other threads
  std::vector<std::unique_ptr<Communicator>> lanes_;           // [k] is lane k, [0] empty (the parent); all or none
  std::map<const void*, std::weak_ptr<JobState>> stateUsers_;  // calling thread only
};

}  // namespace cfx::core
