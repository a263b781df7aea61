// SPDX-License-Identifier: Apache-2.0
// A communicator's lanes for host-stream work (core layer); see host_lanes.h.
#include "core/host_lanes.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <thread>

#include "common/log.h"
#include "common/param.h"
#include "core/communicator.h"
#include "core/group.h"
#include "transport/bootstrap/bootstrap.h"

namespace cfx::core {

namespace {

constexpr uint64_t kLaneTagBase = 0x484c000000000000ull;  // "HL": the bootstrap tag of the lanes' ids

// Automatic (0) by default: lanes where an op mostly waits on the path (Streaming DiLoCo keeps a few fragments'
// all-reduces in flight at once over a long round trip, and the Python package's async_op calls each get a stream of
// their own), one queue where ops are limited by the CPUs or the link (resolveHostLanes). The lanes are made only
// when a launch first picks one (launch 1), but then all together, so a program with two host-stream launches or
// more pays for K-1 of them: their setups once (side by side), and a communicator's transport buffers and threads
// each (docs/notes/wan_training.md).
CFX_PARAM(int, hostLanesParam, "CFX_HOST_LANES", 0,
          "Lanes for a communicator's asynchronous collectives (on cfx host streams, as the Python package's "
          "async_op=True and the torch backend issue them): launch n of collectives on a host stream runs on lane n "
          "mod CFX_HOST_LANES, each lane an internal duplicate of the communicator with its own connections and "
          "progress thread, so that separate async collectives overlap one another (the ops of one stream still run "
          "in order). 1: one queue, each async op of a communicator after the previous one. 0 (automatic): 4 where "
          "the longest round trip between the communicator's hosts, as the tcp transport measures it at connect, is "
          "1.5 ms or more, else 1 (one host, a short path, or ucx). The lanes are made when a launch first picks one "
          "(launch 1: every rank makes them together, once). Sends and receives, device buffers and groups over "
          "several communicators keep the one queue. Must be the same on every rank (making a communicator refuses "
          "otherwise), and with more than one lane every rank must issue a given collective on a host stream or "
          "none must.",
          param::inRange(0, 16));

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

HostLanes::HostLanes(Communicator& parent) : parent_(parent) {}

HostLanes::~HostLanes() { clear(); }

int resolveHostLanes(int configured, double netRttSeconds) {
  if (configured > 0) return configured;
  return netRttSeconds >= kAutoHostLanesRttSeconds ? kAutoHostLanes : 1;
}

// Making the lanes on the thread that issues the launch, collectively, is safe because every rank reaches that launch
// (NCCL's rule: the same calls in the same order), and NCCL allows any call to block until the other ranks arrive,
// which is why a thread driving several ranks must group their calls (and such groups keep the one queue). All K-1
// lanes are made at the first launch that picks one (launch 1): the picks go round robin, so a program that reaches
// lane 1 soon reaches the others, and their setups then overlap. It costs, once per communicator, one message from
// rank 0 over the parent's bootstrap (the lanes' ids) and K-1 communicator setups side by side (bootstrap,
// connections, health: a few round trips between the ranks; docs/notes/wan_training.md has the figure).
Result<Communicator*> HostLanes::pick() {
  const auto k = static_cast<size_t>(std::max(parent_.options().hostLanes, 1));
  const auto lane = static_cast<size_t>(launches_++ % k);
  if (lane == 0) return &parent_;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (lane < lanes_.size()) return lanes_[lane].get();
  }
  if (Status st = makeAll(k); !st.ok()) {
    st = Status::error(st.code(), strprintf("rank %d: could not make the host-stream lanes: %s", parent_.rank(),
                                            st.message().c_str()));
    parent_.setAsyncError(st);
    return st;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  return lanes_[lane].get();
}

Status HostLanes::makeAll(size_t k) {
  using transport::UniqueId;
  // One message from rank 0 to every rank: the K-1 lanes' ids, each with its bootstrap root in rank 0's process.
  const uint64_t tag = kLaneTagBase | parent_.nextSplitCount();
  std::vector<uint8_t> wire((k - 1) * UniqueId::kBytes);
  // Why the parent can no longer make lanes: aborted, or failed (a peer died or stopped; its health monitor says so
  // within its heartbeat deadline). The waits below give up on it rather than on the bootstrap's timeout.
  const auto parentStop = [this]() -> Status {
    const bool aborted = parent_.abortFlag().load(std::memory_order_acquire);
    if (!aborted && parent_.asyncError() == Errc::Ok) return Status();
    const std::string cause = parent_.stopCause();
    return cause.empty() ? parent_.asyncStatus() : Status::error(Errc::InvalidUsage, cause);
  };
  if (parent_.rank() == 0) {
    for (size_t i = 0; i + 1 < k; ++i) {
      CFX_TRY_ASSIGN(const UniqueId id, transport::createUniqueId(parent_.options().bootstrap.options));
      id.encode(wire.data() + i * UniqueId::kBytes);
    }
    for (int r = 1; r < parent_.nRanks(); ++r) {
      CFX_TRY(parent_.blameFailedRank(parent_.bootstrap().send(r, tag, wire.data(), wire.size())));
    }
  } else {
    // Rank 0 may close before it sends them because it gave up on a peer that died: the error names that peer. A
    // rank 0 that stopped keeps its connection open, and heartbeats name it.
    CFX_TRY(parent_.blameFailedRank(parent_.bootstrap().recv(0, tag, wire.data(), wire.size(), parentStop)));
  }
  CommConfig config = parent_.config();
  if (!config.commName.empty()) config.commName += ":";
  config.commName += "host-lane";
  // Lanes plan as the parent does (the same bits whichever lane an op runs on): the parent's agreed calibration
  // rather than a measurement of their own, and no second topology dump.
  CommOptions options = parent_.options();
  options.topology.dumpFile.clear();
  options.topology.calibrate = false;
  options.topology.agreed = parent_.agreedCalibration();
  // Made on threads of their own, which have no current CUDA context: lanes carry host memory only, so they set up
  // no device scratch (every rank's lanes alike). This thread watches the parent meanwhile: once it fails (a peer
  // died: its health monitor says so within its heartbeat deadline) or stops, the setups give up at once instead of
  // waiting for that peer until the bootstrap's timeout.
  const size_t n = k - 1;
  std::vector<std::unique_ptr<Communicator>> made(n);
  std::vector<Status> results(n);
  std::mutex m;
  std::condition_variable cv;
  std::vector<Communicator*> pending(n, nullptr);  // under m; alive until its thread is joined
  size_t running = n;                              // under m
  bool stopped = false;                            // under m
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      log::setThreadRank(parent_.rank());
      std::unique_ptr<Communicator> lane = Communicator::createPending(parent_.rank(), parent_.nRanks(), config);
      {
        std::lock_guard<std::mutex> lock(m);
        pending[i] = lane.get();
        if (stopped) lane->stopInit();
      }
      Result<UniqueId> id = UniqueId::decode(wire.data() + i * UniqueId::kBytes);
      results[i] = id.ok() ? lane->finishInit(*id, options) : id.status();
      std::lock_guard<std::mutex> lock(m);
      made[i] = std::move(lane);
      --running;
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(m);
    while (running > 0) {
      cv.wait_for(lock, std::chrono::milliseconds(20));
      if (!stopped && !parentStop().ok()) {
        stopped = true;
        for (Communicator* lane : pending) {
          if (lane != nullptr) lane->stopInit();
        }
      }
    }
  }
  for (std::thread& t : threads) t.join();
  if (stopped) return parentStop();
  for (Status& st : results) CFX_TRY(std::move(st));    // the lanes made meanwhile are destroyed on the way out
  std::vector<std::unique_ptr<Communicator>> lanes(1);  // [0]: the parent
  for (auto& lane : made) {
    lanes.push_back(std::move(lane));
    lanes.back()->becomeLaneOf(&parent_);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // An abort that came while the lanes were being made found none to stop: they are stopped here instead. The
    // flag is set before abort() takes the lock, so one of the two sides sees the other.
    if (!parent_.abortFlag().load(std::memory_order_acquire)) {
      lanes_ = std::move(lanes);
      CFX_INFO(log::Sys::Init, "comm %p rank %d: %zu host-stream lanes made", static_cast<void*>(&parent_),
               parent_.rank(), k - 1);
      return Status();
    }
  }
  for (size_t i = 1; i < lanes.size(); ++i) lanes[i]->abort();
  return Status::error(Errc::InvalidUsage, parent_.stopCause());
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

template <class Fn>
void HostLanes::forEach(Fn&& fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& lane : lanes_) {
    if (lane) fn(*lane);
  }
}

void HostLanes::stopWork() {
  forEach([](Communicator& lane) { lane.stopWork(); });
}

void HostLanes::abort() {
  forEach([](Communicator& lane) { lane.stopWork(); });
  forEach([](Communicator& lane) { lane.abort(); });
}

// Only the thread issuing calls adds or removes lanes, and it is the one draining: the lanes stay, and drain() waits
// outside the lock, which abort() may need meanwhile.
void HostLanes::drain() {
  std::vector<Communicator*> lanes;
  forEach([&](Communicator& lane) { lanes.push_back(&lane); });
  for (Communicator* lane : lanes) (void)lane->drain();
}

void HostLanes::announceExit() {
  forEach([](Communicator& lane) { lane.announceExit(); });
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
