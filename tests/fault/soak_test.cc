// SPDX-License-Identifier: Apache-2.0
// Membership soak (label fault): members join, leave, die (SIGKILL) and hang (SIGSTOP) at random while the group
// runs steps of "boundary, shared-state sync when the members changed, checked all-reduce, state update", and the
// test asserts what issue 5 asks of dynamic membership: no call stalls beyond the deadline, every completed
// all-reduce is right, every all-reduce ends the same way on every member of its epoch that lived to see it end,
// every member of an epoch holds bit-identical state after its sync, and nothing leaks
// (every process reaped, no shared-memory segment left behind).
//
// Short form in `make test`: at least CFX_SOAK_CHANGES membership changes (default 100). Long form, by hand:
//   CFX_SOAK_SECONDS=3600 CFX_SOAK_CHANGES=1000 build/tests/fault/cfx_fault_soak
// runs until both the time and the number of changes are reached, and prints the summary line.
//
// Layout: job rank 0 runs the master and decides when to stop; ranks 1..kSlots are slots, each forking one member
// process after another (a member is a fresh process, as a new peer would be). Slots never open a communicator, so
// their forks are safe.
#include "integration/multiproc.h"
#include "integration/nccl_checks.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "conflux.h"

namespace cfx::itest {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kSlots = 4;
constexpr size_t kCount = 4099;  // floats per all-reduce, odd on purpose
constexpr size_t kStateWords = 1024;
constexpr int kEpochTable = 1 << 14;
constexpr auto kStallLimit = std::chrono::seconds(8);  // no call may take longer (the deadlines below are shorter)

struct EpochRecord {
  std::atomic<uint64_t> epoch;  // 0: free; claimed by the first member of the epoch to record
  std::atomic<uint64_t> hashLow;
  std::atomic<uint64_t> hashHigh;
  std::atomic<uint64_t> ready;  // == epoch once the digest is stored
};

// How one all-reduce of one epoch ended, as its first member to finish saw it (key: epoch << 16 | op index + 1).
struct OpRecord {
  std::atomic<uint64_t> key;
  std::atomic<int> outcome;  // 1 success, 2 failure
};
constexpr int kOpTable = 1 << 16;

struct Shared {
  std::atomic<int> stop;
  std::atomic<int> wrongResults;
  std::atomic<int> stalls;
  std::atomic<int> parityMismatches;
  std::atomic<int> goodOps;
  std::atomic<int> failedOps;
  std::atomic<int> syncs;
  std::atomic<int> lives;
  std::atomic<int> leaves, kills, stops;
  std::atomic<int> memberErrors;
  EpochRecord epochs[kEpochTable];
  std::atomic<int> disagreements;  // an all-reduce that succeeded on one member of its epoch and failed on another
  OpRecord ops[kOpTable];
};

int envInt(const char* name, int fallback) {
  const char* s = std::getenv(name);
  return s != nullptr && *s != '\0' ? std::atoi(s) : fallback;
}

// The soak's processes name their segments "<this prefix>-<pid>-<rank>-<random>" (CFX_SHM_PREFIX), so tests
// running beside this one cannot be counted as its leaks.
std::string segmentPrefix() { return "cfxsoak" + std::to_string(::getpid()); }

std::vector<std::string> segments(const std::string& prefix) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d)) {
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) names.emplace_back(e->d_name);
    }
    ::closedir(d);
  }
  return names;
}

template <typename F>
auto timed(Shared& s, F&& f) {
  const auto t0 = Clock::now();
  auto r = f();
  if (Clock::now() - t0 > kStallLimit) s.stalls.fetch_add(1);
  return r;
}

// Records the state digest of an epoch's members after their sync; a second, different digest is a mismatch.
void recordParity(Shared& s, uint64_t epoch, const unsigned long long hash[2]) {
  EpochRecord& r = s.epochs[epoch % kEpochTable];
  uint64_t expected = 0;
  if (r.epoch.compare_exchange_strong(expected, epoch)) {
    r.hashLow.store(hash[0]);
    r.hashHigh.store(hash[1]);
    r.ready.store(epoch);
    return;
  }
  if (expected != epoch) return;  // the table wrapped: only recent epochs are compared
  // The first recorder may still be storing the digest: wait for it (it is a live process a few stores away).
  for (int i = 0; i < 100000 && r.ready.load() != epoch; ++i) std::this_thread::yield();
  if (r.ready.load() != epoch) return;
  if (r.hashLow.load() != hash[0] || r.hashHigh.load() != hash[1]) s.parityMismatches.fetch_add(1);
}

