// SPDX-License-Identifier: Apache-2.0
// Rings over any ordered set of ranks, and the ring building blocks that the flat ring, the bidirectional ring
// and the hierarchical algorithms share (collectives layer).
//
// A building block runs one ring pattern over a RankRing: the flat algorithms pass the ring of all ranks, the
// bidirectional ring passes it and its reverse (each on half of the buffer, as two strands), the hierarchical
// ones pass the ring of one host's ranks or of the ranks with one local index across hosts. Blocks are addressed
// by ring position, not by rank, so a reversed or partial ring needs no index arithmetic of its own.
//
// The reduction contract of prims.h applies per building block: `op`'s pre-multiplier is applied to this rank's
// own input, `post` once where an element is finished. A caller that chains blocks (hierarchical: a reduce-scatter
// whose results feed an all-reduce) passes the first one an op without its final step and the second one an op
// without its pre-multiplier, so each is applied exactly once per element.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/collective.h"

namespace cfx::coll {

struct RankRing {
  std::vector<int> ranks;  // in ring order: position p sends to position p + 1
  int me = 0;              // this rank's position

  int n() const { return static_cast<int>(ranks.size()); }
  int at(int pos) const { return ranks[static_cast<size_t>(mod(pos, n()))]; }
  int next() const { return at(me + 1); }
  int prev() const { return at(me - 1); }

  // 0, 1, ..., nRanks - 1.
  static RankRing ofAll(int nRanks, int rank) {
    RankRing ring;
    ring.ranks.resize(static_cast<size_t>(nRanks));
    for (int i = 0; i < nRanks; ++i) ring.ranks[static_cast<size_t>(i)] = i;
    ring.me = rank;
    return ring;
  }
  // The same ranks travelled the other way: this rank's next becomes its prev.
  RankRing reversed() const {
    RankRing ring;
    ring.ranks.assign(ranks.rbegin(), ranks.rend());
    ring.me = n() - 1 - me;
    return ring;
  }
};

// `count` elements starting `offset` elements into a buffer.
struct ElemRange {
  size_t offset = 0;
  size_t count = 0;
};

// Segment `seg` of the `block`-th of consecutive blocks of `count` elements, every block cut alike by `segments`
// (the pieces the pipelined hierarchical algorithms move per round).
inline ElemRange blockSegment(size_t count, const EvenSplit& segments, int block, size_t seg) {
  return {static_cast<size_t>(block) * count + segments.begin(static_cast<int>(seg)),
          segments.size(static_cast<int>(seg))};
}

// The op for each building block of a chain (see above): the first applies the pre-multiplier and leaves the final
// step, a middle one does neither, the last applies only the final step. A chain of two has no middle.
inline ReduceOp firstOfChain(ReduceOp op) {
  op.postDivide = false;
  return op;
}
inline ReduceOp middleOfChain(ReduceOp op) {
  op.preMultiply = false;
  op.postDivide = false;
  return op;
}
inline ReduceOp lastOfChain(ReduceOp op) {
  op.preMultiply = false;
  return op;
}

// The blocks of the bidirectional collectives: rank b's block [b * count, (b + 1) * count) cut in two, the first
// halves addressed by position on `ring`, the second halves by position on its reverse.
struct HalvedBlocks {
  std::vector<ElemRange> first;
  std::vector<ElemRange> second;
  size_t half = 0;  // elements in each first half
};
inline HalvedBlocks halvedBlocks(const RankRing& ring, size_t count) {
  const RankRing back = ring.reversed();
  HalvedBlocks b;
  b.half = count / 2;
  for (int p = 0; p < ring.n(); ++p) {
    b.first.push_back({static_cast<size_t>(ring.at(p)) * count, b.half});
    b.second.push_back({static_cast<size_t>(back.at(p)) * count + b.half, count - b.half});
  }
  return b;
}

// The three rings of the 3-level algorithms (Layout::threeLevel(); allreduce_hier3.cc) for one rank at host h,
// device position d (among its host's devices) and index g (among its device's ranks).
struct Hier3Rings {
  RankRing device;  // the ranks of this device; me = g
  RankRing host;    // index g on every device of this host; me = d
  RankRing cross;   // device position d, index g, on every host; me = h
};
Hier3Rings hier3Rings(const Layout& layout, int rank);
// The rank at host `host`, device position `device`, index `index`.
int hier3RankAt(const Layout& layout, int host, int device, int index);

// All-reduce of `count` elements over the ring, `in` to `out` (they may be the same buffer). Every rank of the
// ring holds bit-identical results. Traffic per rank 2 (n - 1) / n * bytes; latency 2 (n - 1) hops per loop of
// n slices.
Coro ringAllReduce(RankRing ring, const char* in, char* out, size_t count, DataType type, const ReduceOp& op,
                   prims::Prims& prims);

// Reduce-scatter over the ring: blocks[p] is the range of `in` that ring position p ends up owning; this rank's
// finished block (post applied) is written to `mine`, which may be in[blocks[me]] itself (in place). Blocks may
// differ in size. Traffic per rank: every block but its own once in and once out.
Coro ringReduceScatter(RankRing ring, const char* in, std::vector<ElemRange> blocks, char* mine, DataType type,
                       const ReduceOp& op, prims::Prims& prims);

// All-gather over the ring in `buf`: blocks[p] is the range that ring position p contributes, and this rank's own
// block must already be in place. Blocks may differ in size.
Coro ringAllGather(RankRing ring, char* buf, std::vector<ElemRange> blocks, DataType type, prims::Prims& prims);

}  // namespace cfx::coll
