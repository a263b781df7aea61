// SPDX-License-Identifier: Apache-2.0
// The bootstrap wire parsers and the handshake's replay and cross-session protection: pure functions, and the
// real ServerHandshake state machine driven over a socketpair by a hand-played client.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/crypto.h"
#include "transport/bootstrap/wire.h"

namespace cfx::transport::boot {
namespace {

using std::chrono::milliseconds;
using Nonce = std::array<uint8_t, kNonceBytes>;

Credentials sampleCredentials(uint8_t fill = 0x3c) {
  Credentials c;
  c.secret.fill(fill);
  c.commMagic = 0xfeedfacecafebeefull;
  return c;
}

Nonce nonceFilledWith(uint8_t v) {
  Nonce n;
  n.fill(v);
  return n;
}

std::array<uint8_t, kAuthBytes> auth(const Credentials& cred, const Nonce& serverNonce, int rank = 2, int nRanks = 5) {
  Result<std::array<uint8_t, kAuthBytes>> a =
      encodeAuth(cred, serverNonce, ConnKind::Peer, rank, nRanks, nonceFilledWith(0x77));
  EXPECT_TRUE(a.ok()) << a.status().message();
  return a.ok() ? *a : std::array<uint8_t, kAuthBytes>{};
}

TEST(BootstrapWire, AuthIsAcceptedForItsOwnChallengeOnly) {
  const Credentials cred = sampleCredentials();
  const Nonce serverNonce = nonceFilledWith(1);
  const auto bytes = auth(cred, serverNonce);
  Result<Auth> ok = checkAuth(cred, serverNonce, bytes);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->kind, ConnKind::Peer);
  EXPECT_EQ(ok->rank, 2);
  EXPECT_EQ(ok->nRanks, 5);
  EXPECT_EQ(ok->clientNonce, nonceFilledWith(0x77));

