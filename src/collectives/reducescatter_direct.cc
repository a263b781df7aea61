// SPDX-License-Identifier: Apache-2.0
// Direct reduce-scatter (collectives layer): every rank sends block q to rank q, and reduces the n - 1 blocks it
// receives into its own.
//
// Why: on one host, where a receiver can read a sender's buffer in place (a direct message: ranks as threads, or
// ncclMemAlloc blocks that peers map), rank r reduces block r straight out of every peer's sendbuff into its
// recvbuff: each input byte is read once and nothing passes through a FIFO. The ring reads and writes every
// partial through a FIFO at every hop.
//
//   rank r:  sendPre(q, block q) for every q != r, one strand each
//            then one strand: recvReduceCopy(r + 1: block r (+) pre(own block r)),
//                             recvCombineCopy(r + 2), ..., recvCombineCopy(r - 1, post)
//
// Each block is reduced by its owner alone, in the fixed order own, r + 1, r + 2, ..., so every run gives the same
// bits. Deadlock: sends never wait for receives; the receiving strand waits for one sender at a time, and every
// sender posts its block to every peer before anything else. Operations whose pre-multiplier is not the identity
// send slices (the scaled copy must be made somewhere); so do malloc'd buffers between processes under
// CFX_SHM_DIRECT=auto.
//
// In place (recvbuff == sendbuff + r * count): peers read only blocks q != r, and rank r writes only block r, each
// element after reading it. Cost per rank: n - 1 blocks read and reduced, one message latency per peer.
#include "collectives/collective.h"
#include "primitives/parallel.h"

namespace cfx::coll {

Coro reduceScatterDirect(const CollArgs& args, Plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  const size_t blockBytes = args.count * dataTypeSize(args.type);
  const char* in = static_cast<const char*>(args.sendbuff);
  if (n == 1) {
    prims::Prims::prepare(args.recvbuff, in, args.count, args.op, /*post=*/true);
    co_return Status();
  }
  std::vector<Coro> strands;
  strands.reserve(static_cast<size_t>(n));
  for (int s = 1; s < n; ++s) {
    const int q = mod(r + s, n);
    strands.push_back(verbStrand(prims.sendPre(q, in + static_cast<size_t>(q) * blockBytes, args.count, args.op, /*ownStrand=*/true)));
  }
  strands.push_back(reduceFromPeers(in + static_cast<size_t>(r) * blockBytes, static_cast<char*>(args.recvbuff),
                                    args.count, args.op, prims));
  co_return co_await prims::Parallel(std::move(strands));
}

}  // namespace cfx::coll
