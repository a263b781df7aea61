// SPDX-License-Identifier: Apache-2.0
// HealthMonitor: heartbeats, process-exit watches and failure flooding (faulttol layer). See health_monitor.h.
#include "faulttol/health_monitor.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <system_error>

#include "common/log.h"
#include "common/param.h"
#include "faulttol/health_wire.h"

namespace cfx::ft {

CFX_PARAM(int64_t, heartbeatMsParam, "CFX_HEARTBEAT_MS", 500,
          "Period of the health heartbeats every rank sends every peer over UDP; a peer silent for "
          "CFX_HEARTBEAT_MISSES periods is declared hung and named on every survivor. 0 turns heartbeats off "
          "(exits and broken connections are still detected and propagated).",
          param::inRange<int64_t>(0, 3600000));
CFX_PARAM(int, heartbeatMissesParam, "CFX_HEARTBEAT_MISSES", 6,
          "Heartbeat periods without a word from a peer before it is declared hung (stopped, frozen or cut off).",
          param::inRange(2, 100000));

HealthOptions HealthOptions::fromParams() {
  HealthOptions o;
  o.period = std::chrono::milliseconds(heartbeatMsParam.get());
  o.misses = heartbeatMissesParam.get();
  return o;
}

const char* reasonName(FailureReason reason) {
  switch (reason) {
    case FailureReason::Exited:
      return "exited";
    case FailureReason::ConnectionLost:
      return "lost its connection";
    case FailureReason::Hung:
      return "hung";
  }
  return "failed";
}

std::string Failure::describe() const {
  std::string s = strprintf("rank %d (host %s, pid %d) %s: %s; detected by rank %d", rank,
                            host.empty() ? "?" : host.c_str(), pid, reasonName(reason), text.c_str(), detectedBy);
  if (!op.empty()) s += strprintf(" during %s seq %llu", op.c_str(), static_cast<unsigned long long>(opSeq));
  return s;
}

namespace {

using Clock = std::chrono::steady_clock;

// A descriptor that becomes readable when the process exits; invalid where pidfds are unavailable (kernel < 5.3,
// seccomp), in which case the period check falls back to kill(pid, 0).
net::UniqueFd openPidFd(int pid) {
#ifdef SYS_pidfd_open
  return net::UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
#else
  (void)pid;
  return net::UniqueFd();
#endif
}

// Tags of the loop's wait set: a peer's pidFd is tagged with its rank + kFirstPeerTag.
constexpr uint64_t kWakeTag = 0;
constexpr uint64_t kSocketTag = 1;
constexpr uint64_t kFirstPeerTag = 2;

bool addToWaitSet(int epollFd, int fd, uint64_t tag) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = tag;
  return ::epoll_ctl(epollFd, EPOLL_CTL_ADD, fd, &ev) == 0;
}

}  // namespace

HealthMonitor::HealthMonitor(int rank, int nRanks, const HealthOptions& options, uint64_t commTag)
    : rank_(rank), nRanks_(nRanks), options_(options), commTag_(commTag) {}

Result<std::unique_ptr<HealthMonitor>> HealthMonitor::open(int rank, int nRanks, const HealthOptions& options,
                                                           std::span<const uint8_t> secret, uint64_t commTag,
                                                           const sockaddr_storage& bindAddress) {
  std::unique_ptr<HealthMonitor> m(new HealthMonitor(rank, nRanks, options, commTag));
  m->sock_.reset(::socket(bindAddress.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!m->sock_.valid()) {
    return Status::error(Errc::SystemError, strprintf("health monitor: UDP socket: %s", std::strerror(errno)));
  }
  sockaddr_storage addr = bindAddress;
  net::setAddressPort(addr, 0);
  if (::bind(m->sock_.get(), reinterpret_cast<const sockaddr*>(&addr), net::addressLength(addr)) != 0) {
    return Status::error(Errc::SystemError, strprintf("health monitor: bind UDP %s: %s",
                                                      net::addressToString(addr).c_str(), std::strerror(errno)));
  }
  socklen_t len = sizeof(m->address_);
  if (::getsockname(m->sock_.get(), reinterpret_cast<sockaddr*>(&m->address_), &len) != 0) {
    return Status::error(Errc::SystemError, strprintf("health monitor: getsockname: %s", std::strerror(errno)));
  }
  m->wakeFd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!m->wakeFd_.valid()) return Status::error(Errc::SystemError, strprintf("eventfd: %s", std::strerror(errno)));
  CFX_TRY_ASSIGN(crypto::HmacKey sendKey, crypto::HmacKey::make(secret));
  CFX_TRY_ASSIGN(crypto::HmacKey recvKey, crypto::HmacKey::make(secret));
  m->sendKey_.emplace(std::move(sendKey));
  m->recvKey_.emplace(std::move(recvKey));
  m->epollFd_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!m->epollFd_.valid() || !addToWaitSet(m->epollFd_.get(), m->wakeFd_.get(), kWakeTag) ||
      !addToWaitSet(m->epollFd_.get(), m->sock_.get(), kSocketTag)) {
    return Status::error(Errc::SystemError, strprintf("health monitor: epoll: %s", std::strerror(errno)));
  }
  return m;
}

