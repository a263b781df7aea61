// SPDX-License-Identifier: Apache-2.0
// The membership master: connection handling and the epoch-boundary decision (faulttol layer).
#include "faulttol/member_master.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/crypto.h"
#include "common/log.h"
#include "common/param.h"
#include "common/socket.h"
#include "faulttol/member_wire.h"

namespace cfx::ft {

namespace {

using Clock = std::chrono::steady_clock;
using member::Kind;
using member::Message;
using member::Nonce;

constexpr Nonce kNoMember{};  // an epoch slot whose member has not reconnected to a restarted master
constexpr auto kSendTimeout = std::chrono::seconds(2);
// Connections that have not said an authentic Hello yet. Beyond this many, the oldest is dropped for each new one,
// so a flood of idle connections costs the master at most this many descriptors and never locks members out
// (a member says Hello within one round trip of its connect; a flooder's connections grow old first).
constexpr int kMaxHandshakes = 64;

std::string idText(const Nonce& uuid) {
  return strprintf("%02x%02x%02x%02x", uuid[0], uuid[1], uuid[2], uuid[3]);
}

}  // namespace

CFX_PARAM(int64_t, roundTimeoutParam, "CFX_MEMBER_ROUND_TIMEOUT_MS", 10000,
          "Membership master: how long an epoch boundary waits, after the first member said it is ready, for a member "
          "that is still connected but silent (stopped, hung) before it drops that member.",
          param::inRange<int64_t>(1, 86400000));
CFX_PARAM(int64_t, restartGraceParam, "CFX_MEMBER_RESTART_GRACE_MS", 5000,
          "Membership master started on an earlier master's id: how long it waits for the members of the epoch it "
          "learns from them to reconnect before a boundary may go on without the missing ones.",
          param::inRange<int64_t>(0, 86400000));

MasterOptions MasterOptions::fromParams() {
  MasterOptions o;
  o.roundTimeout = std::chrono::milliseconds(roundTimeoutParam.get());
  o.restartGrace = std::chrono::milliseconds(restartGraceParam.get());
  return o;
}

struct MembershipMaster::Impl {
  struct Conn {
    net::Socket sock;
    member::FrameReader reader;
    Nonce masterNonce{};
    crypto::Digest key{};
    bool greeted = false;  // its Hello was authentic
    uint64_t sendCounter = 0;
    uint64_t recvCounter = 0;
    Nonce uuid{};
    Clock::time_point since;
    bool inEpoch = false;  // a member of the current epoch (else a joiner)
    bool ready = false;    // said Ready for the current boundary (a joiner: waits to be admitted)
    bool rebuild = false;  // with Ready: its communicator broke
    uint64_t joinOrder = 0;
    bool closed = false;
    // A joiner that said Ready and waits for a boundary to admit it.
    bool waitingToJoin() const { return !closed && !inEpoch && ready; }
  };

  net::Listener listener;
  std::vector<uint8_t> secret;
  MasterOptions options;
  int wakeFd = -1;
  std::atomic<bool> stopping{false};
  Clock::time_point startedAt = Clock::now();

  std::vector<std::unique_ptr<Conn>> conns;
  uint64_t epoch = 0;
  std::vector<Nonce> members;  // the current epoch, in rank order
  bool adopted = false;        // the epoch was learnt from reconnecting members (a restarted master)
  bool roundOpen = false;
  Clock::time_point roundStart;
  bool idPending = false;
  Nonce idFrom{};
  uint64_t joinCounter = 0;
  uint64_t boundaries = 0;
  // All-or-nothing verdicts for the current epoch's communicator: each member's last report, by rank.
  struct Report {
    uint64_t seq = 0;
    bool ok = false;
  };
  std::vector<Report> reports;
  uint64_t decidedSeq = 0;  // the last collective decided
  bool decidedOk = false;
  int32_t decidedFailedRank = -1;
  bool voteOpen = false;  // collective decidedSeq + 1 has at least one report
  Clock::time_point voteStart;
  uint64_t verdicts = 0;

  mutable std::mutex snapMutex;
  Snapshot snap;

