// SPDX-License-Identifier: Apache-2.0
// Direct broadcast (collectives layer): the root sends the whole buffer to every peer at once.
//
// Why: on one host, where a receiver can read the root's buffer in place (a direct message: ranks as threads, or
// an ncclMemAlloc block that peers map), every rank copies the data once, straight from the root's sendbuff,
// and all of them at the same time. A chain copies every byte twice per hop, into a FIFO and out of it, and
// its last rank starts only after the data crossed the chain.
//
//   root:   send(q, sendbuff) for every q != root, one strand each; then its own copy, as one more strand
//   others: recv(root, recvbuff)
//
// The root's copy comes after the sends so that the peers read while it copies. Deadlock: the root's strands
// do not wait for each other and every receiver waits only for the root. Without direct messages (malloc'd
// buffers between processes under CFX_SHM_DIRECT=auto) the root copies the data into n - 1 FIFOs itself, the
// chain's share of the work but on one rank; the planner takes this algorithm only where direct messages are
// possible. Cost: the root posts n - 1 small messages; every other rank copies bytes once; one message latency.
#include "collectives/collective.h"
#include "primitives/parallel.h"

namespace cfx::coll {

Coro broadcastDirect(const CollArgs& args, Plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  const size_t bytes = args.count * dataTypeSize(args.type);
  if (r != args.root) co_return co_await prims.recv(args.root, args.recvbuff, bytes);
  std::vector<Coro> strands;
  strands.reserve(static_cast<size_t>(n));
  for (int s = 1; s < n; ++s) strands.push_back(verbStrand(prims.send(mod(r + s, n), args.sendbuff, bytes, /*ownStrand=*/true)));
  strands.push_back(copyStrand(args.recvbuff, args.sendbuff, bytes, prims.opBytes()));
  co_return co_await prims::Parallel(std::move(strands));
}

}  // namespace cfx::coll
