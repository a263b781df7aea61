// SPDX-License-Identifier: Apache-2.0
// SocketBootstrap: point-to-point frames, the ring allGather and the dissemination barrier over authenticated
// TCP connections (transport layer, bootstrap internals).
//
// allGather on nRanks ranks is Bruck's: in round k (dist = 2^k) rank r, holding blocks r-h+1 .. r, sends its newest
// min(dist, nRanks-h) of them to r+dist and receives as many from r-dist, so after ceil(log2 nRanks) rounds every
// rank holds every block. Cost: log2(nRanks) * alpha + (nRanks-1) * bytesPerRank * beta, over the barrier's
// connections. At hundreds of ranks on a few cores alpha is a wake-up of an oversubscribed process, so the ring this
// replaced (nRanks-1 steps one after the other) took most of a bootstrap (docs/notes/scale.md). When half the blocks
// would not fit in one frame the ring remains: in step s rank r sends block (r - s) to r+1 and receives block
// (r - s - 1) from r-1. Cost: (nRanks-1) * (alpha + bytesPerRank * beta).
//
// barrier is a dissemination barrier: in round k rank r sends one byte to r + 2^k and waits for one from
// r - 2^k; after ceil(log2 nRanks) rounds every rank has transitively heard from all. Cost: log2(nRanks) * alpha.
#include "transport/bootstrap/socket_bootstrap.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <utility>

#include "common/log.h"

namespace cfx::transport::boot {

namespace {

constexpr size_t kMaxPendingHandshakes = 64;

// Rejections and failed accepts are what a stranger or a descriptor shortage repeats: a few WARNs a second.
log::WarnLimiter gRejectWarns;

Status withContext(const Status& st, const std::string& prefix) {
  return Status::error(st.code(), prefix + st.message());
}

uint64_t collTag(uint64_t seq, uint64_t step) { return (seq << 32) | step; }

}  // namespace

Result<std::unique_ptr<SocketBootstrap>> SocketBootstrap::start(Setup setup) {
  std::unique_ptr<SocketBootstrap> b(new SocketBootstrap(std::move(setup)));
  b->wakeFd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!b->wakeFd_.valid()) {
    return Status::error(Errc::SystemError, strprintf("eventfd failed: %s", std::strerror(errno)));
  }
  try {
    b->thread_ = std::thread([self = b.get()] {
      pthread_setname_np(pthread_self(), "cfx-bootstrap");
      log::setThreadRank(self->rank_);
      self->serviceLoop();
    });
  } catch (const std::system_error& e) {
    return Status::error(Errc::SystemError, strprintf("cannot start the bootstrap service thread: %s", e.what()));
  }
  return b;
}

SocketBootstrap::SocketBootstrap(Setup setup)
    : rank_(setup.rank),
      nRanks_(setup.nRanks),
      cred_(setup.cred),
      sessionSecret_(setup.sessionSecret),
      authenticated_(setup.authenticated),
      options_(setup.options),
      table_(std::move(setup.table)),
      listenAddr_(setup.listener.address()),
      out_(static_cast<size_t>(setup.nRanks)),
      outKey_(static_cast<size_t>(setup.nRanks)),
      outBroken_(static_cast<size_t>(setup.nRanks)),
      inbound_(static_cast<size_t>(setup.nRanks)),
      listener_(std::move(setup.listener)) {}

SocketBootstrap::~SocketBootstrap() {
  stopping_.store(true, std::memory_order_relaxed);
  wake();
  if (thread_.joinable()) thread_.join();
}

void SocketBootstrap::wake() {
  const uint64_t one = 1;
  // A full counter (never in practice) only means a wake-up is already pending.
  (void)!::write(wakeFd_.get(), &one, sizeof(one));
}

void SocketBootstrap::abort() {
  aborted_.store(true, std::memory_order_relaxed);
  cv_.notify_all();
  wake();
}

bool SocketBootstrap::aborted() {
  if (options_.abortFlag != nullptr && options_.abortFlag->load(std::memory_order_relaxed)) {
    aborted_.store(true, std::memory_order_relaxed);
  }
  return aborted_.load(std::memory_order_relaxed);
}

std::string SocketBootstrap::peerName(int peer) const {
  return strprintf("rank %d (%s)", peer, net::addressToString(table_[peer]).c_str());
}

