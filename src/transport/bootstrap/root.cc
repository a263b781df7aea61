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
  // An admitted connection: a rank of this root's group (RootJoin), or at root 0 the leader of another group
  // (GroupJoin). It sends Query frames; a group's leader also its Forward (or Error) to root k, and a leader at
  // root 0 its Group frame.
  struct Conn {
    net::Socket sock;
    FrameKeys keys;
    std::vector<uint8_t> frame = std::vector<uint8_t>(kFrameHeaderBytes);  // the frame being read
    size_t have = 0;
    bool queried = false;  // it sent a Query: it is about to give up on its own deadline
    sockaddr_storage listenAddr{};        // a member's Hello
    std::vector<sockaddr_storage> block;  // a leader's Group frame, once it came
    bool haveBlock = false;
  };
  enum class Phase { Gathering, AwaitForward };

  void acceptNew();
  void progressHandshakes();
  void admit(ServerHandshake& hs);
  std::string admitMember(ServerHandshake& hs);
  std::string admitLeader(ServerHandshake& hs);
  void reject(net::Socket sock, FrameKeys keys, const std::string& why);
  // False when the connection is gone (closed, or broke the protocol); `why` says how. *finished: the root's work
  // ended while serving it (a Forward went out as the table, or an Error was passed on).
  bool serve(Conn& c, bool isLeaderConn, int index, std::string& why, bool* finished);
  bool onFrame(Conn& c, bool isLeaderConn, int index, const FrameHeader& h, std::span<const uint8_t> payload,
               std::string& why, bool* finished);
  std::string connName(bool isLeaderConn, int index) const;
  std::string missingText() const;
  bool complete() const;
  void sendGroupToLeader();
  void finishWithTable();
  void finishWithForward(std::span<const uint8_t> table);
  // The Table frame of `table` (payload) to this root's members from index fromIndex on.
  void sendTableToMembers(std::span<const uint8_t> table, int fromIndex);
  void finishWithError(Errc code, const std::string& message);
  Deadline shortDeadline() const { return Deadline(std::min(cfg_.handshakeTimeout, cfg_.timeout)); }
  bool severalGroups() const { return groups_ > 1; }

  RootConfig cfg_;
  std::string name_;
  Deadline deadline_;
  Deadline::Clock::time_point start_ = Deadline::Clock::now();
  std::vector<ServerHandshake> pending_;
  int nRanks_ = -1;
  int groups_ = -1;  // known from the first Hello or Group frame
  int group_ = -1;   // the group this root serves; 0 once a leader joined (only root 0 has leaders)
  GroupRange range_;
  std::vector<std::optional<Conn>> members_;  // by rank - range_.first
  std::map<int, Conn> leaders_;               // by group (root 0)
  int joined_ = 0;
  int blocks_ = 0;  // leaders whose Group frame came
  Phase phase_ = Phase::Gathering;
};

