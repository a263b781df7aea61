// SPDX-License-Identifier: Apache-2.0
// Three-level hierarchical all-gather (collectives layer).
//
// With G ranks on each of D devices on each of H hosts (Layout::threeLevel()), a rank at (h, d, g):
//   1. across hosts, gathers the blocks of position (d, g) from every host, on a ring of the H ranks there;
//   2. within its host, for every host k in turn, gathers the blocks of host k's ranks of index g, on a ring of the
//      D ranks of index g of its host (device position p contributes the block of rank (k, p, g));
//   3. within its device, for every host k and device position p in turn, gathers the blocks of the ranks of
//      device (k, p), on a ring of its device's G ranks (index q contributes the block of rank (k, p, q)).
// Blocks each way per rank: H - 1 across hosts (as Hier), (D - 1) H over the links between devices (Hier with the
// host as its upper level: (DG - 1) H on one ring of all the host's ranks, whose device-crossing edges carry them
// all), (G - 1) H D within a device. Latency: (H - 1) + H (D - 1) + H D (G - 1) hops per loop.
//
// Pipelining: every block is cut into segments; in round i the cross strand runs step 1 for segment i, the host
// strand step 2 for segment i - 1, the device strand step 3 for segment i - 2 (prims::Parallel: the three talk to
// disjoint peers, so never share a FIFO). Falls back to Hier where the layout has no three even levels.
#include <algorithm>
#include <utility>

#include "collectives/pipeline.h"
#include "collectives/ring.h"

namespace cfx::coll {

namespace {

struct Hier3Gather {
  const Layout* layout = nullptr;
  Hier3Rings rings;
  char* out = nullptr;
  size_t count = 0;  // elements per rank's block
  DataType type = DataType::Float32;
  EvenSplit segments{0, 1};

  ElemRange piece(int rank, size_t seg) const { return blockSegment(count, segments, rank, seg); }
};

Coro crossGather(const Hier3Gather& a, size_t seg, prims::Prims& prims) {
  std::vector<ElemRange> blocks;
  for (int rank : a.rings.cross.ranks) blocks.push_back(a.piece(rank, seg));
  return ringAllGather(a.rings.cross, a.out, std::move(blocks), a.type, prims);
}

Coro hostGather(const Hier3Gather& a, size_t seg, prims::Prims& prims) {
  const int g = a.rings.device.me;
  for (int k = 0; k < a.layout->nHosts(); ++k) {
    std::vector<ElemRange> blocks;
    for (int p = 0; p < a.rings.host.n(); ++p) blocks.push_back(a.piece(hier3RankAt(*a.layout, k, p, g), seg));
    CFX_CO_TRY(co_await ringAllGather(a.rings.host, a.out, std::move(blocks), a.type, prims));
  }
  co_return Status();
}

Coro deviceGather(const Hier3Gather& a, size_t seg, prims::Prims& prims) {
  for (int k = 0; k < a.layout->nHosts(); ++k) {
    for (int p = 0; p < a.rings.host.n(); ++p) {
      std::vector<ElemRange> blocks;
      for (int q = 0; q < a.rings.device.n(); ++q) blocks.push_back(a.piece(hier3RankAt(*a.layout, k, p, q), seg));
      CFX_CO_TRY(co_await ringAllGather(a.rings.device, a.out, std::move(blocks), a.type, prims));
    }
  }
  co_return Status();
}

}  // namespace

Coro allGatherHier3(const CollArgs& args, Plan plan, prims::Prims& prims) {
  const Layout* layout = plan.layout;
  if (layout == nullptr || layout->nRanks() != prims.nRanks()) {
    co_return Status::error(Errc::InvalidUsage, "3-level all-gather needs the communicator's layout of ranks");
  }
  if (!layout->threeLevel()) {
    CFX_CO_TRY(co_await allGatherHier(args, plan, prims));
    co_return Status();
  }
  Hier3Gather a;
  a.layout = layout;
  a.rings = hier3Rings(*layout, prims.rank());
  a.out = static_cast<char*>(args.recvbuff);
  a.count = args.count;
  a.type = args.type;
  const size_t elt = dataTypeSize(args.type);
  prims::Prims::copy(a.out + static_cast<size_t>(prims.rank()) * args.count * elt, args.sendbuff, args.count * elt);
  // Hier's segment rule, on the bytes each rank gathers across hosts; the same on every rank.
  const size_t k = hierBlockSegments(args.count, elt, layout->nHosts(), prims.sliceBytes());
  a.segments = EvenSplit{args.count, static_cast<int>(k)};
  CFX_CO_TRY(co_await pipelinedRounds(k + 2, [&](size_t round) {
    std::vector<Coro> strands;
    if (pipelineHas(round, 0, a.segments.n)) strands.push_back(crossGather(a, round, prims));
    if (pipelineHas(round, 1, a.segments.n)) strands.push_back(hostGather(a, round - 1, prims));
    if (pipelineHas(round, 2, a.segments.n)) strands.push_back(deviceGather(a, round - 2, prims));
    return strands;
  }));
  co_return Status();
}

}  // namespace cfx::coll
