// SPDX-License-Identifier: Apache-2.0
// TcpTransport setup (transport layer): create() checks its arguments and knobs, authenticates every connection
// with the bootstrap's secret, ignores strangers on the data port, and names the rank it could not agree with or
// reach. Fixtures are in tcp_test_util.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/param.h"
#include "tcp_test_util.h"
#include "transport/tcp/tcp_handshake.h"

namespace cfx::transport::tcp::testing {
namespace {

using namespace std::chrono_literals;

TEST(TcpTransport, StrangersOnTheDataPortDoNotDisturbLegitimateRanks) {
  constexpr int kRanks = 3;
  FakeWorld world(kRanks);
  std::vector<net::Socket> strangers;
  world.onNextGather([&](const uint8_t* data, size_t bytesPerRank) {
    ASSERT_EQ(bytesPerRank, sizeof(ListenRecord));
    for (int r = 0; r < kRanks; ++r) {
      ListenRecord rec;
      std::memcpy(&rec, data + bytesPerRank * static_cast<size_t>(r), sizeof(rec));
      const Deadline deadline(5000ms);
      auto connect = [&] {
        Result<net::Socket> s = net::Socket::connect(rec.address, {}, deadline, nullptr);
        EXPECT_TRUE(s.ok()) << s.status().message();
        return std::move(s).value();
      };
      // Garbage, then silence with the socket held open.
      net::Socket garbage = connect();
      std::vector<uint8_t> junk(300);
      for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<uint8_t>(i * 29 + 3);
      EXPECT_TRUE(garbage.sendAll(junk.data(), junk.size(), deadline, nullptr).ok());
      strangers.push_back(std::move(garbage));
      // Connects and says nothing at all.
      strangers.push_back(connect());
      // Connects and hangs up at once.
      connect().close();
      // A well-formed hello claiming to be rank 0 on channel 0, followed by a proof made without the secret.
      net::Socket impostor = connect();
      Hello hello;
      hello.fromRank = 0;
      hello.toRank = static_cast<uint32_t>(r);
      hello.nRanks = kRanks;
      hello.nSlots = 4;
      hello.slotBytes = 4096;
      hello.session = rec.session;
      const auto helloBytes = encodeHello(hello);
      const std::array<uint8_t, kProofBytes> forged{};
      EXPECT_TRUE(impostor.sendAll(helloBytes.data(), helloBytes.size(), deadline, nullptr).ok());
      EXPECT_TRUE(impostor.sendAll(forged.data(), forged.size(), deadline, nullptr).ok());
      strangers.push_back(std::move(impostor));
    }
  });
  auto ranks = createConnected(world, testOptions());
  for (auto& r : ranks) ASSERT_TRUE(r->transport);
  runRanks(kRanks, [&](int r) {
    const Status st = exchangeAll(*ranks[static_cast<size_t>(r)], kRanks, 100, everyone);
    EXPECT_TRUE(st.ok()) << "rank " << r << ": " << st.message();
  });
  EXPECT_EQ(strangers.size(), static_cast<size_t>(3 * kRanks));
}

TEST(TcpTransport, MismatchedSlotGeometryFailsSetupOnBothRanks) {
  FakeWorld world(2);
  auto ranks = createRanks(world, [](int r) { return testOptions(r == 0 ? 4096 : 8192, 4); });
  for (auto& r : ranks) {
    EXPECT_EQ(r->status.code(), Errc::InvalidUsage) << "rank " << r->rank << ": " << r->status.message();
    EXPECT_NE(r->status.message().find("CFX_TCP_SLOT_BYTES"), std::string::npos) << r->status.message();
    EXPECT_FALSE(r->transport);
    EXPECT_TRUE(r->ends.send.empty()) << "a failed create() leaves the endpoints untouched";
  }
}

TEST(TcpTransport, RanksWithDifferentSecretsRefuseEachOther) {
  FakeWorld world(2);
  Secret other;
  other.fill(0x77);
  world.setSecret(1, other);
  auto ranks = createRanks(world, [](int) {
    TcpOptions o = testOptions();
    o.connectTimeout = 1500ms;
    return o;
  });
  // Rank 0 connects and rejects rank 1's proof; rank 1 drops rank 0 as a stranger and times out waiting.
  EXPECT_EQ(ranks[0]->status.code(), Errc::RemoteError) << ranks[0]->status.message();
  EXPECT_NE(ranks[0]->status.message().find("secret"), std::string::npos) << ranks[0]->status.message();
  EXPECT_EQ(ranks[1]->status.code(), Errc::Timeout) << ranks[1]->status.message();
  EXPECT_NE(ranks[1]->status.message().find("rank 0"), std::string::npos) << ranks[1]->status.message();
}

TEST(TcpTransport, SetupTimesOutNamingTheRankThatNeverAnswers) {
  FakeWorld world(2);
  TcpOptions options = testOptions();
  options.connectTimeout = 500ms;
  Rank real(world, 0);
  std::thread creator([&] {
    Result<std::unique_ptr<TcpTransport>> t =
        TcpTransport::create(real.bootstrap, peerInfos(2), {false, true}, real.doorbell, options, real.ends);
    real.status = t.ok() ? Status() : t.status();
  });
  RawPeer silent(world, 1);  // listens, but never accepts or answers
  (void)silent.exchangeAddresses();
  creator.join();
  EXPECT_EQ(real.status.code(), Errc::Timeout) << real.status.message();
  EXPECT_NE(real.status.message().find("rank 1"), std::string::npos) << real.status.message();
  EXPECT_NE(real.status.message().find("waiting for its challenge"), std::string::npos) << real.status.message();
}

TEST(TcpTransport, RejectsInvalidArgumentsBeforeTouchingTheNetwork) {
  FakeWorld world(1);
  Rank me(world, 0);
  TcpOptions badGeometry = testOptions(100, 4);  // not a multiple of 64
  Result<std::unique_ptr<TcpTransport>> t =
      TcpTransport::create(me.bootstrap, peerInfos(1), {false}, me.doorbell, badGeometry, me.ends);
  EXPECT_EQ(t.status().code(), Errc::InvalidArgument);
  Result<std::unique_ptr<TcpTransport>> mask =
      TcpTransport::create(me.bootstrap, peerInfos(1), {false, true}, me.doorbell, testOptions(), me.ends);
  EXPECT_EQ(mask.status().code(), Errc::InvalidArgument);
  for (auto [nSocks, nThreads, minStripe] : {std::tuple{0, 1, 4096u}, std::tuple{65, 1, 4096u}, std::tuple{2, 0, 4096u},
                                             std::tuple{2, 17, 4096u}, std::tuple{2, 1, 1024u}}) {
    TcpOptions bad = stripedOptions(nSocks, 16384, 4, nThreads);
    bad.minStripeBytes = minStripe;
    Result<std::unique_ptr<TcpTransport>> striping =
        TcpTransport::create(me.bootstrap, peerInfos(1), {false}, me.doorbell, bad, me.ends);
    EXPECT_EQ(striping.status().code(), Errc::InvalidArgument) << nSocks << " " << nThreads << " " << minStripe;
  }
}

TEST(TcpTransport, SingleRankWithNoPeersCreatesAndDestroys) {
  FakeWorld world(1);
  Rank me(world, 0);
  Result<std::unique_ptr<TcpTransport>> t =
      TcpTransport::create(me.bootstrap, peerInfos(1), {false}, me.doorbell, testOptions(), me.ends);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t.value()->nPeers(), 0);
}

// The longest round trip is agreed (an automatic CFX_HOST_LANES is resolved from it, so every rank must see the
// same number) and measured: a rank connected to no one still learns it from the others.
TEST(TcpTransport, EveryRankAgreesOnTheLongestRoundTrip) {
  constexpr int kRanks = 3;
  FakeWorld world(kRanks);
  auto ranks = createConnected(world, testOptions(), [](int a, int b) { return a != b && a != 2 && b != 2; });
  for (auto& r : ranks) ASSERT_TRUE(r->transport) << "rank " << r->rank << ": " << r->status.message();
  const double rtt = ranks[0]->transport->pathRttSeconds();
  EXPECT_GT(rtt, 0.0);
  EXPECT_LT(rtt, 1.0) << "a loopback round trip";
  for (auto& r : ranks) EXPECT_EQ(r->transport->pathRttSeconds(), rtt) << "rank " << r->rank;
  EXPECT_EQ(ranks[2]->transport->nPeers(), 0);
}

TEST(TcpTransport, EveryKnobHasHelpTextAndAValidDefault) {
  const std::vector<std::string> expected = {"CFX_TCP_SLOT_BYTES",    "CFX_TCP_SLOTS",
                                             "NCCL_SOCKET_NTHREADS",  "NCCL_NSOCKS_PERTHREAD",
                                             "CFX_TCP_SOCKBUF_BYTES", "CFX_TCP_CONNECT_TIMEOUT_MS",
                                             "CFX_TCP_LINGER_MS"};
  for (const std::string& name : expected) {
    const auto& all = param::all();
    auto it = std::find_if(all.begin(), all.end(), [&](const param::ParamBase* p) { return name == p->name(); });
    ASSERT_NE(it, all.end()) << name << " is not registered";
    EXPECT_GT(std::strlen((*it)->help()), 20u) << name;
    EXPECT_TRUE((*it)->defaultIsValid()) << name;
  }
}

// The highest rank is connected to by every other rank, each with 2 channels x 4 sockets. Before a link's first
// socket was acknowledged, the peer counted the other sockets as strangers: past the expected ones plus 64 it
// dropped the oldest, and real ranks failed with "connection reset by peer" (64 ranks on the namespace bed).
TEST(TcpTransport, ManyRanksConnectingStripedLinksAtOnceAreNotDroppedAsStrangers) {
  constexpr int kRanks = 20;  // 19 x 8 = 152 sockets at rank 19, over its 19 + 64
  FakeWorld world(kRanks);
  auto ranks = createConnected(world, stripedOptions(4));
  for (auto& r : ranks) EXPECT_TRUE(r->transport) << "rank " << r->rank << ": " << r->status.message();
}

}  // namespace
}  // namespace cfx::transport::tcp::testing
