// SPDX-License-Identifier: Apache-2.0
// Frame protection on the TCP transport (CFX_WIRE_PROTECTION, transport layer): protected links carry every byte
// intact on one socket and striped over several, owner-driven or through the proxy; the stricter end's setting
// wins; and an on-path relay that flips a bit or replays a stripe fails the link, naming the peer, where an
// unprotected link delivers the forged bytes. Fixtures are in tcp_test_util.h and tamper_relay.h.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tamper_relay.h"
#include "tcp_test_util.h"

namespace cfx::transport::tcp::testing {
namespace {

using transport::testing::flipByteAt;
using transport::testing::TamperRelay;

// Ranks that are different hosts to each other, as the protection's auto setting distinguishes them.
std::vector<PeerInfo> separateHosts(int n) {
  std::vector<PeerInfo> peers = peerInfos(n);
  for (int r = 0; r < n; ++r) peers[static_cast<size_t>(r)].hostHash = 0x1000 + static_cast<uint64_t>(r);
  return peers;
}

struct Case {
  WireProtection protection;
  int nSocks;
  bool inlineIo;
};

// Readable test names and values: gtest's default prints Case's bytes, padding included (not the same twice).
std::string describe(const Case& c) {
  static constexpr const char* kLevel[] = {"auto", "off", "integrity", "encryption"};
  return std::string(kLevel[static_cast<int>(c.protection)]) + "_" + std::to_string(c.nSocks) + "socks_" +
         (c.inlineIo ? "inline" : "proxied");
}
void PrintTo(const Case& c, std::ostream* os) { *os << describe(c); }
std::string caseName(const ::testing::TestParamInfo<Case>& info) { return describe(info.param); }

class TcpProtected : public ::testing::TestWithParam<Case> {};

TEST_P(TcpProtected, EveryPairExchangesEveryByteInOrder) {
  const Case c = GetParam();
  const int n = 3;
  FakeWorld world(n);
  TcpOptions options = c.nSocks > 1 ? stripedOptions(c.nSocks) : testOptions(1024, 3);
  options.protection = c.protection;
  options.inlineIo = c.inlineIo;
  auto ranks = createRanks(world, [&](int) { return options; }, everyone, separateHosts(n));
  for (auto& r : ranks) ASSERT_TRUE(r->transport) << r->status.message();
  runRanks(n, [&](int r) {
    const Status st = exchangeAll(*ranks[static_cast<size_t>(r)], n, 200, everyone);
    EXPECT_TRUE(st.ok()) << "rank " << r << ": " << st.message();
  });
}

INSTANTIATE_TEST_SUITE_P(Levels, TcpProtected,
                         ::testing::Values(Case{WireProtection::Auto, 1, true},
                                           Case{WireProtection::Integrity, 1, true},
                                           Case{WireProtection::Integrity, 1, false},
                                           Case{WireProtection::Integrity, 3, true},
                                           Case{WireProtection::Encryption, 1, true},
                                           Case{WireProtection::Encryption, 3, false}),
                         caseName);

TEST(TcpProtection, TheStricterEndDecidesAndMixedSettingsInteroperate) {
  FakeWorld world(2);
  auto ranks = createRanks(
      world,
      [](int r) {
        TcpOptions o = testOptions();
        o.protection = r == 0 ? WireProtection::Off : WireProtection::Encryption;
        return o;
      },
      everyone, peerInfos(2));
  for (auto& r : ranks) ASSERT_TRUE(r->transport) << r->status.message();
  runRanks(2, [&](int r) { EXPECT_TRUE(exchangeAll(*ranks[static_cast<size_t>(r)], 2, 50, everyone).ok()); });
}

// Rank 0 connects to rank 1 (the lower rank connects) through a relay: the address exchange is rewritten so that
// rank 1's listener is the relay's, as an attacker who rewrote the bootstrap's table would have it. On the way to
// rank 1 the relay edits the stream after `skip` bytes (the handshake: Hello and Proof).
constexpr uint64_t kHandshakeToServer = kHelloBytes + kProofBytes;

struct RelayedPair {
  std::unique_ptr<FakeWorld> world;  // declared first: it outlives the ranks' bootstraps
  std::vector<std::unique_ptr<Rank>> ranks;
  std::unique_ptr<TamperRelay> relay;
};

RelayedPair relayedPair(WireProtection protection, TamperRelay::Edit edit) {
  RelayedPair p;
  p.world = std::make_unique<FakeWorld>(2);
  FakeWorld* world = p.world.get();
  world->onNextGather([&p, edit](const uint8_t* data, size_t bytesPerRank) {
    auto* record = reinterpret_cast<ListenRecord*>(const_cast<uint8_t*>(data) + bytesPerRank);
    p.relay = std::make_unique<TamperRelay>(record->address, edit);
    record->address = p.relay->address();
  });
  TcpOptions options = testOptions(4096, 4);
  options.protection = protection;
  options.inlineIo = false;
  p.ranks = createRanks(*world, [&](int) { return options; }, everyone, separateHosts(2));
  return p;
}

// Sends one 1000-byte frame from rank 0 to rank 1 on every channel; the status rank 1 saw.
Status sendThroughRelay(RelayedPair& p) {
  for (auto& r : p.ranks) CFX_TRY(r->status);
  Rank& sender = *p.ranks[0];
  Rank& receiver = *p.ranks[1];
  for (int ch = 0; ch < kNumChannels; ++ch) CFX_TRY(sendFrame(*sender.send(ch, 1), sender.doorbell, 1000, 7 + ch));
  for (int ch = 0; ch < kNumChannels; ++ch) CFX_TRY(recvFrame(*receiver.recv(ch, 0), receiver.doorbell).status());
  return Status();
}

TEST(TcpTamper, ABitFlippedOnTheWayFailsTheLinkNamingThePeer) {
  for (const WireProtection level : {WireProtection::Integrity, WireProtection::Encryption}) {
    SCOPED_TRACE(static_cast<int>(level));
    // Byte 60 of the first stripe frame: past its 48-byte header and tag, inside the payload.
    RelayedPair p = relayedPair(level, flipByteAt(TamperRelay::ToServer, kHandshakeToServer + 60));
    const Status st = sendThroughRelay(p);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), Errc::RemoteError) << st.message();
    EXPECT_NE(st.message().find("fails authentication"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("peer rank 0"), std::string::npos) << st.message();
  }
}

TEST(TcpTamper, AFlippedHeaderBitFailsTheLinkEvenWhereTheHeaderStillParses) {
  // The stripe's tag (byte 8 of the header, low byte of the slot's 64-bit tag): the header decodes as before, only
  // the GCM tag notices.
  RelayedPair p = relayedPair(WireProtection::Integrity, flipByteAt(TamperRelay::ToServer, kHandshakeToServer + 8));
  const Status st = sendThroughRelay(p);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("fails authentication"), std::string::npos) << st.message();
}

