// SPDX-License-Identifier: Apache-2.0
// Test support for the TcpTransport tests (transport layer): see tcp_test_util.h.
#include "tcp_test_util.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>

#include "common/crypto.h"

namespace cfx::transport::tcp::testing {
namespace {

using namespace std::chrono_literals;

uint64_t flowTag(int sender, int ch, int seq) {
  return (static_cast<uint64_t>(sender) << 40) | (static_cast<uint64_t>(ch) << 32) | static_cast<uint64_t>(seq);
}

Status noPointToPoint() {
  return Status::error(Errc::InternalError, "the fake bootstrap has no point-to-point messages");
}

}  // namespace

sockaddr_storage loopback() {
  sockaddr_storage a{};
  auto* in = reinterpret_cast<sockaddr_in*>(&a);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

Status FakeWorld::allGather(int rank, void* data, size_t bytesPerRank) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!round_) {
    round_ = std::make_shared<Round>();
    round_->data.resize(bytesPerRank * static_cast<size_t>(nRanks_));
  }
  std::shared_ptr<Round> round = round_;
  if (round->data.size() != bytesPerRank * static_cast<size_t>(nRanks_)) {
    return Status::error(Errc::InvalidUsage, "fake allGather: ranks disagree on the size");
  }
  const size_t offset = bytesPerRank * static_cast<size_t>(rank);
  std::memcpy(round->data.data() + offset, static_cast<uint8_t*>(data) + offset, bytesPerRank);
  if (++round->arrived == nRanks_) {
    if (hook_) {
      auto hook = std::move(hook_);
      hook_ = nullptr;
      hook(round->data.data(), bytesPerRank);
    }
    round->done = true;
    round_.reset();
    cv_.notify_all();
  } else if (!cv_.wait_for(lock, kSafety, [&] { return round->done; })) {
    return Status::error(Errc::Timeout, "fake allGather timed out");
  }
  std::memcpy(data, round->data.data(), round->data.size());
  return Status();
}

Status FakeBootstrap::barrier() {
  std::vector<uint8_t> bytes(static_cast<size_t>(nRanks()));
  return allGather(bytes.data(), 1);
}

Status FakeBootstrap::send(int, uint64_t, const void*, size_t) { return noPointToPoint(); }

Status FakeBootstrap::recv(int, uint64_t, void*, size_t) { return noPointToPoint(); }

TcpOptions testOptions(size_t slotBytes, int nSlots) {
  TcpOptions o;
  o.geometry = {.slotBytes = slotBytes, .nSlots = nSlots};
  o.connectTimeout = 20s;
  o.socketBufferBytes = 0;
  o.closeLinger = 200ms;
  o.bindAddress = loopback();
  return o;
}

TcpOptions stripedOptions(int nSocks, size_t slotBytes, int nSlots, int nThreads) {
  TcpOptions o = testOptions(slotBytes, nSlots);
  o.nSocks = nSocks;
  o.nThreads = nThreads;
  o.minStripeBytes = 4096;  // so that slots of a few KiB already spread over several sockets
  return o;
}

std::vector<PeerInfo> peerInfos(int nRanks) {
  std::vector<PeerInfo> peers(static_cast<size_t>(nRanks));
  for (int r = 0; r < nRanks; ++r) {
    peers[static_cast<size_t>(r)].rank = r;
    peers[static_cast<size_t>(r)].pid = getpid();
    std::snprintf(peers[static_cast<size_t>(r)].hostName, sizeof(peers[0].hostName), "host%d", r);
  }
  return peers;
}

void runRanks(int nRanks, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < nRanks; ++r) threads.emplace_back(body, r);
  for (auto& t : threads) t.join();
}

std::vector<std::unique_ptr<Rank>> createRanks(FakeWorld& world, const std::function<TcpOptions(int)>& options,
                                               const ConnectFn& connected, std::vector<PeerInfo> peers) {
  const int n = world.nRanks();
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(std::make_unique<Rank>(world, r));
  if (peers.empty()) peers = peerInfos(n);
  runRanks(n, [&](int r) {
    Rank& me = *ranks[static_cast<size_t>(r)];
    std::vector<bool> mask(static_cast<size_t>(n));
    for (int p = 0; p < n; ++p) mask[static_cast<size_t>(p)] = connected(r, p);
    Result<std::unique_ptr<TcpTransport>> t =
        TcpTransport::create(me.bootstrap, peers, mask, me.doorbell, options(r), me.ends);
    if (t.ok()) {
      me.transport = std::move(t).value();
    } else {
      me.status = t.status();
    }
  });
  return ranks;
}

std::vector<std::unique_ptr<Rank>> createConnected(FakeWorld& world, const TcpOptions& options,
                                                   const ConnectFn& connected) {
  auto ranks = createRanks(
      world, [&](int) { return options; }, connected);
  for (auto& r : ranks) EXPECT_TRUE(r->status.ok()) << "rank " << r->rank << ": " << r->status.message();
  return ranks;
}

