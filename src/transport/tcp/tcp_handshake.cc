// SPDX-License-Identifier: Apache-2.0
// Wire format of the TCP transport's connection handshake and its HMAC proofs (transport layer).
#include "transport/tcp/tcp_handshake.h"

#include <cstring>
#include <span>

#include "common/crypto.h"

namespace cfx::transport::tcp {

namespace {

// The last byte is the protocol version: a peer with another version is told apart from a stranger.
// Version 2: striped links (the Hello carries the stream count, the stripe size and the socket buffers).
constexpr uint8_t kHelloMagic[8] = {'C', 'F', 'X', 'T', 'C', 'P', 'H', 2};
constexpr uint8_t kAckMagic[8] = {'C', 'F', 'X', 'T', 'C', 'P', 'A', 2};
constexpr char kServerLabel[] = "conflux tcp server proof v1";
constexpr char kClientLabel[] = "conflux tcp client proof v1";

void putU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void putU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t getU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t getU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

Result<Mac> proof(const Secret& secret, const char* label, const uint8_t* hello, const Nonce& serverNonce) {
  // The label's NUL terminator is fed too, so no label can be a prefix of label + data.
  return crypto::hmacSha256(secret, {crypto::bytesOf(std::string_view(label, std::strlen(label) + 1)),
                                     std::span<const uint8_t>(hello, kHelloBytes), serverNonce});
}

}  // namespace

std::array<uint8_t, kHelloBytes> encodeHello(const Hello& hello) {
  std::array<uint8_t, kHelloBytes> out{};
  uint8_t* p = out.data();
  std::memcpy(p, kHelloMagic, sizeof(kHelloMagic));
  putU32(p + 8, hello.fromRank);
  putU32(p + 12, hello.toRank);
  putU32(p + 16, hello.nRanks);
  putU32(p + 20, hello.channel);
  putU32(p + 24, hello.stream);
  putU32(p + 28, hello.nSlots);
  putU64(p + 32, hello.slotBytes);
  putU32(p + 40, hello.nStreams);
  putU32(p + 44, hello.minStripeBytes);
  putU64(p + 48, hello.socketBufferBytes);
  std::memcpy(p + 56, hello.nonce.data(), kNonceBytes);
  std::memcpy(p + 88, hello.session.data(), kSessionBytes);
  static_assert(56 + kNonceBytes + kSessionBytes == kHelloBytes);
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
  Hello hello;
  hello.fromRank = getU32(bytes + 8);
  hello.toRank = getU32(bytes + 12);
  hello.nRanks = getU32(bytes + 16);
  hello.channel = getU32(bytes + 20);
  hello.stream = getU32(bytes + 24);
  hello.nSlots = getU32(bytes + 28);
  hello.slotBytes = getU64(bytes + 32);
  hello.nStreams = getU32(bytes + 40);
  hello.minStripeBytes = getU32(bytes + 44);
  hello.socketBufferBytes = getU64(bytes + 48);
  std::memcpy(hello.nonce.data(), bytes + 56, kNonceBytes);
  std::memcpy(hello.session.data(), bytes + 88, kSessionBytes);
  return hello;
}

std::array<uint8_t, kAckBytes> encodeAck(AckCode code) {
  std::array<uint8_t, kAckBytes> out{};
  std::memcpy(out.data(), kAckMagic, sizeof(kAckMagic));
  putU32(out.data() + 8, static_cast<uint32_t>(code));
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
  const uint32_t code = getU32(bytes + 8);
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

Result<Mac> serverMac(const Secret& secret, const uint8_t* hello, const Nonce& serverNonce) {
  return proof(secret, kServerLabel, hello, serverNonce);
}

Result<Mac> clientMac(const Secret& secret, const uint8_t* hello, const Nonce& serverNonce) {
  return proof(secret, kClientLabel, hello, serverNonce);
}

bool macEquals(const Mac& expected, const uint8_t* received) {
  return crypto::constantTimeEqual(expected, std::span<const uint8_t>(received, kMacBytes));
}

}  // namespace cfx::transport::tcp
