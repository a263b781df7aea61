// SPDX-License-Identifier: Apache-2.0
// A communicator's lanes for host-stream work (core layer); see host_lanes.h.
#include "core/host_lanes.h"

#include <algorithm>

#include "common/log.h"
#include "common/param.h"
#include "core/communicator.h"
#include "core/group.h"
#include "core/lifecycle.h"

namespace cfx::core {

namespace {

// 4: Streaming DiLoCo keeps a few fragments' all-reduces in flight at once (and the Python package's async_op calls
// each get a stream of their own), and over a long-RTT link each op spends most of its time waiting, so up to four
// overlap before the links themselves are the limit. A lane is made only when first picked, but the picks go round
// robin, so a program with two host-stream ops or more pays for all K-1 lanes: one split each, once, and a
// communicator's transport buffers and threads each (docs/notes/wan_training.md has the figures).
CFX_PARAM(int, hostLanesParam, "CFX_HOST_LANES", 4,
          "Lanes for a communicator's asynchronous collectives (on cfx host streams, as the Python package's "
          "async_op=True issues them): launch n of collectives on a host stream runs on lane n mod CFX_HOST_LANES, "
          "each lane an internal duplicate of the communicator with its own connections and progress thread, so that "
          "separate async collectives overlap one another (the ops of one stream still run in order). 1: one queue, "
          "each async op of a communicator after the previous one. A lane is made the first time a launch picks it "
          "(one blocking split, collective). Sends and receives, device buffers and groups over several "
          "communicators keep the one queue. Must be the same on every rank, and every rank must issue a given "
          "collective on a host stream or none must (else set 1).",
          param::inRange(1, 16));

// The ops' library-kept state that a job reads and writes while it runs.
template <class Fn>
void forEachState(const std::vector<const Op*>& ops, Fn&& fn) {
  for (const Op* op : ops) {
    if (op->kind != Op::Kind::Coll) continue;
    if (op->args.compress != nullptr && op->args.compress->residual != nullptr) fn(op->args.compress->residual);
    if (op->args.delta != nullptr) fn(op->args.delta.get());
  }
}

}  // namespace

int readHostLanes() { return hostLanesParam.get(); }

// Making lane k on the thread that issues the launch, collectively, is safe because every rank reaches that launch
// (NCCL's rule: the same calls in the same order), and NCCL allows any call to block until the other ranks arrive,
// which is why a thread driving several ranks must group their calls (and such groups keep the single queue). It
// costs one blocking split per lane, once per communicator: an allGather over the parent's bootstrap and a new
// communicator's setup (bootstrap, connections, health), a few round trips between the ranks.
Result<Communicator*> HostLanes::pick() {
  const auto k = static_cast<uint64_t>(std::max(parent_.options().hostLanes, 1));
  const size_t lane = static_cast<size_t>(launches_++ % k);
  if (lane == 0) return &parent_;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (lane < lanes_.size() && lanes_[lane]) return lanes_[lane].get();
  }
  Result<Communicator*> made = make(lane);
  if (!made.ok()) {
    const Status st = Status::error(made.status().code(), strprintf("rank %d: could not make host-stream lane %zu: %s",
                                                                    parent_.rank(), lane,
                                                                    made.status().message().c_str()));
    parent_.setAsyncError(st);
    return st;
  }
  return made;
}

Result<Communicator*> HostLanes::make(size_t lane) {
  CommConfig config = parent_.config();
  config.commName += strprintf("%shost-lane-%zu", config.commName.empty() ? "" : ":", lane);
  // The lane plans as the parent does (the same bits whichever lane an op runs on): the parent's agreed
  // calibration rather than a measurement of its own, and no second topology dump.
  CommOptions options = parent_.options();
  options.topology.dumpFile.clear();
  options.topology.calibrate = false;
  options.topology.agreed = parent_.agreedCalibration();
  CFX_TRY_ASSIGN(std::unique_ptr<Communicator> made, splitComm(parent_, 0, parent_.rank(), config, options));
  made->becomeLaneOf(&parent_);
  Communicator* raw = made.get();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // An abort that came while the lane was being made found no lane to stop: it is stopped here instead. The flag
    // is set before abort() takes the lock, so one of the two sides sees the other.
    if (!parent_.abortFlag().load(std::memory_order_acquire)) {
      if (lanes_.size() <= lane) lanes_.resize(lane + 1);
      lanes_[lane] = std::move(made);
    }
  }
  if (made) {
    made->abort();
    return Status::error(Errc::InvalidUsage, parent_.stopCause());
  }
  CFX_INFO(log::Sys::Init, "comm %p rank %d: host-stream lane %zu of %d is comm %p", static_cast<void*>(&parent_),
           parent_.rank(), lane, parent_.options().hostLanes, static_cast<void*>(raw));
  return raw;
}

std::vector<std::shared_ptr<JobState>> HostLanes::stateUsers(const std::vector<const Op*>& ops) {
  std::vector<std::shared_ptr<JobState>> users;
  forEachState(ops, [&](const void* key) {
    auto it = stateUsers_.find(key);
    if (it == stateUsers_.end()) return;
    if (std::shared_ptr<JobState> job = it->second.lock(); job && !job->isDone()) users.push_back(std::move(job));
  });
  return users;
}

void HostLanes::noteStateUser(const std::vector<const Op*>& ops, const std::shared_ptr<JobState>& job) {
  bool any = false;
  forEachState(ops, [&](const void* key) {
    stateUsers_[key] = job;
    any = true;
  });
  if (!any || stateUsers_.size() < 64) return;
  // Bounded by the buffers with work in flight: entries of finished jobs go.
  for (auto it = stateUsers_.begin(); it != stateUsers_.end();) {
    const std::shared_ptr<JobState> user = it->second.lock();
    it = !user || user->isDone() ? stateUsers_.erase(it) : std::next(it);
  }
}

std::vector<Communicator*> HostLanes::live() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Communicator*> out;
  for (auto& lane : lanes_) {
    if (lane) out.push_back(lane.get());
  }
  return out;
}

void HostLanes::stopWork() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& lane : lanes_) {
    if (lane) lane->stopWork();
  }
}

void HostLanes::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& lane : lanes_) {
    if (lane) lane->stopWork();
  }
  for (auto& lane : lanes_) {
    if (lane) lane->abort();
  }
}

// Only the thread issuing calls adds or removes lanes, and it is the one draining: the pointers stay valid.
void HostLanes::drain() {
  for (Communicator* lane : live()) (void)lane->drain();
}

void HostLanes::announceExit() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& lane : lanes_) {
    if (lane) lane->announceExit();
  }
}

void HostLanes::clear() {
  std::vector<std::unique_ptr<Communicator>> lanes;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    lanes.swap(lanes_);
  }
  lanes.clear();  // outside the lock: each lane's destructor waits for its queued jobs
}

}  // namespace cfx::core
