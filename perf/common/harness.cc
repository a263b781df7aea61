// SPDX-License-Identifier: Apache-2.0
// perf harness: the process around the ranks. Parses flags, finds the world, creates the id and (with -p 0)
// all of this process's communicators in one group, runs one thread per rank, and turns the outcome into
// nccl-tests' exit status. A failing rank ends the whole process at once (its peers then see the connection
// drop): with one thread blocked in a collective there is no clean way to unwind the others.
#include "harness.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "options.h"
#include "report.h"
#include "runner.h"
#include "status.h"
#include "world.h"

namespace cfx::perf {

void reportNcclFailure(ncclResult_t result, const char* file, int line) {
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  const char* last = ncclGetLastError(nullptr);
  fprintf(stderr, "%s: Test NCCL failure %s:%d '%s / %s'\n", host, file, line, ncclGetErrorString(result),
          last ? last : "");
}

void reportFailureTrail(const char* file, int line) {
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  fprintf(stderr, " .. %s pid %d: Test failure %s:%d\n", host, static_cast<int>(getpid()), file, line);
}

namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kDone = INT64_MAX;  // progress value of a thread that has finished

[[noreturn]] void exitNow(TestResult result) {
  fflush(stdout);
  fflush(stderr);
  _exit(static_cast<int>(result));
}

// -T: if some rank makes no progress (no op returned) for timeoutSec, abort every communicator of this process
// and exit with testTimeout, as nccl-tests does when its stream wait expires.
class Watchdog {
 public:
  Watchdog(ProcessContext* ctx, int timeoutSec) : ctx_(ctx), timeoutNs_(int64_t{timeoutSec} * 1000000000) {
    if (timeoutSec > 0) thread_ = std::thread([this] { loop(); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop() {
    std::vector<int64_t> seen(ctx_->progress->size(), -1);
    std::vector<int64_t> since(seen.size(), Clock::now().time_since_epoch().count());
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stop_; })) {
      int64_t now = Clock::now().time_since_epoch().count();
      for (size_t t = 0; t < seen.size(); ++t) {
        // Relaxed: pairs with Rank::beat(); a count, nothing else is published through it.
        const int64_t count = (*ctx_->progress)[t].load(std::memory_order_relaxed);
        if (count == kDone) continue;
        if (count != seen[t]) {
          seen[t] = count;
          since[t] = now;
        } else if (now - since[t] > timeoutNs_) {
          fire();
        }
      }
    }
  }

  [[noreturn]] void fire() {
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    fprintf(stderr, "%s: Test timeout (%llds) %s:%d\n", host, static_cast<long long>(timeoutNs_ / 1000000000), __FILE__,
            __LINE__);
    alarm(10);  // ncclCommAbort must not hang; if it does, SIGALRM ends the process anyway
    for (ncclComm_t comm : ctx_->comms) {
      if (comm) (void)ncclCommAbort(comm);
    }
    exitNow(TestResult::Timeout);
  }

  ProcessContext* ctx_;
  int64_t timeoutNs_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

const char* baseName(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

}  // namespace

int runBenchmark(int argc, char** argv, const Collective& collective) {
  setlinebuf(stdout);
  const char* programName = baseName(argv[0]);
  Options options;
  int exitCode = 0;
  if (!parseOptions(argc, argv, programName, &options, &exitCode)) return exitCode;

  World world;
  TestResult res = detectWorld(options, &world);  // exports NCCL_COMM_ID: before any NCCL call
  if (res != TestResult::Success) return static_cast<int>(res);
  if (collective.needsPowerOfTwo && (world.nRanks & (world.nRanks - 1)) != 0) {
    if (world.proc == 0)
      fprintf(stderr, "%s needs a power-of-two number of ranks, got %d\n", programName, world.nRanks);
    return static_cast<int>(TestResult::InvalidUsage);
  }

  ProcessContext ctx{};
  ctx.options = &options;
  ctx.world = &world;
  ctx.collective = &collective;
  ctx.programName = programName;
  ctx.rssAtStart = residentBytes();
  if (ncclGetVersion(&ctx.ncclVersion) != ncclSuccess) ctx.ncclVersion = 0;

  JsonWriter json;
  const bool mainProcess = world.proc == 0;
  if (mainProcess && !options.outputFile.empty()) json.open(options.outputFile);
  Report report(options, mainProcess, &json);
  report.jsonPreamble(argc, argv, ctx.ncclVersion);
  ctx.report = &report;

  std::vector<std::atomic<int64_t>> progress(options.nThreads);
  for (auto& p : progress) p.store(0, std::memory_order_relaxed);
  ctx.progress = &progress;
  ctx.comms.assign(options.nThreads, nullptr);
  Watchdog watchdog(&ctx, options.timeoutSec);

  auto fail = [](TestResult r, const char* file, int line) {
    reportFailureTrail(file, line);
    exitNow(r);
  };
  // With NCCL_COMM_ID set (several processes) every process builds the same id from the address.
  if (ncclResult_t r = ncclGetUniqueId(&ctx.id); r != ncclSuccess) {
    reportNcclFailure(r, __FILE__, __LINE__);
    fail(TestResult::NcclError, __FILE__, __LINE__);
  }
  if (!options.parallelInit) {
    res = initComms(options, world, ctx.id, 0, options.nThreads, ctx.comms.data());
    if (res != TestResult::Success) fail(res, __FILE__, __LINE__);
  }

  std::vector<RankOutcome> outcomes(options.nThreads);
  auto rankMain = [&](int t) {
    TestResult r = runRank(&ctx, t, &outcomes[t]);
    if (r != TestResult::Success) fail(r, __FILE__, __LINE__);
    // Relaxed: the watchdog only needs to stop watching this thread.
    progress[t].store(kDone, std::memory_order_relaxed);
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < options.nThreads; ++t) threads.emplace_back(rankMain, t);
  rankMain(0);
  for (std::thread& th : threads) th.join();

  report.errors(ncclGetLastError(nullptr));
  const RankOutcome& o = outcomes[0];
  return (o.outOfBounds || o.bandwidthFailed) ? static_cast<int>(TestResult::NumResults) : 0;
}

}  // namespace cfx::perf
