// SPDX-License-Identifier: Apache-2.0
// The kernel send queue's states as the TCP proxy reads them (tcp_socket.h, SendQueue), on a loopback connection
// whose receiver stops reading: TCP then keeps bytes unsent with none in flight, as after a drop by the host's own
// queueing discipline, which is the state the proxy pushes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include "common/socket.h"
#include "transport/tcp/tcp_socket.h"

namespace cfx::transport::tcp {
namespace {

using Clock = std::chrono::steady_clock;

struct Pair {
  net::UniqueFd sender;
  net::UniqueFd receiver;
};

// A loopback connection with small buffers, so that a few hundred KiB fill the receiver's window.
Pair connectedPair() {
  net::UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_TRUE(listener.valid());
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), len), 0);
  EXPECT_EQ(::listen(listener.get(), 1), 0);
  EXPECT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
  applyBufferSizes(listener.get(), 64 << 10);  // inherited by the accepted socket
  Pair p;
  p.sender = net::UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  applyBufferSizes(p.sender.get(), 64 << 10);
  EXPECT_EQ(::connect(p.sender.get(), reinterpret_cast<sockaddr*>(&addr), len), 0);
  p.receiver = net::UniqueFd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  EXPECT_TRUE(p.receiver.valid());
  const timeval patience{.tv_sec = 10, .tv_usec = 0};  // a recv that finds nothing fails the test, never hangs it
  EXPECT_EQ(::setsockopt(p.receiver.get(), SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof(patience)), 0);
  EXPECT_TRUE(tuneDataSocket(p.sender.get()).ok());
  EXPECT_EQ(::fcntl(p.sender.get(), F_SETFL, O_NONBLOCK), 0);
  return p;
}

// Polls the sender's queue until it is in `want` (the kernel acknowledges and advertises windows on its own time).
bool reaches(int fd, SendQueue want) {
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < until) {
    if (sendQueueState(fd) == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

TEST(TcpSendQueue, AFreshSocketIsEmpty) {
  Pair p = connectedPair();
  EXPECT_EQ(sendQueueState(p.sender.get()), SendQueue::Empty);
  EXPECT_EQ(sendQueueState(-1), SendQueue::Empty);  // not a socket: nothing to watch
}

TEST(TcpSendQueue, BytesThePeerCannotTakeAreStalledUntilItReadsThenTheQueueEmpties) {
  Pair p = connectedPair();
  // Fill the receiver's window and the sender's buffer: the last bytes then wait unsent with none in flight.
  std::vector<char> chunk(16 << 10, 'x');
  size_t written = 0;
  for (;;) {
    const ssize_t n = ::send(p.sender.get(), chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      ASSERT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK) << errno;
      break;
    }
    written += static_cast<size_t>(n);
  }
  ASSERT_GT(written, 0u);
  ASSERT_TRUE(reaches(p.sender.get(), SendQueue::Stalled)) << "after " << written << " bytes";
  // A push while the window is closed changes nothing, and loses nothing.
  pushSendQueue(p.sender.get());
  EXPECT_NE(sendQueueState(p.sender.get()), SendQueue::Empty);

  size_t got = 0;
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (got < written && Clock::now() < until) {
    const ssize_t n = ::recv(p.receiver.get(), chunk.data(), chunk.size(), 0);
    ASSERT_GT(n, 0);
    for (ssize_t i = 0; i < n; ++i) ASSERT_EQ(chunk[static_cast<size_t>(i)], 'x');
    got += static_cast<size_t>(n);
  }
  EXPECT_EQ(got, written);
  EXPECT_TRUE(reaches(p.sender.get(), SendQueue::Empty));
}

}  // namespace
}  // namespace cfx::transport::tcp