Status sendFrame(SendEnd& end, Doorbell& bell, size_t bytes, uint64_t tag) {
  void* slot = nullptr;
  CFX_TRY(waitUntil(
      bell, [&] { return (slot = end.tryAcquire()) != nullptr; }, [&] { return end.check(); }));
  auto* p = static_cast<uint8_t*>(slot);
  for (size_t i = 0; i < bytes; ++i) p[i] = patternByte(tag, i);
  end.post(bytes, tag);
  return Status();
}

Result<uint64_t> recvFrame(RecvEnd& end, Doorbell& bell, size_t* bytesOut) {
  const void* slot = nullptr;
  size_t bytes = 0;
  uint64_t tag = 0;
  CFX_TRY(waitUntil(
      bell, [&] { return (slot = end.tryPeek(&bytes, &tag)) != nullptr; }, [&] { return end.check(); }));
  const auto* p = static_cast<const uint8_t*>(slot);
  for (size_t i = 0; i < bytes; ++i) {
    if (p[i] != patternByte(tag, i)) {
      end.release();
      return Status::error(Errc::InternalError, strprintf("payload of tag %llu differs at byte %zu",
                                                          static_cast<unsigned long long>(tag), i));
    }
  }
  end.release();
  if (bytesOut != nullptr) *bytesOut = bytes;
  return tag;
}

Status exchangeAll(Rank& me, int nRanks, int frames, const ConnectFn& connected) {
  struct Flow {
    SendEnd* send;
    RecvEnd* recv;
    int peer;
    int ch;
    int sent = 0;
    int received = 0;
  };
  std::vector<Flow> flows;
  for (int p = 0; p < nRanks; ++p) {
    if (!connected(me.rank, p)) continue;
    for (int ch = 0; ch < kNumChannels; ++ch) flows.push_back(Flow{me.send(ch, p), me.recv(ch, p), p, ch});
  }
  const Deadline deadline(std::chrono::duration_cast<std::chrono::milliseconds>(kSafety));
  for (;;) {
    const uint32_t seq = me.doorbell.read();
    bool progressed = false;
    bool done = true;
    for (Flow& f : flows) {
      if (f.sent < frames) {
        done = false;
        if (void* slot = f.send->tryAcquire()) {
          const uint64_t tag = flowTag(me.rank, f.ch, f.sent);
          const size_t bytes =
              (static_cast<size_t>(f.sent) * 97 + static_cast<size_t>(me.rank)) % (f.send->slotBytes() + 1);
          for (size_t i = 0; i < bytes; ++i) static_cast<uint8_t*>(slot)[i] = patternByte(tag, i);
          f.send->post(bytes, tag);
          ++f.sent;
          progressed = true;
        }
      }
      if (f.received < frames) {
        done = false;
        size_t bytes = 0;
        uint64_t tag = 0;
        if (const void* slot = f.recv->tryPeek(&bytes, &tag)) {
          const uint64_t want = flowTag(f.peer, f.ch, f.received);
          if (tag != want) {
            return Status::error(
                Errc::InternalError,
                strprintf("rank %d from %d ch %d: tag %llx, expected %llx", me.rank, f.peer, f.ch,
                          static_cast<unsigned long long>(tag), static_cast<unsigned long long>(want)));
          }
          for (size_t i = 0; i < bytes; ++i) {
            if (static_cast<const uint8_t*>(slot)[i] != patternByte(tag, i)) {
              return Status::error(Errc::InternalError, "payload corrupted");
            }
          }
          f.recv->release();
          ++f.received;
          progressed = true;
        }
      }
    }
    if (done) return Status();
    if (progressed) continue;
    for (Flow& f : flows) {
      CFX_TRY(f.send->check());
      CFX_TRY(f.recv->check());
    }
    if (deadline.expired()) return Status::error(Errc::Timeout, "test safety deadline passed");
    me.doorbell.wait(seq, 100ms);
  }
}

int fillUntilBlocked(SendEnd& end, Doorbell& bell, size_t bytes, uint8_t fill) {
  int posted = 0;
  for (int idle = 0; idle < 10;) {
    const uint32_t seq = bell.read();
    if (void* slot = end.tryAcquire()) {
      std::memset(slot, fill, bytes);
      end.post(bytes, static_cast<uint64_t>(posted++));
      idle = 0;
    } else {
      bell.wait(seq, 20ms);
      ++idle;
    }
  }
  return posted;
}

Status peerClosesUnderBlockedSender(Rank& sender, Rank& peer, size_t bytes, uint8_t fill, bool* rung) {
  SendEnd& end = *sender.send(kCollChannel, peer.rank);
  fillUntilBlocked(end, sender.doorbell, bytes, fill);
  FailureWatch watch(sender.doorbell, [&] { return end.check(); });
  const uint32_t before = sender.doorbell.read();
  peer.transport.reset();
  const Status seen = watch.join();
  if (rung != nullptr) *rung = sender.doorbell.read() != before;
  return seen;
}