  void loop();
  void acceptAll();
  void readFrom(Conn& c);
  void handle(Conn& c, const Message& m);
  void greet(Conn& c, const member::Frame& f);
  bool send(Conn& c, const Message& m);
  void close(Conn& c, const char* why);
  Conn* find(const Nonce& uuid);
  void maybeDecide(Clock::time_point now);
  void decide(bool timedOut);
  void resetVotes();
  void report(Conn& c, const member::Vote& v);
  void maybeDecideVote(Clock::time_point now);
  void sendVerdict(Conn& c);
  bool slotMayReturn(Clock::time_point now) const;
  void publish();
};

Result<std::unique_ptr<MembershipMaster>> MembershipMaster::start(const sockaddr_storage& address,
                                                                  std::vector<uint8_t> secret,
                                                                  const MasterOptions& options) {
  auto impl = std::make_unique<Impl>();
  CFX_TRY_ASSIGN(impl->listener, net::Listener::listen(address));
  impl->secret = std::move(secret);
  impl->options = options;
  impl->wakeFd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl->wakeFd < 0) return Status::error(Errc::SystemError, strprintf("eventfd: %s", std::strerror(errno)));
  std::unique_ptr<MembershipMaster> master(new MembershipMaster(std::move(impl)));
  master->address_ = master->impl_->listener.address();
  CFX_INFO(log::Sys::Init, "membership master listening on %s", net::addressToString(master->address_).c_str());
  master->thread_ = std::thread([m = master.get()] {
    pthread_setname_np(pthread_self(), "cfx-master");
    m->impl_->loop();
  });
  return master;
}

MembershipMaster::MembershipMaster(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MembershipMaster::~MembershipMaster() {
  impl_->stopping.store(true, std::memory_order_release);
  const uint64_t one = 1;
  (void)!::write(impl_->wakeFd, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  ::close(impl_->wakeFd);
}

MembershipMaster::Snapshot MembershipMaster::snapshot() const {
  std::lock_guard<std::mutex> lock(impl_->snapMutex);
  return impl_->snap;
}

void MembershipMaster::Impl::loop() {
  std::vector<pollfd> fds;
  while (!stopping.load(std::memory_order_acquire)) {
    fds.clear();
    fds.push_back({wakeFd, POLLIN, 0});
    fds.push_back({listener.fd(), POLLIN, 0});
    for (auto& c : conns) fds.push_back({c->sock.fd(), POLLIN, 0});
    // 20 ms: the timers (handshake, round, restart grace) need no finer grain.
    if (::poll(fds.data(), fds.size(), 20) < 0 && errno != EINTR) break;
    if (fds[1].revents != 0) acceptAll();
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents != 0 && !conns[i - 2]->closed) readFrom(*conns[i - 2]);
    }
    const auto now = Clock::now();
    for (auto& c : conns) {
      if (!c->greeted && !c->closed && now - c->since > options.handshakeTimeout) close(*c, "no Hello in time");
    }
    conns.erase(std::remove_if(conns.begin(), conns.end(), [](const auto& c) { return c->closed; }), conns.end());
    maybeDecideVote(now);
    maybeDecide(now);
    publish();
  }
  conns.clear();
}

void MembershipMaster::Impl::acceptAll() {
  for (;;) {
    Result<std::optional<net::Socket>> s = listener.tryAccept();
    if (!s.ok() || !s->has_value()) return;
    auto c = std::make_unique<Conn>();
    c->sock = std::move(**s);
    c->since = Clock::now();
    if (!crypto::randomBytes(c->masterNonce).ok()) continue;
    Message challenge;
    challenge.kind = Kind::Challenge;
    challenge.challenge = c->masterNonce;
    Result<std::vector<uint8_t>> frame = member::seal(challenge, c->sendCounter++, secret);
    if (!frame.ok() || !c->sock.sendAll(frame->data(), frame->size(), Deadline(kSendTimeout), nullptr).ok()) continue;
    conns.push_back(std::move(c));
    int pending = 0;
    for (auto& other : conns) pending += !other->greeted && !other->closed ? 1 : 0;
    if (pending > kMaxHandshakes) {
      for (auto& other : conns) {
        if (!other->greeted && !other->closed) {
          close(*other, "too many connections without a Hello: the oldest goes");
          break;
        }
      }
    }
  }
}

