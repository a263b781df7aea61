// SPDX-License-Identifier: Apache-2.0
// The tag every message of an op carries (primitives layer): which op it belongs to, what kind of op that is, and
// a digest of everything else the ranks must agree on, so that a receiver finds a mismatched call on the first
// slot it peeks and can say how the two calls differ, instead of combining garbage or hanging.
//
// Layout (64 bits, opaque to the transports except the direct flag):
//   63..44  the op's sequence number, low 20 bits (ranks differ by at most a FIFO's worth of ops)
//   43..32  the op's kind: 12 bits the caller encodes and an OpNaming names ("AllReduce(sum, float32)"); 0 for ops
//           without one (point-to-point, bare verbs)
//   31      transport::kDirectTagFlag
//   30..0   the message's size XOR a 31-bit digest of the op's parameters (count, root, codec, an ordered op's shape)
// Both sides compute the tag from their own call, so any difference shows up as unequal tags; the parts that are
// not hashed (sequence, kind) name how they differ.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace cfx::prims {

struct OpStamp {
  uint32_t kind = 0;    // 12 bits
  uint32_t params = 0;  // 31 bits
};

// Names an op for the mismatch message of its verbs. Owned by the caller, which keeps it alive while the op runs.
class OpNaming {
 public:
  // The op of kind `kind`, as far as the kind says: "AllReduce(sum, float32)".
  virtual std::string kindName(uint32_t kind) const = 0;
  // This rank's call in full: "AllReduce(sum, float32, count 1000)".
  virtual std::string call() const = 0;

 protected:
  ~OpNaming() = default;
};

inline constexpr uint64_t kTagSizeMask = 0x7fffffffu;
inline constexpr uint32_t kTagSeqMask = 0xfffffu;
inline constexpr uint32_t kTagKindMask = 0xfffu;

constexpr uint64_t makeTag(uint32_t seq, const OpStamp& stamp, size_t bytes) {
  const uint64_t high = (static_cast<uint64_t>(seq & kTagSeqMask) << 12) | (stamp.kind & kTagKindMask);
  return (high << 32) | ((static_cast<uint64_t>(bytes) ^ stamp.params) & kTagSizeMask);
}
constexpr uint32_t tagSeq(uint64_t tag) { return static_cast<uint32_t>(tag >> 44) & kTagSeqMask; }
constexpr uint32_t tagKind(uint64_t tag) { return static_cast<uint32_t>(tag >> 32) & kTagKindMask; }

// The message of a verb that expected `expectTag` from rank `peer` and peeked `inTag`: which op each side is at,
// their kinds by name, and what differs. `detail` says what this rank expected of the message (sizes, codec).
std::string describeMismatch(int peer, uint64_t inTag, uint64_t expectTag, const OpNaming* naming,
                             const std::string& detail);
// Every mismatch error starts so. The verbs' own (data has moved: the communicator revokes on them) go on with ": ";
// core's call check, which fails before any data moves, with " (CFX_CHECK_CALLS)".
inline constexpr std::string_view kMismatchText = "mismatched operation across ranks";
inline bool isMismatch(const Status& st) {
  const std::string& m = st.message();
  return st.code() == Errc::InvalidUsage && m.starts_with(kMismatchText) &&
         std::string_view(m).substr(kMismatchText.size()).starts_with(": ");
}

}  // namespace cfx::prims
