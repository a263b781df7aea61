// SPDX-License-Identifier: Apache-2.0
// Three-level hierarchical reduce-scatter (collectives layer).
//
// The 3-level all-gather run backwards (allgather_hier3.cc), so that each slower level carries data already
// summed over the faster ones. With G ranks on each of D devices on each of H hosts, a rank at (h, d, g):
//   1. within its device, for every host k and device position p, reduce-scatters the blocks of device (k, p)'s
//      ranks on its device's ring (index q ends up owning the block of rank (k, p, q)), into scratch slot (k, p):
//      its device's partial of the block of rank (k, p, g);
//   2. within its host, for every host k, reduce-scatters slots (k, 0..D-1) on the ring of index g across the host's
//      devices; position d finishes slot (k, d) in place: its host's partial of the block of rank (k, d, g);
//   3. across hosts, reduce-scatters slots (0..H-1, d) on the ring of position (d, g); host h finishes its own block.
// Blocks each way per rank: (G - 1) H D within a device, (D - 1) H between devices, H - 1 across hosts. Memory: H D
// blocks of scratch per rank (scratch.h: kept for the next op).
//
// Pipelining: every block is cut into segments; in round i the device strand runs step 1 for segment i, the host
// strand step 2 for segment i - 1, the cross strand step 3 for segment i - 2 (disjoint peers, disjoint FIFOs). In
// place (recvbuff == sendbuff + r * count), segment i of this rank's block is written in round i + 2, after step 1
// read it in round i; step 1 of later rounds reads only later segments.
//
// The pre-multiplier is applied once, in step 1, to each rank's own input; the final step once, in step 3. Each
// element is reduced in one fixed order (device, host, cross), so the bits are the same from run to run. Falls back
// to Hier where the layout has no three even levels.
#include <algorithm>
#include <utility>

#include "collectives/pipeline.h"
#include "collectives/ring.h"
#include "collectives/scratch.h"

namespace cfx::coll {

namespace {

struct Hier3Scatter {
  const Layout* layout = nullptr;
  Hier3Rings rings;
  const char* in = nullptr;
  char* out = nullptr;
  char* slots = nullptr;  // H D blocks: slot (k, p) at k D + p
  size_t count = 0;
  DataType type = DataType::Float32;
  EvenSplit segments{0, 1};
  ReduceOp deviceOp;  // pre-multiplies, no final step
  ReduceOp hostOp;    // neither
  ReduceOp crossOp;   // the final step only

  size_t elt() const { return dataTypeSize(type); }
  ElemRange piece(int block, size_t seg) const { return blockSegment(count, segments, block, seg); }
  int slot(int host, int device) const { return host * rings.host.n() + device; }
};

Coro deviceReduceScatter(const Hier3Scatter& s, size_t seg, prims::Prims& prims) {
  for (int k = 0; k < s.layout->nHosts(); ++k) {
    for (int p = 0; p < s.rings.host.n(); ++p) {
      std::vector<ElemRange> blocks;
      for (int q = 0; q < s.rings.device.n(); ++q) blocks.push_back(s.piece(hier3RankAt(*s.layout, k, p, q), seg));
      char* mine = s.slots + s.piece(s.slot(k, p), seg).offset * s.elt();
      CFX_CO_TRY(co_await ringReduceScatter(s.rings.device, s.in, std::move(blocks), mine, s.type, s.deviceOp, prims));
    }
  }
  co_return Status();
}

Coro hostReduceScatter(const Hier3Scatter& s, size_t seg, prims::Prims& prims) {
  for (int k = 0; k < s.layout->nHosts(); ++k) {
    std::vector<ElemRange> blocks;
    for (int p = 0; p < s.rings.host.n(); ++p) blocks.push_back(s.piece(s.slot(k, p), seg));
    char* mine = s.slots + blocks[static_cast<size_t>(s.rings.host.me)].offset * s.elt();
    CFX_CO_TRY(co_await ringReduceScatter(s.rings.host, s.slots, std::move(blocks), mine, s.type, s.hostOp, prims));
  }
  co_return Status();
}

Coro crossReduceScatter(const Hier3Scatter& s, size_t seg, prims::Prims& prims) {
  std::vector<ElemRange> blocks;
  for (int k = 0; k < s.rings.cross.n(); ++k) blocks.push_back(s.piece(s.slot(k, s.rings.host.me), seg));
  char* mine = s.out + s.segments.begin(static_cast<int>(seg)) * s.elt();
  return ringReduceScatter(s.rings.cross, s.slots, std::move(blocks), mine, s.type, s.crossOp, prims);
}

}  // namespace

Coro reduceScatterHier3(const CollArgs& args, Plan plan, prims::Prims& prims) {
  const Layout* layout = plan.layout;
  if (layout == nullptr || layout->nRanks() != prims.nRanks()) {
    co_return Status::error(Errc::InvalidUsage, "3-level reduce-scatter needs the communicator's layout of ranks");
  }
  if (!layout->threeLevel()) {
    CFX_CO_TRY(co_await reduceScatterHier(args, plan, prims));
    co_return Status();
  }
  Hier3Scatter s;
  s.layout = layout;
  s.rings = hier3Rings(*layout, prims.rank());
  const size_t elt = dataTypeSize(args.type);
  const size_t nSlots = static_cast<size_t>(layout->nHosts()) * static_cast<size_t>(s.rings.host.n());
  // Lives in this frame until the last round: later strands read what earlier ones wrote.
  Result<ScratchBlock> slots = takeScratch(nSlots * args.count * elt);
  if (!slots.ok()) {
    co_return Status::error(Errc::SystemError,
                            strprintf("rank %d: %s for a 3-level reduce-scatter; use a smaller count or "
                                      "NCCL_ALGO=reducescatter:ring",
                                      prims.rank(), slots.status().message().c_str()));
  }
  s.in = static_cast<const char*>(args.sendbuff);
  s.out = static_cast<char*>(args.recvbuff);
  s.slots = slots.value().data();
  s.count = args.count;
  s.type = args.type;
  s.deviceOp = firstOfChain(args.op);
  s.hostOp = middleOfChain(args.op);
  s.crossOp = lastOfChain(args.op);
  const size_t k = hierBlockSegments(args.count, elt, layout->nHosts(), prims.sliceBytes());
  s.segments = EvenSplit{args.count, static_cast<int>(k)};
  CFX_CO_TRY(co_await pipelinedRounds(k + 2, [&](size_t round) {
    std::vector<Coro> strands;
    if (pipelineHas(round, 0, s.segments.n)) strands.push_back(deviceReduceScatter(s, round, prims));
    if (pipelineHas(round, 1, s.segments.n)) strands.push_back(hostReduceScatter(s, round - 1, prims));
    if (pipelineHas(round, 2, s.segments.n)) strands.push_back(crossReduceScatter(s, round - 2, prims));
    return strands;
  }));
  co_return Status();
}

}  // namespace cfx::coll