void MembershipMaster::Impl::readFrom(Conn& c) {
  uint8_t buf[4096];
  for (;;) {
    Result<size_t> n = c.sock.recvSome(buf, sizeof(buf));
    if (!n.ok()) {
      close(c, "connection closed");
      return;
    }
    if (*n == 0) break;
    c.reader.feed(std::span<const uint8_t>(buf, *n));
    if (c.reader.buffered() > 4 * (member::kHeaderBytes + member::kMaxPayloadBytes + member::kMacBytes)) break;
  }
  for (;;) {
    Result<std::optional<member::Frame>> f = c.reader.next();
    if (!f.ok()) {
      close(c, f.status().message().c_str());
      return;
    }
    if (!f->has_value()) return;
    if (!c.greeted) {
      greet(c, **f);
      if (c.closed) return;
      continue;
    }
    Result<Message> m = member::open(**f, c.key, c.recvCounter);
    if (!m.ok()) {
      close(c, m.status().message().c_str());
      return;
    }
    ++c.recvCounter;
    handle(c, *m);
    if (c.closed) return;
  }
}

void MembershipMaster::Impl::greet(Conn& c, const member::Frame& f) {
  Result<Nonce> nonce = member::helloNonce(f);
  if (!nonce.ok()) return close(c, "the first frame is not a Hello");
  c.key = member::sessionKey(secret, c.masterNonce, *nonce);
  Result<Message> m = member::open(f, c.key, 0);
  if (!m.ok()) return close(c, m.status().message().c_str());
  c.recvCounter = 1;
  c.greeted = true;
  c.uuid = m->hello.uuid;
  if (c.uuid == kNoMember) return close(c, "a member without an identity");
  for (auto& other : conns) {
    if (other.get() != &c && !other->closed && other->uuid == c.uuid) {
      Message kicked;
      kicked.kind = Kind::Kicked;
      kicked.reason = static_cast<uint32_t>(member::KickReason::Replaced);
      (void)send(*other, kicked);
      close(*other, "replaced by a new connection of the same member");
    }
  }
  const member::Hello& h = m->hello;
  if (h.epoch > 0 && h.epoch > epoch && (epoch == 0 || adopted)) {
    // A restarted master learns the epoch from its members (the highest one reported wins).
    epoch = h.epoch;
    members.assign(static_cast<size_t>(h.nRanks), kNoMember);
    resetVotes();
    adopted = true;
    for (auto& other : conns) other->inEpoch = false;
    CFX_INFO(log::Sys::Init, "membership master: continuing epoch %llu of %d members, learnt from reconnecting members",
             static_cast<unsigned long long>(epoch), h.nRanks);
  }
  const auto slot = static_cast<size_t>(h.rank);
  if (h.epoch > 0 && h.epoch == epoch && static_cast<size_t>(h.nRanks) == members.size() &&
      (members[slot] == kNoMember || members[slot] == c.uuid)) {
    members[slot] = c.uuid;
    c.inEpoch = true;
    if (adopted && h.verdictSeq > decidedSeq) {
      // A verdict the previous master sent before it went: whoever still waits for it gets the same one.
      decidedSeq = h.verdictSeq;
      decidedOk = h.verdictOk;
      decidedFailedRank = -1;
      voteOpen = false;
    }
  }
  CFX_INFO(log::Sys::Init, "membership master: %s %s from %s", c.inEpoch ? "member" : "joiner", idText(c.uuid).c_str(),
           c.sock.peerName().c_str());
}

void MembershipMaster::Impl::handle(Conn& c, const Message& m) {
  switch (m.kind) {
    case Kind::Ready:
      if (c.inEpoch ? m.epoch != epoch : m.epoch != 0) {
        Message kicked;
        kicked.kind = Kind::Kicked;
        kicked.reason = static_cast<uint32_t>(member::KickReason::Protocol);
        (void)send(c, kicked);
        return close(c, "Ready for an epoch it is not in");
      }
      c.ready = true;
      c.rebuild = m.rebuild;
      if (!c.inEpoch && c.joinOrder == 0) c.joinOrder = ++joinCounter;
      if (c.inEpoch && !roundOpen) {
        roundOpen = true;
        roundStart = Clock::now();
      }
      return;
    case Kind::Id: {
      if (!idPending || c.uuid != idFrom || m.epoch != epoch) return close(c, "an Id it was not asked for");
      idPending = false;
      for (size_t r = 1; r < members.size(); ++r) {
        if (Conn* to = find(members[r])) (void)send(*to, m);
      }
      return;
    }
    case Kind::Outcome: return report(c, m.vote);
    case Kind::Leave: return close(c, "left");
    default: return close(c, "a frame only the master sends");
  }
}