Status SocketBootstrap::checkPeer(int peer, const char* op) const {
  if (peer < 0 || peer >= nRanks_) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("rank %d: bootstrap %s with peer %d, outside [0, %d)", rank_, op, peer, nRanks_));
  }
  return {};
}

// ---- caller side --------------------------------------------------------------------------------------------

Status SocketBootstrap::connectTo(int peer, const Deadline& deadline) {
  const std::string prefix = strprintf("rank %d: cannot connect to %s: ", rank_, peerName(peer).c_str());
  Result<net::Socket> sock =
      net::Socket::connect(table_[peer], {options_.connectRetries, options_.retrySleep}, deadline, &aborted_);
  if (!sock.ok()) return withContext(sock.status(), prefix);
  Result<FrameKeys> keys = clientHandshake(*sock, cred_, ConnKind::Peer, rank_, nRanks_, nullptr, deadline, &aborted_);
  if (!keys.ok()) return withContext(keys.status(), prefix);
  out_[peer] = std::move(*sock);
  outKey_[peer] = std::move(keys->send);
  return {};
}

Status SocketBootstrap::sendTo(int peer, FrameKind kind, uint64_t tag, const void* data, size_t bytes,
                               const Deadline& deadline, const std::string& what) {
  // The contract allows one calling thread at a time; the lock keeps frames whole even if a caller breaks it.
  std::lock_guard sendLock(sendMu_);
  if (aborted()) {
    return Status::error(Errc::RemoteError, strprintf("rank %d: bootstrap %s aborted", rank_, what.c_str()));
  }
  if (bytes > kMaxFrameBytes) {
    return Status::error(Errc::InvalidUsage, strprintf("rank %d: bootstrap %s of %zu bytes exceeds the %zu-byte limit",
                                                       rank_, what.c_str(), bytes, kMaxFrameBytes));
  }
  if (peer == rank_) {
    std::string why;
    if (!reserveInbox(peer, bytes, &why)) {
      return Status::error(Errc::InvalidUsage, strprintf("rank %d: bootstrap %s to itself: %s", rank_, what.c_str(),
                                                         why.c_str()));
    }
    const auto* p = static_cast<const uint8_t*>(data);
    deliver(peer, FrameHeader{kind, tag, bytes}, std::vector<uint8_t>(p, p + bytes));
    return {};
  }
  if (!outBroken_[peer].empty()) {
    return Status::error(Errc::RemoteError,
                         strprintf("rank %d: bootstrap %s to %s: the connection failed earlier: %s", rank_,
                                   what.c_str(), peerName(peer).c_str(), outBroken_[peer].c_str()));
  }
  if (!out_[peer].valid()) {
    if (Status st = connectTo(peer, deadline); !st.ok()) {
      if (st.code() == Errc::RemoteError && !aborted()) outBroken_[peer] = st.message();
      return st;
    }
  }
  Status st = sendFrame(out_[peer], outKey_[peer], FrameHeader{kind, tag, bytes}, data, deadline, &aborted_);
  if (!st.ok()) {
    out_[peer].close();  // the stream position is unknown now
    outBroken_[peer] = st.message();
    return withContext(st,
                       strprintf("rank %d: bootstrap %s to %s failed: ", rank_, what.c_str(), peerName(peer).c_str()));
  }
  return {};
}

