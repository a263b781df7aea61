// SPDX-License-Identifier: Apache-2.0
// TcpTransport failures (transport layer): a peer destroyed, vanishing or never reading, abort, ends outliving the
// transport, and an authenticated peer that sends garbage: the broken link fails with a named error that rings the
// doorbell, and nothing else breaks. Fixtures are in tcp_test_util.h.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tcp_test_util.h"
#include "transport/tcp/tcp_stripe.h"

namespace cfx::transport::tcp::testing {
namespace {

using namespace std::chrono_literals;

TEST(TcpTransport, PeerDestroyedMidStreamFailsTheSurvivorAndRingsItsDoorbell) {
  FakeWorld world(2);
  auto ranks = createConnected(world, testOptions(4096, 4));
  ASSERT_TRUE(ranks[0]->transport && ranks[1]->transport);
  Rank& victim = *ranks[0];
  Rank& survivor = *ranks[1];
  // Mid-stream: three frames sent to the survivor, which reads one; the survivor's own frames to the victim
  // are never read.
  for (uint64_t tag = 0; tag < 3; ++tag) {
    ASSERT_TRUE(sendFrame(*victim.send(kCollChannel, 1), victim.doorbell, 100, tag).ok());
  }
  Result<uint64_t> first = recvFrame(*survivor.recv(kCollChannel, 0), survivor.doorbell);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first.value(), 0u);
  for (uint64_t tag = 0; tag < 3; ++tag) {
    ASSERT_TRUE(sendFrame(*survivor.send(kCollChannel, 0), survivor.doorbell, 4096, tag).ok());
  }

  // The survivor waits for a frame that will never come, as an executor would.
  FailureWatch watch(survivor.doorbell, [&] { return survivor.recv(kP2pChannel, 0)->check(); });
  const uint32_t before = survivor.doorbell.read();
  victim.transport.reset();
  const Status seen = watch.join();

