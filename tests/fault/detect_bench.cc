// SPDX-License-Identifier: Apache-2.0
// detect_bench: how long until every survivor of a 4-rank all-reduce holds a named error after one rank is SIGKILLed
// or SIGSTOPped mid-operation, and how long until the shrunk communicator completes its next all-reduce. Not a
// test (ctest does not run it); it prints figures for docs and reviews.
//
//   cfx_fault_detect_bench [--trials N] [--fault kill|stop|all] [--transport shm|tcp|tcp-hosts|all]
//
// Transports: shm (one host: a killed peer's exit is seen directly), tcp (NCCL_SHM_DISABLE=1: without shm nothing
// proves a shared pid namespace, so a kill is seen by the data path and a stop by the heartbeats), tcp-hosts (every
// rank has its own NCCL_HOSTID, so it behaves as four hosts over loopback). Heartbeat knobs are the defaults unless
// the environment sets CFX_HEARTBEAT_MS / CFX_HEARTBEAT_MISSES.
//
// Per trial: the victim (rank 2, not a ring neighbour of rank 0) waits 100 ms after a barrier, while the others are
// blocked in a 16 MiB all-reduce it never joins, stamps the time and raises its signal. Each survivor stamps the
// moment the all-reduce returned ncclRemoteError naming rank 2 (else the trial counts as a miss); the trial's figure
// is the slowest survivor. Then the survivors shrink with NCCL_SHRINK_ABORT and run one more all-reduce, checked.
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
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "integration/multiproc.h"

namespace cfx::itest {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kRanks = 4;
constexpr int kVictim = 2;
constexpr size_t kCount = size_t{4} << 20;

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

struct Shared {
  std::atomic<int64_t> faultNs;
  std::atomic<int64_t> errorNs[kRanks];      // 0: no named error
  std::atomic<int64_t> recoveredNs[kRanks];  // next good all-reduce on the shrunk comm
  std::atomic<int> victimPid;
  std::atomic<int> survivorsDone;
};

struct Trial {
  bool ok = false;
  double detectMs = 0;   // slowest survivor: fault -> named error
  double recoverMs = 0;  // slowest survivor: fault -> shrunk comm's all-reduce done
};

Trial runTrial(const char* transport, int sig) {
  auto* shared =
      new (::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)) Shared{};
  RunOptions o;
  o.timeout = std::chrono::seconds(60);
  o.failOnChildError = false;
  if (std::strcmp(transport, "shm") != 0) o.env.emplace_back("NCCL_SHM_DISABLE", "1");
  const bool separateHosts = std::strcmp(transport, "tcp-hosts") == 0;
  (void)runRanks(kRanks, o, [&](RankContext& ctx) {
    const int me = ctx.rank();
    if (separateHosts) ::setenv("NCCL_HOSTID", ("bench-host-" + std::to_string(me)).c_str(), 1);
    ncclComm_t comm = ctx.initComm();
    if (comm == nullptr) return;
    std::vector<float> send(kCount, 1.0f), recv(kCount, 0.0f);
    if (ncclAllReduce(send.data(), recv.data(), 1024, ncclFloat, ncclSum, comm, nullptr) != ncclSuccess) return;
    if (!ctx.barrier()) return;
    if (me == kVictim) {
      shared->victimPid.store(static_cast<int>(::getpid()));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      shared->faultNs.store(nowNs());
      ctx.killSelf(sig);
    }
    const ncclResult_t rc = ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat, ncclSum, comm, nullptr);
    const int64_t at = nowNs();
    const char* text = ncclGetLastError(nullptr);
    if (rc == ncclRemoteError && text && std::regex_search(text, std::regex("failed rank\\(s\\) 2\\b"))) {
      shared->errorNs[me].store(at);
    }
    int dead = kVictim;
    ncclComm_t shrunk = nullptr;
    if (ncclCommShrink(comm, &dead, 1, &shrunk, nullptr, NCCL_SHRINK_ABORT) == ncclSuccess) {
      std::fill(recv.begin(), recv.end(), 0.0f);
      if (ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat, ncclSum, shrunk, nullptr) == ncclSuccess &&
          recv[0] == 3.0f && recv[kCount - 1] == 3.0f) {
        shared->recoveredNs[me].store(nowNs());
      }
      (void)ncclCommDestroy(shrunk);
    }
    (void)ncclCommAbort(comm);
    if (shared->survivorsDone.fetch_add(1) + 1 == kRanks - 1 && sig == SIGSTOP) {
      ::kill(shared->victimPid.load(), SIGKILL);
    }
  });
  Trial t;
  t.ok = shared->faultNs.load() > 0;
  for (int r = 0; r < kRanks; ++r) {
    if (r == kVictim) continue;
    const int64_t e = shared->errorNs[r].load();
    const int64_t g = shared->recoveredNs[r].load();
    if (e == 0 || g == 0) t.ok = false;
    t.detectMs = std::max(t.detectMs, static_cast<double>(e - shared->faultNs.load()) / 1e6);
    t.recoverMs = std::max(t.recoverMs, static_cast<double>(g - shared->faultNs.load()) / 1e6);
  }
  ::munmap(shared, sizeof(Shared));
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : (v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
}

}  // namespace
}  // namespace cfx::itest

int main(int argc, char** argv) {
  using namespace cfx::itest;
  int trials = 10;
  std::string faults = "all", transports = "all";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--trials")
      trials = std::atoi(argv[i + 1]);
    else if (k == "--fault")
      faults = argv[i + 1];
    else if (k == "--transport")
      transports = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: %s [--trials N] [--fault kill|stop|all] [--transport shm|tcp|tcp-hosts|all]\n",
                   argv[0]);
      return 2;
    }
  }
  if (trials < 1) trials = 1;
  ::setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  std::printf("%-10s %-5s %6s %6s | %12s %12s | %14s %14s\n", "transport", "fault", "trials", "named", "detect med",
              "detect worst", "recover med", "recover worst");
  for (const char* tr : {"shm", "tcp", "tcp-hosts"}) {
    if (transports != "all" && transports != tr) continue;
    for (const auto& [name, sig] : {std::pair{"kill", SIGKILL}, std::pair{"stop", SIGSTOP}}) {
      if (faults != "all" && faults != name) continue;
      std::vector<double> detect, recover;
      int named = 0;
      for (int i = 0; i < trials; ++i) {
        const Trial t = runTrial(tr, sig);
        if (!t.ok) continue;
        ++named;
        detect.push_back(t.detectMs);
        recover.push_back(t.recoverMs);
      }
      std::printf("%-10s %-5s %6d %6d | %9.1f ms %9.1f ms | %11.1f ms %11.1f ms\n", tr, name, trials, named,
                  median(detect), detect.empty() ? 0 : *std::max_element(detect.begin(), detect.end()), median(recover),
                  recover.empty() ? 0 : *std::max_element(recover.begin(), recover.end()));
      std::fflush(stdout);
    }
  }
  return 0;
}