Status SocketBootstrap::recvFrom(int peer, FrameKind kind, uint64_t tag, void* data, size_t bytes,
                                 const Deadline& deadline, const std::string& what,
                                 const std::function<Status()>* alive) {
  const Key key{peer, kind, tag};
  std::vector<uint8_t> msg;
  {
    std::unique_lock lk(mu_);
    for (;;) {
      if (auto it = inbox_.find(key); it != inbox_.end()) {
        msg = std::move(it->second.front());
        it->second.pop_front();
        if (it->second.empty()) inbox_.erase(it);
        inbound_[peer].bytes -= msg.size();
        inboxBytes_ -= msg.size();
        break;
      }
      if (aborted()) {
        return Status::error(Errc::RemoteError, strprintf("rank %d: bootstrap %s aborted while waiting for %s", rank_,
                                                          what.c_str(), peerName(peer).c_str()));
      }
      if (inbound_[peer].closed) {
        return Status::error(Errc::RemoteError,
                             strprintf("rank %d: bootstrap %s: the connection from %s ended before it sent this (%s)",
                                       rank_, what.c_str(), peerName(peer).c_str(), inbound_[peer].reason.c_str()));
      }
      if (deadline.expired()) {
        return Status::error(
            Errc::Timeout,
            strprintf("rank %d: timed out after %lld ms in bootstrap %s waiting for %s%s", rank_,
                      static_cast<long long>(options_.timeout.count()), what.c_str(), peerName(peer).c_str(),
                      inbound_[peer].connected ? "" : ", which never connected"));
      }
      if (alive != nullptr || watch_) {
        // Unlocked: the watchers read the communicator's state, under locks of their own.
        lk.unlock();
        Status st = alive != nullptr ? (*alive)() : Status();
        if (st.ok() && watch_) {
          st = watch_(kind == FrameKind::User ? peer : -1);
          if (!st.ok()) {
            st = Status::error(st.code(), strprintf("rank %d: bootstrap %s gave up waiting for %s: %s", rank_,
                                                    what.c_str(), peerName(peer).c_str(), st.message().c_str()));
          }
        }
        lk.lock();
        if (!st.ok()) return st;
        if (inbox_.count(key) != 0) continue;
      }
      const auto slice = Deadline::Clock::now() + std::chrono::microseconds(net::kAbortPollInterval);
      cv_.wait_until(lk, std::min(slice, deadline.at()));
    }
  }
  if (msg.size() != bytes) {
    return Status::error(Errc::InvalidUsage, strprintf("rank %d: bootstrap %s: expected %zu bytes but %s sent %zu",
                                                       rank_, what.c_str(), bytes, peerName(peer).c_str(), msg.size()));
  }
  if (bytes != 0) std::memcpy(data, msg.data(), bytes);
  return {};
}

Status SocketBootstrap::send(int peer, uint64_t tag, const void* data, size_t bytes) {
  CFX_TRY(checkPeer(peer, "send"));
  const Deadline deadline(options_.timeout);
  return sendTo(peer, FrameKind::User, tag, data, bytes, deadline,
                strprintf("send (tag %llu)", static_cast<unsigned long long>(tag)));
}

Status SocketBootstrap::recv(int peer, uint64_t tag, void* data, size_t bytes) {
  return userRecv(peer, tag, data, bytes, nullptr);
}

Status SocketBootstrap::recv(int peer, uint64_t tag, void* data, size_t bytes, const std::function<Status()>& alive) {
  return userRecv(peer, tag, data, bytes, &alive);
}

void SocketBootstrap::setPeerWatch(std::function<Status(int peer)> watch) { watch_ = std::move(watch); }

Status SocketBootstrap::userRecv(int peer, uint64_t tag, void* data, size_t bytes,
                                 const std::function<Status()>* alive) {
  CFX_TRY(checkPeer(peer, "recv"));
  const Deadline deadline(options_.timeout);
  return recvFrom(peer, FrameKind::User, tag, data, bytes, deadline,
                  strprintf("recv (tag %llu)", static_cast<unsigned long long>(tag)), alive);
}

Status SocketBootstrap::allGather(void* data, size_t bytesPerRank) {
  const uint64_t seq = collSeq_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (nRanks_ == 1) return aborted() ? Status::error(Errc::RemoteError, "bootstrap allGather aborted") : Status();
  // Bruck's rounds whenever its largest message (half the blocks) fits in a frame; every rank decides alike.
  if (bytesPerRank * static_cast<size_t>((nRanks_ + 1) / 2) <= kMaxFrameBytes) {
    return bruckAllGather(seq, static_cast<uint8_t*>(data), bytesPerRank);
  }
  const Deadline deadline(options_.timeout);
  auto* base = static_cast<uint8_t*>(data);
  const int next = (rank_ + 1) % nRanks_;
  const int prev = (rank_ + nRanks_ - 1) % nRanks_;
  for (int step = 0; step < nRanks_ - 1; ++step) {
    const int sendBlock = (rank_ - step + nRanks_) % nRanks_;
    const int recvBlock = (rank_ - step - 1 + nRanks_) % nRanks_;
    const std::string what =
        strprintf("allGather #%llu (step %d of %d)", static_cast<unsigned long long>(seq), step + 1, nRanks_ - 1);
    const uint64_t tag = collTag(seq, static_cast<uint64_t>(step));
    CFX_TRY(sendTo(next, FrameKind::AllGather, tag, base + static_cast<size_t>(sendBlock) * bytesPerRank, bytesPerRank,
                   deadline, what));
    CFX_TRY(recvFrom(prev, FrameKind::AllGather, tag, base + static_cast<size_t>(recvBlock) * bytesPerRank,
                     bytesPerRank, deadline, what));
  }
  return {};
}

