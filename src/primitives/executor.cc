// SPDX-License-Identifier: Apache-2.0
// The spin-then-block executor (primitives layer).
#include "primitives/executor.h"

#include "common/log.h"

namespace cfx::prims {

std::string Work::describe() const {
  if (peer >= 0) return strprintf("%s between rank %d and rank %d", what, rank, peer);
  return strprintf("%s opCount %llx on rank %d", what, static_cast<unsigned long long>(opCount), rank);
}

namespace {

// Resumes `w` (or starts it). The coroutine runs until it parks on a verb that cannot finish yet, or ends.
void resume(Work& w) {
  std::coroutine_handle<> h = w.resumeAt;
  w.waiting = nullptr;
  w.children = nullptr;
  w.resumeAt = {};
  h.resume();
}

// Calls fn(work) for every unfinished Work parked on a verb: the top-level ones and the strands they await.
template <typename Fn>
void forEachParked(const Work& w, Fn& fn) {
  if (w.finished()) return;
  if (w.children) {
    for (const Work& c : *w.children) forEachParked(c, fn);
  } else if (w.waiting) {
    fn(w);
  }
}

template <typename Fn>
void forEachParked(const std::vector<Work*>& works, Fn fn) {
  for (const Work* w : works) forEachParked(*w, fn);
}

// Whether a parked verb could move now (the executor looks before it sleeps, and again after peeking the ends).
bool anyParkedReady(const std::vector<Work*>& works) {
  bool ready = false;
  forEachParked(works, [&](const Work& w) { ready = ready || w.waiting->ready(); });
  return ready;
}

Status timeoutError(const std::vector<Work*>& works, std::chrono::milliseconds waited) {
  std::string what;
  forEachParked(works, [&](const Work& w) {
    what += strprintf("%s%s: %s", what.empty() ? "" : "; ", w.describe().c_str(), w.waiting->describe().c_str());
  });
  return Status::error(Errc::Timeout,
                       strprintf("timeout after %lld ms without progress: %s. The peer named is slow, hung or "
                                 "was never started; raise CFX_TIMEOUT_MS if it is only slow",
                                 static_cast<long long>(waited.count()), what.c_str()));
}

// The peer and Work a data-path error is blamed on, so the health monitor can be told which rank broke.
struct Culprit {
  int peer = -1;
  const Work* work = nullptr;
};

// Asks the ends each parked Work is blocked on whether their peers still live. Only a blocking end counts: a
// peer that finished its part of the op and tore down (legal: its data already sits in our FIFO) must not fail
// a transfer that is waiting on some other peer. Nor may one that did so between the look and the check: a peer
// posts its last message (or reads the last one it was sent) and exits, and the check then finds it gone with
// the message waiting. So an end whose peer is gone is looked at once more, after the check.
Status checkPeers(const std::vector<Work*>& works, Culprit* culprit) {
  Status st;
  forEachParked(works, [&](const Work& w) {
    if (!st.ok()) return;
    const Transfer& t = *w.waiting;
    size_t bytes = 0;
    uint64_t tag = 0;
    *culprit = {t.recvPeer, &w};
    auto recvBlocked = [&] { return t.recv->tryPeek(&bytes, &tag) == nullptr; };
    if (t.needsRecv() && t.recv && recvBlocked()) {
      st = t.recv->check();
      if (!st.ok() && !recvBlocked()) st = Status();
    }
    if (!st.ok()) return;
    // A sender blocks on a full FIFO, or (single-copy) on the receiver releasing the descriptor slot.
    *culprit = {t.sendPeer, &w};
    auto sendBlocked = [&] { return t.directPosted ? !t.send->drained() : t.send->tryAcquire() == nullptr; };
    if (t.needsSend() && t.send && sendBlocked()) {
      st = t.send->check();
      if (!st.ok() && !sendBlocked()) st = Status();
    }
  });
  if (st.ok()) *culprit = {};
  return st;
}

// A collective's message no op of this rank will read, found at the head of a collective-channel FIFO while a
// stamped verb (op_stamp.h) waits: one of an op this rank finished (all of an op's messages are read by the op), or
// one of this op with a different kind. Either is a mismatched call whose messages went to ranks that do not wait
// for them, so the receives that would see it may never run (a Reduce on one rank where the others all-reduce).
// A message of a later op is a peer running ahead and is left alone.
Status checkStrays(const std::vector<Work*>& works, transport::Endpoints& endpoints) {
  Status st;
  forEachParked(works, [&](const Work& w) {
    const Transfer& t = *w.waiting;
    if (!st.ok() || tagKind(t.tag) == 0) return;
    const auto& ends = endpoints.recv[transport::kCollChannel];
    for (size_t peer = 0; peer < ends.size() && st.ok(); ++peer) {
      size_t bytes = 0;
      uint64_t tag = 0;
      if (ends[peer] == nullptr || ends[peer]->tryPeek(&bytes, &tag) == nullptr) continue;
      const uint32_t behind = (tagSeq(t.tag) - tagSeq(tag)) & kTagSeqMask;
      const bool finished = behind != 0 && behind <= kTagSeqMask / 2;
      if (!finished && (behind != 0 || tagKind(tag) == tagKind(t.tag))) continue;
      const std::string detail = finished ? "its message waits unread from an op this rank finished"
                                          : "its message waits unread beside the one this rank expects";
      st = Status::error(Errc::InvalidUsage,
                         describeMismatch(static_cast<int>(peer), tag, t.tag, t.naming, detail));
    }
  });
  return st;
}

// The error every survivor returns once the monitor knows of failed ranks: it names all of them (rank, host, pid,
// cause, who saw it and during which operation) and this rank's own unfinished operation and sequence number.
Status failedRanksError(const std::vector<Work*>& works, const ft::HealthMonitor& health) {
  std::string here;
  for (const Work* w : works) {
    if (w->finished()) continue;
    here += (here.empty() ? "" : "; ") + w->describe();
    std::string verbs;
    auto add = [&](const Work& p) { verbs += (verbs.empty() ? "" : ", ") + p.waiting->describe(); };
    forEachParked(*w, add);
    if (!verbs.empty()) here += " (" + verbs + ")";
  }
  return Status::error(Errc::RemoteError,
                       strprintf("%s. Unfinished here: %s. Abort the communicator, or shrink it without the failed "
                                 "rank(s)",
                                 health.describeFailures().c_str(), here.c_str()));
}

// How long a data-path error waits for a failure notice that may explain it. A peer that saw another rank fail
// sends its notice before it can close anything, so on a LAN the notice is queued already; this covers a
// scheduler delay of the monitor thread, and it is paid only by the rank that detects a failure first-hand.
constexpr std::chrono::milliseconds kNoticeGrace{25};

// The least time between two peer checks at the start of stalls (see execute()), per thread and across calls, so
// that the first stall of an op is checked unless this thread checked moments ago.
constexpr std::chrono::milliseconds kStallCheckInterval{20};
thread_local Deadline::Clock::time_point tlLastStallCheck{};
// What this thread's waits may spin, learnt across its ops (common/doorbell.h): an op over a slow network waits
// about a slot's time at every step, and spinning through each of those held a CPU for a third of the op (a 4 MiB
// all-reduce on the 1 Gbit/s bed: 12.5-13.8 ms of CPU per call with the full spin, 6.3 ms without it).
thread_local SpinBudget tlSpinBudget;

// A data-path failure (RemoteError) on `culprit`: the named failure if the monitor knows one, or else the
// culprit is the failed rank, and every survivor is told so.
Status blame(const std::vector<Work*>& works, Status st, const Culprit& culprit, ft::HealthMonitor* health) {
  if (health == nullptr || st.code() != Errc::RemoteError) return st;
  if (!health->awaitFailure(kNoticeGrace)) {
    if (culprit.peer < 0) return st;
    const Work* w = culprit.work;
    (void)health->report(culprit.peer, ft::FailureReason::ConnectionLost, st.message(), w ? w->what : "",
                         w ? w->opCount : 0);
  }
  return failedRanksError(works, *health);
}

// The peer and Work a failed transfer is blamed on, if the transfer failed; see execute().
struct DriveResult {
  bool progressed = false;
  Culprit failedTransfer;
};

// Moves `w` on as far as it can go now: progresses the verb it is parked on, or its strands, and resumes it each
// time what it waits on has finished.
void drive(Work& w, DriveResult& out) {
  while (!w.finished()) {
    if (w.children) {
      for (Work& c : *w.children) drive(c, out);
      if (!joinDone(*w.children)) return;
    } else if (w.waiting) {
      if (w.waiting->progress()) out.progressed = true;
      if (!w.waiting->finished()) return;
      if (!w.waiting->error.ok()) {
        out.failedTransfer = {w.waiting->needsRecv() ? w.waiting->recvPeer : w.waiting->sendPeer, &w};
      }
    } else {
      return;  // not started: execute() starts top-level Works, Parallel starts strands
    }
    resume(w);
    out.progressed = true;
  }
}

}  // namespace

void startWork(Work& w) {
  w.started = true;
  w.task.handle().promise().work = &w;  // nested tasks inherit it when awaited
  w.resumeAt = w.task.handle();
  resume(w);
}

bool joinDone(const std::vector<Work>& children) {
  bool all = true;
  for (const Work& c : children) {
    if (!c.finished()) all = false;
    else if (!c.task.status().ok()) return true;
  }
  return all;
}

int yieldInterval(const Placement& placement) {
  constexpr int kShared = 1;
  constexpr int kNever = 0;
  constexpr int kNowAndThen = 64;
  if (placement.pinnedCpu >= 0) {
    for (int cpu : placement.peerPinnedCpus) {
      if (cpu == placement.pinnedCpu) return kShared;
    }
    // No peer can need this CPU. A yield would only hand it to some other program for a whole time slice
    // (milliseconds on a loaded machine) while the peer's data arrives; the spin limit still puts us to sleep.
    return kNever;
  }
  return placement.localRanks > placement.allowedCpus ? kShared : kNowAndThen;
}

Status execute(std::vector<Work*>& works, const ExecOptions& options) {
  for (Work* w : works) {
    if (!w->started) startWork(*w);
  }
  // Where ranks outnumber the CPUs every failed poll yields: the spin hands the CPU to whoever needs it rather than
  // holding it, and a sleep would make the peer pay a futex wake per message (a 4-rank 8-byte all-reduce on 2 CPUs
  // took 9.4-11.8 us against 8.5-10.0 us with a learnt budget). So the full spin stays there.
  Backoff backoff(options.spins, options.yieldEvery, options.yieldEvery == 1 ? nullptr : &tlSpinBudget);
  // The clock is read only once a poll finds nothing to do, not per op or per progress: two clock reads were a
  // tenth of a small all-reduce. So the deadline runs from the first idle poll after the last progress.
  Deadline::Clock::time_point lastCheck{};
  Deadline::Clock::time_point lastProgress{};
  Deadline deadline;  // measured from the last progress, not from the start
  bool clockStale = true;
  // The doorbell as of the last peer check. It is not re-read at every progress: peers ring with an atomic
  // increment, and a read here pulled the doorbell's cache line to this core after every message, so every ring
  // missed in the ringer's cache (a quarter of a 2-rank 4 KiB all-to-all). `seqStale` says the next sleep adopts
  // the value it sees; a ring that comes while this rank is busy is then caught by the stall check below.
  uint32_t checkedSeq = options.doorbell->read();
  bool seqStale = false;
  bool stallChecked = false;  // peers were asked since the last progress
  for (;;) {
    DriveResult driven;
    bool allDone = true;
    for (Work* w : works) {
      // A parked Work whose transfer finished (or failed) resumes; its coroutine sees the verb's Status.
      drive(*w, driven);
      if (!w->finished()) {
        allDone = false;
      } else if (!w->task.status().ok()) {
        return blame(works, w->task.status(), driven.failedTransfer, options.health);
      }
    }
    const bool progressed = driven.progressed;
    if (allDone) return Status();
    if (options.abortFlag && options.abortFlag->load(std::memory_order_acquire)) {
      // Acquire pairs with the release store in Communicator::abort(): no verb is started after it.
      // A survivor that failed first often shrinks (NCCL_SHRINK_ABORT) at once, and its revoke can overtake this
      // rank's own detection: the failure it already gossiped is the cause to name, not the revoke.
      if (options.health != nullptr) {
        options.health->pollNow();
        if (options.health->failedCount() > 0) return failedRanksError(works, *options.health);
      }
      return Status::error(Errc::RemoteError, "operation aborted by ncclCommAbort/ncclCommRevoke on this communicator");
    }
    if (options.health && options.health->failedCount() > 0) return failedRanksError(works, *options.health);
    if (progressed) {
      seqStale = true;
      stallChecked = false;
      backoff.reset();
      clockStale = true;
      continue;
    }
    if (clockStale) {
      clockStale = false;
      lastProgress = Deadline::Clock::now();
      if (lastCheck == Deadline::Clock::time_point{}) lastCheck = lastProgress;
      deadline = Deadline(options.timeout);
    }
    if (!backoff.spin()) continue;

    // Event count: read the doorbell, re-check every parked transfer, then sleep only if nothing changed.
    const uint32_t seq = options.doorbell->read();
    if (seqStale) {
      seqStale = false;
      checkedSeq = seq;
    }
    if (anyParkedReady(works)) continue;
    if (deadline.expired()) {
      return timeoutError(works, std::chrono::duration_cast<std::chrono::milliseconds>(Deadline::Clock::now() -
                                                                                        lastProgress));
    }
    // Ask the ends whether their peers live: after a ring that made nothing ready (a transport may be reporting its
    // peer gone: the tcp proxy rings when a connection dies), at the first sleep of a stall (that ring may have come
    // while this rank was still busy), and every checkInterval. A stall's check is rate-limited because an shm check
    // reads /proc: a rank in a tight loop of small ops stalls thousands of times a second.
    const auto interval = std::chrono::duration_cast<std::chrono::microseconds>(options.checkInterval);
    const auto beforeCheck = Deadline::Clock::now();
    const bool stallCheck = !stallChecked && beforeCheck - tlLastStallCheck >= kStallCheckInterval;
    if (seq != checkedSeq || stallCheck || beforeCheck - lastCheck >= options.checkInterval) {
      checkedSeq = seq;
      stallChecked = true;
      lastCheck = beforeCheck;
      tlLastStallCheck = beforeCheck;
      Culprit culprit;
      if (Status st = checkPeers(works, &culprit); !st.ok()) return blame(works, std::move(st), culprit, options.health);
      if (options.endpoints != nullptr) CFX_TRY(checkStrays(works, *options.endpoints));
      // The checks peek the ends, and a peek of an owner-driven link may read its socket on this thread (tcp
      // inline I/O): what that published rang no doorbell, so `seq` would not see it. Sleeping on it cost every
      // rank a whole checkInterval, a few times in a hundred 256 KiB all-reduces on host lanes across hosts.
      if (anyParkedReady(works)) continue;
    }
    options.doorbell->wait(seq, deadline.remaining(interval));
  }
}

}  // namespace cfx::prims
