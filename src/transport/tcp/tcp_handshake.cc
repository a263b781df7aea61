// SPDX-License-Identifier: Apache-2.0
// Wire format of the TCP transport's connection handshake and its HMAC proofs (transport layer).
#include "transport/tcp/tcp_handshake.h"

#include <cstring>
#include <span>

#include "common/crypto.h"
#include "common/wire.h"

namespace cfx::transport::tcp {

namespace {

// The last byte is the protocol version: a peer with another version is told apart from a stranger.
// Version 2: striped links (the Hello carries the stream count, the stripe size and the socket buffers).
// Version 3: frame protection (the Hello and the Challenge carry each end's, stripes may carry a tag).
// Version 4: the setup's path agreement also carries each rank's longest round trip (tcp_transport.cc).
constexpr uint8_t kHelloMagic[8] = {'C', 'F', 'X', 'T', 'C', 'P', 'H', 4};
constexpr uint8_t kAckMagic[8] = {'C', 'F', 'X', 'T', 'C', 'P', 'A', 3};
constexpr char kServerLabel[] = "conflux tcp server proof v3";
constexpr char kClientLabel[] = "conflux tcp client proof v3";
constexpr std::string_view kKeyLabel = "cfx-tcp-v3/key";

Result<Mac> proof(const Secret& secret, const char* label, const uint8_t* hello, const Nonce& serverNonce,
                  crypto::Protection serverProtection) {
  const uint8_t protection = static_cast<uint8_t>(serverProtection);
  // The label's NUL terminator is fed too, so no label can be a prefix of label + data.
  return crypto::hmacSha256(secret, {crypto::bytesOf(std::string_view(label, std::strlen(label) + 1)),
                                     std::span<const uint8_t>(hello, kHelloBytes), serverNonce, {&protection, 1}});
}

bool knownProtection(uint8_t p) { return p <= static_cast<uint8_t>(crypto::Protection::Encryption); }

}  // namespace

std::array<uint8_t, kHelloBytes> encodeHello(const Hello& hello) {
  std::array<uint8_t, kHelloBytes> out{};
  wire::Writer w(out);
  w.bytes(kHelloMagic, sizeof(kHelloMagic));
  w.u32(hello.fromRank);
  w.u32(hello.toRank);
  w.u32(hello.nRanks);
  w.u32(hello.channel);
  w.u32(hello.stream);
  w.u32(hello.nSlots);
  w.u64(hello.slotBytes);
  w.u32(hello.nStreams);
  w.u32(hello.minStripeBytes);
  w.u64(hello.socketBufferBytes);
  w.bytes(hello.nonce);
  w.bytes(hello.session);
  w.u8(static_cast<uint8_t>(hello.protection));
  w.zeros(7);
  return out;
}

Result<Hello> decodeHello(std::span<const uint8_t> bytes) {
  if (bytes.size() != kHelloBytes) {
    return Status::error(Errc::InvalidArgument, strprintf("a hello is %zu bytes, not %zu", kHelloBytes, bytes.size()));
  }
  return decodeHello(bytes.data());
}

Result<Hello> decodeHello(const uint8_t* bytes) {
  if (std::memcmp(bytes, kHelloMagic, sizeof(kHelloMagic) - 1) != 0) {
    return Status::error(Errc::InvalidArgument, "bad magic (not a Conflux TCP peer)");
  }
  if (bytes[sizeof(kHelloMagic) - 1] != kHelloMagic[sizeof(kHelloMagic) - 1]) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("protocol version %u, expected %u (mixed Conflux versions?)",
                                   static_cast<unsigned>(bytes[7]), static_cast<unsigned>(kHelloMagic[7])));
  }
  wire::Reader r(bytes + sizeof(kHelloMagic), kHelloBytes - sizeof(kHelloMagic));
  Hello hello;
  hello.fromRank = r.u32();
  hello.toRank = r.u32();
  hello.nRanks = r.u32();
  hello.channel = r.u32();
  hello.stream = r.u32();
  hello.nSlots = r.u32();
  hello.slotBytes = r.u64();
  hello.nStreams = r.u32();
  hello.minStripeBytes = r.u32();
  hello.socketBufferBytes = r.u64();
  r.bytes(hello.nonce);
  r.bytes(hello.session);
  const uint8_t protection = r.u8();
  if (!knownProtection(protection)) {
    return Status::error(Errc::InvalidArgument, strprintf("asks for an unknown frame protection %u", protection));
  }
  hello.protection = static_cast<crypto::Protection>(protection);
  for (int i = 0; i < 7; ++i) {
    if (r.u8() != 0) return Status::error(Errc::InvalidArgument, "a reserved byte of the hello is set");
  }
  return hello;
}

