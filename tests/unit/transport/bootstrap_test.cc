// SPDX-License-Identifier: Apache-2.0
// Bootstrap tests with ranks as threads of one process over loopback TCP: joining, allGather, barrier, tagged
// point-to-point, NCCL_COMM_ID-style ids, strangers at the root, missing ranks, abort and peer loss.
#include "transport/bootstrap/bootstrap.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../../free_port.h"
#include "common/crypto.h"
#include "common/socket.h"
#include "transport/bootstrap/wire.h"
#include "bootstrap_test_util.h"

namespace cfx::transport {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

BootstrapOptions testOptions(milliseconds timeout = milliseconds(30000)) {
  return testing::bootstrapTestOptions(timeout);
}

void runRanks(int nRanks, const std::function<void(int)>& fn) { testing::runRankThreads(nRanks, fn); }
using testing::joinAll;

UniqueId freshId(const BootstrapOptions& options) {
  Result<UniqueId> id = createUniqueId(options);
  EXPECT_TRUE(id.ok()) << id.status().message();
  return id.ok() ? *id : UniqueId{};
}

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

TEST(UniqueIdTest, RoundTripsThroughItsWireForm) {
  Result<UniqueId> id = uniqueIdFromAddress("[::1]:4242", "secret", true);
  ASSERT_TRUE(id.ok()) << id.status().message();
  uint8_t bytes[UniqueId::kBytes];
  id->encode(bytes);
  Result<UniqueId> back = UniqueId::decode(bytes);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(net::sameAddress(back->root, id->root));
  EXPECT_EQ(back->secret, id->secret);
  EXPECT_EQ(back->magic, id->magic);
  EXPECT_TRUE(back->startRootInInit);
}

TEST(UniqueIdTest, DecodeRejectsZeroedAndCorruptedIds) {
  uint8_t zeros[UniqueId::kBytes] = {};
  EXPECT_EQ(UniqueId::decode(zeros).status().code(), Errc::InvalidArgument);
  Result<UniqueId> id = uniqueIdFromAddress("127.0.0.1:4242", "", false);
  ASSERT_TRUE(id.ok());
  uint8_t bytes[UniqueId::kBytes];
  id->encode(bytes);
  bytes[40] ^= 1;  // inside the secret
  Result<UniqueId> bad = UniqueId::decode(bytes);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("corrupted"), std::string::npos) << bad.status().message();
}

TEST(UniqueIdTest, DecodeRejectsFlagsOfAnotherVersion) {
  Result<UniqueId> id = uniqueIdFromAddress("127.0.0.1:4242", "s", false);
  ASSERT_TRUE(id.ok());
  uint8_t bytes[UniqueId::kBytes];
  id->encode(bytes);
  bytes[7] |= 0x80;  // a flag this version does not know (flags u16, little-endian), with a matching check word
  Result<crypto::Digest> check = crypto::sha256(std::span<const uint8_t>(bytes, 72));
  ASSERT_TRUE(check.ok());
  std::memcpy(bytes + 72, check->data(), 8);
  Result<UniqueId> bad = UniqueId::decode(bytes);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Errc::InvalidArgument);
  EXPECT_NE(bad.status().message().find("flags 0x8000"), std::string::npos) << bad.status().message();
}

TEST(UniqueIdTest, CommIdTextIsValidated) {
  EXPECT_FALSE(uniqueIdFromAddress("127.0.0.1", "", false).ok());
  EXPECT_FALSE(uniqueIdFromAddress("127.0.0.1:0", "", false).ok());
  Result<UniqueId> a = uniqueIdFromAddress("127.0.0.1:999", "x", false);
  Result<UniqueId> b = uniqueIdFromAddress("127.0.0.1:999", "x", false);
  Result<UniqueId> c = uniqueIdFromAddress("127.0.0.1:999", "y", false);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->magic, b->magic);  // every rank computes the same id on its own
  EXPECT_EQ(a->secret, b->secret);
  EXPECT_NE(a->secret, c->secret);
}