HealthMonitor::~HealthMonitor() { stop(); }

Status HealthMonitor::start(std::vector<PeerIdentity> peers, Doorbell* doorbell, FailureSink sink) {
  if (static_cast<int>(peers.size()) != nRanks_) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("health monitor: %zu peers for %d ranks", peers.size(), nRanks_));
  }
  for (int r = 0; r < nRanks_; ++r) {
    const sockaddr_storage& a = peers[static_cast<size_t>(r)].address;
    if (r != rank_ && a.ss_family != AF_INET && a.ss_family != AF_INET6) {
      return Status::error(
          Errc::InvalidArgument,
          strprintf("health monitor: rank %d sent a bad heartbeat address (family %d)", r, a.ss_family));
    }
  }
  doorbell_ = doorbell;
  sink_ = std::move(sink);
  const auto now = Clock::now();
  peers_.resize(static_cast<size_t>(nRanks_));
  for (int r = 0; r < nRanks_; ++r) {
    Peer& p = peers_[static_cast<size_t>(r)];
    p.id = std::move(peers[static_cast<size_t>(r)]);
    p.lastHeard = now;
    if (r != rank_ && p.id.watchPid && p.id.pid > 0) p.pidFd = openPidFd(p.id.pid);
    // A pidfd the wait set refuses is dropped: the period check's kill(pid, 0) watches that peer instead.
    if (p.pidFd.valid() && !addToWaitSet(epollFd_.get(), p.pidFd.get(), kFirstPeerTag + static_cast<uint64_t>(r))) {
      p.pidFd.reset();
    }
  }
  try {
    thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "cfx-health");
      log::setThreadRank(rank_);
      loop();
    });
  } catch (const std::system_error& e) {
    return Status::error(Errc::SystemError, strprintf("cannot start the health monitor thread: %s", e.what()));
  }
  CFX_INFO(log::Sys::Ft, "health monitor of rank %d on %s: heartbeat every %lld ms, hung after %d misses", rank_,
           net::addressToString(address_).c_str(), static_cast<long long>(options_.period.count()), options_.misses);
  return Status();
}