FailureWatch::FailureWatch(Doorbell& bell, std::function<Status()> check) : bell_(bell), check_(std::move(check)) {
  thread_ = std::thread([this] { run(); });
  while (!waiting_.load()) std::this_thread::sleep_for(1ms);
}

FailureWatch::~FailureWatch() {
  if (thread_.joinable()) thread_.join();
}

Status FailureWatch::join() {
  thread_.join();
  return seen_;
}

void FailureWatch::run() {
  const Deadline deadline(std::chrono::duration_cast<std::chrono::milliseconds>(kSafety));
  for (;;) {
    const uint32_t seq = bell_.read();
    seen_ = check_();
    if (!seen_.ok() || deadline.expired()) {
      waiting_.store(true);
      return;
    }
    waiting_.store(true);
    bell_.wait(seq, std::chrono::duration_cast<std::chrono::microseconds>(kSafety));
  }
}

std::vector<ListenRecord> RawPeer::exchangeAddresses() {
  Result<net::Listener> l = net::Listener::listen(loopback());
  EXPECT_TRUE(l.ok());
  listener_ = std::move(l).value();
  std::vector<ListenRecord> records(static_cast<size_t>(bootstrap_.nRanks()));
  records[static_cast<size_t>(bootstrap_.rank())].address = listener_.address();
  EXPECT_TRUE(bootstrap_.allGather(records.data(), sizeof(ListenRecord)).ok());
  return records;
}

void RawPeer::agreeOnPaths() {
  constexpr size_t kRecordBytes = 24;
  std::vector<uint8_t> records(kRecordBytes * static_cast<size_t>(bootstrap_.nRanks()), 0);
  EXPECT_TRUE(bootstrap_.allGather(records.data(), kRecordBytes).ok());
}

Result<net::Socket> RawPeer::connect(const ListenRecord& to, int toRank, int channel, const FifoGeometry& geometry,
                                     int stream, int nStreams, uint32_t minStripe) {
  const Deadline deadline(10000ms);
  CFX_TRY_ASSIGN(net::Socket s, net::Socket::connect(to.address, {}, deadline, nullptr));
  Hello hello;
  hello.fromRank = static_cast<uint32_t>(bootstrap_.rank());
  hello.toRank = static_cast<uint32_t>(toRank);
  hello.nRanks = static_cast<uint32_t>(bootstrap_.nRanks());
  hello.channel = static_cast<uint32_t>(channel);
  hello.nSlots = static_cast<uint32_t>(geometry.nSlots);
  hello.slotBytes = geometry.slotBytes;
  hello.stream = static_cast<uint32_t>(stream);
  hello.nStreams = static_cast<uint32_t>(nStreams);
  hello.minStripeBytes = minStripe;
  hello.session = to.session;
  CFX_TRY(crypto::randomBytes(hello.nonce));
  const auto helloBytes = encodeHello(hello);
  CFX_TRY(s.sendAll(helloBytes.data(), helloBytes.size(), deadline, nullptr));
  std::array<uint8_t, kChallengeBytes> challengeBytes{};
  CFX_TRY(s.recvAll(challengeBytes.data(), challengeBytes.size(), deadline, nullptr));
  CFX_TRY_ASSIGN(const Challenge challenge, decodeChallenge(challengeBytes));
  CFX_TRY_ASSIGN(const Mac proof,
                 clientMac(bootstrap_.secret(), helloBytes.data(), challenge.nonce, challenge.protection));
  CFX_TRY(s.sendAll(proof.data(), proof.size(), deadline, nullptr));
  std::array<uint8_t, kAckBytes> ack{};
  CFX_TRY(s.recvAll(ack.data(), ack.size(), deadline, nullptr));
  CFX_TRY_ASSIGN(const AckCode code, decodeAck(ack.data()));
  if (code != AckCode::Ok) return Status::error(Errc::RemoteError, ackCodeName(code));
  return s;
}

void connectRawLink(FakeWorld& world, const TcpOptions& options, int nStreams, RawLink& link) {
  link.real = std::make_unique<Rank>(world, 1);
  Rank& real = *link.real;
  std::thread creator([&] {
    Result<std::unique_ptr<TcpTransport>> t =
        TcpTransport::create(real.bootstrap, peerInfos(2), {true, false}, real.doorbell, options, real.ends);
    if (t.ok()) {
      real.transport = std::move(t).value();
    } else {
      real.status = t.status();
    }
  });
  link.raw = std::make_unique<RawPeer>(world, 0);
  const std::vector<ListenRecord> records = link.raw->exchangeAddresses();
  for (int ch = 0; ch < kNumChannels; ++ch) {
    for (int stream = 0; stream < nStreams; ++stream) {
      Result<net::Socket> s =
          link.raw->connect(records[1], 1, ch, options.geometry, stream, nStreams, options.minStripeBytes);
      ASSERT_TRUE(s.ok()) << s.status().message();
      link.sockets.push_back(std::move(s).value());
    }
  }
  link.raw->agreeOnPaths();
  creator.join();
  ASSERT_TRUE(real.status.ok()) << real.status.message();
}

}  // namespace cfx::transport::tcp::testing
