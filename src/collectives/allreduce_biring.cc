// SPDX-License-Identifier: Apache-2.0
// Bidirectional ring all-reduce (collectives layer).
//
// The buffer is cut in two halves: the first goes round the ring in rank order, the second round the same ring
// reversed, both at once as two strands (prims/parallel.h), each a ringAllReduce (ring.h). Where neighbours are
// joined by point-to-point links (NVLink, xGMI, a ring of cables between hosts) a one-way ring drives one
// direction of every link and leaves the other idle; the two rings drive both, so each link carries half the
// bytes each way and the op takes half the time. Through one NIC per host and a switch a one-way ring already
// sends and receives on every NIC at once, so there is nothing to gain, and the planner's cost model sees that.
//
// Cost per rank: 2 (n - 1) / n * bytes / 2 out to each neighbour; latency that of the ring (2 (n - 1) hops per
// loop), with both loops in flight at once. Each half is reduced in one fixed order, so every rank holds the same
// bits. Two ranks have next == prev: the strands would share one FIFO each way, and the plain ring already uses
// both directions there, so they run the ring.
#include "collectives/ring.h"
#include "primitives/parallel.h"

namespace cfx::coll {

Coro allReduceBiRing(const CollArgs& args, Plan plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  if (n < 3 || args.count < 2) {
    CFX_CO_TRY(co_await allReduceRing(args, plan, prims));
    co_return Status();
  }
  const size_t elt = dataTypeSize(args.type);
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  const size_t half = args.count / 2;
  const RankRing ring = RankRing::ofAll(n, prims.rank());
  CFX_CO_TRY(co_await prims::Parallel(
      ringAllReduce(ring, in, out, half, args.type, args.op, prims),
      ringAllReduce(ring.reversed(), in + half * elt, out + half * elt, args.count - half, args.type, args.op, prims)));
  co_return Status();
}

}  // namespace cfx::coll
