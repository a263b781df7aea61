// SPDX-License-Identifier: Apache-2.0
// Ring reduce-scatter (collectives layer).
//
// Block b of the reduction starts at rank b + 1 and travels b + 1 -> b + 2 -> ... -> b, each rank adding its
// own block b, so it is complete when it reaches rank b, which finishes it (post-op) into its recvbuff. The
// blocks are cut into pieces of one slice and processed in loops, one piece of every block per loop.
//
//   step:   0                       1..n-2                          n-1
//   verb:   sendPre(block r - 1)    recvReduceSend(block r - s - 1) recvReduceCopy(block r, post)
//
// Each element is reduced in one fixed order (ring order starting after its owner) on the ranks it visits.
//
// Deadlock: a forwarding verb needs a free slot downstream before it consumes a slice from upstream, and a
// rank runs at most one piece ahead of what it has received (the opening send). A ring whose FIFOs are all full
// holds n * nSlots slices but the ranks have put at most n pieces into it, so a piece smaller than a FIFO can
// never jam it: one slice against the guaranteed two slots (two slices would jam two-slot FIFOs).
//
// In place (recvbuff == sendbuff + r * count) works because rank r reads its own block only in the last
// step, which writes it element by element. Traffic per rank: (n - 1) * count elements in and out; latency
// n - 1 hops per loop.
#include <algorithm>

#include "collectives/collective.h"

namespace cfx::coll {

Task reduceScatterRing(const CollArgs& args, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  const size_t elt = dataTypeSize(args.type);
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  if (n == 1) {
    prims::Prims::prepare(out, in, args.count, args.op, /*post=*/true);
    co_return Status();
  }
  const int next = mod(r + 1, n);
  const int prev = mod(r - 1, n);
  const size_t pieceElems = std::max<size_t>(1, prims.sliceBytes() / elt);
  for (size_t base = 0; base < args.count; base += pieceElems) {
    const size_t len = std::min(pieceElems, args.count - base);
    auto at = [&](int b) { return in + (static_cast<size_t>(b) * args.count + base) * elt; };
    CFX_CO_TRY(co_await prims.sendPre(next, at(mod(r - 1, n)), len, args.op));
    for (int s = 1; s < n - 1; ++s) {
      CFX_CO_TRY(co_await prims.recvReduceSend(prev, next, at(mod(r - s - 1, n)), len, args.op));
    }
    CFX_CO_TRY(co_await prims.recvReduceCopy(prev, at(r), out + base * elt, len, args.op, /*post=*/true));
  }
  co_return Status();
}

}  // namespace cfx::coll