void HealthMonitor::stop() {
  {
    std::lock_guard lk(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  if (thread_.joinable()) {
    announceLeaving();
    stopping_.store(true, std::memory_order_relaxed);
    wake();
    thread_.join();
  }
}

void HealthMonitor::announceLeaving() {
  // Peers stop expecting heartbeats from a rank that left on purpose; a datagram cannot block.
  for (int r = 0; r < nRanks_; ++r) {
    if (r != rank_) sendTo(r, wire::Leaving, {});
  }
}

void HealthMonitor::setRevokeSink(RevokeSink sink) {
  std::lock_guard lk(mu_);
  revokeSink_ = std::move(sink);
}

void HealthMonitor::announceRevoke(Errc code, const std::string& reason) {
  if (revokeSeen_.exchange(true, std::memory_order_acq_rel)) return;  // this revoke's news is already out
  const std::vector<uint8_t> payload = wire::encodeRevoke(RevokeNotice{rank_, code, reason});
  for (int r = 0; r < nRanks_; ++r) {
    if (r != rank_) sendTo(r, wire::Revoke, payload);
  }
}

void HealthMonitor::wake() {
  const uint64_t one = 1;
  (void)!::write(wakeFd_.get(), &one, sizeof(one));  // a full counter means a wake-up is already pending
}

std::vector<Failure> HealthMonitor::failures() const {
  std::lock_guard lk(mu_);
  return failures_;
}

std::string HealthMonitor::describeFailures() const {
  std::string ranks;
  std::string causes;
  for (const Failure& f : failures()) {
    ranks += strprintf("%s%d", ranks.empty() ? "" : ", ", f.rank);
    causes += (causes.empty() ? "" : "; ") + f.describe();
  }
  return ranks.empty() ? std::string() : strprintf("failed rank(s) %s: %s", ranks.c_str(), causes.c_str());
}

bool HealthMonitor::departed(int rank) const {
  std::lock_guard lk(mu_);
  return rank >= 0 && rank < static_cast<int>(peers_.size()) &&
         peers_[static_cast<size_t>(rank)].state == PeerState::Departed;
}

void HealthMonitor::setState(Peer& peer, PeerState next) {
  // The transitions of the header's state machine; anything else is a bug, and Failed stays Failed.
  const bool legal = peer.state == PeerState::Alive || (peer.state == PeerState::Departed && next == PeerState::Failed);
  if (!legal) return;
  peer.state = next;
  if (next != PeerState::Alive) dropPidFd(peer);
}

void HealthMonitor::dropPidFd(Peer& peer) {
  if (!peer.pidFd.valid()) return;
  // Out of the wait set first: closing removes it only once no other descriptor (a child forked meanwhile) refers
  // to the pidfd, and until then an exited peer would keep the loop awake.
  (void)::epoll_ctl(epollFd_.get(), EPOLL_CTL_DEL, peer.pidFd.get(), nullptr);
  peer.pidFd.reset();
}

// ---- sending ----------------------------------------------------------------------------------------------

void HealthMonitor::sendTo(int peer, uint16_t kind, std::span<const uint8_t> payload) {
  if (peers_.empty()) return;  // not started: no addresses yet
  std::lock_guard lk(sendMu_);
  wire::Header h;
  h.kind = kind;
  h.commTag = commTag_;
  h.sender = rank_;
  h.receiver = peer;
  h.nRanks = nRanks_;
  h.counter = ++counter_;
  h.known = static_cast<uint32_t>(failedCount());
  Result<std::vector<uint8_t>> dgram = wire::seal(h, payload, *sendKey_);
  if (!dgram.ok()) {
    CFX_WARN("health monitor of rank %d: %s", rank_, dgram.status().message().c_str());
    return;
  }
  const sockaddr_storage& to = peers_[static_cast<size_t>(peer)].id.address;
  // Best effort: a lost heartbeat is one miss, a lost notice is resent when the receiver's heartbeat shows it
  // knows fewer failures than we do.
  (void)::sendto(sock_.get(), dgram->data(), dgram->size(), MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&to),
                 net::addressLength(to));
}

void HealthMonitor::sendHeartbeats() {
  std::vector<int> to;
  {
    std::lock_guard lk(mu_);
    for (int r = 0; r < nRanks_; ++r) {
      if (r != rank_ && peers_[static_cast<size_t>(r)].state != PeerState::Failed) to.push_back(r);
    }
  }
  for (int r : to) sendTo(r, wire::Heartbeat, {});
}

// ---- learning ---------------------------------------------------------------------------------------------

bool HealthMonitor::record(const Failure& in, bool firstHand) {
  Failure f = in;
  {
    std::lock_guard lk(mu_);
    if (peers_.empty()) return false;
    Peer& p = peers_[static_cast<size_t>(f.rank)];
    if (p.state == PeerState::Failed) return false;
    setState(p, PeerState::Failed);
    if (f.host.empty()) f.host = p.id.host;
    if (f.pid == 0) f.pid = p.id.pid;
    failures_.push_back(f);
    // Release pairs with failedCount()'s acquire: whoever sees the count finds the record under mu_.
    failedCount_.store(static_cast<int>(failures_.size()), std::memory_order_release);
  }
  cv_.notify_all();
  // Every survivor WARNs once per failed rank, also one that is idle and learns of it only here.
  if (f.rank == rank_) {
    CFX_WARN("rank %d was declared failed by its peers: %s", rank_, f.describe().c_str());
  } else {
    CFX_WARN("rank %d: %s%s", rank_, f.describe().c_str(), firstHand ? "" : " (notice from a peer)");
  }
  // Flood before waking our own executor: once it returns, the user may abort and close connections, and the
  // other survivors must already have the cause in their queue by then.
  const std::vector<uint8_t> payload = wire::encodeFailure(f);
  for (int r = 0; r < nRanks_; ++r) {
    if (r != rank_) sendTo(r, wire::FailureNotice, payload);
  }
  if (doorbell_ != nullptr) doorbell_->ring();
  if (sink_) sink_(f);
  return true;
}

bool HealthMonitor::report(int rank, FailureReason reason, const std::string& text, const std::string& op,
                           uint64_t opSeq) {
  if (rank < 0 || rank >= nRanks_ || rank == rank_ || failedCount() > 0) return false;
  Failure f;
  f.rank = rank;
  f.reason = reason;
  f.detectedBy = rank_;
  f.op = op;
  f.opSeq = opSeq;
  f.text = text;
  return record(f, true);
}

bool HealthMonitor::awaitFailure(std::chrono::milliseconds grace) {
  pollNow();
  std::unique_lock lk(mu_);
  return cv_.wait_for(lk, grace, [this] { return !failures_.empty(); });
}

void HealthMonitor::pollNow() {
  std::lock_guard lk(recvMutex_);
  receiveAll();
}

void HealthMonitor::receiveAll() {
  uint8_t buf[wire::kMaxDatagramBytes + 1];
  for (;;) {
    sockaddr_storage from{};
    socklen_t fromLen = sizeof(from);
    const ssize_t n = ::recvfrom(sock_.get(), buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC,
                                 reinterpret_cast<sockaddr*>(&from), &fromLen);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // EAGAIN: drained; anything else (ECONNREFUSED from an old send) says nothing about this queue
    }
    const size_t got = std::min(static_cast<size_t>(n), sizeof(buf));  // MSG_TRUNC: n is the real length
    if (static_cast<size_t>(n) > wire::kMaxDatagramBytes) {
      ++badDatagrams_;
      if (badDatagrams_ <= 3) {
        CFX_WARN("health monitor of rank %d: dropped a %zd-byte datagram from %s (limit %zu)", rank_, n,
                 net::addressToString(from).c_str(), wire::kMaxDatagramBytes);
      }
      continue;
    }
    handleDatagram(std::span<const uint8_t>(buf, got), from);
  }
}