Status SocketBootstrap::bruckAllGather(uint64_t seq, uint8_t* base, size_t bytesPerRank) {
  const Deadline deadline(options_.timeout);
  const int n = nRanks_;
  // Copies `count` blocks starting at block `first` (modulo n) between the caller's array and `packed`.
  const auto blocks = [&](int first, int count, uint8_t* packed, bool pack) {
    for (int i = 0; i < count; ++i) {
      uint8_t* block = base + static_cast<size_t>(((first + i) % n + n) % n) * bytesPerRank;
      uint8_t* slot = packed + static_cast<size_t>(i) * bytesPerRank;
      if (bytesPerRank != 0) std::memcpy(pack ? slot : block, pack ? block : slot, bytesPerRank);
    }
  };
  std::vector<uint8_t> out;
  std::vector<uint8_t> in;
  int rounds = 0;
  for (int d = 1; d < n; d <<= 1) ++rounds;
  int have = 1;  // this rank holds blocks rank-have+1 .. rank
  int round = 0;
  for (int dist = 1; have < n; dist <<= 1, ++round) {
    const int count = std::min(dist, n - have);
    const std::string what =
        strprintf("allGather #%llu (round %d of %d)", static_cast<unsigned long long>(seq), round + 1, rounds);
    const uint64_t tag = collTag(seq, static_cast<uint64_t>(round));
    const size_t bytes = static_cast<size_t>(count) * bytesPerRank;
    out.resize(bytes);
    in.resize(bytes);
    blocks(rank_ - count + 1, count, out.data(), true);
    CFX_TRY(sendTo((rank_ + dist) % n, FrameKind::AllGather, tag, out.data(), bytes, deadline, what));
    CFX_TRY(recvFrom(((rank_ - dist) % n + n) % n, FrameKind::AllGather, tag, in.data(), bytes, deadline, what));
    blocks(rank_ - dist - count + 1, count, in.data(), false);
    have += count;
  }
  return {};
}

Status SocketBootstrap::barrier() {
  const uint64_t seq = collSeq_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (nRanks_ == 1) return aborted() ? Status::error(Errc::RemoteError, "bootstrap barrier aborted") : Status();
  const Deadline deadline(options_.timeout);
  uint8_t token = 0;
  int round = 0;
  for (int dist = 1; dist < nRanks_; dist <<= 1, ++round) {
    const std::string what = strprintf("barrier #%llu (round %d)", static_cast<unsigned long long>(seq), round + 1);
    const uint64_t tag = collTag(seq, static_cast<uint64_t>(round));
    CFX_TRY(sendTo((rank_ + dist) % nRanks_, FrameKind::Barrier, tag, &token, 1, deadline, what));
    CFX_TRY(recvFrom((rank_ - dist % nRanks_ + nRanks_) % nRanks_, FrameKind::Barrier, tag, &token, 1, deadline, what));
  }
  return {};
}

// ---- service thread -----------------------------------------------------------------------------------------

