// SPDX-License-Identifier: Apache-2.0
// Bidirectional ring all-gather (collectives layer).
//
// Every rank's block is cut in two halves: first halves travel round the ring in rank order, second halves round
// the reversed ring, both at once as two strands (prims/parallel.h), each a ringAllGather (ring.h). On
// point-to-point links this uses both directions of every link, halving the time; see allreduce_biring.cc for
// when that pays. Cost per rank: (n - 1) * count / 2 elements out to each neighbour; latency n - 1 hops per loop.
// Two ranks run the plain ring (next == prev).
#include "collectives/ring.h"
#include "primitives/parallel.h"

namespace cfx::coll {

Coro allGatherBiRing(const CollArgs& args, Plan plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  if (n < 3 || args.count < 2) {
    CFX_CO_TRY(co_await allGatherRing(args, plan, prims));
    co_return Status();
  }
  const int r = prims.rank();
  const size_t elt = dataTypeSize(args.type);
  char* out = static_cast<char*>(args.recvbuff);
  prims::Prims::copy(out + static_cast<size_t>(r) * args.count * elt, args.sendbuff, args.count * elt);
  const RankRing ring = RankRing::ofAll(n, r);
  HalvedBlocks blocks = halvedBlocks(ring, args.count);
  CFX_CO_TRY(co_await prims::Parallel(ringAllGather(ring, out, std::move(blocks.first), args.type, prims),
                                      ringAllGather(ring.reversed(), out, std::move(blocks.second), args.type, prims)));
  co_return Status();
}

}  // namespace cfx::coll