TEST(BootstrapTest, OneToEightRanksJoinAllGatherAndBarrier) {
  for (int n = 1; n <= 8; ++n) {
    SCOPED_TRACE("nRanks=" + std::to_string(n));
    const BootstrapOptions options = testOptions();
    const UniqueId id = freshId(options);
    auto ranks = joinAll(id, n, options);
    ASSERT_EQ(ranks.size(), static_cast<size_t>(n));
    std::set<std::string> addresses;
    for (const auto& b : ranks) {
      ASSERT_TRUE(b);
      addresses.insert(net::addressToString(b->localAddress()));
      EXPECT_EQ(b->nRanks(), n);
      // The session secret: the same on every rank, derived from the id's and the root's nonce, never the id's.
      EXPECT_EQ(b->secret(), ranks[0]->secret());
      EXPECT_NE(b->secret(), id.secret);
      EXPECT_TRUE(b->authenticated());
    }
    EXPECT_EQ(addresses.size(), static_cast<size_t>(n));
    runRanks(n, [&](int r) {
      Bootstrap& b = *ranks[r];
      EXPECT_EQ(b.rank(), r);
      for (int round = 0; round < 3; ++round) {
        std::vector<uint64_t> data(static_cast<size_t>(n) * 2, 0);
        data[2 * r] = 1000 * round + r;
        data[2 * r + 1] = ~static_cast<uint64_t>(r);
        ASSERT_TRUE(b.allGather(data.data(), 2 * sizeof(uint64_t)).ok());
        for (int p = 0; p < n; ++p) {
          EXPECT_EQ(data[2 * p], static_cast<uint64_t>(1000 * round + p));
          EXPECT_EQ(data[2 * p + 1], ~static_cast<uint64_t>(p));
        }
        Status st = b.barrier();
        EXPECT_TRUE(st.ok()) << st.message();
      }
    });
  }
}

TEST(BootstrapTest, AllGatherHandlesEmptyAndLargeBlocks) {
  const int n = 3;
  const BootstrapOptions options = testOptions();
  auto ranks = joinAll(freshId(options), n, options);
  runRanks(n, [&](int r) {
    EXPECT_TRUE(ranks[r]->allGather(nullptr, 0).ok());
    const size_t block = (1 << 20) + 3;
    std::vector<uint8_t> data(block * n, 0);
    for (size_t i = 0; i < block; ++i) data[r * block + i] = static_cast<uint8_t>(r * 31 + i);
    ASSERT_TRUE(ranks[r]->allGather(data.data(), block).ok());
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < block; i += 4099) ASSERT_EQ(data[p * block + i], static_cast<uint8_t>(p * 31 + i));
    }
  });
}

TEST(BootstrapTest, PointToPointMatchesTagsOutOfOrderAndIncludesSelf) {
  const int n = 4;
  const BootstrapOptions options = testOptions();
  auto ranks = joinAll(freshId(options), n, options);
  runRanks(n, [&](int r) {
    Bootstrap& b = *ranks[r];
    // Everyone sends tags 1..3 to everyone (itself included), in order.
    for (int p = 0; p < n; ++p) {
      for (uint64_t tag = 1; tag <= 3; ++tag) {
        const int v = r * 100 + static_cast<int>(tag);
        ASSERT_TRUE(b.send(p, tag, &v, sizeof(v)).ok());
      }
    }
    // ... and receives them in reverse tag order, peers in reverse order.
    for (int p = n - 1; p >= 0; --p) {
      for (uint64_t tag = 3; tag >= 1; --tag) {
        int v = -1;
        Status st = b.recv(p, tag, &v, sizeof(v));
        ASSERT_TRUE(st.ok()) << st.message();
        EXPECT_EQ(v, p * 100 + static_cast<int>(tag));
      }
    }
    // Same (peer, tag) twice: FIFO.
    const int next = (r + 1) % n;
    const int prev = (r + n - 1) % n;
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(b.send(next, 77, &i, sizeof(i)).ok());
    for (int i = 0; i < 2; ++i) {
      int v = -1;
      ASSERT_TRUE(b.recv(prev, 77, &v, sizeof(v)).ok());
      EXPECT_EQ(v, i);
    }
  });
}

