// SPDX-License-Identifier: Apache-2.0
// Concurrent connect/accept/authenticate for the TCP transport's data sockets (transport layer).
//
// Each handshake is a small state machine driven by poll(): it either waits to send the rest of its current
// message or to receive the rest of the one it expects. Outgoing and incoming handshakes advance side by side,
// so all ranks set up at once instead of in a chain, and a stranger can only hold its own socket.
#include "transport/tcp/tcp_connector.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>

#include "common/crypto.h"
#include "common/log.h"

namespace cfx::transport::tcp {

namespace {

using Clock = Deadline::Clock;

constexpr auto kRetryDelay = std::chrono::milliseconds(100);
constexpr auto kPollSlice = std::chrono::milliseconds(100);
// Unauthenticated incoming connections held beyond the ones still expected; past it the oldest is dropped, so
// a flood of silent strangers cannot starve the legitimate peers.
constexpr size_t kMaxStrangers = 64;

enum class Step {
  Connecting,     // outgoing: non-blocking connect() in flight, or waiting to retry
  SendHello,      // outgoing
  RecvChallenge,  // outgoing
  SendProof,      // outgoing
  RecvAck,        // outgoing
  RecvHello,      // incoming
  SendChallenge,  // incoming
  RecvProof,      // incoming
  SendAck,        // incoming
};

const char* stepText(Step step) {
  switch (step) {
    case Step::Connecting:
      return "connecting";
    case Step::SendHello:
      return "sending hello";
    case Step::RecvChallenge:
      return "connected, waiting for its challenge";
    case Step::SendProof:
      return "sending proof";
    case Step::RecvAck:
      return "waiting for its acknowledgement";
    case Step::RecvHello:
      return "waiting for its hello";
    case Step::SendChallenge:
      return "sending challenge";
    case Step::RecvProof:
      return "waiting for its proof";
    case Step::SendAck:
      return "sending acknowledgement";
  }
  return "?";
}

struct Handshake {
  bool outgoing = false;
  Step step = Step::Connecting;
  net::Socket sock;       // invalid while an outgoing connect waits for its retry
  bool finished = false;  // done, dropped or evicted: removed at the end of the poll round
  // The current message: bytes still to send from `out`, or to receive into `in`.
  std::vector<uint8_t> out;
  size_t outDone = 0;
  std::vector<uint8_t> in;
  size_t inDone = 0;
  std::array<uint8_t, kHelloBytes> hello{};
  Nonce serverNonce{};
  crypto::Protection serverProtection = crypto::Protection::Off;
  SocketKeys keys;  // once authenticated
  int peer = -1;  // known from the start when outgoing, after the hello when incoming
  int channel = -1;
  int stream = -1;
  Clock::time_point retryAt{};         // outgoing, while no socket: when to connect again
  Clock::time_point connectStarted{};  // outgoing: the current connect() attempt, for the round-trip time
  Clock::time_point started{};         // incoming: for evicting the oldest stranger
  AckCode ack = AckCode::Ok;           // incoming: what the acknowledgement says
  Status refusal;                      // why a legitimate peer and this rank cannot work together
};

// Log lines a stranger on the data port can trigger: a few a second.
log::WarnLimiter gStrangerWarns;

// Done: authenticated and accepted. Refused: authenticated, but the ranks are incompatible (h.refusal says why);
// it still counts as settled, so both sides finish every handshake and report the same clear error instead of
// one of them timing out. Drop: a stranger, already logged.
enum class Outcome { Continue, Done, Refused, Drop };

// How a peer's links are striped: decided here when we connect (fixed, or autotuned), learned from its
// authenticated Hello when it connects to us.
struct PeerStriping {
  int nStreams = 0;  // 0: not known yet
  int64_t socketBufferBytes = 0;
  // Outgoing: the link's other sockets wait for the first one's Ack. The peer expects them only once it has
  // authenticated that first Hello (decideAck()); sent before, they count as strangers there, and with many lower
  // ranks connecting at once (63 at 64 ranks) its stranger bound dropped real peers' sockets.
  bool othersAfterAck = false;
};

class Connector {
 public:
  Connector(const ConnectPlan& plan, std::vector<net::Listener>& listeners)
      : plan_(plan), listeners_(listeners), striping_(static_cast<size_t>(plan.nRanks)) {}
  Result<std::vector<EstablishedSocket>> run();

