// SPDX-License-Identifier: Apache-2.0
// Mapping every peer's exported block, after a collective exchange of what each rank offers (transport layer,
// cuda_ipc): the step the zero-copy windows (ipc_window.h) and the device scratch (ipc_scratch.h) share.
//
// Each rank that offers a block listens on an FdServer and announces it in a BlockOffer; after the exchange every
// rank connects to every peer process first, then serves its own connections, then reads and maps: connections land
// in the listeners' backlogs, so no rank waits for one that is itself waiting. Ranks of one process are read at
// their own addresses. Nothing here is collective: the caller's bootstrap exchanges the offers, and agrees on the
// outcome afterwards (firstRankNotOk).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/cuda_driver.h"
#include "common/status.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/cuda_ipc/vmm_memory.h"

namespace cfx::transport::cuda_ipc {

// What one rank tells the others about its block; fixed layout, exchanged as bytes.
struct BlockOffer {
  uint64_t address;     // the block's first byte as the offering process addresses it (for ranks of that process)
  uint64_t blockBytes;  // the block's mapped size
  uint64_t blockId;     // checked when the descriptor arrives
  uint64_t token;       // the offerer's processToken(): with pid and blockId, names the block for mapPeerBlockOnce
  int32_t pid;
  int32_t ok;        // 1 when the rank offers a block
  char server[56];  // the rank's FdServer name, NUL-terminated
};

// This rank's offer of `block`, listening on a new server (returned through `server`); ok = 0, with nothing
// listening, when `block` is null or the server cannot listen (logged at INFO).
BlockOffer offerBlock(const ShareableBlock* block, std::unique_ptr<FdServer>* server);

// After every rank's offer is in `offers` (all ok), maps each peer's block into this process for `ctx`'s device:
// `mapped[p]` holds peer p's mapping (null for this rank and ranks of this process), `bases[p]` its first byte here.
// Waits end at `deadline`, or as soon as `alive` reports an error. Errors name the peer.
Status mapPeerBlocks(int rank, const std::vector<BlockOffer>& offers, FdServer& server, const ShareableBlock& mine,
                     cuda::CUcontext ctx, std::chrono::steady_clock::time_point deadline,
                     const std::function<Status()>& alive, std::vector<std::shared_ptr<PeerBlock>>* mapped,
                     std::vector<cuda::CUdeviceptr>* bases);

// Whether two offers come from one process. A pid alone does not say it: ranks in different pid namespaces (a
// container each, sharing the host's network and GPU) can have the same pid, and one would read the other's address
// as its own.
inline bool sameProcess(const BlockOffer& a, const BlockOffer& b) { return a.pid == b.pid && a.token == b.token; }

// Collective: whether every rank's `ok` holds. The first rank (lowest) whose does not, or -1 when all hold.
Result<int> firstRankNotOk(Bootstrap& bootstrap, int rank, int nRanks, bool ok);

}  // namespace cfx::transport::cuda_ipc
