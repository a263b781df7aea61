// SPDX-License-Identifier: Apache-2.0
// Wire format of the TCP transport's connection handshake and its HMAC proofs (transport layer).
//
// Every data socket is authenticated both ways before a byte of payload is trusted. The lower rank connects:
//
//   client (lower rank)                                   server (higher rank)
//   Hello    104 B  {magic, from, to, nRanks, channel,     -> checks to/nRanks/channel/stream/session;
//                    stream, nSlots, slotBytes, nStreams,     anything else is a stranger: WARN + close
//                    minStripeBytes, socketBufferBytes,
//                    clientNonce, listener session,
//                    protection}
//                                                          <- Challenge 72 B {serverNonce, protection, 0[7],
//                                                                HMAC(secret, "server" | Hello | serverNonce |
//                                                                     protection)}
//   verifies the server's MAC (fails setup if wrong)
//   Proof     32 B  HMAC(secret, "client" | Hello | serverNonce | protection) -> verifies; a wrong proof is a
//                                                                stranger
//                                                          <- Ack 16 B {magic, code}: Ok, or why a legitimate
//                                                                peer was refused (slot geometry mismatch, ...)
//
// Both nonces are fresh per connection, so nothing recorded can be replayed, and the two MACs carry different
// labels, so neither side can be used as an oracle for the other's proof. The Hello is bound into both MACs:
// a man in the middle cannot retarget a connection to another (rank, channel). The listener session (random,
// published with the listen address) keeps two transports that share a secret from accepting each other.
//
// Frame protection (CFX_WIRE_PROTECTION): each end states its own (the client in its Hello, the server in its
// Challenge, each bound by its MAC); the socket's stripes then carry the stricter of the two (tcp_stripe.h), with
// one AES-GCM key per direction: HMAC(secret, "cfx-tcp-v3/key" | Hello | serverNonce | protection | direction).
// A man in the middle can therefore neither lower a connection's protection nor move a frame to another socket.
//
// Integers are little-endian on the wire (common/wire.h). HMAC, nonces and the constant-time compare come from
// common/crypto.h.
#pragma once

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/crypto.h"
#include "common/status.h"
#include "transport/bootstrap/bootstrap.h"

namespace cfx::transport::tcp {

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;
inline constexpr size_t kSessionBytes = 8;
inline constexpr size_t kHelloBytes = 104;
inline constexpr size_t kChallengeBytes = kNonceBytes + 8 + kMacBytes;
inline constexpr size_t kProofBytes = kMacBytes;
inline constexpr size_t kAckBytes = 16;

using Nonce = std::array<uint8_t, kNonceBytes>;
using Mac = std::array<uint8_t, kMacBytes>;
using SessionId = std::array<uint8_t, kSessionBytes>;

// The most interfaces one rank listens on (CFX_SOCKET_RAILS): its own rail and up to three more.
inline constexpr int kMaxRailListeners = 4;

// What every rank publishes through the bootstrap's allGather: where its data listeners are. `address` is the
// rank's own rail (every link's stream 0 goes there); with rails, `extra` holds the host's other rails, in the
// order the streams of a link to the rank use them after `address` (streamAddress()).
struct ListenRecord {
  sockaddr_storage address;
  SessionId session;    // random per rank, shared by its listeners; every Hello must echo it
  uint32_t nExtra = 0;  // listeners besides `address`, at most kMaxRailListeners - 1
  sockaddr_storage extra[kMaxRailListeners - 1];
};

// How many addresses a record names (a peer's record is not trusted beyond kMaxRailListeners).
inline int listenerCount(const ListenRecord& record) {
  return 1 + static_cast<int>(std::min<uint32_t>(record.nExtra, kMaxRailListeners - 1));
}
// Where stream `stream` of a link to the record's rank connects: its rails in turn, starting with `address`, so
// that a link of as many streams as rails crosses each rail once.
inline const sockaddr_storage& streamAddress(const ListenRecord& record, int stream) {
  const int k = stream % listenerCount(record);
  return k == 0 ? record.address : record.extra[k - 1];
}

struct Hello {
  uint32_t fromRank = 0;  // the connecting (lower) rank
  uint32_t toRank = 0;
  uint32_t nRanks = 0;
  uint32_t channel = 0;
  uint32_t stream = 0;  // which socket of a striped link: 0 .. nStreams - 1
  uint32_t nSlots = 0;
  uint64_t slotBytes = 0;
  // The connecting rank decides the link's striping (it measured the round trip); the listener follows it.
  uint32_t nStreams = 1;
  uint32_t minStripeBytes = 0;
  uint64_t socketBufferBytes = 0;  // 0: kernel autotuning
  Nonce nonce{};
  SessionId session{};
  crypto::Protection protection = crypto::Protection::Off;  // what the client wants on this socket's frames
};

enum class AckCode : uint32_t {
  Ok = 0,
  GeometryMismatch = 1,  // the two ranks use different CFX_TCP_SLOT_BYTES / CFX_TCP_SLOTS
  Duplicate = 2,         // this (rank, channel, stream) is already connected
  StreamMismatch = 3,    // nStreams differs from the other connections of the same peer
};

std::array<uint8_t, kHelloBytes> encodeHello(const Hello& hello);
// InvalidArgument naming what is wrong (bad magic: not a Conflux TCP peer, or another version). The span form
// checks the length first; it is what tests/fuzz drives, and the pointer form reads exactly kHelloBytes.
Result<Hello> decodeHello(std::span<const uint8_t> bytes);
Result<Hello> decodeHello(const uint8_t* bytes);

std::array<uint8_t, kAckBytes> encodeAck(AckCode code);
// InvalidArgument when the bytes are not an Ack (span form: also when they are not kAckBytes long).
Result<AckCode> decodeAck(std::span<const uint8_t> bytes);
Result<AckCode> decodeAck(const uint8_t* bytes);
const char* ackCodeName(AckCode code);

// The server's Challenge: its nonce, its protection and its MAC.
struct Challenge {
  Nonce nonce{};
  crypto::Protection protection = crypto::Protection::Off;
  Mac mac{};
};
std::array<uint8_t, kChallengeBytes> encodeChallenge(const Challenge& challenge);
// InvalidArgument for a wrong length or an unknown protection; the MAC is checked by the caller (serverMac).
Result<Challenge> decodeChallenge(std::span<const uint8_t> bytes);

// The server's and the client's proofs over the encoded Hello, the server's nonce and the server's protection.
// SystemError only if OpenSSL fails.
Result<Mac> serverMac(const Secret& secret, const uint8_t* hello, const Nonce& serverNonce,
                      crypto::Protection serverProtection);
Result<Mac> clientMac(const Secret& secret, const uint8_t* hello, const Nonce& serverNonce,
                      crypto::Protection serverProtection);
// Constant time, so a stranger cannot learn a MAC byte by byte from response timing.
bool macEquals(const Mac& expected, const uint8_t* received);

// The frame ciphers of an authenticated socket: `send` seals this end's stripes, `recv` opens the peer's. Both
// ends pass the same Hello bytes, server nonce and (stricter) protection.
using SocketKeys = crypto::FrameKeys;
Result<SocketKeys> socketKeys(const Secret& secret, const uint8_t* hello, const Nonce& serverNonce,
                              crypto::Protection protection, bool isClient);

}  // namespace cfx::transport::tcp
