// SPDX-License-Identifier: Apache-2.0
// Direct all-to-all by pairwise exchange (collectives layer).
//
// Rank r sends block j of sendbuff to rank j and receives rank i's block r into block i of recvbuff. In step
// s (0..n-1) rank r exchanges with q = (s - r) mod n. That map is its own inverse (q's partner in step s is r),
// so every step pairs ranks up, and over the n steps each rank meets every peer once and itself once (its own
// block is copied locally). A pair exchanges its blocks in pieces of at most two slices, alternating
// send(piece k), recv(piece k).
//
//   n = 4   step 0: 0-0 1-3 2-2     step 1: 0-1 2-3     step 2: 0-2 1-1 3-3     step 3: 0-3 1-2
//
// Deadlock, for any block size: a rank waits only on its partner of the current step. A partner that is
// still in an earlier step waits on its own partner there, so that chain ends at a pair in the same step, and
// such a pair always has a rank that can move. Say a is in piece i, b in piece j. a blocked in send(i) means
// the FIFO a -> b is full; it holds only a's unreceived bytes of pieces j..i, and one piece fits (two slices,
// at least two slots), so j < i. a blocked in recv(i) means b has not finished send(i), so b is in piece <= i,
// and in send if equal. Both blocked: send/send gives j < i < j, send/recv gives a in piece <= j < i, and
// recv/recv gives j < i < j; each is a contradiction. A piece also always travels as slices: a verb larger than
// a FIFO may become a direct (single-copy) message, whose send finishes only once the receiver has read it, and
// two partners each sending such a message to the other would wait forever.
//
// In place (sendbuff == recvbuff, not required by NCCL) also works: block q is only touched in the step with
// q, and every piece is sent (copied into the FIFO) before the piece arriving from q overwrites it.
// Traffic per rank: (n - 1) * count elements in and out; latency n - 1 exchanges.
//
// Out of place, blocks larger than a piece or of 4 KiB and more, or any blocks on more than two ranks, go another
// way: every send and every receive is a strand of its own, all at once (sends first, then the local copy, then
// the receives). Each strand has its own FIFO and none waits for another of its rank, so whole blocks may travel
// as direct (single-copy) messages, which on one host a receiver reads straight out of the sender's sendbuff; and
// a rank waits for its peers once, not once per step, which is what small blocks on oversubscribed cores pay for
// (4 ranks on 2 cores: n - 1 steps each needing the partner on a core). In place this is not possible: a peer
// could still be reading block q of this rank's buffer when the block from q lands there.
#include <algorithm>

#include "collectives/collective.h"
#include "primitives/parallel.h"

namespace cfx::coll {

namespace {
// Two ranks take the strands from this block size on, where a block may go direct (one copy instead of the FIFO's
// two); below it one exchange costs less than setting up 2n - 1 strands.
constexpr size_t kStrandsMinBlockBytes = size_t{4} << 10;
}  // namespace

Coro alltoAllDirect(const CollArgs& args, Plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  const size_t blockBytes = args.count * dataTypeSize(args.type);
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  auto offset = [&](int b) { return static_cast<size_t>(b) * blockBytes; };
  const size_t pieceBytes = 2 * prims.sliceBytes();
  if (in != out && (blockBytes > pieceBytes || n > 2 || blockBytes >= kStrandsMinBlockBytes)) {
    // The receives land n - 1 blocks at once: they stream past the caches when the whole buffer is large, even
    // where one block is not (4 ranks, 16 MiB: 83 % of the time in memmove with plain stores, 3.0 -> 1.9 ms
    // streaming). The verbs take the size when made, so the communicator's Prims is left as it was.
    const size_t opBytes = prims.opBytes();
    prims.setOpBytes(std::max(opBytes, static_cast<size_t>(n) * blockBytes));
    std::vector<Coro> strands;
    strands.reserve(2 * static_cast<size_t>(n) - 1);
    for (int s = 1; s < n; ++s) {
      const int q = mod(r + s, n);
      strands.push_back(verbStrand(prims.send(q, in + offset(q), blockBytes, /*ownStrand=*/true)));
    }
    strands.push_back(copyStrand(out + offset(r), in + offset(r), blockBytes, prims.opBytes()));
    for (int s = 1; s < n; ++s) {
      const int q = mod(r - s, n);
      strands.push_back(verbStrand(prims.recv(q, out + offset(q), blockBytes)));
    }
    prims.setOpBytes(opBytes);
    co_return co_await prims::Parallel(std::move(strands));
  }
  prims::Prims::copy(out + offset(r), in + offset(r), blockBytes);
  for (int s = 0; s < n; ++s) {
    const int q = mod(s - r, n);
    if (q == r) continue;
    for (size_t off = 0; off < blockBytes; off += pieceBytes) {
      const size_t len = std::min(pieceBytes, blockBytes - off);
      CFX_CO_TRY(co_await prims.send(q, in + offset(q) + off, len));
      CFX_CO_TRY(co_await prims.recv(q, out + offset(q) + off, len));
    }
  }
  co_return Status();
}

}  // namespace cfx::coll
