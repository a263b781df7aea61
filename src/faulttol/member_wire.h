// SPDX-License-Identifier: Apache-2.0
// Membership frames (faulttol layer): what the membership master and its members say to each other over TCP
// (core/membership.h, faulttol/member_master.h).
//
// One frame (integers little-endian, common/wire.h):
//   header   magic u32 "CFXM" | version u16 | kind u16 | payloadBytes u32 | counter u64                   20 B
//   payload  per kind, fixed size (below)                                                          0..152 B
//   mac      HMAC-SHA256(key, "cfx-member-v3" || header || payload)                                   32 B
// The master opens every connection with a Challenge (a fresh 16-byte nonce) keyed with the job's secret, so a
// member knows it reached the real master. The member answers Hello with its own nonce; from then on both
// directions are keyed with the session key HMAC(secret, "cfx-member-session" || masterNonce || memberNonce), and
// each direction numbers its frames 0, 1, 2, ... (the Challenge and the Hello are frame 0 of their direction). A
// frame from another session fails its MAC; a replayed, dropped or reordered one fails its number; either closes
// the connection. Lengths are checked before anything is read, and payload fields are range-checked on decode.
//
// Payloads:
//   Challenge  nonce[16]                                                master -> member
//   Hello      nonce[16] | uuid[16] | epoch u64 | rank i32 | nRanks i32 | verdictSeq u64 | verdictOk u8 | 0[3]
//                                            member -> master (epoch 0: joining; verdict: the last one it was told)
//   Ready      epoch u64 | rebuild u8 | 0[3]    member -> master: at an epoch boundary (rebuild: its communicator
//                                                broke, so the next epoch needs a new one even with the same members)
//   Epoch      epoch u64 | rank i32 | nRanks i32 | changed u8 | 0[3] | joined u32 | left u32    master -> member
//   Id         epoch u64 | id[128] | tag[16]  member (rank 0 of a new epoch) -> master -> the other members; the id
//                                            (it holds the next communicator's secret) AES-GCM-encrypted under
//                                            HMAC(session key, "cfx-member-id" || frame counter)
//   Leave      (none)                                                   member -> master
//   Kicked     reason u32                                               master -> member, then it closes
//   Outcome    epoch u64 | seq u64 | ok u8 | 0[3] | 0 u32              member -> master: how collective #seq ended here
//   Verdict    epoch u64 | seq u64 | ok u8 | 0[3] | failedRank i32      master -> member: how it ends everywhere
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/crypto.h"
#include "common/status.h"

namespace cfx::ft::member {

inline constexpr uint32_t kMagic = 0x4346584d;  // "CFXM"
inline constexpr uint16_t kVersion = 3;
inline constexpr size_t kHeaderBytes = 20;
inline constexpr size_t kMacBytes = 32;
inline constexpr size_t kNonceBytes = 16;
inline constexpr size_t kIdBytes = 128;
inline constexpr size_t kMaxPayloadBytes = 8 + kIdBytes + crypto::kTagBytes;
inline constexpr int kMaxRanks = 1 << 20;

enum class Kind : uint16_t {
  Challenge = 1,
  Hello = 2,
  Ready = 3,
  Epoch = 4,
  Id = 5,
  Leave = 6,
  Kicked = 7,
  Outcome = 8,
  Verdict = 9,
};
const char* kindName(Kind k);

enum class KickReason : uint32_t { NotReady = 1, Replaced = 2, Protocol = 3 };

using Nonce = std::array<uint8_t, kNonceBytes>;

struct Hello {
  Nonce nonce{};
  Nonce uuid{};        // the member's identity, random, stable across reconnects
  uint64_t epoch = 0;  // the epoch it is in; 0 when joining
  int32_t rank = -1;   // its rank there
  int32_t nRanks = 0;
  uint64_t verdictSeq = 0;  // the last collective of that epoch whose verdict it received (0: none)
  bool verdictOk = false;
};

// One collective's outcome on a member (Outcome), or everywhere (Verdict).
struct Vote {
  uint64_t epoch = 0;
  uint64_t seq = 0;        // collectives of the epoch's communicator, from 1
  bool ok = false;
  int32_t failedRank = -1;  // Verdict: a member whose failure decided it, -1 when none is known (gone, timed out)
};

struct EpochNote {
  uint64_t epoch = 0;
  int32_t rank = -1;
  int32_t nRanks = 0;
  bool changed = false;  // members differ from the previous epoch: a new communicator is formed
  uint32_t joined = 0;   // members admitted at this boundary
  uint32_t left = 0;     // members gone since the previous epoch
};

struct Message {
  Kind kind = Kind::Leave;
  Nonce challenge{};  // Challenge
  Hello hello;        // Hello
  uint64_t epoch = 0;  // Ready, Id
  bool rebuild = false;  // Ready
  EpochNote note;     // Epoch
  std::array<uint8_t, kIdBytes> id{};  // Id
  uint32_t reason = 0;  // Kicked
  Vote vote;            // Outcome, Verdict
};

// The frame of `m` numbered `counter`, keyed with `key`.
Result<std::vector<uint8_t>> seal(const Message& m, uint64_t counter, std::span<const uint8_t> key);

crypto::Digest sessionKey(std::span<const uint8_t> secret, const Nonce& masterNonce, const Nonce& memberNonce);

// A frame whose header is sane, not yet authenticated.
struct Frame {
  Kind kind = Kind::Leave;
  uint64_t counter = 0;
  std::vector<uint8_t> signedBytes;  // header and payload
  std::vector<uint8_t> payload;
  crypto::Digest mac{};
};

// Accumulates a byte stream and cuts it into frames.
class FrameReader {
 public:
  void feed(std::span<const uint8_t> bytes);
  // The next whole frame, nullopt while incomplete, or InvalidUsage for a header no sender of ours writes (bad
  // magic, version, kind or length): the stream is then unusable.
  Result<std::optional<Frame>> next();
  size_t buffered() const { return buf_.size(); }

 private:
  std::vector<uint8_t> buf_;
};

// Authenticates `f` with `key` and numbers it against `expectCounter`, then decodes and range-checks its payload.
Result<Message> open(const Frame& f, std::span<const uint8_t> key, uint64_t expectCounter);
// A Hello's nonce, read before the MAC can be checked (the session key depends on it).
Result<Nonce> helloNonce(const Frame& f);

}  // namespace cfx::ft::member
