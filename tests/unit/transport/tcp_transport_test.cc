// SPDX-License-Identifier: Apache-2.0
// TcpTransport over loopback with threads as ranks (transport layer): frames arrive in order, with their tags and
// every byte, on both channels, between every connected pair. Fixtures are in tcp_test_util.h.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "tcp_test_util.h"

namespace cfx::transport::tcp::testing {
namespace {

TEST(TcpTransport, PingPongOnBothChannels) {
  FakeWorld world(2);
  auto ranks = createConnected(world, testOptions());
  ASSERT_TRUE(ranks[0]->transport && ranks[1]->transport);
  EXPECT_EQ(ranks[0]->transport->nPeers(), 1);
  EXPECT_STREQ(ranks[0]->send(kCollChannel, 1)->kind(), "tcp");
  constexpr int kRounds = 200;
  runRanks(2, [&](int r) {
    Rank& me = *ranks[static_cast<size_t>(r)];
    const int peer = 1 - r;
    for (int i = 0; i < kRounds; ++i) {
      const int ch = i % kNumChannels;
      const uint64_t tag = static_cast<uint64_t>(i) * 2;
      const size_t bytes = static_cast<size_t>(i * 37) % 4097;
      if (r == 0) {
        ASSERT_TRUE(sendFrame(*me.send(ch, peer), me.doorbell, bytes, tag).ok());
        Result<uint64_t> back = recvFrame(*me.recv(ch, peer), me.doorbell);
        ASSERT_TRUE(back.ok()) << back.status().message();
        EXPECT_EQ(back.value(), tag + 1);
      } else {
        size_t got = 0;
        Result<uint64_t> in = recvFrame(*me.recv(ch, peer), me.doorbell, &got);
        ASSERT_TRUE(in.ok()) << in.status().message();
        EXPECT_EQ(in.value(), tag);
        EXPECT_EQ(got, bytes);
        ASSERT_TRUE(sendFrame(*me.send(ch, peer), me.doorbell, bytes, in.value() + 1).ok());
      }
    }
  });
}

class TcpTransportRanks : public ::testing::TestWithParam<int> {};

TEST_P(TcpTransportRanks, EveryPairExchangesFramesInOrderOnBothChannels) {
  const int n = GetParam();
  FakeWorld world(n);
  auto ranks = createConnected(world, testOptions(1024, 3));
  for (auto& r : ranks) ASSERT_TRUE(r->transport);
  runRanks(n, [&](int r) {
    const Status st = exchangeAll(*ranks[static_cast<size_t>(r)], n, 300, everyone);
    EXPECT_TRUE(st.ok()) << "rank " << r << ": " << st.message();
  });
}

INSTANTIATE_TEST_SUITE_P(Sizes, TcpTransportRanks, ::testing::Values(2, 3, 4));

TEST(TcpTransport, OnlyMaskedPairsAreConnected) {
  // Two "hosts" of two ranks each: only pairs across hosts use TCP.
  const ConnectFn acrossHosts = [](int a, int b) { return a / 2 != b / 2; };
  FakeWorld world(4);
  auto ranks = createConnected(world, testOptions(), acrossHosts);
  for (auto& r : ranks) ASSERT_TRUE(r->transport);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(ranks[static_cast<size_t>(r)]->transport->nPeers(), 2);
    for (int p = 0; p < 4; ++p) {
      for (int ch = 0; ch < kNumChannels; ++ch) {
        EXPECT_EQ(ranks[static_cast<size_t>(r)]->send(ch, p) != nullptr, acrossHosts(r, p)) << r << "->" << p;
        EXPECT_EQ(ranks[static_cast<size_t>(r)]->recv(ch, p) != nullptr, acrossHosts(r, p)) << r << "<-" << p;
      }
    }
  }
  runRanks(4, [&](int r) {
    const Status st = exchangeAll(*ranks[static_cast<size_t>(r)], 4, 50, acrossHosts);
    EXPECT_TRUE(st.ok()) << "rank " << r << ": " << st.message();
  });
}

TEST(TcpTransport, TenThousandSlotsArriveInOrderWithTheirTags) {
  FakeWorld world(2);
  auto ranks = createConnected(world, testOptions(2048, 4));
  ASSERT_TRUE(ranks[0]->transport && ranks[1]->transport);
  constexpr int kFrames = 10000;
  std::thread producer([&] {
    Rank& me = *ranks[0];
    for (int i = 0; i < kFrames; ++i) {
      const Status st = sendFrame(*me.send(kCollChannel, 1), me.doorbell, static_cast<size_t>(i) % 2049,
                                  0x1000000ull + static_cast<uint64_t>(i));
      ASSERT_TRUE(st.ok()) << "frame " << i << ": " << st.message();
    }
  });
  std::thread consumer([&] {
    Rank& me = *ranks[1];
    for (int i = 0; i < kFrames; ++i) {
      size_t bytes = 0;
      Result<uint64_t> tag = recvFrame(*me.recv(kCollChannel, 0), me.doorbell, &bytes);
      ASSERT_TRUE(tag.ok()) << "frame " << i << ": " << tag.status().message();
      ASSERT_EQ(tag.value(), 0x1000000ull + static_cast<uint64_t>(i));
      ASSERT_EQ(bytes, static_cast<size_t>(i) % 2049);
    }
  });
  producer.join();
  consumer.join();
}

TEST(TcpTransport, LargeSlotsCarryEveryByte) {
  constexpr size_t kSlot = size_t{4} << 20;
  FakeWorld world(2);
  auto ranks = createConnected(world, testOptions(kSlot, 2));
  ASSERT_TRUE(ranks[0]->transport && ranks[1]->transport);
  const std::vector<size_t> sizes = {kSlot, kSlot - 1, 1, 3 * (size_t{1} << 20) + 17, 0, kSlot};
  runRanks(2, [&](int r) {
    Rank& me = *ranks[static_cast<size_t>(r)];
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (r == 0) {
        ASSERT_TRUE(sendFrame(*me.send(kP2pChannel, 1), me.doorbell, sizes[i], 500 + i).ok());
      } else {
        size_t bytes = 0;
        Result<uint64_t> tag = recvFrame(*me.recv(kP2pChannel, 0), me.doorbell, &bytes);
        ASSERT_TRUE(tag.ok()) << tag.status().message();
        EXPECT_EQ(tag.value(), 500 + i);
        EXPECT_EQ(bytes, sizes[i]);
      }
    }
  });
}

}  // namespace
}  // namespace cfx::transport::tcp::testing