bool MembershipMaster::Impl::send(Conn& c, const Message& m) {
  if (c.closed) return false;
  Result<std::vector<uint8_t>> frame = member::seal(m, c.sendCounter++, c.key);
  if (!frame.ok() || !c.sock.sendAll(frame->data(), frame->size(), Deadline(kSendTimeout), nullptr).ok()) {
    close(c, "cannot send to it");
    return false;
  }
  return true;
}

void MembershipMaster::Impl::close(Conn& c, const char* why) {
  if (c.closed) return;
  CFX_INFO(log::Sys::Init, "membership master: dropping %s %s (%s): %s", c.inEpoch ? "member" : "connection",
           idText(c.uuid).c_str(), c.sock.peerName().c_str(), why);
  c.closed = true;
  c.sock.close();
  if (idPending && c.greeted && c.uuid == idFrom) {
    // The new epoch's rank 0 vanished before it handed out the id: an all-zero id tells the others at once, so they
    // fail their update now (and meet again at the next boundary) instead of waiting out their timeout.
    idPending = false;
    Message none;
    none.kind = Kind::Id;
    none.epoch = epoch;
    for (size_t r = 1; r < members.size(); ++r) {
      if (Conn* to = find(members[r])) (void)send(*to, none);
    }
  }
}

MembershipMaster::Impl::Conn* MembershipMaster::Impl::find(const Nonce& uuid) {
  for (auto& c : conns) {
    if (!c->closed && c->greeted && c->uuid == uuid) return c.get();
  }
  return nullptr;
}

void MembershipMaster::Impl::maybeDecide(Clock::time_point now) {
  int live = 0, ready = 0;
  bool slotsMissing = false;
  for (const Nonce& uuid : members) {
    Conn* c = uuid == kNoMember ? nullptr : find(uuid);
    if (c == nullptr) {
      slotsMissing = true;
      continue;
    }
    ++live;
    if (c->ready) ++ready;
  }
  bool joinerWaiting = false;
  for (auto& c : conns) joinerWaiting = joinerWaiting || c->waitingToJoin();
  if (adopted && slotsMissing && now - startedAt < options.restartGrace) return;  // members may still reconnect
  if (live == 0) {
    roundOpen = false;
    if (joinerWaiting) decide(false);
    return;
  }
  if (ready == live) return decide(false);
  if (roundOpen && ready > 0 && now - roundStart > options.roundTimeout) decide(true);
}

void MembershipMaster::Impl::decide(bool timedOut) {
  std::vector<Nonce> next;
  uint32_t left = 0, joined = 0;
  bool rebuild = false;
  for (const Nonce& uuid : members) {
    Conn* c = uuid == kNoMember ? nullptr : find(uuid);
    if (c != nullptr && c->ready) {
      next.push_back(uuid);
      rebuild = rebuild || c->rebuild;
      continue;
    }
    ++left;
    if (c != nullptr && timedOut) {
      Message kicked;
      kicked.kind = Kind::Kicked;
      kicked.reason = static_cast<uint32_t>(member::KickReason::NotReady);
      (void)send(*c, kicked);
      close(*c, "not ready within the round timeout");
    }
  }
  std::vector<Conn*> joiners;
  for (auto& c : conns) {
    if (c->waitingToJoin()) joiners.push_back(c.get());
  }
  std::sort(joiners.begin(), joiners.end(), [](const Conn* a, const Conn* b) { return a->joinOrder < b->joinOrder; });
  for (Conn* j : joiners) {
    next.push_back(j->uuid);
    ++joined;
  }
  const bool changed = next != members || rebuild;
  if (changed) ++epoch;
  members = next;
  if (changed) resetVotes();  // a new communicator numbers its collectives from 1
  adopted = false;
  roundOpen = false;
  ++boundaries;
  Message note;
  note.kind = Kind::Epoch;
  note.note.epoch = epoch;
  note.note.nRanks = static_cast<int32_t>(members.size());
  note.note.changed = changed;
  note.note.joined = joined;
  note.note.left = left;
  for (size_t r = 0; r < members.size(); ++r) {
    Conn* c = find(members[r]);
    if (c == nullptr) continue;
    c->inEpoch = true;
    c->ready = false;
    c->rebuild = false;
    c->joinOrder = 0;
    note.note.rank = static_cast<int32_t>(r);
    (void)send(*c, note);
  }
  idPending = changed && !members.empty();
  if (idPending) idFrom = members[0];
  CFX_INFO(log::Sys::Init, "membership master: boundary %llu -> epoch %llu, %zu members (%u joined, %u left)%s",
           static_cast<unsigned long long>(boundaries), static_cast<unsigned long long>(epoch), members.size(), joined,
           left, changed ? "" : ", unchanged");
}