  // The same bytes replayed against any other challenge: the server's nonce is fresh per connection.
  Result<Auth> replayed = checkAuth(cred, nonceFilledWith(2), bytes);
  ASSERT_FALSE(replayed.ok());
  EXPECT_EQ(replayed.status().code(), Errc::RemoteError);
  EXPECT_NE(replayed.status().message().find("wrong HMAC"), std::string::npos) << replayed.status().message();
}

TEST(BootstrapWire, AuthFromAnotherSessionIsRefused) {
  const Nonce serverNonce = nonceFilledWith(1);
  const Credentials mine = sampleCredentials();
  Credentials otherSecret = mine;
  otherSecret.secret[31] ^= 1;
  EXPECT_FALSE(checkAuth(mine, serverNonce, auth(otherSecret, serverNonce)).ok());
  Credentials otherCommunicator = mine;  // same secret, another communicator from the same NCCL_COMM_ID text
  otherCommunicator.commMagic ^= 1;
  EXPECT_FALSE(checkAuth(mine, serverNonce, auth(otherCommunicator, serverNonce)).ok());
}

TEST(BootstrapWire, TamperedOrMalformedAuthIsRefused) {
  const Credentials cred = sampleCredentials();
  const Nonce serverNonce = nonceFilledWith(1);
  const auto good = auth(cred, serverNonce);

  auto otherRank = good;
  otherRank[11] ^= 1;  // rank's low byte: a man in the middle cannot re-address a rank's connection
  EXPECT_FALSE(checkAuth(cred, serverNonce, otherRank).ok());
  auto unknownKind = good;
  unknownKind[6] = 9;  // kind u16, little-endian
  Result<Auth> kind = checkAuth(cred, serverNonce, unknownKind);
  ASSERT_FALSE(kind.ok());
  EXPECT_NE(kind.status().message().find("unknown connection kind 9"), std::string::npos) << kind.status().message();
  auto otherVersion = good;
  otherVersion[4] = 2;  // the protocol before several roots
  Result<Auth> version = checkAuth(cred, serverNonce, otherVersion);
  ASSERT_FALSE(version.ok());
  EXPECT_NE(version.status().message().find("protocol 2, this library speaks 3"), std::string::npos)
      << version.status().message();
  auto unknownProtection = good;
  unknownProtection[16] = 3;
  EXPECT_FALSE(checkAuth(cred, serverNonce, unknownProtection).ok());
  auto lowered = good;
  lowered[16] = static_cast<uint8_t>(crypto::Protection::Off);  // a man in the middle lowering the client's wish
  EXPECT_FALSE(checkAuth(cred, serverNonce, lowered).ok());
  EXPECT_FALSE(checkAuthPrefix(std::span<const uint8_t>(otherVersion.data(), kAuthPrefixBytes)).ok());
  EXPECT_FALSE(checkAuth(cred, serverNonce, std::span<const uint8_t>(good.data(), kAuthBytes - 1)).ok());
  const uint8_t http[] = "GET / HTTP/1.1\r\n";
  EXPECT_FALSE(checkAuthPrefix(std::span<const uint8_t>(http, kAuthPrefixBytes)).ok());
}

TEST(BootstrapWire, ServerProofBindsBothNoncesAndTheCommunicator) {
  const Credentials cred = sampleCredentials();
  const Nonce clientNonce = nonceFilledWith(5);
  const Nonce serverNonce = nonceFilledWith(6);
  const Challenge challenge{serverNonce, cred.protection};
  Result<std::array<uint8_t, kProofBytes>> proof = encodeServerProof(cred, clientNonce, serverNonce, cred.protection);
  ASSERT_TRUE(proof.ok());
  EXPECT_TRUE(checkServerProof(cred, clientNonce, challenge, *proof).ok());
  // A proof recorded from an earlier connection answers another client nonce: worthless now.
  EXPECT_FALSE(checkServerProof(cred, nonceFilledWith(7), challenge, *proof).ok());
  EXPECT_FALSE(checkServerProof(cred, clientNonce, Challenge{nonceFilledWith(7), cred.protection}, *proof).ok());
  Credentials other = cred;
  other.commMagic ^= 1;
  EXPECT_FALSE(checkServerProof(other, clientNonce, challenge, *proof).ok());
  EXPECT_FALSE(checkServerProof(cred, clientNonce, challenge, std::span<const uint8_t>(proof->data(), 31)).ok());
  // The server's protection as the client saw it is bound too: a challenge rewritten on the way fails.
  EXPECT_FALSE(checkServerProof(cred, clientNonce, Challenge{serverNonce, crypto::Protection::Off}, *proof).ok());
  // A client's Auth MAC over the same nonces can never pass as the server's proof (different labels).
  const auto a = auth(cred, serverNonce);
  EXPECT_FALSE(checkServerProof(cred, clientNonce, challenge,
                                std::span<const uint8_t>(a.data() + kAuthBytes - kProofBytes, kProofBytes))
                   .ok());
}

TEST(BootstrapWire, ChallengeIsLengthAndVersionChecked) {
  const auto challenge = encodeChallenge(nonceFilledWith(9), crypto::Protection::Integrity);
  Result<Challenge> n = decodeChallenge(challenge);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->nonce, nonceFilledWith(9));
  EXPECT_EQ(n->protection, crypto::Protection::Integrity);
  auto unknown = challenge;
  unknown[6] = 7;
  EXPECT_FALSE(decodeChallenge(unknown).ok());
  EXPECT_FALSE(decodeChallenge(std::span<const uint8_t>(challenge.data(), kChallengeBytes - 1)).ok());
  auto future = challenge;
  future[5] = 7;
  EXPECT_FALSE(decodeChallenge(future).ok());
}

TEST(BootstrapWire, SpanParsersCheckTheLengthFirst) {
  uint8_t hdr[kFrameHeaderBytes + 1];
  encodeFrameHeader(FrameHeader{FrameKind::User, 1, 2}, hdr);
  EXPECT_TRUE(decodeFrameHeader(std::span<const uint8_t>(hdr, kFrameHeaderBytes), 2).ok());
  EXPECT_FALSE(decodeFrameHeader(std::span<const uint8_t>(hdr, kFrameHeaderBytes), 1).ok());
  EXPECT_FALSE(decodeFrameHeader(std::span<const uint8_t>(hdr, kFrameHeaderBytes - 1), 2).ok());
  EXPECT_FALSE(decodeFrameHeader(std::span<const uint8_t>(hdr, kFrameHeaderBytes + 1), 2).ok());
  uint8_t addr[kAddressBytes + 1] = {};
  EXPECT_FALSE(decodeAddress(std::span<const uint8_t>(addr, kAddressBytes)).ok());  // family 0
  EXPECT_FALSE(decodeAddress(std::span<const uint8_t>(addr, kAddressBytes + 1)).ok());
}

