// SPDX-License-Identifier: Apache-2.0
// The kernel send queue's states as the TCP proxy reads them (tcp_socket.h, SendQueue), on a loopback connection
// whose receiver stops reading: TCP then keeps bytes unsent with none in flight, as after a drop by the host's own
// queueing discipline, which is the state the proxy pushes.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include "common/doorbell.h"
#include "common/socket.h"
#include "common/status.h"
#include "transport/tcp/tcp_socket.h"

namespace cfx::transport::tcp {
namespace {

using Clock = std::chrono::steady_clock;

struct Pair {
  net::UniqueFd sender;  // non-blocking, tuned as a data socket
  net::Socket receiver;
};

// A loopback connection with small buffers, so that a few hundred KiB fill the receiver's window.
void connectPair(Pair* p) {
  constexpr int64_t kBufferBytes = 64 << 10;
  Result<net::Listener> listener = net::Listener::listen(*net::parseAddress("127.0.0.1:0"), 1);
  ASSERT_TRUE(listener.ok()) << listener.status().message();
  applyBufferSizes(listener->fd(), kBufferBytes);  // inherited by the accepted socket
  bool connected = false;
  int err = 0;
  Result<net::UniqueFd> sender = startConnect(listener->address(), kBufferBytes, &connected, &err);
  ASSERT_TRUE(sender.ok()) << sender.status().message();
  Result<net::Socket> receiver = listener->accept(Deadline(std::chrono::seconds(10)), nullptr);
  ASSERT_TRUE(receiver.ok()) << receiver.status().message();
  ASSERT_EQ(finishConnect(sender->get()), 0);
  ASSERT_TRUE(tuneDataSocket(sender->get()).ok());
  p->sender = std::move(sender).value();
  p->receiver = std::move(receiver).value();
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
  Pair p;
  ASSERT_NO_FATAL_FAILURE(connectPair(&p));
  EXPECT_EQ(sendQueueState(p.sender.get()), SendQueue::Empty);
  EXPECT_EQ(sendQueueState(-1), SendQueue::Empty);  // not a socket: nothing to watch
}

TEST(TcpSendQueue, BytesThePeerCannotTakeAreStalledUntilItReadsThenTheQueueEmpties) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(connectPair(&p));
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

  std::vector<char> got(written);
  const Status read = p.receiver.recvAll(got.data(), got.size(), Deadline(std::chrono::seconds(10)), nullptr);
  ASSERT_TRUE(read.ok()) << read.message();
  for (char c : got) ASSERT_EQ(c, 'x');
  EXPECT_TRUE(reaches(p.sender.get(), SendQueue::Empty));
}

}  // namespace
}  // namespace cfx::transport::tcp