void SocketBootstrap::serviceLoop() {
  while (!stopping_.load(std::memory_order_relaxed)) {
    (void)aborted();  // copies a raised external flag into aborted_, which socket calls watch
    std::vector<pollfd> fds;
    fds.push_back({wakeFd_.get(), POLLIN, 0});
    fds.push_back({listener_.fd(), POLLIN, 0});
    for (const auto& hs : pending_) fds.push_back({hs.fd(), hs.pollEvents(), 0});
    for (const auto& in : incoming_) fds.push_back({in.sock.fd(), POLLIN, 0});
    // Wake up now and then to expire handshakes and to notice an external abort flag.
    const int timeoutMs =
        !pending_.empty() || options_.abortFlag != nullptr ? static_cast<int>(net::kAbortPollInterval.count()) : 1000;
    if (::poll(fds.data(), fds.size(), timeoutMs) < 0 && errno != EINTR) {
      const int err = errno;
      CFX_WARN("Bootstrap rank %d: poll failed: %s", rank_, std::strerror(err));
      std::this_thread::sleep_for(net::kAbortPollInterval);
      continue;
    }
    if (fds[0].revents != 0) {
      uint64_t count;
      (void)!::read(wakeFd_.get(), &count, sizeof(count));
    }
    const size_t firstIncoming = 2 + pending_.size();
    std::vector<size_t> finished;
    for (size_t i = 0; i < incoming_.size(); ++i) {
      if (fds[firstIncoming + i].revents == 0) continue;
      std::string why;
      if (readIncoming(incoming_[i], why)) continue;
      {
        std::lock_guard lk(mu_);
        Inbound& from = inbound_[incoming_[i].rank];
        from.closed = true;
        from.reason = why;
        if (incoming_[i].inPayload) {  // the frame it was sending never arrives: free its reservation
          from.bytes -= incoming_[i].header.bytes;
          inboxBytes_ -= incoming_[i].header.bytes;
        }
      }
      cv_.notify_all();
      finished.push_back(i);
    }
    for (auto it = finished.rbegin(); it != finished.rend(); ++it) {
      incoming_.erase(incoming_.begin() + static_cast<std::ptrdiff_t>(*it));
    }
    if (fds[1].revents != 0) acceptNew();
    progressHandshakes();
  }
}

void SocketBootstrap::acceptNew() {
  for (;;) {
    Result<std::optional<net::Socket>> sock = listener_.tryAccept();
    if (!sock.ok()) {
      // EMFILE and friends: pause so a listener that stays readable does not turn the service loop into a spin.
      CFX_WARN_LIMITED(gRejectWarns, "Bootstrap rank %d: %s", rank_, sock.status().message().c_str());
      std::this_thread::sleep_for(net::kAbortPollInterval);
      return;
    }
    if (!*sock) return;
    if (pending_.size() >= kMaxPendingHandshakes) {
      CFX_WARN_LIMITED(gRejectWarns,
                       "Bootstrap rank %d: %zu connections are mid-handshake; dropping the oldest, from %s", rank_,
                       pending_.size(), pending_.front().peerName().c_str());
      pending_.erase(pending_.begin());
    }
    pending_.emplace_back(std::move(**sock), cred_, std::min(options_.handshakeTimeout, options_.timeout),
                          [this](ConnKind kind, int peer, int nRanks) { return admissionError(kind, peer, nRanks); });
  }
}

std::string SocketBootstrap::admissionError(ConnKind kind, int peer, int nRanks) const {
  if (kind != ConnKind::Peer) return "it asked to join a root, but this is a rank's listener";
  if (nRanks != nRanks_) return strprintf("it says nRanks=%d, this communicator has %d", nRanks, nRanks_);
  if (peer < 0 || peer >= nRanks_ || peer == rank_) return strprintf("it claims rank %d", peer);
  return {};
}

