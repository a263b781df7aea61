// SPDX-License-Identifier: Apache-2.0
// The descriptor passing behind zero-copy windows (transport/cuda_ipc/vmm_memory.h): a peer process receives the
// very file (not a copy of its bytes) over FdServer/FdClient, several peers are served in any order, a tag that does
// not match is refused, and a peer that never comes makes the server time out instead of waiting forever.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "transport/cuda_ipc/vmm_memory.h"

namespace cfx::transport::cuda_ipc {
namespace {

using Clock = std::chrono::steady_clock;

// A memfd of one page holding `text`.
int memfdWith(const char* text) {
  const int fd = memfd_create("fd-passing-test", MFD_CLOEXEC);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(ftruncate(fd, 4096), 0);
  EXPECT_EQ(pwrite(fd, text, strlen(text) + 1, 0), static_cast<ssize_t>(strlen(text) + 1));
  return fd;
}

// In a child: fetches the descriptor from `server`, checks it is the parent's file (reads its text, then writes a
// reply into it that the parent reads back). Exit status 0 when all held.
int fetchAndReply(const std::string& server, uint64_t tag, int childIndex) {
  auto client = FdClient::connect(server);
  if (!client.ok()) return 10;
  Result<int> fd = client.value()->receive(tag, Clock::now() + std::chrono::seconds(20), nullptr);
  if (!fd.ok()) return 11;
  void* m = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd.value(), 0);
  if (m == MAP_FAILED) return 12;
  if (std::strcmp(static_cast<const char*>(m), "from the exporter") != 0) return 13;
  static_cast<char*>(m)[100 + childIndex] = static_cast<char>('A' + childIndex);
  munmap(m, 4096);
  close(fd.value());
  return 0;
}

TEST(FdPassing, PeersReceiveTheSameFile) {
  const int fd = memfdWith("from the exporter");
  auto server = FdServer::listen();
  ASSERT_TRUE(server.ok()) << server.status().message();
  const uint64_t tag = 0x1234abcdull;
  constexpr int kChildren = 3;
  pid_t pids[kChildren];
  for (int c = 0; c < kChildren; ++c) {
    pids[c] = fork();
    ASSERT_GE(pids[c], 0);
    if (pids[c] == 0) _exit(fetchAndReply(server.value()->name(), tag, c));
  }
  const Status served = server.value()->serve(kChildren, fd, tag, Clock::now() + std::chrono::seconds(20), nullptr);
  EXPECT_TRUE(served.ok()) << served.message();
  for (int c = 0; c < kChildren; ++c) {
    int status = 0;
    ASSERT_EQ(waitpid(pids[c], &status, 0), pids[c]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << c << " status " << status;
  }
  char back[kChildren] = {};
  ASSERT_EQ(pread(fd, back, kChildren, 100), kChildren);
  EXPECT_EQ(std::string(back, kChildren), "ABC") << "the children wrote into a copy, not the exporter's file";
  close(fd);
}

TEST(FdPassing, AWrongTagIsRefusedAndNoDescriptorLeaks) {
  const int fd = memfdWith("from the exporter");
  auto server = FdServer::listen();
  ASSERT_TRUE(server.ok());
  auto client = FdClient::connect(server.value()->name());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(server.value()->serve(1, fd, 7, Clock::now() + std::chrono::seconds(5), nullptr).ok());
  Result<int> got = client.value()->receive(8, Clock::now() + std::chrono::seconds(5), nullptr);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("expected 8"), std::string::npos) << got.status().message();
  close(fd);
}

TEST(FdPassing, APeerKnownDeadEndsTheWaitAtOnceWithItsError) {
  const int fd = memfdWith("from the exporter");
  auto server = FdServer::listen();
  ASSERT_TRUE(server.ok());
  const auto start = Clock::now();
  const Status st = server.value()->serve(1, fd, 7, Clock::now() + std::chrono::seconds(30),
                                          [] { return Status::error(Errc::RemoteError, "rank 3 exited"); });
  EXPECT_EQ(st.code(), Errc::RemoteError);
  EXPECT_NE(st.message().find("rank 3 exited"), std::string::npos) << st.message();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10)) << "waited for a peer known to be dead";
  close(fd);
}

TEST(FdPassing, APeerThatNeverComesTimesTheServerOut) {
  const int fd = memfdWith("from the exporter");
  auto server = FdServer::listen();
  ASSERT_TRUE(server.ok());
  const Status st = server.value()->serve(1, fd, 7, Clock::now() + std::chrono::milliseconds(200), nullptr);
  EXPECT_EQ(st.code(), Errc::Timeout);
  EXPECT_NE(st.message().find("1 peer(s)"), std::string::npos) << st.message();
  auto nobody = FdClient::connect("cfx-vmm-no-such-listener");
  EXPECT_FALSE(nobody.ok());
  close(fd);
}

}  // namespace
}  // namespace cfx::transport::cuda_ipc