TEST(BootstrapTest, SizeMismatchIsInvalidUsageNamingThePeer) {
  const BootstrapOptions options = testOptions();
  auto ranks = joinAll(freshId(options), 2, options);
  const uint64_t eight = 8;
  ASSERT_TRUE(ranks[0]->send(1, 5, &eight, sizeof(eight)).ok());
  uint32_t four = 0;
  Status st = ranks[1]->recv(0, 5, &four, sizeof(four));
  EXPECT_EQ(st.code(), Errc::InvalidUsage);
  EXPECT_NE(st.message().find("rank 0"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("8"), std::string::npos) << st.message();
  EXPECT_EQ(ranks[0]->send(7, 1, &eight, 8).code(), Errc::InvalidArgument);
}

TEST(BootstrapTest, ConcurrentCommunicatorsFromDifferentIdsStaySeparate) {
  const BootstrapOptions options = testOptions();
  const UniqueId a = freshId(options);
  const UniqueId b = freshId(options);
  std::vector<std::unique_ptr<Bootstrap>> ca(4);
  std::vector<std::unique_ptr<Bootstrap>> cb(3);
  runRanks(7, [&](int t) {
    const bool inA = t < 4;
    const int r = inA ? t : t - 4;
    const int n = inA ? 4 : 3;
    Result<std::unique_ptr<Bootstrap>> boot = Bootstrap::init(inA ? a : b, r, n, options);
    ASSERT_TRUE(boot.ok()) << boot.status().message();
    std::vector<int> data(n, 0);
    data[r] = (inA ? 100 : 200) + r;
    ASSERT_TRUE((*boot)->allGather(data.data(), sizeof(int)).ok());
    for (int p = 0; p < n; ++p) EXPECT_EQ(data[p], (inA ? 100 : 200) + p);
    (inA ? ca : cb)[r] = std::move(*boot);
  });
}

TEST(BootstrapTest, CommIdStyleIdLetsRankZeroServeTheRoot) {
  const std::string hostPort = "127.0.0.1:" + std::to_string(testports::freeLoopbackPort());
  const int n = 4;
  BootstrapOptions options = testOptions();
  options.ifName = "";  // the automatic rule must find loopback from NCCL_COMM_ID's subnet
  std::vector<std::unique_ptr<Bootstrap>> ranks(n);
  runRanks(n, [&](int r) {
    // Ranks other than 0 may reach the address before rank 0 serves it: their connects are retried.
    if (r == 0) std::this_thread::sleep_for(milliseconds(200));
    Result<UniqueId> id = uniqueIdFromAddress(hostPort, "job-42", true);
    ASSERT_TRUE(id.ok()) << id.status().message();
    Result<std::unique_ptr<Bootstrap>> b = Bootstrap::init(*id, r, n, options);
    ASSERT_TRUE(b.ok()) << b.status().message();
    EXPECT_TRUE(net::isLoopback((*b)->localAddress()));
    std::vector<int> data(n, 0);
    data[r] = r + 1;
    ASSERT_TRUE((*b)->allGather(data.data(), sizeof(int)).ok());
    for (int p = 0; p < n; ++p) EXPECT_EQ(data[p], p + 1);
    ranks[r] = std::move(*b);
  });
}

TEST(BootstrapTest, Ipv6RootWorks) {
  sockaddr_storage v6{};
  v6.ss_family = AF_INET6;
  reinterpret_cast<sockaddr_in6&>(v6).sin6_addr = in6addr_loopback;
  Result<net::Listener> probe = net::Listener::listen(v6);
  if (!probe.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << probe.status().message();
  probe->close();
  const std::string hostPort = "[::1]:" + std::to_string(testports::freeLoopbackPort(AF_INET6));
  const int n = 3;
  const BootstrapOptions options = testOptions();
  std::vector<std::unique_ptr<Bootstrap>> ranks(n);
  runRanks(n, [&](int r) {
    Result<UniqueId> id = uniqueIdFromAddress(hostPort, "v6", true);
    ASSERT_TRUE(id.ok()) << id.status().message();
    Result<std::unique_ptr<Bootstrap>> b = Bootstrap::init(*id, r, n, options);
    ASSERT_TRUE(b.ok()) << b.status().message();
    EXPECT_TRUE((*b)->barrier().ok());
    ranks[r] = std::move(*b);
  });
}

// Strangers: each connects to the root and misbehaves in its own way while the real ranks join.
void strangerSendsGarbage(const sockaddr_storage& root) {
  Result<net::Socket> s = net::Socket::connect(root, {}, Deadline(milliseconds(5000)), nullptr);
  ASSERT_TRUE(s.ok());
  const char kGarbage[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  (void)s->sendAll(kGarbage, sizeof(kGarbage), Deadline(milliseconds(5000)), nullptr);
  uint8_t sink[64];
  // The root sends its challenge, then closes on us: reading runs into the end of the stream.
  Status st = s->recvAll(sink, sizeof(sink), Deadline(milliseconds(10000)), nullptr);
  EXPECT_EQ(st.code(), Errc::RemoteError) << st.message();
}

void strangerStaysSilent(const sockaddr_storage& root) {
  Result<net::Socket> s = net::Socket::connect(root, {}, Deadline(milliseconds(5000)), nullptr);
  ASSERT_TRUE(s.ok());
  uint8_t sink[64];
  Status st = s->recvAll(sink, sizeof(sink), Deadline(milliseconds(10000)), nullptr);
  EXPECT_EQ(st.code(), Errc::RemoteError) << "the root must drop a silent client: " << st.message();
}

void strangerHasWrongSecret(const UniqueId& id, int rank, int nRanks) {
  Result<net::Socket> s = net::Socket::connect(id.root, {}, Deadline(milliseconds(5000)), nullptr);
  ASSERT_TRUE(s.ok());
  boot::Credentials wrong{id.secret, id.magic};
  wrong.secret[0] ^= 0xff;
  const boot::JoinHello fake{id.root, 0, 1};
  Result<boot::FrameKeys> keys = boot::clientHandshake(*s, wrong, boot::ConnKind::RootJoin, rank, nRanks, &fake,
                                                       Deadline(milliseconds(10000)), nullptr);
  EXPECT_EQ(keys.status().code(), Errc::RemoteError) << keys.status().message();
}

void strangerSendsOversizeFrame(const sockaddr_storage& root) {
  Result<net::Socket> s = net::Socket::connect(root, {}, Deadline(milliseconds(5000)), nullptr);
  ASSERT_TRUE(s.ok());
  uint8_t hdr[boot::kFrameHeaderBytes];
  boot::encodeFrameHeader(boot::FrameHeader{boot::FrameKind::User, 0, uint64_t{1} << 40}, hdr);
  (void)s->sendAll(hdr, sizeof(hdr), Deadline(milliseconds(5000)), nullptr);
  uint8_t sink[64];
  EXPECT_EQ(s->recvAll(sink, sizeof(sink), Deadline(milliseconds(10000)), nullptr).code(), Errc::RemoteError);
}

TEST(BootstrapTest, StrangersAtTheRootAreRejectedWhileRanksJoin) {
  const int n = 4;
  const BootstrapOptions options = testOptions();
  const UniqueId id = freshId(options);
  std::vector<std::thread> strangers;
  strangers.emplace_back(strangerStaysSilent, id.root);
  strangers.emplace_back(strangerSendsGarbage, id.root);
  strangers.emplace_back(strangerHasWrongSecret, id, 1, n);
  strangers.emplace_back(strangerSendsOversizeFrame, id.root);
  std::this_thread::sleep_for(milliseconds(50));  // let the strangers get in first
  auto ranks = joinAll(id, n, options);
  for (auto& t : strangers) t.join();
  runRanks(n, [&](int r) {
    int v = r;
    std::vector<int> all(n);
    all[r] = v;
    EXPECT_TRUE(ranks[r]->allGather(all.data(), sizeof(int)).ok());
    for (int p = 0; p < n; ++p) EXPECT_EQ(all[p], p);
  });
}

TEST(BootstrapTest, DuplicateAndMismatchedRanksAreRejectedWithoutDisturbingOthers) {
  const int n = 3;
  const BootstrapOptions options = testOptions();
  const UniqueId id = freshId(options);
  // Two threads both claim rank 1: whichever the root admits second is rejected; the first one stays in.
  std::vector<Result<std::unique_ptr<Bootstrap>>> results;
  for (int i = 0; i < 3; ++i) results.emplace_back(Status::error(Errc::InternalError, "not run"));
  const int claims[3] = {0, 1, 1};
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] { results[i] = Bootstrap::init(id, claims[i], n, options); });
  }
  // The root knows nRanks from the first arrivals by now.
  std::this_thread::sleep_for(milliseconds(300));
  Result<std::unique_ptr<Bootstrap>> wrongSize = Bootstrap::init(id, 2, n + 1, options);
  ASSERT_FALSE(wrongSize.ok());
  EXPECT_EQ(wrongSize.status().code(), Errc::InvalidUsage) << wrongSize.status().message();
  EXPECT_NE(wrongSize.status().message().find("nRanks"), std::string::npos) << wrongSize.status().message();
  Result<std::unique_ptr<Bootstrap>> last = Bootstrap::init(id, 2, n, options);
  ASSERT_TRUE(last.ok()) << last.status().message();
  for (auto& t : threads) t.join();
  ASSERT_TRUE(results[0].ok()) << results[0].status().message();
  ASSERT_NE(results[1].ok(), results[2].ok());
  const Status& rejected = results[1].ok() ? results[2].status() : results[1].status();
  EXPECT_EQ(rejected.code(), Errc::InvalidUsage) << rejected.message();
  EXPECT_NE(rejected.message().find("duplicate rank 1"), std::string::npos) << rejected.message();
  std::vector<Bootstrap*> ranks = {results[0]->get(), (results[1].ok() ? results[1] : results[2])->get(), last->get()};
  runRanks(n, [&](int r) { EXPECT_TRUE(ranks[r]->barrier().ok()); });
}

