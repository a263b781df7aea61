// SPDX-License-Identifier: Apache-2.0
// Direct scatter (collectives layer).
//
// The root sends block i of sendbuff straight to rank i, taking the peers in ring order from root + 1, then
// copies its own block into recvbuff (a no-op in place, recvbuff == sendbuff + root * count).
//
//   root:    send(root + 1), send(root + 2), ..., send(root - 1); copy own block
//   others:  recv(root)
//
// No cycle: the root only sends and the others only receive, so every send completes as its receiver drains
// it, whatever the size. Each block is one verb, so where the transport supports direct (single-copy) messages
// a receiver reads a large block straight from the root's buffer. sendbuff is only read on the root. Cost: the
// root's link carries (n - 1) * count elements; latency one hop per peer, served in turn.
#include "collectives/collective.h"

namespace cfx::coll {

Coro scatterDirect(const CollArgs& args, Plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  const size_t blockBytes = args.count * dataTypeSize(args.type);
  if (r != args.root) {
    CFX_CO_TRY(co_await prims.recv(args.root, args.recvbuff, blockBytes));
    co_return Status();
  }
  const char* in = static_cast<const char*>(args.sendbuff);
  for (int i = 1; i < n; ++i) {
    const int peer = mod(r + i, n);
    CFX_CO_TRY(co_await prims.send(peer, in + static_cast<size_t>(peer) * blockBytes, blockBytes));
  }
  prims::Prims::copy(args.recvbuff, in + static_cast<size_t>(r) * blockBytes, blockBytes);
  co_return Status();
}

}  // namespace cfx::coll
