// SPDX-License-Identifier: Apache-2.0
// cfx_fault_rank: one rank of the network fault harness (tests/netbed/fault.py). It joins a communicator from the
// launcher's variables (cfxCommInitFromEnv), runs checked all-reduces back to back, and reports on stdout:
//   ready                         after its first three all-reduces succeeded (the harness injects the fault then)
//   error <steady ns> <message>   the moment an all-reduce failed, with ncclGetLastError's line; exit 3
//   wrong <index>                 an all-reduce returned success with a wrong element; exit 4
//   done                          --seconds passed without a failure; exit 0
// The clock is CLOCK_MONOTONIC (std::chrono::steady_clock), which network namespaces share with the harness.
//
//   cfx_fault_rank [--seconds S] [--count N]
#include <conflux.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

long long steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 60;
  size_t count = 1 << 18;  // 1 MiB of floats: long enough that a fault usually lands inside a transfer
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--seconds") == 0) seconds = std::atof(argv[i + 1]);
    if (std::strcmp(argv[i], "--count") == 0) count = std::strtoull(argv[i + 1], nullptr, 10);
  }
  ncclComm_t comm = nullptr;
  if (cfxCommInitFromEnv(&comm) != ncclSuccess) {
    std::printf("error %lld init: %s\n", steadyNs(), ncclGetLastError(nullptr));
    return 2;
  }
  int rank = 0, nRanks = 0;
  ncclCommUserRank(comm, &rank);
  ncclCommCount(comm, &nRanks);
  std::vector<float> send(count), recv(count);
  for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>((rank + 1) * (i % 7 + 1));
  const float total = static_cast<float>(nRanks * (nRanks + 1) / 2);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (int op = 0; std::chrono::steady_clock::now() < end; ++op) {
    if (ncclAllReduce(send.data(), recv.data(), count, ncclFloat, ncclSum, comm, nullptr) != ncclSuccess) {
      std::printf("error %lld %s\n", steadyNs(), ncclGetLastError(comm));
      std::fflush(stdout);
      ncclCommAbort(comm);
      return 3;
    }
    for (size_t i = 0; i < count; ++i) {
      if (recv[i] != total * static_cast<float>(i % 7 + 1)) {
        std::printf("wrong %zu\n", i);
        std::fflush(stdout);
        return 4;
      }
    }
    if (op == 2) {
      std::printf("ready\n");
      std::fflush(stdout);
    }
  }
  std::printf("done\n");
  ncclCommDestroy(comm);
  return 0;
}
