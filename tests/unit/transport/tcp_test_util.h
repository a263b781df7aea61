// SPDX-License-Identifier: Apache-2.0
// Test support for the TcpTransport tests (transport layer): ranks as threads of this process over loopback, an
// in-process fake bootstrap, and a peer that speaks the wire protocol by hand. Every wait sleeps on the rank's
// doorbell the way the executor does (read, re-check, wait); kSafety only turns a hang into a failure.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/doorbell.h"
#include "common/socket.h"
#include "common/status.h"
#include "transport/tcp/tcp_handshake.h"
#include "transport/tcp/tcp_transport.h"

namespace cfx::transport::tcp::testing {

inline constexpr std::chrono::seconds kSafety{60};  // a hang guard, not a performance expectation

sockaddr_storage loopback();

// The collective part of a bootstrap for ranks that are threads of this process.
class FakeWorld {
 public:
  explicit FakeWorld(int nRanks) : nRanks_(nRanks), secrets_(static_cast<size_t>(nRanks)) {
    for (auto& s : secrets_) s.fill(0x5a);
  }
  int nRanks() const { return nRanks_; }
  const Secret& secretOf(int rank) const { return secrets_[static_cast<size_t>(rank)]; }
  void setSecret(int rank, const Secret& s) { secrets_[static_cast<size_t>(rank)] = s; }
  // Runs once, in the next allGather, after every rank contributed and before any returns: the moment between
  // the address exchange and the connection setup.
  void onNextGather(std::function<void(const uint8_t* data, size_t bytesPerRank)> hook) { hook_ = std::move(hook); }

  Status allGather(int rank, void* data, size_t bytesPerRank);

 private:
  struct Round {
    std::vector<uint8_t> data;
    int arrived = 0;
    bool done = false;
  };
  const int nRanks_;
  std::vector<Secret> secrets_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::shared_ptr<Round> round_;
  std::function<void(const uint8_t*, size_t)> hook_;
};

class FakeBootstrap final : public Bootstrap {
 public:
  FakeBootstrap(FakeWorld& world, int rank) : world_(world), rank_(rank), address_(loopback()) {}
  int rank() const override { return rank_; }
  int nRanks() const override { return world_.nRanks(); }
  const Secret& secret() const override { return world_.secretOf(rank_); }
  bool authenticated() const override { return true; }
  const sockaddr_storage& localAddress() const override { return address_; }
  Status allGather(void* data, size_t bytesPerRank) override { return world_.allGather(rank_, data, bytesPerRank); }
  Status barrier() override;
  Status send(int peer, uint64_t tag, const void* data, size_t bytes) override;
  Status recv(int peer, uint64_t tag, void* data, size_t bytes) override;
  // No peer of this world hangs: `alive` is never needed.
  Status recv(int peer, uint64_t tag, void* data, size_t bytes, const std::function<Status()>&) override {
    return recv(peer, tag, data, bytes);
  }
  void setPeerWatch(std::function<Status(int)>) override {}  // no peer of this world fails
  void abort() override {}

