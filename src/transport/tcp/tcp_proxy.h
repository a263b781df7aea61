// SPDX-License-Identifier: Apache-2.0
// The TCP transport's proxy threads (transport layer): NCCL_SOCKET_NTHREADS per TcpTransport (one by default),
// named "cfx-tcp-proxy<i>", each moving the stripes of its share of the sockets between the slot rings and the
// non-blocking sockets with epoll.
//
// It never spins: it sleeps in epoll_wait until a socket is ready or an owner wakes it through the ProxyWaker
// (post() and release() do where owners do not drive their links), with a 100 ms timeout as a safety net. After a
// round that freed or published a slot, or found a connection broken, it rings the owning rank's doorbell once.
// While a socket's kernel send queue holds bytes not yet sent, it sleeps a few milliseconds at a time instead and
// pushes a queue that stalled (tcp_socket.h, SendQueue): TCP would otherwise wait 200 ms or more for its probe timer.
//
// Owner-driven links (tcp_connection.h): when a wake-up finds the owner's tick count moved since a look less than
// two park intervals ago, the owner is driving the sockets, so the proxy parks: it masks every socket in epoll
// (readiness no longer wakes it, which on a 2-core machine was most of the cost of a mid-size message) and sleeps
// for one park interval at a time until the count stands still; then it unmasks them (epoll reports once what
// became ready meanwhile) and moves what the owner left, as before. A stream the owner holds at that moment is
// looked at again in the next round, without sleeping.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "common/doorbell.h"
#include "common/status.h"
#include "transport/tcp/tcp_connection.h"

namespace cfx::transport::tcp {

class TcpProxy {
 public:
  // Registers every stream and starts the thread. `doorbell` must outlive the proxy.
  static Result<std::unique_ptr<TcpProxy>> start(int rank, int index, Doorbell& doorbell,
                                                 std::shared_ptr<ProxyWaker> waker,
                                                 std::vector<std::unique_ptr<TcpStream>> streams);
  ~TcpProxy();  // stop(0) if stop() was not called
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  // Stops the thread and joins it. With linger > 0 it first keeps sending frames already posted to live peers,
  // for at most `linger`, so a rank that posts its last message and then tears down does not lose it. Never
  // blocks longer than linger plus one poll round. Owner thread; call at most once.
  void stop(std::chrono::milliseconds linger) {
    requestStop(linger);
    join();
  }
  // stop() in two halves, so that several proxies linger at the same time rather than one after another.
  void requestStop(std::chrono::milliseconds linger);
  void join();

 private:
  TcpProxy(int rank, int index, Doorbell& doorbell, std::shared_ptr<ProxyWaker> waker,
           std::vector<std::unique_ptr<TcpStream>> streams, net::UniqueFd epoll);
  void run();
  bool anyUnsent() const;
  // Parks (masks every open socket's readiness in epoll) or unparks (re-arms it; epoll then reports what is ready).
  void mask(bool masked);
  // Before an idle sleep: looks at the kernel send queues that sends left bytes in (TcpStream::watchSendQueue,
  // which pushes a stalled one) and returns how long to sleep: the idle wait when none holds unsent bytes, else
  // kWatchFirstMs, doubled after each look that found a stall (up to the idle wait), so that a peer that stopped
  // reading costs a few wake-ups rather than hundreds a second.
  int watchSendQueues();

  const int rank_;
  const int index_;
  Doorbell& doorbell_;
  std::shared_ptr<ProxyWaker> waker_;
  std::vector<std::unique_ptr<TcpStream>> streams_;
  net::UniqueFd epoll_;
  std::thread thread_;
  // Set by stop(): release pairs with the proxy's acquire load, which then also sees lingerUntil_.
  std::atomic<bool> stopping_{false};
  Deadline::Clock::time_point lingerUntil_{};
  bool parked_ = false;  // sockets masked while their owner drives them
  // The first look at a send queue holding unsent bytes, and the next one (watchSendQueues).
  static constexpr int kWatchFirstMs = 2;
  int watchMs_ = kWatchFirstMs;
};

}  // namespace cfx::transport::tcp