// Records how all-reduce #index of `epoch` ended here; a member of the same epoch that saw the other ending is an
// all-or-nothing violation.
void recordOutcome(Shared& s, uint64_t epoch, uint64_t index, bool ok) {
  const uint64_t key = (epoch << 16 | (index & 0xffff)) + 1;
  OpRecord& r = s.ops[(epoch * 131 + index) % kOpTable];
  const int mine = ok ? 1 : 2;
  uint64_t expected = 0;
  if (r.key.compare_exchange_strong(expected, key)) {
    r.outcome.store(mine);
    return;
  }
  if (expected != key) return;  // the table wrapped
  for (int i = 0; i < 100000 && r.outcome.load() == 0; ++i) std::this_thread::yield();
  const int first = r.outcome.load();
  if (first != 0 && first != mine) s.disagreements.fetch_add(1);
}

// One member's life, in a fresh process: join, run steps, then leave, die or hang. Never returns.
[[noreturn]] void memberLife(const ncclUniqueId& master, Shared& s, unsigned seed) {
  std::mt19937_64 rng(seed);
  s.lives.fetch_add(1);
  cfxMember_t member = nullptr;
  if (cfxMemberJoin(&master, nullptr, &member) != ncclSuccess) {
    s.memberErrors.fetch_add(1);
    ::_exit(0);
  }
  std::vector<uint64_t> state(kStateWords);
  for (auto& w : state) w = rng();  // a newcomer's state is junk until its first sync
  std::vector<float> send(kCount, 1.0f), recv(kCount);
  const int steps = 5 + static_cast<int>(rng() % 30);
  uint64_t opIndex = 0;  // all-reduces on this epoch's communicator
  for (int step = 0; step < steps && s.stop.load() == 0; ++step) {
    ncclComm_t comm = nullptr;
    cfxEpochInfo info{};
    // Now and then a member dies inside the boundary, where a changed membership sets up the next communicator
    // (its shared-memory names are not removed yet: the next setup on the host must find and remove them).
    if (rng() % 100 < 2) {
      const auto after = std::chrono::microseconds(rng() % 20000);
      std::thread([after, &s] {
        std::this_thread::sleep_for(after);
        s.kills.fetch_add(1);
        ::raise(SIGKILL);
      }).detach();
    }
    const ncclResult_t urc = timed(s, [&] { return cfxMemberUpdate(member, &comm, &info); });
    if (urc != ncclSuccess) {
      s.memberErrors.fetch_add(1);
      continue;  // the next boundary sorts it out
    }
    if (info.changed) opIndex = 0;
    if (info.changed) {
      cfxStateEntry entry{state.data(), state.size(), ncclUint64};
      cfxStateSyncInfo sync{};
      if (timed(s, [&] { return cfxSharedStateSync(comm, &entry, 1, &sync); }) != ncclSuccess) continue;
      s.syncs.fetch_add(1);
      recordParity(s, info.epoch, sync.hash);
    }
    // Now and then a member dies or hangs in the middle of a step, while the others are in the all-reduce.
    const unsigned roll = static_cast<unsigned>(rng() % 100);
    if (roll < 3) {
      s.kills.fetch_add(1);
      ::raise(SIGKILL);
    }
    if (roll == 3) {
      s.stops.fetch_add(1);
      ::raise(SIGSTOP);
      ::_exit(0);
    }
    std::fill(recv.begin(), recv.end(), -1.0f);
    const ncclResult_t rc =
        timed(s, [&] { return ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat, ncclSum, comm, nullptr); });
    recordOutcome(s, info.epoch, opIndex++, rc == ncclSuccess);
    if (rc != ncclSuccess) {
      s.failedOps.fetch_add(1);
      continue;
    }
    bool right = true;
    for (float v : recv) right = right && v == static_cast<float>(info.nRanks);
    if (!right) s.wrongResults.fetch_add(1);
    s.goodOps.fetch_add(1);
    for (size_t i = 0; i < state.size(); ++i) state[i] += static_cast<uint64_t>(recv[i % kCount]);
    std::this_thread::sleep_for(std::chrono::milliseconds(1 + rng() % 4));  // the "compute" of a step
  }
  const unsigned fate = static_cast<unsigned>(rng() % 10);
  if (s.stop.load() != 0 || fate < 5) {
    s.leaves.fetch_add(1);
    (void)cfxMemberLeave(member);
    ::_exit(0);
  }
  if (fate < 8) {
    s.kills.fetch_add(1);
    ::raise(SIGKILL);
  }
  s.stops.fetch_add(1);
  ::raise(SIGSTOP);  // hung, connections open: the slot kills it once the master must have dropped it
  ::_exit(0);
}

// A slot: forks members one after another until told to stop, and reaps every one.
void slot(const ncclUniqueId& master, Shared& s, int slotIndex) {
  unsigned generation = 0;
  while (s.stop.load() == 0) {
    const pid_t pid = ::fork();
    if (pid == 0) memberLife(master, s, static_cast<unsigned>(slotIndex * 100003 + generation));
    ++generation;
    int status = 0;
    if (::waitpid(pid, &status, WUNTRACED) != pid) continue;
    if (WIFSTOPPED(status)) {
      // Long enough for the master's round timeout and the peers' heartbeats to notice, then gone for good.
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    }
  }
}

