// SPDX-License-Identifier: Apache-2.0
// The cfx extensions through the public API: asynchronous host streams, and communicators created from a
// launcher's environment (torchrun's MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "conflux.h"
#include "nccl.h"

namespace {

TEST(HostStream, QueuedAllReducesCompleteInOrderAndSynchronize) {
  constexpr int kRanks = 3;
  constexpr size_t kCount = 300007;
  constexpr int kOps = 4;
  std::vector<ncclComm_t> comms(kRanks);
  ASSERT_EQ(ncclCommInitAll(comms.data(), kRanks, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::vector<float>> bufs(kRanks, std::vector<float>(kCount));
  std::vector<ncclResult_t> results(kRanks, ncclInternalError);
  std::vector<int> wrong(kRanks, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      cfxHostStream_t stream = nullptr;
      if (cfxHostStreamCreate(&stream) != ncclSuccess) return;
      for (size_t i = 0; i < kCount; ++i) bufs[r][i] = static_cast<float>(r + 1);
      // Every in-place sum over ranks leaves the same value on all ranks, so after k ops an element is
      // (1 + 2 + 3) * kRanks^(k-1): an op that ran early, late or twice would show.
      for (int k = 0; k < kOps; ++k) {
        if (ncclAllReduce(bufs[r].data(), bufs[r].data(), kCount, ncclFloat, ncclSum, comms[r],
                          reinterpret_cast<cudaStream_t>(stream)) != ncclSuccess) {
          return;
        }
      }
      results[r] = cfxHostStreamSynchronize(stream);
      EXPECT_EQ(cfxHostStreamQuery(stream), ncclSuccess);
      float expected = 6.0f;
      for (int k = 1; k < kOps; ++k) expected *= kRanks;
      int bad = 0;
      for (size_t i = 0; i < kCount; ++i) bad += bufs[r][i] != expected;
      wrong[r] = bad;
      EXPECT_EQ(cfxHostStreamDestroy(stream), ncclSuccess);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(results[r], ncclSuccess) << "rank " << r << ": " << ncclGetLastError(nullptr);
    EXPECT_EQ(wrong[r], 0) << "rank " << r;
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  }
}

TEST(HostStream, InvalidHandlesAreRejected) {
  EXPECT_EQ(cfxHostStreamCreate(nullptr), ncclInvalidArgument);
  int notAStream = 0;
  EXPECT_EQ(cfxHostStreamQuery(reinterpret_cast<cfxHostStream_t>(&notAStream)), ncclInvalidArgument);
  EXPECT_EQ(cfxHostStreamSynchronize(reinterpret_cast<cfxHostStream_t>(&notAStream)), ncclInvalidArgument);
  EXPECT_EQ(cfxHostStreamDestroy(nullptr), ncclSuccess);
}

int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST(LauncherEnv, TorchrunStyleVariablesFormACommunicator) {
  constexpr int kRanks = 3;
  const std::string port = std::to_string(freePort());
  std::vector<pid_t> pids;
  for (int r = 0; r < kRanks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", port.c_str(), 1);
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(kRanks).c_str(), 1);
      setenv("TORCHELASTIC_RUN_ID", "extensions-test", 1);
      ncclComm_t comm = nullptr;
      if (cfxCommInitFromEnv(&comm) != ncclSuccess) _exit(10);
      int rank = -1;
      int n = 0;
      if (ncclCommUserRank(comm, &rank) != ncclSuccess || rank != r) _exit(11);
      if (ncclCommCount(comm, &n) != ncclSuccess || n != kRanks) _exit(12);
      std::vector<int> v(1001, r);
      if (ncclAllReduce(v.data(), v.data(), v.size(), ncclInt, ncclSum, comm, nullptr) != ncclSuccess) _exit(13);
      for (int x : v) {
        if (x != 0 + 1 + 2) _exit(14);
      }
      _exit(ncclCommDestroy(comm) == ncclSuccess ? 0 : 15);
    }
    pids.push_back(pid);
  }
  for (int r = 0; r < kRanks; ++r) {
    int status = 0;
    ASSERT_EQ(waitpid(pids[r], &status, 0), pids[r]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank " << r << " status " << status;
  }
}

TEST(LauncherEnv, MissingVariablesGiveInvalidUsage) {
  const pid_t pid = fork();
  if (pid == 0) {
    for (const char* v : {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}) unsetenv(v);
    ncclComm_t comm = nullptr;
    _exit(cfxCommInitFromEnv(&comm) == ncclInvalidUsage ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
