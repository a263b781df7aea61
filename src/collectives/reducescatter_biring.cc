// SPDX-License-Identifier: Apache-2.0
// Bidirectional ring reduce-scatter (collectives layer).
//
// Every block is cut in two halves: first halves are reduced round the ring in rank order, second halves round
// the reversed ring, both at once as two strands (prims/parallel.h), each a ringReduceScatter (ring.h). On
// point-to-point links this uses both directions of every link, halving the time; see allreduce_biring.cc for
// when that pays. Cost per rank: (n - 1) * count / 2 elements out to each neighbour; latency n - 1 hops per loop.
// In place (recvbuff == sendbuff + r * count) holds for each half as it does for the ring. Two ranks run the
// plain ring (next == prev).
#include "collectives/ring.h"
#include "primitives/parallel.h"

namespace cfx::coll {

Coro reduceScatterBiRing(const CollArgs& args, Plan plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  if (n < 3 || args.count < 2) {
    CFX_CO_TRY(co_await reduceScatterRing(args, plan, prims));
    co_return Status();
  }
  const size_t elt = dataTypeSize(args.type);
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  const RankRing ring = RankRing::ofAll(n, prims.rank());
  HalvedBlocks blocks = halvedBlocks(ring, args.count);
  CFX_CO_TRY(co_await prims::Parallel(
      ringReduceScatter(ring, in, std::move(blocks.first), out, args.type, args.op, prims),
      ringReduceScatter(ring.reversed(), in, std::move(blocks.second), out + blocks.half * elt, args.type, args.op,
                        prims)));
  co_return Status();
}

}  // namespace cfx::coll
