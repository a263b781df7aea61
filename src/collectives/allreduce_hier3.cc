// SPDX-License-Identifier: Apache-2.0
// Three-level hierarchical all-reduce (collectives layer).
//
// Machines nest: dies share a GPU package (or cores a NUMA node), devices share a host, hosts share a network,
// and each level's links are slower than the one inside it. With G ranks on each of D devices on each of H hosts,
// the buffer is cut into G parts, each part into D subparts, and:
//   1. within each device, a ring reduce-scatter leaves rank g of the device holding part g summed over its device;
//   2. within each host, the D ranks of index g (one per device) reduce-scatter part g on a ring of their own, so
//      rank (d, g) holds subpart (g, d) summed over its host;
//   3. across hosts, the H ranks of position (d, g) all-reduce subpart (g, d) on a ring (D G rings run at once);
//   4. and 5. the all-gathers of steps 2 and 1, in reverse.
// Bytes each way per rank: (G - 1) / G * bytes twice on the device links, (D - 1) / (D G) * bytes twice on the links
// between devices, 2 (H - 1) / (H D G) * bytes across hosts. Against the 2-level Hier with hosts as its upper level
// (every rank of a host on one ring), a host's device links carry 2 (D - 1) / D * bytes per direction instead of
// 2 (L - 1) / L with L = D G (1 against 1.5 for 2 devices of 2 ranks); against Hier with devices as "hosts", the
// network carries 2 (H - 1) / H * bytes / G per rank instead of 2 (HD - 1) / (HD) * bytes / G. Latency: 2 (G - 1) +
// 2 (D - 1) + 2 (H - 1) hops per loop.
//
// Pipelining, as in allreduce_hier.cc with one more strand: segment s runs step 1 in round s, step 2 in round
// s + 1, step 3 in s + 2, step 4 in s + 3 and step 5 in s + 4. In round i the device strand runs step 5 of segment
// i - 4 then step 1 of segment i, the host strand step 4 of i - 3 then step 2 of i - 1, and the cross strand step
// 3 of i - 2. Each strand talks only to its own peers (same device; same host, other device; other host), so the
// strands never share a FIFO, and every rank runs the same rounds in the same order. The slowest level hides the
// others: about its own time plus a segment's worth of the others'.
//
// The op's pre-multiplier is applied once, in step 1, to each rank's own input; its final step (integer average's
// division) once, in step 3. Each element is reduced in one fixed order (device ring, host ring, cross ring) and
// every other rank receives those bytes, so all ranks hold the same bits.
//
// Needs Layout::threeLevel(); otherwise it runs Hier (which is the ring where there is no host level either).
#include <algorithm>
#include <utility>

#include "collectives/pipeline.h"
#include "collectives/ring.h"

namespace cfx::coll {

namespace {

struct Hier3Op {
  RankRing deviceRing;  // the ranks of this device
  RankRing hostRing;    // this index on every device of this host
  RankRing crossRing;   // this (device, index) on every host
  const char* in = nullptr;
  char* out = nullptr;
  DataType type = DataType::Float32;
  EvenSplit segments{0, 1};
  ReduceOp deviceOp;  // pre-multiplies, no final step
  ReduceOp hostOp;    // neither
  ReduceOp crossOp;   // the final step only

