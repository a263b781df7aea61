// SPDX-License-Identifier: Apache-2.0
// Peer failure through the public C API (fault tests): a rank is killed, stopped, leaves early or never arrives,
// and every survivor must get a named error within a bound instead of a hang, then abort or shrink cleanly.
#include "integration/multiproc.h"
#include "integration/nccl_checks.h"

#include <dirent.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <conflux.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

namespace cfx::itest {
namespace {

using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC: comparable across the forked ranks

constexpr int kMaxRanks = 8;
constexpr size_t kBigCount = size_t{4} << 20;  // 16 MiB of float: many slices, so no survivor can finish alone
constexpr int kFaultTimeoutMs = 3000;          // CFX_TIMEOUT_MS inside the ranks of the fault scenarios
// Heartbeats inside the ranks: a stopped rank is declared hung after 5 x 200 ms, well before CFX_TIMEOUT_MS, so the
// hung rank itself is named rather than whichever neighbour a survivor timed out on.
constexpr int kHeartbeatMs = 200;
constexpr int kHeartbeatMisses = 5;
constexpr double kDetectBoundMs = 20000;       // a survivor's error must come within this, whatever the cause
constexpr double kHungMarginMs = 7000;         // a stopped peer: CFX_TIMEOUT_MS plus this (2 shared cores, CI load)

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}
double msBetween(int64_t fromNs, int64_t toNs) { return static_cast<double>(toNs - fromNs) / 1e6; }

// Shared by the parent and every rank: an anonymous MAP_SHARED mapping made before the fork. Every field is a
// lock-free atomic, so a rank dying at any point leaves nothing locked.
struct SharedBlock {
  std::atomic<int> pids[kMaxRanks];
  std::atomic<int64_t> faultNs;    // when the victim was about to fail (steady clock), 0 before
  std::atomic<int> survivorsDone;  // survivors past their checks
};
static_assert(std::atomic<int64_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free);

struct Transport {
  const char* name;
  bool tcp;  // NCCL_SHM_DISABLE=1: every pair talks TCP over loopback
  int nSocks = 0;  // CFX_TCP_NSOCKS: stripe every link over this many sockets (0: the default)
};

void PrintTo(const Transport& t, std::ostream* os) { *os << t.name; }

// What a survivor saw from the operation that should fail.
struct Observed {
  ncclResult_t rc = ncclSuccess;
  std::string text;     // ncclGetLastError right after the failure
  double opMs = 0;      // from the call to the error
  double detectMs = 0;  // from the fault to the error
};

// One all-reduce that cannot complete. A blocking call that returns ncclSuccess anyway is followed by polling
// ncclCommGetAsyncError (NCCL's other way to report it), bounded by kDetectBoundMs.
Observed allReduceExpectingError(ncclComm_t comm, std::vector<float>& send, std::vector<float>& recv,
                                 const SharedBlock& shared) {
  Observed o;
  const int64_t start = nowNs();
  o.rc = ncclAllReduce(send.data(), recv.data(), send.size(), ncclFloat, ncclSum, comm, nullptr);
  if (o.rc == ncclSuccess) {
    o.rc = waitForAsyncError(comm, std::chrono::milliseconds(static_cast<int64_t>(kDetectBoundMs)));
  }
  const int64_t end = nowNs();
  const char* last = ncclGetLastError(nullptr);
  o.text = last ? last : "";
  o.opMs = msBetween(start, end);
  const int64_t fault = shared.faultNs.load();
  o.detectMs = fault > 0 ? msBetween(fault, end) : o.opMs;
  return o;
}

void reportObserved(RankContext& ctx, const Observed& o) {
  char line[128];
  std::snprintf(line, sizeof(line), "%s after %.0f ms (call %.0f ms)", resultName(o.rc), o.detectMs, o.opMs);
  ctx.report("observed", line);
  ctx.report("text", o.text);
}

// Counts a survivor as done on every way out of its body (an early ASSERT return included). The last one
// SIGKILLs a stopped victim (SIGKILL ends a stopped process; SIGCONT for good measure), so the launcher reaps it
// now instead of at its timeout. The launcher's timeout is the backstop if a survivor crashes.
class SurvivorDone {
 public:
  SurvivorDone(SharedBlock& shared, int survivors, int stoppedVictim)
      : shared_(shared), survivors_(survivors), stoppedVictim_(stoppedVictim) {}
  ~SurvivorDone() {
    if (shared_.survivorsDone.fetch_add(1) + 1 != survivors_ || stoppedVictim_ < 0) return;
    const int pid = shared_.pids[stoppedVictim_].load();
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::kill(pid, SIGCONT);
    }
  }
  SurvivorDone(const SurvivorDone&) = delete;
  SurvivorDone& operator=(const SurvivorDone&) = delete;

 private:
  SharedBlock& shared_;
  int survivors_;
  int stoppedVictim_;
};

enum class Fault { Kill, Stop, Leave };           // SIGKILL, SIGSTOP, or ncclCommDestroy and _exit(0)
enum class Naming { AnySurvivor, EverySurvivor };  // whose WARN must name the failed rank