void SocketBootstrap::progressHandshakes() {
  for (size_t i = 0; i < pending_.size();) {
    ServerHandshake& hs = pending_[i];
    const ServerHandshake::State st = hs.progress();
    if (st == ServerHandshake::State::Running) {
      ++i;
      continue;
    }
    if (st == ServerHandshake::State::Failed) {
      CFX_WARN_LIMITED(gRejectWarns, "Bootstrap rank %d (%s): rejected connection from %s: %s", rank_,
                       net::addressToString(listenAddr_).c_str(), hs.peerName().c_str(), hs.failure().c_str());
    } else {
      admit(hs);
    }
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

void SocketBootstrap::admit(ServerHandshake& hs) {
  const int peer = hs.rank();  // kind, nRanks and range were checked before the handshake completed
  {
    std::lock_guard lk(mu_);
    if (inbound_[peer].connected) {
      // Each rank opens one connection to each peer for the Bootstrap's lifetime, so a second one is a bug or
      // a replay; the first connection stays, this one is closed with the handshake object.
      CFX_WARN_LIMITED(gRejectWarns, "Bootstrap rank %d (%s): rejected a second connection from rank %d at %s", rank_,
                       net::addressToString(listenAddr_).c_str(), peer, hs.peerName().c_str());
      return;
    }
    inbound_[peer].connected = true;
  }
  Incoming in;
  in.sock = hs.takeSocket();
  in.key = std::move(hs.takeKeys().recv);
  in.rank = peer;
  incoming_.push_back(std::move(in));
}

bool SocketBootstrap::readIncoming(Incoming& in, std::string& why) {
  for (;;) {
    uint8_t* dst = in.inPayload ? in.payload.data() + in.payloadHave : in.hdr.data() + in.hdrHave;
    const size_t want = in.inPayload ? in.payload.size() - in.payloadHave : in.hdr.size() - in.hdrHave;
    if (want != 0) {
      Result<size_t> n = in.sock.recvSome(dst, want);
      if (!n.ok()) {
        why = n.status().message();
        return false;
      }
      if (*n == 0) return true;
      (in.inPayload ? in.payloadHave : in.hdrHave) += *n;
      if (*n < want) continue;
    }
    if (!in.inPayload) {
      Result<FrameHeader> h = decodeFrameHeader(in.hdr.data(), kMaxFrameBytes);
      const bool peerKind =
          h.ok() && (h->kind == FrameKind::User || h->kind == FrameKind::AllGather || h->kind == FrameKind::Barrier);
      if (!peerKind) {
        why = "garbled frame: " + (h.ok() ? std::string("unexpected frame kind") : h.status().message());
        CFX_WARN("Bootstrap rank %d: closing the connection from rank %d (%s): %s", rank_, in.rank,
                 in.sock.peerName().c_str(), why.c_str());
        return false;
      }
      // Counted before anything is allocated for it.
      if (!reserveInbox(in.rank, h->bytes, &why)) {
        CFX_WARN("Bootstrap rank %d: refusing rank %d (%s): %s", rank_, in.rank, in.sock.peerName().c_str(),
                 why.c_str());
        return false;
      }
      in.header = *h;
      in.payload.assign(h->bytes + in.key.tagBytes(), 0);
      in.payloadHave = 0;
      in.hdrHave = 0;
      in.inPayload = true;
      if (!in.payload.empty()) continue;
    }
    in.inPayload = false;
    const size_t bytes = in.header.bytes;
    if (Status st = openFrame(in.key, in.hdr.data(), {in.payload.data(), bytes}, in.payload.data() + bytes);
        !st.ok()) {
      why = st.message();
      CFX_WARN("Bootstrap rank %d: closing the connection from rank %d (%s): it %s", rank_, in.rank,
               in.sock.peerName().c_str(), why.c_str());
      std::lock_guard lk(mu_);
      inbound_[in.rank].bytes -= bytes;
      inboxBytes_ -= bytes;
      return false;
    }
    in.payload.resize(bytes);
    deliver(in.rank, in.header, std::move(in.payload));
    in.payload = {};
  }
}

bool SocketBootstrap::reserveInbox(int peer, size_t bytes, std::string* why) {
  std::lock_guard lk(mu_);
  Inbound& from = inbound_[peer];
  if (from.bytes + bytes > options_.inboxBytesPerPeer) {
    *why = strprintf("it sent %zu bytes that no recv of this rank has taken yet, over the limit of %zu per rank (a "
                     "flood, or bootstrap sends without matching recvs)",
                     from.bytes + bytes, options_.inboxBytesPerPeer);
    return false;
  }
  if (inboxBytes_ + bytes > options_.inboxBytesTotal) {
    *why = strprintf("its frame of %zu bytes would bring the bytes no recv of this rank has taken yet to %zu, over "
                     "the limit of %zu for all ranks together",
                     bytes, inboxBytes_ + bytes, options_.inboxBytesTotal);
    return false;
  }
  from.bytes += bytes;
  inboxBytes_ += bytes;
  return true;
}

void SocketBootstrap::deliver(int peer, const FrameHeader& h, std::vector<uint8_t> payload) {
  {
    std::lock_guard lk(mu_);
    inbox_[Key{peer, h.kind, h.tag}].push_back(std::move(payload));
  }
  cv_.notify_all();
}

}  // namespace cfx::transport::boot
