// SPDX-License-Identifier: Apache-2.0
// The shm transport between two real processes (fork): cross-process FIFOs and doorbells, and a peer that dies.
// The two ranks bootstrap over a socketpair.
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/doorbell.h"
#include "transport/shm/shm_transport.h"

namespace cfx::transport::shm {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

bool writeAll(int fd, const void* data, size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool readAll(int fd, void* data, size_t bytes) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::read(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

// A two-rank bootstrap over one end of a socketpair.
class PairBootstrap final : public Bootstrap {
 public:
  PairBootstrap(int fd, int rank) : fd_(fd), rank_(rank) {}
  int rank() const override { return rank_; }
  int nRanks() const override { return 2; }
  const Secret& secret() const override { return secret_; }
  bool authenticated() const override { return true; }
  const sockaddr_storage& localAddress() const override { return address_; }
  Status allGather(void* data, size_t bytesPerRank) override {
    auto* bytes = static_cast<char*>(data);
    if (!writeAll(fd_, bytes + rank_ * bytesPerRank, bytesPerRank) ||
        !readAll(fd_, bytes + (1 - rank_) * bytesPerRank, bytesPerRank)) {
      return Status::error(Errc::RemoteError, "pair bootstrap: the other process went away");
    }
    return Status();
  }
  Status barrier() override {
    char token = 0;
    if (!signal(&token)) return Status::error(Errc::RemoteError, "pair bootstrap: the other process went away");
    return Status();
  }
  Status send(int, uint64_t, const void*, size_t) override { return unsupported(); }
  Status recv(int, uint64_t, void*, size_t) override { return unsupported(); }
  Status recv(int, uint64_t, void*, size_t, const std::function<Status()>&) override { return unsupported(); }
  void setPeerWatch(std::function<Status(int)>) override {}
  void abort() override {}

  // Out-of-band handshakes between the test's two processes.
  bool signal(char* token) { return writeAll(fd_, token, 1) && readAll(fd_, token, 1); }
  bool notify() { return writeAll(fd_, "g", 1); }
  bool awaitNotify() {
    char c;
    return readAll(fd_, &c, 1);
  }

 private:
  static Status unsupported() { return Status::error(Errc::InternalError, "pair bootstrap: no point-to-point"); }
  int fd_;
  int rank_;
  Secret secret_{};
  sockaddr_storage address_{};
};

std::string testPrefix() { return "cfxpt" + std::to_string(::getpid()); }

std::vector<std::string> devShmEntries(const std::string& prefix) {
  std::vector<std::string> found;
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (const dirent* e = ::readdir(dir)) {
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) found.emplace_back(e->d_name);
    }
    ::closedir(dir);
  }
  return found;
}

std::vector<PeerInfo> twoPeers(pid_t parent, pid_t child) {
  std::vector<PeerInfo> peers(2);
  for (int r = 0; r < 2; ++r) {
    peers[r].rank = r;
    peers[r].hostHash = 0x5eed;
    std::snprintf(peers[r].hostName, sizeof(peers[r].hostName), "box%d", r);
  }
  peers[0].pid = parent;
  peers[1].pid = child;
  return peers;
}

ShmOptions options() {
  ShmOptions o;
  o.geometry = FifoGeometry{.slotBytes = 128, .nSlots = 2};
  o.segmentPrefix = testPrefix();
  return o;
}

// Spin briefly, then sleep on the doorbell; gives up after a generous hang guard.
template <typename Ready>
bool waitFor(Doorbell& bell, Ready ready) {
  Backoff backoff(100);
  const auto giveUp = std::chrono::steady_clock::now() + 60s;
  for (;;) {
    const uint32_t seen = bell.read();
    if (ready()) return true;
    if (!backoff.spin()) continue;
    if (std::chrono::steady_clock::now() > giveUp) return false;
    bell.wait(seen, 100ms);
  }
}

bool send(SendEnd& out, Doorbell& bell, uint64_t value) {
  void* slot = nullptr;
  if (!waitFor(bell, [&] { return (slot = out.tryAcquire()) != nullptr; })) return false;
  std::memcpy(slot, &value, sizeof(value));
  out.post(sizeof(value), ~value);
  return true;
}

bool recv(RecvEnd& in, Doorbell& bell, uint64_t* value) {
  const void* slot = nullptr;
  size_t bytes = 0;
  uint64_t tag = 0;
  if (!waitFor(bell, [&] { return (slot = in.tryPeek(&bytes, &tag)) != nullptr; })) return false;
  if (bytes != sizeof(*value)) return false;
  std::memcpy(value, slot, sizeof(*value));
  in.release();
  return tag == ~*value;
}

// Rank 1 in the child process. Exit codes name the step that failed.
enum ChildExit { kChildOk = 0, kChildCreate = 10, kChildTraffic = 11, kChildHandshake = 12 };

[[noreturn]] void childEchoes(int fd, pid_t parent, int roundTrips, bool closeBeforeExit) {
  PairBootstrap bootstrap(fd, 1);
  Endpoints ends;
  auto created = ShmTransport::create(bootstrap, twoPeers(parent, ::getpid()), options(), ends);
  if (!created.ok()) ::_exit(kChildCreate);
  Doorbell& bell = created.value()->doorbell();
  for (int i = 0; i < roundTrips; ++i) {
    uint64_t v = 0;
    if (!recv(*ends.recv[kCollChannel][0], bell, &v) || !send(*ends.send[kCollChannel][0], bell, v + 1)) {
      ::_exit(kChildTraffic);
    }
  }
  if (!bootstrap.notify() || !bootstrap.awaitNotify()) ::_exit(kChildHandshake);
  if (closeBeforeExit) created.value().reset();
  ::_exit(kChildOk);
}

class ShmTwoProcesses : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds_), 0); }
  void TearDown() override {
    if (child_ > 0) {
      ::kill(child_, SIGKILL);
      ::waitpid(child_, nullptr, 0);
    }
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  void startChild(int roundTrips, bool closeBeforeExit) {
    const pid_t parent = ::getpid();
    child_ = ::fork();
    ASSERT_GE(child_, 0);
    if (child_ == 0) {
      ::close(fds_[0]);
      childEchoes(fds_[1], parent, roundTrips, closeBeforeExit);
    }
  }
  int reapChild() {
    int status = 0;
    EXPECT_EQ(::waitpid(child_, &status, 0), child_);
    child_ = -1;
    return status;
  }

  int fds_[2] = {-1, -1};
  pid_t child_ = -1;
};