TEST(TcpTamper, AReplayedStripeFailsTheLink) {
  // The relay sends the first stripe frame (48-byte header and tag, 1000 bytes) a second time right after it, its
  // slot number (the header's first 8 bytes) moved on to 1 so that the stripe bookkeeping would take it as the next
  // slot: only the frame's tag, bound to its frame number and header, refuses it.
  constexpr uint64_t kFrame = kMaxStripeFrameHeaderBytes + 1000;
  auto copy = std::make_shared<std::vector<uint8_t>>();
  RelayedPair p = relayedPair(WireProtection::Integrity, [copy](int, TamperRelay::Direction dir, uint64_t offset,
                                                                std::vector<uint8_t>& chunk) {
    if (dir != TamperRelay::ToServer) return;
    const uint64_t begin = kHandshakeToServer;
    const uint64_t end = begin + kFrame;
    for (uint64_t i = std::max(offset, begin); i < std::min(offset + chunk.size(), end); ++i) {
      copy->push_back(chunk[i - offset]);
    }
    if (offset < end && offset + chunk.size() >= end && copy->size() == kFrame) {
      (*copy)[0] = 1;
      chunk.insert(chunk.begin() + static_cast<std::ptrdiff_t>(end - offset), copy->begin(), copy->end());
    }
  });
  Rank& sender = *p.ranks[0];
  Rank& receiver = *p.ranks[1];
  for (auto& r : p.ranks) ASSERT_TRUE(r->status.ok()) << r->status.message();
  ASSERT_TRUE(sendFrame(*sender.send(kCollChannel, 1), sender.doorbell, 1000, 1).ok());
  // The genuine frame arrives; its replay, taking the place of frame 1, fails before anything of it is published.
  Result<uint64_t> first = recvFrame(*receiver.recv(kCollChannel, 0), receiver.doorbell);
  ASSERT_TRUE(first.ok()) << first.status().message();
  Result<uint64_t> second = recvFrame(*receiver.recv(kCollChannel, 0), receiver.doorbell);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("fails authentication"), std::string::npos) << second.status().message();
}

TEST(TcpTamper, WithoutProtectionTheSameFlipArrivesUnnoticed) {
  // What the protection is for: with it off, the relay's edit reaches the application as data. The frame header
  // is 32 bytes then, so byte 60 is the payload's byte 28.
  RelayedPair p = relayedPair(WireProtection::Off, flipByteAt(TamperRelay::ToServer, kHandshakeToServer + 60));
  for (auto& r : p.ranks) ASSERT_TRUE(r->status.ok()) << r->status.message();
  Rank& sender = *p.ranks[0];
  Rank& receiver = *p.ranks[1];
  ASSERT_TRUE(sendFrame(*sender.send(kCollChannel, 1), sender.doorbell, 1000, 5).ok());
  Result<uint64_t> got = recvFrame(*receiver.recv(kCollChannel, 0), receiver.doorbell);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("differs at byte 28"), std::string::npos) << got.status().message();
}

}  // namespace
}  // namespace cfx::transport::tcp::testing