// cfxCommGetFailures on a survivor: the victim is the first (and only) failed rank, for the right reason.
void expectFailureRecord(ncclComm_t comm, int victim, Fault fault) {
  cfxFailureInfo info[4];
  int n = -1;
  ASSERT_EQ(cfxCommGetFailures(comm, info, 4, &n), ncclSuccess);
  ASSERT_EQ(n, 1) << "exactly one failed rank";
  EXPECT_EQ(info[0].rank, victim);
  EXPECT_NE(info[0].detectedBy, victim);
  EXPECT_GT(info[0].pid, 0);
  EXPECT_NE(info[0].host[0], '\0');
  EXPECT_NE(info[0].text[0], '\0');
  switch (fault) {
    case Fault::Stop:
      EXPECT_EQ(info[0].reason, cfxFailureHung) << info[0].text;
      break;
    case Fault::Kill:  // seen exiting on this host or its connection dropping; on a crawling machine (sanitizers)
                       // its heartbeats may be missed first
      EXPECT_TRUE(info[0].reason == cfxFailureExited || info[0].reason == cfxFailureConnectionLost ||
                  info[0].reason == cfxFailureHung)
          << info[0].text;
      break;
    case Fault::Leave:  // it left on purpose: only a transfer that still needed it makes it a failure
      EXPECT_EQ(info[0].reason, cfxFailureConnectionLost) << info[0].text;
      break;
  }
  int count = -1;
  EXPECT_EQ(cfxCommGetFailures(comm, nullptr, 0, &count), ncclSuccess);
  EXPECT_EQ(count, n);
  EXPECT_EQ(cfxCommGetFailures(comm, nullptr, 1, &count), ncclInvalidArgument);
  EXPECT_EQ(cfxCommGetFailures(comm, info, -1, &count), ncclInvalidArgument);
  EXPECT_EQ(cfxCommGetFailures(comm, info, 1, nullptr), ncclInvalidArgument);
}

class PeerFailureTest : public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override {
    void* p = ::mmap(nullptr, sizeof(SharedBlock), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED) << std::strerror(errno);
    shared_ = new (p) SharedBlock{};
  }
  void TearDown() override {
    if (shared_ != nullptr) ::munmap(shared_, sizeof(SharedBlock));
  }

  RunOptions options(int timeoutMs) const {
    RunOptions o;
    o.timeout = std::chrono::seconds(45);
    o.env = {{"CFX_TIMEOUT_MS", std::to_string(timeoutMs)},
             {"CFX_HEARTBEAT_MS", std::to_string(kHeartbeatMs)},
             {"CFX_HEARTBEAT_MISSES", std::to_string(kHeartbeatMisses)}};
    if (GetParam().tcp) o.env.emplace_back("NCCL_SHM_DISABLE", "1");
    if (GetParam().nSocks > 0) o.env.emplace_back("CFX_TCP_NSOCKS", std::to_string(GetParam().nSocks));
    return o;
  }

  // In a rank, first thing: the parent checks for leftover processes and segments by these pids.
  void registerRank(const RankContext& ctx) { shared_->pids[ctx.rank()].store(static_cast<int>(::getpid())); }

  // In a rank, before a scenario's fault: registers it, makes the communicator and shows it healthy (an all-reduce,
  // then a barrier of the job). nullptr, with the failure recorded, when any of that fails.
  ncclComm_t healthyComm(RankContext& ctx, int nRanks) {
    registerRank(ctx);
    ncclComm_t comm = ctx.initComm();
    if (comm == nullptr) return nullptr;
    expectAllReduceSum(comm, 1, nRanks);
    if (ctx.barrier()) return comm;
    ADD_FAILURE() << "rank " << ctx.rank() << ": the barrier before the fault failed";
    (void)ncclCommAbort(comm);
    return nullptr;
  }

  RunResult runFault(Fault fault, int nRanks, int victim, Naming naming);
  void runShrinkAfterKill(int flags, bool revokeFirst = false);
  void printObserved(const RunResult& result, const char* scenario) const;
  void expectNoLeftovers(int nRanks) const;

  SharedBlock* shared_ = nullptr;
};

void PeerFailureTest::printObserved(const RunResult& result, const char* scenario) const {
  for (const auto& r : result.ranks) {
    const std::string& seen = result.report(r.rank, "observed");
    if (seen.empty()) continue;
    std::printf("[%s/%s] rank %d: %s", GetParam().name, scenario, r.rank, seen.c_str());
    const std::string& abortMs = result.report(r.rank, "abortMs");
    if (!abortMs.empty()) std::printf("; abort %s ms", abortMs.c_str());
    const std::string& recoverMs = result.report(r.rank, "recoverMs");
    if (!recoverMs.empty()) std::printf("; fault to good op on the shrunk comm %s ms", recoverMs.c_str());
    std::printf("\n    %s\n", result.report(r.rank, "text").c_str());
  }
}

