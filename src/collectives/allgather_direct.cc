// SPDX-License-Identifier: Apache-2.0
// Direct all-gather (collectives layer): every rank sends its block to every peer and receives every peer's
// block, all at once.
//
// Why: on one host, where a receiver can read a sender's buffer in place (a direct message: ranks as threads,
// or ncclMemAlloc blocks that peers map), every block is copied exactly once, straight from its owner's sendbuff
// into each receiver's recvbuff, and no rank forwards anything. The ring copies every byte twice per hop
// (into a FIFO and out of it) and must forward what it received before it can receive more.
//
//   rank r, one strand each:  send(q, sendbuff) for every q != r,  recv(q, block q) for every q != r
//
// The send strands come first so that peers can start reading this rank's block while it copies its own block
// into place (a strand of its own, between the sends and the receives). Deadlock: no strand waits for another
// strand of its own rank, every send has its own FIFO and every receive its own, and a receive only needs its
// sender to have started, which every rank does before anything else; so any block size works, direct or
// sliced. When a message cannot go direct (malloc'd buffers between processes, under CFX_SHM_DIRECT=auto) it
// travels in slices through the FIFOs: the same two copies per byte as the ring.
//
// In place (sendbuff == recvbuff + r * count) skips the local copy. Cost per rank: (n - 1) blocks read, one
// block copied locally, n - 1 peers reading its block; one message latency.
#include "collectives/collective.h"
#include "primitives/parallel.h"

namespace cfx::coll {

Coro allGatherDirect(const CollArgs& args, Plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  const size_t blockBytes = args.count * dataTypeSize(args.type);
  char* out = static_cast<char*>(args.recvbuff);
  auto at = [&](int b) { return out + static_cast<size_t>(b) * blockBytes; };
  std::vector<Coro> strands;
  strands.reserve(2 * static_cast<size_t>(n) - 1);
  for (int s = 1; s < n; ++s) strands.push_back(verbStrand(prims.send(mod(r + s, n), args.sendbuff, blockBytes, /*ownStrand=*/true)));
  strands.push_back(copyStrand(at(r), args.sendbuff, blockBytes, prims.opBytes()));
  for (int s = 1; s < n; ++s) {
    const int q = mod(r - s, n);
    strands.push_back(verbStrand(prims.recv(q, at(q), blockBytes)));
  }
  co_return co_await prims::Parallel(std::move(strands));
}

}  // namespace cfx::coll
