// SPDX-License-Identifier: Apache-2.0
// Running one compressed collective (core layer): planning it with its codec, counting what it sends, measuring its
// error when asked, and recording the statistics cfxCommGetCompressStats returns.
#pragma once

#include <cstdint>

#include "collectives/collective.h"
#include "core/communicator.h"
#include "primitives/coro.h"

namespace cfx::core {

// Plans and runs `args` (args.compress set) on the collective channel with sequence number `seq`. With
// args.compress->measureError the op is then run plain too, on a copy of its input, to measure the relative L2
// error of this rank's output. `args` and `prims` must outlive the Coro.
prims::Coro runCompressedOp(Communicator* comm, const coll::CollArgs& args, uint32_t seq, uint64_t opCount,
                            prims::Prims& prims);

// Runs a delta broadcast (args.delta set) on the collective channel and records its statistics (the encoding as the
// codec, "delta:indices" say; the bytes this rank sent).
prims::Coro runDeltaOp(Communicator* comm, const coll::CollArgs& args, uint32_t seq, uint64_t opCount,
                       prims::Prims& prims);

}  // namespace cfx::core
