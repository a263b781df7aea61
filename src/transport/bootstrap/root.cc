// SPDX-License-Identifier: Apache-2.0
// The bootstrap root thread (transport layer, bootstrap internals). See root.h for its states.
#include "transport/bootstrap/root.h"

#include <poll.h>
#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "common/log.h"

namespace cfx::transport::boot {

void RootDone::set() {
  {
    std::lock_guard lk(mu_);
    done_ = true;
  }
  cv_.notify_all();
}

bool RootDone::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  return cv_.wait_for(lk, timeout, [this] { return done_; });
}

namespace {

constexpr size_t kMaxPendingHandshakes = 128;
constexpr int kPollMs = 100;

// The roots running in this process, by communicator magic (hostedRoot()). Never destroyed: a detached root
// thread may still finish during the process's exit.
struct RootRegistry {
  std::mutex mu;
  std::map<uint64_t, std::weak_ptr<RootDone>> roots;
};
RootRegistry& registry() {
  static RootRegistry* r = new RootRegistry;
  return *r;
}

// Rejections and failed accepts are what a stranger or a descriptor shortage repeats: a few WARNs a second.
log::WarnLimiter gRejectWarns;

class Root {
 public:
  explicit Root(RootConfig config)
      : cfg_(std::move(config)), name_(net::addressToString(cfg_.listener.address())), deadline_(cfg_.timeout) {}

  void run();

 private:
  struct Member {
    net::Socket sock;
    FrameKeys keys;
    sockaddr_storage listenAddr{};
    std::array<uint8_t, kFrameHeaderBytes + crypto::kTagBytes> frame{};  // a Query: header and tag
    size_t have = 0;
    bool queried = false;  // it sent a Query: it is about to give up on its own deadline
  };

  void acceptNew();
  void progressHandshakes();
  void admit(ServerHandshake& hs);
  void reject(net::Socket sock, FrameKeys keys, const std::string& why);
  // False when the member is gone (closed, or broke the protocol); `why` says how.
  bool serveMember(int rank, std::string& why);
  std::string missingText() const;
  void finishWithTable();
  void finishWithError(Errc code, const std::string& message);
  Deadline shortDeadline() const { return Deadline(std::min(cfg_.handshakeTimeout, cfg_.timeout)); }

