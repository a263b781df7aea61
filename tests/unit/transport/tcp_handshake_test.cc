// SPDX-License-Identifier: Apache-2.0
// The TCP transport's handshake messages and HMAC proofs, without sockets.
#include "transport/tcp/tcp_handshake.h"

#include <gtest/gtest.h>
#include <netinet/in.h>

#include "transport/tcp/tcp_connection.h"

namespace cfx::transport::tcp {
namespace {

Hello sampleHello() {
  Hello h;
  h.fromRank = 1;
  h.toRank = 3;
  h.nRanks = 4;
  h.channel = 1;
  h.stream = 0;
  h.nSlots = 8;
  h.slotBytes = 262144;
  h.nStreams = 4;
  h.minStripeBytes = 65536;
  h.socketBufferBytes = 8 << 20;
  for (size_t i = 0; i < h.nonce.size(); ++i) h.nonce[i] = static_cast<uint8_t>(i * 3 + 1);
  h.session = {9, 8, 7, 6, 5, 4, 3, 2};
  return h;
}

Secret secretFilledWith(uint8_t v) {
  Secret s;
  s.fill(v);
  return s;
}

// The proofs of a server that asks for no frame protection (most tests here are about the rest of the handshake).
Result<Mac> serverMac(const Secret& secret, const uint8_t* hello, const Nonce& nonce) {
  return tcp::serverMac(secret, hello, nonce, crypto::Protection::Off);
}
Result<Mac> clientMac(const Secret& secret, const uint8_t* hello, const Nonce& nonce) {
  return tcp::clientMac(secret, hello, nonce, crypto::Protection::Off);
}

TEST(TcpHandshake, HelloRoundTripsThroughItsWireForm) {
  const Hello in = sampleHello();
  const auto bytes = encodeHello(in);
  Result<Hello> out = decodeHello(bytes.data());
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->fromRank, in.fromRank);
  EXPECT_EQ(out->toRank, in.toRank);
  EXPECT_EQ(out->nRanks, in.nRanks);
  EXPECT_EQ(out->channel, in.channel);
  EXPECT_EQ(out->stream, in.stream);
  EXPECT_EQ(out->nSlots, in.nSlots);
  EXPECT_EQ(out->slotBytes, in.slotBytes);
  EXPECT_EQ(out->nStreams, in.nStreams);
  EXPECT_EQ(out->minStripeBytes, in.minStripeBytes);
  EXPECT_EQ(out->socketBufferBytes, in.socketBufferBytes);
  EXPECT_EQ(out->nonce, in.nonce);
  EXPECT_EQ(out->session, in.session);
  EXPECT_EQ(out->protection, in.protection);
}

TEST(TcpHandshake, HelloAndChallengeRefuseUnknownProtections) {
  Hello h = sampleHello();
  h.protection = crypto::Protection::Encryption;
  auto bytes = encodeHello(h);
  ASSERT_TRUE(decodeHello(bytes.data()).ok());
  EXPECT_EQ(decodeHello(bytes.data())->protection, crypto::Protection::Encryption);
  bytes[96] = 3;
  EXPECT_FALSE(decodeHello(bytes.data()).ok());
  bytes[96] = 0;
  bytes[103] = 1;  // a reserved byte
  EXPECT_FALSE(decodeHello(bytes.data()).ok());

  Challenge c;
  c.nonce.fill(7);
  c.protection = crypto::Protection::Integrity;
  c.mac.fill(9);
  auto wire = encodeChallenge(c);
  Result<Challenge> back = decodeChallenge(wire);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->nonce, c.nonce);
  EXPECT_EQ(back->protection, c.protection);
  EXPECT_EQ(back->mac, c.mac);
  wire[32] = 9;
  EXPECT_FALSE(decodeChallenge(wire).ok());
  EXPECT_FALSE(decodeChallenge(std::span<const uint8_t>(wire.data(), kChallengeBytes - 1)).ok());
}

