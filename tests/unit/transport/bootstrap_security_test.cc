// SPDX-License-Identifier: Apache-2.0
// The bootstrap against an attacker (transport layer; ranks as threads over loopback): a peer that floods a rank
// with frames nobody receives, a relay on the path to the root that rewrites the table or a rank's Hello, strangers
// who would fill the log, and a session secret that differs for every communicator even without a CFX_SECRET.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../../free_port.h"
#include "common/log.h"
#include "common/socket.h"
#include "bootstrap_test_util.h"
#include "tamper_relay.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/wire.h"

namespace cfx::transport {
namespace {

using std::chrono::milliseconds;
using testing::TamperRelay;

BootstrapOptions testOptions() { return testing::bootstrapTestOptions(); }
void runRanks(int nRanks, const std::function<void(int)>& fn) { testing::runRankThreads(nRanks, fn); }
using testing::joinAll;

TEST(BootstrapSecurity, AFloodOfFramesNobodyReceivesRefusesTheSenderAndNamesIt) {
  BootstrapOptions options = testOptions();
  options.inboxBytesPerPeer = size_t{64} << 10;
  options.inboxBytesTotal = size_t{96} << 10;
  auto ranks = joinAll(createUniqueId(options).value(), 3, options);
  const std::vector<uint8_t> block(16 << 10, 0x5c);
  std::vector<uint8_t> got(block.size());
  // Frames that are received free their room: many times the bound passes when the receiver keeps up.
  for (uint64_t tag = 0; tag < 20; ++tag) {
    ASSERT_TRUE(ranks[1]->send(0, tag, block.data(), block.size()).ok());
    ASSERT_TRUE(ranks[0]->recv(1, tag, got.data(), got.size()).ok());
  }
  // Rank 1 sends ten 16 KiB frames that rank 0 never asks for: the first four fit its 64 KiB, the fifth does not.
  for (uint64_t tag = 0; tag < 10; ++tag) {
    if (!ranks[1]->send(0, 100 + tag, block.data(), block.size()).ok()) break;  // rank 0 closed on it
  }
  EXPECT_TRUE(ranks[0]->recv(1, 100, got.data(), got.size()).ok()) << "what arrived within the bound is kept";
  const Status refused = ranks[0]->recv(1, 109, got.data(), got.size());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), Errc::RemoteError) << refused.message();
  EXPECT_NE(refused.message().find("rank 1"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("no recv of this rank has taken"), std::string::npos) << refused.message();
  // The bound in all: rank 1's three frames left hold 48 KiB; rank 2's fourth 16 KiB frame, within its own 64 KiB,
  // would bring the total to 112 KiB, past 96.
  // (Nothing of rank 2's is received before: that would make room the rest might arrive into.)
  for (uint64_t tag = 0; tag < 4; ++tag) (void)ranks[2]->send(0, 200 + tag, block.data(), block.size());
  const Status total = ranks[0]->recv(2, 203, got.data(), got.size());
  ASSERT_FALSE(total.ok());
  EXPECT_NE(total.message().find("rank 2"), std::string::npos) << total.message();
  EXPECT_NE(total.message().find("for all ranks together"), std::string::npos) << total.message();
}

TEST(BootstrapSecurity, EveryCommunicatorHasAFreshSessionSecretEvenWithoutASecret) {
  // Two runs of the same launcher job without CFX_SECRET: same address, same (empty) secret text. What they key
  // their health datagrams and data handshakes with must differ, and must not be the all-zero id secret, so
  // nothing recorded from one run verifies in the next, and a stranger who knows the id cannot forge either.
  const BootstrapOptions options = testOptions();
  std::vector<Secret> sessions;
  for (int run = 0; run < 2; ++run) {
    const std::string hostPort = "127.0.0.1:" + std::to_string(testports::freeLoopbackPort());
    const UniqueId id = uniqueIdFromAddress(hostPort, "", /*startRoot=*/true).value();
    ASSERT_TRUE(id.insecure());
    auto ranks = joinAll(id, 2, options);
    EXPECT_FALSE(ranks[0]->authenticated());
    EXPECT_EQ(ranks[0]->secret(), ranks[1]->secret());
    EXPECT_NE(ranks[0]->secret(), id.secret);
    sessions.push_back(ranks[0]->secret());
  }
  EXPECT_NE(sessions[0], sessions[1]);
}

// Rank 1 joins through a relay in front of the root that edits what passes; rank 0 joins directly (and times out
// soon where rank 1 never makes it).
Status joinThroughRelay(TamperRelay::Edit edit) {
  BootstrapOptions options = testOptions();
  options.timeout = milliseconds(3000);
  UniqueId id = createUniqueId(options).value();
  TamperRelay relay(id.root, std::move(edit));
  UniqueId viaRelay = id;
  viaRelay.root = relay.address();
  Status relayed;
  runRanks(2, [&](int r) {
    Result<std::unique_ptr<Bootstrap>> b = Bootstrap::init(r == 1 ? viaRelay : id, r, 2, options);
    if (r == 1) relayed = b.status();
  });
  return relayed;
}

TEST(BootstrapSecurity, ATableRewrittenOnTheWayIsRefused) {
  // Root to rank: Challenge (40 B), Proof (32 B), then the Table frame's 24-byte header; byte 2 of the first
  // entry is the low byte of rank 0's port: an attacker steering rank 1's connections to itself.
  const uint64_t port = boot::kChallengeBytes + boot::kProofBytes + boot::kFrameHeaderBytes + 2;
  const Status st = joinThroughRelay(testing::flipByteAt(TamperRelay::ToClient, port, 0x40));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Errc::RemoteError) << st.message();
  EXPECT_NE(st.message().find("fails authentication"), std::string::npos) << st.message();
}