void HealthMonitor::handleDatagram(std::span<const uint8_t> bytes, const sockaddr_storage& from) {
  Result<wire::Opened> opened = wire::open(bytes, *recvKey_, commTag_, nRanks_, rank_);
  if (!opened.ok()) {
    // A stranger, a garbled datagram or another communicator's monitor: a few WARN lines, then INFO, so a flood
    // cannot fill the log.
    ++badDatagrams_;
    if (badDatagrams_ <= 3) {
      CFX_WARN("health monitor of rank %d: dropped a datagram from %s: %s", rank_, net::addressToString(from).c_str(),
               opened.status().message().c_str());
    } else {
      CFX_INFO(log::Sys::Ft, "health monitor of rank %d: dropped a datagram from %s: %s", rank_,
               net::addressToString(from).c_str(), opened.status().message().c_str());
    }
    return;
  }
  const wire::Header& h = opened->header;
  if (h.sender == rank_) return;
  bool resend = false;
  {
    std::lock_guard lk(mu_);
    if (peers_.empty()) return;  // not started
    Peer& p = peers_[static_cast<size_t>(h.sender)];
    if (h.counter <= p.lastCounter) return;  // a replay, or overtaken by a newer datagram
    p.lastCounter = h.counter;
    p.lastHeard = Clock::now();
    if (h.kind == wire::Heartbeat) resend = h.known < failures_.size();
    if (h.kind == wire::Leaving && p.state == PeerState::Alive) {
      setState(p, PeerState::Departed);
      CFX_INFO(log::Sys::Ft, "rank %d: rank %d left the communicator", rank_, h.sender);
    }
  }
  if (h.kind == wire::Revoke) {
    Result<RevokeNotice> notice = wire::decodeRevoke(opened->payload, nRanks_);
    if (!notice.ok()) {
      CFX_WARN("health monitor of rank %d: bad revoke notice from rank %d: %s", rank_, h.sender,
               notice.status().message().c_str());
      return;
    }
    if (!revokeSeen_.exchange(true, std::memory_order_acq_rel)) {
      CFX_INFO(log::Sys::Ft, "rank %d: rank %d revoked the communicator (heard from rank %d)%s%s", rank_,
               notice->origin, h.sender, notice->reason.empty() ? "" : ": ", notice->reason.c_str());
      for (int r = 0; r < nRanks_; ++r) {
        if (r != rank_ && r != h.sender && r != notice->origin) sendTo(r, wire::Revoke, opened->payload);
      }
      if (revokeSink_) revokeSink_(*notice);
      if (doorbell_ != nullptr) doorbell_->ring();
    }
  }
  if (h.kind == wire::FailureNotice) {
    Result<Failure> f = wire::decodeFailure(opened->payload, nRanks_);
    if (!f.ok()) {
      CFX_WARN("health monitor of rank %d: bad failure notice from rank %d: %s", rank_, h.sender,
               f.status().message().c_str());
      return;
    }
    (void)record(*f, false);
  }
  if (resend) {
    for (const Failure& f : failures()) sendTo(h.sender, wire::FailureNotice, wire::encodeFailure(f));
  }
}