// Every rank's process is gone and reaped, and no shared-memory segment any of them created is left in /dev/shm
// (names are /cfx-<creator pid>-<rank>-<random>; other tests running alongside have other pids).
void PeerFailureTest::expectNoLeftovers(int nRanks) const {
  std::vector<int> pids;
  for (int r = 0; r < nRanks; ++r) {
    const int pid = shared_->pids[r].load();
    EXPECT_GT(pid, 0) << "rank " << r << " never started its body";
    if (pid <= 0) continue;
    pids.push_back(pid);
    errno = 0;
    EXPECT_EQ(::kill(pid, 0), -1) << "rank " << r << " (pid " << pid << ") is still alive after the job";
    EXPECT_EQ(errno, ESRCH) << "rank " << r << " (pid " << pid << ")";
  }
  int status = 0;
  errno = 0;
  EXPECT_EQ(::waitpid(-1, &status, WNOHANG), -1) << "a child process of the test is left unreaped";
  EXPECT_EQ(errno, ECHILD);
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return;  // no /dev/shm: shm segments cannot exist either
  std::vector<std::string> leaked;
  while (const dirent* e = ::readdir(dir)) {
    int creator = 0;
    if (std::sscanf(e->d_name, "cfx-%d-", &creator) != 1) continue;
    for (int pid : pids) {
      if (pid == creator) leaked.emplace_back(e->d_name);
    }
  }
  ::closedir(dir);
  for (const auto& name : leaked) {
    ADD_FAILURE() << "leaked shared-memory segment /dev/shm/" << name;
    ::shm_unlink(("/" + name).c_str());  // do not let one failure spill into later tests
  }
}

// This process's open file descriptors, each with what it names (socket:[inode], pipe:[...], a path).
std::map<int, std::string> openFds() {
  std::map<int, std::string> fds;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (const dirent* e = ::readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      char target[256] = {};
      const std::string path = std::string("/proc/self/fd/") + e->d_name;
      const ssize_t n = ::readlink(path.c_str(), target, sizeof(target) - 1);
      fds[std::atoi(e->d_name)] = n > 0 ? std::string(target, static_cast<size_t>(n)) : "?";
    }
    ::closedir(dir);
  }
  fds.erase(-1);
  return fds;
}

// A survivor's aborted communicator leaves no descriptor behind: every socket (data, bootstrap, health), eventfd,
// epoll and shared-memory fd it opened is closed. The directory handle openFds() itself used is not counted.
void expectNoFdsLeft(const std::map<int, std::string>& before, int rank) {
  const std::map<int, std::string> after = openFds();
  std::string extra;
  for (const auto& [fd, what] : after) {
    if (!before.count(fd) && what.find("/proc/") == std::string::npos) extra += " " + std::to_string(fd) + " -> " + what + ";";
  }
  EXPECT_TRUE(extra.empty()) << "rank " << rank << " still holds descriptors its communicator opened:" << extra;
}

// ---- scenarios (1) to (3): a victim fails right before a 16 MiB all-reduce --------------------------------------

// Runs the all-reduce on every survivor and checks: ncclRemoteError (from the call or ncclCommGetAsyncError) within
// the bound, then a successful ncclCommAbort. With Naming::EverySurvivor each survivor's WARN must name the victim;
// with Naming::AnySurvivor at least one must (the direct neighbours of the victim see it first-hand).
RunResult PeerFailureTest::runFault(Fault fault, int nRanks, int victim, Naming naming) {
  const double boundMs = fault == Fault::Stop ? kFaultTimeoutMs + kHungMarginMs : kDetectBoundMs;
  const RunResult result = runRanks(nRanks, options(kFaultTimeoutMs), [&](RankContext& ctx) {
    registerRank(ctx);
    const std::map<int, std::string> fdsBefore = openFds();
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    expectAllReduceSum(comm, 1, nRanks);  // connections are up and healthy before the fault
    std::vector<float> send(kBigCount, 1.0f), recv(kBigCount, 0.0f);
    ASSERT_TRUE(ctx.barrier());
    if (ctx.rank() == victim) {
      shared_->faultNs.store(nowNs());
      if (fault == Fault::Kill) ctx.killSelf(SIGKILL);
      if (fault == Fault::Stop) ctx.killSelf(SIGSTOP);  // announced as an expected death; SurvivorDone kills it
      EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));      // Fault::Leave: a clean exit
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(ctx.failureCount() == 0 ? 0 : 1);
    }
    const SurvivorDone done(*shared_, nRanks - 1, fault == Fault::Stop ? victim : -1);
    const Observed o = allReduceExpectingError(comm, send, recv, *shared_);
    reportObserved(ctx, o);
    EXPECT_EQ(o.rc, ncclRemoteError) << o.text;
    EXPECT_LT(o.opMs, boundMs) << "rank " << ctx.rank() << " took too long to report the failed peer";
    if (naming == Naming::EverySurvivor) {
      EXPECT_TRUE(namesRank(o.text, victim)) << "rank " << ctx.rank() << "'s WARN does not name the failed rank "
                                             << victim << ": " << o.text;
      expectFailureRecord(comm, victim, fault);
    }
    const int64_t abortStart = nowNs();
    EXPECT_TRUE(succeeded(ncclCommAbort(comm)));
    ctx.report("abortMs", std::to_string(static_cast<int>(msBetween(abortStart, nowNs()))));
    expectNoFdsLeft(fdsBefore, ctx.rank());
  });
  if (fault == Fault::Leave) {
    EXPECT_TRUE(result.ranks[victim].exited && result.ranks[victim].exitCode == 0) << result.ranks[victim].describe();
  } else {
    EXPECT_EQ(result.terminationSignal(victim), SIGKILL);  // SIGSTOP victims are SIGKILLed by the last survivor
  }
  int namingSurvivors = 0;
  for (const auto& r : result.ranks) {
    if (r.rank != victim && namesRank(result.report(r.rank, "text"), victim)) ++namingSurvivors;
  }
  EXPECT_GE(namingSurvivors, 1) << "no survivor's WARN names the failed rank " << victim;
  printObserved(result, fault == Fault::Kill ? "sigkill" : fault == Fault::Stop ? "sigstop" : "clean-exit");
  expectNoLeftovers(nRanks);
  return result;
}

