// SPDX-License-Identifier: Apache-2.0
// Ordered combines on host memory (primitives layer): the arithmetic of ReduceOp's Affine and User combines
// (common/types.h), which All-Scan needs and which are associative but not commutative.
//
// How the verbs use them. A verb that combines what it receives with this rank's own data (recvReduceSend,
// recvReduceCopy, recvReduceCopySend, recvCopyReduceSend, recvCombine*) computes slot (+) local: the slot is
// always the lower ranks' value and `local` the upper one, and every scan algorithm is written so. That order is what
// lets a slice be combined the moment it arrives although Affine works on whole groups: the upper operand's decays,
// needed by every state row, are in memory (`local`), and the slot's elements are only needed one at a time. The
// verb passes the index of the slice's first element within the buffer (`upperElem`), from which the combine finds
// each element's group, row and decay. A verb asked for local (+) slot with an Affine op fails (the algorithm is
// wrong); a User op may take either order. `out` must not alias `upper` for Affine (the decays would change under
// the rows that still need them): the scan algorithms keep their output apart from the input they combine.
//
// Contract: count elements (a whole number of units for User; any range for Affine, whose groups are counted from
// element 0 of `upperOrigin`); pointers need no alignment; the same inputs give the same bits on every call.
#pragma once

#include <cstddef>

#include "common/status.h"
#include "common/types.h"

namespace cfx::prims {

// out[i] = lower[i] (+) upper[i] for i < count. `upper` is element `upperElem` of the buffer starting at
// `upperOrigin` (Affine reads decays there); `out` may alias `lower`, and for User also `upper`.
void combineOrdered(const ReduceOp& op, void* out, const void* lower, const void* upper, size_t count,
                    size_t upperElem, const void* upperOrigin);

// The same with the upper operand in the slot and the lower one in memory: User only (a User op copies and applies
// its function); Affine needs the upper decays, which a slot delivers piece by piece, so it is refused.
Status combineOrderedLowerInMemory(const ReduceOp& op, void* out, const void* lowerLocal, const void* upperSlot,
                                   size_t count);

// Writes the identity of `op` (Affine: decay 1, state 0; User: none) into `count` elements. InvalidUsage for
// combines without one (User, and the built-in ones have theirs in the collectives that need them).
Status writeIdentity(const ReduceOp& op, void* out, size_t count);

}  // namespace cfx::prims
