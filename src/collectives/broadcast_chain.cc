// SPDX-License-Identifier: Apache-2.0
// Pipelined chain broadcast (collectives layer).
//
// The data flows root -> root + 1 -> ... -> root - 1 in ring order, in pieces of at most two slices. A middle
// rank forwards each slice as soon as it has arrived, so once the first slice has crossed the chain every link
// is busy at once.
//
//   position (r - root) mod n:   0 (root)            1..n-2                    n-1
//   verb per piece:              send(sendbuff)      recvCopySend(recvbuff)    recv(recvbuff)
//
// The chain has no cycle and its last rank only receives, so from the end backwards every FIFO drains: no
// deadlock for any size or FIFO depth. The pieces are not for deadlock but for the pipeline: a piece fits in
// any FIFO (at least two slots), so it always travels as slices. A verb larger than a FIFO may go as a direct
// (single-copy) message, which a middle rank can only forward once it holds all of it, and the chain would
// turn into store-and-forward. The out-of-place root copies sendbuff to recvbuff after it has handed the data
// to the chain. Cost: every link carries the message once; time is about (n - 2 + bytes / sliceBytes) slice
// transfers.
#include <algorithm>

#include "collectives/collective.h"

namespace cfx::coll {

Coro broadcastChain(const CollArgs& args, Plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  const size_t bytes = args.count * dataTypeSize(args.type);
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  const int pos = mod(r - args.root, n);
  const int next = mod(r + 1, n);
  const int prev = mod(r - 1, n);
  const size_t pieceBytes = 2 * prims.sliceBytes();
  for (size_t off = 0; n > 1 && off < bytes; off += pieceBytes) {
    const size_t len = std::min(pieceBytes, bytes - off);
    if (pos == 0) {
      CFX_CO_TRY(co_await prims.send(next, in + off, len));
    } else if (pos == n - 1) {
      CFX_CO_TRY(co_await prims.recv(prev, out + off, len));
    } else {
      CFX_CO_TRY(co_await prims.recvCopySend(prev, next, out + off, len));
    }
  }
  if (pos == 0) prims::Prims::copy(out, in, bytes);
  co_return Status();
}

}  // namespace cfx::coll