// (1) A rank is SIGKILLed right before the all-reduce: every survivor gets ncclRemoteError, ncclCommAbort succeeds.
TEST_P(PeerFailureTest, KilledPeerFailsAllReduceOnEverySurvivor) { runFault(Fault::Kill, 4, 2, Naming::AnySurvivor); }

TEST_P(PeerFailureTest, KilledPeerIsNamedByEverySurvivor) {
  runFault(Fault::Kill, 4, 2, Naming::EverySurvivor);
}

// (2) A rank SIGSTOPs itself (hung: its sockets and segments stay open): survivors get an error within
// CFX_TIMEOUT_MS plus a margin. The last survivor SIGKILLs the stopped rank, so nothing outlives the test.
TEST_P(PeerFailureTest, StoppedPeerFailsAllReduceWithinTheTimeout) { runFault(Fault::Stop, 4, 1, Naming::AnySurvivor); }

TEST_P(PeerFailureTest, StoppedPeerIsNamedByEverySurvivor) {
  runFault(Fault::Stop, 4, 1, Naming::EverySurvivor);
}

// (3) A rank destroys its communicator and exits cleanly while the others start a collective: an error, not a
// hang. Rank 0 leaves: it also created the unique id, which must not matter.
TEST_P(PeerFailureTest, PeerThatLeftCleanlyFailsAllReduceInsteadOfHanging) {
  runFault(Fault::Leave, 3, 0, Naming::AnySurvivor);
}

TEST_P(PeerFailureTest, PeerThatLeftCleanlyIsNamedByEverySurvivor) {
  runFault(Fault::Leave, 3, 0, Naming::EverySurvivor);
}

// ---- (4) shrink after a SIGKILL ------------------------------------------------------------------------------

// After a SIGKILL, the survivors shrink the communicator with `flags` and get correct results from a 16 MiB
// all-reduce on it; the parent is aborted afterwards.
void PeerFailureTest::runShrinkAfterKill(int flags, bool revokeFirst) {
  constexpr int kRanks = 4;
  constexpr int kVictim = 1;
  const RunResult result = runRanks(kRanks, options(kFaultTimeoutMs), [&](RankContext& ctx) {
    registerRank(ctx);
    const int me = ctx.rank();
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    expectAllReduceSum(comm, 1, kRanks);
    std::vector<float> send(kBigCount, static_cast<float>(me + 1)), recv(kBigCount, 0.0f);
    ASSERT_TRUE(ctx.barrier());
    if (me == kVictim) {
      shared_->faultNs.store(nowNs());
      ctx.killSelf(SIGKILL);
    }
    const Observed o = allReduceExpectingError(comm, send, recv, *shared_);
    reportObserved(ctx, o);
    // Revoking, and shrinking with NCCL_SHRINK_ABORT (which revokes the parent), tell every peer at once.
    const bool peersRevoke = revokeFirst || flags == NCCL_SHRINK_ABORT;
    if (peersRevoke && o.rc == ncclInvalidUsage) {
      // A survivor that reaches the all-reduce only after a faster one revoked the communicator is refused the
      // new op, naming the revoker, as NCCL refuses ops on a revoked communicator (seen under load in CI).
      EXPECT_NE(o.text.find("revoked by rank"), std::string::npos) << o.text;
    } else {
      EXPECT_EQ(o.rc, ncclRemoteError) << o.text;
    }
    if (revokeFirst) {
      ASSERT_TRUE(succeeded(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT)));
      std::vector<float> small(16, 1.0f);
      EXPECT_NE(ncclAllReduce(small.data(), small.data(), small.size(), ncclFloat, ncclSum, comm, nullptr), ncclSuccess)
          << "a revoked communicator takes no new operations";
    }

    int dead = kVictim;
    ncclComm_t shrunk = nullptr;
    ASSERT_TRUE(succeeded(ncclCommShrink(comm, &dead, 1, &shrunk, nullptr, flags)));
    ASSERT_NE(shrunk, nullptr);
    int count = -1, rank = -1;
    EXPECT_TRUE(succeeded(ncclCommCount(shrunk, &count)));
    EXPECT_TRUE(succeeded(ncclCommUserRank(shrunk, &rank)));
    EXPECT_EQ(count, kRanks - 1);
    EXPECT_EQ(rank, me < kVictim ? me : me - 1) << "survivors keep their order";
    std::fill(recv.begin(), recv.end(), -1.0f);
    ASSERT_TRUE(succeeded(ncclAllReduce(send.data(), recv.data(), kBigCount, ncclFloat, ncclSum, shrunk, nullptr)));
    ctx.report("recoverMs", std::to_string(static_cast<int>(msBetween(shared_->faultNs.load(), nowNs()))));
    const float expected = 1 + 3 + 4;  // parent ranks 0, 2, 3 contribute rank + 1; exact in float
    for (size_t i = 0; i < kBigCount; ++i) {
      if (recv[i] != expected) {
        ADD_FAILURE() << "shrunk all-reduce element " << i << ": got " << recv[i] << ", expected " << expected;
        break;
      }
    }
    EXPECT_TRUE(succeeded(ncclCommDestroy(shrunk)));
    EXPECT_TRUE(succeeded(ncclCommAbort(comm)));
  });
  EXPECT_EQ(result.terminationSignal(kVictim), SIGKILL);
  printObserved(result, revokeFirst ? "revoke-shrink" : flags == NCCL_SHRINK_ABORT ? "shrink-abort" : "shrink-default");
  expectNoLeftovers(kRanks);
}