TEST(TcpHandshake, ProofsBindTheServersProtectionSoNobodyCanLowerIt) {
  const auto hello = encodeHello(sampleHello());
  Nonce nonce{};
  nonce.fill(0x11);
  const Secret secret = secretFilledWith(0x5a);
  // A man in the middle who rewrites the challenge's protection from integrity to off fails the server's MAC,
  // and the client's proof over what it saw fails at the server.
  const Mac server = tcp::serverMac(secret, hello.data(), nonce, crypto::Protection::Integrity).value();
  EXPECT_FALSE(macEquals(tcp::serverMac(secret, hello.data(), nonce, crypto::Protection::Off).value(), server.data()));
  const Mac client = tcp::clientMac(secret, hello.data(), nonce, crypto::Protection::Off).value();
  EXPECT_FALSE(
      macEquals(tcp::clientMac(secret, hello.data(), nonce, crypto::Protection::Integrity).value(), client.data()));
}

TEST(TcpHandshake, SocketKeysPairUpAcrossTheTwoEndsAndDifferByDirection) {
  const auto hello = encodeHello(sampleHello());
  Nonce nonce{};
  nonce.fill(0x33);
  const Secret secret = secretFilledWith(0x5a);
  SocketKeys client = socketKeys(secret, hello.data(), nonce, crypto::Protection::Integrity, true).value();
  SocketKeys server = socketKeys(secret, hello.data(), nonce, crypto::Protection::Integrity, false).value();
  std::vector<uint8_t> payload(100, 0x5c);
  const uint8_t header[4] = {1, 2, 3, 4};
  uint8_t tag[crypto::kTagBytes];
  ASSERT_TRUE(client.send.seal(header, payload.data(), payload.data(), payload.size(), tag).ok());
  EXPECT_TRUE(server.recv.open(header, payload.data(), payload.size(), tag).value());
  // The same frame sealed by the server's send key does not open as the client's: each direction has its own.
  ASSERT_TRUE(server.send.seal(header, payload.data(), payload.data(), payload.size(), tag).ok());
  EXPECT_FALSE(server.recv.open(header, payload.data(), payload.size(), tag).value());
}

TEST(TcpHandshake, HelloIntegersAreLittleEndianOnTheWire) {
  Hello h = sampleHello();
  h.slotBytes = 0x0102030405060708ull;
  const auto bytes = encodeHello(h);
  EXPECT_EQ(bytes[32], 0x08);
  EXPECT_EQ(bytes[39], 0x01);
  EXPECT_EQ(bytes[8], 1);  // fromRank
}

TEST(TcpHandshake, DecodeRejectsGarbageAndOtherProtocolVersions) {
  std::array<uint8_t, kHelloBytes> garbage{};
  garbage.fill(0xab);
  Result<Hello> bad = decodeHello(garbage.data());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a Conflux TCP peer"), std::string::npos);

  auto other = encodeHello(sampleHello());
  other[7] = 99;  // the version byte
  Result<Hello> version = decodeHello(other.data());
  ASSERT_FALSE(version.ok());
  EXPECT_NE(version.status().message().find("version"), std::string::npos);
}

TEST(TcpHandshake, AckRoundTripsAndRejectsGarbage) {
  for (AckCode code : {AckCode::Ok, AckCode::GeometryMismatch, AckCode::Duplicate}) {
    const auto bytes = encodeAck(code);
    Result<AckCode> back = decodeAck(bytes.data());
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back.value(), code);
  }
  auto unknown = encodeAck(AckCode::Ok);
  unknown[8] = 77;
  EXPECT_FALSE(decodeAck(unknown.data()).ok());
  std::array<uint8_t, kAckBytes> zeros{};
  EXPECT_FALSE(decodeAck(zeros.data()).ok());
}

TEST(TcpHandshake, ProofsDependOnSecretRoleHelloAndNonce) {
  const auto hello = encodeHello(sampleHello());
  Nonce nonce{};
  nonce.fill(0x11);
  const Secret secret = secretFilledWith(0x5a);

  const Mac server = serverMac(secret, hello.data(), nonce).value();
  const Mac client = clientMac(secret, hello.data(), nonce).value();
  EXPECT_NE(server, client) << "the two roles must not share a proof, or one could reflect the other's";
  EXPECT_EQ(server, serverMac(secret, hello.data(), nonce).value());
  EXPECT_TRUE(macEquals(server, server.data()));
  EXPECT_FALSE(macEquals(server, client.data()));

  EXPECT_NE(server, serverMac(secretFilledWith(0x5b), hello.data(), nonce).value());
  auto otherHello = hello;
  otherHello[20] ^= 1;  // another channel
  EXPECT_NE(server, serverMac(secret, otherHello.data(), nonce).value());
  Nonce otherNonce = nonce;
  otherNonce[31] ^= 1;
  EXPECT_NE(client, clientMac(secret, hello.data(), otherNonce).value());
}

