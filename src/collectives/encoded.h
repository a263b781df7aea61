// SPDX-License-Identifier: Apache-2.0
// Building blocks of the compressed collectives (collectives layer): framed bytes in memory, and the two phases of
// quantise-once over any group of ranks.
//
// Framed bytes are a codec message as the wire carries it (prims.h Encoded): the codec's pieces of
// pieceElems(slice) values back to back. An owner that encodes a result once keeps it framed, decodes its own copy
// from those bytes, and sends them to everyone as they are, so every rank decodes the same bytes into the same bits.
//
// Quantise-once over a group of G ranks, each holding a buffer of `count` values cut into G chunks (EvenSplit):
//   reduceToOwners: every rank encodes chunk q of its values once and sends it to the group's q-th rank; that owner
//     sums its own chunk (as fp32) and the decoded chunks of the others in a fixed order (its successors in the
//     group, in turn) into an fp32 accumulator. Two roundings touch an element on its way: its sender's encoding and
//     the fp32 sum.
//   shareFromOwners: every owner sends its framed chunk to every other rank of the group, which decodes it into
//     place.
// Both phases are all-to-all patterns run as G - 1 shifted steps: in step s every rank sends to the rank s places
// before it and receives from the one s places after, so every link carries one flow at a time in each direction
// (all flows at once made three senders converge on each receiver's port of a 4-host switch, and the bed's shaped
// queues dropped them: 70 % of line rate against 90 %). The owner thus sums its chunk in the fixed order me + 1,
// me + 2, ..., which makes the sum deterministic. A step's send and receive are strands of their own, so they cannot
// deadlock on each other.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/collective.h"

namespace cfx::coll {

// How a codec message of this op is cut: pieces of pieceElems values, as every verb of `prims` cuts it.
struct Framing {
  const compress::Codec* codec = nullptr;
  size_t pieceElems = 0;
  size_t bytes(size_t count) const { return codec->framedBytes(count, pieceElems); }
};
// InvalidArgument when one of the codec's blocks does not fit a slice.
Result<Framing> framingOf(const compress::Codec& codec, const prims::Prims& prims);

// Encodes `count` values of `type` into framed bytes at `framed` (what sendEncoded of them would put on the wire).
// ctx.firstElem is the index of values[0] in the op's buffer; the residual, if any, is aligned with `values`.
void encodeFramed(const Framing& f, const void* values, DataType type, size_t count, char* framed,
                  compress::EncodeContext ctx);
// Decodes framed bytes into `count` values of `type`.
void decodeFramed(const Framing& f, const char* framed, size_t count, DataType type, void* out);
// acc[i] += the decoded values, in fp32.
void accumulateFramed(const Framing& f, const char* framed, size_t count, float* acc);

// The stochastic-rounding seed of an encoding by `rank` in op `opSeq`: every encoding draws its own bits (a
// contribution and a result, or two ranks' contributions to one chunk, never share them), the same on every run.
uint64_t encodingSeed(uint32_t opSeq, int rank, bool result);

// One rank's part of a quantise-once op over `group` (ranks, in the group's order; this rank is group[me]).
struct QuantOnceGroup {
  std::vector<int> group;
  int me = 0;
  size_t count = 0;  // values in each rank's buffer
  DataType type = DataType::Float32;
  const CompressArgs* compress = nullptr;
  size_t elemBase = 0;      // index of the buffer's first value in the op's buffer (residual, stochastic rounding)
  float* residual = nullptr;  // error feedback aligned with this buffer, or null

  int n() const { return static_cast<int>(group.size()); }
  EvenSplit chunks() const { return EvenSplit{count, n()}; }
};

// Phase 1: sends chunk q of `in` to its owner, and sums this rank's chunk into `acc` (fp32, chunks().size(me)
// values): acc = own chunk, then + each other rank's decoded chunk in the order me + 1, me + 2, ... of the group.
Coro reduceToOwners(const QuantOnceGroup& g, const char* in, float* acc, prims::Prims& prims);
// Phase 2: sends this rank's framed chunk (`framed`, g.chunks().size(me) values) to every other rank of the group
// and decodes theirs into their chunks of `out`. The caller has already put its own chunk in place.
Coro shareFromOwners(const QuantOnceGroup& g, const char* framed, char* out, prims::Prims& prims);

// The whole quantise-once all-reduce of `in` into `out` over the group (in may be out): both phases, with this
// rank's chunk divided by `divide` in fp32, encoded once and decoded into place between them.
Coro quantOnceAllReduce(const QuantOnceGroup& g, const char* in, char* out, float divide, prims::Prims& prims);

}  // namespace cfx::coll