  size_t elt() const { return dataTypeSize(type); }
  // Segment `seg` cut into one part per device rank, as ranges of the whole buffer.
  std::vector<ElemRange> parts(size_t seg) const {
    const EvenSplit split{segments.size(static_cast<int>(seg)), deviceRing.n()};
    std::vector<ElemRange> blocks(static_cast<size_t>(deviceRing.n()));
    for (int p = 0; p < deviceRing.n(); ++p) {
      blocks[static_cast<size_t>(p)] = {segments.begin(static_cast<int>(seg)) + split.begin(p), split.size(p)};
    }
    return blocks;
  }
  // This rank's part of segment `seg` cut into one subpart per device of the host.
  std::vector<ElemRange> subparts(size_t seg) const {
    const ElemRange part = parts(seg)[static_cast<size_t>(deviceRing.me)];
    const EvenSplit split{part.count, hostRing.n()};
    std::vector<ElemRange> blocks(static_cast<size_t>(hostRing.n()));
    for (int p = 0; p < hostRing.n(); ++p)
      blocks[static_cast<size_t>(p)] = {part.offset + split.begin(p), split.size(p)};
    return blocks;
  }
  char* at(ElemRange range) const { return out + range.offset * elt(); }
};

Coro deviceReduceScatter(const Hier3Op& op, size_t seg, prims::Prims& prims) {
  std::vector<ElemRange> blocks = op.parts(seg);
  char* mine = op.at(blocks[static_cast<size_t>(op.deviceRing.me)]);
  return ringReduceScatter(op.deviceRing, op.in, std::move(blocks), mine, op.type, op.deviceOp, prims);
}

Coro hostReduceScatter(const Hier3Op& op, size_t seg, prims::Prims& prims) {
  std::vector<ElemRange> blocks = op.subparts(seg);
  char* mine = op.at(blocks[static_cast<size_t>(op.hostRing.me)]);
  return ringReduceScatter(op.hostRing, op.out, std::move(blocks), mine, op.type, op.hostOp, prims);
}

Coro crossAllReduce(const Hier3Op& op, size_t seg, prims::Prims& prims) {
  const ElemRange sub = op.subparts(seg)[static_cast<size_t>(op.hostRing.me)];
  return ringAllReduce(op.crossRing, op.at(sub), op.at(sub), sub.count, op.type, op.crossOp, prims);
}

Coro hostAllGather(const Hier3Op& op, size_t seg, prims::Prims& prims) {
  return ringAllGather(op.hostRing, op.out, op.subparts(seg), op.type, prims);
}

Coro deviceAllGather(const Hier3Op& op, size_t seg, prims::Prims& prims) {
  return ringAllGather(op.deviceRing, op.out, op.parts(seg), op.type, prims);
}

bool has(const Hier3Op& op, size_t round, size_t stage) { return pipelineHas(round, stage, op.segments.n); }

Coro deviceStrand(const Hier3Op& op, size_t round, prims::Prims& prims) {
  if (has(op, round, 4)) CFX_CO_TRY(co_await deviceAllGather(op, round - 4, prims));
  if (has(op, round, 0)) CFX_CO_TRY(co_await deviceReduceScatter(op, round, prims));
  co_return Status();
}

Coro hostStrand(const Hier3Op& op, size_t round, prims::Prims& prims) {
  if (has(op, round, 3)) CFX_CO_TRY(co_await hostAllGather(op, round - 3, prims));
  if (has(op, round, 1)) CFX_CO_TRY(co_await hostReduceScatter(op, round - 1, prims));
  co_return Status();
}

}  // namespace

int hier3RankAt(const Layout& layout, int host, int device, int index) {
  const int dev = layout.hostDevices[static_cast<size_t>(host)][static_cast<size_t>(device)];
  return layout.deviceRanks[static_cast<size_t>(dev)][static_cast<size_t>(index)];
}

Hier3Rings hier3Rings(const Layout& layout, int rank) {
  const int h = layout.hostOf[static_cast<size_t>(rank)];
  const int dev = layout.deviceOf[static_cast<size_t>(rank)];
  const int g = layout.deviceIndex[static_cast<size_t>(rank)];
  const std::vector<int>& devices = layout.hostDevices[static_cast<size_t>(h)];
  const int d = static_cast<int>(std::find(devices.begin(), devices.end(), dev) - devices.begin());
  Hier3Rings rings;
  rings.device = RankRing{layout.deviceRanks[static_cast<size_t>(dev)], g};
  for (int p = 0; p < static_cast<int>(devices.size()); ++p) rings.host.ranks.push_back(hier3RankAt(layout, h, p, g));
  rings.host.me = d;
  for (int k = 0; k < layout.nHosts(); ++k) rings.cross.ranks.push_back(hier3RankAt(layout, k, d, g));
  rings.cross.me = h;
  return rings;
}

Coro allReduceHier3(const CollArgs& args, Plan plan, prims::Prims& prims) {
  const Layout* layout = plan.layout;
  if (layout == nullptr || layout->nRanks() != prims.nRanks()) {
    co_return Status::error(Errc::InvalidUsage, "3-level all-reduce needs the communicator's layout of ranks");
  }
  if (!layout->threeLevel()) {
    CFX_CO_TRY(co_await allReduceHier(args, plan, prims));
    co_return Status();
  }
  Hier3Rings rings = hier3Rings(*layout, prims.rank());
  Hier3Op op;
  op.deviceRing = std::move(rings.device);
  op.hostRing = std::move(rings.host);
  op.crossRing = std::move(rings.cross);
  op.in = static_cast<const char*>(args.sendbuff);
  op.out = static_cast<char*>(args.recvbuff);
  op.type = args.type;
  op.deviceOp = firstOfChain(args.op);
  op.hostOp = middleOfChain(args.op);
  op.crossOp = lastOfChain(args.op);
  // Every rank derives the same segment count from the op alone.
  // (Hier's rule on the device level: its parts are the largest messages.)
  const size_t k = hierSegments(args.count * dataTypeSize(args.type), op.deviceRing.n(), prims.sliceBytes());
  op.segments = EvenSplit{args.count, static_cast<int>(k)};

  CFX_CO_TRY(co_await pipelinedRounds(k + 4, [&](size_t round) {
    std::vector<Coro> strands;
    if (has(op, round, 0) || has(op, round, 4)) strands.push_back(deviceStrand(op, round, prims));
    if (has(op, round, 1) || has(op, round, 3)) strands.push_back(hostStrand(op, round, prims));
    if (has(op, round, 2)) strands.push_back(crossAllReduce(op, round - 2, prims));
    return strands;
  }));
  co_return Status();
}

}  // namespace cfx::coll
