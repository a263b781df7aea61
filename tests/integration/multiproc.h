// SPDX-License-Identifier: Apache-2.0
// Fork-based launcher for integration tests: one process per rank, driven through the public C API only.
// The parent never calls into libnccl; rank 0's child creates the unique id and the parent relays it.
#pragma once

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cfx::itest {

using namespace std::chrono_literals;

struct RunOptions {
  // Wall-clock limit for the whole job; scaled by CFX_TEST_TIMEOUT_SCALE (sanitizer runs set it).
  std::chrono::milliseconds timeout = 60s;
  // Environment set in every child before fn runs (e.g. {"CFX_TIMEOUT_MS", "5000"}).
  std::vector<std::pair<std::string, std::string>> env;
  // When false, runRanks leaves judging exits, crashes and timeouts to the caller (fault tests).
  bool failOnChildError = true;
};

// What the parent learned about one rank.
struct RankOutcome {
  int rank = -1;
  bool exited = false;        // exited normally; exitCode is valid
  int exitCode = -1;
  int termSignal = 0;         // killed by this signal (0 if none)
  bool timedOut = false;      // still running at the deadline, then killed by the launcher
  bool deathExpected = false; // the rank announced killSelf()
  std::string lastNote;       // last RankContext::note() text: where a hung rank was
  std::vector<std::string> failures;
  std::map<std::string, std::string> reports;  // RankContext::report(key, bytes)

  bool ok() const { return exited && exitCode == 0 && failures.empty() && !timedOut; }
  std::string describe() const;
};

struct RunResult {
  std::vector<RankOutcome> ranks;
  bool timedOut = false;
  std::chrono::milliseconds elapsed{0};

  bool ok() const;
  int terminationSignal(int rank) const { return ranks.at(rank).termSignal; }
  const std::string& report(int rank, const std::string& key) const;
  // True when every rank reported the same bytes under key (and all reported it).
  bool allReportsEqual(const std::string& key) const;
};

// Handed to fn inside each child. Collective helpers (barrier, allGather, broadcast, uniqueId, initComm)
// must be called by every rank in the same order; they are relayed by the parent over pipes.
class RankContext {
 public:
  RankContext(int rank, int nRanks, int upFd, int downFd) : rank_(rank), nRanks_(nRanks), upFd_(upFd), downFd_(downFd) {}

  int rank() const { return rank_; }
  int nRanks() const { return nRanks_; }

  // The job's unique id: created by rank 0 with ncclGetUniqueId on first use, then shared. Collective.
  ncclUniqueId uniqueId();
  // A fresh id for another communicator (rank 0 calls ncclGetUniqueId). Collective.
  ncclUniqueId newUniqueId();
  // ncclCommInitRank(nRanks, uniqueId(), rank). Records a failure and returns nullptr on error. Collective.
  ncclComm_t initComm();

  // Returns false (and records a failure) if a peer exited before reaching the barrier.
  bool barrier();
  std::vector<std::string> allGather(std::string_view bytes);
  std::string broadcast(int root, std::string_view bytes);

  // Stores bytes in the parent's RankOutcome::reports[key] (e.g. a result hash).
  void report(std::string_view key, std::string_view bytes);
  // Tells the parent what this rank is doing now; printed if the job times out.
  void note(std::string_view text);
  // Records a failure without gtest (gtest expectation failures are forwarded automatically).
  void fail(std::string_view message);
  // Announces an intended death, then raises sig.
  [[noreturn]] void killSelf(int sig);

  // Internal: used by the gtest listener and the launcher.
  void sendFrame(unsigned type, std::string_view payload);
  int failureCount() const { return failures_.load(); }
  void countFailure() { ++failures_; }

 private:
  bool exchange(unsigned type, std::string_view payload, std::string* reply);

  int rank_;
  int nRanks_;
  int upFd_;
  int downFd_;
  std::atomic<int> failures_{0};  // gtest may fail from helper threads
  std::mutex sendMutex_;          // frames from several threads must not interleave
  bool haveId_ = false;
  ncclUniqueId id_{};
};

// Forks nRanks children, runs fn(ctx) in each, waits for all of them (or the timeout), reaps everything.
// Unless options.failOnChildError is false, each failed/crashed/hung rank becomes a gtest failure naming it.
RunResult runRanks(int nRanks, const RunOptions& options, const std::function<void(RankContext&)>& fn);
inline RunResult runRanks(int nRanks, const std::function<void(RankContext&)>& fn) {
  return runRanks(nRanks, RunOptions{}, fn);
}

// Starts `body` as process number `pid` (1, or 2 behind a pid 1 that only waits) of a new pid namespace, as a
// container gives a rank, in a child of the calling process, and returns that child (-1 when fork failed). Call it
// from one thread while no other runs (a fork copies locks other threads hold, and UCX's memory hooks take one on
// every mmap). The namespace dies with the caller.
pid_t startInNewPidNamespace(pid_t pid, const std::function<int()>& body);
// Reaps such a child: the body's exit status (128 + signal when killed), or kNoPidNamespace where this process may
// not make pid namespaces (no CAP_SYS_ADMIN).
constexpr int kNoPidNamespace = 77;
int waitForPidNamespace(pid_t child);
// For ranks started so, which have no launcher to hand them an id: rank 0 makes one and writes it into `pipe` once
// for each of the other nRanks - 1 ranks, which read it. False when any step failed.
bool shareUniqueIdThroughPipe(int rank, int nRanks, const int pipe[2], ncclUniqueId* id);
// ThreadSanitizer cannot run a rank at the end of such a chain of forks (its runtime refuses new threads in a child
// of a process that had threads), so tests built on it skip under TSan.
#if defined(__SANITIZE_THREAD__)
#define SKIP_UNDER_TSAN_FORK_CHAINS() \
  GTEST_SKIP() << "ThreadSanitizer does not support threads after a multi-threaded fork"
#else
#define SKIP_UNDER_TSAN_FORK_CHAINS() \
  do {                                \
  } while (0)
#endif

// True when CFX_TEST_QUICK=1 (sanitizer runs): sweeps shrink but keep every collective and op.
bool quickMode();

// 128-bit FNV-1a style hash for comparing result buffers across ranks.
class Hash128 {
 public:
  void update(const void* data, size_t bytes);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::string digest() const;  // 32 hex characters

 private:
  unsigned __int128 state_ = (static_cast<unsigned __int128>(0x6c62272e07bb0142ULL) << 64) | 0x62b821756295c58dULL;
};

// "ncclInvalidArgument" style names for messages.
const char* resultName(ncclResult_t rc);

}  // namespace cfx::itest