void MembershipMaster::Impl::resetVotes() {
  reports.assign(members.size(), Report{});
  decidedSeq = 0;
  decidedOk = false;
  decidedFailedRank = -1;
  voteOpen = false;
}

void MembershipMaster::Impl::report(Conn& c, const member::Vote& v) {
  const auto it = std::find(members.begin(), members.end(), c.uuid);
  // A restarted master learns where the epoch's collectives stand from the first report: a member reports #seq only
  // once it was told the verdict of #seq - 1.
  if (adopted && !voteOpen && c.inEpoch && v.epoch == epoch && v.seq > decidedSeq + 1) {
    decidedSeq = v.seq - 1;
    decidedOk = true;
    decidedFailedRank = -1;
  }
  if (!c.inEpoch || v.epoch != epoch || it == members.end() || (v.seq != decidedSeq && v.seq != decidedSeq + 1)) {
    Message kicked;
    kicked.kind = Kind::Kicked;
    kicked.reason = static_cast<uint32_t>(member::KickReason::Protocol);
    (void)send(c, kicked);
    return close(c, "an Outcome for a collective that is not being decided");
  }
  if (v.seq == decidedSeq) return sendVerdict(c);  // decided without it (a late or repeated report)
  reports[static_cast<size_t>(it - members.begin())] = Report{v.seq, v.ok};
  if (!voteOpen) {
    voteOpen = true;
    voteStart = Clock::now();
  }
  maybeDecideVote(Clock::now());
}

bool MembershipMaster::Impl::slotMayReturn(Clock::time_point now) const {
  return adopted && now - startedAt < options.restartGrace;
}

void MembershipMaster::Impl::maybeDecideVote(Clock::time_point now) {
  if (!voteOpen) return;
  const uint64_t seq = decidedSeq + 1;
  bool failed = false, everyone = true;
  int32_t failedRank = -1;
  for (size_t r = 0; r < members.size() && !failed; ++r) {
    const Report& rep = reports[r];
    if (rep.seq == seq) {
      if (!rep.ok) {
        failed = true;
        failedRank = static_cast<int32_t>(r);
      }
      continue;
    }
    const bool connected = members[r] != kNoMember && find(members[r]) != nullptr;
    if (connected || slotMayReturn(now)) {
      everyone = false;
    } else {
      failed = true;  // gone before it said how the collective ended
      failedRank = static_cast<int32_t>(r);
    }
  }
  if (!failed && !everyone) {
    if (now - voteStart <= options.roundTimeout) return;
    failed = true;  // someone stayed silent: stopped, or it never ran the collective
  }
  decidedSeq = seq;
  decidedOk = !failed;
  decidedFailedRank = failed ? failedRank : -1;
  voteOpen = false;
  ++verdicts;
  if (failed) {
    CFX_INFO(log::Sys::Init, "membership master: epoch %llu collective #%llu fails everywhere (member rank %d)",
             static_cast<unsigned long long>(epoch), static_cast<unsigned long long>(seq), failedRank);
  }
  for (size_t r = 0; r < members.size(); ++r) {
    if (reports[r].seq != seq) continue;
    if (Conn* c = find(members[r])) sendVerdict(*c);
  }
}

void MembershipMaster::Impl::sendVerdict(Conn& c) {
  Message verdict;
  verdict.kind = Kind::Verdict;
  verdict.vote.epoch = epoch;
  verdict.vote.seq = decidedSeq;
  verdict.vote.ok = decidedOk;
  verdict.vote.failedRank = decidedOk ? -1 : decidedFailedRank;
  (void)send(c, verdict);
}

void MembershipMaster::Impl::publish() {
  Snapshot s;
  s.epoch = epoch;
  s.members = static_cast<int>(members.size());
  for (auto& c : conns) {
    s.waitingJoiners += c->waitingToJoin() ? 1 : 0;
    s.handshakes += !c->greeted && !c->closed ? 1 : 0;
  }
  s.boundaries = boundaries;
  std::lock_guard<std::mutex> lock(snapMutex);
  snap = s;
}

}  // namespace cfx::ft