 private:
  static int keyOf(int peer, int channel, int stream) { return (peer * kNumChannels + channel) * kMaxStreams + stream; }
  // Queues the outgoing handshakes of (channel, stream) for every pair but `except` (-1: none).
  Status spawnOutgoing(int peer, int exceptChannel, int exceptStream);
  // Outgoing, on the first socket to a peer: fixes its striping from the connect() round trip.
  Status decideStriping(Handshake& h, double rttSeconds);
  Status startOutgoing(Handshake& h);
  Status beginHello(Handshake& h);
  void acceptAll(net::Listener& listener);
  void evictOldestStranger();
  Result<Outcome> advance(Handshake& h, short revents);
  Result<Outcome> advanceOutgoing(Handshake& h, short revents);
  Result<Outcome> advanceIncoming(Handshake& h);
  // Why an incoming hello cannot be for us, or "" when it may be.
  std::string helloProblem(const Hello& m) const;
  // After a valid proof: what the acknowledgement says (sets h.ack and, for an incompatible peer, h.refusal).
  void decideAck(Handshake& h);
  crypto::Protection protectionFor(int peer) const {
    return static_cast<size_t>(peer) < plan_.protection.size() ? plan_.protection[static_cast<size_t>(peer)]
                                                                : crypto::Protection::Off;
  }
  Result<Outcome> onAck(Handshake& h);
  Outcome drop(Handshake& h, const std::string& why);
  Status outgoingFailure(const Handshake& h, const std::string& why) const;
  Status finish(Handshake& h);
  void settle(Handshake& h);
  Status timeoutError() const;
  std::string geometryText() const {
    return strprintf("%d slots x %zu B", plan_.geometry.nSlots, plan_.geometry.slotBytes);
  }