TEST(BootstrapSecurity, AHelloRewrittenOnTheWayIsRefused) {
  // Rank to root: Auth (84 B), then the Hello frame: its 24-byte header, then the rank's listen address.
  const uint64_t port = boot::kAuthBytes + boot::kFrameHeaderBytes + 2;
  const Status st = joinThroughRelay(testing::flipByteAt(TamperRelay::ToServer, port, 0x40));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Errc::RemoteError) << st.message();
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(BootstrapSecurity, RejectedConnectionsAreLoggedAtAFewLinesASecond) {
  const std::string path = ::testing::TempDir() + "cfx_boot_log_" + std::to_string(getpid()) + ".txt";
  ::setenv("NCCL_DEBUG", "WARN", 1);
  ::setenv("NCCL_DEBUG_FILE", path.c_str(), 1);
  log::reset();
  {
    const BootstrapOptions options = testOptions();
    auto ranks = joinAll(createUniqueId(options).value(), 2, options);
    // A window of the rate limit of its own: earlier tests in this process may have used the current one.
    std::this_thread::sleep_for(milliseconds(1100));
    const auto stranger = [&] {
      Result<net::Socket> s = net::Socket::connect(ranks[1]->localAddress(), {}, Deadline(milliseconds(5000)), nullptr);
      ASSERT_TRUE(s.ok());
      const char kGarbage[] = "GET / HTTP/1.1\r\n\r\n";
      (void)s->sendAll(kGarbage, sizeof(kGarbage), Deadline(milliseconds(5000)), nullptr);
      uint8_t sink[64];
      (void)s->recvAll(sink, sizeof(sink), Deadline(milliseconds(5000)), nullptr);  // until the rank hangs up
    };
    for (int i = 0; i < 60; ++i) stranger();
    // The next window's first line says how many the last one dropped.
    std::this_thread::sleep_for(milliseconds(1100));
    stranger();
    const int v = 1;
    ASSERT_TRUE(ranks[0]->send(1, 1, &v, sizeof(v)).ok());
    int w = 0;
    ASSERT_TRUE(ranks[1]->recv(0, 1, &w, sizeof(w)).ok());
  }
  ::unsetenv("NCCL_DEBUG");
  ::unsetenv("NCCL_DEBUG_FILE");
  log::reset();
  const std::string text = readFile(path);
  ::unlink(path.c_str());
  size_t lines = 0;
  const std::string what = "rejected connection";
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++lines;
  // 61 strangers in two or three windows of a second: at most 5 lines a window get through, and the last says how
  // many were dropped before it.
  EXPECT_GE(lines, 1u) << text;
  EXPECT_LE(lines, 15u) << text;
  EXPECT_NE(text.find("similar lines dropped before this one"), std::string::npos) << text;
}

}  // namespace
}  // namespace cfx::transport
