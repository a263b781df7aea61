// SPDX-License-Identifier: Apache-2.0
// All-to-all-v, every peer at once (collectives layer).
//
// Rank r sends sendBytes[q] bytes from sendbuff + sendOffset[q] to each rank q, and receives recvBytes[q] bytes from
// each q into recvbuff + recvOffset[q]; its own block is a local copy. As in alltoall_direct.cc's strand form, every
// send and every receive is a strand of its own (sends first, then the local copy, then the receives), so each has its
// FIFO to itself, a large block may travel as a direct (single-copy) message, and a rank waits for its peers once.
//
// Zero-size pairs: a rank makes no verb for a peer it sends nothing to, nor for one it expects nothing from, and
// both ends of a pair know the size (the sender from sendcounts, the receiver from recvcounts), so neither waits.
// Ranks that disagree on a size fail on the first slice with a named mismatch (the tag carries the message size);
// a receiver that expects nothing from a sender that sends is the one disagreement no verb sees: the sender's
// message stays in the FIFO, and the pair's next operation fails on it instead (or the sender times out waiting for
// room when the message is larger than the FIFO).
//
// Deadlock: no strand waits for another strand of its rank, a send only for its receiver's receive and a receive
// only for its sender's send, so every pair of strands that belong together can always move.
//
// In place (AlltoallvArgs::inPlace): a peer's block lands where this rank's own block for that peer lies, so the op
// sends from a copy of the send regions, taken before any receive starts.
// Traffic per rank: what it sends and receives, once each; latency one message.
#include <algorithm>
#include <vector>

#include "collectives/collective.h"
#include "primitives/parallel.h"

namespace cfx::coll {

Coro allToAllvDirect(const CollArgs& args, Plan, prims::Prims& prims) {
  const AlltoallvArgs& v = *args.alltoallv;
  const int n = prims.nRanks();
  const int r = prims.rank();
  const auto peer = [](int q) { return static_cast<size_t>(q); };
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  std::vector<char> copy;
  if (v.inPlace) {
    // Only the blocks that leave: this rank's own block stays where it is.
    copy.assign(in, in + v.sendExtent);
    in = copy.data();
  }
  // Receives land in many blocks at once: they stream past the caches when the whole op is large (alltoall_direct.cc).
  const size_t opBytes = prims.opBytes();
  prims.setOpBytes(std::max({opBytes, v.sendExtent, v.recvExtent}));
  std::vector<Coro> strands;
  strands.reserve(2 * peer(n));
  for (int s = 1; s < n; ++s) {
    const int q = mod(r + s, n);
    if (v.sendBytes[peer(q)] == 0) continue;
    strands.push_back(verbStrand(prims.send(q, in + v.sendOffset[peer(q)], v.sendBytes[peer(q)], /*ownStrand=*/true)));
  }
  if (v.sendBytes[peer(r)] > 0 && !v.inPlace) {
    strands.push_back(copyStrand(out + v.recvOffset[peer(r)], in + v.sendOffset[peer(r)], v.sendBytes[peer(r)],
                                 prims.opBytes()));
  }
  for (int s = 1; s < n; ++s) {
    const int q = mod(r - s, n);
    if (v.recvBytes[peer(q)] == 0) continue;
    strands.push_back(verbStrand(prims.recv(q, out + v.recvOffset[peer(q)], v.recvBytes[peer(q)])));
  }
  prims.setOpBytes(opBytes);
  co_return co_await prims::Parallel(std::move(strands));
}

}  // namespace cfx::coll
