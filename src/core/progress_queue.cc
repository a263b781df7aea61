// SPDX-License-Identifier: Apache-2.0
// A communicator's progress queue and thread (core layer).
#include "core/progress_queue.h"

#include <pthread.h>

#include <chrono>
#include <cstdio>

#include "common/log.h"

namespace cfx::core {

// ---- JobState ----

void JobState::finish(Status st) {
  std::lock_guard<std::mutex> lock(mutex);
  status = std::move(st);
  done = true;
  cv.notify_all();
}

Status JobState::wait() {
  std::unique_lock<std::mutex> lock(mutex);
  cv.wait(lock, [this] { return done; });
  return status;
}

bool JobState::isDone() {
  std::lock_guard<std::mutex> lock(mutex);
  return done;
}

// ---- the queue ----

ProgressQueue::ProgressQueue(int rank, const std::atomic<bool>& abortFlag, RunFn run, FailFn deviceJobFailed)
    : rank_(rank), abortFlag_(abortFlag), run_(std::move(run)), deviceJobFailed_(std::move(deviceJobFailed)) {}

std::shared_ptr<JobState> ProgressQueue::enqueue(DeferredJob deferred, std::vector<std::shared_ptr<JobState>> deps) {
  auto state = std::make_shared<JobState>();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    Job job;
    job.deps = std::move(deps);
    job.state = state;
    job.deferred = std::move(deferred);
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
  return state;
}

bool ProgressQueue::enqueueReplay(DeferredJob deferred) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || abortFlag_.load(std::memory_order_acquire)) return false;
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    Job job;
    job.state = std::make_shared<JobState>();
    job.deferred = std::move(deferred);
    replays_.push_back(std::move(job));
  }
  cv_.notify_all();
  return true;
}

void ProgressQueue::wake() {
  // Taking the lock orders this wake after the progress thread's last look at the queue: no lost wake-up.
  { std::lock_guard<std::mutex> lock(mutex_); }
  cv_.notify_all();
}

bool ProgressQueue::busy() {
  std::lock_guard<std::mutex> lock(mutex_);
  return !queue_.empty() || !replays_.empty() || busyJobs_ > 0;
}

void ProgressQueue::loop() {
  char name[16];  // Linux thread names hold 15 characters
  std::snprintf(name, sizeof(name), "cfx-prog-%u", static_cast<unsigned>(rank_) % 100000u);
  pthread_setname_np(pthread_self(), name);
  log::setThreadRank(rank_);
  // Which job runs next: the head of the queue once its stream reached it (or the communicator aborted: its hooks
  // then fail fast), else a graph replay (its stream is there already, and on one stream it comes before the head).
  // A head whose stream has not reached it is never started early, even when stopping: a replay may be what its
  // stream waits for.
  enum class Next { None, Head, Replay };
  auto next = [this] {
    if (!queue_.empty()) {
      const DeferredJob& head = queue_.front().deferred;
      if (!head.ready || head.ready() || abortFlag_.load(std::memory_order_acquire)) return Next::Head;
    }
    return replays_.empty() ? Next::None : Next::Replay;
  };
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      const auto start = std::chrono::steady_clock::now();
      Next which = next();
      while (which == Next::None) {
        if (stopping_ && queue_.empty()) return;  // stopping and drained
        if (cv_.wait_for(lock, std::chrono::seconds(10)) == std::cv_status::timeout && !queue_.empty()) {
          // No deadline (a stream may run long kernels first), but a person debugging a hang must see where.
          CFX_INFO(
              log::Sys::Proxy,
              "rank %d: a device op still waits for its CUDA stream to reach it (%lld s); the "
              "stream is busy with earlier work",
              rank_,
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start).count()));
        }
        which = next();
      }
      std::deque<Job>& from = which == Next::Head ? queue_ : replays_;
      job = std::move(from.front());
      from.pop_front();
      ++busyJobs_;
    }
    run(job);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --busyJobs_;
    }
    cv_.notify_all();
  }
}

void ProgressQueue::run(Job& job) {
  Status st;
  for (auto& dep : job.deps) {
    Status depSt = dep->wait();
    if (!depSt.ok() && st.ok()) st = Status::error(depSt.code(), "an earlier operation on the stream failed: " + depSt.message());
  }
  if (st.ok() && job.deferred.before) st = job.deferred.before();
  if (st.ok() && job.deferred.build) {
    auto built = job.deferred.build();
    if (built.ok()) job.works = std::move(built).value();
    else st = built.status();
  }
  if (st.ok()) {
    std::vector<prims::Work*> works;
    for (auto& w : job.works) works.push_back(w.get());
    st = run_(works);
  }
  job.works.clear();
  if (job.deferred.after) job.deferred.after(st);
  if (!st.ok() && job.deferred.after) deviceJobFailed_(st);
  job.state->finish(st);
}

void ProgressQueue::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return queue_.empty() && replays_.empty() && busyJobs_ == 0; });
}

void ProgressQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace cfx::core
