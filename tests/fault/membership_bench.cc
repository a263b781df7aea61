// SPDX-License-Identifier: Apache-2.0
// membership_bench: how fast the dynamic membership of conflux.h reacts, with the master in rank 0's process and
// every member a process on this host. Not a test (ctest does not run it); it prints figures for docs and reviews.
//
//   cfx_fault_membership_bench [--trials N] [--members M]
//
// Per trial, M members (default 4) loop "1 MiB all-reduce, then cfxMemberUpdate" as a training job would:
//   boundary  the median time of an unchanged cfxMemberUpdate (every member ready -> the master's answer);
//   4-byte all-reduce  its median on the epoch's communicator, slowest member: with all-or-nothing (the default)
//             it includes the round trip to the master; CFX_MEMBER_ALL_OR_NOTHING=0 shows it without;
//   admit     a joiner calls cfxMemberJoin and cfxMemberUpdate while the group runs: from its join to the moment
//             every member (the joiner too) holds the epoch's new communicator;
//   kill      a member is SIGKILLed in the middle of an all-reduce: from the kill to the next good all-reduce of
//             the survivors (they see the error, call cfxMemberUpdate, and the master drops the dead member).
#include <conflux.h>
#include <nccl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "integration/multiproc.h"

namespace cfx::itest {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kMaxRanks = 16;
constexpr size_t kCount = size_t{1} << 18;  // 1 MiB of floats per all-reduce

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

struct Shared {
  std::atomic<int64_t> joinNs;
  std::atomic<int64_t> admittedNs[kMaxRanks];
  std::atomic<int64_t> killNs;
  std::atomic<int64_t> recoveredNs[kMaxRanks];
  std::atomic<int64_t> boundaryNs[kMaxRanks];  // median unchanged boundary, per member
  std::atomic<int64_t> smallOpNs[kMaxRanks];   // median 4-byte all-reduce on the epoch's communicator, per member
  std::atomic<int> phase;                      // 1: the group runs, the joiner may join
};

struct Trial {
  bool ok = true;
  double boundaryUs = 0, smallOpUs = 0, admitMs = 0, killMs = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

bool allReduceOk(ncclComm_t comm, std::vector<float>& send, std::vector<float>& recv, int n) {
  if (ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat, ncclSum, comm, nullptr) != ncclSuccess) return false;
  return recv[0] == static_cast<float>(n) && recv[kCount - 1] == static_cast<float>(n);
}

Trial runTrial(int members) {
  auto* shared =
      new (::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)) Shared{};
  const int joiner = members;      // the job's last rank joins late
  const int victim = members - 1;  // and the one before it is killed
  RunOptions o;
  o.timeout = std::chrono::seconds(120);
  o.failOnChildError = false;
  (void)runRanks(members + 1, o, [&](RankContext& ctx) {
    const int me = ctx.rank();
    cfxMaster_t master = nullptr;
    ncclUniqueId id{};
    if (me == 0 && cfxMasterStart(nullptr, &id, &master) != ncclSuccess) return;
    const std::string bytes =
        ctx.broadcast(0, std::string_view(reinterpret_cast<const char*>(&id), me == 0 ? sizeof(id) : 0));
    std::memcpy(&id, bytes.data(), std::min(bytes.size(), sizeof(id)));
    std::vector<float> send(kCount, 1.0f), recv(kCount, 0.0f);
    cfxMember_t member = nullptr;
    ncclComm_t comm = nullptr;
    cfxEpochInfo info{};
    if (me == joiner) {
      while (shared->phase.load() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(30));  // somewhere in the middle of a step
      shared->joinNs.store(nowNs());
      if (cfxMemberJoin(&id, nullptr, &member) != ncclSuccess) return;
      if (cfxMemberUpdate(member, &comm, &info) != ncclSuccess) return;
      shared->admittedNs[me].store(nowNs());
    } else {
      if (cfxMemberJoin(&id, nullptr, &member) != ncclSuccess) return;
      do {
        if (cfxMemberUpdate(member, &comm, &info) != ncclSuccess) return;
      } while (info.nRanks < members);
      std::vector<double> us;  // unchanged boundaries
      for (int i = 0; i < 50; ++i) {
        const auto t0 = Clock::now();
        if (cfxMemberUpdate(member, &comm, &info) != ncclSuccess) return;
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      }
      shared->boundaryNs[me].store(static_cast<int64_t>(median(us) * 1000));
      // What all-or-nothing costs a latency-bound op (one round trip to the master each): compare with
      // CFX_MEMBER_ALL_OR_NOTHING=0.
      us.clear();
      float one = 1.0f, sum = 0.0f;
      for (int i = 0; i < 300; ++i) {
        const auto t0 = Clock::now();
        if (ncclAllReduce(&one, &sum, 1, ncclFloat, ncclSum, comm, nullptr) != ncclSuccess) return;
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      }
      shared->smallOpNs[me].store(static_cast<int64_t>(median(us) * 1000));
      if (me == 0) shared->phase.store(1);
      while (info.nRanks == members) {  // steps until the joiner is in
        if (!allReduceOk(comm, send, recv, members)) return;
        if (cfxMemberUpdate(member, &comm, &info) != ncclSuccess) return;
      }
      shared->admittedNs[me].store(nowNs());
    }
    const int n = members + 1;
    if (!allReduceOk(comm, send, recv, n)) return;
    if (!ctx.barrier()) return;
    if (me == victim) {  // dies while the others are in an all-reduce it never joins
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      shared->killNs.store(nowNs());
      ctx.killSelf(SIGKILL);
    }
    if (allReduceOk(comm, send, recv, n)) return;  // it must fail
    do {
      if (cfxMemberUpdate(member, &comm, &info) != ncclSuccess) return;
    } while (info.nRanks != n - 1);
    if (!allReduceOk(comm, send, recv, n - 1)) return;
    shared->recoveredNs[me].store(nowNs());
    (void)cfxMemberLeave(member);
    if (me == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the others leave first
      (void)cfxMasterStop(master);
    }
  });
  Trial t;
  std::vector<double> boundaries;
  for (int r = 0; r <= members; ++r) {
    if (shared->admittedNs[r].load() == 0) t.ok = false;
    t.admitMs = std::max(t.admitMs, static_cast<double>(shared->admittedNs[r].load() - shared->joinNs.load()) / 1e6);
    if (r < members) boundaries.push_back(static_cast<double>(shared->boundaryNs[r].load()) / 1e3);
    if (r < members) t.smallOpUs = std::max(t.smallOpUs, static_cast<double>(shared->smallOpNs[r].load()) / 1e3);
    if (r == victim) continue;
    if (shared->recoveredNs[r].load() == 0) t.ok = false;
    t.killMs = std::max(t.killMs, static_cast<double>(shared->recoveredNs[r].load() - shared->killNs.load()) / 1e6);
  }
  t.boundaryUs = median(boundaries);
  ::munmap(shared, sizeof(Shared));
  return t;
}

}  // namespace
}  // namespace cfx::itest

