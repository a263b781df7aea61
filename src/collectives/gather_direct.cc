// SPDX-License-Identifier: Apache-2.0
// Direct gather (collectives layer).
//
// Every non-root rank sends its block straight to the root, which receives block i from rank i into
// recvbuff + i * count, taking the peers in ring order from root + 1, and copies its own block locally (a no-op
// in place, sendbuff == recvbuff + root * count).
//
//   root:    copy own block; recv(root + 1), recv(root + 2), ..., recv(root - 1)
//   others:  send(root)
//
// No cycle: non-roots only send and the root only receives, so each send completes once the root reaches it,
// whatever the size; a peer's FIFO fills while the root drains an earlier one. Each block is one verb, so where
// the transport supports direct (single-copy) messages the root reads a large block straight from the sender's
// buffer. recvbuff is only touched on the root. Cost: the root's link carries (n - 1) * count elements; latency
// one hop per peer, served in turn.
#include "collectives/collective.h"

namespace cfx::coll {

Coro gatherDirect(const CollArgs& args, Plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  const size_t blockBytes = args.count * dataTypeSize(args.type);
  if (r != args.root) {
    CFX_CO_TRY(co_await prims.send(args.root, args.sendbuff, blockBytes));
    co_return Status();
  }
  char* out = static_cast<char*>(args.recvbuff);
  prims::Prims::copy(out + static_cast<size_t>(r) * blockBytes, args.sendbuff, blockBytes);
  for (int i = 1; i < n; ++i) {
    const int peer = mod(r + i, n);
    CFX_CO_TRY(co_await prims.recv(peer, out + static_cast<size_t>(peer) * blockBytes, blockBytes));
  }
  co_return Status();
}

}  // namespace cfx::coll