TEST_F(ShmTwoProcesses, PingPongAcrossProcessesAndNoSegmentLeftBehind) {
  constexpr int kRoundTrips = 2000;
  startChild(kRoundTrips, /*closeBeforeExit=*/true);
  PairBootstrap bootstrap(fds_[0], 0);
  Endpoints ends;
  auto created = ShmTransport::create(bootstrap, twoPeers(::getpid(), child_), options(), ends);
  ASSERT_TRUE(created.ok()) << created.status().message();
  EXPECT_TRUE(devShmEntries(testPrefix()).empty());
  Doorbell& bell = created.value()->doorbell();
  for (uint64_t i = 0; i < kRoundTrips; ++i) {
    uint64_t back = 0;
    ASSERT_TRUE(send(*ends.send[kCollChannel][1], bell, 3 * i));
    ASSERT_TRUE(recv(*ends.recv[kCollChannel][1], bell, &back));
    ASSERT_EQ(back, 3 * i + 1);
  }
  EXPECT_TRUE(bootstrap.awaitNotify());
  EXPECT_TRUE(ends.send[kCollChannel][1]->check().ok());
  EXPECT_TRUE(bootstrap.notify());
  const int status = reapChild();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == kChildOk) << "child status " << status;
  EXPECT_TRUE(devShmEntries(testPrefix()).empty());
}

TEST_F(ShmTwoProcesses, KilledPeerIsReportedWithRankHostAndPidEvenBeforeItIsReaped) {
  startChild(1, /*closeBeforeExit=*/false);
  PairBootstrap bootstrap(fds_[0], 0);
  Endpoints ends;
  auto created = ShmTransport::create(bootstrap, twoPeers(::getpid(), child_), options(), ends);
  ASSERT_TRUE(created.ok()) << created.status().message();
  uint64_t back = 0;
  ASSERT_TRUE(send(*ends.send[kCollChannel][1], created.value()->doorbell(), 41));
  ASSERT_TRUE(recv(*ends.recv[kCollChannel][1], created.value()->doorbell(), &back));
  EXPECT_EQ(back, 42u);
  ASSERT_TRUE(bootstrap.awaitNotify());  // the child is alive and waits for us
  EXPECT_TRUE(ends.send[kCollChannel][1]->check().ok());
  EXPECT_TRUE(ends.recv[kCollChannel][1]->check().ok());

  ASSERT_EQ(::kill(child_, SIGKILL), 0);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child_), &info, WEXITED | WNOWAIT), 0);  // a zombie now
  for (const Status& st : {ends.send[kCollChannel][1]->check(), ends.recv[kP2pChannel][1]->check()}) {
    EXPECT_EQ(st.code(), Errc::RemoteError);
    EXPECT_THAT(st.message(), HasSubstr("rank 1"));
    EXPECT_THAT(st.message(), HasSubstr("box1"));
    EXPECT_THAT(st.message(), HasSubstr("pid " + std::to_string(child_)));
  }
  const int status = reapChild();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(ends.recv[kCollChannel][1]->check().code(), Errc::RemoteError);
  EXPECT_TRUE(devShmEntries(testPrefix()).empty());
  // Our own teardown does not depend on the dead peer.
  created.value().reset();
  ends = Endpoints();
}

TEST_F(ShmTwoProcesses, PeerThatExitedAndWasReapedIsReported) {
  startChild(1, /*closeBeforeExit=*/false);
  PairBootstrap bootstrap(fds_[0], 0);
  Endpoints ends;
  auto created = ShmTransport::create(bootstrap, twoPeers(::getpid(), child_), options(), ends);
  ASSERT_TRUE(created.ok()) << created.status().message();
  uint64_t back = 0;
  ASSERT_TRUE(send(*ends.send[kCollChannel][1], created.value()->doorbell(), 7));
  ASSERT_TRUE(recv(*ends.recv[kCollChannel][1], created.value()->doorbell(), &back));
  ASSERT_TRUE(bootstrap.awaitNotify());
  ASSERT_TRUE(bootstrap.notify());  // the child _exit()s without closing its transport
  const int status = reapChild();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == kChildOk) << "child status " << status;
  const Status st = ends.send[kCollChannel][1]->check();
  EXPECT_EQ(st.code(), Errc::RemoteError);
  EXPECT_THAT(st.message(), HasSubstr("exited"));
}

}  // namespace
}  // namespace cfx::transport::shm