int main(int argc, char** argv) {
  using namespace cfx::itest;
  int trials = 5, members = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--trials") {
      trials = std::atoi(argv[i + 1]);
    } else if (k == "--members") {
      members = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: %s [--trials N] [--members M]\n", argv[0]);
      return 2;
    }
  }
  if (members < 2 || members + 1 > kMaxRanks || trials < 1) {
    std::fprintf(stderr, "membership_bench: need 2 <= members < %d and trials >= 1\n", kMaxRanks);
    return 2;
  }
  std::vector<double> boundary, smallOp, admit, kill;
  int failed = 0;
  for (int i = 0; i < trials; ++i) {
    const Trial t = runTrial(members);
    std::printf("trial %d: %s boundary %.0f us, 4-byte all-reduce %.1f us, admit %.1f ms, kill -> next good "
                "all-reduce %.1f ms\n",
                i, t.ok ? "ok  " : "FAIL", t.boundaryUs, t.smallOpUs, t.admitMs, t.killMs);
    if (!t.ok) {
      ++failed;
      continue;
    }
    boundary.push_back(t.boundaryUs);
    smallOp.push_back(t.smallOpUs);
    admit.push_back(t.admitMs);
    kill.push_back(t.killMs);
  }
  auto worst = [](const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); };
  std::printf("%d members + 1 joiner, %d trials (%d failed): median/worst  boundary %.0f/%.0f us  4-byte all-reduce "
              "%.1f/%.1f us  admit %.1f/%.1f ms  kill->good op %.1f/%.1f ms\n",
              members, trials, failed, median(boundary), worst(boundary), median(smallOp), worst(smallOp),
              median(admit), worst(admit), median(kill), worst(kill));
  return failed == 0 ? 0 : 1;
}
