// SPDX-License-Identifier: Apache-2.0
// Ring all-gather (collectives layer): ringAllGather over any RankRing and blocks (ring.h), and allGatherRing
// over all ranks with block b contributed by rank b.
//
// Every rank's block travels once around the ring, r -> r + 1 -> ... -> r - 1. The blocks are cut into pieces
// of one slice and processed in loops, one piece of every block per loop. Within a loop rank r sends the piece
// of its own block, forwards the piece of block (r - s) for n - 2 steps, and in the last step only stores the
// piece of block (r + 1), which has then visited every rank.
//
//   step:   0                 1..n-2                      n-1
//   verb:   send(block r)     recvCopySend(block r - s)   recv(block r + 1)
//
// Deadlock: a forwarding verb needs a free slot downstream before it consumes a slice from upstream, and a
// rank runs at most one piece ahead of what it has received (the opening send). A ring whose FIFOs are all full
// holds n * nSlots slices but the ranks have put at most n pieces into it, so a piece smaller than a FIFO can
// never jam it: one slice against the guaranteed two slots (two slices would jam two-slot FIFOs). Two ranks have
// no forwarding step, only send-then-receive, so there a piece may fill both guaranteed slots: each rank's two
// slices fit its peer's FIFO whatever the peer does, and the peer's receive drains them. The second slice in
// flight lets the sender copy into it while the receiver copies the first one out.
//
// In place (sendbuff == recvbuff + r * count) the local copy is skipped. Traffic per rank: (n - 1) * count
// elements in and out; latency n - 1 hops per loop.
#include <algorithm>

#include "collectives/ring.h"

namespace cfx::coll {

Coro ringAllGather(RankRing ring, char* buf, std::vector<ElemRange> blocks, DataType type, prims::Prims& prims) {
  const int n = ring.n();
  const int r = ring.me;
  if (n == 1) co_return Status();
  const size_t elt = dataTypeSize(type);
  const int next = ring.next();
  const int prev = ring.prev();
  size_t longest = 0;
  for (const ElemRange& b : blocks) longest = std::max(longest, b.count * elt);
  const size_t pieceBytes = (n == 2 ? 2 : 1) * prims.sliceBytes();
  for (size_t off = 0; off < longest; off += pieceBytes) {
    // Blocks may differ in size: past its end a block contributes empty pieces, which every rank skips alike.
    auto len = [&](int p) {
      const size_t bytes = blocks[static_cast<size_t>(mod(p, n))].count * elt;
      return bytes > off ? std::min(pieceBytes, bytes - off) : 0;
    };
    auto at = [&](int p) { return buf + blocks[static_cast<size_t>(mod(p, n))].offset * elt + off; };
    CFX_CO_TRY(co_await prims.send(next, at(r), len(r)));
    for (int s = 1; s < n - 1; ++s) CFX_CO_TRY(co_await prims.recvCopySend(prev, next, at(r - s), len(r - s)));
    CFX_CO_TRY(co_await prims.recv(prev, at(r + 1), len(r + 1)));
  }
  co_return Status();
}

Coro allGatherRing(const CollArgs& args, Plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  char* out = static_cast<char*>(args.recvbuff);
  prims::Prims::copy(out + static_cast<size_t>(r) * args.count * dataTypeSize(args.type), args.sendbuff,
                     args.count * dataTypeSize(args.type));
  std::vector<ElemRange> blocks(static_cast<size_t>(n));
  for (int b = 0; b < n; ++b) blocks[static_cast<size_t>(b)] = {static_cast<size_t>(b) * args.count, args.count};
  return ringAllGather(RankRing::ofAll(n, r), out, std::move(blocks), args.type, prims);
}

}  // namespace cfx::coll