TEST_P(PeerFailureTest, SurvivorsShrinkAfterKillAndAllReduceCorrectly) { runShrinkAfterKill(NCCL_SHRINK_DEFAULT); }

// What example 8 and NCCL 2.27+ recommend after a failure: NCCL_SHRINK_ABORT.
TEST_P(PeerFailureTest, SurvivorsShrinkWithShrinkAbortAfterKill) {
  runShrinkAfterKill(NCCL_SHRINK_ABORT);
}

// The survivors revoke the broken communicator (no new work is accepted on it), then shrink it as NCCL_SHRINK_DEFAULT.
TEST_P(PeerFailureTest, SurvivorsRevokeThenShrinkAfterKill) { runShrinkAfterKill(NCCL_SHRINK_DEFAULT, true); }

// (6) A rank is SIGKILLed while every survivor is idle (no operation in flight): each survivor's
// ncclCommGetAsyncError turns to ncclRemoteError on its own, cfxCommGetFailures names the rank, and the next
// operation fails at once with the same name instead of waiting for a timeout.
TEST_P(PeerFailureTest, KilledPeerIsReportedToIdleSurvivorsThroughAsyncError) {
  constexpr int kRanks = 4;
  constexpr int kVictim = 2;
  const RunResult result = runRanks(kRanks, options(kFaultTimeoutMs), [&](RankContext& ctx) {
    ncclComm_t comm = healthyComm(ctx, kRanks);
    ASSERT_NE(comm, nullptr);
    if (ctx.rank() == kVictim) {
      shared_->faultNs.store(nowNs());
      ctx.killSelf(SIGKILL);
    }
    // Without data traffic only the health monitor can notice: by the exit watch on this host, or by the heartbeats
    // over tcp (NCCL_SHM_DISABLE leaves no proof of a shared pid namespace).
    EXPECT_EQ(waitForAsyncError(comm, std::chrono::milliseconds(static_cast<int64_t>(kDetectBoundMs))),
              ncclRemoteError);
    cfxFailureInfo info{};
    int n = 0;
    ASSERT_EQ(cfxCommGetFailures(comm, &info, 1, &n), ncclSuccess);
    ASSERT_GE(n, 1);
    EXPECT_EQ(info.rank, kVictim);
    EXPECT_EQ(info.opSeq, 0u) << "nobody was in an operation: " << info.op;
    EXPECT_TRUE(info.reason == (GetParam().tcp ? cfxFailureHung : cfxFailureExited)) << info.reason << ": " << info.text;
    std::vector<float> buf(16, 1.0f);
    const int64_t start = nowNs();
    EXPECT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, comm, nullptr), ncclRemoteError);
    const char* last = ncclGetLastError(nullptr);
    const std::string text = last ? last : "";
    EXPECT_TRUE(namesRank(text, kVictim)) << text;
    EXPECT_LT(msBetween(start, nowNs()), kFaultTimeoutMs) << "the next op must fail at once, not time out";
    EXPECT_TRUE(succeeded(ncclCommAbort(comm)));
  });
  EXPECT_EQ(result.terminationSignal(kVictim), SIGKILL);
  expectNoLeftovers(kRanks);
}

// (6b) A rank stops (SIGSTOP) while the others split: the split's all-gather needs every rank, and ends once the
// heartbeats find the stopped one, naming it, rather than at the bootstrap's timeout (set past the job's limit).
TEST_P(PeerFailureTest, StoppedPeerFailsASplitOnceHeartbeatsFindIt) {
  constexpr int kRanks = 3;
  constexpr int kVictim = 1;
  RunOptions o = options(kFaultTimeoutMs);
  o.env.emplace_back("CFX_BOOTSTRAP_TIMEOUT_MS", "300000");
  const RunResult result = runRanks(kRanks, o, [&](RankContext& ctx) {
    ncclComm_t comm = healthyComm(ctx, kRanks);
    ASSERT_NE(comm, nullptr);
    if (ctx.rank() == kVictim) ctx.killSelf(SIGSTOP);  // SurvivorDone kills it
    const SurvivorDone done(*shared_, kRanks - 1, kVictim);
    const int64_t start = nowNs();
    ncclComm_t child = nullptr;
    EXPECT_NE(ncclCommSplit(comm, 0, ctx.rank(), &child, nullptr), ncclSuccess);
    EXPECT_EQ(child, nullptr);
    const char* last = ncclGetLastError(nullptr);
    const std::string text = last ? last : "";
    EXPECT_TRUE(namesRank(text, kVictim)) << text;
    EXPECT_LT(msBetween(start, nowNs()), kDetectBoundMs) << text;
    EXPECT_TRUE(succeeded(ncclCommAbort(comm)));
  });
  EXPECT_EQ(result.terminationSignal(kVictim), SIGKILL);
  expectNoLeftovers(kRanks);
}