std::array<uint8_t, kChallengeBytes> encodeChallenge(const Challenge& challenge) {
  std::array<uint8_t, kChallengeBytes> out{};
  wire::Writer w(out);
  w.bytes(challenge.nonce);
  w.u8(static_cast<uint8_t>(challenge.protection));
  w.zeros(7);
  w.bytes(challenge.mac);
  return out;
}

Result<Challenge> decodeChallenge(std::span<const uint8_t> bytes) {
  if (bytes.size() != kChallengeBytes) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("a challenge is %zu bytes, not %zu", kChallengeBytes, bytes.size()));
  }
  wire::Reader r(bytes);
  Challenge c;
  r.bytes(c.nonce);
  const uint8_t protection = r.u8();
  uint8_t pad = 0;
  for (int i = 0; i < 7; ++i) pad |= r.u8();
  r.bytes(c.mac);
  if (!knownProtection(protection) || pad != 0) {
    return Status::error(Errc::InvalidArgument, strprintf("the challenge asks for an unknown frame protection %u",
                                                          protection));
  }
  c.protection = static_cast<crypto::Protection>(protection);
  return c;
}

std::array<uint8_t, kAckBytes> encodeAck(AckCode code) {
  std::array<uint8_t, kAckBytes> out{};
  wire::Writer w(out);
  w.bytes(kAckMagic, sizeof(kAckMagic));
  w.u32(static_cast<uint32_t>(code));
  return out;
}

Result<AckCode> decodeAck(std::span<const uint8_t> bytes) {
  if (bytes.size() != kAckBytes) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("a handshake acknowledgement is %zu bytes, not %zu", kAckBytes, bytes.size()));
  }
  return decodeAck(bytes.data());
}

Result<AckCode> decodeAck(const uint8_t* bytes) {
  if (std::memcmp(bytes, kAckMagic, sizeof(kAckMagic)) != 0) {
    return Status::error(Errc::InvalidArgument, "the handshake acknowledgement is malformed");
  }
  const uint32_t code = wire::getU32(bytes + 8);
  if (code > static_cast<uint32_t>(AckCode::StreamMismatch)) {
    return Status::error(Errc::InvalidArgument, strprintf("unknown handshake acknowledgement code %u", code));
  }
  return static_cast<AckCode>(code);
}

const char* ackCodeName(AckCode code) {
  switch (code) {
    case AckCode::Ok:
      return "ok";
    case AckCode::GeometryMismatch:
      return "slot geometry mismatch";
    case AckCode::Duplicate:
      return "duplicate connection";
    case AckCode::StreamMismatch:
      return "stream count differs from the link's other connections";
  }
  return "?";
}

Result<Mac> serverMac(const Secret& secret, const uint8_t* hello, const Nonce& serverNonce,
                      crypto::Protection serverProtection) {
  return proof(secret, kServerLabel, hello, serverNonce, serverProtection);
}

Result<Mac> clientMac(const Secret& secret, const uint8_t* hello, const Nonce& serverNonce,
                      crypto::Protection serverProtection) {
  return proof(secret, kClientLabel, hello, serverNonce, serverProtection);
}

Result<SocketKeys> socketKeys(const Secret& secret, const uint8_t* hello, const Nonce& serverNonce,
                              crypto::Protection protection, bool isClient) {
  const uint8_t level = static_cast<uint8_t>(protection);
  return crypto::connectionKeys(secret, protection, isClient,
                                {crypto::bytesOf(kKeyLabel), std::span<const uint8_t>(hello, kHelloBytes), serverNonce,
                                 {&level, 1}});
}

bool macEquals(const Mac& expected, const uint8_t* received) {
  return crypto::constantTimeEqual(expected, std::span<const uint8_t>(received, kMacBytes));
}

}  // namespace cfx::transport::tcp
