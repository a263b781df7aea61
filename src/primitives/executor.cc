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
  w.resumeAt = {};
  h.resume();
}

Status timeoutError(const std::vector<Work*>& works, std::chrono::milliseconds waited) {
  std::string what;
  for (const Work* w : works) {
    if (w->finished() || !w->waiting) continue;
    what += strprintf("%s%s: %s", what.empty() ? "" : "; ", w->describe().c_str(), w->waiting->describe().c_str());
  }
  return Status::error(Errc::Timeout,
                       strprintf("timeout after %lld ms without progress: %s. The peer named is slow, hung or "
                                 "was never started; raise CFX_TIMEOUT_MS if it is only slow",
                                 static_cast<long long>(waited.count()), what.c_str()));
}

// Asks the ends each parked Work is blocked on whether their peers still live. Only a blocking end counts: a
// peer that finished its part of the op and tore down (legal: its data already sits in our FIFO) must not fail
// a transfer that is waiting on some other peer.
Status checkPeers(const std::vector<Work*>& works) {
  for (const Work* w : works) {
    if (w->finished() || !w->waiting) continue;
    const Transfer& t = *w->waiting;
    size_t bytes = 0;
    uint64_t tag = 0;
    if (t.needsRecv() && t.recv && t.recv->tryPeek(&bytes, &tag) == nullptr) CFX_TRY(t.recv->check());
    // A sender blocks on a full FIFO, or (single-copy) on the receiver releasing the descriptor slot.
    const bool sendBlocked = t.directPosted ? !t.send->drained() : t.send && t.send->tryAcquire() == nullptr;
    if (t.needsSend() && t.send && sendBlocked) CFX_TRY(t.send->check());
  }
  return Status();
}

}  // namespace

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
    if (!w->started) {
      w->started = true;
      w->task.handle().promise().work = w;  // nested tasks inherit it when awaited
      w->resumeAt = w->task.handle();
      resume(*w);
    }
  }
  Backoff backoff(options.spins, options.yieldEvery);
  // The clock is read only once a poll finds nothing to do, not per op or per progress: two clock reads were a
  // tenth of a small all-reduce. So the deadline runs from the first idle poll after the last progress.
  Deadline::Clock::time_point lastCheck{};
  Deadline::Clock::time_point lastProgress{};
  Deadline deadline;  // measured from the last progress, not from the start
  bool clockStale = true;
  for (;;) {
    bool progressed = false;
    bool allDone = true;
    for (Work* w : works) {
      // A parked Work whose transfer finished (or failed) resumes; its coroutine sees the verb's Status.
      while (!w->finished() && w->waiting) {
        if (w->waiting->progress()) progressed = true;
        if (!w->waiting->finished()) break;
        resume(*w);
        progressed = true;
      }
      if (!w->finished()) {
        allDone = false;
      } else if (!w->task.status().ok()) {
        return w->task.status();
      }
    }
    if (allDone) return Status();
    if (options.abortFlag && options.abortFlag->load(std::memory_order_acquire)) {
      // Acquire pairs with the release store in Communicator::abort(): no verb is started after it.
      return Status::error(Errc::RemoteError, "operation aborted by ncclCommAbort/ncclCommRevoke on this communicator");
    }
    if (progressed) {
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
    bool anyReady = false;
    for (Work* w : works) {
      if (!w->finished() && w->waiting && w->waiting->ready()) anyReady = true;
    }
    if (anyReady) continue;
    if (deadline.expired()) {
      return timeoutError(works, std::chrono::duration_cast<std::chrono::milliseconds>(Deadline::Clock::now() -
                                                                                        lastProgress));
    }
    const auto interval = std::chrono::duration_cast<std::chrono::microseconds>(options.checkInterval);
    options.doorbell->wait(seq, deadline.remaining(interval));
    const auto now = Deadline::Clock::now();
    if (now - lastCheck >= options.checkInterval) {
      lastCheck = now;
      CFX_TRY(checkPeers(works));
    }
  }
}

}  // namespace cfx::prims