// ---- the root's answer --------------------------------------------------------------------------------------

Result<RootAnswer> answer(FrameKind kind, uint64_t tag, const std::string& text, int nRanks = 2) {
  const std::vector<uint8_t> payload(text.begin(), text.end());
  return decodeRootAnswer(FrameHeader{kind, tag, payload.size()}, payload, nRanks);
}

TEST(BootstrapWire, RootErrorCodesAreOnesACallerActsOn) {
  Result<RootAnswer> timeout = answer(FrameKind::Error, static_cast<uint64_t>(Errc::Timeout), "missing rank 1");
  ASSERT_TRUE(timeout.ok());
  EXPECT_EQ(timeout->code, Errc::Timeout);
  EXPECT_EQ(timeout->text, "missing rank 1");
  // InProgress from the root would make a non-blocking init look pending forever; Ok would be no error at all.
  for (const Errc odd : {Errc::InProgress, Errc::Ok, Errc::UnhandledCudaError}) {
    Result<RootAnswer> a = answer(FrameKind::Error, static_cast<uint64_t>(odd), "x");
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->code, Errc::RemoteError) << static_cast<int>(odd);
  }
  Result<RootAnswer> huge = answer(FrameKind::Error, 1ull << 40, "x");
  ASSERT_TRUE(huge.ok());
  EXPECT_EQ(huge->code, Errc::RemoteError);
}

TEST(BootstrapWire, RootTextIsBoundedAndCannotForgeLogLines) {
  Result<RootAnswer> a = answer(FrameKind::Status, 0, "rank 3\nhost:1:1 [0] NCCL INFO forged\x1b[2J");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->text, "rank 3?host:1:1 [0] NCCL INFO forged?[2J");
  EXPECT_FALSE(answer(FrameKind::Error, 2, std::string(kMaxControlBytes + 1, 'a'), 1000).ok());
}