 private:
  FakeWorld& world_;
  const int rank_;
  const sockaddr_storage address_;
};

struct Rank {
  Rank(FakeWorld& world, int r) : bootstrap(world, r), rank(r) {}
  FakeBootstrap bootstrap;
  int rank;
  Doorbell doorbell;
  Endpoints ends;
  std::unique_ptr<TcpTransport> transport;
  Status status;  // of create()
  SendEnd* send(int ch, int peer) { return ends.send[static_cast<size_t>(ch)][static_cast<size_t>(peer)].get(); }
  RecvEnd* recv(int ch, int peer) { return ends.recv[static_cast<size_t>(ch)][static_cast<size_t>(peer)].get(); }
};

using ConnectFn = std::function<bool(int, int)>;
inline bool everyone(int a, int b) { return a != b; }

TcpOptions testOptions(size_t slotBytes = 4096, int nSlots = 4);
// nSocks sockets per link, with stripes short enough that slots of a few KiB already spread over several of them.
TcpOptions stripedOptions(int nSocks, size_t slotBytes = 16384, int nSlots = 4, int nThreads = 1);
std::vector<PeerInfo> peerInfos(int nRanks);
void runRanks(int nRanks, const std::function<void(int)>& body);

// create() on every rank at once, as it is collective. Statuses are left in Rank::status.
// `peers`: what the ranks know of each other (default peerInfos(): every rank on one host).
std::vector<std::unique_ptr<Rank>> createRanks(FakeWorld& world, const std::function<TcpOptions(int)>& options,
                                               const ConnectFn& connected = everyone, std::vector<PeerInfo> peers = {});
// createRanks() with the same options everywhere, expecting every rank to succeed.
std::vector<std::unique_ptr<Rank>> createConnected(FakeWorld& world, const TcpOptions& options,
                                                   const ConnectFn& connected = everyone);

// Event-count wait: read the doorbell, re-check, sleep. Gives up with the end's error, or at kSafety.
template <typename Ready>
Status waitUntil(Doorbell& bell, Ready ready, const std::function<Status()>& check) {
  const Deadline deadline(std::chrono::duration_cast<std::chrono::milliseconds>(kSafety));
  for (;;) {
    const uint32_t seq = bell.read();
    if (ready()) return Status();
    CFX_TRY(check());
    if (deadline.expired()) return Status::error(Errc::Timeout, "test safety deadline passed");
    bell.wait(seq, std::chrono::milliseconds(100));
  }
}

inline uint8_t patternByte(uint64_t tag, size_t i) { return static_cast<uint8_t>((tag * 131) ^ (i * 7) ^ (i >> 9)); }

Status sendFrame(SendEnd& end, Doorbell& bell, size_t bytes, uint64_t tag);
// Receives one frame and checks that its payload is patternByte(tag, i). Returns the tag.
Result<uint64_t> recvFrame(RecvEnd& end, Doorbell& bell, size_t* bytesOut = nullptr);

// Every rank sends `frames` frames to every connected peer on both channels and receives as many, driving all
// flows from one thread like the executor does: try everything, sleep on the doorbell when nothing moved.
Status exchangeAll(Rank& me, int nRanks, int frames, const ConnectFn& connected);

// Posts `bytes`-byte slots filled with `fill` until ten waits in a row find no free slot: the FIFO and the socket
// buffers are then full, as the peer does not read. Returns how many slots were posted.
int fillUntilBlocked(SendEnd& end, Doorbell& bell, size_t bytes, uint8_t fill);

// `sender` fills its collective-channel FIFO to `peer` (fillUntilBlocked()), then `peer`'s transport is destroyed
// while a FailureWatch sleeps on the sender's doorbell. Returns the error the sender's end reported; *rung (when
// given) says whether its doorbell rang in the meantime.
Status peerClosesUnderBlockedSender(Rank& sender, Rank& peer, size_t bytes, uint8_t fill, bool* rung = nullptr);

// A thread that sleeps on a doorbell until check() fails. Its waits are long, so only a ring ends them in time:
// a failure that is recorded but not rung leaves it asleep until kSafety.
class FailureWatch {
 public:
  FailureWatch(Doorbell& bell, std::function<Status()> check);
  ~FailureWatch();
  // The error check() returned (Ok if kSafety passed first).
  Status join();

 private:
  void run();

  Doorbell& bell_;
  std::function<Status()> check_;
  std::atomic<bool> waiting_{false};
  Status seen_;
  std::thread thread_;
};

// A peer speaking the wire protocol by hand: a rank of the fake world that is not a TcpTransport.
class RawPeer {
 public:
  RawPeer(FakeWorld& world, int rank) : bootstrap_(world, rank) {}

  // Takes part in the address exchange with a listener that never answers.
  std::vector<ListenRecord> exchangeAddresses();
  // The allGather create() runs once connected, where ranks agree on slots for long paths and on the longest round
  // trip (tcp_transport.cc, agreeOnPaths): 24 bytes per rank {BDP as a double, FIFO cap, RTT as a double}; a zero
  // cap keeps the configured slots.
  void agreeOnPaths();
  // Connects and authenticates like a lower rank. Returns the socket, ready for frames.
  Result<net::Socket> connect(const ListenRecord& to, int toRank, int channel, const FifoGeometry& geometry,
                              int stream = 0, int nStreams = 1, uint32_t minStripe = kDefaultMinStripeBytes);

 private:
  FakeBootstrap bootstrap_;
  net::Listener listener_;
};

// Rank 1 of a two-rank world as a real TcpTransport whose only peer, rank 0, is a RawPeer.
struct RawLink {
  std::unique_ptr<Rank> real;
  std::unique_ptr<RawPeer> raw;
  std::vector<net::Socket> sockets;  // the RawPeer's, by channel * nStreams + stream
};
// Sets `link` up with nStreams authenticated sockets per channel, ready for stripes; a fatal failure if it cannot
// (call it under ASSERT_NO_FATAL_FAILURE).
void connectRawLink(FakeWorld& world, const TcpOptions& options, int nStreams, RawLink& link);

}  // namespace cfx::transport::tcp::testing
