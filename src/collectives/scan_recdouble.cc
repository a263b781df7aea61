// SPDX-License-Identifier: Apache-2.0
// Recursive-doubling scan (collectives layer): Hillis-Steele over ranks, as Open MPI's and MPICH's MPI_Scan.
//
// In round k (distance d = 2^k) every rank sends its partial, the combination of ranks r - 2d + 1 .. r (clipped at 0),
// to rank r + d and folds what rank r - d sends it in on the left; after ceil(log2 n) rounds it holds the inclusive
// prefix. The exclusive prefix is the left-fold of what arrived, kept beside it. Every send and receive of a round
// runs at once (no cycle within a round). Cost: ceil(log2 n) message latencies, each rank moving the whole state
// per round: n log2 n states in all against the chain's n - 1, so it wins while latency dominates.
#include "collectives/scan.h"

namespace cfx::coll {

Coro scanRecDouble(const CollArgs& args, Plan, prims::Prims& prims) {
  char* out = static_cast<char*>(args.recvbuff);
  bool empty = false;
  CFX_CO_TRY(co_await doublingScan(ScanGroup::ofAll(prims.nRanks(), prims.rank()), static_cast<const char*>(args.sendbuff),
                                   out, args.count, args.op, args.exclusive, &empty, prims));
  if (empty) CFX_CO_TRY(finishEmptyPrefix(args.op, out, args.count));
  co_return Status();
}

}  // namespace cfx::coll