void Root::run() {
  for (;;) {
    if (phase_ == Phase::Gathering && complete()) {
      if (group_ <= 0) return finishWithTable();
      sendGroupToLeader();
      phase_ = Phase::AwaitForward;
      deadline_ = Deadline(cfg_.timeout);
    }
    if (deadline_.expired()) {
      const std::string text = nRanks_ < 0 ? std::string("no rank joined") : missingText();
      CFX_WARN("Bootstrap root %s: giving up after %lld ms without progress: %s", name_.c_str(),
               static_cast<long long>(cfg_.timeout.count()), text.c_str());
      return finishWithError(Errc::Timeout, "the bootstrap root gave up waiting: " + text);
    }
    std::vector<pollfd> fds;
    fds.push_back({cfg_.listener.fd(), static_cast<short>(pending_.size() < kMaxPendingHandshakes ? POLLIN : 0), 0});
    for (const auto& hs : pending_) fds.push_back({hs.fd(), hs.pollEvents(), 0});
    std::vector<std::pair<bool, int>> connOfFd;  // (leader connection, index)
    for (size_t i = 0; i < members_.size(); ++i) {
      if (!members_[i]) continue;
      fds.push_back({members_[i]->sock.fd(), POLLIN, 0});
      connOfFd.emplace_back(false, static_cast<int>(i));
    }
    for (auto& [g, c] : leaders_) {
      fds.push_back({c.sock.fd(), POLLIN, 0});
      connOfFd.emplace_back(true, g);
    }
    if (::poll(fds.data(), fds.size(), kPollMs) < 0 && errno != EINTR) {
      const std::string why = std::strerror(errno);
      CFX_WARN("Bootstrap root %s: poll failed: %s", name_.c_str(), why.c_str());
      return finishWithError(Errc::SystemError, "the bootstrap root failed: poll: " + why);
    }
    const size_t firstConnFd = 1 + pending_.size();
    // Everything readable is served before a lost connection is acted on, so ranks whose Query arrived in the same
    // round as another rank's goodbye still get their answer naming the missing ranks.
    std::optional<std::pair<bool, int>> lost;
    std::string lostWhy;
    for (size_t i = 0; i < connOfFd.size(); ++i) {
      if (fds[firstConnFd + i].revents == 0) continue;
      const auto [isLeader, index] = connOfFd[i];
      Conn& c = isLeader ? leaders_.at(index) : *members_[static_cast<size_t>(index)];
      std::string why;
      bool finished = false;
      if (serve(c, isLeader, index, why, &finished)) {
        if (finished) return;
        continue;
      }
      if (!lost) {
        lost = connOfFd[i];
        lostWhy = why;
      }
    }
    if (lost) {
      const auto [isLeader, index] = *lost;
      Conn& c = isLeader ? leaders_.at(index) : *members_[static_cast<size_t>(index)];
      const bool gaveUp = c.queried;
      const std::string who = connName(isLeader, index);
      // One that gave up on its own deadline did join: the others are told whom it waited for, not that it is gone.
      const std::string waitedFor = gaveUp ? missingText() : std::string();
      if (isLeader) {
        leaders_.erase(index);
      } else {
        members_[static_cast<size_t>(index)].reset();
        --joined_;
      }
      const std::string text =
          strprintf("%s %s before all ranks joined; %s", who.c_str(), gaveUp ? "timed out" : lostWhy.c_str(),
                    gaveUp ? waitedFor.c_str() : missingText().c_str());
      CFX_INFO(log::Sys::Bootstrap, "Bootstrap root %s: %s", name_.c_str(), text.c_str());
      return finishWithError(gaveUp ? Errc::Timeout : Errc::RemoteError, text);
    }
    if (fds[0].revents != 0) acceptNew();
    progressHandshakes();
  }
}

bool Root::complete() const {
  if (members_.empty() || joined_ != range_.count) return false;
  return group_ != 0 || blocks_ == groups_ - 1;
}

std::string Root::connName(bool isLeaderConn, int index) const {
  if (isLeaderConn) {
    return strprintf("the leader of group %d (rank %d, %s)", index, groupRange(index, nRanks_, groups_).first,
                     leaders_.at(index).sock.peerName().c_str());
  }
  const int rank = range_.first + index;
  return strprintf(
      "rank %d (%s)%s", rank, members_[static_cast<size_t>(index)]->sock.peerName().c_str(),
      severalGroups() && index == 0 && group_ > 0 ? strprintf(", the leader of group %d,", group_).c_str() : "");
}

