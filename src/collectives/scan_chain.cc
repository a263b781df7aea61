// SPDX-License-Identifier: Apache-2.0
// Pipelined chain scan (collectives layer): ZeCO's All-Scan. Rank 0 sends its value to rank 1; each later rank
// receives the prefix of the ranks before it, keeps it (exclusive) or folds its own value in and keeps that
// (inclusive), and forwards prefix (+) own to the next rank, slice by slice as slices arrive.
//
//   rank:      0              1 .. n-2                                   n-1
//   verb:      send(own)      recvCopyReduceSend / recvReduceCopySend    recv / recvReduceCopy
//
// A chain has no cycle, so pieces of two slices pipeline without deadlock (broadcast_chain.cc). Cost: each link
// carries the state once; time (n - 2 + bytes / slice) slice hops and one combine of the state per rank: cheapest
// in bytes, but n - 1 hops of latency, which the doubling and hierarchical scans cut to log2 n (ZeCO's 255 hops at
// 8.5 us each on 256 GPUs).
#include "collectives/scan.h"

namespace cfx::coll {

Coro scanChain(const CollArgs& args, Plan, prims::Prims& prims) {
  ScratchBlock copy;
  CFX_CO_TRY_ASSIGN(const char* in, scanInput(args, args.op.combine == ReduceOp::Combine::Affine, &copy));
  char* out = static_cast<char*>(args.recvbuff);
  CFX_CO_TRY(co_await chainScan(ScanGroup::ofAll(prims.nRanks(), prims.rank()), in, out, args.count, args.op,
                                args.exclusive, nullptr, prims));
  if (args.exclusive && prims.rank() == 0) CFX_CO_TRY(finishEmptyPrefix(args.op, out, args.count));
  co_return Status();
}

}  // namespace cfx::coll