  EXPECT_NE(survivor.doorbell.read(), before) << "the survivor's doorbell was never rung";
  ASSERT_FALSE(seen.ok()) << "the survivor never saw the failure";
  EXPECT_EQ(seen.code(), Errc::RemoteError);
  EXPECT_NE(seen.message().find("peer rank 0"), std::string::npos) << seen.message();
  EXPECT_NE(seen.message().find("127.0.0.1"), std::string::npos) << seen.message();
  // Every end to the victim reports it, and the frames that had arrived can still be read.
  ASSERT_TRUE(waitUntil(
                  survivor.doorbell, [] { return false; }, [&] { return survivor.send(kCollChannel, 0)->check(); })
                  .code() == Errc::RemoteError);
  for (uint64_t tag = 1; tag < 3; ++tag) {
    size_t bytes = 0;
    uint64_t got = 0;
    ASSERT_NE(survivor.recv(kCollChannel, 0)->tryPeek(&bytes, &got), nullptr);
    EXPECT_EQ(got, tag);
    survivor.recv(kCollChannel, 0)->release();
  }
  EXPECT_EQ(survivor.recv(kCollChannel, 0)->check().code(), Errc::RemoteError);
  survivor.transport.reset();  // must return although its frames to the victim were never sent
}

TEST(TcpTransport, PeerVanishingWithUnreadDataResetsTheBlockedSender) {
  FakeWorld world(2);
  auto ranks = createConnected(world, testOptions(64 * 1024, 4));
  ASSERT_TRUE(ranks[0]->transport && ranks[1]->transport);
  Rank& sender = *ranks[0];
  // Fill the sender's FIFO and both socket buffers; the receiver's proxy holds unread bytes in its socket, and
  // closing a socket with unread data sends a reset.
  bool rung = false;
  const Status seen = peerClosesUnderBlockedSender(sender, *ranks[1], 64 * 1024, 2, &rung);
  EXPECT_TRUE(rung) << "the sender's doorbell was never rung";
  EXPECT_EQ(seen.code(), Errc::RemoteError) << seen.message();
  EXPECT_NE(seen.message().find("peer rank 1"), std::string::npos) << seen.message();
  sender.transport.reset();
}

TEST(TcpTransport, DestructorReturnsWhenThePeerNeverReads) {
  FakeWorld world(2);
  auto ranks = createConnected(world, testOptions(64 * 1024, 4));
  ASSERT_TRUE(ranks[0]->transport && ranks[1]->transport);
  Rank& sender = *ranks[0];
  // Post until nothing more fits: the FIFO and both socket buffers are full, the peer is alive but idle.
  const int posted = fillUntilBlocked(*sender.send(kCollChannel, 1), sender.doorbell, 64 * 1024, 1);
  EXPECT_GT(posted, 4);
  sender.transport.reset();  // flushes for at most closeLinger, then gives up
  EXPECT_FALSE(sender.send(kCollChannel, 1)->check().ok());
  ranks[1]->transport.reset();
}

TEST(TcpTransport, AbortFailsEveryEndAndSkipsTheFlush) {
  FakeWorld world(2);
  TcpOptions options = testOptions();
  options.closeLinger = 60000ms;  // an abort must not wait for it
  auto ranks = createConnected(world, options);
  ASSERT_TRUE(ranks[0]->transport && ranks[1]->transport);
  for (uint64_t tag = 0; tag < 4; ++tag) {
    ASSERT_TRUE(sendFrame(*ranks[0]->send(kCollChannel, 1), ranks[0]->doorbell, 4096, tag).ok());
  }
  const uint32_t before = ranks[0]->doorbell.read();
  ranks[0]->transport->abort();
  EXPECT_NE(ranks[0]->doorbell.read(), before);
  for (int ch = 0; ch < kNumChannels; ++ch) {
    EXPECT_FALSE(ranks[0]->send(ch, 1)->check().ok());
    EXPECT_FALSE(ranks[0]->recv(ch, 1)->check().ok());
  }
  ranks[0]->transport.reset();
  ranks[1]->transport.reset();
}

TEST(TcpTransport, EndsOutlivingTheTransportReportItClosed) {
  FakeWorld world(2);
  auto ranks = createConnected(world, testOptions());
  ASSERT_TRUE(ranks[0]->transport && ranks[1]->transport);
  ranks[0]->transport.reset();
  const Status st = ranks[0]->recv(kCollChannel, 1)->check();
  EXPECT_EQ(st.code(), Errc::InvalidUsage);
  EXPECT_NE(st.message().find("closed by this rank"), std::string::npos) << st.message();
  ASSERT_NE(ranks[0]->send(kCollChannel, 1)->tryAcquire(), nullptr);  // harmless, goes nowhere
  ranks[0]->send(kCollChannel, 1)->post(10, 1);
  ranks[1]->transport.reset();
}

TEST(TcpTransport, OversizedFrameFromAnAuthenticatedPeerBreaksOnlyThatConnection) {
  FakeWorld world(2);
  const TcpOptions options = testOptions(4096, 4);
  RawLink link;
  ASSERT_NO_FATAL_FAILURE(connectRawLink(world, options, 1, link));
  std::unique_ptr<Rank>& real = link.real;
  std::vector<net::Socket>& sockets = link.sockets;  // by channel

  uint8_t oversized[kStripeHeaderBytes];
  encodeStripeHeader(StripeHeader{.seq = 0, .tag = 7, .bytes = 4096 + 1, .offset = 0, .length = 4096 + 1, .stream = 0},
                     oversized);
  ASSERT_TRUE(sockets[kCollChannel].sendAll(oversized, sizeof(oversized), Deadline(5000ms), nullptr).ok());
  RecvEnd& broken = *real->recv(kCollChannel, 0);
  const Status st = waitUntil(
      real->doorbell, [] { return false; }, [&] { return broken.check(); });
  EXPECT_EQ(st.code(), Errc::RemoteError);
  EXPECT_NE(st.message().find("larger than the 4096-byte slot"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("peer rank 0"), std::string::npos) << st.message();
  EXPECT_TRUE(real->recv(kP2pChannel, 0)->check().ok()) << "the other channel's connection must be unaffected";

  // The healthy channel still carries frames from the hand-written peer.
  uint8_t header[kStripeHeaderBytes];
  encodeStripeHeader(StripeHeader{.seq = 0, .tag = 42, .bytes = 3, .offset = 0, .length = 3, .stream = 0}, header);
  const uint8_t payload[3] = {patternByte(42, 0), patternByte(42, 1), patternByte(42, 2)};
  ASSERT_TRUE(sockets[kP2pChannel].sendAll(header, sizeof(header), Deadline(5000ms), nullptr).ok());
  ASSERT_TRUE(sockets[kP2pChannel].sendAll(payload, sizeof(payload), Deadline(5000ms), nullptr).ok());
  Result<uint64_t> tag = recvFrame(*real->recv(kP2pChannel, 0), real->doorbell);
  ASSERT_TRUE(tag.ok()) << tag.status().message();
  EXPECT_EQ(tag.value(), 42u);
  real->transport.reset();
}

// A hand-written peer with a two-stream link sends `frames` (header, payload) on the given streams of the
// collective channel; the real rank must fail that link with a RemoteError whose text holds `expected`.
void expectMalformedStripes(const std::vector<std::pair<int, StripeHeader>>& frames, const std::string& expected) {
  FakeWorld world(2);
  const TcpOptions options = stripedOptions(2, 16384, 4);
  RawLink link;
  ASSERT_NO_FATAL_FAILURE(connectRawLink(world, options, 2, link));
  std::unique_ptr<Rank>& real = link.real;
  std::vector<net::Socket>& sockets = link.sockets;  // by channel * 2 + stream
  for (const auto& [stream, header] : frames) {
    uint8_t wire[kStripeHeaderBytes];
    encodeStripeHeader(header, wire);
    std::vector<uint8_t> payload(header.length, 0x5a);
    net::Socket& s = sockets[static_cast<size_t>(kCollChannel * 2 + stream)];
    ASSERT_TRUE(s.sendAll(wire, sizeof(wire), Deadline(5000ms), nullptr).ok());
    ASSERT_TRUE(s.sendAll(payload.data(), payload.size(), Deadline(5000ms), nullptr).ok());
  }
  RecvEnd& broken = *real->recv(kCollChannel, 0);
  const Status st = waitUntil(
      real->doorbell, [] { return false; }, [&] { return broken.check(); });
  EXPECT_EQ(st.code(), Errc::RemoteError);
  EXPECT_NE(st.message().find(expected), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("peer rank 0"), std::string::npos) << st.message();
  EXPECT_TRUE(real->recv(kP2pChannel, 0)->check().ok()) << "the other channel's link must be unaffected";
  real->transport.reset();
}

StripeHeader stripe(uint64_t seq, uint32_t bytes, int stream) {
  const StripeLayout layout = stripeLayout(bytes, 2, 4096);
  return StripeHeader{.seq = seq,
                      .tag = 7,
                      .bytes = bytes,
                      .offset = static_cast<uint32_t>(layout.offset(stream)),
                      .length = static_cast<uint32_t>(layout.length(stream, bytes)),
                      .stream = static_cast<uint16_t>(stream)};
}

TEST(TcpTransport, MalformedOrMisorderedStripesFailTheLinkWithANamedError) {
  // A stripe where the layout has none: a 100-byte slot is one stripe, on stream 0 only.
  expectMalformedStripes({{1, StripeHeader{.seq = 0, .tag = 7, .bytes = 100, .offset = 0, .length = 100, .stream = 1}}},
                         "layout does not have there");
  // The right stripe on the wrong socket.
  expectMalformedStripes({{0, stripe(0, 16384, 1)}}, "for stream 1 on stream 0");
  // Stream 0 carries every slot in order: slot 1 before slot 0 is out of order.
  expectMalformedStripes({{0, stripe(1, 100, 0)}}, "out of order");
  // Stream 1 passes over slot 0, which has a stripe for it, to send slot 1's.
  expectMalformedStripes({{0, stripe(0, 16384, 0)}, {1, stripe(1, 16384, 1)}}, "skipped its stripe of slot 0");
  // Two stripes of one slot that disagree on its size.
  StripeHeader other = stripe(0, 16384, 1);
  other.bytes = 16320;
  other.offset = static_cast<uint32_t>(stripeLayout(16320, 2, 4096).offset(1));
  other.length = static_cast<uint32_t>(stripeLayout(16320, 2, 4096).length(1, 16320));
  expectMalformedStripes({{0, stripe(0, 16384, 0)}, {1, other}}, "before");
}

}  // namespace
}  // namespace cfx::transport::tcp::testing