TEST(Soak, MembershipChurnKeepsResultsRightAndStateIdentical) {
  const int wantChanges = envInt("CFX_SOAK_CHANGES", 100);
  const int wantSeconds = envInt("CFX_SOAK_SECONDS", 0);
  auto* shared =
      new (::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)) Shared{};
  const std::string prefix = segmentPrefix();
  RunOptions options;
  options.timeout = std::chrono::seconds(wantSeconds > 0 ? wantSeconds + 600 : 300);
  options.env = {{"CFX_MEMBER_ROUND_TIMEOUT_MS", "1000"},
                 {"CFX_HEARTBEAT_MS", "100"},
                 {"CFX_TIMEOUT_MS", "5000"},
                 {"CFX_BOOTSTRAP_TIMEOUT_MS", "5000"},
                 {"CFX_SHM_PREFIX", prefix}};
  uint64_t changes = 0;
  const auto t0 = Clock::now();
  const RunResult result = runRanks(kSlots + 1, options, [&](RankContext& ctx) {
    cfxMaster_t master = nullptr;
    ncclUniqueId id{};
    if (ctx.rank() == 0) {
      ASSERT_TRUE(cfxMasterStart(nullptr, &id, &master) == ncclSuccess);
    }
    const std::string bytes =
        ctx.broadcast(0, std::string_view(reinterpret_cast<const char*>(&id), ctx.rank() == 0 ? sizeof(id) : 0));
    std::memcpy(&id, bytes.data(), std::min(bytes.size(), sizeof(id)));
    if (ctx.rank() != 0) return slot(id, *shared, ctx.rank());
    // The master's process watches the epoch count (it grows by one per membership change) and the clock.
    unsigned long long epoch = 0;
    int members = 0;
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ASSERT_TRUE(cfxMasterGetEpoch(master, &epoch, &members) == ncclSuccess);
      const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      if (epoch >= static_cast<unsigned long long>(wantChanges) && seconds >= wantSeconds) break;
      if (seconds > static_cast<double>(options.timeout.count()) / 1000.0 - 60) break;  // leave time to wind down
    }
    shared->stop.store(1);
    ctx.report("changes", std::to_string(epoch));
    // Members finish their step and leave; the master must outlive them.
    std::this_thread::sleep_for(std::chrono::milliseconds(2000));
    ASSERT_TRUE(cfxMasterStop(master) == ncclSuccess);
  });
  changes = std::strtoull(result.report(0, "changes").c_str(), nullptr, 10);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("soak: %.0f s, %llu membership changes (epochs), %d member lives (%d left, %d killed, %d stopped), "
              "%d good ops, %d failed ops (a peer died), %d syncs, %d member-side errors; %d wrong results, %d stalls "
              "> %lld s, %d parity mismatches, %d all-or-nothing violations\n",
              seconds, static_cast<unsigned long long>(changes), shared->lives.load(), shared->leaves.load(),
              shared->kills.load(), shared->stops.load(), shared->goodOps.load(), shared->failedOps.load(),
              shared->syncs.load(), shared->memberErrors.load(), shared->wrongResults.load(), shared->stalls.load(),
              static_cast<long long>(kStallLimit.count()), shared->parityMismatches.load(),
              shared->disagreements.load());
  EXPECT_TRUE(result.ok());
  EXPECT_GE(changes, static_cast<uint64_t>(wantChanges));
  EXPECT_EQ(shared->wrongResults.load(), 0);
  EXPECT_EQ(shared->stalls.load(), 0);
  EXPECT_EQ(shared->parityMismatches.load(), 0);
  EXPECT_EQ(shared->disagreements.load(), 0) << "all-reduces that succeeded on some members and failed on others";
  EXPECT_GT(shared->goodOps.load(), 0);
  EXPECT_GT(shared->syncs.load(), 0);
  // Members killed while they set up a communicator leave their segment's name behind; the next communicator
  // set up on this host removes it once it is older than the shm transport's grace (2 s). Be that next one.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  RunOptions sweeperOptions;
  sweeperOptions.env = {{"CFX_SHM_PREFIX", prefix}};
  const RunResult sweeper = runRanks(2, sweeperOptions, [](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    if (comm == nullptr) return;
    expectAllReduceSum(comm, 1, 2);
    ASSERT_TRUE(ncclCommDestroy(comm) == ncclSuccess);
  });
  EXPECT_TRUE(sweeper.ok());
  const std::vector<std::string> leaked = segments(prefix);
  EXPECT_TRUE(leaked.empty()) << leaked.size() << " shared-memory segment(s) left in /dev/shm, e.g. " << leaked[0];
  ::munmap(shared, sizeof(Shared));
}

}  // namespace
}  // namespace cfx::itest