// ---- the monitor thread -----------------------------------------------------------------------------------

void HealthMonitor::checkSilence() {
  std::vector<Failure> found;
  const auto now = Clock::now();
  {
    std::lock_guard lk(mu_);
    for (int r = 0; r < nRanks_; ++r) {
      Peer& p = peers_[static_cast<size_t>(r)];
      if (r == rank_ || p.state != PeerState::Alive) continue;
      Failure f;
      f.rank = r;
      f.detectedBy = rank_;
      if (p.id.watchPid && !p.pidFd.valid() && p.id.pid > 0 && ::kill(p.id.pid, 0) != 0 && errno == ESRCH) {
        f.reason = FailureReason::Exited;
        f.text = strprintf("process %d is gone", p.id.pid);
        found.push_back(f);
        continue;
      }
      const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - p.lastHeard);
      if (options_.period.count() > 0 && silent > options_.hungAfter()) {
        f.reason = FailureReason::Hung;
        f.text = strprintf(
            "no heartbeat for %lld ms (CFX_HEARTBEAT_MISSES=%d periods of CFX_HEARTBEAT_MS=%lld): "
            "the process is stopped, frozen or cut off from this rank",
            static_cast<long long>(silent.count()), options_.misses, static_cast<long long>(options_.period.count()));
        found.push_back(f);
      }
    }
  }
  for (const Failure& f : found) (void)record(f, true);
}

void HealthMonitor::loop() {
  auto nextBeat = Clock::now();
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  while (!stopping_.load(std::memory_order_relaxed)) {
    int timeoutMs = 1000;
    if (options_.period.count() > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(nextBeat - Clock::now()).count();
      timeoutMs = static_cast<int>(std::clamp<long long>(left, 0, 1000));
    }
    const int n = ::epoll_wait(epollFd_.get(), events, kMaxEvents, timeoutMs);
    if (n < 0 && errno != EINTR) {
      CFX_WARN("health monitor of rank %d: epoll_wait failed: %s", rank_, std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    bool datagrams = false;
    bool exits = false;
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == kWakeTag) {
        uint64_t count;
        (void)!::read(wakeFd_.get(), &count, sizeof(count));
      } else {
        datagrams |= events[i].data.u64 == kSocketTag;
        exits |= events[i].data.u64 >= kFirstPeerTag;
      }
    }
    // The socket first, also when an exit comes without its event in this batch: a peer that left on purpose said so
    // before it exited.
    if (datagrams || exits) pollNow();
    for (int i = 0; exits && i < n; ++i) {
      if (events[i].data.u64 < kFirstPeerTag) continue;
      const int r = static_cast<int>(events[i].data.u64 - kFirstPeerTag);
      Failure f;
      f.rank = r;
      f.detectedBy = rank_;
      f.reason = FailureReason::Exited;
      bool alive;
      {
        std::lock_guard lk(mu_);
        Peer& p = peers_[static_cast<size_t>(r)];
        if (!p.pidFd.valid()) continue;  // closed after this batch was taken: its exit is already handled
        alive = p.state == PeerState::Alive;
        f.text = strprintf("process %d exited (seen on this host)", p.id.pid);
        if (!alive) dropPidFd(p);  // departed, then exited: a normal end
      }
      if (alive) (void)record(f, true);
    }
    if (options_.period.count() > 0 && Clock::now() >= nextBeat) {
      sendHeartbeats();
      checkSilence();
      nextBeat = Clock::now() + options_.period;
    }
  }
}

}  // namespace cfx::ft
