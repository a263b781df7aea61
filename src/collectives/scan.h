// SPDX-License-Identifier: Apache-2.0
// Building blocks of All-Scan (collectives layer): the prefix over ranks, x_0 (+) x_1 (+) ... (+) x_r on rank r
// (inclusive) or up to x_{r-1} (exclusive), for every combine, ordered ones (Affine, User) included.
//
// Order is the whole point: (+) may be non-commutative, so every algorithm combines lower ranks' values on the left,
// through the verbs' rule (the slot is the lower operand, primitives/ordered_combine.h) or combineLocal's explicit
// operands. A scan runs over a *group*: ranks in scan order (all ranks in rank order, or the ranks of one host, or
// the last rank of every host), so the hierarchical scan reuses the flat ones on its levels.
//
// "Empty" stands for "no ranks yet" (an exclusive prefix of the group's first rank): User ops have no identity, so
// the building blocks track emptiness rather than combining with an identity.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/collective.h"
#include "collectives/scratch.h"

namespace cfx::coll {

// out = lower (+) upper for count elements, both in memory; out may alias either (a copy is made where the combine
// needs one). Built-in combines run the reduction kernels (no pre-multiplier, no post step: scans take none).
void combineLocal(const ReduceOp& op, void* out, const void* lower, const void* upper, size_t count);

// Writes the identity of `op` into count elements: 0 for sum, 1 for prod, the lowest value for max (-inf where the
// type has it) and the highest for min, (decay 1, state 0) for Affine. InvalidUsage for User ops (none).
Status writeScanIdentity(const ReduceOp& op, void* out, size_t count);

// One rank's part of a scan over a group.
struct ScanGroup {
  std::vector<int> ranks;  // in scan order
  int me = 0;              // this rank's position
  int n() const { return static_cast<int>(ranks.size()); }
  static ScanGroup ofAll(int nRanks, int rank);
};

// Pipelined chain over the group: position 0 sends its value, every later one receives the prefix of those before
// it, folds its own value in and forwards the result, in pieces of two slices (broadcast_chain.cc's pipeline).
// Inclusive: out = prefix (+) own. Exclusive: out = the prefix (empty, and out untouched, at position 0), and
// *total (when not null; count elements) gets prefix (+) own, which is what the position forwards.
// `in` and `out` may be the same buffer except for Affine, whose caller passes them apart.
Coro chainScan(const ScanGroup& g, const char* in, char* out, size_t count, const ReduceOp& op, bool exclusive,
               char* total, prims::Prims& prims);

// Recursive doubling (Hillis-Steele) over the group: ceil(log2 n) rounds; in round k position p sends its partial
// (the prefix of positions p - 2^k + 1 .. p) to p + 2^k and folds in what p - 2^k sends. Exclusive keeps the prefix
// of what arrived separately. *outEmpty is set where the exclusive result is empty (position 0).
Coro doublingScan(const ScanGroup& g, const char* in, char* out, size_t count, const ReduceOp& op, bool exclusive,
                  bool* outEmpty, prims::Prims& prims);

// What the algorithms do with the exclusive result of the group's first rank: the op's identity, or (User ops)
// the buffer left as it was.
Status finishEmptyPrefix(const ReduceOp& op, char* out, size_t count);

// The input a scan reads: args.sendbuff, or a copy of it (in *keep) when it is the receive buffer and `separate`
// (an Affine combine, which must not write over the decays it reads, or an algorithm that reads its input after
// writing its output).
Result<const char*> scanInput(const CollArgs& args, bool separate, ScratchBlock* keep);

}  // namespace cfx::coll
