// SPDX-License-Identifier: Apache-2.0
// Two-level hierarchical all-gather (collectives layer).
//
// With L ranks on each of H hosts, a flat ring carries n - 1 = HL - 1 blocks over every link that crosses between
// hosts. Instead:
//   1. across hosts, the H ranks of local index l all-gather their blocks on a ring of their own (L such rings at
//      once, one per local index), so each rank holds the blocks of its local index from every host;
//   2. within each host, for every host k in turn, a ring all-gather of the L blocks that came from host k's ranks
//      (local rank p contributes the block of host k's rank p).
// Bytes through each host's network link, each way: L (H - 1) blocks, against HL - 1 for the flat ring (2 hosts of
// 4 ranks: 4 against 7). Step 2 moves (L - 1) H blocks per rank through shared memory.
//
// Pipelining, as in allreduce_hier.cc: every block is cut into segments; in round i the cross strand gathers
// segment i across hosts while the host strand spreads segment i - 1 within the host (prims::Parallel, disjoint
// FIFOs: peers on other hosts versus peers on this one). Needs every host to run the same number of ranks
// (Layout::uniform); otherwise, or with one host or one rank per host, it is the flat ring.
#include <algorithm>

#include "collectives/pipeline.h"
#include "collectives/ring.h"

namespace cfx::coll {

namespace {

struct HierGather {
  const Layout* layout = nullptr;
  int localIndex = 0;
  RankRing crossRing;
  char* out = nullptr;
  size_t count = 0;  // elements per rank's block
  DataType type = DataType::Float32;
  EvenSplit segments{0, 1};

  // Segment `seg` of the block of rank `rank`.
  ElemRange piece(int rank, size_t seg) const { return blockSegment(count, segments, rank, seg); }
};

Coro crossGather(const HierGather& g, size_t seg, prims::Prims& prims) {
  std::vector<ElemRange> blocks;
  for (int rank : g.crossRing.ranks) blocks.push_back(g.piece(rank, seg));
  return ringAllGather(g.crossRing, g.out, std::move(blocks), g.type, prims);
}

Coro hostGather(const HierGather& g, size_t seg, prims::Prims& prims) {
  const int h = g.crossRing.me;
  const RankRing hostRing{g.layout->hostRanks[static_cast<size_t>(h)], g.localIndex};
  for (const std::vector<int>& ranks : g.layout->hostRanks) {
    std::vector<ElemRange> blocks;
    for (int rank : ranks) blocks.push_back(g.piece(rank, seg));
    CFX_CO_TRY(co_await ringAllGather(hostRing, g.out, std::move(blocks), g.type, prims));
  }
  co_return Status();
}

}  // namespace

Coro allGatherHier(const CollArgs& args, Plan plan, prims::Prims& prims) {
  const Layout* layout = plan.layout;
  if (layout == nullptr || layout->nRanks() != prims.nRanks()) {
    co_return Status::error(Errc::InvalidUsage, "hierarchical all-gather needs the communicator's layout of ranks on hosts");
  }
  const int r = prims.rank();
  const int h = layout->hostOf[static_cast<size_t>(r)];
  if (!layout->hierarchical()) {
    CFX_CO_TRY(co_await allGatherRing(args, plan, prims));
    co_return Status();
  }
  HierGather g;
  g.layout = layout;
  g.localIndex = layout->localIndex[static_cast<size_t>(r)];
  for (const std::vector<int>& ranks : layout->hostRanks) g.crossRing.ranks.push_back(ranks[static_cast<size_t>(g.localIndex)]);
  g.crossRing.me = h;
  g.out = static_cast<char*>(args.recvbuff);
  g.count = args.count;
  g.type = args.type;
  const size_t elt = dataTypeSize(args.type);
  prims::Prims::copy(g.out + static_cast<size_t>(r) * args.count * elt, args.sendbuff, args.count * elt);
  // The same segment rule as the hierarchical all-reduce, on the bytes each rank gathers across hosts.
  const size_t k = hierBlockSegments(args.count, elt, layout->nHosts(), prims.sliceBytes());
  g.segments = EvenSplit{args.count, static_cast<int>(k)};
  CFX_CO_TRY(co_await pipelinedRounds(k + 1, [&](size_t round) {
    std::vector<Coro> strands;
    if (pipelineHas(round, 0, g.segments.n)) strands.push_back(crossGather(g, round, prims));
    if (pipelineHas(round, 1, g.segments.n)) strands.push_back(hostGather(g, round - 1, prims));
    return strands;
  }));
  co_return Status();
}

}  // namespace cfx::coll