  RootConfig cfg_;
  std::string name_;
  Deadline deadline_;
  Deadline::Clock::time_point start_ = Deadline::Clock::now();
  std::vector<ServerHandshake> pending_;
  std::vector<std::optional<Member>> members_;
  int nRanks_ = -1;
  int joined_ = 0;
};

void Root::run() {
  for (;;) {
    if (nRanks_ > 0 && joined_ == nRanks_) return finishWithTable();
    if (deadline_.expired()) {
      const std::string text = nRanks_ < 0 ? std::string("no rank joined") : missingText();
      CFX_WARN("Bootstrap root %s: giving up after %lld ms without progress: %s", name_.c_str(),
               static_cast<long long>(cfg_.timeout.count()), text.c_str());
      return finishWithError(Errc::Timeout, "the bootstrap root gave up waiting: " + text);
    }
    std::vector<pollfd> fds;
    fds.push_back({cfg_.listener.fd(), POLLIN, 0});
    for (const auto& hs : pending_) fds.push_back({hs.fd(), hs.pollEvents(), 0});
    std::vector<int> memberOfFd;
    for (size_t r = 0; r < members_.size(); ++r) {
      if (!members_[r]) continue;
      fds.push_back({members_[r]->sock.fd(), POLLIN, 0});
      memberOfFd.push_back(static_cast<int>(r));
    }
    if (::poll(fds.data(), fds.size(), kPollMs) < 0 && errno != EINTR) {
      const std::string why = std::strerror(errno);
      CFX_WARN("Bootstrap root %s: poll failed: %s", name_.c_str(), why.c_str());
      return finishWithError(Errc::SystemError, "the bootstrap root failed: poll: " + why);
    }
    const size_t firstMemberFd = 1 + pending_.size();
    for (size_t i = 0; i < memberOfFd.size(); ++i) {
      if (fds[firstMemberFd + i].revents == 0) continue;
      const int rank = memberOfFd[i];
      std::string why;
      if (serveMember(rank, why)) continue;
      const bool gaveUp = members_[rank]->queried;
      const std::string text =
          strprintf("rank %d (%s) %s before all ranks joined; %s", rank, members_[rank]->sock.peerName().c_str(),
                    gaveUp ? "timed out" : why.c_str(), missingText().c_str());
      members_[rank].reset();
      --joined_;
      CFX_INFO(log::Sys::Bootstrap, "Bootstrap root %s: %s", name_.c_str(), text.c_str());
      return finishWithError(gaveUp ? Errc::Timeout : Errc::RemoteError, text);
    }
    if (fds[0].revents != 0) acceptNew();
    progressHandshakes();
  }
}

void Root::acceptNew() {
  for (;;) {
    Result<std::optional<net::Socket>> sock = cfg_.listener.tryAccept();
    if (!sock.ok()) {
      // EMFILE and friends: keep serving the connections we have, and pause so a listener that stays readable
      // does not turn this loop into a spin.
      CFX_WARN_LIMITED(gRejectWarns, "Bootstrap root %s: %s", name_.c_str(), sock.status().message().c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
      return;
    }
    if (!*sock) return;
    if (pending_.size() >= kMaxPendingHandshakes) {
      CFX_WARN_LIMITED(gRejectWarns,
                       "Bootstrap root %s: %zu connections are mid-handshake; dropping the oldest, from %s",
                       name_.c_str(), pending_.size(), pending_.front().peerName().c_str());
      pending_.erase(pending_.begin());
    }
    pending_.emplace_back(std::move(**sock), cfg_.cred, std::min(cfg_.handshakeTimeout, cfg_.timeout));
  }
}

void Root::progressHandshakes() {
  for (size_t i = 0; i < pending_.size();) {
    ServerHandshake& hs = pending_[i];
    const ServerHandshake::State st = hs.progress();
    if (st == ServerHandshake::State::Running) {
      ++i;
      continue;
    }
    if (st == ServerHandshake::State::Failed) {
      CFX_WARN_LIMITED(gRejectWarns, "Bootstrap root %s: rejected connection from %s: %s", name_.c_str(),
                       hs.peerName().c_str(), hs.failure().c_str());
    } else {
      admit(hs);
    }
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

void Root::reject(net::Socket sock, FrameKeys keys, const std::string& why) {
  CFX_WARN_LIMITED(gRejectWarns, "Bootstrap root %s: rejected connection from %s: %s", name_.c_str(),
                   sock.peerName().c_str(), why.c_str());
  // The client proved it holds the secret, so it deserves to know why; best effort, then close.
  const FrameHeader h{FrameKind::Error, static_cast<uint64_t>(Errc::InvalidUsage),
                      std::min(why.size(), kMaxControlBytes)};
  (void)sendFrame(sock, keys.send, h, why.data(), shortDeadline(), nullptr);
}

void Root::admit(ServerHandshake& hs) {
  const int rank = hs.rank();
  const int nRanks = hs.nRanks();
  const auto refuse = [&](const std::string& why) { reject(hs.takeSocket(), hs.takeKeys(), why); };
  if (hs.kind() != ConnKind::RootJoin) return refuse("a peer connection was made to the root");
  if (nRanks < 1) return refuse(strprintf("rank %d claims nRanks=%d", rank, nRanks));
  if (nRanks_ >= 0 && nRanks != nRanks_) {
    return refuse(strprintf("rank %d says nRanks=%d, but ranks already joined with nRanks=%d", rank, nRanks, nRanks_));
  }
  if (rank < 0 || rank >= nRanks) return refuse(strprintf("rank %d is out of range [0, %d)", rank, nRanks));
  if (nRanks_ < 0) {
    nRanks_ = nRanks;
    members_.resize(static_cast<size_t>(nRanks));
  }
  if (members_[rank]) {
    return refuse(strprintf("duplicate rank %d: rank %d already joined from %s", rank, rank,
                            members_[rank]->sock.peerName().c_str()));
  }
  Member m;
  m.sock = hs.takeSocket();
  m.keys = hs.takeKeys();
  m.listenAddr = hs.hello();
  CFX_TRACE(log::Sys::Bootstrap, "Bootstrap root %s: rank %d of %d joined from %s (listens on %s)", name_.c_str(), rank,
            nRanks, m.sock.peerName().c_str(), net::addressToString(m.listenAddr).c_str());
  members_[rank] = std::move(m);
  ++joined_;
  deadline_ = Deadline(cfg_.timeout);  // progress: the root outlives the deadline of every admitted rank
}

bool Root::serveMember(int rank, std::string& why) {
  Member& m = *members_[rank];
  // A member sends nothing but Query frames: a header without payload, and its tag.
  const size_t frameBytes = kFrameHeaderBytes + m.keys.recv.tagBytes();
  for (;;) {
    Result<size_t> n = m.sock.recvSome(m.frame.data() + m.have, frameBytes - m.have);
    if (!n.ok()) {
      why = "closed its connection to the root";
      return false;
    }
    if (*n == 0) return true;
    m.have += *n;
    if (m.have < frameBytes) continue;
    m.have = 0;
    Result<FrameHeader> h = decodeFrameHeader(m.frame.data(), 0);
    if (!h.ok() || h->kind != FrameKind::Query) {
      why = "broke the bootstrap protocol (" + (h.ok() ? std::string("unexpected frame") : h.status().message()) + ")";
      return false;
    }
    if (Status st = openFrame(m.keys.recv, m.frame.data(), {}, m.frame.data() + kFrameHeaderBytes); !st.ok()) {
      why = st.message();
      return false;
    }
    m.queried = true;
    const std::string text = missingText();
    const FrameHeader reply{FrameKind::Status, 0, text.size()};
    (void)sendFrame(m.sock, m.keys.send, reply, text.data(), shortDeadline(), nullptr);
  }
}

std::string Root::missingText() const {
  std::string list;
  int missing = 0;
  for (size_t r = 0; r < members_.size(); ++r) {
    if (members_[r]) continue;
    if (++missing <= 32) list += strprintf("%s%zu", list.empty() ? "" : ", ", r);
  }
  if (missing > 32) list += strprintf(" and %d more", missing - 32);
  return strprintf("missing rank%s %s (%d of %d joined)", missing == 1 ? "" : "s", list.c_str(), joined_, nRanks_);
}

void Root::finishWithTable() {
  cfg_.listener.close();  // a late connection is refused now, not half-served by an exiting thread
  std::vector<uint8_t> table(tablePayloadBytes(nRanks_));
  for (int r = 0; r < nRanks_; ++r) encodeAddress(members_[r]->listenAddr, table.data() + r * kAddressBytes);
  const std::span<uint8_t> sessionNonce(table.data() + static_cast<size_t>(nRanks_) * kAddressBytes,
                                        kSessionNonceBytes);
  if (Status st = crypto::randomBytes(sessionNonce); !st.ok()) {
    return finishWithError(Errc::SystemError, "the bootstrap root cannot draw the session nonce: " + st.message());
  }
  const FrameHeader h{FrameKind::Table, static_cast<uint64_t>(nRanks_), table.size()};
  const Deadline deadline(cfg_.timeout);
  for (int r = 0; r < nRanks_; ++r) {
    if (Status st = sendFrame(members_[r]->sock, members_[r]->keys.send, h, table.data(), deadline, nullptr);
        !st.ok()) {
      CFX_INFO(log::Sys::Bootstrap, "Bootstrap root %s: cannot send the table to rank %d: %s", name_.c_str(), r,
               st.message().c_str());
    }
  }
  const double secs = std::chrono::duration<double>(Deadline::Clock::now() - start_).count();
  CFX_INFO(log::Sys::Bootstrap, "Bootstrap root %s: all %d ranks joined after %.3f s", name_.c_str(), nRanks_, secs);
}

void Root::finishWithError(Errc code, const std::string& message) {
  cfg_.listener.close();
  const FrameHeader h{FrameKind::Error, static_cast<uint64_t>(code), std::min(message.size(), kMaxControlBytes)};
  for (auto& m : members_) {
    if (m) (void)sendFrame(m->sock, m->keys.send, h, message.data(), shortDeadline(), nullptr);
  }
}

}  // namespace

Status startRoot(RootConfig config) {
  const uint64_t magic = config.cred.commMagic;
  auto root = std::make_unique<Root>(std::move(config));
  auto done = std::make_shared<RootDone>();
  RootRegistry& reg = registry();
  {
    std::lock_guard lk(reg.mu);
    reg.roots[magic] = done;
  }
  try {
    std::thread([r = std::move(root), done, magic, &reg]() {
      pthread_setname_np(pthread_self(), "cfx-boot-root");
      r->run();
      {
        std::lock_guard lk(reg.mu);
        if (auto it = reg.roots.find(magic); it != reg.roots.end() && it->second.lock() == done) reg.roots.erase(it);
      }
      done->set();
    }).detach();
  } catch (const std::system_error& e) {
    std::lock_guard lk(reg.mu);
    reg.roots.erase(magic);
    return Status::error(Errc::SystemError, strprintf("cannot start the bootstrap root thread: %s", e.what()));
  }
  return {};
}

std::shared_ptr<RootDone> hostedRoot(uint64_t commMagic) {
  RootRegistry& reg = registry();
  std::lock_guard lk(reg.mu);
  auto it = reg.roots.find(commMagic);
  return it == reg.roots.end() ? nullptr : it->second.lock();
}

}  // namespace cfx::transport::boot
