// SPDX-License-Identifier: Apache-2.0
// TcpTransport over striped links (transport layer): slots spread over several sockets per link and several proxy
// threads, ranks that disagree on the striping, and autotuned links. Fixtures are in tcp_test_util.h.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "tcp_test_util.h"
#include "transport/tcp/tcp_socket.h"

namespace cfx::transport::tcp::testing {
namespace {

// (sockets per link, proxy threads)
class TcpTransportStriped : public ::testing::TestWithParam<std::pair<int, int>> {
 protected:
  TcpOptions options(size_t slotBytes = 16384, int nSlots = 4) const {
    return stripedOptions(GetParam().first, slotBytes, nSlots, GetParam().second);
  }
};

TEST_P(TcpTransportStriped, EveryPairExchangesSlotsOfEverySizeInOrder) {
  // Sizes run from 0 to the whole slot, so slots of 1 to nSocks stripes interleave on every link.
  constexpr int kRanks = 3;
  FakeWorld world(kRanks);
  auto ranks = createConnected(world, options());
  for (auto& r : ranks) ASSERT_TRUE(r->transport);
  runRanks(kRanks, [&](int r) {
    const Status st = exchangeAll(*ranks[static_cast<size_t>(r)], kRanks, 400, everyone);
    EXPECT_TRUE(st.ok()) << "rank " << r << ": " << st.message();
  });
}

TEST_P(TcpTransportStriped, LargeSlotsCarryEveryByte) {
  constexpr size_t kSlot = size_t{1} << 20;
  FakeWorld world(2);
  TcpOptions large = options(kSlot, 3);
  large.minStripeBytes = kDefaultMinStripeBytes;
  auto ranks = createConnected(world, large);
  ASSERT_TRUE(ranks[0]->transport && ranks[1]->transport);
  const std::vector<size_t> sizes = {kSlot, kSlot - 1, 1, 65537, 0, 3 * 65536 + 17, kSlot, 200003, kSlot};
  runRanks(2, [&](int r) {
    Rank& me = *ranks[static_cast<size_t>(r)];
    for (size_t i = 0; i < sizes.size(); ++i) {
      ASSERT_TRUE(sendFrame(*me.send(kCollChannel, 1 - r), me.doorbell, sizes[i], 900 + i).ok());
      size_t bytes = 0;
      Result<uint64_t> tag = recvFrame(*me.recv(kCollChannel, 1 - r), me.doorbell, &bytes);
      ASSERT_TRUE(tag.ok()) << tag.status().message();
      EXPECT_EQ(tag.value(), 900 + i);
      EXPECT_EQ(bytes, sizes[i]);
    }
  });
}

TEST_P(TcpTransportStriped, PeerDestroyedMidTransferFailsEveryEndNamingThePeer) {
  FakeWorld world(2);
  auto ranks = createConnected(world, options(64 * 1024, 4));
  ASSERT_TRUE(ranks[0]->transport && ranks[1]->transport);
  Rank& sender = *ranks[0];
  // Fill the FIFO and the socket buffers of every stripe's socket; the peer never reads.
  const Status seen = peerClosesUnderBlockedSender(sender, *ranks[1], 64 * 1024, 3);
  EXPECT_EQ(seen.code(), Errc::RemoteError) << seen.message();
  EXPECT_NE(seen.message().find("peer rank 1"), std::string::npos) << seen.message();
  EXPECT_EQ(sender.recv(kCollChannel, 1)->check().code(), Errc::RemoteError) << "the link's receive end too";
  sender.transport.reset();
}

INSTANTIATE_TEST_SUITE_P(SocketsAndThreads, TcpTransportStriped,
                         ::testing::Values(std::pair{2, 1}, std::pair{4, 1}, std::pair{4, 2}, std::pair{3, 4}));

TEST(TcpTransport, TheConnectingRankDecidesTheStripingAndTheOtherFollows) {
  FakeWorld world(3);
  auto ranks = createRanks(world, [](int r) { return stripedOptions(r == 0 ? 4 : r == 1 ? 3 : 1); });
  for (auto& r : ranks) ASSERT_TRUE(r->status.ok()) << "rank " << r->rank << ": " << r->status.message();
  runRanks(3, [&](int r) {
    const Status st = exchangeAll(*ranks[static_cast<size_t>(r)], 3, 200, everyone);
    EXPECT_TRUE(st.ok()) << "rank " << r << ": " << st.message();
  });
}

// Rails: every rank listens on two loopback addresses (its own first), each rank on a host of its own. Autotuning
// gives each link a stream per rail (a host with fewer ranks than rails), the second stream connects to the peer's
// second address, and setup only completes if both listeners accept. The congestion control named cannot exist:
// setup goes on with the system's (and says so once).
TEST(TcpTransport, RanksOnSeveralRailsAcceptAStreamOnEach) {
  constexpr int kRanks = 3;
  FakeWorld world(kRanks);
  std::vector<PeerInfo> peers = peerInfos(kRanks);
  for (int r = 0; r < kRanks; ++r) peers[static_cast<size_t>(r)].hostHash = 100 + static_cast<uint64_t>(r);
  auto ranks = createRanks(
      world,
      [](int r) {
        TcpOptions o = testOptions(16384, 4);
        o.autotune = true;
        o.minStripeBytes = 4096;
        o.congestion = "no-such-cc";
        for (int k = 0; k < 2; ++k) {
          sockaddr_storage a = loopback();
          // 127.0.0.1 and 127.0.0.2, this rank's own rail first.
          reinterpret_cast<sockaddr_in&>(a).sin_addr.s_addr =
              htonl(INADDR_LOOPBACK + static_cast<uint32_t>((r + k) % 2));
          o.listenAddresses.push_back(a);
        }
        return o;
      },
      everyone, peers);
  for (auto& r : ranks) ASSERT_TRUE(r->status.ok()) << "rank " << r->rank << ": " << r->status.message();
  runRanks(kRanks, [&](int r) {
    const Status st = exchangeAll(*ranks[static_cast<size_t>(r)], kRanks, 200, everyone);
    EXPECT_TRUE(st.ok()) << "rank " << r << ": " << st.message();
  });
}

TEST(TcpSocket, CongestionControlIsSetWhereTheKernelHasItAndRefusedWithAReasonWhereNot) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  std::string why;
  // reno is built into every Linux kernel and always allowed.
  EXPECT_TRUE(setCongestionControl(fd, "reno", &why)) << why;
  char name[16] = {};
  socklen_t len = sizeof(name);
  ASSERT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len), 0);
  EXPECT_STREQ(name, "reno");
  EXPECT_FALSE(setCongestionControl(fd, "no-such-cc", &why));
  EXPECT_NE(why.find("not available"), std::string::npos) << why;
  ::close(fd);
}

TEST(TcpTransport, AutotunedLinksOverLoopbackCarryFrames) {
  FakeWorld world(3);
  TcpOptions options = testOptions(16384, 4);
  options.autotune = true;
  auto ranks = createConnected(world, options);
  for (auto& r : ranks) ASSERT_TRUE(r->transport);
  runRanks(3, [&](int r) {
    const Status st = exchangeAll(*ranks[static_cast<size_t>(r)], 3, 200, everyone);
    EXPECT_TRUE(st.ok()) << "rank " << r << ": " << st.message();
  });
}

}  // namespace
}  // namespace cfx::transport::tcp::testing
