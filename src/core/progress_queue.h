// SPDX-License-Identifier: Apache-2.0
// A communicator's progress queue (core layer): asynchronous (host-stream and device) jobs in call order, graph
// replays beside them, and the progress thread that runs both. What a job runs, and what a failure means for the
// communicator, the owner says through the hooks it passes at construction.
//
// Threading: every member may be called from any thread; the thread starts with the first job and stops in stop().
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/status.h"
#include "primitives/executor.h"

namespace cfx::core {

// Completion state of one unit of asynchronous work; shared by the job, its stream and waiters.
struct JobState {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  Status status;
  void finish(Status st);
  Status wait();
  bool isDone();
};

// A job whose works are built on the progress thread, between two hooks: `before` (its inputs become ready),
// `build`, then the works, then `after` with the outcome, which runs whatever happened before it. `ready`, when set,
// says whether `before` can start now (a device job's stream reached it); the progress thread runs graph replays
// while the job at the head of the queue is not ready, and whoever makes it ready calls wake().
struct DeferredJob {
  std::function<Status()> before;
  std::function<Result<std::vector<std::unique_ptr<prims::Work>>>()> build;
  std::function<void(const Status&)> after;
  std::function<bool()> ready;
};

class ProgressQueue {
 public:
  // How the owner runs a job's works (on the progress thread), and what it does when a job with an `after` hook (a
  // device job: nobody waits on its state) failed.
  using RunFn = std::function<Status(std::vector<prims::Work*>&)>;
  using FailFn = std::function<void(const Status&)>;
  // `abortFlag`: set, a head job runs at once (its hooks then fail fast) and replays are refused.
  ProgressQueue(int rank, const std::atomic<bool>& abortFlag, RunFn run, FailFn deviceJobFailed);
  ~ProgressQueue() { stop(); }
  ProgressQueue(const ProgressQueue&) = delete;
  ProgressQueue& operator=(const ProgressQueue&) = delete;

  // Queues a job; it starts once every dependency is done (and its `ready`, if any).
  std::shared_ptr<JobState> enqueue(DeferredJob job, std::vector<std::shared_ptr<JobState>> deps = {});
  // A replay of an op captured in a CUDA graph, queued once the stream reached it (so it is ready). Replays run
  // before a queued job whose stream has not reached it yet, which on one stream is exactly stream order. False
  // (nothing queued) once stopping or aborted.
  bool enqueueReplay(DeferredJob job);
  void wake();
  // True while queued or running work exists.
  bool busy();
  // Waits until every queued job has finished.
  void drain();
  // Lets the thread finish what is queued, then joins it. Idempotent.
  void stop();

 private:
  struct Job {
    std::vector<std::unique_ptr<prims::Work>> works;
    std::vector<std::shared_ptr<JobState>> deps;
    std::shared_ptr<JobState> state;
    DeferredJob deferred;
  };
  void loop();
  void run(Job& job);

  const int rank_;
  const std::atomic<bool>& abortFlag_;
  RunFn run_;
  FailFn deviceJobFailed_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::deque<Job> replays_;  // graph replays whose streams reached them (enqueueReplay)
  size_t busyJobs_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace cfx::core