TEST(TcpHandshake, ProofRecordedOnOneConnectionIsRefusedOnAnother) {
  const auto hello = encodeHello(sampleHello());
  const Secret secret = secretFilledWith(0x5a);
  Nonce first{};
  first.fill(0x21);
  const Mac recorded = clientMac(secret, hello.data(), first).value();
  // The replayer re-sends the same Hello; the server draws a fresh nonce, so the recorded proof fails.
  Nonce second = first;
  second[0] ^= 0x80;
  EXPECT_FALSE(macEquals(clientMac(secret, hello.data(), second).value(), recorded.data()));
  // Nor does a recorded server challenge convince a client whose Hello carries a fresh client nonce.
  const Mac serverRecorded = serverMac(secret, hello.data(), first).value();
  Hello fresh = sampleHello();
  fresh.nonce[0] ^= 1;
  EXPECT_FALSE(macEquals(serverMac(secret, encodeHello(fresh).data(), first).value(), serverRecorded.data()));
}

TEST(TcpHandshake, ProofFromAnotherSessionIsRefused) {
  const Hello h = sampleHello();
  const auto hello = encodeHello(h);
  Nonce nonce{};
  nonce.fill(0x42);
  const Mac mine = clientMac(secretFilledWith(0x5a), hello.data(), nonce).value();
  EXPECT_FALSE(macEquals(mine, clientMac(secretFilledWith(0x5b), hello.data(), nonce).value().data()))
      << "another unique id's secret";
  Hello otherListener = h;
  otherListener.session[0] ^= 1;
  EXPECT_FALSE(
      macEquals(mine, clientMac(secretFilledWith(0x5a), encodeHello(otherListener).data(), nonce).value().data()))
      << "another listener session under the same secret";
}

TEST(TcpHandshake, StreamsTakeTheRailsOfTheirPeerInTurn) {
  const auto at = [](uint16_t port) {
    sockaddr_storage a{};
    auto& in = reinterpret_cast<sockaddr_in&>(a);
    in.sin_family = AF_INET;
    in.sin_port = htons(port);
    return a;
  };
  const auto port = [](const sockaddr_storage& a) { return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port); };
  ListenRecord one{};
  one.address = at(100);
  EXPECT_EQ(listenerCount(one), 1);
  for (int s = 0; s < 5; ++s) EXPECT_EQ(port(streamAddress(one, s)), 100) << "stream " << s;

  ListenRecord three{};
  three.address = at(100);
  three.extra[0] = at(101);
  three.extra[1] = at(102);
  three.nExtra = 2;
  EXPECT_EQ(listenerCount(three), 3);
  const int expected[] = {100, 101, 102, 100, 101, 102, 100};
  for (int s = 0; s < 7; ++s) EXPECT_EQ(port(streamAddress(three, s)), expected[s]) << "stream " << s;

  // A record announcing more listeners than it can hold is read only as far as it goes.
  three.nExtra = 1000;
  EXPECT_EQ(listenerCount(three), kMaxRailListeners);
  EXPECT_EQ(port(streamAddress(three, kMaxRailListeners)), 100);
}

TEST(TcpHandshake, SpanDecodersCheckTheLength) {
  const auto hello = encodeHello(sampleHello());
  EXPECT_TRUE(decodeHello(std::span<const uint8_t>(hello)).ok());
  EXPECT_FALSE(decodeHello(std::span<const uint8_t>(hello.data(), kHelloBytes - 1)).ok());
  const auto ack = encodeAck(AckCode::Ok);
  EXPECT_TRUE(decodeAck(std::span<const uint8_t>(ack)).ok());
  EXPECT_FALSE(decodeAck(std::span<const uint8_t>(ack.data(), kAckBytes - 1)).ok());
}

}  // namespace
}  // namespace cfx::transport::tcp