TEST(BootstrapTest, MissingRankMakesTheOthersTimeOutNamingIt) {
  const int n = 4;
  const BootstrapOptions options = testOptions(milliseconds(1500));
  const UniqueId id = freshId(options);
  const auto start = Clock::now();
  runRanks(n - 1, [&](int r) {  // rank 3 never shows up
    Result<std::unique_ptr<Bootstrap>> b = Bootstrap::init(id, r, n, options);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), Errc::Timeout) << b.status().message();
    EXPECT_NE(b.status().message().find("missing rank 3"), std::string::npos) << b.status().message();
  });
  EXPECT_LT(secondsSince(start), 20.0);
}

TEST(BootstrapTest, RecvFromASilentPeerTimesOutNamingIt) {
  const BootstrapOptions options = testOptions(milliseconds(2000));
  auto ranks = joinAll(freshId(options), 3, options);
  const auto start = Clock::now();
  int v = 0;
  Status st = ranks[0]->recv(2, 9, &v, sizeof(v));
  EXPECT_EQ(st.code(), Errc::Timeout);
  EXPECT_NE(st.message().find("rank 2"), std::string::npos) << st.message();
  EXPECT_LT(secondsSince(start), 20.0);
}

TEST(BootstrapTest, AbortUnblocksAPendingRecv) {
  const BootstrapOptions options = testOptions(milliseconds(120000));
  auto ranks = joinAll(freshId(options), 2, options);
  const auto start = Clock::now();
  std::thread aborter([&] {
    std::this_thread::sleep_for(milliseconds(200));
    ranks[1]->abort();
  });
  int v = 0;
  Status st = ranks[1]->recv(0, 1, &v, sizeof(v));
  aborter.join();
  EXPECT_EQ(st.code(), Errc::RemoteError) << st.message();
  EXPECT_LT(secondsSince(start), 20.0);
  // Later calls fail at once, too.
  EXPECT_EQ(ranks[1]->barrier().code(), Errc::RemoteError);
  EXPECT_EQ(ranks[1]->send(0, 1, &v, sizeof(v)).code(), Errc::RemoteError);
}

