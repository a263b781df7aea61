// SPDX-License-Identifier: Apache-2.0
// A same-host peer as seen through its mapped segment: who it is (for messages) and whether it is still there
// (for check()) (transport layer, shm transport).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>

#include "common/status.h"
#include "transport/shm/shm_layout.h"
#include "transport/shm/shm_segment.h"

namespace cfx::transport::shm {

// This process: pid, start time and pid namespace, as peers will see them.
ProcessIdentity selfIdentity();

enum class ProcessState {
  Alive,   // running, or at least not known to be gone
  Exited,  // no such process, a zombie, or the pid now belongs to a process started later
};

// Probes `pid` in this process's pid namespace: /proc/<pid>/stat (state and start time), or kill(pid, 0) where
// /proc cannot be read. `startTime` 0 skips the pid-reuse test.
ProcessState probeProcess(pid_t pid, uint64_t startTime);

// Owns (shares) the mapping of the peer's segment; ends to and from the peer keep it alive through this object.
class ShmPeer {
 public:
  ShmPeer(int rank, std::string hostName, std::shared_ptr<ShmSegment> segment, const ProcessIdentity& self);

  int rank() const { return rank_; }
  pid_t pid() const { return identity_.pid; }
  const ProcessIdentity& identity() const { return identity_; }
  const std::string& hostName() const { return hostName_; }
  void* base() const { return segment_->data(); }
  SegmentHeader& header() const { return *static_cast<SegmentHeader*>(segment_->data()); }

  // Ok while the peer has not closed its transport and its process is alive; afterwards RemoteError naming the
  // peer's rank, host and pid, for good (the answer is sticky). Thread-safe. Costs one read of /proc/<pid>/stat,
  // a few microseconds: fine every ~100 ms, not in a spin loop. Peers in another pid namespace (containers
  // sharing /dev/shm) cannot be probed by pid; for them only the closed flag counts.
  Status check() const;

 private:
  enum Gone : int { kNotGone = 0, kClosed = 1, kExited = 2 };

  int rank_;
  std::string hostName_;
  std::shared_ptr<ShmSegment> segment_;
  ProcessIdentity identity_;
  bool probeByPid_;
  // Sticky verdict. Relaxed: it only caches what check() derives; every thread re-derives the same answer anyway.
  mutable std::atomic<int> gone_{kNotGone};
};

}  // namespace cfx::transport::shm
