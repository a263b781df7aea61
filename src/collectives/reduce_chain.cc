// SPDX-License-Identifier: Apache-2.0
// Pipelined chain reduce (collectives layer).
//
// The partial result flows root + 1 -> root + 2 -> ... -> root in ring order, in pieces of at most two slices;
// each rank adds its own input and passes it on, and the root adds its own last and finishes it (post-op) into
// recvbuff. A middle rank forwards each slice as soon as it has arrived, so once the first slice has crossed
// the chain every link is busy at once.
//
//   position (r - root - 1) mod n:   0                  1..n-2               n-1 (root)
//   verb per piece:                  sendPre(local)     recvReduceSend       recvReduceCopy(recvbuff, post)
//
// Every element is reduced in chain order, once, on the way to the root. The chain has no cycle and the root
// only receives, so from the root backwards every FIFO drains: no deadlock for any size or FIFO depth. The
// pieces fit in any FIFO (at least two slots), so every message travels as slices and the pipeline never turns
// into the store-and-forward of a direct (single-copy) message. recvbuff is only touched on the root (it may be
// NULL elsewhere). Cost: every link carries the message once; time is about (n - 2 + bytes / sliceBytes) slice
// transfers.
#include <algorithm>

#include "collectives/collective.h"

namespace cfx::coll {

Coro reduceChain(const CollArgs& args, Plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  const size_t elt = dataTypeSize(args.type);
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  if (n == 1) {
    prims::Prims::prepare(out, in, args.count, args.op, /*post=*/true);
    co_return Status();
  }
  const int pos = mod(r - args.root - 1, n);
  const int next = mod(r + 1, n);
  const int prev = mod(r - 1, n);
  const size_t pieceElems = std::max<size_t>(1, 2 * prims.sliceBytes() / elt);
  for (size_t base = 0; base < args.count; base += pieceElems) {
    const size_t len = std::min(pieceElems, args.count - base);
    const char* local = in + base * elt;
    if (pos == 0) {
      CFX_CO_TRY(co_await prims.sendPre(next, local, len, args.op));
    } else if (pos < n - 1) {
      CFX_CO_TRY(co_await prims.recvReduceSend(prev, next, local, len, args.op));
    } else {
      CFX_CO_TRY(co_await prims.recvReduceCopy(prev, local, out + base * elt, len, args.op, /*post=*/true));
    }
  }
  co_return Status();
}

}  // namespace cfx::coll