// A recv watched by `alive`: it returns a message that arrives while `alive` is content, and `alive`'s own error
// once that turns, long before the timeout; the bootstrap stays usable afterwards (it was not aborted).
TEST(BootstrapTest, AWatchedRecvEndsWithItsWatchersError) {
  const BootstrapOptions options = testOptions(milliseconds(120000));
  auto ranks = joinAll(freshId(options), 2, options);
  std::atomic<bool> failed{false};
  std::atomic<int> polls{0};
  const std::function<Status()> alive = [&]() -> Status {
    polls.fetch_add(1);
    if (!failed.load()) return Status();
    return Status::error(Errc::RemoteError, "rank 0 stopped answering");
  };
  std::thread sender([&] {
    std::this_thread::sleep_for(milliseconds(200));
    const int v = 42;
    EXPECT_TRUE(ranks[0]->send(1, 5, &v, sizeof(v)).ok());
  });
  int v = 0;
  EXPECT_TRUE(ranks[1]->recv(0, 5, &v, sizeof(v), alive).ok());
  sender.join();
  EXPECT_EQ(v, 42);
  EXPECT_GT(polls.load(), 0);

  const auto start = Clock::now();
  std::thread watcher([&] {
    std::this_thread::sleep_for(milliseconds(200));
    failed.store(true);
  });
  Status st = ranks[1]->recv(0, 6, &v, sizeof(v), alive);
  watcher.join();
  EXPECT_EQ(st.code(), Errc::RemoteError);
  EXPECT_EQ(st.message(), "rank 0 stopped answering");
  EXPECT_LT(secondsSince(start), 20.0);

  const int w = 7;  // not aborted: the next message still gets through
  ASSERT_TRUE(ranks[0]->send(1, 6, &w, sizeof(w)).ok());
  EXPECT_TRUE(ranks[1]->recv(0, 6, &v, sizeof(v)).ok());
  EXPECT_EQ(v, 7);
}

