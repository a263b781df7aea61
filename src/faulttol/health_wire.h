// SPDX-License-Identifier: Apache-2.0
// Health datagrams (faulttol layer): the byte format of heartbeats and failure notices, and their authentication.
//
// One datagram (integers little-endian, common/wire.h), at most kMaxDatagramBytes:
//   header   magic u32 "CFXH" | version u16 | kind u16 | commTag u64 | sender u32 | receiver u32 | nRanks u32 |
//            counter u64 | known u32 | payloadBytes u32                                                 44 B
//   payload  Heartbeat, Leaving: none.
//            Revoke: origin u32 | code u32 | textLen u16 | 0 u16 | text  (origin: the rank that revoked, which the
//                    sender may be forwarding; code 0 for ncclCommRevoke, else the error (an Errc) that made origin
//                    revoke, such as InvalidUsage for a mismatched call, with its text: the reason every rank's op
//                    then fails with)
//            Failure: rank u32 | reason u32 | detectedBy u32 | pid u32 | opSeq u64 |
//                     hostLen u16 | opLen u16 | textLen u16 | 0 u16 | host | op | text  (texts clipped, not NUL-ended;
//                     a non-zero reserved u16 is rejected)
//   mac      HMAC-SHA256(secret, "cfx-health-v3" || header || payload)                                   32 B
// `secret` is the communicator's session secret (Bootstrap::secret()): drawn afresh for every communicator, so a
// datagram recorded from another one (another run of the same job) fails the MAC, and within one communicator
// each sender's counter only grows and every datagram names its receiver, so a datagram replayed to its receiver
// or redirected to another rank is dropped (HealthMonitor).
// open() checks, in this order, the size bounds, magic, version, communicator, sender and rank ranges, the
// receiver, the payload length against the datagram length, and the MAC; it never reads past the datagram.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/crypto.h"
#include "common/status.h"
#include "faulttol/health_monitor.h"

namespace cfx::ft::wire {

inline constexpr uint32_t kMagic = 0x43465848;  // "CFXH"
inline constexpr uint16_t kVersion = 3;  // 2: datagrams name their receiver; 3: a revoke carries its reason
inline constexpr size_t kHeaderBytes = 44;
inline constexpr size_t kMacBytes = 32;
inline constexpr size_t kMaxDatagramBytes = 1024;
inline constexpr size_t kMaxHostBytes = 63;
inline constexpr size_t kMaxOpBytes = 63;
inline constexpr size_t kMaxTextBytes = 700;

enum Kind : uint16_t { Heartbeat = 1, FailureNotice = 2, Leaving = 3, Revoke = 4 };

struct Header {
  uint16_t kind = Heartbeat;
  uint64_t commTag = 0;
  int sender = -1;
  int receiver = -1;
  int nRanks = 0;
  uint64_t counter = 0;
  uint32_t known = 0;  // failures the sender knows
};

std::vector<uint8_t> encodeRevoke(const RevokeNotice& r);
Result<RevokeNotice> decodeRevoke(std::span<const uint8_t> payload, int nRanks);
std::vector<uint8_t> encodeFailure(const Failure& f);
Result<Failure> decodeFailure(std::span<const uint8_t> payload, int nRanks);

// The whole datagram: header, payload and MAC. The forms with an HmacKey (the monitor's, made once from the
// secret) give the same bytes without setting the key up per datagram.
Result<std::vector<uint8_t>> seal(const Header& h, std::span<const uint8_t> payload, std::span<const uint8_t> secret);
Result<std::vector<uint8_t>> seal(const Header& h, std::span<const uint8_t> payload, crypto::HmacKey& key);
// The header and payload of an authentic datagram for rank `receiver` of communicator `commTag` of `nRanks`
// ranks; InvalidUsage (with what was wrong) for anything else.
struct Opened {
  Header header;
  std::vector<uint8_t> payload;
};
Result<Opened> open(std::span<const uint8_t> datagram, std::span<const uint8_t> secret, uint64_t commTag, int nRanks,
                    int receiver);
Result<Opened> open(std::span<const uint8_t> datagram, crypto::HmacKey& key, uint64_t commTag, int nRanks,
                    int receiver);

}  // namespace cfx::ft::wire
