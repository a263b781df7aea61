// SPDX-License-Identifier: Apache-2.0
// The TCP transport's proxy thread: epoll over the data sockets and the wake eventfd (transport layer).
#include "transport/tcp/tcp_proxy.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "common/thread_affinity.h"
#include "transport/owner_drive.h"

namespace cfx::transport::tcp {

namespace {
constexpr int kIdleWaitMs = 100;  // the longest the thread sleeps without looking at its stop flag
constexpr int kMaxEvents = 64;
constexpr uint32_t kSocketEvents = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;

// epoll_wait with a timeout in microseconds (epoll_pwait2 where the kernel has it, else rounded up to 1 ms).
int waitUs(int epfd, epoll_event* events, int maxEvents, long us) {
#ifdef SYS_epoll_pwait2
  static std::atomic<bool> unsupported{false};
  if (!unsupported.load(std::memory_order_relaxed)) {
    timespec ts{.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
    const long n = ::syscall(SYS_epoll_pwait2, epfd, events, maxEvents, &ts, nullptr, 0);
    if (n >= 0 || errno != ENOSYS) return static_cast<int>(n);
    unsupported.store(true, std::memory_order_relaxed);
  }
#endif
  return ::epoll_wait(epfd, events, maxEvents, static_cast<int>((us + 999) / 1000));
}
}  // namespace

Result<std::unique_ptr<TcpProxy>> TcpProxy::start(int rank, int index, Doorbell& doorbell,
                                                  std::shared_ptr<ProxyWaker> waker,
                                                  std::vector<std::unique_ptr<TcpStream>> streams) {
  net::UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll.valid())
    return Status::error(Errc::SystemError, strprintf("tcp: epoll_create1(): %s", std::strerror(errno)));
  epoll_event ev{};
  ev.events = EPOLLIN;  // level-triggered: drain() empties it
  ev.data.ptr = nullptr;
  if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, waker->fd(), &ev) != 0) {
    return Status::error(Errc::SystemError, strprintf("tcp: epoll_ctl(eventfd): %s", std::strerror(errno)));
  }
  for (auto& stream : streams) {
    // Edge-triggered: TcpStream keeps readiness until EAGAIN, so a stream waiting for a free slot is not
    // reported again and again while its owner is busy.
    ev.events = kSocketEvents;
    ev.data.ptr = stream.get();
    if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, stream->fd(), &ev) != 0) {
      return Status::error(Errc::SystemError, strprintf("tcp: epoll_ctl(socket): %s", std::strerror(errno)));
    }
  }
  std::unique_ptr<TcpProxy> proxy(
      new TcpProxy(rank, index, doorbell, std::move(waker), std::move(streams), std::move(epoll)));
  proxy->thread_ = std::thread([p = proxy.get()] { p->run(); });
  return proxy;
}

TcpProxy::TcpProxy(int rank, int index, Doorbell& doorbell, std::shared_ptr<ProxyWaker> waker,
                   std::vector<std::unique_ptr<TcpStream>> streams, net::UniqueFd epoll)
    : rank_(rank),
      index_(index),
      doorbell_(doorbell),
      waker_(std::move(waker)),
      streams_(std::move(streams)),
      epoll_(std::move(epoll)) {}

TcpProxy::~TcpProxy() { stop(std::chrono::milliseconds(0)); }

void TcpProxy::requestStop(std::chrono::milliseconds linger) {
  if (!thread_.joinable() || stopping_.load(std::memory_order_relaxed)) return;
  lingerUntil_ = Deadline::Clock::now() + linger;
  // Release pairs with run()'s acquire load: the proxy sees lingerUntil_ once it sees the flag.
  stopping_.store(true, std::memory_order_release);
  waker_->wake();
}

void TcpProxy::join() {
  if (thread_.joinable()) thread_.join();
}