TEST(BootstrapTest, ExternalAbortFlagUnblocksInit) {
  std::atomic<bool> abortFlag{false};
  BootstrapOptions options = testOptions(milliseconds(120000));
  options.abortFlag = &abortFlag;
  const UniqueId id = freshId(options);
  const auto start = Clock::now();
  std::thread aborter([&] {
    std::this_thread::sleep_for(milliseconds(200));
    abortFlag.store(true);
  });
  Result<std::unique_ptr<Bootstrap>> b = Bootstrap::init(id, 0, 2, options);  // rank 1 never comes
  aborter.join();
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Errc::RemoteError) << b.status().message();
  EXPECT_LT(secondsSince(start), 20.0);
}

TEST(BootstrapTest, PeerThatClosesMidRecvIsRemoteErrorNamingIt) {
  const BootstrapOptions options = testOptions(milliseconds(120000));
  auto ranks = joinAll(freshId(options), 2, options);
  const int one = 1;
  ASSERT_TRUE(ranks[0]->send(1, 1, &one, sizeof(one)).ok());
  const auto start = Clock::now();
  std::thread closer([&] {
    std::this_thread::sleep_for(milliseconds(200));
    ranks[0].reset();  // rank 0 goes away while rank 1 waits for tag 2
  });
  int v = 0;
  ASSERT_TRUE(ranks[1]->recv(0, 1, &v, sizeof(v)).ok());  // what was sent before the close still arrives
  EXPECT_EQ(v, 1);
  Status st = ranks[1]->recv(0, 2, &v, sizeof(v));
  closer.join();
  EXPECT_EQ(st.code(), Errc::RemoteError) << st.message();
  EXPECT_NE(st.message().find("rank 0"), std::string::npos) << st.message();
  EXPECT_LT(secondsSince(start), 20.0);
}

// Holds the right secret but claims something a rank's listener must refuse: the handshake itself fails.
Status impostorAtRank(const UniqueId& id, const sockaddr_storage& at, boot::ConnKind kind, int rank, int nRanks) {
  Result<net::Socket> s = net::Socket::connect(at, {}, Deadline(milliseconds(5000)), nullptr);
  if (!s.ok()) return s.status();
  return boot::clientHandshake(*s, boot::Credentials{id.secret, id.magic}, kind, rank, nRanks, nullptr,
                               Deadline(milliseconds(10000)), nullptr)
      .status();
}

TEST(BootstrapTest, StrangerAtARankListenerIsRejectedAndP2pCarriesOn) {
  const BootstrapOptions options = testOptions();
  const UniqueId id = freshId(options);
  auto ranks = joinAll(id, 2, options);
  strangerSendsGarbage(ranks[1]->localAddress());
  strangerStaysSilent(ranks[1]->localAddress());
  strangerHasWrongSecret(UniqueId{ranks[1]->localAddress(), id.secret, id.magic, false, {}}, 0, 2);
  EXPECT_EQ(impostorAtRank(id, ranks[1]->localAddress(), boot::ConnKind::Peer, 1, 2).code(), Errc::RemoteError);
  EXPECT_EQ(impostorAtRank(id, ranks[1]->localAddress(), boot::ConnKind::Peer, 0, 3).code(), Errc::RemoteError);
  EXPECT_EQ(impostorAtRank(id, ranks[1]->localAddress(), boot::ConnKind::RootJoin, 0, 2).code(), Errc::RemoteError);
  EXPECT_EQ(impostorAtRank(id, ranks[1]->localAddress(), boot::ConnKind::GroupJoin, 1, 2).code(), Errc::RemoteError);
  const int v = 42;
  ASSERT_TRUE(ranks[0]->send(1, 3, &v, sizeof(v)).ok());
  int got = 0;
  ASSERT_TRUE(ranks[1]->recv(0, 3, &got, sizeof(got)).ok());
  EXPECT_EQ(got, 42);
}

TEST(BootstrapTest, InitRejectsBadRanks) {
  const BootstrapOptions options = testOptions();
  UniqueId id{};
  EXPECT_EQ(Bootstrap::init(id, 2, 2, options).status().code(), Errc::InvalidArgument);
  EXPECT_EQ(Bootstrap::init(id, -1, 2, options).status().code(), Errc::InvalidArgument);
  EXPECT_EQ(Bootstrap::init(id, 0, 0, options).status().code(), Errc::InvalidArgument);
}

}  // namespace
}  // namespace cfx::transport