void Root::acceptNew() {
  // At the cap the rest wait in the listen backlog: every rank of a large job connects at once, and dropping one
  // mid-handshake (as this did, from 128 on) failed its init. A stranger holds a slot for handshakeTimeout at most.
  while (pending_.size() < kMaxPendingHandshakes) {
    Result<std::optional<net::Socket>> sock = cfg_.listener.tryAccept();
    if (!sock.ok()) {
      // EMFILE and friends: keep serving the connections we have, and pause so a listener that stays readable
      // does not turn this loop into a spin.
      CFX_WARN_LIMITED(gRejectWarns, "Bootstrap root %s: %s", name_.c_str(), sock.status().message().c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
      return;
    }
    if (!*sock) return;
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
  std::string why;
  if (hs.kind() == ConnKind::RootJoin) {
    why = admitMember(hs);
  } else if (hs.kind() == ConnKind::GroupJoin) {
    why = admitLeader(hs);
  } else {
    why = "a peer connection was made to the root";
  }
  if (!why.empty()) return reject(hs.takeSocket(), hs.takeKeys(), why);
  deadline_ = Deadline(cfg_.timeout);  // progress: the root outlives the deadline of every admitted rank
}

std::string Root::admitMember(ServerHandshake& hs) {
  const int rank = hs.rank();
  const int nRanks = hs.nRanks();
  const JoinHello& hello = hs.hello();
  if (nRanks < 1) return strprintf("rank %d claims nRanks=%d", rank, nRanks);
  if (nRanks_ >= 0 && nRanks != nRanks_) {
    return strprintf("rank %d says nRanks=%d, but ranks already joined with nRanks=%d", rank, nRanks, nRanks_);
  }
  if (rank < 0 || rank >= nRanks) return strprintf("rank %d is out of range [0, %d)", rank, nRanks);
  if (hello.groups > nRanks) {
    return strprintf("rank %d was given %d ids for %d ranks (each id needs a rank)", rank, hello.groups, nRanks);
  }
  if (groupOf(rank, nRanks, hello.groups) != hello.group) {
    return strprintf("rank %d joins as group %d of %d, but belongs to group %d", rank, hello.group, hello.groups,
                     groupOf(rank, nRanks, hello.groups));
  }
  if (!leaders_.empty() && hello.group != 0) {
    return strprintf("rank %d joins as group %d, but group leaders joined this root as root 0", rank, hello.group);
  }
  if (groups_ >= 0 && (hello.groups != groups_ || hello.group != group_)) {
    return strprintf(
        "rank %d joins as group %d of %d, but this root serves group %d of %d (ranks were given "
        "different ids, or ids in a different order)",
        rank, hello.group, hello.groups, group_, groups_);
  }
  if (groups_ < 0) {
    groups_ = hello.groups;
    group_ = hello.group;
  }
  nRanks_ = nRanks;
  if (members_.empty()) {  // the first member (perhaps after leaders, whose Group frames fixed groups_)
    range_ = groupRange(group_, nRanks_, groups_);
    members_.resize(static_cast<size_t>(range_.count));
  }
  std::optional<Conn>& slot = members_[static_cast<size_t>(rank - range_.first)];
  if (slot) {
    return strprintf("duplicate rank %d: rank %d already joined from %s", rank, rank, slot->sock.peerName().c_str());
  }
  Conn c;
  c.sock = hs.takeSocket();
  c.keys = hs.takeKeys();
  c.listenAddr = hello.listen;
  CFX_TRACE(log::Sys::Bootstrap, "Bootstrap root %s: rank %d of %d (group %d of %d) joined from %s (listens on %s)",
            name_.c_str(), rank, nRanks, hello.group, hello.groups, c.sock.peerName().c_str(),
            net::addressToString(c.listenAddr).c_str());
  slot = std::move(c);
  ++joined_;
  return {};
}

std::string Root::admitLeader(ServerHandshake& hs) {
  const int group = hs.rank();
  const int nRanks = hs.nRanks();
  if (nRanks < 2 || (nRanks_ >= 0 && nRanks != nRanks_)) {
    return strprintf("the leader of group %d says nRanks=%d%s", group, nRanks,
                     nRanks_ >= 0 ? strprintf(", but ranks already joined with nRanks=%d", nRanks_).c_str() : "");
  }
  if (group_ > 0) {
    return strprintf("the leader of group %d joined this root as root 0, but it serves group %d", group, group_);
  }
  if (group < 1 || group >= nRanks || (groups_ >= 0 && group >= groups_)) {
    return strprintf("a leader names group %d, outside [1, %d)", group, groups_ >= 0 ? groups_ : nRanks);
  }
  if (leaders_.count(group) != 0) return strprintf("the leader of group %d joined twice", group);
  nRanks_ = nRanks;
  Conn c;
  c.sock = hs.takeSocket();
  c.keys = hs.takeKeys();
  CFX_TRACE(log::Sys::Bootstrap, "Bootstrap root %s: the leader of group %d joined from %s", name_.c_str(), group,
            c.sock.peerName().c_str());
  leaders_.emplace(group, std::move(c));
  return {};
}

bool Root::serve(Conn& c, bool isLeaderConn, int index, std::string& why, bool* finished) {
  // What may arrive: Query frames (no payload) from anyone; a Group frame from a leader; a Forward or Error from
  // this root's group leader once it has the group's addresses.
  const bool mayForward = !isLeaderConn && index == 0 && group_ > 0 && phase_ == Phase::AwaitForward;
  const size_t maxPayload = isLeaderConn || mayForward ? tablePayloadBytes(nRanks_) : 0;
  for (;;) {
    Result<size_t> n = c.sock.recvSome(c.frame.data() + c.have, c.frame.size() - c.have);
    if (!n.ok()) {
      why = "closed its connection to the root";
      return false;
    }
    if (*n == 0) return true;
    c.have += *n;
    if (c.have < c.frame.size()) continue;
    Result<FrameHeader> h = decodeFrameHeader(std::span<const uint8_t>(c.frame.data(), kFrameHeaderBytes),
                                              std::max(maxPayload, kMaxControlBytes));
    if (!h.ok()) {
      why = "broke the bootstrap protocol (" + h.status().message() + ")";
      return false;
    }
    const size_t whole = kFrameHeaderBytes + h->bytes + c.keys.recv.tagBytes();
    if (c.frame.size() < whole) {
      c.frame.resize(whole);  // the payload and tag are still to come
      continue;
    }
    uint8_t* payload = c.frame.data() + kFrameHeaderBytes;
    if (Status st = openFrame(c.keys.recv, c.frame.data(), {payload, h->bytes}, payload + h->bytes); !st.ok()) {
      why = st.message();
      return false;
    }
    const bool alive = onFrame(c, isLeaderConn, index, *h, {payload, h->bytes}, why, finished);
    c.frame.assign(kFrameHeaderBytes, 0);
    c.have = 0;
    if (!alive || *finished) return alive;
  }
}

bool Root::onFrame(Conn& c, bool isLeaderConn, int index, const FrameHeader& h, std::span<const uint8_t> payload,
                   std::string& why, bool* finished) {
  const bool fromOwnLeader = !isLeaderConn && index == 0 && group_ > 0 && phase_ == Phase::AwaitForward;
  if (h.kind == FrameKind::Query && h.bytes == 0) {
    c.queried = true;
    const std::string text = missingText();
    const FrameHeader reply{FrameKind::Status, 0, text.size()};
    (void)sendFrame(c.sock, c.keys.send, reply, text.data(), shortDeadline(), nullptr);
    return true;
  }
  if (h.kind == FrameKind::Group && isLeaderConn && !c.haveBlock) {
    Result<GroupBlock> block = decodeGroup(h, payload, nRanks_, groups_);
    if (!block.ok() || block->group != index) {
      why = "sent a bad Group frame (" +
            (block.ok() ? strprintf("for group %d", block->group) : block.status().message()) + ")";
      return false;
    }
    if (groups_ < 0) {
      groups_ = block->groups;
      group_ = 0;
    }
    c.block = std::move(block->addresses);
    c.haveBlock = true;
    ++blocks_;
    deadline_ = Deadline(cfg_.timeout);
    return true;
  }
  if (h.kind == FrameKind::Forward && fromOwnLeader) {
    Result<RootAnswer> table = decodeRootAnswer(h, payload, nRanks_);
    if (!table.ok()) {
      why = "forwarded a bad table (" + table.status().message() + ")";
      return false;
    }
    // The leader proved it holds this group's id, not that root 0 sent this: check it at least holds our ranks.
    for (int i = 0; i < range_.count; ++i) {
      uint8_t ours[kAddressBytes];
      uint8_t theirs[kAddressBytes];
      encodeAddress(members_[static_cast<size_t>(i)]->listenAddr, ours);
      encodeAddress(table->table[static_cast<size_t>(range_.first + i)], theirs);
      if (std::memcmp(ours, theirs, kAddressBytes) != 0) {
        why =
            strprintf("forwarded a table whose address of rank %d differs from the one it sent here", range_.first + i);
        return false;
      }
    }
    finishWithForward(payload);
    *finished = true;
    return true;
  }
  if (h.kind == FrameKind::Error && fromOwnLeader) {
    std::string text(payload.begin(), payload.end());
    for (char& ch : text) ch = (ch >= 0x20 && ch < 0x7f) ? ch : '?';
    const bool known = h.tag >= static_cast<uint64_t>(Errc::SystemError) &&
                       h.tag <= static_cast<uint64_t>(Errc::Timeout) &&
                       h.tag != static_cast<uint64_t>(Errc::InProgress);
    finishWithError(known ? static_cast<Errc>(h.tag) : Errc::RemoteError,
                    strprintf("the leader of group %d (rank %d) could not get the table from root 0: %s", group_,
                              range_.first, text.c_str()));
    *finished = true;
    return true;
  }
  why = strprintf("broke the bootstrap protocol (unexpected frame of kind %u)", static_cast<unsigned>(h.kind));
  return false;
}

std::string Root::missingText() const {
  std::string list;
  int missing = 0;
  for (size_t i = 0; i < members_.size(); ++i) {
    if (members_[i]) continue;
    if (++missing <= 32) list += strprintf("%s%zu", list.empty() ? "" : ", ", range_.first + i);
  }
  if (missing > 32) list += strprintf(" and %d more", missing - 32);
  // Group 0 may be whole while another group's leader is what the root waits for: say so, not "missing ranks ".
  std::string text =
      missing == 0 ? strprintf("all %d ranks joined", range_.count)
                   : strprintf("missing rank%s %s (%d of %d joined)", missing == 1 ? "" : "s", list.c_str(), joined_,
                               range_.count);
  if (members_.empty()) text = "no rank of this root's group joined";
  if (!severalGroups()) return text;
  if (group_ > 0) {
    text += strprintf(" in group %d of %d", group_, groups_);
    if (phase_ == Phase::AwaitForward) {
      text = strprintf("waiting for rank %d, the leader of group %d, to bring the table from root 0", range_.first,
                       group_);
    }
    return text;
  }
  std::string groupsList;
  int groupsMissing = 0;
  for (int g = 1; g < groups_; ++g) {
    auto it = leaders_.find(g);
    if (it != leaders_.end() && it->second.haveBlock) continue;
    if (++groupsMissing <= 16) groupsList += strprintf("%s%d", groupsList.empty() ? "" : ", ", g);
  }
  if (groupsMissing > 16) groupsList += strprintf(" and %d more", groupsMissing - 16);
  if (groupsMissing == 0) return text + " in group 0";
  return text + strprintf(" in group 0; group%s %s of %d not reported by %s leader%s (each group's first rank)",
                          groupsMissing == 1 ? "" : "s", groupsList.c_str(), groups_,
                          groupsMissing == 1 ? "its" : "their", groupsMissing == 1 ? "" : "s");
}

void Root::sendGroupToLeader() {
  std::vector<sockaddr_storage> addrs;
  for (const auto& m : members_) addrs.push_back(m->listenAddr);
  const std::vector<uint8_t> payload = encodeGroupAddresses(addrs);
  const FrameHeader h{FrameKind::Group, (static_cast<uint64_t>(groups_) << 32) | static_cast<uint64_t>(group_),
                      payload.size()};
  Conn& leader = *members_[0];
  if (Status st = sendFrame(leader.sock, leader.keys.send, h, payload.data(), Deadline(cfg_.timeout), nullptr);
      !st.ok()) {
    CFX_INFO(log::Sys::Bootstrap, "Bootstrap root %s: cannot send group %d to its leader, rank %d: %s", name_.c_str(),
             group_, range_.first, st.message().c_str());
  }
}

void Root::finishWithTable() {
  cfg_.listener.close();  // a late connection is refused now, not half-served by an exiting thread
  std::vector<sockaddr_storage> all(static_cast<size_t>(nRanks_));
  for (int i = 0; i < range_.count; ++i)
    all[static_cast<size_t>(range_.first + i)] = members_[static_cast<size_t>(i)]->listenAddr;
  for (const auto& [g, c] : leaders_) {
    std::copy(c.block.begin(), c.block.end(), all.begin() + groupRange(g, nRanks_, groups_).first);
  }
  std::vector<uint8_t> table = encodeGroupAddresses(all);
  table.resize(tablePayloadBytes(nRanks_));
  const std::span<uint8_t> sessionNonce(table.data() + static_cast<size_t>(nRanks_) * kAddressBytes,
                                        kSessionNonceBytes);
  if (Status st = crypto::randomBytes(sessionNonce); !st.ok()) {
    return finishWithError(Errc::SystemError, "the bootstrap root cannot draw the session nonce: " + st.message());
  }
  const FrameHeader h{FrameKind::Table, static_cast<uint64_t>(nRanks_), table.size()};
  const Deadline deadline(cfg_.timeout);
  // Leaders first: each still has to pass the table on to its group.
  for (auto& [g, c] : leaders_) {
    if (Status st = sendFrame(c.sock, c.keys.send, h, table.data(), deadline, nullptr); !st.ok()) {
      CFX_INFO(log::Sys::Bootstrap, "Bootstrap root %s: cannot send the table to the leader of group %d: %s",
               name_.c_str(), g, st.message().c_str());
    }
  }
  sendTableToMembers(table, 0);
  const double secs = std::chrono::duration<double>(Deadline::Clock::now() - start_).count();
  CFX_INFO(log::Sys::Bootstrap, "Bootstrap root %s: all %d ranks joined after %.3f s (%d here, %d groups)",
           name_.c_str(), nRanks_, secs, range_.count, groups_);
}

void Root::sendTableToMembers(std::span<const uint8_t> table, int fromIndex) {
  const FrameHeader h{FrameKind::Table, static_cast<uint64_t>(nRanks_), table.size()};
  const Deadline deadline(cfg_.timeout);
  for (int i = fromIndex; i < range_.count; ++i) {
    Conn& m = *members_[static_cast<size_t>(i)];
    if (Status st = sendFrame(m.sock, m.keys.send, h, table.data(), deadline, nullptr); !st.ok()) {
      CFX_INFO(log::Sys::Bootstrap, "Bootstrap root %s: cannot send the table to rank %d: %s", name_.c_str(),
               range_.first + i, st.message().c_str());
    }
  }
}

void Root::finishWithForward(std::span<const uint8_t> table) {
  cfg_.listener.close();
  sendTableToMembers(table, 1);  // the leader brought it
  const double secs = std::chrono::duration<double>(Deadline::Clock::now() - start_).count();
  CFX_INFO(log::Sys::Bootstrap, "Bootstrap root %s: group %d of %d (%d ranks) has the table after %.3f s",
           name_.c_str(), group_, groups_, range_.count, secs);
}

void Root::finishWithError(Errc code, const std::string& message) {
  cfg_.listener.close();
  const FrameHeader h{FrameKind::Error, static_cast<uint64_t>(code), std::min(message.size(), kMaxControlBytes)};
  for (auto& m : members_) {
    if (m) (void)sendFrame(m->sock, m->keys.send, h, message.data(), shortDeadline(), nullptr);
  }
  for (auto& [g, c] : leaders_) (void)sendFrame(c.sock, c.keys.send, h, message.data(), shortDeadline(), nullptr);
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
