// SPDX-License-Identifier: Apache-2.0
// Ring all-gather (collectives layer).
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

#include "collectives/collective.h"

namespace cfx::coll {

Task allGatherRing(const CollArgs& args, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  const size_t blockBytes = args.count * dataTypeSize(args.type);
  char* out = static_cast<char*>(args.recvbuff);
  auto block = [&](int b) { return out + static_cast<size_t>(b) * blockBytes; };
  prims::Prims::copy(block(r), args.sendbuff, blockBytes);
  if (n == 1) co_return Status();
  const int next = mod(r + 1, n);
  const int prev = mod(r - 1, n);
  const size_t pieceBytes = (n == 2 ? 2 : 1) * prims.sliceBytes();
  for (size_t off = 0; off < blockBytes; off += pieceBytes) {
    const size_t len = std::min(pieceBytes, blockBytes - off);
    CFX_CO_TRY(co_await prims.send(next, block(r) + off, len));
    for (int s = 1; s < n - 1; ++s) {
      CFX_CO_TRY(co_await prims.recvCopySend(prev, next, block(mod(r - s, n)) + off, len));
    }
    CFX_CO_TRY(co_await prims.recv(prev, block(mod(r + 1, n)) + off, len));
  }
  co_return Status();
}

}  // namespace cfx::coll