  const ConnectPlan& plan_;
  std::vector<net::Listener>& listeners_;
  std::vector<PeerStriping> striping_;
  std::vector<std::unique_ptr<Handshake>> pending_;
  std::vector<std::unique_ptr<Handshake>> spawned_;  // created during a poll round, joined to pending_ after it
  std::vector<bool> done_;                           // by keyOf(): settled
  std::vector<bool> claimed_;  // by keyOf(): an authenticated incoming connection was accepted for it
  int expectedIncoming_ = 0;
  int remaining_ = 0;
  std::vector<EstablishedSocket> established_;
  Status refusal_;  // the first Refused outcome, returned once every handshake has settled
  bool congestionRefused_ = false;  // the kernel refused plan_'s congestion control (logged once)
};

// Sends what is left of h.out. True when all of it went out, false on would-block; an error on failure.
Result<bool> flushOut(Handshake& h) {
  while (h.outDone < h.out.size()) {
    const ssize_t n =
        ::send(h.sock.fd(), h.out.data() + h.outDone, h.out.size() - h.outDone, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
      return Status::error(Errc::RemoteError, strprintf("send: %s", std::strerror(errno)));
    }
    h.outDone += static_cast<size_t>(n);
  }
  return true;
}

// Receives exactly what is left of h.in, never more: the bytes after the handshake belong to the proxy.
Result<bool> fillIn(Handshake& h) {
  while (h.inDone < h.in.size()) {
    const ssize_t n = ::recv(h.sock.fd(), h.in.data() + h.inDone, h.in.size() - h.inDone, MSG_DONTWAIT);
    if (n == 0) return Status::error(Errc::RemoteError, "the connection was closed during the handshake");
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
      return Status::error(Errc::RemoteError, strprintf("recv: %s", std::strerror(errno)));
    }
    h.inDone += static_cast<size_t>(n);
  }
  return true;
}

template <size_t N>
void setOut(Handshake& h, const std::array<uint8_t, N>& bytes) {
  h.out.assign(bytes.begin(), bytes.end());
  h.outDone = 0;
}

void expectIn(Handshake& h, size_t bytes) {
  h.in.assign(bytes, 0);
  h.inDone = 0;
}

Status Connector::startOutgoing(Handshake& h) {
  const sockaddr_storage& to = streamAddress(plan_.listeners[static_cast<size_t>(h.peer)], h.stream);
  bool connected = false;
  int err = 0;
  const PeerStriping& striping = striping_[static_cast<size_t>(h.peer)];
  const int64_t buffer = plan_.autotune ? striping.socketBufferBytes : plan_.socketBufferBytes;
  h.connectStarted = Clock::now();
  Result<net::UniqueFd> fd = startConnect(to, buffer, &connected, &err);
  if (!fd.ok()) {
    if (err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH || err == EAGAIN) {
      h.retryAt = Clock::now() + kRetryDelay;  // a listener that is not up yet, or a transient route problem
      return Status();
    }
    return outgoingFailure(h, fd.status().message());
  }
  h.sock = net::Socket(std::move(fd).value(), to);
  h.step = Step::Connecting;
  return connected ? beginHello(h) : Status();
}

Status Connector::spawnOutgoing(int peer, int exceptChannel, int exceptStream) {
  const int nStreams = striping_[static_cast<size_t>(peer)].nStreams;
  for (int c = 0; c < kNumChannels; ++c) {
    for (int s = 0; s < nStreams; ++s) {
      if (c == exceptChannel && s == exceptStream) continue;
      auto h = std::make_unique<Handshake>();
      h->outgoing = true;
      h->peer = peer;
      h->channel = c;
      h->stream = s;
      CFX_TRY(startOutgoing(*h));
      spawned_.push_back(std::move(h));
    }
  }
  return Status();
}

Status Connector::decideStriping(Handshake& h, double rttSeconds) {
  PeerStriping& striping = striping_[static_cast<size_t>(h.peer)];
  AutotuneInputs inputs = *plan_.autotune;
  inputs.rttSeconds = rttSeconds;
  if (static_cast<size_t>(h.peer) < plan_.stripeRails.size()) {
    inputs.rails = plan_.stripeRails[static_cast<size_t>(h.peer)];
  }
  const AutotuneDecision decision = autotune(inputs);
  striping.nStreams = decision.nStreams;
  striping.socketBufferBytes = decision.socketBufferBytes;
  CFX_INFO(log::Sys::Net, "tcp: rank %d -> rank %d (%s): autotuned to %s", plan_.rank, h.peer,
           h.sock.peerName().c_str(), describe(decision, rttSeconds).c_str());
  remaining_ += kNumChannels * decision.nStreams - 1;
  striping.othersAfterAck = true;
  return Status();
}

Status Connector::beginHello(Handshake& h) {
  if (striping_[static_cast<size_t>(h.peer)].nStreams == 0) {
    // The first socket to this peer: its connect() took one round trip (SYN, SYN-ACK), answered by the peer's
    // kernel however busy the peer process is. This process's own wait for the poll that saw it is not: with
    // hundreds of ranks per core it read 0.5 s on a 0.1 ms path and autotuned every link to 8 streams (256 ranks on
    // 16 namespace hosts: 3,840 sockets a rank). The kernel's own sample of that round trip (TCP_INFO) has no
    // scheduling in it; the wall time stays the bound where the kernel has none.
    double rtt = std::chrono::duration<double>(Clock::now() - h.connectStarted).count();
    tcp_info info{};
    socklen_t len = sizeof(info);
    if (::getsockopt(h.sock.fd(), IPPROTO_TCP, TCP_INFO, &info, &len) == 0 && info.tcpi_rtt > 0) {
      rtt = std::min(rtt, static_cast<double>(info.tcpi_rtt) * 1e-6);
    }
    CFX_TRY(decideStriping(h, rtt));
  }
  const PeerStriping& striping = striping_[static_cast<size_t>(h.peer)];
  Hello hello{.fromRank = static_cast<uint32_t>(plan_.rank),
              .toRank = static_cast<uint32_t>(h.peer),
              .nRanks = static_cast<uint32_t>(plan_.nRanks),
              .channel = static_cast<uint32_t>(h.channel),
              .stream = static_cast<uint32_t>(h.stream),
              .nSlots = static_cast<uint32_t>(plan_.geometry.nSlots),
              .slotBytes = plan_.geometry.slotBytes,
              .nStreams = static_cast<uint32_t>(striping.nStreams),
              .minStripeBytes = plan_.minStripeBytes,
              .socketBufferBytes = static_cast<uint64_t>(striping.socketBufferBytes),
              .nonce = {},
              .session = plan_.listeners[static_cast<size_t>(h.peer)].session,
              .protection = protectionFor(h.peer)};
  CFX_TRY(crypto::randomBytes(hello.nonce));
  h.hello = encodeHello(hello);
  setOut(h, h.hello);
  h.step = Step::SendHello;
  return Status();
}

void Connector::acceptAll(net::Listener& listener) {
  for (;;) {
    Result<std::optional<net::Socket>> accepted = listener.tryAccept();
    if (!accepted.ok()) {
      // Out of descriptors, most likely; the connections still queued are retried on the next poll round.
      CFX_WARN_LIMITED(gStrangerWarns, "tcp: rank %d: accepting on its data port failed: %s", plan_.rank,
                       accepted.status().message().c_str());
      return;
    }
    if (!accepted.value()) return;
    evictOldestStranger();
    auto h = std::make_unique<Handshake>();
    h->outgoing = false;
    h->step = Step::RecvHello;
    h->sock = std::move(*accepted.value());
    h->started = Clock::now();
    expectIn(*h, kHelloBytes);
    pending_.push_back(std::move(h));
  }
}

void Connector::evictOldestStranger() {
  Handshake* oldest = nullptr;
  size_t strangers = 0;
  for (auto& h : pending_) {
    if (h->outgoing || h->finished || h->step == Step::SendAck) continue;
    ++strangers;
    if (oldest == nullptr || h->started < oldest->started) oldest = h.get();
  }
  if (oldest != nullptr && strangers >= static_cast<size_t>(expectedIncoming_) + kMaxStrangers) {
    drop(*oldest, "too many unauthenticated connections on the data port; dropping the oldest");
  }
}

Outcome Connector::drop(Handshake& h, const std::string& why) {
  CFX_WARN_LIMITED(gStrangerWarns, "tcp: rank %d closed a connection from %s on its data port: %s", plan_.rank,
                   h.sock.peerName().c_str(), why.c_str());
  h.sock.close();
  h.finished = true;
  return Outcome::Drop;
}

Status Connector::outgoingFailure(const Handshake& h, const std::string& why) const {
  return Status::error(
      Errc::RemoteError,
      strprintf("tcp: rank %d could not connect to rank %d (%s) for channel %d, stream %d: %s; check that "
                "rank's log",
                plan_.rank, h.peer,
                net::addressToString(streamAddress(plan_.listeners[static_cast<size_t>(h.peer)], h.stream)).c_str(),
                h.channel, h.stream, why.c_str()));
}

Result<Outcome> Connector::advance(Handshake& h, short revents) {
  return h.outgoing ? advanceOutgoing(h, revents) : advanceIncoming(h);
}

Result<Outcome> Connector::advanceOutgoing(Handshake& h, short revents) {
  for (;;) {
    switch (h.step) {
      case Step::Connecting: {
        if ((revents & (POLLOUT | POLLERR | POLLHUP)) == 0) return Outcome::Continue;
        const int err = finishConnect(h.sock.fd());
        if (err != 0) {
          h.sock.close();
          if (err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH) {
            h.retryAt = Clock::now() + kRetryDelay;
            return Outcome::Continue;
          }
          return outgoingFailure(h, strprintf("connect: %s", std::strerror(err)));
        }
        CFX_TRY(beginHello(h));
        break;
      }
      case Step::SendHello: {
        Result<bool> sent = flushOut(h);
        if (!sent.ok()) return outgoingFailure(h, sent.status().message());
        if (!sent.value()) return Outcome::Continue;
        expectIn(h, kChallengeBytes);
        h.step = Step::RecvChallenge;
        break;
      }
      case Step::RecvChallenge: {
        Result<bool> got = fillIn(h);
        if (!got.ok()) return outgoingFailure(h, got.status().message());
        if (!got.value()) return Outcome::Continue;
        Result<Challenge> challenge = decodeChallenge(h.in);
        if (!challenge.ok()) return outgoingFailure(h, challenge.status().message());
        h.serverNonce = challenge->nonce;
        CFX_TRY_ASSIGN(const Mac expected,
                       serverMac(*plan_.secret, h.hello.data(), h.serverNonce, challenge->protection));
        if (!macEquals(expected, challenge->mac.data())) {
          return outgoingFailure(h,
                                 "the listener did not prove knowledge of the session secret (another process may "
                                 "own that port, or the ranks come from different unique ids)");
        }
        CFX_TRY_ASSIGN(const Mac proof, clientMac(*plan_.secret, h.hello.data(), h.serverNonce, challenge->protection));
        CFX_TRY_ASSIGN(h.keys, socketKeys(*plan_.secret, h.hello.data(), h.serverNonce,
                                          std::max(protectionFor(h.peer), challenge->protection), /*isClient=*/true));
        setOut(h, proof);
        h.step = Step::SendProof;
        break;
      }
      case Step::SendProof: {
        Result<bool> sent = flushOut(h);
        if (!sent.ok()) return outgoingFailure(h, sent.status().message());
        if (!sent.value()) return Outcome::Continue;
        expectIn(h, kAckBytes);
        h.step = Step::RecvAck;
        break;
      }
      case Step::RecvAck: {
        Result<bool> got = fillIn(h);
        if (!got.ok()) return outgoingFailure(h, got.status().message());
        if (!got.value()) return Outcome::Continue;
        return onAck(h);
      }
      default:
        return Status::error(Errc::InternalError, "tcp: outgoing handshake in an incoming step");
    }
  }
}

std::string Connector::helloProblem(const Hello& m) const {
  if (m.toRank != static_cast<uint32_t>(plan_.rank) || m.nRanks != static_cast<uint32_t>(plan_.nRanks)) {
    return strprintf("addressed to rank %u of %u, but this is rank %d of %d", m.toRank, m.nRanks, plan_.rank,
                     plan_.nRanks);
  }
  if (m.session != plan_.listeners[static_cast<size_t>(plan_.rank)].session) {
    return "meant for another listener session (a stale or foreign communicator)";
  }
  if (m.fromRank >= static_cast<uint32_t>(plan_.rank) || !plan_.connect[m.fromRank]) {
    return strprintf("claims to be rank %u, which is not expected to connect here", m.fromRank);
  }
  if (m.nStreams < 1 || m.nStreams > static_cast<uint32_t>(kMaxStreams)) {
    return strprintf("announces %u streams per link, outside [1, %d]", m.nStreams, kMaxStreams);
  }
  if (m.channel >= static_cast<uint32_t>(kNumChannels) || m.stream >= m.nStreams) {
    return strprintf("asks for channel %u stream %u of %u, which do not exist", m.channel, m.stream, m.nStreams);
  }
  return "";
}

void Connector::decideAck(Handshake& h) {
  const Hello m = decodeHello(h.hello.data()).value();  // decoded once already, so it cannot fail
  const size_t key = static_cast<size_t>(keyOf(h.peer, h.channel, h.stream));
  if (claimed_[key]) {
    CFX_WARN_LIMITED(gStrangerWarns, "tcp: rank %d: rank %d (%s) connected channel %d twice; refusing the second "
                     "connection", plan_.rank, h.peer, h.sock.peerName().c_str(), h.channel);
    h.ack = AckCode::Duplicate;
    return;
  }
  claimed_[key] = true;
  PeerStriping& striping = striping_[static_cast<size_t>(h.peer)];
  if (striping.nStreams != 0 && m.nStreams != static_cast<uint32_t>(striping.nStreams)) {
    h.ack = AckCode::StreamMismatch;
    h.refusal = Status::error(Errc::InvalidUsage,
                              strprintf("tcp: rank %d announced %u streams for channel %d but %d for an earlier "
                                        "connection; this is a bug in that rank",
                                        h.peer, m.nStreams, h.channel, striping.nStreams));
    return;
  }
  if (m.minStripeBytes != plan_.minStripeBytes) {
    h.ack = AckCode::GeometryMismatch;
    h.refusal = Status::error(Errc::InvalidUsage,
                              strprintf("tcp: rank %d cuts slots into stripes of at least %u B but this rank %d uses "
                                        "%u B; every rank must run the same Conflux build and options",
                                        h.peer, m.minStripeBytes, plan_.rank, plan_.minStripeBytes));
    return;
  }
  if (m.slotBytes != plan_.geometry.slotBytes || m.nSlots != static_cast<uint32_t>(plan_.geometry.nSlots)) {
    h.ack = AckCode::GeometryMismatch;
    h.refusal =
        Status::error(Errc::InvalidUsage, strprintf("tcp: rank %d uses %u slots x %llu B but this rank %d uses %s; set "
                                                    "CFX_TCP_SLOT_BYTES and CFX_TCP_SLOTS identically on every rank",
                                                    h.peer, m.nSlots, static_cast<unsigned long long>(m.slotBytes),
                                                    plan_.rank, geometryText().c_str()));
    return;
  }
  if (striping.nStreams == 0) {
    // Authenticated and accepted now, so its striping can be trusted: expect the rest of its sockets, which it
    // opens once this one's Ack reaches it (a refused first socket has no others).
    striping.nStreams = static_cast<int>(m.nStreams);
    striping.socketBufferBytes = static_cast<int64_t>(std::min<uint64_t>(m.socketBufferBytes, uint64_t{1} << 30));
    remaining_ += kNumChannels * striping.nStreams - 1;
    expectedIncoming_ += kNumChannels * striping.nStreams - 1;
    CFX_INFO(log::Sys::Net, "tcp: rank %d <- rank %d (%s): %d stream%s per link, as rank %d chose", plan_.rank, h.peer,
             h.sock.peerName().c_str(), striping.nStreams, striping.nStreams == 1 ? "" : "s", h.peer);
  }
}

Result<Outcome> Connector::onAck(Handshake& h) {
  Result<AckCode> ack = decodeAck(h.in.data());
  if (!ack.ok()) return outgoingFailure(h, ack.status().message());
  if (ack.value() == AckCode::GeometryMismatch) {
    h.refusal = Status::error(Errc::InvalidUsage,
                              strprintf("tcp: rank %d refused the connection from rank %d: its slot geometry differs "
                                        "from this rank's %s; set CFX_TCP_SLOT_BYTES and CFX_TCP_SLOTS identically "
                                        "on every rank",
                                        h.peer, plan_.rank, geometryText().c_str()));
    return Outcome::Refused;
  }
  if (ack.value() == AckCode::StreamMismatch) {
    h.refusal = Status::error(Errc::InvalidUsage, strprintf("tcp: rank %d refused the connection from rank %d: %s",
                                                            h.peer, plan_.rank, ackCodeName(ack.value())));
    return Outcome::Refused;
  }
  if (ack.value() != AckCode::Ok) return outgoingFailure(h, ackCodeName(ack.value()));
  PeerStriping& striping = striping_[static_cast<size_t>(h.peer)];
  if (striping.othersAfterAck) {
    striping.othersAfterAck = false;
    CFX_TRY(spawnOutgoing(h.peer, h.channel, h.stream));
  }
  return Outcome::Done;
}

Result<Outcome> Connector::advanceIncoming(Handshake& h) {
  for (;;) {
    switch (h.step) {
      case Step::RecvHello: {
        Result<bool> got = fillIn(h);
        if (!got.ok()) return drop(h, got.status().message());
        if (!got.value()) return Outcome::Continue;
        Result<Hello> hello = decodeHello(h.in.data());
        if (!hello.ok()) return drop(h, hello.status().message());
        const Hello& m = hello.value();
        if (std::string problem = helloProblem(m); !problem.empty()) return drop(h, problem);
        h.peer = static_cast<int>(m.fromRank);
        h.channel = static_cast<int>(m.channel);
        h.stream = static_cast<int>(m.stream);
        std::copy_n(h.in.begin(), kHelloBytes, h.hello.begin());
        Challenge challenge;
        CFX_TRY(crypto::randomBytes(challenge.nonce));
        challenge.protection = protectionFor(h.peer);
        CFX_TRY_ASSIGN(challenge.mac,
                       serverMac(*plan_.secret, h.hello.data(), challenge.nonce, challenge.protection));
        h.serverNonce = challenge.nonce;
        h.serverProtection = challenge.protection;
        setOut(h, encodeChallenge(challenge));
        h.step = Step::SendChallenge;
        break;
      }
      case Step::SendChallenge: {
        Result<bool> sent = flushOut(h);
        if (!sent.ok()) return drop(h, sent.status().message());
        if (!sent.value()) return Outcome::Continue;
        expectIn(h, kProofBytes);
        h.step = Step::RecvProof;
        break;
      }
      case Step::RecvProof: {
        Result<bool> got = fillIn(h);
        if (!got.ok()) {
          return drop(h, got.status().message() + strprintf(" after the challenge, claiming to be rank %d (a rank "
                                                            "with a different secret hangs up here)",
                                                            h.peer));
        }
        if (!got.value()) return Outcome::Continue;
        CFX_TRY_ASSIGN(const Mac expected,
                       clientMac(*plan_.secret, h.hello.data(), h.serverNonce, h.serverProtection));
        if (!macEquals(expected, h.in.data())) {
          return drop(h, strprintf("failed authentication as rank %d (wrong proof: a stranger, or a rank started "
                                   "from a different unique id)",
                                   h.peer));
        }
        const crypto::Protection clientProtection = decodeHello(h.hello.data()).value().protection;
        CFX_TRY_ASSIGN(h.keys, socketKeys(*plan_.secret, h.hello.data(), h.serverNonce,
                                          std::max(clientProtection, h.serverProtection), /*isClient=*/false));
        decideAck(h);
        setOut(h, encodeAck(h.ack));
        h.step = Step::SendAck;
        break;
      }
      case Step::SendAck: {
        Result<bool> sent = flushOut(h);
        if (!sent.ok()) return drop(h, sent.status().message());
        if (!sent.value()) return Outcome::Continue;
        if (!h.refusal.ok()) return Outcome::Refused;
        if (h.ack != AckCode::Ok) {
          h.sock.close();
          h.finished = true;
          return Outcome::Drop;  // already warned
        }
        return Outcome::Done;
      }
      default:
        return Status::error(Errc::InternalError, "tcp: incoming handshake in an outgoing step");
    }
  }
}

void Connector::settle(Handshake& h) {
  done_[static_cast<size_t>(keyOf(h.peer, h.channel, h.stream))] = true;
  --remaining_;
  if (!h.outgoing) --expectedIncoming_;
  h.finished = true;
}

Status Connector::finish(Handshake& h) {
  CFX_TRY(tuneDataSocket(h.sock.fd()));
  const PeerStriping& striping = striping_[static_cast<size_t>(h.peer)];
  const std::string& congestion = striping.nStreams > 1 ? plan_.stripedCongestion : plan_.congestion;
  std::string why;
  if (!congestion.empty() && !setCongestionControl(h.sock.fd(), congestion, &why) && !congestionRefused_) {
    congestionRefused_ = true;  // once per setup: every socket would say the same
    if (plan_.congestionExplicit) {
      CFX_WARN(
          "tcp: rank %d: CFX_TCP_CONGESTION=%s refused (%s); the data sockets keep the system's congestion "
          "control",
          plan_.rank, congestion.c_str(), why.c_str());
    } else {
      CFX_INFO(log::Sys::Net,
               "tcp: rank %d: %s congestion control for striped links refused (%s); keeping the "
               "system's",
               plan_.rank, congestion.c_str(), why.c_str());
    }
  }
  // Autotuned buffers: the first outgoing socket and every accepted one were created before the decision was
  // known. Setting them now still works: the window scale of the SYN already allowed for the kernel's maximum.
  if (plan_.autotune || !h.outgoing) applyBufferSizes(h.sock.fd(), striping.socketBufferBytes);
  settle(h);
  EstablishedSocket s;
  s.socket = std::move(h.sock);
  s.peer = h.peer;
  s.channel = h.channel;
  s.stream = h.stream;
  s.nStreams = striping.nStreams;
  s.keys = std::move(h.keys);
  established_.push_back(std::move(s));
  return Status();
}

Status Connector::timeoutError() const {
  // One entry per peer still missing, with how far its first unfinished handshake got.
  std::map<int, std::string> missing;
  for (int p = 0; p < plan_.nRanks; ++p) {
    if (p == plan_.rank || !plan_.connect[static_cast<size_t>(p)]) continue;
    const int nStreams = std::max(1, striping_[static_cast<size_t>(p)].nStreams);
    for (int c = 0; c < kNumChannels; ++c) {
      for (int s = 0; s < nStreams; ++s) {
        if (!done_[static_cast<size_t>(keyOf(p, c, s))] && missing.count(p) == 0) {
          missing[p] = p > plan_.rank ? "to connect to" : "to connect here";
        }
      }
    }
  }
  for (const auto& h : pending_) {
    if (h->outgoing && !h->finished && missing.count(h->peer) != 0 && missing[h->peer] == "to connect to") {
      missing[h->peer] = strprintf("to connect to (%s)", stepText(h->step));
    }
  }
  std::string list;
  int shown = 0;
  for (const auto& [peer, what] : missing) {
    if (shown++ == 8) {
      list += strprintf(", and %zu more", missing.size() - 8);
      break;
    }
    list += strprintf("%srank %d (%s)", list.empty() ? "" : ", ", peer, what.c_str());
  }
  return Status::error(Errc::Timeout,
                       strprintf("tcp: rank %d timed out setting up data connections; still waiting for %s; check "
                                 "those ranks' logs, or raise CFX_TCP_CONNECT_TIMEOUT_MS",
                                 plan_.rank, list.c_str()));
}

Result<std::vector<EstablishedSocket>> Connector::run() {
  done_.assign(static_cast<size_t>(plan_.nRanks * kNumChannels * kMaxStreams), false);
  claimed_ = done_;
  for (int p = 0; p < plan_.nRanks; ++p) {
    if (p == plan_.rank || !plan_.connect[static_cast<size_t>(p)]) continue;
    if (p < plan_.rank) {
      // One socket until its first authenticated Hello says how many follow (decideAck()).
      ++remaining_;
      ++expectedIncoming_;
      continue;
    }
    // One socket first (channel 0, stream 0); the link's others follow its Ack (onAck()). With autotune,
    // beginHello() times its connect and decides how many there are (decideStriping()).
    if (plan_.autotune) {
      ++remaining_;
    } else {
      striping_[static_cast<size_t>(p)] =
          PeerStriping{.nStreams = plan_.nStreams, .socketBufferBytes = 0, .othersAfterAck = true};
      remaining_ += kNumChannels * plan_.nStreams;
    }
    auto h = std::make_unique<Handshake>();
    h->outgoing = true;
    h->peer = p;
    h->channel = 0;
    h->stream = 0;
    CFX_TRY(startOutgoing(*h));
    pending_.push_back(std::move(h));
  }
  for (auto& h : spawned_) pending_.push_back(std::move(h));
  spawned_.clear();

  std::vector<pollfd> fds;
  std::vector<Handshake*> polled;
  while (remaining_ > 0) {
    if (plan_.deadline.expired()) return timeoutError();
    const auto now = Clock::now();
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(plan_.deadline.remaining(kPollSlice));
    fds.clear();
    for (const net::Listener& listener : listeners_) fds.push_back(pollfd{listener.fd(), POLLIN, 0});
    const size_t nListeners = fds.size();
    polled.assign(nListeners, nullptr);
    for (auto& h : pending_) {
      if (h->outgoing && !h->sock.valid()) {
        if (now >= h->retryAt) {
          CFX_TRY(startOutgoing(*h));
        } else {
          wait = std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(h->retryAt - now));
        }
        if (!h->sock.valid()) continue;
      }
      const bool sending = h->step == Step::Connecting || h->outDone < h->out.size();
      fds.push_back(pollfd{h->sock.fd(), static_cast<short>(sending ? POLLOUT : POLLIN), 0});
      polled.push_back(h.get());
    }
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(wait.count(), 1)));
    if (n < 0 && errno != EINTR) {
      return Status::error(Errc::SystemError, strprintf("tcp: poll(): %s", std::strerror(errno)));
    }
    if (n <= 0) continue;
    for (size_t i = nListeners; i < fds.size(); ++i) {
      Handshake& h = *polled[i];
      if (fds[i].revents == 0 || h.finished) continue;
      CFX_TRY_ASSIGN(const Outcome outcome, advance(h, fds[i].revents));
      if (outcome == Outcome::Done) CFX_TRY(finish(h));
      if (outcome == Outcome::Refused) {
        if (refusal_.ok()) refusal_ = std::move(h.refusal);
        h.sock.close();
        settle(h);
        if (h.outgoing) {
          // A link's first socket refused: its others are never opened.
          PeerStriping& striping = striping_[static_cast<size_t>(h.peer)];
          if (striping.othersAfterAck) remaining_ -= kNumChannels * striping.nStreams - 1;
          striping.othersAfterAck = false;
        }
      }
    }
    for (size_t i = 0; i < nListeners; ++i) {
      if (fds[i].revents != 0) acceptAll(listeners_[i]);
    }
    std::erase_if(pending_, [](const std::unique_ptr<Handshake>& h) { return h->finished; });
    for (auto& h : spawned_) pending_.push_back(std::move(h));
    spawned_.clear();
  }
  for (const auto& h : pending_) {
    if (!h->outgoing && !h->finished) {
      CFX_INFO(log::Sys::Net, "tcp: rank %d closed an unauthenticated connection from %s at the end of setup",
               plan_.rank, h->sock.peerName().c_str());
    }
  }
  if (!refusal_.ok()) return std::move(refusal_);
  return std::move(established_);
}

}  // namespace

Result<std::vector<EstablishedSocket>> establishConnections(const ConnectPlan& plan,
                                                            std::vector<net::Listener>& listeners) {
  if (plan.secret == nullptr || plan.nStreams < 1 || plan.connect.size() != static_cast<size_t>(plan.nRanks) ||
      plan.listeners.size() != static_cast<size_t>(plan.nRanks) || listeners.empty()) {
    return Status::error(Errc::InternalError, "tcp: malformed connection plan");
  }
  Connector connector(plan, listeners);
  return connector.run();
}

}  // namespace cfx::transport::tcp
