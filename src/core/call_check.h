// SPDX-License-Identifier: Apache-2.0
// CFX_CHECK_CALLS (core layer): before a collective moves data, every rank all-gathers what it was called with, so
// a mismatched call fails on every rank alike, each naming every rank's call. The default finds mismatches from the
// stamps of the op's own messages instead (primitives/op_stamp.h), which costs nothing but cannot stop a rank whose
// part only sends (docs/DESIGN.md, "Mismatched calls").
#pragma once

#include "collectives/collective.h"
#include "primitives/prims.h"

namespace cfx::core {

// Runs on the collective channel under op sequence `seq` (the op's own, with a stamp kind of its own), then leaves
// the prims' stamp as it found it. InvalidUsage naming each group of ranks that made the same call when they differ.
prims::Coro checkCall(const coll::CollArgs& args, uint32_t seq, prims::Prims& prims);

}  // namespace cfx::core
