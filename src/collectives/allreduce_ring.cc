// SPDX-License-Identifier: Apache-2.0
// Ring all-reduce = reduce-scatter then all-gather around one ring (collectives layer).
// ringAllReduce runs it over any RankRing (ring.h); allReduceRing over all ranks in rank order.
//
// The buffer is processed in loops of n chunks of one FIFO slice each, so a verb never needs more FIFO
// room than a neighbour can always offer. Within a loop, ring position r first sends its own chunk r (pre-multiplied), then for
// n - 2 steps receives chunk (r - s) from r - 1, adds its own contribution and passes it on; at step n - 1
// it receives chunk (r + 1), which now holds every rank's contribution, finishes it (post-op) into its
// recvbuff and sends it on; the all-gather half forwards finished chunks around the ring for n - 2 steps,
// and the last step only receives.
//
//   step:   0        1..n-2              n-1                  n..2n-3          2n-2
//   verb:   sendPre  recvReduceSend      recvReduceCopySend   recvCopySend     recv
//
// Each element is reduced in the same order on the same rank, and every other rank receives those bytes,
// so all ranks hold bit-identical results. Traffic per rank: 2 (n - 1) / n * bytes; latency 2 (n - 1) hops
// per loop, which is why the planner prefers recursive doubling for small messages. A loop is n chunks of
// Prims::ringChunkSlices() slices (1 except on long fat paths), the same on every rank.
#include "collectives/ring.h"

namespace cfx::coll {

Coro ringAllReduce(RankRing ring, const char* in, char* out, size_t count, DataType type, const ReduceOp& op,
                   prims::Prims& prims) {
  const int n = ring.n();
  const int r = ring.me;
  const size_t elt = dataTypeSize(type);
  if (n == 1) {
    prims::Prims::prepare(out, in, count, op, /*post=*/true);
    co_return Status();
  }
  const int next = ring.next();
  const int prev = ring.prev();
  // A chunk of one slice: the opening sendPre must leave a free slot in the neighbour's FIFO (FIFOs are
  // only promised two), or every rank's first receive-and-send waits for an outgoing slot that never frees.
  // Larger buffers take several loops, each paying the ring's round trip once; on a long fat path, where every
  // FIFO is deeper, a chunk spans ringChunkSlices() slices, one less than the shallowest FIFO.
  const size_t chunkElems =
      std::max<size_t>(1, prims.sliceBytes() * static_cast<size_t>(prims.ringChunkSlices()) / elt);
  const size_t loopElems = chunkElems * static_cast<size_t>(n);
  // The loops share the buffer evenly rather than leaving a short last one: a loop's steps pipeline their slices
  // only as far as a chunk has slices, so a short tail (8 MiB per step after 56 MiB ones, for a 256 MiB all-reduce
  // on 4 ranks over 50 ms) pays the ring's full chain of hops for a fraction of the bytes.
  const size_t loops = (count + loopElems - 1) / loopElems;
  auto loopBegin = [&](size_t i) { return count / loops * i + std::min(i, count % loops); };
  for (size_t loop = 0; loop < loops; ++loop) {
    const size_t base = loopBegin(loop);
    const EvenSplit split{loopBegin(loop + 1) - base, n};
    auto at = [&](const char* p, int chunk) { return p + (base + split.begin(chunk)) * elt; };
    auto atOut = [&](int chunk) { return out + (base + split.begin(chunk)) * elt; };

    int c = r;
    CFX_CO_TRY(co_await prims.sendPre(next, at(in, c), split.size(c), op));
    for (int s = 1; s < n - 1; ++s) {
      c = mod(r - s, n);
      CFX_CO_TRY(co_await prims.recvReduceSend(prev, next, at(in, c), split.size(c), op));
    }
    c = mod(r + 1, n);
    CFX_CO_TRY(co_await prims.recvReduceCopySend(prev, next, at(in, c), atOut(c), split.size(c), op,
                                                 /*post=*/true));
    for (int s = 1; s < n - 1; ++s) {
      c = mod(r + 1 - s, n);
      CFX_CO_TRY(co_await prims.recvCopySend(prev, next, atOut(c), split.size(c) * elt));
    }
    c = mod(r + 2, n);
    CFX_CO_TRY(co_await prims.recv(prev, atOut(c), split.size(c) * elt));
  }
  co_return Status();
}

Coro allReduceRing(const CollArgs& args, Plan, prims::Prims& prims) {
  return ringAllReduce(RankRing::ofAll(prims.nRanks(), prims.rank()), static_cast<const char*>(args.sendbuff),
                       static_cast<char*>(args.recvbuff), args.count, args.type, args.op, prims);
}

}  // namespace cfx::coll
