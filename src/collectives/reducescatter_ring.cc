// SPDX-License-Identifier: Apache-2.0
// Ring reduce-scatter (collectives layer): ringReduceScatter over any RankRing and blocks (ring.h), and
// reduceScatterRing over all ranks with block b owned by rank b.
//
// Block b of the reduction starts at position b + 1 and travels b + 1 -> b + 2 -> ... -> b, each rank adding its
// own block b, so it is complete when it reaches position b, which finishes it (post-op) into its recvbuff. The
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

#include "collectives/ring.h"

namespace cfx::coll {

Coro ringReduceScatter(RankRing ring, const char* in, std::vector<ElemRange> blocks, char* mine, DataType type,
                       const ReduceOp& op, prims::Prims& prims) {
  const int n = ring.n();
  const int r = ring.me;
  const size_t elt = dataTypeSize(type);
  if (n == 1) {
    prims::Prims::prepare(mine, in + blocks[0].offset * elt, blocks[0].count, op, /*post=*/true);
    co_return Status();
  }
  const int next = ring.next();
  const int prev = ring.prev();
  size_t longest = 0;
  for (const ElemRange& b : blocks) longest = std::max(longest, b.count);
  const size_t pieceElems = std::max<size_t>(1, prims.sliceBytes() / elt);
  for (size_t base = 0; base < longest; base += pieceElems) {
    // Blocks may differ in size: a block shorter than `base` contributes empty pieces, which every rank skips alike.
    auto len = [&](int p) {
      const ElemRange& b = blocks[static_cast<size_t>(mod(p, n))];
      return b.count > base ? std::min(pieceElems, b.count - base) : 0;
    };
    auto at = [&](int p) { return in + (blocks[static_cast<size_t>(mod(p, n))].offset + base) * elt; };
    CFX_CO_TRY(co_await prims.sendPre(next, at(r - 1), len(r - 1), op));
    for (int s = 1; s < n - 1; ++s) {
      CFX_CO_TRY(co_await prims.recvReduceSend(prev, next, at(r - s - 1), len(r - s - 1), op));
    }
    CFX_CO_TRY(co_await prims.recvReduceCopy(prev, at(r), mine + base * elt, len(r), op, /*post=*/true));
  }
  co_return Status();
}

Coro reduceScatterRing(const CollArgs& args, Plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  std::vector<ElemRange> blocks(static_cast<size_t>(n));
  for (int b = 0; b < n; ++b) blocks[static_cast<size_t>(b)] = {static_cast<size_t>(b) * args.count, args.count};
  return ringReduceScatter(RankRing::ofAll(n, prims.rank()), static_cast<const char*>(args.sendbuff),
                           std::move(blocks), static_cast<char*>(args.recvbuff), args.type, args.op, prims);
}

}  // namespace cfx::coll