TEST(BootstrapWire, RootTableIsCheckedEntryByEntry) {
  std::vector<uint8_t> table(tablePayloadBytes(2));
  table.back() = 0x5a;  // the session nonce's last byte
  sockaddr_storage a{};
  a.ss_family = AF_INET;
  reinterpret_cast<sockaddr_in&>(a).sin_port = htons(1234);
  encodeAddress(a, table.data());
  encodeAddress(a, table.data() + kAddressBytes);
  Result<RootAnswer> ok = decodeRootAnswer(FrameHeader{FrameKind::Table, 2, table.size()}, table, 2);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->table.size(), 2u);
  EXPECT_EQ(ok->sessionNonce[kSessionNonceBytes - 1], 0x5a);
  EXPECT_FALSE(decodeRootAnswer(FrameHeader{FrameKind::Table, 3, table.size()}, table, 2).ok());
  EXPECT_FALSE(decodeRootAnswer(FrameHeader{FrameKind::Table, 2, table.size() + 1}, table, 2).ok());
  table[kAddressBytes + 1] = 9;  // family code of rank 1
  Result<RootAnswer> bad = decodeRootAnswer(FrameHeader{FrameKind::Table, 2, table.size()}, table, 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("rank 1"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(decodeRootAnswer(FrameHeader{FrameKind::User, 0, 0}, {}, 2).ok());
}

// ---- the real server state machine, against a hand-played client --------------------------------------------

class ServerUnderTest {
 public:
  // Keeps its own copy of the credentials: the handshake holds a pointer to them, as it does to the root's.
  explicit ServerUnderTest(const Credentials& cred) : cred_(cred) {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
    client_.reset(fds[1]);
    sockaddr_storage peer{};
    peer.ss_family = AF_UNIX;
    hs_ = std::make_unique<ServerHandshake>(net::Socket(net::UniqueFd(fds[0]), peer), cred_, milliseconds(5000));
  }

  // Reads exactly n bytes the server sent, progressing it meanwhile (bounded: the server is in this thread).
  std::vector<uint8_t> read(size_t n) {
    std::vector<uint8_t> out;
    const Deadline deadline(milliseconds(5000));
    while (out.size() < n && !deadline.expired()) {
      (void)hs_->progress();
      uint8_t buf[128];
      const ssize_t got = ::recv(client_.get(), buf, std::min(sizeof(buf), n - out.size()), MSG_DONTWAIT);
      if (got > 0) out.insert(out.end(), buf, buf + got);
      if (got == 0) break;
      if (got < 0) std::this_thread::sleep_for(milliseconds(1));
    }
    return out;
  }

  void write(std::span<const uint8_t> bytes) {
    ASSERT_EQ(::send(client_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }

  ServerHandshake::State settle() {
    const Deadline deadline(milliseconds(5000));
    while (hs_->progress() == ServerHandshake::State::Running && !deadline.expired()) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    return hs_->state();
  }

  ServerHandshake& hs() { return *hs_; }

 private:
  net::UniqueFd client_;
  Credentials cred_;  // declared before hs_, which points at it
  std::unique_ptr<ServerHandshake> hs_;
};

TEST(BootstrapWire, ReplayedHandshakeTranscriptIsRefused) {
  const Credentials cred = sampleCredentials();
  // A legitimate client, played by hand, so the transcript can be recorded.
  ServerUnderTest first(cred);
  const std::vector<uint8_t> challenge = first.read(kChallengeBytes);
  Result<Challenge> serverChallenge = decodeChallenge(challenge);
  ASSERT_TRUE(serverChallenge.ok()) << serverChallenge.status().message();
  const auto recorded = auth(cred, serverChallenge->nonce, 1, 4);
  first.write(recorded);
  const std::vector<uint8_t> proof = first.read(kProofBytes);
  EXPECT_TRUE(checkServerProof(cred, nonceFilledWith(0x77), *serverChallenge, proof).ok());
  ASSERT_EQ(first.settle(), ServerHandshake::State::Done) << first.hs().failure();
  EXPECT_EQ(first.hs().rank(), 1);

  // Someone who recorded that connection replays the client's bytes to a new one: the challenge differs.
  ServerUnderTest second(cred);
  const std::vector<uint8_t> challenge2 = second.read(kChallengeBytes);
  ASSERT_EQ(challenge2.size(), kChallengeBytes);
  EXPECT_NE(challenge2, challenge) << "every connection gets a fresh nonce";
  second.write(recorded);
  ASSERT_EQ(second.settle(), ServerHandshake::State::Failed);
  EXPECT_NE(second.hs().failure().find("wrong HMAC"), std::string::npos) << second.hs().failure();
}

TEST(BootstrapWire, HandshakeWithAnotherSessionsSecretIsRefused) {
  ServerUnderTest server(sampleCredentials(0x3c));
  Result<Challenge> challenge = decodeChallenge(server.read(kChallengeBytes));
  ASSERT_TRUE(challenge.ok());
  server.write(auth(sampleCredentials(0x3d), challenge->nonce));
  ASSERT_EQ(server.settle(), ServerHandshake::State::Failed);
  EXPECT_NE(server.hs().failure().find("wrong HMAC"), std::string::npos) << server.hs().failure();
}

TEST(BootstrapWire, GarbageIsRefusedOnItsFirstWords) {
  ServerUnderTest server(sampleCredentials());
  ASSERT_EQ(server.read(kChallengeBytes).size(), kChallengeBytes);
  const uint8_t http[] = "GET /";  // 6 bytes with the NUL: no more is needed to refuse it
  server.write(http);
  ASSERT_EQ(server.settle(), ServerHandshake::State::Failed);
  EXPECT_NE(server.hs().failure().find("garbage"), std::string::npos) << server.hs().failure();
}

}  // namespace
}  // namespace cfx::transport::boot