// (7) A rank exits normally (exit(0)) without destroying its communicator, as many programs do at their end: that
// is a departure, not a failure. The survivors' communicator stays healthy past the heartbeat limit and still
// carries point-to-point traffic between them.
TEST_P(PeerFailureTest, ExitWithoutDestroyIsNotAFailure) {
  constexpr int kRanks = 3;
  constexpr int kLeaver = 2;
  RunOptions o = options(kFaultTimeoutMs);
  o.failOnChildError = false;  // the leaver ends its body with exit(0); judged below
  const RunResult result = runRanks(kRanks, o, [&](RankContext& ctx) {
    ncclComm_t comm = healthyComm(ctx, kRanks);
    ASSERT_NE(comm, nullptr);
    if (ctx.rank() == kLeaver) {
      std::fflush(stdout);
      std::fflush(stderr);
      std::exit(ctx.failureCount() == 0 ? 0 : 1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(3 * kHeartbeatMs * kHeartbeatMisses));
    ncclResult_t async = ncclInternalError;
    EXPECT_TRUE(succeeded(ncclCommGetAsyncError(comm, &async)));
    EXPECT_EQ(async, ncclSuccess);
    int n = -1;
    EXPECT_TRUE(succeeded(cfxCommGetFailures(comm, nullptr, 0, &n)));
    EXPECT_EQ(n, 0);
    const int peer = 1 - ctx.rank();
    std::vector<int> out(1024, ctx.rank() + 10), in(1024, -1);
    EXPECT_TRUE(succeeded(ncclGroupStart()));
    EXPECT_TRUE(succeeded(ncclSend(out.data(), out.size(), ncclInt32, peer, comm, nullptr)));
    EXPECT_TRUE(succeeded(ncclRecv(in.data(), in.size(), ncclInt32, peer, comm, nullptr)));
    EXPECT_TRUE(succeeded(ncclGroupEnd()));
    EXPECT_EQ(in.front(), peer + 10);
    EXPECT_EQ(in.back(), peer + 10);
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
  for (const auto& r : result.ranks) {
    if (r.rank == kLeaver) {
      EXPECT_TRUE(r.exited && r.exitCode == 0) << r.describe();
    } else {
      EXPECT_TRUE(r.ok()) << r.describe();
    }
  }
  expectNoLeftovers(kRanks);
}

// (5) ncclCommAbort from a second thread while the main thread is blocked in an all-reduce whose third rank never
// arrives: the blocked call returns an error promptly (long before CFX_TIMEOUT_MS) and abort succeeds.
TEST_P(PeerFailureTest, AbortFromAnotherThreadUnblocksAllReduce) {
  constexpr int kRanks = 3;
  constexpr int kAborter = 0;  // aborts from a helper thread
  constexpr int kAbsent = 2;   // never calls the all-reduce
  constexpr int kLongTimeoutMs = 30000;  // so only the abort can end the wait
  const RunResult result = runRanks(kRanks, options(kLongTimeoutMs), [&](RankContext& ctx) {
    ncclComm_t comm = healthyComm(ctx, kRanks);
    ASSERT_NE(comm, nullptr);
    if (ctx.rank() == kAbsent) {
      // Keeps its communicator (and so its connections) open until the aborter is done (the first to finish: the
      // other blocks until it sees a closed peer), so only the abort can end the aborter's wait. Its own abort then
      // ends the wait of a rank blocked on it alone, as on shared memory, where an end that is not blocking does not
      // count (see checkPeers in primitives/executor.cc) and rank 0's abort would go unnoticed until the timeout.
      const auto until = Clock::now() + std::chrono::milliseconds(kLongTimeoutMs);
      while (shared_->survivorsDone.load() < 1 && Clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      EXPECT_TRUE(succeeded(ncclCommAbort(comm)));
      return;
    }
    const SurvivorDone done(*shared_, kRanks - 1, -1);
    std::vector<float> send(kBigCount, 1.0f), recv(kBigCount, 0.0f);
    if (ctx.rank() != kAborter) {
      // Blocked too; it sees rank 0's or rank 2's abort as a closed peer (or times out, well inside the launcher's
      // limit).
      const Observed o = allReduceExpectingError(comm, send, recv, *shared_);
      reportObserved(ctx, o);
      EXPECT_NE(o.rc, ncclSuccess);
      EXPECT_TRUE(succeeded(ncclCommAbort(comm)));
      return;
    }
    std::atomic<int64_t> abortStart{0}, abortEnd{0};
    ncclResult_t abortRc = ncclInternalError;
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      abortStart.store(nowNs());
      abortRc = ncclCommAbort(comm);
      abortEnd.store(nowNs());
    });
    const int64_t callStart = nowNs();
    const ncclResult_t rc = ncclAllReduce(send.data(), recv.data(), kBigCount, ncclFloat, ncclSum, comm, nullptr);
    const int64_t returned = nowNs();
    const char* last = ncclGetLastError(nullptr);
    const std::string text = last ? last : "";
    aborter.join();  // comm is freed by the abort: no call on it after this point
    Observed o;
    o.rc = rc;
    o.text = text;
    o.opMs = msBetween(callStart, returned);
    o.detectMs = abortStart.load() > 0 ? msBetween(abortStart.load(), returned) : o.opMs;
    reportObserved(ctx, o);
    ctx.report("abortMs", std::to_string(static_cast<int>(msBetween(abortStart.load(), abortEnd.load()))));
    EXPECT_NE(rc, ncclSuccess) << "an all-reduce missing a rank cannot succeed";
    EXPECT_EQ(abortRc, ncclSuccess) << text;
    EXPECT_GE(returned, abortStart.load()) << "the all-reduce returned before the abort: " << text;
    EXPECT_LT(o.detectMs, kLongTimeoutMs / 2.0) << "the blocked all-reduce did not return promptly after the abort";
  });
  printObserved(result, "abort-thread");
  expectNoLeftovers(kRanks);
}

// ncclCommRevoke on one rank stops every rank (NCCL: "stops all in-flight operations"): the others are blocked in an
// all-reduce the revoker never joins, with a 30 s timeout, so only the revoke notice can end their wait. Afterwards
// every rank refuses new operations, naming the revoker, and a split of the revoked communicator works.
TEST_P(PeerFailureTest, RevokeOnOneRankStopsEveryRank) {
  constexpr int kRanks = 4;
  constexpr int kRevoker = 2;
  constexpr int kLongTimeoutMs = 30000;
  const RunResult result = runRanks(kRanks, options(kLongTimeoutMs), [&](RankContext& ctx) {
    registerRank(ctx);
    const int me = ctx.rank();
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    expectAllReduceSum(comm, 1, kRanks);
    ASSERT_TRUE(ctx.barrier());
    std::vector<float> send(kBigCount, static_cast<float>(me + 1)), recv(kBigCount, 0.0f);
    if (me == kRevoker) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the others are blocked by now
      shared_->faultNs.store(nowNs());
      ASSERT_TRUE(succeeded(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT)));
    } else {
      const Observed o = allReduceExpectingError(comm, send, recv, *shared_);
      reportObserved(ctx, o);
      EXPECT_EQ(o.rc, ncclRemoteError) << o.text;
      EXPECT_NE(o.text.find("Revoke"), std::string::npos) << "stopped by something else than the revoke: " << o.text;
      EXPECT_LT(o.detectMs, kLongTimeoutMs / 2.0) << "the blocked all-reduce did not return promptly after the revoke";
      std::vector<float> small(16, 1.0f);
      EXPECT_EQ(ncclAllReduce(small.data(), small.data(), small.size(), ncclFloat, ncclSum, comm, nullptr),
                ncclInvalidUsage);
      const char* last = ncclGetLastError(nullptr);
      EXPECT_NE(std::string(last ? last : "").find("revoked by rank " + std::to_string(kRevoker)), std::string::npos)
          << (last ? last : "");
    }
    ASSERT_TRUE(ctx.barrier());
    ncclComm_t child = nullptr;
    ASSERT_TRUE(succeeded(ncclCommSplit(comm, 0, me, &child, nullptr)));
    ASSERT_NE(child, nullptr);
    std::fill(recv.begin(), recv.end(), -1.0f);
    ASSERT_TRUE(succeeded(ncclAllReduce(send.data(), recv.data(), kBigCount, ncclFloat, ncclSum, child, nullptr)));
    const float expected = 1 + 2 + 3 + 4;
    for (size_t i = 0; i < kBigCount; ++i) {
      if (recv[i] != expected) {
        ADD_FAILURE() << "all-reduce on the split of the revoked communicator, element " << i << ": " << recv[i];
        break;
      }
    }
    EXPECT_TRUE(succeeded(ncclCommDestroy(child)));
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
  printObserved(result, "revoke");
  expectNoLeftovers(kRanks);
}

// ---- ranks in pid namespaces of their own ---------------------------------------------------------------------

// One rank of the test below, process `pid` of its own pid namespace; rank 0 hands the id to the others through
// `idPipe`. Exit status 0 when its checks held, else which failed.
int namespacedRank(int rank, int nRanks, pid_t pid, int victim, const int idPipe[2]) {
  if (::getpid() != pid) return 2;
  ncclUniqueId id;
  if (!shareUniqueIdThroughPipe(rank, nRanks, idPipe, &id)) return 3;
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, nRanks, id, rank) != ncclSuccess) return 4;
  std::vector<float> send(4099, static_cast<float>(rank + 1));
  std::vector<float> recv(send.size());
  // Several heartbeat periods of healthy work: a rank that watched its peers' pids here would declare them gone.
  // Each round one rank comes late, so the others wait in the op and ask their links whether its peers live.
  for (int round = 0; round < 6; ++round) {
    if (rank == round % nRanks) std::this_thread::sleep_for(std::chrono::milliseconds(2 * kHeartbeatMs));
    if (ncclAllReduce(send.data(), recv.data(), send.size(), ncclFloat, ncclSum, comm, nullptr) != ncclSuccess) {
      std::fprintf(stderr, "rank %d, round %d: %s\n", rank, round, ncclGetLastError(comm));
      return 5;
    }
    const float want = static_cast<float>(nRanks * (nRanks + 1) / 2);
    if (std::count(recv.begin(), recv.end(), want) != static_cast<long>(recv.size())) return 6;
  }
  ncclResult_t state = ncclSuccess;
  if (ncclCommGetAsyncError(comm, &state) != ncclSuccess || state != ncclSuccess) {
    std::fprintf(stderr, "rank %d: %s\n", rank, ncclGetLastError(comm));
    return 7;
  }
  // Then a peer dies: without its pid to watch, the survivors still learn it, from its heartbeats and connections.
  if (rank == victim) ::raise(SIGKILL);
  const ncclResult_t rc = ncclAllReduce(send.data(), recv.data(), send.size(), ncclFloat, ncclSum, comm, nullptr);
  const ncclResult_t seen = rc != ncclSuccess ? rc : waitForAsyncError(comm, std::chrono::seconds(20));
  if (seen != ncclRemoteError) {
    std::fprintf(stderr, "rank %d after the victim died: %s\n", rank, resultName(seen));
    return 8;
  }
  return ncclCommAbort(comm) == ncclSuccess ? 0 : 9;
}