bool TcpProxy::anyUnsent() const {
  for (const auto& stream : streams_) {
    if (stream->hasUnsentSlots()) return true;
  }
  return false;
}

void TcpProxy::mask(bool masked) {
  parked_ = masked;
  for (auto& stream : streams_) {
    if (!stream->open()) continue;
    epoll_event ev{};
    // Unmasking re-arms edge-triggered reporting: readiness present now is reported once.
    ev.events = masked ? EPOLLET : kSocketEvents;
    ev.data.ptr = stream.get();
    (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, stream->fd(), &ev);
  }
}

int TcpProxy::watchSendQueues() {
  bool moving = false;
  bool stalled = false;
  for (auto& stream : streams_) {
    if (!stream->open() || stream->dead()) continue;
    const SendQueue queue = stream->watchSendQueue();
    moving |= queue == SendQueue::Moving;
    stalled |= queue == SendQueue::Stalled;
  }
  if (!moving && !stalled) {
    watchMs_ = kWatchFirstMs;
    return kIdleWaitMs;
  }
  const int ms = watchMs_;
  watchMs_ = stalled ? std::min(2 * watchMs_, kIdleWaitMs) : kWatchFirstMs;
  return ms;
}

void TcpProxy::run() {
  pthread_setname_np(pthread_self(), index_ == 0 ? "cfx-tcp-proxy" : strprintf("cfx-tcp-proxy%d", index_).c_str());
  log::setThreadRank(rank_);
  releaseHelperThreadAffinity("tcp proxy");
  std::array<epoll_event, kMaxEvents> events{};
  bool busy = true;
  OwnerWatch watch(waker_->ticks());
  for (;;) {
    // After a productive round look again without sleeping; otherwise sleep until something happens.
    const int n = parked_ ? waitUs(epoll_.get(), events.data(), kMaxEvents, kOwnerParkStep.count())
                          : ::epoll_wait(epoll_.get(), events.data(), kMaxEvents, busy ? 0 : watchSendQueues());
    if (n < 0 && errno != EINTR) {
      const Status error = Status::error(Errc::SystemError, strprintf("tcp: epoll_wait(): %s", std::strerror(errno)));
      for (auto& stream : streams_) stream->link().fail(error);
      doorbell_.ring();
      return;
    }
    for (int i = 0; i < n; ++i) {
      if (events[static_cast<size_t>(i)].data.ptr == nullptr) {
        waker_->drain();
      } else {
        static_cast<TcpStream*>(events[static_cast<size_t>(i)].data.ptr)
            ->onEvents(events[static_cast<size_t>(i)].events);
      }
    }
    {
      // Owner-driven links: while an owner drives its sockets, keep off them and mask their readiness, so that
      // arriving data wakes nobody but the spinning owner; take over once its count stands still for a park step.
      if (watch.ownerDriving(waker_->ticks()) && !stopping_.load(std::memory_order_relaxed)) {
        if (!parked_) mask(true);
        busy = false;
        continue;
      }
      if (parked_) mask(false);
    }
    // Every stream, not only the reported ones: a wake says some ring moved, not which. The loop is a few
    // loads per idle stream; a per-link dirty list can replace it if rank counts make that matter.
    bool progressed = false;
    bool contended = false;  // an owner was driving a stream inline: look again without sleeping
    for (auto& stream : streams_) {
      if (!stream->open()) continue;  // closed after an earlier failure
      if (!stream->dead()) progressed |= stream->progress(&contended);
      if (stream->dead()) {  // failed just now, here or in onEvents(): the owner must hear of it
        (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, stream->fd(), nullptr);
        stream->close();
        progressed = true;
      }
    }
    if (progressed) doorbell_.ring();
    busy = progressed || contended;
    // Acquire pairs with stop()'s release store.
    if (stopping_.load(std::memory_order_acquire) && (Deadline::Clock::now() >= lingerUntil_ || !anyUnsent())) break;
  }
}

}  // namespace cfx::transport::tcp