// Ranks in pid namespaces of their own that share the host's network and /dev/shm, as containers with --net=host
// and --ipc=host are: shm connects them, but a peer's pid names another process here, or none (ranks 0 and 1 are
// both pid 1, ranks 2 and 3 both pid 2). Rounds of all-reduces over several heartbeat periods must succeed with no
// async error (a rank that watched its peers' pids declared them gone at once), and a SIGKILLed rank must still fail
// the survivors' next all-reduce with ncclRemoteError. Needs CAP_SYS_ADMIN for the namespaces; skipped without.
// Over shm (the health monitor's pid watch) and over UCX without shm (its links' process probe).
void expectNamespacedRanksWatchedByHeartbeat(const std::vector<std::pair<std::string, std::string>>& transportEnv) {
  SKIP_UNDER_TSAN_FORK_CHAINS();
  RunOptions opts;
  opts.env = {{"CFX_HEARTBEAT_MS", std::to_string(kHeartbeatMs)},
              {"CFX_HEARTBEAT_MISSES", std::to_string(kHeartbeatMisses)},
              {"CFX_TIMEOUT_MS", "20000"},
              {"CFX_BOOTSTRAP_TIMEOUT_MS", "20000"}};  // a rank that never came fails the others, not hangs
  opts.env.insert(opts.env.end(), transportEnv.begin(), transportEnv.end());
  runRanks(1, opts, [&](RankContext&) {
    constexpr int n = 4;
    constexpr int kVictim = 3;
    const pid_t pids[n] = {1, 1, 2, 2};
    int idPipe[2];
    ASSERT_EQ(::pipe(idPipe), 0);
    pid_t children[n];
    for (int r = 0; r < n; ++r) {
      children[r] = startInNewPidNamespace(pids[r], [&] { return namespacedRank(r, n, pids[r], kVictim, idPipe); });
    }
    int codes[n];
    for (int r = 0; r < n; ++r) codes[r] = waitForPidNamespace(children[r]);
    if (std::count(codes, codes + n, kNoPidNamespace) > 0) GTEST_SKIP() << "no permission to make pid namespaces";
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(codes[r], r == kVictim ? 128 + SIGKILL : 0)
          << "rank " << r << " (5-7: healthy work failed; 8: the dead peer went unnoticed)";
    }
  });
}

TEST(PeerFailureNamespaces, RanksInPidNamespacesOfTheirOwnAreWatchedByHeartbeatNotPid) {
  expectNamespacedRanksWatchedByHeartbeat({});
}

TEST(PeerFailureNamespaces, RanksInPidNamespacesOfTheirOwnOverUcxAreNotProbedByPid) {
#if !CFX_TEST_HAVE_UCX
  GTEST_SKIP() << "built without UCX";
#else
  expectNamespacedRanksWatchedByHeartbeat({{"NCCL_NET", "UCX"}, {"NCCL_SHM_DISABLE", "1"}, {"UCX_TLS", "tcp"}});
#endif
}

INSTANTIATE_TEST_SUITE_P(Transports, PeerFailureTest,
                         ::testing::Values(Transport{"shm", false}, Transport{"tcp", true},
                                           Transport{"tcp4socks", true, 4}),
                         [](const ::testing::TestParamInfo<Transport>& param) { return std::string(param.param.name); });

}  // namespace
}  // namespace cfx::itest
